"""The ``jitguard`` command line.

Each subcommand lives in its own module of this package (``jitguard/cli/scan.py`` defines ``scan``
and so on) and is imported only when used, so ``jitguard scan`` never imports Triton.
"""
from __future__ import annotations

import importlib
import importlib.util

import click

from jitguard import __version__

# command name -> "module:attribute"; the order is the order shown by --help.
COMMANDS = {
    "scan": "jitguard.cli.scan:scan",
    "fix": "jitguard.cli.fix:fix",
    "rule": "jitguard.cli.rule:rule",
    "run": "jitguard.cli.run:run",
    "report": "jitguard.cli.report:report",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [n for n, t in COMMANDS.items() if importlib.util.find_spec(t.split(":")[0])]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not importlib.util.find_spec(target.split(":")[0]):
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="jitguard")
def main() -> None:
    """Find, fix and watch Triton kernel arguments that recompile per call.

    \b
    jitguard scan PATHS      lint kernels and launches (text, json, sarif, github)
    jitguard fix PATHS       add do_not_specialize where scan says so (diff; --write applies)
    jitguard rule JG001      explain a rule
    jitguard run -- CMD      run a program and record every Triton recompile, with why
    jitguard report TRACES   explain recorded recompiles, merged across ranks
    """
