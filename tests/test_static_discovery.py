"""Kernel discovery: every form a kernel definition takes, through aliases, found by the scanner
(stdlib ast); the codemod locates each one by the position the scanner recorded, and its edit lands
on that kernel."""
from __future__ import annotations

import pathlib
import random

import pytest

from jitguard.static.codemod import KernelEdit, apply_edits
from jitguard.static.extract import extract_file
from tests._static_util import rand_ident

ROOT = pathlib.Path(__file__).resolve().parents[1]

FORMS = {
    "plain": ("import triton\n", "@triton.jit\ndef {k}(x, n):\n    pass\n", "{k}"),
    "called": ("import triton\n", "@triton.jit(do_not_specialize=['n'])\ndef {k}(x, n):\n    pass\n", "{k}"),
    "alias_module": ("import triton as {a}\n", "@{a}.jit\ndef {k}(x, n):\n    pass\n", "{k}"),
    "alias_func": ("from triton import jit as {a}\n", "@{a}\ndef {k}(x, n):\n    pass\n", "{k}"),
    "reexport": ("from pkg.triton_utils import triton\n", "@triton.jit\ndef {k}(x, n):\n    pass\n", "{k}"),
    "call_form": ("import triton\n", "def _{k}(x, n):\n    pass\n{k} = triton.jit(_{k})\n", "{k}"),
    "call_kw_form": ("import triton\n", "def _{k}(x, n):\n    pass\n{k} = triton.jit(do_not_specialize=[1])(_{k})\n", "{k}"),
    "autotune_call": ("import triton\n",
                      "def _{k}(x, n):\n    pass\n{k} = triton.autotune(configs=[], key=['n'])(triton.jit(_{k}))\n", "{k}"),
    "stack": ("import triton\ndef libentry():\n    return lambda f: f\n",
              "@libentry()\n@triton.autotune(configs=[], key=['n'])\n@triton.heuristics({{'B': lambda a: 1}})\n@triton.jit\n"
              "def {k}(x, n, B):\n    pass\n", "{k}"),
    "staticmethod": ("import triton\n", "class {a}:\n    @staticmethod\n    @triton.jit\n    def {k}(x, n):\n        pass\n",
                     "{a}.{k}"),
    "class_attr": ("import triton\n", "def _{k}(x, n):\n    pass\nclass {a}:\n    {k} = triton.jit(_{k})\n", "{a}.{k}"),
}


def _render(form: str, rng: random.Random) -> tuple[str, str]:
    head, body, qual = FORMS[form]
    names = {"k": rand_ident(rng, "k"), "a": rand_ident(rng, "A")}
    return head.format(**names) + body.format(**names), qual.format(**names)


def _edit_lands(src: str, k) -> bool:
    """Add ``n`` to do_not_specialize of kernel ``k`` located by its position: the kernel with the
    same name has ``n`` unspecialized afterwards, and no other kernel changed."""
    edit = KernelEdit(line=k.line, jit_line=k.decorator_line, function=k.function, add=("n",))
    result = apply_edits(src, [edit])
    assert all(o.location is not None for o in result.outcomes), result.outcomes
    before = {x.qualname: x.unspecialized() for x in extract_file("m.py", src, "m").kernels}
    after = {x.qualname: x.unspecialized() for x in extract_file("m.py", result.code, "m").kernels}
    assert set(after) == set(before)
    return "n" in after[k.qualname] and all(after[q] == before[q] for q in before if q != k.qualname)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_is_discovered_and_located_by_position(form):
    rng = random.Random()
    src, qual = _render(form, rng)
    facts = extract_file("m.py", src, "m")
    assert [k.qualname for k in facts.kernels] == [f"m.{qual}"], src
    k = facts.kernels[0]
    assert [p.name for p in k.params][:2] == ["x", "n"]
    assert _edit_lands(src, k), src
    if form in ("called",):
        assert k.do_not_specialize == ["n"]
    if form == "call_kw_form":
        assert k.do_not_specialize == [1] and k.resolve_entry(1).name == "n"
    if form in ("autotune_call", "stack"):
        assert k.autotune_key == ["n"]
    if form == "stack":
        assert k.heuristics == ["B"]


def test_non_triton_jit_is_not_a_kernel():
    src = "import numba\nfrom torch import jit\n@numba.jit\ndef a(x):\n    pass\n@jit.script\ndef b(x):\n    pass\n"
    assert extract_file("m.py", src, "m").kernels == []


def test_local_shadowing_name_is_not_triton():
    src = "import triton\ndef f():\n    class triton:\n        jit = staticmethod(lambda f: f)\n    @triton.jit\n    def k(x):\n        pass\n"
    # inside f, `triton` is a local class: its jit is not Triton's
    kernels = extract_file("m.py", src, "m").kernels
    assert kernels == [] or all("<locals>" in k.qualname for k in kernels)


def test_every_fixture_kernel_is_located_by_its_position():
    from libcst.metadata import MetadataWrapper
    import libcst as cst

    from jitguard.static.codemod import KernelLocator

    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        src = path.read_text()
        try:
            kernels = extract_file(str(path), src, "m").kernels
        except Exception as exc:  # a fixture the scanner can't read is reported elsewhere
            pytest.fail(f"{path}: {exc}")
        locator = KernelLocator(MetadataWrapper(cst.parse_module(src)))
        for k in kernels:
            loc, why = locator.find(KernelEdit(line=k.line, jit_line=k.decorator_line, function=k.function))
            assert loc is not None, (path, k.qualname, why)
            assert loc.funcdef.name.value == k.function


def test_param_facts():
    src = (
        "import triton\nimport triton.language as tl\n"
        "@triton.jit\ndef k(a_ptr, n: tl.int64, s=3, *, BLOCK: tl.constexpr, flag: tl.constexpr = True):\n"
        "    offs = tl.arange(0, BLOCK)\n    tl.store(a_ptr + offs * s, 0.0, mask=offs < n)\n"
    )
    k = extract_file("m.py", src, "m").kernels[0]
    got = [(p.name, p.index, p.annotation, p.default) for p in k.params]
    assert got == [("a_ptr", 0, None, None), ("n", 1, "typed", None), ("s", 2, None, "3"),
                   ("BLOCK", 3, "constexpr", None), ("flag", 4, "constexpr", "True")]
    kinds = {p.name: p.use_kinds() for p in k.params}
    assert kinds["n"] == {"compare"}
    assert kinds["s"] == {"address"}
    assert kinds["BLOCK"] == {"constexpr"}
    assert k.param("a_ptr").pointer and not k.param("s").pointer
