"""caller-fixed-leading across modules: the leading dim of a launcher's tensor parameter is fixed when
every caller elsewhere passes a tensor whose leading dim is fixed (``x.view(1, n, d)``, a packed
batch of one), a few levels up. What the chain needs: a caller's tensor whose other dims tell
nothing is still recorded for its fixed leading dim, a file read for the callers of one function is
read again for the callers of the next level, and a parameter reassigned from itself under a
condition (``if c: x = x.contiguous()``) or only after it is handed on (``a, x = f(x)``) still hands
on what its callers pass; ``x.unsqueeze(0)`` / ``x[None]`` of a tensor laid out nowhere known is a
batch of one (rule batch-of-one). Random identifiers."""
from __future__ import annotations

import random

import pytest

from jitguard.config import Config
from jitguard.static.runner import scan_paths
from tests._static_util import MASKED_KERNEL, rand_names

LAUNCHER = MASKED_KERNEL + """
def {f}({x}):
    {b} = {x}.shape[0]
    {k}[(1,)]({x}, {b}, BLOCK=16)
"""

MIDDLE = """
from .{kmod} import {f}

def {g}({x}, {c}):
{body}
{call}
"""

TOP = """
import torch
from .{kmod} import {f}
from .{mmod} import {g}

def {h}({t}, {n}):
    {f}(torch.empty(1, 64))
    return {g}({arg}, True)
"""


CALLS = {
    "returned": "    return {f}({x})",
    # the parameter is reassigned from the call's result: the call itself reads what callers pass
    "reassigned-after": "    {c}, {x} = {f}({x}), {x}.t()\n    return {x}",
}


def _findings(tmp_path, body: str, arg: str, call: str = CALLS["returned"]) -> list:
    rng = random.Random()
    nm = rand_names(rng, "k", "n", "f", "g", "h", "x", "b", "c", "t", "kmod", "mmod", "top")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / f"{nm['kmod']}.py").write_text(LAUNCHER.format(**nm))
    (pkg / f"{nm['mmod']}.py").write_text(MIDDLE.format(body=body.format(**nm), call=call.format(**nm), **nm))
    (pkg / f"{nm['top']}.py").write_text(TOP.format(arg=arg.format(**nm), **nm))
    result = scan_paths([str(tmp_path)], Config(root=str(tmp_path)), use_cache=False, jobs=1)
    return [(f.param, f.confidence) for f in result.findings if f.code == "JG001" and f.param == nm["n"]]


BODIES = {
    "plain": "    pass",
    "conditionally-contiguous": "    if {c}:\n        {x} = {x}.contiguous()",
}


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("arg", ["{t}.view(1, {n}, 64)", "torch.empty(1, {n}, 64)", "{t}.reshape(1, -1, 64)",
                                 "torch.randint(0, 7, (1, {n}, 64))"])
def test_a_leading_dim_every_caller_two_levels_up_fixes_at_one_is_no_finding(tmp_path, body, arg):
    assert _findings(tmp_path, BODIES[body], arg) == []


@pytest.mark.parametrize("body", sorted(BODIES))
# torch.randint(low, high, size): the bounds of the values are no dims (a literal bound read as the
# leading dim fixed it)
@pytest.mark.parametrize("arg", ["{t}", "{t}.view(-1, 64)", "torch.empty({n}, 64)", "torch.randint(-7, 7, ({n}, 64))",
                                 "torch.randint(7, size=({n}, 64))", "torch.randint(7, ({n}, 64)).view(-1, 64)"])
def test_a_caller_passing_a_tensor_of_unknown_leading_dim_keeps_the_finding(tmp_path, body, arg):
    assert [lv for _, lv in _findings(tmp_path, BODIES[body], arg)] == ["medium"]


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("arg", ["{t}.unsqueeze(0)", "{t}[None]", "{t}[None, ...]", "{t}.view(1, {n}, 64)"])
def test_a_batch_of_one_handed_through_a_parameter_reassigned_later_is_no_finding(tmp_path, call, arg):
    assert _findings(tmp_path, BODIES["plain"], arg, CALLS[call]) == []


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("arg", ["{t}.unsqueeze(1)", "{t}[:, None]", "{t}"])
def test_a_new_dim_that_is_not_the_leading_one_keeps_the_finding(tmp_path, call, arg):
    assert [lv for _, lv in _findings(tmp_path, BODIES["plain"], arg, CALLS[call])] == ["medium"]


def test_a_parameter_reassigned_before_it_is_handed_on_does_not_rest_on_its_callers(tmp_path):
    # `x = x[:4]`, then f(x): the read sees the reassigned value, not what callers pass (a slice of
    # the caller's batch of one may still be anything): the guess stays
    body = "    {x} = {x}[{c}:]"
    assert [lv for _, lv in _findings(tmp_path, body, "{t}.unsqueeze(0)")] == ["medium"]


LOCAL = MASKED_KERNEL + """
def {f}({x}):
    {b}, {c} = {x}.shape
    {k}[(1,)]({x}, {b}, BLOCK=16)


def {g}({x}):
    return {f}({x}.contiguous())


def {h}({t}):
    return {g}({arg})
"""


@pytest.mark.parametrize("arg,levels", [("{t}.unsqueeze(0)", []), ("{t}[None]", []),
                                        ("{t}.unsqueeze(1)", ["medium"]), ("{t}", ["medium"])])
def test_a_batch_of_one_every_caller_in_the_module_hands_down_fixes_the_leading_dim(tmp_path, arg, levels):
    nm = rand_names(random.Random(), "k", "n", "f", "g", "h", "x", "b", "c", "t")
    (tmp_path / "m.py").write_text(LOCAL.format(arg=arg.format(**nm), **nm))
    result = scan_paths([str(tmp_path)], Config(root=str(tmp_path)), use_cache=False, jobs=1)
    assert [f.confidence for f in result.findings if f.code == "JG001" and f.param == nm["n"]] == levels
