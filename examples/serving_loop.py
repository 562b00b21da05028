"""A serving-like decode/prefill loop over jitguard's kernels, timed per step.

Each step runs what one transformer layer of an LLM server runs on that step's batch of
``num_tokens`` tokens: the fused inverse-RoPE + FP8 quantization kernel, then the mixture-of-experts
grouped GEMM (routing precomputed; slots sorted by expert with ``moe_align_block_size``). The batch
sizes come from a seeded simulation of a server with chunked prefill: requests arrive, each step
batches one token per running request (decode) plus prefill chunks of the prompts waiting, within a
token budget. Most steps are small decode batches; some carry prefill chunks of hundreds to
thousands of tokens.

The kernels come from ``--kernels``:

* a directory holding ``rope_fp8_uncorrected.py`` and ``moe_uncorrected.py`` -- the repo's
  ``fixtures/`` (the uncorrected twins, the default), or a copy of them you ran ``jitguard fix`` on;
* ``corrected`` -- the shipped kernels, ``jitguard.kernels.rope_fp8`` and ``jitguard.kernels.moe``.

It prints per-step latency (p50/p90/p99/max over the steps after the first), the time of the first
step (from a cold Triton cache if ``TRITON_CACHE_DIR`` points at an empty directory), and the steps
in which a kernel gained a compiled variant -- counted from Triton's own in-memory caches, without
jitguard. Run it under ``jitguard run`` to learn why::

    python examples/serving_loop.py                          # the twins, on the GPU
    jitguard run --trace t.json -- python examples/serving_loop.py
    jitguard report t.json
    python examples/serving_loop.py --warmup t.json          # compile what t.json recorded first
    python examples/serving_loop.py --kernels corrected --json lat.json
    python examples/serving_loop.py --device stand-in        # no GPU: see below

``--device stand-in`` (the default where there is no CUDA GPU) runs the same loop on a CPU through
Triton's real JIT path: a stand-in driver makes ``kernel[grid](...)`` compile real sm_90 code with
the bundled ptxas (every compile hook fires, the disk cache is used) and then skip the launch. The
compile stalls and variant counts are real; the kernels never run, so the latency of a step
without a compile is host overhead only.

A step's latency is host wall time from its start until ``torch.cuda.synchronize()`` returns: what
a request waiting on that step sees, JIT compiles included.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import os
import pathlib
import platform
import random
import sys
import time
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[1]
TWIN_FILES = {"rope": "rope_fp8_uncorrected.py", "moe": "moe_uncorrected.py"}

# Shapes of one tensor-parallel shard of a large MoE model with MLA-style attention.
N_GROUPS, HEADS_PER_GROUP, NOPE_DIM, ROPE_DIM = 1, 8, 448, 64  # o: [T, 8, 512] bf16
MAX_POS = 32768
NUM_EXPERTS, TOPK, HIDDEN, MOE_N = 8, 2, 2048, 1024  # x: [T, 2048], w: [8, 1024, 2048] bf16
# One grouped-GEMM config for every batch (a decode-tuned Swap-AB tile): the compiles that remain
# are then only the ones the integer arguments cause.
MOE_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3}


# ------------------------------------------------------------------------------------------------
# The request stream
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    num_tokens: int  # tokens in this step's batch
    decode_tokens: int  # one per running request
    prefill_tokens: int  # prompt tokens of this step's prefill chunks

    @property
    def kind(self) -> str:
        return "prefill" if self.prefill_tokens else "decode"


def serving_stream(steps: int, seed: int, *, arrival_rate: float = 0.2, mean_prompt: int = 700,
                   mean_output: int = 200, token_budget: int = 8192) -> list[Step]:
    """``steps`` batches of a server with chunked prefill, from an empty server (seeded).

    Requests arrive as a Poisson process (``arrival_rate`` per step) with log-normal prompt lengths
    (median ``mean_prompt``, up to 16k) and exponential output lengths (mean ``mean_output``). Each
    step schedules one decode token per running request, then fills what is left of
    ``token_budget`` with prompt chunks, first come first served. Idle steps are skipped.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    rng = random.Random(seed)
    running: list[int] = []  # output tokens left per running request
    waiting: list[list[int]] = []  # [prompt tokens left, output tokens] per queued request
    out: list[Step] = []
    while len(out) < steps:
        for _ in range(_poisson(rng, arrival_rate)):
            prompt = min(16000, max(8, int(rng.lognormvariate(math.log(mean_prompt), 0.9))))
            waiting.append([prompt, max(1, int(rng.expovariate(1 / mean_output)))])
        if not running and not waiting:
            continue
        decode = len(running)
        budget = token_budget - decode
        prefill = 0
        while waiting and budget > 0:
            take = min(waiting[0][0], budget)
            waiting[0][0] -= take
            budget -= take
            prefill += take
            if waiting[0][0]:
                break  # the rest of this prompt goes in a later step
            running.append(waiting.pop(0)[1])  # prefill done: decodes from the next step on
        out.append(Step(decode + prefill, decode, prefill))
        running = [r - 1 for r in running[:decode] if r > 1] + running[decode:]
    return out


def _poisson(rng: random.Random, lam: float) -> int:
    k, p, u = 0, math.exp(-lam), rng.random()
    c = p
    while u > c:
        k += 1
        p *= lam / k
        c += p
    return k


# ------------------------------------------------------------------------------------------------
# Where the kernels come from
# ------------------------------------------------------------------------------------------------
@dataclass
class KernelSet:
    label: str
    files: dict  # role -> source file
    rope: object  # fused_inv_rope_fp8_quant(o, positions, cos_sin, G, hpg, nope, rope)
    moe_gemm: object | None  # (x, w, topk_ids, sorted_ids, expert_ids, config) -> out
    jit_kernels: dict  # name -> JITFunction, for counting compiled variants


def _load_file(path: pathlib.Path):
    name = path.stem
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) != str(path):
        name = f"{name}_{abs(hash(str(path))):x}"  # a second copy in this process: its own module
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"serving_loop: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _jitguard_kernels():
    """``jitguard.kernels``, also where jitguard is on PYTHONPATH without being installed (the
    package maps the repo's kernels/ directory to it)."""
    try:
        import jitguard.kernels as pkg
    except ImportError:
        import jitguard

        kdir = pathlib.Path(jitguard.__file__).resolve().parents[1] / "kernels"
        spec = importlib.util.spec_from_file_location("jitguard.kernels", kdir / "__init__.py",
                                                      submodule_search_locations=[str(kdir)])
        pkg = importlib.util.module_from_spec(spec)
        sys.modules["jitguard.kernels"] = pkg
        spec.loader.exec_module(pkg)
    return pkg


def load_kernels(source: str, *, moe: bool = True) -> KernelSet:
    """``source``: "corrected", or a directory with the twins' files (fixed or not). Under the
    stand-in driver (``--device stand-in``) the wrappers take CPU tensors
    (``jitguard.testing.host_tensors_ok``)."""
    _jitguard_kernels()
    from jitguard.kernels import moe as moe_lib

    align = {"moe_align_block_size": moe_lib._moe_align_kernel}
    if source == "corrected":
        from jitguard.kernels import rope_fp8

        def moe_gemm(x, w, topk_ids, sorted_ids, expert_ids, config):
            return moe_lib.grouped_gemm(x, w, sorted_ids, expert_ids, top_k=topk_ids.shape[1],
                                        num_valid_tokens=topk_ids.numel(), config=config,
                                        swap_ab=True)

        jit = {"rope_fp8": rope_fp8._inv_rope_fp8_quant_kernel}
        if moe:
            jit.update(moe_gemm=moe_lib._moe_gemm_kernel, **align)
        return KernelSet("corrected", {"rope": rope_fp8.__file__, "moe": moe_lib.__file__},
                         rope_fp8.fused_inv_rope_fp8_quant, moe_gemm if moe else None, jit)
    d = pathlib.Path(source)
    if not d.is_dir():
        raise SystemExit(f"serving_loop: --kernels {source}: not a directory (nor 'corrected')")
    need = [TWIN_FILES["rope"]] + ([TWIN_FILES["moe"]] if moe else [])
    missing = [f for f in need if not (d / f).is_file()]
    if missing:
        raise SystemExit(f"serving_loop: --kernels {source}: missing {', '.join(missing)} "
                         "(expected the files of fixtures/, or use --no-moe)")
    rope_mod = _load_file((d / TWIN_FILES["rope"]).resolve())
    jit = {"rope_fp8": rope_mod._inv_rope_fp8_quant_kernel}
    files = {"rope": str(d / TWIN_FILES["rope"])}
    moe_gemm = None
    if moe:
        moe_mod = _load_file((d / TWIN_FILES["moe"]).resolve())
        files["moe"] = str(d / TWIN_FILES["moe"])

        def moe_gemm(x, w, topk_ids, sorted_ids, expert_ids, config):
            return moe_mod.grouped_gemm_uncorrected(x, w, topk_ids, sorted_ids, expert_ids, config,
                                                    swap_ab=True)

        jit.update(moe_gemm=moe_mod.moe_gemm_kernel_uncorrected, **align)
    return KernelSet(str(source), files, rope_mod.fused_inv_rope_fp8_quant, moe_gemm, jit)


def variant_count(jit_function) -> int:
    """Compiled variants of a @triton.jit kernel in this process (Triton's in-memory cache)."""
    caches = getattr(jit_function, "device_caches", None) or {}
    total = 0
    for entry in caches.values():
        cache = entry[0] if isinstance(entry, tuple) else entry
        total += len(cache)
    return total


# ------------------------------------------------------------------------------------------------
# The stand-in driver (CPU): Triton's real JIT path, sm_90 target, launches skipped
# ------------------------------------------------------------------------------------------------
def activate_stand_in_driver() -> None:
    """Triton's real JIT path on a CPU (jitguard.testing): sm_90 compiles, launches skipped."""
    from triton.runtime import driver

    from jitguard.testing import StandInDriver

    driver.set_active(StandInDriver())


# ------------------------------------------------------------------------------------------------
# The loop
# ------------------------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _digest(*tensors) -> str:
    """sha256 (16 hex digits) of the bytes of ``tensors``, copied to the host."""
    import hashlib

    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().cpu().view(-1).view(__import__("torch").uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def run_loop(kernels: KernelSet, stream: list[Step], *, device: str, seed: int = 0,
             on_step=None, digest_every: int | None = None) -> dict:
    """Run ``stream`` through ``kernels`` on ``device`` ("cuda", or "cpu" with a stand-in driver
    already active). Returns per-step latencies and the steps where a kernel gained a variant.
    ``digest_every``: every that many steps (and at each step that added a variant), a digest of
    the step's outputs, taken after the step is timed -- the same digests mean the same results."""
    import torch

    try:
        from jitguard import mark_step
    except ImportError:  # the loop runs without jitguard too
        def mark_step(n=None):
            return n

    max_t = max(s.num_tokens for s in stream)
    cuda = device == "cuda"
    gen = torch.Generator(device=device).manual_seed(seed)

    def rand(*shape, dtype=torch.bfloat16):
        if cuda:  # real data on the GPU; on the stand-in the kernels never read it
            return torch.randn(*shape, device=device, dtype=dtype, generator=gen)
        return torch.empty(*shape, device=device, dtype=dtype)

    o = rand(max_t, N_GROUPS * HEADS_PER_GROUP, NOPE_DIM + ROPE_DIM)
    positions = torch.randint(0, MAX_POS, (max_t,), device=device, generator=gen)
    cos_sin = rand(MAX_POS, ROPE_DIM, dtype=torch.float32)
    if kernels.moe_gemm is not None:
        from jitguard.kernels.moe import moe_align_block_size

        x = rand(max_t, HIDDEN)
        w = rand(NUM_EXPERTS, MOE_N, HIDDEN) * (HIDDEN ** -0.5)
        logits = torch.randn(max_t, NUM_EXPERTS, device=device, generator=gen)
        topk_ids = torch.topk(logits, TOPK, dim=-1).indices.to(torch.int32)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def counts() -> dict[str, int]:
        return {name: variant_count(k) for name, k in kernels.jit_kernels.items()}

    sync()
    before = counts()
    lat_ms: list[float] = []
    compile_steps: list[dict] = []
    digests: dict[int, str] = {}
    for i, step in enumerate(stream):
        t = step.num_tokens
        mark_step(i)
        t0 = time.perf_counter()
        outputs = list(kernels.rope(o[:t], positions[:t], cos_sin, N_GROUPS, HEADS_PER_GROUP,
                                    NOPE_DIM, ROPE_DIM))
        if kernels.moe_gemm is not None:
            ids = topk_ids[:t]
            sorted_ids, expert_ids, _ = moe_align_block_size(ids, MOE_CONFIG["BLOCK_M"], NUM_EXPERTS)
            outputs.append(kernels.moe_gemm(x[:t], w, ids, sorted_ids, expert_ids, MOE_CONFIG))
        sync()
        ms = (time.perf_counter() - t0) * 1e3
        lat_ms.append(ms)
        now = counts()
        new = {k: now[k] - before[k] for k in now if now[k] > before[k]}
        if digest_every and (i % digest_every == 0 or new):
            digests[i] = _digest(*outputs)
        if new:
            compile_steps.append({"step": i, "num_tokens": t, "kind": step.kind,
                                  "ms": round(ms, 3), "new_variants": new})
        before = now
        if on_step is not None:
            on_step(i, step, ms, new)
    steady = lat_ms[1:]
    stalls_after_first = [c for c in compile_steps if c["step"] > 0]
    return {
        "steps": len(stream),
        "first_step_ms": round(lat_ms[0], 3),
        "latency_ms": {
            "over": "steps 1..N-1 (the first step is first_step_ms)",
            "p50": round(percentile(steady, 50), 4),
            "p90": round(percentile(steady, 90), 4),
            "p99": round(percentile(steady, 99), 4),
            "p99_9": round(percentile(steady, 99.9), 4),
            "max": round(max(steady), 4) if steady else None,
            "mean": round(sum(steady) / len(steady), 4) if steady else None,
            "total_s": round(sum(lat_ms) / 1e3, 4),
        },
        "variants": counts(),
        "compile_steps": compile_steps,
        "compiles_after_first_step": sum(sum(c["new_variants"].values()) for c in stalls_after_first),
        "stall_ms_after_first_step": round(sum(c["ms"] for c in stalls_after_first), 3),
        "per_step_ms": [round(v, 4) for v in lat_ms],
        "output_digests": {str(k): v for k, v in digests.items()},
    }


def describe_stream(stream: list[Step]) -> dict:
    dec = [s.num_tokens for s in stream if s.kind == "decode"]
    pre = [s.num_tokens for s in stream if s.kind == "prefill"]
    return {
        "steps": len(stream),
        "decode_steps": len(dec),
        "prefill_steps": len(pre),
        "distinct_num_tokens": len({s.num_tokens for s in stream}),
        "decode_num_tokens": {"min": min(dec, default=None), "median": _median(dec),
                              "max": max(dec, default=None)},
        "prefill_num_tokens": {"min": min(pre, default=None), "median": _median(pre),
                               "max": max(pre, default=None)},
        "num_tokens": [s.num_tokens for s in stream],
    }


def _median(v):
    return percentile(v, 50) if v else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="A serving-like decode/prefill loop over the RoPE/FP8 and MoE kernels, timed per "
                    "step (see the module docstring).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  python examples/serving_loop.py                      # the uncorrected twins\n"
               "  jitguard run --trace t.json -- python examples/serving_loop.py\n"
               "  python examples/serving_loop.py --kernels corrected\n"
               "  python examples/serving_loop.py --kernels /tmp/app   # a copy after jitguard fix\n")
    ap.add_argument("--kernels", default=str(ROOT / "fixtures"), metavar="DIR|corrected",
                    help="directory with rope_fp8_uncorrected.py and moe_uncorrected.py (default: "
                         "the repo's fixtures/), or 'corrected' for jitguard.kernels")
    ap.add_argument("--steps", type=int, default=300, help="steps to run (default: 300)")
    ap.add_argument("--seed", type=int, default=20261129, help="seed of the request stream")
    ap.add_argument("--device", choices=("auto", "cuda", "stand-in"), default="auto",
                    help="cuda, or stand-in: real sm_90 compiles on a CPU, launches skipped "
                         "(default: cuda if available)")
    ap.add_argument("--no-moe", action="store_true", help="run the RoPE/FP8 kernel only")
    ap.add_argument("--digest-every", type=int, default=25, metavar="N",
                    help="GPU: digest the outputs every N steps and at each step that compiled, "
                         "after timing it (same digests = same results; 0: off; default 25)")
    ap.add_argument("--warmup", metavar="TRACE|DIR", action="append",
                    help="before the loop, compile every variant these traces recorded "
                         "(jitguard.warmup; repeatable)")
    ap.add_argument("--json", metavar="FILE", help="write every figure (and each step's latency) here")
    ap.add_argument("--label", default=None, help="a name for this run in the output")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every step")
    t_main = time.perf_counter()
    args = ap.parse_args(argv)
    if args.steps < 2:
        ap.error("--steps must be at least 2")

    import torch
    import triton

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "stand-in"
    if device == "cuda" and not torch.cuda.is_available():
        print("serving_loop: --device cuda but no CUDA GPU is available (try --device stand-in)",
              file=sys.stderr)
        return 2
    if device == "stand-in":
        activate_stand_in_driver()
    kernels = load_kernels(args.kernels, moe=not args.no_moe)
    stream = serving_stream(args.steps, args.seed)
    info = describe_stream(stream)
    label = args.label or kernels.label
    where = (torch.cuda.get_device_name(0) if device == "cuda"
             else "CPU, stand-in sm_90 driver: real compiles, launches skipped")
    print(f"serving_loop [{label}] on {where}: {info['steps']} steps ({info['decode_steps']} decode, "
          f"{info['prefill_steps']} with prefill chunks), {info['distinct_num_tokens']} distinct "
          f"num_tokens, {min(info['num_tokens'])}..{max(info['num_tokens'])}")

    warm = None
    if args.warmup:  # the kernels this loop launches, warmed in place from the recorded variants
        import jitguard

        t0 = time.perf_counter()
        report = jitguard.warmup(args.warmup, kernels=list(kernels.jit_kernels.values()))
        warm = {"ms": round((time.perf_counter() - t0) * 1e3, 1), "counts": report.counts(),
                "skipped": [f"{v.kernel}: {v.reason}" for v in report.skipped]}
        print(report.summary())

    def on_step(i, step, ms, new):
        if new or args.verbose:
            what = ", ".join(f"{k} +{v}" for k, v in new.items()) if new else ""
            print(f"  step {i:4d}  num_tokens={step.num_tokens:<5d} {step.kind:7s} {ms:9.2f} ms"
                  + (f"  new variant: {what}" if what else ""))

    t_loop = time.perf_counter()
    result = run_loop(kernels, stream, device="cuda" if device == "cuda" else "cpu",
                      seed=args.seed, on_step=on_step,
                      digest_every=args.digest_every if device == "cuda" else None)
    # start-up: from main() (before torch and triton are imported) to the end of the first step
    result["startup_ms"] = round((t_loop - t_main) * 1e3 + result["first_step_ms"], 1)
    result["warmup"] = warm
    lat = result["latency_ms"]
    variants = ", ".join(f"{k} {v}" for k, v in result["variants"].items())
    print(f"  first step {result['first_step_ms']:.1f} ms; steps 1..{args.steps - 1}: "
          f"p50 {lat['p50']:.3f} ms, p90 {lat['p90']:.3f} ms, p99 {lat['p99']:.3f} ms, "
          f"p99.9 {lat['p99_9']:.3f} ms, max {lat['max']:.3f} ms")
    print(f"  start-up {result['startup_ms']:.0f} ms (to the end of the first step"
          + (f", warm-up {warm['ms']:.0f} ms" if warm else "") + ")")
    print(f"  compiled variants: {variants}; variants added after the first step: "
          f"{result['compiles_after_first_step']} (steps that added them took "
          f"{result['stall_ms_after_first_step']:.0f} ms)")
    if args.json:
        doc = {
            "label": label,
            "kernels": args.kernels,
            "kernel_files": kernels.files,
            "device": device,
            "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "triton": triton.__version__},
            "triton_cache_dir": os.environ.get("TRITON_CACHE_DIR"),
            "seed": args.seed,
            "shapes": {"rope_fp8": {"n_groups": N_GROUPS, "heads_per_group": HEADS_PER_GROUP,
                                    "nope_dim": NOPE_DIM, "rope_dim": ROPE_DIM},
                       "moe": None if args.no_moe else {"experts": NUM_EXPERTS, "topk": TOPK,
                                                        "K": HIDDEN, "N": MOE_N, "config": MOE_CONFIG}},
            "stream": info,
            **result,
        }
        pathlib.Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
