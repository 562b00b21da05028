"""The tensor-parallel stall that recompiles cause, and that ``do_not_specialize`` removes.

Launch one process per GPU::

    torchrun --nproc-per-node 8 bench/tp_recompile_stall.py            # NCCL, one GPU per rank
    torchrun --nproc-per-node 4 bench/tp_recompile_stall.py --dry-run  # CPU: gloo + stand-in driver

Each rank runs a serving-like loop of steps. At every step it runs the fused inverse-RoPE/FP8 kernel
on its own local token count (drawn per rank: mostly decode batches of 1..``--decode-max``
tokens, sometimes a prefill chunk), then an ``all_reduce`` (NCCL on GPUs, gloo on CPU), as tensor
parallelism does after attention, with ``jitguard.mark_step`` labelling the step. Two arms, each
from a cold Triton cache (a fresh ``TRITON_CACHE_DIR`` shared by the ranks, as on one node):

* ``uncorrected``: ``fixtures/rope_fp8_uncorrected.py`` (plain ``@triton.jit``: ``num_tokens`` and
  the scale stride are specialized, so a rank whose count enters a new value class compiles
  mid-traffic, and every other rank waits for it at the all_reduce);
* ``corrected``: ``jitguard.kernels.rope_fp8`` (``do_not_specialize``): compiles once.

Per arm it reports the per-step latency on the slowest rank (each step's maximum over ranks:
p50 / p99 / max), total time, compiles per rank, and the merged ``jitguard`` report with its
straggler compiles (gathered in-process, the same path as ``jitguard.watch(distributed=True)``).
Rank 0 prints a table and writes JSON to ``bench/results/``.

``--dry-run`` proves the whole pipeline on a CPU: gloo instead of NCCL, and a stand-in sm_90 driver
under which the unmodified wrappers go through Triton's real JIT path (binder, cache, compile
hooks, real ptxas compiles) with CPU tensors, and the launch itself does nothing. Its latencies are CPU compile times and gloo round trips: they
show that the script works end to end and what the report says, NOT the stall on GPUs.

NVLink multicast stays off (on shared hosts a program using it can take the GPUs out of service): this
script sets NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 before anything initializes.
"""
from __future__ import annotations

import os

# Before torch/NCCL read them; forced, not defaulted.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # silence 3.9's notice; the kernels pass it

import argparse  # noqa: E402
import datetime  # noqa: E402
import importlib.util  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
NVLS_ENV = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
# the files whose state a result depends on (their commit is recorded, and whether they differ)
RUN_SOURCES = ("kernels/rope_fp8.py", "kernels/rope_fp8_reference.py",
               "fixtures/rope_fp8_uncorrected.py", "bench/tp_recompile_stall.py", "jitguard/runtime")


# ---------------------------------------------------------------------------------------------
# kernels of the two arms


@triton.jit
def _compiler_warmup(x_ptr, N: tl.constexpr):
    """Not measured: pays each process's one-time compiler start-up before the arms."""
    tl.store(x_ptr + tl.arange(0, N), tl.zeros((N,), tl.float32))


def _load_uncorrected():
    path = os.path.join(ROOT, "fixtures", "rope_fp8_uncorrected.py")
    spec = importlib.util.spec_from_file_location("rope_fp8_uncorrected", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def arms_modules():
    from jitguard.kernels import rope_fp8

    return {"uncorrected": _load_uncorrected(), "corrected": rope_fp8}


# ---------------------------------------------------------------------------------------------
# workload


def token_counts(rank: int, steps: int, seed: int, decode_max: int, prefill_prob: float,
                 prefill_max: int) -> list[int]:
    """This rank's local token count per step: a decode batch (1..decode_max running requests on
    this rank) or, with probability ``prefill_prob``, a prefill chunk (64..prefill_max)."""
    rng = random.Random(seed * 1_000_003 + rank)
    out = []
    for _ in range(steps):
        if rng.random() < prefill_prob:
            out.append(rng.randint(64, prefill_max))
        else:
            out.append(rng.randint(1, decode_max))
    return out


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def stats(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50), 3), "p99": round(percentile(values, 99), 3),
            "max": round(max(values), 3), "mean": round(sum(values) / len(values), 3)}


# ---------------------------------------------------------------------------------------------
# one arm


def run_arm(name, module, args, rank, world, device, cache_root, log):
    import jitguard
    from jitguard.runtime.distributed import gather_and_report

    cache = os.path.join(cache_root, name)
    os.environ["TRITON_CACHE_DIR"] = cache  # cold: nothing of this arm compiled before
    H = args.groups * args.heads_per_group
    D = args.nope_dim + args.rope_dim
    counts = token_counts(rank, args.steps, args.seed, args.decode_max, args.prefill_prob,
                          args.prefill_max)
    gen = torch.Generator(device="cpu").manual_seed(args.seed + rank)
    t_max = max(counts)
    o_buf = torch.randn((t_max, H, D), generator=gen, dtype=torch.float32).to(device, torch.bfloat16)
    positions = torch.randint(0, args.max_pos, (t_max,), generator=gen).to(device)
    cos_sin = torch.randn((args.max_pos, args.rope_dim), generator=gen).to(device)
    reduce_buf = torch.ones(args.allreduce_elems, device=device,
                            dtype=torch.bfloat16 if device.type == "cuda" else torch.float32)

    def one_step(T: int):
        o, pos = o_buf[:T], positions[:T]
        module.fused_inv_rope_fp8_quant(o, pos, cos_sin, args.groups, args.heads_per_group,
                                        args.nope_dim, args.rope_dim)
        dist.all_reduce(reduce_buf)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    dist.barrier()
    step_ms: list[float] = []
    with jitguard.watch(mode="record") as w:
        t_start = time.perf_counter()
        for step, T in enumerate(counts):
            jitguard.mark_step(step)
            t0 = time.perf_counter()
            one_step(T)
            step_ms.append((time.perf_counter() - t0) * 1e3)
        total_s = time.perf_counter() - t_start
    if args.trace_dir:
        w.to_json(os.path.join(args.trace_dir, name, f"jitguard-trace.rank{rank}.json"))
    report_text = io.StringIO()
    merged = gather_and_report(w.trace, stream=report_text)  # collective; rank 0 gets the report

    # every rank's per-step latencies and totals, to rank 0
    lat = torch.tensor(step_ms, dtype=torch.float64, device=device)
    gathered = [torch.empty_like(lat) for _ in range(world)]
    dist.all_gather(gathered, lat)
    totals = torch.tensor([total_s, float(len(w.compiles))], dtype=torch.float64, device=device)
    all_totals = [torch.empty_like(totals) for _ in range(world)]
    dist.all_gather(all_totals, totals)
    if rank != 0:
        return None
    per_rank = [g.cpu().tolist() for g in gathered]
    slowest = [max(per_rank[r][s] for r in range(world)) for s in range(args.steps)]
    med = percentile(slowest, 50)
    straggler_steps = {s.step for s in merged.stragglers} if merged else set()
    result = {
        "kernel_module": module.__name__,
        "slowest_rank_step_ms": stats(slowest),
        "first_step_ms": round(slowest[0], 3),
        "slowest_rank_step_ms_after_first": stats(slowest[1:]),
        "total_s": round(max(t[0].item() for t in all_totals), 4),
        "compiles_per_rank": [int(t[1].item()) for t in all_totals],
        "per_rank_step_ms": [dict(rank=r, **stats(per_rank[r])) for r in range(world)],
        "steps_over_2x_p50": sum(1 for v in slowest if v > 2 * med),
        "straggler_steps": sorted(straggler_steps),
        "estimated_stall_ms": round(merged.total_stall_ms, 3) if merged else None,
        "measured_excess_ms_at_straggler_steps": round(
            sum(slowest[s] - med for s in straggler_steps if s < len(slowest)), 3),
        "step_ms_slowest_rank": [round(v, 3) for v in slowest],
        "token_counts_per_rank": [token_counts(r, args.steps, args.seed, args.decode_max,
                                               args.prefill_prob, args.prefill_max)
                                  for r in range(world)],
        "merged_report": merged.to_dict() if merged else None,
        "merged_report_text": report_text.getvalue(),
    }
    log(f"[{name}] done: slowest-rank p50 {result['slowest_rank_step_ms']['p50']:.2f} ms, "
        f"p99 {result['slowest_rank_step_ms']['p99']:.2f} ms, max "
        f"{result['slowest_rank_step_ms']['max']:.1f} ms (all steps); compiles per rank "
        f"{result['compiles_per_rank']}; {len(straggler_steps)} straggler steps")
    return result


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true",
                   help="CPU: gloo + stand-in sm_90 driver, real compiles, no-op launches "
                        "(default when CUDA is not available)")
    p.add_argument("--arms", default="uncorrected,corrected",
                   help="comma-separated, in run order (default: %(default)s)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--decode-max", type=int, default=48, help="largest decode batch per rank")
    p.add_argument("--prefill-prob", type=float, default=0.1)
    p.add_argument("--prefill-max", type=int, default=2048)
    p.add_argument("--groups", type=int, default=1, help="output-projection groups G")
    p.add_argument("--heads-per-group", type=int, default=8)
    p.add_argument("--nope-dim", type=int, default=448)
    p.add_argument("--rope-dim", type=int, default=64)
    p.add_argument("--max-pos", type=int, default=8192)
    p.add_argument("--allreduce-elems", type=int, default=64 * 7168,
                   help="elements all-reduced per step (a decode-sized hidden-state reduce)")
    p.add_argument("--trace-dir", default=None, help="also write each rank's trace here, per arm")
    p.add_argument("--out", default=None, help="result JSON (default: bench/results/...)")
    args = p.parse_args(argv)
    args.arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    bad = set(args.arms) - {"uncorrected", "corrected"}
    if bad or not args.arms:
        p.error(f"--arms: unknown {sorted(bad)}; use uncorrected and/or corrected")
    if args.steps < 2:
        p.error("--steps must be >= 2")
    if not torch.cuda.is_available():
        args.dry_run = True
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if "RANK" not in os.environ:
        raise SystemExit("launch with torchrun, e.g. torchrun --nproc-per-node 2 "
                         "bench/tp_recompile_stall.py --dry-run")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if args.dry_run:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=10))
    else:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device, timeout=datetime.timedelta(minutes=10))

    def log(msg: str) -> None:
        if rank == 0:
            print(msg, flush=True)

    import jitguard
    from jitguard.runtime.steps import reset_steps

    if args.dry_run:
        from jitguard.testing import StandInDriver
        from triton.runtime import driver

        driver.set_active(StandInDriver())  # the wrappers then take CPU tensors (host_tensors_ok)
    modules = arms_modules()

    # One shared cold cache root per run (ranks of one node share ~/.triton/cache in production).
    root = [tempfile.mkdtemp(prefix="jg-tp-stall-") if rank == 0 else None]
    dist.broadcast_object_list(root, src=0)
    cache_root = root[0]

    # Warm what is not the subject: NCCL/gloo, and the compiler's one-time start-up in each process
    # (an unrelated tiny kernel), so that neither arm pays it for the other.
    os.environ["TRITON_CACHE_DIR"] = os.path.join(cache_root, "warmup")
    x = torch.zeros(16, device=device)
    if args.dry_run:
        _compiler_warmup.warmup(x, N=16, grid=(1,))
    else:
        _compiler_warmup[(1,)](x, N=16)
        torch.cuda.synchronize(device)
    warm = torch.ones(args.allreduce_elems, device=device)
    for _ in range(3):
        dist.all_reduce(warm)

    results = {}
    for name in args.arms:
        log(f"[{name}] {args.steps} steps on {world} ranks ({'CPU dry run' if args.dry_run else 'GPU'})")
        results[name] = run_arm(name, modules[name], args, rank, world, device, cache_root, log)
        reset_steps()  # the next arm counts its steps from 0 again

    if rank == 0:
        shutil.rmtree(cache_root, ignore_errors=True)
        doc = {
            "benchmark": "tp_recompile_stall",
            "mode": "cpu_dryrun" if args.dry_run else "gpu",
            "label": ("CPU DRY RUN: gloo + stand-in sm_90 driver (real compiles, no-op launches). "
                      "Latencies are CPU compile times and gloo round trips; this proves the script "
                      "and the report end to end and is NOT a measurement of stalls on GPUs."
                      if args.dry_run else
                      f"{world} GPUs, NCCL all_reduce per step, one rank per GPU"),
            "command": "torchrun --nproc-per-node " + str(world) + " bench/tp_recompile_stall.py "
                       + " ".join(sys.argv[1:]),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": {
                "host": socket.gethostname(), "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "gpus": ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
                         if torch.cuda.is_available() else []),
            },
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "triton": triton.__version__, "jitguard": jitguard.__version__,
                         "nccl": _nccl_version(),
                         "backend": dist.get_backend()},
            "env": {k: os.environ.get(k) for k in NVLS_ENV},
            "source": source_state(),
            "config": {"world_size": world, "steps": args.steps, "seed": args.seed,
                       "decode_max": args.decode_max, "prefill_prob": args.prefill_prob,
                       "prefill_max": args.prefill_max, "groups": args.groups,
                       "heads_per_group": args.heads_per_group, "nope_dim": args.nope_dim,
                       "rope_dim": args.rope_dim, "allreduce_elems": args.allreduce_elems,
                       "arms_order": args.arms},
            "definitions": {
                "slowest_rank_step_ms": "per step, the maximum over ranks of the step's wall time "
                                        "(kernel + all_reduce [+ sync]); then p50/p99/max over steps",
                "slowest_rank_step_ms_after_first": "the same over steps 1.. (step 0 compiles in "
                                                    "every arm from a cold cache)",
                "estimated_stall_ms": "jitguard's estimate: sum over straggler steps of the "
                                      "longest extra compile (merged report)",
                "measured_excess_ms_at_straggler_steps": "sum over those steps of (slowest-rank "
                                                         "step time - its p50)",
            },
            "arms": results,
        }
        out = args.out or os.path.join(
            RESULTS, "tp_recompile_stall_cpu_dryrun.json" if args.dry_run
            else f"tp_recompile_stall_{world}gpu.json")
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
        print_table(doc)
        for name, r in results.items():
            print(f"\n--- merged jitguard report, arm {name} ---\n{r['merged_report_text']}")
        print(f"wrote {out}")
    dist.barrier()
    dist.destroy_process_group()
    return 0


def _nccl_version() -> str | None:
    try:
        v = torch.cuda.nccl.version() if torch.cuda.is_available() else None
    except Exception:
        return None
    return ".".join(map(str, v)) if isinstance(v, (tuple, list)) else (str(v) if v else None)


def source_state() -> dict:
    """The commit, and whether the kernel sources differ from it (results name what they ran)."""
    import subprocess

    def git(*a):
        try:
            return subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    return {"commit": git("rev-parse", "HEAD") or None,
            "sources_modified": bool(git("status", "--porcelain", "--", *RUN_SOURCES)),
            "sources": list(RUN_SOURCES)}


def print_table(doc) -> None:
    rows = [("arm", "step 0 ms", "p50 ms", "p99 ms", "max ms", "total s", "compiles/rank",
             "straggler steps", "est. stall ms", "excess ms")]
    for name, r in doc["arms"].items():
        s = r["slowest_rank_step_ms_after_first"]
        rows.append((name, f"{r['first_step_ms']:.1f}", f"{s['p50']:.2f}", f"{s['p99']:.2f}",
                     f"{s['max']:.1f}", f"{r['total_s']:.2f}", ",".join(map(str, r["compiles_per_rank"])),
                     str(len(r["straggler_steps"])), f"{r['estimated_stall_ms'] or 0:.0f}",
                     f"{r['measured_excess_ms_at_straggler_steps']:.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    print(f"\n{doc['label']}\n{doc['config']['world_size']} ranks, {doc['config']['steps']} steps "
          f"from a cold Triton cache; per-step latency on the slowest rank (p50/p99/max over steps "
          f"1..{doc['config']['steps'] - 1}; step 0 apart: every arm compiles there):")
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    sys.exit(main())
