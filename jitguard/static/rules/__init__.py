"""The rule registry: one module per code (jg001.py ...). ``jitguard rule CODE`` prints from here only.

Every rule carries its documentation (what, why with the measured cost, an example and its fix, the
fix's safety) and VALID / INVALID source examples that tests/test_static_rules.py runs through the
real extractor and linker; each INVALID example states the source its fix produces, which the tests
check by applying the findings' fixes with the real codemod.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple

# Measured on an H200 (Triton 3.6.0, torch 2.11), 2026-11-29: the figures every "why" quotes.
COST_INT = "3 compiles over a serving-like stream of num_tokens values as a plain int (1 with do_not_specialize)"
COST_CONSTEXPR = "230 compiles of ~60 ms each (median call 60 ms) as a tl.constexpr over the same stream"
COST_AUTOTUNE = "658 ms per new value (median call) as an autotune key with 6 configs"


class Invalid(NamedTuple):
    """An INVALID example: source the rule reports, and what the source is once the fix of each of
    its findings is applied (``jitguard fix --unsafe-fixes``; ``fixed`` equal to ``source`` for a
    manual fix, which edits nothing)."""

    source: str
    fixed: str
    applicability: str  # of the example's fix: "safe" | "unsafe" | "manual"


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    summary: str  # one line
    what: str
    why: str
    example: str
    fix: str
    fix_safety: str  # "safe" | "unsafe" | "manual": what the fix typically is (findings may refine)
    valid: tuple[str, ...] = ()
    invalid: tuple[Invalid, ...] = ()
    check: Callable[..., Iterable] | None = field(default=None, compare=False, repr=False)

    def doc(self) -> str:
        """The full text ``jitguard rule CODE`` prints."""
        parts = [
            f"{self.code} {self.name}",
            "",
            self.summary,
            "",
            "What it catches",
            _indent(self.what),
            "",
            "Why it is costly",
            _indent(self.why),
            "",
            "Example",
            _indent(self.example),
            "",
            "Fix",
            _indent(self.fix),
            "",
            f"Fix safety: {self.fix_safety}",
        ]
        return "\n".join(parts).rstrip() + "\n"


def _indent(text: str) -> str:
    return "\n".join(("    " + line) if line.strip() else "" for line in text.strip("\n").splitlines())


def _load() -> dict[str, Rule]:
    from jitguard.static.rules import jg001, jg002, jg003, jg004, jg005, jg006, jg007

    rules = [m.RULE for m in (jg001, jg002, jg003, jg004, jg005, jg006, jg007)]
    return {r.code: r for r in rules}


RULES: dict[str, Rule] = _load()

__all__ = ["RULES", "Invalid", "Rule", "COST_INT", "COST_CONSTEXPR", "COST_AUTOTUNE"]
