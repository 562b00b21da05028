"""Weight-ness and layouts through calls: ``Fn.apply`` of a ``torch.autograd.Function`` binds to its
``forward`` (and ``ctx.saved_tensors`` to what ``forward`` saved), the leading dim of an entry
parameter's tensor is fixed when every caller in other modules passes a fixed one, and a module-level
tensor bound once has the layout of its value. Random identifiers: structure, not names, decides."""
from __future__ import annotations

import random

from tests._static_util import MASKED_KERNEL, pairs, rand_ident, rand_names, scan


def levels(findings, code: str = "JG001") -> dict[tuple[str, str], str]:
    """{(kernel, param): confidence} of the findings of ``code``."""
    return {(f.kernel.rsplit(".", 1)[-1], f.param): f.confidence for f in findings if f.code == code}


def _names(rng: random.Random) -> dict[str, str]:
    return rand_names(rng, "k", "n", "launch", "helper", "entry", "cls", "attr", "x", "t", "u", "g", "layer", "other")


# a wrapper of the kernel reading the leading dim of the tensor it is handed
_LAUNCH = """
def {launch}({t}):
    {u} = {t}.shape[0]
    {k}[(1,)]({t}, {u}, BLOCK=16)
"""

_AUTOGRAD = MASKED_KERNEL + _LAUNCH + """
import torch

class {cls}({base}):
    @staticmethod
    def forward(ctx, {x}, {t}):
        ctx.save_for_backward({t})
        return {launch}({t}.contiguous())

    @staticmethod
    def backward(ctx, {g}):
        ({t},) = ctx.saved_tensors
        return {launch}({t}), None

class {layer}:
    def run(self, {x}):
        return {cls}.apply({x}, {passed})
"""


def test_autograd_apply_binds_to_forward_and_saved_tensors_to_backward():
    rng = random.Random()
    for _ in range(5):
        n = _names(rng)
        weight = {"m": _AUTOGRAD.format(**n, base="torch.autograd.Function", passed=f"self.{n['attr']}")}
        # every path (forward, and backward through ctx.saved_tensors) hands on the object's tensor
        assert not pairs(scan(weight)), weight
        # a tensor nothing is known of: the leading-dim guess stands
        unknown = {"m": _AUTOGRAD.format(**n, base="torch.autograd.Function", passed=n["x"])}
        assert ("JG001", n["k"], n["n"]) in pairs(scan(unknown))
        # a class that is no autograd function: .apply is some other method, nothing is bound
        plain = {"m": _AUTOGRAD.format(**n, base="object", passed=f"self.{n['attr']}")}
        assert ("JG001", n["k"], n["n"]) in pairs(scan(plain))


def test_saved_tensors_take_the_forward_s_saved_arguments_in_order():
    rng = random.Random()
    n = _names(rng)
    src = MASKED_KERNEL + _LAUNCH + """
import torch

class {cls}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, {x}, {t}):
        ctx.save_for_backward({x}, {t})
        return {x}

    @staticmethod
    def backward(ctx, {g}):
        {x}, {t} = ctx.saved_tensors
        return {launch}({saved}), None

class {layer}:
    def run(self, {x}):
        return {cls}.apply({x}, self.{attr})
"""
    # element 1 is the object's tensor; element 0 the per-call input
    assert not pairs(scan({"m": src.format(**n, saved=n["t"])}))
    assert ("JG001", n["k"], n["n"]) in pairs(scan({"m": src.format(**n, saved=n["x"])}))


_OPS = MASKED_KERNEL + _LAUNCH + """
def {helper}({t}):
    return {launch}({t}.contiguous())

def {entry}({x}, {t}):
    return {helper}({t})
"""
_CALLER = """
from pkg.ops import {entry}

class {layer}:
    def forward(self, {x}, {g}):
        return {entry}({x}, {passed})
"""


def test_the_leading_dim_of_an_entry_tensor_is_fixed_when_every_caller_elsewhere_passes_a_weight():
    rng = random.Random()
    for _ in range(5):
        n = _names(rng)
        ops = _OPS.format(**n)

        def found(*passed: str) -> dict:
            out = {"pkg.ops": ops}
            for i, p in enumerate(passed):
                out[f"pkg.layer{i}"] = _CALLER.format(**n, passed=p)
            return levels(scan(out)).get((n["k"], n["n"]))

        weight, other = f"self.weight_{n['attr']}", f"self.{n['attr']}"
        # handed down through two helpers of the module, unchanged: the callers elsewhere decide
        assert found(weight) is None
        assert found(weight, f"{n['g']}.weight") is None
        # a tensor the object holds, not named a weight: as fixed as the object, a few variants (low)
        assert found(other) == "low"
        assert found(weight, other) == "low"
        # one caller passes a tensor nothing is known of: the guess stands
        assert found(weight, n["g"]) == "medium"
        assert found(n["g"]) == "medium"
        # no caller anywhere: the guess stands
        assert levels(scan({"pkg.ops": ops})).get((n["k"], n["n"])) == "medium"


def test_an_attribute_a_method_rebinds_or_a_record_field_is_state_of_the_step():
    rng = random.Random()
    n = _names(rng)
    ops = _OPS.format(**n)
    caller = _CALLER.format(**n, passed=f"self.weight_{n['attr']}")

    def found(src: str):
        return levels(scan({"pkg.ops": ops, "pkg.layer": src})).get((n["k"], n["n"]))

    assert found(caller) is None
    # the object keeps the step's tensor: `self.x = x` in a method other than the constructor
    rebinds = caller + f"\n    def prepare(self, {n['t']}):\n        self.weight_{n['attr']} = {n['t']}\n"
    assert found(rebinds) == "medium"
    # set once in the constructor: held for the model's life
    held = caller + f"\n    def __init__(self, {n['t']}):\n        self.weight_{n['attr']} = {n['t']}\n"
    assert found(held) is None
    # a field of a record class: a per-batch object
    record = caller.replace(f"class {n['layer']}:", f"import dataclasses\n\n@dataclasses.dataclass\nclass {n['layer']}:\n"
                            f"    weight_{n['attr']}: object = None\n")
    assert found(record) == "medium"


def test_a_slice_on_the_way_down_keeps_the_guess():
    rng = random.Random()
    n = _names(rng)
    ops = (MASKED_KERNEL + _LAUNCH + """
def {entry}({x}, {t}):
    return {launch}({t}[:{x}.shape[0]])
""").format(**n)
    found = levels(scan({"pkg.ops": ops, "pkg.layer": _CALLER.format(**n, passed=f"self.weight_{n['attr']}")}))
    assert found[(n["k"], n["n"])] == "medium"


def test_a_module_level_tensor_bound_once_has_the_layout_of_its_value():
    rng = random.Random()
    for _ in range(5):
        n = _names(rng)
        src = MASKED_KERNEL + """
import torch

def {launch}({t}):
    {x} = torch.empty_like({t})
    {u} = {x}.size(0)
    {k}[(1,)]({x}, {u}, BLOCK=16)

{g} = {value}
{launch}({g})
"""
        # code the module runs at import
        assert not pairs(scan({"m": src.format(**n, value="torch.tensor([1, 2])")}))
        # a value of unknown layout: the leading-dim guess stands
        assert ("JG001", n["k"], n["n"]) in pairs(scan({"m": src.format(**n, value=f"torch.load({n['other']})")}))
        # the same under `if __name__ == "__main__":` is the module's script (rule test-callers): no evidence
        guarded = src.replace("\n{g} = {value}\n{launch}({g})\n", '\nif __name__ == "__main__":\n    {g} = {value}\n    {launch}({g})\n')
        assert guarded != src
        assert ("JG001", n["k"], n["n"]) in pairs(scan({"m": guarded.format(**n, value="torch.tensor([1, 2])")}))


def test_the_last_unconditional_reassignment_is_what_every_read_sees(tmp_path):
    from tests.test_provenance_rules import _findings

    body = """
def w(x, lengths):
    m = int(lengths.max()) + 3
{between}    m = {rounded}
    KERNEL[(1,)](x, m, BLOCK=64)
"""
    # rounded up to 16 after every other assignment: one value class, no finding
    assert _findings(tmp_path, body.format(between="", rounded="round_up(m, 16)")) == {}
    # the sum itself varies: the reassignment's class is the read's (no join with the earlier value)
    assert list(_findings(tmp_path, body.format(between="", rounded="m * 2")).values()) == ["high"]
    # a read between the two assignments sees the earlier value: the join stands
    between = "    KERNEL[(1,)](x, m, BLOCK=64)\n"
    assert list(_findings(tmp_path, body.format(between=between, rounded="round_up(m, 16)")).values()) == ["high"]
    # under an `if` it may not run: both values reach the read
    cond = """
def w(x, lengths, c):
    m = int(lengths.max()) + 3
    if c:
        m = round_up(m, 16)
    KERNEL[(1,)](x, m, BLOCK=64)
"""
    assert list(_findings(tmp_path, cond).values()) == ["high"]


def test_rounding_a_multiple_of_16_up_to_a_divisor_of_16_keeps_it_one(tmp_path):
    from tests.test_provenance_rules import _findings

    body = """
def w(x, lengths, align):
    m = round_up(int(lengths.max()), {step})
    KERNEL[(1,)](x, round_up(m, {again}), BLOCK=64)
"""
    assert _findings(tmp_path, body.format(step=32, again=4)) == {}
    # 24 does not divide 16: round_up(32k, 24) is a multiple of 24 only
    assert list(_findings(tmp_path, body.format(step=32, again=24)).values()) == ["high"]
    # an alignment the code does not fix, then a literal divisor of 16: the convention, low
    assert list(_findings(tmp_path, body.format(step="align", again=4)).values()) == ["low"]
    # an alignment that is a value nothing here tells of (another module's result): the convention too
    other = """
def w(x, lengths):
    align = get_alignment()
    KERNEL[(1,)](x, round_up(int(lengths.max()), align), BLOCK=64)
"""
    assert list(_findings(tmp_path, "from elsewhere import get_alignment\n" + other).values()) == ["low"]


def test_a_scan_of_a_tree_reads_the_callers_elsewhere_of_a_guessed_leading_dim(tmp_path):
    """The runner reads the files calling the entry function (they define no kernel), as it does for
    values: the scan of the tree, not only the linked facts, drops the guess."""
    from jitguard.config import Config
    from jitguard.static.runner import scan_paths

    rng = random.Random()
    n = _names(rng)
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(_OPS.format(**n))

    def found(passed: str) -> set:
        (pkg / "layer.py").write_text(_CALLER.format(**n, passed=passed))
        result = scan_paths([str(tmp_path)], Config(select=("JG",), root=str(tmp_path), confidence="low"),
                            jobs=1, use_cache=False)
        return pairs(result.findings)

    assert not found(f"self.weight_{n['attr']}")
    assert ("JG001", n["k"], n["n"]) in found(n["g"])


def test_a_middle_minus_one_kept_apart_from_a_guessed_leading_dim_is_not_a_model_dim(tmp_path):
    from tests.test_provenance_rules import _findings

    body = """
def w(v):
    n = v.shape[0]
    d = v.shape[-1]
    v3 = v.reshape({shape})
    {target} = v3.shape[1]
    KERNEL[(1,)](v3, {target}, BLOCK=64)
"""
    # [n, -1, d]: the -1 holds v's middle dims, unknown: the name decides, low
    assert list(_findings(tmp_path, body.format(shape="n, -1, d", target="n_tokens")).values()) == ["low"]
    rng = random.Random()
    assert _findings(tmp_path, body.format(shape="n, -1, d", target=rand_ident(rng))) == {}
    # [n, -1]: the rest once the varying dim is kept apart, a model dim as before
    body2 = body.replace("v3.shape[1]", "v3.shape[1]").replace("{shape}", "n, -1")
    assert _findings(tmp_path, body2.format(target="n_tokens")) == {}


_NAMED_DIM = MASKED_KERNEL + """
def {launch}({t}):
    num_tokens = {t}.shape[1]
    {k}[(1,)]({t}, num_tokens, BLOCK=16)
"""
_NAMED_DIM_CALLER = """
import torch
from pkg.ops import {launch}

def {entry}({x}):
    {launch}({passed})
"""


def test_a_dim_classed_by_its_name_is_settled_by_the_layout_callers_elsewhere_pass():
    # the name agrees with what callers show by the leading-dim convention: medium, as the same code
    # with the local named anything else gives; on its own the name stays low
    rng = random.Random()
    for _ in range(3):
        n = _names(rng)
        ops = _NAMED_DIM.format(**n)

        def found(passed: str | None) -> str | None:
            out = {"pkg.ops": ops}
            if passed is not None:
                out["pkg.layer"] = _NAMED_DIM_CALLER.format(**n, passed=passed)
            return levels(scan(out)).get((n["k"], n["n"]))

        varying = f"torch.empty(4, {n['x']}.shape[0], 8)"
        assert found(None) == "low"
        assert found(varying) == "medium"
        renamed = {"pkg.ops": ops.replace("num_tokens", n["u"]),
                   "pkg.layer": _NAMED_DIM_CALLER.format(**n, passed=varying)}
        assert levels(scan(renamed)).get((n["k"], n["n"])) == "medium"
