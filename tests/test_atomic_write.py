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
