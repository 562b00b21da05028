"""Write a text file so that readers never see half of it: a temporary file in the same directory,
then one ``os.replace`` (atomic on POSIX). Used for scan reports, merged reports, traces and cache
entries. Source files edited by ``jitguard fix`` go through ``jitguard/static/safe_write.py``,
which also keeps mode, encoding and line endings and refuses files changed on disk."""
from __future__ import annotations

import os
import tempfile


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | os.PathLike, text: str, *, fsync: bool = False) -> str:
    """Write ``text`` (UTF-8; undecodable path bytes kept through surrogateescape) to ``path``.

    Missing parent directories are created; the file gets the usual 0666 & ~umask permissions;
    ``fsync=True`` also flushes it to disk before the rename (traces: a crash keeps the old file).
    On any error the temporary file is removed and the old ``path`` is untouched. Returns the path.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".jitguard-", suffix=".part", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(text)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
