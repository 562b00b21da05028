"""JG005: do_not_specialize names a tl.constexpr parameter."""
from __future__ import annotations

from jitguard.findings import Edit
from jitguard.static.program import Program
from jitguard.static.rules import Invalid, Rule
from jitguard.static.rules._common import constexpr_spelling, kernel_fix

CODE = "JG005"


def check(program: Program):
    for k, kfile in program.all_kernels:
        for option, entries, line in (
            ("do_not_specialize", k.do_not_specialize, k.do_not_specialize_line),
            ("do_not_specialize_on_alignment", k.do_not_specialize_on_alignment, k.do_not_specialize_on_alignment_line),
        ):
            for entry in entries:
                p = k.resolve_entry(entry)
                if p is None or not p.is_constexpr:
                    continue
                ann = constexpr_spelling(p)
                msg = (
                    f"{CODE} {option} names {ann} parameter {p.name}: no effect before Triton 3.6, "
                    f"a compile error from 3.6; remove it (or drop {ann} if it may be a runtime int)"
                )
                # every entry of this list naming the parameter (its name and an index alike)
                drop = tuple(Edit("remove_entry", entry=e, option=option) for e in entries
                             if (hit := k.resolve_entry(e)) is not None and hit.name == p.name)
                fix = kernel_fix(kfile, k, "safe", "the entry has no effect", drop)
                yield program.finding(
                    CODE, kfile, k, line or k.decorator_line, 1, p.name, msg, fix,
                    {"option": option, "entry": entry},
                )


_I0 = """
import triton
import triton.language as tl

@triton.jit(do_not_specialize=["BLOCK"])
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
"""


RULE = Rule(
    code=CODE,
    name="do-not-specialize-constexpr",
    summary="do_not_specialize names a tl.constexpr parameter: a no-op before Triton 3.6, a compile error from 3.6.",
    what="An entry of do_not_specialize / do_not_specialize_on_alignment that names a tl.constexpr parameter.",
    why=(
        "A constexpr's value is always part of the cache key (230 compiles of ~60 ms over a serving-like\n"
        "stream on an H200 (Triton 3.6.0, torch 2.11), 2026-11-29), and do_not_specialize cannot change\n"
        "that: up to Triton 3.5 the entry is silently ignored, from 3.6 the kernel fails to compile."
    ),
    example=(
        '@triton.jit(do_not_specialize=["BLOCK"])\n'
        "def k(x_ptr, n, BLOCK: tl.constexpr): ..."
    ),
    fix=(
        "Remove the entry. If the value varies per call and is not needed at compile time, drop\n"
        "tl.constexpr from the parameter and keep the entry."
    ),
    fix_safety="safe",
    invalid=(
        Invalid(_I0, _I0.replace('@triton.jit(do_not_specialize=["BLOCK"])\n', '@triton.jit\n'), "safe"),
    ),
    valid=(
        """
import triton
import triton.language as tl

@triton.jit(do_not_specialize=["n"])
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
""",
    ),
    check=check,
)
