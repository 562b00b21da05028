"""Fused mixture-of-experts (MoE) for decode and prefill, bf16/fp16 and FP8 (e4m3), with Swap-AB.

The operation (shapes)::

    x            [M, K]        tokens (fp16 / bf16 / fp32)
    w1           [E, 2I, K]    gate rows 0..I-1 and up rows I..2I-1 of each expert
    w2           [E, K, I]     down projection
    topk_weights [M, topk]     float routing weights
    topk_ids     [M, topk]     int expert index per slot
    out[t] = sum_j topk_weights[t, j] * w2[e] @ (silu(g) * u),  [g; u] = w1[e] @ x[t],  e = topk_ids[t, j]

Pieces, each public:

* :func:`route` -- softmax (or sigmoid) top-k over router logits, optional renormalization.
* :func:`moe_align_block_size` -- sort the ``M*topk`` slots by expert and pad each expert's run to a
  multiple of ``BLOCK_M`` (one Triton program, graph-capturable, no host sync).
* :func:`grouped_gemm` -- the grouped GEMM: one program per (M-block of one expert, N-tile). One Triton
  kernel for every precision, with a ``SWAP_AB`` constexpr: with Swap-AB it computes
  ``C^T[N, m] = W[N, K] x A^T[K, m]`` so the expert's weight rows fill wgmma's 64-row M slot and the
  few tokens of a decode step are the narrow N side; the tile is transposed back in registers before
  the store.
* :func:`fused_moe` -- routing output in, gate/up GEMM, SiLU-and-mul, down GEMM with the routed weight,
  sum over topk out.

Compile-once property: every int that changes with the batch (the padded slot count ``EM``, the valid
slot count ``M*topk``) is listed in ``do_not_specialize``, and nothing derived from M is a constexpr, so
each config compiles once for any stream of M.

Programmatic dependent launch (sm_90+, ``PDL`` / the ``pdl`` argument): every kernel waits for the
previous one in the stream (``griddepcontrol.wait``) before its first global memory access; ``USE_PDL`` is
a constexpr and ``launch_pdl`` a compile option, so this keeps one compile per config.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import torch
import triton
import triton.language as tl

from ._launch import accepts_host_tensors, is_interpreted, pdl_options, pdl_supported

__all__ = [
    "route",
    "moe_align_block_size",
    "grouped_gemm",
    "fused_moe",
    "choose_swap_ab",
    "quantize_fp8",
    "silu_and_mul",
    "get_config",
    "compiled_variant_count",
    "FP8_DTYPE",
    "FP8_MAX",
    "PDL",
    "GEMM_DEFAULTS",
]

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_CONFIG_KEYS = {"BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "SWAP_AB", "SPLIT_K", "N_FAST",
                "IDS_FIRST", "PRELOAD"}
_MAX_SPLIT_K = 16
# v6: the GEMM's optional flags for configs that do not set them (bench/results/moe_check_v6.json):
# the slot ids loaded with the expert id, the epilogue's scales before the K loop.
GEMM_DEFAULTS = {"IDS_FIRST": True, "PRELOAD": True}
# Split-K arrival counters, one zeroed buffer per (device, stream), reset by the kernel itself after use.
_SPLIT_K_LOCKS: dict[tuple, torch.Tensor] = {}

# Programmatic dependent launch of every kernel of the layer (sm_90+, CUDA; never under the
# interpreter): 0 off, 1 each program waits for the previous kernel (griddepcontrol.wait) before its
# first global load or store, 2 wait and then let the next kernel be scheduled at once
# (griddepcontrol.launch_dependents). The default of the ``pdl`` argument of every launcher.
# Measured (bench/results/moe_pdl_v5.json, H200): 1 never slower than 0 beyond the rounds' spread, 0 to
# 1.2 µs faster; 2 faster at decode (Qwen3 FP8 M=1 30.45 -> 28.55 µs) but +25 µs (+5.8%) at Mixtral FP8
# M=256 and +2 µs on the w1 GEMM alone at M=4, so it is opt-in.
# 3 (v6): as 2 in the small kernels, but the grouped GEMM triggers only after its K loop (so the next
# kernel's programs become resident during the GEMM's epilogue, not while its waves still need the SMs).
# Measured (bench/results/moe_pdl_v6.json, every layer and w1 row of both shapes, bf16 and FP8): 3 is
# never slower than 1 beyond the rounds' spread and 0-2.7 µs faster per layer (Qwen3 FP8 M=1 29.97 ->
# 27.93 µs, M=256 206.0 -> 200.8), and fixes mode 2's +6% at Mixtral FP8 M=256: the default since v6.
PDL = 3
_PDL_MODES = (0, 1, 2, 3)


# --------------------------------------------------------------------------------------------------
# Triton kernels
# --------------------------------------------------------------------------------------------------
@triton.jit
def _pdl_enter(USE_PDL: tl.constexpr, LATE_TRIGGER: tl.constexpr = False):
    """First statement of every kernel here: with PDL, wait for the previous kernel in the stream
    (its writes visible) before any global memory access; mode 2 then triggers the next kernel, and so
    does mode 3 except in kernels that trigger late themselves (LATE_TRIGGER: the GEMM, after its K loop)."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        if USE_PDL == 2 or (USE_PDL == 3 and not LATE_TRIGGER):
            tl.extra.cuda.gdc_launch_dependents()


@triton.jit(do_not_specialize=["num_slots", "EM"])
def _moe_align_kernel(
    topk_ids_ptr,  # [num_slots] int32/int64, flattened [M, topk]
    sorted_token_ids_ptr,  # [EM] int32 out: slot index, or num_slots as padding sentinel
    expert_ids_ptr,  # [EM // BLOCK_M] int32 out: expert of each block, -1 past the padded total
    total_ptr,  # [1] int32 out: padded total (number of valid entries of sorted_token_ids)
    cursor_ptr,  # [BLOCK_E] int32 scratch: per-expert counters
    num_slots,  # M * topk: varies per call
    EM,  # capacity of sorted_token_ids (a multiple of BLOCK_M): varies per call
    BLOCK_M: tl.constexpr,
    BLOCK_E: tl.constexpr,  # next power of two >= num_experts
    CHUNK: tl.constexpr,  # slots handled per step
    BLOCKS: tl.constexpr,  # M-blocks labelled per step (BLOCKS x BLOCK_E compare tile)
    FILL: tl.constexpr,  # sentinel entries written per step
    USE_PDL: tl.constexpr = 0,  # PDL mode (see PDL)
):
    """Single-program counting sort of the slots by expert, each expert padded to BLOCK_M.

    Counts and positions come from atomics on a per-expert counter, so the work per step is O(CHUNK),
    not O(CHUNK x E); the order of the slots within one expert's run is unspecified.
    """
    _pdl_enter(USE_PDL)
    offs_e = tl.arange(0, BLOCK_E)
    offs_c = tl.arange(0, CHUNK)
    # 1. Fill with the sentinel; zero the counters.
    offs_f = tl.arange(0, FILL)
    for start in range(0, EM, FILL):
        offs = start + offs_f
        tl.store(sorted_token_ids_ptr + offs, tl.zeros([FILL], tl.int32) + num_slots, mask=offs < EM)
    tl.store(cursor_ptr + offs_e, tl.zeros([BLOCK_E], tl.int32))
    tl.debug_barrier()
    # 2. Count slots per expert.
    for start in range(0, num_slots, CHUNK):
        offs = start + offs_c
        valid = offs < num_slots
        ids = tl.load(topk_ids_ptr + offs, mask=valid, other=0).to(tl.int32)
        tl.atomic_add(cursor_ptr + ids, tl.full([CHUNK], 1, tl.int32), mask=valid)
    tl.debug_barrier()
    counts = tl.atomic_add(cursor_ptr + offs_e, tl.zeros([BLOCK_E], tl.int32))  # read back from L2
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    pad_end = tl.cumsum(padded, axis=0)
    pad_start = pad_end - padded
    total = tl.sum(padded, axis=0)
    tl.store(total_ptr, total)
    # 3. Expert id of every block: number of experts whose padded run ends at or before its start.
    offs_b = tl.arange(0, BLOCKS)
    for start in range(0, EM, BLOCKS * BLOCK_M):
        blk = start // BLOCK_M + offs_b
        blk_start = blk * BLOCK_M
        owner = tl.sum((pad_end[None, :] <= blk_start[:, None]).to(tl.int32), axis=1)
        owner = tl.where(blk_start < total, owner, -1)
        tl.store(expert_ids_ptr + blk, owner, mask=blk_start < EM)
    # 4. Scatter: each slot takes the next free position of its expert's padded run.
    tl.debug_barrier()  # every thread has read the counts before they become cursors
    tl.store(cursor_ptr + offs_e, pad_start)
    tl.debug_barrier()  # the cursors and the sentinel fill land before the scatter
    for start in range(0, num_slots, CHUNK):
        offs = start + offs_c
        valid = offs < num_slots
        ids = tl.load(topk_ids_ptr + offs, mask=valid, other=0).to(tl.int32)
        pos = tl.atomic_add(cursor_ptr + ids, tl.full([CHUNK], 1, tl.int32), mask=valid)
        tl.store(sorted_token_ids_ptr + pos, offs.to(tl.int32), mask=valid)


@triton.jit(do_not_specialize=["EM", "num_valid_tokens"])
def _moe_gemm_kernel(
    a_ptr,  # [rows, K]: x [M, K] for w1 (top_k > 1 maps slot -> token), or [M*topk, K] for w2
    b_ptr,  # [E, N, K] expert weights
    c_ptr,  # [M*topk, N] out, row = slot
    a_scale_ptr,  # fp32 activation scale (FP8 only): [1] per tensor, or one per row of A
    b_scale_ptr,  # [E] or [E, N] fp32 weight scale (FP8 only)
    topk_weights_ptr,  # [M*topk] routing weights (MUL_ROUTED_WEIGHT only)
    sorted_token_ids_ptr,  # [EM] slot per row of the padded, expert-sorted order
    expert_ids_ptr,  # [EM // BLOCK_M] expert per M-block, -1 = nothing to do
    N,
    K,
    EM,  # capacity of sorted_token_ids: derived from M
    num_valid_tokens,  # M * topk: derived from M
    stride_am,
    stride_ak,
    stride_be,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    stride_bse,
    stride_bsn,
    ws_ptr,  # SPLIT_K > 1: [SPLIT_K, num_valid_tokens, N] fp32 partial sums (else unused)
    lock_ptr,  # SPLIT_K > 1: int32 arrival counter per output tile, all zero between launches (else unused)
    top_k: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SWAP_AB: tl.constexpr,
    MUL_ROUTED_WEIGHT: tl.constexpr,
    USE_FP8: tl.constexpr,
    PER_TOKEN_A: tl.constexpr,
    PER_CHANNEL_W: tl.constexpr,
    EVEN_K: tl.constexpr,
    USE_PDL: tl.constexpr = 0,  # PDL mode (see PDL)
    SPLIT_K: tl.constexpr = 1,  # programs per output tile, each over a slice of K (see below)
    N_FAST: tl.constexpr = False,  # grid order: N-tiles on the fast axis (one expert's tiles together)
    IDS_FIRST: tl.constexpr = False,  # load the tile's slot ids together with its expert id
    PRELOAD: tl.constexpr = False,  # load the epilogue's scales and routed weights before the K loop
):
    """C[slot, n] = (sum_k A[row(slot), k] * W[e, n, k]) * scales (* topk_weight[slot]).

    Grid: (EM // BLOCK_M, cdiv(N, BLOCK_N) * SPLIT_K); axis 0 (the fast one) walks the M-blocks so that
    the blocks of one expert that share a weight tile run together and hit L2. N_FAST swaps the two axes
    (the M-blocks past the padded total, which exit at once, then come last).

    SPLIT_K > 1: the SPLIT_K programs of one output tile each read 1/SPLIT_K of K (finer work units for
    small M); each stores its fp32 partial of the valid rows in ``ws`` and counts itself in the tile's
    ``lock``; the last to arrive sums the partials, applies the epilogue, stores C, and resets the lock
    to 0 (so the counters need zeroing only once, when allocated: no memset per launch).
    """
    _pdl_enter(USE_PDL, True)
    if N_FAST:
        pid_m = tl.program_id(1)
        pid_nk = tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
        pid_nk = tl.program_id(1)
    if SPLIT_K > 1:
        pid_n = pid_nk // SPLIT_K
        pid_k = pid_nk % SPLIT_K
    else:
        pid_n = pid_nk
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    if IDS_FIRST:  # the slot ids do not depend on the expert id: both loads in flight at once
        offs_token = tl.load(sorted_token_ids_ptr + offs_m, mask=offs_m < EM, other=num_valid_tokens)
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    if expert == -1:
        return
    if not IDS_FIRST:
        offs_token = tl.load(sorted_token_ids_ptr + offs_m, mask=offs_m < EM, other=num_valid_tokens)
    token_mask = offs_token < num_valid_tokens
    a_rows = (offs_token // top_k).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Wrap the N index so weight loads need no mask (the store masks the tail).
    offs_bn = offs_n % N
    offs_k = tl.arange(0, BLOCK_K)
    num_k = tl.cdiv(K, BLOCK_K)
    if SPLIT_K > 1:
        k_per = tl.cdiv(num_k, SPLIT_K)
        k_lo = pid_k * k_per
        k_hi = tl.minimum(k_lo + k_per, num_k)
    else:
        k_lo = 0
        k_hi = num_k
    b_base = b_ptr + expert * stride_be
    if SWAP_AB:
        # W tile [BLOCK_N, BLOCK_K] is the wide MMA operand, A^T tile [BLOCK_K, BLOCK_M] the narrow one.
        b_ptrs = b_base + offs_bn[:, None] * stride_bn + offs_k[None, :] * stride_bk
        a_ptrs = a_ptr + a_rows[None, :] * stride_am + offs_k[:, None] * stride_ak
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        a_ptrs = a_ptr + a_rows[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_base + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if PRELOAD:  # independent of the loop: in flight during it, not one more latency at the end
        a_scale, b_scale, moe_weight = _gemm_epilogue_loads(
            a_scale_ptr, b_scale_ptr, topk_weights_ptr, a_rows, offs_token, token_mask, expert, offs_bn,
            stride_bse, stride_bsn, MUL_ROUTED_WEIGHT, USE_FP8, PER_TOKEN_A, PER_CHANNEL_W)
    if SPLIT_K > 1:  # start at this program's slice of K
        a_ptrs += k_lo * BLOCK_K * stride_ak
        b_ptrs += k_lo * BLOCK_K * stride_bk
    for kb in range(k_lo, k_hi):
        if SWAP_AB:
            if EVEN_K:
                b = tl.load(b_ptrs)
                a = tl.load(a_ptrs, mask=token_mask[None, :], other=0.0)
            else:
                k_left = K - kb * BLOCK_K
                b = tl.load(b_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
                a = tl.load(a_ptrs, mask=token_mask[None, :] & (offs_k[:, None] < k_left), other=0.0)
            acc = tl.dot(b, a, acc)
        else:
            if EVEN_K:
                a = tl.load(a_ptrs, mask=token_mask[:, None], other=0.0)
                b = tl.load(b_ptrs)
            else:
                k_left = K - kb * BLOCK_K
                a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < k_left), other=0.0)
                b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if USE_PDL == 3:  # the next kernel may be scheduled now (it still waits for this one to finish)
        tl.extra.cuda.gdc_launch_dependents()
    if SWAP_AB:
        acc = tl.trans(acc)  # back to [BLOCK_M, BLOCK_N] in registers
    c_mask = token_mask[:, None] & (offs_n[None, :] < N)
    if SPLIT_K > 1:
        ws_offs = offs_token[:, None].to(tl.int64) * N + offs_n[None, :]
        split_stride = num_valid_tokens.to(tl.int64) * N
        tl.store(ws_ptr + pid_k * split_stride + ws_offs, acc, mask=c_mask)
        tl.debug_barrier()  # every thread's partial is stored before the arrival is counted
        lock = lock_ptr + pid_m * tl.cdiv(N, BLOCK_N) + pid_n
        arrived = tl.atomic_add(lock, 1, sem="acq_rel", scope="gpu")
        last = arrived == SPLIT_K - 1
        c_mask = tl.where(last, c_mask, False)  # (not `c_mask & last`: the interpreter types that as int32)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in tl.static_range(SPLIT_K):  # fixed order: the result does not depend on arrival order
            acc += tl.load(ws_ptr + s * split_stride + ws_offs, mask=c_mask, other=0.0, cache_modifier=".cg")
        tl.atomic_xchg(lock, 0, mask=last)  # ready for the next launch
    if not PRELOAD:
        a_scale, b_scale, moe_weight = _gemm_epilogue_loads(
            a_scale_ptr, b_scale_ptr, topk_weights_ptr, a_rows, offs_token, token_mask, expert, offs_bn,
            stride_bse, stride_bsn, MUL_ROUTED_WEIGHT, USE_FP8, PER_TOKEN_A, PER_CHANNEL_W)
    if USE_FP8:
        if PER_TOKEN_A:
            a_scale = a_scale[:, None]
        if PER_CHANNEL_W:
            acc = acc * (a_scale * b_scale[None, :])
        else:
            acc = acc * (a_scale * b_scale)
    if MUL_ROUTED_WEIGHT:
        acc = acc * moe_weight[:, None].to(tl.float32)
    c_ptrs = c_ptr + offs_token[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def _gemm_epilogue_loads(a_scale_ptr, b_scale_ptr, topk_weights_ptr, a_rows, offs_token, token_mask, expert,
                         offs_bn, stride_bse, stride_bsn, MUL_ROUTED_WEIGHT: tl.constexpr,
                         USE_FP8: tl.constexpr, PER_TOKEN_A: tl.constexpr, PER_CHANNEL_W: tl.constexpr):
    """The GEMM epilogue's loads: (activation scale, weight scale, routed weight); 0.0 where unused."""
    a_scale = 0.0
    b_scale = 0.0
    moe_weight = 0.0
    if USE_FP8:
        if PER_TOKEN_A:
            a_scale = tl.load(a_scale_ptr + a_rows, mask=token_mask, other=0.0)
        else:
            a_scale = tl.load(a_scale_ptr)
        if PER_CHANNEL_W:
            b_scale = tl.load(b_scale_ptr + expert * stride_bse + offs_bn * stride_bsn)
        else:
            b_scale = tl.load(b_scale_ptr + expert * stride_bse)
    if MUL_ROUTED_WEIGHT:
        moe_weight = tl.load(topk_weights_ptr + offs_token, mask=token_mask, other=0.0)
    return a_scale, b_scale, moe_weight


@triton.jit
def _round_to_e4m3(v):
    """Round fp32 v (|v| <= 448) to the nearest e4m3 value, ties to even, in fp32 arithmetic.

    The GPU's cvt.rn.satfinite gives the same result; rounding first makes the cast exact everywhere,
    including Triton's interpreter, whose own fp8 cast rounds differently (see TRITON_FACTS.md).
    """
    av = tl.abs(v)
    bits = av.to(tl.int32, bitcast=True)
    exponent = tl.maximum(((bits >> 23) & 0xFF) - 127, -6)  # e4m3: 3 mantissa bits, min normal 2^-6
    step = ((exponent - 3 + 127) << 23).to(tl.float32, bitcast=True)
    inv_step = ((127 - exponent + 3) << 23).to(tl.float32, bitcast=True)  # exact powers of two
    y = av * inv_step
    y = ((y + 12582912.0) - 12582912.0) * step  # 1.5 * 2^23: rounds to an integer, half to even
    return tl.where(v < 0, -y, y)


@triton.jit
def _quant_rows_kernel(
    x_ptr,  # [rows, K] fp16/bf16/fp32
    q_ptr,  # [rows, K] fp8 e4m3 out
    scale_ptr,  # STATIC: [1] in; else [rows] out (amax / 448 of each row)
    K,
    stride_x,
    stride_q,
    STATIC: tl.constexpr,
    BLOCK: tl.constexpr,
    USE_PDL: tl.constexpr = 0,  # PDL mode (see PDL)
):
    """One program per row: FP8 quantization with a static per-tensor or a dynamic per-row scale.

    IEEE division (div_rn) and round-to-nearest-even, as torch's (x / scale).to(fp8); on the H200 a
    bit-exact comparison with torch still showed rare one-step differences (cause not found)."""
    _pdl_enter(USE_PDL)
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    if STATIC:
        scale = tl.load(scale_ptr)
    else:
        amax = tl.zeros([BLOCK], tl.float32)
        for start in range(0, K, BLOCK):
            v = tl.load(x_ptr + row * stride_x + start + offs, mask=start + offs < K, other=0.0)
            amax = tl.maximum(amax, tl.abs(v.to(tl.float32)))
        scale = tl.maximum(tl.max(amax, axis=0) / 448.0, 1e-12)
        tl.store(scale_ptr + row, scale)
    for start in range(0, K, BLOCK):
        v = tl.load(x_ptr + row * stride_x + start + offs, mask=start + offs < K, other=0.0)
        q = _round_to_e4m3(tl.clamp(tl.math.div_rn(v.to(tl.float32), scale), -448.0, 448.0))
        tl.store(q_ptr + row * stride_q + start + offs, q.to(q_ptr.dtype.element_ty), mask=start + offs < K)


@triton.jit
def _silu_mul_kernel(
    h_ptr,  # [rows, 2I]: gate columns 0..I-1, up columns I..2I-1
    out_ptr,  # [rows, I]: silu(gate) * up, in out's dtype (fp8 e4m3 when QUANT)
    scale_ptr,  # QUANT and STATIC: [1] in; QUANT dynamic: [rows] out; unused otherwise
    I,
    stride_h,
    stride_o,
    QUANT: tl.constexpr,
    STATIC: tl.constexpr,
    BLOCK: tl.constexpr,
    USE_PDL: tl.constexpr = 0,  # PDL mode (see PDL)
):
    """One program per row: the SiLU-and-mul activation, optionally quantized to FP8."""
    _pdl_enter(USE_PDL)
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    h_row = h_ptr + row * stride_h
    if QUANT:
        if STATIC:
            scale = tl.load(scale_ptr)
        else:
            amax = tl.zeros([BLOCK], tl.float32)
            for start in range(0, I, BLOCK):
                m = start + offs < I
                g = tl.load(h_row + start + offs, mask=m, other=0.0).to(tl.float32)
                u = tl.load(h_row + I + start + offs, mask=m, other=0.0).to(tl.float32)
                amax = tl.maximum(amax, tl.abs(g / (1.0 + tl.exp(-g)) * u))
            scale = tl.maximum(tl.max(amax, axis=0) / 448.0, 1e-12)
            tl.store(scale_ptr + row, scale)
    for start in range(0, I, BLOCK):
        m = start + offs < I
        g = tl.load(h_row + start + offs, mask=m, other=0.0).to(tl.float32)
        u = tl.load(h_row + I + start + offs, mask=m, other=0.0).to(tl.float32)
        act = g / (1.0 + tl.exp(-g)) * u
        if QUANT:
            act = _round_to_e4m3(tl.clamp(tl.math.div_rn(act, scale), -448.0, 448.0))
        tl.store(out_ptr + row * stride_o + start + offs, act.to(out_ptr.dtype.element_ty), mask=m)


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------
def _interpreting(kernel: Any = _moe_gemm_kernel) -> bool:
    """True when this module's kernels were built by TRITON_INTERPRET=1 (they then run on CPU)."""
    return is_interpreted(kernel)


def _pdl_launch(pdl: Any, device: torch.device, kernel: Any) -> dict:
    """Launch keywords for PDL mode ``pdl`` (None: the module's ``PDL``): nothing where PDL cannot
    run (interpreter, CPU, ROCm, below sm_90), so those launches stay plain ones."""
    mode = PDL if pdl is None else pdl
    if not isinstance(mode, int) or isinstance(mode, bool) or mode not in _PDL_MODES:
        raise ValueError(f"pdl: expected None, 0, 1, 2 or 3, got {pdl!r}")
    if not mode or is_interpreted(kernel) or not pdl_supported(device):
        return {}
    return pdl_options(mode)


def compiled_variant_count(kernel: Any = _moe_gemm_kernel) -> int:
    """Number of compiled variants in the in-process Triton cache of ``kernel`` (all devices)."""
    caches = getattr(kernel, "device_caches", None)
    if caches is None:
        return 0
    total = 0
    for entry in caches.values():
        cache = entry[0] if isinstance(entry, tuple) else entry
        total += len(cache)
    return total


def choose_swap_ab(block_m: int, block_n: int) -> bool:
    """Swap-AB when the per-block token count is below wgmma's 64-row M and the weight tile fills it."""
    return block_m < 64 and block_n >= 64


def _check_config(config: Mapping[str, Any], arg: str = "config") -> dict:
    if not isinstance(config, Mapping):
        raise ValueError(f"{arg}: expected a dict with BLOCK_M, BLOCK_N, BLOCK_K, got {type(config).__name__}")
    unknown = set(config) - _CONFIG_KEYS
    if unknown:
        raise ValueError(f"{arg}: unknown keys {sorted(unknown)}; allowed: {sorted(_CONFIG_KEYS)}")
    out = dict(config)
    for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
        val = out.get(key)
        if not isinstance(val, int) or isinstance(val, bool) or val < 16 or val & (val - 1):
            raise ValueError(f"{arg}: {key} must be a power of two >= 16, got {val!r}")
    out.setdefault("num_warps", 4)
    out.setdefault("num_stages", 3)
    for key in ("num_warps", "num_stages"):
        if not isinstance(out[key], int) or isinstance(out[key], bool) or out[key] < 1:
            raise ValueError(f"{arg}: {key} must be a positive int, got {out[key]!r}")
    for key in ("SWAP_AB", "N_FAST", "IDS_FIRST", "PRELOAD"):
        if key in out and not isinstance(out[key], bool):
            raise ValueError(f"{arg}: {key} must be a bool, got {out[key]!r}")
    for key, val in GEMM_DEFAULTS.items():
        out.setdefault(key, val)
    split = out.setdefault("SPLIT_K", 1)
    if not isinstance(split, int) or isinstance(split, bool) or not 1 <= split <= _MAX_SPLIT_K:
        raise ValueError(f"{arg}: SPLIT_K must be an int in [1, {_MAX_SPLIT_K}], got {split!r}")
    return out


def _layout_flags(cfg: Mapping[str, Any], n_fast: bool) -> dict:
    """The optional constexprs of the GEMM kernel, passed only when not at their defaults (so a
    config without them keeps its compiled variant and launch key)."""
    flags = {}
    if cfg["SPLIT_K"] > 1:
        flags["SPLIT_K"] = cfg["SPLIT_K"]
    if n_fast:
        flags["N_FAST"] = True
    for key in ("IDS_FIRST", "PRELOAD"):
        if cfg.get(key, False):
            flags[key] = True
    return flags


def _split_k_locks(device: torch.device, n: int) -> torch.Tensor:
    """At least ``n`` int32 arrival counters, all zero, for a split-K launch on the current stream.

    The kernel returns every counter it uses to zero, so one buffer per (device, stream) is zeroed once
    and then reused by every launch in that stream (stream order keeps launches from overlapping). While
    a CUDA graph is being captured and no buffer is large enough, a fresh zeroed one is made for this
    launch alone (its memset becomes part of the graph) and is not kept. Launches that share a buffer
    must not overlap: graphs captured on one stream with split-K must not be replayed concurrently.
    """
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (str(device), stream)
    buf = _SPLIT_K_LOCKS.get(key)
    if buf is not None and buf.numel() >= n:
        return buf
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return torch.zeros(n, dtype=torch.int32, device=device)
    buf = torch.zeros(max(n, 4096), dtype=torch.int32, device=device)
    _SPLIT_K_LOCKS[key] = buf
    return buf


def get_config(E: int, N: int, K: int, topk: int, M: int, dtype: torch.dtype,
               swap_ab: bool | None = None) -> dict:
    """The committed config (kernels/moe_configs.py) for one grouped GEMM [E, N, K] of a call with M
    tokens and ``topk`` slots each, by shape class and M bucket; ``swap_ab`` picks the orientation
    (None = the measured faster one)."""
    from .moe_configs import lookup

    return dict(lookup(E=E, N=N, K=K, topk=topk, M=M, fp8=dtype == FP8_DTYPE, swap_ab=swap_ab))


def _check_tensor(t: Any, name: str, ndim: int) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dim() != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {tuple(t.shape)}")
    return t


def _check_device(device: torch.device, **tensors: torch.Tensor | None) -> None:
    for name, t in tensors.items():
        if t is not None and t.device != device:
            raise ValueError(f"{name}: on {t.device}, expected {device} (the device of x)")
    if device.type != "cuda" and not accepts_host_tensors(_moe_gemm_kernel):
        raise ValueError(
            f"x: on {device}; the Triton kernels need CUDA tensors (or TRITON_INTERPRET=1 for CPU)"
        )


def _check_scale(scale: Any, name: str, allowed: tuple[tuple[int, ...], ...]) -> torch.Tensor:
    if not isinstance(scale, torch.Tensor):
        raise ValueError(f"{name}: expected a float32 tensor, got {type(scale).__name__}")
    if scale.dtype != torch.float32:
        raise ValueError(f"{name}: expected float32, got {scale.dtype}")
    if tuple(scale.shape) not in allowed and not (scale.numel() == 1 and (1,) in allowed):
        raise ValueError(f"{name}: shape {tuple(scale.shape)} not one of {list(allowed)}")
    return scale.contiguous()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


# --------------------------------------------------------------------------------------------------
# Public pieces
# --------------------------------------------------------------------------------------------------
def route(
    router_logits: torch.Tensor, topk: int, *, renormalize: bool = False, scoring: str = "softmax"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k routing.

    Args:
        router_logits: [M, E] logits.
        topk: experts per token (1 <= topk <= E).
        renormalize: rescale the chosen weights of each token to sum to 1.
        scoring: "softmax" (over all E) or "sigmoid" (per expert).
    Returns:
        (topk_weights [M, topk] float32, topk_ids [M, topk] int32), experts by decreasing score.
    """
    _check_tensor(router_logits, "router_logits", 2)
    if not router_logits.is_floating_point():
        raise ValueError(f"router_logits: expected a floating dtype, got {router_logits.dtype}")
    E = router_logits.shape[1]
    if not isinstance(topk, int) or isinstance(topk, bool) or not 1 <= topk <= E:
        raise ValueError(f"topk: expected an int in [1, {E}] (E = router_logits.shape[1]), got {topk!r}")
    if scoring == "softmax":
        scores = torch.softmax(router_logits.float(), dim=-1)
    elif scoring == "sigmoid":
        scores = torch.sigmoid(router_logits.float())
    else:
        raise ValueError(f"scoring: expected 'softmax' or 'sigmoid', got {scoring!r}")
    weights, ids = torch.topk(scores, topk, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True).clamp_min(1e-20)
    return weights.contiguous(), ids.to(torch.int32).contiguous()


def moe_align_block_size(
    topk_ids: torch.Tensor, block_m: int, num_experts: int, *, pdl: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sort the ``M*topk`` slots by expert and pad each expert's run to a multiple of ``block_m``.

    Args:
        topk_ids: [M, topk] int32/int64 expert per slot (slot s = token s // topk, choice s % topk).
        block_m: the grouped GEMM's BLOCK_M (a power of two).
        num_experts: E; ids must lie in [0, E).
    Returns:
        sorted_token_ids [EM] int32: slot indices grouped by expert (in no set order within an
            expert's run: each output row is computed independently, so results do not depend on it), padding
            = the sentinel ``M*topk``; EM = M*topk + min(E, M*topk)*(block_m-1) rounded up to block_m,
            a bound on the padded total that depends only on the shapes (so CUDA graphs can capture it).
        expert_ids [EM // block_m] int32: the expert of each block, -1 for blocks past the padded total.
        num_tokens_post_padded [1] int32: the padded total (on the device; no host sync).
    Experts with no slots take no blocks. ``pdl``: programmatic dependent launch mode (see
    :data:`PDL`; None = the module default).
    """
    _check_tensor(topk_ids, "topk_ids", 2)
    if topk_ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"topk_ids: expected int32 or int64, got {topk_ids.dtype}")
    if not isinstance(block_m, int) or block_m < 1 or block_m & (block_m - 1):
        raise ValueError(f"block_m: expected a power of two, got {block_m!r}")
    if not isinstance(num_experts, int) or num_experts < 1:
        raise ValueError(f"num_experts: expected a positive int, got {num_experts!r}")
    num_slots = topk_ids.numel()
    EM = _cdiv(num_slots + min(num_experts, num_slots) * (block_m - 1), block_m) * block_m
    device = topk_ids.device
    launch = _pdl_launch(pdl, device, _moe_align_kernel)
    sorted_ids = torch.empty(EM, dtype=torch.int32, device=device)
    expert_ids = torch.empty(EM // block_m, dtype=torch.int32, device=device)
    if num_slots == 0:
        return sorted_ids, expert_ids, torch.zeros(1, dtype=torch.int32, device=device)
    # The kernel writes the total: no memset launch (it would also break the chain of PDL launches).
    total = torch.empty(1, dtype=torch.int32, device=device)
    # Constexprs from E only (never from M): one compile per (block_m, E) for any number of tokens.
    block_e = max(16, _next_pow2(num_experts))
    cursor = torch.empty(block_e, dtype=torch.int32, device=device)
    _moe_align_kernel[(1,)](
        topk_ids.contiguous(), sorted_ids, expert_ids, total, cursor,
        num_slots, EM,
        BLOCK_M=block_m, BLOCK_E=block_e, CHUNK=1024, BLOCKS=max(16, 4096 // block_e), FILL=1024,
        num_warps=4, **launch,
    )
    return sorted_ids, expert_ids, total


def grouped_gemm(
    a: torch.Tensor,
    w: torch.Tensor,
    sorted_token_ids: torch.Tensor,
    expert_ids: torch.Tensor,
    *,
    top_k: int,
    num_valid_tokens: int,
    config: Mapping[str, Any],
    out: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    topk_weights: torch.Tensor | None = None,
    a_scale: torch.Tensor | None = None,
    w_scale: torch.Tensor | None = None,
    swap_ab: bool | None = None,
    pdl: int | None = None,
) -> torch.Tensor:
    """The grouped GEMM: ``C[s, :] = W[e(s)] @ A[s // top_k]`` for every valid slot s.

    Args:
        a: [num_valid_tokens // top_k, K] activations (fp16/bf16/fp32, or FP8 e4m3 with ``a_scale``).
        w: [E, N, K] expert weights, same dtype as ``a``.
        sorted_token_ids, expert_ids: from :func:`moe_align_block_size` with ``config["BLOCK_M"]``.
        top_k: slots per row of ``a`` (topk for the w1 GEMM; 1 when ``a`` already has one row per slot).
        num_valid_tokens: M * topk.
        config: BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages; optional SWAP_AB; optional SPLIT_K
            (1..16: programs per output tile, each over 1/SPLIT_K of K, reduced in an fp32 workspace
            by the last one to finish; default 1), N_FAST (grid with the N-tiles on the fast axis) and
            IDS_FIRST (slot ids loaded together with the expert id) and PRELOAD (the epilogue's scales
            loaded before the K loop), both default :data:`GEMM_DEFAULTS`; see ``_moe_gemm_kernel``.
        out: optional [num_valid_tokens, N] output buffer; else allocated with ``out_dtype``
            (default: ``a``'s dtype, or bfloat16 for FP8).
        topk_weights: [num_valid_tokens] (or [M, topk]) routing weights to multiply into each row.
        a_scale: fp32 activation scale, [1] per tensor or [rows of a, 1] per row (FP8 only);
        w_scale: [E] (per expert) or [E, N] (per channel) fp32 (FP8 only).
        swap_ab: force Swap-AB on/off; None = config's SWAP_AB if present, else :func:`choose_swap_ab`.
        pdl: programmatic dependent launch mode (see :data:`PDL`); None = the module default.
    Returns:
        C [num_valid_tokens, N]; rows of padding slots are never written.
    """
    cfg = _check_config(config)
    _check_tensor(a, "a", 2)
    _check_tensor(w, "w", 3)
    E, N, K = w.shape
    if a.shape[1] != K:
        raise ValueError(f"a: expected K = {K} columns (w.shape[2]), got shape {tuple(a.shape)}")
    if a.dtype != w.dtype:
        raise ValueError(f"a: dtype {a.dtype} differs from w's {w.dtype}")
    use_fp8 = w.dtype == FP8_DTYPE
    if not use_fp8 and w.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"w: unsupported dtype {w.dtype}")
    if use_fp8 and (a_scale is None or w_scale is None):
        raise ValueError("a_scale/w_scale: both are required for FP8 operands")
    if not use_fp8 and (a_scale is not None or w_scale is not None):
        raise ValueError("a_scale/w_scale: scales are only meaningful for FP8 operands")
    launch = _pdl_launch(pdl, a.device, _moe_gemm_kernel)
    if out is None:
        out_dtype = out_dtype or (torch.bfloat16 if use_fp8 else a.dtype)
        out = torch.empty(num_valid_tokens, N, dtype=out_dtype, device=a.device)
    if num_valid_tokens == 0:
        return out
    if swap_ab is None:
        swap_ab = cfg.get("SWAP_AB", choose_swap_ab(cfg["BLOCK_M"], cfg["BLOCK_N"]))
    per_channel = per_token = False
    if use_fp8:
        per_channel = w_scale.dim() == 2
        # The layout, never the row count, decides: [rows, 1] is per row even when rows == 1.
        per_token = a_scale.dim() == 2
        a_scale, w_scale = a_scale.contiguous(), w_scale.contiguous()
        if per_token and tuple(a_scale.shape) != (a.shape[0], 1):
            raise ValueError(f"a_scale: per-row scales must have shape {(a.shape[0], 1)}, got {tuple(a_scale.shape)}")
        if not per_token and a_scale.numel() != 1:
            raise ValueError(f"a_scale: expected [1] (per tensor) or [rows, 1] (per row), got {tuple(a_scale.shape)}")
        stride_bse = w_scale.stride(0) if w_scale.numel() > 1 else 0
        stride_bsn = w_scale.stride(1) if per_channel else 0
    else:
        stride_bse = stride_bsn = 0
    EM = sorted_token_ids.shape[0]
    # A row stride: for a single row torch may report any stride; the kernel needs the real pitch.
    stride_am = a.stride(0) if a.shape[0] > 1 else K * a.stride(1)
    dummy = out  # stands in for absent optional pointers (never read: the constexpr flags say so)
    split_k = cfg["SPLIT_K"]
    m_blocks, n_tiles = EM // cfg["BLOCK_M"], _cdiv(N, cfg["BLOCK_N"])
    n_fast = cfg.get("N_FAST", False) and m_blocks <= 65535  # grid axis 1 is limited to 65535
    grid = (n_tiles * split_k, m_blocks) if n_fast else (m_blocks, n_tiles * split_k)
    if split_k > 1:
        ws = torch.empty(split_k, num_valid_tokens, N, dtype=torch.float32, device=a.device)
        locks = _split_k_locks(a.device, m_blocks * n_tiles)
    else:
        ws = locks = dummy
    _moe_gemm_kernel[grid](
        a, w, out,
        a_scale if use_fp8 else dummy,
        w_scale if use_fp8 else dummy,
        topk_weights if topk_weights is not None else dummy,
        sorted_token_ids, expert_ids,
        N, K, EM, num_valid_tokens,
        stride_am, a.stride(1),
        w.stride(0), w.stride(1), w.stride(2),
        out.stride(0), out.stride(1),
        stride_bse, stride_bsn,
        ws, locks,
        top_k=top_k,
        BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"],
        SWAP_AB=bool(swap_ab),
        MUL_ROUTED_WEIGHT=topk_weights is not None,
        USE_FP8=use_fp8,
        PER_TOKEN_A=per_token,
        PER_CHANNEL_W=per_channel,
        EVEN_K=K % cfg["BLOCK_K"] == 0,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **launch, **_layout_flags(cfg, n_fast),
    )
    return out


def quantize_fp8(t: torch.Tensor, scale: torch.Tensor | None = None, *,
                 pdl: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """FP8 e4m3 quantization of a [rows, K] tensor: returns (q, scale) with t ~= q * scale.

    ``scale`` given ([1] fp32): static per-tensor. None: dynamic per-row scales [rows, 1] = amax / 448
    of each row, computed on the device in the same kernel (no host sync, no global reduction).
    Values are clamped to +-448 before the cast (saturating, as the GPU's cvt.satfinite).
    ``pdl``: programmatic dependent launch mode (see :data:`PDL`; None = the module default).
    """
    launch = _pdl_launch(pdl, t.device, _quant_rows_kernel)
    rows, K = t.shape
    q = torch.empty(rows, K, dtype=FP8_DTYPE, device=t.device)
    static = scale is not None
    if not static:
        scale = torch.empty(rows, 1, dtype=torch.float32, device=t.device)
    if rows:
        _quant_rows_kernel[(rows,)](t, q, scale, K, t.stride(0), q.stride(0), STATIC=static,
                                    BLOCK=min(2048, _next_pow2(K)), num_warps=4, **launch)
    return q, scale


def silu_and_mul(h: torch.Tensor, *, out_dtype: torch.dtype | None = None,
                 scale: torch.Tensor | None = None,
                 pdl: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """silu(h[:, :I]) * h[:, I:] for h [rows, 2I]; returns (act [rows, I], scale).

    ``out_dtype`` FP8: quantized with ``scale`` ([1], static) or dynamic per-row scales [rows, 1].
    ``pdl``: programmatic dependent launch mode (see :data:`PDL`; None = the module default).
    """
    launch = _pdl_launch(pdl, h.device, _silu_mul_kernel)
    rows, two_i = h.shape
    inter = two_i // 2
    out_dtype = out_dtype or h.dtype
    quant = out_dtype == FP8_DTYPE
    out = torch.empty(rows, inter, dtype=out_dtype, device=h.device)
    static = scale is not None
    if quant and not static:
        scale = torch.empty(rows, 1, dtype=torch.float32, device=h.device)
    if rows:
        _silu_mul_kernel[(rows,)](h, out, scale if quant else out, inter, h.stride(0), out.stride(0),
                                  QUANT=quant, STATIC=static, BLOCK=min(2048, _next_pow2(inter)), num_warps=4,
                                  **launch)
    return out, scale if quant else None


def fused_moe(
    x: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    w1_scale: torch.Tensor | None = None,
    w2_scale: torch.Tensor | None = None,
    a1_scale: torch.Tensor | None = None,
    a2_scale: torch.Tensor | None = None,
    swap_ab: bool | None = None,
    config: Mapping[str, Any] | None = None,
    pdl: int | None = None,
) -> torch.Tensor:
    """Fused MoE layer (see the module docstring for the operation).

    Args:
        x: [M, K] fp16/bf16/fp32 tokens.
        w1: [E, 2I, K] and w2: [E, K, I]: both x's dtype, or both FP8 e4m3 (``torch.float8_e4m3fn``).
        topk_weights: [M, topk] float; topk_ids: [M, topk] int32/int64 in [0, E).
        w1_scale / w2_scale: FP8 weight scales, fp32 [E] (per expert) or [E, 2I] / [E, K] (per channel).
        a1_scale / a2_scale: FP8 static per-tensor activation scales, fp32 [1]; None = dynamic per-row
            scales (amax / 448 of each token's row, and of each slot's intermediate row), computed on the
            device inside the quantization kernels.
        swap_ab: force Swap-AB on/off for both GEMMs; None = the table's choice (or the rule).
        config: one config dict for both GEMMs; None = the committed table (kernels/moe_configs.py).
        pdl: programmatic dependent launch of the layer's Triton kernels (sm_90+): 0 off, 1 wait,
            2 wait and trigger (see :data:`PDL`); None = the module default ``PDL``.
    Returns:
        out [M, K] in x's dtype; M = 0 gives an empty [0, K].
    """
    _check_tensor(x, "x", 2)
    _check_tensor(w1, "w1", 3)
    _check_tensor(w2, "w2", 3)
    _check_tensor(topk_weights, "topk_weights", 2)
    _check_tensor(topk_ids, "topk_ids", 2)
    if x.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"x: expected float16/bfloat16/float32, got {x.dtype}")
    M, K = x.shape
    E, two_i, K1 = w1.shape
    if K1 != K:
        raise ValueError(f"w1: expected [E, 2I, K] with K = {K} (x.shape[1]), got {tuple(w1.shape)}")
    if two_i % 2:
        raise ValueError(f"w1: dimension 1 stacks gate and up rows and must be even, got {two_i}")
    inter = two_i // 2
    if tuple(w2.shape) != (E, K, inter):
        raise ValueError(f"w2: expected [E, K, I] = {(E, K, inter)} from w1 and x, got {tuple(w2.shape)}")
    use_fp8 = w1.dtype == FP8_DTYPE
    if w2.dtype != w1.dtype:
        raise ValueError(f"w2: dtype {w2.dtype} differs from w1's {w1.dtype}")
    if not use_fp8 and w1.dtype != x.dtype:
        raise ValueError(f"w1: dtype {w1.dtype} must match x ({x.dtype}) or be {FP8_DTYPE}")
    if topk_ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"topk_ids: expected int32 or int64, got {topk_ids.dtype}")
    if not topk_weights.is_floating_point():
        raise ValueError(f"topk_weights: expected a floating dtype, got {topk_weights.dtype}")
    if topk_ids.shape[0] != M:
        raise ValueError(f"topk_ids: expected {M} rows (x.shape[0]), got shape {tuple(topk_ids.shape)}")
    if topk_weights.shape != topk_ids.shape:
        raise ValueError(
            f"topk_weights: shape {tuple(topk_weights.shape)} differs from topk_ids {tuple(topk_ids.shape)}"
        )
    topk = topk_ids.shape[1]
    if not 1 <= topk <= E:
        raise ValueError(f"topk_ids: topk = {topk} must be in [1, E = {E}]")
    if swap_ab is not None and not isinstance(swap_ab, bool):
        raise ValueError(f"swap_ab: expected None, True or False, got {swap_ab!r}")
    _pdl_launch(pdl, x.device, _moe_gemm_kernel)  # validates pdl before anything runs
    if use_fp8:
        if w1_scale is None or w2_scale is None:
            raise ValueError("w1_scale/w2_scale: required with FP8 weights")
        w1_scale = _check_scale(w1_scale, "w1_scale", ((E,), (E, two_i)))
        w2_scale = _check_scale(w2_scale, "w2_scale", ((E,), (E, K)))
        if a1_scale is not None:
            a1_scale = _check_scale(a1_scale, "a1_scale", ((1,),)).reshape(1)
        if a2_scale is not None:
            a2_scale = _check_scale(a2_scale, "a2_scale", ((1,),)).reshape(1)
    else:
        for name, val in (("w1_scale", w1_scale), ("w2_scale", w2_scale),
                          ("a1_scale", a1_scale), ("a2_scale", a2_scale)):
            if val is not None:
                raise ValueError(f"{name}: scales apply to FP8 weights only (w1 is {w1.dtype})")
    _check_device(x.device, w1=w1, w2=w2, topk_weights=topk_weights, topk_ids=topk_ids,
                  w1_scale=w1_scale, w2_scale=w2_scale, a1_scale=a1_scale, a2_scale=a2_scale)
    cfg1 = _check_config(config) if config is not None else None
    if M == 0:
        return x.new_empty((0, K))
    # Expert ids in range: a host sync, so only in eager mode (skipped while a CUDA graph captures).
    capturing = x.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    if not capturing:
        lo, hi = torch.stack(list(torch.aminmax(topk_ids))).tolist()
        if lo < 0 or hi >= E:
            raise ValueError(f"topk_ids: expert ids must lie in [0, {E}), found [{lo}, {hi}]")

    x = x.contiguous()
    topk_ids = topk_ids.contiguous()
    flat_weights = topk_weights.contiguous().reshape(-1)
    num_slots = M * topk
    wdtype = w1.dtype
    cfg_w1 = cfg1 or get_config(E, two_i, K, topk, M, wdtype, swap_ab)
    cfg_w2 = cfg1 or get_config(E, K, inter, topk, M, wdtype, swap_ab)
    aligned: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def _align(bm: int):
        if bm not in aligned:
            aligned[bm] = moe_align_block_size(topk_ids, bm, E, pdl=pdl)
        return aligned[bm]

    # Gate/up GEMM: [M*topk, 2I].
    if use_fp8:
        a1, a1_scale = quantize_fp8(x, a1_scale, pdl=pdl)
    else:
        a1 = x
    sid, eid, _ = _align(cfg_w1["BLOCK_M"])
    h = torch.empty(num_slots, two_i, dtype=x.dtype, device=x.device)
    grouped_gemm(a1, w1, sid, eid, top_k=topk, num_valid_tokens=num_slots, config=cfg_w1, out=h,
                 a_scale=a1_scale if use_fp8 else None, w_scale=w1_scale if use_fp8 else None,
                 swap_ab=swap_ab, pdl=pdl)
    # SiLU(gate) * up (fp32 math), quantized for the FP8 down GEMM.
    a2, a2_scale = silu_and_mul(h, out_dtype=FP8_DTYPE if use_fp8 else x.dtype,
                                scale=a2_scale if use_fp8 else None, pdl=pdl)
    # Down GEMM with the routed weight: [M*topk, K], then the sum over topk.
    sid, eid, _ = _align(cfg_w2["BLOCK_M"])
    y = torch.empty(num_slots, K, dtype=x.dtype, device=x.device)
    grouped_gemm(a2, w2, sid, eid, top_k=1, num_valid_tokens=num_slots, config=cfg_w2, out=y,
                 topk_weights=flat_weights,
                 a_scale=a2_scale if use_fp8 else None, w_scale=w2_scale if use_fp8 else None,
                 swap_ab=swap_ab, pdl=pdl)
    return y.view(M, topk, K).sum(dim=1)  # torch accumulates low-precision sums in fp32
