"""``jitguard.warmup``: compile, before traffic, exactly the variants a recorded run compiled.

A trace (``jitguard run --trace``, ``watch(trace=...)``, the vLLM plugin; one process or a directory
of ranks) lists every variant each kernel compiled: its specialization key, parameter by parameter.
``warmup(traces)`` imports each kernel (``kernel_module`` + ``kernel_qualname``, trace version 2),
rebuilds arguments that give exactly that specialization and compiles them with Triton's own
``kernel.warmup(...)`` (no launch), then loads each binary and builds its launcher, as a first
launch would (``compat.load_compiled``):

* pointers: stand-ins (``jitguard.testing.FakeTensor``: ``data_ptr()``, ``dtype``) with the recorded
  element type, at a 16-byte aligned address, or 4 bytes off it where the trace recorded an
  unaligned pointer;
* ints: a value of the recorded width (i32 / i64 / u64) and value class (16 for "divisible by 16",
  17 for none, 1 where Triton folded it); bools, floats and ``None`` likewise;
* constexprs: the recorded value (a literal, or an importable name such as
  ``triton.language.float16``); launch options (``num_warps`` ...) as recorded, in their order;
* autotuned kernels: the recorded best config per autotune key goes into the autotuner's cache, and
  only the variants of the winning configs are compiled.

Before compiling, the rebuilt arguments go through Triton's own binder (``compat.make_binder``, the
code ``JITFunction.run`` uses) and the key it makes must equal the recorded key, character for
character; a variant that can't be rebuilt that way is reported with the reason (parameters changed
since the trace, an argument jitguard doesn't rebuild, another Triton version's key ...), never
compiled from a guess. ``check(traces)`` does the same binding without compiling, on a machine
without a GPU (``jitguard warmup --check`` in CI).

At process start: ``JITGUARD_WARMUP=PATH`` (traces or directories, ``os.pathsep``-separated), read by
``jitguard run --warmup`` and the vLLM plugin (``arm_from_env``). A program's kernels and its
device are known only once it runs: the warm-up runs at the first compile of the process (every
recorded kernel found by module and qualname then), and for a kernel found later at its own first
compile; the vLLM plugin also runs it at the start of the worker's ``compile_or_warm_up_model``,
before vLLM's own warm-up and before serving.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from jitguard.runtime import compat, keys
from jitguard.runtime.trace import MAX_STRING, Event, Trace, TraceError, iter_trace_files, load_trace
from jitguard.testing import FakeTensor  # the pointer stand-in: data_ptr() and dtype

ENV_WARMUP = "JITGUARD_WARMUP"
_BASE_PTR = 1 << 20  # the stand-ins' data_ptr(): 16-byte aligned
_UNALIGNED = 4  # bytes off that address for a pointer recorded as not 16-byte aligned
_INT_BASE = {"i64": 1 << 32, "u64": 1 << 63}  # the smallest magnitudes Triton types i64 / u64
_INT_TYPES = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


class WarmupError(RuntimeError):
    """``warmup(..., strict=True)`` found variants it could not rebuild; ``.report`` has them."""

    def __init__(self, message: str, report: "WarmupReport"):
        super().__init__(message)
        self.report = report


class _Skip(Exception):
    """A variant that can't be rebuilt; the message is the reason, in words."""


# ---------------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------------

@dataclass
class VariantResult:
    """One recorded variant. ``status``: "warmed" (compiled now), "present" (already compiled in
    this process), "launch" (the launch that started the warm-up compiles it), "checked" (rebuilt
    and its key verified, not compiled: ``check``) or "skipped" (``reason`` says why)."""

    kernel: str
    status: str
    reason: str | None = None
    key: str | None = None
    source: str = ""  # trace path and event seq
    variant: int | None = None  # the variant number in that trace
    compile_ms: float | None = None
    what: str = ""  # the specialization in words

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class AutotuneResult:
    """One recorded autotune key. ``status``: "primed" (the best config put in the autotuner's
    cache), "present" (it had one), "checked" or "skipped" (``reason``)."""

    kernel: str
    key: list
    config: str | None
    status: str
    reason: str | None = None
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class WarmupReport:
    traces: list[str]
    mode: str  # "warmup" or "check"
    target: str | None = None  # e.g. "cuda:90"
    variants: list[VariantResult] = field(default_factory=list)
    autotune: list[AutotuneResult] = field(default_factory=list)
    other_configs: int = 0  # configs an autotuner benchmarked and did not pick: not compiled
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def warmed(self) -> list[VariantResult]:
        return [v for v in self.variants if v.status == "warmed"]

    @property
    def skipped(self) -> list[VariantResult | AutotuneResult]:
        return ([v for v in self.variants if v.status == "skipped"]
                + [a for a in self.autotune if a.status == "skipped"])

    @property
    def ok(self) -> bool:
        return not self.skipped

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.variants:
            out[v.status] = out.get(v.status, 0) + 1
        return out

    def summary(self) -> str:
        """A few lines: what was warmed (or checked), what was skipped and why."""
        kernels = {v.kernel for v in self.variants}
        c = self.counts()
        done = c.get("warmed" if self.mode == "warmup" else "checked", 0)
        verb = "warmed" if self.mode == "warmup" else "rebuilt and checked"
        head = (f"jitguard warmup: {verb} {done} of {len(self.variants)} variant"
                f"{'s' if len(self.variants) != 1 else ''} of {len(kernels)} kernel"
                f"{'s' if len(kernels) != 1 else ''} in {self.seconds:.2f} s")
        extra = [f"{c[s]} {s}" for s in ("present", "launch") if c.get(s)]
        if self.autotune:
            done_at = sum(1 for a in self.autotune if a.status in ("primed", "present", "checked"))
            extra.append(f"{done_at} of {len(self.autotune)} autotune keys "
                         f"{'primed' if self.mode == 'warmup' else 'checked'}")
        if self.other_configs:
            extra.append(f"{self.other_configs} autotune configs that did not win left out")
        lines = [head + (f" ({', '.join(extra)})" if extra else "")
                 + (f" for {self.target}" if self.target else "")]
        groups: dict[tuple[str, str | None], list] = {}
        for s in self.skipped:
            groups.setdefault((s.kernel, s.reason), []).append(s)
        for (kernel, reason), items in groups.items():
            kind = "autotune key" if isinstance(items[0], AutotuneResult) else "variant"
            if len(items) == 1:
                what = f" [{items[0].what}]" if isinstance(items[0], VariantResult) and items[0].what else ""
                lines.append(f"  skipped a {kind} of {kernel}{what}: {reason}")
            else:
                lines.append(f"  skipped {len(items)} {kind}s of {kernel}: {reason}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"traces": self.traces, "mode": self.mode, "target": self.target,
                "seconds": round(self.seconds, 4), "counts": self.counts(),
                "other_configs": self.other_configs, "notes": self.notes,
                "variants": [v.to_dict() for v in self.variants],
                "autotune": [a.to_dict() for a in self.autotune]}


# ---------------------------------------------------------------------------------------------
# what the traces recorded, per kernel
# ---------------------------------------------------------------------------------------------

@dataclass
class _Recorded:
    event: Event
    source: str


@dataclass
class _KernelPlan:
    name: str  # "module.qualname", as the trace's ``kernel``
    module: str | None  # None in version 1 traces: resolved from ``name``
    qualname: str | None
    compiles: list[_Recorded] = field(default_factory=list)
    autotunes: list[_Recorded] = field(default_factory=list)
    _keys: set = field(default_factory=set)
    _tune_keys: set = field(default_factory=set)


def _as_traces(traces_or_dir: Any) -> tuple[list[Trace], list[str], list[str]]:
    """(traces, their paths, notes). A named file must be a trace; a ``*.json`` in a directory that
    is not one (a merged report) is left out with a note; a directory without traces is an error."""
    items = [traces_or_dir] if isinstance(traces_or_dir, (str, os.PathLike, Trace)) else list(traces_or_dir)
    out: list[Trace] = []
    notes: list[str] = []
    for item in items:
        if isinstance(item, Trace):
            out.append(item)
            continue
        path = os.fspath(item)
        if not os.path.isdir(path):
            out.append(load_trace(path))
            continue
        found = 0
        for f in iter_trace_files([path]):
            try:
                out.append(load_trace(f))
                found += 1
            except TraceError as exc:
                notes.append(f"left out {exc}")
        if not found:
            raise TraceError(f"{path}: no jitguard traces (*.json) in this directory")
    return out, [t.path or "<trace>" for t in out], notes


def _plans(traces: list[Trace], report: WarmupReport) -> dict[str, _KernelPlan]:
    plans: dict[str, _KernelPlan] = {}
    for t in traces:
        where = t.path or "<trace>"
        recorded_with = t.process.triton_version
        if recorded_with and recorded_with != compat.triton_version():
            report.notes.append(f"{where} was recorded with Triton {recorded_with}, this is Triton "
                                f"{compat.triton_version()}: their keys differ (launch options, key "
                                "format), so its variants don't rebuild here")
        if t.dropped_events:
            report.notes.append(f"{where}: {t.dropped_events} events were not kept (max_events): "
                                "variants among them are not warmed")
        for e in t.events:
            if e.kernel in ("?", "") or e.kind not in ("compile", "autotune"):
                continue
            plan = plans.get(e.kernel)
            if plan is None:
                plan = plans[e.kernel] = _KernelPlan(e.kernel, e.kernel_module, e.kernel_qualname)
            elif plan.module is None and e.kernel_module:
                plan.module, plan.qualname = e.kernel_module, e.kernel_qualname
            rec = _Recorded(e, f"{where}#{e.seq}")
            if e.kind == "compile":
                if e.key not in plan._keys:
                    plan._keys.add(e.key)
                    plan.compiles.append(rec)
            elif e.autotune is not None:
                tkey = (_hashable(list((e.autotune.key or {}).values())), e.autotune.best_config)
                if tkey not in plan._tune_keys:
                    plan._tune_keys.add(tkey)
                    plan.autotunes.append(rec)
    return plans


def _hashable(value: Any) -> Any:
    """JSON gave lists where the autotuner's key had tuples."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


# ---------------------------------------------------------------------------------------------
# finding the kernel
# ---------------------------------------------------------------------------------------------

def _full_name(jf: Any) -> str:
    fn = getattr(jf, "fn", None)
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"


def _attr_path(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _resolve(plan: _KernelPlan, *, import_modules: bool = True) -> tuple[Any, str | None]:
    """(the kernel object as its module holds it, None) or (None, why it can't be found). The object
    found must be the recorded kernel: its function's ``__module__.__qualname__`` is the recorded name."""
    if plan.module is not None:
        splits = [(plan.module, plan.qualname or "")]
    else:  # version 1: the name is module + "." + qualname, split where an import works
        parts = plan.name.split(".")
        splits = [(".".join(parts[:i]), ".".join(parts[i:])) for i in range(len(parts) - 1, 0, -1)]
    why: list[str] = []
    for module, qual in splits:
        if "<locals>" in qual:
            return None, (f"defined inside a function ({qual}): it can't be imported; pass it with "
                          "warmup(..., kernels=[kernel])")
        mod = sys.modules.get(module)
        if mod is None:
            if module == "__main__" or not import_modules:
                why.append(f"module {module} is not imported")
                continue
            try:
                mod = importlib.import_module(module)
            except ImportError as exc:
                why.append(f"cannot import {module}: {exc}")
                continue
            except Exception as exc:  # importing user code may fail in any way: report it
                why.append(f"importing {module} raised {type(exc).__name__}: {exc}")
                continue
        obj = _attr_path(mod, qual)
        if obj is None:
            why.append(f"{module} has no {qual}")
            continue
        try:
            jf = compat.base_jit_function(obj)
        except TypeError:
            why.append(f"{module}.{qual} is not a @triton.jit kernel")
            continue
        if _full_name(jf) != plan.name:
            why.append(f"{module}.{qual} is the kernel {_full_name(jf)}")
            continue
        return obj, None
    if plan.module == "__main__" or (plan.module is None and plan.name.startswith("__main__.")):
        return None, ("defined in the program's __main__: call jitguard.warmup after it is defined, "
                      "or pass it with kernels=[kernel]")
    return None, "; ".join(why) or "not found"


def _outermost(plan: _KernelPlan, obj: Any) -> Any:
    """``obj``, or the autotuner/heuristics wrapper its module holds around it (for a bare
    JITFunction given or compiling: the recorded best configs go into that autotuner's cache)."""
    jf = compat.base_jit_function(obj)
    if obj is jf and plan.autotunes:
        outer, _ = _resolve(plan, import_modules=False)
        if outer is not None and compat.base_jit_function(outer) is jf:
            return outer
    return obj


def _given(kernels: Iterable[Any] | None) -> tuple[dict[str, Any] | None, set[str]]:
    """``kernels=``: objects (used as they are: a kernel loaded outside the import system is warmed
    in place) and names ("module.qualname" or the qualname); None: every recorded kernel."""
    if kernels is None:
        return None, set()
    objs: dict[str, Any] = {}
    names: set[str] = set()
    for k in ([kernels] if isinstance(kernels, str) or not isinstance(kernels, Iterable) else kernels):
        if isinstance(k, str):
            names.add(k)
        else:
            objs[_full_name(compat.base_jit_function(k))] = k
    return objs, names


def _selected(plan: _KernelPlan, objs: dict | None, names: set[str]) -> bool:
    if objs is None:
        return True
    qual = plan.qualname or plan.name.rsplit(".", 1)[-1]
    return plan.name in objs or plan.name in names or qual in names


# ---------------------------------------------------------------------------------------------
# rebuilding one variant's arguments
# ---------------------------------------------------------------------------------------------

_TL_DTYPES: list | None = None


def _pointer_dtypes(type_name: str) -> list:
    """triton.language dtypes to try for a pointer of Triton type ``*type_name``; Triton's binder
    decides (the dtype whose name is the type's comes first)."""
    global _TL_DTYPES
    if _TL_DTYPES is None:
        import triton.language as tl

        found = {}
        for attr in dir(tl):
            d = getattr(tl, attr)
            if isinstance(d, tl.dtype) and not isinstance(d, tl.pointer_type) and str(d) != "void":
                found.setdefault(str(d), d)
        _TL_DTYPES = list(found.values())

    def rank(d) -> tuple:
        s = str(d)
        return (s != type_name, s.replace("uint", "u").replace("int", "i") != type_name, s)

    return sorted(_TL_DTYPES, key=rank)


def _named_object(text: str) -> Any:
    """``triton.language.float16`` -> that object, when its module is importable and its repr is
    the text; else _Skip."""
    if _DOTTED.fullmatch(text):
        parts = text.split(".")
        for i in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:i])
            try:
                mod = sys.modules.get(module) or importlib.import_module(module)
            except Exception:
                continue
            obj = _attr_path(mod, ".".join(parts[i:]))
            if obj is not None and repr(obj) == text:
                return obj
    raise _Skip(f"not a Python literal nor an importable name: {text}")


def _candidates(name: str, declared_constexpr: bool, entry: tuple[Any, Any]) -> list:
    """Argument values that give the specialization ``entry`` (the binder picks among them)."""
    ty, attr = entry
    if declared_constexpr or ty == "constexpr":
        if isinstance(attr, compat._Raw):
            try:
                return [_named_object(str(attr))]
            except _Skip as exc:
                raise _Skip(f"constexpr {name}: {exc}") from None
        return [attr]  # a literal; for a plain int Triton folded, the 1 (or None, True ...)
    ty = str(ty)
    if ty.startswith("*"):
        base = ty[2:] if ty.startswith("*k") else ty[1:]
        ptr = _BASE_PTR + (_UNALIGNED if attr == "" else 0)
        return [FakeTensor(ptr, d) for d in _pointer_dtypes(base)]
    if ty in ("i1", "u1"):
        return [True, False]
    if ty in _INT_TYPES:
        base = _INT_BASE.get(ty, 0)
        return [base + 16, base + 32] if attr == "D" else [base + 17, base + 3]
    if ty.startswith(("fp", "bf")):
        return [1.5]
    raise _Skip(f"parameter {name} has Triton type {ty!r}, an argument jitguard does not rebuild "
                "(a tensor descriptor, tuple or other object)")


def _clipped(key: str) -> bool:
    """``trace._clip`` kept the first ``MAX_STRING - 12`` characters and wrote ``...[+N]``."""
    return len(key) > MAX_STRING - 12 and re.search(r"\.\.\.\[\+\d+\]$", key) is not None


def _words(variant: keys.Variant) -> str:
    return ", ".join(f"{p.name}: {keys.describe(p)}" for p in variant.params)


def _entries(text: str) -> list | None:
    return compat.parse_specialization(compat.split_key(text)[0])


def _rebuild(jf: Any, binder: Any, recorded: Event) -> tuple[tuple, dict, str]:
    """(args, launch options, key) that Triton's binder turns into exactly the recorded key."""
    raw = recorded.key
    if not raw:
        raise _Skip("the trace has no key for it")
    if _clipped(raw):
        raise _Skip(f"its key was clipped in the trace (longer than {MAX_STRING} characters)")
    params = compat.jit_params(jf)
    names = [p[0] for p in params]
    was = [p.name for p in recorded.params]
    if was and was != names:
        raise _Skip(f"the kernel's parameters changed since the trace: recorded ({', '.join(was)}), "
                    f"now ({', '.join(names)})")
    text = compat.normalized_key(jf, raw)
    entries = _entries(text) if text else None
    if entries is None or len(entries) != len(params):
        raise _Skip("the recorded key does not read as this kernel's specialization "
                    f"({len(entries) if entries else 0} entries for {len(params)} parameters)")
    options = compat.parse_options(compat.split_key(text)[1])
    if options is None:
        raise _Skip(f"cannot read the recorded launch options ({compat.split_key(text)[1][:120]})")
    launch = {k: v for k, v in options.items() if k not in compat.IMPLICIT_OPTIONS}
    cands = [_candidates(p[0], p[1], e) for p, e in zip(params, entries)]
    choice = [0] * len(cands)
    key = None
    for _ in range(max((len(c) for c in cands), default=1)):
        args = tuple(c[i] for c, i in zip(cands, choice))
        try:
            key, got_text = compat.bind_key(binder, jf, args, compat.run_kwargs(jf, launch))
        except Exception as exc:
            raise _Skip(f"Triton's binder refused the rebuilt arguments: {type(exc).__name__}: {exc}") from None
        if key == raw:
            return args, launch, key
        got = _entries(got_text) or []
        wrong = [i for i, (a, b) in enumerate(zip(got, entries)) if repr(a) != repr(b)]
        moved = False
        for i in wrong:
            if choice[i] + 1 < len(cands[i]):
                choice[i] += 1
                moved = True
        if not moved:
            break
    rebuilt = keys.decode_key(compat.normalized_key(jf, key) or key, params)
    want = keys.decode_key(text, params)
    diffs = "; ".join(f"{d.param}{' ' + d.option if d.option else ''}: recorded {d.before}, "
                      f"rebuilt {d.after}" for d in keys.diff(want, rebuilt)[:4])
    raise _Skip("the rebuilt key differs from the recorded one"
                + (f" ({diffs})" if diffs else f" (recorded {raw[:160]!r}, rebuilt {key[:160]!r})"))


# ---------------------------------------------------------------------------------------------
# autotuned kernels
# ---------------------------------------------------------------------------------------------

def _matches_config(event: Event, config_kw: dict[str, Any]) -> bool:
    """The compile ran with this config's constexprs and launch options."""
    by_name = {p.name: p for p in event.params}
    for k, v in config_kw.items():
        p = by_name.get(k)
        if p is not None:
            if p.type != "constexpr" or p.constexpr != v:
                return False
        elif k not in event.options or event.options[k] != v:
            return False
    return True


def _autotune(plan: _KernelPlan, tuner: Any, check: bool, report: WarmupReport) -> list[dict]:
    """Prime ``tuner`` with each recorded best config; returns the winning configs' kwargs."""
    winners: list[dict] = []
    by_str = {str(c): c for c in getattr(tuner, "configs", [])} if tuner is not None else {}
    cache = compat.autotuner_cache(tuner) if tuner is not None else None
    for rec in plan.autotunes:
        info = rec.event.autotune
        key = _hashable(list((info.key or {}).values()))
        res = AutotuneResult(plan.name, list(key), info.best_config, "skipped", source=rec.source)
        report.autotune.append(res)
        config = by_str.get(info.best_config)
        if tuner is None:
            res.reason = "recorded as autotuned, but the kernel here is not wrapped by @triton.autotune"
        elif config is None:
            res.reason = (f"its recorded best config ({info.best_config}) is not one of the autotuner's "
                          f"{len(by_str)} configs now")
        elif cache is None:
            res.reason = f"Triton {compat.triton_version()}'s autotuner has no config cache jitguard knows"
        else:
            winners.append(compat.config_kwargs(config))
            if key in cache:
                res.status = "present"
            elif check:
                res.status = "checked"
            else:
                cache[key] = config
                res.status = "primed"
    return winners


# ---------------------------------------------------------------------------------------------
# one kernel, then everything
# ---------------------------------------------------------------------------------------------

def _warm_kernel(plan: _KernelPlan, obj: Any, binder: Any, device: Any, *, check: bool,
                 report: WarmupReport, launching_key: str | None = None) -> None:
    from jitguard.runtime.predict import _layers

    jf, _heuristics, tuner = _layers(obj)
    winners = _autotune(plan, tuner, check, report)
    present = set(compat.kernel_cache_keys(jf, device)) if not check else set()
    for rec in plan.compiles:
        ev = rec.event
        if ev.autotuning and plan.autotunes and not any(_matches_config(ev, w) for w in winners):
            report.other_configs += 1  # a config the autotuner tried and did not pick
            continue
        res = VariantResult(plan.name, "skipped", key=ev.key, source=rec.source, variant=ev.variant,
                            what=", ".join(f"{p.name}: {keys.describe(p)}" for p in ev.params))
        report.variants.append(res)
        try:
            args, launch, key = _rebuild(jf, binder, ev)
        except _Skip as exc:
            res.reason = str(exc)
            continue
        if check:
            res.status = "checked"
        elif key in present:
            res.status = "present"
        elif key == launching_key:
            res.status = "launch"
        else:
            from jitguard.runtime.watch import WARMING_FROM_TRACE

            t0 = time.perf_counter()
            WARMING_FROM_TRACE.active = True  # a watcher records it as expected, not a recompile
            try:
                jf.warmup(*args, grid=(1,), **launch)
                # what the first launch would do next: load the binary, build the launcher
                compat.load_compiled(compat.compiled_kernel(jf, key, device))
            except Exception as exc:
                res.reason = f"compiling it raised {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                continue
            finally:
                WARMING_FROM_TRACE.active = False
            res.compile_ms = round((time.perf_counter() - t0) * 1e3, 3)
            if key in compat.kernel_cache_keys(jf, device):
                res.status = "warmed"
                present.add(key)
            else:
                res.reason = "Triton compiled it, but the recorded key is not in the kernel's cache afterwards"


def _run(traces_or_dir: Any, *, kernels: Any, strict: bool, check: bool, target: str | None) -> WarmupReport:
    t0 = time.perf_counter()
    traces, paths, notes = _as_traces(traces_or_dir)
    report = WarmupReport(paths, "check" if check else "warmup", notes=notes)
    plans = _plans(traces, report)
    compat._import_triton()
    if check:
        device, tgt = None, compat.parse_target(target or "cuda:90")
    else:
        try:
            device, tgt = compat.active_device_and_target()
        except Exception as exc:
            raise RuntimeError(f"jitguard.warmup compiles for the active GPU, and Triton has none here "
                               f"({type(exc).__name__}: {exc}); jitguard warmup --check verifies the "
                               "traces without compiling") from None
    report.target = compat.target_text(tgt)
    objs, names = _given(kernels)
    matched: set[str] = set()
    for plan in plans.values():
        if not _selected(plan, objs, names):
            continue
        matched.add(plan.name)
        obj, why = (_outermost(plan, objs[plan.name]), None) if objs and plan.name in objs else _resolve(plan)
        if obj is None:
            for rec in plan.compiles:
                report.variants.append(VariantResult(plan.name, "skipped", why, rec.event.key, rec.source,
                                                     rec.event.variant))
            continue
        binder = compat.make_binder(compat.base_jit_function(obj), tgt)
        _warm_kernel(plan, obj, binder, device, check=check, report=report)
    for name in sorted(set(objs or {}) | names):
        if name not in matched and not any(p.name.rsplit(".", 1)[-1] == name for p in plans.values()
                                           if p.name in matched):
            report.notes.append(f"{name}: the traces recorded no variant of it")
    report.seconds += time.perf_counter() - t0
    if strict and report.skipped:
        raise WarmupError(report.summary(), report)
    return report


def warmup(traces_or_dir: Any, *, kernels: Any = None, strict: bool = False) -> WarmupReport:
    """Compile every variant the traces recorded, before traffic; returns a ``WarmupReport``.

    traces_or_dir: a trace file, a directory of them (one per rank), a ``Trace``, or a list of these;
        variants recorded by several ranks are compiled once.
    kernels: None (every recorded kernel, imported by module and qualname), or kernels and names to
        warm only those: kernel objects are warmed in place (a kernel loaded outside the import
        system, or defined in ``__main__``), names are "module.qualname" or the qualname.
    strict: raise ``WarmupError`` (with the report) if any recorded variant could not be rebuilt;
        by default those are in ``report.skipped`` with the reason.

    Compiles for Triton's active device (``kernel.warmup``, no launch; Triton's disk cache serves
    what it has)."""
    return _run(traces_or_dir, kernels=kernels, strict=strict, check=False, target=None)


def check(traces_or_dir: Any, *, kernels: Any = None, target: str = "cuda:90",
          strict: bool = False) -> WarmupReport:
    """Rebuild every recorded variant and verify its key with Triton's binder for ``target``,
    without compiling (no GPU needed): what ``jitguard warmup --check`` runs in CI. Where Triton has
    no active driver, the kernels are imported under jitguard's stand-in driver (Triton 3.2's
    ``@triton.autotune`` asks the driver for a benchmarker when a module is imported)."""
    compat._import_triton()
    with contextlib.ExitStack() as stack:
        try:
            compat.active_device_and_target()
        except Exception:
            from jitguard.testing import stand_in_driver

            stack.enter_context(stand_in_driver())
        return _run(traces_or_dir, kernels=kernels, strict=strict, check=True, target=target)


# ---------------------------------------------------------------------------------------------
# at process start: JITGUARD_WARMUP
# ---------------------------------------------------------------------------------------------

class _Armed:
    """The warm-up a process will run at its first compile (``arm``)."""

    def __init__(self, paths: list[str], plans: dict[str, _KernelPlan], report: WarmupReport, quiet: bool):
        self.paths, self.plans, self.report, self.quiet = paths, plans, report, quiet
        self.lock = threading.RLock()
        self.local = threading.local()
        self.eager_done = False
        self.warmed_objects: dict[int, Any] = {}  # id(jit function) -> it (kept alive: ids stay unique)
        self.hook = None

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)

    def _pass(self, jobs: list[tuple[_KernelPlan, Any]], launching_key: str | None, why: str) -> None:
        device, tgt = compat.active_device_and_target()
        part = WarmupReport(self.paths, "warmup", compat.target_text(tgt))
        t0 = time.perf_counter()
        for plan, obj in jobs:
            jf = compat.base_jit_function(obj)
            self.warmed_objects[id(jf)] = jf
            _warm_kernel(plan, obj, compat.make_binder(jf, tgt), device, check=False, report=part,
                         launching_key=launching_key)
        part.seconds = time.perf_counter() - t0
        self.report.variants.extend(part.variants)
        self.report.autotune.extend(part.autotune)
        self.report.other_configs += part.other_configs
        self.report.seconds += part.seconds
        self.report.target = part.target
        if part.variants or part.autotune:
            self.say(part.summary().replace("jitguard warmup:", f"jitguard warmup ({why}):", 1))

    def warm_all(self, *, launching: Any = None, launching_key: str | None = None, why: str = "") -> None:
        """Every recorded kernel that can be found now (by module and qualname; ``launching``, the
        kernel compiling now, in place)."""
        with self.lock:
            self.eager_done = True
            jobs = []
            for plan in self.plans.values():
                if launching is not None and plan.name == _full_name(launching):
                    if id(launching) not in self.warmed_objects:
                        jobs.append((plan, _outermost(plan, launching)))
                    continue
                obj, _why = _resolve(plan)
                if obj is not None and id(compat.base_jit_function(obj)) not in self.warmed_objects:
                    jobs.append((plan, obj))
            self.local.busy = True
            try:
                self._pass(jobs, launching_key, why or "at start-up")
            finally:
                self.local.busy = False

    def on_compile(self, kwargs: dict) -> None:
        if getattr(self.local, "busy", False):
            return  # a compile of the warm-up itself
        call = compat.compile_call(kwargs)
        jf = call.jit_function
        if jf is None:
            return
        if not self.eager_done:
            self.warm_all(launching=jf, launching_key=call.key, why="at the first compile")
            return
        plan = self.plans.get(_full_name(jf))
        if plan is None or id(jf) in self.warmed_objects:
            return
        with self.lock:
            self.local.busy = True
            try:
                self._pass([(plan, _outermost(plan, jf))], call.key, f"at the first compile of {plan.name}")
            finally:
                self.local.busy = False


_ARMED: _Armed | None = None


def armed() -> _Armed | None:
    return _ARMED


def _install_hook(state: _Armed) -> None:
    """Put the warm-up's hook on Triton's pre-compile slot, beneath jitguard's watcher when it is
    already there (the watcher chains to what it found and restores it when it stops)."""
    from jitguard.runtime import watch as watch_mod

    pre, _post = compat.compile_hook_sites()
    with watch_mod._STATE.lock:
        restack = bool(watch_mod._STATE.watches) and bool(watch_mod._STATE.saved)
        if restack:
            watch_mod._STATE.uninstall()
        previous = pre.get()

        def hook(*args, **kwargs):
            ret = previous(*args, **kwargs) if previous is not None else None
            if ret:
                return ret  # another tool asked Triton to skip this compile
            try:
                state.on_compile(kwargs)
            except Exception as exc:  # the warm-up must never break a launch
                state.say(f"jitguard warmup: failed ({type(exc).__name__}: {exc}); the launch goes on")
            return ret

        hook.__jitguard__ = True
        pre.set(hook)
        state.hook = hook
        if restack:
            watch_mod._STATE.install()


def arm(traces_or_dir: Any, *, quiet: bool = False) -> _Armed:
    """Warm up from ``traces_or_dir`` at this process's first compile (see the module docstring);
    Triton must be importable. Once per process: a second call returns the armed warm-up."""
    global _ARMED
    if _ARMED is not None:
        return _ARMED
    traces, paths, notes = _as_traces(traces_or_dir)
    report = WarmupReport(paths, "warmup", notes=notes)
    state = _Armed(paths, _plans(traces, report), report, quiet)
    compat._import_triton()
    _install_hook(state)
    _ARMED = state
    return state


def env_paths(environ=None) -> list[str]:
    env = os.environ if environ is None else environ
    return [p for p in (env.get(ENV_WARMUP) or "").split(os.pathsep) if p.strip()]


def arm_from_env(environ=None) -> bool:
    """``JITGUARD_WARMUP=PATH[:PATH...]``: arm the warm-up (now if Triton is imported, else right
    after ``import triton``). Never raises: a problem prints one line. True when armed or pending."""
    paths = env_paths(environ)
    if not paths:
        return False
    quiet = (os.environ if environ is None else environ).get("JITGUARD_QUIET") == "1"

    def begin():
        try:
            arm(paths, quiet=quiet)
        except Exception as exc:
            print(f"jitguard: {ENV_WARMUP}: no warm-up: {exc}", file=sys.stderr)

    from jitguard.runtime.import_hooks import after_import

    after_import("triton", begin, tag="warmup")
    return True
