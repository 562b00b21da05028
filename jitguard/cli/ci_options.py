"""The options of ``jitguard scan`` for adopting it in CI: ``--baseline``, ``--write-baseline``,
``--no-baseline`` and ``--diff``, declared and applied here so that scan.py only carries a decorator
and one call.

``scan_ci_options`` adds the options and keeps their values on the click context;
``apply_ci_options(result, config, targets)`` then narrows the scan's findings: first the baseline
(``--baseline FILE``, else ``[tool.jitguard] baseline``), then ``--diff REV``. Stale baseline
entries are counted on every finding of the scan, before ``--diff`` narrows it.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Callable

import click

_META = "jitguard.ci_options"
_STALE_SHOWN = 10  # stale entries named on stderr; the rest are counted


def scan_ci_options(command: Callable) -> Callable:
    """Decorator for the scan command (put it below ``@click.command``)."""

    @click.option("--baseline", "baseline", type=click.Path(dir_okay=False, path_type=str),
                  default=None, metavar="FILE",
                  help="Report only findings not recorded in FILE (see --write-baseline); "
                  "default: [tool.jitguard] baseline.")
    @click.option("--write-baseline", "write_baseline", metavar="FILE",
                  type=click.Path(dir_okay=False, path_type=str), default=None,
                  help="Record every current finding in FILE (atomically), then report as with "
                  "--baseline FILE: keyed by file, kernel, parameter, code and evidence, never lines.")
    @click.option("--no-baseline", is_flag=True, help="Ignore the configured baseline.")
    @click.option("--diff", "diff_rev", metavar="REV", default=None,
                  help="Report only findings on kernels and launch sites whose lines changed since "
                  "git revision REV (the analysis still reads the whole tree).")
    @functools.wraps(command)
    def wrapper(*args: Any, baseline: str | None, write_baseline: str | None, no_baseline: bool,
                diff_rev: str | None, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        ctx.meta[_META] = {"baseline": baseline, "write_baseline": write_baseline,
                           "no_baseline": no_baseline, "diff": diff_rev}
        _check(ctx.meta[_META])
        if diff_rev:  # ask git first: a mistyped REV fails before a long scan
            ctx.meta[_META]["changed"] = _changed_lines(diff_rev, list(kwargs.get("paths") or ()))
        return command(*args, **kwargs)

    return wrapper


def _fail(message: str) -> click.exceptions.Exit:
    from jitguard.cli.scan import _fail as scan_fail

    return scan_fail(message)


def _note(message: str) -> None:
    from jitguard.cli.scan import _printable

    click.echo(_printable(f"jitguard scan: {message}"), err=True)


def _check(opts: dict[str, Any]) -> None:
    """Usage errors, before anything is scanned."""
    if opts["write_baseline"] and opts["baseline"]:
        raise _fail("--write-baseline FILE writes the baseline it then applies; don't add --baseline")
    if opts["write_baseline"] and opts["diff"]:
        raise _fail("--write-baseline records every finding; don't combine it with --diff")
    if opts["no_baseline"] and (opts["baseline"] or opts["write_baseline"]):
        raise _fail("--no-baseline excludes --baseline and --write-baseline")


def _changed_lines(rev: str, paths: list[str]) -> Any:
    """What git says changed since ``rev`` in the repository holding the first path."""
    from jitguard.static.changed_lines import DiffError, changed_since

    first = paths[0] if paths else "."
    start = first if os.path.isdir(first) else os.path.dirname(os.path.abspath(first))
    try:
        return changed_since(rev, cwd=start if os.path.isdir(start) else os.getcwd())
    except DiffError as exc:
        raise _fail(f"--diff {rev}: {exc}") from None


def _options() -> dict[str, Any] | None:
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(_META)


def apply_ci_options(result: Any, config: Any, targets: list[str]) -> None:
    """Narrow ``result.findings`` in place by the baseline and ``--diff``; record the counts on
    ``result`` (``baselined``, ``baseline_stale``, ``outside_diff``, ``diff_base``). The baseline
    module is imported only where a baseline is asked for (a plain scan does without it)."""
    opts = _options()
    if opts is None:
        return
    if opts["write_baseline"]:
        from jitguard.static import baseline as bl

        written = bl.Baseline.from_findings(opts["write_baseline"], result.findings)
        try:
            written.write()
        except OSError as exc:
            raise _fail(f"--write-baseline {opts['write_baseline']}: cannot write: "
                        f"{exc.strerror or exc}") from None
        n = len(result.findings)
        _note(f"wrote {n} finding{'s' if n != 1 else ''} ({len(written.entries)} entries) to "
              f"{opts['write_baseline']}")
        base: bl.Baseline | None = written
    else:
        path = None if opts["no_baseline"] else (opts["baseline"] or getattr(config, "baseline", None))
        base = None
        if path:
            from jitguard.static import baseline as bl

            try:
                base = bl.load(path)
            except bl.BaselineError as exc:
                raise _fail(f"baseline {exc}") from None
    if base is not None:
        applied = bl.apply(base, result.findings, scanned=targets,
                           enabled=lambda code: config.is_enabled(code))
        result.findings = applied.new
        result.baselined = applied.baselined
        result.baseline_stale = applied.stale
        if applied.stale:
            n = sum(e.count for e in applied.stale)
            _note(f"{n} baseline entr{'ies' if n != 1 else 'y'} in {base.path} match"
                  f"{'' if n != 1 else 'es'} no finding "
                  f"(fixed, or changed since): rewrite it with --write-baseline {base.path}")
            for e in applied.stale[:_STALE_SHOWN]:
                click.echo(f"  stale: {e.describe()}", err=True)
            if len(applied.stale) > _STALE_SHOWN:
                click.echo(f"  ... and {len(applied.stale) - _STALE_SHOWN} more", err=True)
    if opts["diff"]:
        from jitguard.static.changed_lines import select_changed

        changed = opts.get("changed") or _changed_lines(opts["diff"], targets)
        result.findings, result.outside_diff = select_changed(result.findings, changed)
        result.diff_base = opts["diff"]


# --- jitguard fix --add-ignore -----------------------------------------------------------------

_FIX_META = "jitguard.add_ignore"


def fix_add_ignore_option(command: Callable) -> Callable:
    """Decorator for the fix command: ``--add-ignore``."""

    @click.option("--add-ignore", "add_ignore", is_flag=True,
                  help="Instead of fixing, write `# jitguard: ignore[CODE]` where each current "
                  "finding is suppressed (idempotent; with --check: exit 1 if one would be added).")
    @functools.wraps(command)
    def wrapper(*args: Any, add_ignore: bool, **kwargs: Any) -> Any:
        click.get_current_context().meta[_FIX_META] = add_ignore
        if add_ignore and kwargs.get("traces"):
            raise click.UsageError("--add-ignore suppresses the scan's findings in the code; "
                                   "it takes no --from-trace")
        if add_ignore and kwargs.get("fmt") == "json":
            raise click.UsageError("--add-ignore reports in text only")
        return command(*args, **kwargs)

    return wrapper


def add_ignore_requested() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(_FIX_META))


def run_add_ignore(findings: list, scan_errors: list, *, check: bool, show_diff: bool | None,
                   quiet: bool, diff_of: Callable[[str, bytes, bytes], bytes], internal: int = 0) -> int:
    """Write (or with ``check`` only count) the suppressions; returns the exit status (2 when a
    jitguard bug hid part of the tree: its findings got no comment)."""
    from jitguard.static.add_ignore import plan_ignores, write_ignores

    err = lambda msg: click.echo(msg, err=True)  # noqa: E731
    plans = plan_ignores(findings)
    changed = [p for p in plans if p.changed]
    if show_diff:
        for p in changed:
            assert p.snapshot is not None and p.new_data is not None
            click.echo(diff_of(p.path, p.snapshot.data, p.new_data), nl=False)
    if not check:
        write_ignores(plans)
    placed = sum(p.suppressed for p in plans)
    unplaced = [f for p in plans for f in p.unplaced]
    failed = [p for p in plans if p.error]
    if not quiet:
        for e in scan_errors:
            where = f"{e.path}:{e.line}" if getattr(e, "line", None) else e.path
            err(f"{where}: not analyzed: {e.message}")
        for p in plans:
            for line in sorted(p.comments):
                verb = "would add" if check else ("added" if p.written else "not written")
                err(f"{p.path}:{line}: {verb} # jitguard: ignore[{','.join(sorted(p.comments[line]))}]")
            if p.error:
                err(f"{p.path}: not changed: {p.error}")
        for f in unplaced:
            err(f"{f.path}:{f.line}: {f.code} {f.kernel}: no line of it can take a comment "
                "(it ends inside a string or with a backslash); suppress it by hand")
    n_files = sum(1 for p in changed if p.written) if not check else len(changed)
    lines = sum(len(p.comments) for p in changed)
    verb = "would be suppressed" if check else "suppressed"
    msg = (f"{placed} finding{'s' if placed != 1 else ''} {verb} by comments on {lines} line"
           f"{'s' if lines != 1 else ''} in {n_files} file{'s' if n_files != 1 else ''}")
    if unplaced:
        msg += f"; {len(unplaced)} finding{'s' if len(unplaced) != 1 else ''} left for a human"
    if scan_errors:
        msg += f"; {len(scan_errors)} file{'s' if len(scan_errors) != 1 else ''} not analyzed"
    err(msg + ".")
    if internal:
        return 2
    if failed or unplaced:
        return 1
    if check and changed:
        return 1
    return 0
