"""The write layer of jitguard fix: atomic, mode kept, bytes kept, refusals."""
from __future__ import annotations

import os
import random
import stat

import pytest

from jitguard.static.safe_write import WriteRefused, read_snapshot, syntax_error, write_atomic


def _src(rng: random.Random, newline: str = "\n") -> bytes:
    n = rng.randrange(1, 10**6)
    return f"import triton\n\n# {n}\n@triton.jit\ndef k(x, n):\n    return {n}\n".replace("\n", newline).encode()


def _no_temp_files(directory) -> bool:
    return not [p for p in os.listdir(directory) if p.endswith(".jitguard-tmp")]


def test_write_replaces_bytes_and_keeps_mode(tmp_path):
    rng = random.Random()
    p = tmp_path / "k.py"
    p.write_bytes(_src(rng, "\r\n"))
    mode = rng.choice([0o600, 0o640, 0o755, 0o664])
    os.chmod(p, mode)
    snap = read_snapshot(p)
    new = snap.data.replace(b"@triton.jit", b'@triton.jit(do_not_specialize=["n"])')
    write_atomic(snap, new)
    assert p.read_bytes() == new
    assert b"\r\n" in p.read_bytes() and b"\n" not in p.read_bytes().replace(b"\r\n", b"")
    assert stat.S_IMODE(os.stat(p).st_mode) == mode
    assert _no_temp_files(tmp_path)


def test_read_only_file_is_refused(tmp_path):
    p = tmp_path / "k.py"
    data = _src(random.Random())
    p.write_bytes(data)
    os.chmod(p, 0o444)
    snap = read_snapshot(p)
    with pytest.raises(WriteRefused, match="read-only"):
        write_atomic(snap, data + b"# x\n")
    assert p.read_bytes() == data
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o444
    assert _no_temp_files(tmp_path)


def test_file_changed_since_read_is_refused(tmp_path):
    p = tmp_path / "k.py"
    rng = random.Random()
    p.write_bytes(_src(rng))
    snap = read_snapshot(p)
    theirs = _src(rng) + b"# someone else's edit\n"
    p.write_bytes(theirs)
    with pytest.raises(WriteRefused, match="changed on disk"):
        write_atomic(snap, snap.data + b"# ours\n")
    assert p.read_bytes() == theirs
    assert _no_temp_files(tmp_path)


def test_file_replaced_by_same_bytes_new_inode_is_refused(tmp_path):
    p = tmp_path / "k.py"
    data = _src(random.Random())
    p.write_bytes(data)
    snap = read_snapshot(p)
    os.unlink(p)
    q = tmp_path / "other.py"
    q.write_bytes(b"x = 1\n" * 100)  # take the old inode number out of reuse
    p.write_bytes(data)
    if os.stat(p).st_ino == snap.inode:
        pytest.skip("filesystem reused the inode")
    with pytest.raises(WriteRefused, match="changed on disk"):
        write_atomic(snap, data + b"# ours\n")


def test_deleted_file_is_refused(tmp_path):
    p = tmp_path / "k.py"
    p.write_bytes(_src(random.Random()))
    snap = read_snapshot(p)
    p.unlink()
    with pytest.raises(WriteRefused, match="deleted"):
        write_atomic(snap, snap.data + b"# ours\n")
    assert not p.exists()


def test_unparsable_new_bytes_are_never_written(tmp_path):
    p = tmp_path / "k.py"
    data = _src(random.Random())
    p.write_bytes(data)
    snap = read_snapshot(p)
    with pytest.raises(WriteRefused, match="would not parse"):
        write_atomic(snap, data.replace(b"def k(x, n):", b"def k(x, n:"))
    assert p.read_bytes() == data


def test_symlink_stays_a_link(tmp_path):
    real = tmp_path / "real.py"
    real.write_bytes(_src(random.Random()))
    link = tmp_path / "link.py"
    link.symlink_to(real)
    snap = read_snapshot(link)
    write_atomic(snap, snap.data + b"# ours\n")
    assert link.is_symlink()
    assert real.read_bytes().endswith(b"# ours\n")


def test_syntax_error_reports_line():
    msg = syntax_error(b"x = 1\ny = (\n")
    assert msg is not None and "line 2" in msg
    assert syntax_error(b"x = 1\n") is None
    assert syntax_error(b"x = '\xff'\n") is not None  # not UTF-8 without a cookie


def test_hard_linked_file_is_refused(tmp_path):
    p = tmp_path / "k.py"
    data = _src(random.Random())
    p.write_bytes(data)
    os.link(p, tmp_path / "other_name.py")
    snap = read_snapshot(p)
    with pytest.raises(WriteRefused, match="2 hard links"):
        write_atomic(snap, data + b"# ours\n")
    assert p.read_bytes() == data == (tmp_path / "other_name.py").read_bytes()
