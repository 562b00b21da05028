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
    result = scan_paths([str(root)], Config(select=("JG",), root=str(root), confidence="low"), jobs=1, use_cache=False)
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


def method_tree(k: str, cnt: str, cls: str, meth: str, value: str) -> dict[str, str]:
    """pkg.ops.kern launches k from a module-level wrapper; pkg.ops.adapter's method calls it;
    pkg.ops.layer calls that method through an object of unknown class, passing ``value``."""
    kern = KERNEL.format(k=k, cnt=cnt) + f"""
def launch(x, n):
    {k}[(1,)](x, n, BLOCK=64)
"""
    adapter = f"""
from pkg.ops.kern import launch

class {cls}:
    def {meth}(self, x, regions, *, extra=None):
        return launch(x, regions)
"""
    layer = f"""
import torch

class Layer:
    def forward(self, x, lengths):
        n = int(lengths.max())
        return self.adapter.{meth}(x, {value})
"""
    return {"pkg.ops.__init__": "", "pkg.ops.kern": kern, "pkg.ops.adapter": adapter, "pkg.ops.layer": layer}


def test_a_method_called_through_an_object_in_another_module(tmp_path):
    k, cnt, cls, meth = idents(4)
    cls = cls.capitalize()
    assert run_tree(tmp_path, method_tree(k, cnt, cls, meth, "n")) == {("JG001", k, cnt)}
    assert run_tree(tmp_path, method_tree(k, cnt, cls, meth, "regions=n")) == {("JG001", k, cnt)}
    # near miss: the object's method is passed a fixed value
    assert run_tree(tmp_path / "b", method_tree(k, cnt, cls, meth, "128")) == set()


def test_a_method_call_binds_to_the_nearest_definition_of_that_name(tmp_path):
    k, cnt, cls, meth = idents(4)
    tree = method_tree(k, cnt, cls.capitalize(), meth, "n")
    # the caller lives beside another class defining a method of the same name: the call is
    # that one's, not the adapter's in pkg.ops
    tree["pkg.ops.layer"] = tree["pkg.ops.layer"].replace("import torch", "import torch\n\nclass Local:\n"
                                                          f"    def {meth}(self, x, regions):\n        return x\n")
    tree["pkg.other.__init__"] = ""
    tree["pkg.other.layer"] = tree.pop("pkg.ops.layer")
    tree["pkg.other.local"] = f"class Local2:\n    def {meth}(self, x, regions):\n        return x\n"
    assert run_tree(tmp_path, tree) == set()
    # without the nearer definition the call binds to the adapter's method
    del tree["pkg.other.local"]
    tree["pkg.other.layer"] = tree["pkg.other.layer"].split("class Local:")[0] + "class Layer:" + \
        tree["pkg.other.layer"].split("class Layer:")[1]
    assert run_tree(tmp_path / "b", tree) == {("JG001", k, cnt)}


def test_a_parameter_bucketed_before_the_launch_stays_bucketed_when_callers_elsewhere_vary(tmp_path):
    k, cnt, x = idents(3)
    kern = f"""
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {cnt}: tl.constexpr, BLOCK: tl.constexpr):
    pass

def launch({x}, n):
    {k}[(1,)]({x}, triton.next_power_of_2(n), BLOCK=64)
"""
    user = f"""
from pkg.kern import launch

def forward(t):
    launch(t, t.shape[0])
"""
    # a constexpr bucketed from a varying size: a few compiles, by design: not JG002
    assert run_tree(tmp_path, {"pkg.kern": kern, "pkg.user": user}) == set()
    # the same parameter passed unbucketed: one compile per value
    raw = kern.replace("triton.next_power_of_2(n)", "n")
    assert run_tree(tmp_path / "b", {"pkg.kern": raw, "pkg.user": user}) == {("JG002", k, cnt)}


def test_a_file_read_for_its_launches_is_read_again_for_its_calls(tmp_path):
    # user.py launches a kernel of kern.py itself (so the scan reads it for launches, recording no
    # calls), and calls kern.py's wrapper: what it passes there is read on a second pass
    k, k2, cnt = idents(3)
    kern = KERNEL.format(k=k, cnt=cnt) + KERNEL.format(k=k2, cnt=cnt).split("import triton.language as tl")[1] + """
def launch(x, n):
    {k}[(1,)](x, n, BLOCK=64)
""".replace("{k}", k)
    user = f"""
from pkg.kern import {k2}, launch

def forward(t):
    {k2}[(1,)](t, 4, BLOCK=64)
    launch(t, t.shape[0] + 1)
"""
    assert run_tree(tmp_path, {"pkg.kern": kern, "pkg.user": user}) == {("JG001", k, cnt)}
    assert run_tree(tmp_path / "b", {"pkg.kern": kern, "pkg.user": user.replace("t.shape[0] + 1", "96 + 1")}) == set()


def test_a_field_of_a_record_built_in_the_module(tmp_path):
    k, cnt, fld, rows, meta = idents(5)
    for build in (f"Meta({rows}=x.shape[0], {fld}=int(lengths.max()))",  # keywords
                  f"Meta(x.shape[0], int(lengths.max()))"):  # positionally, in the fields' order
        src = KERNEL.format(k=k, cnt=cnt) + f"""
from dataclasses import dataclass

@dataclass
class Meta:
    {rows}: int
    {fld}: int

def build(x, lengths):
    return {build}

def run(x, {meta}: Meta):
    {k}[(1,)](x, {meta}.{fld}, BLOCK=64)
"""
        assert run_tree(tmp_path, {"pkg.ops": src}) == {("JG001", k, cnt)}, build
        # near miss: the field is always given a fixed value
        fixed = src.replace("int(lengths.max())", "96")
        assert run_tree(tmp_path / "b", {"pkg.ops": fixed}) == set(), build


def test_a_tuple_stored_on_an_object_then_unpacked(tmp_path):
    k, cnt, attr, meta = idents(4)
    src = KERNEL.format(k=k, cnt=cnt) + f"""
class Impl:
    def plan(self, x, lengths):
        if x is None:
            return None
        n = (int(lengths.max()) + 7) // 8
        return x, n

    def prepare(self, {meta}, x, lengths):
        {meta}.{attr} = self.plan(x, lengths)

    def forward(self, {meta}, x):
        y, n = {meta}.{attr}
        {k}[(1,)](y, n, BLOCK=64)
"""
    assert run_tree(tmp_path, {"pkg.ops": src}) == {("JG001", k, cnt)}
    fixed = src.replace("(int(lengths.max()) + 7) // 8", "x.shape[1]")
    assert run_tree(tmp_path / "b", {"pkg.ops": fixed}) == set()


def test_an_allocation_with_attributes_among_its_dims(tmp_path):
    k, cnt, buf, rows = idents(4)
    src = KERNEL.format(k=k, cnt=cnt) + f"""
class Packer:
    def pack(self, lengths):
        n = int(lengths.max()) + 2
        {buf} = torch.empty(self.{rows}, n, dtype=torch.int64)
        {k}[(1,)]({buf}, {buf}.stride(0), BLOCK=64)
"""
    # the row stride is n: it follows the batch
    assert run_tree(tmp_path, {"pkg.ops": src}) == {("JG001", k, cnt)}
    # one attribute holding a whole shape: the layout is unknown, a stride is a model dimension
    whole = src.replace(f"torch.empty(self.{rows}, n, dtype=torch.int64)", f"torch.empty(self.{rows}, dtype=torch.int64)")
    assert run_tree(tmp_path / "b", {"pkg.ops": whole}) == set()


def test_a_written_budget_shared_over_a_guessed_count_is_not_excused_by_a_name(tmp_path):
    k, cnt, x, s, budget = idents(5)
    budget = budget.upper()
    # topk_target names a model dimension, but 512 // batch is no dimension: it follows the batch
    src = KERNEL.format(k=k, cnt=cnt) + f"""
def go({x}):
    b, h = {x}.shape
    {budget} = 512
    topk_target = max(1, min(16, {budget} // max(1, b * h)))
    n = 1 << (topk_target.bit_length() - 1)
    {k}[(1,)]({x}, n, BLOCK=64)
"""
    assert run_tree(tmp_path, {"pkg.ops": src}) == {("JG001", k, cnt)}
    # near miss: a ratio of two tensors' dims named like a model dimension keeps the name's word
    ratio = KERNEL.format(k=k, cnt=cnt) + f"""
def go({x}, weight, {s}):
    group_size = weight.shape[0] // {s}.shape[0]
    {k}[(1,)]({x}, group_size, BLOCK=64)
"""
    assert run_tree(tmp_path / "b", {"pkg.ops": ratio}) == set()


# ---- precision guards (found on sglang 0.5.23, a codebase the analyses were not built on) ----
def test_the_element_count_of_one_row_of_a_pool_is_fixed(tmp_path):
    k, cnt, pool = idents(3)
    src = KERNEL.format(k=k, cnt=cnt) + f"""
def run({pool}):
    {k}[(1,)]({pool}, {{idx}}.numel(), BLOCK=64)
"""
    # x[0].numel() and x[0, 0].numel(): the non-leading dimensions, fixed per model
    for idx in (f"{pool}[0]", f"{pool}[0, 0]"):
        assert run_tree(tmp_path, {"pkg.ops": src.replace("{idx}", idx)}) == set(), idx
    # near miss: the whole tensor's count includes the leading (token) dimension
    assert run_tree(tmp_path / "b", {"pkg.ops": src.replace("{idx}", pool)}) == {("JG001", k, cnt)}


def test_a_field_filled_from_a_size_guess_is_not_evidence(tmp_path):
    k, cnt, fld, layers = idents(4)
    src = KERNEL.format(k=k, cnt=cnt) + f"""
from dataclasses import dataclass

@dataclass
class Bundle:
    {fld}: int

def build({layers}):
    return Bundle({fld}={{value}})

def run(x, b: Bundle):
    {k}[(1,)](x, b.{fld}, BLOCK=64)
"""
    # len() of a list, or the leading dim of a tensor nothing is known of: a plan built once
    for value in (f"len({layers})", f"{layers}.shape[0]"):
        assert run_tree(tmp_path, {"pkg.ops": src.replace("{value}", value)}) == set(), value
    # near miss: a field filled from data read off the device does vary
    assert run_tree(tmp_path / "b", {"pkg.ops": src.replace("{value}", f"int({layers}.max())")}) \
        == {("JG001", k, cnt)}


def test_a_method_bound_through_an_object_does_not_carry_a_size_guess(tmp_path):
    k, cnt, cls, meth = idents(4)
    cls = cls.capitalize()
    # the object's method is passed len() of a list nothing is known of: no finding
    tree = method_tree(k, cnt, cls, meth, "len(x)")
    assert run_tree(tmp_path, tree) == set()
    # near miss: the same binding with a value read off the device still reports
    assert run_tree(tmp_path / "b", method_tree(k, cnt, cls, meth, "n")) == {("JG001", k, cnt)}


def layout_tree(k: str, s0: str, w: str, cnt: str, alloc: str) -> dict[str, str]:
    """pkg.ops.kern's module-level wrapper launches k with a dim and a stride of its tensor parameter;
    pkg.ops.layer (another module) allocates that tensor as ``alloc`` and calls the wrapper."""
    kern = f"""
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {s0}, {w}, {cnt}, BLOCK: tl.constexpr):
    pass

def launch(t, n):
    rows, width = t.shape
    {k}[(rows,)](t, t.stride(0), width, n, BLOCK=64)
"""
    layer = f"""
import torch
from pkg.ops.kern import launch

def forward(x, lengths, max_seqlen):
    buf = {alloc}
    launch(buf, 4)
    return buf
"""
    return {"pkg.ops.__init__": "", "pkg.ops.kern": kern, "pkg.ops.layer": layer}


def test_a_tensor_layout_made_by_callers_in_another_module(tmp_path):
    k, s0, w, cnt = idents(4)
    # the caller's buffer is [tokens, longest length of the batch]: its width and row stride vary
    varying = "torch.empty(x.shape[0], int(lengths.max()))"
    assert run_tree(tmp_path, layout_tree(k, s0, w, cnt, varying)) == {("JG001", k, s0), ("JG001", k, w)}
    # near misses: a fixed width; only the leading dim varies; a fixed row broadcast over 8
    # rows (expand's -1 keeps the source's dim, it does not absorb a leading one); a width that
    # varies only by its name (an entry parameter called max_seqlen)
    for i, alloc in enumerate(("torch.empty(x.shape[0], 128)", "torch.empty(int(lengths.sum()), 96)",
                               "torch.arange(64).expand(8, -1).contiguous()",
                               "torch.empty(x.shape[0], max_seqlen)")):
        assert run_tree(tmp_path / str(i), layout_tree(k, s0, w, cnt, alloc)) == set(), alloc


def test_a_layout_is_not_asked_of_callers_through_objects(tmp_path):
    k, s0, w, cnt, cls = idents(5)
    tree = layout_tree(k, s0, w, cnt, "torch.empty(x.shape[0], int(lengths.max()))")
    # the wrapper is a method, called through an object whose class the caller never names: a
    # binding by name only, so the caller's layout is not taken (docs/provenance.md)
    tree["pkg.ops.kern"] = tree["pkg.ops.kern"].replace(
        "def launch(t, n):\n    rows", f"class {cls.capitalize()}:\n  def launch(self, t, n):\n    rows").replace(
        f"\n    {k}[(rows,)]", f"\n    {k}[(rows,)]")
    tree["pkg.ops.layer"] = tree["pkg.ops.layer"].replace("from pkg.ops.kern import launch\n", "").replace(
        "def forward(x, lengths, max_seqlen):", "def forward(ops, x, lengths, max_seqlen):").replace(
        "launch(buf, 4)", "ops.launch(buf, 4)")
    assert run_tree(tmp_path, tree) == set()
    # the same wrapper at module level takes it
    assert run_tree(tmp_path / "b", layout_tree(k, s0, w, cnt, "torch.empty(x.shape[0], int(lengths.max()))")) \
        == {("JG001", k, s0), ("JG001", k, w)}


def test_a_parameter_with_a_float_default_that_no_caller_passes_is_a_float(tmp_path):
    # A name that suggests a per-call value (``..._tokens``) on an entry parameter that no caller here
    # passes: with a float literal default it is a float (never value-specialized), not a varying int.
    rng = random.Random()
    k, cnt, x, cls = idents(4, rng)
    name = f"{idents(1, rng)[0]}_tokens"
    tmpl = KERNEL.format(k=k, cnt=cnt) + f"""
def launch({x}, {name}):
    {k}[(1,)]({x}, {name}, BLOCK=64)


class {cls}:
    @staticmethod
    def forward(ctx, {x}, {name}{{default}}):
        return launch({x}, {name})
"""
    for default in ("=0.0", f"={rng.choice([1.0, 0.5, 1e-6, 2.5])!r}"):
        assert run_tree(tmp_path, {"pkg.ops": tmpl.format(default=default)}) == set(), default
    # near misses: an int default, no default, or a float default that a caller overrides with a varying int
    for default in ("=0", f"={rng.randint(1, 9)}", ""):
        assert run_tree(tmp_path, {"pkg.ops": tmpl.format(default=default)}) == {("JG001", k, cnt)}, default
    caller = tmpl.format(default="=0.0") + f"""

def go({x}):
    return {cls}.forward(None, {x}, {x}.shape[0])
"""
    assert run_tree(tmp_path, {"pkg.ops": caller}) == {("JG001", k, cnt)}
