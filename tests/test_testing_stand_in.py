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
