"""PyTorch references for kernels/moe.py (plain loops over experts, float32 or float64 math)."""
from __future__ import annotations

import torch

FP8_MAX = 448.0


def moe_align_block_size_reference(topk_ids: torch.Tensor, block_m: int, num_experts: int):
    """Expected (per-expert slot lists in order, padded total) of the alignment, from a Python loop."""
    flat = topk_ids.reshape(-1).tolist()
    runs = {e: [s for s, x in enumerate(flat) if x == e] for e in range(num_experts)}
    total = sum(-(-len(r) // block_m) * block_m for r in runs.values())
    return runs, total


def grouped_gemm_reference(a, w, topk_ids, top_k, *, a_scale=None, w_scale=None, topk_weights=None,
                           dtype=torch.float32):
    """C[s] = W[e(s)] @ A[s // top_k] (* scales) (* topk_weights[s]) for every slot s, in ``dtype``."""
    flat = topk_ids.reshape(-1).long()
    rows = a.to(dtype)
    if a_scale is not None:
        rows = rows * a_scale.to(dtype)
    out = torch.zeros(flat.numel(), w.shape[1], dtype=dtype, device=a.device)
    slot_rows = torch.arange(flat.numel(), device=a.device) // top_k
    for e in flat.unique().tolist():
        slots = (flat == e).nonzero().flatten()
        we = w[e].to(dtype)
        if w_scale is not None:
            sc = w_scale[e].to(dtype)
            we = we * (sc[:, None] if sc.dim() == 1 else sc)
        out[slots] = rows[slot_rows[slots]] @ we.t()
    if topk_weights is not None:
        out = out * topk_weights.reshape(-1, 1).to(dtype)
    return out


def quantize_fp8_reference(t: torch.Tensor, scale: torch.Tensor | None = None):
    """e4m3 quantization (clamped to +-448): static per-tensor ``scale`` [1], or dynamic per-row
    scales [rows, 1] = amax / 448 of each row. Returns (q, scale)."""
    if scale is None:
        scale = (t.float().abs().amax(dim=-1, keepdim=True) / FP8_MAX).clamp_min(1e-12)
    q = (t.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


def fused_moe_reference(x, w1, w2, topk_weights, topk_ids, *, w1_scale=None, w2_scale=None,
                        a1_scale=None, a2_scale=None, dtype=torch.float32):
    """out [M, K] = sum_j topk_weights[t, j] * w2[e] @ (silu(g) * u), [g; u] = w1[e] @ x[t].

    FP8 weights: the activations are quantized the same way the kernel does (static scale if given,
    else per-row amax / 448), so the reference differs from the kernel only by accumulation order
    and by fp8 rounding of intermediate values near rounding boundaries.
    """
    M, K = x.shape
    topk = topk_ids.shape[1]
    inter = w1.shape[1] // 2
    fp8 = w1.dtype == torch.float8_e4m3fn
    if fp8:
        q1, s1 = quantize_fp8_reference(x, a1_scale)
        h = grouped_gemm_reference(q1, w1, topk_ids, topk, a_scale=s1, w_scale=w1_scale, dtype=dtype)
    else:
        h = grouped_gemm_reference(x, w1, topk_ids, topk, dtype=dtype)
    h = h.to(x.dtype).to(dtype)  # the kernel stores the gate/up result in x's dtype
    act = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
    if fp8:
        q2, s2 = quantize_fp8_reference(act, a2_scale)
        y = grouped_gemm_reference(q2, w2, topk_ids, 1, a_scale=s2, w_scale=w2_scale,
                                   topk_weights=topk_weights, dtype=dtype)
    else:
        y = grouped_gemm_reference(act.to(x.dtype), w2, topk_ids, 1, topk_weights=topk_weights,
                                   dtype=dtype)
    return y.view(M, topk, K).sum(dim=1)
