"""Prov: what the classifier concludes about one value (its class, type and evidence), and ``join``,
the most varying of several possible values."""
from __future__ import annotations

from typing import NamedTuple

from jitguard.static.facts import BUCKETED, STABLE, UNKNOWN, VARYING, EntryRef, ReturnRef
from jitguard.static.provenance.rules import IN_PLACE_OF_NAME, limit

_RANK = {VARYING: 3, BUCKETED: 2, UNKNOWN: 1, STABLE: 0}
_JOINED_TYPES = frozenset({"float", "bool", "int", "tensor", "unknown"})  # the types a join keeps as they are
_ALSO = limit("caller-elsewhere", "parts")


class Prov(NamedTuple):
    cls: str
    vtype: str = "unknown"
    evidence: tuple[str, ...] = ()
    div16: bool = False  # always a multiple of 16 (so never == 1 and always in the %16 class)
    by_name: bool = False  # the class rests on a name alone, not on the code's structure
    guess: bool = False  # VARYING only because it is the leading dim / size of a tensor we know nothing about
    # the entry parameter (no caller in this module) the value rests on, its function qualified
    # within the module: callers in other modules may tell more (link.py follows them)
    entry: EntryRef | None = None
    bucket: bool = False  # UNKNOWN resting on an entry parameter, bucketed here: BUCKETED if it varies
    # the inference rules (provenance/rules.py) the class rests on, outermost first
    rules: tuple[str, ...] = ()
    # the tensors (``TensorLayouts.tensor_root`` keys) whose element count the value is, where that
    # count rests on the element-count guess: link.py asks the kernels they are passed to
    counted: tuple[str, ...] = ()
    # UNKNOWN resting on what a function of another module returns at one call (returns-elsewhere):
    # link.py binds that module's summary of the function to the call's arguments
    ret: ReturnRef | None = None
    # the other entry parameters an UNKNOWN rests on (the parts of `p + q`, a value assigned from p on
    # one path and q on another): callers elsewhere may make any of them vary (caller-elsewhere)
    also: tuple[EntryRef, ...] = ()

    def why(self, text: str, *rules: str) -> "Prov":
        """The same value, one step further out: ``text`` says the step, ``rules`` the rules it applies."""
        return self._replace(evidence=(text,) + self.evidence,
                             rules=rules + tuple(r for r in self.rules if r not in rules) if rules else self.rules)

    def by(self, *rules: str) -> "Prov":
        return self._replace(rules=rules + tuple(r for r in self.rules if r not in rules))

    def as_type(self, vtype: str) -> "Prov":
        return self._replace(vtype=vtype)


def join(items: list[Prov], vtype: str | None = None) -> Prov:
    """The most varying of several possible values (VARYING > BUCKETED > UNKNOWN > STABLE)."""
    if not items:
        return Prov(UNKNOWN, vtype or "unknown")
    if len(items) == 1 and vtype is None:
        p = items[0]
        if not p.also and (p.ret is None or p.cls == UNKNOWN or p.by_name) and p.vtype in _JOINED_TYPES:
            # what the rest makes of one such value, made without its passes (half the joins): an equal
            # copy, not ``p`` itself, as the rest returns (model_dim tells a count from a dim by identity)
            return Prov._make(p)
    best = max(items, key=lambda p: (_RANK[p.cls], not p.by_name))
    if best.cls == VARYING and not best.by_name and in_place_of_name(best):
        # a part varying by structure over one read in place of its name (empty-skip, live-slice), as
        # over one classed by its name: `bs - int(num_padding)` says why num_padding varies
        best = next((p for p in items if p.cls == VARYING and not p.by_name and not in_place_of_name(p)), best)
    div16 = all(p.div16 for p in items)
    entry = best.entry
    if entry is None and best.cls != VARYING:
        entry = next((p.entry for p in items if p.entry is not None), None)
    elif entry is not None and best.cls == VARYING and any(p.cls == VARYING and p.entry != entry for p in items):
        # a guessed leading dim that callers elsewhere may fix (handed_entry), joined with a value
        # varying for another reason: fixing the one does not fix the whole
        entry = None
    also: tuple[EntryRef, ...] = ()
    if best.cls != VARYING:
        refs = list(dict.fromkeys(e for p in items for e in ((p.entry,) if p.entry is not None else ()) + p.also))
        if entry is None and refs:
            entry = refs[0]
        also = tuple(e for e in refs if e != entry)[:_ALSO]
    # an unknown part that another module's function returns may still make the whole vary, and a
    # part varying by its name alone may be shown to vary by what that function returns
    ret = best.ret if best.cls == UNKNOWN or best.by_name else None
    if ret is None and best.cls == UNKNOWN:
        ret = next((p.ret for p in items if p.ret is not None), None)
    if vtype is None:
        types = {p.vtype for p in items if p.vtype not in ("unknown", "none")}
        if "float" in types:
            vtype = "float"
        elif types == {"bool"}:
            vtype = "bool"
        elif "int" in types:
            vtype = "int"
        elif "tensor" in types:
            vtype = "tensor"
        else:
            vtype = "unknown"
    return Prov(best.cls, vtype, best.evidence, div16, best.by_name, best.guess, entry,
                best.bucket if best.entry is not None else any(p.bucket and p.entry == entry for p in items),
                best.rules, best.counted, ret, also)


def in_place_of_name(p) -> bool:
    """``p`` (a Prov or a launch's ArgFacts) rests on a rule read in place of a name (empty-skip,
    live-slice: ``InferenceRule.in_place_of_name``)."""
    return any(r in IN_PLACE_OF_NAME for r in p.rules)


# the rules by which a fixed value is a model dimension or configured size (not a literal)
_MODEL_DIM_RULES = frozenset({"model-dim", "weight-like", "self-attribute", "existing-stride", "shape-product",
                              "configured-name", "name-stable", "name-over-guess", "module-attribute",
                              "row-size"})


def model_dim(fixed: Prov, count: Prov, inner: bool = False) -> bool:
    """``count * fixed`` is a varying count times a model dim: ``fixed`` is fixed for the model by one
    of the model-dim rules (never a literal, whose divisibility is known) and ``count`` varies. With
    ``inner`` (``fixed`` is a trailing dim of a layout), a size nothing here tells of counts too:
    layouts keep model dims innermost (rule count-times-dim)."""
    if count.cls != VARYING or fixed.div16 or fixed is count:
        return False
    if fixed.cls == UNKNOWN:
        return inner and fixed.vtype in ("int", "unknown") and "literal" not in fixed.rules
    if fixed.cls == VARYING:
        # a leading dim that the code also uses as an innermost size: possibly a model dim
        return "conflicting-layout" in fixed.rules
    return fixed.cls == STABLE and "literal" not in fixed.rules and any(r in _MODEL_DIM_RULES for r in fixed.rules)
