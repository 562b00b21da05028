"""Every scan output format, rendered from random results and checked against its contract:
text lines, the versioned JSON schema, the official SARIF 2.1.0 schema, GitHub workflow commands."""
from __future__ import annotations

import json
import pathlib
import random
import re
import string

import jsonschema
import pytest

from jitguard.findings import FileError, Finding
from jitguard.report import github as github_report
from jitguard.report import json as json_report
from jitguard.report import sarif as sarif_report
from jitguard.report import text as text_report
from jitguard.static.rules import RULES
from jitguard.static.runner import ScanResult

from sarif_spec import sarif_schema  # noqa: E402

SARIF_SCHEMA = sarif_schema()


@pytest.fixture
def rng():
    seed = random.randrange(2**32)
    print("seed", seed)
    return random.Random(seed)


def _word(rng, extra=""):
    alphabet = string.ascii_letters + string.digits + "_" + extra
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 10)))


def random_result(rng, tricky=False) -> ScanResult:
    extra = ",:%\n\r é" if tricky else ""
    findings = []
    for _ in range(rng.randrange(0, 12)):
        code = rng.choice(sorted(RULES))
        path = "/".join(_word(rng, " ," if tricky else "") for _ in range(rng.randrange(1, 4))) + ".py"
        findings.append(
            Finding(
                code=code,
                path=path,
                line=rng.randrange(1, 5000),
                column=rng.randrange(1, 120),
                kernel=f"{_word(rng)}.{_word(rng)}",
                param=rng.choice([None, _word(rng)]),
                message=f"{_word(rng, extra)} varies per call: {_word(rng, extra)}",
                fix_safety=rng.choice(["safe", "unsafe", "manual"]),
                details={"evidence": [_word(rng) for _ in range(rng.randrange(3))],
                         "n": rng.randrange(9)},
            )
        )
    errors = [
        FileError(f"{_word(rng)}.py", f"syntax error: {_word(rng, extra)}", rng.choice([None, 3]))
        for _ in range(rng.randrange(0, 3))
    ]
    internal = [FileError("x.py", "internal error (please report): KeyError: 'x'")] if rng.random() < .3 else []
    findings.sort(key=Finding.sort_key)
    return ScanResult(findings=findings, errors=errors, internal_errors=internal,
                      files_scanned=rng.randrange(len(findings) + 1, 100), files_analyzed=5,
                      kernels=rng.randrange(9), launches=rng.randrange(9))


def test_text_one_line_per_finding_then_errors_then_summary(rng):
    for _ in range(30):
        res = random_result(rng)
        lines = text_report.render(res).splitlines()
        n = len(res.findings)
        for f, line in zip(res.findings, lines[:n]):
            assert line == f"{f.path}:{f.line}:{f.column}: {f.code} {f.message}"
        assert len(lines) == n + len(res.errors) + len(res.internal_errors) + 1
        for e, line in zip(res.errors, lines[n:]):
            assert line.startswith(f"{e.path}:") and line.endswith(f"error: {e.message}")
        summary = lines[-1]
        if n:
            assert summary.startswith(f"Found {n} finding")
            for code, k in text_report.counts_by_code(res).items():
                assert f"{code} x{k}" in summary
        else:
            assert summary.startswith("No findings")


def test_message_never_repeats_the_code():
    f = Finding("JG001", "a.py", 1, 1, "m.k", "n", "JG001 n varies", "safe")
    assert text_report.render(ScanResult(findings=[f])).splitlines()[0] == "a.py:1:1: JG001 n varies"


def test_statistics_counts(rng):
    res = random_result(rng)
    rows = text_report.statistics_rows(res)
    assert sum(r["count"] for r in rows) == len(res.findings)
    assert [r["count"] for r in rows] == sorted((r["count"] for r in rows), reverse=True)
    for r in rows:
        assert r["name"] == RULES[r["code"]].name
        assert sum(r["fix_safety"].values()) == r["count"]


def test_json_matches_its_schema_and_the_findings(rng):
    jsonschema.Draft202012Validator.check_schema(json_report.SCAN_SCHEMA)
    for _ in range(30):
        res = random_result(rng, tricky=rng.random() < 0.5)
        stats = rng.random() < 0.5
        doc = json.loads(json_report.render(res, statistics=stats))
        jsonschema.validate(doc, json_report.SCAN_SCHEMA)
        assert doc["schema"] == "jitguard.scan" and doc["version"] == 1
        assert [(d["code"], d["path"], d["line"], d["column"], d["kernel"], d["param"],
                 d["message"], d["fix_safety"]) for d in doc["findings"]] == [
            (f.code, f.path, f.line, f.column, f.kernel, f.param, f.message, f.fix_safety)
            for f in res.findings
        ]
        assert doc["summary"]["findings"] == len(res.findings)
        kinds = [e["kind"] for e in doc["errors"]]
        assert kinds == ["file"] * len(res.errors) + ["internal"] * len(res.internal_errors)
        assert ("statistics" in doc) == stats


def test_sarif_validates_against_the_official_schema(rng):
    for _ in range(20):
        res = random_result(rng, tricky=rng.random() < 0.5)
        doc = json.loads(sarif_report.render(res))
        jsonschema.Draft4Validator(SARIF_SCHEMA).validate(doc)
        run = doc["runs"][0]
        rules = run["tool"]["driver"]["rules"]
        assert {r["id"] for r in rules} == set(RULES)
        for r in rules:
            rule = RULES[r["id"]]
            assert r["help"]["text"] == rule.doc()
            assert r["shortDescription"]["text"] == rule.summary
            assert r["fullDescription"]["text"].startswith(rule.summary)
            assert " ".join(rule.what.split())[:200] in r["fullDescription"]["text"] or len(
                r["fullDescription"]["text"]) == sarif_report.DESCRIPTION_LIMIT
            assert len(r["fullDescription"]["text"]) <= sarif_report.DESCRIPTION_LIMIT
        assert len(run["results"]) == len(res.findings)
        for f, r in zip(res.findings, run["results"]):
            assert rules[r["ruleIndex"]]["id"] == r["ruleId"] == f.code
            region = r["locations"][0]["physicalLocation"]["region"]
            assert (region["startLine"], region["startColumn"]) == (f.line, f.column)
            assert r["message"]["text"] == f.message
        notes = run["invocations"][0]["toolExecutionNotifications"]
        assert len(notes) == len(res.errors) + len(res.internal_errors)
        assert run["invocations"][0]["executionSuccessful"] == (not res.internal_errors)


def test_sarif_fingerprint_survives_line_moves(rng):
    f = random_result(rng).findings or [Finding("JG001", "a.py", 3, 1, "m.k", "n", "m", "safe")]
    g = Finding(**{**f[0].to_dict(), "line": f[0].line + 7})
    fp = [sarif_report.to_document(ScanResult(findings=[x]))["runs"][0]["results"][0]
          ["partialFingerprints"] for x in (f[0], g)]
    assert fp[0] == fp[1]


def _unescape(s: str) -> str:
    return s.replace("%2C", ",").replace("%3A", ":").replace("%0A", "\n").replace("%0D", "\r") \
        .replace("%25", "%")


def test_github_commands_escape_and_parse_back(rng):
    for _ in range(30):
        res = random_result(rng, tricky=True)
        lines = github_report.render(res, limit=len(res.findings) + 3).splitlines()
        cmd = re.compile(r"^::(warning|error) ([^:]*)::(.*)$")
        for f, line in zip(res.findings, lines):
            m = cmd.match(line)
            assert m and m.group(1) == "warning", line
            props = dict(p.split("=", 1) for p in m.group(2).split(","))
            assert _unescape(props["file"]) == f.path
            assert (int(props["line"]), int(props["col"])) == (f.line, f.column)
            assert props["title"] == f.code
            assert _unescape(m.group(3)) == f.message
        n = len(res.findings)
        errs = lines[n:-1]
        assert len(errs) == len(res.errors) + len(res.internal_errors)
        assert all(cmd.match(x).group(1) == "error" for x in errs)
        assert not lines[-1].startswith("::")


def test_published_schema_file_matches_the_code():
    """docs/scan_schema_v1.json is `jitguard scan --print-schema` output; keep them identical."""
    published = json.loads(
        (pathlib.Path(__file__).parents[1] / "docs" / "scan_schema_v1.json").read_text()
    )
    assert published == json_report.SCAN_SCHEMA
