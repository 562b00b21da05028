"""Merge the traces of many processes (the ranks of one tensor-parallel job) into one report.

Ranks of a TP job run every step in lockstep: a collective at the end of each step waits for the
slowest rank. When one rank compiles a kernel variant that the others did not need in that step (its
local token count crossed a specialization class), every other rank sits at the next collective for
the length of that compile. This module finds those **straggler compiles** by lining the traces up
on the step numbers that ``jitguard.mark_step`` put on each event, and estimates the stall.

Definitions (per step ``s``, over the ranks present):

* a rank's compiles in ``s`` are its compile and autotune events whose ``step == s``;
* the *common* compiles of ``s`` are the (kernel, variant) pairs every rank compiled in ``s`` (a
  lockstep warmup: everyone pays it, nobody waits for anybody);
* a rank's *extra* compiles are the rest; ``s`` is a straggler step when some ranks have extra
  compiles and at least one rank has none: those ranks **waited**;
* the estimated stall of ``s`` is the largest per-rank sum of extra compile time: the wall time the
  waiting ranks spent at the next collective (each rank's own stall is that minus its own extra).

Variants are compared across ranks by their decoded specialization (parameter types, value classes,
constexpr values, pointer dtype/alignment, options), not by per-process variant numbers.
"""
from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from jitguard.format import location as _loc
from jitguard.format import ms as _ms
from jitguard.runtime.keys import describe
from jitguard.runtime.keys import remedy as keys_remedy
from jitguard.runtime.trace import Event, Param, Trace, TraceError, load_traces

MERGED_SCHEMA = "jitguard.merged_report"
MERGED_VERSION = 1
WIDE_RANKS = 16  # beyond this many ranks, variant tables list "step: ranks" instead of a column each


class MergeError(TraceError):
    """The traces given cannot be merged (e.g. two traces claim the same rank)."""


# --------------------------------------------------------------------------------------------
# Describing specializations in words


def describe_param(p: Param) -> str:
    """How Triton specialized one parameter, in the words every jitguard report uses
    (``keys.describe``: one source of truth); constexprs get a ``(constexpr)`` tag in tables."""
    words = describe(p)
    return f"{words} (constexpr)" if p.kind == "constexpr" else words


def variant_signature(event: Event) -> tuple:
    """A process-independent identity of the compiled variant: equal across ranks iff Triton would
    build the same binary (same specialization and launch options)."""
    params = tuple(
        (p.index, p.name, p.kind, p.type, p.value_class,
         repr(p.constexpr) if (p.kind == "constexpr" or p.type == "constexpr" or p.kind == "none")
         else None,
         p.dtype, p.aligned16)
        for p in sorted(event.params, key=lambda q: q.index)
    )
    options = tuple(sorted((str(k), repr(v)) for k, v in (event.options or {}).items()))
    if not params and not options and event.key:
        return (event.kind, ("key", event.key))
    return (event.kind, params, options)


def short_name(qualname: str) -> str:
    return qualname.rsplit(".", 1)[-1]


def _diff_words(event: Event) -> str:
    """``num_tokens: i32 -> i32, divisible by 16; BLOCK (constexpr): 16 -> 32``"""
    parts = []
    for d in event.diff:
        name = d.param if d.param != "options" or not d.option else f"options.{d.option}"
        parts.append(d.what or f"{name}: {d.before} -> {d.after}")
    return "; ".join(parts)


def _event_ms(event: Event) -> float | None:
    if event.kind == "autotune":
        return event.autotune.bench_ms if event.autotune else None
    return event.compile_ms


# --------------------------------------------------------------------------------------------
# The merged model


@dataclass
class ProcessSummary:
    """One trace: a rank of the job (or a process without a rank, e.g. an engine front end)."""

    rank: int | None
    world_size: int | None
    host: str
    pid: int
    path: str | None
    compiles: int
    autotunes: int
    compile_ms: float
    dropped_events: int
    steps: tuple[int, int] | None  # first and last step seen on an event
    unstepped: int  # events without a step
    autotune_ms: float = 0.0  # benchmarking time of autotune re-runs (their config compiles included)

    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "world_size": self.world_size, "host": self.host, "pid": self.pid,
            "path": self.path, "compiles": self.compiles, "autotunes": self.autotunes,
            "compile_ms": round(self.compile_ms, 3), "dropped_events": self.dropped_events,
            "first_step": self.steps[0] if self.steps else None,
            "last_step": self.steps[1] if self.steps else None,
            "events_without_step": self.unstepped, "autotune_ms": round(self.autotune_ms, 3),
        }


@dataclass
class VariantRow:
    """One distinct variant of a kernel across the job: which rank compiled it at which step."""

    number: int  # 1-based, in order of first appearance (step, then wall time)
    kind: str
    description: dict[str, str]  # param -> words, only the params that differ between variants
    steps_by_rank: dict[Any, list[int | None]] = field(default_factory=dict)  # rank label -> steps

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.number, "kind": self.kind, "params": self.description,
                "steps_by_rank": {str(k): v for k, v in self.steps_by_rank.items()}}


@dataclass
class KernelSummary:
    kernel: str
    kernel_path: str | None
    kernel_line: int | None
    variants: list[VariantRow]
    compiles_by_rank: dict[Any, int]
    compile_ms: float
    remedies: list[str]  # distinct remedies of the events, as recorded
    culprits: list[str]  # parameters (or "options.X") that changed between variants on any rank
    fix: str | None  # one remedy for all of them (keys.remedy over every rank's diffs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel, "kernel_path": self.kernel_path, "kernel_line": self.kernel_line,
            "variants": [v.to_dict() for v in self.variants],
            "variants_by_rank": {str(k): v for k, v in self.compiles_by_rank.items()},
            "compile_ms": round(self.compile_ms, 3), "culprits": self.culprits, "fix": self.fix,
            "remedies": self.remedies,
        }


@dataclass
class CompileOnRank:
    """One extra compile (or autotune) of a straggler step on one rank."""

    rank: int
    kernel: str
    kind: str
    compile_ms: float | None
    variant: int  # job-wide variant number (VariantRow.number)
    first_on_rank: bool  # the kernel's first compile in that process (no previous variant to diff)
    diff: list[dict[str, Any]]
    culprits: list[str]  # parameter names (or "options.X") that changed
    why: str  # the diff in words, or why there is none
    remedy: str | None
    kernel_path: str | None
    kernel_line: int | None
    call_path: str | None
    call_line: int | None
    seen_elsewhere: dict[int, int | None]  # rank -> step where that rank compiled the same variant
    disk_cache_hit: bool | None = None  # Triton's disk cache served it (another rank built it first)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "kernel": self.kernel, "kind": self.kind,
            "compile_ms": None if self.compile_ms is None else round(self.compile_ms, 3),
            "variant": self.variant, "first_on_rank": self.first_on_rank, "diff": self.diff,
            "culprits": self.culprits, "why": self.why, "remedy": self.remedy,
            "kernel_path": self.kernel_path, "kernel_line": self.kernel_line,
            "call_path": self.call_path, "call_line": self.call_line,
            "same_variant_on": {str(k): v for k, v in sorted(self.seen_elsewhere.items())},
            "disk_cache_hit": self.disk_cache_hit,
        }


@dataclass
class StragglerStep:
    step: int
    compiles: list[CompileOnRank]
    compiling_ranks: list[int]
    waiting_ranks: list[int]
    stall_ms: float  # estimated wall time the waiting ranks spent at the next collective
    stall_by_rank: dict[int, float]  # every rank's estimated wait (0 for the slowest)
    ms_unknown: bool  # some compile in the step had no measured time

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step, "compiling_ranks": self.compiling_ranks,
            "waiting_ranks": self.waiting_ranks, "stall_ms": round(self.stall_ms, 3),
            "stall_by_rank": {str(k): round(v, 3) for k, v in sorted(self.stall_by_rank.items())},
            "compile_time_unknown": self.ms_unknown,
            "compiles": [c.to_dict() for c in self.compiles],
        }


@dataclass
class MergedReport:
    processes: list[ProcessSummary]
    kernels: list[KernelSummary]
    stragglers: list[StragglerStep]
    lockstep_steps: list[int]  # steps where every rank compiled the same variants (no waiting)
    world_size: int | None
    missing_ranks: list[int]
    warnings: list[str]
    run_id: str | None = None  # the run every trace belongs to (None: not recorded, or mixed)

    # ---- totals -----------------------------------------------------------------------------
    @property
    def ranks(self) -> list[int]:
        return sorted(p.rank for p in self.processes if p.rank is not None)

    @property
    def total_stall_ms(self) -> float:
        """Job wall time lost to straggler compiles (sum over straggler steps of the stall)."""
        return sum(s.stall_ms for s in self.stragglers)

    @property
    def idle_rank_ms(self) -> float:
        """Rank-milliseconds spent waiting (each rank's stall, summed over ranks and steps)."""
        return sum(sum(s.stall_by_rank.values()) for s in self.stragglers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": MERGED_SCHEMA,
            "version": MERGED_VERSION,
            "run_id": self.run_id,
            "world_size": self.world_size,
            "ranks": self.ranks,
            "missing_ranks": self.missing_ranks,
            "totals": {
                "processes": len(self.processes),
                "compiles": sum(p.compiles for p in self.processes),
                "autotunes": sum(p.autotunes for p in self.processes),
                "compile_ms": round(sum(p.compile_ms for p in self.processes), 3),
                "autotune_ms": round(sum(p.autotune_ms for p in self.processes), 3),
                "straggler_steps": len(self.stragglers),
                "straggler_compiles": sum(len(s.compiles) for s in self.stragglers),
                "estimated_stall_ms": round(self.total_stall_ms, 3),
                "idle_rank_ms": round(self.idle_rank_ms, 3),
            },
            "processes": [p.to_dict() for p in self.processes],
            "kernels": [k.to_dict() for k in self.kernels],
            "straggler_steps": [s.to_dict() for s in self.stragglers],
            "lockstep_compile_steps": self.lockstep_steps,
            "warnings": self.warnings,
        }


# --------------------------------------------------------------------------------------------
# Merging


def _rank_key(trace: Trace) -> Any:
    return trace.process.rank if trace.process.rank is not None else f"pid {trace.process.pid}"


def _check_ranks(traces: Sequence[Trace]) -> None:
    seen: dict[int, Trace] = {}
    for t in traces:
        r = t.process.rank
        if r is None:
            continue
        if r in seen:
            a, b = seen[r].path or f"pid {seen[r].process.pid}", t.path or f"pid {t.process.pid}"
            raise MergeError(
                f"rank {r} appears in two traces ({a} and {b}) of "
                + (f"run {t.process.run_id}" if t.process.run_id else "no recorded run id")
                + ": pass the traces of one job (one directory per run, or set JITGUARD_RUN_ID "
                  "per run so that `jitguard report` can tell them apart)"
            )
        seen[r] = t


def merge_traces(traces: Sequence[Trace]) -> MergedReport:
    """Line up the traces of one job by step and rank; see the module docstring for definitions."""
    if not traces:
        raise MergeError("no traces to merge")
    _check_ranks(traces)
    traces = sorted(traces, key=lambda t: (t.process.rank is None, t.process.rank or 0,
                                           t.process.host, t.process.pid))
    warnings: list[str] = []

    # ---- job-wide variant numbering -------------------------------------------------------
    all_events: list[tuple[Trace, Event]] = [(t, e) for t in traces for e in t.events]
    order = sorted(all_events, key=lambda te: (te[1].step is None, te[1].step or 0, te[1].wall))
    variant_no: dict[tuple[str, tuple], int] = {}
    per_kernel_count: dict[str, int] = defaultdict(int)
    for _, e in order:
        k = (e.kernel, variant_signature(e))
        if k not in variant_no:
            per_kernel_count[e.kernel] += 1
            variant_no[k] = per_kernel_count[e.kernel]

    # ---- processes ---------------------------------------------------------------------------
    processes = []
    for t in traces:
        steps = [e.step for e in t.events if e.step is not None]
        processes.append(ProcessSummary(
            rank=t.process.rank, world_size=t.process.world_size, host=t.process.host,
            pid=t.process.pid, path=t.path,
            compiles=sum(v.compiles for v in t.kernels.values()),
            autotunes=sum(v.autotunes for v in t.kernels.values()),
            compile_ms=sum(v.compile_ms for v in t.kernels.values()),
            dropped_events=t.dropped_events,
            steps=(min(steps), max(steps)) if steps else None,
            unstepped=sum(1 for e in t.events if e.step is None),
            # traces before autotune_ms existed counted benchmark time in compile_ms
            autotune_ms=sum(getattr(v, "autotune_ms", 0.0) for v in t.kernels.values()),
        ))
        if t.dropped_events:
            warnings.append(f"{processes[-1].label()}: {t.dropped_events} events beyond the trace's "
                            f"size bound were dropped; totals count them, steps do not")

    sizes = {t.process.world_size for t in traces if t.process.world_size is not None}
    world_size = max(sizes) if sizes else None
    if len(sizes) > 1:
        warnings.append(f"traces disagree on the world size ({sorted(sizes)}): several jobs mixed?")
    ranked = [t for t in traces if t.process.rank is not None]
    present = sorted(t.process.rank for t in ranked)
    missing = sorted(set(range(world_size)) - set(present)) if world_size else []
    if missing:
        warnings.append(
            f"no trace for rank{'s' if len(missing) > 1 else ''} {_ranks_words(missing)} of "
            f"world size {world_size}: straggler counts cover the {len(present)} ranks present")

    # ---- kernels ----------------------------------------------------------------------------
    kernels = _kernel_summaries(traces, variant_no)

    # ---- straggler steps ------------------------------------------------------------------
    stragglers: list[StragglerStep] = []
    lockstep: list[int] = []
    if len(ranked) >= 2:
        stragglers, lockstep = _find_stragglers(ranked, variant_no)
        unstepped = sum(p.unstepped for p in processes if p.rank is not None)
        if unstepped and not any(p.steps for p in processes):
            warnings.append(
                "no event carries a step: call jitguard.mark_step() once per step on every rank "
                "to find straggler compiles")
        elif unstepped:
            warnings.append(f"{unstepped} compile events carry no step (before the first "
                            f"jitguard.mark_step?) and are left out of the straggler analysis")
    run_ids = {t.process.run_id for t in traces}
    return MergedReport(processes, kernels, stragglers, lockstep, world_size, missing, warnings,
                        run_id=run_ids.pop() if len(run_ids) == 1 else None)


def _kernel_summaries(traces: Sequence[Trace], variant_no: dict) -> list[KernelSummary]:
    by_kernel: dict[str, list[tuple[Trace, Event]]] = defaultdict(list)
    for t in traces:
        for e in t.events:
            by_kernel[e.kernel].append((t, e))
    out = []
    for kernel in sorted(by_kernel, key=lambda k: (-len(by_kernel[k]), k)):
        items = by_kernel[kernel]
        rows: dict[int, VariantRow] = {}
        events_by_variant: dict[int, Event] = {}
        for t, e in items:
            n = variant_no[(kernel, variant_signature(e))]
            row = rows.setdefault(n, VariantRow(n, e.kind, {}))
            row.steps_by_rank.setdefault(_rank_key(t), []).append(e.step)
            events_by_variant.setdefault(n, e)
        # describe each variant by the params that are not the same in every variant
        compiles = [events_by_variant[n] for n in sorted(events_by_variant) if
                    events_by_variant[n].kind == "compile"]
        varying = _varying_params(compiles)
        for n, row in rows.items():
            e = events_by_variant[n]
            if e.kind == "autotune" and e.autotune:
                row.description = {str(k): repr(v) for k, v in (e.autotune.key or {}).items()}
            else:
                row.description = {p.name: describe_param(p) for p in e.params if p.name in varying}
                opts = e.options or {}
                if "options" in varying:
                    row.description["options"] = ", ".join(f"{k}={v}" for k, v in sorted(opts.items())) or "defaults"
        per_rank: dict[Any, int] = defaultdict(int)
        for t, e in items:
            if e.kind == "compile":
                per_rank[_rank_key(t)] += 1
        first = min(items, key=lambda te: te[1].wall)[1]
        remedies = []
        diffs: dict[tuple, Any] = {}
        for _, e in items:
            if e.remedy and e.remedy not in remedies:
                remedies.append(e.remedy)
            if not e.autotuning:
                for d in e.diff:
                    diffs.setdefault((d.param, d.change, d.option), d)
        culprits = []
        for d in diffs.values():
            label = f"options.{d.option}" if d.param == "options" and d.option else d.param
            if label not in culprits:
                culprits.append(label)
        position = {p.name: p.index for _, e in items for p in e.params}
        ordered = sorted(diffs.values(), key=lambda d: (position.get(d.param, 1 << 30), d.option or ""))
        culprits.sort(key=lambda c: position.get(c, 1 << 30))
        decorator = "gluon.jit" if any(e.frontend == "gluon" for _, e in items) else "triton.jit"
        fix = keys_remedy(ordered, short_name(kernel), decorator=decorator) if ordered else None
        if fix is None and len(remedies) == 1:
            fix = remedies[0]
        ms = sum(t.kernels[kernel].compile_ms for t in {id(t): t for t, _ in items}.values()
                 if kernel in t.kernels)
        out.append(KernelSummary(kernel, first.kernel_path, first.kernel_line,
                                 [rows[n] for n in sorted(rows)], dict(per_rank), ms, remedies,
                                 culprits, fix))
    return out


def _varying_params(events: Sequence[Event]) -> set[str]:
    """Names of the params (and "options") whose specialization is not the same in every event."""
    if len(events) <= 1:
        return set()
    described = [{p.name: describe_param(p) for p in e.params} for e in events]
    names = {n for d in described for n in d}
    varying = {n for n in names if len({d.get(n) for d in described}) > 1}
    if len({repr(sorted((e.options or {}).items())) for e in events}) > 1:
        varying.add("options")
    return varying


def _find_stragglers(ranked: Sequence[Trace], variant_no: dict) -> tuple[list[StragglerStep], list[int]]:
    ranks = [t.process.rank for t in ranked]
    # step -> rank -> events in that step
    by_step: dict[int, dict[int, list[Event]]] = defaultdict(lambda: defaultdict(list))
    first_step_of: dict[tuple[int, str, int], int | None] = {}  # (rank, kernel, variant) -> step
    for t in ranked:
        r = t.process.rank
        for e in sorted(t.events, key=lambda e: e.seq):
            if e.step is not None:
                by_step[e.step][r].append(e)
            vk = variant_no[(e.kernel, variant_signature(e))]
            first_step_of.setdefault((r, e.kernel, vk), e.step)

    stragglers: list[StragglerStep] = []
    lockstep: list[int] = []
    first_kernel_seq: dict[tuple[int, str], int] = {}
    for t in ranked:
        for e in t.events:
            key = (t.process.rank, e.kernel)
            if e.kind == "compile" and (key not in first_kernel_seq or e.seq < first_kernel_seq[key]):
                first_kernel_seq[key] = e.seq

    for step in sorted(by_step):
        per_rank = by_step[step]
        sets = {r: {(e.kernel, variant_no[(e.kernel, variant_signature(e))]) for e in per_rank.get(r, [])}
                for r in ranks}
        common = set.intersection(*sets.values()) if sets else set()
        extras = {r: [e for e in per_rank.get(r, [])
                      if (e.kernel, variant_no[(e.kernel, variant_signature(e))]) not in common]
                  for r in ranks}
        compiling = [r for r in ranks if extras[r]]
        waiting = [r for r in ranks if not extras[r]]
        if not compiling:
            if any(per_rank.get(r) for r in ranks):
                lockstep.append(step)
            continue
        if not waiting:
            continue  # every rank compiled something of its own: imbalance, nobody idle for long
        extra_ms: dict[int, float] = {}
        unknown = False
        for r in ranks:
            total = 0.0
            evs = extras[r]
            compile_ms_by_kernel: dict[str, float] = defaultdict(float)
            for e in evs:
                if e.kind == "compile":
                    compile_ms_by_kernel[e.kernel] += e.compile_ms or 0.0
            for e in evs:
                ms = _event_ms(e)
                if ms is None:
                    unknown = True
                    continue
                if e.kind == "autotune":
                    # the benchmark time includes compiling its configs: don't count those twice
                    ms = max(0.0, ms - compile_ms_by_kernel.get(e.kernel, 0.0))
                total += ms
            extra_ms[r] = total
        worst = max(extra_ms.values())
        compiles = []
        for r in compiling:
            # an autotune re-benchmark stands for the config compiles it caused (its time covers them)
            autotuned = {e.kernel for e in extras[r] if e.kind == "autotune"}
            for e in extras[r]:
                if e.kind == "compile" and e.autotuning and e.kernel in autotuned:
                    continue
                vk = variant_no[(e.kernel, variant_signature(e))]
                elsewhere = {o: first_step_of[(o, e.kernel, vk)] for o in ranks
                             if o != r and (o, e.kernel, vk) in first_step_of}
                first_on_rank = e.kind == "compile" and first_kernel_seq.get((r, e.kernel)) == e.seq
                if e.diff:
                    why = _diff_words(e)
                elif e.kind == "autotune":
                    key = e.autotune.key if e.autotune else {}
                    why = "key " + ", ".join(f"{k}={v!r}" for k, v in (key or {}).items())
                elif first_on_rank:
                    why = "first compile of this kernel on this rank"
                else:
                    why = "no previous variant to compare"
                if e.kind == "autotune" and e.autotune and e.autotune.configs:
                    why += f"; {e.autotune.configs} configs benchmarked"
                culprits = []
                for d in e.diff:
                    name = d.param if d.param != "options" or not d.option else f"options.{d.option}"
                    if name not in culprits:
                        culprits.append(name)
                compiles.append(CompileOnRank(
                    rank=r, kernel=e.kernel, kind=e.kind, compile_ms=_event_ms(e), variant=vk,
                    first_on_rank=first_on_rank, diff=[d.to_dict() for d in e.diff],
                    culprits=culprits, why=why, remedy=e.remedy,
                    kernel_path=e.kernel_path, kernel_line=e.kernel_line,
                    call_path=e.call_path, call_line=e.call_line, seen_elsewhere=elsewhere,
                    disk_cache_hit=e.disk_cache_hit))
        stragglers.append(StragglerStep(
            step=step, compiles=compiles, compiling_ranks=compiling, waiting_ranks=waiting,
            stall_ms=worst, stall_by_rank={r: worst - extra_ms[r] for r in ranks},
            ms_unknown=unknown))
    return stragglers, lockstep


def merge_paths(paths: Iterable[str | os.PathLike]) -> MergedReport:
    """Load every trace named (directories expand to the ``*.json`` inside) and merge them."""
    return merge_traces(load_traces(paths))


def _ranks_words(ranks: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2, 5``"""
    ranks = sorted(ranks)
    out: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}" if j > i + 1
                   else f"{ranks[i]}, {ranks[j]}")
        i = j + 1
    return ", ".join(out)
