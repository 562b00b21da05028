"""Activation by environment variable, for processes you don't start yourself.

    JITGUARD=record|warn|raise      turn the watcher on for the whole process ("1" means warn)
    JITGUARD_TRACE=PATH             write the trace there at exit; a directory (existing, or ending
                                    in "/") gets one file per process: jitguard-trace.rank{R}.pid{P}.json
    JITGUARD_MAX_RECOMPILES=N       the budget for warn/raise (default 0)
    JITGUARD_SUMMARY=0|1            print the per-kernel summary at exit (default: on in warn mode)

Something must call ``activate_from_env()`` at startup: ``jitguard run`` does it through a
``sitecustomize.py`` it puts on PYTHONPATH (jitguard/runtime/_site/, which then runs any other
sitecustomize on the path); the vLLM plugin and your own code can call it directly. Nothing is
installed into site-packages. Triton is not imported here: the watcher starts right after the
program imports Triton, so processes that never use Triton pay nothing.
"""
from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import os
import sys
import threading

ENV_MODE = "JITGUARD"
ENV_TRACE = "JITGUARD_TRACE"
ENV_MAX = "JITGUARD_MAX_RECOMPILES"
ENV_SUMMARY = "JITGUARD_SUMMARY"
ENV_CLAIMED = "JITGUARD_TRACE_CLAIMED"  # set by the process that owns a JITGUARD_TRACE file path

_lock = threading.Lock()
_active = None  # the process-wide watch


class ActivationError(ValueError):
    pass


def _mode_from_env(value: str) -> str | None:
    v = value.strip().lower()
    if v in ("", "0", "off", "false", "no"):
        return None
    if v in ("1", "on", "true", "yes"):
        return "warn"
    if v in ("record", "warn", "raise"):
        return v
    raise ActivationError(f"{ENV_MODE}={value!r}: use record, warn or raise (or 1 / 0)")


def trace_path_for_process(target: str, rank: int | None = None) -> str:
    """Where this process writes: the file itself for the first process that activates with a file
    path, ``<stem>.pid<P>.json`` beside it for its children, a per-process name in a directory."""
    pid = os.getpid()
    rank_part = f"rank{rank}." if rank is not None else ""
    if target.endswith(("/", os.sep)) or os.path.isdir(target):
        return os.path.join(target, f"jitguard-trace.{rank_part}pid{pid}.json")
    claimed = os.environ.get(ENV_CLAIMED)
    if claimed in (None, "", str(pid)):
        return target
    stem, ext = os.path.splitext(target)
    return f"{stem}.{rank_part}pid{pid}{ext or '.json'}"


def activate(mode: str = "warn", *, trace: str | None = None, max_recompiles: int | None = None,
             summary: bool | None = None):
    """Start a process-wide watch now (Triton must be importable); it ends at interpreter exit,
    writing the trace if ``trace`` is set. Idempotent: a second call returns the running watch."""
    global _active
    with _lock:
        if _active is not None:
            return _active
        from jitguard.runtime.watch import watch

        if trace and not (trace.endswith(("/", os.sep)) or os.path.isdir(trace)):
            os.environ.setdefault(ENV_CLAIMED, str(os.getpid()))
        w = watch(mode=mode, max_recompiles=max_recompiles, summary=summary)
        w.__enter__()
        w._process_trace_target = trace
        _active = w
        atexit.register(_finish)
        return w


def _finish() -> None:
    global _active
    w = _active
    if w is None:
        return
    _active = None
    target = getattr(w, "_process_trace_target", None)
    try:
        w.__exit__(None, None, None)
    except Exception as exc:  # never turn a clean exit into a crash
        print(f"jitguard: could not stop the watcher: {exc}", file=sys.stderr)
    if target:
        try:
            path = w.to_json(trace_path_for_process(target, w.trace.process.rank))
            if os.environ.get("JITGUARD_QUIET") != "1":
                n = len(w.trace.events) + w.trace.dropped_events
                print(f"jitguard: wrote {path} ({n} event{'s' if n != 1 else ''})", file=sys.stderr)
        except OSError as exc:
            print(f"jitguard: cannot write the trace to {target}: {exc}", file=sys.stderr)


def active_watch():
    return _active


class _TritonImportHook(importlib.abc.MetaPathFinder):
    """Activates right after ``import triton`` finishes (the hooks need triton.knobs)."""

    def __init__(self, start):
        self._start = start
        self._busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "triton" or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, start, hook = spec.loader, self._start, self

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                with _suppress_to_stderr("jitguard: could not start the watcher"):
                    if hook in sys.meta_path:
                        sys.meta_path.remove(hook)
                    start()

        spec.loader = _Loader()
        return spec


class _suppress_to_stderr:
    def __init__(self, what):
        self.what = what

    def __enter__(self):
        return self

    def __exit__(self, typ, exc, tb):
        if exc is not None and isinstance(exc, Exception):
            print(f"{self.what}: {exc}", file=sys.stderr)
            return True
        return False


def activate_from_env(environ=None) -> bool:
    """Turn the watcher on if ``JITGUARD`` says so; returns whether it is (or will be, at the
    first ``import triton``) active. Bad values print one line to stderr and leave it off."""
    env = os.environ if environ is None else environ
    try:
        mode = _mode_from_env(env.get(ENV_MODE, ""))
        if mode is None:
            return False
        max_rec = env.get(ENV_MAX)
        max_recompiles = int(max_rec) if max_rec not in (None, "") else None
        if max_recompiles is not None and max_recompiles < 0:
            raise ActivationError(f"{ENV_MAX}={max_rec!r}: must be >= 0")
    except (ActivationError, ValueError) as exc:
        print(f"jitguard: not activated: {exc}", file=sys.stderr)
        return False
    summary_env = env.get(ENV_SUMMARY)
    summary = None if summary_env in (None, "") else summary_env not in ("0", "off", "false", "no")
    trace = env.get(ENV_TRACE) or None
    if trace and not (trace.endswith(("/", os.sep)) or os.path.isdir(trace)):
        # Claim the file at startup, before any child exists: processes started from this one
        # (workers, torchrun ranks) then write <stem>.pid<P>.json beside it instead of racing.
        os.environ.setdefault(ENV_CLAIMED, str(os.getpid()))

    def start():
        activate(mode, trace=trace, max_recompiles=max_recompiles, summary=summary)

    if "triton" in sys.modules:
        with _suppress_to_stderr("jitguard: could not start the watcher"):
            start()
        return True
    if not any(isinstance(f, _TritonImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _TritonImportHook(start))
    return True
