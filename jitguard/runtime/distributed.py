"""In-process gathering of every rank's trace to rank 0 through ``torch.distributed``.

``jitguard.watch(distributed=True)`` calls :func:`gather_and_report` on exit, on every rank. It is a
collective: every rank of the default process group must reach it (as with any ``all_reduce``).
Traces travel as JSON over a private gloo group (CPU, any default backend: gloo, NCCL, ...), so no
GPU memory or NCCL object collective is involved; rank 0 merges them and prints the merged report
(straggler compiles included). The per-process trace files do not depend on any of this.

Nothing here breaks the user's exit: when torch.distributed is missing, not initialized, or a rank
never arrives (timeout), a one-line warning is printed and ``None`` returned.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
from typing import IO, Any

from jitguard.runtime.merge import MergedReport, merge_traces
from jitguard.runtime.text import render_merged
from jitguard.runtime.trace import Trace, write_trace

#: seconds rank 0 waits for the slowest rank to reach the gather (env JITGUARD_GATHER_TIMEOUT).
DEFAULT_TIMEOUT_S = 300.0


def _warn(message: str, stream: IO[str] | None = None) -> None:
    print(f"jitguard: {message}", file=stream or sys.stderr, flush=True)


def _dist():
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def _timeout_s(timeout_s: float | None) -> float:
    if timeout_s is not None:
        return float(timeout_s)
    try:
        return float(os.environ.get("JITGUARD_GATHER_TIMEOUT", DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S


def gather_traces(trace: Trace | dict[str, Any], *, dst: int = 0, timeout_s: float | None = None,
                  stream: IO[str] | None = None) -> list[Trace] | None:
    """Collective: send this rank's trace to rank ``dst``; there, return every rank's trace (ordered
    by rank); elsewhere return ``[]``. Returns ``None`` (after a warning) when torch.distributed is
    not initialized or the gather fails; a single-process job returns ``[trace]``."""
    if isinstance(trace, dict):
        trace = Trace.from_dict(trace)
    dist = _dist()
    if dist is None:
        _warn("watch(distributed=True): torch.distributed is not initialized here, so nothing was "
              "gathered (initialize the process group before the watch exits)", stream)
        return None
    rank, world = dist.get_rank(), dist.get_world_size()
    # The watcher may have started before init_process_group: fill in what the group knows.
    if trace.process.rank is None:
        trace.process.rank = rank
    if trace.process.world_size is None:
        trace.process.world_size = world
    if world == 1:
        return [trace]
    payload = json.dumps(trace.to_dict(), separators=(",", ":"), default=repr)
    timeout = datetime.timedelta(seconds=_timeout_s(timeout_s))
    group = None
    made_group = False
    try:
        # Object collectives over NCCL need the right CUDA device set and stage through GPU
        # memory; a private gloo group keeps this on the CPU for any default backend, away from
        # the user's own traffic, with our timeout.
        group = dist.new_group(backend="gloo", timeout=timeout)
        made_group = True
        received: list[Any] | None = [None] * world if rank == dst else None
        dist.gather_object((rank, payload), received, dst=dst, group=group)
    except Exception as exc:  # a dead or late rank: say so, never break the user's exit
        _warn(f"watch(distributed=True): gathering traces to rank {dst} failed "
              f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
              f"the per-process traces are unaffected", stream)
        return None
    finally:
        if made_group and group is not None:
            try:
                dist.destroy_process_group(group)
            except Exception:
                pass
    if rank != dst:
        return []
    traces = []
    for r, data in sorted(received or [], key=lambda x: x[0]):
        t = Trace.from_dict(json.loads(data), path=f"rank {r} (gathered)")
        t.path = None
        if t.process.rank is None:
            t.process.rank = r
        traces.append(t)
    return traces


def gather_and_report(trace: Trace | dict[str, Any], *, stream: IO[str] | None = None,
                      json_path: str | os.PathLike | None = None, dst: int = 0,
                      timeout_s: float | None = None, quiet: bool = False) -> MergedReport | None:
    """Collective, called by ``watch(distributed=True)`` on exit on every rank: gather all traces to
    rank ``dst``, merge them, print the merged report there (to ``stream``, default stderr) and,
    if ``json_path`` is given (default: env ``JITGUARD_MERGED_JSON``), write the merged report as
    JSON. Returns the merged report on rank ``dst``, ``None`` on the other ranks or on failure."""
    traces = gather_traces(trace, dst=dst, timeout_s=timeout_s, stream=stream)
    if not traces:
        return None
    report = merge_traces(traces)
    if not quiet:
        print(render_merged(report), end="", file=stream or sys.stderr, flush=True)
    json_path = json_path or os.environ.get("JITGUARD_MERGED_JSON")
    if json_path:
        try:
            write_trace(report.to_dict(), json_path)  # the same atomic writer as traces
        except OSError as exc:
            _warn(f"cannot write the merged report to {json_path}: {exc}", stream)
    return report
