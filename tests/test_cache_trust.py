"""The scan cache can be trusted and stays bounded: a forged or altered entry never hides a finding,
the directory is private to the user, entries are pruned by age and size, and pruning while other
scans run changes no result."""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import pickle
import random
import shutil
import stat
import time
from pathlib import Path

import pytest

from jitguard.atomic_write import write_text_atomic
from jitguard.config import Config
from jitguard.static import cache as cache_mod
from jitguard.static.runner import scan_paths
from scan_helpers import simple_module  # noqa: E402

RNG = random.Random(os.urandom(8))


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "src"
    src.mkdir()
    params = []
    for i in range(4):
        p = f"n_{RNG.randrange(10**6)}"
        (src / f"m{i}.py").write_text(simple_module(p, f"k{i}"))
        params.append(p)
    return tmp_path, params


def _scan(tmp_path, cache_dir=None, **kw):
    return scan_paths([str(tmp_path / "src")], Config(root=str(tmp_path)), jobs=1,
                      cache_dir=str(cache_dir or tmp_path / "cache"), **kw)


def _sealed_files(cache_dir: Path) -> list[Path]:
    root = cache_dir / cache_mod.CACHE_LAYOUT
    return list(root.rglob("*.json")) + list(root.rglob("*.pickle"))


def _forged_body(path: Path, body: bytes) -> bytes:
    """The body of a sealed file emptied as a forger would: per-file entries are pickles of
    FileFacts, the other files JSON."""
    if path.suffix == ".pickle":
        entry = cache_mod.load_entry(body)
        if "facts" in entry:
            entry["facts"].kernels = []
            entry["facts"].launches = []
        return cache_mod.dump_entry(entry)
    return json.dumps(_emptied(json.loads(body)), separators=(",", ":")).encode()


def _emptied(body: dict) -> dict:
    """What a forger who wants the findings gone writes: no kernels, no launches, no findings."""
    if "facts" in body:
        body["facts"]["kernels"] = []
        body["facts"]["launches"] = []
    if "findings" in body:
        body["findings"] = []
    if "hit" in body:  # the prefilter memo: "no file launches a kernel"
        body["miss"] = body["miss"] + body["hit"]
        body["hit"] = []
    return body


@pytest.mark.parametrize("forgery", ["altered body, old MAC", "MAC under another secret", "plain JSON"])
def test_a_forged_cache_entry_does_not_hide_findings(tree, forgery):
    tmp_path, params = tree
    expected = sorted((f.path, f.param) for f in _scan(tmp_path).findings)
    assert sorted(p for _, p in expected) == sorted(params)
    files = _sealed_files(tmp_path / "cache")
    assert files
    other = os.urandom(32)
    for p in files:
        mac, _, body = p.read_bytes().partition(b"\n")
        forged = _forged_body(p, body)
        if forgery == "altered body, old MAC":
            p.write_bytes(mac + b"\n" + forged)
        elif forgery == "MAC under another secret":
            p.write_bytes(cache_mod._mac(other, forged).encode() + b"\n" + forged)
        else:  # the entry format before entries were sealed
            p.write_bytes(forged)
    cache_mod._SECRETS.clear()
    again = _scan(tmp_path)
    assert sorted((f.path, f.param) for f in again.findings) == expected
    assert again.cache_hits == 0  # every forged entry was refused and rebuilt
    # and the rebuilt entries are good ones again
    cache_mod._SECRETS.clear()
    assert _scan(tmp_path, keep_facts=True).cache_hits == 4


def test_the_cache_directory_and_its_secret_are_private(tree):
    tmp_path, _ = tree
    loose = tmp_path / "cache"
    loose.mkdir(mode=0o777)
    os.chmod(loose, 0o777)
    _scan(tmp_path)
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o700
    secret = loose / cache_mod.SECRET_NAME
    st = os.stat(secret)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid() and st.st_size == 32
    # a secret others can read is no secret: it is replaced, and entries keyed with it rebuilt
    os.chmod(secret, 0o644)
    old = secret.read_bytes()
    cache_mod._SECRETS.clear()
    res = _scan(tmp_path, keep_facts=True)
    assert res.cache_hits == 0 and secret.read_bytes() != old
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs chown (root)")
def test_another_users_cache_directory_is_not_used(tree):
    tmp_path, params = tree
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    os.chown(theirs, 4242, 4242)
    cache_mod._SECRETS.clear()
    res = _scan(tmp_path, cache_dir=theirs)
    assert sorted(f.param for f in res.findings) == sorted(params)
    assert [w.message for w in res.warnings if w.path == str(theirs)] == [
        "cache not used: the cache directory belongs to another user (uid 4242): not used "
        "(--cache-dir or JITGUARD_CACHE_DIR to name one of yours)"]
    assert list(theirs.iterdir()) == []


def test_pruning_removes_old_entries_then_the_least_recently_used(tree):
    tmp_path, params = tree
    cache_dir = tmp_path / "cache"
    _scan(tmp_path)
    (cache_dir / "v1" / "facts").mkdir(parents=True)  # a layout no jitguard reads any more
    (cache_dir / "v1" / "facts" / "x.json").write_text("{}")
    files = sorted(_sealed_files(cache_dir))
    now = time.time()
    for i, p in enumerate(files):  # ages 1..n days
        os.utime(p, (now - (i + 1) * 86400, now - (i + 1) * 86400))
    sizes = {p: p.stat().st_size for p in files}
    # by age: everything older than 2.5 days goes
    cache_mod.prune(str(cache_dir), now=now, max_age_s=2.5 * 86400, limit=10**9)
    left = sorted(_sealed_files(cache_dir))
    assert left == files[:2] and not (cache_dir / "v1").exists()
    # by size: the least recently used go first until the rest fits
    limit = sizes[files[0]]
    cache_mod.prune(str(cache_dir), now=now, limit=limit)
    assert sorted(_sealed_files(cache_dir)) == files[:1]
    # a scan after pruning is still right
    cache_mod._SECRETS.clear()
    assert sorted(f.param for f in _scan(tmp_path).findings) == sorted(params)


def test_maybe_prune_runs_at_most_hourly_and_keeps_the_cache_under_its_bound(tree, monkeypatch):
    tmp_path, _ = tree
    monkeypatch.setenv("JITGUARD_CACHE_MAX_MB", "0")
    _scan(tmp_path)  # the first scan prunes (nothing yet), then writes its entries
    assert _sealed_files(tmp_path / "cache")
    c = cache_mod.FactsCache(str(tmp_path / "cache"), "k")
    assert c.maybe_prune() == 0  # pruned less than an hour ago
    assert c.maybe_prune(now=time.time() + cache_mod.PRUNE_EVERY_S + 1) > 0
    assert _sealed_files(tmp_path / "cache") == []


def _scanner(root: str, rounds: int, out, done) -> None:
    os.chdir(root)
    got = []
    for _ in range(rounds):
        res = scan_paths([os.path.join(root, "src")], Config(root=root), jobs=1,
                         cache_dir=os.path.join(root, "cache"), keep_facts=RNG.random() < 0.5)
        got.append(sorted((f.path, f.param) for f in res.findings))
    out.put(got)
    with done.get_lock():
        done.value += 1


def _pruner(root: str, scanners: int, removed, done, out) -> None:
    """Prune with no size allowance until every scanner has finished and something was removed.

    While nothing has been removed, the scanners' entries are all still there, so the loop ends
    with the first prune after the last scan at the latest."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        n = cache_mod.prune(os.path.join(root, "cache"), limit=0)
        with removed.get_lock():
            removed.value += n
            total = removed.value
        if total and done.value == scanners:
            break
    out.put(total)


def test_pruning_while_other_scans_run_changes_no_result(tree):
    tmp_path, _ = tree
    expected = sorted((f.path, f.param) for f in _scan(tmp_path, cache_dir=tmp_path / "cold",
                                                        use_cache=False).findings)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    done = ctx.Value("i", 0)  # scanners finished
    removed = ctx.Value("l", 0)
    scanners = [ctx.Process(target=_scanner, args=(str(tmp_path), 6, out, done)) for _ in range(3)]
    pruners = [ctx.Process(target=_pruner, args=(str(tmp_path), 3, removed, done, out))
               for _ in range(2)]
    for p in scanners + pruners:
        p.start()
    results = [out.get(timeout=400) for _ in scanners + pruners]
    for p in scanners + pruners:
        p.join(timeout=60)
        assert p.exitcode == 0
    scans = [r for r in results if isinstance(r, list)]
    assert len(scans) == 3 and all(run == expected for got in scans for run in got)
    assert removed.value > 0  # the pruners did remove entries while or after the scans ran


def _secret_of(cache_dir: str, out) -> None:
    cache_mod._SECRETS.clear()
    out.put(cache_mod.cache_secret(cache_dir))


def test_concurrent_first_scans_agree_on_one_secret(tmp_path):
    d = tmp_path / "fresh"
    d.mkdir(mode=0o700)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_secret_of, args=(str(d), out)) for _ in range(6)]
    for p in procs:
        p.start()
    secrets = {out.get(timeout=60) for _ in procs}
    for p in procs:
        p.join(timeout=60)
    assert len(secrets) == 1 and (d / cache_mod.SECRET_NAME).read_bytes() in secrets
    assert [n for n in os.listdir(d) if n != cache_mod.SECRET_NAME] == []  # no temp file left


class _Planted:
    """What an entry that runs code when unpickled holds: a call that leaves a file at ``path``."""

    def __init__(self, call, path: str) -> None:
        self.call, self.path = call, path

    def __reduce__(self):
        return (self.call, (self.path, "x") if self.call is write_text_atomic else (self.path,))


@pytest.mark.parametrize("call", [os.mkdir, write_text_atomic], ids=["os.mkdir", "a jitguard function"])
def test_a_sealed_entry_is_unpickled_into_jitguard_classes_only(tree, call):
    # even an entry sealed with the user's own secret runs no code when read: the unpickler refuses
    # every global but jitguard's classes (and plain containers), and the entry is rebuilt
    tmp_path, params = tree
    expected = sorted((f.path, f.param) for f in _scan(tmp_path).findings)
    cache_dir = tmp_path / "cache"
    layout = cache_dir / cache_mod.CACHE_LAYOUT
    entries = list((layout / "facts").rglob("*.pickle"))
    assert entries
    shutil.rmtree(layout / "trees")  # the next scan reads the per-file entries, not the tree memo
    marker = tmp_path / "ran"
    body = pickle.dumps({"key": "k", "facts": _Planted(call, str(marker))})
    secret = cache_mod.cache_secret(str(cache_dir))
    for p in entries:
        p.write_bytes(cache_mod._mac(secret, body).encode() + b"\n" + body)
    again = _scan(tmp_path)
    assert not marker.exists()
    assert sorted((f.path, f.param) for f in again.findings) == expected
    assert again.cache_hits == 0
