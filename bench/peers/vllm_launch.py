"""vLLM 0.33.0's fused_moe_kernel for one grouped GEMM, launched by vLLM's own code from its wheel.

Everything vLLM decides comes from the wheel's files (bench/peers/vllm_wheel.py loads them): the
expert assignment (``_prepare_expert_assignment``: the one-slot-per-block path when M*topk*4 <= E), the
launch (``invoke_fused_moe_triton_kernel``: grid, EM for small batches, SWAP_AB by ``enable_swap_ab``
for FP8 only) and the config (the shipped H200 JSON, nearest batch key, else ``get_default_config``).
The alignment of the non-naive path is jitguard's ``moe_align_block_size``, which has the output format
of vLLM's CUDA op. Only the per-tensor FP8 (w8a8) and bf16 paths are used.
"""
from __future__ import annotations

import torch
import triton.language as tl

from . import vllm_wheel

_PEER: vllm_wheel.Peer | None = None


def peer(align_fn=None) -> vllm_wheel.Peer:
    """The loaded functions (loaded once; ``align_fn`` is needed the first time)."""
    global _PEER
    if _PEER is None:
        if align_fn is None:
            raise RuntimeError("vllm_launch.peer(align_fn) must be called first")
        _PEER = vllm_wheel.Peer(align_fn)
    return _PEER


def provenance() -> dict:
    return peer().provenance()


def vllm_config(M: int, E: int, N_inter: int, K: int, top_k: int, fp8: bool) -> tuple[dict, str]:
    """(config, where it came from) as vLLM's ``try_get_optimal_moe_config`` picks it (no override)."""
    dtype = "fp8_w8a8" if fp8 else None
    configs = peer().get_moe_configs(E, N_inter, dtype)
    if configs:
        return dict(configs[min(configs, key=lambda k: abs(k - M))]), "shipped H200 JSON"
    return peer().get_default_config(M, E, N_inter, K, top_k, dtype), "get_default_config"


def prepare(topk_ids: torch.Tensor, config: dict, E: int):
    """(sorted_token_ids or None, expert_ids, num_tokens_post_padded), vLLM's ``_prepare_expert_assignment``."""
    M, top_k = topk_ids.shape
    return peer().prepare_expert_assignment(topk_ids, config, M, top_k, E, None)


def launch(A, B, C, A_scale, B_scale, sorted_token_ids, expert_ids, num_tokens_post_padded, *, top_k,
           config, swap_ab=None, topk_weights=None):
    """vLLM's ``invoke_fused_moe_triton_kernel`` for fp8 w8a8 per-tensor (A_scale [1], B_scale [E]) or bf16.

    A [M, K] (w1: one row per token), B [E, N, K], C [M * top_k, N] bf16.
    swap_ab None: vLLM's own rule (FP8 and enable_swap_ab); True/False forces it (FP8 only, as in vLLM).
    """
    p = peer()
    fp8 = B.dtype == torch.float8_e4m3fn
    p.swap_override = swap_ab
    try:
        p.invoke_fused_moe_triton_kernel(
            A, B, C.view(A.size(0), top_k, B.size(1)), A_scale, B_scale, topk_weights, sorted_token_ids,
            expert_ids, num_tokens_post_padded, topk_weights is not None, top_k, config,
            compute_type=tl.bfloat16, use_fp8_w8a8=fp8, use_int8_w8a8=False, use_int8_w8a16=False,
            use_int4_w4a16=False, per_channel_quant=False)
    finally:
        p.swap_override = None
    return C
