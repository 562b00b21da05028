"""JG002: a per-call-varying value reaches a tl.constexpr parameter (one compile per value)."""
from __future__ import annotations

from jitguard.static.facts import USE_CONSTEXPR
from jitguard.static.program import Program
from jitguard.static.rules import Rule
from jitguard.static.rules._common import constexpr_spelling, launch_records, source_of, uses_record, varying_hits

CODE = "JG002"


def _accept(k, p, arg) -> bool:
    # a constexpr is a deliberate choice: a name alone is not enough evidence that it varies
    return p.is_constexpr and p.name not in k.heuristics and arg.value_type in ("int", "unknown") and not arg.by_name


def check(program: Program):
    for (_, name), hits in varying_hits(program, _accept).items():
        b, arg = hits[0]
        k, kfile = b.kernel, b.kernel_file
        p = k.param(name)
        ann = constexpr_spelling(p)
        needed = [u for u in p.uses if u.kind == USE_CONSTEXPR]
        if needed:
            fix = (
                f"pass a bucketed value (triton.next_power_of_2) instead: it must stay a compile-time "
                f"constant (line {needed[0].line}: {needed[0].context})"
            )
            safety = "manual"
        else:
            fix = f'drop {ann} and add do_not_specialize=["{name}"]'
            safety = "unsafe"
        msg = (
            f"{CODE} {name} varies per call ({source_of(arg, b, kfile.path)}) and is a {ann}: "
            f"one compile per value; {fix}"
        )
        yield program.finding(
            CODE, kfile, k, k.line, k.column, name, msg, safety,
            {
                "fix": {"drop_constexpr_and_add_do_not_specialize": name} if not needed else {"bucket": name},
                "uses": uses_record(p),
                "constexpr_needed_at": [{"line": u.line, "column": u.column, "context": u.context} for u in needed],
                "launches": launch_records(hits, kfile.path),
                "evidence": list(arg.evidence),
            },
        )


RULE = Rule(
    code=CODE,
    name="varying-constexpr",
    summary="A per-call-varying value reaches a tl.constexpr parameter: one compile per distinct value.",
    what=(
        "A launch passes a per-call-varying value (token count, batch size, sequence length and\n"
        "arithmetic on them) to a parameter annotated tl.constexpr."
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
        "If it must be a compile-time constant (tl.arange bounds, block shapes), pass a bucketed value\n"
        "(triton.next_power_of_2(n)) so only a few variants exist."
    ),
    fix_safety="unsafe",
    invalid=(
        """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)

def launch(x):
    k[(1,)](x, x.shape[0], BLOCK=128)
""",
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
