"""Names and calls that are evidence: variable names that say per-call or model dimension, tensor names
that say weight, and the calls whose name says what they return (allocations, views, arithmetic,
bucketing, device properties, reductions). docs/provenance.md documents each."""
from __future__ import annotations

import ast
import functools
import re

from jitguard.static.facts import STABLE, VARYING

# ---- names as evidence -------------------------------------------------------------------------
# Checked before the varying patterns: configuration maxima and model dimensions.
_STABLE_NAME = re.compile(
    r"^(max_num_\w+|max_model_len|max_batch_size|max_bsz?|max_position\w*|max_seq_len_to_capture|"
    r"hidden(_size|_dim)?|head_(dim|size)\w*|\w*_head_(dim|size)|((num|n)_?)?(\w+_)?heads|num_experts\w*|"
    r"top_?k(_\w+)?|vocab_size|d_model|dim|d|k|n|e|h|d_\w+|block(_\w+)?|\w+_block(_size)?|page_size|"
    r"group_size|num_groups|n_groups|\w*_stride\w*|stride\w*|num_warps|num_stages|num_sms|\w*_size_(n|k)|"
    r"\w*(intermediate|hidden|speculative)\w*|rank|world(_size)?|tp_size|\w*_dim|split_?k|k_splits?|shards?|num_shards|num_ranks|\w*cache\w*|\w*capacity)$"
)
_VARYING_NAME = re.compile(
    r"^((num|n|total|cur)_?(actual_|valid_|padded_|batched_|input_|output_|new_|draft_|spec_|"
    r"prefill_|decode_|computed_|scheduled_|sampled_)?(tokens?|toks|seqs?|sequences|reqs|requests|queries|"
    r"rows|decodes?|prefills?|items|elements|elems|entries|batches)|\w*_tokens|tokens(_\w+)?|token_num\w*|"
    r"\w*batch(_size)?|seq_?len(s|gth)?(_\w+)?|\w*_seq_?lens?|max_(\w+_)?(seqlen|seq_len|query_len|q_len|"
    r"kv_len|ctx_len|context_len|tokens|num_tokens)\w*|max_\w+_len|\w*query_lens?|q_lens?|kv_lens?|ctx_lens?|"
    r"context_lens?|cu_seqlens?\w*|n_elements|numel|n_rows|seed|philox_\w+|\w*_offset|offset|"
    r"step|start_pos|positions?|num_blocks_per_seq)$"
)


# Short conventional names, case-sensitive: M/T/EM (GEMM rows, tokens), bs (batch size).
_VARYING_SHORT = {"M", "T", "EM", "m", "bs", "B"}
# Single letters that by convention name model dimensions (heads, head dim, GEMM K, experts).
_STABLE_SHORT = {"H", "D", "K", "E", "HV", "HK", "HQ", "DV", "DK"}


def strong_stable(name: str, varying: frozenset[str] = frozenset(), stable: frozenset[str] = frozenset()) -> bool:
    """A name that plainly says model dimension or configured maximum (num_experts, hidden_size,
    max_num_reqs): strong enough to override a structural guess."""
    if name in stable:
        return True
    if name in _STABLE_SHORT:
        return True
    low = name.lower()
    return len(name) > 1 and name not in varying and name not in _VARYING_SHORT and bool(_STABLE_NAME.match(low)) \
        and not _VARYING_NAME.match(low)


# a pure function of its strings, asked for the same few names at every step of a scan: made once each
@functools.lru_cache(maxsize=None)
def name_class(name: str | None, varying: frozenset[str] = frozenset(), stable: frozenset[str] = frozenset()) -> str | None:
    """VARYING / STABLE when a name alone suggests it, else None. Config names win."""
    if not name:
        return None
    if name in stable:
        return STABLE
    if name in varying or name in _VARYING_SHORT:
        return VARYING
    low = name.lower()
    if name.isupper() and len(name) > 2 and not _VARYING_NAME.match(low):
        return STABLE  # UPPER_CASE constants and block sizes
    if _STABLE_NAME.match(low):
        return STABLE
    if _VARYING_NAME.match(low):
        return VARYING
    return None


# The leading dim named a batch (not tokens): in `B, T, C = x.shape` the layout is batch-first, so the
# dim after it is the sequence (rule batch-first-3d).
_BATCH_NAME = re.compile(r"^(b|bs|bsz|batch(_?size|_?sz|es)?|\w+_batch(_size)?|n_?batch(es)?|num_batch(es)?)$", re.IGNORECASE)


# A dim named a head count: in `B, H, T, D = q.shape` the layout is head-first, so the dim after it is
# the sequence (rule sequence-dim).
_HEADS_NAME = re.compile(r"^(h|hq|hk|hv|nh|nheads|heads|(num|n)_?(\w+_)?heads?)$", re.IGNORECASE)


@functools.lru_cache(maxsize=None)
def heads_name(name: str | None) -> bool:
    """A name that says number of heads (``H``, ``nheads``, ``num_heads``, ``n_kv_heads``)."""
    return bool(name) and bool(_HEADS_NAME.match(name))


@functools.lru_cache(maxsize=None)
def batch_name(name: str | None) -> bool:
    """A name that says batch size (``B``, ``bs``, ``batch``, ``batch_size``), not tokens."""
    # max_batch_size: a configured maximum, the leading dim of a persistent buffer
    return bool(name) and bool(_BATCH_NAME.match(name)) and not name.lower().startswith("max")


def short_model_dim(name: str) -> bool:
    """``Hq``, ``Hk``, ``Dv``: a model dimension's single-letter name (``_STABLE_SHORT``) in mixed case."""
    return 1 < len(name) <= 3 and name[0].isupper() and name.upper() in _STABLE_SHORT


_WEIGHT_NAME = re.compile(
    r"(^|_)(w|w\d+|w\d+\w*|weights?|bias|biases|qweight|qzeros|g_idx|codebooks?|lut|embeddings?|"
    r"embed\w*|inv_freq|cos_sin\w*|cos|sin|b|lora_[ab]\w*|\w*_stacked|params?|centroids?)($|_)|weight|"
    r"(^|_)(kv|k|v|key|value|conv|ssm|state|page|paged|swa|compressed)_caches?($|_|\d)|^caches?$|^kv_caches?|"
    r"(^|_)(a_log|dt_bias|experts?|\w+_per_experts?|load_view)($|_)|^(conv|ssm|recurrent)_states?$"
)


# Per-token "weights" (router outputs, attention probabilities) are activations, not parameters.
_ACTIVATION_WEIGHTS = re.compile(r"(topk|top_k|router|routing|attn|attention|gating|gate|combine|score|expert)_?weights?")


@functools.lru_cache(maxsize=None)
def _names_weight(name: str) -> bool:
    return bool(_WEIGHT_NAME.search(name.lower()))


@functools.lru_cache(maxsize=None)
def _names_activation_weights(name: str) -> bool:
    return bool(_ACTIVATION_WEIGHTS.search(name.lower()))


# A tensor an object holds under a buffer's or pool's name (`state.kv_score_buffer`): allocated once, at
# its capacity.
_HELD_BUFFER = re.compile(r"(^|_)(buffers?|bufs?|workspace)$")


def weight_like(expr: ast.AST) -> bool:
    """self.x / cls.x / obj.weight / w13 / key_cache: a tensor fixed for the model's life."""
    if isinstance(expr, (ast.Name, ast.Attribute)):
        leaf = expr.id if isinstance(expr, ast.Name) else expr.attr
        if _names_activation_weights(leaf):
            return False
    if isinstance(expr, ast.Attribute):
        base = expr
        while isinstance(base, ast.Attribute):
            base = base.value
        if isinstance(base, ast.Name) and base.id in ("self", "cls"):
            return True
        return _names_weight(expr.attr) or bool(_HELD_BUFFER.search(expr.attr.lower()))
    if isinstance(expr, ast.Name):
        return _names_weight(expr.id)
    return False


_ALLOC = {"empty", "zeros", "ones", "full", "randn", "rand", "randint", "new_empty", "new_zeros", "new_ones",
          "new_full", "empty_strided"}
_LIKE = {"empty_like", "zeros_like", "ones_like", "full_like", "randn_like", "rand_like"}
_SAME = {"contiguous", "clone", "to", "float", "half", "bfloat16", "int", "long", "cuda", "cpu", "detach",
         "type", "view_as", "type_as", "requires_grad_", "fill_", "zero_", "copy_", "normal_", "uniform_"}
_ARITH_FUNCS = {"cdiv", "ceil_div", "div_up", "ceildiv", "round_up", "roundup", "align", "align_up",
                "round_up_to", "min", "max", "abs", "int", "ceil", "floor", "prod", "pow", "next_multiple_of",
                "round_to_multiple", "divide_round_up", "ceil_to", "cdiv_round_up"}
_ROUND_UP = {"round_up", "roundup", "align", "align_up", "round_up_to", "next_multiple_of", "round_to_multiple",
             "ceil_to", "cdiv_round_up"}
_BUCKET = re.compile(r"next_power_of_2|next_pow2|power_of_2|pow2|bucket|next_power|_pow_2|round_up_pow")
_STABLE_CALLS = {"dim", "element_size", "get_device_capability", "is_contiguous", "get_num_sms", "num_sms",
                 "get_device_properties", "device_count", "current_device", "get_device", "data_ptr_alignment"}
_DATA_DEP = {"item", "tolist"}
# Draws of a host random-number generator: a new value each call (`random.getrandbits(31)` as a seed).
# The receiver is the standard library's module or NumPy's (a library's API, not a project's naming);
# the draw's type: float draws are never value-specialized.
_HOST_RANDOM = {"getrandbits": "int", "randint": "int", "randrange": "int", "randbits": "int",
                "randbelow": "int", "random": "float", "uniform": "float"}
_RANDOM_MODULES = {("random",), ("secrets",), ("np", "random"), ("numpy", "random")}
# Reductions of a tensor's / array's contents: `int(lengths.max())`, `counts[:r].sum()`, `np.max(a)`.
_REDUCE = {"sum", "max", "min", "amax", "amin", "prod", "count_nonzero", "nansum", "cumsum", "argmax", "argmin"}
_ARRAY_MODULES = {"np", "numpy", "torch"}


def annotation_vtype(text: str | None) -> str:
    if not text:
        return "unknown"
    if "Tensor" in text:
        return "tensor"
    t = text.replace(" ", "")
    if t in ("int", "Optional[int]", "int|None", "SymInt"):
        return "int"
    if t in ("float", "Optional[float]", "float|None"):
        return "float"
    if t in ("bool", "Optional[bool]", "bool|None"):
        return "bool"
    return "unknown"
