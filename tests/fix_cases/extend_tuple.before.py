import triton


@triton.jit(do_not_specialize=("stride",))
def k(x_ptr, stride, num_tokens):
    pass
