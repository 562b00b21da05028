"""JG002: a per-call-varying value reaches a tl.constexpr parameter (one compile per value)."""
from __future__ import annotations

from jitguard.findings import Edit, Fix
from jitguard.static.facts import BUCKETED, USE_CALL, USE_CONSTEXPR, VARYING, FileFacts, KernelFacts, ParamFacts
from jitguard.static.program import Program
from jitguard.static.rules import Invalid, Rule
from jitguard.static.rules._common import (
    arg_confidence, constexpr_spelling, few_values, kernel_fix, launch_records, manual, most_sure, one_class, source_of,
    uses_record,
    varying_hits,
    where_used,
)

CODE = "JG002"


def _accept(k, p, arg) -> bool:
    # a constexpr is a deliberate choice: a name alone is not enough evidence that it varies
    # a few values per process (retry candidates, a held collection, a range guard): reported low, for
    # warm-up to cover; a value bucketed per call is what JG002 asks for, and so are several values of
    # one value class (a one-class rule: like a bucket)
    return p.is_constexpr and p.name not in k.heuristics and arg.value_type in ("int", "unknown") and not arg.by_name \
        and (arg.provenance == VARYING or (few_values(arg) is not None and not one_class(arg)))


def fix_for(kfile: FileFacts, k: KernelFacts, p: ParamFacts) -> Fix:
    """Drop tl.constexpr and add the parameter to do_not_specialize (unsafe: the compiler loses its
    value); manual where the kernel needs it at compile time: a tl.arange bound or a block shape, or
    an ``if`` on it that selects code (as a plain int both branches compile, and a branch may use
    arguments passed as None)."""
    needed = [u for u in p.uses if u.kind == USE_CONSTEXPR]
    if needed:
        return manual(kfile, k, (
            f"{p.name!r} is needed as a compile-time constant ({where_used(needed)}): bucket it at the "
            f"launch (e.g. triton.next_power_of_2) instead of unspecializing"))
    selects = [u for u in p.uses if u.branch]
    if selects:
        return manual(kfile, k, (
            f"{p.name!r} selects code at compile time ({where_used(selects)}): as a plain int both "
            f"branches would compile, and a branch may use arguments passed as None; bucket it, or "
            f"warm it up (compile its few values before serving)"))
    reason = (
        f"{p.name!r} is never needed as a compile-time constant here: as a plain int in "
        "do_not_specialize it compiles once; the compiler loses its value (constant folding, unrolling)"
    )
    calls = [u for u in p.uses if u.kind == USE_CALL]
    if calls:
        reason += f"; it is also passed on ({where_used(calls)}): check the callee takes a runtime int"
    return kernel_fix(kfile, k, "unsafe", reason, (Edit("drop_constexpr", p.name), Edit("add_do_not_specialize", p.name)))


def check(program: Program):
    for (_, name), hits in varying_hits(program, _accept, (VARYING, BUCKETED)).items():
        hits = most_sure(hits)
        b, arg = hits[0]
        k, kfile = b.kernel, b.kernel_file
        p = k.param(name)
        ann = constexpr_spelling(p)
        needed = [u for u in p.uses if u.kind == USE_CONSTEXPR]
        fix = fix_for(kfile, k, p)
        if needed:
            advice = (
                f"pass a bucketed value (triton.next_power_of_2) instead: it must stay a compile-time "
                f"constant (line {needed[0].line}: {needed[0].context})"
            )
        elif fix.applicability == "manual":
            at = next(u for u in p.uses if u.branch)
            advice = (
                f"bucket it or warm it up: it selects code at compile time (line {at.line}: {at.context}), "
                f"so it must stay a {ann}"
            )
        else:
            advice = f'drop {ann} and add do_not_specialize=["{name}"]'
        varies = "varies per call" if arg.provenance == VARYING else few_values(arg)
        if arg.provenance != VARYING:
            advice = f"warm them up (compile each before serving), or {advice}"
        msg = (
            f"{CODE} {name} {varies} ({source_of(arg, b, kfile.path)}) and is a {ann}: "
            f"one compile per value; {advice}"
        )
        yield program.finding(
            CODE, kfile, k, k.line, k.column, name, msg, fix,
            {
                "uses": uses_record(p),
                "constexpr_needed_at": [{"line": u.line, "column": u.column, "context": u.context} for u in needed],
                "launches": launch_records(hits, kfile.path),
                "evidence": list(arg.evidence), "rules": list(arg.rules),
            },
            # a tl.constexpr is a deliberate choice: only structure contradicts it (most JG002 resting on
            # a convention, such as the leading-dim guess, were values fixed per model)
            confidence="high" if arg_confidence(arg) == "high" else "low",
        )


_I0 = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)

def launch(x):
    k[(1,)](x, x.shape[0], BLOCK=128)
"""
# needed as a compile-time constant (a tl.arange bound): bucket it, nothing is edited
_I1 = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n: tl.constexpr):
    offs = tl.arange(0, n)
    tl.store(x_ptr + offs, 0.0)

def launch(x):
    k[(1,)](x, x.shape[0])
"""
# an `if` on it selects code, and the branch reads a pointer that may be None: manual
_I2 = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, bias_ptr, has_rows: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if has_rows:
        tl.store(x_ptr + offs, tl.load(bias_ptr + offs))

def launch(x, bias=None):
    k[(1,)](x, bias, x.shape[0], BLOCK=128)
"""

RULE = Rule(
    code=CODE,
    name="varying-constexpr",
    summary="A per-call-varying value reaches a tl.constexpr parameter: one compile per distinct value.",
    what=(
        "A launch passes a per-call-varying value (token count, batch size, sequence length and\n"
        "arithmetic on them) to a parameter annotated tl.constexpr. A constexpr fed the same few values\n"
        "each call (the candidates of a retry loop, a collection an object holds, a value bounded by a\n"
        "guard before the launch) is reported at the low level, as a few variants for warm-up to cover."
    ),
    why=(
        "A constexpr's value is part of the compiled kernel's cache key: every distinct value compiles a\n"
        "new kernel. On an H200 (Triton 3.6.0, torch 2.11), 2026-11-29, a trivial kernel fed a\n"
        "serving-like stream of num_tokens values (230 distinct) took 230 compiles as a tl.constexpr,\n"
        "with a median call of 60 ms; as a plain int it took 3."
    ),
    example=(
        "@triton.jit\n"
        "def k(x_ptr, n: tl.constexpr, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, 0.0, mask=offs < n)\n"
        "k[(1,)](x, x.shape[0], BLOCK=128)"
    ),
    fix=(
        "If the parameter is only used at run time (masks, loop bounds, arithmetic), make it a plain int\n"
        'and unspecialize it: def k(x_ptr, n, BLOCK: tl.constexpr) with do_not_specialize=["n"].\n'
        "If it must be a compile-time constant (tl.arange bounds, block shapes), or an `if` on it\n"
        "selects code (as a plain int both branches compile, and one may use an argument passed as\n"
        "None), pass a bucketed value (triton.next_power_of_2(n)) so only a few variants exist, or warm\n"
        "those variants up before serving."
    ),
    fix_safety="unsafe",
    invalid=(
        Invalid(_I0, _I0.replace("n: tl.constexpr, BLOCK", "n, BLOCK").replace(
            "@triton.jit\n", '@triton.jit(do_not_specialize=["n"])\n'), "unsafe"),
        Invalid(_I1, _I1, "manual"),
        Invalid(_I2, _I2, "manual"),
    ),
    valid=(
        """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)

def launch(x):
    n = x.shape[0]
    k[(1,)](x, n, BLOCK=triton.next_power_of_2(n))
""",
    ),
    check=check,
)
