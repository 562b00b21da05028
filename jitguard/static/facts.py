"""Facts the extractor records about one source file: kernels, launches, imports, suppressions.

Everything here is plain data (JSON-serializable through ``to_dict``/``from_dict``) so that the runner
can cache it per file and ``link`` can work on facts from many files without re-parsing them.
Data flows one way: source -> ``FileFacts`` -> findings.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from jitguard.findings import fields_dict, plain

# Provenance classes of a launch argument (docs/provenance.md documents the rules).
VARYING = "VARYING"  # changes per call: token/batch dim, numel(), len(), loop variables, counters...
BUCKETED = "BUCKETED"  # a varying value through next_power_of_2 or similar: few distinct values
STABLE = "STABLE"  # literals, module constants, config / self attributes, model dimensions
UNKNOWN = "UNKNOWN"  # nothing to go on
PROVENANCE_CLASSES = (VARYING, BUCKETED, STABLE, UNKNOWN)

# Kinds of use of a kernel parameter inside the kernel body.
USE_COMPARE = "compare"  # comparisons, masks, if/while tests, min/max: unspecializing costs nothing
USE_LOOP_BOUND = "loop_bound"  # range(...) / tl.range(...) bounds: costs nothing
USE_ADDRESS = "address"  # feeds pointer arithmetic: dropping %16 may cost vectorized loads
USE_CONSTEXPR = "constexpr"  # needs a compile-time constant: tl.arange bounds, block shapes, static_range
USE_CALL = "call"  # passed on to another function (a @triton.jit helper): effect unknown
USE_OTHER = "other"  # arithmetic that reaches neither an address nor a constant position
SAFE_USES = frozenset({USE_COMPARE, USE_LOOP_BOUND, USE_OTHER})


_plain, _fields_dict = plain, fields_dict
asdict = plain


def _load(cls, data):
    """Build dataclass ``cls`` from a dict, ignoring unknown keys (older/newer cache entries)."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class ParamUse:
    kind: str  # one of USE_*
    line: int
    column: int
    context: str  # short source text of the enclosing expression
    # read in the test of an ``if`` or a conditional expression: on a tl.constexpr it selects code at
    # compile time (the branch not taken is never compiled)
    branch: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ParamUse":
        return _load(cls, data)


@dataclass
class ParamFacts:
    name: str
    index: int
    annotation: str | None = None  # "constexpr", "typed" or None
    annotation_text: str | None = None  # e.g. "tl.constexpr", "tl.int64"
    default: str | None = None  # source text of the default, None if none
    pointer: bool = False  # used as a pointer in the body (base of loads/stores)
    uses: list[ParamUse] = field(default_factory=list)
    # the kernel loads values through it and uses them as integers (an offset of an address, a loop
    # bound, a comparison with a program id or an offset): the first such use; None otherwise
    index_load: ParamUse | None = None

    @property
    def is_constexpr(self) -> bool:
        return self.annotation == "constexpr"

    def use_kinds(self) -> set[str]:
        return {u.kind for u in self.uses}

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "annotation": self.annotation,
            "annotation_text": self.annotation_text,
            "default": self.default,
            "pointer": self.pointer,
            "uses": [u.to_dict() for u in self.uses],
            "index_load": self.index_load.to_dict() if self.index_load is not None else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ParamFacts":
        obj = _load(cls, data)
        obj.uses = [ParamUse.from_dict(u) for u in data.get("uses", [])]
        got = data.get("index_load")
        obj.index_load = ParamUse.from_dict(got) if isinstance(got, dict) else None
        return obj


@dataclass
class KernelFacts:
    qualname: str  # fully qualified: "<module>.<name>" or "<module>.<Class>.<name>"
    name: str  # the name launches use (the attribute/variable the JITFunction is bound to)
    function: str  # name of the Python function holding the body
    line: int  # def line
    column: int
    decorator_line: int  # line of the jit decorator or of the triton.jit(...) call
    form: str  # "decorator" | "call"
    params: list[ParamFacts] = field(default_factory=list)
    # do_not_specialize / do_not_specialize_on_alignment entries as written (names or ints).
    do_not_specialize: list[str | int] = field(default_factory=list)
    do_not_specialize_literal: bool = True  # False when the value isn't a literal list/tuple
    do_not_specialize_line: int | None = None
    do_not_specialize_on_alignment: list[str | int] = field(default_factory=list)
    do_not_specialize_on_alignment_literal: bool = True
    do_not_specialize_on_alignment_line: int | None = None
    autotune_key: list[str] | None = None  # None: not autotuned
    autotune_key_literal: bool = True
    autotune_line: int | None = None
    heuristics: list[str] = field(default_factory=list)  # params computed by @triton.heuristics
    heuristics_line: int | None = None
    suppressed_lines: list[int] = field(default_factory=list)  # decorator + def lines (for ignores)

    def param(self, name: str) -> ParamFacts | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    def resolve_entry(self, entry: str | int) -> ParamFacts | None:
        """The parameter a do_not_specialize entry (name or index) refers to, or None."""
        if isinstance(entry, bool):
            return None
        if isinstance(entry, int):
            return self.params[entry] if -len(self.params) <= entry < len(self.params) else None
        return self.param(entry)

    def unspecialized(self) -> set[str]:
        """Names of params covered by do_not_specialize or do_not_specialize_on_alignment."""
        out: set[str] = set()
        for entry in list(self.do_not_specialize) + list(self.do_not_specialize_on_alignment):
            p = self.resolve_entry(entry)
            if p is not None:
                out.add(p.name)
        return out

    def to_dict(self) -> dict[str, Any]:
        return _fields_dict(self, params=[p.to_dict() for p in self.params])

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "KernelFacts":
        obj = _load(cls, data)
        obj.params = [ParamFacts.from_dict(p) for p in data.get("params", [])]
        return obj


@dataclass(frozen=True)
class Accessor:
    """``.shape[i]`` (kind "shape") or ``.stride(i)`` (kind "stride") of a tensor."""

    kind: str
    index: int

    def __str__(self) -> str:
        return f".shape[{self.index}]" if self.kind == "shape" else f".stride({self.index})"


@dataclass(frozen=True)
class EntryRef:
    """An entry parameter: a parameter of a function that no caller in its module passes (callers in
    other modules may tell what it holds), or ``.shape[i]`` / ``.stride(i)`` of such a tensor parameter."""

    function: str  # qualified name of the function (module-qualified once it leaves extract)
    param: str
    position: int  # the parameter's position in a call, -1 keyword-only
    accessor: Accessor | None = None

    def __str__(self) -> str:
        return f"{self.function}({self.param}{self.accessor or ''})"

    def with_accessor(self, accessor: Accessor | None) -> "EntryRef":
        return EntryRef(self.function, self.param, self.position, accessor)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "EntryRef | None":
        if not isinstance(data, dict):
            return None
        acc = data.get("accessor")
        return cls(str(data.get("function", "")), str(data.get("param", "")), int(data.get("position", -1)),
                   Accessor(str(acc["kind"]), int(acc["index"])) if isinstance(acc, dict) else None)


@dataclass(frozen=True)
class LayoutItem:
    """One dim or stride of a tensor as the module that lays it out knows it."""

    provenance: str  # one of PROVENANCE_CLASSES
    guess: bool = False
    evidence: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()  # the inference rules it rests on (provenance/rules.py)


@dataclass
class TensorLayout:
    """The dims and strides of a tensor argument (the same rank); ``leading`` only: its leading
    dims alone, the rank unknown (``x.unsqueeze(0)`` of a tensor whose layout is not known), no
    strides and no dim counted from the end."""

    dims: list[LayoutItem]
    strides: list[LayoutItem]
    leading: bool = False

    def item(self, accessor: Accessor) -> LayoutItem | None:
        items = self.dims if accessor.kind == "shape" else self.strides
        low = 0 if self.leading else -len(items)
        return items[accessor.index] if low <= accessor.index < len(items) else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "TensorLayout | None":
        if not isinstance(data, dict):
            return None

        def items(rows) -> list[LayoutItem]:
            return [LayoutItem(str(r["provenance"]), bool(r.get("guess")), tuple(r.get("evidence", ())),
                               tuple(r.get("rules", ()))) for r in rows or ()]

        return cls(items(data.get("dims")), items(data.get("strides")), bool(data.get("leading")))


@dataclass
class ArgFacts:
    """One argument at a launch site, with its provenance."""

    text: str  # source text of the argument expression
    position: int | None = None  # positional index, or None for a keyword
    keyword: str | None = None
    provenance: str = UNKNOWN  # one of PROVENANCE_CLASSES
    value_type: str = "unknown"  # "int" | "float" | "bool" | "none" | "str" | "tensor" | "unknown"
    evidence: list[str] = field(default_factory=list)  # chain, outermost first
    line: int = 0
    column: int = 0
    div16: bool = False  # always a multiple of 16: one value class however it varies
    guess: bool = False  # VARYING only as the leading dim/size of a tensor nothing else is known about
    after_star: int | None = None  # positional index counted after a *args of unknown length
    by_name: bool = False  # the class rests on a name alone
    # the entry parameter the value rests on (a parameter of a module-level function that no caller
    # in its module passes, or .shape[i] / .stride(i) of one): link.py asks callers elsewhere
    entry: EntryRef | None = None
    # the value buckets what the entry parameter holds (next_power_of_2(p), 1 << p.bit_length()):
    # a varying parameter makes it BUCKETED, not VARYING
    bucketed: bool = False
    # at a call of another module's function: the tensor's layout when this module knows it and some
    # dim or stride of it varies: an entry parameter's ``p.shape[i]`` / ``p.stride(i)`` there is taken
    # from it (link.py)
    layout: TensorLayout | None = None
    # at a call of another module's function, what fixes the tensor's leading dim: "weight" (named
    # like a weight, or every caller in this module passes one: fixed), "held" (another tensor the
    # object holds, ``self.buf``: as fixed as the object), "" (nothing): link.py reads it for an entry
    # parameter's leading dim
    weight: str = ""
    # the inference rules (provenance/rules.py) the class rests on, outermost first: a finding's
    # confidence follows from them
    rules: list[str] = field(default_factory=list)
    # an element count resting on the element-count guess: the tensors it counts, and (on a tensor
    # argument) the tensor it passes, as "<function>:<name>" (the local or parameter read, through
    # views and slices of one bound once). link.py matches them within the file: a count of a tensor
    # that a kernel uses as an index (ParamFacts.index_load) is an index count (rule index-count)
    counts: list[str] = field(default_factory=list)
    tensor_root: str | None = None
    # the value is (or rests on) what a function of another module returns at this call: link.py
    # takes its class from that module's ReturnFacts, bound to this call's arguments
    returns: "ReturnRef | None" = None
    # the other entry parameters an unknown value rests on besides ``entry`` (``p + q``): link.py asks
    # each of them of its callers elsewhere
    also: list[EntryRef] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ArgFacts":
        obj = _load(cls, data)
        obj.entry = EntryRef.from_dict(data.get("entry"))
        obj.layout = TensorLayout.from_dict(data.get("layout"))
        obj.returns = ReturnRef.from_dict(data.get("returns"))
        obj.also = [e for e in map(EntryRef.from_dict, data.get("also") or ()) if e is not None]
        return obj


@dataclass(eq=False)  # hashed by identity: a Prov holding one keys the classifier's memos
class ReturnRef:
    """A call of a function imported from another module of the tree whose return the value rests
    on: the function (fully qualified), the element of the returned tuple (None: the whole value) and
    the call's arguments with their provenance (``returns-elsewhere`` binds them to the parameters)."""

    function: str
    item: int | None = None
    args: list[ArgFacts] = field(default_factory=list)
    line: int = 0
    text: str = ""  # the call as written (shortened)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "ReturnRef | None":
        if not isinstance(data, dict):
            return None
        obj = _load(cls, data)
        obj.args = [ArgFacts.from_dict(a) for a in data.get("args", [])]
        return obj


@dataclass
class ReturnDep:
    """A parameter the return varies with: bound to a varying value, the return is ``provenance``
    (VARYING, or BUCKETED where the function buckets it) by the chain ``evidence``."""

    param: str
    position: int  # its position in a call, -1 keyword-only
    provenance: str
    evidence: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)


@dataclass
class ReturnFacts:
    """What a module-level function returns (element ``item`` of its tuple), asked by a call in another
    module: the class with its parameters left unknown, and the parameters it varies with."""

    function: str  # qualified within its module
    item: int | None
    provenance: str = UNKNOWN
    evidence: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)
    guess: bool = False
    by_name: bool = False
    value_type: str = "unknown"
    deps: list[ReturnDep] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ReturnFacts":
        obj = _load(cls, data)
        obj.deps = [_load(ReturnDep, d) for d in data.get("deps", []) if isinstance(d, dict)]
        return obj


@dataclass
class LaunchFacts:
    callee: str  # callee as written, e.g. "ops.kernel", "self.kernel"
    targets: list[str]  # fully qualified candidate names of the kernel, best first
    line: int
    column: int
    kind: str  # "grid" | "run" | "warmup" | "spec" (a launcher returning grid and keyword arguments)
    function: str | None = None  # qualified name of the enclosing function
    args: list[ArgFacts] = field(default_factory=list)
    star_args: bool = False  # a *args appears: positions after it can't be mapped
    star_kwargs: bool = False  # a **kwargs appears
    options: dict[str, str] = field(default_factory=dict)  # keyword -> source text, in written order
    keywords_order: list[str] = field(default_factory=list)  # every keyword in written order
    # "spec" launches: keywords taken from the launcher's own parameters (bound to the kernel's
    # parameters of the same name, ignored where the kernel has no such parameter)
    param_keywords: list[str] = field(default_factory=list)
    # a kernel handed to a function that launches it with the call's keywords (``launch(k, grid,
    # n=x.shape[0])`` where ``def launch(kernel, grid, **kw): kernel[grid](**kw)``): the function's
    # qualified names; link.py binds the launch only if one is such a forwarder
    via: list[str] = field(default_factory=list)
    # such a call's positional arguments that are tuples, item by item: [position in the call, the
    # items as positional ArgFacts]; link.py takes the one at the position of the function's tuple
    # parameter (FileFacts.forwarder_packs) as the launch's positionals
    packs: list[tuple[int, list[ArgFacts]]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return _fields_dict(self, args=[a.to_dict() for a in self.args],
                            packs=[[i, [a.to_dict() for a in items]] for i, items in self.packs])

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LaunchFacts":
        obj = _load(cls, data)
        obj.args = [ArgFacts.from_dict(a) for a in data.get("args", [])]
        obj.packs = [(int(i), [ArgFacts.from_dict(a) for a in items]) for i, items in data.get("packs", [])]
        return obj


# Target (in CallFacts.targets) of a call ``obj.meth(...)`` whose receiver's class is unknown.
METHOD_CALL = "?."


@dataclass
class CallFacts:
    """A call of a function imported from another module, with its arguments' provenance: what a
    parameter of that function gets from here (link.py follows entry parameters through these)."""

    targets: list[str]  # fully qualified candidate names of the callee
    line: int
    function: str | None = None  # qualified name of the enclosing function
    args: list[ArgFacts] = field(default_factory=list)
    star_args: bool = False  # positions after a *args can't be mapped
    star_kwargs: bool = False

    def to_dict(self) -> dict[str, Any]:
        return _fields_dict(self, args=[a.to_dict() for a in self.args])

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CallFacts":
        obj = _load(cls, data)
        obj.args = [ArgFacts.from_dict(a) for a in data.get("args", [])]
        return obj


@dataclass
class FileFacts:
    path: str
    module: str
    kernels: list[KernelFacts] = field(default_factory=list)
    launches: list[LaunchFacts] = field(default_factory=list)
    # Module-level import bindings: local name -> fully qualified target (for re-exports).
    imports: dict[str, str] = field(default_factory=dict)
    # Module-level aliases of kernels: name -> fully qualified target ("k2 = k1").
    aliases: dict[str, str] = field(default_factory=dict)
    # line -> suppressed codes ([] means every code), from "# jitguard: ignore[...]" comments.
    suppressions: dict[int, list[str]] = field(default_factory=dict)
    # content digest of the bytes the facts were made from (what a fix decided on them must find)
    digest: str = ""
    # calls of functions imported from other modules (see CallFacts)
    calls: list[CallFacts] = field(default_factory=list)
    # module-level functions that launch a kernel given as their parameter with their **kwargs
    # (qualified name -> that parameter's name)
    forwarders: dict[str, str] = field(default_factory=dict)
    # those that launch it with a tuple parameter's items as positionals (``def launch(kernel, grid,
    # args): kernel[grid](*args)``): qualified name -> that parameter's position in a call
    forwarder_packs: dict[str, int] = field(default_factory=dict)
    # PyTorch custom ops registered here: [namespace or "", op name, qualified function] for
    # ``@torch.library.custom_op("ns::op")``, ``lib.impl("op", f)``, ``register("op", f, ...)``;
    # calls ``torch.ops.<ns>.<op>(...)`` elsewhere are calls of that function (link.py)
    custom_ops: list[list[str]] = field(default_factory=list)
    # what the module-level functions other modules' launches rest on return (returns-elsewhere)
    returns: list[ReturnFacts] = field(default_factory=list)
    # a test or a benchmark by its place in the project (exercise.exercise_path, set by the scan
    # as the digest is: not part of what the file's bytes say; rule test-callers)
    exercise: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": [c.to_dict() for c in self.calls],
            "custom_ops": [list(r) for r in self.custom_ops],
            "forwarders": dict(self.forwarders),
            "forwarder_packs": dict(self.forwarder_packs),
            "path": self.path,
            "module": self.module,
            "kernels": [k.to_dict() for k in self.kernels],
            "launches": [la.to_dict() for la in self.launches],
            "imports": dict(self.imports),
            "aliases": dict(self.aliases),
            "suppressions": {str(k): list(v) for k, v in self.suppressions.items()},
            "digest": self.digest,
            "returns": [r.to_dict() for r in self.returns],
            "exercise": self.exercise,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FileFacts":
        return cls(
            path=data["path"],
            module=data["module"],
            kernels=[KernelFacts.from_dict(k) for k in data.get("kernels", [])],
            launches=[LaunchFacts.from_dict(la) for la in data.get("launches", [])],
            imports=dict(data.get("imports", {})),
            aliases=dict(data.get("aliases", {})),
            suppressions={int(k): list(v) for k, v in data.get("suppressions", {}).items()},
            calls=[CallFacts.from_dict(c) for c in data.get("calls", [])],
            forwarders=dict(data.get("forwarders", {})),
            forwarder_packs={str(k): int(v) for k, v in data.get("forwarder_packs", {}).items()},
            custom_ops=[list(r) for r in data.get("custom_ops", [])],
            digest=str(data.get("digest") or ""),
            returns=[ReturnFacts.from_dict(r) for r in data.get("returns", []) if isinstance(r, dict)],
            exercise=bool(data.get("exercise", False)),
        )
