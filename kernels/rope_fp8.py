"""Fused inverse RoPE + FP8 block quantization (the corrected kernel).

After attention, the output ``o`` ``[T, H, D]`` is rotated back by each token's position (inverse
RoPE, interleaved pairs, on the last ``rope_dim`` dims) and quantized to float8_e4m3fn in blocks of
``quant_group_size`` elements with power-of-two scales, in one pass, for a grouped output
projection. See ``fused_inv_rope_fp8_quant`` for the layouts.

``num_tokens`` and the scale stride ``T4 = ceil(T/4)*4`` change with every batch, so both are
listed in ``do_not_specialize``: the kernel compiles once for any stream of batch sizes. The
uncorrected twin (plain ``@triton.jit``) is ``fixtures/rope_fp8_uncorrected.py``.

Why not one program per (token, head) with one warp (vLLM's layout, 56-59% of the HBM floor on an
H200): each warp then holds 1 KB of o, 32 bytes per thread in flight, so an SM has too little memory
in flight to cover HBM latency, and each tiny program still pays its fixed costs (positions ->
cos/sin dependent load, address math, four scattered 4-byte scale stores). Here one program takes
``block_t = 4`` tokens x one head x the whole head dim (one warp, 8 independent 16-byte loads per
thread), stores contiguous fp8 rows and ``block_t`` consecutive scales per block of the token-major
scale buffer. What took it from 62-78% to 84-91% of the floor was the instruction count: the rope
slice alone is loaded a second time and rotated (instead of evaluating the rotation on every
element and selecting), the redundant clamp is gone (|y| * 2^-e <= 448 exactly), the scale comes
from exponent bits, and bf16 -> float32 is a 16-bit shift. What took it to 87-96% (v3) was more
loads in flight per SM: registers capped at 96 (``maxnreg``; 116 uncapped, no spills), so 21
programs fit on an SM instead of 17. v4: the scale read off amax's bits with no division
(``_pow2_scale``, exact) and the block max taken on the bf16 values, so 80 registers suffice and
25 programs fit (+1-2 points at T >= 8192 over v3, -0.05 µs at T = 1). v5: programmatic
dependent launch (``LaunchConfig.pdl``, sm_90+): each program waits for the previous kernel in
the stream (``griddepcontrol.wait``) before its first load or store, so it can be scheduled
while that kernel drains; the saving depends on that overlap. v7: before that wait, the first
wave's programs ask L2 to fetch their rows of o (``prefetch.global.L2``; no data reaches a
register, so nothing stale is read), which overlaps the first reads with the previous kernel's
tail (1x8 T = 8192: 89.8 -> 91.2% of the floor). Measured figures and the configs tried:
docs/kernels_rope_fp8.md.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import torch
import triton
import triton.language as tl

from ._launch import _cuda_capability, _pdl_supported  # noqa: F401  (shared with moe; names kept)
from ._launch import accepts_host_tensors as _accepts_host_tensors
from ._launch import is_interpreted as _is_interpreted
from ._launch import pdl_options
from .rope_fp8_reference import inv_rope_fp8_quant_reference  # noqa: F401  (re-exported)

FP8_MAX = 448.0


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """How the kernel is launched: constants, never derived from T (a T-derived constexpr would
    compile once per value). The grid is not part of Triton's cache key: any config compiles
    once per (dtypes, shape constants, block sizes)."""

    block_t: int = 4  # tokens per tile (a multiple of 4: tiles cover the T4 padding rows)
    num_warps: int = 1
    num_stages: int = 1  # >= 2: a persistent program prefetches its next tile into registers
    programs_per_sm: int = 0  # persistent grid of SMs * this; 0: one program per tile
    maxnreg: int = 0  # register cap per thread (ptxas), for more resident programs; 0: none
    # Programmatic dependent launch (sm_90+; ignored elsewhere and in the interpreter): 0 off;
    # 1: launched with launch_pdl=True, so its programs may be scheduled while the previous
    # kernel in the stream drains, each waiting (griddepcontrol.wait) for that kernel to
    # complete and flush before its first load or store; 3: the same, and each program then
    # lets the next kernel in the stream be scheduled (griddepcontrol.launch_dependents);
    # 2: like 3 unless the grid is between 0.4 and 0.9 of one wave of programs
    # (_wave_programs), then like 1.
    pdl: int = 0
    # With pdl >= 1 only: before it waits for the previous kernel, each program of the first wave
    # asks L2 to fetch its tile's rows of o and its positions (prefetch.global.L2),
    # so that those reads overlap the previous kernel's tail instead of starting after it. A
    # prefetch only moves data into L2, the point of coherence of the GPU's memory: the loads
    # after the wait still read what the previous kernel wrote.
    l2_prefetch: bool = False

    def grid(self, device: torch.device, num_tiles: int) -> tuple:
        if self.programs_per_sm <= 0:
            return (num_tiles,)
        return (max(1, min(num_tiles, _sm_count(device) * self.programs_per_sm)),)


# The default: the best of CANDIDATE_CONFIGS on an H200 (bench/results/rope_fp8_h200_v4*.json,
# Triton 3.6): one 32-thread program per 4 tokens x 1 head, no persistent loop, registers capped
# at 80 (ptxas needs 80; 64 uncapped, when it issues o's loads in two batches), so 25 programs
# fit on an SM (v3: 21), and ptxas issues two of o's eight loads before it waits for the
# positions. Fewer registers (72, 64) or more (95) were no better (docs/kernels_rope_fp8.md).
# v6: launched with PDL (pdl=2): each program waits for the previous kernel before any memory
# access, then lets the next kernel be scheduled, except in grids of 0.4-0.9 of a wave where that
# measured slower. Against no PDL in the same run (bench/results/rope_fp8_h200_v6b_grid.json,
# 24 sizes): 0.5-0.8 µs less per call at 17 sizes (T=1: 1.80 -> 1.29 µs; 1x8 T=8192: 26.64 ->
# 25.94 µs), within +0.02-0.16 µs at the 7 sizes of that band. pdl=1 (wait only) and pdl=3
# (always trigger) were slower than pdl=2 overall (v5: bench/results/rope_fp8_h200_v5_grid.json).
# v7: and the first wave's programs of grids of <= 0.4 or >= 4 waves prefetch their o rows and
# positions into L2 before that wait (l2_prefetch); against v6's default in the same run
# (bench/results/rope_fp8_h200_v7c_grid.json, 27 sizes): 1x8 T = 8192 25.95 -> 25.56 µs (89.8 ->
# 91.2% of the floor), 8x8 T = 1024 -0.50 µs, T = 1 -0.05 µs, T = 128 -0.25 µs; +0.01-0.08 µs
# (the gate's test) at the 9 sizes where it does not prefetch.
CONFIG = LaunchConfig(maxnreg=80, pdl=2, l2_prefetch=True)

# What bench/bench_rope_fp8.py times (and the GPU tests check) before one is made the default.
# num_stages >= 2 with a persistent grid: each program loops over tiles and prefetches the next
# tile's loads into registers during this one's arithmetic. maxnreg caps registers so that more
# programs are resident (more loads in flight per SM), at the price of a few instructions or
# spills; ptxas also schedules the loads differently under each cap. Registers ptxas uses for
# Triton 3.6, sm_90 (python bench/bench_rope_fp8.py --ptx; none spill), and so programs per H200
# SM (65,536 registers, at most 32 programs): 4x1 capped at 80 or 88: 80 (25/SM; 2 or 3 of o's
# loads before the wait for positions), at 96: 80 (none before it), uncapped: 64 (32/SM; o's
# loads in two batches); 4x2 56 (18/SM); 4x1 with prefetch 199 (capped at 168). A persistent
# config's programs_per_sm is how many of its programs fit on one SM by those registers: more
# would run the persistent grid in two waves.
CANDIDATE_CONFIGS = (
    LaunchConfig(4, 1, 1, 0, maxnreg=80),
    LaunchConfig(4, 1, 1, 0, maxnreg=88),
    LaunchConfig(4, 1, 1, 0, maxnreg=96),
    LaunchConfig(4, 1, 1, 0),
    LaunchConfig(4, 2, 1, 0),
    LaunchConfig(4, 1, 1, 32),
    LaunchConfig(4, 1, 2, 12, maxnreg=168),
    LaunchConfig(4, 1, 1, 0, maxnreg=80, pdl=1),
    LaunchConfig(4, 1, 1, 0, maxnreg=80, pdl=2),
    LaunchConfig(4, 1, 1, 0, maxnreg=80, pdl=3),
    LaunchConfig(4, 1, 1, 0, maxnreg=80, pdl=2, l2_prefetch=True),
)


def _sm_count(device: torch.device) -> int:
    """Multiprocessors of a CUDA device; 1 elsewhere (the CPU interpreter then loops too)."""
    if device.type != "cuda":
        return 1
    return _cuda_sm_count(torch.cuda.current_device() if device.index is None else device.index)


@functools.lru_cache(maxsize=None)
def _cuda_sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


@triton.jit
def _pow2_scale(amax):
    """The smallest power of two 2^e >= fl(max(amax, 1e-10) / 448), and 2^-e, read off amax's
    own bits with no division. With amax = 1.m * 2^E and 448 = 1.75 * 2^8, the correctly
    rounded quotient is 2^(E-8) * fl(1.m / 1.75), and fl(1.m / 1.75) lies in (0.5, 1] when
    1.m <= 1.75 and in (1, 2) otherwise (no float32 1.m rounds across 1: the neighbours of 1.75
    are 2^-23 away, the rounding boundaries 1.75 * 2^-24 and 2^-25). So the scale is 2^(E-8),
    or 2^(E-7) when the mantissa bits exceed 0x600000 (1.75); inf keeps the exponent 255 a
    quotient would have. Checked against the reference's quotient for every mantissa at 15
    exponents and 2e7 random floats. Then |y| * 2^-e <= 448 exactly for every |y| <= amax."""
    amax_bits = tl.maximum(amax, 1e-10).to(tl.int32, bitcast=True)
    biased_exp = (amax_bits >> 23) - 8 + ((amax_bits & 0x7FFFFF) > 0x600000).to(tl.int32)
    biased_exp = tl.where(amax_bits >= 0x7F800000, 255, biased_exp)
    scale = (biased_exp << 23).to(tl.float32, bitcast=True)
    inv_scale = ((254 - biased_exp) << 23).to(tl.float32, bitcast=True)  # exact: 2^-e
    return scale, inv_scale


@triton.jit
def _prefetch_l2(ptrs):
    """Ask L2 to fetch the line holding each address in ``ptrs`` (``prefetch.global.L2``: nothing
    is loaded into registers, so nothing read here can be stale)."""
    tl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l",
                              [ptrs.to(tl.int64)], dtype=tl.int32, is_pure=False, pack=1)


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
    pdl_wave,  # USE_PDL == 2: trigger the next kernel only in grids of more programs than this
    N_GROUPS: tl.constexpr,
    HEADS_PER_GROUP: tl.constexpr,
    NOPE_DIM: tl.constexpr,
    ROPE_DIM: tl.constexpr,
    QUANT_GROUP: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_Q: tl.constexpr,  # next power of two >= (NOPE_DIM + ROPE_DIM) / QUANT_GROUP
    ROPE_CHUNK: tl.constexpr,  # largest power of two dividing NOPE_DIM, ROPE_DIM and QUANT_GROUP
    NUM_STAGES: tl.constexpr,  # software-pipelining depth of the tile loop
    USE_PDL: tl.constexpr = 0,  # LaunchConfig.pdl: 1 wait for the previous kernel, 2/3 also trigger
    L2_PREFETCH: tl.constexpr = False,  # LaunchConfig.l2_prefetch (with USE_PDL only)
):
    if USE_PDL:
        if L2_PREFETCH:
            # Programs of the first wave may start while the previous kernel drains: each asks
            # L2 for its tile's lines of o and its positions now, so those reads overlap that
            # kernel's tail. Later programs start after it has finished and skip this. Only in
            # grids of at most 0.4 or at least 4 waves of programs: in between it measured up
            # to 0.9 µs slower on the H200 (bench/results/rope_fp8_h200_v7b_grid.json; cause
            # not found), and a prefetch in every program up to 3 µs slower at T = 32768 (v7a).
            n_prog = tl.num_programs(0)
            if (tl.program_id(0) < pdl_wave) & (
                    (n_prog * 10 <= pdl_wave * 4) | (n_prog >= pdl_wave * 4)):
                # Eight prefetches per row of o (one per 128-byte line of a bf16 row of 512),
                # and the tile's positions.
                ELEM_BITS: tl.constexpr = o_ptr.dtype.element_ty.primitive_bitwidth
                STEP: tl.constexpr = ((NOPE_DIM + ROPE_DIM) * ELEM_BITS + 63) // 64  # row / 8
                tile_p = tl.program_id(0)
                tok_p = tl.minimum((tile_p // (N_GROUPS * HEADS_PER_GROUP)) * BLOCK_T
                                   + tl.arange(0, BLOCK_T),
                                   num_tokens - 1)
                row_p = (o_ptr + tok_p.to(tl.int64) * o_stride_t
                         + (tile_p % (N_GROUPS * HEADS_PER_GROUP)) * o_stride_h)
                _prefetch_l2(row_p.to(tl.int64)[:, None] + (tl.arange(0, 8) * STEP)[None, :])
                _prefetch_l2(positions_ptr + tok_p)
        # Launched with programmatic dependent launch: this program may run while the previous
        # kernel in the stream is still running. Before any load or store (that kernel may
        # write o or positions, or still read what q and scales overwrite), wait until it has
        # completed and its memory is visible. Then, optionally, let the next kernel's programs
        # be scheduled onto SMs as ours finish (they wait likewise if they opted in): always
        # (3), or (2) unless the grid is between 0.4 and 0.9 of one wave of programs, where an
        # early trigger measured 0.3-0.8 µs slower on the H200 (1,536-2,560 programs of a
        # 3,300-program wave; faster at 1,024 and from 3,072). pdl_wave is a run-time value:
        # nothing new compiles as T changes.
        tl.extra.cuda.gdc_wait()
        if USE_PDL >= 3:
            tl.extra.cuda.gdc_launch_dependents()
        elif USE_PDL == 2:
            n_programs = tl.num_programs(0)
            if (n_programs * 10 <= pdl_wave * 4) | (n_programs * 10 >= pdl_wave * 9):
                tl.extra.cuda.gdc_launch_dependents()
    HEAD_DIM: tl.constexpr = NOPE_DIM + ROPE_DIM
    NUM_Q: tl.constexpr = HEAD_DIM // QUANT_GROUP  # scale blocks per head
    NUM_SCALES: tl.constexpr = HEADS_PER_GROUP * NUM_Q  # scale blocks per (token, group)
    HALF_ROPE: tl.constexpr = ROPE_DIM // 2
    NUM_HEADS: tl.constexpr = N_GROUPS * HEADS_PER_GROUP
    WIDTH: tl.constexpr = BLOCK_Q * QUANT_GROUP
    ROPE_BLOCK: tl.constexpr = NOPE_DIM // QUANT_GROUP
    # Fast path: the rope dims are a power of two and lie in one quantization block, so only
    # that slice is rotated (a second, small load of it) and the rest is scaled as loaded.
    ROPE_IN_ONE_BLOCK: tl.constexpr = (ROPE_DIM > 0) & ((ROPE_DIM & (ROPE_DIM - 1)) == 0) & (
        ROPE_BLOCK == (HEAD_DIM - 1) // QUANT_GROUP)
    q_row_stride: tl.constexpr = HEADS_PER_GROUP * HEAD_DIM

    # Tiles of BLOCK_T tokens x one head; heads vary fastest, so neighbouring programs read
    # neighbouring memory of o. A grid smaller than the tile count makes each program loop over
    # tiles. With NUM_STAGES >= 2 (bf16 o, fast path) the loop is software-pipelined by hand: the
    # next tile's o, rope slice and cos/sin are loaded into registers while this tile is computed
    # (and the positions two tiles ahead), so a program keeps its loads in flight during its
    # arithmetic. They are loaded as 32-bit words (bf16 pairs): a loop-carried 16-bit value
    # would be unpacked (PRMT) as soon as it arrives, which waits for the load and undoes the
    # prefetch. Word loads need 4-byte aligned rows; otherwise (checked at run time) the same
    # words are assembled from bf16 loads.
    PREFETCH: tl.constexpr = ROPE_IN_ONE_BLOCK & (NUM_STAGES >= 2) & (
        o_ptr.dtype.element_ty == tl.bfloat16)
    IS_BF16: tl.constexpr = o_ptr.dtype.element_ty == tl.bfloat16
    HALF_W: tl.constexpr = WIDTH // 2
    NOPE_W: tl.constexpr = NOPE_DIM // 2
    num_tiles = tl.cdiv(num_tokens, BLOCK_T) * NUM_HEADS
    rows = tl.arange(0, BLOCK_T)
    cols = tl.arange(0, WIDTH)
    blk = tl.arange(0, BLOCK_Q)
    step = tl.num_programs(0)
    if ROPE_IN_ONE_BLOCK:
        ri = tl.arange(0, HALF_ROPE)
        r_cols = NOPE_DIM + tl.arange(0, ROPE_DIM)
    if PREFETCH:
        wcols = tl.arange(0, HALF_W)
        w_ptr = o_ptr.to(tl.pointer_type(tl.uint32), bitcast=True)
        words = (((o_ptr.to(tl.int64) & 3) == 0) & ((o_stride_t & 1) == 0)
                 & ((o_stride_h & 1) == 0))
        # Prologue: the first tile's loads, and the second tile's positions. A tile past the
        # last one has every token >= num_tokens, so its loads are masked off.
        tile_n = tl.program_id(0)
        t0_n = (tile_n // NUM_HEADS) * BLOCK_T
        ok_n = t0_n + rows < num_tokens
        e_n = t0_n.to(tl.int64) * o_stride_t + (tile_n % NUM_HEADS) * o_stride_h
        if words:
            w_n = w_ptr + e_n // 2 + rows[:, None] * (o_stride_t // 2)
            xw_next = tl.load(w_n + wcols[None, :], mask=ok_n[:, None] & (wcols < NOPE_W)[None, :],
                              other=0)
            xrw_next = tl.load(w_n + NOPE_W + ri[None, :], mask=ok_n[:, None], other=0)
        else:
            o_n = o_ptr + e_n + rows[:, None] * o_stride_t
            lo, hi = tl.split(tl.reshape(tl.load(
                o_n + cols[None, :], mask=ok_n[:, None] & (cols < NOPE_DIM)[None, :], other=0.0),
                (BLOCK_T, HALF_W, 2)))
            xw_next = (lo.to(tl.uint16, bitcast=True).to(tl.uint32)
                       | (hi.to(tl.uint16, bitcast=True).to(tl.uint32) << 16))
            lo, hi = tl.split(tl.reshape(tl.load(o_n + r_cols[None, :], mask=ok_n[:, None],
                                                 other=0.0), (BLOCK_T, HALF_ROPE, 2)))
            xrw_next = (lo.to(tl.uint16, bitcast=True).to(tl.uint32)
                        | (hi.to(tl.uint16, bitcast=True).to(tl.uint32) << 16))
        pos_n = tl.load(positions_ptr + t0_n + rows, mask=ok_n, other=0)
        cs_n = cos_sin_ptr + pos_n.to(tl.int64)[:, None] * cos_sin_stride + ri[None, :]
        c_next = tl.load(cs_n, mask=ok_n[:, None], other=0.0)
        s_next = tl.load(cs_n + HALF_ROPE, mask=ok_n[:, None], other=0.0)
        tok_nn = ((tile_n + step) // NUM_HEADS) * BLOCK_T + rows
        pos_next = tl.load(positions_ptr + tok_nn, mask=tok_nn < num_tokens, other=0)
    for tile in tl.range(tl.program_id(0), num_tiles, step, num_stages=1):
        head = tile % NUM_HEADS
        t0 = (tile // NUM_HEADS) * BLOCK_T
        group = head // HEADS_PER_GROUP
        head_in_group = head % HEADS_PER_GROUP

        tok = t0 + rows
        tok_ok = tok < num_tokens
        o_base = o_ptr + t0.to(tl.int64) * o_stride_t + head * o_stride_h
        q_base = q_ptr + (group.to(tl.int64) * num_tokens + t0) * q_row_stride + head_in_group * HEAD_DIM

        if PREFETCH:
            xw = xw_next
            xrw = xrw_next
            c = c_next
            s = s_next
            x_ok = tok_ok[:, None] & (cols < NOPE_DIM)[None, :]
            # Issue the next tile's loads now; they complete while this tile is computed.
            tile_n = tile + step
            t0_n = (tile_n // NUM_HEADS) * BLOCK_T
            ok_n = t0_n + rows < num_tokens
            e_n = t0_n.to(tl.int64) * o_stride_t + (tile_n % NUM_HEADS) * o_stride_h
            if words:
                w_n = w_ptr + e_n // 2 + rows[:, None] * (o_stride_t // 2)
                xw_next = tl.load(w_n + wcols[None, :],
                                  mask=ok_n[:, None] & (wcols < NOPE_W)[None, :], other=0)
                xrw_next = tl.load(w_n + NOPE_W + ri[None, :], mask=ok_n[:, None], other=0)
            else:
                o_n = o_ptr + e_n + rows[:, None] * o_stride_t
                lo, hi = tl.split(tl.reshape(tl.load(
                    o_n + cols[None, :], mask=ok_n[:, None] & (cols < NOPE_DIM)[None, :],
                    other=0.0), (BLOCK_T, HALF_W, 2)))
                xw_next = (lo.to(tl.uint16, bitcast=True).to(tl.uint32)
                           | (hi.to(tl.uint16, bitcast=True).to(tl.uint32) << 16))
                lo, hi = tl.split(tl.reshape(tl.load(o_n + r_cols[None, :], mask=ok_n[:, None],
                                                     other=0.0), (BLOCK_T, HALF_ROPE, 2)))
                xrw_next = (lo.to(tl.uint16, bitcast=True).to(tl.uint32)
                            | (hi.to(tl.uint16, bitcast=True).to(tl.uint32) << 16))
            cs_n = cos_sin_ptr + pos_next.to(tl.int64)[:, None] * cos_sin_stride + ri[None, :]
            c_next = tl.load(cs_n, mask=ok_n[:, None], other=0.0)
            s_next = tl.load(cs_n + HALF_ROPE, mask=ok_n[:, None], other=0.0)
            tok_nn = ((tile_n + step) // NUM_HEADS) * BLOCK_T + rows
            pos_next = tl.load(positions_ptr + tok_nn, mask=tok_nn < num_tokens, other=0)
            # bf16 -> float32 is a 16-bit shift of each half-word (exact).
            lo = (xw << 16).to(tl.float32, bitcast=True)
            hi = ((xw >> 16) << 16).to(tl.float32, bitcast=True)
            xb = tl.reshape(tl.join(lo, hi), (BLOCK_T, BLOCK_Q, QUANT_GROUP))
            a = (xrw << 16).to(tl.float32, bitcast=True)
            b = ((xrw >> 16) << 16).to(tl.float32, bitcast=True)
        elif ROPE_IN_ONE_BLOCK:
            pos = tl.load(positions_ptr + tok, mask=tok_ok, other=0)
            cs_row = cos_sin_ptr + pos.to(tl.int64) * cos_sin_stride
            # Whole rows, 16-byte vectors along D; the rope columns are masked off here.
            x_ok = tok_ok[:, None] & (cols < NOPE_DIM)[None, :]
            x = tl.load(o_base + rows[:, None] * o_stride_t + cols[None, :], mask=x_ok, other=0.0)
            # The rope slice, loaded again as interleaved pairs and rotated back.
            xr = tl.load(o_base + rows[:, None] * o_stride_t + r_cols[None, :],
                         mask=tok_ok[:, None], other=0.0)
            c = tl.load(cs_row[:, None] + ri[None, :], mask=tok_ok[:, None], other=0.0)
            s = tl.load(cs_row[:, None] + HALF_ROPE + ri[None, :], mask=tok_ok[:, None], other=0.0)
            # The block max in o's own dtype (exact; packed bf16x2 max on sm_90), so that the
            # float32 copy of the tile is not live across the reduction: ptxas needs 80
            # registers (64 uncapped) where v3 needed 96 (116 uncapped).
            amax_nope = tl.max(tl.abs(tl.reshape(x, (BLOCK_T, BLOCK_Q, QUANT_GROUP))), axis=2)
            amax_nope = amax_nope.to(tl.float32)
            if IS_BF16:  # bf16 -> float32 as a 16-bit shift: one instruction per element
                xf = (x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)
            else:
                xf = x.to(tl.float32)
            xb = tl.reshape(xf, (BLOCK_T, BLOCK_Q, QUANT_GROUP))
            a, b = tl.split(tl.reshape(xr.to(tl.float32), (BLOCK_T, HALF_ROPE, 2)))

        if ROPE_IN_ONE_BLOCK:
            # Same rounding as the reference: the launcher turns FMA contraction off.
            ya = a * c + b * s
            yb = b * c - a * s

            amax_rope = tl.maximum(tl.max(tl.abs(ya), axis=1), tl.max(tl.abs(yb), axis=1))
            if PREFETCH:
                amax = tl.max(tl.abs(xb), axis=2)  # [BLOCK_T, BLOCK_Q]; rope columns loaded as 0
            else:
                amax = amax_nope
            amax = tl.where((blk == ROPE_BLOCK)[None, :], tl.maximum(amax, amax_rope[:, None]), amax)
        else:
            # General path: rotate chunks of ROPE_CHUNK dims (ROPE_CHUNK divides NOPE_DIM,
            # ROPE_DIM and QUANT_GROUP); chunks at or past NOPE_DIM are rotated.
            pos = tl.load(positions_ptr + tok, mask=tok_ok, other=0)
            cs_row = cos_sin_ptr + pos.to(tl.int64) * cos_sin_stride
            NUM_CHUNKS: tl.constexpr = WIDTH // ROPE_CHUNK
            HALF_CHUNK: tl.constexpr = ROPE_CHUNK // 2
            x_ok = tok_ok[:, None] & (cols < HEAD_DIM)[None, :]
            x = tl.load(o_base + rows[:, None] * o_stride_t + cols[None, :], mask=x_ok, other=0.0)
            a, b = tl.split(tl.reshape(x.to(tl.float32), (BLOCK_T, NUM_CHUNKS, HALF_CHUNK, 2)))
            chunk = tl.arange(0, NUM_CHUNKS)
            is_rope = ((chunk >= NOPE_DIM // ROPE_CHUNK) & (chunk < HEAD_DIM // ROPE_CHUNK))[None, :, None]
            rope_i = (chunk - NOPE_DIM // ROPE_CHUNK)[:, None] * HALF_CHUNK + tl.arange(0, HALF_CHUNK)[None, :]
            cs_ptr = cs_row[:, None, None] + rope_i[None, :, :]
            cs_ok = tok_ok[:, None, None] & is_rope
            c = tl.load(cs_ptr, mask=cs_ok, other=0.0)
            s = tl.load(cs_ptr + HALF_ROPE, mask=cs_ok, other=0.0)
            ya = tl.where(is_rope, a * c + b * s, a)
            yb = tl.where(is_rope, b * c - a * s, b)
            xb = tl.reshape(tl.join(ya, yb), (BLOCK_T, BLOCK_Q, QUANT_GROUP))
            amax = tl.max(tl.abs(xb), axis=2)

        # Per-block power-of-two scale (see _pow2_scale).
        scale, inv_scale = _pow2_scale(amax)

        # |y| * inv_scale <= 448 exactly (see _pow2_scale): no clamp before the cast.
        q = tl.reshape((xb * inv_scale[:, :, None]).to(tl.float8e4nv), (BLOCK_T, WIDTH))
        if PREFETCH:
            # The word loads leave 8 values per thread: storing 8-byte runs (contiguity 8 for
            # Triton's axis analysis) keeps that layout instead of shuffling to 16-byte stores.
            q_cols = (cols // 8) * 8 + cols % 8
        else:
            q_cols = cols
        tl.store(q_base + rows[:, None] * q_row_stride + q_cols[None, :], q, mask=x_ok)
        if ROPE_IN_ONE_BLOCK:
            inv_rope = tl.sum(tl.where((blk == ROPE_BLOCK)[None, :], inv_scale, 0.0), axis=1)
            qr = tl.join((ya * inv_rope[:, None]).to(tl.float8e4nv),
                         (yb * inv_rope[:, None]).to(tl.float8e4nv))
            qr = tl.reshape(qr, (BLOCK_T, ROPE_DIM))
            tl.store(q_base + rows[:, None] * q_row_stride + r_cols[None, :], qr,
                     mask=tok_ok[:, None])

        # Scales are token-major: BLOCK_T consecutive floats per block. Rows T..T4-1 get zeros.
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




def _wave_programs(device: torch.device, config: LaunchConfig) -> int:
    """Programs of ``config`` that one wave runs on ``device``: SMs x programs per SM, the latter
    bounded by the register file (65,536 per SM; ``maxnreg``, else 128 registers per thread
    assumed) and by the 32 resident blocks of an SM. Constant per (device, config)."""
    regs = (config.maxnreg or 128) * 32 * config.num_warps
    return _sm_count(device) * max(1, min(32, 65536 // regs))


def _launch_options(config: LaunchConfig, pdl: int) -> dict:
    """Compile-time options of a launch beyond the shape constants: constant per config, so
    each config compiles once for any T. ``pdl`` is ``config.pdl`` where the device supports it,
    else 0; with 0 nothing PDL-related is passed (USE_PDL defaults to 0), so a kernel without
    the USE_PDL parameter launches through the same code."""
    options = dict(num_warps=config.num_warps, enable_fp_fusion=False)
    if config.maxnreg:
        options["maxnreg"] = config.maxnreg
    options.update(pdl_options(pdl))
    if pdl and config.l2_prefetch:
        options["L2_PREFETCH"] = True
    return options


def _launch(kernel, o, positions, cos_sin_cache, q_buf, scale_buf, n_groups, heads_per_group,
            nope_dim, rope_dim, quant_group_size, config: LaunchConfig | None = None):
    """Launch ``kernel`` over ``o`` into preallocated buffers (shared by the corrected kernel
    and its uncorrected twin, and by tests that poison the buffers first). Returns what Triton's
    launch returns (the compiled kernel on a GPU: the benchmark reads its registers)."""
    config = CONFIG if config is None else config
    if o.device.type != "cuda" and not _accepts_host_tensors(kernel):
        raise ValueError(
            f"o is on {o.device}: the kernel needs a CUDA tensor (or TRITON_INTERPRET=1 set "
            "before triton is imported, to run it on CPU in Triton's interpreter)")
    if config.block_t % 4:
        raise ValueError(f"block_t must be a multiple of 4 (tiles cover the T4 padding), got "
                         f"{config.block_t}")
    num_tokens = o.shape[0]
    num_q = (nope_dim + rope_dim) // quant_group_size
    num_tiles = triton.cdiv(num_tokens, config.block_t) * n_groups * heads_per_group
    pdl = config.pdl if config.pdl and not _is_interpreted(kernel) and _pdl_supported(o.device) \
        else 0
    return kernel[config.grid(o.device, num_tiles)](
        o, positions, cos_sin_cache, q_buf, scale_buf,
        num_tokens, scale_buf.shape[2],
        o.stride(0), o.stride(1), cos_sin_cache.stride(0), _wave_programs(o.device, config),
        N_GROUPS=n_groups, HEADS_PER_GROUP=heads_per_group,
        NOPE_DIM=nope_dim, ROPE_DIM=rope_dim, QUANT_GROUP=quant_group_size,
        BLOCK_T=config.block_t, BLOCK_Q=triton.next_power_of_2(num_q),
        ROPE_CHUNK=_rope_chunk(nope_dim, rope_dim, quant_group_size),
        NUM_STAGES=config.num_stages,
        **_launch_options(config, pdl),
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

    Launch: on NVIDIA GPUs of compute capability 9.0+ the kernel is launched with programmatic
    dependent launch (``CONFIG.pdl = 2``): its programs may be scheduled while the previous
    kernel in the same stream is still finishing, and each one waits for that kernel to complete
    and flush (``griddepcontrol.wait``) before it reads or writes any memory, so the result never
    depends on what ran before. Each program then lets the next kernel in the stream be
    scheduled early (``griddepcontrol.launch_dependents``; not for grids of 0.4-0.9 of a wave):
    a next kernel launched with PDL must wait for this one before reading q or scales, as any
    PDL kernel must; a kernel launched without PDL is unaffected. Before its wait, a program of
    the first wave may ask L2 to prefetch its rows of ``o`` (``CONFIG.l2_prefetch``): a hint
    that loads nothing into registers. Elsewhere (older GPUs, ROCm, the interpreter) it is a
    plain launch.
    """
    _validate(o, positions, cos_sin_cache, n_groups, heads_per_group, nope_dim, rope_dim,
              quant_group_size)
    q_buf, scale_buf = _allocate(o, n_groups, heads_per_group, quant_group_size)
    if o.shape[0] > 0:
        _launch(_inv_rope_fp8_quant_kernel, o, positions, cos_sin_cache, q_buf, scale_buf,
                n_groups, heads_per_group, nope_dim, rope_dim, quant_group_size, CONFIG)
    return _views(q_buf, scale_buf, o.shape[0])
