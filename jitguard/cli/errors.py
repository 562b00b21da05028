"""Errors on the command line, said the same way by every command: one line on stderr,
``jitguard COMMAND: error: MESSAGE``, the command's documented exit status, and, with
``--format json``, a document on stdout whose ``errors`` holds the message (a tool reading stdout
never gets nothing).

``CliError`` is raised by the commands; the group (``jitguard/cli/__init__.py``) prints it, and
prints click's own usage errors (a bad option, a value out of range) the same way.
"""
from __future__ import annotations

import json
import sys

import click

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a program stopped by Ctrl-C


class CliError(click.ClickException):
    """A usage, configuration or input problem the user must fix: one line, ``exit_code``."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int = EXIT_USAGE, path: str = "",
                 command: str = "") -> None:
        super().__init__(one_line(message))
        self.exit_code = exit_code
        self.path = path
        self.command = command

    def show(self, file=None) -> None:  # raised outside the group (a command invoked directly)
        say_error(self.command, self.message)


def printable(text: str) -> str:
    """A file name that is not UTF-8 (lone surrogates in Python) shown with escapes, not a crash."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def one_line(text: str) -> str:
    """Messages are one line: a multi-line one (an exception's text) is joined."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def say_error(command: str, message: str) -> None:
    name = f"jitguard {command}" if command else "jitguard"
    click.echo(printable(f"{name}: error: {one_line(message)}"), err=True)


def wants_json(args: list[str]) -> bool:
    """``--format json`` (or ``--format=json``) among a command's arguments, before any ``--``."""
    for i, a in enumerate(args):
        if a == "--":
            return False
        if a == "--format=json" or (a == "--format" and i + 1 < len(args) and args[i + 1] == "json"):
            return True
    return False


def error_document(command: str, message: str, path: str = "") -> str | None:
    """The ``--format json`` document of a run that stopped on ``message`` (None: no JSON form)."""
    entry = {"path": path, "message": one_line(message), "line": None, "kind": "usage"}
    if command == "scan":
        from jitguard.report.json import to_document
        from jitguard.static.runner import ScanResult

        doc = to_document(ScanResult())
        doc["summary"]["errors"] = 1
        doc["errors"] = [entry]
        return json.dumps(doc, indent=2) + "\n"
    if command == "fix":
        from jitguard.cli.fix import _json_doc
        from jitguard.static.fixes import FixPlan

        class _Usage:
            def to_dict(self) -> dict:
                return entry

        return _json_doc(FixPlan(files=[], fixes=[]), {}, [], False, [_Usage()], []) + "\n"
    return None


def report_error(command: str, message: str, *, exit_code: int, args: list[str], path: str = "") -> int:
    say_error(command, message)
    if exit_code == EXIT_USAGE and wants_json(args):
        doc = error_document(command, message, path)
        if doc is not None:
            sys.stdout.write(doc)
            sys.stdout.flush()
    return exit_code


def usage_message(exc: click.UsageError) -> str:
    """click's usage error as one line, with where to read more."""
    ctx = exc.ctx
    msg = exc.format_message().rstrip(".")
    if ctx is not None and ctx.command is not None and ctx.parent is not None:
        msg += f" (jitguard {ctx.command.name} --help)"
    else:
        msg += " (jitguard --help)"
    return msg
