"""Benchmark: fused inverse RoPE + FP8 block quantization on one GPU, against the HBM floor.

    python bench/bench_rope_fp8.py [--out bench/results/rope_fp8_h200.json] [--quick]
    python bench/bench_rope_fp8.py --no-sweep # the main table with rope_fp8.CONFIG, peers included
    python bench/bench_rope_fp8.py --ptx      # no GPU: sm_90 registers/spills/memory ops per config
    python bench/bench_rope_fp8.py --pdl-grid # PDL off/on at every main-table size, 4 rounds
    python bench/bench_rope_fp8.py --pdl-grid --variants 0,2,2p,3p  # with and without the L2 prefetch

Each figure is the median over CUDA-graph replays of a graph holding many back-to-back calls of
the public wrapper (allocation included), cycling over enough input sets that the inputs don't sit
in L2; per-call time = replay time / calls. The floor is the bytes the operation must move (o
read; q, scales incl. padding rows written; positions and cos/sin rows read) over the read
bandwidth measured in the same run (a graph-replayed ``x.sum()`` over 2 GiB). Peers in the same
run: the PyTorch reference eagerly (plain calls, CUDA events) and under ``torch.compile``; and the
same kernel in vLLM's layout (one program per (token, head), one warp: BLOCK_T=1, num_warps=1).
Before the main table, every candidate launch config is timed at SWEEP_SIZES; the best candidate
becomes the default for the main table. The sweep records each compiled variant's
registers and spills as the driver reports them.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NOPE, ROPE, QG = 448, 64, 128
D = NOPE + ROPE
TOKENS = [1, 16, 128, 1024, 8192, 32768]
GROUPS = [(1, 8), (8, 8)]
# Every candidate launch config is timed here first; the best (highest worst-case % of the floor
# at the large sizes, with T = 1 under LATENCY_TARGET_US) is then used for the main table.
# (1, 8) at T = 8192 is timed twice (two rounds over every candidate): the size the target
# turns on, so its spread between rounds is the noise the comparison must beat.
SWEEP_SIZES = [((1, 8), 1), ((1, 8), 8192), ((1, 8), 32768), ((8, 8), 8192), ((8, 8), 32768),
               ((1, 8), 8192)]
LATENCY_TARGET_US = 2.5
MAX_POS = 8192


def bytes_moved(T: int, G: int, hpg: int) -> int:
    H = G * hpg
    T4 = (T + 3) // 4 * 4
    nsb = hpg * D // QG
    return T * H * D * 2 + T * H * D + G * nsb * T4 * 4 + T * 8 + T * ROPE * 4


def graph_time_us(fn_per_call, n_calls: int, replays: int = 15) -> float:
    """Median per-call microseconds over replays of a graph of ``n_calls`` calls (call i gets i)."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(2):
            fn_per_call(i)  # warm-up: compile, allocator
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(n_calls):
            fn_per_call(i)
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / n_calls)
    del graph
    return statistics.median(times)


def event_time_us(fn, n_calls: int, batches: int = 5) -> float:
    """Median per-call microseconds of plain (eager) calls, timed with events over batches."""
    import torch

    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n_calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / n_calls)
    return statistics.median(times)


def measure_bandwidth() -> dict:
    """Ceilings in this run: a read (x.sum()), an elementwise copy, and a bf16 -> fp8 cast (this
    kernel's byte mix: 2 bytes read, 1 written, per element); bytes read + written per second."""
    import torch

    n = 2 ** 29  # 2 GiB of float32
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    read_us = graph_time_us(lambda i: x.sum(), 10)
    copy_us = graph_time_us(lambda i: torch.neg(x, out=y), 10)
    del y
    xb = x[: n // 2].to(torch.bfloat16).view(-1)
    del x
    f8 = torch.empty(xb.shape, device="cuda", dtype=torch.float8_e4m3fn)
    cast_us = graph_time_us(lambda i: f8.copy_(xb), 10)
    read = n * 4 / read_us / 1e3
    cast_bytes = xb.numel() * 3
    return {"read_GBps": read, "copy_GBps": 2 * n * 4 / copy_us / 1e3,
            "cast_bf16_fp8_GBps": cast_bytes / cast_us / 1e3,
            "cast_bf16_fp8_pct_of_read_floor": 100 * (cast_bytes / read / 1e3) / cast_us,
            "read_us_2GiB": read_us, "copy_us_2GiB": copy_us, "cast_us_1GiB_bf16": cast_us}


def cos_sin_cache():
    """A random [MAX_POS, ROPE] float32 cos | sin cache on the GPU, as the wrapper takes it."""
    import torch

    angles = torch.rand(MAX_POS, ROPE // 2, device="cuda") * 6.2832
    return torch.cat([angles.cos(), angles.sin()], dim=1).contiguous()


def nvidia_smi() -> str | None:
    """Driver version and current clocks, recorded with every result (None without nvidia-smi)."""
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.mem",
                               "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return None


def _inputs(T, G, hpg, cache):
    import torch

    H = G * hpg
    big = torch.randn(T, H, D + 64, device="cuda").mul_(3).to(torch.bfloat16)
    o = big[:, :, :D]  # token stride H*(D+64): a slice of a padded buffer, last dim contiguous
    positions = torch.randint(0, cache.shape[0], (T,), device="cuda", dtype=torch.int64)
    return o, positions


def run(args) -> dict:
    import torch
    import triton

    from jitguard.kernels import rope_fp8
    from jitguard.kernels.rope_fp8 import fused_inv_rope_fp8_quant
    from jitguard.kernels.rope_fp8_reference import inv_rope_fp8_quant_reference

    started = time.time()
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    props = torch.cuda.get_device_properties(0)
    bw = measure_bandwidth()
    read_gbps = bw["read_GBps"]
    print(f"# {props.name}: read {read_gbps:.0f} GB/s, copy {bw['copy_GBps']:.0f} GB/s, bf16->fp8 "
          f"cast {bw['cast_bf16_fp8_GBps']:.0f} GB/s = {bw['cast_bf16_fp8_pct_of_read_floor']:.0f}% "
          "of its read floor", flush=True)
    cache = cos_sin_cache()
    compiled_ref = torch.compile(inv_rope_fp8_quant_reference, dynamic=True)
    smi = nvidia_smi()
    rows, sweep = [], []
    result = {
        "benchmark": "fused inverse RoPE + FP8 block quant (bench/bench_rope_fp8.py)",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"gpu": props.name, "sms": props.multi_processor_count,
                    "memory_GiB": round(props.total_memory / 2 ** 30, 1), "nvidia_smi": smi,
                    "host": platform.node()},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "triton": triton.__version__, "cuda": torch.version.cuda},
        "shape": {"nope_dim": NOPE, "rope_dim": ROPE, "quant_group_size": QG, "D": D,
                  "o": "bf16 [T, H, D], token stride H*(D+64)", "positions": "int64",
                  "cos_sin_cache": f"fp32 [{MAX_POS}, {ROPE}]"},
        "method": "median per-call time over 15 CUDA-graph replays of a graph of calls_per_graph "
                  "wrapper calls cycling over input_sets input sets; floor = bytes / read GB/s; "
                  "eager and torch.compile: plain calls timed with CUDA events",
        "bandwidth": bw,
        "config_sweep": sweep,
        "kernel_config": None,
        "rows": rows,
        "complete": False,
    }

    def save():
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")

    def prepare(T, G, hpg):
        nbytes = bytes_moved(T, G, hpg)
        floor_us = nbytes / read_gbps / 1e3
        n_sets = max(1, min(64, -(-(256 << 20) // nbytes)))
        sets = [_inputs(T, G, hpg, cache) for _ in range(n_sets)]
        n_calls = max(4, min(200, int(4000 / max(floor_us * 1.3, 2.0))))
        return nbytes, floor_us, sets, n_calls

    def launch(o, p, G, hpg, config, compiled=None):
        q_buf, scale_buf = rope_fp8._allocate(o, G, hpg, QG)
        ck = rope_fp8._launch(rope_fp8._inv_rope_fp8_quant_kernel,
                              o, p, cache, q_buf, scale_buf, G, hpg, NOPE, ROPE, QG, config)
        if compiled is not None:
            compiled.append(ck)
        return rope_fp8._views(q_buf, scale_buf, o.shape[0])

    def resources(ck) -> dict:
        try:
            ck._init_handles()
            return {"n_regs": int(ck.n_regs), "n_spills": int(ck.n_spills)}
        except Exception as exc:  # a missing attribute must not lose the timing
            return {"resources_error": repr(exc)[:200]}

    def exact(q, s, o, p, G, hpg):
        q_ref, s_ref = inv_rope_fp8_quant_reference(o, p, cache, G, hpg)
        return bool(torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
                    and torch.equal(s, s_ref))

    # 1. Every candidate config at the sweep sizes; pick the default for the main table.
    candidates = [rope_fp8.CONFIG] + [c for c in rope_fp8.CANDIDATE_CONFIGS if c != rope_fp8.CONFIG]
    if not (args.quick or args.no_sweep):
        seen_sizes = []
        for (G, hpg), T in SWEEP_SIZES:
            rnd = seen_sizes.count((G, hpg, T)) + 1
            seen_sizes.append((G, hpg, T))
            nbytes, floor_us, sets, n_calls = prepare(T, G, hpg)
            for cfg in candidates:
                o0, p0 = sets[0]
                compiled = []
                ok = exact(*launch(o0, p0, G, hpg, cfg, compiled), o0, p0, G, hpg)
                us = graph_time_us(
                    lambda i: launch(*sets[i % len(sets)], G, hpg, cfg), n_calls)
                sweep.append({"G": G, "hpg": hpg, "T": T, "round": rnd, "kernel": "current",
                              "config": dataclasses.asdict(cfg), **resources(compiled[0]),
                              "us": us, "pct_floor": 100 * floor_us / us, "bit_exact": ok})
                regs = sweep[-1].get("n_regs", "?")
                print(f"sweep G={G} hpg={hpg} T={T:6d} r{rnd} {cfg} [{regs} regs]: "
                      f"{us:9.2f} us ({100 * floor_us / us:5.1f}% of floor)  exact={ok}",
                      flush=True)
            del sets
            torch.cuda.empty_cache()
            save()

        def score(cfg):
            """Worst % of the floor over the large sweep sizes (rounds averaged per size); 0 if
            T = 1 misses the latency target, -1 if any output is not bit-exact."""
            mine = [r for r in sweep
                    if r["kernel"] == "current" and r["config"] == dataclasses.asdict(cfg)]
            if not all(r["bit_exact"] for r in mine):
                return -1.0
            if any(r["T"] == 1 and r["us"] > LATENCY_TARGET_US for r in mine):
                return 0.0
            per_size = {}
            for r in mine:
                if r["T"] > 1:
                    per_size.setdefault((r["G"], r["hpg"], r["T"]), []).append(r["pct_floor"])
            return min(statistics.mean(v) for v in per_size.values())

        best = max(candidates, key=score)
        print(f"# chosen: {best} (worst % of floor at the large sweep sizes: {score(best):.1f})")
        rope_fp8.CONFIG = best
    result["kernel_config"] = dataclasses.asdict(rope_fp8.CONFIG)

    if args.sweep_only:
        result["complete"] = True
        result["wall_s"] = round(time.time() - started, 1)
        save()
        return result

    # 2. The main table: the public wrapper with that config, vLLM's layout, eager, torch.compile.
    for (G, hpg) in GROUPS:
        for T in ([1, 8192] if args.quick else TOKENS):
            nbytes, floor_us, sets, n_calls = prepare(T, G, hpg)
            n_sets = len(sets)
            o0, p0 = sets[0]
            ok = exact(*fused_inv_rope_fp8_quant(o0, p0, cache, G, hpg), o0, p0, G, hpg)

            def call(i):
                o, p = sets[i % n_sets]
                return fused_inv_rope_fp8_quant(o, p, cache, G, hpg)

            def vllm_layout(i):  # one program per (token, head), one warp; padding left unwritten
                o, p = sets[i % n_sets]
                q_buf, scale_buf = rope_fp8._allocate(o, G, hpg, QG)
                rope_fp8._inv_rope_fp8_quant_kernel[(T * G * hpg,)](
                    o, p, cache, q_buf, scale_buf, T, scale_buf.shape[2],
                    o.stride(0), o.stride(1), cache.stride(0), 0,  # pdl_wave: no PDL here
                    N_GROUPS=G, HEADS_PER_GROUP=hpg, NOPE_DIM=NOPE, ROPE_DIM=ROPE,
                    QUANT_GROUP=QG, BLOCK_T=1, BLOCK_Q=4, ROPE_CHUNK=64, NUM_STAGES=1,
                    num_warps=1, enable_fp_fusion=False)

            us = graph_time_us(call, n_calls)
            t2 = graph_time_us(call, n_calls)  # the same version twice: the spread is the noise
            vllm_us = graph_time_us(vllm_layout, n_calls)
            eager_calls = max(2, min(50, int(20000 / max(floor_us * 30, 200))))
            eager_us = event_time_us(
                lambda: inv_rope_fp8_quant_reference(o0, p0, cache, G, hpg), eager_calls)
            compile_us = None
            if time.time() - started < args.budget_s:
                try:
                    compile_us = event_time_us(
                        lambda: compiled_ref(o0, p0, cache, G, hpg), eager_calls)
                except Exception as exc:  # a compile failure must not lose the kernel's numbers
                    print(f"# torch.compile failed at G={G} hpg={hpg} T={T}: {exc!r}"[:300])
            row = {
                "G": G, "hpg": hpg, "T": T, "bytes": nbytes, "floor_us": floor_us,
                "us": us, "us_repeat": t2, "pct_floor": 100 * floor_us / us,
                "vllm_layout_us": vllm_us, "vllm_layout_pct_floor": 100 * floor_us / vllm_us,
                "eager_us": eager_us, "compile_us": compile_us, "bit_exact": ok,
                "input_sets": n_sets, "calls_per_graph": n_calls,
            }
            rows.append(row)
            print(f"G={G} hpg={hpg} T={T:6d}: {us:9.2f} us ({row['pct_floor']:5.1f}% of floor "
                  f"{floor_us:8.2f}) repeat {t2:9.2f}  vllm-layout {vllm_us:9.2f}  eager "
                  f"{eager_us:9.1f}  compile {compile_us if compile_us is None else round(compile_us, 1)}"
                  f"  exact={ok}", flush=True)
            save()
            del sets
            torch.cuda.empty_cache()

    result["wall_s"] = round(time.time() - started, 1)
    result["complete"] = True
    save()
    return result


PDL_VARIANTS = (0, 1, 2, 3)  # LaunchConfig.pdl: off; wait only; wait + trigger dependents unless
# the grid is 0.4-0.9 of a wave of programs; wait + always trigger


# --pdl-grid: every size of the main table (and 1x8 T = 2048..16384), PDL off /
# on, PDL_GRID_ROUNDS rounds with a fresh graph each, the variants' order rotated per round and the
# buffers' addresses moved between rounds (a spacer allocation of random size): is PDL slower
# anywhere, beyond the spread of the same variant over rounds?
PDL_GRID_SIZES = ([((1, 8), T) for T in (1, 16, 128, 512, 640, 704, 768, 1024, 1280, 1408, 1472,
                                          1536, 1600, 1664, 2048, 4096, 6144, 7168, 8192, 16384,
                                          32768)]
                  + [((8, 8), T) for T in (1, 16, 128, 1024, 8192, 32768)])
PDL_GRID_ROUNDS = 4


def run_pdl_grid(args) -> dict:
    import random

    import torch
    import triton

    from jitguard.kernels import rope_fp8

    started = time.time()
    seed = int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    rng = random.Random(seed)
    props = torch.cuda.get_device_properties(0)
    bw = measure_bandwidth()
    read_gbps = bw["read_GBps"]
    print(f"# {props.name}: read {read_gbps:.0f} GB/s, copy {bw['copy_GBps']:.0f} GB/s", flush=True)
    cache = cos_sin_cache()
    smi = nvidia_smi()
    variants = list(args.variants)
    configs = {v: variant_config(rope_fp8.CONFIG, v) for v in variants}
    rows, summary, errors = [], [], []
    result = {
        "benchmark": "fused inverse RoPE + FP8 block quant, PDL off/on over the main table's sizes "
                     "(bench/bench_rope_fp8.py --pdl-grid)",
        "variants": {v: dataclasses.asdict(c) for v, c in configs.items()},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"gpu": props.name, "sms": props.multi_processor_count,
                    "capability": list(torch.cuda.get_device_capability(0)),
                    "memory_GiB": round(props.total_memory / 2 ** 30, 1), "nvidia_smi": smi,
                    "host": platform.node()},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "triton": triton.__version__, "cuda": torch.version.cuda},
        "method": f"median per-call time over 15 CUDA-graph replays of a graph of calls_per_graph "
                  f"wrapper calls cycling over input sets; {PDL_GRID_ROUNDS} rounds per size, a fresh "
                  "graph per timing, variants' order rotated per round, a spacer allocation of "
                  "random size (0-64 MiB) held during each round to move the buffers' addresses; "
                  "floor = bytes / read GB/s",
        "base_config": dataclasses.asdict(rope_fp8.CONFIG), "seed": seed, "bandwidth": bw,
        "rows": rows, "summary": summary, "errors": errors, "complete": False,
    }

    def save():
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")

    def launch(o, p, G, hpg, cfg):
        q_buf, scale_buf = rope_fp8._allocate(o, G, hpg, QG)
        rope_fp8._launch(rope_fp8._inv_rope_fp8_quant_kernel, o, p, cache, q_buf, scale_buf,
                         G, hpg, NOPE, ROPE, QG, cfg)
        return rope_fp8._views(q_buf, scale_buf, o.shape[0])

    for (G, hpg), T in PDL_GRID_SIZES:
        nbytes = bytes_moved(T, G, hpg)
        floor_us = nbytes / read_gbps / 1e3
        n_sets = max(1, min(64, -(-(256 << 20) // nbytes)))
        sets = [_inputs(T, G, hpg, cache) for _ in range(n_sets)]
        n_calls = max(4, min(200, int(4000 / max(floor_us * 1.3, 2.0))))
        order = list(variants)
        for rnd in range(1, PDL_GRID_ROUNDS + 1):
            torch.cuda.empty_cache()
            spacer_mib = rng.randrange(0, 65)
            spacer = torch.empty(spacer_mib << 20, dtype=torch.uint8, device="cuda")
            for pdl in order:
                cfg = configs[pdl]
                try:
                    us = graph_time_us(lambda i: launch(*sets[i % n_sets], G, hpg, cfg), n_calls)
                except Exception as exc:
                    errors.append({"where": f"G={G} hpg={hpg} T={T} pdl={pdl} r{rnd}",
                                   "error": repr(exc)[:500]})
                    print(f"# ERROR G={G} T={T} pdl={pdl}: {exc!r}"[:400], flush=True)
                    continue
                rows.append({"G": G, "hpg": hpg, "T": T, "round": rnd, "pdl": pdl,
                             "spacer_MiB": spacer_mib, "floor_us": floor_us, "us": us,
                             "pct_floor": 100 * floor_us / us, "calls_per_graph": n_calls,
                             "input_sets": n_sets})
            del spacer
            order = order[1:] + order[:1]
        line = []
        for pdl in variants:
            us = [r["us"] for r in rows if (r["G"], r["hpg"], r["T"], r["pdl"]) == (G, hpg, T, pdl)]
            if not us:
                continue
            summary.append({"G": G, "hpg": hpg, "T": T, "pdl": pdl, "floor_us": floor_us,
                            "median_us": statistics.median(us), "min_us": min(us),
                            "max_us": max(us), "all_us": us,
                            "median_pct_floor": 100 * floor_us / statistics.median(us)})
            line.append(f"pdl={pdl} {statistics.median(us):8.2f} [{min(us):.2f}-{max(us):.2f}]")
        print(f"grid G={G} hpg={hpg} T={T:6d} (floor {floor_us:7.2f}): " + "  ".join(line),
              flush=True)
        del sets
        torch.cuda.empty_cache()
        save()
    result["wall_s"] = round(time.time() - started, 1)
    result["complete"] = True
    save()
    return result


def variant_config(base, label):
    """A --pdl-grid variant: ``pdl`` digits, then ``p`` for ``l2_prefetch`` (e.g. "2p")."""
    return dataclasses.replace(base, pdl=int(str(label).rstrip("p")),
                               l2_prefetch=str(label).endswith("p"))


def print_pdl_grid_table(result: dict) -> None:
    variants = []
    for r in result["summary"]:
        if r["pdl"] not in variants:
            variants.append(r["pdl"])
    last = variants[-1]
    print("\n| G x hpg | T | floor µs | " + " | ".join(
        f"pdl={p}: median µs [min-max] (% floor)" for p in variants)
          + f" | pdl={last} - pdl={variants[0]} |")
    print("|---|---|---|" + "---|" * len(variants) + "---|")
    sizes = []
    for r in result["summary"]:
        if (r["G"], r["hpg"], r["T"]) not in sizes:
            sizes.append((r["G"], r["hpg"], r["T"]))
    for G, hpg, T in sizes:
        m = {r["pdl"]: r for r in result["summary"] if (r["G"], r["hpg"], r["T"]) == (G, hpg, T)}
        cells = []
        for p in variants:
            if p not in m:
                cells.append("–")
                continue
            r = m[p]
            pct = "" if T < 128 else f" ({r['median_pct_floor']:.1f}%)"
            cells.append(f"{r['median_us']:.2f} [{r['min_us']:.2f}-{r['max_us']:.2f}]{pct}")
        first = variants[0]
        diff = (f"{m[last]['median_us'] - m[first]['median_us']:+.2f} µs"
                if first in m and last in m else "–")
        floor = next(iter(m.values()))["floor_us"]
        print(f"| {G}x{hpg} | {T} | {floor:.2f} | " + " | ".join(cells) + f" | {diff} |")


def print_table(result: dict) -> None:
    if result["config_sweep"]:
        sizes = sorted({(r["G"], r["hpg"], r["T"]) for r in result["config_sweep"]})
        print("\n| kernel | config (block_t, warps, stages, programs/SM, maxnreg) | regs / spills | "
              + " | ".join(f"{G}x{hpg} T={T}" for G, hpg, T in sizes) + " |")
        print("|---|---|---|" + "---|" * len(sizes))
        seen = []
        for r in result["config_sweep"]:
            key = (r["kernel"], tuple(r["config"].values()))
            if key in seen:
                continue
            seen.append(key)
            cells = []
            for G, hpg, T in sizes:
                m = [x for x in result["config_sweep"] if (x["kernel"], tuple(x["config"].values()))
                     == key and (x["G"], x["hpg"], x["T"]) == (G, hpg, T)]
                us = " / ".join(f"{x['us']:.2f}" for x in m)
                pct = " / ".join(f"{x['pct_floor']:.1f}" for x in m)
                cells.append("–" if not m else (f"{us} µs" if T == 1 else f"{us} µs ({pct}%)")
                             + ("" if all(x["bit_exact"] for x in m) else " NOT EXACT"))
            regs = r.get("n_regs", "?"), r.get("n_spills", "?")
            print(f"| {key[0]} | {key[1]} | {regs[0]} / {regs[1]} | " + " | ".join(cells) + " |")
    print("\n| G x hpg | T | µs | % of HBM floor | floor µs | vLLM layout µs (%) | eager µs | "
          "torch.compile µs |")
    print("|---|---|---|---|---|---|---|---|")
    for r in result["rows"]:
        pct = "–" if r["T"] < 128 else f"{r['pct_floor']:.0f}%"
        vpct = "" if r["T"] < 128 else f" ({r['vllm_layout_pct_floor']:.0f}%)"
        comp = "–" if r["compile_us"] is None else f"{r['compile_us']:.1f}"
        print(f"| {r['G']}x{r['hpg']} | {r['T']} | {r['us']:.2f} | {pct} | {r['floor_us']:.2f} | "
              f"{r['vllm_layout_us']:.2f}{vpct} | {r['eager_us']:.1f} | {comp} |")


def ptx_report() -> None:
    """No GPU needed: compile for sm_90 per config and print ptxas's resource usage."""
    import re

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from jitguard.kernels import rope_fp8

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    ptxas = next((p for p in (ptxas / "ptxas-blackwell", ptxas / "ptxas") if p.exists()), None)
    sig = {"o_ptr": "*bf16", "positions_ptr": "*i64", "cos_sin_ptr": "*fp32",
           "q_ptr": "*fp8e4nv", "scale_ptr": "*fp32", "num_tokens": "i32", "scale_stride": "i32",
           "o_stride_t": "i32", "o_stride_h": "i32", "cos_sin_stride": "i32", "pdl_wave": "i32"}
    div16 = [["tt.divisibility", 16]]
    attrs = {(i,): div16 for i in (0, 1, 2, 3, 4, 7, 8, 9)}
    vllm = rope_fp8.LaunchConfig(1, 1, 1, 0)
    for cfg in [rope_fp8.CONFIG, *rope_fp8.CANDIDATE_CONFIGS, vllm]:
        # the launcher's own options (an H200 launch: PDL as configured); the kernel's
        # constexpr flags among them go to the constants
        options = rope_fp8._launch_options(cfg, cfg.pdl)
        consts = dict(N_GROUPS=1, HEADS_PER_GROUP=8, NOPE_DIM=NOPE, ROPE_DIM=ROPE,
                      QUANT_GROUP=QG, BLOCK_T=cfg.block_t, BLOCK_Q=4, ROPE_CHUNK=64,
                      NUM_STAGES=cfg.num_stages,
                      USE_PDL=options.pop("USE_PDL", 0), L2_PREFETCH=options.pop("L2_PREFETCH", False))
        full_sig = dict(sig, **{k: "constexpr" for k in consts})
        cc = triton.compile(ASTSource(rope_fp8._inv_rope_fp8_quant_kernel, full_sig, consts, attrs),
                            target=GPUTarget("cuda", 90, 32), options=options)
        ptx = cc.asm["ptx"]
        ops = re.findall(r"^\s*(?:@%p\d+\s+)?((?:ld|st)\.(?:global|shared)[\w.]*|cp\.async\.c[ag][\w.]*|bar\.sync)",
                         ptx, re.M)
        counts = {op: ops.count(op) for op in sorted(set(ops))}
        usage = ""
        if ptxas is not None:
            tmp = Path("/tmp/rope_fp8_sm90.ptx")
            tmp.write_text(ptx)
            cap = ["-maxrregcount", str(cfg.maxnreg)] if cfg.maxnreg else []
            out = subprocess.run([str(ptxas), "-arch=sm_90a", "-v", *cap, str(tmp), "-o", "/dev/null"],
                                 capture_output=True, text=True).stderr
            usage = " ".join(re.findall(r"Used \d+ registers|\d+ bytes spill stores|\d+ bytes stack frame", out))
        print(f"{cfg}{' (vLLM layout)' if cfg is vllm else ''}: shared {cc.metadata.shared} B; {usage}")
        print(f"   {counts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "rope_fp8_h200.json"))
    parser.add_argument("--quick", action="store_true", help="T in {1, 8192} only, no sweep")
    parser.add_argument("--budget-s", type=float, default=150.0,
                        help="stop adding torch.compile peers after this many seconds")
    parser.add_argument("--ptx", action="store_true", help="no GPU: sm_90 resource usage per config")
    parser.add_argument("--no-sweep", action="store_true",
                        help="the main table (every T, peers) with the default config, no sweep")
    parser.add_argument("--sweep-only", action="store_true",
                        help="the config sweep only, no main table")
    parser.add_argument("--pdl-grid", action="store_true",
                        help="only PDL off / on over the main table's sizes, several rounds "
                             "each (fresh graphs, rotated order, moved addresses)")
    parser.add_argument("--variants", type=lambda s: s.split(","),
                        default=[str(p) for p in PDL_VARIANTS],
                        help="--pdl-grid: comma-separated launch variants of the default config, "
                             "each LaunchConfig.pdl and a 'p' suffix for l2_prefetch "
                             "(default: 0,1,2,3; e.g. 0,2,2p,3p)")
    args = parser.parse_args()
    if args.ptx:
        ptx_report()
        return
    if args.pdl_grid:
        result = run_pdl_grid(args)
        print_pdl_grid_table(result)
        print(f"\nwrote {args.out}")
        return
    result = run(args)
    print_table(result)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
