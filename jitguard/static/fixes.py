"""From findings (static scan and runtime trace alike) to edits of kernel decorators.

Every finding carries its fix (``Finding.fix``: the edits, safe / unsafe / manual, the reason),
decided by the rule that made it; this module decides nothing again. ``plan_fixes(findings,
unsafe=...)`` groups the findings by the file that defines each kernel, reads each file once
(``SourceSnapshot``), refuses a file whose content is not what the fix was decided on, computes the
edited bytes with ``jitguard.static.codemod`` (the kernel located by the position the fix names) and
returns a ``FixPlan``; nothing is written. ``write_plan(plan)`` then writes the changed files
atomically, each refused if it changed on disk since it was read.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from libcst import ParserSyntaxError

from jitguard.findings import DNS, DNSOA, Finding, Fix
from jitguard.format import relative_path
from jitguard.static import source as _source
from jitguard.static.cache import content_digest
from jitguard.static.codemod import KernelEdit, apply_edits
from jitguard.static.errors import SourceError
from jitguard.static.safe_write import (
    SourceSnapshot,
    WriteRefused,
    read_snapshot,
    syntax_error,
    write_atomic,
)

__all__ = ["PlannedFix", "FileFix", "FixPlan", "plan_fixes", "write_plan"]

_STRICTNESS = {"safe": 0, "unsafe": 1, "manual": 2}


@dataclass
class PlannedFix:
    """One fix of one kernel, and what became of it; several findings (launch sites, a trace) may
    carry the same fix."""

    code: str
    path: str  # the file that defines the kernel (where the edit goes)
    kernel: str
    kernel_line: int | None
    param: str | None
    plan: Fix | None  # the most cautious of the findings' fixes
    findings: list[Finding] = field(default_factory=list)
    status: str = "pending"  # pending | applied | already | unsafe | manual | refused | error
    detail: str = ""  # what was done, or why it wasn't

    @property
    def safety(self) -> str:
        return self.plan.applicability if self.plan is not None else "manual"

    @property
    def reason(self) -> str:
        return self.plan.reason if self.plan is not None else self.site.message

    @property
    def action(self) -> str:
        """add | constexpr | remove | none (the kinds of the plan's edits)."""
        kinds = {e.kind for e in self.plan.edits} if self.plan is not None else set()
        if "drop_constexpr" in kinds:
            return "constexpr"
        if "add_do_not_specialize" in kinds:
            return "add"
        return "remove" if kinds else "none"

    @property
    def sources(self) -> list[str]:
        return sorted({f.source for f in self.findings})

    @property
    def site(self) -> Finding:
        return self.findings[0]

    def describe(self) -> str:
        return {
            "add": f"add {self.param!r} to do_not_specialize",
            "constexpr": f"remove tl.constexpr from {self.param!r} and add it to do_not_specialize",
            "remove": f"remove {self.param!r} from the do_not_specialize list",
            "none": "no automatic edit",
        }[self.action]

    def kernel_edit(self) -> KernelEdit:
        edits = self.plan.edits
        return KernelEdit(
            line=self.plan.line, jit_line=self.plan.jit_line, function=self.plan.function,
            add=tuple(e.param for e in edits if e.kind == "add_do_not_specialize"),
            drop_constexpr=tuple(e.param for e in edits if e.kind == "drop_constexpr"),
            remove=tuple(e.entry for e in edits if e.kind == "remove_entry" and e.option == DNS),
            remove_on_alignment=tuple(e.entry for e in edits if e.kind == "remove_entry" and e.option == DNSOA),
        )


@dataclass
class FileFix:
    path: str
    snapshot: SourceSnapshot | None = None
    new_data: bytes | None = None  # None: nothing to write
    fixes: list[PlannedFix] = field(default_factory=list)
    error: str | None = None  # the file was left alone: why
    written: bool = False

    @property
    def changed(self) -> bool:
        return self.new_data is not None and self.snapshot is not None and self.new_data != self.snapshot.data


@dataclass
class FixPlan:
    files: list[FileFix]
    fixes: list[PlannedFix]

    @property
    def pending(self) -> list[PlannedFix]:
        return [f for f in self.fixes if f.status == "pending"]

    @property
    def changed_files(self) -> list[FileFix]:
        return [f for f in self.files if f.changed]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.fixes:
            out[f.status] = out.get(f.status, 0) + 1
        return out


def _edit_path(f: Finding) -> str:
    """The file to edit (the fix's, else the finding's), relative to the working directory when it
    lies below it (runtime traces record absolute paths; scan findings are relative), so diffs and
    notes read alike."""
    return relative_path(str((f.fix.path if f.fix is not None else None) or f.path))


def _inside(path: str, roots: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    for r in roots:
        rr = os.path.realpath(r)
        if real == rr or real.startswith(rr.rstrip(os.sep) + os.sep):
            return True
    return False


def _plan_file(abspath: str, file_findings: list[Finding], unsafe: bool, roots: Sequence[str] | None) -> FileFix:
    """Everything about one kernel file: read it once, group the fixes, compute the edited bytes."""
    ff = FileFix(path=_edit_path(file_findings[0]))
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
    digest = content_digest(ff.snapshot.data) if ff.snapshot is not None else None

    # one fix per (kernel, code, param, edits): several launch sites and a trace may carry it
    fixes: dict[tuple, PlannedFix] = {}
    for f in file_findings:
        plan = f.fix
        where = (plan.line, plan.jit_line) if plan is not None and plan.edits else (f.kernel,)
        key = where + (f.code, f.param, plan.edits if plan is not None else None)
        x = fixes.get(key)
        if x is None:
            x = fixes[key] = PlannedFix(code=f.code, path=ff.path, kernel=f.kernel,
                                        kernel_line=plan.line if plan is not None and plan.line else None,
                                        param=f.param, plan=plan)
        elif plan is not None and (x.plan is None or _STRICTNESS[plan.applicability] > _STRICTNESS[x.plan.applicability]):
            x.plan = plan
        x.findings.append(f)
    ff.fixes = list(fixes.values())

    # a JG002 fix that makes the parameter a plain int keeps its do_not_specialize entry: the JG005
    # removal of that entry yields
    now_plain = {(x.plan.line, x.param) for x in ff.fixes
                 if x.action == "constexpr" and (unsafe or x.safety != "unsafe")}
    todo: list[PlannedFix] = []
    for x in ff.fixes:
        if x.code == "JG005" and x.plan is not None and (x.plan.line, x.param) in now_plain:
            x.status = "already"
            x.detail = "superseded by the JG002 fix (tl.constexpr removed, the entry now works)"
        elif x.action == "none":
            x.status, x.detail = "manual", x.reason
        elif ff.error is not None:
            x.status, x.detail = "refused", ff.error
        elif x.plan.digest is None:  # decided without reading the kernel's source
            x.status, x.detail = "refused", x.reason
        elif x.plan.digest != digest:
            x.status = "refused"
            x.detail = ("the file changed since the fix was decided (its content is not what was scanned); "
                        "run the scan again")
        elif x.safety == "unsafe" and not unsafe:
            x.status, x.detail = "unsafe", x.reason
        else:
            todo.append(x)
    if ff.error is not None or not todo:
        return ff
    try:
        result = apply_edits(ff.snapshot.data, [x.kernel_edit() for x in todo])
    except UnicodeError as e:  # a codec that decodes this file but can't encode it back (idna)
        ff.error = (f"the edited text can't be written in the file's declared encoding "
                    f"({_source.encoding_of(ff.snapshot.data)}): {e}; left untouched")
        for x in todo:
            x.status, x.detail = "error", ff.error
        return ff
    except ParserSyntaxError as e:
        # Python compiles the file and LibCST's parser does not (a `\` continued into the end of a
        # file whose lines end in \r\n): a file the editor cannot edit, not a bug of jitguard's
        ff.error = f"the editor (LibCST) cannot parse this file: {e.message}; left untouched"
        for x in todo:
            x.status, x.detail = "refused", ff.error
        return ff
    except Exception as e:  # the file parsed above: this is a jitguard bug, keep the file
        ff.error = f"cannot edit ({type(e).__name__}: {e}); left untouched"
        for x in todo:
            x.status, x.detail = "error", ff.error
        return ff
    for x, out in zip(todo, result.outcomes):
        if out.location is None:  # not the kernel the fix names: never edit another one
            x.status = "refused"
            x.detail = "; ".join(dict.fromkeys(why for _, why in out.refused))
        elif out.refused:
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
    jobs: int = 1,
) -> FixPlan:
    """Compute every finding's fix; reads files, writes nothing.

    ``roots``: files or directories the fixer may edit (the paths scanned); a kernel defined
    elsewhere is reported, not edited. ``None`` allows any file. ``jobs`` > 1 plans files in worker
    processes (LibCST is the cost).
    """
    by_file: dict[str, list[Finding]] = {}
    for f in sorted(findings, key=lambda x: (x.sort_key(), x.source)):
        by_file.setdefault(os.path.abspath(_edit_path(f)), []).append(f)

    jobs_list = [(abspath, file_findings, unsafe, roots) for abspath, file_findings in sorted(by_file.items())]
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
