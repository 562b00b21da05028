"""Is the Mixtral FP8 M=256 spread the card's clocks? Time one GEMM in rounds while sampling them.

    python bench/moe_clocks.py [--rounds 12] [--gemm mixtral_w1] [--M 256] [--out bench/results]

The w1 GEMM of one (shape, M) with the table's config, timed as in bench_moe.py (CUDA-graph replays,
HBM-cold routings), in ``--rounds`` rounds; meanwhile ``nvidia-smi`` samples the SM and memory
clocks, power and the active throttle reasons every 50 ms. Each round's time is paired with the
samples taken during it. Writes moe_clocks.json with every round, every sample, machine and
versions: if the slow rounds coincide with lower SM clocks (or a power cap), the spread is the card.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

FIELDS = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"


def sampler(stop: threading.Event, out: list) -> None:
    proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits",
                             "-lms", "50", "-i", "0"], stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if stop.is_set():
                break
            parts = [p.strip() for p in line.split(",")]
            try:
                out.append({"t": time.time(), "sm_MHz": float(parts[0]), "mem_MHz": float(parts[1]),
                            "power_W": float(parts[2]), "temp_C": float(parts[3]), "throttle": parts[4]})
            except (ValueError, IndexError):
                continue
    finally:
        proc.terminate()


def main() -> None:
    import torch
    import triton

    import bench_moe as bm

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gemm", default="mixtral_w1")
    ap.add_argument("--M", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()
    device = "cuda"
    bm.gpu_warmup(device)
    _, read_bw = bm.copy_bandwidth(device)
    E, topk, N, K = bm.GEMMS[args.gemm]
    p = bm.GemmProblem(args.gemm, args.M, True, device, weights=bm.make_weights(E, N, K, True, device))
    from importlib import import_module
    table = import_module(bm.moe.__package__ + ".moe_configs").TABLE
    entry = bm.lookup_entry(args.gemm, True, args.M, table)
    cfg = dict(entry[entry["auto"]], SWAP_AB=entry["auto"] == "swap")
    floor_us = p.floor_bytes() / (read_bw * 1e3)
    samples: list = []
    stop = threading.Event()
    th = threading.Thread(target=sampler, args=(stop, samples), daemon=True)
    th.start()
    time.sleep(0.5)
    rounds = []
    for r in range(args.rounds):
        t0 = time.time()
        us, err = bm._try_time(lambda: p.launch_fns(cfg), args.reps)
        t1 = time.time()
        during = [s for s in samples if t0 <= s["t"] <= t1]
        rounds.append({"round": r, "us": us, "error": err, "pct_floor": 100 * floor_us / us if us else None,
                       "samples": len(during),
                       "sm_MHz_min": min((s["sm_MHz"] for s in during), default=None),
                       "sm_MHz_median": statistics.median([s["sm_MHz"] for s in during]) if during else None,
                       "power_W_max": max((s["power_W"] for s in during), default=None),
                       "throttle": sorted({s["throttle"] for s in during})})
        if us is None:
            print(f"round {r:2d}: failed: {err}", flush=True)
            continue
        print(f"round {r:2d}: {us:8.2f} µs ({100 * floor_us / us:5.1f}% of floor)  SM MHz "
              f"{rounds[-1]['sm_MHz_min']}-{rounds[-1]['sm_MHz_median']} power max "
              f"{rounds[-1]['power_W_max']} W throttle {rounds[-1]['throttle']}", flush=True)
    stop.set()
    props = torch.cuda.get_device_properties(0)
    res = {"benchmark": "moe_clocks", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "machine": {"gpu": props.name, "sms": props.multi_processor_count},
           "versions": {"torch": torch.__version__, "triton": triton.__version__},
           "gemm": args.gemm, "M": args.M, "config": cfg, "read_bandwidth_GBps": read_bw, "floor_us": floor_us,
           "rounds": rounds, "samples": samples}
    us = [r["us"] for r in rounds if r["us"]]
    print(f"{args.gemm} fp8 M={args.M} {bm.cfg_name(cfg)}: median {statistics.median(us):.2f} µs, "
          f"min {min(us):.2f}, max {max(us):.2f} (floor {floor_us:.2f} at {read_bw:.0f} GB/s)")
    os.makedirs(args.out, exist_ok=True)
    Path(args.out, "moe_clocks.json").write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
