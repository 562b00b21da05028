"""False-positive patterns measured on the development codebases, each as a small kernel: the value
the scan took for per-call is a model quantity (a product of trailing dims), or the finding rests on a
convention too weak to carry it above the low level (a count times model dims, a rounding to an
alignment the code does not fix)."""
from __future__ import annotations

from tests.test_provenance_rules import _findings


def test_a_loop_over_a_slice_of_the_shape_with_a_computed_start_takes_trailing_dims(tmp_path):
    body = """
def w(pool, axis: int, lengths):
    per_page = pool.element_size()
    for size in {loop}:
        per_page *= size
    KERNEL[(1,)](pool, per_page, BLOCK=64)
"""
    assert _findings(tmp_path, body.format(loop="pool.shape[axis + 1:]")) == {}
    assert _findings(tmp_path, body.format(loop="pool.size()[1 + axis:]")) == {}
    # a slice from the leading dim still includes it: the guess that it varies
    assert list(_findings(tmp_path, body.format(loop="pool.shape[:axis]")).values()) == ["medium"]
    # a loop over a per-call collection is a counter
    assert list(_findings(tmp_path, body.format(loop="range(int(lengths.max()))")).values()) == ["high"]


def test_a_loop_over_a_name_bound_to_a_slice_of_the_shape(tmp_path):
    body = """
def w(state):
    inner_shape = state.shape[{sl}]
    inner = 1
    for s in inner_shape:
        inner *= s
    KERNEL[(1,)](state, inner, BLOCK=64)
"""
    assert _findings(tmp_path, body.format(sl="2:")) == {}
    assert list(_findings(tmp_path, body.format(sl=":")).values()) == ["medium"]


def test_a_count_times_a_model_dim_is_low(tmp_path):
    # numel() of a tensor of unknown origin whose non-leading dims the code reads: tokens times model dims
    for read in ("d = x.shape[-1]", "b, t, d = x.shape", "y = x.view(-1, 64)", "d = x.size(1)"):
        assert list(_findings(tmp_path, f"""
def w(x):
    {read}
    KERNEL[(1,)](x, x.numel(), BLOCK=64)
""").values()) == ["low"], read
    # nothing says how many dims it has: the element-count guess, low; asserted 1-d: the count itself
    assert list(_findings(tmp_path, """
def w(x):
    KERNEL[(1,)](x, x.numel(), BLOCK=64)
""").values()) == ["low"]
    assert list(_findings(tmp_path, """
def w(x):
    assert x.dim() == 1
    KERNEL[(1,)](x, x.numel(), BLOCK=64)
""").values()) == ["medium"]
    # arithmetic other than a product on it is a count again (cu_seqlens.numel() - 1, cdiv(numel, B)),
    # resting on the element-count guess (low); with the rank asserted, on the leading-dim one
    for guard, level in (("d = x.shape[-1]", "low"), ("assert x.ndim == 1", "medium")):
        assert list(_findings(tmp_path, f"""
import triton

def w(x):
    {guard}
    KERNEL[(1,)](x, triton.cdiv(x.numel(), 64) + x.numel() - 1, BLOCK=64)
""").values()) == [level], guard
    # its quotient by the row size is the count of rows again: the convention no longer holds
    assert list(_findings(tmp_path, """
def w(x):
    KERNEL[(1,)](x, x.numel() // x.size(-1), BLOCK=64)
""").values()) == ["medium"]
    # the leading dim times a non-leading one stays medium (topk, heads: small counts, not 16-aligned)
    assert list(_findings(tmp_path, """
def w(x):
    m, d = x.shape
    KERNEL[(1,)](x, m * d, BLOCK=64)
""").values()) == ["medium"]
    # a stride over a varying dim and a configured size
    assert list(_findings(tmp_path, """
import torch

def w(x, lengths, chunk):
    n = int(lengths.max())
    out = torch.empty(4, n, chunk)
    KERNEL[(1,)](out, out.stride(0), BLOCK=64)

class M:
    def f(self, x, lengths):
        w(x, lengths, self.chunk_size)
""").values()) == ["low"]
    # a count times a literal: its divisibility is known, not a convention (stays where it was)
    assert list(_findings(tmp_path, """
def w(x, lengths):
    KERNEL[(1,)](x, int(lengths.max()) * 3, BLOCK=64)
""").values()) == ["high"]
    # a structural count alone stays high
    assert list(_findings(tmp_path, """
def w(x, lengths):
    KERNEL[(1,)](x, int(lengths.max()), BLOCK=64)
""").values()) == ["high"]


def test_a_value_rounded_up_to_an_alignment_the_code_does_not_fix_is_low(tmp_path):
    body = """
from helpers import round_up

def w(x, lengths, align):
    KERNEL[(1,)](x, round_up(int(lengths.max()), {a}), BLOCK=64)

class M:
    def f(self, x, lengths):
        w(x, lengths, self.alignment)
"""
    assert list(_findings(tmp_path, body.format(a="align")).values()) == ["low"]
    assert _findings(tmp_path, body.format(a="64")) == {}
