import triton
import triton.language as tl


@triton.jit
def k(x_ptr, out_ptr, num_tokens: tl.constexpr, BLOCK: tl.constexpr = 128):
    pid = tl.program_id(0)
    if pid < num_tokens:
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + pid * BLOCK + offs, tl.load(x_ptr + pid * BLOCK + offs))


@triton.jit(do_not_specialize=["stride"])
def k2(x_ptr, stride, n_rows: "tl.constexpr", limit: tl.constexpr = 4):
    pass
