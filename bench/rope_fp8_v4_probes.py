"""Timing probes for the v4 notes (bench/NOTES_rope_fp8.md): NOT the operation, never exact.

- ``_probe_no_positions_kernel``: v4's kernel with the positions load replaced by ``t & 8191``
  (cos/sin rows of the wrong tokens): how much the positions -> cos/sin dependent load costs.
- ``_probe_copy_kernel``: the same grid and tile (4 tokens x 1 head x 512, one warp), reading o
  and writing q (a plain bf16 -> fp8 cast, no scale) and the scales (1.0): what this grid costs
  with none of the arithmetic and no dependent loads, i.e. the fixed cost of launch, ramp and tail
  of a one-pass kernel of this shape.
Same signature and launcher as the kernel (bench/bench_rope_fp8.py times them with ``--probes``).
- ``_pdl_early_trigger_copy_kernel`` (v5): a producer that triggers its dependents at once and
  then writes slowly, for checking that a kernel launched with PDL waits for it (the GPU tests
  and ``bench_rope_fp8.py --pdl-ab``'s race control).
"""
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["num_tokens", "scale_stride"])
def _probe_no_positions_kernel(
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
    NUM_STAGES: tl.constexpr,  # software-pipelining depth of the tile loop
):
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
            pos = (tok & 8191).to(tl.int64)  # PROBE: no positions load (wrong rows of cos/sin)
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
            # float32 copy of the tile is not live across the reduction: 72 registers instead
            # of 111, no cap needed for 28 programs per SM.
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

        # Per-block power-of-two scale: the smallest 2^e >= fl(max(amax, 1e-10) / 448), read off
        # amax's own bits, with no division. With amax = 1.m * 2^E and 448 = 1.75 * 2^8, the
        # correctly rounded quotient is 2^(E-8) * fl(1.m / 1.75), and fl(1.m / 1.75) lies in
        # (0.5, 1] when 1.m <= 1.75 and in (1, 2) otherwise (no float32 1.m rounds across 1:
        # the neighbours of 1.75 are 2^-23 away, the rounding boundary 1.75 * 2^-24 or
        # 2^-25). So the scale is 2^(E-8), or 2^(E-7) when the mantissa bits exceed 0x600000
        # (1.75); inf keeps the exponent 255 a quotient would have. Checked against the
        # reference's quotient for every mantissa at 15 exponents and 2e7 random floats.
        amax_bits = tl.maximum(amax, 1e-10).to(tl.int32, bitcast=True)
        biased_exp = (amax_bits >> 23) - 8 + ((amax_bits & 0x7FFFFF) > 0x600000).to(tl.int32)
        biased_exp = tl.where(amax_bits >= 0x7F800000, 255, biased_exp)
        scale = (biased_exp << 23).to(tl.float32, bitcast=True)
        inv_scale = ((254 - biased_exp) << 23).to(tl.float32, bitcast=True)  # exact: 2^-e

        # |y| * inv_scale <= 448 * (1 + 2^-24) (the quotient above may round down onto 2^e), which
        # rounds to 448 in e4m3: clamping to +-448 first would change nothing, so it is left out.
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


@triton.jit(do_not_specialize=["num_tokens", "scale_stride"])
def _probe_copy_kernel(
    o_ptr, positions_ptr, cos_sin_ptr, q_ptr, scale_ptr, num_tokens, scale_stride,
    o_stride_t, o_stride_h, cos_sin_stride,
    N_GROUPS: tl.constexpr, HEADS_PER_GROUP: tl.constexpr, NOPE_DIM: tl.constexpr,
    ROPE_DIM: tl.constexpr, QUANT_GROUP: tl.constexpr, BLOCK_T: tl.constexpr,
    BLOCK_Q: tl.constexpr, ROPE_CHUNK: tl.constexpr, NUM_STAGES: tl.constexpr,
    USE_PDL: tl.constexpr = 0,  # as in the kernel (v5): 1 wait for the previous kernel, 2 also trigger
):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        if USE_PDL >= 2:
            tl.extra.cuda.gdc_launch_dependents()
    HEAD_DIM: tl.constexpr = NOPE_DIM + ROPE_DIM
    NUM_Q: tl.constexpr = HEAD_DIM // QUANT_GROUP
    NUM_SCALES: tl.constexpr = HEADS_PER_GROUP * NUM_Q
    NUM_HEADS: tl.constexpr = N_GROUPS * HEADS_PER_GROUP
    WIDTH: tl.constexpr = BLOCK_Q * QUANT_GROUP
    q_row_stride: tl.constexpr = HEADS_PER_GROUP * HEAD_DIM
    tile = tl.program_id(0)
    rows = tl.arange(0, BLOCK_T)
    cols = tl.arange(0, WIDTH)
    blk = tl.arange(0, BLOCK_Q)
    head = tile % NUM_HEADS
    t0 = (tile // NUM_HEADS) * BLOCK_T
    group = head // HEADS_PER_GROUP
    head_in_group = head % HEADS_PER_GROUP
    tok = t0 + rows
    tok_ok = tok < num_tokens
    x_ok = tok_ok[:, None] & (cols < HEAD_DIM)[None, :]
    o_base = o_ptr + t0.to(tl.int64) * o_stride_t + head * o_stride_h
    x = tl.load(o_base + rows[:, None] * o_stride_t + cols[None, :], mask=x_ok, other=0.0)
    q_base = q_ptr + (group.to(tl.int64) * num_tokens + t0) * q_row_stride + head_in_group * HEAD_DIM
    tl.store(q_base + rows[:, None] * q_row_stride + cols[None, :], x.to(tl.float8e4nv), mask=x_ok)
    first_blk = group * NUM_SCALES + head_in_group * NUM_Q
    s_ptr = scale_ptr + first_blk.to(tl.int64) * scale_stride + t0 + blk[None, :] * scale_stride + rows[:, None]
    s_ok = (tok < scale_stride)[:, None] & (blk < NUM_Q)[None, :]
    tl.store(s_ptr, tl.where(tok_ok[:, None], 1.0, 0.0) + tl.zeros((BLOCK_T, BLOCK_Q), tl.float32), mask=s_ok)


@triton.jit
def _pdl_early_trigger_copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK: tl.constexpr):
    """A producer for PDL race checks (v5), not a probe of the operation: it first lets the next
    kernel in the stream start (griddepcontrol.launch_dependents), then copies src to dst with a
    few programs looping over it, so a consumer launched with PDL overlaps it for as long as the
    copy runs (~1 ms for 8 MB on 4 programs). A consumer that waits (griddepcontrol.wait) sees
    dst complete; one that doesn't reads what dst held before."""
    tl.extra.cuda.gdc_launch_dependents()
    offs = tl.arange(0, BLOCK)
    for start in range(tl.program_id(0) * BLOCK, n_elements, tl.num_programs(0) * BLOCK):
        ok = start + offs < n_elements
        tl.store(dst_ptr + start + offs, tl.load(src_ptr + start + offs, mask=ok), mask=ok)
