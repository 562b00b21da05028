"""JG007: launch sites of one kernel pass different launch options (separate cache keys)."""
from __future__ import annotations

from collections import Counter

from jitguard.static.program import Program
from jitguard.static.rules import Invalid, Rule
from jitguard.static.rules._common import manual

CODE = "JG007"


def _fmt(opts: tuple[str, ...]) -> str:
    return ", ".join(opts) if opts else "no options"


def check(program: Program):
    by_kernel: dict[int, list] = {}
    for b in program.launches:
        if b.launch.star_kwargs or b.launch.kind == "spec":
            continue  # options may hide in **kwargs, or be added by the framework that runs a launcher
        if b.exercise:
            continue  # a test's or a benchmark's launch of a kernel defined elsewhere: not what serving compiles
        by_kernel.setdefault(id(b.kernel), []).append(b)
    for q, launches in by_kernel.items():
        if len(launches) < 2:
            continue
        groups = Counter(tuple(b.options) for b in launches)
        if len(groups) < 2:
            continue
        common, _ = groups.most_common(1)[0]
        ref = next(b for b in launches if tuple(b.options) == common)
        for b in launches:
            opts = tuple(b.options)
            if opts == common:
                continue
            loc = ref.launch.line if ref.file.path == b.file.path else f"{ref.file.path}:{ref.launch.line}"
            msg = (
                f"{CODE} this launch of {b.kernel.name} passes {_fmt(opts)} but the launch at line {loc} passes "
                f"{_fmt(common)}: each set of launch options is a separate cache entry (a compile each); "
                f"pass the same options, in the same order, at every launch"
            )
            yield program.finding(
                CODE, b.kernel_file, b.kernel, b.launch.line, b.launch.column, None, msg, manual(b.kernel_file, b.kernel, msg),
                {"options": list(opts), "reference_options": list(common),
                 "reference": {"path": ref.file.path, "line": ref.launch.line}},
                path=b.file.path,
            )


_I0 = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    pass

def a(x):
    k[(1,)](x, BLOCK=128, num_warps=4)

def b(x):
    k[(1,)](x, BLOCK=128)

def c(x):
    k[(1,)](x, BLOCK=64)
"""


RULE = Rule(
    code=CODE,
    name="inconsistent-launch-options",
    summary="Launch sites of one kernel pass different launch options: distinct cache keys, extra compiles.",
    what=(
        "Two launches of the same kernel that pass different sets of launch options (num_warps,\n"
        "num_stages, num_ctas, ...) or the same ones in another order: e.g. num_warps=4 explicit at\n"
        "one site and left to its default at another."
    ),
    why=(
        "Triton keys its cache on str(options): num_warps=4 written out and num_warps left at its\n"
        "default of 4 are different keys, so the same kernel compiles twice (a stall of tens of ms each\n"
        "on an H200 (Triton 3.6.0, torch 2.11), 2026-11-29, where one compile of a trivial kernel costs\n"
        "~60 ms)."
    ),
    example=(
        "k[grid](x, n, BLOCK=128, num_warps=4)\n"
        "k[grid](y, m, BLOCK=128)            # default num_warps: another compile"
    ),
    fix="Pass the same launch options, in the same order, at every launch site of the kernel.",
    fix_safety="manual",
    invalid=(
        Invalid(_I0, _I0, "manual"),
    ),
    valid=(
        """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    pass

def a(x):
    k[(1,)](x, BLOCK=128, num_warps=4)

def b(x):
    k[(1,)](x, BLOCK=64, num_warps=4)
""",
    ),
    check=check,
)
