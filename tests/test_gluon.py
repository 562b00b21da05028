"""Gluon kernels (``triton.experimental.gluon``): found by scan through re-exports, ``gl.constexpr``
taken for a constexpr, ``@gluon.constexpr_function`` helpers not kernels, fix writing into
``@gluon.jit(...)``, and the watcher, report and predict seeing real sm_90 Gluon compiles on a CPU
(fixtures/lint/gluon_pkg holds the kernels)."""
from __future__ import annotations

import importlib
import json
import os
import random
import shutil
import sys
import textwrap

import pytest
from click.testing import CliRunner

from jitguard.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "fixtures", "lint", "gluon_pkg")
RNG = random.Random(os.urandom(8))


def run(cwd, *args):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)
    assert "Traceback" not in r.output
    return r


def scan_doc(cwd, *args):
    r = run(cwd, "scan", "--no-cache", "-j", "1", "--format", "json", *args)
    return json.loads(r.stdout)


def findings(doc):
    return sorted((f["code"], f["kernel"].rsplit(".", 1)[-1], f["param"]) for f in doc["findings"])


# --- scan and fix: no Triton needed --------------------------------------------------------

REEXPORT = """\
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
"""

KERNELS = """\
from {src} import gl, gluon


@gluon.constexpr_function
def pick(n):
    return n * 2


@gluon.jit
def {name}(x_ptr, n, ROWS: gl.constexpr, BLOCK: gl.constexpr):
    pass


@gluon.jit(do_not_specialize=["nope"])
def other(x_ptr, m):
    pass


def launch(x):
    {name}[(1,)](x, x.shape[0], ROWS=int(x.max().item()), BLOCK=128)
    other[(1,)](x, len(x))
    pick(x.shape[0])
"""


@pytest.mark.parametrize("layout", ["re-export", "direct", "from-import-jit"])
def test_gluon_kernels_are_found_with_their_constexprs_and_fixed(tmp_path, layout):
    name = f"k{RNG.randrange(10**6)}"
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "__init__.py").write_text("")
    if layout == "re-export":  # as vllm/triton_utils: the package re-exports gluon and gl
        (tmp_path / "proj" / "gpu").mkdir()
        (tmp_path / "proj" / "gpu" / "__init__.py").write_text(REEXPORT)
        src = KERNELS.format(src="proj.gpu", name=name)
    elif layout == "direct":
        src = KERNELS.format(src="triton.experimental", name=name).replace(
            "from triton.experimental import gl, gluon",
            "from triton.experimental import gluon\nfrom triton.experimental.gluon import language as gl")
    else:
        src = KERNELS.format(src="triton.experimental", name=name).replace(
            "from triton.experimental import gl, gluon",
            "from triton.experimental.gluon import jit, constexpr_function, language as gl").replace(
            "@gluon.jit", "@jit").replace("@gluon.constexpr_function", "@constexpr_function")
    (tmp_path / "proj" / "ops.py").write_text(src)
    doc = scan_doc(tmp_path, ".")
    assert doc["summary"]["kernels"] == 2  # the constexpr_function helper is not one
    assert findings(doc) == [("JG001", name, "n"), ("JG001", "other", "m"), ("JG002", name, "ROWS"),
                             ("JG004", "other", "nope")]
    r = run(tmp_path, "fix", "--no-cache", "--unsafe-fixes", "--write", ".")
    assert r.exit_code == 0, r.stderr
    fixed = (tmp_path / "proj" / "ops.py").read_text()
    jit = "@jit" if layout == "from-import-jit" else "@gluon.jit"
    assert f'{jit}(do_not_specialize=["n", "ROWS"])\ndef {name}(x_ptr, n, ROWS, BLOCK: gl.constexpr):' in fixed
    assert f'{jit}(do_not_specialize=["m"])\ndef other(x_ptr, m):' in fixed
    assert scan_doc(tmp_path, ".")["findings"] == []
    assert run(tmp_path, "fix", "--no-cache", "--check", ".").exit_code == 0


def test_the_gluon_fixture_findings(tmp_path):
    # N_ROWS rests on the leading-dim convention: a constexpr on a convention is low
    doc = scan_doc(ROOT, "--confidence", "low", "fixtures/lint/gluon_pkg")
    assert findings(doc) == [("JG001", "row_scale", "num_tokens"), ("JG002", "gather_rows", "N_ROWS")]
    assert doc["summary"]["kernels"] == 2 and doc["errors"] == []


def test_constexpr_messages_name_gl_constexpr_as_written(tmp_path):
    (tmp_path / "k.py").write_text(textwrap.dedent("""\
        from triton.experimental import gluon
        from triton.experimental.gluon import language as gl


        @gluon.jit(do_not_specialize=["BLOCK"])
        def k(x_ptr, ROWS: gl.constexpr, BLOCK: gl.constexpr):
            pass


        def launch(x):
            k[(1,)](x, ROWS=int(x.max().item()), BLOCK=128)
        """))
    doc = scan_doc(tmp_path, ".")
    msgs = {f["code"]: f["message"] for f in doc["findings"]}
    assert set(msgs) == {"JG002", "JG005"}
    assert "is a gl.constexpr" in msgs["JG002"] and "drop gl.constexpr" in msgs["JG002"]
    assert "names gl.constexpr parameter BLOCK" in msgs["JG005"]


def test_an_unrelated_gluon_name_is_not_a_kernel(tmp_path):
    # a `jit` of some other module named in a Gluon-less file, and a method named jit
    (tmp_path / "m.py").write_text(textwrap.dedent("""\
        import triton
        from numba import jit


        class gl:
            @staticmethod
            def jit(f):
                return f


        @gl.jit
        def f(x, n):
            pass


        @jit
        def g(x, n):
            pass
        """))
    assert scan_doc(tmp_path, ".")["summary"]["kernels"] == 0


# --- runtime: real sm_90 Gluon compiles on a CPU ------------------------------------------

def _gluon():
    pytest.importorskip("triton")
    try:
        importlib.import_module("triton.experimental.gluon")
    except ImportError as exc:
        pytest.skip(f"this Triton has no Gluon (triton.experimental.gluon): {exc}")


def _fixture_module(tmp_path):
    """A fresh copy of fixtures/lint/gluon_pkg imported under a new name (empty JIT caches)."""
    pkg = f"gluon_fixture_{RNG.randrange(10**9)}"
    shutil.copytree(FIXTURE, tmp_path / pkg)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(f"{pkg}.kernels"), tmp_path / pkg
    finally:
        sys.path.remove(str(tmp_path))


def test_watch_report_and_predict_see_gluon_compiles(tmp_path, monkeypatch):
    _gluon()
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from runtime_helpers import FakeTensor, dtype, stand_in_driver

    import jitguard

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    trace = tmp_path / "trace.json"
    with stand_in_driver():
        mod, pkg_dir = _fixture_module(tmp_path)
        x = FakeTensor(16 * RNG.randrange(1 << 10, 1 << 20), dtype("float16"))
        y = FakeTensor(16 * RNG.randrange(1 << 10, 1 << 20), dtype("float16"))
        idx = FakeTensor(16 * RNG.randrange(1 << 10, 1 << 20), dtype("int32"))
        odd = 16 * RNG.randrange(1, 100) + RNG.randrange(1, 16)
        with jitguard.watch(trace=str(trace)) as w:
            mod.row_scale.warmup(x, y, odd, 4096, 0.5, BLOCK=128, num_warps=4, grid=(1,))
            mod.row_scale.warmup(x, y, 16 * RNG.randrange(1, 100), 4096, 0.5, BLOCK=128, num_warps=4, grid=(1,))
            mod.gather_rows.warmup(x, idx, y, 4096, N_ROWS=3, BLOCK=128, num_warps=4, grid=(1,))
            mod.gather_rows.warmup(x, idx, y, 4096, N_ROWS=5, BLOCK=128, num_warps=4, grid=(1,))
        assert type(mod.row_scale).__name__ == "GluonJITFunction"
        ev = w.events
        assert [(e.kernel.rsplit(".", 1)[-1], e.variant) for e in ev] == [
            ("row_scale", 1), ("row_scale", 2), ("gather_rows", 1), ("gather_rows", 2)]
        assert all(e.frontend == "gluon" and e.compile_ms and e.compile_ms > 0 for e in ev)
        assert [d.what for d in ev[1].diff] == ["num_tokens: i32 -> i32, divisible by 16"]
        assert '@gluon.jit(do_not_specialize=["num_tokens"])' in ev[1].remedy
        assert [d.what for d in ev[3].diff] == ["N_ROWS (constexpr): 3 -> 5"]
        pred = jitguard.predict(mod.row_scale, [((x, y, n, 4096, 0.5), {"BLOCK": 128}) for n in (1, odd, 32, odd + 16)])
        assert [v.calls for v in pred.variants] == [[0], [1, 3], [2]]
        assert '@gluon.jit(do_not_specialize=["num_tokens"])' in pred.variants[2].remedy

    doc = json.loads(trace.read_text())
    assert {e["frontend"] for e in doc["events"]} == {"gluon"}
    r = run(tmp_path, "report", str(trace))
    assert r.exit_code in (0, 1), r.output
    assert 'fix: add "num_tokens" to do_not_specialize (@gluon.jit(do_not_specialize=["num_tokens"]))' in r.stdout
    # and fix --from-trace writes into the @gluon.jit of the copied fixture
    r = run(tmp_path, "fix", "--no-cache", "--no-scan", "--from-trace", str(trace), "--write", str(pkg_dir))
    assert r.exit_code == 0, r.stderr
    text = (pkg_dir / "kernels.py").read_text()
    assert '@gluon.jit(do_not_specialize=["num_tokens"])\ndef row_scale(' in text
