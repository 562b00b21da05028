import triton


@triton.jit(do_not_specialize=("stride", "num_tokens"))
def k(x_ptr, stride, num_tokens):
    pass
