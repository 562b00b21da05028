"""bench/bench_watch.py's launch-overhead part, run small on the CPU through the stand-in driver:
the measurement is interleaved and complete, and its structural check sees a jitguard frame on the
hit path when there is one."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import random

import pytest

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions

pytest.importorskip("triton")

from runtime_helpers import FakeTensor, dtype, stand_in_driver  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_watch", ROOT / "bench" / "bench_watch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_launch_overhead_is_interleaved_and_checks_for_jitguard_frames(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    bench = _bench()
    rng = random.Random(os.urandom(8))
    rounds, launches = rng.randint(3, 6), rng.randint(50, 150)
    tiny = bench._tiny_kernel()
    order = []

    def sync():
        import jitguard.runtime.watch as w

        order.append(bool(w._STATE.watches))  # which arm this round runs under

    with stand_in_driver():
        x = FakeTensor(16 * rng.randrange(1, 1 << 20), dtype("float32"))
        n = rng.randrange(2, 1000)
        lo = bench.launch_overhead(lambda: tiny[(1,)](x, n, BLOCK=128), sync,
                                   launches=launches, rounds=rounds)
        assert lo["jitguard_calls_per_launch_with"] == 0  # a cache hit runs no jitguard code
        assert lo["python_calls_per_launch_with"] == lo["python_calls_per_launch_without"] > 0
        assert len(lo["us_per_launch_without"]) == len(lo["us_per_launch_with"]) == rounds
        # 2 syncs per round: an untimed round of each arm, then A B A B ...
        assert order[::2] == [False, True] * (rounds + 1)
        s = lo["spread_us_with"]
        assert s["min"] <= s["q1"] <= lo["median_us_with"] <= s["q3"] <= s["max"]

        from jitguard.runtime import steps

        def launch_with_jitguard_frame():  # what a hook on the hit path would look like
            steps.current_step()
            tiny[(1,)](x, n, BLOCK=128)

        lo2 = bench.launch_overhead(launch_with_jitguard_frame, lambda: None, launches=20, rounds=1)
        assert lo2["jitguard_calls_per_launch_with"] >= 1
