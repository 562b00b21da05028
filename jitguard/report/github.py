"""GitHub Actions workflow commands: one ``::warning`` annotation per finding, ``::error`` per file
that could not be analyzed, then the plain summary line (printed in the log, not an annotation).

GitHub shows at most 10 error and 10 warning annotations per step (the rest are dropped without a
word), so only the first ``ANNOTATION_LIMIT`` of each kind are annotations; the others are printed as
plain ``path:line:col: CODE message`` lines in the log, and one ``::notice`` says how many were not
annotated and that the SARIF report (code scanning) carries them all."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from jitguard.report.text import error_lines, findings_and_errors, message_of, summary_line

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


ANNOTATION_LIMIT = 10  # per kind and step: what GitHub shows


def render(result: "ScanResult | Sequence[Finding]", *, limit: int = ANNOTATION_LIMIT) -> str:
    """Annotations for a scan's result, or for a list of findings from anywhere (a trace's)."""
    findings, file_errors, internal_errors = findings_and_errors(result)
    errors = [(e, "jitguard: file not analyzed") for e in file_errors]
    errors += [(e, "jitguard: internal error") for e in internal_errors]
    lines = [
        _command("warning", f.path, f.line, f.column, f.code, message_of(f))
        for f in findings[:limit]
    ]
    lines += [_command("error", e.path, e.line, None, title, e.message) for e, title in errors[:limit]]
    rest_f, rest_e = findings[limit:], errors[limit:]
    if rest_f or rest_e:
        lines += [f"{f.path}:{f.line}:{f.column}: {f.code} {message_of(f)}" for f in rest_f]
        err_text = error_lines(result)
        lines += err_text[limit:]
        left = []
        if rest_f:
            left.append(f"{len(rest_f)} of {len(findings)} findings")
        if rest_e:
            left.append(f"{len(rest_e)} of {len(errors)} errors")
        note = (f"{' and '.join(left)} are not annotations (GitHub shows {limit} warnings and "
                f"{limit} errors per step); they are in this log, and all of them in the SARIF report "
                "in code scanning (jitguard scan --format sarif, uploaded with "
                "github/codeql-action/upload-sarif)")
        lines.append(f"::notice title={escape_property('jitguard: more findings')}::{escape_data(note)}")
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"
