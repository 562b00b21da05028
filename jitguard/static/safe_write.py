"""Read a source file once, and write its edited version back only if nothing else touched it.

The fixer edits files other people are working on, so a write must never lose data:

* the new bytes replace the old in one ``os.replace`` of a temporary file created in the same
  directory (never a half-written file, even on a crash or a full disk);
* the file mode (and the owner where we may set it) is kept; a symlink is followed and its target
  rewritten, so the link stays a link;
* line endings, encoding and BOM are whatever the caller's bytes say: ``SourceSnapshot`` keeps the raw
  bytes and LibCST round-trips them, this module never decodes and re-encodes on its own;
* a file whose bytes changed on disk since ``read_snapshot`` is left alone (``WriteRefused``);
* a read-only file is left alone (the user said so by its mode), and so is a file with several hard
  links (replacing it would leave the other names on the old content);
* bytes that do not parse as Python are never written (the guard against a fixer bug).
"""
from __future__ import annotations

import ast
import hashlib
import os
import re
import stat
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SourceSnapshot", "WriteRefused", "clear_stale_temp", "read_snapshot", "syntax_error",
           "write_atomic"]

# ``.NAME.XXXXXXXX.jitguard-tmp`` beside NAME (tempfile.mkstemp's 8 random characters): what a write
# killed between creating the temporary file and the rename leaves behind.
TEMP_SUFFIX = ".jitguard-tmp"
_TEMP_NAME = re.compile(r"^\.(?P<target>.+)\.[a-z0-9_]{8}" + re.escape(TEMP_SUFFIX) + "$")
# A write holds its temporary file for milliseconds; one older than this is left by a dead process.
STALE_AFTER_S = 60.0


class WriteRefused(Exception):
    """The file was left untouched; ``reason`` says why in words for the user."""

    def __init__(self, path: str | os.PathLike, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


@dataclass(frozen=True)
class SourceSnapshot:
    """The bytes of a file as read, and enough of its stat to notice a later change."""

    path: Path  # as given by the caller (what messages show)
    real_path: Path  # symlinks resolved: what gets replaced
    data: bytes
    mode: int
    uid: int
    gid: int
    mtime_ns: int
    size: int
    inode: int
    nlink: int = 1

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def read_snapshot(path: str | os.PathLike) -> SourceSnapshot:
    """Read ``path`` in binary; raises ``OSError`` when it can't be read."""
    path = Path(path)
    real = Path(os.path.realpath(path))
    with open(real, "rb") as f:
        st = os.fstat(f.fileno())
        data = f.read()
    return SourceSnapshot(
        path=path,
        real_path=real,
        data=data,
        mode=st.st_mode,
        uid=st.st_uid,
        gid=st.st_gid,
        mtime_ns=st.st_mtime_ns,
        size=st.st_size,
        inode=st.st_ino,
        nlink=st.st_nlink,
    )


def syntax_error(data: bytes, filename: str = "<source>") -> str | None:
    """``None`` if ``data`` parses as Python, else a one-line reason (with the line number)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are not our business
            ast.parse(data, filename=filename)
    except SyntaxError as e:
        where = f"line {e.lineno}: " if e.lineno else ""
        return f"syntax error: {where}{e.msg}"
    except (ValueError, UnicodeDecodeError) as e:  # null bytes, undecodable source
        return f"cannot parse: {e}"
    return None


def _unchanged(snapshot: SourceSnapshot) -> str | None:
    """``None`` if the file on disk still holds the snapshot's bytes, else why not."""
    try:
        with open(snapshot.real_path, "rb") as f:
            st = os.fstat(f.fileno())
            data = f.read()
    except FileNotFoundError:
        return "file was deleted since it was read"
    except OSError as e:
        return f"cannot re-read the file: {e.strerror or e}"
    if st.st_ino != snapshot.inode or data != snapshot.data:
        return "file changed on disk since it was read; left untouched (run fix again)"
    return None


def write_atomic(snapshot: SourceSnapshot, new_data: bytes) -> None:
    """Replace the file read as ``snapshot`` by ``new_data``, atomically; raises ``WriteRefused``.

    Nothing is written if the file is read-only, changed since it was read, or if ``new_data`` does
    not parse. The temporary file lives next to the target (same filesystem, so the rename is
    atomic) and is removed on every failure path.
    """
    path = snapshot.path
    if not (snapshot.mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)) or not os.access(
        snapshot.real_path, os.W_OK
    ):
        raise WriteRefused(path, "file is read-only; left untouched")
    if snapshot.nlink > 1:  # a rename would give this path a new inode and split the links
        raise WriteRefused(
            path, f"file has {snapshot.nlink} hard links; replacing it would split them; left untouched"
        )
    bad = syntax_error(new_data, str(path))
    if bad is not None:  # a fixer bug must never reach the disk
        raise WriteRefused(path, f"the edited file would not parse ({bad}); left untouched")
    changed = _unchanged(snapshot)
    if changed:
        raise WriteRefused(path, changed)

    directory = snapshot.real_path.parent
    try:
        import tempfile  # only a write needs it (a scan imports this module for TEMP_SUFFIX)

        fd, tmp = tempfile.mkstemp(
            dir=directory, prefix=f".{snapshot.real_path.name}.", suffix=".jitguard-tmp"
        )
    except OSError as e:
        raise WriteRefused(path, f"cannot create a temporary file in {directory}: {e.strerror or e}")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(new_data)
            f.flush()
            os.fchmod(f.fileno(), stat.S_IMODE(snapshot.mode))
            if hasattr(os, "fchown"):
                try:
                    os.fchown(f.fileno(), snapshot.uid, snapshot.gid)
                except OSError:
                    pass  # not ours to give away; the mode is what matters
            os.fsync(f.fileno())
        # Last look right before the rename: the window left is the rename itself.
        changed = _unchanged(snapshot)
        if changed:
            raise WriteRefused(path, changed)
        os.replace(tmp, snapshot.real_path)
    except WriteRefused:
        _unlink_quietly(tmp)
        raise
    except OSError as e:
        _unlink_quietly(tmp)
        raise WriteRefused(path, f"write failed: {e.strerror or e}; left untouched")
    except BaseException:
        _unlink_quietly(tmp)
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def clear_stale_temp(path: str) -> str | None:
    """Remove ``path`` if it is a temporary file a killed ``write_atomic`` left behind: a regular
    file (not a link), named for a file beside it, ours, with one link, untouched for
    ``STALE_AFTER_S``. Returns ``None`` when removed, else why it was left (for the report)."""
    directory, name = os.path.split(path)
    m = _TEMP_NAME.match(name)
    if m is None:
        return "not a jitguard temporary file"
    target = m.group("target")
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"cannot stat it: {e.strerror or e}"
    age = time.time() - st.st_mtime
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        why = "it is not a plain file with one link"
    elif hasattr(os, "getuid") and st.st_uid != os.getuid():
        why = "it belongs to another user"
    elif age < STALE_AFTER_S:
        why = f"written {age:.0f} s ago: a jitguard fix may still be writing {target}"
    else:
        try:
            os.unlink(path)
            return None
        except OSError as e:
            why = f"cannot remove it: {e.strerror or e}"
    return (f"temporary file of an interrupted jitguard fix of {target} (the file itself is "
            f"either as it was or fully fixed); not removed: {why}")
