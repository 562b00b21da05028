"""CPU tests of jitguard.kernels.moe under the Triton interpreter, against the PyTorch reference.

Not collected by pytest directly (the name does not start with ``test_``): Triton reads TRITON_INTERPRET
when it is imported and when each @triton.jit decorator runs, so these cases need a process that had
the variable set from the start. tests/test_kernels_moe.py::test_interpreter_cases starts one.
"""
from __future__ import annotations

import os

import pytest
import torch

if os.environ.get("TRITON_INTERPRET") != "1":  # pragma: no cover - guard against direct collection
    pytest.skip("run through tests/test_kernels_moe.py (needs TRITON_INTERPRET=1 from process start)",
                allow_module_level=True)

from jitguard.kernels import moe as imoe_module  # noqa: E402
from jitguard.kernels import moe_reference as ref  # noqa: E402


@pytest.fixture(scope="module")
def imoe():
    assert imoe_module._interpreting(), "the kernels are not interpreted"
    return imoe_module


def _skewed_ids(M: int, E: int, topk: int, gen: torch.Generator, empty: int = 2) -> torch.Tensor:
    """Distinct experts per token, drawn unevenly, never from the last `empty` experts."""
    live = max(topk, E - empty)
    probs = torch.linspace(1.0, 0.1, live)
    rows = [torch.multinomial(probs, topk, replacement=False, generator=gen) for _ in range(M)]
    return torch.stack(rows).to(torch.int32)


def _relerr(out: torch.Tensor, want: torch.Tensor) -> float:
    return ((out.double() - want.double()).norm() / want.double().norm()).item()


# --------------------------------------------------------------------------------------------------
# CPU, interpreter
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("M", [1, 3, 9, 33])
@pytest.mark.parametrize("E,topk", [(1, 1), (4, 2), (8, 3)])
@pytest.mark.parametrize("block_m", [16, 32])
def test_align_matches_reference(imoe, M, E, topk, block_m):
    gen = torch.Generator().manual_seed(1000 * M + 10 * E + block_m)
    ids = _skewed_ids(M, E, topk, gen, empty=2 if E > 3 else 0)
    sid, eid, total = imoe.moe_align_block_size(ids, block_m, E)
    runs, want_total = ref.moe_align_block_size_reference(ids, block_m, E)
    assert int(total) == want_total
    assert sid.shape[0] % block_m == 0 and sid.shape[0] >= want_total
    got: dict[int, list[int]] = {}
    for b in range(want_total // block_m):
        e = int(eid[b])
        block = sid[b * block_m:(b + 1) * block_m].tolist()
        assert all(s == M * topk for s in block[len([s for s in block if s < M * topk]):]), "padding not at run end"
        got.setdefault(e, []).extend(s for s in block if s < M * topk)
    assert {e: sorted(v) for e, v in got.items()} == {e: r for e, r in runs.items() if r}
    assert (eid[want_total // block_m:] == -1).all()
    assert (sid[want_total:] == M * topk).all()


@pytest.mark.parametrize("M", [1, 3, 9, 33])
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_fused_moe_matches_reference(imoe, M, swap, dtype):
    gen = torch.Generator().manual_seed(M * 7 + swap)
    E, topk, K, inter = 8, 2, 48, 40  # K and 2I not multiples of the blocks: tails are masked
    x = torch.randn(M, K, generator=gen).to(dtype)
    w1 = (torch.randn(E, 2 * inter, K, generator=gen) / K**0.5).to(dtype)
    w2 = (torch.randn(E, K, inter, generator=gen) / inter**0.5).to(dtype)
    ids = _skewed_ids(M, E, topk, gen)
    weights = torch.rand(M, topk, generator=gen)
    cfg = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32}
    out = imoe.fused_moe(x, w1, w2, weights, ids, swap_ab=swap, config=cfg)
    want = ref.fused_moe_reference(x, w1, w2, weights, ids, dtype=torch.float64)
    assert out.shape == (M, K) and out.dtype == dtype
    assert _relerr(out, want) < (2e-3 if dtype == torch.float16 else 1e-5)


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("block_m", [16, 32])
def test_grouped_gemm_writes_every_valid_row(imoe, swap, block_m):
    gen = torch.Generator().manual_seed(block_m + swap)
    M, E, topk, N, K = 9, 8, 3, 40, 64
    a = torch.randn(M, K, generator=gen, dtype=torch.float16)
    w = torch.randn(E, N, K, generator=gen, dtype=torch.float16)
    ids = _skewed_ids(M, E, topk, gen, empty=3)
    tw = torch.rand(M, topk, generator=gen)
    sid, eid, _ = imoe.moe_align_block_size(ids, block_m, E)
    out = torch.full((M * topk, N), float("nan"), dtype=torch.float32)
    cfg = {"BLOCK_M": block_m, "BLOCK_N": 32, "BLOCK_K": 32}
    imoe.grouped_gemm(a, w, sid, eid, top_k=topk, num_valid_tokens=M * topk, config=cfg, out=out,
                      topk_weights=tw, swap_ab=swap)
    want = ref.grouped_gemm_reference(a, w, ids, topk, topk_weights=tw, dtype=torch.float64)
    assert not out.isnan().any()
    assert _relerr(out, want) < 2e-3


def _fp8_weights(E, N, K, gen, per_channel):
    w = torch.randn(E, N, K, generator=gen)
    amax = w.abs().amax(dim=2) if per_channel else w.abs().amax(dim=(1, 2))
    scale = (amax / 448.0).float()
    q = (w / (scale[..., None] if per_channel else scale[:, None, None])).clamp(-448, 448)
    return q.to(torch.float8_e4m3fn), scale


@pytest.mark.parametrize("M", [1, 9, 33])
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("per_channel,static_act", [(False, False), (True, True)])
def test_fused_moe_fp8_matches_reference(imoe, M, swap, per_channel, static_act):
    gen = torch.Generator().manual_seed(M + 100 * swap + 10 * per_channel)
    E, topk, K, inter = 8, 2, 64, 32
    x = torch.randn(M, K, generator=gen).to(torch.float16)
    w1, s1 = _fp8_weights(E, 2 * inter, K, gen, per_channel)
    w2, s2 = _fp8_weights(E, K, inter, gen, per_channel)
    ids = _skewed_ids(M, E, topk, gen)
    weights = torch.rand(M, topk, generator=gen)
    extra = {}
    if static_act:
        extra = {"a1_scale": torch.tensor([0.02]), "a2_scale": torch.tensor([0.5])}
    out = imoe.fused_moe(x, w1, w2, weights, ids, w1_scale=s1, w2_scale=s2, swap_ab=swap,
                         config={"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32}, **extra)
    want = ref.fused_moe_reference(x, w1, w2, weights, ids, w1_scale=s1, w2_scale=s2,
                                   dtype=torch.float64, **extra)
    # Differences: accumulation order, then fp8 rounding flips of intermediate values near a boundary.
    assert out.dtype == torch.float16
    assert _relerr(out, want) < 3e-2


def test_swap_and_noswap_agree_on_fp8_grouped_gemm(imoe):
    gen = torch.Generator().manual_seed(5)
    M, E, topk, N, K = 5, 4, 2, 64, 96
    a = (torch.randn(M, K, generator=gen) * 8).clamp(-448, 448).to(torch.float8_e4m3fn)
    w, ws = _fp8_weights(E, N, K, gen, per_channel=False)
    ids = _skewed_ids(M, E, topk, gen, empty=1)
    sid, eid, _ = imoe.moe_align_block_size(ids, 16, E)
    a_scale = torch.tensor([0.125])
    outs = [imoe.grouped_gemm(a, w, sid, eid, top_k=topk, num_valid_tokens=M * topk,
                              config={"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 32}, out_dtype=torch.float32,
                              a_scale=a_scale, w_scale=ws, swap_ab=s) for s in (False, True)]
    want = ref.grouped_gemm_reference(a, w, ids, topk, a_scale=a_scale, w_scale=ws, dtype=torch.float64)
    assert _relerr(outs[0], want) < 1e-5 and _relerr(outs[1], want) < 1e-5
    assert torch.allclose(outs[0], outs[1], rtol=1e-5, atol=1e-4)


def test_route_softmax_and_sigmoid(imoe):
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(7, 16, generator=gen)
    w, ids = imoe.route(logits, 4, renormalize=True)
    probs = torch.softmax(logits, dim=-1)
    assert ids.dtype == torch.int32 and w.dtype == torch.float32
    assert torch.equal(ids.long(), probs.topk(4, dim=-1).indices)
    assert torch.allclose(w.sum(dim=-1), torch.ones(7))
    w2, ids2 = imoe.route(logits, 4, scoring="sigmoid")
    assert torch.allclose(w2, torch.sigmoid(logits).gather(1, ids2.long()))
    with pytest.raises(ValueError, match="topk"):
        imoe.route(logits, 17)
    with pytest.raises(ValueError, match="scoring"):
        imoe.route(logits, 2, scoring="max")


def test_zero_tokens_and_expert_with_no_tokens(imoe):
    E, K, inter = 4, 32, 16
    w1 = torch.randn(E, 2 * inter, K, dtype=torch.float16)
    w2 = torch.randn(E, K, inter, dtype=torch.float16)
    out = imoe.fused_moe(torch.empty(0, K, dtype=torch.float16), w1, w2, torch.empty(0, 2),
                         torch.empty(0, 2, dtype=torch.int32))
    assert out.shape == (0, K) and out.dtype == torch.float16
    # Every token on expert 2 only: the other experts get no block.
    x = torch.randn(3, K, dtype=torch.float16)
    ids = torch.full((3, 1), 2, dtype=torch.int32)
    tw = torch.ones(3, 1)
    got = imoe.fused_moe(x, w1, w2, tw, ids, config={"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32})
    want = ref.fused_moe_reference(x, w1, w2, tw, ids, dtype=torch.float64)
    assert _relerr(got, want) < 2e-3
    _, eid, total = imoe.moe_align_block_size(ids, 16, E)
    assert int(total) == 16 and eid.tolist()[0] == 2 and set(eid.tolist()[1:]) <= {-1}


def _args(M=3, E=4, topk=2, K=32, inter=16, dtype=torch.float16):
    return dict(
        x=torch.randn(M, K, dtype=dtype),
        w1=torch.randn(E, 2 * inter, K, dtype=dtype),
        w2=torch.randn(E, K, inter, dtype=dtype),
        topk_weights=torch.rand(M, topk),
        topk_ids=torch.randint(0, E, (M, topk), dtype=torch.int32),
    )


@pytest.mark.parametrize("change,arg", [
    (lambda a: a.update(x=a["x"][0]), "x"),
    (lambda a: a.update(x=a["x"].to(torch.int32)), "x"),
    (lambda a: a.update(w1=a["w1"][:, :, :16]), "w1"),
    (lambda a: a.update(w1=a["w1"][:, :31]), "w1"),
    (lambda a: a.update(w2=a["w2"][:, :, :8]), "w2"),
    (lambda a: a.update(w2=a["w2"].float()), "w2"),
    (lambda a: a.update(topk_ids=a["topk_ids"].float()), "topk_ids"),
    (lambda a: a.update(topk_ids=a["topk_ids"][:2]), "topk_ids"),
    (lambda a: a.update(topk_weights=a["topk_weights"][:, :1]), "topk_weights"),
    (lambda a: a.update(topk_ids=a["topk_ids"] + 4), "topk_ids"),
    (lambda a: a.update(topk_ids=a["topk_ids"] - 5), "topk_ids"),
    (lambda a: a.update(topk_ids=torch.zeros(3, 5, dtype=torch.int32),
                        topk_weights=torch.rand(3, 5)), "topk_ids"),
    (lambda a: a.update(w1_scale=torch.ones(4)), "w1_scale"),
    (lambda a: a.update(config={"BLOCK_M": 24, "BLOCK_N": 32, "BLOCK_K": 32}), "config"),
    (lambda a: a.update(config={"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP": 8}), "config"),
    (lambda a: a.update(swap_ab="yes"), "swap_ab"),
])
def test_invalid_inputs_name_the_argument(imoe, change, arg):
    args = _args()
    change(args)
    with pytest.raises(ValueError, match=arg):
        imoe.fused_moe(**args)


def test_fp8_scale_validation(imoe):
    args = _args()
    w1 = args["w1"].float().to(torch.float8_e4m3fn)
    w2 = args["w2"].float().to(torch.float8_e4m3fn)
    args.update(w1=w1, w2=w2)
    with pytest.raises(ValueError, match="w1_scale"):
        imoe.fused_moe(**args)
    with pytest.raises(ValueError, match="w2_scale"):
        imoe.fused_moe(**args, w1_scale=torch.ones(4), w2_scale=torch.ones(3))
    with pytest.raises(ValueError, match="a1_scale"):
        imoe.fused_moe(**args, w1_scale=torch.ones(4), w2_scale=torch.ones(4), a1_scale=torch.ones(2))


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("split_k", [2, 3])
def test_split_k_and_flags_match_reference(imoe, swap, split_k):
    """SPLIT_K (K tail masked, one split possibly empty), N_FAST, IDS_FIRST, PRELOAD: the reference result,
    twice in a row (the arrival counters reset themselves), every counter back at zero."""
    gen = torch.Generator().manual_seed(40 + split_k + swap)
    M, E, topk, N, K = 7, 6, 2, 40, 80
    a = torch.randn(M, K, generator=gen, dtype=torch.float16)
    w = torch.randn(E, N, K, generator=gen, dtype=torch.float16)
    ids = _skewed_ids(M, E, topk, gen, empty=1)
    tw = torch.rand(M, topk, generator=gen)
    sid, eid, _ = imoe.moe_align_block_size(ids, 16, E)
    want = ref.grouped_gemm_reference(a, w, ids, topk, topk_weights=tw, dtype=torch.float64)
    cfg = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "SPLIT_K": split_k, "N_FAST": swap, "IDS_FIRST": True,
           "PRELOAD": not swap}
    for _ in range(2):
        out = torch.full((M * topk, N), float("nan"), dtype=torch.float32)
        imoe.grouped_gemm(a, w, sid, eid, top_k=topk, num_valid_tokens=M * topk, config=cfg, out=out,
                          topk_weights=tw, swap_ab=swap)
        assert not out.isnan().any()
        assert _relerr(out, want) < 2e-3
    assert all(int(b.abs().sum()) == 0 for b in imoe._SPLIT_K_LOCKS.values())
    with pytest.raises(ValueError, match="SPLIT_K"):
        imoe.grouped_gemm(a, w, sid, eid, top_k=topk, num_valid_tokens=M * topk, config=dict(cfg, SPLIT_K=0))
