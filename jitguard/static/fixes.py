"""From findings (static scan and runtime trace alike) to edits of kernel decorators.

``plan_fixes(findings, unsafe=...)`` groups the findings by the file that defines each kernel, decides
per finding what the fix is and how safe it is, reads each file once (``SourceSnapshot``), computes
the edited bytes with ``jitguard.static.codemod`` and returns a ``FixPlan``; nothing is written.
``write_plan(plan)`` then writes the changed files atomically, each refused if it changed on disk
since it was read.

Fix per code (the safety reported for each):

=======  ============================================================  =====================
JG001    add the parameter to ``do_not_specialize``                    safe; unsafe if the
                                                                       parameter feeds address
                                                                       arithmetic or another
                                                                       function
JG002    remove ``tl.constexpr`` and add to ``do_not_specialize``      unsafe; manual
                                                                       (bucketing) where it is
                                                                       needed as a compile-time
                                                                       constant
JG003    none: the suggestion is reported                              manual
JG004    remove the entry that names no parameter                      safe
JG005    remove the ``tl.constexpr`` parameter from the list           safe
JG006    remove the float/bool parameter from the list                 safe
JG007    none: the suggestion is reported                              manual
=======  ============================================================  =====================

A ``do_not_specialize`` that is not a literal list is never edited (manual, with the reason).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from jitguard.findings import Finding
from jitguard.static import source as _source
from jitguard.static.codemod import KernelEdit, apply_edits
from jitguard.static.errors import SourceError
from jitguard.static.safe_write import (
    SourceSnapshot,
    WriteRefused,
    read_snapshot,
    syntax_error,
    write_atomic,
)

__all__ = ["Fix", "FileFix", "FixPlan", "plan_fixes", "write_plan"]

# uses of a parameter in the kernel body (jitguard.static.facts.USE_*), spelled here so that the
# planner also works on findings whose facts it must read from ``details``
_ADDRESS = "address"
_CALL = "call"
_CONSTEXPR = "constexpr"

LOAD_COST = (
    "dropping its divisibility-by-16 specialization can cost vectorized (16-byte) loads and stores"
)


@dataclass
class Fix:
    """One fix: a kernel, a parameter, an action; several findings (launch sites, a trace) may ask
    for the same fix."""

    code: str
    path: str  # the file that defines the kernel (where the edit goes)
    kernel: str
    kernel_line: int | None
    param: str | None
    action: str  # "add" | "constexpr" | "remove" | "none"
    safety: str  # "safe" | "unsafe" | "manual"
    reason: str = ""  # why unsafe or manual, for the user
    findings: list[Finding] = field(default_factory=list)
    status: str = "pending"  # pending | applied | already | unsafe | manual | refused | error
    detail: str = ""  # what was done, or why it wasn't
    kfacts: Any = field(default=None, repr=False, compare=False)  # KernelFacts as read now

    @property
    def sources(self) -> list[str]:
        return sorted({f.source for f in self.findings})

    @property
    def site(self) -> Finding:
        return self.findings[0]

    def describe(self) -> str:
        what = {
            "add": f"add {self.param!r} to do_not_specialize",
            "constexpr": f"remove tl.constexpr from {self.param!r} and add it to do_not_specialize",
            "remove": f"remove {self.param!r} from the do_not_specialize list",
            "none": "no automatic edit",
        }[self.action]
        return what


@dataclass
class FileFix:
    path: str
    snapshot: SourceSnapshot | None = None
    new_data: bytes | None = None  # None: nothing to write
    fixes: list[Fix] = field(default_factory=list)
    error: str | None = None  # the file was left alone: why
    written: bool = False

    @property
    def changed(self) -> bool:
        return self.new_data is not None and self.snapshot is not None and self.new_data != self.snapshot.data


@dataclass
class FixPlan:
    files: list[FileFix]
    fixes: list[Fix]

    @property
    def pending(self) -> list[Fix]:
        return [f for f in self.fixes if f.status == "pending"]

    @property
    def changed_files(self) -> list[FileFix]:
        return [f for f in self.files if f.changed]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.fixes:
            out[f.status] = out.get(f.status, 0) + 1
        return out


# ----------------------------------------------------------------------------------------------
# Deciding
# ----------------------------------------------------------------------------------------------


def _uses(finding: Finding, kfacts) -> list[dict]:
    """Uses of the finding's parameter in the kernel body: from the facts of the file as read now,
    else from the finding's details."""
    if kfacts is not None and finding.param:
        p = kfacts.param(finding.param)
        if p is not None:
            return [u.to_dict() for u in p.uses]
    uses = finding.details.get("uses") if finding.details else None
    if isinstance(uses, list):
        return [u for u in uses if isinstance(u, dict)]
    return []


def _where(uses: list[dict]) -> str:
    parts = []
    for u in uses[:3]:
        ctx = u.get("context") or ""
        parts.append(f"line {u.get('line')}" + (f" `{ctx}`" if ctx else ""))
    more = f" and {len(uses) - 3} more" if len(uses) > 3 else ""
    return ", ".join(parts) + more


def _decide(finding: Finding, kfacts) -> tuple[str, str, str]:
    """(action, safety, reason) for one finding."""
    code, param = finding.code, finding.param
    if code == "JG001" and param:
        if finding.fix_safety == "manual":
            return "none", "manual", finding.message
        uses = _uses(finding, kfacts)
        address = [u for u in uses if u.get("kind") == _ADDRESS]
        calls = [u for u in uses if u.get("kind") == _CALL]
        if address:
            return "add", "unsafe", f"{param!r} feeds address arithmetic ({_where(address)}): {LOAD_COST}"
        if calls:
            return "add", "unsafe", (
                f"{param!r} is passed to another function ({_where(calls)}): the effect of "
                f"unspecializing it there is unknown; {LOAD_COST} if it reaches an address"
            )
        if finding.fix_safety == "unsafe":
            return "add", "unsafe", finding.details.get("fix_reason") or finding.message
        return "add", "safe", f"{param!r} only feeds comparisons, masks and loop bounds"
    if code == "JG002" and param:
        needed = finding.details.get("constexpr_needed_at") if finding.details else None
        if kfacts is not None and kfacts.param(param) is not None:
            needed = [u.to_dict() for u in kfacts.param(param).uses if u.kind == _CONSTEXPR]
        if needed:
            places = needed if isinstance(needed, list) else []
            where = _where([p if isinstance(p, dict) else {"line": p} for p in places])
            return "none", "manual", (
                f"{param!r} is needed as a compile-time constant ({where}): bucket it at the "
                f"launch (e.g. triton.next_power_of_2) instead of unspecializing"
            )
        reason = (
            f"{param!r} is never needed as a compile-time constant here: as a plain int in "
            "do_not_specialize it compiles once; the compiler loses its value (constant folding, "
            "unrolling)"
        )
        calls = [u for u in _uses(finding, kfacts) if u.get("kind") == _CALL]
        if calls:
            reason += f"; it is also passed on ({_where(calls)}): check the callee takes a runtime int"
        return "constexpr", "unsafe", reason
    if code in ("JG004", "JG005", "JG006"):
        return "remove", "safe", "the entry has no effect"  # JG004: Triton ignores it silently
    return "none", "manual", finding.message


# ----------------------------------------------------------------------------------------------
# Planning
# ----------------------------------------------------------------------------------------------


def _kernel_path(f: Finding) -> str:
    """The file to edit, relative to the working directory when it lies below it (runtime traces
    record absolute paths; scan findings are relative), so diffs and notes read alike."""
    d = f.details or {}
    path = str(d.get("kernel_path") or d.get("def_path") or f.path)
    if os.path.isabs(path):
        rel = os.path.relpath(path)
        if not rel.startswith(os.pardir + os.sep) and rel != os.pardir:
            return rel
    return path


def _kernel_line(f: Finding) -> int | None:
    d = f.details or {}
    for key in ("kernel_line", "def_line"):
        v = d.get(key)
        if isinstance(v, int):
            return v
    return f.line if f.source == "runtime" else None


def _file_facts(snapshot: SourceSnapshot):
    """H1's facts of the file as read now (for the parameter uses), or None if unavailable."""
    try:
        from jitguard.static.extract import extract_file
    except ImportError:
        return None
    try:
        from jitguard.static.files import module_name

        module = module_name(str(snapshot.path))
    except Exception:
        module = ""
    try:
        return extract_file(str(snapshot.path), snapshot.data, module)
    except Exception:
        return None


def _find_kernel_facts(ffacts, kernel: str, line: int | None):
    """The kernel a finding means among the file's kernels: by name (module-qualified or not; a
    trace may name it differently from the scan), then by line (def line or a decorator line)."""
    if ffacts is None:
        return None
    last = kernel.rsplit(".", 1)[-1]
    exact = [k for k in ffacts.kernels if k.qualname == kernel]
    if len(exact) == 1:
        return exact[0]
    cands = [
        k
        for k in ffacts.kernels
        if kernel.endswith("." + k.qualname.rsplit(".", 1)[-1])
        or k.name == last
        or k.function == last
        or k.qualname.endswith("." + kernel)
    ]
    if line is not None:
        at = [k for k in (cands or ffacts.kernels) if k.line == line or k.decorator_line == line]
        if len(at) == 1:
            return at[0]
        above = [k for k in cands if k.line >= line]
        if above:
            return min(above, key=lambda k: k.line - line)
    return cands[0] if len(cands) == 1 else None


def _removal_entries(fix: Fix, kfacts) -> tuple[tuple, tuple]:
    """Entries (as written) to drop from do_not_specialize and from ..._on_alignment."""
    f = fix.site
    d = f.details or {}
    which = d.get("option") or d.get("keyword")
    entry = d.get("entry", fix.param)
    if kfacts is None:
        if entry is None:
            return (), ()
        if which == "do_not_specialize_on_alignment":
            return (), (entry,)
        return (entry,), ()

    def matches(e) -> bool:
        if fix.code == "JG004":
            if kfacts.resolve_entry(e) is not None and not (isinstance(e, int) and e < 0):
                return False  # names a real parameter: not this finding's entry
            return entry is None or e == entry or str(e) == str(entry)
        p = kfacts.resolve_entry(e)
        return p is not None and p.name == fix.param

    dns = tuple(e for e in kfacts.do_not_specialize if matches(e))
    dnsoa = tuple(e for e in kfacts.do_not_specialize_on_alignment if matches(e))
    if which == "do_not_specialize":
        dnsoa = ()
    elif which == "do_not_specialize_on_alignment":
        dns = ()
    return dns, dnsoa


def _inside(path: str, roots: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    for r in roots:
        rr = os.path.realpath(r)
        if real == rr or real.startswith(rr.rstrip(os.sep) + os.sep):
            return True
    return False


def _plan_file(
    abspath: str,
    file_findings: list[Finding],
    unsafe: bool,
    roots: Sequence[str] | None,
    known_facts: Any,
) -> FileFix:
    """Everything about one kernel file: read it once, decide each fix, compute the edited bytes."""
    ff = FileFix(path=_kernel_path(file_findings[0]))
    outside = roots is not None and not _inside(abspath, roots)
    if outside:
        ff.error = "the kernel is defined outside the paths given"
    else:
        try:
            ff.snapshot = read_snapshot(abspath)
        except OSError as e:
            ff.error = f"cannot read: {e.strerror or e}"
        if ff.snapshot is not None:
            try:  # what scan refuses (the coding declaration), fix refuses with the same words
                _source.decode(ff.snapshot.data)
                bad = syntax_error(ff.snapshot.data, ff.path) or _source.round_trips(ff.snapshot.data)
            except SourceError as e:
                bad = str(e)
            if bad:
                ff.error = f"{bad}; left untouched"
    ffacts = None
    if ff.error is None:
        ffacts = known_facts or _file_facts(ff.snapshot)

    # one Fix per (kernel, code, param): several launch sites and a trace may ask for it
    fixes: dict[tuple, Fix] = {}
    for f in file_findings:
        kf = _find_kernel_facts(ffacts, f.kernel, _kernel_line(f))
        key = (kf.qualname if kf is not None else f.kernel, f.code, f.param)
        if f.code in ("JG004", "JG005", "JG006"):  # one fix per entry and list
            d = f.details or {}
            key += (repr(d.get("entry")), d.get("option"))
        fix = fixes.get(key)
        if fix is None:
            fix = fixes[key] = Fix(
                code=f.code,
                path=ff.path,
                kernel=f.kernel,
                kernel_line=kf.line if kf is not None else _kernel_line(f),
                param=f.param,
                action="none",
                safety="manual",
            )
            fix.kfacts = kf
        fix.findings.append(f)
    ff.fixes = list(fixes.values())

    for x in ff.fixes:
        x.action, x.safety, x.reason = _decide(x.site, x.kfacts)
    # JG002 made into a plain int keeps its do_not_specialize entry: the JG005 removal yields
    now_plain = {
        (id(x.kfacts), x.param)
        for x in ff.fixes
        if x.action == "constexpr" and (unsafe or x.safety != "unsafe")
    }
    edits: list[tuple[Fix, KernelEdit]] = []
    for x in ff.fixes:
        kf = x.kfacts
        if x.code == "JG005" and (id(kf), x.param) in now_plain:
            x.status = "already"
            x.detail = "superseded by the JG002 fix (tl.constexpr removed, the entry now works)"
            continue
        if x.action == "none":
            x.status, x.detail = "manual", x.reason
            continue
        if ff.error is not None:
            x.status, x.detail = "refused", ff.error
            continue
        if x.safety == "unsafe" and not unsafe:
            x.status, x.detail = "unsafe", x.reason
            continue
        if kf is None and ffacts is not None:
            x.status, x.detail = "refused", f"kernel {x.kernel!r} not found in the file as read now"
            continue
        local = kf.qualname if kf is not None else x.kernel
        line = kf.line if kf is not None else x.kernel_line
        if x.action == "add":
            edit = KernelEdit(kernel=local, line=line, add=(x.param,))
        elif x.action == "constexpr":
            edit = KernelEdit(kernel=local, line=line, add=(x.param,), drop_constexpr=(x.param,))
        else:
            dns, dnsoa = _removal_entries(x, kf)
            if not dns and not dnsoa:
                x.status, x.detail = "already", "the entry is no longer there"
                continue
            edit = KernelEdit(kernel=local, line=line, remove=dns, remove_on_alignment=dnsoa)
        edits.append((x, edit))
    if ff.error is not None or not edits:
        return ff
    try:
        result = apply_edits(ff.snapshot.data, [e for _, e in edits])
    except UnicodeError as e:  # a codec that decodes this file but can't encode it back (idna)
        ff.error = (f"the edited text can't be written in the file's declared encoding "
                    f"({_source.encoding_of(ff.snapshot.data)}): {e}; left untouched")
        for x, _ in edits:
            x.status, x.detail = "error", ff.error
        return ff
    except Exception as e:  # the file parsed above: this is a jitguard bug, keep the file
        ff.error = f"cannot edit ({type(e).__name__}: {e}); left untouched"
        for x, _ in edits:
            x.status, x.detail = "error", ff.error
        return ff
    for (x, _), out in zip(edits, result.outcomes):
        if out.refused:
            x.status = "manual"
            x.detail = "; ".join(dict.fromkeys(why for _, why in out.refused))
        elif out.applied:
            x.status, x.detail = "pending", "; ".join(out.applied)
        else:
            x.status, x.detail = "already", "; ".join(out.already) or "nothing to change"
    if result.code != ff.snapshot.data:
        ff.new_data = result.code
    return ff


def _plan_job(job: tuple) -> FileFix:
    return _plan_file(*job)


def _run_jobs(jobs_list: list[tuple], jobs: int) -> list[FileFix]:
    """Plan every file, in worker processes when there are several and ``jobs`` > 1; a file whose
    worker fails is planned again here."""
    results: dict[int, FileFix] = {}
    if jobs > 1 and len(jobs_list) >= 4:
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        from jitguard.static.runner import _mp_context

        try:
            with ProcessPoolExecutor(max_workers=min(jobs, len(jobs_list)), mp_context=_mp_context()) as pool:
                for i, ff in enumerate(pool.map(_plan_job, jobs_list, chunksize=1)):
                    results[i] = ff
        except (BrokenProcessPool, OSError):
            pass  # no processes, or a worker died: finish in-process
    return [results[i] if i in results else _plan_job(job) for i, job in enumerate(jobs_list)]


def plan_fixes(
    findings: Iterable[Finding],
    *,
    unsafe: bool = False,
    roots: Sequence[str] | None = None,
    facts: Iterable[Any] = (),
    jobs: int = 1,
) -> FixPlan:
    """Decide and compute every fix; reads files, writes nothing.

    ``roots``: files or directories the fixer may edit (the paths scanned); a kernel defined
    elsewhere is reported, not edited. ``None`` allows any file.
    ``facts``: ``FileFacts`` the scan already extracted (saves parsing a file twice); a file without
    them is extracted here. ``jobs`` > 1 plans files in worker processes (LibCST is the cost).
    """
    known = {os.path.abspath(ff.path): ff for ff in facts if getattr(ff, "path", None)}
    by_file: dict[str, list[Finding]] = {}
    for f in sorted(findings, key=lambda x: (x.sort_key(), x.source)):
        by_file.setdefault(os.path.abspath(_kernel_path(f)), []).append(f)

    jobs_list = [
        (abspath, file_findings, unsafe, roots, known.get(abspath))
        for abspath, file_findings in sorted(by_file.items())
    ]
    files = _run_jobs(jobs_list, jobs)
    all_fixes = [x for ff in files for x in ff.fixes]
    all_fixes.sort(key=lambda x: (x.path, x.kernel_line or 0, x.code, x.param or ""))
    return FixPlan(files=files, fixes=all_fixes)


def write_plan(plan: FixPlan) -> None:
    """Write every changed file; a refused file turns its fixes to status "refused"."""
    for ff in plan.files:
        if not ff.changed:
            continue
        try:
            write_atomic(ff.snapshot, ff.new_data)
        except WriteRefused as e:
            ff.error = e.reason
            for x in ff.fixes:
                if x.status == "pending":
                    x.status, x.detail = "refused", e.reason
            continue
        ff.written = True
        for x in ff.fixes:
            if x.status == "pending":
                x.status = "applied"
