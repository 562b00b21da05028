"""jitguard.atomic_write: readers see the old file or the whole new one, never half."""
from __future__ import annotations

import os
import random

import pytest

from jitguard.atomic_write import write_text_atomic


def test_replaces_whole_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "sub" / "report.json"  # parent created
    text = "".join(random.choice("abc\n") for _ in range(random.randrange(1, 5000)))
    assert write_text_atomic(path, text, fsync=random.random() < 0.5) == str(path)
    assert path.read_text() == text
    assert os.listdir(path.parent) == ["report.json"]
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "trace.json"
    path.write_text("old")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_text_atomic(path, "new" * 1000)
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["trace.json"]


def test_a_symlink_stays_a_link_and_its_target_is_written(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "report.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_text_atomic(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new"
    assert sorted(os.listdir(elsewhere)) == ["report.json"]


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "made.json")
    write_text_atomic(link, "x")
    assert link.is_symlink() and (tmp_path / "made.json").read_text() == "x"


def test_an_existing_file_keeps_its_mode(tmp_path):
    path = tmp_path / "private.json"
    path.write_text("old")
    path.chmod(0o600)
    write_text_atomic(path, "new")
    assert path.stat().st_mode & 0o777 == 0o600 and path.read_text() == "new"


def test_a_fifo_is_written_through_not_replaced(tmp_path):
    import stat
    import threading

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    write_text_atomic(fifo, "through")
    reader.join(10)
    assert got == ["through"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert os.listdir(tmp_path) == ["pipe.json"]


def test_a_device_node_is_written_through_not_replaced(tmp_path):
    import stat

    node = tmp_path / "null"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # the same device as /dev/null
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    write_text_atomic(node, "{}" * 1000)
    assert stat.S_ISCHR(os.lstat(node).st_mode)
    assert os.listdir(tmp_path) == ["null"]
    # /dev/null itself, as `-o /dev/null` would: still the character device afterwards
    write_text_atomic("/dev/null", "x")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError):
        write_text_atomic(tmp_path, "x")
