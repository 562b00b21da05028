"""A gitwildmatch subset: the ``.gitignore`` pattern language used by ``exclude`` and ``.gitignore``.

Supported (what real ``.gitignore`` files use): ``#`` comments, blank lines, ``!`` negation (the last
matching pattern wins), a trailing ``/`` (directories only), a leading or inner ``/`` (anchored to the
directory that holds the pattern), ``*`` and ``?`` (not crossing ``/``), ``[...]`` classes with ``!``/``^``
negation and ranges, ``**`` as a whole segment (``**/x``, ``x/**``, ``a/**/b``), ``\\`` escapes and
trailing-space trimming. Not supported: POSIX classes (``[[:alpha:]]``). A re-included file under an
excluded directory stays excluded (git behaves the same way). tests/test_config.py compares every
verdict with ``git check-ignore`` on random patterns.

A line that can't be compiled (a reversed range ``[z-a]``, which matches nothing in git) or that uses
a POSIX class is dropped and said in ``PatternList.errors`` (with its line); the other lines apply.

``pathspec`` (1.1.1) was tried in this role: tests/test_config.py's comparison with ``git
check-ignore`` (8 random sets of 1-4 patterns a run) failed in 8 of 30 runs with it (``b/**/``, which
it reads as ``b/``; a ``!`` pattern of a directory re-including paths below a later excluded one),
in none of 25 with this translation, which therefore stays.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

_POSIX_CLASS = re.compile(r"\[:[a-z]+:\]")


class PatternError(ValueError):
    """A pattern line that can't be used; the message says why."""


@dataclass(frozen=True)
class Pattern:
    source: str
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool


def _translate_segment_glob(glob: str) -> str:
    """Translate one pattern without ``**`` handling: ``*``, ``?``, classes, escapes."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and glob[j] in "!^":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal "["
                out.append(re.escape(c))
            else:
                body = glob[i + 1 : j]
                negate = body[:1] in ("!", "^")
                if negate:
                    body = body[1:]
                body = body.replace("\\", "\\\\").replace("[", "\\[")
                # A negated class never matches "/" (wildcards stay inside one segment).
                out.append(f"[^/{body}]" if negate else f"[{body}]")
                i = j + 1
                continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def compile_pattern(line: str) -> Pattern | None:
    """Compile one ``.gitignore`` line; ``None`` for blanks and comments; ``PatternError`` for a
    line that can't be used."""
    source = line
    line = line.rstrip("\n").rstrip("\r")
    # Trailing spaces are ignored unless escaped.
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    if not line or line.startswith("#"):
        return None
    negated = False
    if line.startswith("!"):
        negated = True
        line = line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    segments = line.split("/")
    parts: list[str] = []
    for k, seg in enumerate(segments):
        last = k == len(segments) - 1
        if seg == "**":
            if last:
                parts.append(".*")  # "x/**": everything inside x
            else:
                parts.append("(?:.*/)?")  # "**/" : zero or more directories
        else:
            parts.append(_translate_segment_glob(seg) + ("" if last else "/"))
    body = "".join(parts)
    prefix = "" if anchored else "(?:.*/)?"
    if _POSIX_CLASS.search(line):
        raise PatternError("POSIX character classes such as [:alpha:] are not supported")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "possible nested set"
            regex = re.compile(f"^{prefix}{body}$", re.DOTALL)
    except re.error as exc:  # [z-a]: a reversed range
        raise PatternError(exc.msg) from None
    return Pattern(source=source.strip(), regex=regex, negated=negated, dir_only=dir_only)


class PatternList:
    """Patterns that apply below one base directory (given as a posix path, ``""`` for the root)."""

    def __init__(self, lines: list[str] | tuple[str, ...], base: str = "") -> None:
        self.base = base.strip("/")
        self.errors: list[tuple[int, str]] = []  # (1-based line, why the pattern was dropped)
        self.patterns: list[Pattern] = []
        for lineno, line in enumerate(lines, 1):
            try:
                p = compile_pattern(line)
            except PatternError as exc:
                self.errors.append((lineno, f"pattern {line.strip()!r}: {exc}; pattern ignored"))
                continue
            if p is not None:
                self.patterns.append(p)

    def match(self, relpath: str, is_dir: bool) -> bool | None:
        """True: excluded; False: re-included by a ``!`` pattern; None: no pattern says anything.

        ``relpath`` is relative to the same root as ``base`` (posix separators).
        """
        if self.base:
            if not relpath.startswith(self.base + "/"):
                return None
            relpath = relpath[len(self.base) + 1 :]
        verdict: bool | None = None
        for p in self.patterns:
            if p.dir_only and not is_dir:
                continue
            if p.regex.match(relpath):
                verdict = not p.negated
        return verdict
