"""``jitguard run``: run a program with the recompile watcher on, like ``coverage run``."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import click

DEFAULT_TRACE = "jitguard-trace.json"


def site_dir() -> str:
    """The directory holding jitguard's sitecustomize.py (put first on the child's PYTHONPATH)."""
    import jitguard.runtime

    return os.path.join(os.path.dirname(os.path.abspath(jitguard.runtime.__file__)), "_site")


@click.command(
    "run",
    context_settings={"help_option_names": ["-h", "--help"], "ignore_unknown_options": True,
                      "allow_interspersed_args": False},
    epilog="""\b
Examples:
  jitguard run -- python serve.py --port 8000
  jitguard run --mode raise --max-recompiles 0 -- python -m pytest tests/
  jitguard run --trace traces/ -- torchrun --nproc-per-node 8 serve.py
  jitguard report jitguard-trace.json

\b
How it works: the command runs with JITGUARD=<mode> and JITGUARD_TRACE=<path> set and with
jitguard's sitecustomize directory first on PYTHONPATH, so every Python process it starts
(workers too) turns the watcher on right after it imports Triton; nothing is installed into
site-packages. A file --trace goes to the first process; its child processes write
<stem>.pid<P>.json beside it. A directory --trace gets one file per process, with the rank in the
name. Every process records the same run id (JITGUARD_RUN_ID: yours if set, else a fresh one;
torchrun's TORCHELASTIC_RUN_ID when it has one), so `jitguard report DIR` tells runs apart. Processes that end with os._exit (e.g. forked multiprocessing workers) write no trace.
Without `jitguard run`, set the same variables and call
jitguard.runtime.activate.activate_from_env() early in the program (or print this directory
with --print-site-dir and put it on PYTHONPATH yourself).""",
)
@click.option("--trace", "trace", default=DEFAULT_TRACE, show_default=True, metavar="FILE|DIR/",
              help="Where to write the trace (a directory, or a path ending in '/', gets one file per "
                   "process). {rank} and {pid} in it are filled in per process, e.g. "
                   "traces/rank{rank}.json.")
@click.option("--mode", type=click.Choice(["record", "warn", "raise"]), default="warn", show_default=True,
              help="record: trace only; warn: also a warning per recompile and a summary at exit; "
                   "raise: RecompileError at the first recompile beyond --max-recompiles.")
@click.option("--max-recompiles", type=click.IntRange(min=0), default=None,
              help="Recompiles allowed before warn/raise act (default 0).")
@click.option("--summary/--no-summary", default=None,
              help="Print the per-kernel summary at exit (default: on in warn mode).")
@click.option("--warmup", "warmup", multiple=True, metavar="TRACE|DIR",
              help="Before the program's first compile, compile every variant these traces recorded "
                   "(jitguard.warmup; sets JITGUARD_WARMUP; repeatable).")
@click.option("--print-site-dir", is_flag=True,
              help="Print the directory to put on PYTHONPATH for activation by environment variable, and exit.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def run(trace: str, mode: str, max_recompiles: int | None, summary: bool | None, warmup: tuple[str, ...],
        print_site_dir: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND with every Triton compile recorded and explained.

    COMMAND is a program and its arguments after `--` (`python prog.py args`, `torchrun ...`,
    or just `prog.py args`, run with this Python). Exits with COMMAND's exit code (128 + N when
    signal N ended it); 127 when COMMAND is not found, 126 when it cannot be run, 2 for a usage
    error. SIGTERM and SIGHUP are passed on to it, and a SIGINT not from the terminal if COMMAND
    is still running half a second later (one sent to the process group reached it already).
    """
    if print_site_dir:
        click.echo(site_dir())
        return
    if not command:
        raise click.UsageError("give the command to run after --, e.g. jitguard run -- python prog.py")
    argv = list(command)
    if argv[0].endswith(".py") and os.path.isfile(argv[0]):
        argv = [sys.executable, *argv]
    elif shutil.which(argv[0]) is None:  # as a shell says it: exit 127
        from jitguard.cli.errors import CliError

        raise CliError(f"{argv[0]}: command not found", 127, command="run")
    from jitguard.runtime.trace import check_trace_template, has_placeholders

    try:
        check_trace_template(trace)
    except ValueError as exc:
        raise click.UsageError(f"--trace: {exc}") from None
    trace_abs = os.path.abspath(trace) + (os.sep if trace.endswith(("/", os.sep)) else "")
    if has_placeholders(os.path.dirname(trace_abs)):
        pass  # per-process directories: created when each process writes
    elif trace_abs.endswith(os.sep):
        os.makedirs(trace_abs, exist_ok=True)
    else:
        parent = os.path.dirname(trace_abs)
        if not os.path.isdir(parent):
            raise click.UsageError(f"--trace {trace}: directory {parent} does not exist")
    env = dict(os.environ)
    env["JITGUARD"] = mode
    env["JITGUARD_TRACE"] = trace_abs
    env.pop("JITGUARD_TRACE_CLAIMED", None)
    if not env.get("JITGUARD_RUN_ID", "").strip() or env.get("JITGUARD_RUN_ID_AUTO") == "1":
        # every process of this run records the same id: `jitguard report DIR` tells runs apart
        from jitguard.runtime.process import new_run_id

        env["JITGUARD_RUN_ID"], env["JITGUARD_RUN_ID_AUTO"] = new_run_id(), "1"
    if max_recompiles is not None:
        env["JITGUARD_MAX_RECOMPILES"] = str(max_recompiles)
    if summary is not None:
        env["JITGUARD_SUMMARY"] = "1" if summary else "0"
    if warmup:
        missing = [w for w in warmup if not os.path.exists(w)]
        if missing:
            raise click.UsageError(f"--warmup {missing[0]}: no such file or directory")
        env["JITGUARD_WARMUP"] = os.pathsep.join(os.path.abspath(w) for w in warmup)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site_dir(), env.get("PYTHONPATH")) if p)
    import tempfile

    started = time.time()
    with tempfile.TemporaryDirectory(prefix="jitguard-run-") as notes:
        env["JITGUARD_ACTIVATION_NOTES"] = notes
        try:
            code = _run_forwarding_signals(argv, env)
        except OSError as exc:  # found but not runnable: exit 126, as a shell says it
            from jitguard.cli.errors import CliError

            raise CliError(f"cannot run {argv[0]}: {exc.strerror or exc}", 126, command="run") from None
        _say_activation_failures(notes)
    _say_where_traces_are(trace_abs, started)
    sys.exit(code)


FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP")


# A SIGINT sent to the whole process group (Ctrl-C without a terminal, `kill -INT -PGID`) reaches the
# command as well: it is passed on only if the command is still running this long after, so that the
# command does not get it twice, the second while it unwinds from the first and before it writes its
# trace (a second SIGINT that arrives while the trace is written is ignored there).
SIGINT_GRACE_S = 0.5


class _SigintPending(Exception):
    """Raised by the SIGINT handler to end ``proc.wait()`` (only while in it)."""


def _run_forwarding_signals(argv: list[str], env: dict[str, str]) -> int:
    """Run the command and return its exit status as a shell reports it (128 + N when signal N
    ended it). SIGTERM and SIGHUP sent to ``jitguard run`` go to the command (which writes its
    trace and ends), SIGINT too unless it came from the terminal's Ctrl-C, which reaches the
    whole foreground process group, the command included, already; any other SIGINT is passed on
    after ``SIGINT_GRACE_S`` if the command has not ended by then."""
    import signal

    proc = subprocess.Popen(argv, env=env)
    previous = {}
    interrupted: list[float] = []  # when a SIGINT to pass on came
    waiting = [False]  # in proc.wait(): a SIGINT to pass on ends the wait, to start its grace

    def forward(signum, frame):
        if signum == signal.SIGINT:
            if not _ctrl_c_reached_the_group() and not interrupted:
                interrupted.append(time.monotonic())
                if waiting[0]:
                    raise _SigintPending  # a handler that returns does not end a wait (PEP 475)
            return
        try:
            proc.send_signal(signum)
        except OSError:
            pass

    for name in FORWARDED:
        sig = getattr(signal, name, None)
        if sig is not None:
            try:
                previous[sig] = signal.signal(sig, forward)
            except (ValueError, OSError):
                pass
    try:
        while True:
            try:
                # the flag is cleared in this body, before anything that must not be cut short: the
                # handler raises only here (and only for the first SIGINT of a grace)
                waiting[0] = True
                if not interrupted:
                    rc = proc.wait()  # no wake-ups while nothing is pending
                    waiting[0] = False
                    break
                left = SIGINT_GRACE_S - (time.monotonic() - interrupted[0])
                if left > 0:
                    rc = proc.wait(timeout=left)
                    waiting[0] = False
                    break
                waiting[0] = False
                interrupted.clear()
                try:
                    proc.send_signal(signal.SIGINT)
                except OSError:
                    pass
            except (subprocess.TimeoutExpired, _SigintPending):
                continue  # the grace is up (passed on next) or a SIGINT came: wait again
            except KeyboardInterrupt:  # a handler could not be installed: keep waiting
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - rc if rc < 0 else rc


def _ctrl_c_reached_the_group() -> bool:
    """True when this process is in the foreground process group of its terminal: a Ctrl-C there
    sends SIGINT to every process of the group, the command's too."""
    for fd in (0, 1, 2):
        try:
            return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


def _say_activation_failures(notes: str) -> None:
    """One line for every child Python that could not activate the watcher (e.g. another venv
    without jitguard), instead of one line on each of their stderr."""
    try:
        names = os.listdir(notes)
    except OSError:
        return
    reasons: dict[str, list[str]] = {}
    for name in names:
        try:
            with open(os.path.join(notes, name), encoding="utf-8", errors="replace") as fh:
                exe, _, why = fh.read(2000).partition("\t")
        except OSError:
            continue
        reasons.setdefault(why.strip() or "unknown reason", []).append(exe)
    for why, exes in sorted(reasons.items()):
        n = len(exes)
        shown = ", ".join(sorted(set(exes))[:3])
        click.echo(f"jitguard: could not activate in {n} Python process{'es' if n != 1 else ''} ({shown}): "
                   f"{why}; their compiles are not in the trace", err=True)


def _say_where_traces_are(target: str, started: float) -> None:
    """Tell the user when the trace is not where they asked (no Triton, or only child processes)."""
    from jitguard.runtime.trace import has_placeholders

    if has_placeholders(os.path.dirname(target)):
        return  # one directory per process: nothing single to look in
    if target.endswith(os.sep):
        directory, names = target, None
    elif has_placeholders(target):
        import fnmatch
        import re

        directory = os.path.dirname(target)
        pattern = re.sub(r"\{(rank|pid)\}", "*", os.path.basename(target))
        try:
            found = [n for n in os.listdir(directory) if fnmatch.fnmatch(n, pattern)
                     and os.path.getmtime(os.path.join(directory, n)) >= started - 1]
        except OSError:
            found = []
        if not found:
            click.echo("jitguard: no trace was written (did the program import Triton and exit normally?)",
                       err=True)
        return
    else:
        if os.path.isfile(target) and os.path.getmtime(target) >= started - 1:
            return
        directory = os.path.dirname(target)
        stem = os.path.splitext(os.path.basename(target))[0]
        names = stem + "."
    try:
        found = sorted(
            n for n in os.listdir(directory)
            if n.endswith(".json") and (names is None or n.startswith(names))
            and os.path.getmtime(os.path.join(directory, n)) >= started - 1
        )
    except OSError:
        found = []
    if not found:
        click.echo("jitguard: no trace was written (did the program import Triton and exit normally?)",
                   err=True)
    elif names is not None:
        click.echo(f"jitguard: the traces are per process: {', '.join(found[:8])}"
                   f"{' ...' if len(found) > 8 else ''} in {directory} (jitguard report {directory})",
                   err=True)
