"""Who is writing a trace: pid, host, argv, rank and world size, versions, start times."""
from __future__ import annotations

import os
import socket
import sys
import time

from jitguard.runtime.trace import ProcessInfo


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def rank_info() -> tuple[int | None, int | None, int | None]:
    """(rank, world_size, local_rank): torch.distributed when it is initialized (never imports torch
    itself), else the RANK / WORLD_SIZE / LOCAL_RANK variables torchrun and vLLM set."""
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    dist_mod = sys.modules.get("torch.distributed")
    if dist_mod is not None:
        try:
            if dist_mod.is_available() and dist_mod.is_initialized():
                rank, world = dist_mod.get_rank(), dist_mod.get_world_size()
        except Exception:  # a half-torn-down process group: keep the environment's answer
            pass
    return rank, world, _env_int("LOCAL_RANK")


def new_process_info(mode: str | None = None) -> ProcessInfo:
    from jitguard import __version__

    triton_mod = sys.modules.get("triton")
    rank, world, local = rank_info()
    return ProcessInfo(
        pid=os.getpid(),
        host=socket.gethostname(),
        argv=list(sys.argv),
        rank=rank,
        world_size=world,
        local_rank=local,
        python=sys.version.split()[0],
        triton_version=getattr(triton_mod, "__version__", None),
        jitguard_version=__version__,
        mode=mode,
        start_wall=time.time(),
        start_monotonic=time.monotonic(),
    )


def finish_process_info(info: ProcessInfo) -> None:
    """Refresh what may have changed since the start (rank after init_process_group) and stamp the end."""
    rank, world, local = rank_info()
    info.rank = rank if rank is not None else info.rank
    info.world_size = world if world is not None else info.world_size
    info.local_rank = local if local is not None else info.local_rank
    triton_mod = sys.modules.get("triton")
    info.triton_version = getattr(triton_mod, "__version__", info.triton_version)
    info.end_wall = time.time()
    info.end_monotonic = time.monotonic()
