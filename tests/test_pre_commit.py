"""The pre-commit hook, run by the real ``pre-commit`` against a temporary git repository, in both
forms README's CI section gives: the local hook (``language: system``, no ``rev``), and the
repository's own hook (``.pre-commit-hooks.yaml``, ``language: python``) pinned to a commit by
``pre-commit autoupdate --bleeding-edge --freeze``, as README says. The second installs jitguard
into a virtualenv of pre-commit's (pip needs its dependencies from an index): skipped, with the
reason, where that install can't happen."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml")

ROOT = pathlib.Path(__file__).resolve().parents[1]
PRE_COMMIT = [sys.executable, "-m", "pre_commit"]
pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
    pytest.mark.skipif(subprocess.run([*PRE_COMMIT, "--version"], capture_output=True).returncode != 0,
                       reason="pre-commit is not installed (pip install -e '.[test]')"),
]

KERNEL = '''\
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, num_tokens, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < num_tokens)


def launch(x):
    scale[(1,)](x, x.shape[0], BLOCK=128)
'''


def readme_yaml(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- " + re.escape(marker) + r"\b[^>]*-->\n```yaml\n(.*?)```", text, re.S)
    assert m, f"README.md: no yaml block after <!-- {marker} -->"
    return m.group(1)


def git(cwd, *args):
    return subprocess.run(["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout


def pre_commit(cwd, tmp, *args):
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp / "pre-commit-home"),
               JITGUARD_CACHE_DIR=str(tmp / "jg-cache"),
               PATH=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("PRE_COMMIT_ALLOW_NO_CONFIG", None)
    return subprocess.run([*PRE_COMMIT, *args], cwd=cwd, env=env, capture_output=True, text=True)


def user_repo(tmp: pathlib.Path, config: str) -> pathlib.Path:
    repo = tmp / "user"
    (repo / "ops").mkdir(parents=True)
    (repo / "ops" / "scale.py").write_text(KERNEL)
    (repo / ".pre-commit-config.yaml").write_text(config)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    return repo


def test_local_hook_is_the_repository_hook_run_by_the_environment():
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (local,) = yaml.safe_load(readme_yaml("pre-commit-local"))["repos"][0]["hooks"]
    assert local.pop("language") == "system" and hook.pop("language") == "python"
    hook.pop("description", None)
    assert local == hook


def test_local_hook_fails_on_a_finding_and_passes_with_a_baseline(tmp_path):
    repo = user_repo(tmp_path, readme_yaml("pre-commit-local"))
    r = pre_commit(repo, tmp_path, "run", "--all-files")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ops/scale.py:6:1: JG001 num_tokens varies per call" in r.stdout
    assert re.search(r"jitguard scan \(Triton recompiles\)\.+Failed", r.stdout)
    # adopt: record the finding, point [tool.jitguard] at the baseline; the hook passes
    subprocess.run([sys.executable, "-m", "jitguard", "scan", "--write-baseline", "jitguard-baseline.json", "."],
                   cwd=repo, capture_output=True, env=dict(os.environ, JITGUARD_CACHE_DIR=str(tmp_path / "c")))
    (repo / "pyproject.toml").write_text('[tool.jitguard]\nbaseline = "jitguard-baseline.json"\n')
    git(repo, "add", "-A")
    r = pre_commit(repo, tmp_path, "run", "--all-files")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"jitguard scan \(Triton recompiles\)\.+Passed", r.stdout)


def _published_copy(tmp: pathlib.Path) -> pathlib.Path:
    """This working tree as a repository pre-commit can clone (what would be published)."""
    src = tmp / "jitguard-src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy2(ROOT / name, src / name)
    for name in ("jitguard", "kernels"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git(src, "init", "-q")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "jitguard")
    return src


# what pip prints when it can't reach an index for jitguard's dependencies or build backend
_NO_INDEX = re.compile(r"Could not find a version|No matching distribution|Failed to establish a new "
                       r"connection|Temporary failure in name resolution|Network is unreachable|"
                       r"ProxyError|Read timed out")


def test_readme_remote_hook_pinned_to_a_commit_by_autoupdate(tmp_path):
    src = _published_copy(tmp_path)
    snippet = readme_yaml("pre-commit-remote")
    assert "rev: COMMIT_SHA" in snippet
    config = snippet.replace("https://github.com/OWNER/jitguard", str(src))
    repo = user_repo(tmp_path, config)
    r = pre_commit(repo, tmp_path, "autoupdate", "--bleeding-edge", "--freeze")
    assert r.returncode == 0, r.stdout + r.stderr
    head = git(src, "rev-parse", "HEAD").strip()
    pinned = yaml.safe_load((repo / ".pre-commit-config.yaml").read_text())["repos"][0]["rev"]
    assert pinned == head
    git(repo, "add", "-A")
    r = pre_commit(repo, tmp_path, "run", "--all-files")
    out = r.stdout + r.stderr
    log = tmp_path / "pre-commit-home" / "pre-commit.log"
    if r.returncode not in (0, 1) or "An unexpected error" in out:
        detail = log.read_text() if log.exists() else out
        if _NO_INDEX.search(detail):
            pytest.skip("pre-commit could not install the hook's environment: pip reached no "
                        f"package index ({_NO_INDEX.search(detail).group(0)})")
        raise AssertionError(detail)
    assert r.returncode == 1, out
    assert "ops/scale.py:6:1: JG001 num_tokens varies per call" in out
