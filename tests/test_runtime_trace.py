"""Trace schema, key decoding/diffs, findings, predict and the single-trace report."""
from __future__ import annotations

import json
import os
import random

import pytest

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions

triton = pytest.importorskip("triton")

import jitguard  # noqa: E402
from jitguard.runtime.text import render_trace as render_text  # noqa: E402
from jitguard.runtime.text import summarize  # noqa: E402
from jitguard.runtime import compat, keys, steps  # noqa: E402
from jitguard.runtime.findings import findings_from_trace  # noqa: E402
from jitguard.runtime.trace import (  # noqa: E402
    TRACE_JSON_SCHEMA,
    Event,
    Trace,
    TraceError,
    load_trace,
    load_traces,
    write_trace,
)
from runtime_helpers import FakeTensor, cache_keys, dtype, stand_in_driver  # noqa: E402
from runtime_kernels import copy_body, fresh  # noqa: E402

RNG = random.Random(os.urandom(8))
PARAMS = [("x_ptr", False, False, False), ("n", False, False, False), ("BLOCK", True, False, False)]


def odd():
    while True:
        n = RNG.randrange(17, 1 << 20)
        if n % 16:
            return n


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One watched run with every kind of change (compiled once for the module)."""
    cache = tmp_path_factory.mktemp("triton-cache")
    old = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    steps.reset_steps()
    try:
        with stand_in_driver():
            k = fresh()
            x = FakeTensor(16 * RNG.randrange(1, 1 << 20), dtype("float16"))
            y = FakeTensor(16 * RNG.randrange(1, 1 << 20), dtype("float16"))
            ns = [odd(), 16 * RNG.randrange(1, 1000), 1]
            with jitguard.watch() as w:
                for step, n in enumerate(ns):
                    jitguard.mark_step(step)
                    k.warmup(x, y, n, BLOCK=64, grid=(1,))
                k.warmup(x, y, ns[0], BLOCK=128, grid=(1,))
                k.warmup(x, y, ns[0], BLOCK=64, grid=(1,), num_warps=8)
    finally:
        if old is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = old
    return w, k, ns


def test_trace_validates_against_schema_and_round_trips(recorded, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    w, _, _ = recorded
    path = w.to_json(tmp_path / "t.json")
    data = json.loads(open(path).read())
    jsonschema.validate(data, TRACE_JSON_SCHEMA)
    assert data["schema"] == "jitguard.trace" and data["version"] == 2
    proc = data["process"]
    assert proc["pid"] == os.getpid() and proc["host"] and proc["start_wall"] > 1.7e9
    assert proc["end_monotonic"] >= proc["start_monotonic"]
    assert proc["triton_version"] == triton.__version__
    assert [e["step"] for e in data["events"]] == [0, 1, 2, 2, 2]
    walls = [e["wall"] for e in data["events"]]
    assert walls == sorted(walls) and all(proc["start_wall"] <= t <= proc["end_wall"] for t in walls)
    again = load_trace(path)
    assert again.to_dict() == data
    assert [n for n in os.listdir(tmp_path)] == ["t.json"]  # the atomic write left no temp file


def test_trace_size_is_bounded(recorded):
    w, _, _ = recorded
    small = Trace(max_events=2)
    for e in w.trace.events:
        small.add(e)
    assert len(small.events) == 2 and small.dropped_events == len(w.trace.events) - 2
    kernel = w.trace.events[0].kernel
    assert small.kernels[kernel].compiles == len(w.trace.events)  # totals stay exact
    long = Event(kind="compile", seq=0, kernel="k", key="x" * 100_000)
    assert len(long.to_dict()["key"]) <= 2000


def test_rank_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "3")
    with jitguard.watch() as w:
        pass
    p = w.snapshot().process
    assert (p.rank, p.world_size, p.local_rank) == (3, 8, 3)


@pytest.mark.parametrize("content, words", [
    ("{not json", "not JSON"),
    ('{"schema": "other"}', "not a jitguard trace"),
    ('{"schema": "jitguard.trace", "version": 99, "process": {}, "events": []}', "version 99"),
    ('{"schema": "jitguard.trace", "version": 1, "process": {}, "events": [{"kind": "compile"}]}', "malformed"),
])
def test_bad_traces_are_one_line_errors(tmp_path, content, words):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(TraceError, match=words):
        load_trace(p)
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "missing.json")


def test_load_traces_expands_directories(recorded, tmp_path):
    w, _, _ = recorded
    for r in range(3):
        w.to_json(tmp_path / f"rank{r}.json")
    (tmp_path / "notes.txt").write_text("x")
    assert len(load_traces([tmp_path])) == 3


def test_decode_and_diff_synthetic_keys():
    a = keys.decode_key("[('*fp16', 'D'), ('i32', ''), ('constexpr', 16)]{'debug': False}", PARAMS)
    b = keys.decode_key("[('*fp16', ''), ('constexpr', 1), ('constexpr', 32)]{'num_warps': 4, 'debug': False}", PARAMS)
    assert [keys.describe(p) for p in a.params] == ["*fp16, 16-byte aligned", "i32", "16"]
    assert [d.what for d in keys.diff(a, b)] == [
        "x_ptr: 16-byte aligned -> unaligned", "n: i32 -> folded constant 1",
        "BLOCK (constexpr): 16 -> 32", "options: num_warps default -> 4"]
    c = keys.decode_key("[('*fp16', 'D'), ('i32', ''), ('constexpr', 16)]{'debug': False, 'num_warps': 4}", PARAMS)
    d = keys.decode_key("[('*fp16', 'D'), ('i32', ''), ('constexpr', 16)]{'num_warps': 4, 'debug': False}", PARAMS)
    assert [x.change for x in keys.diff(c, d)] == ["option_order"]
    # a constexpr that is not a Python literal, and quotes/brackets inside values
    e = keys.decode_key("[('*bf16', None), ('i64', 'D'), ('constexpr', fp8e4nv)]{'note': \"a]{b\"}", PARAMS)
    assert e.params[2].constexpr == "fp8e4nv" and e.options == {"note": "a]{b"}
    assert keys.describe(e.params[0]) == "*bf16, alignment not specialized"
    assert keys.describe(e.params[1]) == "i64, divisible by 16"


def test_closest_prefers_fewest_params_then_facets():
    v = [keys.decode_key(f"[('*fp16', 'D'), {n}, ('constexpr', 16)]{{}}", PARAMS)
         for n in ("('i32', '')", "('i32', 'D')", "('constexpr', 1)")]
    new = keys.decode_key("[('*fp16', 'D'), ('i64', 'D'), ('constexpr', 16)]{}", PARAMS)
    assert keys.closest(new, v) == 1  # i32, divisible by 16 -> i64, divisible by 16
    assert compat.split_key("[('i32', '')]{'a': 1}") == ("[('i32', '')]", "{'a': 1}")


def test_findings_from_trace(recorded):
    w, _, _ = recorded
    fs = findings_from_trace(w.snapshot())
    by = {(f.code, f.param): f for f in fs}
    assert set(by) == {("JG001", "n"), ("JG002", "BLOCK"), ("JG007", None)}
    jg1 = by[("JG001", "n")]
    assert jg1.source == "runtime" and jg1.fix_safety == "safe" and jg1.kernel.endswith("copy_body")
    assert jg1.details["recompiles"] == 2 and "do_not_specialize" in jg1.message
    with open(jg1.details["kernel_path"]) as fh:
        assert fh.read().splitlines()[jg1.line - 1].startswith("def copy_body(")
    assert "num_warps" in by[("JG007", None)].message


def test_report_text_explains_each_recompile(recorded, tmp_path):
    w, _, ns = recorded
    text = render_text(load_trace(w.to_json(tmp_path / "t.json")))
    assert "copy_body" in text and "5 variants, 4 recompiles" in text
    for line in ("n: i32 -> i32, divisible by 16", "n: i32 -> folded constant 1",
                 "BLOCK (constexpr): 64 -> 128", "options: num_warps default -> 8"):
        assert line in text
    assert 'fix: add "n" to do_not_specialize' in text
    (row,) = summarize(w.trace)
    assert row["recompiles"] == 4 and {c["param"] for c in row["culprits"]} == {"n", "BLOCK", "options.num_warps"}


def test_predict_matches_what_triton_compiles(recorded):
    _, k, _ = recorded
    x = FakeTensor(16 * RNG.randrange(1, 1 << 20), dtype("float16"))
    y = FakeTensor(16 * RNG.randrange(1, 1 << 20), dtype("float16"))
    ns = list(range(1, 513))
    pred = jitguard.predict(copy_body_kernel(), [(x, y, n, 64) for n in ns])
    assert len(pred) == 3  # folded 1, divisible by 16, other
    assert {keys.describe(v.params[2]) for v in pred} == {"folded constant 1", "i32, divisible by 16", "i32"}
    assert "do_not_specialize" in pred.explain()
    fixed = jitguard.predict(fresh(copy_body, do_not_specialize=["n"]), [(x, y, n, 64) for n in ns])
    assert len(fixed) == 1 and fixed.variants[0].calls == list(range(len(ns)))
    # ground truth: the keys predicted are exactly the keys Triton puts in its cache
    sample = RNG.sample(ns, 6) + [1, 16 * RNG.randrange(1, 30)]
    real = fresh()
    with stand_in_driver():
        for n in sample:
            real.warmup(x, y, n, BLOCK=64, grid=(1,))
    cached = set(cache_keys(real))
    assert set(jitguard.predict(real, [((x, y, n), {"BLOCK": 64}) for n in sample]).keys) == cached


def copy_body_kernel():
    return fresh()


def test_predict_rejects_bad_input():
    with pytest.raises(TypeError, match="@triton.jit"):
        jitguard.predict(lambda: None, [()])
    with pytest.raises(ValueError, match="cuda:90"):
        jitguard.predict(fresh(), [()], target="sm90")


def test_implicit_run_kwargs_match_run_source():
    names = compat.implicit_run_kwargs(fresh())
    assert "debug" in names and names["debug"] is False


def test_variant_index_agrees_with_brute_force():
    """Hundreds of variants (a per-call constexpr): the index picks a variant as close as the full
    search does (same number of differing parameters and facets)."""
    def key(ptr_attr, n_entry, block):
        return f"[('*fp16', '{ptr_attr}'), {n_entry}, ('constexpr', {block})]{{}}"

    n_entries = ["('i32', '')", "('i32', 'D')", "('constexpr', 1)", "('i64', 'D')"]
    index, flat = keys.VariantIndex(), []
    for _ in range(300):
        v = keys.decode_key(key(RNG.choice("D "), RNG.choice(n_entries), 16 * RNG.randrange(1, 400)), PARAMS)
        if flat:
            got, want = index.closest(v), keys.closest(v, flat)
            assert keys.distance(v, flat[got]) == keys.distance(v, flat[want])
        index.append(v)
        flat.append(v)
    assert len(index) == 300 and index[5] is flat[5]


def test_predict_applies_heuristics():
    k = triton.heuristics({"BLOCK": lambda a: triton.next_power_of_2(max(a["n"], 16))})(
        fresh(copy_body, do_not_specialize=["n"]))
    x = FakeTensor(16 * RNG.randrange(1, 1 << 20), dtype("float16"))
    ns = RNG.sample(range(1, 1025), 40)
    pred = jitguard.predict(k, [(x, x, n) for n in ns])
    blocks = {triton.next_power_of_2(max(n, 16)) for n in ns}
    assert len(pred) == len(blocks)
    assert {v.params[3].constexpr for v in pred} == blocks
    assert all(d.change == "constexpr" for v in pred for d in v.diff)


def test_predict_autotuned_kernel_gets_one_key_per_config():
    blocks = RNG.sample([16, 32, 64, 128, 256], 2)
    with stand_in_driver():  # Triton 3.2's Autotuner asks the active driver for a benchmarker
        k = triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in blocks], key=["n"])(fresh(copy_body))
    x = FakeTensor(16 * RNG.randrange(1, 1 << 20), dtype("float16"))
    pred = jitguard.predict(k, [(x, x, n) for n in (1, 17, 32, 33)])
    assert len(pred) == 3 * len(blocks)
    assert {v.params[3].constexpr for v in pred} == set(blocks)


def test_predict_tells_an_annotated_int_equal_to_one_apart():
    from runtime_kernels import copy_body_i64

    x = FakeTensor(16 * RNG.randrange(1, 1 << 20), dtype("float16"))
    pred = jitguard.predict(fresh(copy_body_i64), [(x, x, n, 64) for n in (1000, 1, 1024, 1)])
    assert [keys.describe(v.params[2]) for v in pred] == ["i64", "folded constant 1", "i64, divisible by 16"]
    assert [v.calls for v in pred] == [[0], [1, 3], [2]]
    assert [d.what for d in pred.variants[1].diff] == ["n: i64 -> folded constant 1"]


def test_predict_autotuned_kernel_benchmarks_only_new_autotune_keys():
    """Triton compiles every config while it benchmarks a new autotune key, and afterwards the
    chosen config alone: a value class of ``n`` (not in key=[...]) that changes later compiles one
    variant, not one per config. Checked against the real autotuner through the stand-in driver."""
    from runtime_kernels import copy_rows_body

    blocks = RNG.sample([16, 32, 64, 128, 256], 3)
    with stand_in_driver():  # Triton 3.2's Autotuner asks the active driver for a benchmarker
        k = triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=RNG.choice([4, 8])) for b in blocks],
                            key=["rows"])(fresh(copy_rows_body))
    x = FakeTensor(16 * RNG.randrange(1, 1 << 20), dtype("float16"))
    rows = 16 * RNG.randrange(1, 100) + 3
    calls = [(x, x, n, rows) for n in (17, 1, 32, 33, 1)]
    pred = jitguard.predict(k, calls)
    assert len(pred) == len(blocks) + 2  # every config for the first call, then the chosen one
    assert [v.autotuning for v in pred] == [True] * len(blocks) + [False, False]
    assert all(d.change == "config" for v in pred.variants[1:len(blocks)] for d in v.diff)
    text = pred.explain()
    assert "another config" in text and "bucket" not in text
    with stand_in_driver():
        for c in calls:
            k[(1,)](*c)
    assert set(pred.keys) == set(cache_keys(k.fn))
