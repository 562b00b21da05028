"""Every file (or folder) in bench/results/ is named somewhere in the project: README, docs/, a bench/
script or any other tracked text file outside bench/results/. Results nothing names are history,
which lives in git; this keeps bench/ from becoming a notebook again.

A reference is the entry's name (``moe_bench_v4.json``, ``serving_story``) as a whole word, or a
pattern that the docs use for a family of files: ``moe_*_v4.json`` or ``..._v6b_grid_bench.log``
(``...`` standing for a prefix given just before).
"""
from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = "bench/results"
TEXT_SUFFIXES = {".py", ".md", ".sh", ".txt", ".toml", ".cfg", ".yaml", ".yml", ".json", ""}
# A pattern must keep at least this many literal characters besides its extension, so that
# `bench/results/*.json` does not count as naming every JSON file.
MIN_PATTERN_LITERALS = 4
_PATTERN = re.compile(r"(?:\.\.\.|[\w.=,-]*\*)[\w.*=,-]*\.(?:json|log|txt|md)\b")
_TEMPLATE = re.compile(r"[\w.-]*\{[^{}\n]*\}[\w.{}-]*\.(?:json|log|txt|md)\b")
_SUFFIX = re.compile(r"[\"'](_[\w.-]+\.(?:json|log|txt|md))[\"']")


def _tracked() -> list[str] | None:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def _entries(tracked: list[str] | None) -> set[str]:
    """Top-level names under bench/results/ (a folder counts once)."""
    if tracked is not None:
        return {p[len(RESULTS) + 1:].split("/")[0] for p in tracked if p.startswith(RESULTS + "/")}
    return set(os.listdir(ROOT / RESULTS))


def _sources(tracked: list[str] | None) -> dict[str, str]:
    if tracked is None:
        tracked = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()
                   and not any(part in (".git", ".venv", "corpus") or part.startswith(".venv")
                               for part in p.relative_to(ROOT).parts)]
    out = {}
    for p in tracked:
        if p.startswith(RESULTS + "/") or Path(p).suffix not in TEXT_SUFFIXES:
            continue
        try:
            out[p] = (ROOT / p).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
    return out


def _patterns(text: str) -> list[str]:
    """The family patterns of one text, each as an fnmatch pattern."""
    found = [m.group(0) for m in _PATTERN.finditer(text)]
    # A script's f-string template (f"bench_watch_trace_{label}.json") names what the script writes.
    found += [re.sub(r"\{[^{}]*\}", "*", m.group(0)) for m in _TEMPLATE.finditer(text)]
    # ... and so does a suffix it appends to another name (stem + "_unannotated.json").
    found += ["*" + m.group(1) for m in _SUFFIX.finditer(text)]
    pats = []
    for pat in found:
        pat = "*" + pat[3:] if pat.startswith("...") else pat
        stem = pat.rsplit(".", 1)[0]
        if len(stem.replace("*", "")) >= MIN_PATTERN_LITERALS:
            pats.append(pat)
    return pats


def unreferenced(entries: set[str], sources: dict[str, str]) -> list[str]:
    words = {w.rstrip(".") for t in sources.values() for w in re.findall(r"[\w.-]+", t)}
    patterns = {p for t in sources.values() for p in _patterns(t)}
    missing = []
    for name in sorted(entries):
        if name in words:
            continue
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        missing.append(name)
    return missing


def test_every_results_file_is_referenced():
    tracked = _tracked()
    entries = _entries(tracked)
    if not entries:
        pytest.skip("no bench/results/ here")
    missing = unreferenced(entries, _sources(tracked))
    assert not missing, ("bench/results/ holds files nothing refers to (reference each from README, docs/ or "
                         f"the bench/ script that writes it, or delete it: history lives in git): {missing}")


def missing_targets(sources: dict[str, str], exists) -> list[str]:
    """``bench/results/NAME`` references (not patterns) whose NAME is not there: a quote of a file that
    was deleted or never committed."""
    out = set()
    for rel, text in sources.items():
        if rel == "tests/test_bench_results_referenced.py":
            continue
        for m in re.finditer(r"bench/results/([\w.=,-]+)(?![\w*])", text):
            name = m.group(1).rstrip(".,")
            if name and not exists(name):
                out.add(f"{rel}: bench/results/{name}")
    return sorted(out)


def test_every_referenced_results_file_exists():
    tracked = _tracked()
    entries = _entries(tracked)
    if not entries:
        pytest.skip("no bench/results/ here")
    missing = missing_targets(_sources(tracked), lambda name: name in entries)
    assert not missing, f"references to bench/results/ files that are not there: {missing}"


def test_reference_rules():
    """Whole names, the docs' family patterns, and no pattern that names everything."""
    entries = {"moe_bench_v4.json", "moe_peer_v4.json", "moe_peer_v4b.json", "rope_fp8_h200_v6b_grid_bench.log",
               "serving_story", "old.json", "story.json"}
    sources = {"docs/a.md": "files bench/results/moe_*_v4.json and `bench/results/rope_fp8_h200_v6b_grid.json`, "
                            "raw output `..._v6b_grid_bench.log`; see bench/results/serving_story/",
               "bench/x.py": "# writes bench/results/*.json and old.json.bak, serving_story_doc.json\n"
                             "(out / f\"bench_watch_trace_{label}.json\").write_text(t)\n"
                             "path.with_name(path.stem + \"_unannotated.json\")\n"
                             "f\"{name}.json\""}
    entries |= {"bench_watch_trace_corrected.json", "vllm_recall_unannotated.json", "bench_watch_v2_trace_x.json"}
    assert unreferenced(entries, sources) == ["bench_watch_v2_trace_x.json", "moe_peer_v4b.json", "old.json",
                                              "story.json"]
    assert missing_targets(sources, lambda name: name in entries) == [
        "docs/a.md: bench/results/rope_fp8_h200_v6b_grid.json"]
