"""Small real Triton kernels for the runtime tests (compiled for sm_90 on a CPU via the stand-in driver).

Each test wraps these bodies in a fresh ``triton.jit`` (``fresh(...)``) so the in-memory cache
starts empty.
"""
from __future__ import annotations

import triton
import triton.language as tl


def copy_body(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def fresh(body=copy_body, **jit_kwargs):
    """A new JITFunction for ``body``: empty in-memory cache, same source (disk cache key)."""
    return triton.jit(body, **jit_kwargs)


def copy_body_i64(x_ptr, y_ptr, n: tl.int64, BLOCK: tl.constexpr):
    """``copy_body`` with an annotated int (as in vLLM's mamba kernels): the type is fixed, the
    value classes stay (1 folds, a multiple of 16 is divisible)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def copy_rows_body(x_ptr, y_ptr, n, rows, BLOCK: tl.constexpr):
    """Two ints: ``rows`` (an autotune key in the tests) and ``n`` (not in the key)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n * rows
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)
