# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""How vLLM 0.33.0 launches its `fused_moe_kernel` for one grouped GEMM, without vLLM.

Mirrors, from vllm/model_executor/layers/fused_moe/fused_moe.py of the 0.33.0 wheel:
``invoke_fused_moe_triton_kernel`` (1-D grid, EM trimmed for batches smaller than BLOCK_SIZE_M, SWAP_AB
from ``enable_swap_ab`` for FP8 only), ``_prepare_expert_assignment`` (the "naive" one-slot-per-block
path when ``M * topk * 4 <= E``, no alignment at all), ``try_get_optimal_moe_config`` (the shipped
per-device JSON, nearest batch key, else ``get_default_config``; copies of the H200 JSONs for the two
benchmark shapes are in bench/peers/vllm_configs/). Only the per-tensor FP8 (w8a8) and bf16 paths.

The alignment for the non-naive path is jitguard's ``moe_align_block_size``: same output format as
vLLM's CUDA op (slots sorted by expert, each expert padded to BLOCK_SIZE_M with the sentinel
``M * topk``, one expert id per block, the padded total on the device).
"""
from __future__ import annotations

import json
import os

import torch
import triton.language as tl

from .vllm_fused_moe_kernel import fused_moe_kernel

_CONFIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vllm_configs")


def _cdiv(a, b):
    return -(-a // b)


def shipped_configs(E: int, N_inter: int, fp8: bool) -> dict[int, dict] | None:
    """vLLM's tuned H200 table for (E, N = intermediate size per expert), or None if it ships none."""
    name = f"E={E},N={N_inter},device_name=NVIDIA_H200{',dtype=fp8_w8a8' if fp8 else ''}.json"
    path = os.path.join(_CONFIG_DIR, name)
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        raw = json.load(fh)
    raw.pop("triton_version", None)
    return {int(k): v for k, v in raw.items()}


def default_config(M: int, E: int, fp8: bool) -> dict:
    """vLLM 0.33.0 ``get_default_config``, branch "bf16/fp16 and fp8 per-tensor" on CUDA."""
    block_m = 16 if M <= 32 else 32 if M <= 96 else 64 if M <= 512 else 128
    block_n = 64 if M <= 64 else 128
    block_k = 128 if fp8 or M <= 64 else 64
    group_m = 16 if M // max(E, 1) > 128 else 1
    return {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k,
            "GROUP_SIZE_M": group_m, "num_warps": 4 if M <= 128 else 8, "num_stages": 4 if M <= 32 else 3}


def vllm_config(M: int, E: int, N_inter: int, fp8: bool) -> tuple[dict, str]:
    """(config, where it came from) as ``try_get_optimal_moe_config`` picks it on an H200."""
    table = shipped_configs(E, N_inter, fp8)
    if table:
        return dict(table[min(table, key=lambda k: abs(k - M))]), "shipped H200 JSON"
    return default_config(M, E, fp8), "get_default_config"


def enable_swap_ab(block_m: int, block_n: int) -> bool:
    """vLLM's rule on compute capability 9.0 (FP8 only: bf16 never swaps in vLLM)."""
    return block_m < 64 and block_n >= 64


def prepare(topk_ids: torch.Tensor, block_m: int, E: int, align_fn):
    """(sorted_token_ids or None, expert_ids, num_tokens_post_padded) as ``_prepare_expert_assignment``."""
    M, top_k = topk_ids.shape
    if M * top_k * 4 <= E:  # naive block assignment: one slot per block, no sort
        return None, topk_ids.view(-1), torch.full((1,), topk_ids.numel() * block_m, dtype=torch.int32,
                                                   device=topk_ids.device)
    return align_fn(topk_ids, block_m, E)


def launch(A, B, C, A_scale, B_scale, sorted_token_ids, expert_ids, num_tokens_post_padded, *, top_k,
           config, swap_ab=None, topk_weights=None):
    """``invoke_fused_moe_triton_kernel`` for fp8 w8a8 per-tensor (A_scale [1], B_scale [E]) or bf16.

    A [M, K] (w1: one row per token) , B [E, N, K], C [M * top_k, N] bf16.
    swap_ab None: vLLM's own choice (FP8 and enable_swap_ab); True/False forces it.
    """
    fp8 = B.dtype == torch.float8_e4m3fn
    if swap_ab is None:
        swap_ab = fp8 and enable_swap_ab(config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"])
    M = A.size(0)
    num_tokens = M * top_k
    if sorted_token_ids is not None:
        EM = sorted_token_ids.size(0)
        if A.size(0) < config["BLOCK_SIZE_M"]:
            EM = min(sorted_token_ids.size(0), A.size(0) * top_k * config["BLOCK_SIZE_M"])
    else:
        EM = num_tokens * config["BLOCK_SIZE_M"]
    grid = (_cdiv(EM, config["BLOCK_SIZE_M"]) * _cdiv(B.size(1), config["BLOCK_SIZE_N"]),)
    cfg = dict(config)
    cfg["SPLIT_K"] = 1
    block_k = cfg.pop("BLOCK_SIZE_K")
    fused_moe_kernel[grid](
        A, B, C, None, A_scale, B_scale, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded,
        B.size(1), B.size(2), EM, num_tokens,
        A.stride(0), A.stride(1), B.stride(0), B.stride(2), B.stride(1), C.stride(0), C.stride(1),
        0, 0, B_scale.stride(0) if B_scale is not None else 0, 0, 0, 0, 0,
        0, 0,
        MUL_ROUTED_WEIGHT=topk_weights is not None,
        top_k=top_k,
        compute_type=tl.bfloat16,
        use_fp8_w8a8=fp8,
        use_int8_w8a8=False,
        use_int8_w8a16=False,
        per_channel_quant=False,
        naive_block_assignment=sorted_token_ids is None,
        HAS_BIAS=False,
        BLOCK_SIZE_K=block_k,
        SWAP_AB=bool(swap_ab),
        USE_TD=False,
        **cfg,
    )
    return C
