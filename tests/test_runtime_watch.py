"""jitguard.watch through Triton's real JIT path: sm_90 compiles on a CPU with a stand-in driver."""
from __future__ import annotations

import logging
import os
import random
import threading

import pytest

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions

triton = pytest.importorskip("triton")

import jitguard  # noqa: E402
from jitguard.runtime import compat, keys, steps  # noqa: E402
from jitguard.runtime.watch import _STATE  # noqa: E402
from runtime_helpers import FakeTensor, cache_keys, dtype, stand_in_driver  # noqa: E402
from runtime_kernels import copy_body, copy_body_i64, fresh  # noqa: E402

RNG = random.Random(os.urandom(8))


def odd(lo=17, hi=100_000):
    """A random int that is neither 1 nor divisible by 16."""
    while True:
        n = RNG.randrange(lo, hi)
        if n % 16:
            return n


def div16(lo=1, hi=6000):
    return 16 * RNG.randrange(lo, hi)


def aligned_ptr():
    return 16 * RNG.randrange(1 << 10, 1 << 30)


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    steps.reset_steps()
    with stand_in_driver():
        yield
    assert not _STATE.watches, "a test left a watch active"


def tensors(dt="float16"):
    return FakeTensor(aligned_ptr(), dtype(dt)), FakeTensor(aligned_ptr(), dtype(dt))


def test_value_class_changes_are_explained_in_words():
    k = fresh()
    x, y = tensors()
    n1, n2 = odd(), div16()
    with jitguard.watch() as w:
        jitguard.mark_step(5)
        k.warmup(x, y, n1, BLOCK=64, grid=(1,))
        k.warmup(x, y, n1 + 16 * RNG.randrange(1, 50), BLOCK=64, grid=(1,))  # same class: no compile
        k.warmup(x, y, n2, BLOCK=64, grid=(1,))
        jitguard.mark_step()
        k.warmup(x, y, 1, BLOCK=64, grid=(1,))
    ev = w.events
    assert [e.variant for e in ev] == [1, 2, 3]
    assert [e.step for e in ev] == [5, 5, 6]
    assert ev[0].diff == [] and ev[0].kernel.endswith("copy_body")
    assert [d.what for d in ev[1].diff] == ["n: i32 -> i32, divisible by 16"]
    assert [d.what for d in ev[2].diff] == ["n: i32 -> folded constant 1"]
    assert 'add "n" to do_not_specialize' in ev[1].remedy
    n_param = ev[1].params[2]
    assert (n_param.name, n_param.kind, n_param.type, n_param.value_class) == ("n", "int", "i32", "div16")
    assert ev[0].params[0].dtype == "fp16" and ev[0].params[0].aligned16 is True
    assert ev[0].params[3].kind == "constexpr" and ev[0].params[3].constexpr == 64
    # where: the kernel's def line and this test's launching line
    with open(ev[0].kernel_path) as fh:
        assert fh.read().splitlines()[ev[0].kernel_line - 1].startswith("def copy_body(")
    assert ev[0].call_path == os.path.abspath(__file__)
    assert all(e.warmup for e in ev) and all(e.compile_ms > 0 for e in ev)
    assert all(e.overhead_ms is not None and e.overhead_ms < 50 for e in ev)


def test_annotated_int_equal_to_one_is_a_folded_constant():
    """``n: tl.int64`` equal to 1 is keyed ``('i64', 1)`` from Triton 3.3 (``('constexpr', 1)``
    before): either way the recompile says why, and the trace gives fix a JG001 finding."""
    k = fresh(copy_body_i64)
    x, y = tensors()
    with jitguard.watch() as w:
        k.warmup(x, y, odd(), BLOCK=64, grid=(1,))
        k.warmup(x, y, 1, BLOCK=64, grid=(1,))
        k.warmup(x, y, div16(), BLOCK=64, grid=(1,))
    assert [[d.what for d in e.diff] for e in w.events[1:]] == [
        ["n: i64 -> folded constant 1"], ["n: i64 -> i64, divisible by 16"]]
    assert all(d.change == "value_class" for e in w.events[1:] for d in e.diff)
    one = w.events[1].params[2]
    assert (one.kind, one.value_class) == ("int", "one")
    assert 'add "n" to do_not_specialize' in w.events[1].remedy
    found = w.findings()
    assert [(f.code, f.param, f.fix_safety) for f in found] == [("JG001", "n", "safe")]


def test_constexpr_alignment_options_and_width_diffs():
    k = fresh()
    x, y = tensors()
    n = odd()
    block = RNG.choice([32, 64, 128])
    with jitguard.watch() as w:
        k.warmup(x, y, n, BLOCK=block, grid=(1,))
        k.warmup(x, y, n, BLOCK=block * 2, grid=(1,))
        k.warmup(FakeTensor(x.data_ptr() + 2 * RNG.randrange(1, 8), dtype("float16")), y, n, BLOCK=block, grid=(1,))
        k.warmup(x, y, n, BLOCK=block, grid=(1,), num_warps=4)
        k.warmup(x, y, 2**31 + 16 * RNG.randrange(1, 1000), BLOCK=block, grid=(1,))
        k.warmup(FakeTensor(x.data_ptr(), dtype("bfloat16")), y, n, BLOCK=block, grid=(1,))
    whats = [[d.what for d in e.diff] for e in w.events[1:]]
    assert whats[4] == ["x_ptr: *fp16 -> *bf16"]
    assert whats[0] == [f"BLOCK (constexpr): {block} -> {block * 2}"]
    assert whats[1] == ["x_ptr: 16-byte aligned -> unaligned"]
    assert whats[2] == ["options: num_warps default -> 4"]
    assert len(whats[3]) == 1 and whats[3][0].startswith("n: i32") and whats[3][0].endswith("-> i64, divisible by 16")
    assert "do_not_specialize_on_alignment" in w.events[2].remedy
    assert "same way at every call site" in w.events[3].remedy
    assert "tl.int64" in w.events[4].remedy
    assert w.events[3].options.get("num_warps") == 4


def test_disk_cache_hit_is_reported(tmp_path):
    x, y = tensors()
    n = odd()
    with jitguard.watch() as w:
        fresh().warmup(x, y, n, BLOCK=32, grid=(1,))
        fresh().warmup(x, y, n, BLOCK=32, grid=(1,))  # new in-memory cache, same disk cache
    if compat.compilation_listener_site() is not None:  # Triton 3.4+
        assert [e.disk_cache_hit for e in w.events] == [False, True]
    else:  # 3.3 has no compilation listener: unknown, never guessed
        assert [e.disk_cache_hit for e in w.events] == [None, None]
    assert w.events[1].variant == 1  # a different JITFunction object: its own first variant


def test_chains_to_existing_hooks_and_restores_them_exactly():
    pre, post = compat.compile_hook_sites()
    seen = []

    def foreign_pre(**kw):
        seen.append(("pre", kw["key"]))
        return None

    def foreign_post(**kw):
        seen.append(("post", kw["key"]))

    pre.set(foreign_pre)
    post.set(foreign_post)
    try:
        k = fresh()
        x, y = tensors()
        with jitguard.watch() as w:
            assert pre.get() is not foreign_pre
            k.warmup(x, y, odd(), BLOCK=32, grid=(1,))
        assert pre.get() is foreign_pre and post.get() is foreign_post
        assert [s[0] for s in seen] == ["pre", "post"] and seen[0][1] == w.events[0].key
    finally:
        pre.set(None)
        post.set(None)


def test_a_compile_is_recorded_when_a_chained_post_hook_raises():
    """vLLM's jit_monitor raises from jit_post_compile_hook in error mode: the compile happened,
    so the watch has it, and the other tool's error still reaches the caller."""
    _, post = compat.compile_hook_sites()

    def strict_post(**kw):
        raise RuntimeError("compiled after warmup")

    post.set(strict_post)
    try:
        k = fresh()
        x, y = tensors()
        with jitguard.watch() as w:
            with pytest.raises(RuntimeError, match="compiled after warmup"):
                k.warmup(x, y, odd(), BLOCK=32, grid=(1,))
        assert len(w.events) == 1 and w.events[0].compile_ms is not None
        assert w.events[0].key in cache_keys(k)
    finally:
        post.set(None)


def test_foreign_hook_that_skips_the_compile_is_respected():
    pre, _ = compat.compile_hook_sites()
    pre.set(lambda **kw: True)  # another tool tells Triton to skip compile and launch
    try:
        k = fresh()
        x, y = tensors()
        with jitguard.watch(mode="raise") as w:
            k.warmup(x, y, odd(), BLOCK=32, grid=(1,))
            k.warmup(x, y, div16(), BLOCK=32, grid=(1,))
        assert w.events == []
    finally:
        pre.set(None)


def test_restores_hooks_after_an_exception_in_the_region():
    pre, post = compat.compile_hook_sites()
    before = (pre.get(), post.get())
    with pytest.raises(KeyError):
        with jitguard.watch():
            raise KeyError("boom")
    assert (pre.get(), post.get()) == before


def test_raise_mode_raises_before_compiling_with_the_explanation():
    k = fresh()
    x, y = tensors()
    n = odd()
    k.warmup(x, y, n, BLOCK=64, grid=(1,))  # before watching: still counts as a previous variant
    with pytest.raises(jitguard.RecompileError) as info:
        with jitguard.watch(mode="raise"):
            k.warmup(x, y, n + 32, BLOCK=64, grid=(1,))  # same class: a cache hit, fine
            k.warmup(x, y, div16(), BLOCK=64, grid=(1,))
    msg = str(info.value)
    assert "n: i32 -> i32, divisible by 16" in msg and "do_not_specialize" in msg
    assert info.value.event.variant == 2
    assert len(cache_keys(k)) == 1  # the recompile was refused before Triton paid for it


def test_max_recompiles_budget():
    k = fresh()
    x, y = tensors()
    with jitguard.watch(mode="raise", max_recompiles=1) as w:
        k.warmup(x, y, odd(), BLOCK=64, grid=(1,))
        k.warmup(x, y, div16(), BLOCK=64, grid=(1,))
        with pytest.raises(jitguard.RecompileError, match="more than 1 recompile"):
            k.warmup(x, y, 1, BLOCK=64, grid=(1,))
    assert w.recompile_count == 2  # the refused one is in the trace too
    assert w.events[-1].compile_ms is None


def test_expect_no_compiles_after_warmup():
    k = fresh()
    x, y = tensors()
    n = odd()
    k.warmup(x, y, n, BLOCK=64, grid=(1,))
    with jitguard.expect_no_compiles():
        for _ in range(5):
            k[(1,)](x, y, odd(), BLOCK=64)  # cache hits: launch through the stand-in launcher
    with pytest.raises(jitguard.RecompileError, match=r"BLOCK \(constexpr\): 64 -> 128"):
        with jitguard.expect_no_compiles():
            k[(1,)](x, y, n, BLOCK=128)


def test_warn_mode_warns_per_recompile_and_prints_summary(capsys):
    k = fresh()
    x, y = tensors()
    with pytest.warns(jitguard.RecompileWarning, match="divisible by 16") as rec:
        with jitguard.watch(mode="warn"):
            k.warmup(x, y, odd(), BLOCK=64, grid=(1,))
            k.warmup(x, y, div16(), BLOCK=64, grid=(1,))
    assert len(rec) == 1 and rec[0].filename == os.path.abspath(__file__)
    err = capsys.readouterr().err
    assert "2 variants, 1 recompile" in err and "culprits: n value class (1x)" in err


def test_nesting_and_decorator():
    k = fresh()
    x, y = tensors()
    pre, _ = compat.compile_hook_sites()
    outer = jitguard.watch()

    @jitguard.watch()
    def step(n):
        k.warmup(x, y, n, BLOCK=64, grid=(1,))

    with outer:
        step(odd())
        with jitguard.watch() as inner:
            step(div16())
        assert pre.get() is not None and getattr(pre.get(), "__jitguard__", False)
        step(1)
    assert pre.get() is None
    assert len(outer.events) == 3 and len(inner.events) == 1
    assert inner.events[0] is outer.events[1]


def test_threads_compile_concurrently(monkeypatch):
    k = fresh()
    x, y = tensors()
    blocks = RNG.sample([16, 32, 64, 128, 256, 512], 4)
    errors = []
    # CPython 3.11's ast constructor keeps its recursion-depth check per interpreter, so two threads
    # building ast objects at once can fail with "AST constructor recursion depth mismatch"
    # (Triton parses the kernel's source in every compile): parsing is serialized here, the
    # compiles and jitguard's hooks still run in the four threads at once.
    import ast

    parse, parse_lock = ast.parse, threading.Lock()

    def serialized_parse(*args, **kwargs):
        with parse_lock:
            return parse(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", serialized_parse)

    def work(b):
        try:
            k.warmup(x, y, odd(), BLOCK=b, grid=(1,))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with jitguard.watch() as w:
        threads = [threading.Thread(target=work, args=(b,)) for b in blocks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors and w.internal_errors == 0
    assert sorted(e.params[3].constexpr for e in w.events) == sorted(blocks)
    assert sorted(e.variant for e in w.events) == [1, 2, 3, 4]
    assert len({e.seq for e in w.events}) == 4
    assert all(e.compile_ms is not None for e in w.events)


def test_failure_inside_jitguard_is_logged_once_and_launch_goes_on(monkeypatch, caplog):
    k = fresh()
    x, y = tensors()

    def broken(*a, **kw):
        raise ZeroDivisionError("decoder bug")

    monkeypatch.setattr(keys, "decode_key", broken)
    _STATE.logged.clear()
    with caplog.at_level(logging.WARNING, logger="jitguard"):
        with jitguard.watch(mode="raise") as w:
            k.warmup(x, y, odd(), BLOCK=64, grid=(1,))
            k.warmup(x, y, div16(), BLOCK=64, grid=(1,))
    assert len(cache_keys(k)) == 2  # both compiled
    logged = [r for r in caplog.records if "decoder bug" in r.getMessage()]
    assert len(logged) == 1 and w.internal_errors == 1


def test_unsupported_triton_is_a_clear_error_at_entry(monkeypatch):
    pre, post = compat.compile_hook_sites()
    monkeypatch.setattr(compat, "version_tuple", lambda: (3, 1, 0))
    with pytest.raises(compat.UnsupportedTritonError, match=r"too old .* needs Triton >= 3\.2"):
        with jitguard.watch():
            pass  # pragma: no cover
    assert pre.get() is None and post.get() is None and not _STATE.watches


def test_bad_arguments():
    with pytest.raises(ValueError, match="mode"):
        jitguard.watch(mode="loud")
    with pytest.raises(ValueError, match="max_recompiles"):
        jitguard.watch(max_recompiles=-1)
    with pytest.raises(TypeError):
        jitguard.mark_step("3")


def _autotuned(do_bench):
    configs = [triton.Config({"BLOCK": b}) for b in (32, 64)]
    return triton.autotune(configs=configs, key=["n"], do_bench=do_bench)(fresh(copy_body))


def test_autotune_rebenchmarks_are_events_with_the_key_diff():
    bench_calls = []

    def do_bench(fn, quantiles=None, **kw):
        fn()  # compiles the config (through the JIT hooks) and launches it on the stand-in
        bench_calls.append(1)
        return [RNG.random(), 1.0, 1.0] if quantiles else RNG.random()

    k = _autotuned(do_bench)
    x, y = tensors()
    n1, n2 = odd(), div16()
    with jitguard.watch() as w:
        k[(1,)](x, y, n1)
        k[(1,)](x, y, n1)  # cached: no event
        k[(1,)](x, y, n2)
    at = [e for e in w.events if e.kind == "autotune"]
    assert len(at) == 2
    if compat.version_tuple() >= (3, 3):  # 3.2's triton.autotune drops do_bench (the driver's runs)
        assert bench_calls == [1] * 4
    assert at[0].autotune.configs == 2 and at[0].autotune.key["n"] == n1
    assert at[0].autotune.bench_ms is not None and at[0].autotune.bench_ms >= 0
    assert [d.what for d in at[1].diff] == [f"n (autotune key): {n1} -> {n2}"]
    assert "autotune key" in at[1].remedy
    compiles = [e for e in w.events if e.kind == "compile"]
    assert compiles and all(e.autotuning for e in compiles)
    assert w.recompile_count == 1  # the re-benchmark, not the config compiles


def _launch_through_wrapper(k, x, y, n):
    k.warmup(x, y, n, BLOCK=64, grid=(1,))  # the launching line a wrapper's caller wants to see past


def test_wrapper_callers_and_compiles_between_watches_are_known():
    k = fresh()
    x, y = tensors()
    with jitguard.watch():
        _launch_through_wrapper(k, x, y, odd())
    k.warmup(x, y, 1, BLOCK=64, grid=(1,))  # compiled while nobody watched
    with jitguard.watch() as w:
        _launch_through_wrapper(k, x, y, div16())  # caller line below is in call_stack
    (e,) = w.events
    assert e.variant == 3 and e.closest_variant in (1, 2)
    assert e.call_line == _launch_through_wrapper.__code__.co_firstlineno + 1
    assert e.call_stack and e.call_stack[0].startswith(os.path.abspath(__file__) + ":")
    from jitguard.runtime.text import explain_event

    assert f"<- {os.path.basename(__file__)}:" in explain_event(e, cwd=os.path.dirname(__file__))


def test_interpreter_mode_warns_that_nothing_compiles(monkeypatch):
    monkeypatch.setattr(compat, "interpreter_active", lambda: True)
    with pytest.warns(RuntimeWarning, match="TRITON_INTERPRET"):
        with jitguard.watch():
            pass


def test_a_tool_that_hooks_on_top_of_jitguard_keeps_its_chain():
    pre, post = compat.compile_hook_sites()
    calls = []

    def first(**kw):
        calls.append("first")

    pre.set(first)
    k = fresh()
    x, y = tensors()
    try:
        with jitguard.watch() as w:
            ours = pre.get()

            def on_top(**kw):  # another tool installs over jitguard and chains to it
                calls.append("on_top")
                return ours(**kw)

            pre.set(on_top)
            k.warmup(x, y, odd(), BLOCK=64, grid=(1,))
        assert pre.get() is on_top and len(w.events) == 1
        with jitguard.watch() as w2:  # a new watch chains over on_top -> old jitguard -> first
            k.warmup(x, y, div16(), BLOCK=64, grid=(1,))
        assert len(w2.events) == 1  # the stale jitguard hook only passes through: no double event
        assert calls == ["on_top", "first", "on_top", "first"]
    finally:
        pre.set(None)
        post.set(None)


class _FakeDist:
    """torch.distributed as the watcher sees it: a process group that comes up and goes away."""

    def __init__(self, rank, world):
        self.up, self.rank, self.world = False, rank, world

    def is_available(self):
        return True

    def is_initialized(self):
        return self.up

    def get_rank(self):
        return self.rank

    def get_world_size(self):
        return self.world


def test_rank_is_refreshed_once_the_group_is_up_and_kept_after_teardown(monkeypatch, tmp_path):
    import json
    import sys

    world = RNG.randrange(2, 64)
    rank = RNG.randrange(world)
    env_rank = rank + RNG.randrange(1, 100)  # the environment says something else
    monkeypatch.setenv("RANK", str(env_rank))
    monkeypatch.setenv("WORLD_SIZE", str(world + 1000))
    fake = _FakeDist(rank, world)
    monkeypatch.setitem(sys.modules, "torch.distributed", fake)
    k = fresh()
    x, y = tensors()
    with jitguard.watch() as w:  # started before init_process_group, as most programs do
        assert w.trace.process.rank == env_rank
        fake.up = True  # init_process_group
        k.warmup(x, y, odd(), BLOCK=64, grid=(1,))
        assert (w.trace.process.rank, w.trace.process.world_size) == (rank, world)
        fake.up = False  # destroy_process_group before exit (vLLM does)
        w.to_json(tmp_path / "mid.json")
    assert (w.trace.process.rank, w.trace.process.world_size) == (rank, world)
    assert json.loads((tmp_path / "mid.json").read_text())["process"]["rank"] == rank

    # a rank that compiles nothing while the group is up still gets its rank from mark_step
    with jitguard.watch() as w2:
        assert w2.trace.process.rank == env_rank
        fake.up = True
        jitguard.mark_step()
        fake.up = False
    assert (w2.trace.process.rank, w2.trace.process.world_size) == (rank, world)

    # no group ever: the environment's answer
    with jitguard.watch() as w3:
        k.warmup(x, y, div16(), BLOCK=64, grid=(1,))
    assert (w3.trace.process.rank, w3.trace.process.world_size) == (env_rank, world + 1000)


def test_trace_path_placeholders(monkeypatch, tmp_path):
    import sys

    world = RNG.randrange(2, 64)
    rank = RNG.randrange(world)
    monkeypatch.delenv("RANK", raising=False)
    fake = _FakeDist(rank, world)
    monkeypatch.setitem(sys.modules, "torch.distributed", fake)
    k = fresh()
    x, y = tensors()
    with jitguard.watch(trace=tmp_path / "out" / "rank{rank}.pid{pid}.json") as w:
        fake.up = True  # the rank is known once the group is up, after the watch began
        k.warmup(x, y, odd(), BLOCK=64, grid=(1,))
        fake.up = False
    assert os.listdir(tmp_path / "out") == [f"rank{rank}.pid{os.getpid()}.json"]
    assert w.trace.events
    with pytest.raises(ValueError, match="unknown placeholder"):
        jitguard.watch(trace=str(tmp_path / "{host}.json"))
    with jitguard.watch(trace=tmp_path / "{{literal}}-{rank}.json"):
        pass
    assert (tmp_path / "{literal}-none.json").is_file()


def test_autotune_config_compiles_point_at_the_launch_and_leave_the_rebenchmarks_in_view():
    """Eight configs, four key values in three value classes: 24 config compiles, 4 benchmarks. The config compiles
    are attributed to the launching line (not to the benchmarker that ran them), and the report
    folds each benchmark's compiles into one line, so its per-kernel cap shows every re-benchmark."""
    from jitguard.runtime.text import render_trace as render_text

    configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (32, 64, 128, 256) for w in (4, 8)]
    k = triton.autotune(configs=configs, key=["n"])(fresh(copy_body))  # the stand-in's benchmarker
    x, y = tensors()
    ns = [odd(), div16(), 1, odd()]  # three value classes: 24 config compiles
    with jitguard.watch() as w:
        for n in ns:
            k[(1,)](x, y, n); launch_line = _this_line()  # noqa: E702
    compiles = [e for e in w.events if e.kind == "compile"]
    assert len(compiles) == 24 and all(e.autotuning for e in compiles)
    assert {(e.call_path, e.call_line) for e in compiles} == {(os.path.abspath(__file__), launch_line)}
    text = render_text(w.snapshot())
    assert [f"autotune #{i}:" in text for i in (1, 2, 3, 4)] == [True] * 4
    assert "config compiles while autotuning" in text and "more events" not in text


def _this_line() -> int:
    import inspect

    return inspect.currentframe().f_back.f_lineno


def test_another_tuned_config_is_not_called_per_call_variation():
    """A config table (vLLM's per-M MoE configs) switches tile sizes with num_warps/num_stages:
    another config, expected once per config; no "bucket it", no "pass them the same way", no
    finding. Options passed explicitly at one call and left default at another stay JG007."""
    k = fresh()
    x, y = tensors()
    n = odd()
    small, large = RNG.choice([(16, 2, 3), (32, 4, 3)]), RNG.choice([(128, 8, 4), (256, 8, 5)])
    with jitguard.watch() as w:
        k.warmup(x, y, n, BLOCK=small[0], num_warps=small[1], num_stages=small[2], grid=(1,))
        k.warmup(x, y, n, BLOCK=large[0], num_warps=large[1], num_stages=large[2], grid=(1,))
    e = w.events[1]
    assert {d.change for d in e.diff} == {"config"}
    assert {d.param if d.param != "options" else d.option for d in e.diff} == {"BLOCK", "num_warps", "num_stages"}
    assert e.remedy.startswith("another config (") and "expected once per config" in e.remedy
    assert "bucket" not in e.remedy and "same way" not in e.remedy
    assert w.findings() == []


def test_autotuner_config_compiles_say_another_config():
    configs = [triton.Config({"BLOCK": 32}, num_warps=4), triton.Config({"BLOCK": 128}, num_warps=8)]
    k = triton.autotune(configs=configs, key=["n"])(fresh(copy_body))
    x, y = tensors()
    with jitguard.watch() as w:
        k[(1,)](x, y, odd())
    second = [e for e in w.events if e.kind == "compile"][1]
    assert second.autotuning and {d.change for d in second.diff} == {"config"}
    assert second.remedy == "expected: the autotuner compiles each config it benchmarks"
