"""Which MMA instruction each orientation of the MoE grouped GEMM compiles to for sm_90 (no GPU needed).

Usage: python bench/moe_ptx.py
"""
import re, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from jitguard.kernels import moe
k = moe._moe_gemm_kernel
names = k.arg_names
def src(swap, bm, bn, bk, fp8):
    wd = "fp8e4nv" if fp8 else "bf16"
    types = dict(a_ptr="*" + wd, b_ptr="*" + wd, c_ptr="*bf16", a_scale_ptr="*fp32", b_scale_ptr="*fp32",
                 topk_weights_ptr="*fp32", sorted_token_ids_ptr="*i32", expert_ids_ptr="*i32", N="i32", K="i32",
                 EM="i32", num_valid_tokens="i32", stride_am="i32", stride_be="i32", stride_bn="i32",
                 stride_cm="i32", stride_bse="i32")
    consts = dict(stride_ak=1, stride_bk=1, stride_cn=1, stride_bsn=0, top_k=8, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                  SWAP_AB=swap, MUL_ROUTED_WEIGHT=False, USE_FP8=fp8, PER_TOKEN_A=False, PER_CHANNEL_W=False,
                  EVEN_K=True)
    sig = {n: "constexpr" if n in consts else types[n] for n in names}
    div16 = [n for n, t in types.items() if n not in ("EM", "num_valid_tokens", "stride_bse")]
    return ASTSource(k, sig, {(names.index(n),): v for n, v in consts.items()},
                     {(names.index(n),): [["tt.divisibility", 16]] for n in div16})
for fp8 in (False, True):
    for swap, bm, bn, bk in [(True, 16, 64, 256), (False, 16, 64, 256), (False, 64, 128, 128)]:
        ck = triton.compile(src(swap, bm, bn, bk, fp8), target=GPUTarget("cuda", 90, 32),
                            options=dict(num_warps=4, num_stages=4 if bm == 16 else 3))
        ops = sorted(set(re.findall(r"(wgmma\.mma_async[\w.]*|mma\.sync[\w.]*)", ck.asm["ptx"])))
        print(f"{'fp8 ' if fp8 else 'bf16'} {'SWAP_AB' if swap else 'no swap'} BLOCK_M={bm:<3d} BLOCK_N={bn:<3d}: {ops[0]}")
