"""Data-flow rules added for values that vary per call without a shape saying so: reductions of a
tensor's contents (``int(lengths.max())``), launch positionals after the last of several ``*args`` of
unknown length, a varying multiple of 16 capped by a fixed value (``min(round_up(n, 64), cap)``),
reassignments of a name from itself, and calls of methods through objects whose class is unknown,
followed across modules. Each is checked on small source trees written to tmp_path and scanned with
the real runner, beside a near miss (a fixed value) that must stay unreported. Random identifiers."""
from __future__ import annotations

import random

from jitguard.config import Config
from jitguard.static.runner import scan_paths
from tests._static_util import rand_ident

KERNEL = """
import numpy as np
import torch
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {cnt}, BLOCK: tl.constexpr):
    pass
"""


def run_tree(tmp_path, sources: dict[str, str]) -> set[tuple[str, str, str]]:
    """{module: source} under tmp_path/pkg -> {(code, kernel leaf, param)} of the real scan."""
    root = tmp_path / "tree"
    (root / "pkg").mkdir(parents=True, exist_ok=True)
    (root / "pkg" / "__init__.py").write_text("")
    for module, src in sources.items():
        path = root / (module.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(src)
    result = scan_paths([str(root)], Config(select=("JG",), root=str(root)), jobs=1, use_cache=False)
    assert not result.internal_errors
    return {(f.code, f.kernel.rsplit(".", 1)[-1], f.param) for f in result.findings}


def idents(n: int, rng: random.Random | None = None) -> list[str]:
    rng = rng or random.Random()
    out: list[str] = []
    while len(out) < n:
        v = rand_ident(rng, rng.choice("abcfgpqrsuwxyz"))
        if v not in out:
            out.append(v)
    return out


def test_a_reduction_of_a_tensors_contents_varies(tmp_path):
    k, cnt, x, lens, n = idents(5)
    for reduce in (f"int({lens}.max())", f"int({lens}[:2].sum()) + 1", f"int(np.max({lens}))",
                   f"({lens}.sum() + 7) // 8"):
        src = KERNEL.format(k=k, cnt=cnt) + f"""
def go({x}, {lens}):
    {n} = {reduce}
    {k}[(1,)]({x}, {n}, BLOCK=64)
"""
        assert run_tree(tmp_path, {"pkg.ops": src}) == {("JG001", k, cnt)}, reduce
    # near misses: the contents of a module constant, of self's tensors, of a weight: fixed
    table = rand_ident(random.Random(), "t").upper()
    fixed = KERNEL.format(k=k, cnt=cnt) + f"""
{table} = torch.arange(64)

class {n.capitalize()}:
    def go(self, {x}, weight):
        {k}[(1,)]({x}, int({table}.max()), BLOCK=64)
        {k}[(1,)]({x}, int(self.{lens}.sum()), BLOCK=64)
        {k}[(1,)]({x}, int(weight.max()), BLOCK=64)
"""
    assert run_tree(tmp_path, {"pkg.ops": fixed}) == set()


def test_positionals_after_the_last_of_two_unknown_stars_are_placed(tmp_path):
    k, x, y, z, m = idents(5)
    kernel = f"""
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, s0, s1, s2, s3, {m}, BLOCK: tl.constexpr):
    pass
"""
    src = kernel + f"""
def go({x}, {y}, {z}):
    {k}[(1,)]({x}, *{y}.stride(), *{z}.stride(), {x}.shape[0], BLOCK=64)
"""
    assert run_tree(tmp_path, {"pkg.ops": src}) == {("JG001", k, m)}
    # the same launch with a fixed last positional: nothing to report
    assert run_tree(tmp_path, {"pkg.ops": src.replace(f"{x}.shape[0], BLOCK", "7, BLOCK")}) == set()


def test_a_multiple_of_16_capped_by_a_fixed_value_is_one_class(tmp_path):
    k, cnt, x, w, cap = idents(5)
    src = KERNEL.format(k=k, cnt=cnt) + f"""
def round_up(a, b):
    return (a + b - 1) // b * b

def go({x}, {cap}):
    {w} = round_up({x}.shape[0], 64)
    {w} = min(max(64, {w}), {cap}.shape[1] * 8)
    {k}[(1,)]({x}, {w}, BLOCK=64)
"""
    # a multiple of 64 or the one fixed cap: never a per-call value class
    assert run_tree(tmp_path, {"pkg.ops": src}) == set()
    # without the rounding the value takes every class as it varies
    varying = src.replace(f"round_up({x}.shape[0], 64)", f"{x}.shape[0] + 3")
    assert run_tree(tmp_path, {"pkg.ops": varying}) == {("JG001", k, cnt)}
