"""``jitguard.watch()``: observe every Triton compile in a region and say why it happened.

How it hooks in: while at least one watch is active, jitguard owns Triton's pre/post compile hooks
(``compat.compile_hook_sites()``), the compilation listener (disk-cache hits) and the autotune
listener (or, before Triton 3.8, a thin wrapper around ``Autotuner.run``). Each of jitguard's hooks
first calls whatever was installed before it (another tool's hook) and returns what that returned;
when the last watch exits, every slot gets back exactly the object that was there. Hooks fire only
on a miss of Triton's in-memory cache, so launches that hit the cache pay nothing.

Thread safety: one lock guards the shared state (active watches, per-kernel variant history,
compiles in flight); Triton compiles outside it. A failure inside jitguard's own hook is logged
once (logger ``jitguard``) and never breaks the launch; only ``mode="raise"`` raises, on purpose.
"""
from __future__ import annotations

import contextlib
import copy
import linecache
import logging
import os
import re
import sys
import sysconfig
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from jitguard.runtime import compat, keys, steps
from jitguard.runtime.process import finish_process_info, new_process_info, refresh_rank
from jitguard.runtime.trace import (
    DEFAULT_MAX_EVENTS,
    AutotuneInfo,
    DiffEntry,
    Event,
    Trace,
    check_trace_template,
    expand_trace_path,
    write_trace,
)

logger = logging.getLogger("jitguard")

MODES = ("record", "warn", "raise")
_JITGUARD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_KERNELS_DIR = os.path.join(_JITGUARD_DIR, "kernels") + os.sep


class RecompileError(RuntimeError):
    """Raised in ``mode="raise"`` when a region compiles more than it may; ``str()`` explains why
    (kernel, launching line, what changed against the closest previous variant, the fix)."""

    def __init__(self, message: str, event: Event | None = None):
        super().__init__(message)
        self.event = event


class RecompileWarning(UserWarning):
    """Issued in ``mode="warn"`` for each recompile beyond the budget."""


# ---------------------------------------------------------------------------------------------
# per-kernel history (process-wide, shared by all watches)
# ---------------------------------------------------------------------------------------------

@dataclass
class _KernelHistory:
    jit_function: Any
    qualname: str
    path: str | None
    line: int | None
    params: list
    variants: keys.VariantIndex = field(default_factory=keys.VariantIndex)  # in compile order
    keys_seen: set = field(default_factory=set)


@dataclass
class _AutotuneHistory:
    qualname: str
    names: list
    keys: list = field(default_factory=list)  # tuples


@dataclass
class _Pending:
    event: Event
    variant: keys.Variant
    history: _KernelHistory
    start: float
    thread: int
    t_own: float = 0.0


_DEF_RE = re.compile(r"\s*(async\s+)?def\s")


def _def_line(code) -> int:
    """The ``def`` line of a function (``co_firstlineno`` points at the first decorator)."""
    first = code.co_firstlineno
    for ln in range(first, first + 50):
        text = linecache.getline(code.co_filename, ln)
        if not text:
            break
        if _DEF_RE.match(text):
            return ln
    return first


def _prime() -> None:
    """Pay the once-per-process costs of the event path (the key parser's first ``ast`` and
    ``literal_eval`` calls, the def-line lookup) when the watch starts, not inside the first
    compile event, whose overhead_ms would otherwise carry them (measured: 1.15 ms for the first
    event on the H200 against 0.49-0.81 ms for the others)."""
    global _PRIMED
    if _PRIMED:
        return
    _PRIMED = True
    sample = "[('*fp16', 'D'), ('i32', ''), ('i64', 'D'), ('constexpr', 128)]{'debug': False}"
    params = [("p", False, False, False), ("n", False, False, False), ("m", False, False, False),
              ("B", True, False, False)]
    try:
        keys.decode_key(sample, params)
        _def_line(_prime.__code__)
    except Exception:  # only a warm-up: a real failure shows (and is logged) at the first event
        pass


_PRIMED = False


def _kernel_identity(jf: Any) -> tuple[str, str | None, int | None]:
    fn = getattr(jf, "fn", None)
    module = getattr(fn, "__module__", None) or getattr(jf, "module", "?")
    qual = getattr(fn, "__qualname__", None) or getattr(jf, "__name__", "?")
    code = getattr(fn, "__code__", None)
    if code is None:
        return f"{module}.{qual}", None, None
    return f"{module}.{qual}", os.path.abspath(code.co_filename), _def_line(code)


def _kernel_names(jf: Any) -> dict[str, str | None]:
    """The kernel function's ``__module__`` and ``__qualname__`` apart (what jitguard.warmup imports)."""
    fn = getattr(jf, "fn", None)
    return {"kernel_module": getattr(fn, "__module__", None), "kernel_qualname": getattr(fn, "__qualname__", None)}


# set by jitguard.warmup on the thread while it compiles a recorded variant (Event.from_trace)
WARMING_FROM_TRACE = threading.local()

_NOT_CALLERS = ("<", sysconfig.get_paths()["stdlib"] + os.sep)
_NOT_CALLER_PARTS = (f"{os.sep}_pytest{os.sep}", f"{os.sep}pluggy{os.sep}")


def _user_frame(skip: tuple[str, ...], depth: int = 4) -> tuple[str | None, int | None, bool, list[str], Any]:
    """(path, line) of the first frame outside Triton and jitguard's runtime (the launching
    frame), whether an autotuner is benchmarking on the way (its config compiles are expected),
    up to ``depth`` further ``path:line`` callers (a wrapper's callers), and the autotuner the
    launch went through (None without one)."""
    f = sys._getframe(2)
    autotuning = False
    tuner = None
    found: tuple[str | None, int | None] = (None, None)
    callers: list[str] = []
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith(skip):
            if name.endswith("autotuner.py"):
                if f.f_code.co_name in ("_bench", "benchmark", "kernel_call", "check_disk_cache"):
                    autotuning = True
                if tuner is None and f.f_code.co_name == "run":
                    cand = f.f_locals.get("self")
                    tuner = cand if hasattr(cand, "configs") else None
                # a frame seen before this one ran inside the autotuner (its benchmarker, a
                # pre_hook): the launching line is further out
                found, callers = (None, None), []
        elif found[0] is None:
            found = (os.path.abspath(name), f.f_lineno)
        elif not name.startswith(_NOT_CALLERS) and not any(t in name for t in _NOT_CALLER_PARTS):
            callers.append(f"{os.path.abspath(name)}:{f.f_lineno}")
            if len(callers) >= depth:
                break
        f = f.f_back
    return found[0], found[1], autotuning, callers, tuner


def _config_names(tuner: Any) -> set[str]:
    """The constexprs and options an autotuner's configs set (what differs between its configs)."""
    names: set[str] = set()
    for cfg in getattr(tuner, "configs", None) or ():
        names.update(getattr(cfg, "kwargs", None) or {})
        names.update(o for o in keys.CONFIG_OPTIONS if getattr(cfg, o, None) is not None)
    return names


# ---------------------------------------------------------------------------------------------
# shared state: installed hooks, active watches
# ---------------------------------------------------------------------------------------------

class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.watches: list["watch"] = []
        self.saved: dict[str, tuple[compat.HookSite, Any, Any]] = {}  # name -> (site, previous, ours)
        self.autotuner_patch: tuple[Any, Any, Any] | None = None  # (cls, previous run, ours)
        self.kernels: dict[int, _KernelHistory] = {}
        self.autotuners: dict[int, _AutotuneHistory] = {}
        self.pending: dict[tuple[int, str], _Pending] = {}
        self.seq = 0
        self.logged: set = set()
        self.skip_dirs: tuple[str, ...] = ()

    # -- install / uninstall --------------------------------------------------------------------
    def install(self) -> None:
        pre, post = compat.compile_hook_sites()  # raises UnsupportedTritonError with the reason
        self.skip_dirs = compat.triton_dirs() + (os.path.join(_JITGUARD_DIR, "runtime") + os.sep,
                                                 os.path.join(_JITGUARD_DIR, "__init__.py"),
                                                 os.path.join(_JITGUARD_DIR, "pytest_plugin.py"),
                                                 contextlib.__file__)
        self._take(pre, _on_pre, returns_prev=True)
        self._take(post, _on_post)
        listener = compat.compilation_listener_site()
        if listener is not None:
            self._take(listener, _on_compilation)
        at = compat.autotune_listener_site()
        if at is not None:
            self._take(at, _on_autotune_listener)
        else:
            self._patch_autotuner()
        _prime()

    def _take(self, site: compat.HookSite, handler: Callable, returns_prev: bool = False) -> None:
        previous = site.get()
        ours = _make_chained(site, handler, previous, returns_prev)
        self.saved[site.name] = (site, previous, ours)
        site.set(ours)

    def _patch_autotuner(self) -> None:
        try:
            cls = compat.autotuner_class()
        except ImportError:
            return
        previous = cls.__dict__.get("run")
        if previous is None:
            return

        def run(at_self, *args, **kwargs):
            if not (run.jitguard_active and _STATE.watches):
                return previous(at_self, *args, **kwargs)
            before = len(getattr(at_self, "cache", ()) or ())
            result = previous(at_self, *args, **kwargs)
            try:
                cache = getattr(at_self, "cache", None)
                if cache is not None and len(cache) > before:
                    key = next(reversed(cache))
                    timings = getattr(at_self, "configs_timings", None)
                    bench = getattr(at_self, "bench_time", None)
                    _on_autotune(at_self, key, cache[key], timings, bench, False)
            except RecompileError:
                raise
            except Exception as exc:  # never break the launch
                _log_once("autotune adapter", exc)
            return result

        run.__jitguard__ = True
        run.jitguard_active = True
        cls.run = run
        self.autotuner_patch = (cls, previous, run)

    def uninstall(self) -> None:
        for name, (site, previous, ours) in list(self.saved.items()):
            ours.jitguard_active = False
            if site.get() is ours:
                site.set(previous)
            else:
                # Someone installed a hook on top of ours (and may chain to it): leave theirs in
                # place; ours stays in their chain as a pass-through to what it replaced.
                logger.warning("jitguard: %s was replaced while jitguard was watching; left the newer "
                               "hook in place (jitguard's now only passes calls through)", name)
        self.saved.clear()
        if self.autotuner_patch is not None:
            cls, previous, ours = self.autotuner_patch
            ours.jitguard_active = False
            if cls.__dict__.get("run") is ours:
                cls.run = previous
            self.autotuner_patch = None

    # -- bookkeeping ----------------------------------------------------------------------------
    def history(self, jf: Any, device: Any, exclude_key: str) -> _KernelHistory:
        h = self.kernels.get(id(jf))
        if h is None or h.jit_function is not jf:
            qual, path, line = _kernel_identity(jf)
            h = _KernelHistory(jf, qual, path, line, compat.jit_params(jf))
            self.kernels[id(jf)] = h
        # Variants compiled while nobody watched (before the first watch, or between two) still
        # count as previous ones: Triton's in-memory cache has them all.
        for k in compat.kernel_cache_keys(jf, device):
            if k != exclude_key and k not in h.keys_seen:
                text = compat.normalized_key(jf, k)
                if text is not None:
                    h.keys_seen.add(k)
                    h.variants.append(keys.decode_key(text, h.params))
        return h

    def next_seq(self) -> int:
        s = self.seq
        self.seq += 1
        return s


_STATE = _State()


def _on_step(step: int) -> None:
    """After each ``mark_step``: refresh the rank of every active watch (a rank that compiles
    nothing after ``init_process_group`` still gets its rank while the group is up)."""
    for w in list(_STATE.watches):
        refresh_rank(w.trace.process)


steps._listeners.append(_on_step)


def _log_once(where: str, exc: BaseException) -> None:
    token = (where, type(exc).__name__, str(exc)[:200])
    if token in _STATE.logged:
        return
    _STATE.logged.add(token)
    logger.warning("jitguard: internal error in %s (ignored; the launch goes on): %s: %s",
                   where, type(exc).__name__, exc)
    for w in list(_STATE.watches):
        w.internal_errors += 1


def _make_chained(site: compat.HookSite, handler: Callable, previous: Any, returns_prev: bool = False) -> Callable:
    """A hook for ``site`` that calls ``previous`` (what was installed before: another tool's hook)
    and returns what it returned, and runs ``handler`` while any watch is active: after
    ``previous`` for the pre-compile hook (``returns_prev``: a truthy return skips the compile),
    before it for the others (a compile that happened is recorded even if ``previous`` raises). After
    uninstall it stays a pure pass-through (``hook.jitguard_active = False``), so a tool that
    installed its hook on top of ours and chains to it keeps working, without double events."""

    def run_handler(kwargs):
        if hook.jitguard_active and _STATE.watches:
            try:
                handler(kwargs)
            except RecompileError:
                raise
            except Exception as exc:
                _log_once(site.name, exc)

    def hook(*args, **kwargs):
        if not returns_prev:
            # A notification (after a compile, a disk-cache hit, an autotune): record first, so a
            # tool whose hook raises (vLLM's jit_monitor in error mode) cannot hide a compile.
            run_handler(kwargs)
            return previous(*args, **kwargs) if previous is not None else None
        ret = previous(*args, **kwargs) if previous is not None else None
        if ret:
            return ret  # the other tool asked Triton to skip this compile: nothing happens
        run_handler(kwargs)
        return ret

    hook.jitguard_active = True
    hook.__jitguard__ = True
    hook.__name__ = f"jitguard_{site.name.rsplit('.', 1)[-1]}"
    return hook


# ---------------------------------------------------------------------------------------------
# hook handlers
# ---------------------------------------------------------------------------------------------

def _on_pre(kwargs: dict) -> None:
    t0 = time.perf_counter()
    call = compat.compile_call(kwargs)
    if call.jit_function is None:
        return
    path, line, autotuning, callers, tuner = _user_frame(_STATE.skip_dirs)
    me = threading.get_ident()
    with _STATE.lock:
        h = _STATE.history(call.jit_function, call.device, call.key)
        # a compile of this kernel that this thread began and never finished (it raised)
        for stale in [k for k, p in _STATE.pending.items() if p.history is h and p.thread == me]:
            del _STATE.pending[stale]
        variant = keys.decode_key(compat.normalized_key(call.jit_function, call.key, kwargs.get("compile"))
                                  or call.key, h.params)
        idx = h.variants.closest(variant)
        entries: list[DiffEntry] = keys.diff(h.variants[idx], variant) if idx is not None else []
        decorator = compat.jit_decorator(call.jit_function)
        keys.mark_config_changes(entries, _config_names(tuner) if tuner is not None else ())
        event = Event(
            kind="compile",
            seq=-1,
            kernel=h.qualname,
            **_kernel_names(call.jit_function),
            step=steps.current_step(),
            wall=time.time(),
            monotonic=time.monotonic(),
            thread=threading.current_thread().name,
            kernel_path=h.path,
            kernel_line=h.line,
            call_path=path,
            call_line=line,
            call_stack=callers,
            warmup=call.warmup,
            autotuning=autotuning,
            from_trace=getattr(WARMING_FROM_TRACE, "active", False),
            params=variant.params,
            options=variant.options if variant.options is not None else {"raw": variant.options_text},
            key=call.key,
            # provisional (compiles of the same kernel may be in flight on other threads); the
            # post hook sets the final number
            variant=len(h.variants) + 1 + sum(1 for p in _STATE.pending.values() if p.history is h),
            closest_variant=idx + 1 if idx is not None else None,
            diff=entries,
            remedy=("expected: the autotuner compiles each config it benchmarks"
                    + (f"; {r}" if (r := keys.remedy([e for e in entries if e.change != "config"],
                                                     decorator=decorator)) else "")
                    if autotuning else keys.remedy(entries, decorator=decorator)),
            frontend="gluon" if decorator == "gluon.jit" else None,
        )
        pending = _Pending(event, variant, h, 0.0, me)
        _STATE.pending[(id(call.jit_function), call.key)] = pending
        try:
            for w in list(_STATE.watches):
                w._check_budget(event)  # raise mode raises here, before the compile is paid for
        except RecompileError:
            _STATE.pending.pop((id(call.jit_function), call.key), None)
            for w in list(_STATE.watches):  # every enclosing watch sees the refused compile too
                w._record(event)
            raise
        pending.t_own = time.perf_counter() - t0
        pending.start = time.perf_counter()


def _on_post(kwargs: dict) -> None:
    end = time.perf_counter()
    call = compat.compile_call(kwargs)
    with _STATE.lock:
        pending = _STATE.pending.pop((id(call.jit_function), call.key), None)
        if pending is None:
            return  # compile began before the watch did
        t1 = time.perf_counter()
        event, h = pending.event, pending.history
        event.compile_ms = round((end - pending.start) * 1e3, 3)
        if call.key not in h.keys_seen:
            h.keys_seen.add(call.key)
            h.variants.append(pending.variant)
            event.variant = len(h.variants)
        event.seq = _STATE.next_seq()
        event.overhead_ms = round((pending.t_own + time.perf_counter() - t1) * 1e3, 4)
        for w in list(_STATE.watches):
            w._record(event)


def _on_compilation(kwargs: dict) -> None:
    src = kwargs.get("src")
    fn = getattr(src, "fn", None)
    hit = kwargs.get("cache_hit")
    if fn is None or hit is None:
        return
    with _STATE.lock:
        me = threading.get_ident()
        candidates = [p for (jid, _), p in _STATE.pending.items() if jid == id(fn)]
        if not candidates:
            return
        mine = [p for p in candidates if p.thread == me] or candidates
        mine[-1].event.disk_cache_hit = bool(hit)


def _on_autotune_listener(kwargs: dict) -> None:
    tuner = None
    f = sys._getframe(3)  # _on_autotune_listener <- hook <- Autotuner.run
    for _ in range(4):
        if f is None:
            break
        cand = f.f_locals.get("self")
        if cand is not None and hasattr(cand, "keys") and hasattr(cand, "cache"):
            tuner = cand
            break
        f = f.f_back
    _on_autotune(tuner, kwargs.get("key"), kwargs.get("best_config"), kwargs.get("configs_timings"),
                 kwargs.get("duration"), kwargs.get("cache_hit"), fn=kwargs.get("fn"))


def _on_autotune(tuner: Any, key: Any, best: Any, timings: Any, duration: Any, cache_hit: Any,
                 fn: Any = None) -> None:
    t0 = time.perf_counter()
    jf = fn
    if jf is None and tuner is not None:
        with contextlib.suppress(TypeError):
            jf = compat.base_jit_function(tuner)
    qual, kpath, kline = _kernel_identity(jf) if jf is not None else ("?", None, None)
    path, line, _, callers, _ = _user_frame(_STATE.skip_dirs)
    key_t = tuple(key) if isinstance(key, (tuple, list)) else (key,)
    names = [n for n in (getattr(tuner, "keys", None) or [])]
    labels = names[: len(key_t)] + [f"dtype{i}" for i in range(len(key_t) - len(names))]
    with _STATE.lock:
        ident = id(tuner) if tuner is not None else id(jf)
        h = _STATE.autotuners.get(ident)
        if h is None:
            h = _STATE.autotuners[ident] = _AutotuneHistory(qual, labels)
        entries: list[DiffEntry] = []
        closest_i = None
        if h.keys:
            dists = [sum(a != b for a, b in zip(prev, key_t)) for prev in h.keys]
            closest_i = max(i for i, d in enumerate(dists) if d == min(dists))
            prev = h.keys[closest_i]
            for name, a, b in zip(labels, prev, key_t):
                if a != b:
                    entries.append(DiffEntry(name, repr(a), repr(b), f"{name} (autotune key): {a!r} -> {b!r}",
                                             "autotune_key"))
        h.keys.append(key_t)
        n_cfg = len(timings) if hasattr(timings, "__len__") else None
        bench_ms = round(float(duration) * 1e3, 3) if isinstance(duration, (int, float)) else None
        remedy = None
        if entries:
            varying = ", ".join(e.param for e in entries)
            remedy = (f"{varying} is in the autotune key: every new value re-benchmarks "
                      f"{n_cfg if n_cfg is not None else 'all'} configs; bucket it (e.g. next power of "
                      f"two) before the launch, or drop it from key=[...]")
        event = Event(
            kind="autotune", seq=_STATE.next_seq(), kernel=qual, **_kernel_names(jf), step=steps.current_step(),
            wall=time.time(), monotonic=time.monotonic(), thread=threading.current_thread().name,
            kernel_path=kpath, kernel_line=kline, call_path=path, call_line=line, call_stack=callers,
            compile_ms=None, variant=len(h.keys), closest_variant=closest_i + 1 if closest_i is not None else None,
            diff=entries, remedy=remedy,
            autotune=AutotuneInfo(key=dict(zip(labels, key_t)), configs=n_cfg, bench_ms=bench_ms,
                                  best_config=str(best) if best is not None else None,
                                  cache_hit=bool(cache_hit) if cache_hit is not None else None),
        )
        event.overhead_ms = round((time.perf_counter() - t0) * 1e3, 4)
        for w in list(_STATE.watches):
            w._check_budget(event)
            w._record(event)


# ---------------------------------------------------------------------------------------------
# the public context manager / decorator
# ---------------------------------------------------------------------------------------------

def explain(event: Event, *, cwd: str | None = None) -> str:
    """A compile event in a few lines: what compiled where, what changed, and the fix."""
    from jitguard.runtime.text import explain_event

    return explain_event(event, cwd=cwd)


class watch(contextlib.ContextDecorator):
    """Watch Triton compiles in a region: ``with jitguard.watch(): ...`` or ``@jitguard.watch()``.

    mode: "record" (keep events; see ``.trace``, ``.summary()``, ``.to_json(path)``),
          "warn" (also a ``RecompileWarning`` per recompile beyond the budget, and the summary on
          stderr at exit), "raise" (``RecompileError`` at the recompile beyond the budget, before
          Triton compiles it).
    max_recompiles: recompiles the region may make before warn/raise act (a recompile is a second
          or later variant of a kernel, or a re-benchmark of an autotuner; compiles of configs while
          an autotuner benchmarks do not count). Default: 0 in warn and raise modes.
    max_compiles: compiles of any kind (first variants included) the region may make; see
          ``expect_no_compiles()``.
    trace: a path to write the trace to at exit (atomic); ``{rank}`` and ``{pid}`` in it become
          the process's rank (as known at exit; ``none`` without one) and pid, e.g.
          ``trace="traces/rank{rank}.json"``. ``summary``: print the per-kernel summary at exit
          (default: on in warn mode).
    distributed: at exit, gather every rank's trace to rank 0 over torch.distributed and print the
          merged report there (a collective: every rank must exit its watch).
    """

    def __init__(self, mode: str = "record", max_recompiles: int | None = None, *,
                 max_compiles: int | None = None, trace: str | os.PathLike | None = None,
                 summary: bool | None = None, distributed: bool = False,
                 max_events: int = DEFAULT_MAX_EVENTS, stream=None):
        if mode not in MODES:
            raise ValueError(f"jitguard.watch(mode=...) must be one of {', '.join(MODES)}, got {mode!r}")
        for name, value in (("max_recompiles", max_recompiles), ("max_compiles", max_compiles)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"jitguard.watch({name}=...) must be a non-negative int or None, got {value!r}")
        self.mode = mode
        self.max_recompiles = max_recompiles
        self.max_compiles = max_compiles
        self.trace_path = os.fspath(trace) if trace is not None else None
        if self.trace_path is not None:
            check_trace_template(self.trace_path)
        self.print_summary = (mode == "warn") if summary is None else summary
        self.distributed = distributed
        self.stream = stream
        self.trace = Trace(max_events=max_events)
        self.compile_count = 0
        self.recompile_count = 0
        self.internal_errors = 0
        self._seen: set[int] = set()
        self._depth = 0
        self._lock = threading.RLock()

    # ContextDecorator re-enters the same object on every decorated call: count the depth.
    def _recreate_cm(self):
        return self

    def __enter__(self) -> "watch":
        with self._lock:
            self._depth += 1
            if self._depth > 1:
                return self
        try:
            if compat.interpreter_active():
                warnings.warn("jitguard.watch: TRITON_INTERPRET=1 runs kernels in the interpreter, which "
                              "never compiles: there is nothing to watch", RuntimeWarning, stacklevel=2)
            with _STATE.lock:
                if not _STATE.watches:
                    _STATE.install()
                self.trace.process = new_process_info(self.mode)
                _STATE.watches.append(self)
        except BaseException:
            with self._lock:
                self._depth -= 1
            with _STATE.lock:
                if not _STATE.watches:
                    _STATE.uninstall()
            raise
        return self

    def __exit__(self, *exc) -> bool:
        with self._lock:
            self._depth -= 1
            if self._depth > 0:
                return False
        with _STATE.lock:
            if self in _STATE.watches:
                _STATE.watches.remove(self)
            if not _STATE.watches:
                _STATE.uninstall()
        finish_process_info(self.trace.process)
        self._finish()
        return False

    def _finish(self) -> None:
        try:
            if self.trace_path:
                self.to_json(expand_trace_path(self.trace_path, self.trace.process.rank))
            if self.print_summary and self.trace.events:
                print(self.summary(), file=self.stream or sys.stderr, flush=True)
            if self.distributed:
                from jitguard.runtime import distributed as dist_mod

                dist_mod.gather_and_report(self.trace, stream=self.stream)
        except Exception as exc:  # reporting must never turn a clean exit into a crash
            _log_once("watch exit", exc)

    # -- called by the hooks under _STATE.lock --------------------------------------------------
    def _is_recompile(self, event: Event) -> bool:
        return event.variant >= 2 and not event.autotuning and not event.from_trace

    def _check_budget(self, event: Event) -> None:
        if self.mode != "raise":
            return
        over = None
        if self.max_compiles is not None and self.compile_count + 1 > self.max_compiles:
            over = f"more than {self.max_compiles} compile{'s' if self.max_compiles != 1 else ''} in a region " \
                   f"that expects {'none' if self.max_compiles == 0 else 'at most that many'}"
        elif self._is_recompile(event) and self.recompile_count + 1 > (self.max_recompiles or 0):
            over = f"more than {self.max_recompiles or 0} recompile{'s' if (self.max_recompiles or 0) != 1 else ''}"
        if over is None:
            return
        event.seq = event.seq if event.seq >= 0 else _STATE.next_seq()
        self._record(event)
        raise RecompileError(f"{explain(event)}\n  ({over}: jitguard.watch(mode='raise'))", event)

    def _record(self, event: Event) -> None:
        if event.seq in self._seen:
            return
        self._seen.add(event.seq)
        refresh_rank(self.trace.process)  # the process group may have come up since the start
        self.trace.add(event)
        self.compile_count += 1
        if self._is_recompile(event):
            self.recompile_count += 1
            if self.mode == "warn" and self.recompile_count > (self.max_recompiles or 0):
                warnings.warn_explicit(explain(event), RecompileWarning,
                                       event.call_path or "<jitguard>", event.call_line or 0,
                                       module="jitguard")

    # -- results --------------------------------------------------------------------------------
    @property
    def events(self) -> list[Event]:
        return list(self.trace.events)

    @property
    def compiles(self) -> list[Event]:
        return [e for e in self.trace.events if e.kind == "compile"]

    @property
    def recompiles(self) -> list[Event]:
        return [e for e in self.trace.events if self._is_recompile(e)]

    def summary(self) -> str:
        """The per-kernel text report (variants, recompiles, compile ms, culprits, fix)."""
        from jitguard.runtime.text import render_trace

        return render_trace(self.snapshot())

    def snapshot(self) -> Trace:
        """A copy of the trace so far, with the process info refreshed."""
        with _STATE.lock:
            snap = copy.deepcopy(self.trace)
        finish_process_info(snap.process)
        return snap

    def to_json(self, path: str | os.PathLike) -> str:
        """Write the trace (schema ``jitguard.trace`` v1, see docs/trace_schema.md) atomically."""
        return write_trace(self.snapshot(), path)

    def findings(self):
        from jitguard.runtime.findings import findings_from_trace

        return findings_from_trace(self.snapshot())


def expect_no_compiles(*, trace: str | os.PathLike | None = None) -> watch:
    """A region that must not JIT at all ("zero JIT at runtime" after warmup): the first compile
    or autotune re-benchmark inside raises ``RecompileError`` explaining it."""
    return watch(mode="raise", max_compiles=0, trace=trace)
