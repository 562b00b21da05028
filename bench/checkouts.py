"""jitguard scan of a codebase's package alone against its whole source tree (tests, benchmarks, examples):
what a repository's own tests and benchmarks change in the findings on the package.

    python bench/checkouts.py               # the source distributions of the codebases that publish one
    python bench/checkouts.py --base REV    # also with the jitguard of REV, side by side

A user scans a repository as it is checked out; bench/codebases.py scans wheels, which hold the package
alone. Tests and benchmarks call the package's wrappers and launch its kernels at sizes they pick (one
literal shape, a sweep over a model dim), which is no evidence of serving (rule test-callers in
docs/provenance.md). The source distributions are downloaded from PyPI (their URL and sha256 from its
simple index, recorded) into bench/corpus/checkouts/ (git-ignored). Per codebase: the findings on the
package when the package is scanned alone, and when the whole tree is, per level, and every finding
on the package that the rest of the tree adds, removes or re-levels, with its evidence. Writes
bench/results/checkouts.json; bench/results/checkouts_judged.json holds the verdicts of a reading of
the changes vLLM's tree made before rule test-callers.
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import pathlib
import re
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections import Counter

BENCH = pathlib.Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from codebases import scan_with, versions  # noqa: E402
from scan_speed import _machine  # noqa: E402

CORPUS = BENCH / "corpus" / "checkouts"
RESULT = BENCH / "results" / "checkouts.json"

# (distribution, version, the package's folder in the source tree)
CHECKOUTS = (
    ("vllm", "0.33.0", "vllm"),
    ("liger-kernel", "0.8.5", "src/liger_kernel"),
    ("megatron-core", "0.19.2", "megatron"),
)


def fetch(dist: str, version: str) -> tuple[pathlib.Path, dict]:
    """The unpacked source distribution of ``dist`` ``version`` and where it came from (PyPI's simple
    index: the link to the .tar.gz, its sha256 in the link's fragment)."""
    page = urllib.request.urlopen(f"https://pypi.org/simple/{dist}/", timeout=60).read().decode()
    filename = f"{re.sub(r'[-_.]+', '_', dist)}-{version}.tar.gz"
    links = [h for h in re.findall(r'href="([^"]+)"', page) if h.split("#")[0].rsplit("/", 1)[-1].lower() == filename]
    if not links:
        raise SystemExit(f"no source distribution {filename} on PyPI")
    url, _, fragment = links[0].partition("#")
    source = {"url": url, "sha256": fragment.removeprefix("sha256="), "filename": filename}
    archive = CORPUS / filename
    tree = CORPUS / filename.removesuffix(".tar.gz")
    if tree.is_dir():
        return tree, source
    CORPUS.mkdir(parents=True, exist_ok=True)
    if not archive.exists():
        print(f"+ download {url}", file=sys.stderr)
        urllib.request.urlretrieve(url, archive)
    if hashlib.sha256(archive.read_bytes()).hexdigest() != source["sha256"]:
        raise SystemExit(f"{archive}: sha256 differs from PyPI's")
    with tarfile.open(archive) as tar:
        tar.extractall(CORPUS, filter="data")
    return tree, source


def compare(tree: pathlib.Path, package: str, repo: pathlib.Path) -> dict:
    """The findings on ``package`` (a folder of ``tree``) with the package scanned alone and with the
    whole tree scanned, by the jitguard at ``repo``."""
    alone = {(package + "/" + k[0], *k[1:]): v for k, v in scan_with(tree / package, repo).items()}
    whole = scan_with(tree, repo)
    inside = {k: v for k, v in whole.items() if k[0].startswith(package + "/")}
    row = ("path", "kernel", "param", "code")

    def levels(found: dict) -> dict:
        return dict(sorted(Counter(level for level, _ in found.values()).items()))

    return {
        "package_alone": levels(alone), "whole_tree_on_package": levels(inside),
        "whole_tree_elsewhere": levels({k: v for k, v in whole.items() if k not in inside}),
        "added": [dict(zip(row, k), level=inside[k][0], message=inside[k][1]) for k in sorted(set(inside) - set(alone))],
        "removed": [dict(zip(row, k), level=alone[k][0], message=alone[k][1]) for k in sorted(set(alone) - set(inside))],
        "level_changed": [dict(zip(row, k), level=inside[k][0], was=alone[k][0])
                          for k in sorted(set(alone) & set(inside)) if alone[k][0] != inside[k][0]],
    }


def _default_changes(got: dict) -> int:
    """Findings on the package at the default levels that the rest of the tree adds, removes or moves."""
    dflt = ("high", "medium")
    return (sum(r["level"] in dflt for r in got["added"]) + sum(r["level"] in dflt for r in got["removed"])
            + sum((r["level"] in dflt) != (r["was"] in dflt) for r in got["level_changed"]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="also with the jitguard of this commit")
    args = ap.parse_args(argv)
    doc = {"benchmark": "checkouts", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "machine": _machine(), "versions": versions(), "codebases": []}
    base_repo = None
    if args.base:
        base_repo = pathlib.Path(tempfile.mkdtemp()) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base_repo), args.base], cwd=ROOT, check=True,
                       capture_output=True)
        doc["base"] = args.base
    try:
        print(f"{'codebase':<24} {'package alone':<28} {'whole tree, on the package':<28} default-level changes")
        for dist, version, package in CHECKOUTS:
            tree, source = fetch(dist, version)
            entry = {"codebase": f"{dist} {version}", "source": source, "package": package,
                     "py_files": sum(1 for _ in tree.rglob("*.py")),
                     "py_files_in_package": sum(1 for _ in (tree / package).rglob("*.py"))}
            entry["this"] = compare(tree, package, ROOT)
            if base_repo is not None:
                entry["base"] = compare(tree, package, base_repo)
            doc["codebases"].append(entry)
            for tag in ("this", "base"):
                if tag in entry:
                    got = entry[tag]
                    print(f"{entry['codebase'] + (' @' + args.base if tag == 'base' else ''):<24} "
                          f"{json.dumps(got['package_alone']):<28} {json.dumps(got['whole_tree_on_package']):<28} "
                          f"{_default_changes(got)}")
    finally:
        if base_repo is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_repo)], cwd=ROOT, capture_output=True)
    RESULT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {RESULT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
