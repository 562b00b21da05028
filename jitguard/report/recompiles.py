"""Text rendering of one runtime trace: per kernel, each recompile with why and the fix.

``render_text(trace)`` is what ``jitguard report TRACE`` prints for a single trace and what
``watch.summary()`` returns; ``explain_event(event)`` is the message of a ``RecompileError`` and of
a ``RecompileWarning``; ``summarize(trace)`` is the same content as data (for JSON output).
"""
from __future__ import annotations

import os
from collections import Counter, defaultdict
from typing import Any

from jitguard.runtime.keys import remedy
from jitguard.runtime.trace import Event, Trace


def _rel(path: str | None, cwd: str | None = None) -> str | None:
    if not path:
        return path
    cwd = cwd or os.getcwd()
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if rel.startswith(".." + os.sep + "..") else rel


def _loc(path: str | None, line: int | None, cwd: str | None = None) -> str:
    if not path:
        return "?"
    return f"{_rel(path, cwd)}:{line}" if line else str(_rel(path, cwd))


_CHANGE_WORDS = {
    "value_class": "value class", "type": "int width", "constexpr": "constexpr value",
    "alignment": "alignment", "dtype": "dtype", "kind": "kind", "option": "option",
    "option_order": "option order", "autotune_key": "autotune key",
}


def short_name(qualname: str) -> str:
    return qualname.rsplit(".", 1)[-1]


def _ms(value: float | None) -> str:
    if value is None:
        return "? ms"
    return f"{value:.0f} ms" if value >= 100 else f"{value:.1f} ms"


def _where(e: Event, cwd: str | None = None, callers: int = 1) -> str:
    """The launching line, then its caller (``rope.py:140 <- serve.py:88``) when there is one."""
    out = _loc(e.call_path, e.call_line, cwd)
    for frame in e.call_stack[:callers]:
        path, _, line = frame.rpartition(":")
        out += f" <- {_loc(path, int(line) if line.isdigit() else None, cwd)}"
    return out


def _what_happened(e: Event) -> str:
    if e.kind == "autotune":
        at = e.autotune
        n = at.configs if at and at.configs is not None else "?"
        cost = _ms(at.bench_ms) if at and at.bench_ms is not None else "? ms"
        hit = " (served from the autotune cache)" if at and at.cache_hit else ""
        return f"autotune #{e.variant}: benchmarked {n} configs in {cost}{hit}"
    bits = [f"compile #{e.variant}"]
    extras = []
    if e.compile_ms is not None:
        extras.append(_ms(e.compile_ms))
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
    head = (f"jitguard: {short_name(event.kernel)} ({_loc(event.kernel_path, event.kernel_line, cwd)}) "
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


def render_text(trace: Trace, *, cwd: str | None = None, max_events_per_kernel: int = 20) -> str:
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
             + f", {_ms(ms)} compiling" + (f", {_ms(at_ms)} autotuning" if n_at else "")
             + f" ({who}, Triton {p.triton_version or '?'})"]
    if trace.dropped_events:
        lines.append(f"  ({trace.dropped_events} later events were not kept; totals count them)")
    by_kernel: dict[str, list[Event]] = defaultdict(list)
    for e in trace.events:
        by_kernel[e.kernel].append(e)
    for k in kernels:
        lines.append("")
        extra = f", {k['autotunes']} autotune runs ({_ms(k['autotune_ms'])})" if k["autotunes"] else ""
        hits = f", {k['disk_cache_hits']} from disk cache" if k["disk_cache_hits"] else ""
        lines.append(f"{short_name(k['kernel'])}  {_loc(k['path'], k['line'], cwd)}  "
                     f"{k['variants']} variant{'s' if k['variants'] != 1 else ''}, "
                     f"{k['recompiles']} recompile{'s' if k['recompiles'] != 1 else ''}{extra}, "
                     f"{_ms(k['compile_ms'])}{hits}")
        shown = 0
        for e in by_kernel[k["kernel"]]:
            if shown >= max_events_per_kernel:
                lines.append(f"  ... {len(by_kernel[k['kernel']]) - shown} more events (see the JSON trace)")
                break
            shown += 1
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
