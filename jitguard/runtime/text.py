"""The runtime's text: one event explained, one trace's report, the report merged across ranks.

``explain_event(event)`` is the message of a ``RecompileError`` and of a ``RecompileWarning``;
``render_trace(trace)`` is what ``jitguard report TRACE`` prints for a single trace and what
``watch.summary()`` returns (``summarize(trace)`` is the same content as data); ``render_merged``
renders ``merge.merge_traces`` (straggler compiles, per rank, per kernel). The one module that
writes runtime text; the report renderers (SARIF, GitHub, JSON) render the findings of a trace.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Sequence

from jitguard.format import location, ms
from jitguard.runtime.keys import remedy
from jitguard.runtime.merge import (
    WIDE_RANKS,
    CompileOnRank,
    MergedReport,
    ProcessSummary,
    StragglerStep,
    _ranks_words,
    short_name,
)
from jitguard.runtime.trace import Event, Trace

# ---------------------------------------------------------------------------------------------
# one event, one trace
# ---------------------------------------------------------------------------------------------

_CHANGE_WORDS = {
    "value_class": "value class", "type": "int width", "constexpr": "constexpr value",
    "alignment": "alignment", "dtype": "dtype", "kind": "kind", "option": "option",
    "option_order": "option order", "autotune_key": "autotune key", "config": "config",
}


def _trace_ms(value: float | None) -> str:
    if value is None:
        return "? ms"
    return f"{value:.0f} ms" if value >= 100 else f"{value:.1f} ms"


def _where(e: Event, cwd: str | None = None, callers: int = 1) -> str:
    """The launching line, then its caller (``rope.py:140 <- serve.py:88``) when there is one."""
    out = location(e.call_path, e.call_line, cwd)
    for frame in e.call_stack[:callers]:
        path, _, line = frame.rpartition(":")
        out += f" <- {location(path, int(line) if line.isdigit() else None, cwd)}"
    return out


def _what_happened(e: Event) -> str:
    if e.kind == "autotune":
        at = e.autotune
        n = at.configs if at and at.configs is not None else "?"
        cost = _trace_ms(at.bench_ms) if at and at.bench_ms is not None else "? ms"
        hit = " (served from the autotune cache)" if at and at.cache_hit else ""
        return f"autotune #{e.variant}: benchmarked {n} configs in {cost}{hit}"
    bits = [f"compile #{e.variant}"]
    extras = []
    if e.compile_ms is not None:
        extras.append(_trace_ms(e.compile_ms))
    if e.disk_cache_hit:
        extras.append("disk cache hit")
    if e.warmup:
        extras.append("warmup")
    if e.autotuning:
        extras.append("autotune config")
    if extras:
        bits.append(f"({', '.join(extras)})")
    return " ".join(bits)


def explain_event(event: Event, *, cwd: str | None = None) -> str:
    """``jitguard: kernel fused_rope (rope.py:12) compile #3 (38 ms) at serve.py:88, step 7`` then
    one indented line per difference against the closest previous variant, then the fix."""
    head = (f"jitguard: {short_name(event.kernel)} ({location(event.kernel_path, event.kernel_line, cwd)}) "
            f"{_what_happened(event)} at {_where(event, cwd)}")
    if event.step is not None:
        head += f", step {event.step}"
    lines = [head]
    if event.diff:
        lines.append(f"  why: vs variant {event.closest_variant}: " + "; ".join(d.what for d in event.diff))
    elif event.variant == 1:
        lines.append("  why: first compile of this kernel")
    else:
        lines.append("  why: same key as an earlier variant (the in-memory cache was cleared?)")
    if event.remedy:
        lines.append(f"  fix: {event.remedy}")
    return "\n".join(lines)


def summarize(trace: Trace) -> list[dict[str, Any]]:
    """Per kernel: variants, recompiles, compile ms, culprit parameters with counts, suggested fixes."""
    by_kernel: dict[str, list[Event]] = defaultdict(list)
    for e in trace.events:
        by_kernel[e.kernel].append(e)
    out = []
    for name, events in by_kernel.items():
        compiles = [e for e in events if e.kind == "compile"]
        autotunes = [e for e in events if e.kind == "autotune"]
        culprits: Counter = Counter()
        unique: dict = {}
        autotune_fixes: list[str] = []
        for e in events:
            if e.autotuning:
                continue
            for d in e.diff:
                label = f"options.{d.option}" if d.param == "options" and d.option else d.param
                culprits[(label, d.change)] += 1
                unique.setdefault((d.param, d.option, d.change), d)
            if e.kind == "autotune" and e.remedy and e.remedy not in autotune_fixes:
                autotune_fixes.append(e.remedy)
        # one combined fix per kernel: every culprit parameter in one do_not_specialize list, etc.
        decorator = "gluon.jit" if any(e.frontend == "gluon" for e in events) else "triton.jit"
        combined = remedy([d for d in unique.values() if d.change != "autotune_key"], decorator=decorator)
        fixes = ([combined] if combined else []) + autotune_fixes
        totals = trace.kernels.get(name)
        first = events[0]
        out.append({
            "kernel": name,
            "path": first.kernel_path,
            "line": first.kernel_line,
            "variants": max((e.variant for e in compiles), default=0),
            "compiles": totals.compiles if totals else len(compiles),
            "recompiles": sum(1 for e in compiles if e.variant >= 2 and not e.autotuning),
            "autotunes": totals.autotunes if totals else len(autotunes),
            "compile_ms": round(totals.compile_ms if totals else sum(e.compile_ms or 0 for e in compiles), 3),
            "autotune_ms": round(totals.autotune_ms if totals else sum(
                (e.autotune.bench_ms or 0) for e in autotunes if e.autotune), 3),
            "disk_cache_hits": sum(1 for e in compiles if e.disk_cache_hit),
            "culprits": [{"param": p, "change": c, "count": n} for (p, c), n in culprits.most_common()],
            "fixes": fixes,
        })
    out.sort(key=lambda k: (-k["recompiles"] - k["autotunes"], -k["compile_ms"], k["kernel"]))
    return out


def _fold_config_compiles(events: list[Event]) -> list:
    """Events in order, each run of consecutive config compiles (an autotuner benchmarking) as one
    list: so a per-kernel cap counts each benchmark once and the re-benchmarks stay in view."""
    out: list = []
    for e in events:
        if e.kind == "compile" and e.autotuning:
            if out and isinstance(out[-1], list):
                out[-1].append(e)
                continue
            out.append([e])
        else:
            out.append(e)
    return out


def render_trace(trace: Trace, *, cwd: str | None = None, max_events_per_kernel: int = 20) -> str:
    """The single-trace report: a header, then per kernel its totals and each event explained."""
    p = trace.process
    kernels = summarize(trace)
    n_comp = sum(k["compiles"] for k in kernels)
    n_re = sum(k["recompiles"] for k in kernels)
    n_at = sum(k["autotunes"] for k in kernels)
    ms = sum(k["compile_ms"] for k in kernels)
    at_ms = sum(k["autotune_ms"] for k in kernels)
    who = f"pid {p.pid}" + (f", rank {p.rank}/{p.world_size}" if p.rank is not None else "")
    lines = [f"jitguard: {n_comp} compile{'s' if n_comp != 1 else ''} of {len(kernels)} "
             f"kernel{'s' if len(kernels) != 1 else ''}, {n_re} recompile{'s' if n_re != 1 else ''}"
             + (f", {n_at} autotune run{'s' if n_at != 1 else ''}" if n_at else "")
             + f", {_trace_ms(ms)} compiling" + (f", {_trace_ms(at_ms)} autotuning" if n_at else "")
             + f" ({who}, Triton {p.triton_version or '?'})"]
    if trace.dropped_events:
        lines.append(f"  ({trace.dropped_events} later events were not kept; totals count them)")
    by_kernel: dict[str, list[Event]] = defaultdict(list)
    for e in trace.events:
        by_kernel[e.kernel].append(e)
    for k in kernels:
        lines.append("")
        extra = f", {k['autotunes']} autotune runs ({_trace_ms(k['autotune_ms'])})" if k["autotunes"] else ""
        hits = f", {k['disk_cache_hits']} from disk cache" if k["disk_cache_hits"] else ""
        lines.append(f"{short_name(k['kernel'])}  {location(k['path'], k['line'], cwd)}  "
                     f"{k['variants']} variant{'s' if k['variants'] != 1 else ''}, "
                     f"{k['recompiles']} recompile{'s' if k['recompiles'] != 1 else ''}{extra}, "
                     f"{_trace_ms(k['compile_ms'])}{hits}")
        groups = _fold_config_compiles(by_kernel[k["kernel"]])
        for shown, e in enumerate(groups):
            if shown >= max_events_per_kernel:
                rest = sum(len(g) if isinstance(g, list) else 1 for g in groups[shown:])
                lines.append(f"  ... {rest} more events (see the JSON trace)")
                break
            if isinstance(e, list):  # a run of config compiles while the autotuner benchmarked
                ms = sum(c.compile_ms or 0.0 for c in e)
                lines.append(f"  {len(e)} config compile{'s' if len(e) != 1 else ''} while autotuning "
                             f"({_trace_ms(ms)}, expected)  at {_where(e[0], cwd)}"
                             + (f" step {e[0].step}" if e[0].step is not None else ""))
                continue
            step = f" step {e.step}" if e.step is not None else ""
            what = _what_happened(e)
            if e.kind == "compile":
                what = what.replace(f"compile #{e.variant}", f"#{e.variant:<3}", 1).rstrip()
            lines.append(f"  {what}  at {_where(e, cwd)}{step}")
            if e.diff:
                lines.append(f"       {'; '.join(d.what for d in e.diff)}")
        culprits = [c for c in k["culprits"]]
        if culprits:
            lines.append("  culprits: " + ", ".join(
                f"{c['param']} {_CHANGE_WORDS.get(c['change'], c['change'])} ({c['count']}x)" for c in culprits))
        for fix in k["fixes"]:
            lines.append(f"  fix: {fix}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# the traces of many processes, merged
# ---------------------------------------------------------------------------------------------

_ms = ms
_loc = location


def straggler_line(s: StragglerStep) -> str:
    """``step 57: rank 3 compiled fused_inv_rope_fp8_quant (num_tokens: i32 -> i32, divisible by
    16) in 412 ms; 7 ranks waited``"""
    by_rank: dict[int, list[CompileOnRank]] = defaultdict(list)
    for c in s.compiles:
        by_rank[c.rank].append(c)
    parts = []
    for r in s.compiling_ranks:
        cs = by_rank[r]
        what = ", ".join(
            f"{'autotuned' if c.kind == 'autotune' else 'loaded' if c.disk_cache_hit else 'compiled'} "
            f"{short_name(c.kernel)} ({c.why})" + (" from the disk cache" if c.disk_cache_hit else "")
            for c in cs)
        total = None if any(c.compile_ms is None for c in cs) else sum(c.compile_ms or 0 for c in cs)
        parts.append(f"rank {r} {what} in {_ms(total)}")
    n = len(s.waiting_ranks)
    waited = f"{n} rank{'s' if n != 1 else ''} waited"
    if len(s.compiling_ranks) > 1:
        waited += f" ~{_ms(s.stall_ms)}"
    return f"step {s.step}: " + "; ".join(parts) + f"; {waited}"


def render_merged(report: MergedReport, *, max_stragglers: int | None = 30, color: bool = False) -> str:
    """The merged report as text: header, straggler compiles, per rank, per kernel, warnings."""
    lines: list[str] = []
    procs = report.processes
    ranks = report.ranks
    hosts = sorted({p.host for p in procs if p.host})
    total_compiles = sum(p.compiles for p in procs)
    total_ms = sum(p.compile_ms for p in procs)
    extra = len(procs) - len(ranks)
    if ranks:
        who = f"rank{'s' if len(ranks) > 1 else ''} {_ranks_words(ranks)}"
        if report.world_size:
            who += f" of world size {report.world_size}"
        if extra:
            who += f" + {extra} process{'es' if extra > 1 else ''} without a rank"
    else:
        who = "no ranks (not a distributed job)" if len(procs) > 1 else "no rank"
    n_at = sum(p.autotunes for p in procs)
    tuned = (f"; {n_at} autotune run{'s' if n_at != 1 else ''} in "
             f"{_ms(sum(p.autotune_ms for p in procs))}") if n_at else ""
    lines.append(f"jitguard: {len(procs)} trace{'s' if len(procs) != 1 else ''}, {who}, "
                 f"on {len(hosts)} host{'s' if len(hosts) != 1 else ''}; "
                 f"{total_compiles} compile{'s' if total_compiles != 1 else ''} in {_ms(total_ms)} "
                 f"of compile time{tuned}")
    st = report.stragglers
    if st:
        lines.append(
            f"{len(st)} straggler step{'s' if len(st) != 1 else ''}: estimated stall "
            f"{_ms(report.total_stall_ms)} of job time, {_ms(report.idle_rank_ms)} of rank time "
            f"spent waiting")
    elif len(ranks) >= 2:
        lines.append("no straggler compiles: no rank compiled in a step where another did not")
    if report.lockstep_steps and len(ranks) >= 2:
        ls = report.lockstep_steps
        shown = ", ".join(map(str, ls[:10])) + (f" and {len(ls) - 10} more" if len(ls) > 10 else "")
        lines.append(f"lockstep compiles (every rank built the same variants; nobody waited) at "
                     f"step{'s' if len(ls) != 1 else ''} {shown}")
    lines.append("")

    if st:
        lines.append("Straggler compiles (a rank compiled while the others waited at the next collective):")
        shown = st if max_stragglers is None else sorted(st, key=lambda s: -s.stall_ms)[:max_stragglers]
        shown = sorted(shown, key=lambda s: s.step)
        for s in shown:
            lines.append("  " + straggler_line(s))
        if max_stragglers is not None and len(st) > max_stragglers:
            lines.append(f"  ... {len(st) - max_stragglers} more straggler step{'s' if len(st) - max_stragglers != 1 else ''} with smaller stalls "
                         f"(--format json lists all)")
        by_kernel = {k.kernel: k for k in report.kernels}
        involved = []
        for s in st:
            for c in s.compiles:
                if c.kernel not in involved:
                    involved.append(c.kernel)
        for name in involved:
            k = by_kernel.get(name)
            fixes = [k.fix] if k and k.fix else (k.remedies if k else [])
            for fix in fixes:
                lines.append(f"  fix {short_name(name)} ({_loc(k.kernel_path, k.kernel_line)}): {fix}")
        lines.append("")

    if ranks or procs:
        lines.append("Per rank:" if ranks else "Per process:")
        tuned = any(p.autotunes for p in procs)
        rows = [("rank", "host", "pid", "compiles", "compile time",
                 *(("autotunes", "autotune time") if tuned else ()), "steps with events")]
        for p in procs:
            steps = f"{p.steps[0]}..{p.steps[1]}" if p.steps else "-"
            at = (str(p.autotunes), _ms(p.autotune_ms)) if tuned else ()
            rows.append((str(p.rank) if p.rank is not None else "-", p.host or "?", str(p.pid),
                         str(p.compiles), _ms(p.compile_ms), *at, steps))
        lines.extend("  " + r for r in _table(rows))
        lines.append("")

    for k in report.kernels:
        nvar = len(k.variants)
        lines.append(f"{k.kernel}  ({_loc(k.kernel_path, k.kernel_line)}): {nvar} variant"
                     f"{'s' if nvar != 1 else ''}{' across ranks' if ranks else ''}, {_ms(k.compile_ms)}")
        cols = [p for p in procs if any(_rank_label(p) in map(str, v.steps_by_rank) for v in k.variants)]
        if not cols:
            continue
        params = []
        for v in k.variants:
            for name in v.description:
                if name not in params:
                    params.append(name)
        wide = len(cols) > WIDE_RANKS
        if wide:  # one column listing "step: ranks" instead of a column per rank
            header = ("variant", *params, "compiled at step: by ranks")
        else:
            header = ("variant", *params, *(_rank_col(p) for p in cols))
        rows = [header]
        for v in k.variants:
            cells = [f"#{v.number}" + (" autotune" if v.kind == "autotune" else "")]
            cells += [v.description.get(n, "") for n in params]
            if wide:
                by_step: dict[Any, list] = defaultdict(list)
                for who, steps in v.steps_by_rank.items():
                    for st in sorted(set(steps), key=lambda x: (x is None, x or 0)):
                        by_step[st].append(who)
                parts = []
                for st in sorted(by_step, key=lambda x: (x is None, x or 0)):
                    ranks_ = [w for w in by_step[st] if isinstance(w, int)]
                    others = [str(w) for w in by_step[st] if not isinstance(w, int)]
                    who = ", ".join(([f"ranks {_ranks_words(ranks_)}" if len(ranks_) > 1 else
                                      f"rank {ranks_[0]}"] if ranks_ else []) + others)
                    parts.append(f"{'s' + str(st) if st is not None else '-'}: {who}")
                cells.append("; ".join(parts))
            else:
                for p in cols:
                    steps = v.steps_by_rank.get(p.rank if p.rank is not None else f"pid {p.pid}")
                    cells.append(",".join("-" if s is None else f"s{s}" for s in steps) if steps else ".")
            rows.append(tuple(cells))
        lines.extend("  " + r for r in _table(rows))
        for fix in ([k.fix] if k.fix else k.remedies):
            lines.append(f"  fix: {fix}")
        lines.append("")
    if report.kernels:
        lines.append("(cells: the step at which that rank or process compiled the variant; '.' = never; "
                     "'-' = no step marked)")
    for w in report.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines).rstrip() + "\n"


def _rank_label(p: ProcessSummary) -> str:
    return str(p.rank) if p.rank is not None else f"pid {p.pid}"


def _rank_col(p: ProcessSummary) -> str:
    return f"r{p.rank}" if p.rank is not None else f"pid{p.pid}"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
