"""The ``jitguard`` command line.

Each subcommand lives in its own module of this package (``jitguard/cli/scan.py`` defines ``scan``
and so on) and is imported only when used, so ``jitguard scan`` never imports Triton.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys

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

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """click's standalone mode, except that every error is one line (``jitguard CMD: error:
        ...``) with the command's documented exit status, and a JSON document where one was asked
        for (jitguard/cli/errors.py)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        from jitguard.cli import errors

        argv = list(sys.argv[1:] if args is None else args)
        command = next((a for a in argv if not a.startswith("-")), "")
        command = command if command in COMMANDS else ""
        sub_args = argv[argv.index(command) + 1:] if command else argv
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except errors.CliError as exc:
            sys.exit(errors.report_error(exc.command or command, exc.message, exit_code=exc.exit_code,
                                         args=sub_args, path=exc.path))
        except click.exceptions.NoArgsIsHelpError as exc:  # `jitguard` alone: the help, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            sys.exit(errors.report_error(command or "", errors.usage_message(exc),
                                         exit_code=exc.exit_code, args=sub_args))
        except click.ClickException as exc:
            sys.exit(errors.report_error(command or "", exc.format_message(),
                                         exit_code=exc.exit_code, args=sub_args))
        except (click.Abort, KeyboardInterrupt, EOFError):
            click.echo(f"jitguard{' ' + command if command else ''}: interrupted", err=True)
            sys.exit(errors.EXIT_INTERRUPTED)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="jitguard")
def main() -> None:
    """Find, fix and watch Triton kernel arguments that recompile per call.

    `jitguard COMMAND --help` explains each command. Docs: README.md and docs/ in the repository.
    """
