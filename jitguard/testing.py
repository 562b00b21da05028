"""Run Triton's real JIT path on a machine without a GPU, for tests and CI.

Under ``stand_in_driver()`` a ``@triton.jit`` kernel goes through ``JITFunction.run`` exactly as on
an H100/H200 (binder, in-memory and disk caches, every compile hook, real sm_90 code from the
bundled ``ptxas``), and the launch itself does nothing. So a CPU-only CI can assert how many
variants a stream of arguments compiles::

    from jitguard.testing import FakeTensor, stand_in_driver
    import torch

    with stand_in_driver():
        for n in range(1, 513):
            my_kernel.warmup(FakeTensor(1 << 20, torch.float16), n, BLOCK=128, grid=(1,))
    assert len(my_kernel.device_caches[0][0]) == 1   # or use jitguard.watch() to see why not

``jitguard.predict`` answers the same question from Triton's binder alone, without compiling.
Triton's version differences live in ``jitguard/runtime/compat.py``.

On Triton 3.2, ``@triton.autotune`` asks the active driver for its benchmarker when the decorator
runs: on a machine without a GPU, import a module with autotuned kernels inside
``stand_in_driver()`` (or give the decorator ``do_bench=``); from 3.3 on the import may come first.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

__all__ = ["FakeTensor", "StandInDriver", "dtype", "host_tensors_ok", "stand_in_driver"]


class FakeTensor:
    """What Triton reads of a tensor argument: ``data_ptr()`` (for the 16-byte alignment class)
    and ``dtype`` (a torch dtype or a ``triton.language`` dtype)."""

    def __init__(self, ptr: int, dtype: Any):
        self._ptr = ptr
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self._ptr


def dtype(name: str) -> Any:
    """A dtype Triton's binder accepts without torch: ``dtype("float16")`` is ``tl.float16``."""
    import triton.language as tl

    return getattr(tl, name)


class _Launcher:
    def __init__(self, src: Any, metadata: Any):
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Utils:
    def load_binary(self, name, kernel, shared, device):
        from jitguard.runtime import compat

        # (module, function, n_regs, n_spills[, n_max_threads from Triton 3.4 on])
        return (object(), object(), 32, 0) + ((1024,) if compat.version_tuple() >= (3, 4, 0) else ())

    def unload_module(self, module):
        return None

    def get_device_properties(self, device):
        return {"max_shared_mem": 232448, "multiprocessor_count": 132, "max_num_regs": 65536,
                "warpSize": 32, "mem_clock_rate": 2619000, "mem_bus_width": 6144,
                "sm_clock_rate": 1980000}


class StandInDriver:
    """Enough of Triton's CUDA driver for ``JITFunction.run``: an sm_90 target (H100/H200), real
    compiles, launches that do nothing, and an autotune benchmarker that compiles each config."""

    def __init__(self) -> None:
        from triton.backends.compiler import GPUTarget

        self._target = GPUTarget("cuda", 90, 32)
        self.utils = _Utils()
        self.launcher_cls = _Launcher
        # set when a ``stand_in_driver()`` block has ended but the stand-in had to stay Triton's
        # active driver (no real one on this machine): it still unloads, it no longer launches
        self.lingering = False

    def is_active(self) -> bool:
        return True

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        return None

    def get_current_stream(self, device: int | None = None) -> int:
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
def stand_in_driver() -> Iterator[StandInDriver]:
    """Make a ``StandInDriver`` Triton's active driver for the block. Afterwards the previous
    driver (or the machine's real one) is active again; where no real driver can exist (no GPU) the
    stand-in stays, since kernels compiled under it are unloaded through it when collected."""
    from triton.runtime import driver

    from jitguard.runtime import compat

    previous = compat.explicit_driver(driver)
    stand_in = StandInDriver()
    driver.set_active(stand_in)
    try:
        yield stand_in
    finally:
        if previous is not None:  # a real driver, or the stand-in of an enclosing block
            driver.set_active(previous)
        else:
            real = compat.machine_driver(driver)  # a real GPU driver, if this machine has one
            if real is not None:
                driver.set_active(real)
            else:
                stand_in.lingering = True


def host_tensors_ok() -> bool:
    """True while a stand-in driver is Triton's active driver for a purpose (inside a
    ``stand_in_driver()`` block, or made active with ``driver.set_active(StandInDriver())``):
    launches do nothing, so a kernel wrapper may take CPU tensors instead of refusing them.
    False once a ``stand_in_driver()`` block is over, also where the stand-in stays behind."""
    try:
        from triton.runtime import driver
    except ImportError:
        return False
    from jitguard.runtime import compat

    active = compat.explicit_driver(driver)
    return isinstance(active, StandInDriver) and not active.lingering
