"""Calls through PyTorch's custom-op dispatcher: ``torch.ops.<ns>.<op>(...)`` is a call of the function
registered as ``<op>`` (``@torch.library.custom_op("ns::op")``, ``lib.impl("op", f, ...)``, a project
helper called with the op's name and the function), so an entry parameter of that function takes its
class from the ``torch.ops`` call sites, exactly as with a direct call. Random identifiers everywhere."""
from __future__ import annotations

import random

from tests._static_util import pairs, rand_names, scan, scan_one

KERNEL = """
import torch
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {cnt}, BLOCK: tl.constexpr):
    pass
"""

# {impl} launches the kernel with its parameter {cnt}; {reg} registers it; {call} is a torch.ops call
REGISTRATIONS = {
    "decorator": ('@torch.library.custom_op("{ns}::{op}", mutates_args=())\n', ""),
    "triton_op": ('@torch.library.triton_op("{ns}::{op}", mutates_args=())\n', ""),
    "library_impl": ("", '{lib} = torch.library.Library("{ns}", "FRAGMENT")\n'
                         '{lib}.define("{op}(Tensor x, int n) -> ()")\n'
                         '{lib}.impl("{op}", {impl}, "CUDA")\n'),
    "helper": ("", '{helper}(op_name="{op}", op_func={impl}, fake_impl={fake})\n'),
    "helper_qualified": ("", '{helper}("{ns}::{op}", {impl})\n'),
    "called_decorator": ("", '{impl}_op = torch.library.custom_op("{ns}::{op}", mutates_args=())({impl})\n'),
}


def _names(rng: random.Random, *more: str) -> dict[str, str]:
    """The braces of the templates (and ``more``), each a distinct random identifier."""
    return rand_names(rng, "k", "cnt", "impl", "fake", "op", "ns", "lib", "helper", "pub", "x", "t", *more)


def _ops_module(form: str, n: dict, launch_param: str | None = None) -> str:
    dec, after = REGISTRATIONS[form]
    src = KERNEL.format(**n)
    src += f"""
from pkg.util import {n['helper']}

def {n['fake']}({n['x']}, {n['cnt']}):
    return None

{dec.format(**n)}def {n['impl']}({n['x']}: torch.Tensor, {n['cnt']}: int) -> None:
    {n['k']}[(1,)]({n['x']}, {launch_param or n['cnt']}, BLOCK=64)

{after.format(**n)}"""
    return src


def _caller(n: dict, args: str, overload: str = "") -> str:
    return f"""
import torch

def {n['pub']}({n['x']}):
    {n['t']} = {n['x']}.shape[0]
    return torch.ops.{n['ns']}.{n['op']}{overload}({args.format(**n)})
"""


def test_every_registration_form_binds_torch_ops_calls_in_the_same_module():
    for form in REGISTRATIONS:
        rng = random.Random()
        n = _names(rng)
        src = _ops_module(form, n) + _caller(n, "{x}, {t}")
        assert ("JG001", n["k"], n["cnt"]) in pairs(scan_one(src)), form
        # a torch.ops call passing a constant: nothing varies
        assert not pairs(scan_one(_ops_module(form, n) + _caller(n, "{x}, 4096"))), form
        # without any torch.ops call, the parameter is an entry nothing is known about
        assert not pairs(scan_one(_ops_module(form, n))), form


def test_torch_ops_calls_in_other_modules_positional_keyword_and_overload():
    for form in REGISTRATIONS:
        rng = random.Random()
        n = _names(rng)
        ops = _ops_module(form, n)
        for args, overload in (("{x}, {t}", ""), ("{x}, {cnt}={t}", ""), ("{x}, {t}", ".default")):
            caller = _caller(n, args, overload)
            assert ("JG001", n["k"], n["cnt"]) in pairs(scan({"pkg.ops": ops, "pkg.layer": caller})), (form, args)
            fixed = caller.replace(f"{n['x']}.shape[0]", "4096")
            assert not pairs(scan({"pkg.ops": ops, "pkg.layer": fixed})), (form, args)
        # the evidence names the dispatcher call
        (f,) = [f for f in scan({"pkg.ops": ops, "pkg.layer": _caller(n, "{x}, {t}")}) if f.param == n["cnt"]]
        assert any(f"torch.ops.{n['ns']}.{n['op']}" in e for e in f.details["evidence"]), f.details["evidence"]


def test_a_call_of_another_op_or_namespace_does_not_bind():
    rng = random.Random()
    n = _names(rng, "other_op", "other_ns")
    other = dict(n, op=n["other_op"])
    ops = _ops_module("decorator", n)
    assert ("JG001", n["k"], n["cnt"]) in pairs(scan({"pkg.ops": ops, "pkg.layer": _caller(n, "{x}, {t}")}))
    assert not pairs(scan({"pkg.ops": ops, "pkg.layer": _caller(other, "{x}, {t}")}))
    # the decorator names the namespace: a call in another namespace is another op
    wrong_ns = dict(n, ns=n["other_ns"])
    assert not pairs(scan({"pkg.ops": ops, "pkg.layer": _caller(wrong_ns, "{x}, {t}")}))
    # a call that holds the op's name but no function registers nothing
    plain = _ops_module("helper", n).replace(f"op_func={n['impl']}, fake_impl={n['fake']}", "op_func=None")
    assert not pairs(scan({"pkg.ops": plain, "pkg.layer": _caller(n, "{x}, {t}")}))


def test_tensor_layout_through_a_custom_op():
    # the registered function allocates a buffer with the aligned token count it is given, in one
    # branch as_strided and in the other an empty placeholder; the kernel gets its stride
    rng = random.Random()
    n = _names(rng, "buf", "al", "flag")
    buf, al, flag = n["buf"], n["al"], n["flag"]
    src = KERNEL.format(**n) + f"""
from pkg.util import {n['helper']}

def {n['impl']}({n['x']}: torch.Tensor, {al}: int, {flag}: bool) -> torch.Tensor:
    if {flag}:
        {buf} = torch.empty(7 * {al}, device={n['x']}.device).as_strided((7, {n['x']}.shape[0]), (1, {al}))
    else:
        {buf} = torch.empty(0, device={n['x']}.device)
    {n['k']}[(1,)]({buf}, {buf}.stride(1) if {flag} else 0, BLOCK=64)
    return {buf}

{n['helper']}(op_name="{n['op']}", op_func={n['impl']})

def {n['pub']}({n['x']}):
    {n['t']} = {n['x']}.shape[0]
    return torch.ops.{n['ns']}.{n['op']}({n['x']}, triton.cdiv({n['t']}, 4) * 4, True)
"""
    assert ("JG001", n["k"], n["cnt"]) in pairs(scan_one(src))
    assert not pairs(scan_one(src.replace(f"triton.cdiv({n['t']}, 4) * 4", "512")))


def test_runner_reads_files_that_call_the_op(tmp_path):
    from jitguard.config import Config
    from jitguard.static.runner import scan_paths

    rng = random.Random()
    n = _names(rng)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "util.py").write_text(f"def {n['helper']}(*a, **k):\n    pass\n")
    (tmp_path / "pkg" / "ops.py").write_text(_ops_module("helper", n))
    (tmp_path / "pkg" / "layer.py").write_text(_caller(n, "{x}, {t}"))
    cfg = Config(select=("JG",), root=str(tmp_path), confidence="low")
    result = scan_paths([str(tmp_path)], cfg, jobs=1, use_cache=False)
    assert {(f.code, f.param) for f in result.findings} == {("JG001", n["cnt"])}
    (tmp_path / "pkg" / "layer.py").write_text(_caller(n, "{x}, 4096"))
    assert not scan_paths([str(tmp_path)], cfg, jobs=1, use_cache=False).findings


def test_evidence_names_the_op_in_the_same_module():
    rng = random.Random()
    n = _names(rng)
    src = _ops_module("library_impl", n) + _caller(n, "{x}, {t}")
    (f,) = [f for f in scan_one(src) if f.param == n["cnt"]]
    assert any(e.startswith(f"torch.ops.{n['ns']}.{n['op']} -> {n['impl']}(") for e in f.details["evidence"]), \
        f.details["evidence"]


def test_a_buffer_assigned_in_branches_keeps_a_known_layout():
    # a varying stride in one branch, a fixed placeholder of another rank in the other: the stride
    # varies; a placeholder of another rank whose dims vary makes the layout unknown (not guessed)
    rng = random.Random()
    k, cnt, buf, x, flag, m = rand_names(rng, "k", "cnt", "buf", "x", "flag", "m").values()
    src = KERNEL.format(k=k, cnt=cnt) + f"""
def {m}({x}, {flag}):
    {x}4 = triton.cdiv({x}.shape[0], 4) * 4
    if {flag}:
        {buf} = torch.empty(7 * {x}4).as_strided((7, {x}.shape[0]), (1, {x}4))
    else:
        {buf} = torch.empty(0)
    {k}[(1,)]({buf}, {buf}.stride(1), BLOCK=64)
"""
    assert ("JG001", k, cnt) in pairs(scan_one(src))
    assert not pairs(scan_one(src.replace(f"(1, {x}4))", "(1, 96))")))
    # the leading stride of that layout is 1 in one branch; with a placeholder whose size varies,
    # the ranks disagree and nothing is claimed about stride(1)
    other = src.replace("torch.empty(0)", f"torch.empty({x}.shape[0])").replace(f"(1, {x}4))", "(1, 96))")
    assert not pairs(scan_one(other))


def test_a_bug_in_cross_module_following_is_an_internal_error_and_the_scan_goes_on(tmp_path, monkeypatch):
    from jitguard.static import link as link_mod
    from jitguard.static.runner import scan_paths

    (tmp_path / "k.py").write_text(
        "import triton\n\n\n@triton.jit\ndef kern(x_ptr, n):\n    pass\n\n\n"
        "def go(x):\n    kern[(1,)](x, x.shape[0])\n")

    def broken(*a, **k):
        raise KeyError("phase four bug")

    monkeypatch.setattr(link_mod, "op_registry", broken)
    res = scan_paths([str(tmp_path)], use_cache=False, jobs=1)
    assert [(f.code, f.param) for f in res.findings] == [("JG001", "n")]
    assert [e.path for e in res.internal_errors] == ["<callers in other modules>"]
    assert "phase four bug" in res.internal_errors[0].message
