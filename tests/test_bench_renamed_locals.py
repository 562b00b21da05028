"""bench/renamed_locals.py renames host code's locals (and parameters no call passes by keyword)
without changing what the code does, and leaves kernels and what findings name as they are."""
from __future__ import annotations

import ast
import pathlib
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
renamed_locals = pytest.importorskip("renamed_locals")

SOURCE = '''
import triton

TOTAL = 3

def helper(values, scale):
    acc = 0
    for item in values:
        acc += item * scale
    def inner(extra):
        got = acc + extra
        return got
    try:
        out = inner(TOTAL)
    except ValueError as err:
        out = err
    return out

def keyword_user(count):
    return helper([count, 2], scale=count)

def outer(width):
    rows = width * 2
    @triton.jit
    def nested_kernel(x_ptr, rows_arg):
        offs = rows_arg
    return rows

def later_kernel(x_ptr, n_rows):
    step = n_rows

later_kernel = triton.jit(later_kernel, do_not_specialize=("n_rows",))
'''


def _copies(tmp_path) -> dict[str, str]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "m.py").write_text(SOURCE)
    roots = {name: tmp_path / name for name in ("plain", *renamed_locals.VARIANTS)}
    texts, skipped = renamed_locals.write_plain(src, roots["plain"])
    _, kernels = renamed_locals.scan(roots["plain"])  # the kernels as the scan discovers them
    counts = renamed_locals.write_renamed(texts, kernels, roots)
    assert len(texts) == 1 and not skipped and counts["locals_renamed"] > 0
    assert counts["with_params_renamed"] > counts["locals_renamed"]
    return {name: (root / "m.py").read_text() for name, root in roots.items()}


def _run(text: str) -> tuple:
    space: dict = {}
    exec(compile(text.replace("import triton", "import types\ntriton = types.SimpleNamespace(jit=lambda f=None, **k: f or (lambda g: g))"), "m", "exec"), space)
    return space["helper"]([1, 2], 3), space["keyword_user"](4), space["outer"](5)


def test_renamed_copies_compute_what_the_code_did(tmp_path):
    copies = _copies(tmp_path)
    assert _run(copies["plain"]) == _run(copies["renamed"]) == _run(copies["params"]) == (12, 27, 10)


def test_locals_are_renamed_and_kernels_keywords_and_globals_are_not(tmp_path):
    copies = _copies(tmp_path)
    names = lambda text: {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}  # noqa: E731
    args = lambda text: {a.arg for a in ast.walk(ast.parse(text)) if isinstance(a, ast.arg)}  # noqa: E731
    for name in ("renamed", "params"):
        text = copies[name]
        assert not {"acc", "item", "got", "out", "rows"} & names(text)  # locals, a nested function's too
        assert {"TOTAL", "triton", "err"} <= names(text)  # a global, an import, an except name
        # kernels (decorated, nested, or made one by a call) keep every name: the findings name them
        assert {"x_ptr", "rows_arg", "n_rows"} <= args(text) and {"offs", "step"} <= names(text)
    # parameters: kept with locals alone; renamed too unless some call passes them by keyword
    assert {"values", "scale", "count", "width"} <= args(copies["renamed"])
    assert "scale" in args(copies["params"]) and not {"values", "count", "width"} & args(copies["params"])
