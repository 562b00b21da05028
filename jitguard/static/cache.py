"""On-disk cache of per-file extraction results (``FileFacts`` or a file-level error).

Key: the file's content digest, its display path and module name, the jitguard version plus a
digest of the analysis engine's own source (so a changed engine never reads stale facts), and the
parts of the configuration that change extraction (varying/stable names). Select/ignore are applied
after linking and are not part of the key.

Every write goes to a temporary file in the same directory and is renamed into place, so concurrent
scans never see half-written entries; an entry that fails to parse is ignored and rebuilt.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import jitguard
from jitguard.atomic_write import write_text_atomic

CACHE_LAYOUT = "v1"


def default_cache_dir() -> str:
    """``$JITGUARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/jitguard``, else ``~/.cache/jitguard``."""
    env = os.environ.get("JITGUARD_CACHE_DIR")
    if env:
        return env
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jitguard")


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


def write_entry(path: str, key: str, entry: dict[str, Any]) -> bool:
    """Write one per-file entry (also called from worker processes); False if it failed."""
    try:
        write_text_atomic(path, json.dumps({"key": key, **entry}, separators=(",", ":")))
        return True
    except (OSError, TypeError, ValueError):
        # A read-only or full cache dir, or facts that don't serialize: the scan still works.
        return False


class FactsCache:
    """Per-file entries under ``<cache_dir>/v1/facts/``; prefilter memos under ``.../prefilter/``."""

    def __init__(self, cache_dir: str, config_key: str) -> None:
        self.root = os.path.join(cache_dir, CACHE_LAYOUT)
        self.salt = f"{engine_digest()}:{config_key}"
        self.hits = 0
        self.misses = 0
        self.write_errors = 0

    def key(self, display: str, module: str, digest: str) -> str:
        blob = f"{self.salt}\0{display}\0{module}\0{digest}".encode("utf-8", "surrogateescape")
        return hashlib.blake2b(blob, digest_size=20).hexdigest()

    def entry_path(self, key: str) -> str:
        return os.path.join(self.root, "facts", key[:2], key + ".json")

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored entry, or None when absent or unreadable (then it is rebuilt)."""
        try:
            with open(self.entry_path(key), encoding="utf-8") as fh:
                entry = json.load(fh)
        except (OSError, ValueError):
            self.misses += 1
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or (
            "facts" not in entry and "error" not in entry
        ):
            self.misses += 1
            return None
        self.hits += 1
        return entry

    def put(self, key: str, entry: dict[str, Any]) -> None:
        if not write_entry(self.entry_path(key), key, entry):
            self.write_errors += 1

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
        try:
            with open(self._tree_path(key), encoding="utf-8") as fh:
                entry = json.load(fh)
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        return entry

    def save_tree(self, key: str, entry: dict[str, Any], keep: int = 32) -> None:
        """Store a tree memo; only the ``keep`` most recently written ones are kept."""
        try:
            write_text_atomic(self._tree_path(key), json.dumps({"key": key, **entry},
                                                               separators=(",", ":")))
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
        try:
            with open(self._memo_path(names_digest), encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return {}
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
            write_text_atomic(self._memo_path(names_digest), json.dumps(data, separators=(",", ":")))
        except OSError:
            self.write_errors += 1
