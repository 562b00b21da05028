"""``.gitignore`` patterns (``exclude``, per-file-ignores, ``.gitignore`` files), matched by ``pathspec``.

``pathspec.GitIgnoreSpec`` implements git's wildmatch and its edge cases (the last matching pattern
wins, ``!`` re-includes, a trailing ``/`` for directories, ``**``). Each line is compiled on its own,
so one pattern it can't compile (a reversed range ``[z-a]``, a trailing ``\\``) is dropped and said
in ``PatternList.errors`` while the others apply. POSIX classes (``[[:alpha:]]``) are dropped and said
the same way: pathspec would read them as a plain bracket class and match other names than git does.
"""
from __future__ import annotations

import re
import warnings

import pathspec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

_POSIX_CLASS = re.compile(r"\[:[a-z]+:\]")


class PatternList:
    """Patterns that apply below one base directory (given as a posix path, ``""`` for the root)."""

    def __init__(self, lines: list[str] | tuple[str, ...], base: str = "") -> None:
        self.base = base.strip("/")
        self.errors: list[tuple[int, str]] = []  # (1-based line, why the pattern was dropped)
        self.patterns: list[GitIgnoreSpecPattern] = []
        for lineno, line in enumerate(lines, 1):
            pattern = _compile(line, lineno, self.errors)
            if pattern is not None:
                self.patterns.append(pattern)
        self._spec = pathspec.GitIgnoreSpec(self.patterns)

    def match(self, relpath: str, is_dir: bool) -> bool | None:
        """True: excluded; False: re-included by a ``!`` pattern; None: no pattern says anything.

        ``relpath`` is relative to the same root as ``base`` (posix separators).
        """
        if not self.patterns:
            return None
        if self.base:
            if not relpath.startswith(self.base + "/"):
                return None
            relpath = relpath[len(self.base) + 1 :]
        # a directory is asked as "dir/", so that patterns ending in "/" apply to it only
        return self._spec.check_file(relpath + "/" if is_dir else relpath).include


def _compile(line: str, lineno: int, errors: list[tuple[int, str]]) -> GitIgnoreSpecPattern | None:
    if _POSIX_CLASS.search(line) and not line.lstrip().startswith("#"):
        errors.append((lineno, f"pattern {line.strip()!r}: POSIX character classes such as "
                               "[:alpha:] are not supported; pattern ignored"))
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "possible nested set" from re
            pattern = GitIgnoreSpecPattern(line)
    except (re.error, ValueError, TypeError) as exc:  # GitIgnorePatternError is a ValueError
        why = exc.msg if isinstance(exc, re.error) else str(exc)
        errors.append((lineno, f"pattern {line.strip()!r}: {why}; pattern ignored"))
        return None
    return pattern if pattern.include is not None else None  # blanks and comments
