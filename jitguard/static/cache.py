"""On-disk cache of per-file extraction results (``FileFacts`` or a file-level error).

Key: the file's content digest, its display path and module name, the jitguard version plus a
digest of the analysis engine's own source (so a changed engine never reads stale facts), and the
parts of the configuration that change extraction (varying/stable names). Select/ignore are applied
after linking and are not part of the key.

Trust: an entry decides what a scan reports, so whoever could write one could hide findings. The
cache directory is made private to the user (0700; one owned by another user is not used), and
every entry carries an HMAC-SHA256 of its text under a per-user secret kept beside it
(``<cache dir>/secret``, 0600, owned by the user): an entry written by anyone who does not hold
the secret fails the check and is rebuilt.

Size: entries not used for ``MAX_AGE_DAYS`` are removed, and the whole cache is kept under
``JITGUARD_CACHE_MAX_MB`` (default ``DEFAULT_MAX_MB``), least recently used first; a scan prunes
at most once an hour, one scan at a time (a lock file), and a scan reading an entry that another
removes just rebuilds it.

Reading: a scan learns each file's content digest from a stat-keyed index (``DigestIndex``), so a
warm scan opens no unchanged file; the index is sealed like the entries.

Format: a per-file entry is a pickle of ``{"key", "facts": FileFacts}`` (or ``"error"``). The
worker that extracted the file pickles the facts once, for the entry and for its answer to the
scan, which a JSON entry encoded a second time (``to_dict``, then ``json.dumps``: on liger-kernel
that was as much CPU as the pickle and the unpickle together). An entry is unpickled only after its
MAC verified, and then only into jitguard's own classes and plain containers (``_EntryUnpickler``):
a file nobody with the secret wrote is never unpickled. The tree memo, the digest index and the
prefilter memos are JSON.

Every write goes to a temporary file in the same directory and is renamed into place, so concurrent
scans never see half-written entries; an entry that fails to parse or to verify is ignored and
rebuilt.
"""
from __future__ import annotations

import hashlib
import hmac
import io
import itertools
import json
import os
import pickle
import stat
import time
from pathlib import Path
from typing import Any

import jitguard
from jitguard.atomic_write import replace_from_temp

# v3: per-file entries are "<hmac>\n<pickle>", the other sealed files "<hmac>\n<json>"
CACHE_LAYOUT = "v3"
SECRET_NAME = "secret"
DEFAULT_MAX_MB = 256
MAX_AGE_DAYS = 30
PRUNE_EVERY_S = 3600
_TOUCH_AFTER_S = 86400  # a hit refreshes an entry's mtime (its last use) at most once a day


class CacheUnavailable(Exception):
    """The cache directory can't be used safely (another user's, or not a directory): the scan
    runs without a cache and says why."""


def default_cache_dir() -> str:
    """``$JITGUARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/jitguard``, else ``~/.cache/jitguard``."""
    env = os.environ.get("JITGUARD_CACHE_DIR")
    if env:
        return env
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jitguard")


def _private_dir(path: str) -> None:
    """Create ``path`` 0700, or make an existing one of ours 0700; refuse another user's."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError as exc:
        raise CacheUnavailable(f"cannot create the cache directory: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CacheUnavailable("the cache path is not a directory")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise CacheUnavailable(
            f"the cache directory belongs to another user (uid {st.st_uid}): not used "
            "(--cache-dir or JITGUARD_CACHE_DIR to name one of yours)")
    if st.st_mode & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            raise CacheUnavailable(f"cannot make the cache directory private: {exc.strerror}") from None


_SECRETS: dict[str, bytes] = {}


def _read_secret(path: str) -> bytes | None:
    """The secret if the file is a regular file of ours that nobody else can read or write."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or (
                hasattr(os, "getuid") and st.st_uid != os.getuid()):
            return None
        data = os.read(fd, 256)
    finally:
        os.close(fd)
    return data if len(data) >= 32 else None


def cache_secret(cache_dir: str) -> bytes:
    """The per-user secret of ``cache_dir``, created on first use (0600, atomically: concurrent
    first scans agree on one). A secret file that is not ours or is readable by others is replaced
    (entries keyed with it no longer verify, and are rebuilt)."""
    cached = _SECRETS.get(cache_dir)
    if cached is not None:
        return cached
    path = os.path.join(cache_dir, SECRET_NAME)
    secret = _read_secret(path)
    if secret is None:
        fresh = os.urandom(32)
        tmp = f"{path}.{os.getpid()}.{fresh[:4].hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, fresh)
        finally:
            os.close(fd)
        try:
            if os.path.lexists(path) and _read_secret(path) is None:
                os.unlink(path)  # not ours, or readable by others: never trusted
            try:
                os.link(tmp, path)  # create-if-absent: concurrent first scans agree on one secret
            except FileExistsError:
                pass
            except OSError:  # a filesystem without hard links
                os.replace(tmp, path)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        secret = _read_secret(path)
        if secret is None:
            raise OSError("the cache's secret file could not be created safely")
    _SECRETS[cache_dir] = secret
    return secret


def _mac(secret: bytes, body: bytes) -> str:
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def _seal(secret: bytes, obj: Any) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode("utf-8", "surrogateescape")
    return _mac(secret, body).encode("ascii") + b"\n" + body


def _open_sealed(secret: bytes, path: str, *, pickled: bool = False) -> Any:
    """The JSON (``pickled``: the pickle) of a sealed file; None when absent, unreadable or its MAC
    does not verify."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    mac, sep, body = data.partition(b"\n")
    if not sep or not hmac.compare_digest(mac, _mac(secret, body).encode("ascii")):  # bytes: any file compares
        return None
    if pickled:
        return load_entry(body)
    try:
        return json.loads(body.decode("utf-8", "surrogateescape"))
    except ValueError:
        return None


class _EntryUnpickler(pickle.Unpickler):
    """Unpickles jitguard's classes and plain containers only (an entry holds FileFacts): no
    function, of jitguard's or another module's, is ever called."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "jitguard" or module.startswith("jitguard.") or (module == "builtins" and name in (
                "set", "frozenset", "tuple", "list", "dict")):
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is no part of a cache entry")


def dump_entry(entry: dict[str, Any]) -> bytes:
    """A per-file entry's body (the pickle a worker also answers the scan with)."""
    return pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)


def load_entry(body: bytes) -> Any:
    """The entry a ``dump_entry`` body holds; None for one that does not unpickle."""
    try:
        return _EntryUnpickler(io.BytesIO(body)).load()
    except Exception:  # truncated, or of another jitguard's classes: rebuilt
        return None


def _touch(path: str) -> None:
    """Mark an entry used (its mtime is its last use, for pruning); at most once a day."""
    try:
        if time.time() - os.stat(path).st_mtime > _TOUCH_AFTER_S:
            os.utime(path)
    except OSError:
        pass


_ENGINE_DIGEST: str | None = None


def engine_digest() -> str:
    """jitguard version + a digest of the analysis engine's source files (jitguard/static/**)."""
    global _ENGINE_DIGEST
    if _ENGINE_DIGEST is None:
        h = hashlib.blake2b(jitguard.__version__.encode(), digest_size=16)
        root = Path(__file__).resolve().parent
        for p in sorted(root.rglob("*.py")):
            try:
                h.update(str(p.relative_to(root)).encode("utf-8", "surrogateescape"))
                h.update(p.read_bytes())
            except OSError:
                continue
        _ENGINE_DIGEST = h.hexdigest()
    return _ENGINE_DIGEST


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def content_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


_MADE_DIRS: set[str] = set()  # the cache's directories this process made or found
_TMP_SEQ = itertools.count()


def _write_file(path: str, data: bytes) -> None:
    """Write one sealed cache file: a temporary file beside it (``<name>.<pid>.<n>-tmp``, created
    exclusively, 0600), then one rename, through the core of ``jitguard.atomic_write``
    (``replace_from_temp``) without its symlink resolution, mode or owner steps: the cache directory
    is private to the user, and a file in it is always replaced, never written through; a cold scan
    writes one per file analyzed. A directory is created once per process, again if something
    removed it."""
    directory = os.path.dirname(path)
    if directory not in _MADE_DIRS:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        _MADE_DIRS.add(directory)
    tmp = f"{path}.{os.getpid()}.{next(_TMP_SEQ)}-tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileNotFoundError:  # the directory went away since (the cache was removed)
        _MADE_DIRS.discard(directory)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        _MADE_DIRS.add(directory)
        fd = os.open(tmp, flags, 0o600)
    replace_from_temp(fd, tmp, path, data)


def _cache_dir_of_entry(path: str) -> str:
    """``<cache dir>/<layout>/facts/<xx>/<key>.pickle`` -> ``<cache dir>``."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(path))))


def write_entry(path: str, body: bytes) -> bool:
    """Write one per-file entry, ``dump_entry({"key": key, ...})`` (also called from worker
    processes); False if it failed."""
    try:
        secret = cache_secret(_cache_dir_of_entry(path))
        _write_file(path, _mac(secret, body).encode("ascii") + b"\n" + body)
        return True
    except (OSError, TypeError, ValueError):
        # A read-only or full cache dir, or facts that don't serialize: the scan still works.
        return False


# --- stat-keyed digest index: a warm scan reads no unchanged file ----------------------------

# How recent a file's change may be for its stat to vouch for its content. The coarsest timestamps
# in use are FAT's (2 s mtime); ext4, xfs, btrfs and tmpfs store nanoseconds but stamp them from the
# kernel's coarse clock (a few ms). Within this margin of the moment a scan began reading, a file
# may change again after it was read and keep the stat the index recorded (as git's "racily clean"
# entries): such a file is read again by every scan until its change is older than the margin.
RACY_MARGIN_NS = 2_000_000_000


def _now_ns() -> int:
    return time.time_ns()


def file_signature(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """What a file's stat says about its content: (st_dev, st_ino, st_size, st_mtime_ns,
    st_ctime_ns). A rename over the file gives another inode; an edit in place changes the ctime
    (which no program sets: ``touch -d``, ``cp -p`` and ``rsync -t`` set the mtime only)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class DigestIndex:
    """Absolute path -> (stat signature, content digest) of the files one set of scan targets read.

    ``started_ns`` of an index is the clock read before any file recorded in it was read. An entry
    vouches for a file only when the file's signature is the recorded one and its last change (mtime
    or ctime) lies more than ``RACY_MARGIN_NS`` before ``started_ns``: a change after the read then
    has a later timestamp than the recorded one, so an unchanged signature means unchanged bytes.
    Limit: a network filesystem whose clock runs behind this machine's by more than the margin voids
    that argument (its timestamps are the server's).

    The index is sealed with the cache's secret like the entries: a forged one is not read (every file
    is read instead), so it can't vouch for a changed file and hide a finding."""

    def __init__(self, path: str, secret: bytes, key: str, started_ns: int) -> None:
        self.path = path
        self.secret = secret
        self.key = key
        self.started_ns = started_ns  # this scan's: before it reads any file
        self._stored_ns = 0  # the stored index's
        self._stored: dict[str, list] = {}
        data = _open_sealed(secret, path)
        if (isinstance(data, dict) and data.get("key") == key and isinstance(data.get("files"), dict)
                and isinstance(data.get("started_ns"), int)):
            self._stored_ns = data["started_ns"]
            self._stored = data["files"]
            _touch(path)
        self._next: dict[str, list] = {}  # what this scan confirmed or recorded: the next index
        self._changed = False

    @staticmethod
    def _settled(sig, started_ns: int) -> bool:
        return max(sig[3], sig[4]) < started_ns - RACY_MARGIN_NS

    def digest(self, path: str, st: os.stat_result) -> str | None:
        """The recorded digest of ``path`` if its stat ``st`` vouches for it, else None (read it)."""
        sig = file_signature(st)
        entry = self._stored.get(path)
        if (not isinstance(entry, list) or len(entry) != 6 or tuple(entry[:5]) != sig
                or not isinstance(entry[5], str) or not self._settled(sig, self._stored_ns)):
            return None
        self._next[path] = entry
        return entry[5]

    def record(self, path: str, st: os.stat_result, digest: str) -> None:
        """``path`` had stat ``st`` (taken before it was read) and bytes of this digest."""
        sig = file_signature(st)
        entry = [*sig, digest]
        self._next[path] = entry
        # a new entry, or one that vouches from now on (its change now lies before the margin)
        if self._stored.get(path) != entry or self._settled(sig, self.started_ns):
            self._changed = True

    def forget(self, path: str) -> None:
        if self._next.pop(path, None) is not None:
            self._changed = True

    def save(self) -> bool:
        """Write what this scan confirmed or recorded (files it no longer reads are dropped), if
        that differs from the stored index; False if the write failed."""
        if not self._changed and self._next.keys() == self._stored.keys():
            return True
        body = {"key": self.key, "started_ns": self.started_ns, "files": self._next}
        try:
            _write_file(self.path, _seal(self.secret, body))
        except (OSError, TypeError, ValueError):
            return False
        self._stored, self._stored_ns, self._changed = dict(self._next), self.started_ns, False
        return True


class FactsCache:
    """Per-file entries under ``<cache_dir>/v1/facts/``; prefilter memos under ``.../prefilter/``."""

    def __init__(self, cache_dir: str, config_key: str) -> None:
        _private_dir(cache_dir)
        try:
            self.secret = cache_secret(cache_dir)
        except OSError as exc:
            raise CacheUnavailable(f"cannot create the cache's secret: {exc.strerror or exc}") from None
        self.cache_dir = cache_dir
        self.root = os.path.join(cache_dir, CACHE_LAYOUT)
        self.salt = f"{engine_digest()}:{config_key}"
        self.hits = 0
        self.misses = 0
        self.write_errors = 0

    def key(self, display: str, module: str, digest: str) -> str:
        blob = f"{self.salt}\0{display}\0{module}\0{digest}".encode("utf-8", "surrogateescape")
        return hashlib.blake2b(blob, digest_size=20).hexdigest()

    def entry_path(self, key: str) -> str:
        return os.path.join(self.root, "facts", key[:2], key + ".pickle")

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored entry, or None when absent or unreadable (then it is rebuilt)."""
        path = self.entry_path(key)
        entry = _open_sealed(self.secret, path, pickled=True)
        if not isinstance(entry, dict) or entry.get("key") != key or (
            "facts" not in entry and "error" not in entry
        ):
            self.misses += 1
            return None
        self.hits += 1
        _touch(path)
        return entry

    def put(self, key: str, entry: dict[str, Any]) -> None:
        if not write_entry(self.entry_path(key), dump_entry({"key": key, **entry})):
            self.write_errors += 1

    def digest_index(self, targets) -> DigestIndex:
        """The digest index of the scans of ``targets`` (absolute paths); to be opened before the
        scan reads any file (its entries are checked against that moment)."""
        blob = "\0".join(sorted(set(targets))).encode("utf-8", "surrogateescape")
        key = hashlib.blake2b(blob, digest_size=20).hexdigest()
        return DigestIndex(os.path.join(self.root, "index", key + ".json"), self.secret, key, _now_ns())

    # --- whole-tree memo: the linked (unfiltered) findings of an unchanged tree --------------
    def tree_key(self, files) -> str:
        """``files``: (display path, module, content digest) of every file read, in order."""
        h = hashlib.blake2b(self.salt.encode(), digest_size=20)
        for display, module, digest in files:
            h.update(f"\0{display}\0{module}\0{digest}".encode("utf-8", "surrogateescape"))
        return h.hexdigest()

    def _tree_path(self, key: str) -> str:
        return os.path.join(self.root, "trees", key + ".json")

    def load_tree(self, key: str) -> dict[str, Any] | None:
        entry = _open_sealed(self.secret, self._tree_path(key))
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        return entry

    def save_tree(self, key: str, entry: dict[str, Any], keep: int = 32) -> None:
        """Store a tree memo; only the ``keep`` most recently written ones are kept."""
        try:
            _write_file(self._tree_path(key), _seal(self.secret, {"key": key, **entry}))
        except (OSError, TypeError, ValueError):
            self.write_errors += 1
            return
        directory = os.path.dirname(self._tree_path(key))
        try:
            names = [n for n in os.listdir(directory) if n.endswith(".json")]
            if len(names) > keep:
                paths = sorted((os.path.join(directory, n) for n in names), key=_mtime)
                for old in paths[: len(paths) - keep]:
                    os.unlink(old)
        except OSError:
            pass  # another scan pruned it first

    # --- phase-2 prefilter memo: which file contents mention any of a given set of names -----
    def _memo_path(self, names_digest: str) -> str:
        return os.path.join(self.root, "prefilter", names_digest + ".json")

    def load_memo(self, names_digest: str) -> dict[str, bool]:
        data = _open_sealed(self.secret, self._memo_path(names_digest))
        if not isinstance(data, dict):
            return {}
        hit = data.get("hit", [])
        miss = data.get("miss", [])
        if not isinstance(hit, list) or not isinstance(miss, list):
            return {}
        memo = {d: False for d in miss if isinstance(d, str)}
        memo.update({d: True for d in hit if isinstance(d, str)})
        return memo

    def save_memo(self, names_digest: str, memo: dict[str, bool]) -> None:
        data = {
            "hit": sorted(d for d, v in memo.items() if v),
            "miss": sorted(d for d, v in memo.items() if not v),
        }
        try:
            _write_file(self._memo_path(names_digest), _seal(self.secret, data))
        except OSError:
            self.write_errors += 1

    # --- bounds: age and size, least recently used first --------------------------------------
    def maybe_prune(self, now: float | None = None) -> int:
        """Prune if no scan did in the last hour; returns the number of files removed."""
        now = time.time() if now is None else now
        marker = os.path.join(self.cache_dir, "last-prune")
        try:
            if now - os.stat(marker).st_mtime < PRUNE_EVERY_S:
                return 0
        except OSError:
            pass
        return prune(self.cache_dir, now=now)


def max_bytes() -> int:
    try:
        mb = float(os.environ.get("JITGUARD_CACHE_MAX_MB", DEFAULT_MAX_MB))
    except ValueError:
        mb = DEFAULT_MAX_MB
    return int(max(mb, 0) * 1024 * 1024)


def prune(cache_dir: str, *, now: float | None = None, limit: int | None = None,
          max_age_s: float = MAX_AGE_DAYS * 86400) -> int:
    """Remove entries unused for ``max_age_s``, then the least recently used until the cache holds
    at most ``limit`` bytes (default ``max_bytes()``), and layouts of older jitguard versions.
    One pruner at a time (a non-blocking lock; a scan that finds it taken skips pruning); a
    concurrent scan that loses an entry rebuilds it. Returns the number of files removed."""
    import fcntl

    now = time.time() if now is None else now
    limit = max_bytes() if limit is None else limit
    try:
        lock = os.open(os.path.join(cache_dir, "prune.lock"), os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError:
        return 0
    removed = 0
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another scan is pruning
        for name in os.listdir(cache_dir):  # older layouts: nothing reads them any more
            if name != CACHE_LAYOUT and name[:1] == "v" and name[1:].isdigit():
                import shutil  # here only: a scan's first prune of a fresh cache has none to remove

                shutil.rmtree(os.path.join(cache_dir, name), ignore_errors=True)
                removed += 1
        entries: list[tuple[float, int, str]] = []
        for directory, _, files in os.walk(os.path.join(cache_dir, CACHE_LAYOUT)):
            for n in files:
                p = os.path.join(directory, n)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                if n.endswith("-tmp") and now - st.st_mtime < PRUNE_EVERY_S:
                    continue  # another scan's write in progress
                entries.append((st.st_mtime, st.st_size, p))
        entries.sort()
        total = sum(size for _, size, _ in entries)
        for mtime, size, p in entries:
            if now - mtime <= max_age_s and total <= limit:
                break
            try:
                os.unlink(p)
                removed += 1
            except OSError:
                pass
            total -= size
        with open(os.path.join(cache_dir, "last-prune"), "w"):
            pass
    except OSError:
        pass
    finally:
        os.close(lock)
    return removed
