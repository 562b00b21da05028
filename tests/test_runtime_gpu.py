"""The runtime watcher on a real GPU (torch CUDA tensors, Triton's real driver and launches):
what the CPU tests check through the stand-in driver, checked once where it serves."""
from __future__ import annotations

import inspect
import os
import random
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.runtime]

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import jitguard  # noqa: E402
from jitguard.runtime import compat  # noqa: E402
from jitguard.runtime.watch import _STATE  # noqa: E402
from runtime_kernels import copy_body, copy_body_i64, fresh  # noqa: E402

RNG = random.Random(os.urandom(8))
TESTS = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    yield
    assert not _STATE.watches


def _line() -> int:
    return inspect.currentframe().f_back.f_lineno


def _copy(k, n, **kw):
    x = torch.randn(max(n, 1) + 64, device="cuda", dtype=torch.float16)
    y = torch.zeros_like(x)
    k[(triton.cdiv(max(n, 1), 64),)](x, y, n, BLOCK=64, **kw)
    torch.cuda.synchronize()
    assert torch.equal(y[:n], x[:n]) and not y[n:].any()  # the kernel still does its job


def test_recompiles_are_explained_on_the_gpu():
    k = fresh(copy_body)
    odd = 16 * RNG.randrange(2, 200) + RNG.randrange(1, 16)
    with jitguard.watch() as w:
        _copy(k, odd); launch = _line()  # noqa: E702
        _copy(k, odd + 16)  # same value class: no compile
        _copy(k, 16 * RNG.randrange(2, 200))
        _copy(k, 1)
    assert [e.variant for e in w.events] == [1, 2, 3]
    assert [[d.what for d in e.diff] for e in w.events[1:]] == [
        ["n: i32 -> i32, divisible by 16"], ["n: i32 -> folded constant 1"]]
    assert all(e.compile_ms > 0 and not e.warmup for e in w.events)
    assert w.events[0].call_path == os.path.abspath(__file__)  # in _copy, the launching wrapper
    assert w.events[0].call_stack[0] == f"{os.path.abspath(__file__)}:{launch}"  # its caller
    assert [(f.code, f.param) for f in w.findings()] == [("JG001", "n")]


def test_annotated_int_equal_to_one_on_the_gpu():
    k = fresh(copy_body_i64)
    with jitguard.watch() as w:
        _copy(k, 16 * RNG.randrange(2, 200) + 3)
        _copy(k, 1)
    assert [d.what for d in w.events[1].diff] == ["n: i64 -> folded constant 1"]


def test_stand_in_block_gives_the_real_driver_back():
    from triton.runtime import driver

    from jitguard.testing import StandInDriver, host_tensors_ok, stand_in_driver

    k = fresh(copy_body)
    with stand_in_driver():
        with stand_in_driver():
            assert host_tensors_ok()
        assert isinstance(driver.active, StandInDriver)
    assert not host_tensors_ok() and not isinstance(driver.active, StandInDriver)
    _copy(k, 16 * RNG.randrange(2, 200) + 5)  # a real launch after the blocks


def test_disk_cache_hits_and_autotune_on_the_gpu():
    with jitguard.watch() as w:
        _copy(fresh(copy_body), 100)
        _copy(fresh(copy_body), 100)  # a new in-memory cache: served from the disk cache
    if compat.compilation_listener_site() is not None:
        assert [e.disk_cache_hit for e in w.events] == [False, True]
    configs = [triton.Config({"BLOCK": 32}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)]
    k = triton.autotune(configs=configs, key=["n"])(fresh(copy_body))
    x = torch.randn(4096, device="cuda", dtype=torch.float16)
    y = torch.zeros_like(x)
    with jitguard.watch() as w:
        for n in (1000, 1000, 2048):
            k[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n); launch = _line()  # noqa: E702
    torch.cuda.synchronize()
    assert torch.equal(y[:2048], x[:2048])
    at = [e for e in w.events if e.kind == "autotune"]
    comp = [e for e in w.events if e.kind == "compile"]
    assert len(at) == 2 and [d.what for d in at[1].diff] == ["n (autotune key): 1000 -> 2048"]
    assert comp and all(e.autotuning for e in comp)
    assert {(e.call_path, e.call_line) for e in comp} == {(os.path.abspath(__file__), launch)}
    assert {d.change for e in comp for d in e.diff} <= {"config", "value_class"}  # never "constexpr"
    assert w.recompile_count == 1


def test_jitguard_run_and_report_on_the_gpu(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {TESTS!r})
        import torch, triton
        from runtime_kernels import fresh
        k = fresh()
        x = torch.randn(8192, device="cuda", dtype=torch.float16)
        y = torch.zeros_like(x)
        for n in (1003, 2048, 1):
            k[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64)
        torch.cuda.synchronize()
        print("ok")
    """))
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-m", "jitguard", "run", "--mode", "record", "--trace", "t.json", "--",
                        sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    rep = subprocess.run([sys.executable, "-m", "jitguard", "report", "t.json"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0 and "n: i32 -> folded constant 1" in rep.stdout, rep.stderr
    sarif = subprocess.run([sys.executable, "-m", "jitguard", "report", "--format", "sarif", "t.json"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert sarif.returncode == 0 and '"ruleId": "JG001"' in sarif.stdout, sarif.stderr
