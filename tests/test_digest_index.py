"""The stat-keyed digest index: a warm scan opens no unchanged file, and no change to a file is
missed because its stat looked the same. Each way of changing a file behind the index's back (an
edit in place with its mtime put back, a rename over it, a touch, an edit within the same second on
a filesystem of one-second timestamps, a forged index) has a scan here that would report the old
file's findings if the index trusted the stat wrongly."""
from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from jitguard.config import Config
from jitguard.static import cache as cache_mod
from jitguard.static.runner import scan_paths
from scan_helpers import simple_module

RNG = random.Random(os.urandom(8))
SIGNATURE = cache_mod.file_signature
HOUR_NS = 3600 * 10**9


def _name() -> str:
    return f"n_{RNG.randrange(10**5, 10**6)}"  # always 8 characters: edits keep the file's size


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """Four modules with one JG001 each (on a random parameter name)."""
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "src"
    src.mkdir()
    params = {}
    for i in range(4):
        p = _name()
        path = src / f"m{i}.py"
        path.write_text(simple_module(p, f"k{i}"))
        params[path] = p
    return tmp_path, params


@pytest.fixture
def an_hour_later(monkeypatch):
    """Scans that start an hour after the files were written: every change is settled, so only the
    signature decides what the index vouches for."""
    monkeypatch.setattr(cache_mod, "_now_ns", lambda: time.time_ns() + HOUR_NS)


def _scan(tmp_path):
    return scan_paths([str(tmp_path / "src")], Config(root=str(tmp_path)), jobs=1,
                      cache_dir=str(tmp_path / "cache"))


def _params(res) -> set[str]:
    return {f.param for f in res.findings}


def _rewrite_same_size(path: Path, old: str) -> str:
    """Put another parameter name of the same length in ``path``; return it."""
    new = _name()
    text = path.read_text()
    path.write_text(text.replace(old, new))
    assert len(new) == len(old)
    return new


def test_a_warm_scan_reads_no_unchanged_file(tree, an_hour_later):
    tmp_path, params = tree
    cold = _scan(tmp_path)
    assert cold.files_vouched == 0 and _params(cold) == set(params.values())
    warm = _scan(tmp_path)
    assert warm.files_vouched == 4
    assert warm.findings == cold.findings


def test_an_edit_in_place_with_its_mtime_put_back_is_read(tree, an_hour_later):
    # cp -p, rsync -t, tar and `touch -r` set the mtime back; nothing sets the ctime
    tmp_path, params = tree
    _scan(tmp_path)
    path, old = next(iter(params.items()))
    before = os.stat(path)
    new = _rewrite_same_size(path, old)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size,
                                                                before.st_mtime_ns)
    res = _scan(tmp_path)
    assert res.files_vouched == 3
    assert new in _params(res) and old not in _params(res)


def test_a_file_replaced_by_rename_is_read(tree, an_hour_later, monkeypatch):
    tmp_path, params = tree
    # a filesystem whose timestamps say nothing (all equal): the inode alone tells the files apart
    monkeypatch.setattr(cache_mod, "file_signature", lambda st: SIGNATURE(st)[:3] + (0, 0))
    _scan(tmp_path)
    path, old = next(iter(params.items()))
    other = path.with_name(".replacement")
    new = _name()
    other.write_text(path.read_text().replace(old, new))
    assert other.stat().st_size == path.stat().st_size
    os.replace(other, path)
    res = _scan(tmp_path)
    assert res.files_vouched == 3
    assert new in _params(res) and old not in _params(res)


def test_a_touched_file_is_read_once_then_vouched_for_again(tree, an_hour_later):
    tmp_path, params = tree
    cold = _scan(tmp_path)
    path = next(iter(params))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 5 * 10**9))
    touched = _scan(tmp_path)
    assert touched.files_vouched == 3 and touched.findings == cold.findings
    assert _scan(tmp_path).files_vouched == 4  # the index holds the new stat


def _seconds(st) -> tuple:
    """A filesystem with one-second timestamps (FAT, HFS+, some network filesystems)."""
    sig = SIGNATURE(st)
    return sig[:3] + (sig[3] // 10**9 * 10**9, sig[4] // 10**9 * 10**9)


def test_an_edit_within_the_same_second_is_read(tree, monkeypatch):
    # on a filesystem of one-second timestamps a file edited in place in the second it was read
    # keeps its stat: only the index's racy rule (its change is not older than the margin) saves it
    tmp_path, params = tree
    monkeypatch.setattr(cache_mod, "file_signature", _seconds)
    path, old = next(iter(params.items()))
    for _ in range(5):  # until the write, the scan and the edit fall in one second
        time.sleep(1.02 - time.time() % 1)
        path.write_text(simple_module(old, "k0"))
        before = _seconds(os.stat(path))
        _scan(tmp_path)
        new = _rewrite_same_size(path, old)
        if _seconds(os.stat(path)) == before:
            break
        old = new
    else:
        pytest.fail("could not edit a file within one second of writing it")
    res = _scan(tmp_path)
    assert res.files_vouched < 4
    assert new in _params(res) and old not in _params(res)


def test_an_index_entry_vouches_only_for_a_change_older_than_the_margin(tmp_path):
    # one signature, recorded by a scan that began reading 1 s after the file's change (racy: the
    # file may have changed again after the read, within its timestamp's granularity) and by one
    # that began 3 s after it (settled); a later scan sees the same signature
    secret = os.urandom(32)
    change = 1_700_000_000 * 10**9 + RNG.randrange(10**9)
    st = SimpleNamespace(st_dev=1, st_ino=RNG.randrange(10**6), st_size=99, st_mtime_ns=change,
                         st_ctime_ns=change)
    for began, vouches in ((change + 10**9, False), (change + 3 * 10**9, True)):
        path = str(tmp_path / f"index-{began}.json")
        first = cache_mod.DigestIndex(path, secret, "k", began)
        first.record("/src/a.py", st, "d1")
        assert first.save()
        later = cache_mod.DigestIndex(path, secret, "k", began + HOUR_NS)
        assert (later.digest("/src/a.py", st) == "d1") is vouches
        for field in ("st_dev", "st_ino", "st_size", "st_mtime_ns", "st_ctime_ns"):
            changed = SimpleNamespace(**{**vars(st), field: getattr(st, field) + 1})
            assert later.digest("/src/a.py", changed) is None


@pytest.mark.parametrize("forgery", ["altered body, old MAC", "MAC under another secret", "plain JSON"])
def test_a_forged_index_does_not_hide_a_finding(tree, an_hour_later, forgery):
    tmp_path, params = tree
    _scan(tmp_path)
    [index_file] = (tmp_path / "cache" / cache_mod.CACHE_LAYOUT / "index").glob("*.json")
    mac, _, body = index_file.read_bytes().partition(b"\n")
    path, old = next(iter(params.items()))
    new = _rewrite_same_size(path, old)
    # the forger's index: the edited file's new stat, with the old content's digest
    doc = json.loads(body)
    doc["files"][str(path)][:5] = list(cache_mod.file_signature(os.stat(path)))
    forged = json.dumps(doc, separators=(",", ":")).encode()
    secret = cache_mod.cache_secret(str(tmp_path / "cache"))
    if forgery == "altered body, old MAC":
        index_file.write_bytes(mac + b"\n" + forged)
    elif forgery == "MAC under another secret":
        index_file.write_bytes(cache_mod._mac(os.urandom(32), forged).encode() + b"\n" + forged)
    else:
        index_file.write_bytes(forged)
    res = _scan(tmp_path)
    assert res.files_vouched == 0  # the index was not read at all
    assert new in _params(res) and old not in _params(res)
    # what the seal prevents: the same index sealed with the user's secret hides the edit
    index_file.write_bytes(cache_mod._mac(secret, forged).encode() + b"\n" + forged)
    assert old in _params(_scan(tmp_path))


def test_a_warm_text_scan_imports_neither_the_engine_nor_the_worker_pool(tree):
    # what a warm scan needs ends at the tree memo: `jitguard scan` in a new process, twice (the
    # second is served whole from the cache), reports the modules each one loaded
    import subprocess
    import sys

    tmp_path, params = tree
    # files changed within the racy margin are re-read, and vouched for by a rewritten index, once they
    # settle: a warm scan writes nothing only for a settled tree, so wait until the files are
    time.sleep(cache_mod.RACY_MARGIN_NS / 1e9 + 0.2)
    code = ("import sys, runpy\n"
            "sys.argv = ['jitguard', 'scan', 'src', '-j', '1', '--cache-dir', 'cache']\n"
            "try:\n    runpy.run_module('jitguard', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(' '.join(sorted(sys.modules)))\n")
    runs = [subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                           text=True, env=dict(os.environ, CI="1"), check=True) for _ in range(2)]
    # what the interpreter loads before jitguard runs (site hooks of the environment) is not the scan's
    startup = set(subprocess.run([sys.executable, "-c", "import sys; print(' '.join(sorted(sys.modules)))"],
                                 capture_output=True, text=True, check=True).stdout.split())
    cold, warm = (set(r.stdout.splitlines()[-1].split()) - startup for r in runs)
    assert all(p in runs[1].stdout for p in params.values())  # the findings, from the memo
    pool = "concurrent.futures.process"
    engine = {"jitguard.static.extract", "jitguard.static.provenance", "jitguard.static.link",
              "jitguard.static.facts", "jitguard.static.rules", pool}
    assert engine - {pool} <= cold  # the cold scan needed them
    assert pool not in cold  # -j 1: no worker processes, so not their module either
    assert not engine & warm, sorted(engine & warm)
    assert "tempfile" not in warm  # nothing is written
