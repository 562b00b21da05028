"""Kernels and a launch loop for the warm-up tests (tests/test_warmup.py).

The loop covers what a warm-up must rebuild: pointer alignment (a view 2 bytes off), ints folded to
1, i32 divisible by 16 or not, i64 values, bool and dtype constexprs, explicit launch options, an
autotuned kernel whose best config is not its first, and a kernel with a dotted qualname. Import
it under a stand-in driver (Triton 3.2's autotuner asks the driver for a benchmarker at decoration).
"""
from __future__ import annotations

import itertools

import triton
import triton.language as tl

_bench_calls = itertools.count()


def second_config_wins(fn, quantiles=None, **kwargs):
    """Autotune benchmark stand-in: runs (compiles) the config; of each pair benchmarked, the
    second is the faster, so the recorded best config is never the first one."""
    fn()
    t = 2.0 if next(_bench_calls) % 2 == 0 else 1.0
    return [t, t, t] if quantiles else t


@triton.jit
def scale(x_ptr, y_ptr, n, offset, BLOCK: tl.constexpr, DOUBLE: tl.constexpr, OUT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask)
    if DOUBLE:
        v = v * 2
    tl.store(y_ptr + offset + offs, v.to(OUT), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=1),
                          triton.Config({"BLOCK": 64}, num_warps=2)],
                 key=["n"], do_bench=second_config_wins)
@triton.jit
def tuned(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


if vars(tuned).get("do_bench", second_config_wins) is not second_config_wins:
    tuned.do_bench = second_config_wins  # Triton 3.2's decorator does not pass do_bench= on


class Ops:
    @staticmethod
    @triton.jit
    def fill(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


BASE = 1 << 20  # 16-byte aligned


def calls(pointer):
    """The loop: (kernel, args, kwargs) per launch; ``pointer(ptr, dtype)`` makes a tensor stand-in."""
    x16 = pointer(BASE, tl.float16)
    view = pointer(BASE + 2, tl.float16)  # a view at an odd offset: not 16-byte aligned
    x32 = pointer(BASE, tl.float32)
    return [
        (scale, (x16, x16, 7, 3), dict(BLOCK=64, DOUBLE=False, OUT=tl.float16)),
        (scale, (x16, x16, 7 * 16, 3), dict(BLOCK=64, DOUBLE=False, OUT=tl.float16)),  # n % 16 == 0
        (scale, (x16, x16, 1, 3), dict(BLOCK=64, DOUBLE=False, OUT=tl.float16)),  # n folded to 1
        (scale, (x16, view, 7, 3), dict(BLOCK=64, DOUBLE=False, OUT=tl.float16)),  # unaligned
        (scale, (x16, x16, 7, (1 << 33) + 5), dict(BLOCK=64, DOUBLE=False, OUT=tl.float16)),  # i64
        (scale, (x16, x16, 7, 3), dict(BLOCK=128, DOUBLE=True, OUT=tl.float32)),  # constexprs
        (scale, (x16, x16, 7, 3), dict(BLOCK=64, DOUBLE=False, OUT=tl.float16, num_warps=2)),  # options
        (tuned, (x32, 100), {}),
        (tuned, (x32, 200), {}),
        (Ops.fill, (x32, 40), dict(BLOCK=64)),
    ]


def run(launches) -> None:
    for kernel, args, kwargs in launches:
        kernel[(1,)](*args, **kwargs)
