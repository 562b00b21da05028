"""Guards before a launch (jitguard/static/provenance/guards.py): alignment asserts make a value one
value class, early exits bound it; only guards that dominate the launch count. Random identifiers:
the code's structure decides, not names."""
from __future__ import annotations

import ast
import random

import pytest

from jitguard.static.extract import extract_file
from jitguard.static.facts import BUCKETED, STABLE, VARYING
from jitguard.static.provenance.guards import dominating_facts, value_class
from jitguard.static.provenance.rules import confidence
from tests._static_util import rand_names, scan, scan_one

KERNEL = """
import torch
import triton
import triton.language as tl
from elsewhere import {imported}

{const} = {const_value}

@triton.jit
def kern(x_ptr, v, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < v)
"""


def _names(rng: random.Random) -> dict[str, str]:
    return rand_names(rng, "x", "m", "k", "c", "f", "g", "imported", "const", "y", "p")


def launches(body: str, const_value: str = "128", seed: int | None = None) -> list:
    """The ``v`` argument of each launch of ``kern`` in ``body`` (a module's functions, its names in
    braces made random), in source order."""
    rng = random.Random(seed)
    names = _names(rng)
    src = KERNEL.format(const_value=const_value, **names) + body.format(**names)
    facts = extract_file("m.py", src, "m")
    out = []
    for la in sorted((la for la in facts.launches if la.callee == "kern"), key=lambda la: la.line):
        out.append(next(a for a in la.args if a.position == 1))
    return out


def only(body: str, const_value: str = "128"):
    (arg,) = launches(body, const_value)
    return arg


ALIGNED = [
    # the guard spelled on the tensor dim, the value read from it another way
    "assert {x}.size(0) % 128 == 0\n    {m}, {k} = {x}.shape",
    "assert {x}.shape[0] % 64 == 0\n    {m} = {x}.size(0)",
    "{m} = {x}.shape[0]\n    assert not {m} % 32",
    "{m} = {x}.shape[0]\n    if {m} % 16:\n        raise ValueError({m})",
    "{m} = {x}.shape[0]\n    if {m} % 256 != 0:\n        return None",
    "{m} = {x}.numel()\n    assert {m} % {const} == 0",            # a module constant (128)
    "assert {x}.numel() % ({const} * 2) == 0\n    {m} = {x}.numel()",  # arithmetic of constants
    "{m} = {x}.shape[0]\n    assert 0 == {m} % 16",
]


@pytest.mark.parametrize("guard", ALIGNED)
def test_an_alignment_guard_makes_the_value_one_value_class(guard):
    arg = only(f"""
def {{f}}({{x}}):
    {guard}
    kern[(1,)]({{x}}, {{m}}, BLOCK=16)
""")
    assert arg.provenance == VARYING and arg.div16, arg
    assert "alignment-guard" in arg.rules


def test_a_guard_on_an_alignment_that_is_not_a_multiple_of_16_proves_nothing():
    arg = only("""
def {f}({x}):
    {m} = {x}.shape[0]
    assert {m} % 8 == 0
    kern[(1,)]({x}, {m}, BLOCK=16)
""")
    assert arg.provenance == VARYING and not arg.div16
    assert not {"alignment-guard", "alignment-guard-convention"} & set(arg.rules)
    assert confidence(arg.rules, arg.by_name) == "medium"


@pytest.mark.parametrize("k", ["{imported}()", "{p}", "{imported}", "{y}", "{imported}.{c}", "{c}.{imported}({x}.dtype)"])
def test_an_alignment_the_code_does_not_fix_is_a_convention_never_above_low(k):
    arg = only(f"""
import {{c}}

def {{f}}({{x}}, {{p}}=128):
    {{y}} = {{p}}
    assert {{x}}.size(0) % {k} == 0
    {{m}} = {{x}}.shape[0]
    kern[(1,)]({{x}}, {{m}}, BLOCK=16)
""")
    assert arg.provenance == VARYING and not arg.div16
    assert "alignment-guard-convention" in arg.rules
    assert confidence(arg.rules, arg.by_name) == "low"


@pytest.mark.parametrize("k", ["{p}", "{g}", "{x}.size(1)", "{y}"])
def test_a_count_the_value_is_divided_by_is_not_an_alignment(k):
    # n % topk, T % H with H=1, a tensor dim: the value stays a per-call count at its level
    arg = only(f"""
def {{f}}({{x}}, {{p}}, {{g}}=1):
    {{y}} = {{x}}.shape[1] // 2
    assert {{x}}.size(0) % {k} == 0
    {{m}} = {{x}}.shape[0]
    kern[(1,)]({{x}}, {{m}}, BLOCK=16)
""")
    assert arg.provenance == VARYING and not arg.div16
    assert "alignment-guard-convention" not in arg.rules
    assert confidence(arg.rules, arg.by_name) == "medium"


def test_a_count_made_from_a_conventionally_aligned_value_is_a_count_again():
    arg = only("""
def {f}({x}, {p}=64):
    assert {x}.size(0) % {p} == 0
    kern[(1,)]({x}, {x}.shape[0] // {p}, BLOCK=16)
""")
    assert arg.provenance == VARYING and "alignment-guard-convention" not in arg.rules


@pytest.mark.parametrize("value, div16", [
    ("{m} // 8", True),       # 128 // 8 = 16
    ("{m} // 256", False),    # 256 does not divide 128
    ("{m} * 3", True),
    ("{m} + 1", False),
    ("{m} - {x}.shape[0]", True),
    ("{y}.stride(1)", True),  # a stride of a tensor allocated from the guarded dim
    ("{y}.stride(0)", False),  # its innermost stride after .t(): 1
])
def test_what_flows_from_a_guarded_value_keeps_what_can_be_proved(value, div16):
    arg = only(f"""
def {{f}}({{x}}):
    assert {{x}}.shape[0] % 128 == 0
    {{m}} = {{x}}.shape[0]
    {{y}} = torch.empty((7, {{m}}), device={{x}}.device).t()
    kern[(1,)]({{x}}, {value}, BLOCK=16)
""")
    assert arg.div16 is div16, arg


@pytest.mark.parametrize("body", [
    # inside a branch the launch is not in
    "{m} = {x}.shape[0]\n    if {c}:\n        assert {m} % 64 == 0\n    kern[(1,)]({x}, {m}, BLOCK=16)",
    # after the launch
    "{m} = {x}.shape[0]\n    kern[(1,)]({x}, {m}, BLOCK=16)\n    assert {m} % 64 == 0",
    # the local is bound twice: the value guarded need not be the one launched with
    "{m} = {x}.shape[0]\n    assert {m} % 64 == 0\n    if {c}:\n        {m} = {x}.shape[0] + 1\n"
    "    kern[(1,)]({x}, {m}, BLOCK=16)",
    # the tensor is rebound after the guard on its dim
    "assert {x}.shape[0] % 64 == 0\n    {x} = {x}[1:]\n    kern[(1,)]({x}, {x}.shape[0], BLOCK=16)",
    # an if whose body does not leave
    "{m} = {x}.shape[0]\n    if {m} % 64:\n        {c} = 1\n    kern[(1,)]({x}, {m}, BLOCK=16)",
    # a guard in another function
    "{m} = {x}.shape[0]\n    kern[(1,)]({x}, {m}, BLOCK=16)\n\ndef {g}({x}):\n    assert {x}.shape[0] % 64 == 0",
])
def test_only_guards_that_dominate_the_launch_count(body):
    arg = only(f"""
def {{f}}({{x}}, {{c}}):
    {body}
""")
    assert arg.provenance == VARYING and not arg.div16, arg
    assert not {"alignment-guard", "range-guard"} & set(arg.rules)


def test_the_guard_holds_inside_the_branch_it_opens_and_per_launch():
    first, second, third = launches("""
def {f}({x}):
    {m} = {x}.shape[0]
    kern[(1,)]({x}, {m} * 2, BLOCK=16)
    if {m} % 64 == 0:
        kern[(1,)]({x}, {m} * 2, BLOCK=16)
    else:
        kern[(1,)]({x}, {m} * 2, BLOCK=16)
""")
    assert not first.div16 and second.div16 and not third.div16


def test_a_guard_in_a_wrapper_before_the_call_holds_for_what_it_passes():
    src = """
def {g}({x}, {p}):
    kern[(1,)]({x}, {p}, BLOCK=16)

def {f}({x}):
    assert {x}.shape[0] % 64 == 0
    {g}({x}, {x}.shape[0])
"""
    assert only(src).div16
    # a second caller without the guard: the value is no longer always aligned
    arg = only(src + """
def {c}({x}):
    {g}({x}, {x}.shape[0])
""")
    assert arg.provenance == VARYING and not arg.div16


@pytest.mark.parametrize("guards, const_value, expected", [
    # the gemv path: M == 0 returns, M > LIMIT (= 1) goes elsewhere: always 1
    ("if {m} == 0:\n        return\n    if {m} > {const} or not {c}:\n        return {x}", "1", STABLE),
    ("if {m} > 1:\n        raise ValueError\n    if {m} < 1:\n        return", "1", STABLE),
    ("assert 2 <= {m} <= 15", "1", BUCKETED),               # one value class ("other"), 14 values
    ("if {m} >= 9:\n        return", "1", BUCKETED),        # 0..8: %16, ==1, other: a few variants
    ("if {m} > {const}:\n        raise ValueError", "16", BUCKETED),
    ("if {m} > {const}:\n        raise ValueError", "4096", VARYING),  # no bound worth using
    ("if {m} > {p}:\n        raise ValueError", "1", VARYING),         # a bound the code does not fix
    ("if {m} > 1:\n        {c} = 0", "1", VARYING),                     # no exit: no bound
])
def test_a_range_guard_bounds_the_value(guards, const_value, expected):
    arg = only(f"""
def {{f}}({{x}}, {{c}}, {{p}}):
    {{m}} = {{x}}.shape[0]
    {guards}
    kern[(1,)]({{x}}, {{m}}, BLOCK=16)
""", const_value)
    assert arg.provenance == expected, arg
    if expected != VARYING:
        assert arg.rules[0] in ("range-guard", "range-one-class")
    if expected == BUCKETED:
        assert confidence(arg.rules, arg.by_name) == "low"


def test_a_one_value_range_leaves_no_finding_and_a_few_values_a_low_one():
    rng = random.Random()
    names = _names(rng)
    body = """
def {f}({x}, {c}):
    {m} = {x}.shape[0]
    if {m} == 0:
        return
    if {m} > {const} or not {c}:
        return {x}
    kern[(1,)]({x}, {m}, BLOCK=16)
"""
    for const_value, levels in (("1", []), ("8", ["low"]), ("100000", ["medium"])):
        src = KERNEL.format(const_value=const_value, **names) + body.format(**names)
        found = [f for f in scan_one(src) if f.code == "JG001"]
        assert [f.confidence for f in found] == levels, (const_value, found)
        if const_value == "8":
            assert "takes a few values (bounded by a guard" in found[0].message


def test_facts_of_compound_guards():
    fn = ast.parse("""
def f(a, b, n):
    assert a % 32 == 0 and b > 3
    if n > 9 or a == 0:
        return
    if not (b < 100):
        raise ValueError
    while b:
        assert n == 100
    if a:
        pass
    elif b:
        return
    else:
        LAUNCH
""").body[0]
    target = fn.body[-1].orelse[0].orelse[0].value
    got = {(ast.unparse(f.expr), f.op, ast.unparse(f.bound)) for f in dominating_facts(fn, target)}
    assert {("a", "mod0", "32"), ("b", "gt", "3"), ("n", "le", "9"), ("a", "ne", "0"), ("b", "lt", "100"),
            ("a", "eq", "0"), ("b", "eq", "0")} <= got  # not a, then not b: the else branch
    assert ("n", "eq", "100") not in got  # inside the loop, not on the way to the target


def test_value_classes():
    assert [value_class(v) for v in (0, 1, 2, 16, 17, -16)] == ["%16", "==1", "other", "%16", "other", "%16"]


def test_a_guard_before_a_call_of_a_launcher_in_another_module():
    rng = random.Random()
    names = _names(rng)
    lib = KERNEL.format(const_value="1", **names) + """
def {g}({x}, {p}):
    kern[(1,)]({x}, {p}, BLOCK=16)
""".format(**names)
    user = """
from lib import {g}

def {f}({x}):
    {guard}
    {g}({x}, {x}.shape[0])
"""
    for guard, expected in (("assert {x}.shape[0] % 64 == 0", set()), ("pass", {"medium"})):
        src = user.format(guard=guard.format(**names), **names)
        got = {f.confidence for f in scan({"lib": lib, "app": src}) if f.code == "JG001"}
        assert got == expected, (guard, got)


def test_several_values_of_one_class_are_one_compile_as_an_int():
    rng = random.Random()
    names = _names(rng)
    src = KERNEL.format(const_value="1", **names) + """
@triton.jit
def {g}(x_ptr, w, C: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, C), 0.0, mask=tl.arange(0, C) < w)

def {f}({x}):
    {m} = {x}.shape[0]
    assert 2 <= {m} <= 8
    kern[(1,)]({x}, {m}, BLOCK=16)
    {g}[(1,)]({x}, {m} * 2, C={m})
""".format(**names)
    got = {(f.code, f.param): f.confidence for f in scan_one(src) if f.code in ("JG001", "JG002")}
    # v: 2..8, all "other": no finding; w = 2 * m spans other and %16: low; C: a few values, like a bucket
    assert got == {("JG001", "w"): "low"}, got


@pytest.mark.parametrize("helper, expected", [
    # a bucketing helper: an early return above a threshold, a fine range, a coarse one
    ("{y} = 256 // 32\n    if {k} >= {g}:\n        return {y} + {g} // {c}\n"
     "    elif {k} < 256:\n        return {k} // 32\n    return {y} + {k} // {c}", BUCKETED),
    ("if {k} > 1000:\n        return 7\n    {y} = {k} >> 6\n    return {y}", BUCKETED),
    ("if {k} >= 64 or {k} < 48:\n        return 0\n    return {k} // 16", STABLE),   # 48..63: always 3
    ("if {k} >= 100000:\n        return 0\n    return {k} // 128", VARYING),        # 782 values: a count
    ("if {k} >= {g}:\n        return 0\n    return {k}", VARYING),                  # no quotient
    ("if {k} >= {p}:\n        return 0\n    return {k} // 32", VARYING),            # a bound the code does not fix
    ("if {k} >= {g}:\n        {y} = 0\n    return {k} // 32", VARYING),             # no exit: no bound
])
def test_a_range_guard_in_a_helper_bounds_a_quotient_it_returns(helper, expected):
    arg = only(f"""
def {{m}}({{k}}, {{p}}, {{g}}=4096, {{c}}=128):
    {helper}

def {{f}}({{x}}, {{p}}):
    kern[(1,)]({{x}}, {{m}}({{x}}.shape[0], {{p}}), BLOCK=16)
""")
    assert arg.provenance == expected, arg
    if expected != VARYING:
        assert "bounded-quotient" in arg.rules
    if expected == BUCKETED:
        assert confidence(arg.rules, arg.by_name) == "low"


# ---- empty-skip: an early return or continue on the empty case -------------------------------------
def before_launch(line: str):
    """The ``{p}`` argument of a launch in a function of parameters ``{x}, {c}, {p}`` whose body runs
    ``line`` first."""
    return only(f"""
def {{f}}({{x}}, {{c}}, {{p}}):
    {line}
    kern[(1,)]({{x}}, {{p}}, BLOCK=16)
""")

SKIPS = [
    "if {p} == 0:\n        return",
    "if not {p}:\n        return None",
    "if {p} <= 0:\n        return {x}",
    "if {p} < 1:\n        return",
    "if 0 == {p}:\n        return",
    "if {c} is None or {p} == 0:\n        return",  # an `or` that returned: neither holds after
]


@pytest.mark.parametrize("skip", SKIPS)
def test_a_value_whose_empty_case_is_skipped_varies(skip):
    arg = before_launch(skip)
    assert arg.provenance == VARYING and arg.rules[0] == "empty-skip", arg
    assert confidence(arg.rules, arg.by_name) == "medium" and not arg.by_name


def test_an_empty_case_skipped_in_a_loop_and_what_is_computed_from_it():
    arg = only("""
def {f}({x}, {c}, {p}):
    for {y} in {c}:
        if {p} == 0:
            continue
        kern[(1,)]({x}, 2 * {p} + 1, BLOCK=16)
""")
    assert arg.provenance == VARYING and "empty-skip" in arg.rules, arg


@pytest.mark.parametrize("guard", [
    "if {p} == 0:\n        raise ValueError({p})",  # rejects a value: not an empty case with nothing to do
    "assert {p} != 0",
    "if {p} == 0:\n        {c} = 1",                  # no exit
    "if {p} == 0 and {c}:\n        return",          # returns only when both hold: p may be 0 after
    "if {p} == 1:\n        return",                   # not the empty case
    "if {c}:\n        if {p} == 0:\n            return",  # in a branch the launch is not in
])
def test_guards_that_do_not_skip_an_empty_case_leave_the_value_unknown(guard):
    arg = before_launch(guard)
    assert "empty-skip" not in arg.rules and arg.provenance != VARYING, arg


def test_a_guard_after_the_launch_says_nothing_of_it():
    arg = only("""
def {f}({x}, {p}):
    kern[(1,)]({x}, {p}, BLOCK=16)
    if {p} == 0:
        return
""")
    assert "empty-skip" not in arg.rules


@pytest.mark.parametrize("value, expected", [
    ("{x}.shape[1]", STABLE),   # a model dim stays one
    ("64", STABLE),             # a literal
    ("{x}.size(0)", VARYING),   # the leading-dim guess keeps its own chain
])
def test_a_class_the_code_decides_is_kept(value, expected):
    arg = only(f"""
def {{f}}({{x}}, {{p}}):
    {{m}} = {value}
    if {{m}} == 0:
        return
    kern[(1,)]({{x}}, {{m}}, BLOCK=16)
""")
    assert arg.provenance == expected and "empty-skip" not in arg.rules, arg


def test_a_name_alone_is_raised_by_the_skip_to_medium():
    rng = random.Random()
    names = _names(rng)
    body = """
def {f}({x}, num_tokens):
    {guard}
    kern[(1,)]({x}, num_tokens, BLOCK=16)
"""
    for guard, level in (("pass", "low"), ("if num_tokens == 0:\n        return", "medium")):
        src = KERNEL.format(const_value="1", **names) + body.format(guard=guard, **names)
        found = [f.confidence for f in scan_one(src) if f.code == "JG001"]
        assert found == [level], (guard, found)


def test_callers_elsewhere_settle_a_skipped_value_by_structure_only():
    """What other modules pass for the parameter: a literal (structure) makes it fixed, a `.item()`
    (structure) makes it vary for sure; a name or an object's attribute (conventions) leave the skip."""
    rng = random.Random()
    names = _names(rng)
    lib = KERNEL.format(const_value="1", **names) + """
def {g}({x}, {p}):
    if {p} == 0:
        return
    kern[(1,)]({x}, {p}, BLOCK=16)
""".format(**names)
    user = """
from lib import {g}

class Runner:
    def step(self, {x}, {y}):
        {g}({x}, {passed})
"""
    for passed, expected in (("8", []), ("int({y}.sum().item())", ["high"]), ("self.{c}", ["medium"]),
                             ("num_tokens", ["medium"])):
        src = user.format(passed=passed.format(**names), **names)
        got = [f.confidence for f in scan({"lib": lib, "app": src}) if f.code == "JG001"]
        assert got == expected, (passed, got)


# ---- live-slice: the first n of a buffer ------------------------------------------------------------
@pytest.mark.parametrize("use", [
    "{y} = {x}[:{p}]",
    "{y} = {x}[0:{p}, :]",
    "{x}[:{p}].zero_()",
    "{y} = {c}({x}[:{p}])",
])
def test_the_stop_of_a_leading_slice_is_the_live_count(use):
    arg = before_launch(use)
    assert arg.provenance == VARYING and arg.rules[0] == "live-slice", arg
    assert confidence(arg.rules, arg.by_name) == "medium"


def test_a_slice_in_the_launch_itself_counts():
    arg = only("""
def {f}({x}, {p}):
    kern[(1,)]({x}[:{p}], {p}, BLOCK=16)
""")
    assert arg.rules[0] == "live-slice", arg


@pytest.mark.parametrize("use", [
    "{y} = {x}[{p}:]",            # a start: an offset, not a count
    "{y} = {x}[:, :{p}]",         # a trailing dim: the part of a row, a model dim as often
    "{y} = {x}[:{p}:2]",          # strided
    "{y} = {x}[1:{p}]",           # not from the start
])
def test_other_slices_say_nothing(use):
    arg = before_launch(use)
    assert "live-slice" not in arg.rules and arg.provenance != VARYING, arg


def test_a_slice_anywhere_in_the_function_counts_and_a_fixed_value_stays_fixed():
    after = only("""
def {f}({x}, {p}):
    kern[(1,)]({x}, {p}, BLOCK=16)
    return {x}[:{p}]
""")
    assert after.rules[0] == "live-slice", after  # what the function returns is the part it filled
    elsewhere = only("""
def {g}({x}, {p}):
    return {x}[:{p}]

def {f}({x}, {p}):
    kern[(1,)]({x}, {p}, BLOCK=16)
""")
    assert "live-slice" not in elsewhere.rules  # another function's use of its own parameter
    fixed = only("""
def {f}({x}, {p}):
    {m} = {x}.shape[1]
    {y} = {p}[:{m}]
    kern[(1,)]({x}, {m}, BLOCK=16)
""")
    assert fixed.provenance == STABLE and "live-slice" not in fixed.rules, fixed


@pytest.mark.parametrize("expr", ["{p} - int({y}.sum().item())", "int({y}.sum().item()) + {p}"])
def test_a_part_varying_by_structure_says_why_before_one_read_in_place_of_a_name(expr):
    """Two parts vary: the one the code shows varies (a device value) gives the reason and the level,
    as it did when the other was classed by its name alone, whichever side it is on."""
    arg = only(f"""
def {{f}}({{x}}, {{p}}, {{y}}):
    if {{p}} == 0:
        return
    {{m}} = {expr}
    kern[(1,)]({{x}}, {{m}}, BLOCK=16)
""")
    assert arg.provenance == VARYING and "empty-skip" not in arg.rules, arg.rules
    assert confidence(arg.rules, arg.by_name) == "high"
