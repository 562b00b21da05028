"""Who is writing a trace: pid, host, argv, rank and world size, versions, start times."""
from __future__ import annotations

import os
import socket
import sys
import time
import uuid

from jitguard.runtime.trace import ProcessInfo


ENV_RUN_ID = "JITGUARD_RUN_ID"
ENV_RUN_ID_AUTO = "JITGUARD_RUN_ID_AUTO"  # "1" when jitguard made the id up (not the user)


def new_run_id() -> str:
    """A fresh run id: sortable by start time, unique (``20261129-093512-3f9a1c``)."""
    return time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + uuid.uuid4().hex[:6]


def run_id(*, create: bool = False) -> str | None:
    """The run this process belongs to, shared by every process of the run through the environment:
    ``JITGUARD_RUN_ID`` when you set it; else torchrun's ``TORCHELASTIC_RUN_ID`` (the same on every
    node; its default ``none`` does not count); else a ``JITGUARD_RUN_ID`` that a jitguard ancestor
    made up (``jitguard run``, or the first process activated by ``JITGUARD``). With ``create``
    and none of those, makes one up and exports it, so that the processes this one starts share it."""
    env = os.environ
    mine = env.get(ENV_RUN_ID, "").strip()
    if mine and env.get(ENV_RUN_ID_AUTO) != "1":
        return mine
    elastic = env.get("TORCHELASTIC_RUN_ID", "").strip()
    if elastic and elastic.lower() != "none":
        return elastic
    if mine:
        return mine
    if not create:
        return None
    rid = new_run_id()
    env[ENV_RUN_ID] = rid
    env[ENV_RUN_ID_AUTO] = "1"
    return rid


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _dist_rank() -> tuple[int, int] | None:
    """(rank, world_size) from torch.distributed when a process group is up (never imports torch)."""
    dist_mod = sys.modules.get("torch.distributed")
    if dist_mod is None:
        return None
    try:
        if dist_mod.is_available() and dist_mod.is_initialized():
            return dist_mod.get_rank(), dist_mod.get_world_size()
    except Exception:  # a half-torn-down process group: no answer
        pass
    return None


def rank_info() -> tuple[int | None, int | None, int | None]:
    """(rank, world_size, local_rank): torch.distributed when it is initialized (never imports torch
    itself), else the RANK / WORLD_SIZE / LOCAL_RANK variables torchrun and vLLM set."""
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    from_dist = _dist_rank()
    if from_dist is not None:
        rank, world = from_dist
    return rank, world, _env_int("LOCAL_RANK")


# ProcessInfo objects whose rank came from an initialized process group: that answer is kept
# when the group is torn down before exit (vLLM does), rather than replaced by the environment's.
_FROM_DIST = "_jitguard_rank_from_dist"


def refresh_rank(info: ProcessInfo) -> None:
    """Update rank / world_size / local_rank on ``info`` from what is true now.

    The watch starts before ``init_process_group`` in most programs, so this runs again at every
    compile event, every ``mark_step`` and at exit. A rank read from an initialized process group
    wins over the environment and sticks: once the group is gone, the last rank seen while it was
    up is kept."""
    from_dist = _dist_rank()
    local = _env_int("LOCAL_RANK")
    if local is not None:
        info.local_rank = local
    if from_dist is not None:
        info.rank, info.world_size = from_dist
        setattr(info, _FROM_DIST, True)
        return
    if getattr(info, _FROM_DIST, False):
        return
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    info.rank = rank if rank is not None else info.rank
    info.world_size = world if world is not None else info.world_size


def new_process_info(mode: str | None = None) -> ProcessInfo:
    from jitguard import __version__

    triton_mod = sys.modules.get("triton")
    info = ProcessInfo(
        pid=os.getpid(),
        host=socket.gethostname(),
        argv=list(sys.argv),
        python=sys.version.split()[0],
        triton_version=getattr(triton_mod, "__version__", None),
        jitguard_version=__version__,
        mode=mode,
        start_wall=time.time(),
        start_monotonic=time.monotonic(),
        run_id=run_id(),
    )
    refresh_rank(info)
    return info


def finish_process_info(info: ProcessInfo) -> None:
    """Refresh what may have changed since the start (rank after init_process_group) and stamp the end."""
    refresh_rank(info)
    triton_mod = sys.modules.get("triton")
    info.triton_version = getattr(triton_mod, "__version__", info.triton_version)
    info.end_wall = time.time()
    info.end_monotonic = time.monotonic()
