"""``jitguard fix``: turn scan findings (and recorded recompiles) into do_not_specialize edits."""
from __future__ import annotations

import difflib
import os
import sys
import traceback

import click

from jitguard.cli.ci_options import add_ignore_requested, fix_add_ignore_option, run_add_ignore
from jitguard.cli.options import config_from, scan_options, split_codes
from jitguard.config import ConfigError
from jitguard.format import plural as _plural
from jitguard.format import relative_path

EPILOG = """\b
Exit status: 0 done (or nothing to do); 1 with --check when fixes are
pending or a file could not be analyzed or edited, or with --write when a
file could not be written; 2 usage error, or an internal error on some file
(the other files are still fixed); 130 interrupted (the files written so far
are named).

\b
Fix safety (jitguard rule CODE says more):
  JG001  safe: add the parameter to do_not_specialize; unsafe where it
         feeds address arithmetic (dropping divisibility can cost
         vectorized loads)
  JG002  unsafe: drop tl.constexpr and add to do_not_specialize; manual
         (bucket it, or warm it up) where a compile-time constant is
         needed or an `if` on it selects code
  JG004/JG005/JG006  safe: remove the ineffective entry
  JG003/JG007  manual: the suggestion is printed, nothing is edited

\b
Examples:
  jitguard fix src/                   show the diff, change nothing
  jitguard fix --write src/           apply the safe fixes
  jitguard fix --check src/           CI: exit 1 if a fix is pending
  jitguard fix --write --from-trace trace.json src/
"""


def _diff_lines(data: bytes) -> list[bytes]:
    """Lines as git sees them: ended by \n only (\r\n keeps its \r; a form feed, \x1c-\x1e,
    \x85, U+2028 or a lone \r is part of a line, where str.splitlines would break)."""
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _unified_diff(path: str, old: bytes, new: bytes) -> bytes:
    """A unified diff of the file's own bytes (its encoding kept), as `git apply` reads one."""
    name = os.fsencode(path)
    lines = []
    for line in difflib.diff_bytes(difflib.unified_diff, _diff_lines(old), _diff_lines(new),
                                   fromfile=b"a/" + name, tofile=b"b/" + name):
        if not line.endswith(b"\n"):
            line += b"\n\\ No newline at end of file\n"
        lines.append(line)
    return b"".join(lines)


def _diff_text(diff: bytes, data: bytes) -> str:
    """The diff as text (JSON output), decoded in the file's encoding."""
    from jitguard.static.errors import SourceError
    from jitguard.static.source import encoding_of

    try:
        enc = encoding_of(data)
    except SourceError:
        enc = "utf-8"
    return diff.decode("utf-8" if enc == "utf-8-sig" else enc, errors="replace")


def _hint(x) -> str:
    """JG004's "did you mean 'num_tokens'?" stays visible once the typo is gone."""
    msg = x.site.message
    if x.code == "JG004" and "did you mean" in msg:
        return " (" + msg[msg.index("did you mean"):] + ")"
    return ""


def _strip_code(code: str, message: str) -> str:
    return message[len(code):].lstrip(" :") if message.startswith(code) else message


@click.command(
    "fix",
    epilog=EPILOG,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("paths", nargs=-1, type=click.Path(exists=False))
@click.option("--write", "-w", is_flag=True, help="Apply the fixes to the files (default: print a diff).")
@click.option("--check", is_flag=True, help="Change nothing; exit 1 if a fix is pending (for CI).")
@click.option("--diff/--no-diff", "show_diff", default=None,
              help="Print the unified diff (default: on without --write, off with it).")
@click.option("--unsafe-fixes", is_flag=True,
              help="Also apply fixes marked unsafe (JG001 on a parameter that feeds addresses, JG002).")
@click.option("--from-trace", "traces", multiple=True, type=click.Path(), metavar="TRACE",
              help="Also fix what a runtime trace (jitguard run / jitguard.watch) saw recompile: a "
                   "trace file or a directory of them, as `jitguard report` takes (repeatable; merged "
                   "with the static findings).")
@click.option("--no-scan", is_flag=True, help="With --from-trace: use the trace findings only.")
@scan_options
@click.option("--progress/--no-progress", default=None,
              help="Progress on stderr (default: only on a terminal, never with CI set or --format json).")
@click.option("--quiet", "-q", is_flag=True, help="Print only the diff and the summary line.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: one document on stdout (schema jitguard.fix v1) with every fix, its status and "
                   "each file's diff.")
@fix_add_ignore_option
def fix(paths, write, check, show_diff, unsafe_fixes, select, ignore, traces, no_scan,
        config_file, exclude, jobs, no_cache, quiet, fmt, extend_select, isolated, varying_names,
        stable_names, respect_gitignore, cache_dir, confidence=None, progress=None):
    """Add do_not_specialize where `jitguard scan` (or a runtime trace) says a kernel argument
    recompiles per call; remove entries that do nothing.

    Prints a unified diff and changes nothing unless --write is given. Every edit is a minimal
    LibCST change of the kernel's decorator (or of one tl.constexpr annotation with --unsafe-fixes);
    every other byte, comment, quote and line ending is kept. A file is written atomically, keeps its
    mode, and is left alone if it changed on disk while fix ran, is read-only, or does not parse.
    """
    try:
        options = dict(config_file=config_file, isolated=isolated, select=select, extend_select=extend_select,
                       ignore=ignore, exclude=exclude, varying_names=varying_names, stable_names=stable_names,
                       respect_gitignore=respect_gitignore, confidence=confidence)
        code = _run(paths, write, check, show_diff, unsafe_fixes, traces, no_scan, jobs, no_cache,
                    cache_dir, quiet, fmt, options, progress)
    except (click.exceptions.Exit, click.ClickException):
        raise
    except _Interrupted as stop:
        for path in stop.written:
            click.echo(f"jitguard fix: wrote {path}", err=True)
        n = len(stop.written)
        click.echo(f"jitguard fix: interrupted after writing {_plural(n, 'file')}"
                   + (" (each one whole; no other file was changed)" if n else "; no file was changed"),
                   err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("jitguard fix: interrupted; no file was changed", err=True)
        sys.exit(130)
    except Exception as e:  # a jitguard bug: say so, no traceback unless asked
        click.echo(f"jitguard fix: internal error: {type(e).__name__}: {e}", err=True)
        if os.environ.get("JITGUARD_DEBUG"):
            traceback.print_exc()
        else:
            click.echo("(set JITGUARD_DEBUG=1 for the traceback; please report it)", err=True)
        sys.exit(2)
    sys.exit(code)


def _run(paths, write, check, show_diff, unsafe_fixes, traces, no_scan, jobs, no_cache, cache_dir,
         quiet, fmt, options, progress=None) -> int:
    if write and check:
        raise _usage("--write and --check exclude each other")
    if no_scan and not traces:
        raise _usage("--no-scan needs --from-trace")
    paths = list(paths) or ["."]
    for p in paths:
        if not os.path.lexists(p):
            raise _usage(f"{p}: no such file or directory", path=p)
    err = lambda msg: click.echo(msg, err=True)  # noqa: E731
    for name in ("select", "extend_select"):
        values = options.get(name) or ()
        flag = "--" + name.replace("_", "-")
        if values and not split_codes(values):
            raise _usage(f"{flag}: no rule codes given (e.g. {flag} JG001)")
    try:
        config = config_from(paths[0], **options)
    except ConfigError as e:
        raise _usage(str(e))
    trace_findings = [f for t in _trace_files(traces, err) for f in _trace_findings(t)]
    if progress is None:
        progress = fmt == "text" and sys.stderr.isatty() and not os.environ.get("CI")

    findings = []
    scan_errors = []
    internal_errors = []
    if not no_scan:
        from jitguard.static.runner import scan_paths

        result = scan_paths(paths, config, jobs=jobs, use_cache=not no_cache, cache_dir=cache_dir,
                            progress=progress)
        findings.extend(result.findings)  # select/ignore/per-file-ignores already applied
        internal_errors = list(getattr(result, "internal_errors", []))
        scan_errors = list(result.errors) + internal_errors
        for path in result.temps_removed:
            err(f"jitguard fix: note: removed {path}, a temporary file left by an interrupted "
                "jitguard fix")
        from jitguard.static.files import excluded_note

        for path in result.named_excluded:
            err(f"jitguard fix: note: {excluded_note(path, result.excluded_by.get(path, ''), result.config)}")
        for w in result.warnings:
            err(f"{w.path}:{w.line}: warning: {w.message}" if w.line else f"{w.path}: warning: {w.message}")
        if not result.files_scanned and not result.errors and not result.named_excluded:
            err(_no_files_note(paths, result))
    findings.extend(
        f for f in trace_findings if config.is_enabled(f.code, config.ignores_for_path(f.path))
    )

    if add_ignore_requested():  # fix --add-ignore: suppressions instead of fixes
        return run_add_ignore(findings, scan_errors, check=check, show_diff=show_diff, quiet=quiet,
                              internal=len(internal_errors),
                              diff_of=_unified_diff)

    from jitguard.static.runner import default_jobs

    if show_diff is None:
        show_diff = not write
    # Plan and write a few files at a time: the first file is written after seconds, not after
    # every file of a large tree is planned (LibCST is the cost), and progress can be shown.
    plan, diffs = _plan_and_write(
        findings, unsafe=unsafe_fixes, roots=paths,
        jobs=jobs if jobs and jobs > 0 else default_jobs(), write=write,
        echo_diff=show_diff and fmt == "text", progress=progress,
    )
    pending = plan.pending
    n_pending_files = len(diffs)
    if fmt == "json":
        click.echo(_json_doc(plan, diffs, pending, write, scan_errors, internal_errors))
        quiet = True
        err = lambda msg: None  # noqa: E731

    # --- what is left for a human, one line each
    counts = plan.counts()
    if not quiet:
        for e in scan_errors:
            where = f"{e.path}:{e.line}" if getattr(e, "line", None) else e.path
            err(f"{where}: not analyzed: {e.message}")
        for x in plan.fixes:
            head = f"{_position(x)}: {x.code} {x.kernel}" + (f".{x.param}" if x.param else "")
            src = " [trace]" if x.sources == ["runtime"] else ""
            if x.status == "unsafe":
                err(f"{head}: unsafe fix not applied{src} ({x.describe()}): {x.detail}; "
                    "rerun with --unsafe-fixes to apply it")
            elif x.status == "manual":
                err(f"{head}: needs a manual fix{src}: {_strip_code(x.code, x.detail)}")
            elif x.status in ("refused", "error"):
                err(f"{head}: not fixed{src}: {x.detail}")
            elif x.status == "applied" and x.safety == "unsafe":
                err(f"{head}: applied unsafe fix{src}: {x.reason}")
            elif x.status == "applied" and write:
                err(f"{head}: fixed{src}: {x.detail}{_hint(x)}")

    # --- summary
    left = []
    if counts.get("unsafe"):
        left.append(f"{counts['unsafe']} unsafe (rerun with --unsafe-fixes)")
    if counts.get("manual"):
        left.append(f"{counts['manual']} manual (bucketing, non-literal lists, suggestions)")
    refused = counts.get("refused", 0) + counts.get("error", 0)
    if refused:
        left.append(f"{refused} in files left untouched")
    left_txt = f"; {_plural(sum(int(s.split()[0]) for s in left), 'fix')} left for a human: " + ", ".join(left) if left else ""
    if write:
        written = sum(1 for f in plan.files if f.written)
        msg = f"{_plural(written, 'file')} changed, {_plural(counts.get('applied', 0), 'fix')} applied{left_txt}"
    else:
        msg = (f"{_plural(n_pending_files, 'file')} would change, {_plural(len(pending), 'fix')} pending"
               f"{' (run with --write to apply)' if pending else ''}{left_txt}")
    if scan_errors:
        msg += f"; {_plural(len(scan_errors), 'file')} not analyzed"
    err(msg + ".")

    if internal_errors:  # a jitguard bug hid part of the tree: never look clean
        err(f"jitguard fix: {_plural(len(internal_errors), 'file')} hit an internal error (a bug in "
            "jitguard; set JITGUARD_DEBUG=1 with `jitguard scan` for tracebacks); please report it")
        return 2
    if check and (pending or scan_errors or counts.get("error")):
        return 1  # a file that could not be analyzed or edited may hide a pending fix
    if write and any(f.error and f.changed and not f.written for f in plan.files):
        return 1
    return 0


def _position(x) -> str:
    """``path:line:column`` where the finding points, as `jitguard scan` prints it (README:
    "Positions"); a runtime finding recorded with another spelling of the path is shown at the
    kernel's def in the file the fix edits."""
    f = x.site
    path = relative_path(x.path if x.action != "none" else f.path)
    if x.action == "none" or os.path.abspath(f.path) == os.path.abspath(x.path):
        return f"{path}:{f.line}:{f.column}"
    return f"{path}:{x.kernel_line}:1" if x.kernel_line else path


def _json_doc(plan, diffs, pending, write, scan_errors, internal_errors) -> str:
    import json

    fixes = []
    for x in plan.fixes:
        f = x.site
        fixes.append({
            "code": x.code,
            "path": x.path,
            "kernel": x.kernel,
            "kernel_line": x.kernel_line,
            "param": x.param,
            "action": x.action,  # add | constexpr | remove | none
            "safety": x.safety,  # safe | unsafe | manual
            "status": x.status,  # pending | applied | already | unsafe | manual | refused | error
            "detail": x.detail,
            "reason": x.reason,
            "sources": x.sources,
            "finding": {"path": f.path, "line": f.line, "column": f.column, "message": f.message},
        })
    files = [
        {"path": ff.path, "changed": ff.changed, "written": ff.written, "error": ff.error,
         "diff": diffs.get(ff.path)}
        for ff in plan.files
    ]
    counts = plan.counts()
    doc = {
        "schema": "jitguard.fix",
        "version": 1,
        "write": bool(write),
        "summary": {
            "files_changed": sum(1 for ff in plan.files if ff.written),
            "files_pending": 0 if write else len(diffs),
            "fixes_applied": counts.get("applied", 0),
            "fixes_pending": 0 if write else len(pending),
            "left_unsafe": counts.get("unsafe", 0),
            "left_manual": counts.get("manual", 0),
            "left_refused": counts.get("refused", 0) + counts.get("error", 0),
            "files_not_analyzed": len(scan_errors),
            "internal_errors": len(internal_errors),
        },
        "fixes": fixes,
        "files": files,
        "errors": [e.to_dict() if hasattr(e, "to_dict") else {"path": e.path, "message": e.message}
                   for e in scan_errors],
    }
    return json.dumps(doc, indent=2)


def _usage(message: str, path: str = ""):
    """A usage, configuration or input error: one line, exit 2 (jitguard/cli/errors.py)."""
    from jitguard.cli.errors import CliError

    return CliError(message, 2, path=path, command="fix")


class _Interrupted(Exception):
    """Ctrl-C while planning or writing: the files written so far, each written whole."""

    def __init__(self, written: list[str]) -> None:
        super().__init__("interrupted")
        self.written = written


def _kernel_file(f) -> str:
    """The file a finding's fix edits (as fixes.py groups them): its kernel's file."""
    return os.path.abspath(str((f.fix.path if f.fix is not None else None) or f.path))


def _plan_and_write(findings, *, unsafe, roots, jobs, write, echo_diff, progress):
    """``plan_fixes`` (and ``write_plan`` with --write) over a few kernel files at a time; the
    diffs are printed as each group is planned. Returns the whole plan and each changed file's
    diff. On Ctrl-C raises ``_Interrupted`` naming the files written (each one whole: writes are
    atomic)."""
    from jitguard.static.fixes import FixPlan, plan_fixes, write_plan
    from jitguard.static.runner import _Progress

    by_file: dict[str, list] = {}
    for f in findings:
        by_file.setdefault(_kernel_file(f), []).append(f)
    files = sorted(by_file)
    step = max(4, 2 * jobs)
    show = _Progress(progress)
    plans: list = []
    diffs: dict[str, str] = {}
    try:
        for i in range(0, len(files), step):
            show.update("fixing" if write else "planning fixes in", i, len(files))
            group = [f for path in files[i:i + step] for f in by_file[path]]
            part = plan_fixes(group, unsafe=unsafe, roots=roots, jobs=jobs)
            plans.append(part)
            for ff in part.changed_files:
                raw = _unified_diff(ff.path, ff.snapshot.data, ff.new_data)
                diffs[ff.path] = _diff_text(raw, ff.snapshot.data)
                if echo_diff:
                    show.clear()
                    click.echo(raw, nl=False)  # bytes: the file's own encoding, so that git applies it
            if write:
                write_plan(part)
        show.update("fixing" if write else "planning fixes in", len(files), len(files))
    except KeyboardInterrupt:
        show.clear()
        raise _Interrupted(_written(plans)) from None
    show.clear()
    all_files = [ff for part in plans for ff in part.files]
    all_fixes = sorted((x for part in plans for x in part.fixes),
                       key=lambda x: (x.path, x.kernel_line or 0, x.code, x.param or ""))
    return FixPlan(files=all_files, fixes=all_fixes), diffs


def _written(plans) -> list[str]:
    """The changed files whose bytes on disk are now the fixed ones (a Ctrl-C may land between a
    file's rename and its ``written`` flag, so the disk is asked)."""
    out = []
    for part in plans:
        for ff in part.changed_files:
            if ff.written:
                out.append(ff.path)
                continue
            try:
                with open(ff.snapshot.path, "rb") as fh:
                    if fh.read() == ff.new_data:
                        out.append(ff.path)
            except OSError:
                pass
    return out


def _no_files_note(paths, result) -> str:
    where = ", ".join(paths)
    excluded = getattr(result, "files_excluded", 0)
    if excluded:
        return (f"jitguard fix: warning: no Python files to read under {where}: "
                f"{_plural(excluded, 'path')} excluded by patterns or .gitignore")
    return f"jitguard fix: warning: no Python files under {where}"


def _trace_files(traces, err) -> list[str]:
    """The trace files named, directories expanded to the traces directly inside them (as
    `jitguard report DIR` reads them), each file once."""
    import json

    out: list[str] = []
    seen: set[str] = set()
    for given in traces:
        if os.path.isdir(given):
            from jitguard.runtime.trace import SCHEMA, iter_trace_files

            found = 0
            for f in iter_trace_files([given]):
                try:
                    with open(f, encoding="utf-8") as fh:
                        head = json.load(fh)
                except (OSError, ValueError):
                    head = None
                if not isinstance(head, dict) or head.get("schema") != SCHEMA:
                    err(f"jitguard fix: note: skipped {f}: not a jitguard trace")
                    continue
                found += 1
                if os.path.realpath(f) not in seen:
                    seen.add(os.path.realpath(f))
                    out.append(f)
            if not found:
                raise _usage(f"--from-trace {given}: no jitguard traces (*.json) in this directory",
                             path=given)
        elif not os.path.exists(given):
            raise _usage(f"--from-trace {given}: no such file or directory", path=given)
        elif os.path.realpath(given) not in seen:
            seen.add(os.path.realpath(given))
            out.append(given)
    return out


def _trace_findings(path: str):
    try:
        from jitguard.runtime.findings import findings_from_trace
        from jitguard.runtime.trace import TraceError, load_trace
    except ImportError as e:
        raise _usage(f"--from-trace: the runtime side is not available ({e})")
    try:
        trace = load_trace(path)
    except TraceError as e:  # its message names the file and what is wrong with it
        raise _usage(f"--from-trace {e}", path=path)
    return findings_from_trace(trace)
