import triton


@triton.jit(do_not_specialize=['stride'], debug=False)
def k(x_ptr, stride, num_tokens, num_reqs):
    pass
