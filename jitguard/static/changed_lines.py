"""``jitguard scan --diff REV``: which lines changed since a git revision, and which findings sit on them.

The scan itself always reads the whole tree (a new launch in one file can make an old kernel's
parameter vary); this module only decides which of its findings to report: those whose kernel
(decorators through the end of its body) or one of whose launch sites (the whole call) has a line
that changed since REV. Changes are what ``git diff REV`` shows against the working tree (staged or
not) plus untracked files that .gitignore doesn't exclude, which count as changed everywhere.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import warnings
from dataclasses import dataclass, field
from typing import Any

from jitguard.findings import Finding

_HUNK = re.compile(rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {b"a": 7, b"b": 8, b"t": 9, b"n": 10, b"v": 11, b"f": 12, b"r": 13, b'"': 34, b"\\": 92}


class DiffError(Exception):
    """git could not say what changed (not a repository, unknown revision, no git)."""


def _git(args: list[str], cwd: str) -> bytes:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError:
        raise DiffError("--diff needs git, and git is not on PATH") from None
    if proc.returncode != 0:
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit {proc.returncode}"]
        raise DiffError(f"git {args[0]}: {lines[0].removeprefix('fatal: ')}")
    return proc.stdout


def _unquote(raw: bytes) -> bytes:
    """A path as git prints it: C-quoted ("a\\tb\\303\\251.py") when it has unusual bytes."""
    if not (raw.startswith(b'"') and raw.endswith(b'"') and len(raw) >= 2):
        return raw
    body, out, i = raw[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i : i + 1]
        if c == b"\\" and i + 1 < len(body):
            nxt = body[i + 1 : i + 2]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            if re.fullmatch(rb"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
        out += c
        i += 1
    return bytes(out)


def parse_unified_diff(out: bytes) -> dict[str, set[int]]:
    """``git diff --unified=0`` output -> new-side path -> changed line numbers. A hunk that only
    deletes marks the line before the deletion (so a body that lost a line counts as changed)."""
    changed: dict[str, set[int]] = {}
    current: str | None = None
    old_left = new_left = 0
    for line in out.split(b"\n"):
        if old_left > 0 or new_left > 0:  # a hunk's content: never read as a header
            if line.startswith(b"-"):
                old_left -= 1
            elif line.startswith(b"+"):
                new_left -= 1
            elif line.startswith(b"\\"):
                pass  # "\ No newline at end of file"
            else:
                old_left = new_left = 0
            continue
        if line.startswith(b"+++ "):
            target = _unquote(line[4:].rstrip(b"\t"))
            current = None if target == b"/dev/null" else os.fsdecode(target[2:])  # drop "b/"
            if current is not None:
                changed.setdefault(current, set())
        elif line.startswith(b"@@") and current is not None:
            m = _HUNK.match(line)
            if not m:
                continue
            old_left = int(m.group(2) if m.group(2) is not None else 1)
            start = int(m.group(3))
            new_left = int(m.group(4) if m.group(4) is not None else 1)
            if new_left == 0:
                changed[current].add(max(start, 1))
            else:
                changed[current].update(range(start, start + new_left))
    return changed


@dataclass
class ChangedLines:
    """Lines changed since ``rev``: absolute path -> line numbers; ``whole``: files new since then."""

    rev: str
    lines: dict[str, set[int]] = field(default_factory=dict)
    whole: set[str] = field(default_factory=set)

    def touched(self, path: str, first: int, last: int) -> bool:
        p = os.path.realpath(path)
        if p in self.whole:
            return True
        got = self.lines.get(p)
        return bool(got) and any(first <= n <= last for n in got)

    @property
    def files(self) -> set[str]:
        return set(self.lines) | self.whole


def changed_since(rev: str, cwd: str | None = None) -> ChangedLines:
    """Ask git what changed between ``rev`` and the working tree of the repository at ``cwd``."""
    cwd = cwd or os.getcwd()
    if rev.startswith("-"):
        raise DiffError(f"{rev!r} is not a revision")
    top = os.fsdecode(_git(["rev-parse", "--show-toplevel"], cwd).rstrip(b"\n"))
    try:
        _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], cwd)
    except DiffError:
        raise DiffError(f"{rev!r} is not a commit of the repository at {top}") from None
    out = _git(["-c", "core.quotePath=true", "diff", "--no-color", "--no-ext-diff", "--no-textconv",
                "--unified=0", "-M", "--src-prefix=a/", "--dst-prefix=b/", "--end-of-options", rev,
                "--"], top)
    result = ChangedLines(rev)
    for rel, lines in parse_unified_diff(out).items():
        result.lines[os.path.realpath(os.path.join(top, rel))] = lines
    untracked = _git(["ls-files", "--others", "--exclude-standard", "-z"], top)
    for rel in untracked.split(b"\0"):
        if rel:
            result.whole.add(os.path.realpath(os.path.join(top, os.fsdecode(rel))))
    return result


class _Spans:
    """Line spans of kernels and launch calls, read with ``ast`` from the files that changed."""

    def __init__(self) -> None:
        self._trees: dict[str, ast.AST | None] = {}

    def _tree(self, path: str) -> ast.AST | None:
        p = os.path.abspath(path)
        if p not in self._trees:
            try:
                with open(p, "rb") as fh, warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self._trees[p] = ast.parse(fh.read())
            except (OSError, SyntaxError, ValueError):
                self._trees[p] = None
        return self._trees[p]

    def kernel(self, path: str, def_line: int, decorator_line: int | None) -> tuple[int, int]:
        first, last = min(def_line, decorator_line or def_line), def_line
        tree = self._tree(path)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == def_line:
                lines = [d.lineno for d in node.decorator_list] + [first]
                first, last = min(lines), max(last, node.end_lineno or def_line)
                break
        return first, last

    def call(self, path: str, line: int) -> tuple[int, int]:
        last = line
        tree = self._tree(path)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Call) and node.lineno == line:
                last = max(last, node.end_lineno or line)
        return line, last


def _sites(finding: Finding) -> list[tuple[str, str, int, int | None]]:
    """(kind, path, line, decorator line) of what the finding is about: its kernel, the launches it
    names, and its own position (a launch for JG007)."""
    d: dict[str, Any] = finding.details or {}
    out: list[tuple[str, str, int, int | None]] = []
    kpath, kline = d.get("kernel_path"), d.get("kernel_line")
    if isinstance(kpath, str) and isinstance(kline, int):
        out.append(("kernel", kpath, kline, d.get("decorator_line")))
    for rec in list(d.get("launches") or []) + ([d["reference"]] if isinstance(d.get("reference"), dict) else []):
        if isinstance(rec, dict) and isinstance(rec.get("path"), str) and isinstance(rec.get("line"), int):
            out.append(("call", rec["path"], rec["line"], None))
    out.append(("call", finding.path, finding.line, None))
    return out


def select_changed(findings: list[Finding], changed: ChangedLines) -> tuple[list[Finding], int]:
    """The findings on changed kernels or launch sites, and how many others were left out."""
    spans = _Spans()
    files = changed.files
    kept: list[Finding] = []
    for f in findings:
        hit = False
        for kind, path, line, deco in _sites(f):
            if os.path.realpath(path) not in files:
                continue
            first, last = spans.kernel(path, line, deco) if kind == "kernel" else spans.call(path, line)
            if changed.touched(path, first, last):
                hit = True
                break
        if hit:
            kept.append(f)
    return kept, len(findings) - len(kept)
