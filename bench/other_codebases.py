"""jitguard scan on Triton codebases it was not developed on: what it reports, and what a change adds.

    python bench/other_codebases.py                       # sglang 0.5.23 and liger-kernel 0.8.5
    python bench/other_codebases.py --base 5fc14fe        # also: findings added / removed since REV

The analyses are tuned against vLLM (bench/vllm_recall.py); this is the check that they hold on code
nobody here read while writing them. Each package's wheel is downloaded (``pip download --no-deps``)
and unpacked under bench/corpus/other/ (git-ignored), then scanned with ``jitguard scan --format
json`` (no cache). With ``--base REV`` the same trees are scanned by the jitguard of commit REV (a
temporary git worktree) and the (file, kernel, parameter, code) findings that differ are listed with
their messages: the ones to read by hand. Writes bench/results/other_codebases.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PACKAGES = ("sglang==0.5.23", "liger-kernel==0.8.5")


def fetch(spec: str, work: Path) -> Path:
    """The unpacked wheel of ``spec`` under ``work`` (downloaded once)."""
    name = spec.replace("==", "-")
    tree = work / name
    if tree.is_dir():
        return tree
    wheels = work / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "-d", str(wheels), spec], check=True, capture_output=True)
    dist = spec.split("==")[0].replace("-", "_").lower()
    version = spec.split("==")[1] if "==" in spec else ""
    wheel = next(w for w in sorted(wheels.glob("*.whl"))
                 if w.name.lower().startswith(f"{dist}-{version}"))
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tree)
    return tree


def scan(tree: Path, repo: Path) -> dict:
    """``jitguard scan --format json`` of ``tree`` with the jitguard source at ``repo``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "scan.json"
        code = ("import sys; from jitguard.cli import main; "
                f"sys.argv = ['jitguard', 'scan', '--no-cache', '--no-respect-gitignore', '--format', "
                f"'json', '-o', {str(out)!r}, '.']; main()")
        # run from the tree (its own paths, no config of this repo), with the jitguard of ``repo``
        subprocess.run([sys.executable, "-c", code], cwd=tree, env={"PYTHONPATH": str(repo), "PATH": ""},
                       capture_output=True)
        return json.loads(out.read_text())


def keyed(report: dict) -> dict:
    return {(f["path"], f["kernel"], f["param"], f["code"]): f["message"] for f in report["findings"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packages", default=",".join(DEFAULT_PACKAGES))
    ap.add_argument("--base", help="also scan with the jitguard of this commit and list the differences")
    ap.add_argument("--work", default=str(ROOT / "bench" / "corpus" / "other"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "other_codebases.json"))
    args = ap.parse_args()
    work = Path(args.work)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    result = {"benchmark": "other_codebases", "date": datetime.datetime.now(datetime.timezone.utc)
              .isoformat(timespec="seconds"), "jitguard_commit": commit, "base": args.base,
              "python": platform.python_version(), "packages": []}
    base_repo = None
    if args.base:
        base_repo = Path(tempfile.mkdtemp()) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base_repo), args.base], cwd=ROOT,
                       check=True, capture_output=True)
    try:
        for spec in [p for p in args.packages.split(",") if p]:
            tree = fetch(spec, work)
            now = scan(tree, ROOT)
            s = now["summary"]
            entry = {"package": spec, "files_scanned": s["files_scanned"], "files_analyzed": s["files_analyzed"],
                     "kernels": s["kernels"], "launches": s["launches"], "findings": s["findings"],
                     "by_code": s["by_code"], "file_errors": s["errors"], "internal_errors": s["internal_errors"],
                     "duration_s": s["duration_s"]}
            print(f"{spec}: {s['files_scanned']} files, {s['kernels']} kernels, {s['launches']} launches: "
                  f"{s['findings']} findings {s['by_code']}, {s['errors']} file errors, "
                  f"{s['internal_errors']} internal errors, {s['duration_s']:.1f} s")
            if base_repo is not None:
                new, old = keyed(now), keyed(scan(tree, base_repo))
                entry["added"] = [dict(zip(("path", "kernel", "param", "code"), k), message=new[k])
                                  for k in sorted(set(new) - set(old))]
                entry["removed"] = [dict(zip(("path", "kernel", "param", "code"), k), message=old[k])
                                    for k in sorted(set(old) - set(new))]
                for tag, rows in (("+", entry["added"]), ("-", entry["removed"])):
                    for r in rows:
                        print(f"  {tag} {r['code']} {r['kernel'].rsplit('.', 1)[-1]}.{r['param']}  ({r['path']})")
            result["packages"].append(entry)
    finally:
        if base_repo is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_repo)], cwd=ROOT, capture_output=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
