import triton
import triton.language as tl


@triton.jit(do_not_specialize=["num_tokens"])
def k(x_ptr, num_tokens, scale: float, BLOCK: tl.constexpr):
    pass


@triton.jit
def k2(x_ptr, scale: float):
    pass


@triton.jit(
    do_not_specialize_on_alignment=["x_ptr"],
)
def k3(x_ptr, n):
    pass
