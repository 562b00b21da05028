from vllm.triton_utils import tl, triton


@triton.jit(do_not_specialize=["n"])
def k(x_ptr, n, num_experts: tl.constexpr, BLOCK: tl.constexpr):
    pass
