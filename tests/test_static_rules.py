"""Every rule: registry metadata complete, and its VALID/INVALID examples behave as documented."""
from __future__ import annotations

import pytest

from jitguard.static.rules import RULES
from tests._static_util import scan_one

CODES = [f"JG00{i}" for i in range(1, 8)]


def test_registry_has_every_code_with_full_docs():
    assert sorted(RULES) == CODES
    for code, rule in RULES.items():
        assert rule.code == code
        for part in (rule.name, rule.summary, rule.what, rule.why, rule.example, rule.fix):
            assert part.strip(), (code, part)
        assert "\n" not in rule.summary
        assert rule.fix_safety in ("safe", "unsafe", "manual")
        assert rule.invalid and rule.valid, code
        doc = rule.doc()
        for heading in ("What it catches", "Why it is costly", "Example", "Fix", "Fix safety"):
            assert heading in doc


@pytest.mark.parametrize("code", ["JG001", "JG002", "JG003"])
def test_costly_rules_quote_the_h200_figures(code):
    why = RULES[code].why
    assert "H200" in why
    assert any(fig in why for fig in ("3 compiles", "230 compiles", "658 ms"))


CASES = [(code, i, "invalid") for code in CODES for i in range(len(RULES[code].invalid))] + [
    (code, i, "valid") for code in CODES for i in range(len(RULES[code].valid))
]


@pytest.mark.parametrize("code,i,kind", CASES)
def test_rule_examples(code, i, kind):
    example = getattr(RULES[code], kind)[i]
    src = example.source if kind == "invalid" else example
    findings = scan_one(src)
    hits = [f for f in findings if f.code == code]
    if kind == "invalid":
        assert hits, f"{code} INVALID example {i} not reported"
        for f in hits:
            assert f.message.startswith(code + " ")
            assert "\n" not in f.message
            assert f.fix_safety in ("safe", "unsafe", "manual")
    else:
        assert not hits, [f.message for f in hits]


INVALID = [(code, i) for code in CODES for i in range(len(RULES[code].invalid))]


@pytest.mark.parametrize("code,i", INVALID)
def test_invalid_examples_fix_as_stated(code, i, tmp_path, monkeypatch):
    """Each INVALID example's findings carry the fix the example states; applied with the real
    codemod (jitguard fix --unsafe-fixes), they turn the source into ``fixed``, and a second pass
    changes nothing."""
    from jitguard.static.fixes import plan_fixes

    example = RULES[code].invalid[i]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(example.source)
    hits = [f for f in scan_one(example.source) if f.code == code]
    assert hits and {f.fix.applicability for f in hits} == {example.applicability}
    assert all(f.fix_safety == f.fix.applicability for f in hits)
    plan = plan_fixes(hits, unsafe=True)
    fixed = plan.files[0].new_data.decode() if plan.changed_files else example.source
    assert fixed == example.fixed
    if example.applicability == "manual":
        assert all(not f.fix.edits and f.fix.reason for f in hits)
        return
    assert fixed != example.source
    (tmp_path / "m.py").write_text(fixed)
    again = [f for f in scan_one(fixed) if f.code == code]
    assert not plan_fixes(again, unsafe=True).changed_files


def test_jg001_carries_its_fix_and_the_evidence_for_it():
    f = next(f for f in scan_one(RULES["JG001"].invalid[0].source) if f.code == "JG001")
    assert f.param == "n"
    assert [(e.kind, e.param) for e in f.fix.edits] == [("add_do_not_specialize", "n")]
    assert "fix" not in f.details  # the plan lives on the finding only
    assert {u["kind"] for u in f.details["uses"]} == {"compare"}
    assert f.fix_safety == "safe"
    assert f.details["launches"][0]["provenance"] == "VARYING"
    assert f.details["evidence"]
    assert f.details["decorator_line"] == f.line - 1 or f.details["decorator_line"] <= f.line


def test_jg001_unsafe_when_param_feeds_address_arithmetic():
    src = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, stride_t, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(x_ptr + pid * stride_t + tl.arange(0, BLOCK), 0.0)

def go(x, y):
    T4 = triton.cdiv(y.shape[0], 4) * 4
    buf = torch.empty((8, T4))
    k[(1,)](buf, buf.stride(0), BLOCK=16)
"""
    f = next(f for f in scan_one(src) if f.code == "JG001")
    assert f.param == "stride_t"
    assert f.fix_safety == "unsafe"
    assert "address" in f.details["use_kinds"]


def test_jg002_constexpr_needed_is_manual_with_places():
    src = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(x_ptr + offs, 0.0)

def go(x):
    k[(1,)](x, x.shape[0])
"""
    f = next(f for f in scan_one(src) if f.code == "JG002")
    assert f.fix_safety == "manual"
    assert f.details["constexpr_needed_at"][0]["line"] == 7
    assert "next_power_of_2" in f.message


def test_inline_ignore_on_def_decorator_and_launch():
    base = RULES["JG001"].invalid[0].source
    assert any(f.code == "JG001" for f in scan_one(base))
    on_def = base.replace("def k(x_ptr, n, BLOCK: tl.constexpr):", "def k(x_ptr, n, BLOCK: tl.constexpr):  # jitguard: ignore[JG001]")
    on_dec = base.replace("@triton.jit\n", "@triton.jit  # jitguard: ignore\n")
    on_launch = base.replace("BLOCK=128)\n", "BLOCK=128)  # jitguard: ignore[JG001]\n")
    other_code = base.replace("BLOCK=128)\n", "BLOCK=128)  # jitguard: ignore[JG002]\n")
    for src in (on_def, on_dec, on_launch):
        assert src != base
        assert not [f for f in scan_one(src) if f.code == "JG001"]
    assert [f for f in scan_one(other_code) if f.code == "JG001"]


def test_stride_parameters_are_not_excused_by_their_name():
    """A stride-named parameter fed a padded token count is flagged (names excuse guesses only for
    model dimensions such as num_experts / max_num_reqs)."""
    src = """
import triton
import triton.language as tl

@triton.jit
def k(s_ptr, scale_stride, max_num_reqs, BLOCK: tl.constexpr):
    tl.store(s_ptr + tl.arange(0, BLOCK) * scale_stride, 0.0, mask=tl.arange(0, BLOCK) < max_num_reqs)

def go(o, seq_lens):
    num_tokens = o.shape[0]
    padded = (num_tokens + 3) // 4 * 4
    k[(1,)](o, padded, seq_lens.shape[0], BLOCK=16)
"""
    got = {(f.code, f.param) for f in scan_one(src)}
    assert ("JG001", "scale_stride") in got
    assert ("JG001", "max_num_reqs") not in got  # a buffer sized by a configured maximum


def test_positionals_after_star_args_are_placed_from_the_signature():
    src = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, s0, s1, n, w, BLOCK: tl.constexpr):
    pass

def go(x):
    k[(1,)](x, *x.stride(), x.shape[0], 7, BLOCK=16)
"""
    assert {(f.code, f.param) for f in scan_one(src)} == {("JG001", "n")}
    with_default = src.replace("w, BLOCK: tl.constexpr", "w=3, BLOCK: tl.constexpr = 16")
    assert not scan_one(with_default)  # a default makes the star's length ambiguous: nothing placed


def test_a_launch_through_a_local_chosen_among_kernels_binds_to_each():
    src = """
import triton
import triton.language as tl

@triton.jit
def k16(x_ptr, T, BT: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BT), 0.0, mask=tl.arange(0, BT) < T)

@triton.jit
def k32(x_ptr, T, BT: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BT), 0.0, mask=tl.arange(0, BT) < T)

def go(A):
    B, T, H, BT = A.shape
    if BT == 16:
        fn = k16
    else:
        fn = k32
    fn[(1,)](x_ptr=A, T=T, BT=BT)
"""
    assert {(f.kernel.rsplit(".", 1)[-1], f.param) for f in scan_one(src) if f.code == "JG001"} == {("k16", "T"), ("k32", "T")}


def test_star_args_of_a_known_number_of_strides_are_expanded():
    src = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, s0, s1, n, BLOCK: tl.constexpr):
    pass

def go(x, y):
    k[(1,)](x, *x.stride()[:2], *y.stride()[0:0], x.shape[0], BLOCK=16)
"""
    assert {(f.code, f.param) for f in scan_one(src)} == {("JG001", "n")}


def test_two_files_with_the_same_module_name_keep_their_own_kernels():
    """Two trees scanned together can give two files the same module name: each kernel keeps its
    findings and each launch binds to the kernel next to it."""
    from jitguard.static.extract import extract_file
    from jitguard.static.link import link

    src = RULES["JG001"].invalid[0].source
    bad = RULES["JG004"].invalid[0].source
    facts = [extract_file("a/m.py", src, "m"), extract_file("b/m.py", src, "m"),
             extract_file("a/n.py", bad, "n"), extract_file("b/n.py", bad, "n")]
    findings = link(facts)
    assert sorted(f.path for f in findings if f.code == "JG001") == ["a/m.py", "b/m.py"]
    assert sorted(f.path for f in findings if f.code == "JG004") == ["a/n.py", "b/n.py"]


def test_jg002_constexpr_that_selects_code_is_manual(tmp_path, monkeypatch):
    """A constexpr an `if` tests selects the code that is compiled (shaped like a MoE kernel's
    routing switch: the pruned branch reads a pointer the launcher passes as None). As a plain int
    both branches would compile, so the fix is manual (bucket it, or warm it up), never an unsafe
    drop of tl.constexpr, and --unsafe-fixes edits nothing."""
    from jitguard.static.fixes import plan_fixes

    src = """
import triton
import triton.language as tl

@triton.jit
def route(x_ptr, ids_ptr, y_ptr, chunks: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if chunks > 1:
        rows = tl.load(ids_ptr + offs)
    else:
        rows = offs
    tl.store(y_ptr + offs, tl.load(x_ptr + rows))

def launch(x, y, ids=None):
    chunks = x.shape[0] // 64
    route[(1,)](x, ids if chunks > 1 else None, y, chunks, BLOCK=64)
"""
    f = next(f for f in scan_one(src) if f.code == "JG002")
    assert f.fix_safety == "manual" and not f.fix.edits
    assert "selects code" in f.fix.reason and "line 9" in f.fix.reason
    assert "warm it up" in f.message and "drop tl.constexpr" not in f.message
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(src)
    plan = plan_fixes([f], unsafe=True)
    assert not plan.changed_files and plan.fixes[0].status == "manual"
    # the same kernel with the `if` gone: the flag only scales a value, the unsafe fix stands
    plain = src.replace("    if chunks > 1:\n        rows = tl.load(ids_ptr + offs)\n    else:\n        rows = offs\n",
                        "    rows = offs * chunks\n")
    g = next(f for f in scan_one(plain) if f.code == "JG002")
    assert g.fix_safety == "unsafe" and [e.kind for e in g.fix.edits] == ["drop_constexpr", "add_do_not_specialize"]
