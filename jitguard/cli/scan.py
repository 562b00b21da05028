"""``jitguard scan``: the static linter's command line."""
from __future__ import annotations

import os
import sys

import click

from jitguard.cli.ci_options import apply_ci_options, scan_ci_options
from jitguard.cli.options import config_from, scan_options, split_codes

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
FORMATS = ("text", "json", "sarif", "github")


def _printable(text: str) -> str:
    """A file name that is not UTF-8 (lone surrogates in Python) shown with escapes, not a crash."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _emit(text: str) -> None:
    """The report on stdout as UTF-8 bytes; file names that are not UTF-8 keep their bytes."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only stream (embedded use): escape what it can't take
        click.echo(_printable(text), nl=False)
        return
    try:
        sys.stdout.flush()
        buffer.write(text.encode("utf-8", "surrogateescape"))
        buffer.flush()
    except BrokenPipeError:  # "jitguard scan | head": the reader left; not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _fail(message: str, path: str = ""):
    """A usage or configuration error: one line, exit 2, an ``errors`` entry with --format json."""
    from jitguard.cli.errors import CliError

    return CliError(message, EXIT_ERROR, path=path, command="scan")


def _debug() -> bool:
    return os.environ.get("JITGUARD_DEBUG", "") not in ("", "0")


def write_atomically(path: str, text: str) -> None:
    """Write the report through a temporary file in the same directory, then rename it into place:
    a failed run never leaves a half-written report (nor truncates an old one)."""
    from jitguard.atomic_write import write_text_atomic

    write_text_atomic(path, text)


@click.command(
    "scan",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
    help="text: path:line:col: CODE message; json: versioned schema (--print-schema); "
    "sarif: SARIF 2.1.0 for code scanning; github: workflow annotations.",
)  # fmt: skip
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=str),
              help="Write the report to FILE (atomically) instead of stdout.")
@scan_options
@click.option("--exit-zero", is_flag=True,
              help="Exit 0 even with findings or unanalyzable files (internal errors still exit 2).")
@click.option("--statistics", is_flag=True,
              help="Print counts per code instead of each finding (text); with json, add them "
              "as `statistics` beside the findings.")
@click.option("--package", "packages", multiple=True, metavar="NAME",
              help="Scan the source of an installed distribution (repeatable).")
@click.option("--progress/--no-progress", default=None,
              help="Progress on stderr (default: only on a terminal, never with CI set or "
              "machine formats).")
@click.option("--print-schema", is_flag=True, help="Print the JSON report's JSON Schema and exit.")
@scan_ci_options
def scan(
    paths: tuple[str, ...],
    fmt: str,
    output: str | None,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    exclude: tuple[str, ...],
    confidence: str | None,
    exit_zero: bool,
    statistics: bool,
    config_file: str | None,
    isolated: bool,
    varying_names: tuple[str, ...],
    stable_names: tuple[str, ...],
    packages: tuple[str, ...],
    respect_gitignore: bool | None,
    jobs: int | None,
    no_cache: bool,
    cache_dir: str | None,
    progress: bool | None,
    print_schema: bool,
) -> None:
    """Find Triton kernel arguments that recompile per call.

    Scans PATHS (files or directories; default: the current directory) for @triton.jit kernels and
    their launches, follows each launch argument back to where it comes from, and reports rules
    JG001..JG007 (`jitguard rule` lists them). Each finding has a confidence level (high, medium,
    low: docs/provenance.md); high and medium are reported unless --confidence says otherwise.

    \b
    Exit status: 0 no findings, 1 findings or files that could not be analyzed,
                 2 usage, configuration or internal error.
    Settings: [tool.jitguard] in the nearest pyproject.toml (see docs/scan.md);
    suppress one site with `# jitguard: ignore[JG001]` on the decorator, def or launch line.
    """
    if print_schema:
        import json

        from jitguard.report.json import SCAN_SCHEMA

        click.echo(json.dumps(SCAN_SCHEMA, indent=2))
        return
    try:
        code = _run(
            paths, fmt, output, select, extend_select, ignore, exclude, exit_zero, statistics,
            config_file, isolated, varying_names, stable_names, packages, respect_gitignore, jobs,
            no_cache, cache_dir, progress, confidence,
        )  # fmt: skip
    except (click.exceptions.Exit, click.ClickException):
        raise
    except KeyboardInterrupt:
        click.echo("jitguard scan: interrupted", err=True)
        raise click.exceptions.Exit(130) from None
    except Exception as exc:  # a jitguard bug: one clear line, the traceback only on request
        if _debug():
            import traceback

            traceback.print_exc()
        click.echo(
            _printable(f"jitguard scan: internal error: {type(exc).__name__}: {exc}\n")
            + "This is a bug in jitguard, not in your code; set JITGUARD_DEBUG=1 for the traceback.",
            err=True,
        )
        raise click.exceptions.Exit(EXIT_ERROR) from None
    raise click.exceptions.Exit(code)


def _run(
    paths, fmt, output, select, extend_select, ignore, exclude, exit_zero, statistics,
    config_file, isolated, varying_names, stable_names, packages, respect_gitignore, jobs,
    no_cache, cache_dir, progress, confidence=None,
) -> int:  # fmt: skip
    from jitguard.config import ConfigError
    from jitguard.static.files import package_paths
    from jitguard.static.runner import InternalError, scan_paths

    if statistics and fmt in ("sarif", "github"):
        raise _fail(f"--statistics works with --format text or json, not {fmt}")
    targets = list(paths)
    for name in packages:
        try:
            targets.extend(package_paths(name))
        except LookupError as exc:
            raise _fail(f"--package {name}: {exc}") from None
    if not targets:
        targets = ["."]
    for p in paths:
        # A path that is not there at all is a usage error; a dangling link or a link loop is a
        # problem with that file, reported as a file error while the rest is scanned.
        if not os.path.lexists(p):
            raise _fail(f"{p}: no such file or directory", path=p)

    for name, values in (("--select", select), ("--extend-select", extend_select)):
        if values and not split_codes(values):
            raise _fail(f"{name}: no rule codes given (e.g. {name} JG001)")
    try:
        config = config_from(
            targets[0] if os.path.exists(targets[0]) else os.getcwd(), config_file=config_file,
            isolated=isolated, select=select, extend_select=extend_select, ignore=ignore,
            exclude=exclude, varying_names=varying_names, stable_names=stable_names,
            respect_gitignore=respect_gitignore,
            confidence=confidence,
        )  # fmt: skip
    except ConfigError as exc:
        raise _fail(str(exc)) from None

    if progress is None:
        progress = fmt == "text" and sys.stderr.isatty() and not os.environ.get("CI")
    try:
        result = scan_paths(
            targets, config, jobs=jobs, cache_dir=cache_dir, use_cache=not no_cache,
            progress=progress,
        )  # fmt: skip
    except InternalError as exc:
        click.echo(
            _printable(f"jitguard scan: internal error: {exc}\n")
            + "This is a bug in jitguard, not in your code.",
            err=True,
        )
        return EXIT_ERROR
    apply_ci_options(result, config, targets)  # --baseline, --write-baseline, --diff

    if fmt == "json":
        from jitguard.report.json import render

        text = render(result, statistics=statistics)
    elif fmt == "sarif":
        from jitguard.report.sarif import render

        text = render(result)
    elif fmt == "github":
        from jitguard.report.github import render

        text = render(result)
    else:
        from jitguard.report.text import render

        text = render(result, statistics=statistics)

    if output:
        try:
            write_atomically(output, text)
        except OSError as exc:
            raise _fail(f"--output {output}: cannot write: {exc.strerror or exc}") from None
        from jitguard.report.text import summary_line

        click.echo(_printable(f"{summary_line(result)} Report written to {output}."), err=True)
    else:
        _emit(text)

    for path in result.temps_removed:
        click.echo(_printable(f"jitguard scan: note: removed {path}, a temporary file left by an "
                              "interrupted jitguard fix"), err=True)
    if not result.files_scanned and not result.errors and not result.named_excluded:
        where = ", ".join(targets)
        if result.files_excluded:
            note = (f"no Python files to scan under {where}: {result.files_excluded} "
                    "path(s) excluded by patterns or .gitignore")
        else:
            note = f"no Python files under {where}"
        click.echo(_printable(f"jitguard scan: warning: {note}"), err=True)
    from jitguard.static.files import excluded_note

    for path in result.named_excluded:
        why = excluded_note(path, result.excluded_by.get(path, ""), result.config, "scanned")
        click.echo(_printable(f"jitguard scan: note: {why}"), err=True)
    if fmt != "json":
        for w in result.warnings:
            where = f"{w.path}:{w.line}" if w.line else w.path
            click.echo(_printable(f"{where}: warning: {w.message}"), err=True)
    if result.internal_errors:
        if _debug():
            for path, tb in result.internal_tracebacks:
                click.echo(_printable(f"--- {path}\n{tb}"), err=True)
        click.echo(
            f"jitguard scan: {len(result.internal_errors)} internal error(s): a bug in jitguard "
            "(set JITGUARD_DEBUG=1 for tracebacks); please report it with the file named.",
            err=True,
        )
        return EXIT_ERROR
    if exit_zero:
        return EXIT_CLEAN
    return EXIT_FINDINGS if (result.findings or result.errors) else EXIT_CLEAN
