"""GitHub Actions workflow commands: one ``::warning`` annotation per finding, ``::error`` per file
that could not be analyzed, then the plain summary line (printed in the log, not an annotation)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from jitguard.report.text import message_of, summary_line

if TYPE_CHECKING:
    from jitguard.static.runner import ScanResult


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _command(kind: str, path: str, line: int | None, col: int | None, title: str, msg: str) -> str:
    props = [f"file={escape_property(path)}"]
    if line:
        props.append(f"line={int(line)}")
    if col:
        props.append(f"col={int(col)}")
    props.append(f"title={escape_property(title)}")
    return f"::{kind} {','.join(props)}::{escape_data(msg)}"


def render(result: "ScanResult") -> str:
    lines = [
        _command("warning", f.path, f.line, f.column, f.code, message_of(f))
        for f in result.findings
    ]
    lines += [
        _command("error", e.path, e.line, None, "jitguard: file not analyzed", e.message)
        for e in result.errors
    ]
    lines += [
        _command("error", e.path, e.line, None, "jitguard: internal error", e.message)
        for e in result.internal_errors
    ]
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"
