"""Fused inverse RoPE + FP8 block quantization (the corrected kernel).

After attention, the output ``o`` ``[T, H, D]`` is rotated back by each token's position (inverse
RoPE, interleaved pairs, on the last ``rope_dim`` dims) and quantized to float8_e4m3fn in blocks of
``quant_group_size`` elements with power-of-two scales, in one pass, for a grouped output
projection. See ``fused_inv_rope_fp8_quant`` for the layouts.

``num_tokens`` and the scale stride ``T4 = ceil(T/4)*4`` change with every batch, so both are
listed in ``do_not_specialize``: the kernel compiles once for any stream of batch sizes. The
uncorrected twin (plain ``@triton.jit``) is ``fixtures/rope_fp8_uncorrected.py``.

Layout (why this is not one program per (token, head) with one warp): each program handles
``BLOCK_T`` tokens x one head x the whole head dim with ``NUM_WARPS`` warps, so every thread issues
several independent 16-byte loads before its first use, the fp8 rows it stores are contiguous
``D``-byte runs, and the ``BLOCK_T`` scales of one block land in one contiguous run of the
token-major scale buffer instead of ``D/128`` scattered 4-byte writes per program.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .rope_fp8_reference import inv_rope_fp8_quant_reference  # noqa: F401  (re-exported)

FP8_MAX = 448.0

# Block sizes: constants, never derived from T (a T-derived constexpr would compile per value).
BLOCK_T = 8
NUM_WARPS = 4


@triton.jit(do_not_specialize=["num_tokens", "scale_stride"])
def _inv_rope_fp8_quant_kernel(
    o_ptr,  # [T, H, D], last dim contiguous
    positions_ptr,  # [T] int32/int64
    cos_sin_ptr,  # [max_pos, ROPE_DIM] float32: cos | sin
    q_ptr,  # [G, T, HEADS_PER_GROUP * D] float8_e4m3fn, contiguous
    scale_ptr,  # [G, HEADS_PER_GROUP * D / QUANT_GROUP, T4] float32, contiguous
    num_tokens,  # T: varies with every batch
    scale_stride,  # T4 = ceil(T / 4) * 4: varies with every batch
    o_stride_t,
    o_stride_h,
    cos_sin_stride,
    N_GROUPS: tl.constexpr,
    HEADS_PER_GROUP: tl.constexpr,
    NOPE_DIM: tl.constexpr,
    ROPE_DIM: tl.constexpr,
    QUANT_GROUP: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_Q: tl.constexpr,  # next power of two >= (NOPE_DIM + ROPE_DIM) / QUANT_GROUP
    ROPE_CHUNK: tl.constexpr,  # largest power of two dividing NOPE_DIM, ROPE_DIM and QUANT_GROUP
):
    HEAD_DIM: tl.constexpr = NOPE_DIM + ROPE_DIM
    NUM_Q: tl.constexpr = HEAD_DIM // QUANT_GROUP  # scale blocks per head
    NUM_SCALES: tl.constexpr = HEADS_PER_GROUP * NUM_Q  # scale blocks per (token, group)
    HALF_GROUP: tl.constexpr = QUANT_GROUP // 2
    HALF_ROPE: tl.constexpr = ROPE_DIM // 2
    NUM_HEADS: tl.constexpr = N_GROUPS * HEADS_PER_GROUP

    # Heads vary fastest: neighbouring programs read neighbouring memory of o.
    pid = tl.program_id(0)
    head = pid % NUM_HEADS
    t0 = (pid // NUM_HEADS) * BLOCK_T
    group = head // HEADS_PER_GROUP
    head_in_group = head % HEADS_PER_GROUP

    rows = tl.arange(0, BLOCK_T)
    tok = t0 + rows
    tok_ok = tok < num_tokens
    cols = tl.arange(0, BLOCK_Q * QUANT_GROUP)
    tile_ok = tok_ok[:, None] & (cols < HEAD_DIM)[None, :]

    # One 2-D load of BLOCK_T full rows: 16-byte vectors along D.
    o_base = o_ptr + t0.to(tl.int64) * o_stride_t + head * o_stride_h
    x = tl.load(o_base + rows[:, None] * o_stride_t + cols[None, :], mask=tile_ok, other=0.0)

    # Rotation, on chunks of ROPE_CHUNK dims (ROPE_CHUNK divides NOPE_DIM, ROPE_DIM and
    # QUANT_GROUP); chunks at or past NOPE_DIM are rotated. a, b: even / odd element of each pair.
    NUM_CHUNKS: tl.constexpr = BLOCK_Q * QUANT_GROUP // ROPE_CHUNK
    HALF_CHUNK: tl.constexpr = ROPE_CHUNK // 2
    a, b = tl.split(tl.reshape(x.to(tl.float32), (BLOCK_T, NUM_CHUNKS, HALF_CHUNK, 2)))
    chunk = tl.arange(0, NUM_CHUNKS)
    is_rope = ((chunk >= NOPE_DIM // ROPE_CHUNK) & (chunk < HEAD_DIM // ROPE_CHUNK))[None, :, None]
    pos = tl.load(positions_ptr + tok, mask=tok_ok, other=0)
    cs_row = cos_sin_ptr + pos.to(tl.int64) * cos_sin_stride
    if ROPE_CHUNK == ROPE_DIM:
        # The rope dims are one chunk: load cos/sin once per token, broadcast over chunks.
        i = tl.arange(0, HALF_CHUNK)
        c = tl.load(cs_row[:, None] + i[None, :], mask=tok_ok[:, None], other=0.0)[:, None, :]
        s = tl.load(cs_row[:, None] + HALF_ROPE + i[None, :], mask=tok_ok[:, None], other=0.0)[:, None, :]
    else:
        rope_i = (chunk - NOPE_DIM // ROPE_CHUNK)[:, None] * HALF_CHUNK + tl.arange(0, HALF_CHUNK)[None, :]
        cs_ptr = cs_row[:, None, None] + rope_i[None, :, :]
        cs_ok = tok_ok[:, None, None] & is_rope
        c = tl.load(cs_ptr, mask=cs_ok, other=0.0)
        s = tl.load(cs_ptr + HALF_ROPE, mask=cs_ok, other=0.0)

    # Inverse rotation (the launcher turns FMA contraction off: same rounding as the reference).
    ya = tl.where(is_rope, a * c + b * s, a)
    yb = tl.where(is_rope, b * c - a * s, b)
    ya = tl.reshape(ya, (BLOCK_T, BLOCK_Q, HALF_GROUP))
    yb = tl.reshape(yb, (BLOCK_T, BLOCK_Q, HALF_GROUP))

    # Per-block power-of-two scale: the smallest 2^e >= max(amax, 1e-10) / 448, by exponent bits.
    amax = tl.maximum(tl.max(tl.abs(ya), axis=2), tl.max(tl.abs(yb), axis=2))
    ratio = tl.math.div_rn(tl.maximum(amax, 1e-10), 448.0)
    ratio_bits = ratio.to(tl.int32, bitcast=True)
    biased_exp = (ratio_bits >> 23) + ((ratio_bits & 0x7FFFFF) != 0).to(tl.int32)
    scale = (biased_exp << 23).to(tl.float32, bitcast=True)
    inv_scale = ((254 - biased_exp) << 23).to(tl.float32, bitcast=True)  # exact: a power of two

    qa = tl.minimum(tl.maximum(ya * inv_scale[:, :, None], -448.0), 448.0).to(tl.float8e4nv)
    qb = tl.minimum(tl.maximum(yb * inv_scale[:, :, None], -448.0), 448.0).to(tl.float8e4nv)
    q = tl.reshape(tl.join(qa, qb), (BLOCK_T, BLOCK_Q * QUANT_GROUP))

    q_row_stride: tl.constexpr = HEADS_PER_GROUP * HEAD_DIM
    q_base = q_ptr + (group.to(tl.int64) * num_tokens + t0) * q_row_stride + head_in_group * HEAD_DIM
    tl.store(q_base + rows[:, None] * q_row_stride + cols[None, :], q, mask=tile_ok)

    # Scales are token-major: BLOCK_T consecutive floats per block. Rows T..T4-1 get zeros.
    blk = tl.arange(0, BLOCK_Q)
    first_blk = group * NUM_SCALES + head_in_group * NUM_Q
    s_base = scale_ptr + first_blk.to(tl.int64) * scale_stride + t0
    s_ptr = s_base + blk[None, :] * scale_stride + rows[:, None]
    s_ok = (tok < scale_stride)[:, None] & (blk < NUM_Q)[None, :]
    tl.store(s_ptr, tl.where(tok_ok[:, None], scale, 0.0), mask=s_ok)


_O_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_POS_DTYPES = (torch.int64, torch.int32)


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _validate(o, positions, cos_sin_cache, n_groups, heads_per_group, nope_dim, rope_dim,
              quant_group_size) -> None:
    """Raise ValueError naming the offending argument; checks nothing that needs a device sync."""
    _check_int("n_groups", n_groups, 1)
    _check_int("heads_per_group", heads_per_group, 1)
    _check_int("nope_dim", nope_dim, 0)
    _check_int("rope_dim", rope_dim, 0)
    _check_int("quant_group_size", quant_group_size, 2)
    if rope_dim % 2:
        raise ValueError(f"rope_dim must be even, got {rope_dim}")
    if quant_group_size & (quant_group_size - 1):
        raise ValueError(f"quant_group_size must be a power of two, got {quant_group_size}")
    head_dim = nope_dim + rope_dim
    if head_dim == 0 or head_dim % quant_group_size:
        raise ValueError(
            f"nope_dim + rope_dim = {head_dim} must be a positive multiple of "
            f"quant_group_size = {quant_group_size}")
    for name, t in (("o", o), ("positions", positions), ("cos_sin_cache", cos_sin_cache)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if o.dim() != 3:
        raise ValueError(f"o must be 3-D [T, H, D], got shape {tuple(o.shape)}")
    if o.dtype not in _O_DTYPES:
        raise ValueError(f"o must be bfloat16, float16 or float32, got {o.dtype}")
    n_heads = n_groups * heads_per_group
    if o.shape[1] != n_heads:
        raise ValueError(
            f"o.shape[1] = {o.shape[1]} must equal n_groups * heads_per_group = {n_heads}")
    if o.shape[2] != head_dim:
        raise ValueError(f"o.shape[2] = {o.shape[2]} must equal nope_dim + rope_dim = {head_dim}")
    if o.shape[0] > 0 and o.stride(2) != 1:
        raise ValueError(f"o must have a contiguous last dimension, got strides {o.stride()}")
    if positions.dim() != 1 or positions.shape[0] != o.shape[0]:
        raise ValueError(
            f"positions must be 1-D with o.shape[0] = {o.shape[0]} entries, got shape "
            f"{tuple(positions.shape)}")
    if positions.dtype not in _POS_DTYPES:
        raise ValueError(f"positions must be int64 or int32, got {positions.dtype}")
    if positions.shape[0] > 1 and positions.stride(0) != 1:
        raise ValueError(f"positions must be contiguous, got stride {positions.stride(0)}")
    if cos_sin_cache.dim() != 2 or cos_sin_cache.shape[1] != rope_dim:
        raise ValueError(
            f"cos_sin_cache must be 2-D [max_pos, rope_dim = {rope_dim}], got shape "
            f"{tuple(cos_sin_cache.shape)}")
    if cos_sin_cache.dtype != torch.float32:
        raise ValueError(f"cos_sin_cache must be float32, got {cos_sin_cache.dtype}")
    if cos_sin_cache.shape[0] < 1:
        raise ValueError("cos_sin_cache must have at least one row")
    if rope_dim > 0 and cos_sin_cache.stride(1) != 1:
        raise ValueError(
            f"cos_sin_cache must have a contiguous last dimension, got strides "
            f"{cos_sin_cache.stride()}")
    if positions.device != o.device:
        raise ValueError(f"positions is on {positions.device} but o is on {o.device}")
    if cos_sin_cache.device != o.device:
        raise ValueError(f"cos_sin_cache is on {cos_sin_cache.device} but o is on {o.device}")


def _allocate(o: torch.Tensor, n_groups: int, heads_per_group: int, quant_group_size: int):
    """The output buffers: q [G, T, hpg*D] fp8 and scales [G, hpg*D/qg, T4] float32."""
    num_tokens, _, head_dim = o.shape
    padded_tokens = (num_tokens + 3) // 4 * 4
    num_scales = heads_per_group * head_dim // quant_group_size
    q_buf = torch.empty((n_groups, num_tokens, heads_per_group * head_dim),
                        dtype=torch.float8_e4m3fn, device=o.device)
    scale_buf = torch.empty((n_groups, num_scales, padded_tokens), dtype=torch.float32,
                            device=o.device)
    return q_buf, scale_buf


def _views(q_buf: torch.Tensor, scale_buf: torch.Tensor, num_tokens: int):
    """q [T, G, hpg*D] and scales [T, G, nsb], strides (1, nsb*T4, T4): views, no copies."""
    return q_buf.transpose(0, 1), scale_buf.permute(2, 0, 1)[:num_tokens]


def _rope_chunk(nope_dim: int, rope_dim: int, quant_group_size: int) -> int:
    """Largest power of two dividing nope_dim, rope_dim and quant_group_size (0 counts as any)."""
    common = math.gcd(math.gcd(nope_dim, rope_dim), quant_group_size)
    return common & -common


def _is_interpreted(kernel) -> bool:
    return type(kernel).__name__ == "InterpretedFunction"


def _launch(kernel, o, positions, cos_sin_cache, q_buf, scale_buf, n_groups, heads_per_group,
            nope_dim, rope_dim, quant_group_size, block_t=BLOCK_T, num_warps=NUM_WARPS):
    """Launch ``kernel`` over ``o`` into preallocated buffers (shared by the corrected kernel
    and its uncorrected twin, and by tests that poison the buffers first)."""
    if o.device.type != "cuda" and not _is_interpreted(kernel):
        raise ValueError(
            f"o is on {o.device}: the kernel needs a CUDA tensor (or TRITON_INTERPRET=1 set "
            "before triton is imported, to run it on CPU in Triton's interpreter)")
    if block_t % 4:
        raise ValueError(f"block_t must be a multiple of 4 (it covers the T4 padding), got {block_t}")
    num_tokens = o.shape[0]
    num_q = (nope_dim + rope_dim) // quant_group_size
    grid = (triton.cdiv(num_tokens, block_t) * n_groups * heads_per_group,)
    kernel[grid](
        o, positions, cos_sin_cache, q_buf, scale_buf,
        num_tokens, scale_buf.shape[2],
        o.stride(0), o.stride(1), cos_sin_cache.stride(0),
        N_GROUPS=n_groups, HEADS_PER_GROUP=heads_per_group,
        NOPE_DIM=nope_dim, ROPE_DIM=rope_dim, QUANT_GROUP=quant_group_size,
        BLOCK_T=block_t, BLOCK_Q=triton.next_power_of_2(num_q),
        ROPE_CHUNK=_rope_chunk(nope_dim, rope_dim, quant_group_size),
        num_warps=num_warps, enable_fp_fusion=False,
    )


def fused_inv_rope_fp8_quant(o, positions, cos_sin_cache, n_groups, heads_per_group,
                             nope_dim=448, rope_dim=64, quant_group_size=128):
    """Inverse RoPE then FP8 block quantization of the attention output, in one kernel.

    Args:
        o: ``[T, H, D]`` bfloat16 (float16/float32 also accepted), ``H = n_groups *
            heads_per_group``, ``D = nope_dim + rope_dim``; last dim contiguous, token and head
            strides arbitrary.
        positions: ``[T]`` int64 (or int32), each in ``[0, cos_sin_cache.shape[0])`` (not checked:
            that would need a device sync).
        cos_sin_cache: ``[max_pos, rope_dim]`` float32, cos in the first half, sin in the second.

    Returns:
        ``q``: ``[T, G, hpg*D]`` float8_e4m3fn, a transposed view of a contiguous
        ``[G, T, hpg*D]`` buffer; ``q[t, g, j*D + e]`` is element ``e`` of head ``g*hpg + j``.
        ``scales``: ``[T, G, hpg*D/quant_group_size]`` float32 with strides ``(1, nsb*T4, T4)``
        (``T4 = ceil(T/4)*4``), a view of a ``[G, nsb, T4]`` buffer whose rows ``T..T4-1`` are
        zero. Dequantize as ``q * scale`` per block.

    Raises:
        ValueError: naming the argument, for a wrong dtype, rank, shape or device.
    """
    _validate(o, positions, cos_sin_cache, n_groups, heads_per_group, nope_dim, rope_dim,
              quant_group_size)
    q_buf, scale_buf = _allocate(o, n_groups, heads_per_group, quant_group_size)
    if o.shape[0] > 0:
        _launch(_inv_rope_fp8_quant_kernel, o, positions, cos_sin_cache, q_buf, scale_buf,
                n_groups, heads_per_group, nope_dim, rope_dim, quant_group_size)
    return _views(q_buf, scale_buf, o.shape[0])
