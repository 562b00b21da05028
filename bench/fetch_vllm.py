"""Fetch the vLLM 0.33.0 source corpus: ``pip download --no-deps vllm==0.33.0``, keep its .py files.

    python bench/fetch_vllm.py                 # into bench/corpus/vllm-0.33.0/ (git-ignored)
    python bench/fetch_vllm.py --wheel W.whl   # unpack a wheel you already have instead

The corpus is unpacked into a temporary directory and renamed into place, and carries a
``CORPUS.json`` (wheel name, sha256, file count), so an interrupted fetch never leaves a partial tree
that later runs would take for complete.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

VERSION = "0.33.0"
BENCH = pathlib.Path(__file__).resolve().parent
CORPUS_ROOT = BENCH / "corpus"
CORPUS = CORPUS_ROOT / f"vllm-{VERSION}"
MARKER = "CORPUS.json"


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=".vllm-", dir=target.parent))
    try:
        n = 0
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                name = info.filename
                if not name.endswith(".py") or name.startswith("/") or ".." in name.split("/"):
                    continue
                out = tmp / name
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(zf.read(info))
                n += 1
        marker = {"wheel": wheel.name, "sha256": _sha256(wheel), "py_files": n,
                  "version": VERSION}  # fmt: skip
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
        return marker
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


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
