"""Benchmark of the runtime watcher on a GPU: what it reports and what it costs.

1. The uncorrected fused inverse-RoPE + FP8 quant kernel (fixtures/rope_fp8_uncorrected.py) and
   the corrected one (jitguard.kernels.rope_fp8) over the same serving-like stream of num_tokens
   values (decode batches 1..256, prefill chunks up to 8192), one ``mark_step`` per batch, under
   ``jitguard.watch()``: every compile with its reason, and the number of variants of each.
2. Hook overhead on cache-hit launches: 20k launches of the corrected kernel (warm cache) timed
   on the host, without and with an active watcher, alternating rounds; median per-launch time.
3. jitguard's own work per compile event (``overhead_ms`` of every event: decoding the key, the
   diff against the closest previous variant, the launching frame).

    python bench/bench_watch.py [--out DIR] [--steps 300] [--launches 20000]

Writes DIR/bench_watch.json (machine, versions, date, every figure), the two traces and the text
reports. Needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import random
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _load_fixture():
    path = ROOT / "fixtures" / "rope_fp8_uncorrected.py"
    spec = importlib.util.spec_from_file_location("rope_fp8_uncorrected", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["rope_fp8_uncorrected"] = mod
    spec.loader.exec_module(mod)
    return mod


def _import_kernels():
    """jitguard.kernels, even where the editable install failed (PYTHONPATH=repo fallback)."""
    try:
        from jitguard.kernels import rope_fp8
    except ImportError:
        spec = importlib.util.spec_from_file_location(
            "jitguard.kernels", ROOT / "kernels" / "__init__.py", submodule_search_locations=[str(ROOT / "kernels")])
        pkg = importlib.util.module_from_spec(spec)
        sys.modules["jitguard.kernels"] = pkg
        spec.loader.exec_module(pkg)
        from jitguard.kernels import rope_fp8
    return rope_fp8


def serving_stream(steps: int, seed: int) -> list[int]:
    """num_tokens per step: mostly decode batches (1..256 running requests), some prefill chunks."""
    rng = random.Random(seed)
    out = []
    for _ in range(steps):
        r = rng.random()
        if r < 0.70:
            out.append(rng.randint(1, 256))
        elif r < 0.95:
            out.append(rng.randint(257, 2048))
        else:
            out.append(rng.choice([4096, 8192, rng.randint(2049, 8192)]))
    return out


def run_stream(fn, stream, make_inputs, jitguard, trace_path):
    import torch

    with jitguard.watch(mode="record", trace=trace_path) as w:
        for step, n in enumerate(stream):
            jitguard.mark_step(step)
            fn(*make_inputs(n))
        torch.cuda.synchronize()
    return w


def time_launches(launch, n: int) -> float:
    """Host seconds per launch over n launches (synchronized at the end)."""
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        launch()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--launches", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=20261129)
    args = ap.parse_args()

    import torch
    import triton

    import jitguard
    rope_fp8 = _import_kernels()
    from jitguard.report.recompiles import render_text
    from jitguard.runtime.trace import load_trace

    if not torch.cuda.is_available():
        print("bench_watch: needs a CUDA GPU", file=sys.stderr)
        return 2
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fixture = _load_fixture()
    dev = "cuda"
    n_groups, hpg, nope, rope = 2, 4, 448, 64
    d = nope + rope
    max_pos = 16384
    cos_sin = torch.randn(max_pos, rope, device=dev, dtype=torch.float32)
    g = torch.Generator(device=dev).manual_seed(args.seed)
    big_o = torch.randn(8192, n_groups * hpg, d, device=dev, dtype=torch.bfloat16, generator=g)
    big_pos = torch.randint(0, max_pos, (8192,), device=dev, generator=g)

    def make_inputs(n):
        return (big_o[:n], big_pos[:n], cos_sin, n_groups, hpg, nope, rope)

    stream = serving_stream(args.steps, args.seed)
    results: dict = {
        "benchmark": "bench_watch",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"gpu": torch.cuda.get_device_name(0), "host": platform.node(),
                    "cpu": platform.processor() or platform.machine(), "python": platform.python_version()},
        "versions": {"triton": triton.__version__, "torch": torch.__version__, "jitguard": jitguard.__version__},
        "stream": {"steps": len(stream), "distinct_num_tokens": len(set(stream)),
                   "min": min(stream), "max": max(stream), "seed": args.seed},
        "kernels": {},
    }

    # 1. what the watcher reports over the serving stream
    reports = {}
    for label, fn in (("uncorrected", fixture.fused_inv_rope_fp8_quant),
                      ("corrected", rope_fp8.fused_inv_rope_fp8_quant)):
        trace_path = out / f"bench_watch_trace_{label}.json"
        t0 = time.perf_counter()
        w = run_stream(fn, stream, make_inputs, jitguard, str(trace_path))
        wall = time.perf_counter() - t0
        trace = load_trace(trace_path)
        compiles = trace.compiles()
        explained = [e for e in compiles if e.variant >= 2]
        reports[label] = render_text(trace, cwd=str(ROOT))
        (out / f"bench_watch_report_{label}.txt").write_text(reports[label])
        results["kernels"][label] = {
            "compiles": len(compiles),
            "recompiles": len(explained),
            "recompiles_with_reason": sum(1 for e in explained if e.diff and e.remedy),
            "compile_ms": [e.compile_ms for e in compiles],
            "steps_with_compiles": [e.step for e in compiles],
            "reasons": [" ; ".join(x.what for x in e.diff) for e in explained],
            "stream_wall_s": round(wall, 3),
            "findings": [f.message for f in w.findings()],
        }
        print(f"== {label}: {len(compiles)} compiles over {len(stream)} steps ==")
        print(reports[label])

    # 2. hook overhead on cache-hit launches
    o, pos = big_o[:64], big_pos[:64]

    def launch():
        rope_fp8.fused_inv_rope_fp8_quant(o, pos, cos_sin, n_groups, hpg, nope, rope)

    for _ in range(200):
        launch()  # warm: every launch below is a cache hit
    without, with_ = [], []
    for _ in range(args.rounds):
        without.append(time_launches(launch, args.launches))
        with jitguard.watch(mode="raise", max_compiles=0) as w:
            with_.append(time_launches(launch, args.launches))
        assert not w.events, "a cache-hit launch compiled"
    med_without, med_with = statistics.median(without), statistics.median(with_)
    results["launch_overhead"] = {
        "launches_per_round": args.launches,
        "rounds": args.rounds,
        "us_per_launch_without": [round(x * 1e6, 3) for x in without],
        "us_per_launch_with": [round(x * 1e6, 3) for x in with_],
        "median_us_without": round(med_without * 1e6, 3),
        "median_us_with": round(med_with * 1e6, 3),
        "overhead_pct": round((med_with / med_without - 1) * 100, 3),
        "limit_pct": 2.0,
    }

    # 3. jitguard's own work per compile event
    own = [e.overhead_ms for label in ("uncorrected", "corrected")
           for e in load_trace(out / f"bench_watch_trace_{label}.json").events if e.overhead_ms is not None]
    results["per_event_overhead_ms"] = {
        "events": len(own),
        "median": round(statistics.median(own), 4) if own else None,
        "max": round(max(own), 4) if own else None,
        "limit_ms": 1.0,
    }
    lo = results["launch_overhead"]
    print(f"cache-hit launch: {lo['median_us_without']} us without, {lo['median_us_with']} us with the "
          f"watcher ({lo['overhead_pct']:+.2f}%); jitguard per compile event: median "
          f"{results['per_event_overhead_ms']['median']} ms, max {results['per_event_overhead_ms']['max']} ms")
    (out / "bench_watch.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
