"""Run a scan: files -> prefilter -> extract (parallel, cached) -> link -> select/ignore -> result.

``scan_paths`` is the one entry point (``jitguard scan`` and ``jitguard fix`` call it). It never
raises for a problem about a file: such a file becomes a ``FileError`` and the scan goes on. A bug in
jitguard while analyzing a file becomes an entry in ``internal_errors`` (the CLI exits 2); a bug while
linking raises ``InternalError``.
"""
from __future__ import annotations

import os
import re
import stat
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from jitguard.config import Config
from jitguard.findings import FileError, Finding
from jitguard.static.cache import (
    CacheUnavailable,
    FactsCache,
    content_digest,
    default_cache_dir,
    dump_entry,
    load_entry,
    write_entry,
)
from jitguard.static.collector import frozen, no_collections, rare_collections
from jitguard.static.errors import SourceError
from jitguard.static.files import SourceFile, collect_files
from jitguard.static.source import read_bytes

# A scan of an unchanged tree ends at the tree memo: what only the analysis needs (the engine,
# worker processes, the prefilter) is imported past that point.
if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor


class InternalError(Exception):
    """A jitguard bug that stopped the scan (not a problem with the scanned code)."""


@dataclass
class ScanResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)  # files that could not be analyzed
    internal_errors: list[FileError] = field(default_factory=list)  # jitguard bugs, per file
    files_scanned: int = 0  # Python files found after excludes
    files_excluded: int = 0  # files and directories that excludes or .gitignore skipped
    named_excluded: list[str] = field(default_factory=list)  # files named by the user, excluded
    temps_removed: list[str] = field(default_factory=list)  # stale temp files of a killed fix
    excluded_by: dict[str, str] = field(default_factory=dict)  # each of those: "exclude" | ".gitignore"
    files_analyzed: int = 0  # files with facts (parsed now or read from the cache)
    files_parsed: int = 0  # files parsed by LibCST in this run
    files_skipped: int = 0  # files the prefilter ruled out (no kernels, no kernel names)
    cache_hits: int = 0
    files_vouched: int = 0  # files whose digest the stat-keyed index gave (not read if the tree memo hit)
    suppressed: int = 0  # findings dropped by inline comments, select/ignore, per-file-ignores
    config: str | None = None  # the configuration file the settings came from
    warnings: list[FileError] = field(default_factory=list)  # e.g. ignore[...] naming no rule
    below_confidence: int = 0  # findings less sure than the configured confidence level
    kernels: int = 0
    launches: int = 0
    jobs: int = 1
    duration_s: float = 0.0
    facts: list[Any] = field(default_factory=list, repr=False)  # FileFacts, for the fixer
    internal_tracebacks: list[tuple[str, str]] = field(default_factory=list, repr=False)
    # set by scan --baseline / --diff (jitguard/cli/ci_options.py)
    baselined: int = 0  # findings the baseline holds (not reported)
    baseline_stale: list[Any] = field(default_factory=list)  # baseline entries that matched nothing
    outside_diff: int = 0  # findings off the lines changed since diff_base (not reported)
    diff_base: str | None = None

    @property
    def all_errors(self) -> list[FileError]:
        return sorted(self.errors + self.internal_errors, key=lambda e: (e.path, e.line or 0))


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# --- per-file extraction (runs in workers) ---------------------------------------------------

def _extract_job(job: tuple, pooled: bool = False) -> tuple:
    """Extract one file. Returns ("facts", FileFacts) | ("error", message, line) |
    ("internal", message, traceback); ``pooled`` (a worker process): ("pickled", the cache entry's
    body) for facts, which the scan unpickles (``_facts_of``): the facts are pickled once, for the
    entry and the answer. Writes the cache entry itself (in parallel workers the pickling then runs
    in parallel too); only problems about the file are cached."""
    from jitguard.static import extract
    from jitguard.static.errors import SourceError

    display, module, data, digest, varying, stable, cache_path, key = job[:8]
    calls_of = job[8] if len(job) > 8 else None
    returns_of = job[9] if len(job) > 9 else None
    handed_of = job[10] if len(job) > 10 else None
    try:
        extra = {"calls_of": frozenset(calls_of)} if calls_of is not None else {}
        if returns_of:
            extra["returns_of"] = frozenset(returns_of)
        if handed_of:
            extra["handed_of"] = frozenset(handed_of)
        with no_collections():  # the file's tree goes by reference counts (collector.py)
            facts = extract.extract_file(
                display, data, module, varying_names=frozenset(varying), stable_names=frozenset(stable),
                digest=digest, **extra,
            )
        out: tuple = ("facts", facts)
        entry: dict | None = {"facts": facts} if cache_path or pooled else None
    except RecursionError:
        out = ("error", "too deeply nested for the parser (recursion limit); not analyzed", None)
        entry = {"error": {"message": out[1], "line": None}}
    except MemoryError:
        return ("error", "out of memory while parsing this file; not analyzed", None)
    except SourceError as exc:
        message = str(getattr(exc, "message", None) or exc)
        out = ("error", message, getattr(exc, "line", None))
        entry = {"error": {"message": message, "line": out[2]}}
    except Exception as exc:
        import traceback

        tb = traceback.format_exc(limit=-6)
        return ("internal", f"{type(exc).__name__}: {exc}", tb)
    if entry is not None:
        try:
            body = dump_entry({"key": key, **entry})
        except Exception:  # facts that don't pickle: answered as they are, not cached
            return out
        if cache_path:
            write_entry(cache_path, body)
        if pooled and out[0] == "facts":
            return ("pickled", body)
    return out


def _pooled_job(job: tuple) -> tuple:
    return _extract_job(job, pooled=True)


def _facts_of(out: tuple) -> tuple:
    """A worker's answer with its facts unpickled: ("facts", FileFacts), or as it came."""
    if out[0] != "pickled":
        return out
    entry = load_entry(out[1])
    if not isinstance(entry, dict) or "facts" not in entry:
        return ("internal", "a worker's answer did not unpickle", "")
    return ("facts", entry["facts"])


class _Workers:
    """The worker processes of one scan, started on the first batch large enough to share and
    kept for the later phases (a pool per phase forked the workers five times on vLLM)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool: ProcessPoolExecutor | None = None
        self._failed = jobs <= 1

    def pool(self) -> ProcessPoolExecutor | None:
        if self._pool is None and not self._failed:
            from concurrent.futures import ProcessPoolExecutor

            try:
                self._pool = ProcessPoolExecutor(
                    max_workers=self.jobs, mp_context=_mp_context(), initializer=_ignore_sigint,
                )  # fmt: skip
            except OSError:
                self._failed = True  # no processes available: work in-process
        return self._pool

    def submit(self, fn, args: dict) -> dict:
        """{future: key} of ``fn(args[key])`` for every key. The workers are forked on the first
        submit: the parent's objects (the loaded engine) are frozen then, so that the workers'
        garbage collections neither traverse them nor copy their pages on write."""
        assert self._pool is not None
        with frozen():
            return {self._pool.submit(fn, a): key for key, a in args.items()}

    def broken(self) -> None:
        self.close()
        self._failed = True

    def close(self) -> None:
        """Workers (which ignore SIGINT) finish the file they are on; queued work is dropped."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.shutdown(wait=True, cancel_futures=True)


# --- progress on a terminal ------------------------------------------------------------------

class _Progress:
    def __init__(self, enabled: bool, stream: Any = None) -> None:
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._last = 0.0
        self._shown = False

    def update(self, phase: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        self.stream.write(f"\r\x1b[Kjitguard: {phase} {done}/{total} files")
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self.enabled and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


# --- the scan --------------------------------------------------------------------------------

def scan_paths(
    paths: Sequence[str],
    config: Config | None = None,
    *,
    jobs: int | None = None,
    cache_dir: str | None = None,
    use_cache: bool = True,
    progress: bool = False,
    keep_facts: bool = False,
) -> ScanResult:
    """Scan ``paths`` (files or directories) and return findings after select/ignore."""
    with rare_collections():  # collections cost CPU and free next to nothing here (collector.py)
        return _scan_paths(paths, config, jobs=jobs, cache_dir=cache_dir, use_cache=use_cache,
                           progress=progress, keep_facts=keep_facts)


def _scan_paths(
    paths: Sequence[str],
    config: Config | None,
    *,
    jobs: int | None,
    cache_dir: str | None,
    use_cache: bool,
    progress: bool,
    keep_facts: bool,
) -> ScanResult:
    t0 = time.perf_counter()
    config = config or Config()
    jobs = jobs if jobs and jobs > 0 else default_jobs()
    result = ScanResult(jobs=jobs, config=config.source)
    show = _Progress(progress)

    fileset = collect_files(paths, config)
    result.errors.extend(fileset.errors)
    result.files_scanned = len(fileset.files)
    result.files_excluded = fileset.excluded
    result.named_excluded = list(fileset.named_excluded)
    result.temps_removed = list(fileset.temps_removed)
    result.excluded_by = dict(fileset.excluded_by)

    cache = None
    if use_cache:
        where = cache_dir or default_cache_dir()
        try:
            cache = FactsCache(where, config.facts_key())
        except CacheUnavailable as exc:  # another user's directory: scan without it, say why
            result.warnings.append(FileError(where, f"cache not used: {exc}"))
        else:
            cache.maybe_prune()

    # Every file's content digest: from the stat-keyed index where the file's stat vouches for it
    # (its bytes are read only if the tree memo below misses), else from its bytes, read once.
    index = cache.digest_index([os.path.abspath(p) for p in paths]) if cache else None
    contents: dict[str, tuple[SourceFile, bytes | None, str]] = {}
    for sf in fileset.files:
        st = None
        if index is not None:
            try:
                st = os.stat(sf.path)
            except OSError:
                pass  # read_bytes says why
            if st is not None and stat.S_ISREG(st.st_mode):
                digest = index.digest(sf.path, st)
                if digest is not None:
                    result.files_vouched += 1
                    contents[sf.display] = (sf, None, digest)
                    continue
        data = _read(sf, result)
        if data is not None:
            digest = content_digest(data)
            contents[sf.display] = (sf, data, digest)
            if st is not None and stat.S_ISREG(st.st_mode):
                index.record(sf.path, st, digest)
    if index is not None:
        index.save()

    # The whole tree unchanged since a previous scan (same files, contents, engine, config):
    # the linked findings are served from one cache entry, nothing is parsed or linked.
    tree_key = None
    if cache is not None and not keep_facts:
        tree_key = cache.tree_key(_tree_items(contents))
        memo_entry = cache.load_tree(tree_key)
        if memo_entry is not None and _apply_tree(result, memo_entry, config):
            result.cache_hits = result.files_analyzed
            result.files_skipped = len(contents) - result.files_analyzed
            return _finish(result, result.findings, config, t0)

    # The analysis needs the bytes: those the index vouched for are read now (a file changed since
    # its stat was taken is analyzed as it is now, under its new digest).
    missing = [d for d, (_, data, _) in contents.items() if data is None]
    moved = False
    for d in missing:
        sf, _, digest = contents[d]
        data = _read(sf, result)
        now = content_digest(data) if data is not None else None
        if now != digest:
            index.forget(sf.path)
            moved = True
        if data is None:
            del contents[d]
        else:
            contents[d] = (sf, data, now)
    if moved:  # the index forgot what changed; the memo is stored under what is analyzed
        index.save()
        if tree_key is not None:
            tree_key = cache.tree_key(_tree_items(contents))
    walk_errors = len(result.errors)  # problems found before analysis: never part of a memo

    from jitguard.static import extract as _engine  # noqa: F401  (before the workers fork: they share it)
    from jitguard.static import prefilter
    from jitguard.static.facts import FileFacts
    from jitguard.static.names import module_prefixes

    facts_by_path: dict[str, Any] = {}
    # file -> the (function, element) whose returns its facts summarize for other modules (returns-elsewhere)
    returns_asked: dict[str, tuple] = {}
    # file -> the kernels of other modules it imports and hands to a function or binds to a grid
    handed_asked: dict[str, tuple[str, ...]] = {}
    varying = tuple(sorted(config.varying_names))
    stable = tuple(sorted(config.stable_names))

    def extract(displays: list[str], phase: str, calls_of: frozenset[str] | None = None) -> None:
        todo: list[tuple[str, str | None]] = []  # (display, cache key)
        salt = "" if calls_of is None else "\0calls\0" + "\0".join(sorted(calls_of))
        for d in displays:
            sf, data, digest = contents[d]
            asked = returns_asked.get(d)
            rsalt = "\0returns\0" + "\0".join(f"{q}:{i}" for q, i in asked) if asked else ""
            if handed_asked.get(d):
                rsalt += "\0handed\0" + "\0".join(handed_asked[d])
            key = cache.key(d, sf.module, digest + salt + rsalt) if cache else None
            entry = cache.get(key) if cache and key else None
            if entry is not None and _apply_entry(d, entry):
                result.cache_hits += 1
                continue
            todo.append((d, key))
        if not todo:
            return
        todo.sort(key=lambda t: -len(contents[t[0]][1]))  # largest first: better load balance
        jobs_args = {
            d: (d, contents[d][0].module, contents[d][1], contents[d][2], varying, stable,
                cache.entry_path(key) if cache and key else None, key,
                tuple(sorted(calls_of)) if calls_of is not None else None, returns_asked.get(d), handed_asked.get(d))
            for d, key in todo
        }  # fmt: skip
        done = 0
        total = len(todo)
        show.update(phase, 0, total)

        def finish(d: str, out: tuple) -> None:
            nonlocal done
            done += 1
            result.files_parsed += 1
            if out[0] == "facts":
                keep(d, out[1])
            elif out[0] == "error":
                result.errors.append(FileError(d, out[1], out[2]))
            else:
                result.internal_errors.append(
                    FileError(d, f"internal error (please report): {out[1]}")
                )
                result.internal_tracebacks.append((d, out[2]))
            show.update(phase, done, total)

        remaining = list(jobs_args)
        pool = workers.pool() if total >= 4 else None
        if pool is not None:
            from concurrent.futures import as_completed  # with the pool only: -j 1 does without them
            from concurrent.futures.process import BrokenProcessPool

            try:
                futures = workers.submit(_pooled_job, {d: jobs_args[d] for d in remaining})
                for fut in as_completed(futures):
                    d = futures[fut]
                    finish(d, _facts_of(fut.result()))
                    remaining.remove(d)
            except BrokenProcessPool:
                workers.broken()  # a worker died (killed, or a crash in native code): finish in-process
            except BaseException:
                workers.close()  # Ctrl-C: drop queued work
                raise
        for d in list(remaining):
            finish(d, _extract_job(jobs_args[d]))

    def _apply_entry(d: str, entry: dict) -> bool:
        """Record a cached entry; False when it can't be used (then the file is parsed again)."""
        if "error" in entry:
            err = entry["error"]
            if not isinstance(err, dict) or not isinstance(err.get("message"), str):
                return False
            result.errors.append(FileError(d, err["message"], err.get("line")))
            return True
        facts = entry["facts"]
        if not isinstance(facts, FileFacts):  # a corrupt or outdated cache entry: rebuild it
            return False
        keep(d, facts)
        return True

    def keep(d: str, facts: FileFacts) -> None:
        """Record a file's facts with what the scan knows of the file beyond its bytes."""
        facts.digest = contents[d][2]  # what a fix decided on these facts must find on disk
        facts.exercise = contents[d][0].exercise
        facts_by_path[d] = facts

    workers = _Workers(min(jobs, len(contents)))  # one pool of worker processes for every phase (forked once)
    try:
        # Phase 1: files that may define kernels.
        phase1 = [d for d, (_, data, _) in contents.items() if prefilter.may_define_kernels(data)]
        extract(phase1, "analyzing", calls_of=frozenset())
        phase1_set = set(phase1)

        # The words of every file, for phase 4's tests of many names over the tree and its method
        # lookups: on vLLM those regex passes took 3.6 s, the index 1.3 s and the tests of the files
        # it leaves 0.6 s; phase 2's one pass costs less than the index on kernel-dense trees
        # (liger-kernel: 0.01 s against 0.06 s), so it keeps its direct test. Built on first use,
        # after the workers were forked: they never hold it.
        words: list = []

        def word_index(build: bool = True):
            if not words and build:
                words.append(prefilter.WordIndex((d, data) for d, (_, data, _) in contents.items()))
            return words[0] if words else None

        def within(matcher, d: str, memo: list):
            """``matcher``, or one of the names file ``d`` holds (it answers alike there); None when
            none can match ``d`` (``memo``: [] or [file -> matcher], made on first use)."""
            if matcher.few and not words:  # few names and no index yet: a substring pass per name
                return matcher if matcher.may_match(contents[d][1]) else None
            if not memo:
                memo.append(matcher.within(word_index()))
            return matcher if memo[0] is None else memo[0].get(d)

        # Phase 2: other files that launch a kernel found in phase 1 (cross-module launches).
        names = set()
        for facts in facts_by_path.values():
            names.update(_kernel_names(facts))
        matcher = prefilter.NameMatcher(names)
        done_set = set(phase1)
        rest = [d for d in contents if d not in done_set]
        memo = cache.load_memo(matcher.digest) if cache and rest else {}
        memo_changed = False
        phase2 = []
        for d in rest:
            digest = contents[d][2]
            hit = memo.get(digest)
            if hit is None:
                hit = matcher.launches_named_kernel(contents[d][1])
                memo[digest] = hit
                memo_changed = True
            if hit:
                phase2.append(d)
        if cache and memo_changed:
            cache.save_memo(matcher.digest, memo)
        extract(phase2, "analyzing launches in", calls_of=frozenset())
        done_set.update(phase2)

        # Phase 2b: files that import a kernel and hand it to a function (launch(k, grid, n=n)): read
        # again with those names as kernels (one bound to its grid, g = k[grid], needs no second read).
        for d in sorted(facts_by_path):
            handed = matcher.handed_imports(contents[d][1])
            if handed:
                handed_asked[d] = tuple(sorted(handed))
        extract(sorted(handed_asked), "analyzing handed kernels in", calls_of=frozenset())

        # Phase 3: modules that unresolved launch targets go through (re-exports, aliases), until
        # nothing new: "pkg.k" with pkg/__init__.py doing "from .ops import k". And the modules of
        # the functions kernels are handed to (launch(k, grid, n=...)), where no kernel is defined:
        # they are forwarders if they launch their kernel parameter (link.py binds those launches).
        by_module: dict[str, str] = {}
        for d, (sf, _, _) in contents.items():
            by_module.setdefault(sf.module, d)
        for _ in range(8):
            known = {k.qualname for f in facts_by_path.values() for k in f.kernels}
            wanted: list[str] = []
            for f in list(facts_by_path.values()):
                for launch in f.launches:
                    # a kernel's name handed to a function (what else is handed is no kernel)
                    handed = launch.via and any(t in known or t.rsplit(".", 1)[-1] in names for t in launch.targets)
                    for target in launch.targets:
                        if target in known or (launch.via and not handed):
                            continue
                        for prefix in module_prefixes(target):
                            d = by_module.get(prefix)
                            if d is not None and d not in done_set and d not in wanted:
                                # it must at least name a kernel (an import or alias of one)
                                if matcher(contents[d][1]):
                                    wanted.append(d)
                    for via in launch.via if handed else ():
                        d = next((by_module[p] for p in module_prefixes(via) if p in by_module), None)
                        if d is not None and d not in done_set and d not in wanted \
                                and prefilter.may_launch(contents[d][1]):
                            wanted.append(d)
            if not wanted:
                break
            extract(wanted, "analyzing re-exports in", calls_of=frozenset())
            done_set.update(wanted)

        # Phase 3b: modules whose functions launch arguments rest on through what they return at one
        # call (returns-elsewhere): those files are read (again) to summarize these functions.
        from jitguard.static import link as _link

        try:
            refs_r = _link.return_refs(list(facts_by_path.values()))
        except Exception as exc:  # a jitguard bug: said as one, the scan goes on without this phase
            import traceback

            result.internal_errors.append(FileError(
                "<returns in other modules>", f"internal error (please report): {type(exc).__name__}: {exc}"))
            result.internal_tracebacks.append(("<returns in other modules>", traceback.format_exc(limit=-6)))
            refs_r = set()
        from jitguard.static.names import reexport

        order = lambda r: (r[0], -1 if r[1] is None else r[1])  # noqa: E731
        seen_r = set(refs_r)
        for _ in range(_link._REEXPORTS):
            wanted_r: dict[str, set] = {}
            for fq, item in sorted(refs_r, key=order):
                for mod, qual in _link.return_modules(fq, by_module):
                    wanted_r.setdefault(by_module[mod], set()).add((qual, item))
                    break
            grown = [d for d, asked_here in wanted_r.items() if not asked_here <= set(returns_asked.get(d, ()))]
            for d in grown:
                returns_asked[d] = tuple(sorted(set(returns_asked.get(d, ())) | wanted_r[d], key=order))
            if not grown:
                break
            extract(sorted(grown), "analyzing returns in", calls_of=frozenset())
            done_set.update(grown)
            # pkg.f where pkg/__init__.py imports f from .ops: ask pkg/ops.py next
            modules = {f.module: f for f in facts_by_path.values() if f.module}
            refs_r = {(t, item) for fq, item in refs_r if (t := reexport(fq, modules)) is not None and t != fq}
            refs_r -= seen_r
            seen_r |= refs_r

        # Phase 4: callers of entry functions, i.e. wrappers whose launch arguments rest on a parameter
        # no caller in their own module passes (pkg/layer.py calling pkg/ops.py's wrapper with
        # x.shape[0]); then their callers, up to three levels. Files not analyzed yet that call such a
        # function (and packages' __init__.py that re-export one) are read, recording the calls of
        # those names (FileFacts.calls): what the parameter gets there. Phases 1-3 record no calls
        # (recording every imported call there doubled the cold scan on vLLM for no finding). A method
        # of a class is followed the same way through its calls obj.name(...) on objects of unknown
        # class, when few files define and call that name (_Methods).
        methods = None
        recorded: dict[str, frozenset[str]] = {}  # file -> the names whose calls its facts record
        asked: set[tuple] = set()
        refs = None
        fresh: list = list(facts_by_path.values())
        for _ in range(3):
            try:
                registry = _link.op_registry(facts_by_path.values())
                refs = _link.launch_entry_refs(fresh) if refs is None else _link.caller_entry_refs(fresh, refs, registry)
            except Exception as exc:  # a jitguard bug: said as one, the scan goes on without phase 4
                import traceback

                result.internal_errors.append(FileError(
                    "<callers in other modules>", f"internal error (please report): {type(exc).__name__}: {exc}"))
                result.internal_tracebacks.append(("<callers in other modules>", traceback.format_exc(limit=-6)))
                break
            refs -= asked
            asked |= refs
            names = frozenset(r.function.rsplit(".", 1)[-1] for r in refs)
            if not names:
                break
            methods = methods or _Methods(contents, by_module, word_index)
            # a layout asked of callers (p.shape[i] / p.stride(i)) is read from the files read anyway for
            # values (their calls of these names are recorded): reading more files for layouts cost ~20% of
            # the cold scan on vLLM for one finding. A guessed leading dim that callers elsewhere may fix
            # (rule caller-fixed-leading) is asked of the files calling it, as values are
            plain = [r for r in refs if not methods.is_method(r) and (r.accessor is None or _link.leading_ref(r))]
            # a call of f is "f(" (f imported) or "<its module's name>.f(" (ops.f), no object's method
            # (module names come from file names, which may hold bytes that are not UTF-8)
            quals = frozenset(r.function.split(".")[-2].encode("utf-8", "surrogateescape")
                              for r in plain if r.function.count(".") >= 1)
            matcher = prefilter.NameMatcher(r.function.rsplit(".", 1)[-1] for r in plain)
            # functions registered as PyTorch custom ops are called as torch.ops.<ns>.<op>(...)
            ops = prefilter.NameMatcher(op for r in refs if r.accessor is None
                                        for _, op in registry.get(r.function, ()))
            # files that call them: not parsed yet, parsed in phases 2-3 (for launches of kernels of
            # other files, recording no calls then), or read at an earlier level for other names: such
            # a file is parsed again, recording these calls and those asked of it before. Files that
            # define kernels (phase 1) are parsed again only for calls of methods (below): re-reading
            # them all for plain calls cost more than it found.
            wanted = []
            if plain or ops.names:
                by_name: list = []
                by_op: list = []
                for d, (_, data, _) in contents.items():
                    if d in phase1_set or names <= recorded.get(d, frozenset()) or b"import" not in data:
                        continue
                    calls = within(matcher, d, by_name)
                    if calls is not None and (calls.calls_named(data, quals)
                                              or (d.endswith("__init__.py") and calls(data))):
                        wanted.append(d)
                        continue
                    op = within(ops, d, by_op) if b"ops." in data else None
                    if op is not None and op(data):
                        wanted.append(d)
            # methods called through objects of unknown class (obj.meth(...)): the files calling a method
            # of that name
            chosen = set(wanted)
            for meth in sorted(methods.follow(refs)):
                for d in methods.callers[meth]:
                    if d not in chosen and not names <= recorded.get(d, frozenset()):
                        chosen.add(d)
                        wanted.append(d)
            if not wanted:
                break
            groups: dict[frozenset, list[str]] = {}
            for d in wanted:
                recorded[d] = recorded.get(d, frozenset()) | names
                groups.setdefault(recorded[d], []).append(d)
            for calls_of, group in groups.items():
                extract(group, "analyzing callers in", calls_of=calls_of)
            done_set.update(wanted)
            fresh = [facts_by_path[d] for d in wanted if d in facts_by_path]
    finally:
        workers.close()
    show.clear()

    result.files_skipped = len(contents) - len(done_set)
    contents.clear()
    words.clear()  # before linking, which holds every file's facts

    ordered = [facts_by_path[d] for d in sorted(facts_by_path)]
    result.files_analyzed = len(ordered)
    result.kernels = sum(len(f.kernels) for f in ordered)
    counts: dict[str, int] = {}
    try:
        extra = {"method_defs": methods.defs} if methods is not None and methods.defs else {}
        hidden: list[Finding] = []
        if any(f.suppressions for f in ordered):
            extra["suppressed"] = hidden
        findings = _link.link(
            ordered, varying_names=config.varying_names, stable_names=config.stable_names, counts=counts, **extra
        )
        result.launches = counts["launches"]
    except InternalError:
        raise
    except Exception as exc:
        import traceback

        raise InternalError(
            f"while linking {len(ordered)} files: {type(exc).__name__}: {exc}\n"
            + traceback.format_exc(limit=-6)
        ) from exc

    inline_hidden = [f for f in hidden if config.is_enabled(f.code, config.ignores_for_path(f.path))]
    result.suppressed += len(inline_hidden)
    result.warnings.extend(suppression_warnings(ordered))
    if tree_key is not None and cache is not None and not result.internal_errors:
        cache.save_tree(tree_key, {
            "findings": [f.to_dict() for f in findings],
            "suppressed": [f.to_dict() for f in hidden],
            "warnings": [w.to_dict() for w in result.warnings],
            "errors": [e.to_dict() for e in result.errors[walk_errors:]],
            "files_analyzed": result.files_analyzed,
            "kernels": result.kernels,
            "launches": result.launches,
        })
    if keep_facts:
        result.facts = ordered
    return _finish(result, findings, config, t0)


def _read(sf: SourceFile, result: ScanResult) -> bytes | None:
    """The bytes of ``sf``, or None with the reason in ``result.errors`` (a FIFO, /dev/zero, a
    2 GiB file, a permission denied: an error each)."""
    try:
        data = read_bytes(sf.path)
    except SourceError as exc:
        result.errors.append(FileError(sf.display, str(exc)))
        return None
    except OSError as exc:
        from jitguard.static.files import _os_reason

        result.errors.append(FileError(sf.display, f"cannot read: {_os_reason(exc)}"))
        return None
    return data




class _Methods:
    """Methods whose calls through objects of unknown class (``obj.name(...)``) phase 4 follows.
    ``defs``: name -> the files defining a function of that name (link.py binds a call to the
    definition nearest to it in the tree); ``callers``: name -> the files calling ``.name(``. A name
    defined or called in too many files is too common to bind by name: it gets no entry."""

    def __init__(self, contents: dict, by_module: dict, word_index) -> None:
        self.contents = contents
        self.by_module = by_module
        self.word_index = word_index  # (build: bool) -> the tree's WordIndex, or None if not built
        self.defs: dict[str, list[str]] = {}
        self.callers: dict[str, list[str]] = {}
        from jitguard.static.provenance.rules import limit

        # A method name defined in more files than this, or called as obj.name( in more, is too
        # common to bind calls through objects of unknown class to one definition by name.
        self.max_defs = limit("method-by-name", "defining_files")
        self.max_callers = limit("method-by-name", "calling_files")

    def _files_with(self, name: str, index) -> tuple[list[str], list[str]]:
        """(the files defining a function ``name``, the files calling ``.name(``), in tree order;
        ([], []) for a name defined or called in more files than the limits allow (the files past
        the limit are not searched)."""
        if not name.isascii():
            return [], []  # a def or call the byte patterns below never match
        word = name.encode()
        if index is None:
            mention = [d for d, (_, data, _) in self.contents.items() if word in data]
        else:
            named = index.naming([name]) or ()
            mention = [d for d in self.contents if d in named]
        from jitguard.static.prefilter import after_keyword

        at = re.compile(re.escape(word) + rb"[ \t]*\(")
        found: list[list[str]] = []
        for keyword, most in ((b"def", self.max_defs), (b".", self.max_callers)):
            files: list[str] = []
            for d in mention:
                if after_keyword(self.contents[d][1], at, keyword):
                    files.append(d)
                    if len(files) > most:
                        return [], []
            found.append(files)
        return found[0], found[1]

    def is_method(self, ref) -> bool:
        """``module.Class.name``: a method of a module-level class (not a module-level function)."""
        parts = ref.function.split(".")
        return len(parts) >= 3 and ".".join(parts[:-1]) not in self.by_module and ".".join(parts[:-2]) in self.by_module

    def follow(self, refs) -> set[str]:
        """The names of the methods among ``refs`` (entry parameters whose function is
        ``module.Class.name``) that can be followed."""
        out: set[str] = set()
        asked = [name for ref in refs if self.is_method(ref)
                 for name in [ref.function.rsplit(".", 1)[-1]]
                 if not name.startswith("__") and name.isidentifier()]
        new = sorted({n for n in asked if n not in self.defs})
        from jitguard.static.prefilter import FEW_NAMES

        index = self.word_index(len(new) > FEW_NAMES)  # few: a substring pass per name
        for name in new:
            self.defs[name], self.callers[name] = self._files_with(name, index)
        for name in asked:
            if self.defs[name]:
                out.add(name)
        return out


def _tree_items(contents: dict) -> list[tuple[str, str, str]]:
    """What the tree memo is keyed by, per file: its display path, its module (and whether it is a test
    or benchmark, which the findings rest on: rule test-callers) and its content digest."""
    return [(d, sf.module + "\0exercise" * sf.exercise, digest) for d, (sf, _, digest) in sorted(contents.items())]


def _apply_tree(result: ScanResult, entry: dict, config: Config) -> bool:
    """Fill ``result`` from a tree memo; False if the entry is unusable (then scan normally)."""
    try:
        findings = [Finding.from_dict(f) for f in entry["findings"]]
        errors = [FileError(**e) for e in entry["errors"]]
        analyzed, kernels, launches = (int(entry[k]) for k in ("files_analyzed", "kernels",
                                                              "launches"))
        hidden = [Finding.from_dict(f) for f in entry.get("suppressed", [])]
        warnings = [FileError(**w) for w in entry.get("warnings", [])]
    except (KeyError, TypeError, ValueError):
        return False
    # Errors found while walking/reading this time are already in result.errors.
    result.errors.extend(errors)
    result.findings = findings
    result.warnings.extend(warnings)
    result.suppressed += sum(1 for f in hidden if config.is_enabled(f.code, config.ignores_for_path(f.path)))
    result.files_analyzed, result.kernels, result.launches = analyzed, kernels, launches
    return True


def suppression_warnings(facts: list) -> list[FileError]:
    """A ``# jitguard: ignore[...]`` naming a code no rule has or starts (``JG0001``) silences
    nothing: one warning each, as ruff warns of unknown codes in ``# noqa``."""
    from jitguard.static.rules import RULES

    out: list[FileError] = []
    for f in facts:
        for line, codes in sorted((f.suppressions or {}).items()):
            unknown = [c for c in codes if not any(r.startswith(c) for r in RULES)]
            if unknown:
                out.append(FileError(
                    f.path, f"`# jitguard: ignore[...]` names {', '.join(map(repr, unknown))}, "
                    f"which no rule has (codes: {min(RULES)}-{max(RULES)}): it silences nothing",
                    int(line)))
    return out


def _finish(result: ScanResult, findings: list[Finding], config: Config, t0: float) -> ScanResult:
    """Apply select/ignore/per-file-ignores, de-duplicate and sort."""
    kept: list[Finding] = []
    seen = set()
    for f in findings:
        if not config.is_enabled(f.code, config.ignores_for_path(f.path)):
            result.suppressed += 1
            continue
        if not config.reports(f.confidence):
            result.below_confidence += 1
            continue
        ident = (f.code, f.path, f.line, f.column, f.kernel, f.param, f.message)
        if ident in seen:
            continue
        seen.add(ident)
        kept.append(f)
    result.findings = sorted(kept, key=Finding.sort_key)
    result.errors.sort(key=lambda e: (e.path, e.line or 0))
    result.internal_errors.sort(key=lambda e: e.path)
    result.duration_s = time.perf_counter() - t0
    return result


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _mp_context():
    import multiprocessing as mp

    # fork: workers inherit the loaded engine and start in milliseconds (Linux only; we hold no
    # threads at this point). Elsewhere the platform default (spawn) re-imports it.
    if sys.platform.startswith("linux") and "fork" in mp.get_all_start_methods():
        return mp.get_context("fork")
    return mp.get_context()


def _kernel_names(facts: Any) -> set[str]:
    """Every name a launch elsewhere could use for the kernels a file defines: the bound name,
    the last component of the qualified name, and the function's own name."""
    out: set[str] = set()
    for k in facts.kernels:
        for v in (k.name, k.qualname, k.function):
            if v:
                out.add(v.rsplit(".", 1)[-1])
    return out
