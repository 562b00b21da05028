"""The watcher's costs measured on a CPU (no GPU): the companion of bench_watch.py.

1. Cache-hit launch overhead on a bare kernel launch (``k[(1,)](...)``, Triton's real launch path
   with the stand-in driver of tests/runtime_helpers.py, whose launcher does nothing): a few µs per
   launch, so a hook on the hit path would show up far more than behind the ~55 µs wrapper measured
   on the H200. Rounds of N launches alternate without / with an active watcher (median and best
   round), plus a deterministic count of the Python calls one launch makes, and of those in
   jitguard, with and without the watcher (a shared CPU makes the timings noisy).
2. jitguard's own work per compile event as the kernel's history grows (the closest-variant search
   is linear in the number of previous variants): real cache keys from Triton's binder for a
   kernel whose constexpr takes V distinct values, fed through the watcher's hook handlers.

    python bench/bench_watch_cpu.py [--launches 20000] [--rounds 9] [--variants 500]

Writes bench/results/bench_watch_cpu.json (machine, versions, date, every figure).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--variants", type=int, default=500)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "bench_watch_cpu.json"))
    args = ap.parse_args()
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="jitguard-bench-"))

    import triton

    import jitguard
    from jitguard.runtime import watch as watch_mod
    from runtime_helpers import FakeTensor, dtype, stand_in_driver
    from runtime_kernels import fresh

    results: dict = {
        "benchmark": "bench_watch_cpu",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "host": platform.node(), "python": platform.python_version(),
                    "load_avg_1m": os.getloadavg()[0]},
        "versions": {"triton": triton.__version__, "jitguard": jitguard.__version__},
    }
    with stand_in_driver():
        k = fresh()
        x = FakeTensor(16 * 4096, dtype("float16"))
        k.warmup(x, x, 1000, BLOCK=64, grid=(1,))

        def rounds_of(n):
            t0 = time.perf_counter()
            for i in range(n):
                k[(1,)](x, x, 1000, BLOCK=64)
            return (time.perf_counter() - t0) / n

        rounds_of(2000)
        without, with_ = [], []
        for _ in range(args.rounds):
            without.append(rounds_of(args.launches))
            with jitguard.watch(mode="raise", max_compiles=0):
                with_.append(rounds_of(args.launches))
        mw, mj = statistics.median(without), statistics.median(with_)

        # Deterministic evidence next to the (noisy, shared-machine) timings: count the Python
        # calls one cache-hit launch makes, and those in jitguard's code, with and without a watch.
        import jitguard as pkg

        jg_dir = os.path.dirname(os.path.abspath(pkg.__file__)) + os.sep

        def count_calls(n):
            calls = {"all": 0, "jitguard": 0}

            def prof(frame, event, arg):
                if event in ("call", "c_call"):
                    calls["all"] += 1
                    if frame.f_code.co_filename.startswith(jg_dir):
                        calls["jitguard"] += 1

            sys.setprofile(prof)
            try:
                for _ in range(n):
                    k[(1,)](x, x, 1000, BLOCK=64)
            finally:
                sys.setprofile(None)
            return {key: v / n for key, v in calls.items()}

        calls_without = count_calls(1000)
        with jitguard.watch(mode="raise", max_compiles=0):
            calls_with = count_calls(1000)
        results["launch_overhead"] = {
            "launch": "k[(1,)](x, y, n, BLOCK=64), cache hit, stand-in driver (no-op launcher)",
            "launches_per_round": args.launches, "rounds": args.rounds,
            "us_per_launch_without": [round(v * 1e6, 3) for v in without],
            "us_per_launch_with": [round(v * 1e6, 3) for v in with_],
            "median_us_without": round(mw * 1e6, 3), "median_us_with": round(mj * 1e6, 3),
            "min_us_without": round(min(without) * 1e6, 3), "min_us_with": round(min(with_) * 1e6, 3),
            "overhead_pct_median": round((mj / mw - 1) * 100, 3),
            "overhead_pct_min": round((min(with_) / min(without) - 1) * 100, 3),
            "python_calls_per_launch_without": calls_without["all"],
            "python_calls_per_launch_with": calls_with["all"],
            "jitguard_calls_per_launch_with": calls_with["jitguard"],
            "limit_pct": 2.0,
        }

        # 2. per-event work vs history length: real keys from Triton's binder, hook handlers
        kernel = fresh()
        keys_ = jitguard.predict(kernel, [((x, x, 1000), {"BLOCK": 16 * (i + 1)})
                                          for i in range(args.variants)]).keys

        class Info:
            jit_function = kernel

        own = []
        with jitguard.watch(mode="record") as w:
            for key in keys_:
                kw = {"key": key, "fn": Info, "compile": {"device": 0}, "is_manual_warmup": False}
                watch_mod._on_pre(kw)
                watch_mod._on_post(kw)
            own = [e.overhead_ms for e in w.events]
        marks = sorted({1, 2, 10, 50, 100, 250, len(own)} & set(range(1, len(own) + 1)))
        results["per_event_overhead_ms"] = {
            "variants": len(own),
            "median": round(statistics.median(own), 4),
            "max": round(max(own), 4),
            "at_variant": {str(m): own[m - 1] for m in marks},
            "median_last_50": round(statistics.median(own[-50:]), 4),
            "limit_ms": 1.0,
        }
    lo, pe = results["launch_overhead"], results["per_event_overhead_ms"]
    print(f"cache-hit launch (CPU, stand-in driver): median {lo['median_us_without']} us without, "
          f"{lo['median_us_with']} us with the watcher ({lo['overhead_pct_median']:+.2f}%); best round "
          f"{lo['min_us_without']} vs {lo['min_us_with']} us ({lo['overhead_pct_min']:+.2f}%); Python calls per "
          f"launch {lo['python_calls_per_launch_without']} vs {lo['python_calls_per_launch_with']}, "
          f"in jitguard {lo['jitguard_calls_per_launch_with']}")
    print(f"jitguard per compile event over {pe['variants']} variants of one kernel: median {pe['median']} ms, "
          f"last 50 median {pe['median_last_50']} ms, max {pe['max']} ms")
    pathlib.Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
