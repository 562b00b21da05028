"""Benchmark: fused inverse RoPE + FP8 block quantization on one GPU, against the HBM floor.

    python bench/bench_rope_fp8.py [--out bench/results/rope_fp8_h200.json] [--quick]
    python bench/bench_rope_fp8.py --no-sweep # the main table with rope_fp8.CONFIG, peers included
    python bench/bench_rope_fp8.py --ptx      # no GPU: sm_90 registers/spills/memory ops per config
    python bench/bench_rope_fp8.py --pdl-ab   # v5: PDL off/on (pdl 0, 1, 2) at the target sizes,
                                              # graph-exact checks, copy probe, T scan, race control
    python bench/bench_rope_fp8.py --pdl-grid # v5: PDL off/on at every main-table size, 4 rounds
    python bench/bench_rope_fp8.py --pdl-grid --variants 0,2,2p,3p  # v7: with L2 prefetch

Each figure is the median over CUDA-graph replays of a graph holding many back-to-back calls of
the public wrapper (allocation included), cycling over enough input sets that the inputs don't sit
in L2; per-call time = replay time / calls. The floor is the bytes the operation must move (o
read; q, scales incl. padding rows written; positions and cos/sin rows read) over the read
bandwidth measured in the same run (a graph-replayed ``x.sum()`` over 2 GiB). Peers in the same
run: the PyTorch reference eagerly (plain calls, CUDA events) and under ``torch.compile``; and the
same kernel in vLLM's layout (one program per (token, head), one warp: BLOCK_T=1, num_warps=1).
Before the main table, every candidate launch config is timed at SWEEP_SIZES, together with the
previous kernel version as an A/B in the same run (bench/rope_fp8_v3_kernel.py with its default
launch); the best candidate becomes the default for the main table. The sweep records each compiled variant's
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
# The previous kernel version's default launch (bench/rope_fp8_v3_kernel.py: registers capped
# at 96), timed in the sweep.
PREV_CONFIG_FIELDS = dict(block_t=4, num_warps=1, num_stages=1, programs_per_sm=0, maxnreg=96)


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

    sys.path.insert(0, str(ROOT / "bench"))
    from rope_fp8_v3_kernel import _inv_rope_fp8_quant_kernel as v3_kernel
    from rope_fp8_v4_probes import _probe_copy_kernel as probe_copy
    from rope_fp8_v4_probes import _probe_no_positions_kernel as probe_no_positions

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

    def launch(o, p, G, hpg, config, kernel=None, compiled=None):
        q_buf, scale_buf = rope_fp8._allocate(o, G, hpg, QG)
        ck = rope_fp8._launch(rope_fp8._inv_rope_fp8_quant_kernel if kernel is None else kernel,
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
    PREV_CONFIG = rope_fp8.LaunchConfig(**PREV_CONFIG_FIELDS)
    PROBE_CONFIG = rope_fp8.LaunchConfig(maxnreg=80)
    if not (args.quick or args.no_sweep):
        seen_sizes = []
        for (G, hpg), T in SWEEP_SIZES:
            rnd = seen_sizes.count((G, hpg, T)) + 1
            seen_sizes.append((G, hpg, T))
            nbytes, floor_us, sets, n_calls = prepare(T, G, hpg)
            # The previous kernel version (v3, its default launch) first, then every candidate
            # of the current one: an A/B in the same run.
            probes = []
            if args.probes and T > 1:  # timing probes, not the operation (never bit-exact)
                probes = [(PROBE_CONFIG, probe_no_positions, "probe-no-positions"),
                          (PROBE_CONFIG, probe_copy, "probe-copy")]
            for cfg, kernel, version in ([(PREV_CONFIG, v3_kernel, "v3")]
                                         + [(c, None, "current") for c in candidates] + probes):
                o0, p0 = sets[0]
                compiled = []
                ok = exact(*launch(o0, p0, G, hpg, cfg, kernel, compiled), o0, p0, G, hpg)
                us = graph_time_us(
                    lambda i: launch(*sets[i % len(sets)], G, hpg, cfg, kernel), n_calls)
                sweep.append({"G": G, "hpg": hpg, "T": T, "round": rnd, "kernel": version,
                              "config": dataclasses.asdict(cfg), **resources(compiled[0]),
                              "us": us, "pct_floor": 100 * floor_us / us, "bit_exact": ok})
                regs = sweep[-1].get("n_regs", "?")
                print(f"sweep G={G} hpg={hpg} T={T:6d} r{rnd} {version:10s} {cfg} [{regs} regs]: "
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
        prev = [r for r in sweep if r["kernel"] == "v3" and r["T"] > 1]
        print(f"# previous kernel (v3, {PREV_CONFIG}): worst % of floor at the same sizes: "
              f"{min(r['pct_floor'] for r in prev):.1f}")
        rope_fp8.CONFIG = best
    result["kernel_config"] = dataclasses.asdict(rope_fp8.CONFIG)

    # 1b. Optional: v3 and the chosen config over T at (1, 8), to separate a per-launch fixed
    # cost from the steady state (time = fixed + floor / efficiency, fitted over the large T).
    if args.tscan:
        G, hpg = 1, 8
        scan = result.setdefault("t_scan", [])
        for T in (1024, 2048, 4096, 8192, 16384, 32768):
            nbytes, floor_us, sets, n_calls = prepare(T, G, hpg)
            for cfg, kernel, version in [(PREV_CONFIG, v3_kernel, "v3"),
                                         (rope_fp8.CONFIG, None, "current")]:
                us = graph_time_us(
                    lambda i: launch(*sets[i % len(sets)], G, hpg, cfg, kernel), n_calls)
                scan.append({"G": G, "hpg": hpg, "T": T, "kernel": version,
                             "config": dataclasses.asdict(cfg), "floor_us": floor_us, "us": us,
                             "pct_floor": 100 * floor_us / us})
                print(f"tscan T={T:6d} {version:7s}: {us:8.2f} us (floor {floor_us:7.2f}, "
                      f"{100 * floor_us / us:5.1f}%)", flush=True)
            del sets
            torch.cuda.empty_cache()
        save()
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


# --pdl-ab (v5): the default config with programmatic dependent launch off / on, interleaved in one
# run, at the sizes the targets turn on (1x8 T = 8192 and T = 1 twice: the noise).
PDL_SIZES = [((1, 8), 1), ((1, 8), 8192), ((1, 8), 32768), ((8, 8), 8192), ((8, 8), 32768),
             ((8, 8), 1), ((1, 8), 8192), ((1, 8), 1)]
PDL_VARIANTS = (0, 1, 2, 3)  # LaunchConfig.pdl: off; wait only; wait + trigger dependents unless
# the grid is 0.4-0.9 of a wave of programs; wait + always trigger (v5's first "2")


def run_pdl_ab(args) -> dict:
    """PDL off / on for the default launch config, each figure timed as elsewhere in this file
    (CUDA-graph replays of back-to-back wrapper calls on rotating input sets), plus: the outputs
    of every call of a replayed graph checked bit-exact (the calls overlap under PDL); the copy
    probe off / on; a T scan at 1x8 for the fixed cost; plain-stream (no graph) timings; and a race
    control (a producer that lets its dependents start at once and then writes o slowly, followed
    by this kernel with PDL, with and without griddepcontrol.wait)."""
    import torch
    import triton

    from jitguard.kernels import rope_fp8
    from jitguard.kernels.rope_fp8_reference import inv_rope_fp8_quant_reference

    sys.path.insert(0, str(ROOT / "bench"))
    from rope_fp8_v4_probes import _pdl_early_trigger_copy_kernel as producer
    from rope_fp8_v4_probes import _probe_copy_kernel as probe_copy

    started = time.time()
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    props = torch.cuda.get_device_properties(0)
    bw = measure_bandwidth()
    read_gbps = bw["read_GBps"]
    print(f"# {props.name}: read {read_gbps:.0f} GB/s, copy {bw['copy_GBps']:.0f} GB/s", flush=True)
    cache = cos_sin_cache()
    smi = nvidia_smi()
    base = rope_fp8.CONFIG
    configs = {pdl: dataclasses.replace(base, pdl=pdl) for pdl in PDL_VARIANTS}
    ab, probes, scan, stream, race, errors = [], [], [], [], [], []
    result = {
        "benchmark": "fused inverse RoPE + FP8 block quant, PDL off/on (bench/bench_rope_fp8.py --pdl-ab)",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"gpu": props.name, "sms": props.multi_processor_count,
                    "capability": list(torch.cuda.get_device_capability(0)),
                    "memory_GiB": round(props.total_memory / 2 ** 30, 1), "nvidia_smi": smi,
                    "host": platform.node()},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "triton": triton.__version__, "cuda": torch.version.cuda},
        "shape": {"nope_dim": NOPE, "rope_dim": ROPE, "quant_group_size": QG, "D": D,
                  "o": "bf16 [T, H, D], token stride H*(D+64)", "positions": "int64",
                  "cos_sin_cache": f"fp32 [{MAX_POS}, {ROPE}]"},
        "method": "median per-call time over 15 CUDA-graph replays of a graph of calls_per_graph "
                  "wrapper calls cycling over input sets (as the main bench); variants interleaved "
                  "per size, sizes in PDL_SIZES order (1x8 T=8192 and T=1 twice); floor = bytes / "
                  "read GB/s; graph_exact: every call's outputs of one replayed graph compared "
                  "with the reference",
        "base_config": dataclasses.asdict(base),
        "pdl_supported": rope_fp8._pdl_supported(torch.device("cuda")),
        "bandwidth": bw, "ab": ab, "copy_probe": probes, "t_scan": scan, "stream": stream,
        "race_control": race, "errors": errors, "complete": False,
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

    def launch(o, p, G, hpg, cfg, kernel=None):
        q_buf, scale_buf = rope_fp8._allocate(o, G, hpg, QG)
        ck = rope_fp8._launch(rope_fp8._inv_rope_fp8_quant_kernel if kernel is None else kernel,
                              o, p, cache, q_buf, scale_buf, G, hpg, NOPE, ROPE, QG, cfg)
        return rope_fp8._views(q_buf, scale_buf, o.shape[0]), ck

    def graph_exact(sets, G, hpg, cfg, n_calls) -> bool:
        """Capture n_calls back-to-back calls keeping every output, replay once, compare all."""
        refs = [inv_rope_fp8_quant_reference(o, p, cache, G, hpg) for o, p in sets]
        outs = []
        stream_ = torch.cuda.Stream()
        stream_.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream_):
            launch(*sets[0], G, hpg, cfg)
        torch.cuda.current_stream().wait_stream(stream_)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(n_calls):
                outs.append(launch(*sets[i % len(sets)], G, hpg, cfg)[0])
        for q, s in outs:  # poison, so that an unwritten output can't pass
            q.view(torch.uint8).fill_(0x7F)
            s.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ok = all(torch.equal(q.view(torch.uint8), refs[i % len(sets)][0].view(torch.uint8))
                 and torch.equal(s, refs[i % len(sets)][1]) for i, (q, s) in enumerate(outs))
        del graph, outs
        return ok

    seen = []
    for (G, hpg), T in PDL_SIZES:
        rnd = seen.count((G, hpg, T)) + 1
        seen.append((G, hpg, T))
        nbytes, floor_us, sets, n_calls = prepare(T, G, hpg)
        for pdl, cfg in configs.items():
            try:
                (q, s), ck = launch(*sets[0], G, hpg, cfg)
                q_ref, s_ref = inv_rope_fp8_quant_reference(*sets[0], cache, G, hpg)
                ok = bool(torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
                          and torch.equal(s, s_ref))
                us = graph_time_us(lambda i: launch(*sets[i % len(sets)], G, hpg, cfg), n_calls)
                g_ok = graph_exact(sets, G, hpg, cfg, n_calls) if rnd == 1 else None
                ck._init_handles()
                ab.append({"G": G, "hpg": hpg, "T": T, "round": rnd, "pdl": pdl,
                           "launch_pdl": bool(ck.metadata.launch_pdl), "n_regs": int(ck.n_regs),
                           "floor_us": floor_us, "us": us, "pct_floor": 100 * floor_us / us,
                           "bit_exact": ok, "graph_exact": g_ok, "calls_per_graph": n_calls,
                           "input_sets": len(sets)})
                print(f"ab G={G} hpg={hpg} T={T:6d} r{rnd} pdl={pdl}: {us:9.2f} us "
                      f"({100 * floor_us / us:5.1f}% of floor {floor_us:7.2f})  exact={ok} "
                      f"graph_exact={g_ok} regs={ck.n_regs}", flush=True)
            except Exception as exc:  # one variant's failure must not lose the others
                errors.append({"where": f"ab G={G} hpg={hpg} T={T} pdl={pdl}", "error": repr(exc)[:500]})
                print(f"# ERROR ab G={G} hpg={hpg} T={T} pdl={pdl}: {exc!r}"[:400], flush=True)
        if rnd == 1 and T > 1:
            for pdl in (0, 2):
                try:
                    cfg = configs[pdl]
                    us = graph_time_us(
                        lambda i: launch(*sets[i % len(sets)], G, hpg, cfg, probe_copy), n_calls)
                    probes.append({"G": G, "hpg": hpg, "T": T, "pdl": pdl, "us": us,
                                   "pct_floor": 100 * floor_us / us})
                    print(f"copy-probe G={G} hpg={hpg} T={T:6d} pdl={pdl}: {us:9.2f} us "
                          f"({100 * floor_us / us:5.1f}%)", flush=True)
                except Exception as exc:
                    errors.append({"where": f"probe G={G} T={T} pdl={pdl}", "error": repr(exc)[:500]})
                    print(f"# ERROR probe: {exc!r}"[:400], flush=True)
        if rnd == 1 and ((G, hpg, T) == (1, 8, 8192) or (G == 8 and T >= 8192)):
            for pdl in (0, 2):  # plain stream, no graph: the CPU must keep ahead of the GPU
                cfg = configs[pdl]
                k = [0]

                def call():
                    k[0] += 1
                    launch(*sets[k[0] % len(sets)], G, hpg, cfg)

                try:
                    us = event_time_us(call, max(4, min(200, n_calls)))
                except Exception as exc:
                    errors.append({"where": f"stream G={G} T={T} pdl={pdl}", "error": repr(exc)[:500]})
                    print(f"# ERROR stream: {exc!r}"[:400], flush=True)
                    continue
                stream.append({"G": G, "hpg": hpg, "T": T, "pdl": pdl, "us": us,
                               "pct_floor": 100 * floor_us / us})
                print(f"stream G={G} hpg={hpg} T={T:6d} pdl={pdl}: {us:9.2f} us "
                      f"({100 * floor_us / us:5.1f}%)", flush=True)
        del sets
        torch.cuda.empty_cache()
        save()

    try:
        _pdl_t_scan(result, configs, prepare, launch)
    except Exception as exc:
        errors.append({"where": "t scan", "error": repr(exc)[:500]})
        print(f"# ERROR t scan: {exc!r}"[:400], flush=True)
    save()
    try:
        _pdl_race_control(result, configs, cache, producer)
    except Exception as exc:
        errors.append({"where": "race control", "error": repr(exc)[:500]})
        print(f"# ERROR race control: {exc!r}"[:400], flush=True)
    result["wall_s"] = round(time.time() - started, 1)
    result["complete"] = True
    save()
    return result


def _pdl_t_scan(result, configs, prepare, launch) -> None:
    """At 1x8 over T: time = fixed + floor / efficiency, fitted over T >= 8192, off and on."""
    scan = result["t_scan"]
    G, hpg = 1, 8
    for T in (1024, 2048, 4096, 8192, 16384, 32768):
        nbytes, floor_us, sets, n_calls = prepare(T, G, hpg)
        for pdl in (0, 2):
            cfg = configs[pdl]
            us = graph_time_us(lambda i: launch(*sets[i % len(sets)], G, hpg, cfg), n_calls)
            scan.append({"G": G, "hpg": hpg, "T": T, "pdl": pdl, "floor_us": floor_us, "us": us,
                         "pct_floor": 100 * floor_us / us})
            print(f"tscan T={T:6d} pdl={pdl}: {us:8.2f} us (floor {floor_us:7.2f}, "
                  f"{100 * floor_us / us:5.1f}%)", flush=True)
        del sets
    for pdl in (0, 2):
        pts = [(r["floor_us"], r["us"]) for r in scan if r["pdl"] == pdl and r["T"] >= 8192]
        n = len(pts)
        mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
        slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
        result.setdefault("t_scan_fit", {})[f"pdl{pdl}"] = {
            "fixed_us": my - slope * mx, "steady_efficiency": 1 / slope}
    print(f"# T scan fit (T >= 8192): {result['t_scan_fit']}", flush=True)


def _pdl_race_control(result, configs, cache, producer) -> None:
    import torch
    import triton

    from jitguard.kernels import rope_fp8
    from jitguard.kernels.rope_fp8_reference import inv_rope_fp8_quant_reference

    race = result["race_control"]
    base = configs[0]
    # Race control: o poisoned (bf16 NaN), then a producer that triggers its dependents at once
    # and copies the real o in slowly, then this kernel with PDL. With griddepcontrol.wait
    # (USE_PDL=1, 2) every output must match; launched with launch_pdl=True but without the wait
    # (USE_PDL=0), the kernel may read the poison: a count > 0 shows the race is real.
    G, hpg, T = 1, 8, 8192
    o_src, positions = _inputs(T, G, hpg, cache)
    big_src = o_src._base if o_src._base is not None else o_src
    big_dst = torch.empty_like(big_src)
    o_dst = big_dst.as_strided(o_src.shape, o_src.stride(), o_src.storage_offset())
    q_ref, s_ref = inv_rope_fp8_quant_reference(o_src, positions, cache, G, hpg)
    n_el = big_src.numel()
    for mode in ("wait+trigger", "wait", "no-wait"):
        bad = []
        for _ in range(5):
            big_dst.view(torch.int16).fill_(-1)  # 0xFFFF: bf16 NaN
            q_buf, scale_buf = rope_fp8._allocate(o_dst, G, hpg, QG)
            producer[(4,)](big_src.view(-1), big_dst.view(-1), n_el, BLOCK=1024, num_warps=4)
            if mode == "no-wait":
                num_tiles = triton.cdiv(T, base.block_t) * G * hpg
                rope_fp8._inv_rope_fp8_quant_kernel[(num_tiles,)](
                    o_dst, positions, cache, q_buf, scale_buf, T, scale_buf.shape[2],
                    o_dst.stride(0), o_dst.stride(1), cache.stride(0), 0,  # pdl_wave (unused)
                    N_GROUPS=G, HEADS_PER_GROUP=hpg, NOPE_DIM=NOPE, ROPE_DIM=ROPE, QUANT_GROUP=QG,
                    BLOCK_T=base.block_t, BLOCK_Q=4, ROPE_CHUNK=64, NUM_STAGES=1, USE_PDL=0,
                    **dict(rope_fp8._launch_options(base, 0), launch_pdl=True))
            else:
                rope_fp8._launch(rope_fp8._inv_rope_fp8_quant_kernel, o_dst, positions, cache,
                                 q_buf, scale_buf, G, hpg, NOPE, ROPE, QG,
                                 configs[2 if mode == "wait+trigger" else 1])
            torch.cuda.synchronize()
            q, s = rope_fp8._views(q_buf, scale_buf, T)
            bad.append(int((q.view(torch.uint8) != q_ref.view(torch.uint8)).sum().item()
                           + (~(s == s_ref)).sum().item()))
        race.append({"mode": mode, "mismatched_outputs_per_try": bad,
                     "outputs_per_try": q.numel() + s.numel()})
        print(f"race control {mode:13s}: mismatched outputs per try {bad} of {q.numel() + s.numel()}",
              flush=True)


# --pdl-grid (v5, second call): every size of the main table (and 1x8 T = 2048..16384), PDL off /
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


def print_pdl_table(result: dict) -> None:
    sizes = []
    for r in result["ab"]:
        if (r["G"], r["hpg"], r["T"]) not in sizes:
            sizes.append((r["G"], r["hpg"], r["T"]))
    print("\n| G x hpg | T | floor µs | " + " | ".join(f"pdl={p} µs (% floor)" for p in PDL_VARIANTS)
          + " | on - off (pdl=2) |")
    print("|---|---|---|" + "---|" * len(PDL_VARIANTS) + "---|")
    for G, hpg, T in sizes:
        cells, med = [], {}
        for p in PDL_VARIANTS:
            m = [r for r in result["ab"] if (r["G"], r["hpg"], r["T"], r["pdl"]) == (G, hpg, T, p)]
            if not m:
                cells.append("–")
                continue
            med[p] = statistics.median(r["us"] for r in m)
            us = " / ".join(f"{r['us']:.2f}" for r in m)
            pct = " / ".join(f"{r['pct_floor']:.1f}" for r in m)
            bad = "" if all(r["bit_exact"] and r["graph_exact"] is not False for r in m) else " NOT EXACT"
            cells.append((f"{us}" if T == 1 else f"{us} ({pct}%)") + bad)
        floor = next(r["floor_us"] for r in result["ab"] if (r["G"], r["hpg"], r["T"]) == (G, hpg, T))
        diff = f"{med[2] - med[0]:+.2f} µs" if 0 in med and 2 in med else "–"
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
                        help="the config sweep (and --tscan) only, no main table")
    parser.add_argument("--probes", action="store_true",
                        help="also time bench/rope_fp8_v4_probes.py's probes in the sweep")
    parser.add_argument("--tscan", action="store_true",
                        help="also time v3 and the chosen config at (1, 8) over T = 1024..32768")
    parser.add_argument("--pdl-ab", action="store_true",
                        help="only the default config with programmatic dependent launch off / "
                             "on (pdl 0, 1, 2), graph-exact checks, copy probe, T scan, plain "
                             "stream, race control")
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
    if args.pdl_ab:
        result = run_pdl_ab(args)
        print_pdl_table(result)
        print(f"\nwrote {args.out}")
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
