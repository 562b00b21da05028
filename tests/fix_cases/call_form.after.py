import triton


def _body(x_ptr, num_tokens):
    pass


def _body2(x_ptr, num_tokens):
    pass


body_kernel = triton.jit(_body, do_not_specialize=["num_tokens"])
body2_kernel = triton.jit(debug=False, do_not_specialize=["num_tokens"])(_body2)
