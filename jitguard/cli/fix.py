"""``jitguard fix``: turn scan findings (and recorded recompiles) into do_not_specialize edits."""
from __future__ import annotations

import difflib
import os
import sys
import traceback

import click

from jitguard.cli.ci_options import add_ignore_requested, fix_add_ignore_option, run_add_ignore

EPILOG = """\b
Exit status: 0 done (or nothing to do); 1 with --check when fixes are
pending or a file could not be analyzed or edited, or with --write when a
file could not be written; 2 usage error,
or an internal error on some file (the other files are still fixed).

\b
Fix safety (jitguard rule CODE says more):
  JG001  safe: add the parameter to do_not_specialize; unsafe where it
         feeds address arithmetic (dropping divisibility can cost
         vectorized loads)
  JG002  unsafe: drop tl.constexpr and add to do_not_specialize; manual
         (bucket the value) where a compile-time constant is needed
  JG004/JG005/JG006  safe: remove the ineffective entry
  JG003/JG007  manual: the suggestion is printed, nothing is edited

\b
Examples:
  jitguard fix src/                   show the diff, change nothing
  jitguard fix --write src/           apply the safe fixes
  jitguard fix --check src/           CI: exit 1 if a fix is pending
  jitguard fix --write --from-trace trace.json src/
"""


def _split(values: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for v in values:
        out.extend(s.strip().upper() for s in v.split(",") if s.strip())
    return out


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


def _plural(n: int, word: str) -> str:
    plural = word + ("es" if word.endswith(("x", "s")) else "s")
    return f"{n} {word if n == 1 else plural}"


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
@click.option("--select", multiple=True, metavar="CODES",
              help="Only fix these codes or prefixes (comma-separated; repeatable).")
@click.option("--ignore", multiple=True, metavar="CODES",
              help="Don't fix these codes or prefixes (comma-separated; repeatable).")
@click.option("--from-trace", "traces", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="Also fix what a runtime trace (jitguard run / jitguard.watch) saw recompile "
                   "(repeatable; merged with the static findings).")
@click.option("--no-scan", is_flag=True, help="With --from-trace: use the trace findings only.")
@click.option("--extend-select", multiple=True, metavar="CODES",
              help="Add codes or prefixes to the selection.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Read settings from this file instead of the nearest pyproject.toml.")
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option("--exclude", multiple=True, metavar="PATTERN", help="Extra exclude pattern (repeatable).")
@click.option("--varying-name", "varying_names", multiple=True, metavar="NAMES",
              help="Extra variable names that mean 'changes every call' (comma-separated), as in scan.")
@click.option("--stable-name", "stable_names", multiple=True, metavar="NAMES",
              help="Extra variable names that mean 'fixed for the process' (comma-separated), as in scan.")
@click.option("--respect-gitignore/--no-respect-gitignore", default=None,
              help="Skip files that .gitignore excludes (default: on, or the config's value).")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, envvar="JITGUARD_CACHE_DIR",
              help="Scan cache directory (as in scan).")
@click.option("--jobs", "-j", type=int, default=None, help="Worker processes for the scan and the edits (default: CPUs).")
@click.option("--no-cache", is_flag=True, help="Don't read or write the scan cache.")
@click.option("--quiet", "-q", is_flag=True, help="Print only the diff and the summary line.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: one document on stdout (schema jitguard.fix v1) with every fix, its status and "
                   "each file's diff.")
@fix_add_ignore_option
def fix(paths, write, check, show_diff, unsafe_fixes, select, ignore, traces, no_scan,
        config_file, exclude, jobs, no_cache, quiet, fmt, extend_select, isolated, varying_names,
        stable_names, respect_gitignore, cache_dir):
    """Add do_not_specialize where `jitguard scan` (or a runtime trace) says a kernel argument
    recompiles per call; remove entries that do nothing.

    Prints a unified diff and changes nothing unless --write is given. Every edit is a minimal
    LibCST change of the kernel's decorator (or of one tl.constexpr annotation with --unsafe-fixes);
    every other byte, comment, quote and line ending is kept. A file is written atomically, keeps its
    mode, and is left alone if it changed on disk while fix ran, is read-only, or does not parse.
    """
    try:
        scan_options = dict(extend_select=extend_select, isolated=isolated, varying_names=varying_names,
                            stable_names=stable_names, respect_gitignore=respect_gitignore,
                            cache_dir=cache_dir)
        code = _run(paths, write, check, show_diff, unsafe_fixes, select, ignore, traces, no_scan,
                    config_file, exclude, jobs, no_cache, quiet, fmt, scan_options)
    except click.exceptions.Exit:
        raise
    except click.UsageError:
        raise
    except Exception as e:  # a jitguard bug: say so, no traceback unless asked
        click.echo(f"jitguard fix: internal error: {type(e).__name__}: {e}", err=True)
        if os.environ.get("JITGUARD_DEBUG"):
            traceback.print_exc()
        else:
            click.echo("(set JITGUARD_DEBUG=1 for the traceback; please report it)", err=True)
        sys.exit(2)
    sys.exit(code)


def _run(paths, write, check, show_diff, unsafe_fixes, select, ignore, traces, no_scan,
         config_file, exclude, jobs, no_cache, quiet, fmt="text", scan_options=None) -> int:
    from jitguard.static.fixes import plan_fixes, write_plan

    if write and check:
        raise click.UsageError("--write and --check exclude each other")
    if no_scan and not traces:
        raise click.UsageError("--no-scan needs --from-trace")
    paths = list(paths) or ["."]
    for p in paths:
        if not os.path.exists(p):
            raise click.UsageError(f"path does not exist: {p}")
    err = lambda msg: click.echo(msg, err=True)  # noqa: E731
    opts = scan_options or {}
    config = _config(config_file, _split(select), _split(ignore), exclude, paths[0], opts)

    findings = []
    facts = []
    scan_errors = []
    internal_errors = []
    if not no_scan:
        from jitguard.static.runner import scan_paths

        result = scan_paths(paths, config, jobs=jobs, use_cache=not no_cache, keep_facts=True,
                            cache_dir=opts.get("cache_dir"))
        facts = list(result.facts)
        findings.extend(result.findings)  # select/ignore/per-file-ignores already applied
        internal_errors = list(getattr(result, "internal_errors", []))
        scan_errors = list(result.errors) + internal_errors
        for path in result.temps_removed:
            err(f"jitguard fix: note: removed {path}, a temporary file left by an interrupted "
                "jitguard fix")
        for path in result.named_excluded:
            err(f"jitguard fix: note: {path} was not read: an exclude pattern or a .gitignore "
                "excludes it (--no-respect-gitignore, or drop the pattern)")
    for t in traces:
        findings.extend(
            f for f in _trace_findings(t)
            if config.is_enabled(f.code, config.ignores_for_path(f.path))
        )

    if add_ignore_requested():  # fix --add-ignore: suppressions instead of fixes
        return run_add_ignore(findings, scan_errors, check=check, show_diff=show_diff, quiet=quiet,
                              internal=len(internal_errors),
                              diff_of=lambda p, a, b: _unified_diff(p, a, b, _encoding(a)))

    from jitguard.static.runner import default_jobs

    plan = plan_fixes(findings, unsafe=unsafe_fixes, roots=paths, facts=facts,
                      jobs=jobs if jobs and jobs > 0 else default_jobs())
    if show_diff is None:
        show_diff = not write
    raw_diffs = {ff.path: _unified_diff(ff.path, ff.snapshot.data, ff.new_data)
                 for ff in plan.changed_files}
    if show_diff and fmt == "text":
        for raw in raw_diffs.values():
            click.echo(raw, nl=False)  # bytes: the file's own encoding, so that git applies it
    diffs = {ff.path: _diff_text(raw_diffs[ff.path], ff.snapshot.data) for ff in plan.changed_files}
    pending = plan.pending
    n_pending_files = len(plan.changed_files)
    if write:
        write_plan(plan)
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
            if x.action == "none":  # a suggestion: point where the finding points (a launch...)
                f = x.site
                where = f"{f.path}:{f.line}:{f.column}"
            else:  # an edit: point at the kernel it edits
                where = f"{x.path}:{x.kernel_line}" if x.kernel_line else x.path
            head = f"{where}: {x.code} {x.kernel}" + (f".{x.param}" if x.param else "")
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


def _names(values) -> list[str]:
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def _config(config_file, select, ignore, exclude, start, opts):
    """The same configuration `jitguard scan` would use for these paths and flags."""
    from jitguard.config import Config, ConfigError, load_config

    try:
        if opts.get("isolated"):
            config = Config(root=os.getcwd())
        else:
            config = load_config(config_file, start=start)
        return config.with_cli(
            select=select or None,
            extend_select=_split(opts.get("extend_select", ())),
            ignore=ignore,
            exclude=_names(exclude),
            varying_names=_names(opts.get("varying_names", ())),
            stable_names=_names(opts.get("stable_names", ())),
            respect_gitignore=opts.get("respect_gitignore"),
        )
    except ConfigError as e:
        raise click.UsageError(str(e))


def _trace_findings(path: str):
    if not os.path.isfile(path):
        raise click.UsageError(f"--from-trace: {path}: no such file")
    try:
        from jitguard.runtime.findings import findings_from_trace
        from jitguard.runtime.trace import load_trace
    except ImportError as e:
        raise click.UsageError(f"--from-trace: the runtime side is not available ({e})")
    try:
        trace = load_trace(path)
    except Exception as e:  # a bad trace is the user's input, not a crash
        raise click.UsageError(f"--from-trace: {path}: not a jitguard trace: {e}")
    return findings_from_trace(trace)
