from vllm.triton_utils import tl, triton


@triton.jit(do_not_specialize=["n", "num_experts"])
def k(x_ptr, n, num_experts, BLOCK: tl.constexpr):
    pass
