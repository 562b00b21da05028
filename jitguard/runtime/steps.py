"""Step labels for events: ``jitguard.mark_step(n=None)`` from a serving or training loop.

The step is process-wide (every thread's events carry the latest mark). Before the first mark,
events carry ``step: null``.
"""
from __future__ import annotations

import threading

_lock = threading.Lock()
_step: int | None = None
_listeners: list = []  # called after each mark (the watcher refreshes the rank there)


def mark_step(n: int | None = None) -> int:
    """Label the events that follow with step ``n`` (default: the previous step + 1, or 0).

    Call it at the top of each step of a serving or training loop; ``jitguard report`` uses the
    step numbers to line up compiles across ranks. Returns the step now in effect.
    """
    global _step
    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
        raise TypeError(f"mark_step(n): n must be an int or None, got {type(n).__name__}")
    with _lock:
        _step = n if n is not None else (0 if _step is None else _step + 1)
        now = _step
    for listener in _listeners:
        try:
            listener(now)
        except Exception:  # a step label must never break the loop that marks it
            pass
    return now


def current_step() -> int | None:
    return _step


def reset_steps() -> None:
    """Forget the step (for tests and for a new run in the same process)."""
    global _step
    with _lock:
        _step = None
