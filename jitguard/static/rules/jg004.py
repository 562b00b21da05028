"""JG004: do_not_specialize / _on_alignment names a parameter that doesn't exist (or a bad index)."""
from __future__ import annotations

import difflib

from jitguard.findings import Edit
from jitguard.static.program import Program
from jitguard.static.rules import Invalid, Rule
from jitguard.static.rules._common import kernel_fix

CODE = "JG004"


def check(program: Program):
    for k, kfile in program.all_kernels:
        names = [p.name for p in k.params]
        for option, entries, line in (
            ("do_not_specialize", k.do_not_specialize, k.do_not_specialize_line),
            ("do_not_specialize_on_alignment", k.do_not_specialize_on_alignment, k.do_not_specialize_on_alignment_line),
        ):
            for entry in entries:
                if k.resolve_entry(entry) is not None:
                    continue
                if isinstance(entry, int) and not isinstance(entry, bool):
                    what = f"index {entry}, out of range for {len(names)} parameters"
                    hint = "use the parameter's name"
                    param = None
                else:
                    what = f"{entry!r}, which is not a parameter of {k.name}"
                    close = difflib.get_close_matches(str(entry), names, n=1)
                    hint = f"did you mean {close[0]!r}?" if close else f"parameters are {', '.join(names)}"
                    param = str(entry)
                msg = f"{CODE} {option} names {what}: Triton ignores it silently; {hint}"
                fix = kernel_fix(kfile, k, "safe", "the entry has no effect", (Edit("remove_entry", entry=entry, option=option),))
                yield program.finding(
                    CODE, kfile, k, line or k.decorator_line, 1, param, msg, fix,
                    {"option": option, "entry": entry, "params": names},
                )


_I0 = """
import triton

@triton.jit(do_not_specialize=["num_token"])
def k(x_ptr, num_tokens):
    pass
"""
_I1 = """
import triton

@triton.jit(do_not_specialize=[5])
def k(x_ptr, num_tokens):
    pass
"""


RULE = Rule(
    code=CODE,
    name="unknown-do-not-specialize-entry",
    summary="do_not_specialize names a parameter that doesn't exist or an index out of range: silently ignored.",
    what=(
        "An entry of do_not_specialize or do_not_specialize_on_alignment that matches no parameter of\n"
        "the kernel (a typo, a renamed parameter) or an index past the last parameter."
    ),
    why=(
        "Triton ignores unknown entries without a word, so the parameter the author meant to protect\n"
        "is still specialized and recompiles per value class (3 compiles over a serving-like stream on\n"
        "an H200 (Triton 3.6.0, torch 2.11), 2026-11-29, for a plain int that was meant to be\n"
        "unspecialized)."
    ),
    example=(
        '@triton.jit(do_not_specialize=["num_token"])   # typo\n'
        "def k(x_ptr, num_tokens): ..."
    ),
    fix=(
        'Name the parameter that exists: @triton.jit(do_not_specialize=["num_tokens"]).\n'
        "`jitguard fix` removes the dead entry (safe: Triton ignores it anyway) and adds the intended\n"
        "name only where JG001 reports that parameter too; a typo it can't resolve stays yours to fix."
    ),
    fix_safety="safe",
    invalid=(
        Invalid(_I0, _I0.replace('@triton.jit(do_not_specialize=["num_token"])\n', '@triton.jit\n'), "safe"),
        Invalid(_I1, _I1.replace('@triton.jit(do_not_specialize=[5])\n', '@triton.jit\n'), "safe"),
    ),
    valid=(
        """
import triton

@triton.jit(do_not_specialize=["num_tokens", 0])
def k(x_ptr, num_tokens):
    pass
""",
    ),
    check=check,
)
