"""vLLM general plugin: record Triton recompiles in every vLLM process, one trace per process.

Registered in pyproject.toml under the entry point group ``vllm.general_plugins``; vLLM calls
:func:`register` in every process it starts (API server, engine core, each GPU worker). It does
nothing unless ``JITGUARD_TRACE_DIR`` is set, so installing jitguard never changes a deployment::

    JITGUARD_TRACE_DIR=/tmp/jg vllm serve MODEL --tensor-parallel-size 8
    jitguard report /tmp/jg          # merged across ranks: straggler compiles, per-rank variants

Each process writes ``jitguard-rank{R}-{host}-pid{PID}.json`` (``norank`` for processes outside
the tensor-parallel group) when it exits. ``JITGUARD_MODE`` (record | warn | raise, default record)
is passed to the watcher. Steps: vLLM does not call ``jitguard.mark_step``; add it to the model
runner's step (or use ``jitguard.watch(distributed=True)`` in your own loop) to get straggler
analysis, otherwise the report lists compiles per rank and variants per rank.

This module never imports vLLM, torch or Triton at import time: only :func:`register` does work.
"""
from __future__ import annotations

import atexit
import os
import signal
import socket
import sys
import threading
from typing import Any

ENV_DIR = "JITGUARD_TRACE_DIR"
ENV_MODE = "JITGUARD_MODE"

_lock = threading.Lock()
_state: dict[str, Any] = {"pid": None, "watch": None, "written": False, "dir": None}
_fork_hook_installed = False


def _rank_now(fallback: int | None) -> int | None:
    """The process's rank: torch.distributed if initialized, else the trace's, else RANK env."""
    try:
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    if fallback is not None:
        return fallback
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return None


def trace_filename(rank: int | None, host: str | None = None, pid: int | None = None) -> str:
    """``jitguard-rank3-node1-pid4242.json``; ``norank`` when the process has no rank."""
    host = (host or socket.gethostname()).split(".")[0] or "host"
    host = "".join(c if c.isalnum() or c in "-_" else "_" for c in host)
    who = f"rank{rank}" if rank is not None else "norank"
    return f"jitguard-{who}-{host}-pid{pid if pid is not None else os.getpid()}.json"


def _trace_of(watch: Any):
    trace = getattr(watch, "trace", None)
    return trace() if callable(trace) else trace


def write_now() -> str | None:
    """Write this process's trace into the trace directory (idempotent per process); returns the
    path, or None when the plugin is not active here. Safe to call from exit handlers."""
    with _lock:
        watch, directory = _state["watch"], _state["dir"]
        if watch is None or _state["pid"] != os.getpid() or _state["written"]:
            return None
        _state["written"] = True
    try:
        trace = _trace_of(watch)
        rank = _rank_now(getattr(getattr(trace, "process", None), "rank", None))
        if trace is not None and getattr(trace, "process", None) is not None:
            trace.process.rank = rank if trace.process.rank is None else trace.process.rank
        path = os.path.join(directory, trace_filename(rank))
        watch.to_json(path)
        return path
    except Exception as exc:  # never turn a clean vLLM exit into a crash
        print(f"jitguard: could not write the vLLM trace into {directory}: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def _on_sigterm(previous):
    def handler(signum, frame):
        write_now()
        if callable(previous):
            return previous(signum, frame)
        # default action: restore it and re-deliver, so the exit status stays "killed by SIGTERM"
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return handler


def _stop_inherited() -> None:
    """After fork: the parent's watcher (and its events) came along; drop them without writing."""
    watch = _state["watch"]
    _state.update(pid=None, watch=None, written=False)
    if watch is not None:
        try:
            watch.__exit__(None, None, None)
        except Exception:
            pass


def _after_fork_in_child() -> None:
    if _state["pid"] is not None and _state["pid"] != os.getpid():
        _stop_inherited()
        register()


def register() -> None:
    """vLLM calls this in every process. Starts the watcher once per process when
    ``JITGUARD_TRACE_DIR`` is set, and arranges for the trace to be written on exit."""
    global _fork_hook_installed
    directory = os.environ.get(ENV_DIR)
    if not directory:
        return
    pid = os.getpid()
    with _lock:
        if _state["pid"] == pid:
            _arm_multiprocessing_finalizer()  # vLLM may call us again after a fork: re-arm
            return
    if _state["pid"] is not None:  # forked from a process that had it active
        _stop_inherited()
    try:
        os.makedirs(directory, exist_ok=True)
        import jitguard

        watch = jitguard.watch(mode=os.environ.get(ENV_MODE, "record") or "record")
        watch.__enter__()
    except Exception as exc:
        print(f"jitguard: vLLM plugin not active in pid {pid}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return
    with _lock:
        _state.update(pid=pid, watch=watch, written=False, dir=os.path.abspath(directory))
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


def _arm_multiprocessing_finalizer() -> None:
    # multiprocessing children started by fork leave through os._exit, skipping atexit; their
    # exit still runs multiprocessing's finalizers.
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is None:
        return
    try:
        mp_util.Finalize(None, write_now, exitpriority=100)
    except Exception:
        pass
