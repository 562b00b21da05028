"""JG001: a per-call-varying int reaches a specialized (plain int) kernel parameter."""
from __future__ import annotations

from jitguard.findings import Edit, Fix
from jitguard.static.facts import (
    BUCKETED, STABLE, USE_ADDRESS, USE_CALL, VARYING, FileFacts, KernelFacts, ParamFacts,
)
from jitguard.static.program import Program
from jitguard.static.rules import Invalid, Rule
from jitguard.static.rules._common import (
    arg_confidence, few_values, kernel_fix, launch_records, most_sure, one_class, source_of, uses_record,
    varying_hits,
    where,
    where_used,
)

CODE = "JG001"
LOAD_COST = "dropping its divisibility-by-16 specialization can cost vectorized (16-byte) loads and stores"


def fix_for(kfile: FileFacts, k: KernelFacts, p: ParamFacts) -> Fix:
    """Add the parameter to do_not_specialize: safe where it only feeds comparisons, masks and loop
    bounds; unsafe where it feeds address arithmetic or another function."""
    edits = (Edit("add_do_not_specialize", p.name),)
    address = [u for u in p.uses if u.kind == USE_ADDRESS]
    calls = [u for u in p.uses if u.kind == USE_CALL]
    if address:
        return kernel_fix(kfile, k, "unsafe", f"{p.name!r} feeds address arithmetic ({where_used(address)}): {LOAD_COST}", edits)
    if calls:
        return kernel_fix(kfile, k, "unsafe", (
            f"{p.name!r} is passed to another function ({where_used(calls)}): the effect of "
            f"unspecializing it there is unknown; {LOAD_COST} if it reaches an address"), edits)
    return kernel_fix(kfile, k, "safe", f"{p.name!r} only feeds comparisons, masks and loop bounds", edits)


def _accept(k, p, arg) -> bool:
    return (
        _specialized_int(k, p, arg)
        and not arg.div16
        # bounded by guards to several values of one value class: one compile as a plain int
        and not one_class(arg)
    )


def _specialized_int(k, p, arg) -> bool:
    """A plain int parameter Triton specializes, given an int (or unknown) argument; not an autotune
    key given a value that does not vary per call (JG003 speaks of that: its few values re-tune
    anyway)."""
    return (
        not p.is_constexpr
        and not p.pointer
        and p.name not in k.unspecialized()
        and p.name not in k.heuristics
        and arg.value_type in ("int", "unknown")
        and not (arg.provenance != VARYING and p.name in (k.autotune_key or ()))
    )


def check(program: Program):
    # A bucketed value (next_power_of_2 of a token count) still spans the ==1 / other / %16 classes of
    # a plain int: 3 compiles, like the raw value. Only a tl.constexpr profits from bucketing.
    for (_, name), hits in varying_hits(program, _accept, (VARYING, BUCKETED)).items():
        hits = most_sure(hits)
        b, arg = hits[0]
        k, kfile = b.kernel, b.kernel_file
        p = k.param(name)
        kinds = p.use_kinds()
        note = ""
        if USE_ADDRESS in kinds:
            note = " (it feeds address arithmetic: check that loads stay vectorized)"
        elif USE_CALL in kinds:
            note = " (it is passed to another function: check its uses)"
        varies = "varies per call" if arg.provenance == VARYING else few_values(arg) or "takes bucketed per-call values"
        msg = (
            f"{CODE} {name} {varies} ({source_of(arg, b, kfile.path)}) and is specialized "
            f'(==1 / %16): add do_not_specialize=["{name}"]{note}'
        )
        yield program.finding(
            CODE, kfile, k, k.line, k.column, name, msg, fix_for(kfile, k, p),
            {
                "uses": uses_record(p),
                "use_kinds": sorted(kinds),
                "launches": launch_records(hits, kfile.path),
                "evidence": list(arg.evidence), "rules": list(arg.rules),
            },
            confidence=arg_confidence(arg),
        )
    yield from _per_site_values(program)


def _value_class(v: int) -> str:
    return "==1" if v == 1 else "%16" if v % 16 == 0 else "other"


def _per_site_values(program: Program):
    """A plain int fixed at each launch site (a literal) but in different value classes between
    sites: a few variants per process, each compiled on first use -- reported as that, at the low
    level, so that warm-up can cover them (not as a value that varies per call)."""
    seen: dict[int, tuple] = {}
    for b in program.launches:
        if b.launch.kind == "warmup" or b.exercise:
            continue
        for name, arg in b.args.items():
            p = b.kernel.param(name)
            # a literal's own value class is read below (4096 at one site and 1 at another: two)
            if p is None or arg.provenance != STABLE or not _specialized_int(b.kernel, p, arg):
                continue
            try:
                v = int(arg.text, 0)
            except ValueError:
                continue
            seen.setdefault((id(b.kernel), name), (b, p, []))[2].append((v, b))
    varying = {(id(b.kernel), name) for b in program.launches for name, a in b.args.items()
               if a.provenance in (VARYING, BUCKETED)}
    for key, (b0, p, values) in seen.items():
        classes = sorted({_value_class(v) for v, _ in values})
        if len(classes) < 2 or key in varying:
            continue
        k, kfile = b0.kernel, b0.kernel_file
        shown = ", ".join(f"{v} ({where(b, kfile.path)})" for v, b in values[:4])
        msg = (f"{CODE} {p.name} is fixed at each launch site but differs between them ({shown}): "
               f"{len(classes)} variants per process ({' / '.join(classes)}), each compiled on first use; "
               f'warm them up or add do_not_specialize=["{p.name}"]')
        yield program.finding(
            CODE, kfile, k, k.line, k.column, p.name, msg, fix_for(kfile, k, p),
            {"uses": uses_record(p), "use_kinds": sorted(p.use_kinds()),
             "per_site_values": [v for v, _ in values], "rules": ["per-site-fixed", "literal"],
             "launches": [{"path": b.file.path, "line": b.launch.line, "arg": str(v), "provenance": STABLE,
                           "rules": ["literal"], "confidence": "low"} for v, b in values]},
            confidence="low",
        )


_I0 = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)

def launch(x):
    k[(1,)](x, x.shape[0], BLOCK=128)
"""
_I1 = """
from triton import jit as tjit
import triton.language as tl

@tjit
def k(x_ptr, num_tokens, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < num_tokens)

def _launch(x, num_tokens):
    k[(1,)](x, num_tokens, BLOCK=128)

def forward(x):
    _launch(x, x.numel())
"""
# a parameter that feeds address arithmetic: the fix may cost vectorized loads, so it is unsafe
_I2 = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, stride, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs * stride, 0.0, mask=offs < BLOCK)

def launch(x):
    k[(1,)](x, x.shape[0], 64, BLOCK=128)
"""

RULE = Rule(
    code=CODE,
    name="varying-int-specialized",
    summary="A per-call-varying int reaches a specialized kernel parameter: recompiles mid-traffic.",
    what=(
        "A launch passes a value that changes with every call (the token or batch dimension of a tensor,\n"
        "numel(), len(), a loop variable, cdiv/round-up/min/max of those, or a next_power_of_2 bucket of\n"
        "them) to a plain int parameter of a @triton.jit kernel that is not in do_not_specialize. A value\n"
        "that is always a multiple of 16 (x * 64, a stride over a dimension of 128) is one value class\n"
        "and is not reported."
    ),
    why=(
        "Triton specializes every plain int argument on its value class (== 1, divisible by 16, other)\n"
        "and compiles one variant per class: the first batch of 1 token, the first multiple of 16, the\n"
        "first odd size each stall serving for a compile. On an H200 (Triton 3.6.0, torch 2.11),\n"
        "2026-11-29, a trivial kernel fed a serving-like stream of num_tokens values took 3 compiles as a\n"
        "plain int and 1 with do_not_specialize (as a tl.constexpr: 230 compiles of ~60 ms each)."
    ),
    example=(
        "@triton.jit\n"
        "def scale_kernel(x_ptr, num_tokens, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    mask = offs < num_tokens\n"
        "    ...\n"
        "scale_kernel[grid](x, x.shape[0], BLOCK=1024)   # num_tokens varies per call"
    ),
    fix=(
        '@triton.jit(do_not_specialize=["num_tokens"])\n'
        "def scale_kernel(x_ptr, num_tokens, BLOCK: tl.constexpr):\n"
        "`jitguard fix` adds the entry. Where the parameter feeds address arithmetic the fix is marked\n"
        "unsafe: dropping divisibility by 16 can cost vectorized loads, so measure."
    ),
    fix_safety="safe",
    invalid=(
        Invalid(_I0, _I0.replace("@triton.jit\n", '@triton.jit(do_not_specialize=["n"])\n'), "safe"),
        Invalid(_I1, _I1.replace("@tjit\n", '@tjit(do_not_specialize=["num_tokens"])\n'), "safe"),
        Invalid(_I2, _I2.replace("@triton.jit\n", '@triton.jit(do_not_specialize=["stride"])\n'), "unsafe"),
    ),
    valid=(
        """
import triton
import triton.language as tl

@triton.jit(do_not_specialize=["n"])
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)

def launch(x):
    k[(1,)](x, x.shape[0], BLOCK=128)
""",
        """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, hidden, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < hidden)

def launch(x):
    k[(1,)](x, x.shape[-1], BLOCK=128)
""",
    ),
    check=check,
)
