"""Grouped-GEMM configs for kernels/moe.py, per (shape class, M bucket).

``TABLE`` maps a shape class ``E{E}_N{N}_K{K}_top{topk}_{bf16|fp8}`` to ``{M bucket: config}``; a call
with M tokens uses the largest bucket <= M (the smallest bucket for smaller M). Shapes not in the table
fall back to :func:`default_config`, which picks BLOCK_M from the expected tokens per expert.
The entries are written by bench/bench_moe.py --sweep from measurements on an H200
(bench/results/moe_sweep.json); each records whether Swap-AB was the faster orientation.
"""
from __future__ import annotations

# Filled in from bench/results/moe_sweep.json (see bench/NOTES_moe.md).
TABLE: dict[str, dict[int, dict]] = {}


def shape_class(E: int, N: int, K: int, topk: int, fp8: bool) -> str:
    return f"E{E}_N{N}_K{K}_top{topk}_{'fp8' if fp8 else 'bf16'}"


def default_config(E: int, N: int, K: int, topk: int, M: int, fp8: bool) -> dict:
    """Heuristic for shapes not measured: BLOCK_M from the expected tokens per expert (M*topk/E)."""
    per_expert = M * topk / max(E, 1)
    block_k = 256 if fp8 else 128
    if per_expert <= 16:
        return {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": block_k, "num_warps": 4, "num_stages": 4}
    if per_expert <= 48:
        return {"BLOCK_M": 32, "BLOCK_N": 128, "BLOCK_K": block_k, "num_warps": 4, "num_stages": 3}
    return {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3}


def lookup(E: int, N: int, K: int, topk: int, M: int, fp8: bool) -> dict:
    """The config for one grouped GEMM of a call with M tokens."""
    buckets = TABLE.get(shape_class(E, N, K, topk, fp8))
    if not buckets:
        return default_config(E, N, K, topk, M, fp8)
    keys = sorted(buckets)
    chosen = keys[0]
    for key in keys:
        if key <= M:
            chosen = key
    return dict(buckets[chosen])
