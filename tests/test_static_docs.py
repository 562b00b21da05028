"""docs/rules.md is generated from the registry: it must still say what the registry says."""
from __future__ import annotations

import pathlib

import pytest

from jitguard.static.rules import RULES

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "rules.md"


@pytest.mark.parametrize("code", sorted(RULES))
def test_rules_page_matches_the_registry(code):
    text = DOC.read_text()
    assert RULES[code].doc().strip() in text, f"docs/rules.md is stale for {code}: regenerate it"
