"""Text report of a scan: ``path:line:col: CODE message`` per finding, errors, then a summary.

Also the helpers the other renderers share: rule metadata lookup and per-code counts.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Sequence

from jitguard.format import plural as _plural

if TYPE_CHECKING:
    from jitguard.findings import Finding
    from jitguard.static.runner import ScanResult


def rules_registry() -> dict[str, Any]:
    """``RULES`` from the registry, or {} when it can't be imported (the report still renders)."""
    try:
        from jitguard.static.rules import RULES
    except Exception:
        return {}
    return dict(RULES)


def rule_name(code: str, rules: dict[str, Any] | None = None) -> str:
    rule = (rules if rules is not None else rules_registry()).get(code)
    return getattr(rule, "name", "") or ""


def findings_and_errors(result: "ScanResult | Sequence[Finding]") -> tuple[list, list, list]:
    """(findings, file errors, internal errors) of what a renderer is given: a scan's result, or
    a list of findings from anywhere (a trace's: ``jitguard report --format sarif TRACE``)."""
    if isinstance(result, (list, tuple)):
        return list(result), [], []
    return list(result.findings), list(result.errors), list(result.internal_errors)


def counts_by_code(result: "ScanResult | Sequence[Finding]") -> dict[str, int]:
    findings = findings_and_errors(result)[0]
    return dict(sorted(Counter(f.code for f in findings).items()))


def message_of(finding: Any) -> str:
    """The finding's message without a leading copy of its own code (renderers print the code)."""
    msg = finding.message
    if msg.startswith(finding.code + " "):
        msg = msg[len(finding.code) + 1 :]
    return msg


def summary_line(result: "ScanResult | Sequence[Finding]") -> str:
    if isinstance(result, (list, tuple)):  # findings without a scan (from a trace)
        per_code = ", ".join(f"{c} x{k}" for c, k in counts_by_code(result).items())
        return f"Found {_plural(len(result), 'finding')} ({per_code})." if result else "No findings."
    n = len(result.findings)
    scanned = _plural(result.files_scanned, "file")
    if n:
        per_code = ", ".join(f"{c} x{k}" for c, k in counts_by_code(result).items())
        line = f"Found {_plural(n, 'finding')} ({per_code}) in {scanned} scanned"
    else:
        line = f"No findings in {scanned} scanned"
    extra = []
    if result.kernels or result.launches:
        extra.append(f"{_plural(result.kernels, 'kernel')}, {_plural(result.launches, 'launch')}")
    errors = len(result.errors)
    if errors:
        extra.append(f"{_plural(errors, 'file')} could not be analyzed")
    if result.internal_errors:
        extra.append(f"{_plural(len(result.internal_errors), 'internal error')} (a jitguard bug)")
    if getattr(result, "baselined", 0):
        extra.append(f"{result.baselined} baselined")
    if getattr(result, "diff_base", None):
        extra.append(f"{result.outside_diff} outside the lines changed since {result.diff_base}")
    if getattr(result, "config", None):
        extra.append(f"settings from {result.config}")
    if extra:
        line += " (" + "; ".join(extra) + ")"
    return line + "."


def error_lines(result: "ScanResult | Sequence[Finding]") -> list[str]:
    _, file_errors, internal_errors = findings_and_errors(result)
    out = []
    for e in file_errors:
        where = f"{e.path}:{e.line}:1" if e.line else e.path
        out.append(f"{where}: error: {e.message}")
    for e in internal_errors:
        out.append(f"{e.path}: internal-error: {e.message}")
    return out


def statistics_rows(result: "ScanResult") -> list[dict[str, Any]]:
    rules = rules_registry()
    safety: dict[str, Counter] = {}
    for f in result.findings:
        safety.setdefault(f.code, Counter())[f.fix_safety] += 1
    rows = []
    for code, count in sorted(counts_by_code(result).items(), key=lambda kv: (-kv[1], kv[0])):
        rows.append(
            {
                "code": code,
                "name": rule_name(code, rules),
                "count": count,
                "fix_safety": dict(sorted(safety[code].items())),
            }
        )
    return rows


def render_statistics(result: "ScanResult") -> str:
    rows = statistics_rows(result)
    lines = []
    width = max([len(str(r["count"])) for r in rows] + [1])
    name_w = max([len(r["name"]) for r in rows] + [4])
    for r in rows:
        fix = ", ".join(f"{k} {v}" for k, v in r["fix_safety"].items())
        lines.append(f"{r['count']:>{width}}  {r['code']}  {r['name']:<{name_w}}  fix: {fix}")
    lines.extend(error_lines(result))
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"


def render(result: "ScanResult", *, statistics: bool = False) -> str:
    if statistics:
        return render_statistics(result)
    lines = [f"{f.path}:{f.line}:{f.column}: {f.code} {message_of(f)}" for f in result.findings]
    lines.extend(error_lines(result))
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"
