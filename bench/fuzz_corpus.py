"""The fuzz corpus for longer: mutants of real kernel files (fixtures/, kernels/, bench/corpus),
kernels built from parts and hypothesmith programs, scanned and fixed in batches by the oracle of
tests/fuzz_corpus.py (no crash, no hang, every file Python refuses reported, fixes that parse, are
idempotent and whose diff git applies). Failing batches are kept in the scratch directory (--failures;
their paths are in the JSON and printed) to rerun `jitguard scan` on.

    python bench/fuzz_corpus.py --seconds 600        # writes bench/results/fuzz_corpus.json
"""
from __future__ import annotations

import argparse
import collections
import json
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import fuzz_corpus  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--corpus-files", type=int, default=400, help="kernel files of bench/corpus used as seeds")
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "fuzz_corpus.json"))
    ap.add_argument("--failures", default=None, help="where failing batches go (default: the scratch directory)")
    ap.add_argument("--workdir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()

    import tempfile

    import hypothesis
    import hypothesmith
    import libcst
    from hypothesis import HealthCheck, settings

    import jitguard

    seeds = fuzz_corpus.seed_files(corpus_limit=args.corpus_files, max_bytes=200_000)
    scratch = Path(args.workdir or tempfile.mkdtemp(prefix="jitguard-fuzz-"))
    work = scratch / "batch"
    failures_dir = Path(args.failures) if args.failures else scratch / "failures"
    totals = collections.Counter()
    kinds = collections.Counter()
    problems = collections.Counter()
    failures: list[dict] = []
    slowest = 0.0

    @settings(max_examples=5, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @hypothesis.given(fuzz_corpus.batches(seeds))
    def one_batch(batch):
        nonlocal slowest
        files, gitignore = batch
        data = [d for _, d in files]
        res = fuzz_corpus.check_batch(data, gitignore, work, time_limit_s=120)
        kinds.update(k for k, _ in files)
        totals.update(batches=1, files=res.files, python_parses=res.parsed_ok, bad_files_read=res.bad,
                      errors=res.errors, findings=res.findings, files_fixed=res.fixed_files,
                      gitignores=gitignore is not None)
        slowest = max(slowest, res.seconds)
        for p in res.problems:
            problems[p.split(":", 1)[0]] += 1
        if res.problems:
            where = fuzz_corpus.save_failure(data, gitignore, res.problems, failures_dir)
            failures.append({"dir": str(where), "problems": res.problems[:5]})
            print(f"failing batch kept in {where}", file=sys.stderr)

    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        one_batch()
        totals["hypothesis_runs"] += 1
    elapsed = time.monotonic() - start

    doc = {
        "what": "jitguard scan + fix over generated and mutated sources (tests/fuzz_corpus.py oracle)",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "processor": platform.processor() or platform.machine()},
        "versions": {"jitguard": getattr(jitguard, "__version__", "?"), "hypothesis": hypothesis.__version__,
                     "hypothesmith": getattr(hypothesmith, "__version__", "?"),
                     "libcst": _version("libcst")},
        "commit": _commit(),
        "seconds": round(elapsed, 1),
        "seeds": {"files": len(seeds), "from_corpus": sum(1 for n, _ in seeds if n.startswith("bench/"))},
        "totals": dict(totals),
        "files_by_kind": dict(kinds),
        "slowest_batch_s": round(slowest, 2),
        "problems": {"crash": problems["crash"], "hang": problems["hang"], "missed": problems["missed"],
                     "false error": problems["false error"], "not idempotent": problems["not idempotent"],
                     "bad diff": problems["bad diff"]},
        "failures": failures[:50],
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"{'batches':<24}{totals['batches']:>8}")
    for k in ("files", "python_parses", "bad_files_read", "errors", "findings", "files_fixed"):
        print(f"{k:<24}{totals[k]:>8}")
    for k, v in doc["problems"].items():
        print(f"{k:<24}{v:>8}")
    print(f"{'seconds':<24}{elapsed:>8.0f}   -> {args.json}")
    return 1 if sum(problems.values()) else 0


def _version(dist: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "?"


def _commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


if __name__ == "__main__":
    sys.exit(main())
