"""Bad input never crashes a scan: each bad file is one error line (and one JSON ``errors`` entry)
with a reason about the file, the rest is scanned, and there is never a traceback."""
from __future__ import annotations

import json
import os
import random

import pytest
from click.testing import CliRunner

from jitguard.cli import main

GOOD = """\
import triton


@triton.jit
def {name}(x_ptr, n):
    pass


def launch(x):
    {name}[(1,)](x, x.shape[0])
"""


@pytest.fixture
def rng():
    seed = random.randrange(2**32)
    print("seed", seed)
    return random.Random(seed)


def scan(tmp_path, *args):
    old = os.getcwd()
    os.chdir(tmp_path)
    cache = [] if "--cache-dir" in args else ["--no-cache"]
    try:
        r = CliRunner().invoke(main, ["scan", *cache, "-j", "1", *args],
                               catch_exceptions=False)
    finally:
        os.chdir(old)
    assert "Traceback" not in r.output
    return r


def scan_doc(tmp_path, *args):
    r = scan(tmp_path, "--format", "json", *args)
    return r, json.loads(r.stdout)


def test_each_bad_file_is_an_error_and_the_scan_goes_on(tmp_path, rng):
    name = f"k{rng.randrange(10**6)}"
    (tmp_path / "good.py").write_text(GOOD.format(name=name))
    (tmp_path / "syntax.py").write_text("import triton\n@triton.jit\ndef k(x:\n    pass\n")
    (tmp_path / "latin1.py").write_bytes(
        "import triton  # jit\n# caf\u00e9\n".encode("latin-1") + bytes([rng.randrange(0x80, 0x100)])
    )
    (tmp_path / "loop").mkdir()
    os.symlink("..", tmp_path / "loop" / "up")  # a directory loop
    os.symlink("self.py", tmp_path / "self.py")  # a link to itself
    os.symlink("nowhere.py", tmp_path / "dangling.py")
    r, doc = scan_doc(tmp_path, ".")
    assert r.exit_code == 1
    assert [(f["path"], f["code"]) for f in doc["findings"]] == [("good.py", "JG001")]
    errors = {e["path"]: e for e in doc["errors"]}
    assert set(errors) == {"syntax.py", "latin1.py", "loop/up", "self.py", "dangling.py"}
    assert all(e["kind"] == "file" for e in errors.values())
    assert "symlink loop" in errors["loop/up"]["message"]
    assert "symlink loop" in errors["self.py"]["message"]
    assert "dangling" in errors["dangling.py"]["message"]
    assert errors["syntax.py"]["line"] in (3, 4)
    assert "utf-8" in errors["latin1.py"]["message"].lower()
    # the text format gives one line per bad file, after the findings
    r = scan(tmp_path, ".")
    lines = r.stdout.splitlines()
    assert lines[0].startswith("good.py:")
    err_lines = [x for x in lines if ": error: " in x]
    assert sorted(x.split(":")[0] for x in err_lines) == sorted(errors)
    assert "5 files could not be analyzed" in lines[-1]
    # with a cache, a second (warm) run reports exactly the same, each error once
    cache = str(tmp_path.parent / f"{tmp_path.name}-cache")
    first = scan_doc(tmp_path, "--cache-dir", cache, ".")[1]
    second = scan_doc(tmp_path, "--cache-dir", cache, ".")[1]
    assert first["summary"]["cache_hits"] == 0
    assert second["summary"]["cache_hits"] == second["summary"]["files_analyzed"] == 1
    assert first["errors"] == second["errors"] == doc["errors"]
    assert first["findings"] == second["findings"] == doc["findings"]


def test_fuzzed_bytes_are_analyzed_or_reported_never_internal(tmp_path, rng):
    pieces = [b"import triton\n", b"@triton.jit\n", b"def k(a, b, N: tl.constexpr):\n",
              b"    pass\n", b"k[(1,)](x, x.shape[0], 3)\n", b"\xff\xfe", b"(" * 200, b"\t \x0c",
              b"\x00", b"'''", b"\r\n", b"class C:\n", b"  k = triton.jit(f)\n", b"lambda: (",
              b"\xef\xbb\xbf", b"# coding: latin-1\n", b"async def f():\n    await k[g](n)\n"]
    for i in range(25):
        data = b"import triton  # jit\n" + b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12)))
        (tmp_path / f"f{i}.py").write_bytes(data)
    r, doc = scan_doc(tmp_path, ".")
    assert [e for e in doc["errors"] if e["kind"] == "internal"] == []
    assert r.exit_code in (0, 1)
    assert doc["summary"]["files_analyzed"] + len(doc["errors"]) == 25


def test_missing_path_is_exit_2_with_a_clear_message(tmp_path, rng):
    (tmp_path / "a.py").write_text(GOOD.format(name="k"))
    missing = f"missing_{rng.randrange(10**6)}.py"
    r = scan(tmp_path, "a.py", missing)
    assert r.exit_code == 2
    assert r.stdout == ""
    assert r.stderr == f"jitguard scan: error: {missing}: no such file or directory\n"


def test_symlink_loop_named_on_the_command_line_is_a_file_error(tmp_path):
    os.symlink("me.py", tmp_path / "me.py")
    (tmp_path / "a.py").write_text(GOOD.format(name="k"))
    r, doc = scan_doc(tmp_path, "me.py", "a.py")
    assert r.exit_code == 1 and len(doc["findings"]) == 1
    assert [e["path"] for e in doc["errors"]] == ["me.py"]


def test_bad_config_is_exit_2_not_a_traceback(tmp_path):
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.jitguard\nselect = 1\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    r = scan(tmp_path, "a.py")
    assert r.exit_code == 2 and "invalid TOML" in r.stderr and r.stdout == ""


def test_unknown_option_is_exit_2(tmp_path):
    r = scan(tmp_path, "--formt", "json")
    assert r.exit_code == 2 and "No such option" in r.stderr


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_file_name_that_is_not_utf8(tmp_path, fmt):
    name = os.fsdecode(b"kern\xff.py")  # a Linux file name that is not valid UTF-8
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / name).write_text(GOOD.format(name="k"))
    cache = str(tmp_path / "cache")
    out = tmp_path / "report.out"
    for _ in range(2):  # cold, then from the cache
        r = scan(tmp_path, "--cache-dir", cache, "--format", fmt, "-o", str(out), "src")
        assert r.exit_code == 1, r.output
        r = scan(tmp_path, "--cache-dir", cache, "--format", fmt, "src")
        assert r.exit_code == 1, r.output
    data = out.read_bytes()
    if fmt == "sarif":
        assert b"kern%FF.py" in data
    elif fmt == "json":
        assert json.loads(data)["findings"][0]["path"] == "src/" + name
    else:
        assert b"src/kern\xff.py" in data
