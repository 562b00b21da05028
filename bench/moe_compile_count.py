"""Compile-variant count of the MoE grouped GEMM (corrected vs fixtures/ twin) over a stream of M.

Triton's real JIT path for sm_90 with a stand-in driver: runs on a CPU-only machine, compiles, never
launches. Usage: python bench/moe_compile_count.py
"""
import importlib.util, torch
from jitguard.kernels import moe
from jitguard.testing import FakeTensor, stand_in_driver

def Ptr(dtype): return FakeTensor(1 << 20, dtype)

spec = importlib.util.spec_from_file_location("twin", "fixtures/moe_uncorrected.py")
twin = importlib.util.module_from_spec(spec); spec.loader.exec_module(twin)
bf, i32, f32 = torch.bfloat16, torch.int32, torch.float32
N, K, BM, E, topk = 2048, 768, 16, 128, 8          # Qwen3-MoE w2 GEMM: one A row per slot, top_k=1
with stand_in_driver():
    for M in [1, 2, 3, 4, 16, 17, 64, 100, 256, 512]:
        slots = M * topk
        EM = -(-(slots + min(E, slots) * (BM - 1)) // BM) * BM
        moe._moe_gemm_kernel.warmup(
            Ptr(bf), Ptr(bf), Ptr(bf), Ptr(f32), Ptr(f32), Ptr(f32), Ptr(i32), Ptr(i32),
            N, K, EM, slots, K, 1, N * K, K, 1, N, 1, 0, 0, top_k=1, BLOCK_M=BM, BLOCK_N=64,
            BLOCK_K=128, SWAP_AB=True, MUL_ROUTED_WEIGHT=True, USE_FP8=False, PER_TOKEN_A=False,
            PER_CHANNEL_W=False, EVEN_K=True, num_warps=4, num_stages=3, grid=(1,))
        twin.moe_gemm_kernel_uncorrected.warmup(
            Ptr(bf), Ptr(bf), Ptr(bf), Ptr(i32), Ptr(i32), N, K, EM, slots, K, N * K, K, N,
            top_k=1, BLOCK_M=BM, BLOCK_N=64, BLOCK_K=128, SWAP_AB=True, grid=(1,))
        print(f"M={M:<4d} EM={EM:<5d} M*topk={slots:<5d} variants: corrected "
              f"{moe.compiled_variant_count(moe._moe_gemm_kernel)}, uncorrected twin "
              f"{moe.compiled_variant_count(twin.moe_gemm_kernel_uncorrected)}")
