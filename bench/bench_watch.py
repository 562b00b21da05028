"""Benchmark of the runtime watcher on a GPU: what it reports and what it costs.

1. The uncorrected fused inverse-RoPE + FP8 quant kernel (fixtures/rope_fp8_uncorrected.py) and
   the corrected one (jitguard.kernels.rope_fp8) over the same serving-like stream of num_tokens
   values (decode batches 1..256, prefill chunks up to 8192), one ``mark_step`` per batch, under
   ``jitguard.watch()``: every compile with its reason, and the number of variants of each.
2. Hook overhead on cache-hit launches of a trivial kernel launched directly (``tiny[(1,)](x, n,
   BLOCK=128)``: a few µs of host work per launch, so 2% of it is ~0.1 µs; a wrapper such as the
   RoPE one costs ~56 µs a launch and its ±5% round-to-round noise hides anything near 2%).
   Rounds of N launches interleaved ABAB... (without, with, without, with, ...), 40 rounds of each
   by default; reports the median per-launch time of each arm, the spread of the rounds (min, max,
   interquartile range), and the median of the paired differences (round 2i+1 against 2i).
   Structurally: a profiler counts the Python calls one cache-hit launch makes with the watcher
   active, and how many of them are in jitguard (expected 0: Triton calls the hooks only on a
   miss); a ``max_compiles=0`` raise-mode watch proves none of the timed launches compiled.
3. jitguard's own work per compile event (``overhead_ms`` of every event: decoding the key, the
   diff against the closest previous variant, the launching frame).

    python bench/bench_watch.py [--out DIR] [--steps 300] [--launches 20000] [--rounds 40]
    python bench/bench_watch.py --dry-run     # no GPU: part 2 only, stand-in driver (see below)

Writes DIR/bench_watch.json (machine, versions, date, every figure), the two traces and the text
reports. Needs a CUDA GPU. ``--dry-run`` runs part 2 on a CPU through the tests' stand-in sm_90
driver (Triton's real launch path, a launcher that does nothing) and writes
DIR/bench_watch_dryrun_cpu.json: it proves the script and the structural check; its timings are a
CPU's, not a GPU launch's.
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


def _tiny_body(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1.0, mask=i < n)


def _tiny_kernel():
    # ``tl`` must be a module global: Triton before 3.4 resolves a kernel's names in its module
    # (a function-local import is not found), and the script imports Triton only when it runs.
    global tl
    import triton
    import triton.language as tl

    return triton.jit(_tiny_body)


def time_launches(launch, n: int, sync) -> float:
    """Host seconds per launch over n launches (synchronized before and after)."""
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        launch()
    sync()
    return (time.perf_counter() - t0) / n


def _quartiles(xs):
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def launch_overhead(launch, sync, *, launches: int, rounds: int) -> dict:
    """Cache-hit launch cost without and with an active watcher: rounds interleaved ABAB..., the
    medians, the spread of the rounds, the paired differences, and the structural check."""
    import jitguard

    jg_dir = os.path.dirname(os.path.abspath(jitguard.__file__)) + os.sep
    # the CPU stand-in driver (jitguard/testing.py) plays Triton's driver: its calls are Triton's
    # launch path, not the watcher's
    driver_file = os.path.join(jg_dir, "testing.py")

    def count_calls(n):
        calls = {"all": 0, "jitguard": 0}

        def prof(frame, event, arg):
            if event in ("call", "c_call"):
                calls["all"] += 1
                name = frame.f_code.co_filename
                if name.startswith(jg_dir) and name != driver_file:
                    calls["jitguard"] += 1

        sys.setprofile(prof)
        try:
            for _ in range(n):
                launch()
        finally:
            sys.setprofile(None)
        return {k: v / n for k, v in calls.items()}

    for _ in range(max(200, launches // 10)):
        launch()  # warm: every launch below is a cache hit
    time_launches(launch, launches, sync)  # one untimed round of each arm first
    with jitguard.watch(mode="raise", max_compiles=0):
        time_launches(launch, launches, sync)
    without, with_ = [], []
    for _ in range(rounds):  # A B A B ...
        without.append(time_launches(launch, launches, sync))
        with jitguard.watch(mode="raise", max_compiles=0) as w:  # a compile here would raise
            with_.append(time_launches(launch, launches, sync))
        assert not w.events, "a cache-hit launch compiled"
    calls_without = count_calls(1000)
    with jitguard.watch(mode="raise", max_compiles=0):
        calls_with = count_calls(1000)
    med_a, med_b = statistics.median(without), statistics.median(with_)
    paired = [(b / a - 1) * 100 for a, b in zip(without, with_)]
    qa, qb, qp = _quartiles(without), _quartiles(with_), _quartiles(paired)
    us = lambda x: round(x * 1e6, 4)  # noqa: E731
    return {
        "launch": "tiny[(1,)](x, n, BLOCK=128): a trivial kernel launched directly, cache hit",
        "order": "interleaved: without, with, without, with, ... (one untimed round of each first)",
        "launches_per_round": launches,
        "rounds_per_arm": rounds,
        "us_per_launch_without": [us(x) for x in without],
        "us_per_launch_with": [us(x) for x in with_],
        "median_us_without": us(med_a),
        "median_us_with": us(med_b),
        "spread_us_without": {"min": us(min(without)), "q1": us(qa[0]), "q3": us(qa[1]), "max": us(max(without))},
        "spread_us_with": {"min": us(min(with_)), "q1": us(qb[0]), "q3": us(qb[1]), "max": us(max(with_))},
        "overhead_pct_of_medians": round((med_b / med_a - 1) * 100, 3),
        "paired_overhead_pct": {"median": round(statistics.median(paired), 3), "q1": round(qp[0], 3),
                                "q3": round(qp[1], 3), "min": round(min(paired), 3), "max": round(max(paired), 3)},
        "python_calls_per_launch_without": calls_without["all"],
        "python_calls_per_launch_with": calls_with["all"],
        "jitguard_calls_per_launch_with": calls_with["jitguard"],
        "limit_pct": 2.0,
    }


def _print_overhead(lo: dict) -> None:
    p = lo["paired_overhead_pct"]
    sa, sb = lo["spread_us_without"], lo["spread_us_with"]
    print(f"cache-hit launch, {lo['rounds_per_arm']} rounds x {lo['launches_per_round']} launches per arm, "
          f"interleaved: median {lo['median_us_without']} us without, {lo['median_us_with']} us with the watcher "
          f"({lo['overhead_pct_of_medians']:+.2f}%); rounds {sa['min']}-{sa['max']} us (IQR {sa['q1']}-{sa['q3']}) "
          f"without, {sb['min']}-{sb['max']} us (IQR {sb['q1']}-{sb['q3']}) with; paired difference median "
          f"{p['median']:+.2f}% (IQR {p['q1']:+.2f}% to {p['q3']:+.2f}%); Python calls per launch "
          f"{lo['python_calls_per_launch_without']} without, {lo['python_calls_per_launch_with']} with, "
          f"{lo['jitguard_calls_per_launch_with']} of them in jitguard")


def dry_run(args) -> int:
    """Part 2 on a CPU: Triton's real launch path under the tests' stand-in sm_90 driver."""
    import tempfile

    import triton

    import jitguard

    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="jitguard-bench-"))
    sys.path.insert(0, str(ROOT / "tests"))
    from runtime_helpers import FakeTensor, dtype, stand_in_driver

    tiny = _tiny_kernel()
    with stand_in_driver():
        x = FakeTensor(16 * 4096, dtype("float32"))
        lo = launch_overhead(lambda: tiny[(1,)](x, 100, BLOCK=128), lambda: None,
                             launches=args.launches, rounds=args.rounds)
    results = {
        "benchmark": "bench_watch --dry-run",
        "label": "CPU DRY RUN: stand-in sm_90 driver, no-op launcher; proves the script and the "
                 "structural check; the timings are a CPU's host path, not a GPU launch",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "host": platform.node(), "python": platform.python_version(),
                    "load_avg_1m": os.getloadavg()[0]},
        "versions": {"triton": triton.__version__, "jitguard": jitguard.__version__},
        "launch_overhead": lo,
    }
    print(results["label"])
    _print_overhead(lo)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_watch_dryrun_cpu.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--launches", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=40, help="timed rounds per arm (interleaved)")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: the launch-overhead part only, on the CPU with a stand-in driver")
    args = ap.parse_args()
    if args.dry_run:
        return dry_run(args)

    import torch
    import triton

    import jitguard
    rope_fp8 = _import_kernels()
    from jitguard.runtime.text import render_trace as render_text
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

    # 2. hook overhead on cache-hit launches of a trivial kernel launched directly
    tiny = _tiny_kernel()
    x = torch.zeros(4096, device=dev, dtype=torch.float32)
    n_tiny = 100
    results["launch_overhead"] = launch_overhead(lambda: tiny[(1,)](x, n_tiny, BLOCK=128),
                                                 torch.cuda.synchronize,
                                                 launches=args.launches, rounds=args.rounds)

    # 3. jitguard's own work per compile event
    own = [e.overhead_ms for label in ("uncorrected", "corrected")
           for e in load_trace(out / f"bench_watch_trace_{label}.json").events if e.overhead_ms is not None]
    results["per_event_overhead_ms"] = {
        "events": len(own),
        "median": round(statistics.median(own), 4) if own else None,
        "max": round(max(own), 4) if own else None,
        "limit_ms": 1.0,
    }
    _print_overhead(results["launch_overhead"])
    print(f"jitguard per compile event: median {results['per_event_overhead_ms']['median']} ms, "
          f"max {results['per_event_overhead_ms']['max']} ms")
    (out / "bench_watch.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
