"""Traces are input from elsewhere: every field is checked against the schema tables, files are
read only when regular and not too large, and anything wrong is one line (``TraceError``; exit 2
from ``jitguard report``, a usage error from ``jitguard fix --from-trace``), never a traceback."""
from __future__ import annotations

import copy
import importlib.util
import json
import os
import random
import subprocess
import sys

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions

from jitguard.cli.fix import fix as fix_cmd  # noqa: E402
from jitguard.cli.report import report as report_cmd  # noqa: E402
from jitguard.runtime import trace as T  # noqa: E402
from jitguard.runtime.findings import findings_from_trace  # noqa: E402
from jitguard.runtime.merge import merge_traces  # noqa: E402
from jitguard.runtime.text import render_merged as render_text  # noqa: E402

RNG = random.Random(os.urandom(8))


def base_trace() -> dict:
    p = T.Param
    ev1 = T.Event(kind="compile", seq=0, kernel="m.k", step=0, wall=1.7e9, monotonic=5.0, thread="MainThread",
                  kernel_path="/src/m.py", kernel_line=3, call_path="/src/serve.py", call_line=9,
                  call_stack=["/src/main.py:4"], compile_ms=40.0, disk_cache_hit=False,
                  params=[p("x", 0, "pointer", "*fp16", dtype="fp16", aligned16=True),
                          p("n", 1, "int", "i32", value_class="none"),
                          p("B", 2, "constexpr", "constexpr", constexpr=64)],
                  options={"num_warps": 4}, key="[('*fp16', 'D'), ('i32', ''), ('constexpr', 64)]{}",
                  variant=1, overhead_ms=0.2)
    ev2 = copy.deepcopy(ev1)
    ev2.seq, ev2.step, ev2.variant, ev2.closest_variant = 1, 1, 2, 1
    ev2.params[1] = p("n", 1, "int", "i32", value_class="div16")
    ev2.diff = [T.DiffEntry("n", "i32", "i32, divisible by 16", "n: i32 -> i32, divisible by 16", "value_class")]
    ev2.remedy = 'add "n" to do_not_specialize'
    at = T.Event(kind="autotune", seq=2, kernel="m.k", step=2, wall=1.7e9 + 2, monotonic=7.0, variant=2,
                 closest_variant=1, diff=[T.DiffEntry("n", "17", "32", "n (autotune key): 17 -> 32", "autotune_key")],
                 autotune=T.AutotuneInfo(key={"n": 32}, configs=4, bench_ms=12.0, best_config="BLOCK: 64",
                                         cache_hit=False))
    tr = T.Trace(process=T.ProcessInfo(pid=42, host="h", argv=["serve.py"], rank=0, world_size=2, local_rank=0,
                                       python="3.11", triton_version="3.9.0", jitguard_version="0.1.0",
                                       mode="record", start_wall=1.7e9, start_monotonic=4.0, end_wall=1.7e9 + 9,
                                       end_monotonic=13.0, run_id="r1"))
    for e in (ev1, ev2, at):
        tr.add(e)
    return tr.to_dict()


def _fields(table, prefix=()):
    """(path, Field) of every field of every table, reaching into arrays through their first item."""
    for f in table:
        path = prefix + (f.name,)
        yield path, f
        sub = f.fields or (f.items if isinstance(f.items, tuple) else None)
        if sub is not None:
            yield from _fields(sub, path + ((0,) if isinstance(f.items, tuple) else ()))


def _set(doc, path, value):
    cur = doc
    for step in path[:-1]:
        if isinstance(step, int):
            cur = cur[step]
        else:
            if cur.get(step) is None:
                return False
            cur = cur[step]
            if isinstance(cur, list):
                if not cur:
                    return False
    if isinstance(cur, list):
        cur = cur[0]
    cur[path[-1]] = value
    return True


VALUE_OF = {"string": "12345", "integer": 7, "number": 1.5, "boolean": True, "array": [1],
            "object": {"a": 1}, "null": None}


def test_the_tables_cover_every_dataclass_field():
    """The tables are the one source of truth for the format: each dataclass field has its line."""
    pairs = [(T.Event, T.EVENT_FIELDS), (T.Param, T.PARAM_FIELDS), (T.DiffEntry, T.DIFF_FIELDS),
             (T.AutotuneInfo, T.AUTOTUNE_FIELDS), (T.ProcessInfo, T.PROCESS_FIELDS)]
    for cls, table in pairs:
        assert set(cls.__dataclass_fields__) == {f.name for f in table}, cls.__name__
    assert set(T.Trace().to_dict()) == {f.name for f in T.TRACE_FIELDS}


def test_the_base_trace_is_valid_for_both_checkers():
    jsonschema = pytest.importorskip("jsonschema")
    doc = base_trace()
    jsonschema.validate(doc, T.TRACE_JSON_SCHEMA)
    T.validate(doc)


@pytest.mark.parametrize("path, wrong", [
    (("events", 0, "kernel"), 12345), (("events", 1, "variant"), None), (("events", 0, "call_path"), 5),
    (("events", 0, "options"), [1]), (("events", 0, "params"), "x"), (("events", 1, "diff", 0, "what"), 3),
    (("events", 2, "autotune", "key"), "n"), (("process", "argv"), "serve.py"), (("process", "pid"), True),
    (("kernels", "m.k", "compiles"), "3"), (("events", 0, "call_stack"), [1, 2]),
])
def test_wrong_typed_fields_are_one_line_errors(tmp_path, path, wrong):
    doc = base_trace()
    cur = doc
    for step in path[:-1]:
        cur = cur[step]
    cur[path[-1]] = wrong
    f = tmp_path / "t.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(T.TraceError) as err:
        T.load_trace(f)
    msg = str(err.value)
    assert "\n" not in msg and "malformed trace" in msg and str(path[-1]) in msg
    res = CliRunner().invoke(report_cmd, [str(f)])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "malformed trace" in res.output
    assert not isinstance(res.exception, (TypeError, AttributeError, KeyError, ValueError))
    if importlib.util.find_spec("libcst") is not None:  # jitguard fix needs it (a core dependency)
        res = CliRunner().invoke(fix_cmd, ["--from-trace", str(f), str(tmp_path)])
        assert res.exit_code == 2 and "malformed trace" in res.output and "internal error" not in res.output


def test_every_field_of_the_wrong_type_is_refused_or_rendered():
    """Each field of each table, given each JSON type it must not have: load_trace refuses it with
    one line, or (a type the field allows) the trace loads and every consumer renders it."""
    for path, f in _fields(T.TRACE_FIELDS):
        if f.types == "any" or path[0] in ("schema", "version"):
            continue
        for jtype, wrong in VALUE_OF.items():
            allowed = f.types.split("|")
            if jtype in allowed or (jtype == "integer" and "number" in allowed):
                continue
            doc = base_trace()
            if not _set(doc, path, wrong):
                continue
            try:
                tr = T.Trace.from_dict(doc)
            except T.TraceError as exc:
                assert "\n" not in str(exc) and path[-1] in str(exc), (path, jtype, exc)
                continue
            pytest.fail(f"{'.'.join(map(str, path))} = {wrong!r} loaded: {tr}")


def test_values_in_range_of_every_type_go_through_every_consumer():
    """Random documents that pass validation never crash the report, the merge or the findings."""
    samples = {"string": ["", "x:y", "a" * 300], "integer": [0, 1, 2**40], "number": [0.0, -1.5, 1e300],
               "boolean": [True, False], "null": [None], "array": [[]], "object": [{}]}
    for _ in range(300):
        doc = base_trace()
        for path, f in RNG.sample(list(_fields(T.TRACE_FIELDS)), 6):
            if path[0] in ("schema", "version") or f.types == "any":
                continue
            jtype = RNG.choice(f.types.split("|"))
            choices = list(f.enum) if f.enum and jtype != "null" else samples[jtype]
            _set(doc, path, RNG.choice(choices))
        try:
            tr = T.Trace.from_dict(doc)
        except T.TraceError:
            continue
        render_text(merge_traces([tr]))
        findings_from_trace(tr)
        from jitguard.runtime.text import render_trace as render_one

        render_one(tr)


def test_world_size_and_rank_are_bounded(tmp_path):
    doc = base_trace()
    doc["process"]["world_size"] = 10**9
    with pytest.raises(T.TraceError, match="world_size: 1000000000 is above the bound"):
        T.Trace.from_dict(doc)


def test_deep_nesting_is_one_line(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(T.TraceError, match="nested too deeply|not a jitguard trace"):
        T.load_trace(f)
    doc = base_trace()
    f.write_text(json.dumps(doc)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    res = CliRunner().invoke(report_cmd, [str(f)])
    assert res.exit_code == 2 and res.output.count("\n") == 1


def test_size_cap_and_non_regular_files(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(T.MAX_TRACE_BYTES + 1)  # sparse: no disk used
    with pytest.raises(T.TraceError, match="larger than"):
        T.load_trace(big)
    small = tmp_path / "small.json"
    small.write_text(json.dumps(base_trace()))
    with pytest.raises(T.TraceError, match="larger than"):
        T.read_json_file(small, max_bytes=100)
    if os.path.exists("/dev/zero"):
        zero = tmp_path / "zero.json"
        zero.symlink_to("/dev/zero")
        with pytest.raises(T.TraceError, match="not a regular file"):
            T.load_trace(zero)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_in_a_trace_directory_does_not_hang_report(tmp_path):
    d = tmp_path / "traces"
    d.mkdir()
    (d / "rank0.json").write_text(json.dumps(base_trace()))
    os.mkfifo(d / "stuck.json")
    with pytest.raises(T.TraceError, match="not a regular file"):
        T.load_trace(d / "stuck.json")
    r = subprocess.run([sys.executable, "-m", "jitguard", "report", str(d)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "skipped" in r.stderr and "stuck.json: not a regular file" in r.stderr
    assert "m.k" in r.stdout or "k " in r.stdout
