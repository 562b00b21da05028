"""How soon ``jitguard fix --write`` writes its first file on the vLLM 0.33.0 tree, and what a Ctrl-C
then leaves: on a copy of the tree, with the scan cache warm (a ``jitguard scan`` just ran).

    python bench/fix_first_write.py [--wheel W.whl] [--after S] [--out bench/results/fix_first_write.json]

Measured: seconds from starting ``jitguard fix --write .`` to the first file whose bytes changed
(polled every 0.2 s); then, ``--after`` seconds later, SIGINT as a terminal's Ctrl-C sends it; the
exit status (130 expected), the files changed on disk, the files fix named as written (must be the
same set), and whether each file is either untouched or parses (never half-written).
"""
from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import os
import pathlib
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BENCH = pathlib.Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from fetch_vllm import ensure_corpus  # noqa: E402


def _mtimes(tree: str) -> dict[str, int]:
    return {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
            for d, _, fs in os.walk(tree) for f in fs if f.endswith(".py")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel", default=None)
    ap.add_argument("--after", type=float, default=3.0, help="seconds after the first write to send SIGINT")
    ap.add_argument("--out", default=str(BENCH / "results" / "fix_first_write.json"))
    args = ap.parse_args()
    corpus = ensure_corpus(args.wheel)
    jitguard = [sys.executable, "-m", "jitguard"]
    with tempfile.TemporaryDirectory(prefix="jitguard-fix-first-") as base:
        work = os.path.join(base, "tree")
        shutil.copytree(corpus, work)
        env = dict(os.environ, JITGUARD_CACHE_DIR=os.path.join(base, "cache"))
        env.pop("CI", None)
        t = time.perf_counter()
        subprocess.run([*jitguard, "scan", "--format", "json", "-o", os.path.join(base, "scan.json"), "."],
                       cwd=work, env=env, check=False, capture_output=True)
        scan_s = time.perf_counter() - t
        before = _mtimes(work)
        load = list(os.getloadavg())
        t0 = time.perf_counter()
        proc = subprocess.Popen([*jitguard, "fix", "--write", "."], cwd=work, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        first = None
        while proc.poll() is None:
            if any(os.stat(f).st_mtime_ns != m for f, m in before.items()):
                first = time.perf_counter() - t0
                break
            time.sleep(0.2)
        if proc.poll() is None:
            time.sleep(args.after)
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=600)
        changed = sorted(os.path.relpath(f, work) for f, m in before.items() if os.stat(f).st_mtime_ns != m)
        named = sorted(x.split("jitguard fix: wrote ", 1)[1] for x in err.splitlines()
                       if x.startswith("jitguard fix: wrote "))
        unparsable = []
        for rel in changed:
            try:
                ast.parse(pathlib.Path(work, rel).read_bytes())
            except SyntaxError:
                unparsable.append(rel)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    result = {
        "benchmark": "fix_first_write",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus_usable": len(os.sched_getaffinity(0)),
                    "loadavg_at_fix_start": load},
        "versions": {"python": platform.python_version(), "jitguard_commit": commit},
        "corpus": str(corpus.name),
        "command": "jitguard fix --write . (on a copy, after jitguard scan . with the same cache)",
        "scan_before_s": round(scan_s, 1),
        "first_write_s": None if first is None else round(first, 1),
        "sigint_after_s": args.after,
        "exit_status": proc.returncode,
        "files_changed": len(changed),
        "files_named_as_written": len(named),
        "named_equals_changed": named == changed,
        "changed_files_that_do_not_parse": unparsable,
        "last_stderr_line": (err.splitlines() or [""])[-1],
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)
        fh.write("\n")
    print(f"{'first write':>28}  {result['first_write_s']} s after start (scan before it: {result['scan_before_s']} s, "
          f"load {load[0]:.1f})")
    print(f"{'after Ctrl-C':>28}  exit {proc.returncode}; {len(changed)} files changed, {len(named)} named "
          f"({'the same' if named == changed else 'DIFFERENT'}); {len(unparsable)} that do not parse")
    return 0


if __name__ == "__main__":
    sys.exit(main())
