"""returns-elsewhere: a launch argument computed by a function imported from another module of the
scanned tree takes the class that function's return has with this call's arguments (the defining
module summarizes it; the runner reads that module). Random identifiers: structure decides."""
from __future__ import annotations

import random

import pytest

from jitguard.config import Config
from jitguard.static.extract import extract_file
from jitguard.static.facts import BUCKETED, UNKNOWN, VARYING, FileFacts
from jitguard.static.provenance import Prov, join
from jitguard.static.runner import scan_paths
from tests._static_util import MASKED_KERNEL, rand_ident


@pytest.fixture
def rng():
    return random.Random()


def _tree(tmp_path, files: dict[str, str]):
    pkg = tmp_path / "pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    for name, src in files.items():
        (pkg / f"{name}.py").write_text(src)
    return scan_paths([str(tmp_path)], Config(root=str(tmp_path)), use_cache=False, jobs=1)


def _by_param(result) -> dict:
    return {f.param: f for f in result.findings if f.code == "JG001"}


def _helper_module(names: dict) -> str:
    # a launch size bounded by a budget shared out over the rows: varies with the rows
    return f"""
_{names['cap']} = 8192

def {names['h']}({names['r']}, {names['c']}):
    return max(1, min({names['c']}, _{names['cap']} // {names['r']}))

def {names['fixed']}({names['r']}):
    return 4

def {names['pair']}({names['r']}, {names['c']}):
    return {names['c']} * 2, {names['r']} + 1
"""


def _names(rng) -> dict:
    return {k: rand_ident(rng, k[0]) for k in ("h", "r", "c", "cap", "fixed", "pair", "k", "n", "w", "v", "u")}


def test_a_varying_argument_makes_the_imported_helper_s_return_vary(tmp_path, rng):
    nm = _names(rng)
    kernels = {p: rand_ident(rng, "p") for p in "abcde"}
    launch_src = "".join(MASKED_KERNEL.format(k=f"k_{p}", n=n) for p, n in kernels.items())
    launch_src += f"from .helpers import {nm['h']}, {nm['fixed']}, {nm['pair']}\nfrom pkg import helpers as hm\n"
    launch_src += f"""

def go(x, {nm['c']}):
    {nm['w']} = x.shape[0]
    {nm['v']} = {nm['h']}({nm['w']}, {nm['c']})
    k_a[(1,)](x, {nm['v']}, BLOCK=16)
    k_b[(1,)](x, {nm['fixed']}({nm['w']}), BLOCK=16)
    k_c[(1,)](x, hm.{nm['h']}({nm['w']}, 4), BLOCK=16)
    {nm['u']}, {nm['n']} = {nm['pair']}({nm['w']}, 3)
    k_d[(1,)](x, {nm['u']}, BLOCK=16)
    k_e[(1,)](x, {nm['n']}, BLOCK=16)
"""
    got = _by_param(_tree(tmp_path, {"helpers": _helper_module(nm), "launch": launch_src}))
    # h(rows, c) with rows = x.shape[0]: varies, through the helper's own arithmetic
    a = got[kernels["a"]]
    assert "returns-elsewhere" in a.details["rules"], a.details
    assert any("arithmetic" in e for e in a.details["evidence"])
    # the same through `from pkg import helpers as hm; hm.h(...)`
    assert "returns-elsewhere" in got[kernels["c"]].details["rules"]
    # a helper that returns a constant whatever it is passed: nothing varies
    assert kernels["b"] not in got
    # a tuple: element 0 is `c * 2` (c = 3 here: fixed), element 1 is `rows + 1` (varies)
    assert kernels["d"] not in got
    assert "returns-elsewhere" in got[kernels["e"]].details["rules"]


def test_a_fixed_argument_keeps_the_return_fixed(tmp_path, rng):
    nm = _names(rng)
    n = rand_ident(rng)
    src = MASKED_KERNEL.format(k="kk", n=n) + f"""
from .helpers import {nm['h']}

def go(x):
    kk[(1,)](x, {nm['h']}(64, 128), BLOCK=16)
"""
    assert n not in _by_param(_tree(tmp_path, {"helpers": _helper_module(nm), "launch": src}))


def test_an_entry_parameter_passed_to_the_helper_is_settled_by_its_callers_elsewhere(tmp_path, rng):
    nm = _names(rng)
    n, wrapper = rand_ident(rng), rand_ident(rng, "w")
    src = MASKED_KERNEL.format(k="kk", n=n) + f"""
from .helpers import {nm['h']}

def {wrapper}(x, {nm['w']}):
    kk[(1,)](x, {nm['h']}({nm['w']}, 16), BLOCK=16)
"""
    user = f"from pkg.launch import {wrapper}\n\ndef forward(x):\n    {wrapper}(x, x.sum().item())\n"
    got = _by_param(_tree(tmp_path, {"helpers": _helper_module(nm), "launch": src, "user": user}))
    f = got[n]
    assert f.details["rules"][:2] == ["returns-elsewhere", "caller-elsewhere"], f.details
    # the chain shows the helper's step before the caller's
    assert "returns" in f.details["evidence"][0] and any(".item()" in e for e in f.details["evidence"])


def test_the_defining_module_summarizes_the_parameters_its_return_varies_with(rng):
    nm = _names(rng)
    facts = extract_file("pkg/helpers.py", _helper_module(nm), "pkg.helpers",
                         returns_of=frozenset({(nm["h"], None), (nm["fixed"], None), (nm["pair"], 1)}))
    by = {(r.function, r.item): r for r in facts.returns}
    assert [d.param for d in by[(nm["h"], None)].deps] == [nm["r"], nm["c"]]
    assert by[(nm["fixed"], None)].deps == []
    assert [d.param for d in by[(nm["pair"], 1)].deps] == [nm["r"]]
    # the summary survives the cache's round trip, as do the call references of an argument
    again = FileFacts.from_dict(facts.to_dict())
    assert [(r.function, r.item, [d.param for d in r.deps]) for r in again.returns] == \
        [(r.function, r.item, [d.param for d in r.deps]) for r in facts.returns]


def test_a_call_reference_is_recorded_and_survives_the_cache(rng):
    nm = _names(rng)
    n = rand_ident(rng)
    src = MASKED_KERNEL.format(k="kk", n=n) + f"""
from .helpers import {nm['h']}

def go(x):
    kk[(1,)](x, {nm['h']}(x.shape[0], 3) + 1, BLOCK=16)
"""
    facts = extract_file("pkg/launch.py", src, "pkg.launch")
    arg = FileFacts.from_dict(facts.to_dict()).launches[0].args[1]
    assert arg.provenance == UNKNOWN
    assert arg.returns is not None and arg.returns.function == f"pkg.helpers.{nm['h']}"
    assert [a.provenance for a in arg.returns.args] == [VARYING, "STABLE"]


def test_a_varying_part_keeps_its_evidence_when_joined_with_an_unknown():
    varying = Prov(VARYING, "int", ("n = x.shape[0]",), rules=("leading-dim",))
    unknown = Prov(UNKNOWN)
    for items in ([varying, unknown], [unknown, varying]):
        out = join(items)
        assert out.cls == VARYING and out.evidence == varying.evidence and out.rules == varying.rules
    bucketed = Prov(BUCKETED, "int", ("next_power_of_2(n)",), rules=("bucket",))
    assert join([unknown, bucketed]).evidence == bucketed.evidence


def test_an_unknown_resting_on_another_module_s_return_keeps_that_reference_through_a_join():
    from jitguard.static.facts import ReturnRef

    ref = ReturnRef("pkg.m.f", None, [], 3, "f(n)")
    out = join([Prov("STABLE", "int", ("literal 1",), rules=("literal",)), Prov(UNKNOWN, ret=ref)])
    assert out.cls == UNKNOWN and out.ret is ref
    # a varying part decides alone: the reference is not needed
    assert join([Prov(VARYING, "int", ("x",)), Prov(UNKNOWN, ret=ref)]).ret is None


@pytest.mark.parametrize("form", ["{p} + {q}", "{q} + {p}", "max({p}, {q})", "{p} if x.is_cuda else {q}"])
def test_a_part_whose_callers_say_nothing_does_not_hide_a_part_that_varies(tmp_path, rng, form):
    # both parts rest on entry parameters; the callers elsewhere pass something unknown for one and a
    # device read for the other: the value varies, whichever part comes first
    n, wrapper, p, q = rand_ident(rng), rand_ident(rng, "w"), rand_ident(rng, "p"), rand_ident(rng, "q")
    value = form.format(p=p, q=q)
    src = MASKED_KERNEL.format(k="kk", n=n) + f"""

def {wrapper}(x, {p}, {q}):
    kk[(1,)](x, {value}, BLOCK=16)
"""
    user = f"from pkg.launch import {wrapper}\n\ndef forward(x, z):\n    {wrapper}(x, z.foo(), x.sum().item())\n"
    got = _by_param(_tree(tmp_path, {"launch": src, "user": user}))
    assert n in got and "device-data" in got[n].details["rules"], value


def test_a_sum_is_fixed_only_when_every_part_is(tmp_path, rng):
    n, wrapper, p, q = rand_ident(rng), rand_ident(rng, "w"), rand_ident(rng, "p"), rand_ident(rng, "q")
    src = MASKED_KERNEL.format(k="kk", n=n) + f"""

def {wrapper}(x, {p}, {q}):
    kk[(1,)](x, {p} + {q}, BLOCK=16)
"""
    from jitguard.static.link import build_program

    def arg_for(user_args: str):
        facts = [extract_file("pkg/launch.py", src, "pkg.launch"),
                 extract_file("pkg/user.py", f"from pkg.launch import {wrapper}\n\ndef forward(x, z):\n"
                                             f"    {wrapper}(x, {user_args})\n", "pkg.user",
                              calls_of=frozenset({wrapper}))]
        (b,) = build_program(facts).launches
        return b.args[n]

    assert arg_for("3, 5").provenance == "STABLE"
    # one part fixed, the other nothing is known of: not fixed
    assert arg_for("3, z.foo()").provenance == UNKNOWN


def test_a_helper_re_exported_by_a_package_is_read_where_it_is_defined(tmp_path, rng):
    nm = _names(rng)
    n = rand_ident(rng)
    sub = tmp_path / "pkg" / "sub"
    sub.mkdir(parents=True)
    (sub / "__init__.py").write_text(f"from .helpers import {nm['h']}\n")
    (sub / "helpers.py").write_text(_helper_module(nm))
    src = MASKED_KERNEL.format(k="kk", n=n) + f"""
from pkg.sub import {nm['h']}

def go(x):
    kk[(1,)](x, {nm['h']}(x.shape[0], 3), BLOCK=16)
"""
    got = _by_param(_tree(tmp_path, {"launch": src}))
    assert "returns-elsewhere" in got[n].details["rules"]


def test_a_list_built_by_appending_handed_whole_to_the_kernel_varies_with_what_is_appended(rng):
    from tests.test_static_provenance import provenance

    loop = "{a} = []\nfor {t} in range(x.sum().item()):\n    {a}.append({t})\nARG = tuple({a})"
    assert provenance(loop, rng)[0] == VARYING
    fixed = "{a} = []\nfor {t} in (1, 2, 4):\n    {a}.append({t})\nARG = tuple({a})"
    assert provenance(fixed, rng)[0] != VARYING


def _split_module(nm: dict, structural: bool) -> str:
    # a tuple whose element 2 is, on one path, a field of the record passed in (named like a per-call
    # count: a name alone), on another a literal, and (``structural``) on a third a host read of a
    # tensor's element (device data)
    last = f"{nm['q']}[{nm['f']}].item()" if structural else "0"
    return f"""
def {nm['h']}({nm['m']}, {nm['c']}=1):
    {nm['t']} = {nm['m']}.{nm['t']}
    {nm['qs']} = {nm['m']}.{nm['q']}
    if {nm['m']}.{nm['w']} <= {nm['c']}:
        return 1, 0, {nm['t']}, 0
    {nm['f']} = ({nm['qs']} > {nm['c']}).int().argmax(dim=-1).item()
    {nm['q']} = {nm['qs']}
    {nm['v']} = {last}
    return ({nm['f']}, 2, {nm['v']}, {nm['t']} - {nm['v']})
"""


@pytest.mark.parametrize("structural", [True, False])
def test_a_name_varying_value_rests_on_an_imported_return_one_of_whose_paths_varies_by_structure(
        tmp_path, rng, structural):
    nm = {k: rand_ident(rng, k[0]) for k in ("h", "m", "c", "q", "qs", "f", "v", "w", "g", "b", "u")}
    nm["t"] = rand_ident(rng, "t") + "_tokens"  # named like a per-call count: the name alone says varies
    n = rand_ident(rng)
    src = MASKED_KERNEL.format(k="kk", n=n) + f"""

def {nm['g']}(x, {n}):
    kk[(1,)](x, {n}, BLOCK=16)

def {nm['b']}({nm['u']}, x, {nm['m']}):
    from pkg.helpers import {nm['h']}
    _a, _b, {nm['t']}, _d = {nm['h']}({nm['m']}, {nm['c']}={nm['u']}.{nm['c']})
    {nm['g']}(x, {n}={nm['t']})
"""
    got = _by_param(_tree(tmp_path, {"helpers": _split_module(nm, structural), "launch": src}))
    if structural:
        f = got[n]
        # one path of the return varies per call by structure: enough for a recompile; the chain keeps
        # the local caller's step and ends at the device read, not at the name
        assert "returns-elsewhere" in f.details["rules"] and "device-data" in f.details["rules"], f.details
        assert f.confidence != "low"
        assert any("called in" in e for e in f.details["evidence"]) and not any(
            "the name suggests" in e for e in f.details["evidence"]), f.details["evidence"]
    else:
        # every path a name or a literal: nothing structural to lift the name with (a name alone is
        # reported at the low level only, below the default)
        assert n not in got


@pytest.mark.parametrize("launching_first", [True, False])
def test_a_call_of_a_name_imported_in_both_branches_of_an_if_is_a_call_of_each(tmp_path, rng, launching_first):
    nm = {k: rand_ident(rng, k[0]) for k in ("f", "a", "b", "x", "q", "v", "g")}
    n = rand_ident(rng)
    for sub in (nm["a"], nm["b"]):
        (tmp_path / "pkg" / sub).mkdir(parents=True)
        (tmp_path / "pkg" / sub / "__init__.py").write_text("")
    launching = MASKED_KERNEL.format(k="kk", n=n) + f"\n\ndef {nm['f']}(x, {n}):\n    kk[(1,)](x, {n}, BLOCK=16)\n"
    (tmp_path / "pkg" / nm["a"] / "ops.py").write_text(launching)
    (tmp_path / "pkg" / nm["b"] / "ops.py").write_text(f"def {nm['f']}(x, {n}):\n    return x\n")
    first, second = (nm["a"], nm["b"]) if launching_first else (nm["b"], nm["a"])
    caller = f"""
import torch
if torch.version.hip:
    from pkg.{first}.ops import {nm['f']}
else:
    from pkg.{second}.ops import {nm['f']}


def {nm['g']}({nm['x']}, {nm['q']}):
    {nm['v']} = int({nm['q']}[0].item())
    return {nm['f']}({nm['x']}, {nm['v']})
"""
    got = _by_param(_tree(tmp_path, {"layer": caller}))
    # whichever branch imports the launching definition, the caller's device read reaches the launch
    assert n in got and "device-data" in got[n].details["rules"], got


def test_a_bucketing_helper_elsewhere_leaves_a_few_variants_not_a_per_call_value(tmp_path, rng):
    nm = _names(rng)
    n, m = rand_ident(rng), rand_ident(rng)
    helpers = f"""
def {nm['h']}({nm['r']}):
    if {nm['r']} >= 4096:
        return 40
    elif {nm['r']} < 256:
        return {nm['r']} // 32
    return 8 + {nm['r']} // 128

def {nm['fixed']}({nm['r']}):
    return 8 + {nm['r']} // 128
"""
    src = MASKED_KERNEL.format(k="kk", n=n) + MASKED_KERNEL.format(k="kj", n=m) + f"""
from .helpers import {nm['h']}, {nm['fixed']}

def go(x):
    kk[(1,)](x, {nm['h']}(x.shape[0]), BLOCK=16)
    kj[(1,)](x, {nm['fixed']}(x.shape[0]), BLOCK=16)
"""
    result = _tree(tmp_path, {"helpers": helpers, "launch": src})
    got = {f.param: f for f in result.findings if f.code == "JG001"}
    # the guards bound each quotient: 0..7, 8..39 and 40, a few variants: below the default levels
    assert n not in got, got[n].details
    # the same quotient with no guard before it is the count itself
    assert "bounded-quotient" not in got[m].details["rules"] and got[m].confidence == "medium"
