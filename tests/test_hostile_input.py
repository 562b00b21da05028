"""Hostile input for scan and fix: one bad file or pattern is one ``errors`` entry and the rest is
scanned; sources are decoded as Python decodes them; fix's diff is one `git apply` takes; temp
files of a killed write are cleared; identifiers compare as Python compares them (NFKC)."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner

from jitguard.cli import main
from jitguard.static.prefilter import NameMatcher

ROOT = pathlib.Path(__file__).resolve().parents[1]

KERNEL = """\
import triton


@triton.jit
def {name}(x_ptr, n):
    pass


def launch(x):
    {name}[(1,)](x, x.shape[0])
"""


def run(tmp_path, *args, input=None):
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = CliRunner().invoke(main, list(args), catch_exceptions=False, input=input)
    finally:
        os.chdir(old)
    assert "Traceback" not in r.output
    return r


def scan_doc(tmp_path, *args):
    r = run(tmp_path, "scan", "--no-cache", "-j", "1", "--format", "json", *args)
    assert r.exit_code in (0, 1), r.output
    return r, json.loads(r.stdout)


def scan_subprocess(tmp_path, *args, timeout=120, mem_mb=1024):
    """A scan in its own process, bounded in time and memory: what hangs or eats memory fails."""
    limit = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({mem_mb << 20}, {mem_mb << 20}))"
    code = f"{limit}\nimport sys\nfrom jitguard.cli import main\nsys.exit(main())"
    p = subprocess.run([sys.executable, "-c", code, "scan", "--no-cache", "-j", "1", "--format",
                        "json", *args], cwd=tmp_path, capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode in (0, 1), (p.returncode, p.stderr)
    return json.loads(p.stdout)


def codes_by_path(doc):
    return sorted((f["path"], f["code"]) for f in doc["findings"])


# --- item: one bad pattern or special file never takes the scan down ---------------------------

def test_bad_gitignore_patterns_are_errors_and_the_other_patterns_apply(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "good.py").write_text(KERNEL.format(name="k"))
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "out.py").write_text(KERNEL.format(name="g"))
    (tmp_path / "skip_me.py").write_text(KERNEL.format(name="s"))
    (tmp_path / ".gitignore").write_text("[z-a]\n[[:alpha:]]x.py\ngen/\nskip_*.py\n")
    r, doc = scan_doc(tmp_path, ".")
    assert r.exit_code == 1
    assert codes_by_path(doc) == [("good.py", "JG001")]  # gen/ and skip_* still excluded
    errors = sorted((e["path"], e["line"]) for e in doc["errors"])
    assert errors == [(".gitignore", 1), (".gitignore", 2)]
    messages = " ".join(e["message"] for e in doc["errors"])
    assert "[z-a]" in messages and "POSIX" in messages


def test_bad_exclude_and_per_file_ignores_patterns_are_errors(tmp_path):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.jitguard]
        exclude = ["[b-a]*.py", "third/"]
        [tool.jitguard.per-file-ignores]
        "[y-x].py" = ["JG001"]
        "quiet.py" = ["JG001"]
        """))
    (tmp_path / "good.py").write_text(KERNEL.format(name="k"))
    (tmp_path / "quiet.py").write_text(KERNEL.format(name="q"))
    (tmp_path / "third").mkdir()
    (tmp_path / "third" / "t.py").write_text(KERNEL.format(name="t"))
    r, doc = scan_doc(tmp_path, "--exclude", "[q-p]", ".")
    assert codes_by_path(doc) == [("good.py", "JG001")]
    messages = sorted(e["message"] for e in doc["errors"])
    assert len(messages) == 3, messages
    assert sum("exclude pattern" in m for m in messages) == 2
    assert sum("per-file-ignores pattern" in m for m in messages) == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_and_device_links_as_gitignore_or_source_are_errors(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "good.py").write_text(KERNEL.format(name="k"))
    os.mkfifo(tmp_path / ".gitignore")  # opening it for reading would block forever
    os.mkfifo(tmp_path / "pipe.py")
    os.symlink("/dev/zero", tmp_path / "zero.py")  # reading it would never end
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "kern.py").write_text(KERNEL.format(name="j"))
    os.symlink("/dev/zero", sub / ".gitignore")
    doc = scan_subprocess(tmp_path, ".")
    assert codes_by_path(doc) == [("good.py", "JG001"), ("sub/kern.py", "JG001")]
    errors = {e["path"]: e["message"] for e in doc["errors"]}
    assert set(errors) == {".gitignore", "pipe.py", "zero.py", "sub/.gitignore"}
    assert "a FIFO" in errors[".gitignore"] and "a FIFO" in errors["pipe.py"]
    assert "character device" in errors["zero.py"] and "character device" in errors["sub/.gitignore"]


def test_a_huge_sparse_source_file_is_an_error_not_read(tmp_path):
    (tmp_path / "good.py").write_text(KERNEL.format(name="k"))
    with open(tmp_path / "huge.py", "wb") as fh:  # 2 GiB of holes: no disk, and no memory if not read
        fh.write(b"import triton  # jit\n")
        fh.truncate(2 << 30)
    doc = scan_subprocess(tmp_path, ".", mem_mb=1024)
    assert codes_by_path(doc) == [("good.py", "JG001")]
    assert [e["path"] for e in doc["errors"]] == ["huge.py"]
    assert "limit" in doc["errors"][0]["message"]


def test_a_kernel_with_a_thousand_character_name_is_scanned_with_the_rest(tmp_path):
    long = "k" + "x" * 1000
    (tmp_path / "ops.py").write_text("import triton\n\n\n@triton.jit\ndef " + long + "(x_ptr, n):\n    pass\n")
    (tmp_path / "layer.py").write_text(f"from ops import {long}\n\n\ndef f(x):\n    {long}[(1,)](x, x.shape[0])\n")
    (tmp_path / "good.py").write_text(KERNEL.format(name="k"))
    r, doc = scan_doc(tmp_path, ".")
    assert doc["errors"] == []
    assert codes_by_path(doc) == [("good.py", "JG001"), ("ops.py", "JG001")]


def test_name_matcher_agrees_with_a_plain_word_search():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
    long_chain = st.integers(1, 300).map(lambda n: "p" + "q" * n)

    @hypothesis.settings(max_examples=150, deadline=None)
    @hypothesis.given(st.lists(st.one_of(ident, long_chain), min_size=1, max_size=40), st.data())
    def check(names, data):
        m = NameMatcher(names)
        for word in data.draw(st.lists(st.one_of(st.sampled_from(names), ident), min_size=1, max_size=5)):
            text = f"(1, {word}[(1,)])\n".encode()
            assert m(text) == (word in set(names)), word

    check()


# --- item: decode as Python does, in scan and fix ---------------------------------------------

REFUSED = {
    "unknown": b"# coding: no-such-codec\n",
    "rot13": b"# coding: rot13\n",
    "hex": b"# -*- coding: hex -*-\n",
    "bom_latin1": b"\xef\xbb\xbf# coding: latin-1\n",
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_coding_declarations_python_refuses_are_errors_in_scan_and_fix(tmp_path, case):
    data = REFUSED[case] + KERNEL.format(name="k").encode()
    with pytest.raises(SyntaxError):  # what Python does with this file
        compile(data, "bad.py", "exec")
    (tmp_path / "bad.py").write_bytes(data)
    (tmp_path / "good.py").write_text(KERNEL.format(name="g"))
    r, doc = scan_doc(tmp_path, ".")
    assert codes_by_path(doc) == [("good.py", "JG001")]
    assert [e["path"] for e in doc["errors"]] == ["bad.py"]
    assert "coding declaration" in doc["errors"][0]["message"]
    (tmp_path / "good.py").unlink()
    r = run(tmp_path, "fix", "--no-cache", "--check", ".")
    assert r.exit_code == 1  # a file fix could not read may hide a pending fix
    assert "bad.py: not analyzed: bad coding declaration" in r.stderr


def test_a_codec_that_cannot_encode_the_edit_fails_fix_check(tmp_path):
    # idna decodes these lines, so Python compiles the file, but can't encode them back
    data = b"# coding: idna\n" + KERNEL.format(name="k").encode()
    compile(data, "k.py", "exec")
    (tmp_path / "k.py").write_bytes(data)
    r = run(tmp_path, "fix", "--no-cache", "--check", ".")
    assert r.exit_code == 1
    assert "declared encoding (idna)" in r.stderr
    assert (tmp_path / "k.py").read_bytes() == data


def test_a_declared_encoding_wins_over_utf8_that_happens_to_decode(tmp_path):
    # b"n\xc3\xb3" is "nó" in UTF-8 but "nГі" in cp1251, the declared encoding: Python reads "nГі"
    data = ("# coding: cp1251\n" + KERNEL.format(name="k")).encode().replace(b"n)", b"n\xc3\xb3)")
    data = data.replace(b"x.shape[0])", b"n=x.shape[0])").replace(b"(x, n=", b"(x, n\xc3\xb3=")
    (tmp_path / "k.py").write_bytes(data)
    ns: dict = {}
    exec(compile(data.replace(b"import triton", b"triton = None").split(b"@")[0], "k.py", "exec"), ns)
    r, doc = scan_doc(tmp_path, ".")
    assert [f["param"] for f in doc["findings"]] == ["n\u0413\u0456"]
    r = run(tmp_path, "fix", "--no-cache", "--write", ".")
    assert r.exit_code == 0, r.stderr
    fixed = (tmp_path / "k.py").read_bytes()
    assert 'do_not_specialize=["n\u0413\u0456"]'.encode("cp1251") in fixed
    compile(fixed, "k.py", "exec")


def test_undecodable_bytes_in_a_comment_are_read_as_python_reads_them(tmp_path):
    data = KERNEL.format(name="k").encode().replace(b"def launch", b"# caf\xe9 (latin-1)\ndef launch")
    try:
        compile(data, "k.py", "exec")
    except SyntaxError:
        pytest.skip("this Python refuses undecodable bytes in comments")
    (tmp_path / "k.py").write_bytes(data)
    r, doc = scan_doc(tmp_path, ".")
    assert doc["errors"] == [] and codes_by_path(doc) == [("k.py", "JG001")]
    r = run(tmp_path, "fix", "--no-cache", "--write", ".")
    assert "not valid utf-8 in a comment (line 9" in r.stderr  # said, and the file left as it was
    assert (tmp_path / "k.py").read_bytes() == data


# --- item: fix's diff applies with git apply --------------------------------------------------

@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_fix_diff_applies_with_git_for_every_line_break_python_knows(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    body = KERNEL.format(name="k")
    files = {
        "formfeed.py": body.replace("\n\n\n@", "\n\x0c\n\n@").encode(),
        "separators.py": body.replace("    pass", "    s = 'a\x1cb\x1dc\x1ed\x85e\u2028f\u2029g'  # \x0c").encode(),
        "cr_only.py": body.replace("\n", "\r").encode(),
        "crlf.py": body.replace("\n", "\r\n").encode(),
        "latin1.py": ("# coding: latin-1\n# caf\xe9\n" + body).encode("latin-1"),
        "no_eol.py": body.rstrip("\n").encode(),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    r = run(tmp_path, "fix", "--no-cache", "-q", ".")
    assert r.exit_code == 0, r.stderr
    patch = r.stdout_bytes
    assert patch.count(b"\n--- a/") + patch.startswith(b"--- a/") == len(files)
    (tmp_path / "fix.diff").write_bytes(patch)
    p = subprocess.run(["git", "-C", str(tmp_path), "apply", "--check", "fix.diff"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    subprocess.run(["git", "-C", str(tmp_path), "apply", "fix.diff"], check=True)
    for name, data in files.items():  # the patched files are what fix --write writes
        assert b"do_not_specialize" in (tmp_path / name).read_bytes()
    applied = {n: (tmp_path / n).read_bytes() for n in files}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert run(tmp_path, "fix", "--no-cache", "-q", "--write", ".").exit_code == 0
    assert {n: (tmp_path / n).read_bytes() for n in files} == applied


@pytest.mark.parametrize("separator", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028"])
def test_characters_str_splitlines_breaks_at_are_not_line_breaks(tmp_path, separator):
    """Python counts lines at \\n, \\r\\n and \\r only; a form feed at the start of the file or a
    separator in a comment must not shift the source text read for each node (the annotation that
    makes a parameter a constexpr, the evidence in messages)."""
    fixture = (ROOT / "fixtures" / "lint" / "classes.py").read_text()
    (tmp_path / "clean").mkdir()
    (tmp_path / "odd").mkdir()
    (tmp_path / "clean" / "m.py").write_text(fixture)
    odd = fixture.replace("import triton\n", f"import triton  # a{separator}b\n", 1)
    odd = "\x0c" + odd if separator == "\x0c" else odd  # a form feed may also start a line
    (tmp_path / "odd" / "m.py").write_bytes(odd.encode("utf-8"))
    _, clean = scan_doc(tmp_path / "clean")
    _, got = scan_doc(tmp_path / "odd")
    assert {f["code"] for f in clean["findings"]} == {"JG001", "JG002"}
    keep = lambda doc: sorted((f["code"], f["param"], f["line"], f["message"]) for f in doc["findings"])  # noqa: E731
    assert keep(got) == keep(clean)


# --- item: temp files of a killed atomic write ------------------------------------------------

def test_temp_files_of_a_killed_fix_are_removed_when_stale_else_reported(tmp_path):
    (tmp_path / "k.py").write_text(KERNEL.format(name="k"))
    stale = tmp_path / ".k.py.ab12cd_9.jitguard-tmp"
    fresh = tmp_path / ".k.py.zz34yy78.jitguard-tmp"
    linked = tmp_path / ".k.py.ll00mm11.jitguard-tmp"
    other = tmp_path / ".notes.txt.jitguard-tmp"  # not a name write_atomic makes: left alone
    for p in (stale, fresh, other):
        p.write_text(KERNEL.format(name="k"))
    os.symlink("k.py", linked)
    old = time.time() - 3600
    os.utime(stale, (old, old))
    os.utime(linked, (old, old), follow_symlinks=False)
    r = run(tmp_path, "scan", "--no-cache", "-j", "1", ".")
    assert not stale.exists()
    assert fresh.exists() and linked.is_symlink() and other.exists()
    assert "removed .k.py.ab12cd_9.jitguard-tmp" in r.stderr
    errors = [x for x in r.stdout.splitlines() if ": error: " in x]
    assert sorted(x.split(":")[0] for x in errors) == [linked.name, fresh.name]
    assert all("interrupted jitguard fix of k.py" in x for x in errors)
    r = run(tmp_path, "fix", "--no-cache", "--write", ".")
    assert (tmp_path / "k.py").read_text().count("do_not_specialize") == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".jitguard-tmp")) == sorted(
        [fresh.name, linked.name, other.name])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_fix_killed_inside_the_write_leaves_a_temp_the_next_run_clears(tmp_path, monkeypatch):
    """The write window for real: kill -9 the writer after its temp file is complete."""
    from jitguard.static import safe_write

    (tmp_path / "k.py").write_text(KERNEL.format(name="k"))
    original = (tmp_path / "k.py").read_bytes()
    pid = os.fork()
    if pid == 0:  # the child: stop right before the rename, then be killed
        try:
            def stop(*a, **k):
                os.kill(os.getpid(), 19)  # SIGSTOP
            safe_write.os.replace = stop
            os.chdir(tmp_path)
            CliRunner().invoke(main, ["fix", "--no-cache", "-j", "1", "--write", "."])
        finally:
            os._exit(0)
    deadline = time.time() + 60
    while time.time() < deadline:
        _, status = os.waitpid(pid, os.WUNTRACED | os.WNOHANG)
        if status and os.WIFSTOPPED(status):
            break
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    temps = [p for p in tmp_path.iterdir() if p.name.endswith(".jitguard-tmp")]
    assert len(temps) == 1 and (tmp_path / "k.py").read_bytes() == original
    old = time.time() - 3600
    os.utime(temps[0], (old, old))
    r = run(tmp_path, "fix", "--no-cache", "-j", "1", "--write", ".")
    assert r.exit_code == 0, r.stderr
    assert f"removed {temps[0].name}" in r.stderr
    assert not temps[0].exists() and b"do_not_specialize" in (tmp_path / "k.py").read_bytes()


# --- item: identifiers as Python reads them (NFKC) --------------------------------------------

def test_fullwidth_parameter_names_are_the_names_python_sees(tmp_path):
    src = textwrap.dedent("""\
        import triton
        import triton.language as tl


        @triton.jit
        def k(x_ptr, \uff4e, \uff33\uff29ZE: tl.constexpr):
            pass


        def launch(x):
            k[(1,)](x, x.shape[0], SIZE=int(x.max().item()))
            k[(1,)](x, \uff4e=x.shape[0], \uff33\uff29ZE=int(x.max().item()))
        """)
    (tmp_path / "k.py").write_text(src)
    r, doc = scan_doc(tmp_path, ".")
    assert sorted((f["code"], f["param"]) for f in doc["findings"]) == [("JG001", "n"), ("JG002", "SIZE")]
    r = run(tmp_path, "fix", "--no-cache", "--unsafe-fixes", "--write", ".")
    assert r.exit_code == 0, r.stderr
    fixed = (tmp_path / "k.py").read_text()
    assert 'do_not_specialize=["n", "SIZE"]' in fixed or 'do_not_specialize=["SIZE", "n"]' in fixed
    assert "\uff33\uff29ZE):" in fixed  # the annotation dropped, the spelling kept
    r, doc = scan_doc(tmp_path, ".")
    assert doc["findings"] == []  # the fixed file is clean to the scan
    r = run(tmp_path, "fix", "--no-cache", "--check", ".")
    assert r.exit_code == 0, r.stderr
    triton = pytest.importorskip("triton")  # and Triton reads the entry as that parameter
    ns: dict = {}
    exec(compile(fixed, str(tmp_path / "k.py"), "exec"), ns)
    dns = {p.name for p in ns["k"].params if p.do_not_specialize}
    assert dns == {"n", "SIZE"}, triton.__version__
