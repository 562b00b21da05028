"""Reading a Python source file as Python does: bytes decoded (BOM, coding cookie), parsed with the
stdlib ``ast``, segments of the text for messages, and the ``# jitguard: ignore[...]`` comments.

Both ``scan`` and ``fix`` go through here, so a file is the same text (or the same error) to both:

* ``read_bytes`` reads a regular file of at most ``limit`` bytes; a FIFO (which would block the
  scan forever), a device (``/dev/zero`` never ends), a socket, or a file over the limit raises
  ``SourceError`` with the reason. Links are followed: what counts is what they point to.
* ``decode`` decodes with the encoding Python itself would use (``tokenize.detect_encoding``: the
  BOM, the ``coding:`` declaration of the first two lines, else UTF-8) and refuses what Python
  refuses to compile for its declaration: an unknown codec, a BOM with a cookie that is not UTF-8,
  a codec that does not decode bytes to text (``rot13``, ``hex``).
"""
from __future__ import annotations

import ast
import codecs
import io
import os
import re
import stat
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
        rows = (r.decode("utf-8", "replace") for r in text.encode("utf-8", "surrogatepass").splitlines())
        comments = [(i + 1, line[line.index("#"):]) for i, line in enumerate(rows) if "#" in line]  # Python's lines
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
                # bytes.splitlines breaks at \n, \r\n and \r only, as Python counts lines (ast's
                # lineno); str.splitlines would also break at \f, \v, \x1c-\x1e, \x85, U+2028/9
                self._lines = self.text.encode("utf-8", "surrogatepass").splitlines(keepends=True)
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


# A Python file larger than this is not read (the largest .py file of vLLM 0.33.0 is ~0.3 MiB,
# generated tables rarely pass a few MiB; a 2 GiB sparse file would cost 2 GiB of memory).
MAX_SOURCE_BYTES = 32 * 1024 * 1024

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO")."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n} bytes"


def read_bytes(path: str, limit: int = MAX_SOURCE_BYTES) -> bytes:
    """The bytes of the regular file at ``path`` (links followed); raises ``SourceError`` for
    anything else or for a file over ``limit`` bytes, ``OSError`` when it can't be opened."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):  # checked before opening: opening a FIFO blocks
        raise SourceError(f"{file_kind(st.st_mode)}, not a regular file; not read")
    if st.st_size > limit:
        raise SourceError(f"{_mib(st.st_size)}, over the {_mib(limit)} limit for a source file; not read")
    # O_NONBLOCK: if the path was swapped for a FIFO since the stat, opening still returns
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise SourceError(f"{file_kind(st.st_mode)}, not a regular file; not read")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise SourceError(f"over the {_mib(limit)} limit for a source file; not read")
    return data


def encoding_of(data: bytes) -> str:
    """The encoding Python decodes ``data`` with (``utf-8-sig`` when there is a BOM); raises
    ``SourceError`` for a declaration Python refuses."""
    lines = iter(data.splitlines(keepends=True)[:2])
    try:
        enc, _ = tokenize.detect_encoding(lambda: next(lines, b""))
    except SyntaxError as exc:  # unknown codec, BOM with another cookie, undecodable first lines
        if exc.msg.startswith("invalid or missing encoding declaration"):
            return "utf-8"  # no cookie, not UTF-8: decode() says where
        raise SourceError(f"bad coding declaration: {exc.msg} (Python refuses to compile this "
                          "file)") from None
    try:
        info = codecs.lookup(enc)
    except LookupError as exc:
        raise SourceError(f"bad coding declaration: {exc}") from None
    if not getattr(info, "_is_text_encoding", True):
        raise SourceError(f"bad coding declaration: {enc!r} is not a text encoding "
                          "(Python refuses to compile this file)")
    return enc


def decode(data: bytes | str) -> str:
    """The text Python reads from ``data``; raises ``SourceError`` where Python would refuse."""
    if isinstance(data, str):
        return data
    enc = encoding_of(data)
    try:
        return data.decode(enc)
    except UnicodeDecodeError as exc:
        if _python_parses(data):  # CPython 3.11 skips undecodable bytes inside comments
            return data.decode(enc, errors="replace")  # only comments change: columns hold
        line = data.count(b"\n", 0, exc.start) + 1
        if enc in ("utf-8", "utf-8-sig"):
            raise SourceError(f"not valid UTF-8 ({exc.reason} at byte {exc.start}) and no coding "
                              "declaration", line=line) from None
        raise SourceError(f"cannot decode with the declared encoding {enc}: {exc.reason} at byte "
                          f"{exc.start}", line=line) from None
    except (UnicodeError, LookupError) as exc:  # a codec that fails in other ways (idna labels)
        raise SourceError(f"cannot decode with the declared encoding {enc}: {exc}") from None


def _python_parses(data: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def round_trips(data: bytes) -> str | None:
    """``None`` if the editor (LibCST) can decode ``data`` strictly and so write it back byte for
    byte, else why not (undecodable bytes in a comment, which Python itself skips)."""
    try:
        data.decode(encoding_of(data))
    except SourceError as exc:
        return str(exc)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return (f"bytes that are not valid {exc.encoding} in a comment (line {line}; Python skips "
                "them there, an edit could not keep them byte for byte)")
    except (UnicodeError, LookupError) as exc:
        return f"cannot decode with the declared encoding: {exc}"
    return None


def parse(path: str, text: str, data: bytes | None = None) -> ast.Module:
    """The module's ast; SourceError where Python would not parse it. ``data``: the file's bytes,
    parsed with Python's own decoding when given (a codec that decodes the file one way as a whole
    and another line by line is refused here as Python refuses it)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(data if data is not None else text, filename=path)
    except SyntaxError as exc:
        raise SourceError(f"syntax error: {exc.msg}", line=exc.lineno) from None
    except (ValueError, TypeError) as exc:  # e.g. NUL bytes
        raise SourceError(f"cannot parse: {exc}") from None
    except (RecursionError, MemoryError):
        raise SourceError("too deeply nested to parse") from None
