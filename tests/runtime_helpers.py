"""Run Triton's real JIT path on a CPU: a stand-in active driver targeting sm_90.

``kernel.warmup(..., grid=(1,))`` then compiles real sm_90 code with the bundled ptxas and calls
every compile hook. Launches without ``warmup`` also go through (the launcher does nothing), so
autotune and cache-hit launches can be exercised. Tensors are ``FakeTensor(ptr, dtype)``: Triton
only reads ``data_ptr()`` and ``dtype``.
"""
from __future__ import annotations

import contextlib
import os


class FakeTensor:
    def __init__(self, ptr: int, dtype):
        self._ptr = ptr
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self._ptr


class _Launcher:
    def __init__(self, src, metadata):
        pass

    def __call__(self, *args, **kwargs):
        return None


class _Utils:
    def load_binary(self, name, kernel, shared, device):
        import triton

        # (module, function, n_regs, n_spills[, n_max_threads from 3.4])
        major_minor = tuple(int(x) for x in triton.__version__.split(".")[:2])
        return (object(), object(), 32, 0) + ((1024,) if major_minor >= (3, 4) else ())

    def unload_module(self, module):
        return None

    def get_device_properties(self, device):
        return {"max_shared_mem": 232448, "multiprocessor_count": 132, "max_num_regs": 65536,
                "warpSize": 32, "mem_clock_rate": 2619000, "mem_bus_width": 6144, "sm_clock_rate": 1980000}


class StandInDriver:
    """Enough of a CUDA driver for JITFunction.run on a machine with no GPU."""

    def __init__(self):
        from triton.backends.compiler import GPUTarget

        self._target = GPUTarget("cuda", 90, 32)
        self.utils = _Utils()
        self.launcher_cls = _Launcher

    def is_active(self):
        return True

    def get_current_device(self):
        return 0

    def set_current_device(self, device):
        return None

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return self._target

    def get_active_torch_device(self):
        raise RuntimeError("stand-in driver: no torch device")

    def get_device_interface(self):
        raise RuntimeError("stand-in driver: no device interface")

    def get_benchmarker(self):
        def bench(fn, quantiles=None, **kwargs):
            fn()  # compile (and no-op launch) the config, as a real benchmark would
            return [1.0, 1.0, 1.0] if quantiles else 1.0

        return bench

    def get_empty_cache_for_benchmark(self):
        return None

    def clear_cache(self, cache):
        return None


@contextlib.contextmanager
def stand_in_driver():
    """Make the stand-in driver active for the block. Where no real driver can exist (no GPU) it
    stays active afterwards: kernels compiled under it are unloaded through it when collected."""
    from triton.runtime import driver

    previous = getattr(driver, "_active", None)
    driver.set_active(StandInDriver())
    try:
        yield
    finally:
        if previous is not None and not isinstance(previous, StandInDriver):
            driver.set_active(previous)
        else:
            try:
                real = driver.default  # a real GPU driver, if this machine has one
            except Exception:
                real = None
            if real is not None:
                driver.set_active(real)


def dtype(name: str):
    """A dtype Triton's binder accepts without torch: triton.language dtypes carry the name."""
    import triton.language as tl

    return getattr(tl, name)


def cache_keys(kernel) -> list[str]:
    """The keys in a JITFunction's in-memory cache (every Triton version)."""
    from jitguard.runtime import compat

    return compat.kernel_cache_keys(kernel, 0)


def fresh_cache_dir(tmp_path) -> str:
    d = os.path.join(str(tmp_path), "triton-cache")
    os.makedirs(d, exist_ok=True)
    return d


