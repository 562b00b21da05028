"""JG006: do_not_specialize names a parameter that only ever gets floats or bools (a no-op)."""
from __future__ import annotations

from jitguard.findings import DNS, DNSOA, Edit
from jitguard.static.program import Program
from jitguard.static.rules import Invalid, Rule
from jitguard.static.rules._common import kernel_fix

CODE = "JG006"
_FLOATISH = ("float", "bool")


def _annotated_type(p) -> str | None:
    text = (p.annotation_text or "").lower()
    if "float" in text or text.endswith(("fp32", "fp16", "bf16")):
        return "float"
    if text.endswith(("int1", "bool")):
        return "bool"
    return None


def _default_type(p) -> str | None:
    d = (p.default or "").strip()
    if d in ("True", "False"):
        return "bool"
    try:
        float(d)
    except ValueError:
        return None
    return "float" if any(c in d.lower() for c in ".e") and not d.lower().startswith("0x") else None


def check(program: Program):
    launches: dict[int, list] = {}
    for b in program.launches:
        launches.setdefault(id(b.kernel), []).append(b)
    for k, kfile in program.all_kernels:
        q = id(k)
        for entry in k.do_not_specialize:
            p = k.resolve_entry(entry)
            if p is None or p.is_constexpr:
                continue
            types = {b.args[p.name].value_type for b in launches.get(q, []) if p.name in b.args}
            evidence = "its launches pass"
            if not types:
                t = _annotated_type(p) or _default_type(p)
                types = {t} if t else set()
                evidence = "it is annotated" if _annotated_type(p) else "its default is"
            if not types or not types <= set(_FLOATISH):
                continue
            kinds = " and ".join(sorted(f"{t}s" for t in types))
            msg = (
                f"{CODE} do_not_specialize names {p.name}, which only gets {kinds} ({evidence} {kinds}): "
                f"floats and bools are never value-specialized, so the entry does nothing; remove it"
            )
            # the parameter's entries in both lists: a float or bool has no alignment either
            drop = tuple(Edit("remove_entry", entry=e, option=option)
                         for option, listed in ((DNS, k.do_not_specialize), (DNSOA, k.do_not_specialize_on_alignment))
                         for e in listed if (hit := k.resolve_entry(e)) is not None and hit.name == p.name)
            fix = kernel_fix(kfile, k, "safe", "the entry has no effect", drop)
            yield program.finding(
                CODE, kfile, k, k.do_not_specialize_line or k.decorator_line, 1, p.name, msg, fix,
                {"entry": entry, "types": sorted(types)},
            )


_I0 = """
import triton

@triton.jit(do_not_specialize=["eps"])
def k(x_ptr, eps, n):
    pass

def launch(x):
    k[(1,)](x, 1e-6, 128)
"""


RULE = Rule(
    code=CODE,
    name="do-not-specialize-float-or-bool",
    summary="do_not_specialize names a parameter that only gets floats or bools: the entry does nothing.",
    what=(
        "A do_not_specialize entry for a parameter whose every known launch passes a float or a bool (or\n"
        "that is annotated as a float, or whose float/bool default is never overridden)."
    ),
    why=(
        "Triton never value-specializes floats (always fp32) nor, from 3.3, bools, so the entry cannot\n"
        "save a compile. It misleads readers into thinking the parameter was a recompile risk, and it\n"
        "hides the real candidates (a plain int that varies costs 3 compiles over a serving-like stream\n"
        "on an H200 (Triton 3.6.0, torch 2.11), 2026-11-29)."
    ),
    example=(
        '@triton.jit(do_not_specialize=["eps"])\n'
        "def rmsnorm(x_ptr, eps, N): ...\n"
        "rmsnorm[grid](x, 1e-6, x.shape[-1])"
    ),
    fix="Remove the entry: @triton.jit def rmsnorm(x_ptr, eps, N).",
    fix_safety="safe",
    invalid=(
        Invalid(_I0, _I0.replace('@triton.jit(do_not_specialize=["eps"])\n', '@triton.jit\n'), "safe"),
    ),
    valid=(
        """
import triton

@triton.jit(do_not_specialize=["n"])
def k(x_ptr, eps, n):
    pass

def launch(x):
    k[(1,)](x, 1e-6, x.shape[0])
""",
    ),
    check=check,
)
