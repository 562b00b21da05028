"""Merging traces across ranks: straggler steps, stalls, variants per rank (synthetic traces).

The end-to-end test with real processes, torch.distributed and real compiles is
tests/test_multirank.py; these tests pin down the merge logic on random synthetic jobs.
"""
from __future__ import annotations

import json
import random

import pytest

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions

from jitguard.runtime.merge import (
    MergeError,
    _ranks_words,
    describe_param,
    merge_traces,
)
from jitguard.runtime.text import render_merged as render_text
from jitguard.runtime.text import straggler_line
from jitguard.runtime.trace import (
    DiffEntry,
    Event,
    Param,
    ProcessInfo,
    Trace,
    load_trace,
    write_trace,
)

KERNEL = "kernels.rope_fp8.fused_inv_rope_fp8_quant"
CLASS_WORDS = {"none": "i32", "div16": "i32, divisible by 16", "one": "folded constant 1"}


def value_class(n: int) -> str:
    return "one" if n == 1 else "div16" if n % 16 == 0 else "none"


def num_tokens_param(n_cls: str) -> Param:
    # as jitguard.runtime.keys decodes it: a folded 1 is an int whose type became "constexpr"
    if n_cls == "one":
        return Param("num_tokens", 1, "int", "constexpr", value_class="one", constexpr=1)
    return Param("num_tokens", 1, "int", "i32", value_class=n_cls)


def compile_event(seq, step, n_cls, variant, prev_cls, ms, kernel=KERNEL):
    diff = []
    if prev_cls is not None:
        diff = [DiffEntry("num_tokens", CLASS_WORDS[prev_cls], CLASS_WORDS[n_cls],
                          f"num_tokens: {CLASS_WORDS[prev_cls]} -> {CLASS_WORDS[n_cls]}",
                          "value_class")]
    return Event(
        kind="compile", seq=seq, kernel=kernel, step=step, wall=1e9 + (step or 0) + seq * 1e-3,
        kernel_path="kernels/rope_fp8.py", kernel_line=33, compile_ms=ms,
        params=[Param("o_ptr", 0, "pointer", "*bf16", dtype="bf16", aligned16=True),
                num_tokens_param(n_cls),
                Param("BLOCK_T", 2, "constexpr", "constexpr", constexpr=8)],
        variant=variant, diff=diff,
        remedy='add "num_tokens" to do_not_specialize' if diff else None)


def simulate(rng: random.Random, world: int, steps: int):
    """A TP job where each rank compiles whenever its token count enters a new value class.
    Returns the traces and the expected {step: {rank: compile_ms}} of straggler steps."""
    counts = [[rng.choice([1, 16, 32, 48]) if rng.random() < 0.12 else rng.choice([3, 5, 7, 9])
               for _ in range(steps)] for _ in range(world)]
    counts_step0 = rng.choice([3, 5, 7])
    traces, compiles = [], {}
    for r in range(world):
        t = Trace(process=ProcessInfo(pid=1000 + r, host="node0", rank=r, world_size=world))
        seen: list[str] = []
        for s in range(steps):
            n = counts_step0 if s == 0 else counts[r][s]
            cls = value_class(n)
            if cls in seen:
                continue
            ms = round(rng.uniform(40, 500), 1)
            t.add(compile_event(len(seen), s, cls, len(seen) + 1, seen[-1] if seen else None, ms))
            compiles.setdefault(s, {})[r] = (cls, ms)
            seen.append(cls)
        traces.append(t)
    expected = {}
    for s, by_rank in compiles.items():
        if len(by_rank) == world:
            classes = {c for c, _ in by_rank.values()}
            if len(classes) == 1:
                continue  # lockstep: everyone compiled the same variant
        if len(by_rank) < world:
            expected[s] = {r: ms for r, (_, ms) in by_rank.items()}
    return traces, expected, compiles


@pytest.mark.parametrize("trial", range(6))
def test_straggler_steps_match_simulation(trial):
    rng = random.Random()
    world = rng.randint(2, 8)
    traces, expected, _ = simulate(rng, world, steps=rng.randint(20, 60))
    rng.shuffle(traces)  # order of files must not matter
    report = merge_traces(traces)
    got = {s.step: s for s in report.stragglers}
    assert sorted(got) == sorted(expected)
    for step, by_rank in expected.items():
        s = got[step]
        assert s.compiling_ranks == sorted(by_rank)
        assert s.waiting_ranks == sorted(set(range(world)) - set(by_rank))
        assert s.stall_ms == pytest.approx(max(by_rank.values()))
        for r in range(world):
            assert s.stall_by_rank[r] == pytest.approx(max(by_rank.values()) - by_rank.get(r, 0.0))
        for c in s.compiles:
            assert c.kernel == KERNEL
            assert c.culprits == ["num_tokens"]
    assert report.total_stall_ms == pytest.approx(sum(max(v.values()) for v in expected.values()))
    # every rank's totals survive the merge
    assert [p.compiles for p in report.processes] == [
        t.kernels[KERNEL].compiles for t in sorted(traces, key=lambda t: t.process.rank)]


def test_issue_example_line_and_variants_per_rank():
    world, step, culprit_rank = 8, 57, 3
    traces = []
    for r in range(world):
        t = Trace(process=ProcessInfo(pid=10 + r, host="gpu-node", rank=r, world_size=world))
        t.add(compile_event(0, 0, "none", 1, None, 380.0))
        if r == culprit_rank:
            t.add(compile_event(1, step, "div16", 2, "none", 412.0))
        traces.append(t)
    report = merge_traces(traces)
    assert [s.step for s in report.stragglers] == [step]
    assert straggler_line(report.stragglers[0]) == (
        "step 57: rank 3 compiled fused_inv_rope_fp8_quant (num_tokens: i32 -> i32, divisible "
        "by 16) in 412 ms; 7 ranks waited")
    assert report.lockstep_steps == [0]
    (kernel,) = report.kernels
    assert [v.description for v in kernel.variants] == [
        {"num_tokens": "i32"}, {"num_tokens": "i32, divisible by 16"}]
    assert kernel.variants[1].steps_by_rank == {culprit_rank: [step]}
    assert sorted(kernel.variants[0].steps_by_rank) == list(range(world))
    text = render_text(report)
    assert 'fix: add "num_tokens" to do_not_specialize' in text
    assert "1 straggler step: estimated stall 412 ms of job time" in text


def test_same_variant_on_two_ranks_in_one_step_and_others_wait():
    traces = []
    for r in range(4):
        t = Trace(process=ProcessInfo(pid=r, host="h", rank=r, world_size=4))
        t.add(compile_event(0, 0, "none", 1, None, 100.0))
        if r in (1, 2):
            t.add(compile_event(1, 5, "one", 2, "none", 50.0 * r))
        traces.append(t)
    (s,) = merge_traces(traces).stragglers
    assert (s.step, s.compiling_ranks, s.waiting_ranks) == (5, [1, 2], [0, 3])
    assert s.stall_ms == pytest.approx(100.0)
    assert s.stall_by_rank == {0: 100.0, 1: 50.0, 2: 0.0, 3: 100.0}
    assert {c.variant for c in s.compiles} == {2}  # one job-wide variant, two ranks
    assert "2 ranks waited ~100 ms" in straggler_line(s)


def test_corrected_kernel_has_no_stragglers():
    rng = random.Random()
    traces = []
    for r in range(4):
        t = Trace(process=ProcessInfo(pid=r, host="h", rank=r, world_size=4))
        t.add(Event(kind="compile", seq=0, kernel=KERNEL, step=0, wall=1.0, compile_ms=rng.uniform(50, 90),
                    params=[Param("num_tokens", 1, "int", "i32", value_class="none")]))
        traces.append(t)
    report = merge_traces(traces)
    assert report.stragglers == [] and report.lockstep_steps == [0]
    text = render_text(report)
    assert "no straggler compiles" in text
    assert "lockstep compiles (every rank built the same variants; nobody waited) at step 0" in text


def test_missing_rank_and_unstepped_events_are_warned():
    traces = []
    for r in (0, 2):
        t = Trace(process=ProcessInfo(pid=r, host="h", rank=r, world_size=3))
        t.add(compile_event(0, None, "none", 1, None, 10.0))
        traces.append(t)
    report = merge_traces(traces)
    assert report.missing_ranks == [1]
    text = render_text(report)
    assert "no trace for rank 1 of world size 3" in text
    assert "call jitguard.mark_step()" in text


def test_duplicate_rank_is_a_clear_error():
    a = Trace(process=ProcessInfo(pid=1, host="h", rank=0, world_size=2), path="a.json")
    b = Trace(process=ProcessInfo(pid=2, host="h", rank=0, world_size=2), path="b.json")
    with pytest.raises(MergeError, match=r"rank 0 appears in two traces \(a.json and b.json\)"):
        merge_traces([a, b])


def test_json_round_trip_through_files(tmp_path):
    rng = random.Random()
    traces, expected, _ = simulate(rng, 4, 40)
    for t in traces:
        write_trace(t, tmp_path / f"rank{t.process.rank}.json")
    loaded = [load_trace(tmp_path / f"rank{r}.json") for r in range(4)]
    data = json.loads(json.dumps(merge_traces(loaded).to_dict()))
    assert data["schema"] == "jitguard.merged_report" and data["version"] == 1
    assert [s["step"] for s in data["straggler_steps"]] == sorted(expected)
    assert data["totals"]["straggler_steps"] == len(expected)


def test_old_single_process_trace_still_loads_and_renders(tmp_path):
    # A version-1 trace as the first writers produced it: no rank, no steps, no optional fields.
    old = {
        "schema": "jitguard.trace", "version": 1,
        "process": {"pid": 4242, "host": "laptop", "argv": ["serve.py"], "rank": None,
                    "world_size": None, "start_wall": 1.7e9, "start_monotonic": 5.0},
        "events": [
            {"kind": "compile", "seq": 0, "kernel": "m.k", "step": None, "wall": 1.7e9,
             "monotonic": 6.0, "params": [{"name": "n", "index": 0, "kind": "int", "type": "i32",
                                           "value_class": "none"}],
             "options": {}, "variant": 1, "diff": [], "compile_ms": 41.0},
            {"kind": "compile", "seq": 1, "kernel": "m.k", "step": None, "wall": 1.7e9 + 1,
             "monotonic": 7.0, "params": [{"name": "n", "index": 0, "kind": "int", "type": "constexpr",
                                           "value_class": "one", "constexpr": 1}],
             "options": {}, "variant": 2,
             "diff": [{"param": "n", "before": "i32", "after": "folded constant 1", "what": "n: i32 -> folded constant 1"}],
             "compile_ms": 39.0},
        ],
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    report = merge_traces([load_trace(path)])
    assert report.processes[0].rank is None and report.processes[0].compiles == 2
    assert report.stragglers == []
    text = render_text(report)
    assert "pid 4242" in text or "4242" in text
    assert "folded constant 1" in text


@pytest.mark.parametrize("param,words", [
    (Param("n", 0, "int", "i64", value_class="div16"), "i64, divisible by 16"),
    (Param("n", 0, "int", "constexpr", value_class="one", constexpr=1), "folded constant 1"),
    (Param("B", 0, "constexpr", "constexpr", constexpr=64), "64 (constexpr)"),
    (Param("x", 0, "pointer", "*fp16", dtype="fp16", aligned16=False), "*fp16, unaligned"),
    (Param("x", 0, "pointer", "*fp16", dtype="fp16", aligned16=True), "*fp16, 16-byte aligned"),
])
def test_describe_param(param, words):
    assert describe_param(param) == words


def test_one_combined_fix_per_kernel_in_parameter_order():
    def ev(step, stride_cls, n_cls, diff):
        return Event(kind="compile", seq=0 if not diff else 1, kernel=KERNEL, step=step, wall=step,
                     compile_ms=100.0, variant=2 if diff else 1, diff=diff,
                     params=[num_tokens_param(n_cls),
                             Param("scale_stride", 2, "int", "i32", value_class=stride_cls)])
    a = Trace(process=ProcessInfo(pid=1, host="h", rank=0, world_size=2))
    b = Trace(process=ProcessInfo(pid=2, host="h", rank=1, world_size=2))
    a.add(ev(0, "none", "none", []))
    b.add(ev(0, "none", "none", []))
    # rank 0 changes scale_stride, rank 1 num_tokens: the kernel-level fix covers both
    a.add(ev(3, "div16", "none", [DiffEntry("scale_stride", "i32", "i32, divisible by 16", "s", "value_class")]))
    b.add(ev(5, "none", "div16", [DiffEntry("num_tokens", "i32", "i32, divisible by 16", "n", "value_class")]))
    (kernel,) = merge_traces([b, a]).kernels
    assert kernel.culprits == ["num_tokens", "scale_stride"]
    assert kernel.fix.startswith('add "num_tokens", "scale_stride" to do_not_specialize')


def test_wide_jobs_list_steps_and_ranks_instead_of_a_column_per_rank():
    rng = random.Random()
    world = rng.randint(17, 64)
    late = sorted(rng.sample(range(world), 3))
    traces = []
    for r in range(world):
        t = Trace(process=ProcessInfo(pid=r, host="h", rank=r, world_size=world))
        t.add(compile_event(0, 0, "none", 1, None, 50.0))
        if r in late:
            t.add(compile_event(1, 9, "div16", 2, "none", 80.0))
        traces.append(t)
    text = render_text(merge_traces(traces))
    assert f"s0: ranks 0-{world - 1}" in text
    assert f"s9: ranks {_ranks_words(late)}" in text
    assert f"r{world - 1}" not in text  # no per-rank columns
    (s,) = merge_traces(traces).stragglers
    assert s.compiling_ranks == late and len(s.waiting_ranks) == world - 3


def test_rank_lists_are_compressed():
    assert _ranks_words([0, 1, 2, 3, 7, 9, 10]) == "0-3, 7, 9, 10"


def test_autotune_rebenchmark_on_one_rank_counts_once():
    from jitguard.runtime.trace import AutotuneInfo

    rng = random.Random()
    bench_ms = rng.uniform(500, 2000)
    config_ms = [rng.uniform(50, 150) for _ in range(3)]
    traces = []
    for r in range(3):
        t = Trace(process=ProcessInfo(pid=r, host="h", rank=r, world_size=3))
        t.add(compile_event(0, 0, "none", 1, None, 50.0))
        if r == 2:
            for i, ms in enumerate(config_ms):
                t.add(Event(kind="compile", seq=1 + i, kernel=KERNEL, step=4, wall=4.0 + i, compile_ms=ms,
                            autotuning=True, variant=2 + i,
                            params=[Param("BLOCK", 0, "constexpr", "constexpr", constexpr=32 << i)]))
            t.add(Event(kind="autotune", seq=4, kernel=KERNEL, step=4, wall=5.0, variant=2,
                        autotune=AutotuneInfo(key={"n": 4096}, configs=3, bench_ms=bench_ms)))
        traces.append(t)
    (s,) = merge_traces(traces).stragglers
    assert (s.step, s.compiling_ranks, s.waiting_ranks) == (4, [2], [0, 1])
    assert s.stall_ms == pytest.approx(bench_ms)  # not bench + the config compiles again
    assert [c.kind for c in s.compiles] == ["autotune"]
    assert "rank 2 autotuned fused_inv_rope_fp8_quant (key n=4096; 3 configs benchmarked) in " \
        in straggler_line(s)
