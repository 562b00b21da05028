"""What a new user trips on, through the command line: one-line errors with the documented exit
status (and a JSON document that says so), fix on Ctrl-C, fix's progress and cache, trace input,
suppressions, excludes, config search, --package on an editable install, positions."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from jitguard.cli import main

ROOT = Path(__file__).resolve().parents[1]
RNG = random.Random(os.urandom(8))


def _name(prefix: str) -> str:
    return f"{prefix}_{RNG.randrange(10**6)}"


def module(kernel: str, param: str, comment: str = "", launch_comment: str = "") -> str:
    return f'''import triton
import triton.language as tl


@triton.jit{comment}
def {kernel}(x_ptr, {param}, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < {param})


def launch(x):
    n = x.shape[0]
    {kernel}[(1,)](x, n, BLOCK=128){launch_comment}
'''


def cli(*args, input=None):
    r = CliRunner().invoke(main, [str(a) for a in args], input=input)
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    return r


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JITGUARD_CACHE_DIR", str(tmp_path / ".cache-jg"))
    monkeypatch.delenv("CI", raising=False)
    return tmp_path


def _stderr_lines(r) -> list[str]:
    return [x for x in r.stderr.splitlines() if x]


# --- errors: one line, the documented status, JSON says so --------------------------------------

@pytest.mark.parametrize("args, status, says", [
    (["scan", "{missing}"], 2, "{missing}: no such file or directory"),
    (["scan", "--jobs", "0", "."], 2, "0 is not in the range"),
    (["scan", "--no-such-option"], 2, "No such option"),
    (["fix", "{missing}"], 2, "{missing}: no such file or directory"),
    (["fix", "-j", "0", "."], 2, "0 is not in the range"),
    (["fix", "-j", "-3", "."], 2, "-3 is not in the range"),
    (["fix", "--write", "--check", "."], 2, "--write and --check exclude each other"),
    (["fix", "--select", "", "."], 2, "--select: no rule codes given"),
    (["scan", "--select", ",", "."], 2, "--select: no rule codes given"),
    (["report", "{missing}"], 2, "{missing}: no such file or directory"),
    (["report", "--format", "xml", "t.json"], 2, "'xml' is not one of"),
    (["run"], 2, "give the command to run"),
    (["run", "--", "{missing}"], 127, "{missing}: command not found"),
])
def test_every_error_is_one_line_with_the_documented_status(here, args, status, says):
    missing = _name("missing")
    args = [a.format(missing=missing) for a in args]
    r = cli(*args)
    assert r.exit_code == status, r.output
    lines = _stderr_lines(r)
    assert len(lines) == 1, r.stderr  # no Usage: / Try: / Error: block
    assert lines[0].startswith(f"jitguard {args[0]}: error: ")
    assert says.format(missing=missing) in lines[0]
    assert "Traceback" not in r.output


@pytest.mark.parametrize("command", ["scan", "fix"])
def test_a_usage_error_with_format_json_still_prints_a_document(here, command):
    missing = _name("gone") + ".py"
    r = cli(command, "--format", "json", missing)
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert doc["schema"] == f"jitguard.{command}"
    assert [(e["kind"], e["path"]) for e in doc["errors"]] == [("usage", missing)]
    assert "no such file or directory" in doc["errors"][0]["message"]
    if command == "scan":
        import jsonschema

        from jitguard.report.json import SCAN_SCHEMA

        jsonschema.validate(doc, SCAN_SCHEMA)
    r = cli(command, "--format=json", "--jobs", "0", ".")  # click's own usage errors too
    assert r.exit_code == 2 and "not in the range" in json.loads(r.stdout)["errors"][0]["message"]
    # a file named on the command line that can't be used as asked (a directory for --config)
    r = cli(command, "--format", "json", "--config", ".", ".")
    assert r.exit_code == 2 and len(_stderr_lines(r)) == 1 and "is a directory" in r.stderr
    assert json.loads(r.stdout)["errors"][0]["kind"] == "usage"


def test_run_says_127_for_a_command_that_is_not_there_as_a_shell_does(here):
    missing = _name("no_such_program")
    r = subprocess.run([sys.executable, "-m", "jitguard", "run", "--", missing],
                       capture_output=True, text=True)
    shell = subprocess.run(["sh", "-c", missing], capture_output=True, text=True)
    assert r.returncode == shell.returncode == 127
    assert r.stderr == f"jitguard run: error: {missing}: command not found\n"


# --- fix: Ctrl-C, progress, first write, the scan cache -----------------------------------------

def _tree(root: Path, n: int) -> dict[str, str]:
    params = {}
    for i in range(n):
        k, p = f"k{i:02d}", _name("n")
        (root / f"m{i:02d}.py").write_text(module(k, p))
        params[f"m{i:02d}.py"] = p
    return params


def test_fix_interrupted_names_the_files_it_wrote_and_exits_130(here, monkeypatch):
    import jitguard.static.fixes as fixes

    params = _tree(here, 10)
    before = {name: (here / name).read_text() for name in params}
    real_write = fixes.write_plan
    calls = []

    def write_then_stop(plan):
        calls.append(plan)
        if len(calls) == 1:
            return real_write(plan)
        # Ctrl-C in the middle of the second group: its first file was written
        first = next(ff for ff in plan.files if ff.changed)
        real_write(fixes.FixPlan(files=[first], fixes=first.fixes))
        raise KeyboardInterrupt

    monkeypatch.setattr(fixes, "write_plan", write_then_stop)
    r = cli("fix", "--write", "-j", "1", ".")
    assert r.exit_code == 130, r.output
    changed = sorted(n for n in params if (here / n).read_text() != before[n])
    assert len(changed) == 5  # a group of 4, then one of the next
    named = sorted(x.removeprefix("jitguard fix: wrote ") for x in _stderr_lines(r)
                   if x.startswith("jitguard fix: wrote "))
    assert named == changed
    assert "interrupted after writing 5 files" in r.stderr and "Aborted" not in r.output
    for n in params:  # each file either untouched or fully fixed
        text = (here / n).read_text()
        assert text == before[n] or f'@triton.jit(do_not_specialize=["{params[n]}"])' in text


def test_fix_writes_before_it_has_planned_every_file_and_shows_progress(here, monkeypatch):
    import jitguard.static.fixes as fixes

    params = _tree(here, 9)
    events = []
    real_plan, real_write = fixes.plan_fixes, fixes.write_plan
    monkeypatch.setattr(fixes, "plan_fixes", lambda *a, **k: events.append("plan") or real_plan(*a, **k))
    monkeypatch.setattr(fixes, "write_plan", lambda p: events.append("write") or real_write(p))
    r = cli("fix", "--write", "--progress", "-j", "1", ".")
    assert r.exit_code == 0 and f"{len(params)} files changed" in r.stderr
    assert events.index("write") < len(events) - 1 - events[::-1].index("plan")  # written early
    assert "\r\x1b[Kjitguard: fixing 0/9 files" in r.stderr and "fixing 9/9 files" in r.stderr
    r = cli("fix", "--no-progress", ".")
    assert "\r" not in r.stderr


def test_fix_reads_what_scan_cached_and_parses_nothing_again(here, monkeypatch):
    _tree(here, 3)
    assert cli("scan", "-j", "1", ".").exit_code == 1

    import jitguard.static.extract as extract

    def no_parsing(*a, **k):
        raise AssertionError("parsed again")

    monkeypatch.setattr(extract, "extract_file", no_parsing)
    r = cli("fix", "-j", "1", "--format", "json", ".")
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["summary"]["fixes_pending"] == 3
    assert doc["summary"]["internal_errors"] == 0 and doc["errors"] == []


def test_fix_check_fails_when_a_file_could_not_be_analyzed(here):
    (here / "ok.py").write_text(module("k", "n"))
    assert cli("fix", "--write", ".").exit_code == 0
    assert cli("fix", "--check", ".").exit_code == 0
    (here / "broken.py").write_text("import triton\n@triton.jit\ndef k(:\n")
    r = cli("fix", "--check", ".")
    assert r.exit_code == 1 and "broken.py" in r.stderr and "not analyzed" in r.stderr


def test_no_python_files_is_said(here):
    (here / "empty").mkdir()
    for cmd in ("scan", "fix"):
        r = cli(cmd, "empty")
        assert r.exit_code == 0 and f"jitguard {cmd}: warning: no Python files under empty" in r.stderr
    (here / "gen").mkdir()
    (here / "gen" / "a.py").write_text(module("k", "n"))
    r = cli("scan", "--exclude", "*.py", "gen")
    assert r.exit_code == 0 and "no Python files to scan under gen: 1 path(s) excluded" in r.stderr


# --- traces --------------------------------------------------------------------------------------

def _write_trace(path: Path, kernel_path: Path, param: str, kernel: str = "k") -> None:
    from jitguard.runtime.trace import DiffEntry, Event, Param, ProcessInfo, Trace, write_trace

    t = Trace(process=ProcessInfo(pid=RNG.randrange(2, 10**6), host="h", triton_version="3.6.0"))
    for seq, cls in enumerate(["none", "div16"]):
        words = {"none": "i32", "div16": "i32, divisible by 16"}
        diff = [] if not seq else [DiffEntry(param, "i32", words[cls], f"{param}: i32 -> {words[cls]}",
                                             "value_class")]
        t.add(Event(kind="compile", seq=seq, kernel=kernel, step=seq, wall=1.7e9 + seq,
                    kernel_path=str(kernel_path), kernel_line=6, call_path=str(kernel_path),
                    call_line=12, compile_ms=100.0, variant=seq + 1, diff=diff,
                    params=[Param(param, 1, "int", "i32", value_class=cls)]))
    write_trace(t, path)


def test_fix_from_trace_takes_a_directory_as_report_does(here):
    param = _name("n")
    src = module("k", param).split("\n\ndef launch")[0] + "\n"  # no launch: only the trace sees it
    (here / "kmod.py").write_text(src)
    (here / "traces").mkdir()
    _write_trace(here / "traces" / "rank0.json", here / "kmod.py", param)
    (here / "traces" / "notes.json").write_text('{"other": 1}')
    assert cli("report", "traces").exit_code == 0
    r = cli("fix", "--no-cache", "--from-trace", "traces", "kmod.py")
    assert r.exit_code == 0, r.output
    assert f'+@triton.jit(do_not_specialize=["{param}"])' in r.stdout
    assert "skipped traces/notes.json: not a jitguard trace" in r.stderr
    (here / "none").mkdir()
    r = cli("fix", "--from-trace", "none", ".")
    assert r.exit_code == 2 and "no jitguard traces" in r.stderr


@pytest.mark.parametrize("content, says, not_says", [
    ("{not json", "not JSON: Expecting property name enclosed in double quotes (line 1, column 2)",
     "not a jitguard trace"),
    ('{"schema": "jitguard.trace", "version": 999}', "trace version 999 is not supported",
     "not a jitguard trace"),
    ('{"x": "unterminated', "not JSON: Unterminated string starting at (line 1, column 7)", "at at"),
])
def test_trace_errors_say_what_is_wrong_once(here, content, says, not_says):
    (here / "t.json").write_text(content)
    for args in (["fix", "--from-trace", "t.json", "."], ["report", "t.json"]):
        r = cli(*args)
        line = r.stderr.strip()
        assert r.exit_code == 2 and "\n" not in line and says in line, line
        assert not_says not in line and line.count("t.json") == 1, line


def test_a_trace_event_missing_a_field_is_said_without_internals(here):
    from jitguard.runtime.trace import SCHEMA, VERSION

    (here / "t.json").write_text(json.dumps({"schema": SCHEMA, "version": VERSION,
                                             "events": [{"seq": 0}]}))
    r = cli("report", "t.json")
    assert r.exit_code == 2 and "an event lacks 'kind'" in r.stderr
    assert "__init__" not in r.stderr and "positional argument" not in r.stderr
    event = {"kind": "compile", "seq": 0, "kernel": "k", "params": [{"name": "n"}]}
    (here / "t.json").write_text(json.dumps({"schema": SCHEMA, "version": VERSION, "events": [event]}))
    r = cli("report", "t.json")
    assert r.exit_code == 2 and "a param entry lacks 'index'" in r.stderr, r.stderr
    assert "__init__" not in r.stderr and "positional argument" not in r.stderr


def test_report_counts_a_trace_named_twice_once(here):
    _write_trace(here / "t.json", here / "kmod.py", "n")
    once = cli("report", "--format", "json", "t.json")
    twice = cli("report", "--format", "json", "t.json", "./t.json", ".")
    assert once.exit_code == twice.exit_code == 0, twice.output
    a, b = json.loads(once.stdout), json.loads(twice.stdout)
    assert len(b["processes"]) == 1 and b["totals"] == a["totals"]


# --- config --------------------------------------------------------------------------------------

def test_config_without_a_jitguard_table_says_so(here):
    (here / "other.toml").write_text('[tool.black]\nline-length = 100\n')
    (here / "a.py").write_text(module("k", "n"))
    r = cli("scan", "--config", "other.toml", "a.py")
    assert r.exit_code == 2
    assert r.stderr == "jitguard scan: error: --config: other.toml: no [tool.jitguard] table in this file\n"


def test_config_search_stops_at_the_repository_root(here):
    # a pyproject.toml above the repository (someone else's) must not silence this one
    (here / "pyproject.toml").write_text('[tool.jitguard]\nexclude = ["*.py"]\n')
    repo = here / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "a.py").write_text(module("k", "n"))
    os.chdir(repo)
    r = cli("scan", "--format", "json", ".")
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["summary"]["findings"] == 1 and doc["summary"]["config"] is None
    # the repository's own config is used, and said, in text and JSON
    (repo / "pyproject.toml").write_text('[tool.jitguard]\nignore = ["JG002"]\n')
    r = cli("scan", ".")
    assert r.exit_code == 1 and "settings from pyproject.toml)." in r.stdout
    assert json.loads(cli("scan", "--format", "json", ".").stdout)["summary"]["config"] == "pyproject.toml"
    r = cli("scan", "--isolated", ".")
    assert "settings from" not in r.stdout


def test_an_exclude_holds_after_cd_into_the_excluded_folder(here):
    (here / ".git").mkdir()
    (here / "pyproject.toml").write_text('[tool.jitguard]\nexclude = ["third_party/"]\n')
    (here / "third_party").mkdir()
    (here / "third_party" / "k.py").write_text(module("k", "n"))
    assert "0 files scanned" in cli("scan", ".").stdout
    os.chdir(here / "third_party")
    r = cli("scan", ".")
    assert r.exit_code == 0 and "0 files scanned" in r.stdout
    assert "an exclude pattern (in ../pyproject.toml or --exclude) covers it" in r.stderr.replace(
        str(here / "pyproject.toml"), "../pyproject.toml")
    assert "--no-respect-gitignore" not in r.stderr  # it would not help
    assert cli("scan", "--isolated", ".").exit_code == 1
    # a .gitignore says so, and then --no-respect-gitignore is the way
    (here / "pyproject.toml").unlink()
    (here / ".gitignore").write_text("third_party/\n")
    r = cli("scan", ".")
    assert "a .gitignore excludes it (--no-respect-gitignore" in r.stderr
    assert cli("scan", "--no-respect-gitignore", ".").exit_code == 1


# --- suppressions ----------------------------------------------------------------------------------

def test_inline_suppressions_are_counted_and_unknown_codes_warned(here):
    (here / "a.py").write_text(module("ka", "n", comment="  # jitguard: ignore[JG001]"))
    (here / "b.py").write_text(module("kb", "n", launch_comment="  # jitguard: ignore"))
    (here / "c.py").write_text(module("kc", "n", comment="  # jitguard: ignore[JG0001]"))
    for run in ("cold", "warm"):  # the warm run is served from the whole-tree cache entry
        doc = json.loads(cli("scan", "--format", "json", ".").stdout)
        assert doc["summary"]["suppressed"] == 2, run
        assert [f["path"] for f in doc["findings"]] == ["c.py"]
        assert [(w["path"], w["line"]) for w in doc["warnings"]] == [("c.py", 5)]
        assert "'JG0001', which no rule has" in doc["warnings"][0]["message"]
    r = cli("scan", ".")
    assert "c.py:5: warning: `# jitguard: ignore[...]` names 'JG0001'" in r.stderr
    # a prefix is a code too: no warning, and it silences
    (here / "c.py").write_text(module("kc", "n", comment="  # jitguard: ignore[JG00]"))
    doc = json.loads(cli("scan", "--format", "json", ".").stdout)
    assert doc["findings"] == [] and doc["warnings"] == [] and doc["summary"]["suppressed"] == 3


# --- --package on an editable install ----------------------------------------------------------

def test_package_on_an_editable_install_reads_subpackages_mapped_elsewhere():
    from jitguard.static.files import _editable_mapping, package_paths
    import importlib.metadata as md

    dist = md.distribution("jitguard")
    if not _editable_mapping(dist):
        pytest.skip("jitguard is not installed editable here")
    roots = [os.path.realpath(p) for p in package_paths("jitguard")]
    assert os.path.realpath(ROOT / "kernels") in roots and os.path.realpath(ROOT / "jitguard") in roots
    r = subprocess.run([sys.executable, "-m", "jitguard", "scan", "--no-cache", "--format", "json",
                        "--package", "jitguard"], capture_output=True, text=True, cwd=ROOT)
    kernels = json.loads(r.stdout)["summary"]["kernels"]
    assert kernels >= 5  # the kernels of jitguard.kernels (rope_fp8, moe)


# --- positions -----------------------------------------------------------------------------------

def test_scan_and_fix_print_the_same_position_for_each_finding(here):
    (here / "d.py").write_text((ROOT / "fixtures" / "lint" / "dns_mistakes.py").read_text())
    (here / "k.py").write_text(module("k", "n"))
    scan = json.loads(cli("scan", "--format", "json", ".").stdout)["findings"]
    where = {(f["code"], f"{f['path']}:{f['line']}:{f['column']}") for f in scan}
    assert {c for c, _ in where} >= {"JG001", "JG004", "JG005", "JG006"}
    shown = [line.split(": ")[:2] for line in _stderr_lines(cli("fix", "--write", "--unsafe-fixes", "."))
             if ": JG0" in line]
    assert {rest.split(" ")[0] for _, rest in shown} >= {"JG001", "JG004", "JG005", "JG006"}
    for pos, rest in shown:  # fixed, and so no longer a finding: compare with the scan before
        assert (rest.split(" ")[0], pos) in where, (pos, rest)


def test_jitguard_alone_still_shows_its_help(here):
    r = cli()
    assert "[OPTIONS] COMMAND [ARGS]" in r.output and "Commands:" in r.output
    assert "error:" not in r.output
