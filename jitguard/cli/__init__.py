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
    "warmup": "jitguard.cli.warmup:warmup",
}
# one line each for `jitguard --help` (click would cut the docstrings' first sentences short)
SHORT_HELP = {
    "scan": "Lint kernels and launches: arguments that recompile per call (text, json, sarif, github).",
    "fix": "Add do_not_specialize where scan or a runtime trace says so (a diff; --write applies).",
    "rule": "Explain a rule (jitguard rule JG001), or list them all.",
    "run": "Run a program with every Triton recompile recorded and explained (jitguard run -- CMD).",
    "report": "Explain recorded recompiles, merged across ranks (traces or a directory of them).",
    "warmup": "Compile every variant recorded in traces before traffic (--check: verify, no GPU).",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [n for n, t in COMMANDS.items() if importlib.util.find_spec(t.split(":")[0])]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None or not importlib.util.find_spec(target.split(":")[0]):
            return None
        module, attr = target.split(":")
        command = getattr(importlib.import_module(module), attr)
        command.short_help = command.short_help or SHORT_HELP.get(cmd_name)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="jitguard")
def main() -> None:
    """Find, fix and watch Triton kernel arguments that recompile per call.

    `jitguard COMMAND --help` explains each command. Docs: README.md and docs/ in the repository.
    """
