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

import dataclasses
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from jitguard.atomic_write import write_text_atomic

SCHEMA = "jitguard.trace"
VERSION = 2  # 2: events name the kernel's module and qualname apart (for jitguard.warmup)
SUPPORTED_VERSIONS = tuple(range(1, VERSION + 1))  # every version up to the current one loads
DEFAULT_MAX_EVENTS = 20_000
MAX_STRING = 2_000  # characters kept of a raw key / repr / config string
MAX_TRACE_BYTES = 256 * 1024 * 1024  # larger files are refused (a trace of 20,000 events is ~40 MB)
MAX_RANKS = 1 << 16  # world_size and rank bounds (merge builds per-rank tables)
MAX_EVENTS_READ = 1_000_000
MAX_PARAMS = 4096

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
    "kind" (e.g. an int that became a folded constant through None), "config" (another tuned
    config: its constexprs and num_warps/num_stages changed together; expected once per config).
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
        if not isinstance(d, dict):
            raise ValueError(f"an event is {type(d).__name__}, not an object")
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in d
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if missing:  # said as what the file lacks, not as a constructor's TypeError
            raise ValueError(f"an event lacks {', '.join(map(repr, missing))}")
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
        try:
            validate(d)  # every field against the schema tables: what follows cannot trip on a type
        except TraceError as exc:
            raise TraceError(f"{where}{exc}") from None
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
            raise TraceError(f"{where}malformed trace: {_plain(exc)}") from None


def _plain(exc: Exception) -> str:
    """An exception about the file's content in the file's terms, not the constructor's:
    ``Param.__init__() missing 1 required positional argument: 'name'`` -> ``a param lacks 'name'``."""
    import re

    text = str(exc)
    m = re.match(r"(\w+)\.__init__\(\) missing \d+ required (?:positional |keyword-only )?arguments?: (.*)", text)
    if m:
        return f"a {m.group(1).lower()} entry lacks {m.group(2).replace(' and ', ', ')}"
    m = re.match(r"(\w+)\.__init__\(\) got an unexpected keyword argument (.*)", text)
    if m:
        return f"a {m.group(1).lower()} entry has an unknown field {m.group(2)}"
    return text


def read_json_file(path: str | os.PathLike, max_bytes: int = MAX_TRACE_BYTES) -> Any:
    """The JSON document in a regular file of at most ``max_bytes``; ``TraceError`` (one line)
    for anything else: a FIFO or a device (opened without blocking, never read), a link to one,
    a file too large, bytes that are not UTF-8 JSON, nesting too deep for the parser."""
    import stat

    p = os.fspath(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TraceError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{p}: is a directory (pass the trace files, or use load_traces)") from None
    except OSError as exc:
        raise TraceError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise TraceError(f"{p}: is a directory (pass the trace files, or use load_traces)")
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(f"{p}: not a regular file (a FIFO, socket or device): not read")
        if st.st_size > max_bytes:
            raise TraceError(f"{p}: {st.st_size} bytes, larger than the {max_bytes >> 20} MiB a trace may be")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(max_bytes + 1)
        if len(raw) > max_bytes:
            raise TraceError(f"{p}: larger than the {max_bytes >> 20} MiB a trace may be")
    except OSError as exc:
        raise TraceError(f"{p}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TraceError(f"{p}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise TraceError(f"{p}: not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise TraceError(f"{p}: not a jitguard trace (JSON nested too deeply)") from None


def load_trace(path: str | os.PathLike) -> Trace:
    """Read a trace file; raises ``TraceError`` with a one-line reason for anything unreadable,
    not a trace, or with a field that does not match the schema (see ``validate``)."""
    p = os.fspath(path)
    return Trace.from_dict(read_json_file(p), path=p)


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


# ---------------------------------------------------------------------------------------------
# The schema: one table per object, one line per field. ``TRACE_JSON_SCHEMA`` (JSON Schema
# 2020-12, what the tests validate written traces against) and ``validate`` (what ``load_trace``
# checks every field of a file against, without jsonschema) are both built from these tables, so
# a new field is one line here. Fields a later version adds carry ``since=N``; unknown fields are
# ignored (fields are only ever added within a version).
# ---------------------------------------------------------------------------------------------



@dataclass(frozen=True)
class Field:
    """One field of a trace object. ``types``: JSON types, "|"-separated ("string|null"), or
    "any". ``fields``: the object's own table; ``values``: every value of the object has that
    table (a map keyed by name); ``items``: an array's element, a JSON type or a table.
    ``required``: jitguard always writes it; ``needed``: a trace without it cannot be read (the
    other fields have defaults, so older or hand-made traces keep loading)."""

    name: str
    types: str
    required: bool = False  # always written (the JSON schema requires it)
    needed: bool = False  # a reader cannot do without it (no default): load_trace refuses its absence
    enum: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None
    items: Any = None
    max_items: int | None = None
    fields: tuple | None = None
    values: tuple | None = None
    since: int = 1


F = Field

PARAM_FIELDS = (
    F("name", "string", required=True, needed=True),
    F("index", "integer", required=True, needed=True, minimum=0, maximum=MAX_PARAMS),
    F("kind", "string", required=True, needed=True, enum=KINDS),
    F("type", "string|null"),
    F("value_class", "string|null", enum=VALUE_CLASSES),
    F("constexpr", "any"),
    F("dtype", "string|null"),
    F("aligned16", "boolean|null"),
)

DIFF_FIELDS = (
    F("param", "string", required=True, needed=True),
    F("before", "string", required=True, needed=True),
    F("after", "string", required=True, needed=True),
    F("what", "string", required=True, needed=True),
    F("change", "string"),
    F("option", "string|null"),
)

AUTOTUNE_FIELDS = (
    F("key", "object"),
    F("configs", "integer|null", minimum=0),
    F("bench_ms", "number|null"),
    F("best_config", "string|null"),
    F("cache_hit", "boolean|null"),
)

EVENT_FIELDS = (
    F("kind", "string", required=True, needed=True, enum=("compile", "autotune")),
    F("seq", "integer", required=True, needed=True, minimum=0),
    F("step", "integer|null", required=True),
    F("wall", "number", required=True),
    F("monotonic", "number", required=True),
    F("thread", "string|null"),
    F("kernel", "string", required=True, needed=True),
    F("kernel_module", "string|null", required=True, since=2),
    F("kernel_qualname", "string|null", required=True, since=2),
    F("kernel_path", "string|null"),
    F("kernel_line", "integer|null", minimum=0),
    F("call_path", "string|null"),
    F("call_line", "integer|null", minimum=0),
    F("call_stack", "array", items="string", max_items=64),
    F("warmup", "boolean"),
    F("autotuning", "boolean"),
    F("from_trace", "boolean"),  # compiled ahead of traffic by jitguard.warmup (version 2)
    F("compile_ms", "number|null"),
    F("disk_cache_hit", "boolean|null"),
    F("params", "array", required=True, items=PARAM_FIELDS, max_items=MAX_PARAMS),
    F("options", "object", required=True),
    F("key", "string|null"),
    F("variant", "integer", required=True, minimum=1),
    F("closest_variant", "integer|null", minimum=1),
    F("diff", "array", required=True, items=DIFF_FIELDS, max_items=2 * MAX_PARAMS),
    F("remedy", "string|null"),
    F("overhead_ms", "number|null"),
    F("frontend", "string|null", enum=("gluon",)),  # optional: added within version 1 (a @gluon.jit kernel)
    F("autotune", "object|null", fields=AUTOTUNE_FIELDS),
)

PROCESS_FIELDS = (
    F("pid", "integer", required=True, minimum=0),
    F("host", "string", required=True),
    F("argv", "array", required=True, items="string", max_items=4096),
    F("rank", "integer|null", required=True, minimum=0, maximum=MAX_RANKS - 1),
    F("world_size", "integer|null", required=True, minimum=1, maximum=MAX_RANKS),
    F("local_rank", "integer|null", minimum=0, maximum=MAX_RANKS - 1),
    F("python", "string|null"),
    F("triton_version", "string|null"),
    F("jitguard_version", "string|null"),
    F("mode", "string|null"),
    F("start_wall", "number", required=True),
    F("start_monotonic", "number", required=True),
    F("end_wall", "number|null"),
    F("end_monotonic", "number|null"),
    F("run_id", "string|null"),  # optional: added within version 1
)

KERNEL_TOTALS_FIELDS = (
    F("compiles", "integer", required=True, minimum=0),
    F("autotunes", "integer", required=True, minimum=0),
    F("compile_ms", "number", required=True, minimum=0),
    F("autotune_ms", "number", minimum=0),
)

TRACE_FIELDS = (
    F("schema", "string", required=True, needed=True, enum=(SCHEMA,)),
    F("version", "integer", required=True, needed=True, enum=SUPPORTED_VERSIONS),
    F("process", "object", required=True, fields=PROCESS_FIELDS),
    F("events", "array", required=True, items=EVENT_FIELDS, max_items=MAX_EVENTS_READ),
    F("kernels", "object", values=KERNEL_TOTALS_FIELDS),
    F("dropped_events", "integer", minimum=0),
)

_PY_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
                             "null": type(None), "array": list, "object": dict}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    for name in ("string", "integer", "number", "null", "array", "object"):
        if isinstance(value, _PY_TYPES[name]):
            return name
    return type(value).__name__


def _type_ok(value: Any, types: str) -> bool:
    if types == "any":
        return True
    got = _json_type(value)
    allowed = types.split("|")
    return got in allowed or (got == "integer" and "number" in allowed)


def _noun(table: tuple) -> str:
    return {id(EVENT_FIELDS): "an event", id(PARAM_FIELDS): "a param entry", id(DIFF_FIELDS): "a diff entry",
            id(AUTOTUNE_FIELDS): "an autotune entry", id(PROCESS_FIELDS): "the process",
            id(KERNEL_TOTALS_FIELDS): "a kernel entry"}.get(id(table), "the trace")


def _check_object(obj: Any, table: tuple, where: str, version: int) -> None:
    if not isinstance(obj, dict):
        raise TraceError(f"{where or 'the document'}: expected an object, got {_json_type(obj)}")
    lacking = [f.name for f in table if f.needed and version >= f.since and f.name not in obj]
    if lacking:
        raise TraceError(f"{where + ': ' if where else ''}{_noun(table)} lacks {', '.join(map(repr, lacking))}")
    for f in table:
        if f.name in obj:
            _check_value(obj[f.name], f, f"{where}.{f.name}" if where else f.name, version)


def _check_value(value: Any, f: Field, where: str, version: int) -> None:
    if not _type_ok(value, f.types):
        shown = f" ({value!r:.40})" if not isinstance(value, (dict, list)) else ""
        raise TraceError(f"{where}: expected {f.types.replace('|', ' or ')}, got {_json_type(value)}{shown}")
    if value is None:
        return
    if f.enum is not None and value not in f.enum:
        raise TraceError(f"{where}: {value!r:.40} is not one of {', '.join(map(repr, f.enum))}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if f.minimum is not None and value < f.minimum:
            raise TraceError(f"{where}: {value} is below {f.minimum}")
        if f.maximum is not None and value > f.maximum:
            raise TraceError(f"{where}: {value} is above the bound {f.maximum}")
    if isinstance(value, list):
        if f.max_items is not None and len(value) > f.max_items:
            raise TraceError(f"{where}: {len(value)} items, more than the bound {f.max_items}")
        for i, item in enumerate(value):
            if isinstance(f.items, tuple):
                _check_object(item, f.items, f"{where}[{i}]", version)
            elif f.items is not None and not _type_ok(item, f.items):
                raise TraceError(f"{where}[{i}]: expected {f.items}, got {_json_type(item)}")
    if isinstance(value, dict):
        if f.fields is not None:
            _check_object(value, f.fields, where, version)
        if f.values is not None:
            for k, v in value.items():
                _check_object(v, f.values, f"{where}[{k!r:.60}]", version)


def validate(data: Any) -> None:
    """Check a loaded trace document field by field against the tables above; ``TraceError``
    naming the first bad field (``events[3].kernel: expected string, got integer (12345)``)."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise TraceError(f"not a jitguard trace (no \"schema\": \"{SCHEMA}\")")
    version = data.get("version")
    if version not in SUPPORTED_VERSIONS or isinstance(version, bool):
        raise TraceError(
            f"trace version {version!r:.40} is not supported by this jitguard "
            f"(reads versions {', '.join(map(str, SUPPORTED_VERSIONS))}); upgrade jitguard")
    try:
        _check_object(data, TRACE_FIELDS, "", version)
    except TraceError as exc:
        raise TraceError(f"malformed trace: {exc}") from None


def _field_schema(f: Field) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if f.types != "any":
        types = f.types.split("|")
        out["type"] = types[0] if len(types) == 1 else types
        if f.enum is not None:
            out["enum"] = [*f.enum, *([None] if "null" in types else [])]
    if f.minimum is not None:
        out["minimum"] = f.minimum
    if f.maximum is not None:
        out["maximum"] = f.maximum
    if f.items is not None:
        out["items"] = _table_schema(f.items) if isinstance(f.items, tuple) else {"type": f.items}
    if f.max_items is not None:
        out["maxItems"] = f.max_items
    if f.fields is not None:
        out.update(_table_schema(f.fields, with_type=False))
    if f.values is not None:
        out["additionalProperties"] = _table_schema(f.values)
    return out


def _table_schema(table: tuple, with_type: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object"} if with_type else {}
    out["required"] = [f.name for f in table if f.required and f.since <= VERSION]
    out["properties"] = {f.name: _field_schema(f) for f in table}
    return out


#: JSON Schema (draft 2020-12) of the current version (what jitguard writes), built from the tables
#: above; ``validate`` reads every supported version.
TRACE_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": f"jitguard trace, version {VERSION}",
    **_table_schema(TRACE_FIELDS),
}
