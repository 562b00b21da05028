"""Write a text file so that readers never see half of it: a temporary file in the same directory,
then one ``os.replace`` (atomic on POSIX). Used for scan reports, merged reports, traces and
baselines; the scan cache's sealed files go through the same core (``replace_from_temp``), without
the link and mode steps (static/cache.py).
Source files edited by ``jitguard fix`` go through ``jitguard/static/safe_write.py``,
which also keeps mode, encoding and line endings and refuses files changed on disk.

Only a regular file is ever replaced. A symlink stays a link: its target is written atomically. A
target that is not a regular file (``-o /dev/null``, ``/dev/stdout``, a FIFO) is written through, as
``open(path, "w")`` would, never renamed over: run as root, a rename would replace the device node.
"""
from __future__ import annotations

import os
import stat
from typing import Callable


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_through(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(text)


def write_text_atomic(path: str | os.PathLike, text: str, *, fsync: bool = False) -> str:
    """Write ``text`` (UTF-8; undecodable path bytes kept through surrogateescape) to ``path``.

    Missing parent directories are created. A new file gets the usual 0666 & ~umask permissions; an
    existing one keeps its mode, and its owner where the process may set it. ``fsync=True`` also
    flushes the file to disk before the rename (traces: a crash keeps the old file). On any error the
    temporary file is removed and the old ``path`` is untouched. Returns ``path`` as given.
    """
    given = os.fspath(path)
    target = os.path.realpath(given)  # a symlink (or a chain of them) is written at its target
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "Is a directory", given)
        _write_through(target, text)  # a device node, FIFO or socket: never replaced
        return given
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    import tempfile  # at the first write: a warm scan to stdout writes nothing

    fd, tmp = tempfile.mkstemp(prefix=".jitguard-", suffix=".part", dir=directory)

    def keep_mode(tmp: str) -> None:
        if st is None:
            os.chmod(tmp, 0o666 & ~_umask())
        else:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            if (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
                try:
                    os.chown(tmp, st.st_uid, st.st_gid)
                except PermissionError:
                    pass  # not ours to give away: the file becomes the writer's, as with any editor
    replace_from_temp(fd, tmp, target, text, fsync=fsync, before=keep_mode)
    return given


def replace_from_temp(fd: int, tmp: str, target: str, data: str | bytes, *, fsync: bool = False,
                      before: Callable[[str], None] | None = None) -> None:
    """The core of every atomic write: ``data`` (text as UTF-8 with surrogateescape, or bytes) into
    the temporary file ``tmp`` open as ``fd`` beside ``target``, ``before(tmp)`` (its mode and owner),
    then one ``os.replace``; on any error ``tmp`` is removed and ``target`` is untouched."""
    try:
        if isinstance(data, bytes):
            fh = os.fdopen(fd, "wb")
        else:
            fh = os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape")
        with fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        if before is not None:
            before(tmp)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
