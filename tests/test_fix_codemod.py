"""The pure decorator edits (jitguard.static.codemod): before/after pairs for every edit form,
CRLF/BOM/encoding round trips, idempotence, refusals, and randomized list shapes."""
from __future__ import annotations

import ast
import pathlib
import random

import pytest

from jitguard.static.codemod import KernelEdit, apply_edits
from jitguard.static.extract import extract_file

CASES_DIR = pathlib.Path(__file__).parent / "fix_cases"

def E(kernel: str, **edits) -> tuple[str, dict]:
    """An edit of the kernel named ``kernel`` (its local qualified name), located when applied."""
    return kernel, edits


def at(source, specs) -> list[KernelEdit]:
    """The edits located as `jitguard fix` locates them: by the position the scan recorded for the
    kernel of that name (def line, jit decorator or statement line)."""
    kernels = extract_file("m.py", source, "m").kernels
    out = []
    for name, edits in specs:
        k = next((k for k in kernels if k.qualname == f"m.{name}"), None)
        if k is None:  # a kernel the scan does not know: a position where there is none
            out.append(KernelEdit(line=10**6, function=name, **edits))
            continue
        out.append(KernelEdit(line=k.line, jit_line=k.decorator_line, function=k.function, **edits))
    return out


def fix(source, specs):
    return apply_edits(source, at(source, specs))


# case name -> edits; tests/fix_cases/<name>.before.py -> <name>.after.py
CASES = {
    "bare_decorator": [E("scale_kernel", add=("num_tokens",))],
    "call_gains_keyword": [E("k", add=("num_tokens",))],
    "extend_list_quotes": [E("k", add=("num_tokens", "num_reqs"))],
    "extend_multiline_comments": [E("k", add=("num_tokens",))],
    "extend_tuple": [E("k", add=("num_tokens",))],
    "index_entry_dedupe": [E("k", add=("num_tokens",))],
    "call_form": [E("body_kernel", add=("num_tokens",)), E("body2_kernel", add=("num_tokens",))],
    "call_form_wrapped": [E("tuned", add=("num_tokens",)), E("Ops.kernel", add=("num_tokens",))],
    "stacked_decorators": [E("k", add=("num_tokens",))],
    "aliased_imports": [E("a", add=("num_tokens",)), E("b", add=("num_tokens",))],
    "non_literal_list": [E("k", add=("num_tokens",)), E("k2", add=("num_tokens",))],
    "remove_entries": [
        E("k", remove=("num_token", "BLOCK", "scale")),
        E("k2", remove=("scale",)),
        E("k3", remove=(7,), remove_on_alignment=("missing",)),
    ],
    "drop_constexpr": [
        E("k", add=("num_tokens",), drop_constexpr=("num_tokens",)),
        E("k2", add=("limit", "n_rows"), drop_constexpr=("limit", "n_rows")),
    ],
    "static_method": [E("Ops.k", add=("num_tokens",))],
    "reexported_constexpr": [E("k", add=("num_experts",), drop_constexpr=("num_experts",))],
}


def _pair(name: str) -> tuple[bytes, bytes]:
    return (CASES_DIR / f"{name}.before.py").read_bytes(), (CASES_DIR / f"{name}.after.py").read_bytes()


def test_every_case_file_has_a_spec():
    names = {p.name.split(".")[0] for p in CASES_DIR.glob("*.before.py")}
    assert names == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_before_after(name):
    before, after = _pair(name)
    result = fix(before, CASES[name])
    assert result.code == after
    # idempotent: the fixed file needs nothing more
    again = fix(result.code, CASES[name])
    assert again.code == after
    assert not again.changed
    compile(after, name, "exec")


def _changed_lines(a: bytes, b: bytes) -> set[int]:
    import difflib

    sm = difflib.SequenceMatcher(a=a.splitlines(), b=b.splitlines(), autojunk=False)
    out: set[int] = set()
    for tag, i1, i2, _, _ in sm.get_opcodes():
        if tag != "equal":
            out.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    return out


@pytest.mark.parametrize("name", sorted(set(CASES) - {"drop_constexpr"}))
def test_only_decorator_lines_change(name):
    before, after = _pair(name)
    tree = ast.parse(before)
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                allowed.update(range(d.lineno, d.end_lineno + 2))
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            allowed.update(range(node.lineno, node.end_lineno + 1))
    assert _changed_lines(before, after) <= allowed


def test_refusals_say_why():
    before, after = _pair("non_literal_list")
    result = fix(before, CASES["non_literal_list"])
    assert result.code == before == after
    reasons = [why for o in result.outcomes for _, why in o.refused]
    assert any("not a literal list (DNS)" in r for r in reasons)
    assert any("**OPTS" in r for r in reasons)


def test_a_constexpr_is_never_listed_without_dropping_it():
    before, _ = _pair("reexported_constexpr")
    r = fix(before, [E("k", add=("num_experts", "BLOCK"))])
    assert r.code == before
    assert [why for _, why in r.outcomes[0].refused] == [
        "'num_experts' is a tl.constexpr parameter",
        "'BLOCK' is a tl.constexpr parameter",
    ]


def test_unknown_kernel_and_param_are_refused():
    before, _ = _pair("bare_decorator")
    r = fix(before, [E("nope", add=("num_tokens",)), E("scale_kernel", add=("missing",))])
    assert r.code == before
    assert "no function is defined at line" in r.outcomes[0].refused[0][1]
    assert "no parameter named 'missing'" in r.outcomes[1].refused[0][1]


@pytest.mark.parametrize("variant", ["crlf", "bom", "crlf+bom"])
@pytest.mark.parametrize("name", ["extend_multiline_comments", "aliased_imports", "drop_constexpr"])
def test_line_endings_and_bom_are_kept(name, variant):
    before, after = _pair(name)
    if "crlf" in variant:
        before, after = before.replace(b"\n", b"\r\n"), after.replace(b"\n", b"\r\n")
    if "bom" in variant:
        before, after = b"\xef\xbb\xbf" + before, b"\xef\xbb\xbf" + after
    assert fix(before, CASES[name]).code == after


def test_coding_cookie_latin1_kept():
    src = '# -*- coding: latin-1 -*-\nimport triton\n\n# caf\xe9\n@triton.jit\ndef k(x, n):\n    pass\n'
    data = src.encode("latin-1")
    out = fix(data, [E("k", add=("n",))]).code
    assert out == data.replace(b"@triton.jit\n", b'@triton.jit(do_not_specialize=["n"])\n')
    assert b"caf\xe9" in out


def test_kernel_picked_by_position_when_names_repeat():
    src = (
        "import triton\n\n"
        "if True:\n    @triton.jit\n    def k(x, n):\n        pass\n"
        "else:\n    @triton.jit\n    def k(x, n):\n        pass\n"
    )
    out = apply_edits(src, [KernelEdit(line=9, jit_line=8, function="k", add=("n",))]).code.decode()
    lines = out.splitlines()
    assert lines[3] == "    @triton.jit"
    assert lines[7] == '    @triton.jit(do_not_specialize=["n"])'


def test_a_position_naming_another_function_is_refused():
    """The def at the line is not the function the edit names (a stale position): nothing is edited."""
    src = "import triton\n\n@triton.jit\ndef other(x, n):\n    pass\n"
    r = apply_edits(src, [KernelEdit(line=4, jit_line=3, function="k", add=("n",))])
    assert r.code == src.encode() and r.outcomes[0].location is None
    assert "line 4 defines 'other', not 'k'" in r.outcomes[0].refused[0][1]
    plain = "import triton\n\ndef helper(x, n):\n    pass\n"
    r = apply_edits(plain, [KernelEdit(line=3, function="helper", add=("n",))])
    assert r.code == plain.encode() and r.outcomes[0].location is None


# --- randomized list shapes -------------------------------------------------------------------


def _random_kernel(rng: random.Random) -> tuple[str, list[str], list]:
    params = [f"p{i}_{rng.randrange(1000)}" for i in range(rng.randint(3, 8))]
    existing = rng.sample(range(len(params)), rng.randint(0, len(params) - 1))
    quote = rng.choice(['"', "'"])
    entries = [rng.choice([f"{quote}{params[i]}{quote}", str(i)]) for i in existing]
    kind = rng.choice(["list", "tuple", "none", "bare", "multiline"])
    trailing = rng.random() < 0.5
    other = rng.choice(["", "debug=False", "launch_metadata=None"])
    if kind == "bare" and not other:
        deco = "@triton.jit"
        entries = []
    elif kind == "none" or not entries:
        deco = f"@triton.jit({other})"
        entries = []
    elif kind == "multiline":
        body = "".join(f"        {e},  # c{j}\n" for j, e in enumerate(entries))
        deco = "@triton.jit(\n    do_not_specialize=[\n" + body + "    ],\n" + (f"    {other},\n" if other else "") + ")"
    else:
        inner = ", ".join(entries)
        if kind == "tuple" and (trailing or len(entries) == 1):
            inner += ","
        elif trailing:
            inner += ","
        seq = f"({inner})" if kind == "tuple" else f"[{inner}]"
        deco = f"@triton.jit(do_not_specialize={seq}{', ' + other if other else ''})"
    src = f"import triton\n\n\n{deco}\ndef kern({', '.join(params)}):\n    return None\n"
    covered = [params[i] for i in existing] if entries else []
    return src, params, covered


def _dns_names(code: bytes, params: list[str]) -> list:
    tree = ast.parse(code)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    for d in fn.decorator_list:
        if isinstance(d, ast.Call):
            for kw in d.keywords:
                if kw.arg == "do_not_specialize":
                    return [params[v] if isinstance(v, int) else v for v in ast.literal_eval(kw.value)]
    return []


@pytest.mark.parametrize("seed", [random.randrange(10**9) for _ in range(40)])
def test_random_lists_extend_and_shrink(seed):
    rng = random.Random(seed)
    src, params, covered = _random_kernel(rng)
    add = tuple(rng.sample(params, rng.randint(1, len(params))))
    r = fix(src, [E("kern", add=add)])
    names = _dns_names(r.code, params)
    assert len(names) == len(set(names)), r.code.decode()  # no duplicates
    assert set(names) == set(covered) | set(add), r.code.decode()
    # the body and signature are untouched
    assert r.code.decode().split("def kern", 1)[1] == src.split("def kern", 1)[1]
    assert not fix(r.code, [E("kern", add=add)]).changed  # idempotent
    # remove the added names again (as written: names)
    added = tuple(n for n in add if n not in covered)
    back = fix(r.code, [E("kern", remove=added)])
    assert set(_dns_names(back.code, params)) == set(covered), back.code.decode()
