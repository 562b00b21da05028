"""Launch helpers shared by the kernels of this package (programmatic dependent launch).

Programmatic dependent launch (PDL, sm_90+): a kernel launched with ``launch_pdl=True`` may be
scheduled while the previous kernel in the stream still runs; each of its programs must execute
``tl.extra.cuda.gdc_wait()`` (griddepcontrol.wait) before its first global load or store, which
blocks until the previous kernel has completed and its writes are visible. A kernel may also call
``tl.extra.cuda.gdc_launch_dependents()`` to let the next PDL kernel be scheduled before it ends.
``launch_pdl`` is a compile option and the kernels' ``USE_PDL`` a constexpr: both are constant per
config, so turning PDL on or off never makes a kernel compile per batch size.

The modes of each kernel family (0: plain launch and 1: wait only mean the same in both; the
trigger modes were measured per family, so their numbers differ; each family's default is its
measured rule):

=====  ==============================================  ===============================================
mode   ``rope_fp8`` (``LaunchConfig.pdl``, default 2)  ``moe`` (``moe.PDL`` / ``pdl=``, default 3)
=====  ==============================================  ===============================================
2      wait, then trigger the next kernel at once,     wait, then trigger at once, in every kernel
       except in grids of 0.4-0.9 of a wave
3      wait, then trigger at once                      wait, then trigger at once in the small
                                                       kernels, after the K loop in the GEMM
=====  ==============================================  ===============================================
"""
from __future__ import annotations

import functools
import sys

import torch


def pdl_supported(device: torch.device) -> bool:
    """Programmatic dependent launch needs an NVIDIA GPU of compute capability 9.0 or later
    (griddepcontrol is an sm_90 instruction)."""
    if device.type != "cuda" or torch.version.hip is not None or not torch.cuda.is_available():
        return False  # (not available: a stand-in driver compiling for sm_90 with no GPU)
    return _cuda_capability(torch.cuda.current_device() if device.index is None
                            else device.index) >= (9, 0)


@functools.lru_cache(maxsize=None)
def _cuda_capability(index: int) -> tuple:
    return tuple(torch.cuda.get_device_capability(index))


def is_interpreted(kernel) -> bool:
    """True when ``kernel`` was built by Triton's interpreter (TRITON_INTERPRET=1): no PDL there."""
    return type(kernel).__name__ == "InterpretedFunction"


def accepts_host_tensors(kernel) -> bool:
    """CPU tensors are fine when the kernel runs in Triton's interpreter (TRITON_INTERPRET=1),
    or while jitguard's stand-in driver is active for a purpose (``jitguard.testing``: real
    compiles, launches that do nothing)."""
    if is_interpreted(kernel):
        return True
    testing = sys.modules.get("jitguard.testing")  # never imported here for this question
    return testing is not None and testing.host_tensors_ok()


def pdl_options(pdl: int) -> dict:
    """Launch keywords for PDL mode ``pdl`` (0: none; else ``USE_PDL=pdl`` and ``launch_pdl=True``).
    With 0 nothing is passed, so a kernel keeps its plain launch (and its USE_PDL default 0)."""
    return dict(USE_PDL=pdl, launch_pdl=True) if pdl else {}


# The names rope_fp8 has used since v5.
_pdl_supported = pdl_supported
