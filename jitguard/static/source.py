"""Reading a Python source file as Python does: bytes decoded (BOM, coding cookie), parsed with the
stdlib ``ast``, segments of the text for messages, and the ``# jitguard: ignore[...]`` comments."""
from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings

from jitguard.static.errors import SourceError

_IGNORE = re.compile(r"#\s*jitguard:\s*ignore(?:\[([A-Za-z0-9_,\s]*)\])?")


def suppressions(text: str) -> dict[int, list[str]]:
    """line -> codes silenced by a ``# jitguard: ignore[...]`` comment there ([] = every code)."""
    out: dict[int, list[str]] = {}
    if "jitguard" not in text:
        return out
    try:
        comments = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline)
                    if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        comments = [(i + 1, line[line.index("#"):]) for i, line in enumerate(text.splitlines()) if "#" in line]
    for line, comment in comments:
        m = _IGNORE.search(comment)
        if not m:
            continue
        codes = sorted({c.strip().upper() for c in (m.group(1) or "").split(",") if c.strip()})
        out[line] = codes
    return out


class Source:
    """A file's text; ``segment(node)`` is the source text of an ast node."""

    def __init__(self, text: str):
        self.text = text
        self._lines: list[bytes] | None = None

    def segment(self, node: ast.AST) -> str:
        try:
            if self._lines is None:
                self._lines = [line.encode("utf-8") for line in self.text.splitlines(keepends=True)]
            l0, l1 = node.lineno - 1, node.end_lineno - 1
            c0, c1 = node.col_offset, node.end_col_offset
            if l0 == l1:
                return self._lines[l0][c0:c1].decode("utf-8", "replace")
            parts = [self._lines[l0][c0:]] + self._lines[l0 + 1:l1] + [self._lines[l1][:c1]]
            return b"".join(parts).decode("utf-8", "replace")
        except (AttributeError, IndexError, TypeError):
            try:
                return ast.unparse(node)
            except Exception:  # pragma: no cover - unparse of odd nodes
                return "?"


def decode(source: bytes | str) -> str:
    if isinstance(source, str):
        return source
    if source.startswith(b"\xef\xbb\xbf"):
        source = source[3:]
    try:
        return source.decode("utf-8")
    except UnicodeDecodeError as exc:
        cookie = re.search(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", b"\n".join(source.split(b"\n")[:2]), re.M)
        if cookie is None:
            raise SourceError(f"not valid UTF-8 ({exc.reason} at byte {exc.start}) and no coding declaration") from None
        try:
            return source.decode(cookie.group(1).decode("ascii"))
        except (LookupError, UnicodeDecodeError) as exc2:
            raise SourceError(f"cannot decode with the declared encoding: {exc2}") from None


def parse(path: str, text: str) -> ast.Module:
    """The module's ast; SourceError where Python would not parse it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise SourceError(f"syntax error: {exc.msg}", line=exc.lineno) from None
    except (ValueError, TypeError) as exc:  # e.g. NUL bytes
        raise SourceError(f"cannot parse: {exc}") from None
    except (RecursionError, MemoryError):
        raise SourceError("too deeply nested to parse") from None
