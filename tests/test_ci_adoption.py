"""Adopting jitguard on a codebase that already has findings: ``scan --write-baseline`` /
``--baseline`` (keyed without line numbers, stale entries), ``scan --diff REV`` (git), ``fix
--add-ignore``, SARIF fingerprints and levels, and GitHub's 10-annotation limit."""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import stat
import subprocess

import jsonschema
import pytest

from jitguard.findings import FileError, Finding
from jitguard.report import github as github_report
from jitguard.report import sarif as sarif_report
from jitguard.static import baseline as bl
from jitguard.static.changed_lines import parse_unified_diff
from jitguard.static.runner import ScanResult
from scan_helpers import run, scan_json  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
from sarif_spec import sarif_schema  # noqa: E402

SARIF_SCHEMA = sarif_schema()
HAS_GIT = shutil.which("git") is not None

KERNEL = '''\
@triton.jit
def {name}(x_ptr, {param}, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < {param})


def launch_{name}(x):
    {name}[(1,)](x, {arg}, BLOCK=128)
'''
HEADER = "import triton\nimport triton.language as tl\n\n\n"


def found(doc):
    return sorted((f["path"], f["kernel"].rsplit(".", 1)[-1], f["param"], f["code"]) for f in doc["findings"])


def tree(root: pathlib.Path) -> None:
    """Two files, three findings (two JG001, one JG002)."""
    (root / "pkg").mkdir()
    (root / "pkg" / "a.py").write_text(
        HEADER + KERNEL.format(name="ka", param="num_tokens", arg="x.shape[0]") + "\n\n"
        + KERNEL.format(name="kb", param="n", arg="x.shape[0] * 3"))
    (root / "pkg" / "b.py").write_text(
        HEADER + KERNEL.format(name="kc", param="N: tl.constexpr", arg="int(x.sum())").replace(
            "mask=offs < N: tl.constexpr", "mask=offs < N"))


def git(cwd, *args):
    return subprocess.run(["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout


# --- baseline ------------------------------------------------------------------------------------

def test_write_baseline_records_every_finding_without_line_numbers(tmp_path):
    tree(tmp_path)
    _, before = scan_json(tmp_path, ".")
    assert len(before["findings"]) == 3
    r = run(["scan", "--no-cache", "--write-baseline", "jg-baseline.json", "."], tmp_path)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip().endswith("; 3 baselined).")
    assert "wrote 3 findings (3 entries) to jg-baseline.json" in r.stderr
    doc = json.loads((tmp_path / "jg-baseline.json").read_text())
    assert doc["schema"] == "jitguard.baseline" and doc["version"] == 1
    keys = {(e["path"], e["kernel"].rsplit(".", 1)[-1], e["param"], e["code"]) for e in doc["entries"]}
    assert keys == {(p, k, n, c) for p, k, n, c in found(before)}
    text = json.dumps(doc)
    assert "line" not in {k for e in doc["entries"] for k in e}
    assert not re.search(r"line \d", text), text  # evidence comes without line numbers
    r, after = scan_json(tmp_path, "--baseline", "jg-baseline.json", ".")
    assert r.exit_code == 0 and after["findings"] == []
    assert after["summary"]["baselined"] == 3 and after["summary"]["baseline_stale"] == 0


def test_baseline_survives_lines_added_above_and_code_reformatted(tmp_path):
    tree(tmp_path)
    run(["scan", "--no-cache", "--write-baseline", "b.json", "."], tmp_path)
    a = tmp_path / "pkg" / "a.py"
    src = a.read_text()
    # lines added above every kernel, the launches reformatted (spaces, a trailing comma, a break)
    src = "# a comment\n\n\nimport os\n\n" + src
    src = src.replace("ka[(1,)](x, x.shape[0], BLOCK=128)", "ka[(1,)](\n        x,\n        x.shape[ 0 ],\n        BLOCK=128,\n    )")
    a.write_text(src)
    r, doc = scan_json(tmp_path, "--baseline", "b.json", ".")
    assert doc["findings"] == [] and doc["summary"]["baselined"] == 3, r.stderr
    assert r.exit_code == 0


def test_new_kernel_is_reported_alone_and_fixed_ones_are_stale(tmp_path):
    tree(tmp_path)
    run(["scan", "--no-cache", "--write-baseline", "b.json", "."], tmp_path)
    b = tmp_path / "pkg" / "b.py"
    b.write_text(b.read_text() + "\n\n" + KERNEL.format(name="knew", param="num_tokens", arg="x.shape[0]"))
    r, doc = scan_json(tmp_path, "--baseline", "b.json", ".")
    assert found(doc) == [("pkg/b.py", "knew", "num_tokens", "JG001")]
    assert r.exit_code == 1 and doc["summary"]["baselined"] == 3
    # fix kb: its entry matches nothing any more
    a = tmp_path / "pkg" / "a.py"
    a.write_text(a.read_text().replace("@triton.jit\ndef kb", '@triton.jit(do_not_specialize=["n"])\ndef kb'))
    r = run(["scan", "--no-cache", "--baseline", "b.json", "."], tmp_path)
    assert "1 baseline entry in b.json matches no finding" in r.stderr
    assert "stale: pkg/a.py: JG001 a.kb.n" in r.stderr, r.stderr
    _, doc = scan_json(tmp_path, "--baseline", "b.json", ".")
    assert doc["summary"]["baseline_stale"] == 1 and doc["summary"]["baselined"] == 2
    # rewriting shrinks the file
    run(["scan", "--no-cache", "--write-baseline", "b.json", "."], tmp_path)
    entries = json.loads((tmp_path / "b.json").read_text())["entries"]
    assert sorted(e["kernel"].rsplit(".", 1)[-1] for e in entries) == ["ka", "kc", "knew"]
    # a scan of one file says nothing about the other file's entries
    r = run(["scan", "--no-cache", "--baseline", "b.json", "pkg/a.py"], tmp_path)
    assert "stale" not in r.stderr and r.exit_code == 0


def test_changed_evidence_makes_a_finding_new(tmp_path):
    tree(tmp_path)
    run(["scan", "--no-cache", "--write-baseline", "b.json", "."], tmp_path)
    a = tmp_path / "pkg" / "a.py"
    a.write_text(a.read_text().replace("ka[(1,)](x, x.shape[0]", "ka[(1,)](x, len(x)"))
    r, doc = scan_json(tmp_path, "--baseline", "b.json", ".")
    assert found(doc) == [("pkg/a.py", "ka", "num_tokens", "JG001")]
    assert doc["summary"]["baseline_stale"] == 1


def test_baseline_from_config_and_from_another_directory(tmp_path):
    tree(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.jitguard]\nbaseline = "ci/jitguard-baseline.json"\n')
    r = run(["scan", "--no-cache", "--baseline", "ci/nope.json", "."], tmp_path)
    assert r.exit_code == 2 and "no such file" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "ci").mkdir()
    run(["scan", "--no-cache", "--write-baseline", "ci/jitguard-baseline.json", "."], tmp_path)
    r, doc = scan_json(tmp_path, ".")  # the configured baseline applies
    assert doc["findings"] == [] and doc["summary"]["baselined"] == 3
    r, doc = scan_json(tmp_path / "pkg", ".")  # from a subdirectory: paths are the file's
    assert doc["findings"] == [] and doc["summary"]["baselined"] == 3
    _, doc = scan_json(tmp_path / "pkg", "b.py")
    assert doc["summary"]["baselined"] == 1 and doc["summary"]["baseline_stale"] == 0
    r, doc = scan_json(tmp_path, "--no-baseline", ".")
    assert len(doc["findings"]) == 3 and doc["summary"]["baselined"] == 0
    (tmp_path / "pyproject.toml").write_text("[tool.jitguard]\nbaseline = 3\n")
    r = run(["scan", "--no-cache", "."], tmp_path)
    assert r.exit_code == 2 and "'baseline' must be a file name" in r.stderr


def test_baseline_usage_errors(tmp_path):
    tree(tmp_path)
    (tmp_path / "bad.json").write_text('{"schema": "something else"}')
    r = run(["scan", "--no-cache", "--baseline", "bad.json", "."], tmp_path)
    assert r.exit_code == 2 and "not a jitguard baseline" in r.stderr
    (tmp_path / "bad.json").write_text('{"schema": "jitguard.baseline", "version": 1, "entries": [{"path": 1}]}')
    r = run(["scan", "--no-cache", "--baseline", "bad.json", "."], tmp_path)
    assert r.exit_code == 2 and "entry 0" in r.stderr
    r = run(["scan", "--no-cache", "--baseline", "a.json", "--write-baseline", "b.json", "."], tmp_path)
    assert r.exit_code == 2
    r = run(["scan", "--no-cache", "--write-baseline", "b.json", "--diff", "HEAD", "."], tmp_path)
    assert r.exit_code == 2 and not (tmp_path / "b.json").exists()


def _finding(**kw):
    base = dict(code="JG007", path="m.py", line=30, column=5, kernel="m.k", param=None,
                message="this launch of k passes no options but the launch at line 12 passes num_warps",
                fix_safety="manual", details={"options": [], "reference_options": ["num_warps"],
                                              "reference": {"path": "m.py", "line": 12}})
    base.update(kw)
    return Finding(**base)


def test_findings_with_one_key_are_counted(tmp_path):
    path = str(tmp_path / "b.json")
    two = [_finding(line=30), _finding(line=44)]
    base = bl.Baseline.from_findings(path, two)
    assert [e.count for e in base.entries] == [2]
    base.write()
    loaded = bl.load(path)
    three = two + [_finding(line=50)]
    applied = bl.apply(loaded, three)
    assert applied.baselined == 2 and [f.line for f in applied.new] == [50] and applied.stale == []
    applied = bl.apply(loaded, two[:1])
    assert [(e.count, e.code) for e in applied.stale] == [(1, "JG007")]


def test_evidence_key_ignores_lines_and_whitespace_only():
    a = bl.evidence_of(Finding("JG001", "m.py", 3, 1, "m.k", "n", "x", "safe",
                               details={"evidence": ["n = min(\n  1,\n  x.shape[0],\n) (line 40)",
                                                     "from pkg/ops.py:88"]}))
    b = bl.evidence_of(Finding("JG001", "m.py", 9, 1, "m.k", "n", "x", "safe",
                               details={"evidence": ["n = min(1, x.shape[0]) (line 12)", "from pkg/ops.py:3"]}))
    c = bl.evidence_of(Finding("JG001", "m.py", 9, 1, "m.k", "n", "x", "safe",
                               details={"evidence": ["n = min(1, x.shape[1]) (line 12)", "from pkg/ops.py:3"]}))
    canon = lambda ev: [bl._canonical(e) for e in ev]  # noqa: E731
    assert canon(a) == canon(b) and canon(a) != canon(c)
    # a file named in evidence is written relative to where the scan ran: only its name counts
    d = ["f(n=m) called in pkg.ops.g (src/pkg/ops.py:88)"]
    e = ["f(n=m) called in pkg.ops.g (../repo/src/pkg/ops.py:12)"]
    assert canon(d) == canon(e) == ["f(n=m)calledinpkg.ops.g(ops.py)"]
    assert not any(re.search(r"\d\)$|:\d", e) for e in a + b)


# --- --diff --------------------------------------------------------------------------------------

def test_parse_unified_diff_hunks_quoted_paths_and_content_that_looks_like_headers():
    out = (b'diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -3,0 +4,2 @@\n++++ not a header\n'
           b'+@@ -1 +1 @@\n@@ -10,2 +11,0 @@\n-a\n-b\n'
           b'diff --git "a/t\\303\\251st.py" "b/t\\303\\251st.py"\n--- "a/t\\303\\251st.py"\n'
           b'+++ "b/t\\303\\251st.py"\n@@ -1 +1 @@\n-x\n+y\n'
           b'--- a/gone.py\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-1\n-2\n-3\n')
    got = parse_unified_diff(out)
    assert got == {"x.py": {4, 5, 11}, "t\u00e9st.py": {1}}


@pytest.mark.skipif(not HAS_GIT, reason="git is not installed")
def test_diff_reports_only_changed_kernels_and_launch_sites(tmp_path):
    tree(tmp_path)
    # a kernel whose only launch passes a fixed value: no finding until a new launch varies it
    (tmp_path / "pkg" / "c.py").write_text(HEADER + KERNEL.format(name="kd", param="m", arg="4096"))
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    r, doc = scan_json(tmp_path, "--diff", "HEAD", ".")
    assert doc["findings"] == [] and doc["summary"]["outside_diff"] == 3 and r.exit_code == 0
    assert "3 outside the lines changed since HEAD" in run(
        ["scan", "--no-cache", "--diff", "HEAD", "."], tmp_path).stdout
    # 1. a new file (untracked) launching the old kernel kd with a varying value
    (tmp_path / "pkg" / "d.py").write_text("from .c import kd\n\n\ndef go(x):\n    kd[(1,)](x, x.shape[0], BLOCK=128)\n")
    r, doc = scan_json(tmp_path, "--diff", "HEAD", ".")
    assert found(doc) == [("pkg/c.py", "kd", "m", "JG001")]
    # 2. one line inside kb's body changed (kb in a file with ka, which is left out)
    a = tmp_path / "pkg" / "a.py"
    a.write_text(a.read_text().replace("mask=offs < n)", "mask=(offs < n))"))
    _, doc = scan_json(tmp_path, "--diff", "HEAD", ".")
    assert found(doc) == [("pkg/a.py", "kb", "n", "JG001"), ("pkg/c.py", "kd", "m", "JG001")]
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "two")
    # 3. a line deleted from kc's body (a deletion-only hunk), staged, not committed
    b = tmp_path / "pkg" / "b.py"
    b.write_text(b.read_text().replace("    offs = tl.arange(0, BLOCK)\n", "    offs = tl.arange(0, BLOCK)\n    pass\n", 1))
    git(tmp_path, "commit", "-qam", "three")
    b.write_text(b.read_text().replace("    pass\n", "", 1))
    git(tmp_path, "add", "-A")
    _, doc = scan_json(tmp_path, "--diff", "HEAD", ".")
    assert found(doc) == [("pkg/b.py", "kc", "N", "JG002")]
    _, doc = scan_json(tmp_path, "--diff", "HEAD~2", ".")
    assert [x[1] for x in found(doc)] == ["kb", "kd"]  # b.py is as it was at "base"
    # with a baseline: the new finding only if it isn't in it
    run(["scan", "--no-cache", "--write-baseline", "b.json", "."], tmp_path)
    _, doc = scan_json(tmp_path, "--diff", "HEAD~2", "--baseline", "b.json", ".")
    assert doc["findings"] == [] and doc["summary"]["baselined"] == 4


@pytest.mark.skipif(not HAS_GIT, reason="git is not installed")
def test_diff_errors_are_one_line_and_exit_2(tmp_path):
    tree(tmp_path)
    r = run(["scan", "--no-cache", "--diff", "HEAD", "."], tmp_path)
    assert r.exit_code == 2 and "not a git repository" in r.stderr
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    r = run(["scan", "--no-cache", "--diff", "no-such-rev", "."], tmp_path)
    assert r.exit_code == 2 and "'no-such-rev' is not a commit" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run(["scan", "--no-cache", "--diff", "--output=x", "."], tmp_path)
    assert r.exit_code == 2 and not (tmp_path / "x").exists()


# --- fix --add-ignore ----------------------------------------------------------------------------

def test_add_ignore_silences_every_finding_once_and_keeps_other_bytes(tmp_path):
    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures")
    _, before = scan_json(tmp_path, "fixtures")
    n = len(before["findings"])
    assert n > 20
    old = {p: p.read_bytes() for p in (tmp_path / "fixtures").rglob("*.py")}
    r = run(["fix", "--no-cache", "--add-ignore", "--check", "fixtures"], tmp_path)
    assert r.exit_code == 1 and f"{n} findings would be suppressed" in r.stderr
    assert {p: p.read_bytes() for p in old} == old
    r = run(["fix", "--no-cache", "--add-ignore", "fixtures"], tmp_path)
    assert r.exit_code == 0 and f"{n} findings suppressed" in r.stderr, r.stderr
    r, after = scan_json(tmp_path, "fixtures")
    assert after["findings"] == [] and r.exit_code == 0
    changed = 0
    for p, data in old.items():
        new = p.read_bytes()
        a, b = data.split(b"\n"), new.split(b"\n")
        assert len(a) == len(b), p
        for x, y in zip(a, b):
            if x != y:
                changed += 1
                assert y.startswith(x) and re.fullmatch(rb"  # jitguard: ignore\[JG00\d(,JG00\d)*\]", y[len(x):]), y
    assert changed == sum(1 for f in {(f["path"], f["line"]) for f in before["findings"]})
    snapshot = {p: p.read_bytes() for p in old}
    r = run(["fix", "--no-cache", "--add-ignore", "fixtures"], tmp_path)
    assert r.exit_code == 0 and "0 findings suppressed" in r.stderr
    assert {p: p.read_bytes() for p in old} == snapshot


def test_add_ignore_merges_keeps_comments_crlf_encoding_and_avoids_continuations(tmp_path):
    src = (
        "# -*- coding: latin-1 -*-\r\n"
        "import triton\r\nimport triton.language as tl\r\n\r\n\r\n"
        "@triton.jit  # noqa: E501\r\n"
        "def k(x_ptr, n, BLOCK: tl.constexpr):  # caf\xe9 # jitguard: ignore[JG007]\r\n"
        "    offs = tl.arange(0, BLOCK)\r\n"
        "    tl.store(x_ptr + offs, 0.0, mask=offs < n)\r\n\r\n\r\n"
        "@triton.jit\r\n"
        "def k2(x_ptr, m, \\\r\n"
        "       BLOCK: tl.constexpr):\r\n"
        "    tl.store(x_ptr, 0.0, mask=tl.arange(0, BLOCK) < m)\r\n\r\n\r\n"
        "def go(x):\r\n    k[(1,)](x, x.shape[0], BLOCK=128)\r\n    k2[(1,)](x, x.shape[0] * 3, BLOCK=128)\r\n"
    ).encode("latin-1")
    p = tmp_path / "m.py"
    p.write_bytes(src)
    r = run(["fix", "--no-cache", "--add-ignore", "m.py"], tmp_path)
    assert r.exit_code == 0, r.output
    new = p.read_bytes()
    expected = (src.replace(b"# caf\xe9 # jitguard: ignore[JG007]", b"# caf\xe9 # jitguard: ignore[JG001,JG007]")
                .replace(b"@triton.jit\r\ndef k2", b"@triton.jit  # jitguard: ignore[JG001]\r\ndef k2"))
    assert new == expected
    r, doc = scan_json(tmp_path, "m.py")
    assert doc["findings"] == []


def test_add_ignore_leaves_a_read_only_file_and_says_so(tmp_path):
    tree(tmp_path)
    a = tmp_path / "pkg" / "a.py"
    data = a.read_bytes()
    a.chmod(stat.S_IRUSR | stat.S_IRGRP)
    try:
        r = run(["fix", "--no-cache", "--add-ignore", "."], tmp_path)
    finally:
        a.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert r.exit_code == 1 and "pkg/a.py: not changed: file is read-only" in r.stderr
    assert a.read_bytes() == data
    r = run(["fix", "--no-cache", "--add-ignore", "--from-trace", "t.json", "."], tmp_path)
    assert r.exit_code == 2


# --- SARIF and GitHub annotations ----------------------------------------------------------------

def _sarif(findings):
    return sarif_report.to_document(ScanResult(findings=findings))["runs"][0]["results"]


def test_sarif_fingerprints_survive_line_moves_but_not_a_new_cause(tmp_path):
    tree(tmp_path)
    first = json.loads(run(["scan", "--no-cache", "--format", "sarif", "."], tmp_path).stdout)
    a = tmp_path / "pkg" / "a.py"
    a.write_text("\n\n\n# moved\n" + a.read_text())
    second = json.loads(run(["scan", "--no-cache", "--format", "sarif", "."], tmp_path).stdout)
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(second)
    fps = lambda d: sorted(r["partialFingerprints"]["jitguardFinding/v2"] for r in d["runs"][0]["results"])  # noqa: E731
    lines = lambda d: sorted(r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in d["runs"][0]["results"])  # noqa: E731
    assert fps(first) == fps(second) and lines(first) != lines(second)
    # two findings with one key (two launches passing the same options) stay two alerts
    two = _sarif([_finding(line=30), _finding(line=44)])
    assert len({r["partialFingerprints"]["jitguardFinding/v2"] for r in two}) == 2
    other = _sarif([_finding(details={"options": ["num_stages"], "reference_options": ["num_warps"]})])
    assert other[0]["partialFingerprints"] != two[0]["partialFingerprints"]


def test_sarif_level_and_rank_follow_confidence():
    res = _sarif([_finding(confidence=c) for c in ("high", "medium", "low")])
    assert [(r["level"], r["properties"]["confidence"]) for r in res] == [
        ("warning", "high"), ("warning", "medium"), ("note", "low")]
    assert res[0]["rank"] > res[1]["rank"] > res[2]["rank"]
    doc = sarif_report.to_document(ScanResult(findings=[_finding(confidence="low")]))
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(doc)


def test_github_annotations_stop_at_ten_per_kind_and_point_at_sarif():
    findings = [_finding(line=i + 1, message=f"m{i}") for i in range(25)]
    errors = [FileError(f"e{i}.py", "syntax error: x", 1) for i in range(12)]
    out = github_report.render(ScanResult(findings=findings, errors=errors, files_scanned=40)).splitlines()
    warnings = [x for x in out if x.startswith("::warning ")]
    errs = [x for x in out if x.startswith("::error ")]
    notices = [x for x in out if x.startswith("::notice ")]
    assert [int(re.search(r"line=(\d+)", w).group(1)) for w in warnings] == list(range(1, 11))
    assert len(errs) == 10 and len(notices) == 1
    plain = [x for x in out if re.match(r"m\.py:\d+:5: JG007 ", x)]
    assert [int(x.split(":")[1]) for x in plain] == list(range(11, 26))
    assert [x for x in out if x.startswith(("e10.py", "e11.py"))] == ["e10.py:1:1: error: syntax error: x", "e11.py:1:1: error: syntax error: x"]
    assert "15 of 25 findings and 2 of 12 errors" in notices[0] and "SARIF" in notices[0]
    assert out[-1].startswith("Found 25 findings")
    few = github_report.render(ScanResult(findings=findings[:10])).splitlines()
    assert len([x for x in few if x.startswith("::warning ")]) == 10
    assert not any(x.startswith("::notice") for x in few)


def test_readme_adoption_transcript_is_the_recorded_run():
    """README's CI section pastes bench/results/ci_adoption_vllm.txt (python bench/ci_adoption.py)."""
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- ci-adoption:begin[^>]*-->\n```console\n(.*?)```\n<!-- ci-adoption:end -->", text, re.S)
    assert m, "README.md: no ci-adoption block"
    recorded = (ROOT / "bench" / "results" / "ci_adoption_vllm.txt").read_text()
    assert m.group(1) == recorded
    record = json.loads((ROOT / "bench" / "results" / "ci_adoption_vllm.json").read_text())
    assert f"{record['baselined']} baselined" in recorded
    assert len(record["new_kernel_findings"]) == 1 and "num_tokens" in record["new_kernel_findings"][0]
    assert record["exit"] == {"write_baseline": 0, "baseline": 0, "new_kernel": 1, "diff": 1,
                              "diff_with_baseline": 0}
    ai = record["add_ignore"]
    assert ai["only_appended_comments"] and ai["second_run_changes_nothing"] and ai["exit"] == 0
    assert ai["scan_after"].startswith("No findings")
    assert f"changed {ai['lines_changed']} lines of {ai['files_changed']} files" in text


def test_a_new_launch_that_comes_first_keeps_the_entry_matched(tmp_path):
    tree(tmp_path)
    run(["scan", "--no-cache", "--write-baseline", "b.json", "."], tmp_path)
    # pkg/_extra.py sorts before pkg/a.py: its launch is now the finding's first (its evidence)
    (tmp_path / "pkg" / "_extra.py").write_text("from .a import ka\n\n\ndef more(x):\n    ka[(1,)](x, len(x), BLOCK=128)\n")
    _, plain = scan_json(tmp_path, "--no-baseline", ".")
    (ka,) = [f for f in plain["findings"] if f["kernel"].endswith(".ka")]
    assert ka["details"]["launches"][0]["path"] == "pkg/_extra.py"  # the premise
    r, doc = scan_json(tmp_path, "--baseline", "b.json", ".")
    assert doc["findings"] == [] and doc["summary"]["baselined"] == 3
    assert doc["summary"]["baseline_stale"] == 0


hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

# statements whose lines can and can't end with a comment: strings over several lines, backslash
# continuations, brackets over several lines, existing comments (ours and others)
_FRAGMENTS = [
    "x = 1\n", 'y = """a\nb # not a comment\n"""\n', "z = 1 + \\\n    2\n", "f(\n    1,\n    2,\n)\n",
    'w = f"""{x}\n{y}"""\n', "def g():\n    return 1  # c\n", "q = 1  # jitguard: ignore[JG002]\n",
    "a = [\n    1,  # one\n    2]\n", 'b = "x" \\\n    "y"\n', "if x:\n    pass\n", "\n",
    "c = 'caf\u00e9'  # noqa\n", "d = (1 +\n     2)\n", "@dec\ndef h(p,\n      q):\n    ...\n",
]


@hypothesis.settings(max_examples=80, deadline=None)
@hypothesis.given(parts=st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=12),
                  data=st.data(), eol=st.sampled_from(["\n", "\r\n"]))
def test_a_suppression_comment_lands_on_its_line_and_nowhere_else(parts, data, eol):
    """On modules mixing strings over several lines, continuations, brackets and comments: a line
    that says it can take a comment gets it at its end (the module still parses, the comment token
    is on that line, with the codes merged into one already there), every other byte stays."""
    import ast
    import io
    import tokenize

    from jitguard.static.add_ignore import _Lines

    raw = "".join(parts).replace("\n", eol).encode("utf-8")
    ast.parse(raw)
    lines = _Lines(raw)
    picked = data.draw(st.sets(st.integers(1, len(lines.bounds)), min_size=1, max_size=5))
    ok = {line: ["JG001"] for line in picked if lines.can_comment(line)}
    new = lines.edited(ok)
    ast.parse(new)
    comments = {t.start[0]: t.string for t in tokenize.tokenize(io.BytesIO(new).readline)
                if t.type == tokenize.COMMENT}
    for line in ok:
        assert re.search(r"jitguard: ignore\[(JG001|JG001,JG002)\]", comments.get(line, "")), (line, new)
    back = new.replace(b"  # jitguard: ignore[JG001]", b"").replace(b"ignore[JG001,JG002]", b"ignore[JG002]")
    assert back == raw
    assert len(new.splitlines()) == len(raw.splitlines())


SPANS = '''\
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({}, num_warps=4)],
    key=["M"],
)
@triton.jit
def ka(x_ptr, M, num_tokens,
       BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < num_tokens)


def helper(x):
    return x


def go(x):
    ka[(1,)](
        x,
        x.shape[0],
        x.shape[0],
    )
    helper(x)
'''
# line -> what a change there must report: ka's decorators through its body (5-13) are the kernel,
# the launch call (21-25) is its launch site; the rest (imports, helper, go's other lines) nothing
_SPAN_EXPECT = {n: ("ka" if 5 <= n <= 13 or 21 <= n <= 25 else None) for n in range(1, 27)}


@pytest.mark.skipif(not HAS_GIT, reason="git is not installed")
def test_diff_spans_line_by_line(tmp_path):
    from jitguard.static.changed_lines import changed_since, select_changed
    from jitguard.static.runner import scan_paths

    path = tmp_path / "m.py"
    path.write_text(SPANS)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        findings = scan_paths(["."], use_cache=False, jobs=1).findings
        assert {(f.code, f.param) for f in findings} == {("JG001", "M"), ("JG001", "num_tokens"), ("JG003", "M")}
        lines = SPANS.splitlines(keepends=True)
        for n, want in _SPAN_EXPECT.items():
            edited = lines[:]
            edited[n - 1] = edited[n - 1].rstrip("\n") + "  \n"  # the line changes, no line moves
            path.write_text("".join(edited))
            kept, outside = select_changed(findings, changed_since("HEAD"))
            got = {f.kernel.rsplit(".", 1)[-1] for f in kept} or {None}
            assert got == {want}, (n, lines[n - 1])
            assert outside == (0 if want else len(findings))
        # a line deleted from the body, and one deleted right after it: only the first is the kernel's
        for n, want in ((12, "ka"), (15, None)):
            path.write_text("".join(lines[:n - 1] + lines[n:]))
            kept, _ = select_changed(findings, changed_since("HEAD"))
            assert ({f.kernel.rsplit(".", 1)[-1] for f in kept} or {None}) == {want}, n
    finally:
        os.chdir(old)
