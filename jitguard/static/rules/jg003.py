"""JG003: an autotune key contains a per-call-varying argument (re-benchmarks per value)."""
from __future__ import annotations

from jitguard.static.program import Program
from jitguard.static.rules import Invalid, Rule
from jitguard.static.rules._common import launch_records, manual, source_of, varying_hits

CODE = "JG003"


def _accept(k, p, arg) -> bool:
    return k.autotune_key is not None and p.name in k.autotune_key and arg.value_type in ("int", "unknown")


def check(program: Program):
    for (_, name), hits in varying_hits(program, _accept).items():
        b, arg = hits[0]
        k, kfile = b.kernel, b.kernel_file
        msg = (
            f"{CODE} autotune key {name} varies per call ({source_of(arg, b, kfile.path)}): every new "
            f"value re-benchmarks all configs; key on a bucketed value (triton.next_power_of_2) or drop it from key"
        )
        line = k.autotune_line or k.decorator_line
        yield program.finding(
            CODE, kfile, k, line, 1, name, msg, manual(kfile, k, msg),
            {"launches": launch_records(hits, kfile.path), "evidence": list(arg.evidence), "key": list(k.autotune_key or [])},
        )


_I0 = """
import triton
import triton.language as tl

@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["M"])
@triton.jit
def k(x_ptr, M, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < M)

def launch(x):
    k[(1,)](x, x.shape[0])
"""


RULE = Rule(
    code=CODE,
    name="varying-autotune-key",
    summary="An autotune key names a per-call-varying argument: every new value re-benchmarks all configs.",
    what="A parameter listed in @triton.autotune(key=[...]) receives a per-call-varying value at a launch.",
    why=(
        "Autotune caches the best config per tuple of key values: each new value benchmarks every\n"
        "(pruned) config again, compiling each one first. On an H200 (Triton 3.6.0, torch 2.11),\n"
        "2026-11-29, a trivial kernel whose autotune key (6 configs) got a serving-like stream of\n"
        "num_tokens values had a median call of 658 ms per new value."
    ),
    example=(
        '@triton.autotune(configs=CONFIGS, key=["M", "N"])\n'
        "@triton.jit\n"
        "def matmul(a_ptr, b_ptr, M, N, ...): ...\n"
        "matmul[grid](a, b, a.shape[0], b.shape[1], ...)   # M = tokens"
    ),
    fix=(
        "Key on a bucketed copy of the value: add a parameter M_BUCKET and pass\n"
        "triton.next_power_of_2(M) (or min(next_power_of_2(M), 4096)), and key on it instead of M;\n"
        "or drop M from key when the best config does not depend on it."
    ),
    fix_safety="manual",
    invalid=(
        Invalid(_I0, _I0, "manual"),
    ),
    valid=(
        """
import triton
import triton.language as tl

@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["M_BUCKET"])
@triton.jit(do_not_specialize=["M"])
def k(x_ptr, M, M_BUCKET, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < M)

def launch(x):
    M = x.shape[0]
    k[(1,)](x, M, triton.next_power_of_2(M))
""",
    ),
    check=check,
)
