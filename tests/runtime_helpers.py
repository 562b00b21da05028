"""Test helpers for the runtime side; the stand-in driver itself is public in jitguard/testing.py.

Run Triton's real JIT path on a CPU: a stand-in active driver targeting sm_90.

``kernel.warmup(..., grid=(1,))`` then compiles real sm_90 code with the bundled ptxas and calls
every compile hook. Launches without ``warmup`` also go through (the launcher does nothing), so
autotune and cache-hit launches can be exercised. Tensors are ``FakeTensor(ptr, dtype)``: Triton
only reads ``data_ptr()`` and ``dtype``.
"""
from __future__ import annotations

import os

from jitguard.testing import FakeTensor, StandInDriver, dtype, stand_in_driver  # noqa: F401


def cache_keys(kernel) -> list[str]:
    """The keys in a JITFunction's in-memory cache (every Triton version)."""
    from jitguard.runtime import compat

    return compat.kernel_cache_keys(kernel, 0)


def fresh_cache_dir(tmp_path) -> str:
    d = os.path.join(str(tmp_path), "triton-cache")
    os.makedirs(d, exist_ok=True)
    return d


