"""Does `jitguard fix --unsafe-fixes` make the same edits with two versions of jitguard?

Strips every do_not_specialize entry from a tree (bench/strip_do_not_specialize.py), runs
`jitguard fix --unsafe-fixes --no-cache --isolated .` (diff mode, nothing written) in the stripped
copy with each version's source, and compares the two diffs file by file.

    python bench/fix_parity.py --before REV [--after REV] [--tree NAME=PATH ...] [--out FILE]
    python bench/fix_parity.py --compare NAME BEFORE.diff AFTER.diff [...] [--out FILE]

REV is a git revision of this repository (exported with `git archive`); --after defaults to the
working tree. --compare compares diffs saved earlier (the same report, without running fix).
Prints a table and writes JSON: per tree, files and lines each diff changes, whether the diffs are
identical, and for each file where they differ the lines only one side adds.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREES = {"vllm-0.33.0": "bench/corpus/vllm-0.33.0", "sglang-0.5.23": "bench/corpus/other/sglang-0.5.23"}


def split_diff(text: str) -> dict[str, list[str]]:
    """A unified diff over many files -> {path: its lines}."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("--- a/"):
            current = line[len("--- a/"):]
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return out


def changed_lines(lines: list[str]) -> tuple[list[str], list[str]]:
    added = [x[1:] for x in lines if x.startswith("+") and not x.startswith("+++ ")]
    removed = [x[1:] for x in lines if x.startswith("-") and not x.startswith("--- ")]
    return added, removed


def compare(before: str, after: str) -> dict:
    a, b = split_diff(before), split_diff(after)
    differ = []
    for path in sorted(set(a) | set(b)):
        if a.get(path) == b.get(path):
            continue
        add_a, _ = changed_lines(a.get(path, []))
        add_b, _ = changed_lines(b.get(path, []))
        differ.append({"path": path, "only_before": [x for x in add_a if x not in add_b],
                       "only_after": [x for x in add_b if x not in add_a]})

    def stats(d: dict[str, list[str]]) -> dict:
        added = removed = hunks = 0
        for lines in d.values():
            plus, minus = changed_lines(lines)
            added, removed = added + len(plus), removed + len(minus)
            hunks += sum(1 for x in lines if x.startswith("@@"))
        return {"files": len(d), "hunks": hunks, "lines_added": added, "lines_removed": removed}

    return {"identical": before == after, "before": stats(a), "after": stats(b),
            "files_that_differ": differ}


def export(rev: str, into: str) -> str:
    """The jitguard source at ``rev`` under ``into`` (the working tree for "worktree")."""
    if rev == "worktree":
        return ROOT
    dst = os.path.join(into, rev.replace("/", "_"))
    os.makedirs(dst, exist_ok=True)
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dst], input=archive, check=True)
    return dst


def run_fix(source: str, tree: str) -> tuple[str, str, float]:
    env = dict(os.environ, PYTHONPATH=source)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "jitguard", "fix", "--unsafe-fixes", "--no-cache", "--isolated", "."],
                          cwd=tree, env=env, capture_output=True, text=True)
    summary = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    return proc.stdout, summary, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before")
    ap.add_argument("--after", default="worktree")
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--compare", nargs=3, action="append", default=[], metavar=("NAME", "BEFORE", "AFTER"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "fix_parity.json"))
    args = ap.parse_args(argv)
    rows = {}
    if args.compare:
        for name, before, after in args.compare:
            with open(before) as fa, open(after) as fb:
                rows[name] = compare(fa.read(), fb.read())
    else:
        if not args.before:
            ap.error("--before REV (or --compare)")
        trees = dict(t.split("=", 1) for t in args.tree) or TREES
        work = tempfile.mkdtemp(prefix="fix_parity_")
        before_src, after_src = export(args.before, work), export(args.after, work)
        for name, path in trees.items():
            stripped = os.path.join(work, name)
            subprocess.run([sys.executable, os.path.join(after_src, "bench", "strip_do_not_specialize.py"),
                            os.path.join(ROOT, path), stripped, "--record", stripped + ".json"],
                           check=True, env=dict(os.environ, PYTHONPATH=after_src))
            d_before, s_before, t_before = run_fix(before_src, stripped)
            d_after, s_after, t_after = run_fix(after_src, stripped)
            rows[name] = compare(d_before, d_after)
            rows[name].update(summary_before=s_before, summary_after=s_after,
                              seconds_before=round(t_before, 1), seconds_after=round(t_after, 1))
    print(f"{'tree':<16}{'identical':>10}{'files':>12}{'lines +/-':>16}{'files differ':>14}")
    for name, r in rows.items():
        b, a = r["before"], r["after"]
        print(f"{name:<16}{'yes' if r['identical'] else 'no':>10}{b['files']:>6}/{a['files']:<5}"
              f"{b['lines_added']:>7}/{a['lines_added']:<8}{len(r['files_that_differ']):>10}")
    doc = {
        "benchmark": "fix_parity",
        "command": "python bench/fix_parity.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count()},
        "trees": rows,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
