"""``jitguard scan`` and ``jitguard rule`` end to end (real engine, CLI in-process): formats, exit
codes, select/ignore, config, suppressions, --output, --statistics, --package."""
from __future__ import annotations

import json
import os
import pathlib
import random
import re

import jsonschema
import pytest

from jitguard.report.json import SCAN_SCHEMA
from jitguard.static.rules import RULES
from scan_helpers import run, scan_json  # noqa: E402

from sarif_spec import sarif_schema  # noqa: E402

SARIF_SCHEMA = sarif_schema()
LINE_RE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>JG\d{3}) (?P<msg>.+)$")

KERNEL = """\
import triton
import triton.language as tl


@triton.jit
def {name}(x_ptr, {n}, {c}: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < {n})
"""
LAUNCH_VARYING = """
def launch_{name}(x):
    {name}[(1,)](x, x.shape[0], 4, BLOCK=128){comment}
"""
LAUNCH_CONSTEXPR = """
def launch2_{name}(x):
    {name}[(1,)](x, 7, int(x.sum()), BLOCK=128)
"""
LAUNCH_STABLE = """
def launch_{name}(x):
    {name}[(1,)](x, 4096, 4, BLOCK=128)
"""


@pytest.fixture
def rng():
    seed = random.randrange(2**32)
    print("seed", seed)
    return random.Random(seed)


def ident(rng, prefix):
    return f"{prefix}_{rng.randrange(16**6):x}"


def write_tree(root: pathlib.Path, rng, n_files=3):
    """Kernel files with random names; returns {(path, code, param)} the scan must report."""
    expected = set()
    for i in range(n_files):
        name, n, c = ident(rng, "kern"), ident(rng, "n"), ident(rng, "c")
        src = KERNEL.format(name=name, n=n, c=c)
        kind = rng.choice(["varying", "constexpr", "both", "stable"])
        if kind in ("varying", "both"):
            src += LAUNCH_VARYING.format(name=name, comment="")
            expected.add((f"m{i}.py", "JG001", n))
        if kind in ("constexpr", "both"):
            src += LAUNCH_CONSTEXPR.format(name=name)
            expected.add((f"m{i}.py", "JG002", c))
        if kind == "stable":
            src += LAUNCH_STABLE.format(name=name)
        (root / f"m{i}.py").write_text(src)
    return expected


def test_text_output_and_exit_codes(tmp_path, rng):
    expected = write_tree(tmp_path, rng, n_files=rng.randrange(2, 5))
    r = run(["scan", "--no-cache", "."], tmp_path)
    lines = r.stdout.splitlines()
    got = set()
    for line in lines[:-1]:
        m = LINE_RE.match(line)
        assert m, line
        got.add((m["path"], m["code"], re.match(r"(\w+)", m["msg"]).group(1)))
    assert got == expected
    assert r.exit_code == (1 if expected else 0)
    assert lines[-1].startswith("Found" if expected else "No findings")
    assert "\r" not in r.stderr  # no progress output when stderr is not a terminal
    assert run(["scan", "--no-cache", "--exit-zero", "."], tmp_path).exit_code == 0


def test_clean_tree_exits_zero(tmp_path):
    (tmp_path / "a.py").write_text(KERNEL.format(name="k", n="n", c="c") +
                                   LAUNCH_STABLE.format(name="k"))
    r = run(["scan", "--no-cache", "a.py"], tmp_path)
    assert r.exit_code == 0 and r.stdout.startswith("No findings in 1 file scanned")


def test_select_and_ignore_by_code_and_prefix(tmp_path, rng):
    src = KERNEL.format(name="k", n="num_tokens", c="C") + LAUNCH_VARYING.format(
        name="k", comment="") + LAUNCH_CONSTEXPR.format(name="k")
    (tmp_path / "a.py").write_text(src)

    def codes(*args):
        _, doc = scan_json(tmp_path, *args)
        return sorted(f["code"] for f in doc["findings"])

    assert codes() == ["JG001", "JG002"]
    assert codes("--ignore", "JG002") == ["JG001"]
    assert codes("--select", "jg002") == ["JG002"]
    assert codes("--select", "JG00", "--ignore", "JG001") == ["JG002"]
    assert codes("--select", "JG001", "--ignore", "JG00") == ["JG001"]  # more specific wins
    assert codes("--ignore", "JG") == []
    r = run(["scan", "--no-cache", "--select", "JG9", "."], tmp_path)
    assert r.exit_code == 2 and "matches no rule" in r.stderr


def test_json_sarif_github_formats(tmp_path, rng):
    expected = write_tree(tmp_path, rng, n_files=3)
    r, doc = scan_json(tmp_path, ".")
    assert {(f["path"], f["code"], f["param"]) for f in doc["findings"]} == expected
    for f in doc["findings"]:
        assert f["fix_safety"] in ("safe", "unsafe", "manual") and f["kernel"].endswith(
            tuple(k for k in [f["kernel"].rsplit(".", 1)[-1]]))
    r = run(["scan", "--no-cache", "--format", "sarif", "."], tmp_path)
    sarif = json.loads(r.stdout)
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(sarif)
    results = sarif["runs"][0]["results"]
    assert {(x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], x["ruleId"],
             x["properties"]["param"]) for x in results} == expected
    r = run(["scan", "--no-cache", "--format", "github", "."], tmp_path)
    ann = [x for x in r.stdout.splitlines() if x.startswith("::warning ")]
    assert len(ann) == len(expected)
    for a in ann:
        assert re.match(r"^::warning file=m\d\.py,line=\d+,col=\d+,title=JG00[12]::\S", a), a


def test_statistics(tmp_path, rng):
    expected = write_tree(tmp_path, rng, n_files=4)
    r = run(["scan", "--no-cache", "--statistics", "."], tmp_path)
    rows = [x.split() for x in r.stdout.splitlines()[:-1]]
    counts = {}
    for _, code, _ in expected:
        counts[code] = counts.get(code, 0) + 1
    assert {row[1]: int(row[0]) for row in rows} == counts
    for row in rows:
        assert row[2] == RULES[row[1]].name
    _, doc = scan_json(tmp_path, "--statistics", ".")
    assert {s["code"]: s["count"] for s in doc["statistics"]} == counts
    r = run(["scan", "--no-cache", "--statistics", "--format", "sarif", "."], tmp_path)
    assert r.exit_code == 2


def test_output_file_is_written_atomically(tmp_path, rng):
    expected = write_tree(tmp_path, rng, n_files=2)
    out = tmp_path / "reports" / "scan.sarif"
    out.parent.mkdir()
    r = run(["scan", "--no-cache", "--format", "sarif", "-o", str(out), "."], tmp_path)
    assert r.stdout == "" and r.exit_code == (1 if expected else 0)
    assert len(json.loads(out.read_text())["runs"][0]["results"]) == len(expected)
    # a failing run (bad configuration) leaves the previous report untouched
    before = out.read_text()
    (tmp_path / "pyproject.toml").write_text("[tool.jitguard]\nselct = []\n")
    r = run(["scan", "--no-cache", "--format", "sarif", "-o", str(out), "."], tmp_path)
    assert r.exit_code == 2 and "unknown key 'selct'" in r.stderr
    assert out.read_text() == before
    assert sorted(os.listdir(out.parent)) == ["scan.sarif"]  # no temporary leftovers
    (tmp_path / "pyproject.toml").unlink()
    r = run(["scan", "--no-cache", "-o", "new/dir/x.txt", "m0.py"], tmp_path)  # parents made
    assert r.exit_code in (0, 1) and (tmp_path / "new" / "dir" / "x.txt").read_text().strip()
    assert (tmp_path / "new" / "dir" / "x.txt").stat().st_mode & 0o044 == 0o044  # not 0600
    r = run(["scan", "--no-cache", "-o", "m1.py/x.txt", "m0.py"], tmp_path)  # parent is a file
    assert r.exit_code == 2 and "cannot write" in r.stderr and "Traceback" not in r.output


def test_pyproject_config_and_suppressions(tmp_path, rng):
    (tmp_path / "sub").mkdir()
    (tmp_path / "gen").mkdir()
    (tmp_path / "tests").mkdir()
    body = KERNEL.format(name="k", n="n", c="C")
    (tmp_path / "sub" / "a.py").write_text(body + LAUNCH_VARYING.format(name="k", comment="")
                                           + LAUNCH_CONSTEXPR.format(name="k"))
    (tmp_path / "gen" / "b.py").write_text(body + LAUNCH_VARYING.format(name="k", comment=""))
    (tmp_path / "tests" / "c.py").write_text(body + LAUNCH_VARYING.format(name="k", comment="")
                                             + LAUNCH_CONSTEXPR.format(name="k"))
    (tmp_path / "sub" / "d.py").write_text(body + LAUNCH_VARYING.format(
        name="k", comment="  # jitguard: ignore[JG001]"))
    (tmp_path / "pyproject.toml").write_text(
        "[tool.jitguard]\nexclude = ['gen/']\n"
        "[tool.jitguard.per-file-ignores]\n'tests/' = ['JG002']\n"
    )
    _, doc = scan_json(tmp_path / "sub", "..")  # config found from the scanned path upward
    # paths below the working directory are relative to it, others absolute
    got = sorted((os.path.relpath(tmp_path / "sub" / f["path"], tmp_path), f["code"])
                 for f in doc["findings"])
    assert all(os.path.isabs(f["path"]) != f["path"].endswith("a.py") for f in doc["findings"])
    assert got == [("sub/a.py", "JG001"), ("sub/a.py", "JG002"), ("tests/c.py", "JG001")]
    _, doc = scan_json(tmp_path, "--isolated", ".")
    assert len(doc["findings"]) == 5  # gen/ and tests/ come back; the inline ignore stays


def test_cross_module_launch_through_a_re_export(tmp_path, rng):
    name, n = ident(rng, "kern"), ident(rng, "n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "ops.py").write_text(KERNEL.format(name=name, n=n, c="C"))
    (pkg / "__init__.py").write_text(f"from .ops import {name}\n")  # no launch: a re-export
    (pkg / "unrelated.py").write_text(f"# mentions {name} but launches nothing\n")
    (tmp_path / "serve.py").write_text(
        f"import pkg\n\n\ndef step(x):\n    pkg.{name}[(1,)](x, x.shape[0], 4, BLOCK=64)\n"
    )
    _, doc = scan_json(tmp_path, ".")
    assert [(f["path"], f["code"], f["param"]) for f in doc["findings"]] == [
        ("pkg/ops.py", "JG001", n)]
    s = doc["summary"]
    assert (s["files_scanned"], s["files_analyzed"], s["files_skipped"]) == (4, 3, 1)


def test_cache_and_jobs_do_not_change_results(tmp_path, rng):
    src = tmp_path / "src"
    src.mkdir()
    write_tree(src, rng, n_files=6)
    cache = str(tmp_path / "cache")

    def findings(*args):
        r = run(["scan", "--format", "json", *args, "src"], tmp_path)
        doc = json.loads(r.stdout)
        return doc["findings"], doc["summary"]

    base, _ = findings("--no-cache", "-j", "1")
    cold, s1 = findings("--cache-dir", cache, "-j", "2")
    warm, s2 = findings("--cache-dir", cache, "-j", "2")
    assert base == cold == warm
    assert s1["cache_hits"] == 0 and s2["cache_hits"] == s2["files_analyzed"] == 6
    # one file changed: the per-file entries of the others are read back through from_dict
    (src / "m0.py").write_text((src / "m0.py").read_text() + "\n# touched\n")
    again, s3 = findings("--cache-dir", cache, "-j", "1")
    # the touched file's fixes carry its new content digest; everything else is as before
    changed = [f for f in again if f["path"] == "src/m0.py" and f["fix"] and f["fix"]["digest"]]
    assert all(f["fix"]["digest"] != g["fix"]["digest"] for f, g in zip(again, base) if f in changed)
    for f in again + base:
        if f["fix"] and f["path"] == "src/m0.py":
            f["fix"]["digest"] = None
    assert again == base and s3["cache_hits"] == 5


def test_missing_path_is_a_usage_error(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    r = run(["scan", "--no-cache", "a.py", "nope/"], tmp_path)
    assert r.exit_code == 2
    assert r.stderr.strip() == "jitguard scan: error: nope/: no such file or directory"
    assert "Traceback" not in r.output


def test_package_option(tmp_path):
    r, doc = scan_json(tmp_path, "--package", "click")
    assert r.exit_code == 0 and doc["summary"]["files_scanned"] > 10 and not doc["errors"]
    # an editable install (jitguard itself here): its sources, not the import hook, and the
    # repository's .gitignore (which may list the virtualenv) does not hide installed code
    r = run(["scan", "--no-cache", "--package", "jitguard", "--format", "json", "--select", "JG004"],
            tmp_path)
    doc = json.loads(r.stdout)
    assert doc["summary"]["files_scanned"] > 20 and not doc["errors"]
    r = run(["scan", "--package", "surely-not-installed-pkg"], tmp_path)
    assert r.exit_code == 2 and "no installed distribution" in r.stderr


def test_print_schema(tmp_path):
    r = run(["scan", "--print-schema"], tmp_path)
    assert json.loads(r.stdout) == SCAN_SCHEMA


def test_rule_command(tmp_path, rng):
    r = run(["rule"], tmp_path)
    rows = r.stdout.splitlines()[1:]
    assert [x.split()[0] for x in rows] == sorted(RULES)
    code = rng.choice(sorted(RULES))
    r = run(["rule", code.lower()], tmp_path)
    assert r.exit_code == 0 and r.stdout == RULES[code].doc()
    r = run(["rule", RULES[code].name], tmp_path)
    assert r.stdout == RULES[code].doc()
    r = run(["rule", "JG999"], tmp_path)
    assert r.exit_code == 2 and "unknown rule" in r.stderr


def test_a_named_file_that_an_exclude_drops_is_said_not_silently_skipped(tmp_path, rng):
    (tmp_path / ".git").mkdir()  # a work tree: its .gitignore applies
    name, n, c = ident(rng, "kern"), ident(rng, "n"), ident(rng, "c")
    sub = tmp_path / "generated"
    sub.mkdir()
    (sub / "k.py").write_text(KERNEL.format(name=name, n=n, c=c) + LAUNCH_VARYING.format(name=name, comment=""))
    (tmp_path / ".gitignore").write_text("generated/\n")
    r = run(["scan", "--no-cache", "generated/k.py"], tmp_path)
    assert r.exit_code == 0 and "0 files scanned" in r.stdout
    assert "generated/k.py was not scanned" in r.stderr and "--no-respect-gitignore" in r.stderr
    r = run(["scan", "--no-cache", "--no-respect-gitignore", "generated/k.py"], tmp_path)
    assert r.exit_code == 1 and f"JG001 {n} varies per call" in r.stdout and "not scanned" not in r.stderr
    # walked directories say nothing per file (the summary counts what was scanned)
    r = run(["scan", "--no-cache", "."], tmp_path)
    assert "not scanned" not in r.stderr
