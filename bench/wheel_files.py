"""Files taken out of a downloaded wheel, unpacked atomically: the one unzip of the bench scripts.

``unpack(wheel, target, wanted, marker)`` writes the members ``wanted`` accepts into a temporary
folder beside ``target``, adds the marker file its callers use to recognise a complete tree, and
renames the folder into place, so that an interrupted run never leaves a partial tree that a later
run takes for complete. Members with an absolute path or a ``..`` part are never written.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import tempfile
import zipfile
from typing import Callable


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def safe_member(name: str) -> bool:
    """A member name that stays inside the folder it is unpacked into."""
    return not name.startswith("/") and ".." not in name.split("/")


def unpack(wheel: pathlib.Path, target: pathlib.Path, wanted: Callable[[str], bool],
           marker: tuple[str, Callable[[list[dict]], dict]] | None = None) -> tuple[list[dict], dict | None]:
    """Unpack the members of ``wheel`` that ``wanted`` accepts into ``target`` (replacing it).

    Returns the files written (``path_in_wheel``, ``sha256``) and, with ``marker = (file name,
    make)``, the content ``make(files)`` gave the marker file written beside them."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        files = []
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                if info.is_dir() or not safe_member(info.filename) or not wanted(info.filename):
                    continue
                data = zf.read(info)
                out = tmp / info.filename
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(data)
                files.append({"path_in_wheel": info.filename, "sha256": sha256_bytes(data)})
        files.sort(key=lambda f: f["path_in_wheel"])
        content = None
        if marker is not None:
            name, make = marker
            content = make(files)
            (tmp / name).write_text(json.dumps(content, indent=1) + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
        return files, content
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
