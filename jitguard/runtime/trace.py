"""The jitguard trace: what one process compiled, when, and why (schema, load, atomic write).

A trace is one JSON document per process::

    {"schema": "jitguard.trace", "version": 2,
     "process": {...ProcessInfo...},
     "events": [{...Event...}, ...],
     "kernels": {"qualname": {"compiles": 3, "autotunes": 0, "compile_ms": 120.5}},
     "dropped_events": 0}

This module is the one source of truth for the format; docs/trace_schema.md describes every field
and ``TRACE_JSON_SCHEMA`` below is the machine-checkable form of the same thing. The format is
versioned: ``load_trace`` reads every version listed in ``SUPPORTED_VERSIONS`` and upgrades it to the
current dataclasses, so old traces keep loading when fields are added.

Size is bounded: a trace keeps at most ``max_events`` events (the first ones: the first compiles of a
kernel are the ones the later "why" diffs point at); later events are counted in ``dropped_events``
while ``kernels`` keeps exact per-kernel totals. Long strings (raw keys, reprs) are truncated.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from jitguard.atomic_write import write_text_atomic

SCHEMA = "jitguard.trace"
VERSION = 2  # 2: events name the kernel's module and qualname apart (for jitguard.warmup)
SUPPORTED_VERSIONS = (1, 2)
DEFAULT_MAX_EVENTS = 20_000
MAX_STRING = 2_000  # characters kept of a raw key / repr / config string

# Param.kind values
KINDS = ("int", "bool", "float", "pointer", "constexpr", "none", "other")
# Param.value_class values for ints (None for everything else)
VALUE_CLASSES = ("one", "div16", "none")


class TraceError(Exception):
    """A file that is not a readable jitguard trace (message says why; never a traceback)."""


def _clip(text: str | None, limit: int = MAX_STRING) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 12] + f"...[+{len(text) - limit + 12}]"


def _json_safe(value: Any) -> Any:
    """Constexpr values and options may be any Python object: keep JSON types, stringify the rest."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value if not isinstance(value, str) else _clip(value)
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return _clip(repr(value))


@dataclass
class Param:
    """One kernel parameter as Triton specialized it for a compile.

    ``type`` is Triton's type string ("i32", "i64", "u64", "fp32", "i1", "*fp16", "constexpr", ...).
    ``value_class`` is for ints only: "one" (folded to a constant), "div16" (divisible by 16) or
    "none" (no value specialization; also when ``do_not_specialize`` dropped it).
    ``constexpr`` is the compile-time value for constexpr params (and for None arguments).
    ``dtype``/``aligned16`` are for pointers: element type and whether ``data_ptr() % 16 == 0``
    (None when alignment specialization was disabled for that param).
    """

    name: str
    index: int
    kind: str
    type: str | None = None
    value_class: str | None = None
    constexpr: Any = None
    dtype: str | None = None
    aligned16: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["constexpr"] = _json_safe(self.constexpr)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Param":
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__ if k in d})


@dataclass
class DiffEntry:
    """One difference between a variant and the closest previous one, said in words in ``what``.

    ``param`` is a parameter name, or "options" for launch options (then ``option`` names it).
    ``change`` classifies it: "value_class", "type", "constexpr", "alignment", "dtype", "option",
    "kind" (e.g. an int that became a folded constant through None).
    """

    param: str
    before: str
    after: str
    what: str
    change: str = ""
    option: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DiffEntry":
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__ if k in d})


@dataclass
class AutotuneInfo:
    """Autotune specifics of an ``kind="autotune"`` event (a re-benchmark for a new key value)."""

    key: dict[str, Any] = field(default_factory=dict)  # autotune key arg name -> value (+ dtypes)
    configs: int | None = None  # number of configs benchmarked
    bench_ms: float | None = None  # time spent benchmarking
    best_config: str | None = None
    cache_hit: bool | None = None  # served from the autotune disk cache (3.8+ listener)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["key"] = _json_safe(self.key)
        d["best_config"] = _clip(self.best_config)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AutotuneInfo":
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__ if k in d})


@dataclass
class Event:
    """One compile (a miss of Triton's in-memory cache) or one autotune re-benchmark.

    Times: ``wall`` is seconds since the epoch, ``monotonic`` is ``time.monotonic()`` of the same
    process (compare across events of one process; compare across processes with ``wall``).
    ``variant`` counts distinct compiles of this kernel in this process (1 = the first).
    ``compile_ms`` is the wall time of the compile (None if jitguard could not see both ends);
    ``disk_cache_hit`` is True when Triton's on-disk cache served the binary (None = unknown).
    ``diff``/``remedy`` explain the compile against the closest previous variant (empty for variant 1).
    """

    kind: str  # "compile" | "autotune"
    seq: int  # 0-based order within the process
    kernel: str  # qualified name "module.func"
    step: int | None = None
    kernel_module: str | None = None  # the kernel function's __module__ (None in version 1)
    kernel_qualname: str | None = None  # its __qualname__ (None in version 1)
    wall: float = 0.0
    monotonic: float = 0.0
    thread: str | None = None
    kernel_path: str | None = None
    kernel_line: int | None = None
    call_path: str | None = None  # the user's launching frame (first outside triton and jitguard)
    call_line: int | None = None
    call_stack: list[str] = field(default_factory=list)  # further callers "path:line", innermost first
    warmup: bool = False
    autotuning: bool = False  # a compile of one config while an autotuner benchmarks (expected)
    from_trace: bool = False  # compiled by jitguard.warmup from a trace, before traffic (expected)
    compile_ms: float | None = None
    disk_cache_hit: bool | None = None
    params: list[Param] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)  # launch options as passed (non-default)
    key: str | None = None  # Triton's raw cache key (clipped)
    variant: int = 1
    closest_variant: int | None = None
    diff: list[DiffEntry] = field(default_factory=list)
    remedy: str | None = None
    overhead_ms: float | None = None  # jitguard's own work for this event
    autotune: AutotuneInfo | None = None
    frontend: str | None = None  # "gluon" for a @gluon.jit kernel; None for @triton.jit

    def to_dict(self) -> dict[str, Any]:
        extra = {"frontend": self.frontend} if self.frontend else {}  # older readers: no key
        return {
            "kind": self.kind,
            "seq": self.seq,
            "step": self.step,
            "wall": self.wall,
            "monotonic": self.monotonic,
            "thread": self.thread,
            "kernel": self.kernel,
            "kernel_module": self.kernel_module,
            "kernel_qualname": self.kernel_qualname,
            "kernel_path": self.kernel_path,
            "kernel_line": self.kernel_line,
            "call_path": self.call_path,
            "call_line": self.call_line,
            "call_stack": list(self.call_stack[:8]),
            "warmup": self.warmup,
            "autotuning": self.autotuning,
            "from_trace": self.from_trace,
            "compile_ms": self.compile_ms,
            "disk_cache_hit": self.disk_cache_hit,
            "params": [p.to_dict() for p in self.params],
            "options": _json_safe(self.options),
            "key": _clip(self.key),
            "variant": self.variant,
            "closest_variant": self.closest_variant,
            "diff": [d.to_dict() for d in self.diff],
            "remedy": self.remedy,
            "overhead_ms": self.overhead_ms,
            "autotune": self.autotune.to_dict() if self.autotune else None,
            **extra,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Event":
        kw = {k: d.get(k) for k in cls.__dataclass_fields__ if k in d}
        kw["params"] = [Param.from_dict(p) for p in d.get("params") or []]
        kw["diff"] = [DiffEntry.from_dict(x) for x in d.get("diff") or []]
        kw["options"] = d.get("options") or {}
        kw["call_stack"] = list(d.get("call_stack") or [])
        kw["autotune"] = AutotuneInfo.from_dict(d["autotune"]) if d.get("autotune") else None
        kw["warmup"] = bool(kw.get("warmup", False))
        kw["autotuning"] = bool(kw.get("autotuning", False))
        kw["from_trace"] = bool(kw.get("from_trace", False))
        return cls(**kw)

    def where(self) -> str:
        """``path:line`` of the launching frame, else of the kernel def, else ``?``."""
        if self.call_path:
            return f"{self.call_path}:{self.call_line}"
        if self.kernel_path:
            return f"{self.kernel_path}:{self.kernel_line}"
        return "?"


@dataclass
class ProcessInfo:
    """Who wrote the trace. ``rank``/``world_size``/``local_rank`` come from torch.distributed when
    initialized, else from RANK/WORLD_SIZE/LOCAL_RANK; None when neither says. ``run_id`` names
    the run the process belongs to (JITGUARD_RUN_ID, else a torchrun TORCHELASTIC_RUN_ID; None in
    traces written before the field existed and in processes no launcher labelled)."""

    pid: int = 0
    host: str = ""
    argv: list[str] = field(default_factory=list)
    rank: int | None = None
    world_size: int | None = None
    local_rank: int | None = None
    python: str | None = None
    triton_version: str | None = None
    jitguard_version: str | None = None
    mode: str | None = None
    start_wall: float = 0.0
    start_monotonic: float = 0.0
    end_wall: float | None = None
    end_monotonic: float | None = None
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["run_id"] = _clip(self.run_id, 200)
        d["argv"] = [_clip(a, 500) for a in self.argv[:64]]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ProcessInfo":
        kw = {k: d.get(k) for k in cls.__dataclass_fields__ if k in d}
        kw["argv"] = list(d.get("argv") or [])
        return cls(**kw)


@dataclass
class KernelTotals:
    compiles: int = 0
    autotunes: int = 0
    compile_ms: float = 0.0  # compile events only
    autotune_ms: float = 0.0  # benchmarking time of autotune events (includes their config compiles)

    def to_dict(self) -> dict[str, Any]:
        return {"compiles": self.compiles, "autotunes": self.autotunes,
                "compile_ms": round(self.compile_ms, 3), "autotune_ms": round(self.autotune_ms, 3)}


@dataclass
class Trace:
    process: ProcessInfo = field(default_factory=ProcessInfo)
    events: list[Event] = field(default_factory=list)
    kernels: dict[str, KernelTotals] = field(default_factory=dict)
    dropped_events: int = 0
    max_events: int = DEFAULT_MAX_EVENTS
    path: str | None = None  # where it was loaded from (not serialized)

    def add(self, event: Event) -> bool:
        """Record ``event``; returns False if it was dropped to keep the trace bounded
        (the per-kernel totals still count it)."""
        tot = self.kernels.setdefault(event.kernel, KernelTotals())
        if event.kind == "autotune":
            tot.autotunes += 1
            tot.autotune_ms += (event.autotune.bench_ms if event.autotune else None) or 0.0
        else:
            tot.compiles += 1
            tot.compile_ms += event.compile_ms or 0.0
        if len(self.events) >= self.max_events:
            self.dropped_events += 1
            return False
        self.events.append(event)
        return True

    def compiles(self) -> list[Event]:
        return [e for e in self.events if e.kind == "compile"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "version": VERSION,
            "process": self.process.to_dict(),
            "events": [e.to_dict() for e in self.events],
            "kernels": {k: v.to_dict() for k, v in sorted(self.kernels.items())},
            "dropped_events": self.dropped_events,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, path: str | None = None) -> "Trace":
        where = f"{path}: " if path else ""
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise TraceError(f"{where}not a jitguard trace (no \"schema\": \"{SCHEMA}\")")
        version = d.get("version")
        if version not in SUPPORTED_VERSIONS:
            raise TraceError(
                f"{where}trace version {version!r} is not supported by this jitguard "
                f"(reads versions {', '.join(map(str, SUPPORTED_VERSIONS))}); upgrade jitguard"
            )
        try:
            events = [Event.from_dict(e) for e in d.get("events") or []]
            kernels = {
                k: KernelTotals(int(v.get("compiles", 0)), int(v.get("autotunes", 0)),
                                float(v.get("compile_ms", 0.0)), float(v.get("autotune_ms", 0.0)))
                for k, v in (d.get("kernels") or {}).items()
            }
            if not kernels:  # rebuild totals from events if a writer left them out
                tmp = cls()
                for e in events:
                    tmp.add(e)
                kernels = tmp.kernels
            return cls(
                process=ProcessInfo.from_dict(d.get("process") or {}),
                events=events,
                kernels=kernels,
                dropped_events=int(d.get("dropped_events") or 0),
                path=path,
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise TraceError(f"{where}malformed trace: {exc}") from None


def load_trace(path: str | os.PathLike) -> Trace:
    """Read a trace file; raises ``TraceError`` with a one-line reason for anything unreadable."""
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise TraceError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{p}: is a directory (pass the trace files, or use load_traces)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{p}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise TraceError(f"{p}: not JSON ({exc.msg} at line {exc.lineno})") from None
    return Trace.from_dict(data, path=p)


def iter_trace_files(paths: Iterable[str | os.PathLike]) -> list[str]:
    """Expand directories to the ``*.json`` files directly inside them (sorted); keep files as given."""
    out: list[str] = []
    for path in paths:
        p = os.fspath(path)
        if os.path.isdir(p):
            out.extend(sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(".json")))
        else:
            out.append(p)
    return out


def load_traces(paths: Iterable[str | os.PathLike]) -> list[Trace]:
    """Load every trace named, expanding directories; raises ``TraceError`` on the first bad one."""
    return [load_trace(p) for p in iter_trace_files(paths)]


TRACE_PLACEHOLDERS = ("rank", "pid")


def check_trace_template(path: str) -> None:
    """``ValueError`` (one line) unless every ``{...}`` in ``path`` is ``{rank}`` or ``{pid}``
    (``{{`` and ``}}`` are literal braces)."""
    import string

    try:
        fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(path) if f is not None]
    except ValueError as exc:
        raise ValueError(f"trace path {path!r}: {exc} (write {{{{ and }}}} for literal braces)") from None
    for name, spec, conv in fields:
        if name not in TRACE_PLACEHOLDERS:
            raise ValueError(f"trace path {path!r}: unknown placeholder {{{name}}}; use {{rank}} or {{pid}}")
        try:
            format(0, spec or "")
            if conv:
                raise ValueError(f"no !{conv} conversions")
        except ValueError as exc:
            raise ValueError(f"trace path {path!r}: bad {{{name}}}: {exc}") from None


def placeholder_names(path: str) -> set[str]:
    """The placeholders used in ``path`` (``{"rank", "pid"}`` or part of it; empty when none)."""
    import string

    try:
        return {f for _, f, _, _ in string.Formatter().parse(path) if f is not None}
    except ValueError:
        return set()


def has_placeholders(path: str) -> bool:
    return bool(placeholder_names(path))


def expand_trace_path(path: str, rank: int | None, pid: int | None = None) -> str:
    """``{rank}`` -> the process's rank (``none`` when it has none), ``{pid}`` -> its pid; a format
    spec applies to numbers (``rank{rank:02d}`` -> ``rank03``) and is ignored for ``none``."""
    import string

    if "{" not in path and "}" not in path:
        return path
    values = {"rank": rank, "pid": os.getpid() if pid is None else pid}
    out = []
    for literal, name, spec, conv in string.Formatter().parse(path):
        out.append(literal)
        if name is None:
            continue
        value = values[name]
        out.append("none" if value is None else format(value, spec or ""))
    return "".join(out)


def write_trace(trace: Trace | dict[str, Any], path: str | os.PathLike) -> str:
    """Write atomically (temp file in the same directory, fsync, rename): readers never see half a
    trace, and a crash mid-write leaves the previous file intact. Returns the path written."""
    p = os.fspath(path)
    data = trace.to_dict() if isinstance(trace, Trace) else trace
    text = json.dumps(data, indent=1, sort_keys=False, allow_nan=False, default=repr) + "\n"
    write_text_atomic(p, text, fsync=True)
    return p


_NULLABLE_STR = {"type": ["string", "null"]}
_NULLABLE_INT = {"type": ["integer", "null"]}
_NULLABLE_NUM = {"type": ["number", "null"]}
_NULLABLE_BOOL = {"type": ["boolean", "null"]}

#: JSON Schema (draft 2020-12) of the current version; tests validate written traces against it.
TRACE_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": f"jitguard trace, version {VERSION}",
    "type": "object",
    "required": ["schema", "version", "process", "events"],
    "properties": {
        "schema": {"const": SCHEMA},
        "version": {"const": VERSION},
        "dropped_events": {"type": "integer", "minimum": 0},
        "kernels": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["compiles", "autotunes", "compile_ms"],
                "properties": {
                    "compiles": {"type": "integer", "minimum": 0},
                    "autotunes": {"type": "integer", "minimum": 0},
                    "compile_ms": {"type": "number", "minimum": 0},
                    "autotune_ms": {"type": "number", "minimum": 0},
                },
            },
        },
        "process": {
            "type": "object",
            "required": ["pid", "host", "argv", "rank", "world_size", "start_wall", "start_monotonic"],
            "properties": {
                "pid": {"type": "integer"},
                "host": {"type": "string"},
                "argv": {"type": "array", "items": {"type": "string"}},
                "rank": _NULLABLE_INT,
                "world_size": _NULLABLE_INT,
                "local_rank": _NULLABLE_INT,
                "python": _NULLABLE_STR,
                "triton_version": _NULLABLE_STR,
                "jitguard_version": _NULLABLE_STR,
                "mode": _NULLABLE_STR,
                "start_wall": {"type": "number"},
                "start_monotonic": {"type": "number"},
                "end_wall": _NULLABLE_NUM,
                "end_monotonic": _NULLABLE_NUM,
                "run_id": _NULLABLE_STR,  # optional (added later, the schema is still version 1)
            },
        },
        "events": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["kind", "seq", "kernel", "kernel_module", "kernel_qualname", "step", "wall",
                             "monotonic", "params", "options", "variant", "diff"],
                "properties": {
                    "kind": {"enum": ["compile", "autotune"]},
                    "seq": {"type": "integer", "minimum": 0},
                    "step": _NULLABLE_INT,
                    "wall": {"type": "number"},
                    "monotonic": {"type": "number"},
                    "thread": _NULLABLE_STR,
                    "kernel": {"type": "string"},
                    "kernel_module": _NULLABLE_STR,
                    "kernel_qualname": _NULLABLE_STR,
                    "kernel_path": _NULLABLE_STR,
                    "kernel_line": _NULLABLE_INT,
                    "call_path": _NULLABLE_STR,
                    "call_line": _NULLABLE_INT,
                    "call_stack": {"type": "array", "items": {"type": "string"}},
                    "warmup": {"type": "boolean"},
                    "autotuning": {"type": "boolean"},
                    "from_trace": {"type": "boolean"},
                    "compile_ms": _NULLABLE_NUM,
                    "disk_cache_hit": _NULLABLE_BOOL,
                    "params": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["name", "index", "kind"],
                            "properties": {
                                "name": {"type": "string"},
                                "index": {"type": "integer", "minimum": 0},
                                "kind": {"enum": list(KINDS)},
                                "type": _NULLABLE_STR,
                                "value_class": {"enum": [*VALUE_CLASSES, None]},
                                "dtype": _NULLABLE_STR,
                                "aligned16": _NULLABLE_BOOL,
                            },
                        },
                    },
                    "options": {"type": "object"},
                    "key": _NULLABLE_STR,
                    "variant": {"type": "integer", "minimum": 1},
                    "closest_variant": _NULLABLE_INT,
                    "diff": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["param", "before", "after", "what"],
                            "properties": {
                                "param": {"type": "string"},
                                "before": {"type": "string"},
                                "after": {"type": "string"},
                                "what": {"type": "string"},
                                "change": {"type": "string"},
                                "option": _NULLABLE_STR,
                            },
                        },
                    },
                    "remedy": _NULLABLE_STR,
                    "overhead_ms": _NULLABLE_NUM,
                    "frontend": {"enum": ["gluon", None]},  # optional (added later, still version 1)
                    "autotune": {
                        "type": ["object", "null"],
                        "properties": {
                            "key": {"type": "object"},
                            "configs": _NULLABLE_INT,
                            "bench_ms": _NULLABLE_NUM,
                            "best_config": _NULLABLE_STR,
                            "cache_hit": _NULLABLE_BOOL,
                        },
                    },
                },
            },
        },
    },
}
