"""Decode a Triton specialization key into per-parameter facts, and diff two of them in words.

A key (3.3+) is ``str(specialization) + str(options)``, e.g.
``[('*fp16', 'D'), ('i32', ''), ('constexpr', 128)]{'num_warps': 4, 'debug': False}``: one
``(type, attribute)`` entry per kernel parameter, where the attribute is ``'D'`` (divisible by 16 /
16-byte aligned), ``''`` (no value class), ``None`` (not specialized) or, for constexpr entries, the
value itself. A plain int argument equal to 1 shows up as ``('constexpr', 1)``: it was folded; an
annotated one (``n: tl.int64``) keeps its type and shows up as ``('i64', 1)`` (3.3+), folded too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from jitguard.runtime import compat
from jitguard.runtime.trace import DiffEntry, Param

_INT_TYPES = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}
_BOOL_TYPES = {"i1", "u1"}


@dataclass
class Variant:
    """One decoded key: what Triton compiled a kernel for."""

    key: str
    params: list[Param]
    options: dict[str, Any] | None  # explicit options, as passed (None if unparseable)
    options_text: str
    signature: tuple = field(default=())  # per-param describe() strings + options, for fast diffs

    def __post_init__(self) -> None:
        if not self.signature:
            self.signature = tuple(describe(p) for p in self.params) + (self.options_text,)


def decode_param(name: str, index: int, declared_constexpr: bool, entry: tuple[Any, Any] | None,
                 dns: bool = False, dns_align: bool = False) -> Param:
    if entry is None:
        return Param(name, index, "other")
    ty, attr = entry
    ty = str(ty)
    if declared_constexpr:
        return Param(name, index, "constexpr", "constexpr", constexpr=attr)
    if ty == "constexpr":
        if attr is None:
            return Param(name, index, "none", "constexpr", constexpr=None)
        if isinstance(attr, bool):
            return Param(name, index, "bool", "constexpr", constexpr=attr)
        if isinstance(attr, int):
            # Triton folds a plain int argument equal to 1 into the kernel as a constant.
            return Param(name, index, "int", "constexpr", value_class="one" if attr == 1 else None,
                         constexpr=attr)
        return Param(name, index, "other", "constexpr", constexpr=attr)
    if ty.startswith("*"):
        dtype = ty[2:] if ty.startswith("*k") else ty[1:]
        aligned = True if attr == "D" else (False if attr == "" else None)
        if dns_align and attr != "D":
            aligned = None
        return Param(name, index, "pointer", ty, dtype=dtype, aligned16=aligned)
    if ty in _BOOL_TYPES:
        return Param(name, index, "bool", ty)
    if ty in _INT_TYPES:
        if attr == 1 and not isinstance(attr, bool):  # an annotated int equal to 1: folded as well
            return Param(name, index, "int", ty, value_class="one", constexpr=1)
        vc = "div16" if attr == "D" else "none"
        return Param(name, index, "int", ty, value_class=vc)
    if ty.startswith(("fp", "bf")):
        return Param(name, index, "float", ty)
    return Param(name, index, "other", ty)


def decode_key(key: str, params: Sequence[tuple[str, bool, bool, bool]]) -> Variant:
    """Decode ``key`` for a kernel whose parameters are ``compat.jit_params(jit_function)``."""
    entries, opt_text = compat.split_and_parse(key)
    entries = entries or []
    decoded = []
    for i, (name, is_cx, dns, dns_al) in enumerate(params):
        entry = entries[i] if i < len(entries) else None
        decoded.append(decode_param(name, i, is_cx, entry, dns, dns_al))
    return Variant(key, decoded, compat.parse_options(opt_text), opt_text)


def _fmt_value(value: Any) -> str:
    return repr(value) if isinstance(value, str) and not isinstance(value, compat._Raw) else str(value)


def describe(p: Param) -> str:
    """A parameter's specialization in words: ``i32, divisible by 16``, ``folded constant 1``,
    ``*fp16, 16-byte aligned``, ``constexpr 128``."""
    if p.kind == "constexpr":
        return _fmt_value(p.constexpr)
    if p.kind == "int":
        if p.value_class == "one":
            return f"folded constant {p.constexpr if p.constexpr is not None else 1}"
        if p.type == "constexpr":
            return f"folded constant {p.constexpr}" if p.value_class == "one" else f"constant {p.constexpr}"
        return f"{p.type}, divisible by 16" if p.value_class == "div16" else f"{p.type}"
    if p.kind == "pointer":
        align = {True: "16-byte aligned", False: "unaligned", None: "alignment not specialized"}[p.aligned16]
        return f"*{p.dtype}, {align}"
    if p.kind == "none":
        return "None"
    if p.kind == "bool":
        return f"constant {p.constexpr}" if p.type == "constexpr" else "bool"
    if p.type == "constexpr":
        return f"constant {_fmt_value(p.constexpr)}"
    return p.type or "?"


def _param_change(a: Param, b: Param) -> DiffEntry:
    before, after = describe(a), describe(b)
    name = b.name
    if b.kind == "constexpr" or a.kind == "constexpr":
        return DiffEntry(name, before, after, f"{name} (constexpr): {before} -> {after}", "constexpr")
    if a.kind == "pointer" and b.kind == "pointer":
        if a.dtype != b.dtype:
            return DiffEntry(name, before, after, f"{name}: *{a.dtype} -> *{b.dtype}", "dtype")
        short = {True: "16-byte aligned", False: "unaligned", None: "alignment not specialized"}
        return DiffEntry(name, before, after, f"{name}: {short[a.aligned16]} -> {short[b.aligned16]}",
                         "alignment")
    if a.kind == "int" and b.kind == "int":
        if a.type != b.type and "constexpr" not in (a.type, b.type):
            return DiffEntry(name, before, after, f"{name}: {before} -> {after}", "type")
        return DiffEntry(name, before, after, f"{name}: {before} -> {after}", "value_class")
    return DiffEntry(name, before, after, f"{name}: {before} -> {after}", "kind")


def _options_diff(a: Variant, b: Variant) -> list[DiffEntry]:
    if a.options_text == b.options_text:
        return []
    if a.options is None or b.options is None:
        return [DiffEntry("options", a.options_text, b.options_text,
                          f"options: {a.options_text} -> {b.options_text}", "option")]
    out = []
    for k in list(dict.fromkeys([*a.options, *b.options])):
        if a.options.get(k, _MISSING) != b.options.get(k, _MISSING) or (k in a.options) != (k in b.options):
            before = "default" if k not in a.options else repr(a.options[k])
            after = "default" if k not in b.options else repr(b.options[k])
            out.append(DiffEntry("options", before, after, f"options: {k} {before} -> {after}", "option", k))
    if not out:  # same options, another order: str(dict) differs, so the key does too
        order_a, order_b = ", ".join(a.options), ", ".join(b.options)
        out.append(DiffEntry("options", order_a, order_b,
                             f"options: same values passed in another order ({order_a} -> {order_b})",
                             "option_order"))
    return out


_MISSING = object()


def diff(a: Variant, b: Variant) -> list[DiffEntry]:
    """What changed from variant ``a`` to variant ``b``, one entry per parameter or option."""
    out = []
    for pa, pb, sa, sb in zip(a.params, b.params, a.signature, b.signature):
        if sa != sb:  # the signature holds describe() of each parameter
            out.append(_param_change(pa, pb))
    return out + _options_diff(a, b)


def distance(a: Variant, b: Variant) -> tuple[int, int]:
    """(params that differ, facets that differ): ``i32, divisible by 16`` vs ``i64, divisible by 16``
    is one facet; vs ``i32`` two. The second number breaks ties between equally close variants."""
    params = facets = 0
    for x, y in zip(a.signature, b.signature):
        if x != y:
            params += 1
            xs, ys = x.split(", "), y.split(", ")
            facets += sum(p != q for p, q in zip(xs, ys)) + abs(len(xs) - len(ys))
    return params, facets


def closest(new: Variant, previous: Sequence[Variant]) -> int | None:
    """Index in ``previous`` of the variant with the fewest differing params (then fewest differing
    facets, then the latest)."""
    best, best_d = None, None
    for i, v in enumerate(previous):
        d = distance(new, v)
        if best_d is None or d <= best_d:
            best, best_d = i, d
    return best


class VariantIndex:
    """The variants of one kernel, indexed per parameter so ``closest`` stays cheap on kernels of
    40+ parameters and with hundreds of variants (a constexpr fed a per-call value): counting
    differing parameters walks only the variants that differ from the new one at a position
    (most positions never change), and the facet tie-break looks at the most recent
    ``TIE_WINDOW`` of the equally close ones."""

    TIE_WINDOW = 64

    def __init__(self) -> None:
        self.variants: list[Variant] = []
        self._by_position: list[dict[str, list[int]]] = []

    def __len__(self) -> int:
        return len(self.variants)

    def __getitem__(self, i: int) -> Variant:
        return self.variants[i]

    def append(self, v: Variant) -> None:
        j = len(self.variants)
        self.variants.append(v)
        while len(self._by_position) < len(v.signature):
            self._by_position.append({})
        for pos, value in enumerate(v.signature):
            self._by_position[pos].setdefault(value, []).append(j)

    def closest(self, new: Variant) -> int | None:
        n = len(self.variants)
        if n == 0:
            return None
        differ = [0] * n
        sig = new.signature
        for pos, by_value in enumerate(self._by_position):
            value = sig[pos] if pos < len(sig) else _MISSING
            if len(by_value) == 1 and value in by_value:
                continue  # every variant has this value here
            for other, idxs in by_value.items():
                if other != value:
                    for j in idxs:
                        differ[j] += 1
        least = min(differ)
        tied = [j for j in range(n) if differ[j] == least][-self.TIE_WINDOW:]
        if len(tied) == 1:
            return tied[0]
        pick = closest(new, [self.variants[j] for j in tied])
        return tied[pick] if pick is not None else None


# Launch options a tuned config sets (triton.Config, or a table of configs such as vLLM's per-M
# MoE configs): changing one of them together with tile sizes is another config, not drift.
CONFIG_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def mark_config_changes(entries: list[DiffEntry], config_names: Iterable[str] = ()) -> list[DiffEntry]:
    """Re-label as ``change="config"`` the entries that make another tuned config rather than
    per-call variation: constexprs named in the autotuner's configs (``config_names``), and, when
    a config option (``CONFIG_OPTIONS``) changes between two explicit values, every constexpr and
    config option that changed with it. Returns ``entries`` (changed in place)."""
    names = set(config_names)
    switched = any(e.change == "option" and e.option in CONFIG_OPTIONS and "default" not in (e.before, e.after)
                   for e in entries)
    for e in entries:
        if e.change == "constexpr" and (switched or e.param in names):
            e.change = "config"
        elif e.change in ("option", "option_order") and e.option in CONFIG_OPTIONS and (switched or e.option in names):
            e.change = "config"
    return entries


def remedy(entries: Sequence[DiffEntry], kernel_name: str = "", decorator: str = "triton.jit") -> str | None:
    """What to do about the differences, in one or two sentences (``decorator``: the kernel's,
    ``gluon.jit`` for a Gluon kernel; ``compat.jit_decorator``)."""
    if not entries:
        return None
    parts: list[str] = []
    ints = [e.param for e in entries if e.change == "value_class"]
    types = [e.param for e in entries if e.change == "type"]
    cx = [e.param for e in entries if e.change == "constexpr"]
    align = [e.param for e in entries if e.change == "alignment"]
    dtypes = [e.param for e in entries if e.change == "dtype"]
    kinds = [e.param for e in entries if e.change == "kind"]
    opts = [e for e in entries if e.change in ("option", "option_order")]
    configs = [e for e in entries if e.change == "config"]
    if configs:
        what = ", ".join(dict.fromkeys(e.option if e.param == "options" and e.option else e.param for e in configs))
        parts.append(f"another config ({what}): expected once per config; warm it up if it appears mid-serving")
    if ints:
        names = ", ".join(f'"{n}"' for n in ints)
        parts.append(f"add {names} to do_not_specialize (@{decorator}(do_not_specialize=[{names}])): "
                     f"{'its value class changes' if len(ints) == 1 else 'their value classes change'} between calls")
    if types:
        parts.append(f"{', '.join(types)} crossed 2**31: annotate "
                     f"{' and '.join(t + ': tl.int64' for t in types)} so every call uses one type")
    if cx:
        parts.append(f"{', '.join(cx)} {'is a constexpr that varies' if len(cx) == 1 else 'are constexprs that vary'} "
                     f"per call: bucket {'it' if len(cx) == 1 else 'them'} to a few values or make "
                     f"{'it a plain int argument' if len(cx) == 1 else 'them plain int arguments'}")
    if align:
        names = ", ".join(f'"{n}"' for n in align)
        parts.append(f"{', '.join(align)} is not always 16-byte aligned (a view at an odd offset?): pass "
                     f"aligned tensors, or add {names} to do_not_specialize_on_alignment")
    if dtypes:
        parts.append(f"{', '.join(dtypes)} changed dtype: expected if the kernel serves several dtypes, "
                     f"else cast at the call site")
    if kinds:
        parts.append(f"{', '.join(kinds)} changed kind (e.g. None vs a value, or a folded constant): "
                     f"each is its own variant")
    if opts:
        names = ", ".join(sorted({e.option or "order" for e in opts}))
        parts.append(f"pass launch options ({names}) the same way at every call site "
                     f"(always explicit, same values, same order)")
    return "; ".join(parts)
