"""Fetch the vLLM 0.33.0 source corpus: ``pip download --no-deps vllm==0.33.0``, keep its .py files.

    python bench/fetch_vllm.py                 # into bench/corpus/vllm-0.33.0/ (git-ignored)
    python bench/fetch_vllm.py --wheel W.whl   # unpack a wheel you already have instead

The corpus is unpacked into a temporary directory and renamed into place, and carries a
``CORPUS.json`` (wheel name, sha256, file count), so an interrupted fetch never leaves a partial tree
that later runs would take for complete.
"""
from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import wheel_files  # noqa: E402
from wheel_files import sha256_file  # noqa: E402

VERSION = "0.33.0"
BENCH = pathlib.Path(__file__).resolve().parent
CORPUS_ROOT = BENCH / "corpus"
CORPUS = CORPUS_ROOT / f"vllm-{VERSION}"
MARKER = "CORPUS.json"


def download_wheel(dest: pathlib.Path) -> pathlib.Path:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           f"vllm=={VERSION}", "-d", str(dest)]  # fmt: skip
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    wheels = sorted(dest.glob(f"vllm-{VERSION}-*.whl"))
    if not wheels:
        raise SystemExit(f"pip download produced no vllm {VERSION} wheel in {dest}")
    return wheels[0]


def unpack(wheel: pathlib.Path, target: pathlib.Path = CORPUS) -> dict:
    """Unpack the wheel's .py files into ``target`` atomically; returns the marker's content."""
    _, marker = wheel_files.unpack(wheel, target, lambda name: name.endswith(".py"),
                                   (MARKER, lambda files: {"wheel": wheel.name, "sha256": sha256_file(wheel),
                                                           "py_files": len(files), "version": VERSION}))
    return marker


def ensure_corpus(wheel: str | None = None) -> pathlib.Path:
    """The corpus directory, fetched first if absent (or incomplete)."""
    marker = CORPUS / MARKER
    if marker.is_file() and wheel is None:
        return CORPUS
    if wheel is not None:
        whl = pathlib.Path(wheel)
    else:
        whl = download_wheel(CORPUS_ROOT / "wheels")
    info = unpack(whl)
    print(f"unpacked {info['py_files']} .py files of {info['wheel']} into {CORPUS}", file=sys.stderr)
    return CORPUS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", help="use this vllm wheel instead of downloading one")
    args = ap.parse_args()
    print(ensure_corpus(args.wheel))


if __name__ == "__main__":
    main()
