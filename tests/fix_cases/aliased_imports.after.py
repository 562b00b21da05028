import triton as tr
from triton import jit as tjit


@tjit(do_not_specialize=["num_tokens"])
def a(x_ptr, num_tokens):
    pass


@tr.jit(
    debug=False,  # why: repro
    do_not_specialize=["num_tokens"],
)
def b(x_ptr, num_tokens):
    pass
