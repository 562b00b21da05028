"""``jitguard warmup``: compile (or, with ``--check``, verify) every variant recorded in traces."""
from __future__ import annotations

import json
import os
import sys

import click


@click.command(
    "warmup",
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  jitguard warmup --check traces/                # CI, no GPU: every recorded variant rebuilds
  jitguard warmup traces/                        # on the GPU: compile them into TRITON_CACHE_DIR
  jitguard run --warmup traces/ -- python serve.py   # warm up inside the server, at start-up

\b
For every variant the traces recorded (one process, or a directory of ranks: variants several
ranks compiled are counted once), jitguard imports the kernel by module and qualname, rebuilds
arguments that give exactly the recorded specialization (pointer stand-ins, ints of the recorded
width and value class, the constexprs, the launch options; for autotuned kernels the recorded best
config), checks with Triton's own binder that they make the recorded key, and compiles them with
kernel.warmup (no launch). A variant that can't be rebuilt is listed with the reason. Exit status:
0 every variant rebuilt (and compiled), 1 some were skipped, 2 usage error or unreadable trace.""",
)
@click.argument("traces", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--check", is_flag=True,
              help="Only verify that every recorded variant can be rebuilt (Triton's binder, no compile, "
                   "no GPU needed).")
@click.option("--target", default="cuda:90", show_default=True, metavar="BACKEND:ARCH",
              help="With --check: the target whose binder verifies the keys (cuda:90, hip:gfx942).")
@click.option("--kernel", "kernels", multiple=True, metavar="NAME",
              help="Only this kernel (module.qualname, or the qualname); repeatable.")
@click.option("-I", "--import-path", "import_paths", multiple=True, metavar="DIR",
              help="Put DIR first on sys.path before importing the kernels (repeatable; default: the "
                   "current directory).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def warmup(traces: tuple[str, ...], check: bool, target: str, kernels: tuple[str, ...],
           import_paths: tuple[str, ...], fmt: str) -> None:
    """Compile every variant recorded in TRACE... (files or directories) before traffic."""
    from jitguard.runtime import warmup as warmup_mod
    from jitguard.runtime.compat import UnsupportedTritonError
    from jitguard.runtime.trace import TraceError

    for p in reversed(import_paths or (".",)):
        sys.path.insert(0, os.path.abspath(p))
    try:
        if check:
            report = warmup_mod.check(list(traces), kernels=list(kernels) or None, target=target)
        else:
            report = warmup_mod.warmup(list(traces), kernels=list(kernels) or None)
    except (TraceError, UnsupportedTritonError, ValueError, RuntimeError) as exc:
        click.echo(f"jitguard warmup: {exc}", err=True)
        sys.exit(2)
    if fmt == "json":
        click.echo(json.dumps(report.to_dict(), indent=1, default=repr))
    else:
        click.echo(report.summary())
    sys.exit(0 if report.ok else 1)
