"""Structural name resolution (jitguard/static/names.py): imports, aliases, relative imports, scopes."""
from __future__ import annotations

import ast
import random

import pytest

from jitguard.static.scopes import Walker
from jitguard.static.names import IMPORT, LOCAL, qualified, resolve_relative
from tests._static_util import rand_ident


@pytest.mark.parametrize(
    "name,module,is_package,expected",
    [
        (".ops.k", "pkg.sub.mod", False, "pkg.sub.ops.k"),
        ("..ops.k", "pkg.sub.mod", False, "pkg.ops.k"),
        (".k", "pkg.sub", True, "pkg.sub.k"),
        ("..k", "pkg.sub", True, "pkg.k"),
        ("abs.k", "pkg.mod", False, "abs.k"),
    ],
)
def test_resolve_relative(name, module, is_package, expected):
    assert resolve_relative(name, module, is_package) == expected


def _scopes(src: str):
    walker = Walker("m", False)
    top = walker.run(ast.parse(src))
    return top, walker


def test_aliases_and_function_local_imports():
    alias = rand_ident(random.Random(), "t")
    src = f"import triton as {alias}\nfrom triton import jit as j\ndef f():\n    import numpy as {alias}\n    return {alias}\n"
    top, walker = _scopes(src)
    expr = ast.parse(f"{alias}.jit", mode="eval").body
    assert qualified(expr, top) == [("triton.jit", IMPORT)]
    assert qualified(ast.parse("j", mode="eval").body, top) == [("triton.jit", IMPORT)]
    inner = walker.info.functions["f"].scope
    assert qualified(expr, inner) == [("numpy.jit", IMPORT)]  # the function's own import shadows


def test_class_scope_is_skipped_from_methods():
    src = "import triton\nclass C:\n    triton = None\n    k = 1\n    def m(self):\n        pass\n"
    top, walker = _scopes(src)
    method = walker.info.functions["C.m"].scope
    # inside a method, `triton` is the module's import, not the class attribute
    assert qualified(ast.parse("triton.jit", mode="eval").body, method) == [("triton.jit", IMPORT)]
    assert qualified(ast.parse("C.k", mode="eval").body, method) == [("C.k", LOCAL)]
