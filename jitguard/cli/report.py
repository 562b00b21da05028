"""``jitguard report``: explain recorded recompiles, one trace or many merged across ranks."""
from __future__ import annotations

import json
import os
import sys

import click

from jitguard.runtime.trace import SCHEMA as TRACE_SCHEMA
from jitguard.runtime.trace import Trace, TraceError, iter_trace_files, load_trace, read_json_file


def _load(paths: tuple[str, ...]) -> tuple[list[Trace], list[str]]:
    """Traces named or found in directories. A named file must be a trace; a ``*.json`` inside a
    directory that is not one (a merged report, a config) is skipped with a note."""
    traces: list[Trace] = []
    notes: list[str] = []
    seen: set[str] = set()  # one file named twice (or also found in a directory) counts once

    def first_time(f: str) -> bool:
        real = os.path.realpath(f)
        if real in seen:
            return False
        seen.add(real)
        return True

    for given in paths:
        if os.path.isdir(given):
            files = iter_trace_files([given])
            found = 0
            for f in files:
                try:
                    head = read_json_file(f)  # regular files only, size-capped: no FIFO hangs
                except TraceError as exc:
                    notes.append(f"skipped {exc}")
                    continue
                if not isinstance(head, dict) or head.get("schema") != TRACE_SCHEMA:
                    notes.append(f"skipped {f}: not a jitguard trace")
                    continue
                found += 1
                if first_time(f):
                    traces.append(Trace.from_dict(head, path=f))
            if not found:
                subdirs = sorted(
                    os.path.join(given, d) for d in os.listdir(given)
                    if os.path.isdir(os.path.join(given, d))
                    and any(n.endswith(".json") for n in os.listdir(os.path.join(given, d))))
                hint = (f"; its subdirectories {', '.join(subdirs[:5])}"
                        f"{' ...' if len(subdirs) > 5 else ''} have some: pass one run's directory"
                        if subdirs else "")
                raise TraceError(f"{given}: no jitguard traces (*.json) in this directory{hint}")
        elif not os.path.exists(given):
            raise TraceError(f"{given}: no such file or directory")
        elif first_time(given):
            traces.append(load_trace(given))
    return traces, notes


def _split_runs(traces: list[Trace]) -> list[tuple[str | None, list[Trace]]]:
    """Group traces by run id (``None``: no id recorded, e.g. traces from before run ids existed),
    in the order the runs started."""
    groups: dict[str | None, list[Trace]] = {}
    for t in traces:
        groups.setdefault(t.process.run_id, []).append(t)
    return sorted(groups.items(), key=lambda kv: min(t.process.start_wall or 0.0 for t in kv[1]))


def _pick_run(runs, wanted: str) -> list[tuple[str | None, list[Trace]]]:
    """The run named by ``--run`` (its id, or an unambiguous prefix; ``none`` = traces without one)."""
    if wanted.lower() == "none" and any(rid is None for rid, _ in runs):
        return [(rid, ts) for rid, ts in runs if rid is None]
    exact = [(rid, ts) for rid, ts in runs if rid == wanted]
    hits = exact or [(rid, ts) for rid, ts in runs if rid is not None and rid.startswith(wanted)]
    if len(hits) == 1:
        return hits
    listed = ", ".join(rid or "none" for rid, _ in runs)
    if not hits:
        raise TraceError(f"--run {wanted}: no such run among the traces given (runs: {listed})")
    raise TraceError(f"--run {wanted}: ambiguous, matches {', '.join(r for r, _ in hits)}")


def _run_header(rid: str | None, traces: list[Trace]) -> str:
    import datetime

    start = min((t.process.start_wall for t in traces if t.process.start_wall), default=None)
    when = (datetime.datetime.fromtimestamp(start, datetime.timezone.utc).strftime(" started %Y-%m-%d %H:%M:%S UTC")
            if start else "")
    n = len(traces)
    return (f"=== run {rid if rid is not None else '(no run id recorded)'}: {n} trace{'s' if n != 1 else ''}"
            f"{when} ===")


def _single_text(trace: Trace) -> str:
    """One trace: the runtime watcher's own report (per kernel, each recompile with its reason)."""
    from jitguard.runtime.text import render_trace

    return render_trace(trace)


def _findings_report(fmt: str, traces: list[Trace]) -> str:
    """SARIF or GitHub annotations of the traces' findings (the scan's renderers, given a list)."""
    from jitguard.report import github, sarif
    from jitguard.runtime.findings import findings_from_traces

    findings = findings_from_traces(traces)
    return (sarif if fmt == "sarif" else github).render(findings)


@click.command(
    "report",
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  jitguard report trace.json                 one process: every recompile and why
  jitguard report traces/                    every trace in the directory, merged across ranks
  jitguard report traces/ --format json -o merged.json
  jitguard report traces/ --fail-on-stragglers   exit 1 if some rank compiled while others waited
  jitguard report traces/ --format sarif -o jitguard.sarif   the findings, for code scanning
  jitguard report traces/ --run 20261129-0935    one run of several in the directory (id prefix)

\b
Straggler compiles need steps: call jitguard.mark_step() once per step (e.g. per forward pass) on
every rank. Traces of one job come from `jitguard run --trace`, watch(...).to_json(path), or the
vLLM plugin (one file per rank in a directory).

\b
Several runs in one directory: each trace records its run id (JITGUARD_RUN_ID, set by
`jitguard run` and by the first process the JITGUARD variable activates, or torchrun's
TORCHELASTIC_RUN_ID). The text report covers each run in turn, oldest first; --run ID picks one
(needed for --format json, sarif and github).""",
)
@click.argument("traces", nargs=-1, required=True, metavar="DIR_OR_TRACES...",
                type=click.Path(dir_okay=True, file_okay=True))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "github"]), default="text",
              show_default=True,
              help="text for people; json (schema jitguard.merged_report) for tools; sarif (2.1.0) and "
                   "github (workflow annotations) render the traces' findings, as `jitguard scan` does.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report to this file instead of stdout.")
@click.option("--merge/--no-merge", default=None,
              help="Merge several traces across ranks (the default for 2+ traces); --no-merge renders "
                   "each trace on its own, one after the other (text only).")
@click.option("--max-stragglers", type=click.IntRange(min=0), default=30, show_default=True,
              help="Text: show at most this many straggler steps (the largest stalls); 0 = all.")
@click.option("--run", "run_wanted", metavar="ID", default=None,
              help="Report only the traces of this run (its id or a unique prefix; 'none' = traces "
                   "with no run id). Default: every run, each on its own.")
@click.option("--fail-on-stragglers", is_flag=True,
              help="Exit with status 1 when any straggler compile is found (for CI and smoke runs).")
def report(traces: tuple[str, ...], fmt: str, output: str | None, merge: bool | None,
           max_stragglers: int, run_wanted: str | None, fail_on_stragglers: bool) -> None:
    """Explain the Triton recompiles recorded in DIR_OR_TRACES (trace files, or directories of them).

    With one trace: each kernel's variants, every recompile in one line with the parameter that
    changed and the fix. With the traces of several ranks of one job: compiles and compile time per
    rank, each kernel's variants per rank, and straggler compiles -- a rank compiling in a step where
    the others did not, so they waited at the next collective -- with the estimated stall, the
    culprit parameter and the fix.

    Exit status: 0 done; 1 stragglers found with --fail-on-stragglers; 2 bad usage or unreadable trace.
    """
    from jitguard.runtime.merge import MergeError, merge_traces
    from jitguard.runtime.text import render_merged

    merged_all = []
    try:
        loaded, notes = _load(traces)
        if merge is False and fmt != "text":
            raise click.UsageError(f"--no-merge renders text; use --format {fmt} without --no-merge")
        runs = _split_runs(loaded)
        if run_wanted is not None:
            runs = _pick_run(runs, run_wanted)
        elif fmt != "text" and len(runs) > 1:
            listed = ", ".join(f"{rid or 'none'} ({len(ts)} traces)" for rid, ts in runs)
            raise TraceError(f"the traces come from {len(runs)} runs: {listed}; pick one with --run ID")
        parts = []
        if fmt in ("sarif", "github"):
            group = runs[0][1] if runs else []
            merged_all.append((group, None))
            parts.append(_findings_report(fmt, group))
            runs = []
        for rid, group in runs:
            head = _run_header(rid, group) + "\n" if len(runs) > 1 else ""
            if merge is False or (len(group) == 1 and fmt == "text" and merge is None):
                parts.append(head + "\n".join(_single_text(t) for t in group))
                merged_all.append((group, None))
            else:
                merged = merge_traces(group)
                merged_all.append((group, merged))
                if fmt == "json":
                    parts.append(json.dumps(merged.to_dict(), indent=2) + "\n")
                else:
                    parts.append(head + render_merged(merged, max_stragglers=max_stragglers or None))
        text = "\n".join(parts)
    except (TraceError, MergeError) as exc:
        click.echo(f"jitguard report: error: {exc}", err=True)
        sys.exit(2)
    for note in notes:
        click.echo(f"jitguard report: {note}", err=True)
    if output:
        try:
            from jitguard.atomic_write import write_text_atomic

            write_text_atomic(output, text)  # an error leaves no half-written report
        except OSError as exc:
            click.echo(f"jitguard report: error: cannot write {output}: {exc.strerror}", err=True)
            sys.exit(2)
    else:
        click.echo(text, nl=False)
    if fail_on_stragglers:
        for group, merged in merged_all:
            if merged is None:
                try:
                    merged = merge_traces(group)
                except MergeError:
                    continue
            if merged.stragglers:
                sys.exit(1)
