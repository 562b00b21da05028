"""Activation by environment variable, for processes you don't start yourself.

    JITGUARD=record|warn|raise      turn the watcher on for the whole process ("1" means warn)
    JITGUARD_TRACE=PATH             write the trace there at exit; a directory (existing, or ending
                                    in "/") gets one file per process: jitguard-trace.rank{R}.pid{P}.json;
                                    {rank} and {pid} in PATH are filled in per process
    JITGUARD_MAX_RECOMPILES=N       the budget for warn/raise (default 0)
    JITGUARD_SUMMARY=0|1            print the per-kernel summary at exit (default: on in warn mode)

The public API (documented in docs/runtime.md):

* ``activate_from_env(environ=None, *, start="import", write_at_exit=True, default_trace=None)``:
  the one entry point. ``jitguard run`` calls it through a ``sitecustomize.py`` it puts on
  PYTHONPATH (jitguard/runtime/_site/, which then runs any other sitecustomize on the path); the
  vLLM plugin calls it in every vLLM process; your own code can call it early in ``main``. Returns
  the ``EnvSettings`` it activated with, or None when the variables leave the watcher off.
* ``env_settings(environ=None)``: the variables parsed and checked, without starting anything
  (``ActivationError`` for a bad value).
* ``active_watch()``, ``activation_pending()``, ``deactivate()``: the process-wide watch.

Nothing is installed into site-packages. Triton is not imported here: by default the watcher starts
right after the program imports Triton, so processes that never use Triton pay nothing.
"""
from __future__ import annotations

import atexit
import dataclasses
import importlib.abc
import importlib.machinery
import os
import sys
import threading

from jitguard.runtime.trace import check_trace_template, expand_trace_path, placeholder_names

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


@dataclasses.dataclass(frozen=True)
class EnvSettings:
    """The ``JITGUARD*`` variables, parsed: what ``activate_from_env`` starts the watcher with."""

    mode: str  # record | warn | raise
    trace: str | None = None  # JITGUARD_TRACE (None: no trace written)
    max_recompiles: int | None = None
    summary: bool | None = None  # None: the watch's default (on in warn mode)


def env_settings(environ=None) -> EnvSettings | None:
    """Parse ``JITGUARD``, ``JITGUARD_TRACE``, ``JITGUARD_MAX_RECOMPILES`` and ``JITGUARD_SUMMARY``
    from ``environ`` (default ``os.environ``). None when ``JITGUARD`` is unset, empty or off;
    ``ActivationError`` (a ``ValueError``, one-line message) for a value it cannot use."""
    env = os.environ if environ is None else environ
    mode = _mode_from_env(env.get(ENV_MODE, ""))
    if mode is None:
        return None
    raw = env.get(ENV_MAX)
    try:
        max_recompiles = int(raw) if raw not in (None, "") else None
    except ValueError:
        raise ActivationError(f"{ENV_MAX}={raw!r}: must be an integer >= 0") from None
    if max_recompiles is not None and max_recompiles < 0:
        raise ActivationError(f"{ENV_MAX}={raw!r}: must be >= 0")
    trace = env.get(ENV_TRACE) or None
    if trace is not None:
        try:
            check_trace_template(trace)
        except ValueError as exc:
            raise ActivationError(f"{ENV_TRACE}: {exc}") from None
    summary_env = env.get(ENV_SUMMARY)
    summary = None if summary_env in (None, "") else summary_env.strip().lower() not in ("0", "off", "false", "no")
    return EnvSettings(mode=mode, trace=trace, max_recompiles=max_recompiles,
                       summary=summary)


def _is_dir(target: str) -> bool:
    return target.endswith(("/", os.sep)) or os.path.isdir(target)


def trace_path_for_process(target: str, rank: int | None = None) -> str:
    """Where this process writes: the file itself for the first process that activates with a file
    path, ``<stem>.pid<P>.json`` beside it for its children, a per-process name in a directory.
    ``{rank}`` and ``{pid}`` in ``target`` are filled in first; a file path with ``{pid}``, or with
    ``{rank}`` in a process that has a rank, names one process already and is used as it is."""
    pid = os.getpid()
    expanded = expand_trace_path(target, rank, pid)
    rank_part = f"rank{rank}." if rank is not None else ""
    if _is_dir(expanded):
        return os.path.join(expanded, f"jitguard-trace.{rank_part}pid{pid}.json")
    used = placeholder_names(target)
    if "pid" in used or ("rank" in used and rank is not None):
        return expanded
    claimed = os.environ.get(ENV_CLAIMED)
    if claimed in (None, "", str(pid)):
        return expanded
    stem, ext = os.path.splitext(expanded)
    return f"{stem}.{rank_part}pid{pid}{ext or '.json'}"


def activate(mode: str = "warn", *, trace: str | None = None, max_recompiles: int | None = None,
             summary: bool | None = None, write_at_exit: bool = True):
    """Start a process-wide watch now (Triton must be importable). With ``write_at_exit`` it ends
    at interpreter exit, writing the trace if ``trace`` is set; without, the caller ends it
    (``deactivate()``). Idempotent: a second call returns the running watch."""
    global _active
    with _lock:
        if _active is not None:
            return _active
        from jitguard.runtime.watch import watch

        if write_at_exit and trace and not _is_dir(expand_trace_path(trace, None)):
            os.environ.setdefault(ENV_CLAIMED, str(os.getpid()))
        w = watch(mode=mode, max_recompiles=max_recompiles, summary=summary)
        w.__enter__()
        w._process_trace_target = trace if write_at_exit else None
        _active = w
        if write_at_exit:
            atexit.register(_finish)
            _finish_on_sigterm()
        return w


def _finish_on_sigterm() -> None:
    """SIGTERM's default action ends the process without atexit: where the program left it at
    the default, write the trace first, then die of SIGTERM as it would have (same exit status).
    A handler the program installs (before or later) is left alone."""
    import signal

    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        owner = os.getpid()

        def on_sigterm(signum, frame):
            try:
                if os.getpid() == owner:  # a forked worker (multiprocessing's terminate()) writes nothing
                    _finish()
            finally:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(signal.SIGTERM, on_sigterm)
    except (ValueError, OSError, AttributeError):  # not the main thread, or no SIGTERM here
        pass


def deactivate():
    """Forget the process-wide watch without writing anything (e.g. a forked child's copy of its
    parent's); returns it (stopped) or None."""
    global _active
    with _lock:
        w, _active = _active, None
    if w is not None:
        w._process_trace_target = None
        w.print_summary = False
        try:
            w.__exit__(None, None, None)
        except Exception:
            pass
    return w


def _finish() -> None:
    """Stop the process-wide watch and write its trace. A second Ctrl-C (or a SIGINT that
    `jitguard run` passed on besides the terminal's) must not cut the write short: SIGINT is
    ignored meanwhile, and a KeyboardInterrupt that was already pending retries it once."""
    import signal

    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError, AttributeError):  # not the main thread
        previous = None
    try:
        for attempt in (1, 2):
            try:
                _finish_once()
                return
            except KeyboardInterrupt:
                if attempt == 2:
                    raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _finish_once() -> None:
    global _active
    w = _active
    if w is None:
        return
    target = getattr(w, "_process_trace_target", None)
    if w._depth > 0:
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
    _active = None  # written: a retry after an interrupted write finds nothing left to do


def active_watch():
    """The process-wide watch started by ``activate``/``activate_from_env``, or None."""
    return _active


def activation_pending() -> bool:
    """True when ``activate_from_env`` is waiting for ``import triton`` to start the watcher."""
    return any(isinstance(f, _TritonImportHook) for f in sys.meta_path)


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
        self.ok = True

    def __enter__(self):
        return self

    def __exit__(self, typ, exc, tb):
        if exc is not None and isinstance(exc, Exception):
            self.ok = False
            print(f"{self.what}: {exc}", file=sys.stderr)
            return True
        return False


def activate_from_env(environ=None, *, start: str = "import", write_at_exit: bool = True,
                      default_trace: str | None = None) -> EnvSettings | None:
    """Turn the process-wide watcher on if ``JITGUARD`` says so (see ``env_settings``).

    start: "import" (default) starts it right after the program imports Triton (now, if it already
        has), so processes that never use Triton pay nothing; "now" imports Triton and starts now.
    write_at_exit: write the trace to ``JITGUARD_TRACE`` (file, or directory: one file per process)
        and print the summary at interpreter exit. The vLLM plugin passes False and writes itself.
    default_trace: the trace target when ``JITGUARD_TRACE`` is unset.

    Returns the settings it activated with (or will, at ``import triton``), or None when the
    variables leave it off. Bad values print one line to stderr and leave it off; a watcher that
    cannot start (no usable Triton) prints one line too. Never raises."""
    if start not in ("import", "now"):
        raise ValueError(f"activate_from_env(start=...) must be 'import' or 'now', got {start!r}")
    try:
        settings = env_settings(environ)
    except ActivationError as exc:
        print(f"jitguard: not activated: {exc}", file=sys.stderr)
        return None
    if settings is None:
        return None
    from jitguard.runtime.process import run_id

    run_id(create=True)  # a process tree's first activation names the run for its children
    if settings.trace is None and default_trace:
        settings = dataclasses.replace(settings, trace=default_trace)
    trace = settings.trace
    if write_at_exit and trace and not _is_dir(expand_trace_path(trace, None)):
        # Claim the file at startup, before any child exists: processes started from this one
        # (workers, torchrun ranks) then write <stem>.pid<P>.json beside it instead of racing.
        os.environ.setdefault(ENV_CLAIMED, str(os.getpid()))

    def begin():
        activate(settings.mode, trace=trace, max_recompiles=settings.max_recompiles,
                 summary=settings.summary, write_at_exit=write_at_exit)

    if start == "now" or "triton" in sys.modules:
        ok = _suppress_to_stderr("jitguard: could not start the watcher")
        with ok:
            begin()
        return settings if ok.ok else None
    if not activation_pending():
        sys.meta_path.insert(0, _TritonImportHook(begin))
    return settings
