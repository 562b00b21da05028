"""README.md quotes real output: the scan of fixtures/ and the rule table must match a run now."""
from __future__ import annotations

import pathlib
import re

from click.testing import CliRunner

from jitguard.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _block_after(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(re.escape(marker) + r"\n(.*?)\n```", text, re.S)
    assert m, f"README.md: no console block starting with {marker!r}"
    return m.group(1)


def test_readme_scan_of_fixtures_is_real_output(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["scan", "--no-cache", "fixtures/"])
    assert result.exit_code == 1  # findings
    assert _block_after("$ jitguard scan fixtures/") == result.output.rstrip("\n")


def test_readme_rule_table_is_real_output():
    result = CliRunner().invoke(main, ["rule"])
    assert result.exit_code == 0
    assert _block_after("$ jitguard rule") == result.output.rstrip("\n")
