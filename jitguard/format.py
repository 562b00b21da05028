"""The one set of formatting helpers the messages share: milliseconds, paths shown relative to the
working directory, plurals."""
from __future__ import annotations

import os


def ms(value: float | None) -> str:
    """``0.4 ms``, ``62 ms``, ``1.25 s``; ``? ms`` when unknown."""
    if value is None:
        return "? ms"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def relative_path(path: str | None, cwd: str | None = None) -> str:
    """``path`` relative to ``cwd`` (default: the working directory) when it lies below it, else as
    given; posix separators; ``?`` for none."""
    if not path:
        return "?"
    cwd = cwd or os.getcwd()
    try:
        rel = os.path.relpath(os.path.abspath(path), cwd)
    except ValueError:  # another drive (Windows)
        return path.replace(os.sep, "/")
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return path.replace(os.sep, "/")
    return rel.replace(os.sep, "/")


def location(path: str | None, line: int | None, cwd: str | None = None) -> str:
    """``path:line`` with the path as ``relative_path`` shows it."""
    shown = relative_path(path, cwd)
    return f"{shown}:{line}" if path and line else shown


def plural(n: int, word: str) -> str:
    """``1 file``, ``2 files``, ``3 launches``."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word}{'es' if word.endswith(('ch', 'sh', 's', 'x')) else 's'}"
