"""Configuration: ``[tool.jitguard]`` in the nearest ``pyproject.toml``, merged with command-line flags.

Keys (hyphens or underscores)::

    [tool.jitguard]
    select = ["JG"]                  # codes or prefixes to report (default: every rule)
    ignore = ["JG006"]               # codes or prefixes to drop; the more specific selector wins
    exclude = ["third_party/", "**/generated_*.py"]   # .gitignore-style, relative to this file
    respect-gitignore = true         # also skip what .gitignore files exclude
    varying-names = ["n_ctx"]        # extra names that mean "changes every call"
    stable-names = ["n_experts"]     # extra names that mean "fixed for the life of the process"
    baseline = "jitguard-baseline.json"   # scan reports only findings not in it (scan --baseline)

    [tool.jitguard.per-file-ignores]
    "tests/**" = ["JG001"]           # .gitignore-style path pattern -> codes or prefixes

A malformed file or an unknown key is a usage error (exit 2), never silently ignored.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from jitguard.static.ignore_patterns import PatternList

SELECTOR_RE = re.compile(r"^(ALL|[A-Z]{1,4}[0-9]{0,4})$")
DEFAULT_SELECT = ("JG",)
CONFIDENCE_ORDER = ("high", "medium", "low")  # most to least sure
DEFAULT_CONFIDENCE = "medium"  # report high and medium findings


class ConfigError(Exception):
    """A configuration or command-line problem the user must fix (exit code 2)."""


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise ConfigError(
                f"{path}: reading pyproject.toml on Python 3.10 needs the 'tomli' package "
                "(pip install tomli)"
            ) from None
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8") from None


@dataclass(frozen=True)
class Config:
    """The effective configuration of one scan."""

    select: tuple[str, ...] = DEFAULT_SELECT
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    varying_names: frozenset[str] = frozenset()
    stable_names: frozenset[str] = frozenset()
    respect_gitignore: bool = True
    # Directory that relative ``exclude`` / ``per-file-ignores`` patterns are anchored at.
    root: str = field(default_factory=os.getcwd)
    # The pyproject.toml (or --config file) the settings came from, if any.
    source: str | None = None
    # The least sure findings reported: "medium" reports high and medium (the default), "low" all,
    # "high" only findings whose evidence follows from the code (docs/provenance.md).
    confidence: str = DEFAULT_CONFIDENCE
    # scan --baseline's default: a baseline file (absolute, or relative to the current directory)
    baseline: str | None = None

    def reports(self, level: str) -> bool:
        """Whether a finding of confidence ``level`` is at or above the configured level."""
        return CONFIDENCE_ORDER.index(level) <= CONFIDENCE_ORDER.index(self.confidence)

    # --- code selection -------------------------------------------------------------------
    def is_enabled(self, code: str, extra_ignores: Iterable[str] = ()) -> bool:
        """A code is reported when its most specific matching ``select`` beats every ``ignore``."""
        sel = _best_match(code, self.select)
        ign = max(_best_match(code, self.ignore), _best_match(code, extra_ignores))
        return sel > ign

    def ignores_for_path(self, path: str) -> tuple[str, ...]:
        """Selectors that ``per-file-ignores`` drops for ``path`` (absolute or relative to cwd)."""
        if not self.per_file_ignores:
            return ()
        rel = relative_posix(path, self.root)
        if rel is None:
            return ()
        out: list[str] = []
        for pattern, codes in self.per_file_ignores:
            pl = compiled_pattern(pattern)
            if pl.match(rel, is_dir=False):
                out.extend(codes)
            else:  # a directory pattern ("tests/") covers the files below it
                parts = rel.split("/")
                if any(pl.match("/".join(parts[:k]), is_dir=True) for k in range(1, len(parts))):
                    out.extend(codes)
        return tuple(out)

    def exclude_patterns(self) -> PatternList:
        return PatternList(list(self.exclude))

    # --- cache key ------------------------------------------------------------------------
    def facts_key(self) -> str:
        """Digest of everything in the config that changes what extraction produces."""
        blob = json.dumps(
            {"varying": sorted(self.varying_names), "stable": sorted(self.stable_names)},
            sort_keys=True,
        )
        return hashlib.blake2b(blob.encode(), digest_size=16).hexdigest()

    def with_cli(
        self,
        *,
        select: Iterable[str] | None = None,
        extend_select: Iterable[str] = (),
        ignore: Iterable[str] = (),
        exclude: Iterable[str] = (),
        varying_names: Iterable[str] = (),
        stable_names: Iterable[str] = (),
        respect_gitignore: bool | None = None,
        confidence: str | None = None,
    ) -> "Config":
        """Command-line flags on top of the file: ``--select`` replaces, the others extend."""
        new_select = tuple(select) if select is not None else self.select
        new_select = new_select + tuple(extend_select)
        # the file's selectors were checked when it was read; knowing every code imports the rule
        # registry and with it the engine (~30 ms, a tenth of a warm scan), which --format text
        # never needs
        for s in (*(select or ()), *extend_select, *ignore):
            validate_selector(s, "command line")
        cwd = os.getcwd()
        # --exclude patterns are relative to the current directory, config ones to the config root.
        extra_exclude = tuple(_rebase_pattern(p, cwd, self.root) for p in exclude)
        return replace(
            self,
            select=new_select,
            ignore=self.ignore + tuple(ignore),
            exclude=self.exclude + extra_exclude,
            varying_names=self.varying_names | frozenset(varying_names),
            stable_names=self.stable_names | frozenset(stable_names),
            respect_gitignore=(
                self.respect_gitignore if respect_gitignore is None else respect_gitignore
            ),
            confidence=self.confidence if confidence is None else _confidence(confidence, "command line"),
        )


@functools.lru_cache(maxsize=1024)
def compiled_pattern(pattern: str) -> PatternList:
    """One per-file-ignores pattern, compiled once (``.errors`` says why one can't be)."""
    return PatternList([pattern])


def _best_match(code: str, selectors: Iterable[str]) -> int:
    """Length of the longest selector that is a prefix of ``code`` (``ALL`` counts as 0.5); -1 if none."""
    best = -1.0
    for s in selectors:
        if s == "ALL":
            best = max(best, 0.5)
        elif code.startswith(s):
            best = max(best, len(s))
    return best  # type: ignore[return-value]


def validate_selector(sel: str, where: str) -> None:
    if not SELECTOR_RE.match(sel):
        raise ConfigError(
            f"{where}: invalid rule selector {sel!r} (expected a code such as JG001, a prefix "
            "such as JG00, or ALL)"
        )
    known = _known_codes()
    if known and sel != "ALL" and not any(c.startswith(sel) for c in known):
        raise ConfigError(
            f"{where}: rule selector {sel!r} matches no rule (known: {', '.join(sorted(known))})"
        )


def _known_codes() -> set[str]:
    try:
        from jitguard.static.rules import RULES  # type: ignore[attr-defined]
    except Exception:  # the registry not importable: syntax-only validation
        return set()
    return set(RULES)


def relative_posix(path: str, root: str) -> str | None:
    """``path`` relative to ``root``, posix; None when it is ``root`` itself or outside it."""
    try:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    except ValueError:  # other drive on Windows
        return None
    if rel == os.curdir or rel.startswith(os.pardir + os.sep) or rel == os.pardir:
        return None
    return rel.replace(os.sep, "/")


def _rebase_pattern(pattern: str, from_dir: str, to_dir: str) -> str:
    """Make a pattern written relative to ``from_dir`` usable at ``to_dir`` (anchored ones only)."""
    neg = pattern.startswith("!")
    body = pattern[1:] if neg else pattern
    anchored = "/" in body.rstrip("/")
    if not anchored or os.path.abspath(from_dir) == os.path.abspath(to_dir):
        return pattern
    rel = relative_posix(os.path.join(from_dir, body.lstrip("/")), to_dir)
    if rel is None:  # outside the root: keep as a name pattern
        return pattern
    trailing = "/" if body.endswith("/") else ""
    return ("!" if neg else "") + "/" + rel.rstrip("/") + trailing


# --- reading the file ----------------------------------------------------------------------

_KEYS = {
    "select",
    "ignore",
    "extend-select",
    "exclude",
    "extend-exclude",
    "per-file-ignores",
    "varying-names",
    "stable-names",
    "respect-gitignore",
    "confidence",
    "baseline",
}


_TABLE = re.compile(rb"^[ \t]*\[[ \t]*tool[ \t]*\.[ \t]*[\"']?jitguard\b", re.M)


def has_jitguard_table(data: bytes) -> bool:
    """The TOML text has a ``[tool.jitguard]`` (or ``[tool.jitguard.*]``) table header."""
    return _TABLE.search(data) is not None


def repository_root(start: str | os.PathLike[str]) -> Path | None:
    """The nearest directory at or above ``start`` holding ``.git`` (a directory, or the file of a
    worktree or submodule); None outside any repository."""
    p = Path(start).resolve()
    if p.is_file() or not p.exists():
        p = p.parent
    for d in (p, *p.parents):
        if (d / ".git").exists():
            return d
    return None


def _confidence(value: Any, where: str) -> str:
    if value not in CONFIDENCE_ORDER:
        raise ConfigError(f"{where}: 'confidence' must be one of low, medium, high, got {value!r}")
    return value


def find_pyproject(start: str | os.PathLike[str]) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` that has a ``[tool.jitguard]`` table,
    looking no higher than the repository root (the directory holding ``.git``): a file above the
    repository is someone else's project and never silences this one.

    Falls back to the nearest ``pyproject.toml`` at all (its directory anchors patterns) when none
    has the table; ``None`` if there is none up to the repository root (or the filesystem root,
    outside a repository).
    """
    p = Path(start).resolve()
    if p.is_file() or not p.exists():
        p = p.parent
    top = repository_root(p)
    first: Path | None = None
    for d in (p, *p.parents):
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            if first is None:
                first = candidate
            try:
                if has_jitguard_table(candidate.read_bytes()):
                    return candidate
            except OSError:
                pass
        if top is not None and d == top:
            break
    return first


def _str_list(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: '{key}' must be a list of strings, got {value!r}")
    return tuple(value)


def config_from_table(table: dict[str, Any], root: str, where: str) -> Config:
    """Build a Config from a ``[tool.jitguard]`` table (already parsed)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [tool.jitguard] must be a table")
    norm: dict[str, Any] = {}
    for k, v in table.items():
        key = k.replace("_", "-")
        if key not in _KEYS:
            raise ConfigError(
                f"{where}: unknown key {k!r} in [tool.jitguard] (known: {', '.join(sorted(_KEYS))})"
            )
        norm[key] = v
    select = _str_list(norm.get("select", list(DEFAULT_SELECT)), "select", where)
    select += _str_list(norm.get("extend-select", []), "extend-select", where)
    ignore = _str_list(norm.get("ignore", []), "ignore", where)
    for s in (*select, *ignore):
        validate_selector(s, where)
    exclude = _str_list(norm.get("exclude", []), "exclude", where)
    exclude += _str_list(norm.get("extend-exclude", []), "extend-exclude", where)
    pfi_raw = norm.get("per-file-ignores", {})
    if not isinstance(pfi_raw, dict):
        raise ConfigError(f"{where}: 'per-file-ignores' must be a table of pattern = [codes]")
    pfi: list[tuple[str, tuple[str, ...]]] = []
    for pattern, codes in pfi_raw.items():
        codes_t = _str_list(codes, f"per-file-ignores.{pattern}", where)
        for s in codes_t:
            validate_selector(s, where)
        pfi.append((pattern, codes_t))
    varying = _str_list(norm.get("varying-names", []), "varying-names", where)
    stable = _str_list(norm.get("stable-names", []), "stable-names", where)
    both = set(varying) & set(stable)
    if both:
        raise ConfigError(f"{where}: names in both varying-names and stable-names: {sorted(both)}")
    rg = norm.get("respect-gitignore", True)
    if not isinstance(rg, bool):
        raise ConfigError(f"{where}: 'respect-gitignore' must be true or false")
    baseline = norm.get("baseline")
    if baseline is not None and (not isinstance(baseline, str) or not baseline):
        raise ConfigError(f"{where}: 'baseline' must be a file name (relative to {where}'s directory)")
    return Config(
        select=select,
        ignore=ignore,
        exclude=exclude,
        per_file_ignores=tuple(pfi),
        varying_names=frozenset(varying),
        stable_names=frozenset(stable),
        respect_gitignore=rg,
        root=root,
        source=where,
        confidence=_confidence(norm.get("confidence", DEFAULT_CONFIDENCE), where),
        baseline=os.path.join(root, baseline) if baseline else None,
    )


def load_config(config_file: str | os.PathLike[str] | None = None, start: str | None = None) -> Config:
    """Read ``config_file`` if given (a pyproject.toml, or a TOML file with a top-level jitguard
    table), else the nearest pyproject.toml above ``start`` (default: the current directory)."""
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"--config: {path}: no such file")
        data = _load_toml(path)
        if "tool" in data and isinstance(data["tool"], dict) and "jitguard" in data["tool"]:
            table = data["tool"]["jitguard"]
        elif "jitguard" in data:
            table = data["jitguard"]
        elif path.name == "pyproject.toml" or "tool" in data:
            # a project file without our table: nothing for us in it, and no "unknown key 'tool'"
            raise ConfigError(f"--config: {path}: no [tool.jitguard] table in this file")
        else:  # a dedicated file such as jitguard.toml: the keys at top level
            table = data
        return config_from_table(table, str(path.resolve().parent), str(path))
    found = find_pyproject(start or os.getcwd())
    if found is None:
        return Config(root=os.getcwd())
    try:
        ours = has_jitguard_table(found.read_bytes())
    except OSError:
        ours = True  # let _load_toml report it
    if not ours:  # nothing for us in it (and no TOML parser needed on Python 3.10)
        return Config(root=str(found.parent))
    data = _load_toml(found)
    table = data.get("tool", {}).get("jitguard", {}) if isinstance(data.get("tool"), dict) else {}
    return config_from_table(table, str(found.parent), _shown(found))


def _shown(path: Path) -> str:
    """A config file's path as reports show it: relative to the working directory when below it."""
    rel = relative_posix(str(path), os.getcwd())
    return rel if rel is not None else str(path)
