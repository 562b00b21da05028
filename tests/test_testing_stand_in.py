"""jitguard.testing: when a kernel wrapper may take CPU tensors (``host_tensors_ok``)."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions

triton = pytest.importorskip("triton")
from triton.runtime import driver  # noqa: E402

from jitguard.runtime import compat  # noqa: E402
from jitguard.testing import FakeTensor, StandInDriver, dtype, host_tensors_ok, stand_in_driver  # noqa: E402


@pytest.fixture
def restore_driver():
    before = compat.explicit_driver(driver)
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
    if compat.machine_driver(driver) is None:  # no GPU: the stand-in stays, lingering
        assert isinstance(driver.active, StandInDriver) and driver.active.lingering
    else:
        assert driver.active is not d


def test_compiles_go_on_after_a_nested_block(restore_driver):
    """Leaving a nested block brings back the enclosing stand-in, not Triton's default driver
    (which has no GPU to find here: "0 active drivers")."""
    from runtime_kernels import fresh

    k = fresh()
    x = FakeTensor(1 << 20, dtype("float16"))
    with stand_in_driver() as outer:
        with stand_in_driver():
            k.warmup(x, x, 17, BLOCK=32, grid=(1,))
        assert driver.active is outer
        k.warmup(x, x, 32, BLOCK=32, grid=(1,))  # raised "0 active drivers" on 3.2-3.4
    assert len(compat.kernel_cache_keys(k, 0)) == 2


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
