import triton

DNS = ["stride"]


@triton.jit(do_not_specialize=DNS)
def k(x_ptr, stride, num_tokens):
    pass


OPTS = {"debug": False}


@triton.jit(**OPTS)
def k2(x_ptr, num_tokens):
    pass
