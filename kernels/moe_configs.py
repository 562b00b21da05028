"""Grouped-GEMM configs for kernels/moe.py, per (shape class, M bucket).

``TABLE`` maps a shape class ``E{E}_N{N}_K{K}_top{topk}_{bf16|fp8}`` to ``{M bucket: entry}``; an entry
holds the fastest measured config of each orientation (``"swap"``, ``"noswap"``) and ``"auto"``, the
faster of the two. A call with M tokens uses the largest bucket <= M (the smallest bucket for smaller
M). Shapes not in the table fall back to :func:`default_config`, which picks BLOCK_M from the expected
tokens per expert and Swap-AB from the rule in ``moe.choose_swap_ab``. The table is written from
bench/results/moe_sweep.json (``python bench/bench_moe.py --sweep`` on an H200).
"""
from __future__ import annotations

# Measured on an H200 (Triton 3.6.0), bench/results/moe_sweep.json, 2026-11-29T08:56:25+00:00; one bucket
# (E8_N28672_K4096_top2_fp8, M >= 256) re-chosen by bench/results/moe_tune_v4.json (marked below).
# v6: the GEMM's IDS_FIRST / PRELOAD flags are on (moe.GEMM_DEFAULTS) except in the three buckets where
# bench/results/moe_check_v6.json measured them slower (Qwen3 w1 FP8 M=1: 9.03 -> 9.30 µs; bf16 M=1, 4).
TABLE: dict[str, dict[int, dict]] = {
    'E128_N1536_K2048_top8_bf16': {
        1: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4, 'IDS_FIRST': False, 'PRELOAD': False}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4, 'IDS_FIRST': False, 'PRELOAD': False}},
        4: {'auto': 'swap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3, 'IDS_FIRST': False, 'PRELOAD': False}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3, 'IDS_FIRST': False, 'PRELOAD': False}},
        16: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        32: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}},
        64: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 32, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        256: {'auto': 'noswap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 32, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
    },
    'E128_N1536_K2048_top8_fp8': {
        1: {'auto': 'swap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3, 'IDS_FIRST': False, 'PRELOAD': False}, 'noswap': {'BLOCK_M': 64, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4, 'IDS_FIRST': False, 'PRELOAD': False}},
        4: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        16: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}},
        32: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}},
        64: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}},
        256: {'auto': 'swap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 64, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
    },
    'E128_N2048_K768_top8_bf16': {
        1: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}},
        4: {'auto': 'noswap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        16: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        32: {'auto': 'noswap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        64: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        256: {'auto': 'noswap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 32, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
    },
    'E128_N2048_K768_top8_fp8': {
        1: {'auto': 'swap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 64, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}},
        4: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        16: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}},
        32: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}},
        64: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}},
        256: {'auto': 'swap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 32, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}},
    },
    'E8_N28672_K4096_top2_bf16': {
        1: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 32, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        4: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}},
        16: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}},
        32: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}},
        64: {'auto': 'noswap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 32, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        256: {'auto': 'noswap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 64, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}},
    },
    'E8_N28672_K4096_top2_fp8': {
        1: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        4: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}},
        16: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}},
        32: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}},
        64: {'auto': 'swap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 64, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        # v4 (bench/results/moe_tune_v4.json, `bench_moe.py --tune`, 2026-11-29T11:13): 254.5 -> 244.5 µs.
        256: {'auto': 'noswap', 'swap': {'BLOCK_M': 64, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 8, 'num_stages': 3}, 'noswap': {'BLOCK_M': 128, 'BLOCK_N': 256, 'BLOCK_K': 128, 'num_warps': 8, 'num_stages': 4}},
    },
    'E8_N4096_K14336_top2_bf16': {
        1: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}},
        4: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}},
        16: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}},
        32: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}},
        64: {'auto': 'noswap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 32, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
        256: {'auto': 'noswap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 64, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 4}},
    },
    'E8_N4096_K14336_top2_fp8': {
        1: {'auto': 'swap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 64, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}},
        4: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}},
        16: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 64, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}},
        32: {'auto': 'swap', 'swap': {'BLOCK_M': 16, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 64, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}},
        64: {'auto': 'swap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 64, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}, 'noswap': {'BLOCK_M': 64, 'BLOCK_N': 128, 'BLOCK_K': 256, 'num_warps': 4, 'num_stages': 4}},
        256: {'auto': 'noswap', 'swap': {'BLOCK_M': 32, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}, 'noswap': {'BLOCK_M': 64, 'BLOCK_N': 128, 'BLOCK_K': 128, 'num_warps': 4, 'num_stages': 3}},
    },
}


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


def lookup(E: int, N: int, K: int, topk: int, M: int, fp8: bool, swap_ab: bool | None = None) -> dict:
    """The config for one grouped GEMM of a call with M tokens.

    ``swap_ab`` None: the measured faster orientation (``SWAP_AB`` set in the result); True/False: the
    best measured config of that orientation. Without a table entry: :func:`default_config`, with
    ``SWAP_AB`` left to the caller's rule unless forced.
    """
    buckets = TABLE.get(shape_class(E, N, K, topk, fp8))
    if not buckets:
        cfg = default_config(E, N, K, topk, M, fp8)
        if swap_ab is not None:
            cfg["SWAP_AB"] = swap_ab
        return cfg
    keys = sorted(buckets)
    chosen = keys[0]
    for key in keys:
        if key <= M:
            chosen = key
    entry = buckets[chosen]
    orient = entry["auto"] if swap_ab is None else ("swap" if swap_ab else "noswap")
    if orient not in entry:  # only one orientation measured correct: use it with the flag forced
        orient = "swap" if "swap" in entry else "noswap"
    return dict(entry[orient], SWAP_AB=orient == "swap" if swap_ab is None else swap_ab)
