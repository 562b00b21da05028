"""SARIF 2.1.0 report of a scan, for GitHub code scanning and other SARIF viewers.

One run; ``tool.driver.rules`` lists every rule of the registry (id, name, short and full
description (at most 1,024 characters, what code-scanning hosts show) and the whole doc as help,
default level, fix safety); each result points at its rule by
id and index, carries a ``partialFingerprints`` entry that survives line moves (the baseline's key:
code, path, kernel, parameter, evidence without line numbers; jitguard/static/baseline.py), a level
and rank from the finding's confidence (high and medium: warning, low: note), and files that could
not be analyzed become tool execution notifications.
Paths relative to the working directory use ``uriBaseId: "%SRCROOT%"``.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import quote

import jitguard
from jitguard.report.text import findings_and_errors, message_of, rules_registry

if TYPE_CHECKING:
    from jitguard.findings import Finding
    from jitguard.static.runner import ScanResult

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"


def _location(path: str, line: int | None, column: int | None = None) -> dict[str, Any]:
    if os.path.isabs(path):
        artifact = {"uri": Path(path).as_uri()}
    else:
        # Percent-encode the path's bytes (a file name that is not UTF-8 keeps its raw bytes).
        artifact = {"uri": quote(path.encode("utf-8", "surrogateescape")), "uriBaseId": "%SRCROOT%"}
    loc: dict[str, Any] = {"physicalLocation": {"artifactLocation": artifact}}
    if line:
        region: dict[str, Any] = {"startLine": int(line)}
        if column:
            region["startColumn"] = int(column)
        loc["physicalLocation"]["region"] = region
    return loc


# Code-scanning hosts cut descriptions longer than this; the whole doc goes in ``help``.
DESCRIPTION_LIMIT = 1024


def _clip(text: str, limit: int = DESCRIPTION_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def _rule_descriptor(code: str, rule: Any) -> dict[str, Any]:
    summary = getattr(rule, "summary", code)
    doc = rule.doc() if hasattr(rule, "doc") else summary
    what = " ".join(getattr(rule, "what", "").split())  # the doc's "What it catches", one line
    desc: dict[str, Any] = {
        "id": code,
        "name": getattr(rule, "name", code),
        "shortDescription": {"text": _clip(summary)},
        "fullDescription": {"text": _clip(f"{summary} {what}".strip())},
        "help": {"text": doc, "markdown": f"```\n{doc}```"},
        "defaultConfiguration": {"level": "warning"},
        "properties": {"fix_safety": getattr(rule, "fix_safety", "manual"), "tags": ["triton"]},
    }
    return desc


def _fingerprint(f: Any, occurrence: int = 0) -> str:
    """What the finding is about, never where it sits: the baseline's key (file, kernel, parameter,
    code, evidence without line numbers) and, for several findings with one key, their order."""
    from jitguard.static.baseline import entry_of

    key = entry_of(f, os.getcwd()).key
    parts = [*key[:4], *key[4], str(occurrence)]
    blob = "\0".join(parts).encode("utf-8", "surrogateescape")
    return hashlib.sha256(blob).hexdigest()[:32]


# SARIF result level and rank (0-100, higher is more relevant) by the finding's confidence.
_LEVEL = {"high": "warning", "medium": "warning", "low": "note"}
_RANK = {"high": 90.0, "medium": 60.0, "low": 30.0}


def _result(f: Any, rule_index: int, occurrence: int) -> dict[str, Any]:
    """One SARIF result: level and rank from the finding's confidence, a fingerprint that survives
    line moves."""
    confidence = getattr(f, "confidence", "medium")
    return {
        "ruleId": f.code,
        "ruleIndex": rule_index,
        "level": _LEVEL.get(confidence, "warning"),
        "rank": _RANK.get(confidence, 60.0),
        "message": {"text": message_of(f)},
        "locations": [_location(f.path, f.line, f.column)],
        "partialFingerprints": {"jitguardFinding/v2": _fingerprint(f, occurrence)},
        "properties": {
            "kernel": f.kernel,
            "param": f.param,
            "fix_safety": f.fix_safety,
            "source": f.source,
            "confidence": confidence,
        },
    }


def to_document(result: "ScanResult | Sequence[Finding]") -> dict[str, Any]:
    """The SARIF log of a scan's result, or of a list of findings from anywhere (a trace's)."""
    findings, file_errors, internal_errors = findings_and_errors(result)
    rules = rules_registry()
    codes = sorted(set(rules) | {f.code for f in findings})
    index = {c: i for i, c in enumerate(codes)}
    descriptors = [
        _rule_descriptor(c, rules[c]) if c in rules else {"id": c, "name": c,
                                                          "shortDescription": {"text": c}}
        for c in codes
    ]  # fmt: skip
    from collections import Counter

    from jitguard.static.baseline import entry_of

    results = []
    seen: Counter = Counter()
    for f in findings:
        key = entry_of(f, os.getcwd()).key
        results.append(_result(f, index[f.code], seen[key]))
        seen[key] += 1
    notifications = []
    for e, kind in [(e, "file") for e in file_errors] + [
        (e, "internal") for e in internal_errors
    ]:
        notifications.append(
            {
                "level": "error",
                "message": {"text": e.message},
                "locations": [_location(e.path, e.line)],
                "descriptor": {"id": "internal-error" if kind == "internal" else "file-error"},
            }
        )
    cwd = Path(os.getcwd()).as_uri().rstrip("/") + "/"
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "jitguard",
                "version": jitguard.__version__,
                "semanticVersion": jitguard.__version__,
                "rules": descriptors,
            }
        },
        "originalUriBaseIds": {"%SRCROOT%": {"uri": cwd}},
        "invocations": [
            {
                "executionSuccessful": not internal_errors,
                "toolExecutionNotifications": notifications,
            }
        ],
        "results": results,
    }
    return {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def render(result: "ScanResult | Sequence[Finding]") -> str:
    return json.dumps(to_document(result), indent=2) + "\n"
