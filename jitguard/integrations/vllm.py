"""vLLM general plugin: record Triton recompiles in every vLLM process, one trace per process.

Registered in pyproject.toml under the entry point group ``vllm.general_plugins``; vLLM calls
:func:`register` in every process it starts (API server, engine core, each GPU worker). It does
nothing unless ``JITGUARD`` is set (the same variables as ``jitguard run``), so installing
jitguard never changes a deployment::

    JITGUARD=record JITGUARD_TRACE=/tmp/jg/ vllm serve MODEL --tensor-parallel-size 8
    jitguard report /tmp/jg/         # merged across ranks: compiles and variants per rank

``JITGUARD`` is record | warn | raise (``1`` = warn); ``JITGUARD_TRACE`` is the directory
(default ``./jitguard-traces/``); ``JITGUARD_MAX_RECOMPILES`` the warn/raise budget. Each process
writes ``jitguard-trace.rank{R}.pid{P}.json`` there when it exits (no ``rank`` part for processes
outside the distributed group). The watcher reads the rank from torch.distributed at every compile
and every step mark and keeps the last one it saw while the group was up, since vLLM tears the group
down before exit.

Steps: straggler compiles are found by lining ranks up on step numbers. The plugin numbers the
engine steps itself: ``jitguard.mark_step()`` runs at the top of each GPU worker's
``execute_model`` (and ``execute_dummy_batch``), which every rank calls once per engine step
(vLLM's ``vllm.v1.worker.gpu_worker.Worker`` and the older ``vllm.worker.worker.Worker``).
Compiles during start-up (profiling, CUDA-graph capture) carry no step. ``JITGUARD_VLLM_STEPS=0``
turns the step labels off.

Warm-up: with ``JITGUARD_WARMUP=DIR`` (traces of an earlier run, e.g. the directory above), every
variant they recorded is compiled before serving (``jitguard.warmup``): at the start of the worker's
``compile_or_warm_up_model`` and, for what vLLM compiles before that (its profiling run), at the
process's first compile. ``JITGUARD_WARMUP`` works with or without ``JITGUARD``.

This module never imports vLLM, and imports nothing heavy at import time: only :func:`register`
does work. When ``jitguard run`` already activated the watcher in a process, the plugin leaves it be.
"""
from __future__ import annotations

import atexit
import functools
import os
import signal
import sys
import threading
from typing import Any

DEFAULT_DIR = "jitguard-traces"

_lock = threading.RLock()  # reentrant: write_now may run in a signal handler
_state: dict[str, Any] = {"pid": None, "watch": None, "written": False, "target": None}
_fork_hook_installed = False


def _directory(target: str) -> str:
    """The plugin always writes one file per process: a name without an extension is a directory."""
    if not os.path.splitext(target)[1] and not target.endswith(("/", os.sep)):
        target += os.sep
    return target


def trace_path() -> str | None:
    """Where this process's trace goes (None when the plugin is not active here)."""
    from jitguard.runtime.activate import trace_path_for_process

    watch, target = _state["watch"], _state["target"]
    if watch is None or target is None:
        return None
    return trace_path_for_process(target, watch.trace.process.rank)


def write_now() -> str | None:
    """Stop the watcher and write this process's trace (once per process); returns the path, or
    None when the plugin is not active here. Safe to call from exit and signal handlers."""
    with _lock:
        watch = _state["watch"]
        if watch is None or _state["pid"] != os.getpid() or _state["written"]:
            return None
        _state["written"] = True
    try:
        # the process group is usually gone by now: the watch keeps the rank it last saw while
        # the group was up (refreshed at every compile and every step mark)
        watch.__exit__(None, None, None)
    except Exception as exc:
        print(f"jitguard: could not stop the watcher: {exc}", file=sys.stderr)
    path = trace_path()
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return watch.to_json(path)
    except Exception as exc:  # never turn a clean vLLM exit into a crash
        print(f"jitguard: could not write the vLLM trace {path}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return None


def _after_import(fullname: str, then) -> None:
    """Run ``then()`` now if ``fullname`` is imported, else right after it is (once); a failing
    ``then`` never breaks vLLM's import."""
    from jitguard.runtime.import_hooks import after_import

    def safe():
        try:
            then()
        except Exception:
            pass

    after_import(fullname, safe, tag="vllm")


# vLLM's worker classes: one call of these per engine step on every rank, in lockstep.
STEP_TARGETS = (("vllm.v1.worker.gpu_worker", "Worker"), ("vllm.worker.worker", "Worker"))
STEP_METHODS = ("execute_model", "execute_dummy_batch")
ENV_STEPS = "JITGUARD_VLLM_STEPS"


def _wrap_worker_class(module_name: str, class_name: str) -> None:
    """Label each engine step: ``jitguard.mark_step()`` at the top of the worker's
    ``execute_model`` (and ``execute_dummy_batch``, which data-parallel ranks run to stay in step)."""
    cls = getattr(sys.modules.get(module_name), class_name, None)
    if cls is None:
        return
    from jitguard.runtime.steps import mark_step

    for name in STEP_METHODS:
        original = cls.__dict__.get(name)
        if original is None or not callable(original) or getattr(original, "__jitguard__", False):
            continue

        def wrapper(self, *args, __original=original, **kwargs):
            mark_step()
            return __original(self, *args, **kwargs)

        functools.update_wrapper(wrapper, original)
        wrapper.__jitguard__ = True
        setattr(cls, name, wrapper)


def _install_step_marks() -> None:
    if os.environ.get(ENV_STEPS, "1").strip().lower() in ("0", "off", "false", "no"):
        return
    for module_name, class_name in STEP_TARGETS:
        _after_import(module_name, lambda m=module_name, c=class_name: _wrap_worker_class(m, c))


def _on_sigterm(previous):
    def handler(signum, frame):
        write_now()
        if callable(previous):
            return previous(signum, frame)
        # default action: restore it and re-deliver, so the exit status stays "killed by SIGTERM"
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return handler


def _after_fork_in_child() -> None:
    # The parent's watcher and its events came along with the fork: drop them (the parent writes
    # its own trace) and start this process's own.
    if _state["pid"] is not None and _state["pid"] != os.getpid():
        from jitguard.runtime import activate

        _state.update(pid=None, watch=None, written=False)
        activate.deactivate()  # stops the inherited watch quietly: the parent reports its events
        register()


class _Token:
    """Kept alive for multiprocessing's weak after-fork registry."""


_AFTER_FORK_TOKEN = _Token()


def _arm_multiprocessing_finalizer() -> None:
    # multiprocessing children started by fork leave through os._exit, which skips atexit; their
    # exit still runs multiprocessing's finalizers. A forked child clears the finalizers it
    # inherited, then runs the after-fork callbacks: re-arm from there.
    import multiprocessing.util as mp_util

    try:
        mp_util.Finalize(None, write_now, exitpriority=100)
        mp_util.register_after_fork(_AFTER_FORK_TOKEN, lambda _token: _arm_after_fork())
    except Exception:
        pass


def _arm_after_fork() -> None:
    if _state["pid"] == os.getpid():
        import multiprocessing.util as mp_util

        mp_util.Finalize(None, write_now, exitpriority=100)


WARMUP_METHOD = "compile_or_warm_up_model"  # vLLM's own warm-up, after load_model, before serving


def _wrap_warmup(module_name: str, class_name: str) -> None:
    """Run jitguard's warm-up (``JITGUARD_WARMUP``) at the start of the worker's
    ``compile_or_warm_up_model``: the model is loaded and the device set, serving has not begun."""
    cls = getattr(sys.modules.get(module_name), class_name, None)
    original = cls.__dict__.get(WARMUP_METHOD) if cls is not None else None
    if original is None or not callable(original) or getattr(original, "__jitguard__", False):
        return
    from jitguard.runtime import warmup

    def wrapper(self, *args, __original=original, **kwargs):
        state = warmup.armed()
        if state is not None:
            try:
                state.warm_all(why=f"before vLLM's {WARMUP_METHOD}")
            except Exception as exc:  # the warm-up must never stop vLLM from starting
                print(f"jitguard warmup: failed ({type(exc).__name__}: {exc})", file=sys.stderr)
        return __original(self, *args, **kwargs)

    functools.update_wrapper(wrapper, original)
    wrapper.__jitguard__ = True
    setattr(cls, WARMUP_METHOD, wrapper)


def _arm_warmup() -> None:
    from jitguard.runtime import warmup

    if warmup.arm_from_env():
        for module_name, class_name in STEP_TARGETS:
            _after_import(module_name, lambda m=module_name, c=class_name: _wrap_warmup(m, c))


def register() -> None:
    """The ``vllm.general_plugins`` entry point: vLLM calls it in every process it starts.

    When ``JITGUARD`` is set, starts the process-wide watcher through
    ``jitguard.runtime.activate.activate_from_env`` (once per process) and writes the trace at exit
    (atexit, multiprocessing finalizers, SIGTERM). Never raises: a problem prints one line and leaves vLLM untouched."""
    global _fork_hook_installed
    pid = os.getpid()
    with _lock:
        if _state["pid"] == pid:
            _arm_multiprocessing_finalizer()  # called again after a fork: re-arm in this process
            return
    try:
        from jitguard.runtime import activate

        if os.environ.get("JITGUARD_WARMUP", "").strip():
            _arm_warmup()  # before the watcher, whose hooks then chain to the warm-up's
        if os.environ.get(activate.ENV_MODE, "").strip() == "":
            return  # inert: the common case, decided without importing anything
        if activate.active_watch() is not None or activate.activation_pending():
            return  # `jitguard run` already watches this process (or will, at `import triton`)
        # the same activation as `jitguard run`'s sitecustomize, started now; the plugin writes
        # the trace itself (exit, multiprocessing finalizers, SIGTERM)
        settings = activate.activate_from_env(start="now", write_at_exit=False,
                                              default_trace=DEFAULT_DIR + os.sep)
        watch = activate.active_watch()
        if settings is None or watch is None:
            return
        target = _directory(settings.trace or DEFAULT_DIR)
    except Exception as exc:
        print(f"jitguard: vLLM plugin not active in pid {pid}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return
    with _lock:
        _state.update(pid=pid, watch=watch, written=False, target=target)
    _install_step_marks()
    atexit.register(write_now)
    _arm_multiprocessing_finalizer()
    if threading.current_thread() is threading.main_thread():
        try:
            previous = signal.getsignal(signal.SIGTERM)
            if previous in (signal.SIG_DFL, None) or callable(previous):
                signal.signal(signal.SIGTERM, _on_sigterm(previous))
        except (ValueError, OSError):
            pass
    if not _fork_hook_installed and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook_installed = True
