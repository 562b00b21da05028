"""Turn a runtime trace into the same ``Finding`` objects the static scan produces.

One finding per (code, kernel, parameter), pointing at the kernel's ``def``:

- JG001 an int parameter changed value class (1 / divisible by 16 / other) between compiles
  (fixable with ``do_not_specialize``); an int that crossed 2**31 or a pointer whose 16-byte alignment
  changed is also JG001 but ``manual`` (the fix is an annotation or aligned inputs, not the list).
- JG002 a ``tl.constexpr`` parameter took several values.
- JG003 an autotune key argument took several values (each re-benchmarked every config).
- JG007 launch options passed differently (explicit vs default, values, order).

Compiles of configs while an autotuner benchmarks are expected and produce nothing. Each finding
carries its fix (``Finding.fix``), the same plan the scan's rule makes for the kernel the event
names (jitguard.static.trace_fixes); ``jitguard fix --from-trace`` applies it.
"""
from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from typing import Iterable

from jitguard.format import ms as _fmt_ms
from jitguard.format import relative_path as _display_path
from jitguard.findings import Finding
from jitguard.runtime.trace import Trace

_RULE = {
    "value_class": "JG001",
    "type": "JG001",
    "alignment": "JG001",
    "constexpr": "JG002",
    "option": "JG007",
    "option_order": "JG007",
    "autotune_key": "JG003",
}


def _message(code: str, param: str | None, g: dict) -> str:
    n, ms = g["count"], g["ms"]
    cost = f"{n} recompile{'s' if n != 1 else ''}" + (f", {_fmt_ms(ms)}" if ms else "")
    seen = "; ".join(g["what"][:3])
    if code == "JG001" and "type" in g["changes"]:
        return f"{param} crossed 2**31 at run time ({seen}; {cost}): annotate it `{param}: tl.int64`"
    if code == "JG001" and "alignment" in g["changes"] and "value_class" not in g["changes"]:
        return (f"{param} was not always 16-byte aligned at run time ({seen}; {cost}): pass aligned "
                f"tensors or add it to do_not_specialize_on_alignment")
    if code == "JG001":
        return f"{param} changed value class at run time ({seen}; {cost}): add it to do_not_specialize"
    if code == "JG002":
        return (f"constexpr {param} took {len(g['values'])} values at run time ({cost}): bucket it or "
                f"make it a plain int in do_not_specialize")
    if code == "JG003":
        return (f"autotune key {param} took {len(g['values'])} values at run time ({n} re-benchmarks"
                f"{', ' + _fmt_ms(ms) if ms else ''}): bucket it before the launch or drop it from key=[...]")
    return f"launch options differ between calls ({seen}; {cost}): pass them the same way everywhere"


def findings_from_trace(trace: Trace) -> list[Finding]:
    groups: "OrderedDict[tuple, dict]" = OrderedDict()
    for e in trace.events:
        if e.autotuning:
            continue
        for d in e.diff:
            code = _RULE.get(d.change)
            if code is None:
                continue  # a dtype or None-vs-value change: one variant per kind is expected
            param = None if code == "JG007" else d.param
            g = groups.setdefault((code, e.kernel, param), {
                "count": 0, "ms": 0.0, "what": [], "changes": set(),
                "values": [], "steps": [], "calls": [], "event": e,
            })
            g["count"] += 1
            if e.kind == "autotune":
                g["ms"] += (e.autotune.bench_ms or 0.0) if e.autotune else 0.0
            else:
                g["ms"] += e.compile_ms or 0.0
            if d.what not in g["what"]:
                g["what"].append(d.what)
            g["changes"].add(d.change)
            for v in (d.before, d.after):
                if v not in g["values"]:
                    g["values"].append(v)
            if e.step is not None and e.step not in g["steps"]:
                g["steps"].append(e.step)
            call = f"{_display_path(e.call_path)}:{e.call_line}" if e.call_path else None
            if call and call not in g["calls"]:
                g["calls"].append(call)
    from jitguard.static.trace_fixes import TraceFixes

    fixes = TraceFixes()
    out = []
    for (code, kernel, param), g in groups.items():
        e = g["event"]
        message = _message(code, param, g)
        fix = fixes.fix(code, kernel, e.kernel_path, e.kernel_line, param, g["changes"], message)
        out.append(Finding(
            code=code,
            path=_display_path(e.kernel_path),
            line=e.kernel_line or 1,
            column=1,
            kernel=kernel,
            param=param,
            message=message,
            fix_safety=fix.applicability,
            fix=fix,
            source="runtime",
            confidence="high",  # observed, not inferred
            details={
                "kernel_path": e.kernel_path,
                "kernel_line": e.kernel_line,
                "recompiles": g["count"],
                "compile_ms": round(g["ms"], 3),
                "changes": sorted(g["changes"]),
                "values": g["values"][:20],
                "evidence": g["what"][:10],
                "steps": g["steps"][:50],
                "call_sites": g["calls"][:10],
                "rank": trace.process.rank,
                "pid": trace.process.pid,
            },
        ))
    out.sort(key=Finding.sort_key)
    return out


def findings_from_traces(traces: Iterable[Trace]) -> list[Finding]:
    """The findings of several traces (the ranks of one job), one per (code, kernel, parameter):
    recompiles and compile time summed, the ranks and pids that saw it listed."""
    merged: "OrderedDict[tuple, Finding]" = OrderedDict()
    for trace in traces:
        for f in findings_from_trace(trace):
            key = (f.code, f.path, f.line, f.kernel, f.param)
            seen = merged.get(key)
            if seen is None:
                d = dict(f.details)
                d["ranks"] = [d.pop("rank")] if d.get("rank") is not None else []
                d["pids"] = [d.pop("pid")]
                merged[key] = dataclasses.replace(f, details=d)
                continue
            d = seen.details
            d["recompiles"] += f.details["recompiles"]
            d["compile_ms"] = round(d["compile_ms"] + f.details["compile_ms"], 3)
            if f.details.get("rank") is not None:
                d["ranks"].append(f.details["rank"])
            d["pids"].append(f.details["pid"])
            if seen.fix_safety != f.fix_safety and "manual" in (seen.fix_safety, f.fix_safety):
                merged[key] = dataclasses.replace(seen, fix_safety="manual")
    return sorted(merged.values(), key=Finding.sort_key)
