import triton
import triton.language as tl


@triton.jit(do_not_specialize=["num_token", "num_tokens", "BLOCK", "scale"])
def k(x_ptr, num_tokens, scale: float, BLOCK: tl.constexpr):
    pass


@triton.jit(do_not_specialize=["scale"])
def k2(x_ptr, scale: float):
    pass


@triton.jit(
    do_not_specialize=[7],
    do_not_specialize_on_alignment=["x_ptr", "missing"],
)
def k3(x_ptr, n):
    pass
