import triton
import triton.language as tl

from mylib import libentry


@libentry()
@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["hidden"])
@triton.heuristics({"EVEN": lambda args: args["hidden"] % args["BLOCK"] == 0})
@triton.jit
def k(x_ptr, num_tokens, hidden, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pass
