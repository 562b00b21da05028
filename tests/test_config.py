"""[tool.jitguard] configuration, selectors, and the .gitignore pattern subset (checked against git)."""
from __future__ import annotations

import os
import random
import shutil
import subprocess

import pytest

from jitguard.config import Config, ConfigError, find_pyproject, load_config
from jitguard.static.files import collect_files, module_name
from jitguard.static.ignore_patterns import PatternList

CODES = [f"JG00{i}" for i in range(1, 8)]


@pytest.fixture
def rng():
    seed = random.randrange(2**32)
    print("seed", seed)
    return random.Random(seed)


def _prefixes(code):
    return [code[:k] for k in range(2, len(code) + 1)]


def test_most_specific_selector_wins(rng):
    for _ in range(200):
        select = rng.sample([p for c in CODES for p in _prefixes(c)], rng.randrange(1, 4))
        ignore = rng.sample([p for c in CODES for p in _prefixes(c)], rng.randrange(0, 4))
        cfg = Config(select=tuple(select), ignore=tuple(ignore))
        for code in CODES:
            s = max([len(p) for p in select if code.startswith(p)], default=-1)
            i = max([len(p) for p in ignore if code.startswith(p)], default=-1)
            assert cfg.is_enabled(code) == (s > i), (select, ignore, code)


def test_pyproject_table_is_read_and_validated(tmp_path, rng):
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    varying = [f"v{rng.randrange(1000)}" for _ in range(3)]
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname='x'\n\n[tool.jitguard]\n"
        f"select = ['JG00']\nignore = ['JG006']\nexclude = ['gen/']\nvarying-names = {varying!r}\n"
        "stable_names = ['hidden']\n[tool.jitguard.per-file-ignores]\n'tests/**' = ['JG001']\n"
    )
    assert find_pyproject(sub) == tmp_path / "pyproject.toml"
    cfg = load_config(start=str(sub))
    assert cfg.select == ("JG00",) and cfg.ignore == ("JG006",)
    assert cfg.varying_names == frozenset(varying) and cfg.stable_names == {"hidden"}
    assert cfg.root == str(tmp_path)
    assert cfg.ignores_for_path(str(tmp_path / "tests" / "x" / "t.py")) == ("JG001",)
    assert cfg.ignores_for_path(str(tmp_path / "src" / "t.py")) == ()
    # a nearer pyproject.toml without the table does not hide the one with it
    (tmp_path / "a" / "pyproject.toml").write_text("[project]\nname='inner'\n")
    assert find_pyproject(sub) == tmp_path / "pyproject.toml"
    # the facts cache key follows the names that change extraction, and only those
    other = load_config(start=str(sub)).with_cli(ignore=["JG001"])
    assert other.facts_key() == cfg.facts_key()
    assert cfg.with_cli(varying_names=["zz"]).facts_key() != cfg.facts_key()


@pytest.mark.parametrize(
    "body, needle",
    [
        ("selct = ['JG001']", "unknown key 'selct'"),
        ("select = 'JG9'", "matches no rule"),
        ("select = ['jg001x']", "invalid rule selector"),
        ("ignore = 3", "must be a list of strings"),
        ("varying-names = ['n']\nstable-names = ['n']", "both varying-names and stable-names"),
        ("respect-gitignore = 'yes'", "true or false"),
        ("per-file-ignores = ['x']", "table of pattern"),
        ("select = [", "invalid TOML"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path, body, needle):
    (tmp_path / "pyproject.toml").write_text("[tool.jitguard]\n" + body + "\n")
    with pytest.raises(ConfigError) as info:
        load_config(start=str(tmp_path))
    assert needle in str(info.value) and "pyproject.toml" in str(info.value)


def test_explicit_config_file(tmp_path):
    f = tmp_path / "jitguard.toml"
    f.write_text("ignore = ['JG007']\n")
    assert load_config(f).ignore == ("JG007",)
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.toml")


def test_cli_flags_merge_over_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = Config(select=("JG00",), ignore=("JG006",), exclude=("a/",), root=str(tmp_path))
    merged = cfg.with_cli(select=["JG001"], ignore=["JG002"], exclude=["b/"])
    assert merged.select == ("JG001",)  # replaces
    assert merged.ignore == ("JG006", "JG002") and merged.exclude == ("a/", "b/")  # extend
    assert cfg.with_cli(extend_select=["JG007"]).select == ("JG00", "JG007")
    with pytest.raises(ConfigError):
        cfg.with_cli(select=["NOPE!"])


# --- .gitignore subset: every verdict compared with git itself -------------------------------

SEGMENTS = ["a", "b", "ab", "x.py", "y.py", "gen", "build", "_x", "c1"]


def _random_pattern(rng):
    parts = []
    for _ in range(rng.randrange(1, 4)):
        kind = rng.random()
        if kind < 0.15:
            parts.append("**")
        elif kind < 0.3:
            parts.append(rng.choice(["*", "*.py", "?", "a*", "[ab]", "[!a]*", "x.?y", "[z-a]*"]))
        else:
            parts.append(rng.choice(SEGMENTS))
    pat = "/".join(parts)
    if rng.random() < 0.2:
        pat = "/" + pat
    if rng.random() < 0.2:
        pat += "/"
    if rng.random() < 0.15:
        pat = "!" + pat
    return pat


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_gitignore_patterns_agree_with_git(tmp_path, rng):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    paths = set()
    for _ in range(60):
        depth = rng.randrange(1, 4)
        segs = [rng.choice(SEGMENTS) for _ in range(depth)]
        paths.add("/".join(segs))
    # a path can't be both a file and a directory: keep leaves only
    leaves = sorted(p for p in paths if not any(q.startswith(p + "/") for q in paths))
    for _ in range(8):
        patterns = [_random_pattern(rng) for _ in range(rng.randrange(1, 5))]
        (tmp_path / ".gitignore").write_text("\n".join(patterns) + "\n")
        pl = PatternList(patterns)
        # Files only: that is what the walker yields (a directory's own verdict shows in its files).
        queries = [(p, False) for p in leaves]
        out = subprocess.run(
            ["git", "-C", str(tmp_path), "check-ignore", "--no-index", "-v", "-n", "--stdin"],
            input="\n".join(q for q, _ in queries) + "\n", capture_output=True, text=True,
        ).stdout.splitlines()
        assert len(out) == len(queries)
        for line, (q, is_dir) in zip(out, queries):
            source, path = line.split("\t")
            git_ignored = source != "::" and not source.split(":", 2)[2].startswith("!")
            assert _walk_verdict(pl, q.rstrip("/"), is_dir) == git_ignored, (patterns, q)


def _walk_verdict(pl, path, is_dir):
    """What the walker decides: an excluded directory prunes everything below it (as in git)."""
    parts = path.split("/")
    for k in range(1, len(parts)):
        if pl.match("/".join(parts[:k]), True):
            return True
    return bool(pl.match(path, is_dir))


def test_walk_applies_default_config_and_gitignore_excludes(tmp_path, rng, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    keep = ["src/a.py", "src/pkg/b.py", "tools/c.pyi"]
    skip = [".venv/lib/x.py", "build/y.py", "src/__pycache__/z.py", "node_modules/q.py",
            "env2/lib/v.py", "gen/out.py", "src/pkg/secret_1.py", "third/t.py", "x.egg-info/e.py"]
    for p in keep + skip:
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / p).write_text("x = 1\n")
    (tmp_path / "env2" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / ".gitignore").write_text("gen/\n")
    (tmp_path / "src" / "pkg" / ".gitignore").write_text("secret_*.py\n")
    cfg = Config(root=str(tmp_path), exclude=("/third",))
    got = [f.display for f in collect_files(["."], cfg).files]
    assert got == sorted(keep)
    # respect-gitignore off brings the ignored ones back, not the default excludes
    got = [f.display for f in collect_files(["."], Config(root=str(tmp_path),
                                                          respect_gitignore=False)).files]
    assert got == sorted(keep + ["gen/out.py", "src/pkg/secret_1.py", "third/t.py"])
    # a file named on the command line still honours exclude patterns (pre-commit passes names)
    assert collect_files(["gen/out.py", "third/t.py"], cfg).files == []
    # a default-excluded directory named explicitly is scanned
    assert [f.display for f in collect_files(["build"], cfg).files] == ["build/y.py"]


def test_module_name_walks_packages(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "__init__.py").write_text("")
    (tmp_path / "a" / "b" / "__init__.py").write_text("")
    (tmp_path / "a" / "b" / "m.py").write_text("")
    (tmp_path / "loose.py").write_text("")
    assert module_name(str(tmp_path / "a" / "b" / "m.py")) == "a.b.m"
    assert module_name(str(tmp_path / "a" / "b" / "__init__.py")) == "a.b"
    assert module_name(str(tmp_path / "loose.py")) == "loose"


def test_cli_exclude_is_relative_to_the_working_directory(tmp_path, monkeypatch):
    for p in ["sub/gen/x.py", "sub/keep.py", "gen/x.py", "sub/deep/gen/y.py"]:
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / p).write_text("x = 1\n")
    monkeypatch.chdir(tmp_path / "sub")
    cfg = Config(root=str(tmp_path), respect_gitignore=False)
    anchored = cfg.with_cli(exclude=["gen/x.py"])  # has a slash: relative to the cwd (sub/)
    got = sorted(os.path.relpath(f.path, tmp_path) for f in collect_files([".."], anchored).files)
    assert got == ["gen/x.py", "sub/deep/gen/y.py", "sub/keep.py"]
    by_name = cfg.with_cli(exclude=["gen/"])  # a bare directory name matches at any depth
    got = sorted(os.path.relpath(f.path, tmp_path) for f in collect_files([".."], by_name).files)
    assert got == ["sub/keep.py"]
