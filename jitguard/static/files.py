"""Which files a scan reads: walking directories, default and configured excludes, ``.gitignore``,
module names, ``--package``.

Rules, in order:
- A path named on the command line that does not exist is a usage error (the CLI checks it).
- A directory is walked recursively for ``*.py`` (and ``*.pyi``) files. Directories named in
  ``DEFAULT_EXCLUDE_DIRS``, ``*.egg-info`` directories and any directory holding ``pyvenv.cfg`` (a
  virtualenv) are skipped, unless that directory itself was named on the command line.
- ``exclude`` patterns (config and ``--exclude``) and, unless ``respect-gitignore = false``, every
  ``.gitignore`` from the enclosing git work tree down, apply to walked files and to files named on
  the command line alike (so pre-commit, which passes file names, honours them); named files
  they drop are listed in ``FileSet.named_excluded`` (the CLI says so on stderr).
- Symbolic links are followed; a link that points back into a directory being walked, or a link
  loop, is reported as an error about that path, and the walk goes on.
- A ``*.py`` that is not a regular file (a FIFO, a device, a link to one), a ``.gitignore`` that is
  not one or can't be read, and a pattern that can't be compiled are each an error entry; the rest
  of the tree is walked (with the other patterns).
- A temporary file left by a killed ``jitguard fix --write`` (``.NAME.XXXXXXXX.jitguard-tmp``) is
  removed when that is safe (``safe_write.clear_stale_temp``), else it is an error entry.
"""
from __future__ import annotations

import functools
import os
import stat
from dataclasses import dataclass, field
from typing import Callable, Iterable

from jitguard.config import Config, relative_posix, compiled_pattern
from jitguard.findings import FileError
from jitguard.static.errors import SourceError
from jitguard.static.exercise import exercise_path
from jitguard.static.ignore_patterns import PatternList
from jitguard.static.safe_write import TEMP_SUFFIX, clear_stale_temp
from jitguard.static.source import file_kind, read_bytes

MAX_GITIGNORE_BYTES = 4 * 1024 * 1024  # far above any real .gitignore; /dev/zero would never end
DEFAULT_EXCLUDE_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", ".jj",
        ".venv", "venv", ".env", "env", ".tox", ".nox", ".direnv",
        "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".jitguard_cache",
        ".ipynb_checkpoints", "node_modules", "site-packages",
        "build", "dist", "_build", "buck-out", ".eggs", ".pants.d",
    }
)  # fmt: skip
PYTHON_SUFFIXES = (".py", ".pyi")


@dataclass(frozen=True)
class SourceFile:
    path: str  # absolute, as walked (not resolved: symlinked files keep their link path)
    display: str  # what reports print: relative to cwd when below it, else absolute; posix
    module: str  # dotted module name from the package layout (``__init__.py`` walk-up)
    # a test or benchmark by its place in the project (rule test-callers), never by the folders above
    # the project's root
    exercise: bool = False


@dataclass
class FileSet:
    files: list[SourceFile] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    excluded: int = 0  # files and directories skipped by excludes
    named_excluded: list[str] = field(default_factory=list)  # files named by the user, excluded
    temps_removed: list[str] = field(default_factory=list)  # stale temp files of a killed fix
    # display path of each named_excluded -> what excluded it ("exclude" or ".gitignore")
    excluded_by: dict[str, str] = field(default_factory=dict)


def display_path(path: str, cwd: str | None = None) -> str:
    cwd = cwd or os.getcwd()
    prefix = cwd.rstrip(os.sep) + os.sep
    if path.startswith(prefix) and os.path.isabs(path) and "/." not in path:
        return path[len(prefix) :].replace(os.sep, "/")  # the common case, without relpath
    ap = os.path.abspath(path)
    try:
        rel = os.path.relpath(ap, cwd)
    except ValueError:
        rel = ap
    if rel.startswith(os.pardir):
        rel = ap
    return rel.replace(os.sep, "/")


def module_name(path: str) -> str:
    """Dotted module name: walk up while the parent directory is a package (has ``__init__.py``)."""
    directory, base = os.path.split(path)
    stem = base.rsplit(".", 1)[0] if "." in base else base
    package = _package_of(directory)
    if stem == "__init__":
        return package or os.path.basename(directory) or "__init__"
    return f"{package}.{stem}" if package else stem


@functools.lru_cache(maxsize=4096)
def _package_of(directory: str) -> str:
    """Dotted package name of ``directory`` ("" when it is not a package)."""
    if not (
        os.path.isfile(os.path.join(directory, "__init__.py"))
        or os.path.isfile(os.path.join(directory, "__init__.pyi"))
    ):
        return ""
    parent = os.path.dirname(directory)
    name = os.path.basename(directory)
    if parent == directory:
        return name
    outer = _package_of(parent)
    return f"{outer}.{name}" if outer else name


class _Excluder:
    """Answers "is this path excluded" from config patterns and .gitignore files."""

    def __init__(self, config: Config, report: Callable[[str, str, int | None], None]) -> None:
        self.config = config
        self.config_root = os.path.abspath(config.root)
        self.report = report  # (absolute path, reason, line): a bad .gitignore or pattern
        self.config_patterns = config.exclude_patterns()
        for _, why in self.config_patterns.errors:
            report(os.path.abspath(config.source) if config.source else "<--exclude>",
                   f"exclude {why}", None)
        for pattern, _ in config.per_file_ignores:
            for _, why in compiled_pattern(pattern).errors:
                report(os.path.abspath(config.source) if config.source else "<config>",
                       f"per-file-ignores {why}", None)
        # .gitignore files: directory (abs) -> PatternList (patterns relative to that directory)
        self._gitignores: dict[str, PatternList | None] = {}
        self._git_roots: dict[str, str | None] = {}
        self._chains: dict[str, tuple[tuple[str, PatternList], ...]] = {}
        self.reason = ""  # what excluded the last path found excluded: "exclude" or ".gitignore"

    def _gitignore(self, directory: str) -> PatternList | None:
        if directory not in self._gitignores:
            pl = None
            gi = os.path.join(directory, ".gitignore")
            try:
                data = read_bytes(gi, limit=MAX_GITIGNORE_BYTES)
            except FileNotFoundError:
                data = None
            except SourceError as exc:  # a FIFO, a device, a huge file: the walk goes on without it
                self.report(gi, f"{exc}; its patterns are not applied", None)
                data = None
            except OSError as exc:
                self.report(gi, f"cannot read: {_os_reason(exc)}; its patterns are not applied", None)
                data = None
            if data is not None:
                pl = PatternList(data.decode("utf-8", errors="replace").splitlines())
                for lineno, why in pl.errors:
                    self.report(gi, why, lineno)
            self._gitignores[directory] = pl
        return self._gitignores[directory]

    def _git_root_of(self, directory: str) -> str | None:
        if directory not in self._git_roots:
            parent = os.path.dirname(directory)
            if os.path.exists(os.path.join(directory, ".git")):
                self._git_roots[directory] = directory
            elif parent == directory:
                self._git_roots[directory] = None
            else:
                self._git_roots[directory] = self._git_root_of(parent)
        return self._git_roots[directory]

    def _chain(self, directory: str) -> tuple[tuple[str, PatternList], ...]:
        """(directory, patterns) of every .gitignore from the git root down to ``directory``."""
        chain = self._chains.get(directory)
        if chain is None:
            root = self._git_root_of(directory)
            if root is None:
                chain = ()
            else:
                parent = os.path.dirname(directory)
                above = () if directory == root or parent == directory else self._chain(parent)
                pl = self._gitignore(directory)
                chain = above + ((directory, pl),) if pl is not None and pl.patterns else above
            self._chains[directory] = chain
        return chain

    def excluded(self, abspath: str, is_dir: bool, installed: bool | None = None) -> bool:
        """Only the path itself is tested; callers test ancestors (the walk prunes them)."""
        if self.config_patterns.patterns:
            rel = _rel(abspath, self.config_root)
            if rel is not None and self.config_patterns.match(rel, is_dir):
                self.reason = "exclude"
                return True
        if installed is None:
            installed = _installed(abspath)
        if self.config.respect_gitignore and not installed:
            # Deeper .gitignore files override shallower ones: the last verdict wins.
            verdict: bool | None = None
            for directory, pl in self._chain(os.path.dirname(abspath)):
                v = pl.match(abspath[len(directory) + 1 :].replace(os.sep, "/"), is_dir)
                if v is not None:
                    verdict = v
            if verdict:
                self.reason = ".gitignore"
                return True
        return False

    def excluded_with_ancestors(self, abspath: str, is_dir: bool, stop_at: str | None = None) -> bool:
        """For a file named on the command line: also test each ancestor directory."""
        if self.excluded(abspath, is_dir):
            return True
        installed = _installed(abspath)  # a repository's .gitignore (.venv/) says nothing about it
        d = os.path.dirname(abspath)
        top = self.config_root if stop_at is None else stop_at
        while d and d != os.path.dirname(d):
            if _rel(d, top) is None and _rel(d, self._git_root_of(d) or top) is None:
                break
            if self.excluded(d, True, installed):
                return True
            d = os.path.dirname(d)
        return False


def _installed(abspath: str) -> bool:
    """Installed code (``--package``): a repository's .gitignore (``.venv/``) says nothing about it."""
    abspath += os.sep
    return f"{os.sep}site-packages{os.sep}" in abspath or f"{os.sep}dist-packages{os.sep}" in abspath


def _rel(path: str, root: str) -> str | None:
    if path == root:
        return None
    prefix = root.rstrip(os.sep) + os.sep
    if not path.startswith(prefix):
        return None
    return path[len(prefix) :].replace(os.sep, "/")


def _is_default_excluded_dir(name: str, abspath: str) -> bool:
    if name in DEFAULT_EXCLUDE_DIRS or name.endswith(".egg-info"):
        return True
    return os.path.isfile(os.path.join(abspath, "pyvenv.cfg"))


def collect_files(paths: Iterable[str], config: Config, cwd: str | None = None) -> FileSet:
    """Every Python source file under ``paths`` that the scan should read, sorted, de-duplicated.

    Paths that do not exist are reported in ``errors`` (the CLI refuses them before this point).
    """
    cwd = cwd or os.getcwd()
    _package_of.cache_clear()  # the tree may have changed since the last scan in this process
    out = FileSet()
    seen_files: set[str] = set()  # real paths: one file reached twice is scanned once
    excluder = _Excluder(config, lambda path, why, line: out.errors.append(
        FileError(path if path.startswith("<") else display_path(path, cwd), why, line)))

    def add(abspath: str, real: str, top: str) -> None:
        """``top``: the folder named to the scan that the walk reached ``abspath`` from (a named
        file's own folder). A test or benchmark is told by the path below the project's root (the
        configuration's folder), whatever was named (``jitguard scan tests/``, a pre-commit hook's
        file names), else below ``top``: never by the folders above them."""
        if real in seen_files:
            return
        seen_files.add(real)
        rel = relative_posix(abspath, config.root) or os.path.relpath(abspath, top)
        out.files.append(SourceFile(abspath, display_path(abspath, cwd), module_name(abspath), exercise_path(rel)))

    def error(abspath: str, reason: str) -> None:
        out.errors.append(FileError(display_path(abspath, cwd), reason))

    def walk(directory: str, real_dir: str, top: str) -> None:
        """``real_dir``: the symlink-free path of ``directory`` (loop detection without stat); ``top``:
        the folder named to the scan."""
        try:
            entries = list(os.scandir(directory))
        except OSError as exc:
            error(directory, _os_reason(exc))
            return
        for entry in entries:
            name = entry.name
            abspath = os.path.join(directory, name)
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir()  # follows links; no syscall for plain entries
                is_file = not is_dir and entry.is_file()
                if is_link and not is_dir and not is_file:
                    os.stat(abspath)  # a link to something odd, or broken: find out which
            except OSError as exc:
                reason = _os_reason(exc)
                # A dangling link is reported only if it looks like a Python file; a loop always.
                if "loop" in reason or name.endswith(PYTHON_SUFFIXES):
                    error(abspath, reason)
                continue
            if is_dir:
                if _is_default_excluded_dir(name, abspath) or excluder.excluded(abspath, True):
                    out.excluded += 1
                    continue
                if is_link:
                    real = os.path.realpath(abspath)
                    if real == real_dir or real_dir.startswith(real.rstrip(os.sep) + os.sep):
                        error(abspath, "symlink loop: points back to an enclosing directory; "
                              "not followed")  # fmt: skip
                        continue
                else:
                    real = os.path.join(real_dir, name)
                walk(abspath, real, top)
            elif is_file and name.endswith(PYTHON_SUFFIXES):
                if excluder.excluded(abspath, False):
                    out.excluded += 1
                    continue
                add(abspath, os.path.realpath(abspath) if is_link else os.path.join(real_dir, name), top)
            elif name.endswith(TEMP_SUFFIX) and name.startswith("."):
                why = clear_stale_temp(abspath)  # left by a killed `jitguard fix --write`
                if why is None:
                    out.temps_removed.append(display_path(abspath, cwd))
                elif not why.startswith("not a jitguard"):
                    error(abspath, why)
            elif name.endswith(PYTHON_SUFFIXES) and not excluder.excluded(abspath, False):
                try:  # a FIFO, a device or a socket named *.py (or a link to one): said, not read
                    kind = file_kind(os.stat(abspath).st_mode)
                except OSError as exc:
                    kind = _os_reason(exc)
                error(abspath, f"{kind}, not a regular file; not read")

    for raw in paths:
        abspath = os.path.abspath(os.path.join(cwd, raw))
        try:
            st = os.stat(abspath)
        except OSError as exc:
            error(abspath, _os_reason(exc))
            continue
        if stat.S_ISDIR(st.st_mode):
            # A directory named explicitly is walked even if its name is a default exclude; one
            # that an exclude pattern or a .gitignore covers (itself or a folder above it) is not,
            # as for a named file: `cd third_party && jitguard scan .` honours `third_party/`.
            if excluder.excluded_with_ancestors(abspath, True):
                out.excluded += 1
                shown = display_path(abspath, cwd) if abspath != cwd else "."
                out.named_excluded.append(shown)
                out.excluded_by[shown] = excluder.reason
                continue
            walk(abspath, os.path.realpath(abspath), abspath)
        elif stat.S_ISREG(st.st_mode):
            if excluder.excluded_with_ancestors(abspath, False):
                out.excluded += 1
                out.named_excluded.append(display_path(abspath, cwd))
                out.excluded_by[display_path(abspath, cwd)] = excluder.reason
                continue
            add(abspath, os.path.realpath(abspath), os.path.dirname(abspath))  # any suffix: the user asked for this file
        else:
            error(abspath, f"{file_kind(st.st_mode)}, not a regular file or directory; not read")
    out.files.sort(key=lambda f: f.display)
    return out


def _os_reason(exc: OSError) -> str:
    import errno

    if exc.errno == errno.ELOOP:
        return "symlink loop: too many levels of symbolic links"
    if exc.errno == errno.ENOENT:
        return "no such file or directory" + (" (dangling symlink)" if exc.filename else "")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or str(exc)


def package_paths(name: str) -> list[str]:
    """Source directories and files of an installed distribution (``--package NAME``).

    Uses the distribution's RECORD; for editable installs (no sources in RECORD) falls back to the
    import locations of its top-level packages. Raises ``LookupError`` with a readable message.
    """
    import importlib.metadata as md
    import importlib.util

    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        raise LookupError(f"no installed distribution named {name!r}") from None
    tops: list[str] = []
    files = [f for f in (dist.files or []) if str(f).endswith(".py") and ".." not in f.parts]
    for f in files:
        top = f.parts[0]
        if top.endswith((".dist-info", ".egg-info", ".data")) or top == "__pycache__":
            continue
        if top.startswith(("__editable__", "_virtualenv")):  # import hooks, not the sources
            continue
        if top not in tops:
            tops.append(top)
    roots: list[str] = []
    for top in tops:
        loc = str(dist.locate_file(top))
        if os.path.exists(loc):
            roots.append(loc)
    if roots:
        return roots
    # Editable install: ask the import system where the top-level packages live.
    names = (dist.read_text("top_level.txt") or "").split()
    if not names:
        names = [
            pkg
            for pkg, dists in md.packages_distributions().items()
            if dist.metadata["Name"] in dists
        ]
    if not names:
        names = [name.replace("-", "_")]
    for pkg in names:
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        if spec.submodule_search_locations:
            roots.extend(spec.submodule_search_locations)
        elif spec.origin and spec.origin.endswith(".py"):
            roots.append(spec.origin)
    # setuptools' editable finder may map subpackages to folders outside their parent
    # (package-dir: jitguard.kernels -> kernels/): those folders are the distribution's too
    for extra in _editable_mapping(dist).values():
        extra = os.path.abspath(extra)
        if os.path.exists(extra) and not any(
                extra == r or extra.startswith(os.path.abspath(r).rstrip(os.sep) + os.sep) for r in roots):
            roots.append(extra)
    if not roots:
        raise LookupError(f"distribution {name!r} has no Python sources that jitguard can find")
    return roots


def _editable_mapping(dist) -> dict[str, str]:
    """``MAPPING`` (package -> folder) of setuptools' editable finder in ``dist``'s RECORD, read
    as a literal (never imported); {} when there is none."""
    import ast

    for f in dist.files or []:
        base = f.name
        if not (base.startswith("__editable__") and base.endswith("_finder.py")):
            continue
        try:
            tree = ast.parse(f.read_text() or "")
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
            continue
        for node in tree.body:
            target = node.target if isinstance(node, ast.AnnAssign) else (
                node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
            if isinstance(target, ast.Name) and target.id == "MAPPING" and node.value is not None:
                try:
                    mapping = ast.literal_eval(node.value)
                except ValueError:
                    continue
                if isinstance(mapping, dict):
                    return {str(k): str(v) for k, v in mapping.items() if isinstance(v, str)}
    return {}


def excluded_note(path: str, reason: str, config_source: str | None, verb: str = "read") -> str:
    """Why a path the user named was not read, and the switch that changes it."""
    if reason == ".gitignore":
        return (f"{path} was not {verb}: a .gitignore excludes it "
                "(--no-respect-gitignore reads it anyway)")
    where = f" (in {config_source} or --exclude)" if config_source else " (--exclude)"
    return (f"{path} was not {verb}: an exclude pattern{where} covers it; drop the pattern, "
            "or read it anyway with --isolated")
