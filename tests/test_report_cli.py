"""``jitguard report``: one trace, many traces merged across ranks, text and JSON, errors."""
from __future__ import annotations

import json
import random

import pytest

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions
from click.testing import CliRunner

from jitguard.cli import main
from jitguard.runtime.trace import DiffEntry, Event, Param, ProcessInfo, Trace, write_trace

KERNEL = "model.layers.fused_inv_rope_fp8_quant"


def _param(cls: str) -> Param:
    if cls == "one":
        return Param("num_tokens", 1, "int", "constexpr", value_class="one", constexpr=1)
    return Param("num_tokens", 1, "int", "i32", value_class=cls)


WORDS = {"none": "i32", "div16": "i32, divisible by 16", "one": "folded constant 1"}


def _event(seq: int, step: int, cls: str, ms: float, prev: str | None) -> Event:
    diff = [] if prev is None else [DiffEntry("num_tokens", WORDS[prev], WORDS[cls],
                                              f"num_tokens: {WORDS[prev]} -> {WORDS[cls]}", "value_class")]
    return Event(kind="compile", seq=seq, kernel=KERNEL, step=step, wall=1.7e9 + step,
                 kernel_path="/srv/model/layers.py", kernel_line=120, call_path="/srv/model/attn.py",
                 call_line=88, compile_ms=ms, params=[_param(cls)], variant=seq + 1, diff=diff,
                 remedy='add "num_tokens" to do_not_specialize' if diff else None)


def _job(tmp_path, world: int, rng: random.Random, run_id: str | None = None, start: float = 0.0):
    """Write one trace per rank; returns {straggler step: {rank: class}}."""
    steps = rng.sample(range(1, 50), world - 1)
    expected = {}
    for r in range(world):
        t = Trace(process=ProcessInfo(pid=100 + r, host="node-a", rank=r, world_size=world,
                                      triton_version="3.6.0", run_id=run_id, start_wall=start))
        t.add(_event(0, 0, "none", rng.uniform(300, 500), None))
        if r:  # every rank but 0 crosses into a new class once, each at its own step
            cls = rng.choice(["div16", "one"])
            t.add(_event(1, steps[r - 1], cls, rng.uniform(40, 500), "none"))
            expected[steps[r - 1]] = {r: cls}
        write_trace(t, tmp_path / f"jitguard-trace.rank{r}.{run_id or ''}pid{100 + r}.json")
    return expected


def _run(*args):
    return CliRunner().invoke(main, ["report", *map(str, args)])


def test_directory_is_merged_across_ranks(tmp_path):
    rng = random.Random()
    world = rng.randint(2, 6)
    expected = _job(tmp_path, world, rng)
    res = _run(tmp_path)
    assert res.exit_code == 0, res.output
    lines = [ln.strip() for ln in res.output.splitlines()]
    straggler_lines = [ln for ln in lines if ln.startswith("step ")]
    assert len(straggler_lines) == len(expected)
    for step, by_rank in expected.items():
        ((r, cls),) = by_rank.items()
        (line,) = [ln for ln in straggler_lines if ln.startswith(f"step {step}: ")]
        assert f"rank {r} compiled fused_inv_rope_fp8_quant (num_tokens: i32 -> {WORDS[cls]}) in " in line
        assert line.endswith(f"; {world - 1} rank{'s' if world > 2 else ''} waited")
    assert f"ranks 0-{world - 1}" in res.output or f"ranks 0, 1" in res.output
    assert 'fix: add "num_tokens" to do_not_specialize' in res.output


def test_json_output_and_output_file(tmp_path):
    rng = random.Random()
    expected = _job(tmp_path, 4, rng)
    out = tmp_path / "out" / "merged.txt"
    out.parent.mkdir()
    res = _run(tmp_path, "--format", "json", "-o", out)
    assert res.exit_code == 0 and res.output == ""
    data = json.loads(out.read_text())
    assert data["schema"] == "jitguard.merged_report"
    assert sorted(s["step"] for s in data["straggler_steps"]) == sorted(expected)
    assert data["totals"]["compiles"] == 4 + 3
    assert data["totals"]["estimated_stall_ms"] == pytest.approx(
        sum(s["stall_ms"] for s in data["straggler_steps"]), abs=0.01)


def test_single_trace_uses_the_per_process_report(tmp_path):
    t = Trace(process=ProcessInfo(pid=7, host="h", triton_version="3.9.0"))
    t.add(_event(0, 0, "none", 50.0, None))
    t.add(_event(1, 3, "one", 40.0, "none"))
    write_trace(t, tmp_path / "one.json")
    res = _run(tmp_path / "one.json")
    assert res.exit_code == 0, res.output
    assert "num_tokens: i32 -> folded constant 1" in res.output
    assert "2 compiles of 1 kernel, 1 recompile" in res.output  # the single-trace renderer's header


def test_no_merge_renders_each_trace(tmp_path):
    _job(tmp_path, 3, random.Random())
    res = _run(tmp_path, "--no-merge")
    assert res.exit_code == 0
    assert res.output.count("jitguard: ") == 3 and "Straggler" not in res.output
    res = _run(tmp_path, "--no-merge", "--format", "json")
    assert res.exit_code == 2 and "--no-merge renders text" in res.output


def test_fail_on_stragglers_and_max_stragglers(tmp_path):
    _job(tmp_path, 5, random.Random())
    res = _run(tmp_path, "--fail-on-stragglers", "--max-stragglers", "2")
    assert res.exit_code == 1
    assert sum(1 for ln in res.output.splitlines() if ln.strip().startswith("step ")) == 2
    assert "2 more straggler steps" in res.output


def test_non_trace_json_in_a_directory_is_skipped_with_a_note(tmp_path):
    _job(tmp_path, 2, random.Random())
    (tmp_path / "config.json").write_text('{"model": "x"}')
    res = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert res.exit_code == 0
    assert "skipped" in res.stderr and "config.json: not a jitguard trace" in res.stderr


@pytest.mark.parametrize("setup,message", [
    (lambda p: p / "missing.json", "no such file or directory"),
    (lambda p: (p / "bad.json").write_text("{not json") and p / "bad.json", "not JSON"),
    (lambda p: (p / "other.json").write_text('{"a": 1}') and p / "other.json", "not a jitguard trace"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "no jitguard traces"),
    (lambda p: (p / "v9.json").write_text('{"schema": "jitguard.trace", "version": 9}') and p / "v9.json",
     "trace version 9 is not supported"),
])
def test_bad_input_is_one_line_and_status_2(tmp_path, setup, message):
    res = CliRunner().invoke(main, ["report", str(setup(tmp_path))])
    assert res.exit_code == 2
    assert message in res.stderr and "Traceback" not in res.output


def test_two_traces_of_the_same_rank_are_refused(tmp_path):
    for pid in (1, 2):
        write_trace(Trace(process=ProcessInfo(pid=pid, host="h", rank=0, world_size=2)),
                    tmp_path / f"r0-{pid}.json")
    res = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "rank 0 appears in two traces" in res.stderr


def test_a_directory_of_run_directories_points_at_them(tmp_path):
    for arm in ("before", "after"):
        (tmp_path / arm).mkdir()
        _job(tmp_path / arm, 2, random.Random())
    res = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert res.exit_code == 2
    assert "its subdirectories" in res.stderr and str(tmp_path / "after") in res.stderr
    assert CliRunner().invoke(main, ["report", str(tmp_path / "after")]).exit_code == 0


def test_a_directory_with_several_runs_reports_each_or_the_one_asked_for(tmp_path):
    rng = random.Random()
    ids = [f"2026{rng.randrange(10**8):08d}-{i}{rng.randrange(16**5):05x}" for i in range(2)]
    worlds = [rng.randint(2, 5), rng.randint(2, 5)]
    expected = [_job(tmp_path, worlds[i], rng, run_id=ids[i], start=1.7e9 + 100 * i) for i in range(2)]
    # a trace written before run ids existed (no "run_id" key at all) still loads: its own group
    old = Trace(process=ProcessInfo(pid=7, host="node-b", rank=0, world_size=1, start_wall=1.6e9))
    old.add(_event(0, 0, "none", 100.0, None))
    data = old.to_dict()
    del data["process"]["run_id"]
    write_trace(data, tmp_path / "old.json")

    res = _run(tmp_path)  # ranks repeat across runs: split by run instead of refusing
    assert res.exit_code == 0, res.output
    heads = [ln for ln in res.output.splitlines() if ln.startswith("=== run ")]
    assert [h.split()[2].rstrip(":") for h in heads] == ["(no", ids[0], ids[1]]  # oldest first
    assert f"=== run {ids[0]}: {worlds[0]} traces" in res.output
    for i in range(2):
        section = res.output.split(f"=== run {ids[i]}")[1].split("=== run")[0]
        steps = [ln.strip().split(":")[0] for ln in section.splitlines() if ln.strip().startswith("step ")]
        assert sorted(steps) == sorted(f"step {s}" for s in expected[i])

    one = _run(tmp_path, "--run", ids[1][:14], "--format", "json")  # a unique prefix
    assert one.exit_code == 0, one.output
    data = json.loads(one.output)
    assert data["run_id"] == ids[1] and data["world_size"] == worlds[1]
    assert sorted(s["step"] for s in data["straggler_steps"]) == sorted(expected[1])
    assert _run(tmp_path, "--run", "none").output.startswith("jitguard: 1 compile")

    many = _run(tmp_path, "--format", "json")
    assert many.exit_code == 2 and "3 runs" in many.stderr and ids[0] in many.stderr
    unknown = _run(tmp_path, "--run", "nope")
    assert unknown.exit_code == 2 and "no such run" in unknown.stderr
