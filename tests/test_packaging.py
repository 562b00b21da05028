"""The installed package layout: every package in the tree is listed in pyproject.toml."""
from __future__ import annotations

import pathlib
import subprocess
import sys

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.skipif(tomllib is None, reason="tomllib needs Python 3.11")
def test_every_package_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(p.relative_to(ROOT).parent.parts) for p in (ROOT / "jitguard").rglob("__init__.py")
    } | {"jitguard.kernels" for _ in (ROOT / "kernels").glob("__init__.py")}
    assert found == listed


def test_kernels_import_as_jitguard_kernels():
    import jitguard.kernels

    assert pathlib.Path(jitguard.kernels.__file__).parent == ROOT / "kernels"


def test_console_script_help():
    out = subprocess.run(
        [sys.executable, "-m", "jitguard", "--help"], capture_output=True, text=True, check=True
    ).stdout
    commands = out.split("Commands:", 1)[1]
    for name in ("scan", "fix", "rule", "run", "report"):
        assert f"\n  {name} " in commands
    assert "..." not in commands  # every command's one-line help is whole, not cut by click
