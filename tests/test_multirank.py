"""Recompiles across ranks, end to end: a real 4-process torch.distributed job (gloo) on CPU.

Each rank runs Triton's real JIT path (stand-in sm_90 driver, real ptxas compiles through
``kernel.warmup``) on its own stream of local token counts, with ``jitguard.mark_step`` and an
``all_reduce`` after every step, inside ``jitguard.watch(distributed=True, trace=...)``. The test
then checks what rank 0 printed and gathered in-process, and what ``jitguard report DIR`` makes of
the per-rank trace files: the straggler steps, ranks, kernel and culprit parameter of the
uncorrected kernel, and no stragglers for the corrected one (``do_not_specialize``).
"""
from __future__ import annotations

import json
import os
import random
import socket
import sys
import time

import pytest

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import triton.language as tl  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from jitguard.cli.report import report as report_cmd  # noqa: E402

WORLD = 4
STEPS = 5
TIMEOUT_S = 150


@triton.jit
def tp_scale_uncorrected(x_ptr, num_tokens, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < num_tokens) * 2.0, mask=i < num_tokens)


@triton.jit(do_not_specialize=["num_tokens"])
def tp_scale_corrected(x_ptr, num_tokens, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < num_tokens) * 2.0, mask=i < num_tokens)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, port: int, out: str, streams: list[list[int]]) -> None:
    os.environ["JITGUARD_MERGED_JSON"] = ""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from runtime_helpers import FakeTensor, stand_in_driver

    import jitguard

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    x = FakeTensor(4096, torch.float32)
    with stand_in_driver():
        for name, kernel in (("uncorrected", tp_scale_uncorrected), ("corrected", tp_scale_corrected)):
            os.environ["JITGUARD_MERGED_JSON"] = os.path.join(out, f"merged-{name}.json")
            trace_dir = os.path.join(out, name)
            with open(os.path.join(out, f"stderr-{name}-rank{rank}.txt"), "w") as stream, \
                    jitguard.watch(distributed=True, stream=stream,
                                   trace=os.path.join(trace_dir, f"rank{rank}.json")):
                for step in range(STEPS):
                    jitguard.mark_step(step)
                    kernel.warmup(x, streams[rank][step], BLOCK=16, grid=(1,))
                    total = torch.ones(1)
                    dist.all_reduce(total)  # the collective where the others wait
                    assert total.item() == WORLD
    dist.destroy_process_group()


def _value_class(n: int) -> str:
    return "one" if n == 1 else "div16" if n % 16 == 0 else "none"


def _draw_streams(rng: random.Random):
    """Local token counts per rank and step. Step 0 is the same plain count everywhere (lockstep
    first compile); then two random (step, rank) pairs get a count in a new value class."""
    first = rng.choice([3, 5, 7, 9, 11])
    plain = [n for n in range(2, 200) if _value_class(n) == "none"]
    streams = [[first] + [rng.choice(plain) for _ in range(STEPS - 1)] for _ in range(WORLD)]
    ranks = rng.sample(range(WORLD), 2)  # two different ranks, so each diff is against "i32"
    pairs = [(rng.randrange(1, STEPS), r) for r in ranks]
    specials = [16 * rng.randint(1, 8), 1]
    rng.shuffle(specials)
    expected: dict[int, dict[int, str]] = {}
    for (s, r), n in zip(pairs, specials):
        streams[r][s] = n
        expected.setdefault(s, {})[r] = _value_class(n)
    return streams, expected


def _run_job(tmp_path, streams):
    port = _free_port()
    ctx = mp.start_processes(_rank_main, args=(port, str(tmp_path), streams), nprocs=WORLD,
                             join=False, start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                pytest.fail(f"the {WORLD}-rank job did not finish in {TIMEOUT_S} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("tp")
    rng = random.Random()
    streams, expected = _draw_streams(rng)
    old = {k: os.environ.get(k) for k in ("TRITON_CACHE_DIR", "TRITON_DEFAULT_FP_FUSION")}
    os.environ["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")  # cold, shared by the ranks
    os.environ["TRITON_DEFAULT_FP_FUSION"] = "1"
    try:
        _run_job(tmp_path, streams)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return tmp_path, streams, expected


WORDS = {"div16": "i32, divisible by 16", "one": "folded constant 1"}


def test_uncorrected_kernel_straggler_steps_gathered_in_process(job):
    out, streams, expected = job
    merged = json.loads((out / "merged-uncorrected.json").read_text())
    assert merged["ranks"] == list(range(WORLD)) and merged["world_size"] == WORLD
    got = {s["step"]: s for s in merged["straggler_steps"]}
    assert sorted(got) == sorted(expected), (streams, expected)
    for step, by_rank in expected.items():
        s = got[step]
        assert s["compiling_ranks"] == sorted(by_rank)
        assert s["waiting_ranks"] == sorted(set(range(WORLD)) - set(by_rank))
        assert s["stall_ms"] > 0
        for c in s["compiles"]:
            assert c["kernel"].endswith("tp_scale_uncorrected")
            assert c["culprits"] == ["num_tokens"]
            assert c["why"] == f"num_tokens: i32 -> {WORDS[by_rank[c['rank']]]}"
            assert "do_not_specialize" in (c["remedy"] or "")
    assert merged["lockstep_compile_steps"] == [0]
    # rank 0 printed the merged report at the watch's exit; the other ranks printed nothing
    printed = (out / "stderr-uncorrected-rank0.txt").read_text()
    lines = {ln.split(":")[0].strip(): ln for ln in printed.splitlines() if ln.startswith("  step ")}
    assert sorted(lines) == [f"step {s}" for s in sorted(expected)]
    for step, by_rank in expected.items():
        line = lines[f"step {step}"]
        for r, cls in by_rank.items():
            assert f"rank {r} compiled tp_scale_uncorrected (num_tokens: i32 -> {WORDS[cls]}) in " in line
        assert f"; {WORLD - len(by_rank)} ranks waited" in line
    assert (out / "stderr-uncorrected-rank1.txt").read_text() == ""


def test_corrected_kernel_has_no_stragglers(job):
    out, _, _ = job
    merged = json.loads((out / "merged-corrected.json").read_text())
    assert merged["straggler_steps"] == []
    assert merged["totals"]["compiles"] == WORLD  # one compile per rank, at step 0
    assert merged["lockstep_compile_steps"] == [0]
    assert "no straggler compiles" in (out / "stderr-corrected-rank0.txt").read_text()


def test_report_cli_on_the_per_rank_trace_files(job):
    out, _, expected = job
    runner = CliRunner()
    res = runner.invoke(report_cmd, [str(out / "uncorrected"), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert [p["rank"] for p in data["processes"]] == list(range(WORLD))
    assert sorted(s["step"] for s in data["straggler_steps"]) == sorted(expected)
    # per kernel: the variants each rank compiled, and at which step
    (kernel,) = data["kernels"]
    by_variant = {tuple(sorted(v["params"].items())): v["steps_by_rank"] for v in kernel["variants"]}
    for step, by_rank in expected.items():
        for r, cls in by_rank.items():
            assert by_variant[(("num_tokens", WORDS[cls]),)][str(r)] == [step]
    res = runner.invoke(report_cmd, [str(out / "uncorrected"), "--fail-on-stragglers"])
    assert res.exit_code == 1 and "Straggler compiles" in res.output
    res = runner.invoke(report_cmd, [str(out / "corrected"), "--fail-on-stragglers"])
    assert res.exit_code == 0 and "no straggler compiles" in res.output


# ------------------------------------------------------------------------------------------------
# in-process gathering when it cannot happen: never a crash, never a hang


def test_gather_without_a_process_group_warns_and_returns_none():
    import io

    from jitguard.runtime.distributed import gather_and_report
    from jitguard.runtime.trace import ProcessInfo, Trace

    assert not dist.is_initialized()
    out = io.StringIO()
    assert gather_and_report(Trace(process=ProcessInfo(pid=1, host="h")), stream=out) is None
    assert "torch.distributed is not initialized" in out.getvalue()


def _late_rank_main(rank: int, port: int, out: str) -> None:
    import io

    os.environ["JITGUARD_GATHER_TIMEOUT"] = "2"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    from jitguard.runtime.distributed import gather_and_report
    from jitguard.runtime.trace import ProcessInfo, Trace

    if rank == 0:
        buf = io.StringIO()
        t0 = time.monotonic()
        result = gather_and_report(Trace(process=ProcessInfo(pid=os.getpid(), host="h")), stream=buf)
        with open(os.path.join(out, "rank0.txt"), "w") as fh:
            fh.write(f"{result is None} {time.monotonic() - t0:.1f}\n{buf.getvalue()}")
    else:  # never reaches the gather (crashed or stuck, as far as rank 0 can tell)
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(out, "rank0.txt")) and time.monotonic() < deadline:
            time.sleep(0.1)
    os._exit(0)


def test_gather_with_a_rank_that_never_arrives_times_out(tmp_path):
    ctx = mp.start_processes(_late_rank_main, args=(_free_port(), str(tmp_path)), nprocs=2,
                             join=False, start_method="spawn")
    deadline = time.monotonic() + 60
    try:
        while not ctx.join(timeout=1):
            assert time.monotonic() < deadline, "the gather hung"
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
    first, rest = (tmp_path / "rank0.txt").read_text().split("\n", 1)
    returned_none, seconds = first.split()
    assert returned_none == "True" and float(seconds) < 10
    assert "gathering traces to rank 0 failed" in rest and "per-process traces are unaffected" in rest
