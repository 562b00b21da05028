"""``jitguard fix --from-trace``: a trace recorded by the real watcher (Triton's JIT path compiling
sm_90 on a CPU through the stand-in driver) becomes do_not_specialize edits, merged with the scan."""
from __future__ import annotations

import ast
import importlib.util
import os
import random
import sys

import pytest

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions
from click.testing import CliRunner

triton = pytest.importorskip("triton")

import jitguard  # noqa: E402
from jitguard.cli import main  # noqa: E402
from jitguard.runtime.findings import findings_from_trace  # noqa: E402
from jitguard.runtime.trace import load_trace  # noqa: E402
from runtime_helpers import FakeTensor, dtype, stand_in_driver  # noqa: E402

RNG = random.Random(os.urandom(8))

KERNEL = '''import triton
import triton.language as tl


@triton.jit
def {kernel}(x_ptr, y_ptr, {n}, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < {n}
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)
'''

LAUNCHER = '''

def launch(x, y):
    t = x.shape[0]
    {kernel}[(1,)](x, y, t, BLOCK=64)
'''


def _odd():
    while True:
        n = RNG.randrange(17, 100_000)
        if n % 16:
            return n


def _import_kernel(path, kernel: str):
    """The kernel ``kernel`` of the module at ``path``, imported under a fresh module name."""
    name = f"kmod_{RNG.randrange(10**9)}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return getattr(mod, kernel)


def _record(tmp_path, source: str, kernel: str) -> str:
    """Import the module from its file, launch with int values of every class, write the trace."""
    path = tmp_path / "kmod.py"
    path.write_text(source)
    k = _import_kernel(path, kernel)
    x = FakeTensor(16 * RNG.randrange(1 << 10, 1 << 30), dtype("float16"))
    y = FakeTensor(16 * RNG.randrange(1 << 10, 1 << 30), dtype("float16"))
    trace = str(tmp_path / "trace.json")
    with jitguard.watch(trace=trace):
        for n in (_odd(), 16 * RNG.randrange(1, 4000), 1):
            k.warmup(x, y, n, BLOCK=64, grid=(1,))
    return trace


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.chdir(tmp_path)
    with stand_in_driver():
        yield tmp_path


def _dns(source: str, kernel: str):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            for d in node.decorator_list:
                if isinstance(d, ast.Call):
                    return [ast.literal_eval(kw.value) for kw in d.keywords if kw.arg == "do_not_specialize"]
            return []


def test_trace_only_recompile_is_fixed(env):
    kernel, n = f"kern_{RNG.randrange(10**6)}", f"n_{RNG.randrange(10**6)}"
    src = KERNEL.format(kernel=kernel, n=n)  # no launch in the source: the scan can't see it
    trace = _record(env, src, kernel)
    found = findings_from_trace(load_trace(trace))
    assert [(f.code, f.param, f.source) for f in found] == [("JG001", n, "runtime")]

    r = CliRunner().invoke(main, ["fix", "--no-cache", "--from-trace", trace, "."])
    assert r.exit_code == 0, r.output
    assert f'+@triton.jit(do_not_specialize=["{n}"])' in r.stdout
    # the trace records the absolute path; the diff names the file as the scan does
    assert "--- a/kmod.py\n+++ b/kmod.py\n" in r.stdout
    assert (env / "kmod.py").read_text() == src  # a diff only

    r = CliRunner().invoke(main, ["fix", "--no-cache", "--write", "--from-trace", trace, "."])
    assert r.exit_code == 0, r.output
    assert "[trace]" in r.stderr and "1 fix applied" in r.stderr
    # ... and so does each fix's line: a position below the working directory, not the trace's path
    assert r.stderr.startswith("kmod.py:"), r.stderr
    assert _dns((env / "kmod.py").read_text(), kernel) == [[n]]
    # idempotent, and --no-scan reads the trace alone
    r = CliRunner().invoke(main, ["fix", "--no-cache", "--check", "--no-scan", "--from-trace", trace, "."])
    assert r.exit_code == 0 and r.stdout == ""


def test_trace_and_scan_agree_on_one_fix(env):
    kernel, n = f"kern_{RNG.randrange(10**6)}", f"n_{RNG.randrange(10**6)}"
    src = KERNEL.format(kernel=kernel, n=n) + LAUNCHER.format(kernel=kernel)
    trace = _record(env, src, kernel)
    r = CliRunner().invoke(main, ["fix", "--no-cache", "--write", "--from-trace", trace, "."])
    assert r.exit_code == 0, r.output
    assert "1 file changed, 1 fix applied" in r.stderr  # the same fix from two sources, once
    assert "[trace]" not in r.stderr  # ... and the scan was one of them
    assert _dns((env / "kmod.py").read_text(), kernel) == [[n]]
    # --ignore applies to trace findings too
    (env / "kmod.py").write_text(src)
    r = CliRunner().invoke(main, ["fix", "--no-cache", "--check", "--ignore", "JG001",
                                  "--from-trace", trace, "."])
    assert r.exit_code == 0


ADDRESSING = '''import triton
import triton.language as tl


@triton.jit
def {kernel}(x_ptr, y_ptr, {n}, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + tl.program_id(0) * {n} + offs, tl.load(x_ptr + offs))
'''


def test_every_fix_line_names_the_file_as_the_scan_does(env):
    """An unsafe fix found by the scan and the trace alike: the trace recorded the absolute path,
    the line printed for it is relative to the working directory, like the scan's."""
    kernel, n = f"kern_{RNG.randrange(10**6)}", f"n_{RNG.randrange(10**6)}"
    src = ADDRESSING.format(kernel=kernel, n=n) + LAUNCHER.format(kernel=kernel)
    trace = _record(env, src, kernel)
    r = CliRunner().invoke(main, ["fix", "--no-cache", "--write", "--unsafe-fixes", "--from-trace", trace, "."])
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stderr.splitlines() if "applied unsafe fix" in ln]
    assert len(lines) == 1 and lines[0].startswith("kmod.py:6:1: JG001 "), r.stderr
    assert _dns((env / "kmod.py").read_text(), kernel) == [[n]]


def test_trace_kernel_outside_the_paths_is_not_edited(env):
    kernel, n = f"kern_{RNG.randrange(10**6)}", f"n_{RNG.randrange(10**6)}"
    src = KERNEL.format(kernel=kernel, n=n)
    trace = _record(env, src, kernel)
    (env / "sub").mkdir()
    r = CliRunner().invoke(main, ["fix", "--no-cache", "--write", "--from-trace", trace, "sub"])
    assert (env / "kmod.py").read_text() == src
    assert "outside the paths given" in r.stderr


# a kernel shaped like a MoE kernel's routing switch: a constexpr flag prunes the branch that reads
# a pointer which the launcher passes as None when the flag is set
FLAG_KERNEL = '''import triton
import triton.language as tl


@triton.jit
def {kernel}(x_ptr, ids_ptr, y_ptr, {flag}: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if {flag}:
        rows = offs
    else:
        rows = tl.load(ids_ptr + offs)
    tl.store(y_ptr + offs, tl.load(x_ptr + rows))
'''


def test_a_constexpr_that_selects_code_is_a_manual_fix_from_a_trace(env):
    """The trace saw the flag take two values; making it a plain int would compile the pruned
    branch, which reads a pointer passed as None: never an unsafe edit, even with --unsafe-fixes."""
    kernel, flag = f"route_{RNG.randrange(10**6)}", f"direct_{RNG.randrange(10**6)}"
    src = FLAG_KERNEL.format(kernel=kernel, flag=flag)
    path = env / "kmod.py"
    path.write_text(src)
    k = _import_kernel(path, kernel)
    x = FakeTensor(16 * RNG.randrange(1 << 10, 1 << 30), dtype("float16"))
    ids = FakeTensor(16 * RNG.randrange(1 << 10, 1 << 30), dtype("int32"))
    y = FakeTensor(16 * RNG.randrange(1 << 10, 1 << 30), dtype("float16"))
    trace = str(env / "trace.json")
    with jitguard.watch(trace=trace):
        k.warmup(x, None, y, True, BLOCK=64, grid=(1,))
        k.warmup(x, ids, y, False, BLOCK=64, grid=(1,))
    found = [f for f in findings_from_trace(load_trace(trace)) if f.code == "JG002"]
    assert [f.param for f in found] == [flag]
    assert found[0].fix.applicability == "manual" and not found[0].fix.edits
    assert "selects code" in found[0].fix.reason
    r = CliRunner().invoke(main, ["fix", "--no-cache", "--write", "--unsafe-fixes", "--no-scan",
                                  "--from-trace", trace, "."])
    assert r.exit_code == 0, r.output
    assert path.read_text() == src
    assert "selects code" in r.stderr and "manual" in r.stderr


TWO_KERNELS = '''import triton
import triton.language as tl


@triton.jit
def {other}(x_ptr, {n}, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < {n})
'''


def test_a_trace_naming_a_kernel_not_in_the_file_edits_nothing(env):
    """The event names a kernel that the file does not define, at a line inside another kernel:
    the fix matches name and position both, so the other kernel stays as it is."""
    kernel, n = f"kern_{RNG.randrange(10**6)}", f"n_{RNG.randrange(10**6)}"
    src = KERNEL.format(kernel=kernel, n=n)
    trace = _record(env, src, kernel)
    # the file now holds another kernel (same parameter) where the traced one was
    other = f"other_{RNG.randrange(10**6)}"
    edited = TWO_KERNELS.format(other=other, n=n)
    assert edited.splitlines()[5].startswith(f"def {other}(")  # the traced def's line
    (env / "kmod.py").write_text(edited)
    found = findings_from_trace(load_trace(trace))
    assert [(f.code, f.param) for f in found] == [("JG001", n)]
    assert not found[0].fix.edits and repr(kernel) in found[0].fix.reason
    r = CliRunner().invoke(main, ["fix", "--no-cache", "--write", "--no-scan", "--from-trace", trace, "."])
    assert r.exit_code == 0, r.output
    assert (env / "kmod.py").read_text() == edited
    assert f"the kernel defined there is {other!r}" in r.stderr
