"""JSON report of a scan, versioned: ``{"schema": "jitguard.scan", "version": 1, ...}``.

``SCAN_SCHEMA`` (JSON Schema 2020-12) is the one definition of the format; ``jitguard scan
--print-schema`` prints it and the tests validate every report against it. Within version 1, fields
are only ever added; a removal or a change of meaning bumps the version.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import jitguard
from jitguard.report.text import counts_by_code, message_of, rule_name, rules_registry, statistics_rows

if TYPE_CHECKING:
    from jitguard.static.runner import ScanResult

SCHEMA_NAME = "jitguard.scan"
SCHEMA_VERSION = 1

_FINDING = {
    "type": "object",
    "required": [
        "code", "name", "path", "line", "column", "kernel", "param", "message", "fix_safety",
        "source", "details",
    ],
    "properties": {
        "code": {"type": "string", "pattern": "^JG[0-9]{3}$", "description": "stable rule code"},
        "name": {"type": "string", "description": "rule name, e.g. varying-int-specialized"},
        "path": {"type": "string", "description": "posix path, relative to the cwd when below it"},
        "line": {"type": "integer", "minimum": 1},
        "column": {"type": "integer", "minimum": 1},
        "kernel": {"type": "string", "description": "qualified name of the kernel"},
        "param": {"type": ["string", "null"], "description": "kernel parameter, if any"},
        "message": {"type": "string", "description": "one line: what and the fix"},
        "fix_safety": {"enum": ["safe", "unsafe", "manual"]},
        "source": {"enum": ["static", "runtime"]},
        "fix": {
            "type": ["object", "null"],
            "description": "the fix the rule decided, as `jitguard fix` applies it: the edits of one "
            "kernel (located by path, def line and jit line), their applicability and the reason",
            "required": ["applicability", "reason", "edits"],
            "properties": {
                "applicability": {"enum": ["safe", "unsafe", "manual"]},
                "reason": {"type": "string"},
                "edits": {"type": "array", "items": {
                    "type": "object", "required": ["kind"],
                    "properties": {"kind": {"enum": ["add_do_not_specialize", "remove_entry", "drop_constexpr"]}},
                }},
            },
        },
        "confidence": {"enum": ["high", "medium", "low"],
                       "description": "how sure: high when the evidence follows from the code (or was "
                       "observed), medium when it rests on a convention, low on a name alone"},
        "details": {
            "type": "object",
            "description": "rule-specific evidence (launch sites, provenance chain, uses); "
            "informative, its keys may grow",
        },
    },
    "additionalProperties": False,
}  # fmt: skip

_WARNING = {
    "type": "object",
    "required": ["path", "line", "message"],
    "properties": {
        "path": {"type": "string"},
        "line": {"type": ["integer", "null"], "minimum": 1},
        "message": {"type": "string"},
    },
    "additionalProperties": False,
}

_ERROR = {
    "type": "object",
    "required": ["path", "message", "line", "kind"],
    "properties": {
        "path": {"type": "string"},
        "message": {"type": "string"},
        "line": {"type": ["integer", "null"], "minimum": 1},
        "kind": {
            "enum": ["file", "internal", "usage"],
            "description": "file: a problem with the file (syntax error, not UTF-8, unreadable, "
            "symlink loop); internal: a jitguard bug while analyzing it (exit code 2); usage: the "
            "command line or the configuration stopped the scan before it began (exit code 2)",
        },
    },
    "additionalProperties": False,
}

SCAN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:jitguard:schema:scan:1",
    "title": "jitguard scan report, version 1",
    "type": "object",
    "required": ["schema", "version", "jitguard_version", "summary", "findings", "errors"],
    "properties": {
        "schema": {"const": SCHEMA_NAME},
        "version": {"const": SCHEMA_VERSION},
        "jitguard_version": {"type": "string"},
        "summary": {
            "type": "object",
            "required": [
                "findings", "errors", "internal_errors", "files_scanned", "files_analyzed",
                "by_code",
            ],
            "properties": {
                "findings": {"type": "integer", "minimum": 0},
                "errors": {"type": "integer", "minimum": 0},
                "internal_errors": {"type": "integer", "minimum": 0},
                "files_scanned": {"type": "integer", "minimum": 0,
                                  "description": "Python files found after excludes"},
                "files_analyzed": {"type": "integer", "minimum": 0,
                                   "description": "files that may hold kernels or launches, "
                                   "analyzed now or read from the cache"},
                "files_skipped": {"type": "integer", "minimum": 0,
                                  "description": "files the byte prefilter ruled out"},
                "cache_hits": {"type": "integer", "minimum": 0},
                "kernels": {"type": "integer", "minimum": 0, "description": "@triton.jit (and Gluon) kernels found"},
                "launches": {"type": "integer", "minimum": 0,
                             "description": "launch sites bound to a kernel of the scanned files"},
                "suppressed": {"type": "integer", "minimum": 0,
                               "description": "findings dropped by inline `# jitguard: ignore` "
                               "comments, select/ignore and per-file-ignores"},
                "below_confidence": {"type": "integer", "minimum": 0,
                                     "description": "findings less sure than --confidence, not listed"},
                "baselined": {"type": "integer", "minimum": 0,
                              "description": "findings the baseline holds (not listed)"},
                "baseline_stale": {"type": "integer", "minimum": 0,
                                   "description": "baseline entries that matched no finding"},
                "outside_diff": {"type": "integer", "minimum": 0,
                                 "description": "with --diff: findings off the changed lines "
                                 "(not listed)"},
                "config": {"type": ["string", "null"],
                           "description": "the configuration file the settings came from (null: "
                           "none, or --isolated)"},
                "duration_s": {"type": "number", "minimum": 0},
                "by_code": {"type": "object", "additionalProperties": {"type": "integer"}},
            },
        },
        "findings": {"type": "array", "items": _FINDING},
        "errors": {"type": "array", "items": _ERROR},
        "warnings": {
            "type": "array",
            "description": "problems that don't stop the scan, e.g. an inline suppression naming "
            "a code no rule has",
            "items": _WARNING,
        },
        "statistics": {
            "type": "array",
            "description": "present with --statistics: one row per code, most frequent first",
            "items": {
                "type": "object",
                "required": ["code", "name", "count", "fix_safety"],
                "properties": {
                    "code": {"type": "string"},
                    "name": {"type": "string"},
                    "count": {"type": "integer", "minimum": 1},
                    "fix_safety": {"type": "object", "additionalProperties": {"type": "integer"}},
                },
            },
        },
    },
    "additionalProperties": False,
}  # fmt: skip


def _jsonable(value: Any) -> Any:
    """Details come from the engine; make sure anything odd in them still serializes."""
    return json.loads(json.dumps(value, default=repr))


def to_document(result: "ScanResult", *, statistics: bool = False) -> dict[str, Any]:
    rules = rules_registry()
    doc: dict[str, Any] = {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "jitguard_version": jitguard.__version__,
        "summary": {
            "findings": len(result.findings),
            "errors": len(result.errors),
            "internal_errors": len(result.internal_errors),
            "files_scanned": result.files_scanned,
            "files_analyzed": result.files_analyzed,
            "files_skipped": result.files_skipped,
            "cache_hits": result.cache_hits,
            "kernels": result.kernels,
            "launches": result.launches,
            "suppressed": result.suppressed,
            "below_confidence": getattr(result, "below_confidence", 0),
            "baselined": getattr(result, "baselined", 0),
            "baseline_stale": sum(e.count for e in getattr(result, "baseline_stale", [])),
            "outside_diff": getattr(result, "outside_diff", 0),
            "config": result.config,
            "duration_s": round(result.duration_s, 4),
            "by_code": counts_by_code(result),
        },
        "findings": [
            {
                "code": f.code,
                "name": rule_name(f.code, rules),
                "path": f.path,
                "line": f.line,
                "column": f.column,
                "kernel": f.kernel,
                "param": f.param,
                "message": message_of(f),
                "fix_safety": f.fix_safety,
                "source": f.source,
                "fix": f.fix.to_dict() if f.fix is not None else None,
                "confidence": f.confidence,
                "details": _jsonable(f.details or {}),
            }
            for f in result.findings
        ],
        "errors": [
            {"path": e.path, "message": e.message, "line": e.line, "kind": "file"}
            for e in result.errors
        ]
        + [
            {"path": e.path, "message": e.message, "line": e.line, "kind": "internal"}
            for e in result.internal_errors
        ],
        "warnings": [{"path": w.path, "line": w.line, "message": w.message} for w in result.warnings],
    }
    if statistics:
        doc["statistics"] = statistics_rows(result)
    return doc


def render(result: "ScanResult", *, statistics: bool = False) -> str:
    return json.dumps(to_document(result, statistics=statistics), indent=2) + "\n"
