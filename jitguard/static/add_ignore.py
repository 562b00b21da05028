"""``jitguard fix --add-ignore``: a ``# jitguard: ignore[CODE]`` comment where each finding is
suppressed, so that a codebase adopts the linter with today's findings silenced in the code itself.

The comment goes at the end of the line the finding points at (the kernel's ``def``, its autotune or
jit decorator, or the launch), which is where the scan looks for it; when that line can't take a
comment (it ends inside a string, or with a backslash continuation) it goes on the kernel's decorator
or ``def`` line instead. A line that already carries ``# jitguard: ignore[...]`` gets the new codes
merged into that comment; another comment on the line (``# noqa``) is kept and the new one follows
it. Every other byte stays as it was (line endings, encoding, BOM); files are written through
``safe_write.write_atomic`` like every fix. Running it again finds nothing to add.
"""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Iterable

from jitguard.findings import Finding
from jitguard.static.safe_write import SourceSnapshot, WriteRefused, read_snapshot, write_atomic

_IGNORE = re.compile(r"#\s*jitguard:\s*ignore(?:\[([A-Za-z0-9_,\s]*)\])?")
_EOL = re.compile(rb"\r\n|\r|\n")


@dataclass
class FileIgnores:
    path: str
    snapshot: SourceSnapshot | None = None
    new_data: bytes | None = None
    comments: dict[int, list[str]] = field(default_factory=dict)  # line -> codes added there
    unplaced: list[Finding] = field(default_factory=list)  # no line of it can take a comment
    suppressed: int = 0  # findings the new comments suppress
    error: str | None = None
    written: bool = False

    @property
    def changed(self) -> bool:
        return self.new_data is not None and self.snapshot is not None and self.new_data != self.snapshot.data


class _Lines:
    """A file's physical lines as byte ranges, and which of them can end with a comment."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        try:
            self.encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError:
            self.encoding = "utf-8"
        self.bounds: list[tuple[int, int]] = []  # (start, end of content) per line, 1-based index - 1
        pos = 0
        for m in _EOL.finditer(data):
            self.bounds.append((pos, m.start()))
            pos = m.end()
        if pos < len(data) or not self.bounds:
            self.bounds.append((pos, len(data)))
        self.text = [self._decode(i) for i in range(len(self.bounds))]
        self.blocked: set[int] = set()
        self.comment: dict[int, tuple[int, str]] = {}  # line -> (column, comment text)
        try:
            source = "".join(t + "\n" for t in self.text)
            for tok in tokenize.generate_tokens(io.StringIO(source).readline):
                if tok.end[0] > tok.start[0]:  # a string (or f-string part) running over lines
                    self.blocked.update(range(tok.start[0], tok.end[0]))
                if tok.type == tokenize.COMMENT:
                    self.comment[tok.start[0]] = (tok.start[1], tok.string)
        except (tokenize.TokenError, SyntaxError, IndentationError):
            self.blocked = set(range(1, len(self.bounds) + 1))  # can't tell: touch nothing

    def _decode(self, i: int) -> str:
        start, end = self.bounds[i]
        raw = self.data[start:end]
        if i == 0 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        return raw.decode(self.encoding if self.encoding != "utf-8-sig" else "utf-8", "replace")

    def _byte(self, line: int, col: int) -> int:
        """Offset in the file of character ``col`` of ``line``."""
        start = self.bounds[line - 1][0]
        if line == 1 and self.data.startswith(b"\xef\xbb\xbf"):
            start += 3
        enc = "utf-8" if self.encoding == "utf-8-sig" else self.encoding
        return start + len(self.text[line - 1][:col].encode(enc, "replace"))

    def can_comment(self, line: int) -> bool:
        if not 1 <= line <= len(self.bounds) or line in self.blocked:
            return False
        if line in self.comment:
            return True
        return not self.text[line - 1].rstrip().endswith("\\")

    def existing_codes(self, line: int) -> list[str] | None:
        """Codes of a ``# jitguard: ignore[...]`` already on the line ([] = bare, every code)."""
        c = self.comment.get(line)
        m = _IGNORE.search(c[1]) if c else None
        if m is None:
            return None
        return [x.strip().upper() for x in (m.group(1) or "").split(",") if x.strip()]

    def edited(self, additions: dict[int, list[str]]) -> bytes:
        """The file with each line's codes added, every other byte kept."""
        out = bytearray()
        pos = 0
        for line in sorted(additions):
            start, end = self.bounds[line - 1]
            codes = additions[line]
            existing = self.existing_codes(line)
            if existing is not None and existing:  # merge into "ignore[...]"
                col, text = self.comment[line]
                m = _IGNORE.search(text)
                assert m is not None and m.group(1) is not None
                merged = ",".join(sorted(set(existing) | set(codes)))
                cut_a, cut_b = self._byte(line, col + m.start(1)), self._byte(line, col + m.end(1))
                out += self.data[pos:cut_a] + merged.encode("ascii")
                pos = cut_b
            else:
                comment = f"  # jitguard: ignore[{','.join(sorted(set(codes)))}]".encode("ascii")
                out += self.data[pos:end] + comment
                pos = end
        out += self.data[pos:]
        return bytes(out)


def _candidates(f: Finding) -> list[int]:
    """Lines where a comment suppresses ``f``, best first: its own line, then (for a finding in the
    kernel's file) the kernel's decorator and def lines."""
    d = f.details or {}
    out = [f.line]
    if d.get("kernel_path", f.path) == f.path:
        for key in ("decorator_line", "kernel_line"):
            v = d.get(key)
            if isinstance(v, int) and v not in out:
                out.append(v)
    return out


def plan_ignores(findings: Iterable[Finding]) -> list[FileIgnores]:
    """One entry per file with a finding: the comments to add and the new bytes."""
    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        if f.source == "static":
            by_path.setdefault(f.path, []).append(f)
    plans = []
    for path in sorted(by_path):
        plan = FileIgnores(path)
        plans.append(plan)
        try:
            plan.snapshot = read_snapshot(path)
        except OSError as exc:
            plan.error = f"cannot read: {exc.strerror or exc}"
            continue
        lines = _Lines(plan.snapshot.data)
        for f in sorted(by_path[path], key=Finding.sort_key):
            line = next((n for n in _candidates(f) if lines.can_comment(n)), None)
            if line is None:
                plan.unplaced.append(f)
                continue
            codes = plan.comments.setdefault(line, [])
            plan.suppressed += 1
            if f.code not in codes:
                codes.append(f.code)
        plan.new_data = lines.edited(plan.comments) if plan.comments else plan.snapshot.data
    return plans


def write_ignores(plans: list[FileIgnores]) -> None:
    for plan in plans:
        if not plan.changed or plan.snapshot is None or plan.new_data is None:
            continue
        try:
            write_atomic(plan.snapshot, plan.new_data)
            plan.written = True
        except WriteRefused as exc:
            plan.error = exc.reason
