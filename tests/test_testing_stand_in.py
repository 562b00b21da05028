"""jitguard.testing: when a kernel wrapper may take CPU tensors (``host_tensors_ok``)."""
from __future__ import annotations

import pytest

triton = pytest.importorskip("triton")
from triton.runtime import driver  # noqa: E402

from jitguard.testing import StandInDriver, host_tensors_ok, stand_in_driver  # noqa: E402


@pytest.fixture
def restore_driver():
    before = getattr(driver, "_active", None)
    yield
    if before is not None:
        driver.set_active(before)


def test_host_tensors_ok_only_inside_the_block(restore_driver):
    with stand_in_driver() as d:
        assert host_tensors_ok()
        assert driver.active is d
    # on a machine with a GPU the real driver is back; on one without, the stand-in stays
    # (it unloads what was compiled under it) but no longer vouches for CPU tensors
    assert not host_tensors_ok()
    if isinstance(getattr(driver, "_active", None), StandInDriver):
        assert driver._active.lingering


def test_nested_blocks_and_a_process_wide_stand_in(restore_driver):
    with stand_in_driver():
        with stand_in_driver():
            assert host_tensors_ok()
        assert host_tensors_ok()  # the enclosing block's stand-in is back
    assert not host_tensors_ok()
    driver.set_active(StandInDriver())  # what a whole-process dry run does
    assert host_tensors_ok()


def test_kernel_wrappers_take_cpu_tensors_only_under_an_active_stand_in(restore_driver):
    torch = pytest.importorskip("torch")
    from jitguard.kernels import _launch, moe, rope_fp8

    if _launch.is_interpreted(rope_fp8._inv_rope_fp8_quant_kernel):
        pytest.skip("this process imported the kernels under TRITON_INTERPRET=1")
    T = int(torch.randint(1, 9, ()).item())
    o = torch.randn(T, 8, 512).to(torch.bfloat16)
    positions = torch.randint(0, 64, (T,))
    angles = torch.rand(64, 32)
    cache = torch.cat([angles.cos(), angles.sin()], dim=1)
    with pytest.raises(ValueError, match="o is on cpu"):
        rope_fp8.fused_inv_rope_fp8_quant(o, positions, cache, 1, 8)
    assert not _launch.accepts_host_tensors(moe._moe_gemm_kernel)
    with stand_in_driver():
        assert _launch.accepts_host_tensors(moe._moe_gemm_kernel)
        q, scales = rope_fp8.fused_inv_rope_fp8_quant(o, positions, cache, 1, 8)  # launch skipped
        assert q.shape == (T, 1, 8 * 512) and scales.shape == (T, 1, 8 * 512 // 128)
    with pytest.raises(ValueError, match="o is on cpu"):
        rope_fp8.fused_inv_rope_fp8_quant(o, positions, cache, 1, 8)
