"""What reading guards before launches costs the per-file extraction: the extractor on every .py
file of vLLM 0.33.0 that mentions triton, with the guard context on and off (off: every launch
classified as if no guard dominated it), interleaved, best CPU time of each kept.

    python bench/guards_overhead.py [--repeat 3]   # -> bench/results/guards_overhead.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import platform
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from jitguard import __version__  # noqa: E402
from jitguard.static.extract import extract_file  # noqa: E402
from jitguard.static.provenance.guards import GuardedValues  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tree", default=str(BENCH / "corpus" / "vllm-0.33.0"))
    args = ap.parse_args()
    files = sorted(p for p in pathlib.Path(args.tree).rglob("*.py") if b"triton" in p.read_bytes())
    sources = [(str(p), p.read_text(encoding="utf-8", errors="replace")) for p in files]
    at = GuardedValues.at

    def no_guards(self, fn, node):
        return at(self, None, None)

    def run() -> float:
        t = time.process_time()
        for path, src in sources:
            try:
                extract_file(path, src, "m")
            except SyntaxError:
                pass
        return time.process_time() - t

    best = {"guards on": float("inf"), "guards off": float("inf")}
    for _ in range(args.repeat):
        for mode in best:
            GuardedValues.at = at if mode == "guards on" else no_guards
            best[mode] = min(best[mode], run())
    GuardedValues.at = at
    ratio = best["guards on"] / best["guards off"]
    print(f"{len(sources)} files  " + "  ".join(f"{k} {v:.2f}s" for k, v in best.items()) + f"  ratio {ratio:.3f}")
    out = {
        "benchmark": "guards_overhead", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine()},
        "versions": {"jitguard": __version__}, "tree": pathlib.Path(args.tree).name, "files": len(sources),
        "repeat": args.repeat, "cpu_seconds": {k: round(v, 3) for k, v in best.items()}, "ratio": round(ratio, 4),
    }
    (BENCH / "results" / "guards_overhead.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
