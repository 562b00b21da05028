"""The project's text says what the project is, not how it was made.

Words about the making ("the lent H200", "issue 9", "this session's changes", "run on the device")
mean nothing to a reader of the repository; a measurement says where and when it was made instead:
"on an H200 (Triton 3.6.0, torch 2.11), 2026-11-29". Checked over every tracked text file. The
phrases are narrow on purpose, so that ordinary uses pass: a pytest session, a helper function,
memory on the device (the GPU), "issue" as a verb.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BANNED = {
    "lent (of a machine)": r"\blent\b",
    "issue N (a tracker number)": r"\bissues? #?\d+\b|\bissue-\d+\b",
    "a session of work": r"\b(?:this|that|the|a|each|every|one|previous|earlier|next|later|helper|lead|CEO|"
                         r"developer)(?:'s)? sessions?(?:'s)?\b(?!\s+(?:starts|finish))|\bsessions? \d+\b",
    "the lead": r"\bthe lead\b",
    "the device machine": r"\bdevice machines?\b|\brun on the device\b|\bdevice call\b|\bdevice kind\b",
    "a round of work": r"\bthis round(?:'s)? (?:of )?(?:work|changes)\b|\bround \d+ of (?:the )?work\b",
}
# Ordinary uses, cut out of a line before the phrases are looked for: a pytest session (pytest's
# own word: "the end of the session" in its plugin docs), "issue" as a verb before a count.
ALLOWED = (r"\bpytest(?:'s)? session\b", r"test session starts", r"end of the (?:test )?session",
           r"\b(?:may|can|could|to|will|would|must|should|does|do|it|they)\s+issues?\s+\d+")
SKIP = {"tests/test_wording.py"}
BINARY_SUFFIXES = {".png", ".jpg", ".gz", ".whl", ".zip", ".pyc"}


def offending_lines(text: str) -> list[tuple[int, str, str]]:
    """(line number, what, line) for each banned phrase in ``text``."""
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        rest = line
        for allowed in ALLOWED:
            rest = re.sub(allowed, " ", rest, flags=re.IGNORECASE)
        for what, pattern in BANNED.items():
            if re.search(pattern, rest, re.IGNORECASE):
                out.append((no, what, line.strip()))
    return out


def _tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def test_no_words_about_how_the_project_was_made():
    files = _tracked()
    if not files:
        pytest.skip("not a git checkout")
    found = []
    for rel in files:
        if rel in SKIP or Path(rel).suffix in BINARY_SUFFIXES:
            continue
        try:
            text = (ROOT / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        found += [f"{rel}:{no}: {what}: {line[:160]}" for no, what, line in offending_lines(text)]
    assert not found, "say what it is (e.g. 'on an H200 (Triton 3.6.0, torch 2.11), 2026-11-29'):\n" + "\n".join(found)


@pytest.mark.parametrize("line", [
    "On the lent H200 a trivial kernel fed a stream",
    "The 8-GPU version (issue 9) needs an 8-GPU device kind, not lent so far.",
    "this session's changes added 6 there",
    "## 2026-11-29, helper session on issue 3: tensor layouts",
    "## Session 2 (launchers, cross-module callers)",
    "needs an 8-GPU device kind",
    'skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device)")',
    "One device call for the rope_fp8 kernel",
    "Kernel discovery: every form issue 2 lists",
    "pytest plugin, written in this session's second hour",
])
def test_flags_words_about_the_making(line):
    assert offending_lines(line)


@pytest.mark.parametrize("line", [
    "pytest --jitguard                    report compiles per test at the end of the session",
    "Helpers shared by the rule modules (not a rule).",
    "num_tokens_post_padded [1] int32: the padded total (on the device; no host sync).",
    "of each row, computed on the device in the same kernel (no host sync, no global reduction).",
    "measured on an H200 (Triton 3.6.0, torch 2.11), 2026-11-29",
    "============================= test session starts ==============================",
    "the leading dimension of the cache",
    "a launch may issue 4 loads before it waits",
    "order.append(bool(w._STATE.watches))  # which arm this round runs under",
    "def helper(*args, **kwargs):",
])
def test_passes_ordinary_uses(line):
    assert not offending_lines(line)
