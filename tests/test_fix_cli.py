"""``jitguard fix`` end to end: real scan engine, real files, diff / --write / --check, safety gates,
refusals (read-only, changed during the run, syntax errors), CRLF/BOM, idempotence, re-scan."""
from __future__ import annotations

import ast
import os
import random
import shutil
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from jitguard.cli import main
from jitguard.config import Config
from jitguard.static.runner import scan_paths
from scan_helpers import simple_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RNG = random.Random(os.urandom(8))


def _name(prefix: str) -> str:
    return f"{prefix}_{RNG.randrange(10**6)}"


def kernel_module(p: dict[str, str]) -> str:
    """One module exercising every rule; ``p`` names the parameters (fresh per test)."""
    return f'''import torch
import triton
import triton.language as tl

DNS = ["stride"]


@triton.jit
def k_safe(x_ptr, out_ptr, {p["safe"]}, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < {p["safe"]}
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def k_addr(x_ptr, {p["addr"]}, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(x_ptr + pid * {p["addr"]} + tl.arange(0, BLOCK), 0.0)


@triton.jit
def k_cexpr(x_ptr, {p["cexpr"]}: tl.constexpr, N_COLS: tl.constexpr):
    pid = tl.program_id(0)
    if pid < {p["cexpr"]}:
        tl.store(x_ptr + pid + tl.arange(0, N_COLS), 0.0)


@triton.jit
def k_bucket(x_ptr, N: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, N), 0.0)


@triton.jit(do_not_specialize=["num_token", "BLOCK", "eps"])
def k_bad(x_ptr, num_tokens, eps: float, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid < num_tokens:
        tl.store(x_ptr + pid, eps)


@triton.autotune(configs=[triton.Config({{"BLOCK": 64}})], key=["num_tokens"])
@triton.jit
def k_tuned(x_ptr, num_tokens, BLOCK: tl.constexpr):
    pass


@triton.jit(do_not_specialize=DNS)
def k_var(x_ptr, stride, num_tokens):
    if tl.program_id(0) < num_tokens:
        tl.store(x_ptr, 0.0)


def run(x: torch.Tensor):
    t = x.shape[0]
    k_safe[(triton.cdiv(t, 128),)](x, x, t, BLOCK=128)
    k_addr[(4,)](x, t, BLOCK=128)
    k_cexpr[(4,)](x, t, N_COLS=128)
    k_bucket[(1,)](x, t)
    k_bad[(1,)](x, t, 1e-6, BLOCK=128)
    k_tuned[(1,)](x, t)
    k_var[(1,)](x, 4, t)
    k_safe[(1,)](x, x, t, BLOCK=128, num_warps=4)
'''


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = {"safe": _name("n_el"), "addr": _name("num_tok"), "cexpr": _name("n_rows")}
    (tmp_path / "kern.py").write_text(kernel_module(names))
    # every level: k_cexpr's constexpr gets the leading-dim guess, a JG002 reported at the low level
    (tmp_path / "pyproject.toml").write_text('[tool.jitguard]\nconfidence = "low"\n')
    return tmp_path, names


def fix(*args):
    result = CliRunner().invoke(main, ["fix", "--no-cache", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def dns_of(source: str | bytes, kernel: str) -> list:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            for d in node.decorator_list:
                if isinstance(d, ast.Call):
                    for kw in d.keywords:
                        if kw.arg == "do_not_specialize":
                            return list(ast.literal_eval(kw.value))
            return []
    raise AssertionError(f"no kernel {kernel}")


def param_annotation(source: str, kernel: str, param: str):
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            for a in node.args.args:
                if a.arg == param:
                    return a.annotation and ast.unparse(a.annotation)
    raise AssertionError


def test_default_prints_diff_and_changes_nothing(tree):
    root, p = tree
    before = (root / "kern.py").read_bytes()
    r = fix(".")
    assert r.exit_code == 0
    assert (root / "kern.py").read_bytes() == before
    assert r.stdout.startswith("--- a/kern.py\n+++ b/kern.py\n")
    assert f'+@triton.jit(do_not_specialize=["{p["safe"]}"])' in r.stdout
    assert '+@triton.jit(do_not_specialize=["num_tokens"])' in r.stdout  # k_bad: typo etc. removed
    assert "1 file would change, 6 fixes pending (run with --write to apply)" in r.stderr
    assert "2 unsafe (rerun with --unsafe-fixes)" in r.stderr
    # the printed diff applies cleanly and gives what --write writes
    patch = shutil.which("patch")
    if patch:
        (root / "fix.diff").write_text(r.stdout)
        shutil.copy(root / "kern.py", root / "kern_patched.py")
        os.system(f"cd {root} && patch -s -p1 kern_patched.py < fix.diff")
        fix("--write", "kern.py")
        assert (root / "kern_patched.py").read_bytes() == (root / "kern.py").read_bytes()


def test_write_rescan_and_idempotence(tree):
    root, p = tree
    before = (root / "kern.py").read_text()
    r = fix("--write", ".")
    assert r.exit_code == 0, r.output
    assert "1 file changed, 6 fixes applied" in r.stderr
    assert "removed 'num_token' from do_not_specialize (did you mean 'num_tokens'?)" in r.stderr
    after = (root / "kern.py").read_text()
    assert dns_of(after, "k_safe") == [p["safe"]]
    assert dns_of(after, "k_bad") == ["num_tokens"]
    assert dns_of(after, "k_tuned") == ["num_tokens"]
    assert dns_of(after, "k_addr") == []  # unsafe
    assert "@triton.jit(do_not_specialize=DNS)\ndef k_var(" in after  # manual
    # only decorator lines changed
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(before.splitlines()) == len(after.splitlines())
    assert changed and all(a.startswith("@triton.jit") and b.startswith("@triton.jit") for a, b in changed)
    # re-scan: nothing left of the fixed kinds for the fixed params
    res = scan_paths([str(root)], Config(root=str(root), confidence="low"), use_cache=False, jobs=1)
    left = {(f.code, f.kernel.split(".")[-1], f.param) for f in res.findings}
    assert ("JG001", "k_safe", p["safe"]) not in left
    assert not {c for c, _, _ in left} & {"JG004", "JG005", "JG006"}
    assert ("JG001", "k_addr", p["addr"]) in left  # not fixed without --unsafe-fixes
    # second run changes nothing
    r2 = fix("--write", ".")
    assert (root / "kern.py").read_text() == after
    assert "0 files changed, 0 fixes applied" in r2.stderr
    assert fix("--check", ".").exit_code == 0


def test_check_select_ignore(tree):
    root, _ = tree
    assert fix("--check", ".").exit_code == 1
    assert fix("--check", "--select", "JG004").exit_code == 1
    assert fix("--check", "--ignore", "JG001,JG004", "--ignore", "JG005,JG006").exit_code == 0
    r = fix("--select", "JG005", ".")
    assert r.stdout.count("\n-@") == 1 and '+@triton.jit(do_not_specialize=["num_token", "eps"])' in r.stdout
    assert fix("--check", "--write", ".").exit_code == 2


def test_unsafe_fixes(tree):
    root, p = tree
    r = fix(".")
    assert f"k_addr.{p['addr']}: unsafe fix not applied" in r.stderr
    assert "vectorized" in r.stderr
    assert "k_bucket.N: needs a manual fix" in r.stderr and "tl.arange(0, N)" in r.stderr
    r = fix("--write", "--unsafe-fixes", ".")
    assert r.exit_code == 0
    after = (root / "kern.py").read_text()
    assert dns_of(after, "k_addr") == [p["addr"]]
    assert dns_of(after, "k_cexpr") == [p["cexpr"]]
    assert param_annotation(after, "k_cexpr", p["cexpr"]) is None
    assert param_annotation(after, "k_cexpr", "N_COLS") == "tl.constexpr"
    assert param_annotation(after, "k_bucket", "N") == "tl.constexpr"  # needs bucketing: untouched
    assert dns_of(after, "k_bucket") == []
    res = scan_paths([str(root)], Config(root=str(root), confidence="low"), use_cache=False, jobs=1)
    left = {(f.code, f.kernel.split(".")[-1], f.param) for f in res.findings}
    assert not {("JG001", "k_addr", p["addr"]), ("JG002", "k_cexpr", p["cexpr"]),
                ("JG001", "k_cexpr", p["cexpr"])} & left
    assert ("JG002", "k_bucket", "N") in left


def test_manual_items_are_reported_not_edited(tree):
    root, _ = tree
    r = fix("--write", ".")
    after = (root / "kern.py").read_text()
    assert 'key=["num_tokens"]' in after  # JG003: suggestion only
    assert "@triton.jit(do_not_specialize=DNS)" in after
    assert "k_var.num_tokens: needs a manual fix: do_not_specialize is not a literal list (DNS)" in r.stderr
    assert "JG003 kern.k_tuned.num_tokens: needs a manual fix: autotune key" in r.stderr
    assert ": JG007 kern.k_safe: needs a manual fix" in r.stderr
    assert "4 manual" in r.stderr


def test_crlf_and_bom_survive_write(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    param = _name("n")
    text = simple_module(param)
    data = b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode()
    (tmp_path / "k.py").write_bytes(data)
    os.chmod(tmp_path / "k.py", 0o640)
    r = fix("--write", ".")
    assert r.exit_code == 0, r.output
    expected = data.replace(b"@triton.jit\r\n", f'@triton.jit(do_not_specialize=["{param}"])\r\n'.encode())
    assert expected != data
    assert (tmp_path / "k.py").read_bytes() == expected
    assert stat.S_IMODE(os.stat(tmp_path / "k.py").st_mode) == 0o640


def test_read_only_file_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ro.py").write_text(simple_module(_name("n"), "k_ro"))
    (tmp_path / "rw.py").write_text(simple_module(_name("n"), "k_rw"))
    os.chmod(tmp_path / "ro.py", 0o444)
    ro_before = (tmp_path / "ro.py").read_bytes()
    r = fix("--write", ".")
    assert r.exit_code == 1
    assert (tmp_path / "ro.py").read_bytes() == ro_before
    assert "ro.py:6:1: JG001 ro.k_ro." in r.stderr and "file is read-only" in r.stderr
    assert dns_of((tmp_path / "rw.py").read_text(), "k_rw") != []
    assert "1 file changed, 1 fix applied; 1 fix left for a human: 1 in files left untouched" in r.stderr


def test_a_file_python_compiles_and_the_editor_cannot_parse_is_left_alone(tmp_path, monkeypatch):
    """A `\\` continued into the end of a file whose lines end in \\r\\n: compile() takes the bytes
    (as an import does), LibCST's tokenizer does not. The scan reports the kernel; fix says why it
    leaves the file, as it does for one it could not write back, not as an error of its own."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rw.py").write_text(simple_module(_name("n"), "k_rw"))
    data = simple_module(_name("n"), "k_cr").replace("\n", "\r\n").encode() + b"\\\r\n"
    compile(data, "cr.py", "exec")  # Python takes it
    (tmp_path / "cr.py").write_bytes(data)
    r = fix("--write", ".")
    assert r.exit_code == 0, r.output  # as for a file the editor could not write back byte for byte
    assert (tmp_path / "cr.py").read_bytes() == data
    assert "cr.py:6:1: JG001 cr.k_cr." in r.stderr and "the editor (LibCST) cannot parse this file" in r.stderr
    assert "cannot edit (" not in r.stderr
    assert dns_of((tmp_path / "rw.py").read_text(), "k_rw") != []
    assert "1 file changed, 1 fix applied; 1 fix left for a human: 1 in files left untouched" in r.stderr


def test_file_changed_during_the_run_is_left_alone(tmp_path, monkeypatch):
    import jitguard.static.fixes as fixes_mod

    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.py").write_text(simple_module(_name("n")))
    theirs = simple_module(_name("m")) + f"# edited by someone else {RNG.random()}\n"
    real_plan = fixes_mod.plan_fixes

    def plan_then_edit(*a, **kw):
        plan = real_plan(*a, **kw)
        (tmp_path / "k.py").write_text(theirs)  # an editor saves while fix runs
        return plan

    monkeypatch.setattr(fixes_mod, "plan_fixes", plan_then_edit)
    r = fix("--write", ".")
    assert r.exit_code == 1
    assert (tmp_path / "k.py").read_text() == theirs
    assert "changed on disk since it was read" in r.stderr
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".jitguard-tmp")]


def test_syntax_error_file_is_reported_and_the_rest_fixed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    broken = simple_module("n").replace("def launch(x):", "def launch(x:")
    (tmp_path / "broken.py").write_text(broken)
    (tmp_path / "good.py").write_text(simple_module(_name("n"), "k_good"))
    r = fix("--write", ".")
    assert r.exit_code == 0
    assert (tmp_path / "broken.py").read_text() == broken
    assert "broken.py" in r.stderr and "not analyzed" in r.stderr
    assert dns_of((tmp_path / "good.py").read_text(), "k_good") != []


def test_usage_errors_have_no_traceback(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args in (["missing_dir"], ["--select", "nonsense!"], ["--no-scan", "."],
                 ["--from-trace", "nope.json", "."]):
        r = fix(*args)
        assert r.exit_code == 2, (args, r.output)
        assert "Traceback" not in r.output
    (tmp_path / "bad.json").write_text("{not json")
    r = fix("--from-trace", "bad.json", ".")
    # one line that says what is wrong (not JSON), naming the file once
    assert r.exit_code == 2 and r.output.count("\n") == 1 and r.output.count("bad.json") == 1
    assert r.output.startswith("jitguard fix: error: --from-trace bad.json: not JSON: ")
    assert "not a jitguard trace" not in r.output


def test_rope_fp8_uncorrected_gets_the_corrected_set(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "fixtures" / "rope_fp8_uncorrected.py", tmp_path / "rope.py")
    corrected = dns_of((ROOT / "kernels" / "rope_fp8.py").read_text(), "_inv_rope_fp8_quant_kernel")
    assert dns_of((tmp_path / "rope.py").read_text(), "_inv_rope_fp8_quant_kernel") == []
    r = fix("--write", ".")  # both parameters feed addresses: unsafe, so not applied by default
    assert "unsafe fix not applied" in r.stderr
    assert dns_of((tmp_path / "rope.py").read_text(), "_inv_rope_fp8_quant_kernel") == []
    r = fix("--write", "--unsafe-fixes", ".")
    assert r.exit_code == 0, r.output
    fixed = dns_of((tmp_path / "rope.py").read_text(), "_inv_rope_fp8_quant_kernel")
    assert sorted(fixed) == sorted(corrected) and len(corrected) >= 1


def test_every_ineffective_entry_is_removed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = sorted(RNG.sample(range(3, 40), 3))
    typo = _name("zz")
    src = f'''import triton
import triton.language as tl


@triton.jit(do_not_specialize=[{bad[0]}, "n", {bad[1]}], do_not_specialize_on_alignment=["BLOCK", "{typo}", {bad[2]}])
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass
'''
    (tmp_path / "k.py").write_text(src)
    r = fix("--write", ".")
    assert r.exit_code == 0, r.output
    assert "5 fixes applied" in r.stderr
    assert '@triton.jit(do_not_specialize=["n"])\ndef k(' in (tmp_path / "k.py").read_text()


@pytest.mark.parametrize("unsafe", [False, True])
def test_constexpr_listed_and_varying(tmp_path, monkeypatch, unsafe):
    """JG005 (remove the entry) and JG002 (drop tl.constexpr, keep the entry) on one parameter:
    never both, and never a constexpr left in the list."""
    monkeypatch.chdir(tmp_path)
    n = _name("n_exp")
    src = f'''from pkg.triton_utils import tl, triton


@triton.jit(do_not_specialize=["{n}"])
def k(x_ptr, {n}: tl.constexpr, BLOCK: tl.constexpr):
    if tl.program_id(0) < {n}:
        tl.store(x_ptr + tl.arange(0, BLOCK), 0.0)


def launch(x):
    t = x.shape[0]
    k[(1,)](x, t, BLOCK=64)
'''
    (tmp_path / "k.py").write_text(src)
    (tmp_path / "pyproject.toml").write_text('[tool.jitguard]\nconfidence = "low"\n')  # a JG002 on a guess: low
    r = fix("--write", *(["--unsafe-fixes"] if unsafe else []), ".")
    assert r.exit_code == 0, r.output
    after = (tmp_path / "k.py").read_text()
    if unsafe:
        assert dns_of(after, "k") == [n] and param_annotation(after, "k", n) is None
    else:
        assert dns_of(after, "k") == [] and param_annotation(after, "k", n) == "tl.constexpr"
    res = scan_paths([str(tmp_path)], Config(root=str(tmp_path), confidence="low"), use_cache=False, jobs=1)
    codes = {f.code for f in res.findings}
    assert "JG005" not in codes
    assert ("JG002" in codes) == (not unsafe)
    assert fix("--write", *(["--unsafe-fixes"] if unsafe else []), ".").stderr.startswith(
        "0 files changed" if unsafe else "k.py:5:1: JG002")


def test_parallel_planning_gives_the_same_diff(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text(simple_module(_name("n"), f"k{i}"))
    one, two = fix("-j", "1", "."), fix("-j", "2", ".")
    assert one.exit_code == two.exit_code == 0
    assert one.stdout == two.stdout and one.stdout.count("+++ b/") == 5
    assert one.stderr == two.stderr


def test_suppressed_findings_are_not_fixed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    n = _name("n")
    src = simple_module(n).replace("@triton.jit\n", "@triton.jit  # jitguard: ignore[JG001]\n")
    (tmp_path / "k.py").write_text(src)
    r = fix("--write", ".")
    assert r.exit_code == 0
    assert (tmp_path / "k.py").read_text() == src
    assert "0 files changed, 0 fixes applied" in r.stderr
    (tmp_path / "k.py").write_text(src.replace("  # jitguard: ignore[JG001]", ""))
    assert fix("--check", ".").exit_code == 1


def test_json_format(tree):
    import json

    root, p = tree
    before = (root / "kern.py").read_bytes()
    r = fix("--format", "json", ".")
    assert r.exit_code == 0 and r.stderr == ""
    doc = json.loads(r.stdout)
    assert (doc["schema"], doc["version"], doc["write"]) == ("jitguard.fix", 1, False)
    assert doc["summary"]["fixes_pending"] == 6 and doc["summary"]["left_unsafe"] == 2
    assert doc["summary"]["files_pending"] == 1 and doc["summary"]["files_changed"] == 0
    by = {(x["kernel"].split(".")[-1], x["param"], x["code"]): x for x in doc["fixes"]}
    assert by[("k_safe", p["safe"], "JG001")]["status"] == "pending"
    assert by[("k_addr", p["addr"], "JG001")]["status"] == "unsafe"
    assert by[("k_bucket", "N", "JG002")]["status"] == "manual"
    assert f'+@triton.jit(do_not_specialize=["{p["safe"]}"])' in doc["files"][0]["diff"]
    assert (root / "kern.py").read_bytes() == before
    r = fix("--format", "json", "--write", "--unsafe-fixes", ".")
    doc = json.loads(r.stdout)
    assert doc["summary"]["fixes_applied"] == 8 and doc["files"][0]["written"] is True
    assert (root / "kern.py").read_bytes() != before


def test_scan_options_reach_the_fixer(tmp_path, monkeypatch):
    """--varying-name / --isolated / [tool.jitguard] mean for fix what they mean for scan."""
    monkeypatch.chdir(tmp_path)
    count = _name("zork")
    (tmp_path / "k.py").write_text(simple_module("n").replace(
        "def launch(x):\n    n = x.shape[0]\n    k[(1,)](x, n, BLOCK=128)",
        f"def launch(x, {count}):\n    k[(1,)](x, {count}, BLOCK=128)"))
    assert fix("--check", "k.py").exit_code == 0  # an argument of unknown provenance
    assert fix("--check", "--varying-name", count, "k.py").exit_code == 1
    (tmp_path / "pyproject.toml").write_text(f'[tool.jitguard]\nvarying-names = ["{count}"]\n')
    assert fix("--check", "k.py").exit_code == 1
    assert fix("--check", "--isolated", "k.py").exit_code == 0


def test_fix_says_when_a_named_file_is_excluded(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "gen").mkdir()
    src = ("import triton\n\n\n@triton.jit\ndef k(x_ptr, n):\n    pass\n\n\n"
           "def launch(x):\n    k[(1,)](x, x.shape[0])\n")
    (tmp_path / "gen" / "k.py").write_text(src)
    (tmp_path / ".gitignore").write_text("gen/\n")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = CliRunner().invoke(main, ["fix", "--no-cache", "gen/k.py"], catch_exceptions=False)
        assert "gen/k.py was not read" in r.stderr and "0 files would change" in r.stderr
        r = CliRunner().invoke(main, ["fix", "--no-cache", "--no-respect-gitignore", "gen/k.py"],
                               catch_exceptions=False)
        assert "do_not_specialize" in r.stdout and "not read" not in r.stderr
    finally:
        os.chdir(old)


def test_a_file_changed_between_scan_and_edit_is_refused(tmp_path, monkeypatch):
    """fix reads a file for its facts, then again for the edit. If it changed in between (here the
    parameter moved from a mask bound into address arithmetic) the safety was decided on other
    text: the edit is refused, so an unsafe fix never lands without --unsafe-fixes."""
    import jitguard.static.fixes as fixes

    monkeypatch.chdir(tmp_path)
    param = _name("n_el")
    src = simple_module(param)
    (tmp_path / "k.py").write_text(src)
    changed = src.replace("tl.store(x_ptr + offs, 0.0", f"tl.store(x_ptr + offs * {param}, 0.0")
    assert changed != src
    real = fixes.read_snapshot

    def edited_meanwhile(path):
        (tmp_path / "k.py").write_text(changed)
        return real(path)

    monkeypatch.setattr(fixes, "read_snapshot", edited_meanwhile)
    r = fix("--write", ".")
    assert (tmp_path / "k.py").read_text() == changed  # not edited
    assert "changed since the fix was decided" in r.stderr
    # scanned again, the fix is known unsafe and waits for --unsafe-fixes
    monkeypatch.setattr(fixes, "read_snapshot", real)
    r = fix("--write", ".")
    assert (tmp_path / "k.py").read_text() == changed and "unsafe fix not applied" in r.stderr


def test_scan_and_fix_share_their_option_declarations():
    """What to scan and how (selection, excludes, config, names, gitignore, jobs, cache) is declared
    once: the two commands' options are the same objects' copies, help text included."""
    from jitguard.cli.fix import fix as fix_cmd
    from jitguard.cli.scan import scan as scan_cmd

    shared = {"select", "extend_select", "ignore", "exclude", "config_file", "isolated", "varying_names",
              "stable_names", "respect_gitignore", "jobs", "no_cache", "cache_dir"}
    scan_opts = {p.name: p.to_info_dict() for p in scan_cmd.params if p.name in shared}
    fix_opts = {p.name: p.to_info_dict() for p in fix_cmd.params if p.name in shared}
    assert set(scan_opts) == set(fix_opts) == shared
    assert scan_opts == fix_opts


def test_confidence_option_chooses_the_findings_fixed(tmp_path, monkeypatch):
    """A constexpr whose value rests on the leading-dim guess gives a low JG002: the default fix
    leaves it, ``--confidence low`` fixes it (as the config key does), ``--confidence high``
    leaves the medium JG001 too."""
    monkeypatch.chdir(tmp_path)
    n, m = _name("a"), _name("b")
    src = f'''import triton
import triton.language as tl


@triton.jit
def k(x_ptr, {m}, {n}: tl.constexpr, BLOCK: tl.constexpr):
    if tl.program_id(0) < {n}:
        tl.store(x_ptr + {m} + tl.arange(0, BLOCK), 0.0)


def launch(x):
    t = x.shape[0]
    k[(1,)](x, t, t, BLOCK=64)
'''
    (tmp_path / "k.py").write_text(src)
    levels = {}
    for level in ("high", None, "low"):
        r = fix(*(["--confidence", level] if level else []), "--unsafe-fixes", ".")
        assert r.exit_code == 0, r.output
        levels[level] = r.stdout
    assert levels["high"] == ""  # nothing structural: the leading dim is a guess
    assert f'+@triton.jit(do_not_specialize=["{m}"])' in levels[None].splitlines()
    assert f'+def k(x_ptr, {m}, {n}, BLOCK: tl.constexpr):' in levels["low"].splitlines()
    assert f'+@triton.jit(do_not_specialize=["{m}", "{n}"])' in levels["low"].splitlines()
    assert (tmp_path / "k.py").read_text() == src  # a diff only
