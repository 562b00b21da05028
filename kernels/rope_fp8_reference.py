"""PyTorch reference for the fused inverse RoPE + FP8 block quantization (any device).

Same math as ``jitguard.kernels.rope_fp8``, step by step in float32, with the same rounding: no
fused multiply-adds in the rotation, a correctly rounded ``amax / 448``, and a power-of-two scale
found from the exponent bits (exactly ``2 ** ceil(log2(x))``; a float32 ``log2`` can round
``x = 2^k * (1 + 2^-23)`` down to ``k`` and pick a scale half as large).
"""
from __future__ import annotations

import torch

FP8_MAX = 448.0


def inverse_rope(o: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
                 nope_dim: int, rope_dim: int) -> torch.Tensor:
    """``o`` [T, H, D] rotated back on its last ``rope_dim`` dims (interleaved pairs): float32."""
    y = o.float().clone()
    half = rope_dim // 2
    cs = cos_sin_cache.float()[positions.long()]  # [T, rope_dim]
    c = cs[:, None, :half]
    s = cs[:, None, half:]
    a = y[..., nope_dim::2].clone()
    b = y[..., nope_dim + 1::2].clone()
    y[..., nope_dim::2] = a * c + b * s
    y[..., nope_dim + 1::2] = b * c - a * s
    return y


def power_of_two_scale(amax: torch.Tensor) -> torch.Tensor:
    """The smallest power of two >= max(amax, 1e-10) / 448 (float32, exact)."""
    ratio = amax.float().clamp(min=1e-10) / FP8_MAX
    bits = ratio.view(torch.int32)
    biased_exp = (bits >> 23) + ((bits & 0x7FFFFF) != 0).to(torch.int32)
    return (biased_exp << 23).view(torch.float32)


def inv_rope_fp8_quant_reference(o, positions, cos_sin_cache, n_groups, heads_per_group,
                                 nope_dim=448, rope_dim=64, quant_group_size=128, *,
                                 return_prequant=False):
    """Reference for ``fused_inv_rope_fp8_quant``.

    Returns ``q`` [T, G, hpg*D] float8_e4m3fn and ``scales`` [T, G, hpg*D/quant_group_size]
    float32, both contiguous (the values, not the kernel's strided views). With
    ``return_prequant=True`` also the float32 values just before the fp8 cast (``y / scale``,
    clamped to +-448), shaped like ``q``.
    """
    num_tokens, num_heads, head_dim = o.shape
    y = inverse_rope(o, positions, cos_sin_cache, nope_dim, rope_dim)
    blocks = y.view(num_tokens, num_heads, head_dim // quant_group_size, quant_group_size)
    scale = power_of_two_scale(blocks.abs().amax(dim=-1))
    prequant = (blocks / scale[..., None]).clamp(-FP8_MAX, FP8_MAX)
    q = prequant.to(torch.float8_e4m3fn)
    width = heads_per_group * head_dim
    q = q.reshape(num_tokens, n_groups, width)
    scales = scale.reshape(num_tokens, n_groups, width // quant_group_size)
    if return_prequant:
        return q, scales, prequant.reshape(num_tokens, n_groups, width)
    return q, scales
