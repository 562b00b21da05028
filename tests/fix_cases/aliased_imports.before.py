import triton as tr
from triton import jit as tjit


@tjit
def a(x_ptr, num_tokens):
    pass


@tr.jit(
    debug=False,  # why: repro
)
def b(x_ptr, num_tokens):
    pass
