"""The fuzz corpus in CI: about a minute of mutated kernel files, kernels built from parts and
hypothesmith programs (tests/fuzz_corpus.py), scanned and fixed: no crash, no hang, every file
Python refuses reported as an error. bench/fuzz_corpus.py runs the same for longer."""
from __future__ import annotations

import os
import time

import pytest

hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("hypothesmith")

from hypothesis import HealthCheck, settings  # noqa: E402

import fuzz_corpus  # noqa: E402

BUDGET_S = float(os.environ.get("JITGUARD_FUZZ_SECONDS", "50"))


def test_fuzz_corpus_scan_and_fix_never_crash_hang_or_miss(tmp_path):
    seeds = fuzz_corpus.seed_files(corpus_limit=30)
    assert len(seeds) >= 10  # fixtures and kernels/ at least
    seen = {"runs": 0, "batches": 0, "files": 0, "bad": 0, "findings": 0, "fixed": 0}

    # Short hypothesis runs (each a fresh engine with its own seed) until the budget is spent: a
    # run's examples are never cut short, so a failure shrinks and replays like any other.
    @settings(max_examples=4, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @hypothesis.given(fuzz_corpus.batches(seeds))
    def one_batch(batch):
        files, gitignore = batch
        res = fuzz_corpus.check_batch([data for _, data in files], gitignore, tmp_path / "batch", time_limit_s=60)
        seen["batches"] += 1
        seen["files"] += res.files
        seen["bad"] += res.bad
        seen["findings"] += res.findings
        seen["fixed"] += res.fixed_files
        assert res.problems == []

    start = time.monotonic()
    while time.monotonic() - start < BUDGET_S:
        one_batch()
        seen["runs"] += 1
    print(seen)
    # the minute did real work: files Python refuses, findings, and files fix edited
    assert seen["batches"] >= 5 and seen["bad"] > 0 and seen["findings"] > 0 and seen["fixed"] > 0, seen
