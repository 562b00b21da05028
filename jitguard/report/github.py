"""GitHub Actions workflow commands: one ``::warning`` annotation per finding, ``::error`` per file
that could not be analyzed, then the plain summary line (printed in the log, not an annotation)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from jitguard.report.text import findings_and_errors, message_of, summary_line

if TYPE_CHECKING:
    from jitguard.findings import Finding
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


def render(result: "ScanResult | Sequence[Finding]") -> str:
    """Annotations for a scan's result, or for a list of findings from anywhere (a trace's)."""
    findings, file_errors, internal_errors = findings_and_errors(result)
    lines = [
        _command("warning", f.path, f.line, f.column, f.code, message_of(f))
        for f in findings
    ]
    lines += [
        _command("error", e.path, e.line, None, "jitguard: file not analyzed", e.message)
        for e in file_errors
    ]
    lines += [
        _command("error", e.path, e.line, None, "jitguard: internal error", e.message)
        for e in internal_errors
    ]
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"
