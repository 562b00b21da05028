"""Benchmark of jitguard.kernels.moe on an H200: grouped GEMM (w1 / w2) and the full fused MoE layer.

Modes (combine freely):
  --sweep   time every candidate config of the grouped GEMM, both orientations, for the four GEMM shapes
            (Mixtral-8x7B and Qwen3-MoE, w1 and w2), bf16 and FP8, M in {1, 4, 16, 32, 64, 256}; check each
            against a float32 reference; write moe_sweep.json with the best config per orientation, the
            automatic choice, and the table for kernels/moe_configs.py.
  --bench   time the w1 GEMM (auto / Swap-AB forced / Swap-AB off, each with its best config) and the full
            layer against peers in the same run: a per-expert PyTorch loop (bf16 matmul, FP8 via
            torch._scaled_mm), torch._grouped_mm / torch._scaled_grouped_mm where present, and vLLM 0.33.0's
            own fused_moe_kernel with vLLM's config choice (taken from its wheel: bench/peers/vllm_wheel.py);
            report % of the HBM floor (touched experts' weights + activations + output over the read
            bandwidth measured in this run). Writes moe_bench{--tag}.json.
  --vllm    vLLM's kernel beside ours on FP8 w1 cases (--vllm-cases): its own config, the spec's 16-config
            grid with SWAP_AB forced on and off (--vllm-bm64: also BLOCK_M 64 without swap), each timed
            HBM-cold (routings rotated) and L2-warm (one routing replayed). Writes moe_peer{--tag}.json.
  --read-ceiling  a plain Triton read of exactly the experts one Qwen3 w1 launch touches (--read-ms),
            several CTA granularities, both methods: what fraction of the floor a read of that size reaches.
  --tune    targeted configs for the FP8 buckets under 90% of the floor; a bucket changes only where a
            correct candidate beats the table by >= 2%; --bench in the same run uses the result.
            Writes moe_tune{--tag}.json (its "table" is what kernels/moe_configs.py should hold).
  --pdl-ab  the whole layer, Qwen3 and Mixtral, with the programmatic-dependent-launch modes --pdl-modes,
            interleaved in rounds, and the FP8 w1 GEMM alone; checks each mode's output equals the first
            mode's bit for bit. Writes moe_pdl{--tag}.json.
  --check-old JSON  every w1 row with that file's table (optional GEMM flags off) and the installed one,
            interleaved in rounds. Writes moe_check{--tag}.json.
  --report / --report-peer [--report-tune] / --report-pdl / --report-check JSON: markdown tables of those files.

Timing: CUDA-graph replays; each graph holds R launches over R different routings (consecutive launches
touch different experts, so weights come from HBM, not L2); median of the replays, divided by R.
vLLM's files are extracted from its wheel first (``python bench/peers/vllm_wheel.py``, into the git-ignored
bench/peers/vllm-0.33.0/, which a GPU machine without network gets with the run); every results file
records the wheel, its sha256 and the paths inside it under "vllm_peer".
Usage: python bench/bench_moe.py --sweep --bench --out bench/results
       python bench/bench_moe.py --vllm --read-ceiling --tune --bench --tag _v4
       python bench/bench_moe.py --pdl-ab --pdl-modes 1,3 --pdl-all-gemms --layer-ms 1,4,16,32,64,256 --tag _v6
"""
from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import re
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import torch

try:
    from jitguard.kernels import moe
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from kernels import moe  # type: ignore[no-redef]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import vllm_launch  # noqa: E402  vLLM 0.33.0's fused_moe_kernel, loaded from its wheel

FP8 = torch.float8_e4m3fn
MS = [1, 4, 16, 32, 64, 256]
# name: (E, topk, N, K) of each GEMM; the layer shapes pair a w1 with its w2.
GEMMS = {
    "mixtral_w1": (8, 2, 28672, 4096),
    "mixtral_w2": (8, 2, 4096, 14336),
    "qwen3_w1": (128, 8, 1536, 2048),
    "qwen3_w2": (128, 8, 2048, 768),
}
LAYERS = {"mixtral": ("mixtral_w1", "mixtral_w2"), "qwen3": ("qwen3_w1", "qwen3_w2")}
ROT = 16  # routings per graph


def candidate_configs():
    out = []
    for bm, bn, bk, st in itertools.product((16, 32), (64, 128), (128, 256), (3, 4)):
        out.append({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4, "num_stages": st, "SWAP_AB": True})
    for bm, bn, bk, st in itertools.product((16, 32, 64), (64, 128), (128, 256), (3, 4)):
        out.append({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4, "num_stages": st, "SWAP_AB": False})
    return out


def cfg_name(c):
    swap = c.get("SWAP_AB", moe.choose_swap_ab(c["BLOCK_M"], c["BLOCK_N"]))
    name = f"{'S' if swap else 'N'}{c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']}w{c['num_warps']}s{c['num_stages']}"
    if c.get("SPLIT_K", 1) > 1:
        name += f"k{c['SPLIT_K']}"
    if c.get("IDS_FIRST"):
        name += "+ids"
    if c.get("N_FAST"):
        name += "+nf"
    if c.get("PRELOAD"):
        name += "+pre"
    return name


# --------------------------------------------------------------------------------------------------
# problems
# --------------------------------------------------------------------------------------------------
def make_weights(E, N, K, fp8, device, seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    w = torch.randn(E, N, K, device=device, generator=g, dtype=torch.bfloat16) / K**0.5
    if not fp8:
        return w, None
    scale = (w.float().abs().amax(dim=(1, 2)) / 448.0).float()
    q = (w.float() / scale[:, None, None]).clamp(-448, 448).to(FP8) if w.numel() < 2**28 else _chunked_q(w, scale)
    return q, scale


def _chunked_q(w, scale):
    q = torch.empty(w.shape, dtype=FP8, device=w.device)
    for e in range(w.shape[0]):
        q[e] = (w[e].float() / scale[e]).clamp(-448, 448).to(FP8)
    return q


def routings(M, E, topk, n, device, seed):
    """n routings [M, topk] int32 with distinct experts per token; for M*topk <= E consecutive routings
    use disjoint expert sets (so back-to-back launches cannot reuse each other's weights from L2)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    perm = torch.randperm(E, generator=g)
    for i in range(n):
        if M * topk <= E:
            start = (i * M * topk) % E
            idx = torch.arange(start, start + M * topk) % E
            ids = perm[idx].view(M, topk)
        else:
            ids = torch.stack([torch.randperm(E, generator=g)[:topk] for _ in range(M)])
        out.append(ids.to(torch.int32).to(device))
    return out


def touched(ids_list):
    return statistics.mean(len(set(ids.flatten().tolist())) for ids in ids_list)


# --------------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------------
def time_fns(fns, reps=10, warm=2):
    """Median µs per callable, CUDA-graph replays of all of them (plain launches on CPU)."""
    if not torch.cuda.is_available():
        t = time.perf_counter()
        for f in fns:
            f()
        return (time.perf_counter() - t) / len(fns) * 1e6
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in fns:
            f()
    for _ in range(warm):
        g.replay()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / len(fns))
    del g
    return statistics.median(times)


def copy_bandwidth(device):
    """(copy GB/s with read + write counted, read-only GB/s) of large device buffers (4 GiB, fp32)."""
    if device == "cpu":
        return float("nan"), float("nan")
    n = 1 << 30
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    acc = torch.empty((), device=device)
    copy_us = min(time_fns([lambda: dst.copy_(src)], reps=20) for _ in range(2))
    read_us = min(time_fns([lambda: torch.sum(src, dim=0, out=acc)], reps=20) for _ in range(2))
    del src, dst
    return 2 * 4 * n / (copy_us * 1e-6) / 1e9, 4 * n / (read_us * 1e-6) / 1e9


def gpu_warmup(device, seconds=0.5):
    """Bring the clocks up before timing (the card idles at a few hundred MHz)."""
    if device != "cuda":
        return
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    t = time.time()
    while time.time() - t < seconds:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()


def time_variants(factories, reps, rounds=2):
    """{label: (µs or None, error)}: every variant timed `rounds` times, interleaved; best median kept."""
    out = {k: (None, None) for k in factories}
    for _ in range(rounds):
        for label, factory in factories.items():
            us, err = _try_time(factory, reps)
            best = out[label][0]
            out[label] = (us if best is None or (us is not None and us < best) else best, err)
    return out


# --------------------------------------------------------------------------------------------------
# the grouped GEMM problem: one GEMM shape, one M, R routings
# --------------------------------------------------------------------------------------------------
class GemmProblem:
    def __init__(self, name, M, fp8, device, weights=None, rot=ROT, seed=0):
        E, topk, N, K = GEMMS[name]
        self.name, self.M, self.fp8, self.device = name, M, fp8, device
        self.E, self.topk, self.N, self.K = E, topk, N, K
        self.is_w2 = name.endswith("w2")
        self.w, self.w_scale = weights if weights is not None else make_weights(E, N, K, fp8, device)
        self.ids = routings(M, E, topk, rot, device, seed=seed + M)
        g = torch.Generator(device=device).manual_seed(seed + 7)
        rows = M * topk if self.is_w2 else M  # w2: one activation row per slot
        self.top_k_arg = 1 if self.is_w2 else topk
        self.a_hi = [torch.randn(rows, K, device=device, generator=g, dtype=torch.bfloat16) for _ in self.ids]
        self.tw = [torch.rand(M, topk, device=device, generator=g) for _ in self.ids]
        if fp8:
            self.a_scale = torch.tensor([4.0 / 448.0], device=device)
            self.a = [(t.float() / self.a_scale).clamp(-448, 448).to(FP8) for t in self.a_hi]
        else:
            self.a_scale, self.a = None, self.a_hi
        self.out = [torch.empty(M * topk, N, device=device, dtype=torch.bfloat16) for _ in self.ids]
        self._aligned = {}

    def aligned(self, bm):
        if bm not in self._aligned:
            self._aligned[bm] = [moe.moe_align_block_size(ids, bm, self.E) for ids in self.ids]
        return self._aligned[bm]

    def launch_fns(self, cfg, pdl=None):
        al = self.aligned(cfg["BLOCK_M"])
        fns = []
        for i in range(len(self.ids)):
            sid, eid, _ = al[i]

            def f(i=i, sid=sid, eid=eid):
                moe.grouped_gemm(self.a[i], self.w, sid, eid, top_k=self.top_k_arg,
                                 num_valid_tokens=self.M * self.topk, config=cfg, out=self.out[i],
                                 topk_weights=self.tw[i] if self.is_w2 else None,
                                 a_scale=self.a_scale, w_scale=self.w_scale, pdl=pdl)
            fns.append(f)
        return fns

    def vllm_fns(self, cfg, swap_ab=None):
        """vLLM 0.33.0's fused_moe_kernel on the same routings and buffers, launched as vLLM launches it
        (naive one-slot blocks when M*topk*4 <= E, else the aligned order); swap_ab None = vLLM's rule."""
        assert not self.is_w2
        vllm_launch.peer(moe.moe_align_block_size)
        bm = cfg["BLOCK_SIZE_M"]
        key = ("vllm", bm)
        if key not in self._aligned:
            self._aligned[key] = [vllm_launch.prepare(ids, cfg, self.E) for ids in self.ids]
        fns = []
        for i, prep in enumerate(self._aligned[key]):
            def f(i=i, prep=prep):
                vllm_launch.launch(self.a[i], self.w, self.out[i], self.a_scale, self.w_scale, *prep,
                                   top_k=self.top_k_arg, config=cfg, swap_ab=swap_ab)
            fns.append(f)
        return fns

    def reference(self, i=0):
        """float32 C for routing i."""
        ids = self.ids[i].reshape(-1).long()
        a = self.a[i].float() * (self.a_scale if self.fp8 else 1.0)
        rows = torch.arange(ids.numel(), device=ids.device) // self.top_k_arg
        out = torch.zeros(ids.numel(), self.N, device=ids.device)
        for e in ids.unique().tolist():
            sl = (ids == e).nonzero().flatten()
            we = self.w[e].float() * (self.w_scale[e] if self.fp8 else 1.0)
            out[sl] = a[rows[sl]] @ we.t()
        if self.is_w2:
            out = out * self.tw[i].reshape(-1, 1)
        return out

    def floor_bytes(self):
        wb = 1 if self.fp8 else 2
        rows = self.M * self.topk if self.is_w2 else self.M
        return (touched(self.ids) * self.N * self.K * wb + rows * self.K * wb
                + self.M * self.topk * self.N * 2)


def relerr(out, want):
    return ((out.float() - want).norm() / want.norm()).item()


# --------------------------------------------------------------------------------------------------
# sweep
# --------------------------------------------------------------------------------------------------
def _compile_worker(job):
    """Compile (by launching once) every config of one (GEMM, precision) in a fresh process, so the main
    process later hits Triton's disk cache. Returns {config name: error or None}."""
    name, fp8, cfgs, device = job
    E, topk, N, K = GEMMS[name]
    w = torch.empty(E, N, K, device=device, dtype=FP8 if fp8 else torch.bfloat16)
    ws = torch.ones(E, device=device) if fp8 else None
    res = {}
    for M in (1,):
        p = GemmProblem(name, M, fp8, device, weights=(w, ws), rot=1)
        for c in cfgs:
            try:
                p.launch_fns(c)[0]()
                if fp8:  # fused_moe's dynamic per-row activation scales: PER_TOKEN_A variant
                    static = p.a_scale
                    p.a_scale = torch.ones(p.a[0].shape[0], 1, device=device)
                    p.launch_fns(c)[0]()
                    p.a_scale = static
                if device == "cuda":
                    torch.cuda.synchronize()
                res[cfg_name(c)] = None
            except Exception as exc:  # noqa: BLE001 - out of shared memory etc.: recorded, not fatal
                res[cfg_name(c)] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return name, fp8, res


def precompile(jobs_per_combo, workers, device="cuda"):
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    jobs = []
    for (name, fp8), cfgs in jobs_per_combo.items():
        for start in range(0, len(cfgs), 8):
            jobs.append((name, fp8, cfgs[start:start + 8], device))
    errors = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as ex:
        for name, fp8, res in ex.map(_compile_worker, jobs):
            for cname, err in res.items():
                errors[(name, fp8, cname)] = err
    return errors


def run_sweep(device, gemms, ms, precisions, args, save=lambda rows: None):
    cfgs = candidate_configs()
    t0 = time.time()
    errors = {}
    if args.workers > 0:
        errors = precompile({(n, fp8): cfgs for n in gemms for fp8 in precisions}, args.workers, device)
        print(f"precompiled {len(errors)} variants in {time.time() - t0:.1f}s "
              f"({sum(e is not None for e in errors.values())} invalid)", flush=True)
    variants_before = moe.compiled_variant_count()
    rows = []
    for name in gemms:
        for fp8 in precisions:
            E, topk, N, K = GEMMS[name]
            weights = make_weights(E, N, K, fp8, device)
            for M in ms:
                p = GemmProblem(name, M, fp8, device, weights=weights, rot=args.sweep_rot)
                want = p.reference(0)
                for c in cfgs:
                    cname = cfg_name(c)
                    if errors.get((name, fp8, cname)):
                        continue
                    p.out[0].fill_(float("nan"))
                    try:
                        us = time_fns(p.launch_fns(c), reps=args.sweep_reps, warm=1)
                    except Exception as exc:  # noqa: BLE001
                        rows.append(dict(gemm=name, fp8=fp8, M=M, config=cname, error=str(exc)[:200]))
                        continue
                    err = relerr(p.out[0], want)
                    rows.append(dict(gemm=name, fp8=fp8, M=M, config=cname, cfg=c, us=us, relerr=err,
                                     floor_bytes=p.floor_bytes()))
                del p
            del weights
            save(rows)
            if device == "cuda":
                torch.cuda.empty_cache()
            print(f"  {name} {'fp8' if fp8 else 'bf16'} done at {time.time() - t0:.0f}s", flush=True)
    compiled = moe.compiled_variant_count() - variants_before
    valid = len({(r["gemm"], r["fp8"], r["config"]) for r in rows if "us" in r})
    print(f"compiled variants in the timing process: {compiled} for {valid} (GEMM, precision, config) "
          f"triples timed over {len(ms)} values of M", flush=True)
    return rows, errors, compiled


def best_configs(rows, tol):
    """{(gemm, fp8, M): {"swap": row, "noswap": row}} over correct rows."""
    best = {}
    for r in rows:
        if "us" not in r or not r["relerr"] < tol:
            continue
        key = (r["gemm"], r["fp8"], r["M"])
        o = "swap" if r["cfg"]["SWAP_AB"] else "noswap"
        cur = best.setdefault(key, {}).get(o)
        if cur is None or r["us"] < cur["us"]:
            best[key][o] = r
    return best


def table_from(best):
    table = {}
    for (name, fp8, M), d in sorted(best.items()):
        E, topk, N, K = GEMMS[name]
        cls = f"E{E}_N{N}_K{K}_top{topk}_{'fp8' if fp8 else 'bf16'}"
        choice = min(d.values(), key=lambda r: r["us"])
        entry = {o: {k: v for k, v in r["cfg"].items() if k != "SWAP_AB"} for o, r in d.items()}
        entry["auto"] = "swap" if choice["cfg"]["SWAP_AB"] else "noswap"
        table.setdefault(cls, {})[M] = entry
    return table


# --------------------------------------------------------------------------------------------------
# bench: w1 GEMM vs peers, and the full layer vs peers
# --------------------------------------------------------------------------------------------------
def peer_loop_w1(p, i):
    """Per-expert loop for one routing: C[slots of e] = A[rows of e] @ W[e]^T (+ scales), host-planned."""
    ids = p.ids[i].reshape(-1).long().cpu()
    plan = []
    for e in ids.unique().tolist():
        slots = (ids == e).nonzero().flatten()
        rows = slots // p.top_k_arg
        # cuBLASLt's FP8 GEMM needs a multiple of 16 rows: pad by repeating the last row (sliced off).
        padded = torch.cat([rows, rows[-1:].expand((-len(rows)) % 16)])
        plan.append((e, slots.to(p.device), (padded if p.fp8 else rows).to(p.device)))
    out = p.out[i]
    if p.fp8:
        a8 = p.a[i].view(torch.uint8)
        # Separate allocations: a view w_scale[e:e+1] is only 4-byte aligned (suspected cause of
        # CUBLAS_STATUS_NOT_SUPPORTED in the H200 runs; not verified).
        sb = {e: p.w_scale[e:e + 1].clone() for e, _, _ in plan}

        def f():
            for e, slots, rows in plan:
                xa = a8.index_select(0, rows).view(FP8)
                y = torch._scaled_mm(xa, p.w[e].t(), scale_a=p.a_scale, scale_b=sb[e],
                                     out_dtype=torch.bfloat16)
                out.index_copy_(0, slots, y[:len(slots)])
    else:
        def f():
            for e, slots, rows in plan:
                out.index_copy_(0, slots, p.a[i].index_select(0, rows) @ p.w[e].t())
    return f


def peer_grouped_w1(p, i):
    """torch._grouped_mm (bf16) / torch._scaled_grouped_mm (FP8, rowwise scales) over the sorted slots."""
    ids = p.ids[i].reshape(-1).long()
    order = torch.argsort(ids, stable=True)
    counts = torch.bincount(ids, minlength=p.E)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    rows = order // p.top_k_arg
    out = p.out[i]
    wt = p.w.transpose(1, 2)
    if p.fp8:
        a8 = p.a[i].view(torch.uint8)
        sa = p.a_scale.expand(ids.numel()).contiguous()
        sb = p.w_scale[:, None].expand(p.E, p.N).contiguous()

        def f():
            xa = a8.index_select(0, rows).view(FP8)
            y = torch._scaled_grouped_mm(xa, wt, sa, sb, offs=offs, out_dtype=torch.bfloat16)
            out.index_copy_(0, order, y)
    else:
        def f():
            y = torch._grouped_mm(p.a[i].index_select(0, rows), wt, offs=offs)
            out.index_copy_(0, order, y)
    return f


class LayerProblem:
    def __init__(self, layer, M, fp8, device, weights, rot=ROT):
        n1, n2 = LAYERS[layer]
        E, topk, N1, K = GEMMS[n1]
        self.E, self.topk, self.K, self.I, self.M, self.fp8, self.device = E, topk, K, N1 // 2, M, fp8, device
        (self.w1, self.s1), (self.w2, self.s2) = weights
        self.ids = routings(M, E, topk, rot, device, seed=100 + M)
        g = torch.Generator(device=device).manual_seed(11)
        self.x = [torch.randn(M, K, device=device, generator=g, dtype=torch.bfloat16) for _ in self.ids]
        self.tw = [torch.softmax(torch.rand(M, topk, device=device, generator=g), -1) for _ in self.ids]
        self.out = [None] * len(self.ids)
        self.extra = dict(w1_scale=self.s1, w2_scale=self.s2) if fp8 else {}

    def fused_fns(self, swap_ab=None, pdl=None):
        fns = []
        for i in range(len(self.ids)):
            def f(i=i):
                self.out[i] = moe.fused_moe(self.x[i], self.w1, self.w2, self.tw[i], self.ids[i],
                                            swap_ab=swap_ab, pdl=pdl, **self.extra)
            fns.append(f)
        return fns

    def loop_fns(self):
        fns = []
        for i in range(len(self.ids)):
            ids = self.ids[i].reshape(-1).long().cpu()
            plan = []
            for e in ids.unique().tolist():
                slots = (ids == e).nonzero().flatten()
                rows = slots // self.topk
                pad = (-len(rows)) % 16 if self.fp8 else 0  # cuBLASLt FP8: rows % 16 == 0
                plan.append((e, slots.to(self.device), rows.to(self.device),
                             torch.cat([rows, rows[-1:].expand(pad)]).to(self.device)))
            x, tw, I = self.x[i], self.tw[i].reshape(-1), self.I
            sb1 = {e: self.s1[e:e + 1].clone() for e, *_ in plan} if self.fp8 else {}
            sb2 = {e: self.s2[e:e + 1].clone() for e, *_ in plan} if self.fp8 else {}

            def f(x=x, tw=tw, plan=plan, i=i, sb1=sb1, sb2=sb2):
                out = torch.zeros_like(x, dtype=torch.float32)
                if self.fp8:
                    s_x = (x.abs().amax().float() / 448).reshape(1)
                    xq = (x.float() / s_x).clamp(-448, 448).to(FP8).view(torch.uint8)
                for e, slots, rows, prows in plan:
                    if self.fp8:
                        h = torch._scaled_mm(xq.index_select(0, prows).view(FP8), self.w1[e].t(), scale_a=s_x,
                                             scale_b=sb1[e], out_dtype=torch.bfloat16)
                        act = torch.nn.functional.silu(h[:, :I].float()) * h[:, I:].float()
                        s_a = (act.abs().amax() / 448).reshape(1)
                        aq = (act / s_a).clamp(-448, 448).to(FP8)
                        y = torch._scaled_mm(aq, self.w2[e].t(), scale_a=s_a, scale_b=sb2[e],
                                             out_dtype=torch.bfloat16)[:len(rows)]
                    else:
                        h = x.index_select(0, rows) @ self.w1[e].t()
                        act = (torch.nn.functional.silu(h[:, :I].float()) * h[:, I:].float()).to(x.dtype)
                        y = act @ self.w2[e].t()
                    out.index_add_(0, rows, y.float() * tw[slots, None])
                self.out[i] = out.to(x.dtype)
            fns.append(f)
        return fns

    def grouped_fns(self):
        fns = []
        for i in range(len(self.ids)):
            ids = self.ids[i].reshape(-1).long()
            order = torch.argsort(ids, stable=True)
            offs = torch.cumsum(torch.bincount(ids, minlength=self.E), 0).to(torch.int32)
            rows = order // self.topk
            x, tw, I = self.x[i], self.tw[i].reshape(-1)[order], self.I
            w1t, w2t = self.w1.transpose(1, 2), self.w2.transpose(1, 2)
            if self.fp8:
                sb1 = self.s1[:, None].expand(self.E, 2 * I).contiguous()
                sb2 = self.s2[:, None].expand(self.E, self.K).contiguous()

            def f(x=x, tw=tw, rows=rows, offs=offs, i=i):
                xa = x.index_select(0, rows)
                if self.fp8:
                    sa = (xa.abs().amax(dim=1).float() / 448).clamp_min(1e-12)
                    xq = (xa.float() / sa[:, None]).clamp(-448, 448).to(FP8)
                    h = torch._scaled_grouped_mm(xq, w1t, sa, sb1, offs=offs, out_dtype=torch.bfloat16)
                    act = torch.nn.functional.silu(h[:, :I].float()) * h[:, I:].float()
                    s2 = (act.abs().amax(dim=1) / 448).clamp_min(1e-12)
                    aq = (act / s2[:, None]).clamp(-448, 448).to(FP8)
                    y = torch._scaled_grouped_mm(aq, w2t, s2, sb2, offs=offs, out_dtype=torch.bfloat16)
                else:
                    h = torch._grouped_mm(xa, w1t, offs=offs)
                    act = (torch.nn.functional.silu(h[:, :I].float()) * h[:, I:].float()).to(x.dtype)
                    y = torch._grouped_mm(act, w2t, offs=offs)
                out = torch.zeros_like(x, dtype=torch.float32)
                out.index_add_(0, rows, y.float() * tw[:, None])
                self.out[i] = out.to(x.dtype)
            fns.append(f)
        return fns

    def floor_bytes(self):
        wb = 1 if self.fp8 else 2
        return (touched(self.ids) * 3 * self.I * self.K * wb + 2 * self.M * self.K * 2)


def _try_time(fns_factory, reps):
    try:
        return time_fns(fns_factory(), reps=reps), None
    except Exception as exc:  # noqa: BLE001 - a peer missing in this torch is recorded, not fatal
        return None, f"{type(exc).__name__}: {str(exc)[:160]}"


def lookup_entry(name, fp8, M, table):
    E, topk, N, K = GEMMS[name]
    cls = f"E{E}_N{N}_K{K}_top{topk}_{'fp8' if fp8 else 'bf16'}"
    buckets = table.get(cls, {})
    if not buckets:
        return None
    keys = sorted(buckets, key=int)
    chosen = keys[0]
    for k in keys:
        if int(k) <= M:
            chosen = k
    return buckets[chosen]


def table_jobs(table, precisions):
    jobs = {}
    for name in GEMMS:
        for fp8 in precisions:
            E, topk, N, K = GEMMS[name]
            buckets = table.get(f"E{E}_N{N}_K{K}_top{topk}_{'fp8' if fp8 else 'bf16'}", {})
            cfgs = {}
            for entry in buckets.values():
                for o in ("swap", "noswap"):
                    if o in entry:
                        c = dict(entry[o], SWAP_AB=o == "swap")
                        cfgs[cfg_name(c)] = c
            if cfgs:
                jobs[(name, fp8)] = list(cfgs.values())
    return jobs


def l2_warm(device, precisions, args, res, save):
    """vLLM-style timing for comparison: one routing replayed (its experts' weights may sit in L2)."""
    out = []
    for fp8 in precisions:
        E, topk, N, K = GEMMS["qwen3_w1"]
        weights = make_weights(E, N, K, fp8, device)
        for M in (1, 4):
            p = GemmProblem("qwen3_w1", M, fp8, device, weights=weights, rot=1)
            dt = FP8 if fp8 else torch.bfloat16
            variants = {o: moe.get_config(E, N, K, topk, M, dt, sw) for o, sw in
                        (("auto", None), ("swap", True), ("noswap", False))}
            rec = dict(gemm="qwen3_w1", fp8=fp8, M=M, rot=1)
            factories = {k: (lambda c=c: [p.launch_fns(c)[0]] * 8) for k, c in variants.items()}
            for label, (us, err) in time_variants(factories, args.reps).items():
                rec[f"{label}_us"], rec[f"{label}_cfg"] = us, variants[label]
            out.append(rec)
            print(f"L2-warm qwen3_w1 {'fp8 ' if fp8 else 'bf16'} M={M}: " +
                  " ".join(f"{k} {_f(rec[k + '_us'])}" for k in variants), flush=True)
        del weights
    res["l2_warm"] = out
    save(res)


def layer_breakdown(device, args, res, save):
    """µs of each piece of fused_moe (FP8, M = 1 and 16), CUDA-graph timed one piece at a time."""
    out = []
    for layer in ("qwen3", "mixtral"):
        n1, n2 = LAYERS[layer]
        ws = (make_weights(*_enk(n1), True, device, seed=1), make_weights(*_enk(n2), True, device, seed=2))
        for M in (1, 16):
            lp = LayerProblem(layer, M, True, device, ws, rot=args.layer_rot)
            E, topk, K, I = lp.E, lp.topk, lp.K, lp.I
            c1 = moe.get_config(E, 2 * I, K, topk, M, FP8)
            c2 = moe.get_config(E, K, I, topk, M, FP8)
            ids, x, tw = lp.ids[0], lp.x[0], lp.tw[0].reshape(-1)
            al1 = moe.moe_align_block_size(ids, c1["BLOCK_M"], E)
            al2 = moe.moe_align_block_size(ids, c2["BLOCK_M"], E)
            xq, xs = moe.quantize_fp8(x)
            h = moe.grouped_gemm(xq, lp.w1, al1[0], al1[1], top_k=topk, num_valid_tokens=M * topk, config=c1,
                                 out_dtype=torch.bfloat16, a_scale=xs, w_scale=lp.s1)
            aq, as_ = moe.silu_and_mul(h, out_dtype=FP8)
            y = moe.grouped_gemm(aq, lp.w2, al2[0], al2[1], top_k=1, num_valid_tokens=M * topk, config=c2,
                                 out_dtype=torch.bfloat16, topk_weights=tw, a_scale=as_, w_scale=lp.s2)
            pieces = {
                "align": lambda: moe.moe_align_block_size(ids, c1["BLOCK_M"], E),
                "quant_x": lambda: moe.quantize_fp8(x),
                "w1_gemm": lambda: moe.grouped_gemm(xq, lp.w1, al1[0], al1[1], top_k=topk, num_valid_tokens=M * topk,
                                                    config=c1, out=h, a_scale=xs, w_scale=lp.s1),
                "silu_mul_quant": lambda: moe.silu_and_mul(h, out_dtype=FP8),
                "w2_gemm": lambda: moe.grouped_gemm(aq, lp.w2, al2[0], al2[1], top_k=1, num_valid_tokens=M * topk,
                                                    config=c2, out=y, topk_weights=tw, a_scale=as_, w_scale=lp.s2),
                "sum_topk": lambda: y.view(M, topk, K).sum(dim=1),
                "whole": lambda: moe.fused_moe(x, lp.w1, lp.w2, lp.tw[0], ids, **lp.extra),
            }
            rec = dict(layer=layer, fp8=True, M=M, same_block_m=c1["BLOCK_M"] == c2["BLOCK_M"])
            for name, fn in pieces.items():
                rec[name + "_us"], err = _try_time(lambda fn=fn: [fn] * 8, args.reps)
                if err:
                    rec[name + "_error"] = err
            out.append(rec)
            print("breakdown " + " ".join(f"{k}={_f(v) if isinstance(v, float) else v}" for k, v in rec.items()),
                  flush=True)
            del lp
        del ws
    res["layer_breakdown"] = out
    save(res)


# --------------------------------------------------------------------------------------------------
# programmatic dependent launch A/B (moe.PDL modes), interleaved
# --------------------------------------------------------------------------------------------------
PDL_MODES = {0: "off", 1: "wait", 2: "wait+trigger", 3: "wait, GEMM triggers after its K loop"}


def _pdl_layer_weights(layer, fp8, device, empty=False):
    n1, n2 = LAYERS[layer]
    if not empty:
        return (make_weights(*_enk(n1), fp8, device, seed=1), make_weights(*_enk(n2), fp8, device, seed=2))
    ws = []
    for n in (n1, n2):
        E, N, K = _enk(n)
        ws.append((torch.empty(E, N, K, device=device, dtype=FP8 if fp8 else torch.bfloat16),
                   torch.ones(E, device=device) if fp8 else None))
    return tuple(ws)


def _pdl_compile_worker(job):
    """Compile every kernel variant of one (layer, precision) over the M values and PDL modes by running
    the layer once (uninitialized weights: only the compiles matter); the main process then hits the disk
    cache."""
    layer, fp8, ms, modes, device = job
    ws = _pdl_layer_weights(layer, fp8, device, empty=True)
    errors = {}
    for M in ms:
        lp = LayerProblem(layer, M, fp8, device, ws, rot=1)
        for mode in modes:
            try:
                lp.fused_fns(pdl=mode)[0]()
                p = GemmProblem(layer + "_w1", M, fp8, device, weights=ws[0], rot=1)
                p.launch_fns(moe.get_config(p.E, p.N, p.K, p.topk, M, FP8 if fp8 else torch.bfloat16), pdl=mode)[0]()
                if device == "cuda":
                    torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - recorded, the timing run reports it again
                errors[f"{layer}|{int(fp8)}|{M}|{mode}"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return errors


def pdl_ab(device, args, precisions, save=lambda res: None):
    """The whole layer (and the Qwen3 FP8 w1 GEMM alone at M = 1, 4) with PDL off / wait / wait+trigger:
    CUDA-graph replays of --layer-rot back-to-back layers over different routings; the three modes
    interleaved within each of --rounds rounds; the median over rounds kept, with min and max. Each mode's
    output of the last replay must equal the plain launches' bit for bit."""
    modes = args.pdl_modes
    ms = args.layer_ms
    if args.workers and device == "cuda":
        import multiprocessing as mp
        t = time.time()
        jobs = [(layer, fp8, [M], [mode], device) for layer in ("mixtral", "qwen3") for fp8 in precisions
                for M in ms for mode in modes]
        with ProcessPoolExecutor(max_workers=min(args.workers, len(jobs)), mp_context=mp.get_context("spawn")) as ex:
            errs = {k: v for e in ex.map(_pdl_compile_worker, jobs) for k, v in e.items()}
        print(f"pdl-ab: precompiled in {time.time() - t:.0f} s, errors {errs or 'none'}", flush=True)
    gpu_warmup(device)
    res = dict(method=f"CUDA-graph replays of {args.layer_rot} back-to-back layers (different routings) per "
                      f"graph, median of {args.reps} replays per timing, PDL modes interleaved, "
                      f"{args.rounds} rounds; median (min, max) over rounds",
               modes=PDL_MODES, compared=modes, default_pdl=moe.PDL, layer=[], w1_gemm=[])
    for layer in ("qwen3", "mixtral"):
        for fp8 in precisions:
            ws = _pdl_layer_weights(layer, fp8, device)
            for M in ms:
                lp = LayerProblem(layer, M, fp8, device, ws, rot=args.layer_rot)
                rec = dict(layer=layer, fp8=fp8, M=M)
                times = {m: [] for m in modes}
                outs = {}
                for _ in range(args.rounds):
                    for mode in modes:
                        us, err = _try_time(lambda mode=mode: lp.fused_fns(pdl=mode), args.reps)
                        if err:
                            rec[f"error_{mode}"] = err
                        elif us is not None:
                            times[mode].append(us)
                        outs[mode] = [o.clone() if o is not None else None for o in lp.out]
                for mode in modes:
                    t = times[mode]
                    rec[f"us_{mode}"] = statistics.median(t) if t else None
                    rec[f"us_{mode}_min"], rec[f"us_{mode}_max"] = (min(t), max(t)) if t else (None, None)
                    rec[f"rounds_{mode}"] = t
                    rec[f"equal_to_off_{mode}"] = all(  # (to the first mode listed)
                        a is not None and b is not None and torch.equal(a, b) for a, b in zip(outs[mode], outs[modes[0]]))
                res["layer"].append(rec)
                print("pdl-ab layer " + " ".join(
                    f"{k}={_f(v, 6, 2) if isinstance(v, float) else v}" for k, v in rec.items()
                    if not k.startswith("rounds_")), flush=True)
                save(res)
                del lp
            if (layer == "qwen3" and fp8) or args.pdl_all_gemms:
                for M in ((1, 4) if not args.pdl_all_gemms else ms):
                    p = GemmProblem(layer + "_w1", M, fp8, device, weights=ws[0], rot=args.rot)
                    cfg = moe.get_config(p.E, p.N, p.K, p.topk, M, FP8 if fp8 else torch.bfloat16)
                    rec = dict(gemm=layer + "_w1", fp8=fp8, M=M, config=cfg)
                    times = {m: [] for m in modes}
                    for _ in range(args.rounds):
                        for mode in modes:
                            us, err = _try_time(lambda mode=mode: p.launch_fns(cfg, pdl=mode), args.reps)
                            if err:
                                rec[f"error_{mode}"] = err
                            elif us is not None:
                                times[mode].append(us)
                    for mode in modes:
                        t = times[mode]
                        rec[f"us_{mode}"] = statistics.median(t) if t else None
                        rec[f"us_{mode}_min"], rec[f"us_{mode}_max"] = (min(t), max(t)) if t else (None, None)
                        rec[f"rounds_{mode}"] = t
                    res["w1_gemm"].append(rec)
                    print("pdl-ab w1 " + " ".join(
                        f"{k}={_f(v, 6, 2) if isinstance(v, float) else v}" for k, v in rec.items()
                        if not k.startswith("rounds_")), flush=True)
                    save(res)
                    del p
            del ws
            if device == "cuda":
                torch.cuda.empty_cache()
    return res


def report_pdl(path):
    """Markdown table of a moe_pdl JSON: each compared PDL mode, median (min-max) over rounds, its change
    against the first mode, and whether the layer's outputs equal the first mode's bit for bit."""
    b = json.load(open(path))
    m = b["machine"]
    rows = b["layer"] + b["w1_gemm"]
    modes = sorted({int(k[3:]) for r in rows for k in r if re.fullmatch(r"us_\d+", k)})
    first = modes[0]
    names = {int(k): v for k, v in b.get("modes", PDL_MODES).items()}
    print(f"Machine: {m.get('gpu')}, torch {m['torch']}, triton {m['triton']}, {m['date']}. {b['method']}.\n")
    print("| what | prec | M | " + " | ".join(f"PDL {k} ({names.get(k, k)}) µs" for k in modes) + " | "
          + " | ".join(f"{k} vs {first}" for k in modes[1:]) + " | bit-equal |")
    print("|---|---|---|" + "---|" * (2 * len(modes)))

    def cell(r, k):
        v = r.get(f"us_{k}")
        return f"{v:.2f} ({r[f'us_{k}_min']:.2f}-{r[f'us_{k}_max']:.2f})" if v else "failed"

    def gain(r, k):
        a, b_ = r.get(f"us_{first}"), r.get(f"us_{k}")
        return f"{b_ - a:+.2f} µs" if a and b_ else "-"

    for r in rows:
        what = f"{r['layer']} layer" if "layer" in r else f"{r['gemm']} alone"
        equal = ("yes" if all(r.get(f"equal_to_off_{k}") for k in modes[1:]) else "NO") if "layer" in r else "-"
        print(f"| {what} | {'fp8' if r['fp8'] else 'bf16'} | {r['M']} | " + " | ".join(cell(r, k) for k in modes)
              + " | " + " | ".join(gain(r, k) for k in modes[1:]) + f" | {equal} |")


# --------------------------------------------------------------------------------------------------
def vllm_grid():
    """The spec's 16 configs for vLLM's reference figures: BLOCK_M 16/32, BLOCK_N 64/128, BLOCK_K 128/256,
    stages 3/4 (GROUP_SIZE_M 1, 4 warps)."""
    return [{"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 1, "num_warps": 4,
             "num_stages": st} for bm, bn, bk, st in itertools.product((16, 32), (64, 128), (128, 256), (3, 4))]


def vcfg_name(c, swap):
    sw = "vllm-rule" if swap is None else ("S" if swap else "N")
    return (f"{sw}:{c['BLOCK_SIZE_M']}x{c['BLOCK_SIZE_N']}x{c['BLOCK_SIZE_K']}g{c['GROUP_SIZE_M']}"
            f"w{c['num_warps']}s{c['num_stages']}")


def vllm_own_config(name, M, fp8):
    E, topk, N, K = GEMMS[name]
    vllm_launch.peer(moe.moe_align_block_size)
    return vllm_launch.vllm_config(M, E, N // 2, K, topk, fp8)


def vllm_peer_source():
    """Where vLLM's kernel and configs came from (wheel, sha256, paths inside it), once loaded; else None."""
    return vllm_launch.provenance() if vllm_launch._PEER is not None else None


VLLM_CASES = [("qwen3_w1", True, 1), ("qwen3_w1", True, 4), ("qwen3_w1", True, 16),
              ("mixtral_w1", True, 1), ("mixtral_w1", True, 256)]


def vllm_variants(name, fp8, M, bm64=False):
    """{label: (config, swap)}: vLLM's own choice, then the 16-config grid with Swap-AB forced on and off;
    bm64: also BLOCK_M 64 without swap (wgmma in the normal orientation), which the spec's grid lacks."""
    own, _ = vllm_own_config(name, M, fp8)
    out = {"vllm_own": (own, None)}
    for c in vllm_grid():
        for swap in (True, False):
            out[vcfg_name(c, swap)] = (c, swap)
    if bm64:
        for bn, bk, st in itertools.product((64, 128), (128, 256), (3, 4)):
            c = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 1, "num_warps": 4,
                 "num_stages": st}
            out["BM64 " + vcfg_name(c, False)] = (c, False)
    return out


def _compile_vllm_worker(job):
    """Launch vLLM's kernel once per (config, swap) at this M (its ints are specialized per M class)."""
    name, fp8, M, variants, device = job
    E, topk, N, K = GEMMS[name]
    w = torch.empty(E, N, K, device=device, dtype=FP8 if fp8 else torch.bfloat16)
    ws = torch.ones(E, device=device) if fp8 else None
    p = GemmProblem(name, M, fp8, device, weights=(w, ws), rot=1)
    res = {}
    for label, (c, swap) in variants:
        try:
            p.vllm_fns(c, swap)[0]()
            if device == "cuda":
                torch.cuda.synchronize()
            res[label] = None
        except Exception as exc:  # noqa: BLE001
            res[label] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return name, fp8, M, res


def precompile_vllm(cases, workers, device="cuda", per_job=6):
    """cases: {(name, fp8, M): {label: (cfg, swap)}} -> {(name, fp8, M, label): error or None}."""
    import multiprocessing as mp
    jobs = []
    for (name, fp8, M), variants in cases.items():
        items = list(variants.items())
        for start in range(0, len(items), per_job):
            jobs.append((name, fp8, M, items[start:start + per_job], device))
    errors = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
        for name, fp8, M, res in ex.map(_compile_vllm_worker, jobs):
            for label, err in res.items():
                errors[(name, fp8, M, label)] = err
    return errors


def vllm_study(device, args, table, save=lambda res: None):
    """Ours (table: auto / swap / no swap) and vLLM's kernel (its own config and swap rule; the 16-config
    grid with Swap-AB forced on and off) on the same problems, timed two ways: "cold" = ROT routings per
    graph (each launch reads its experts from HBM), "warm" = one routing replayed 8 times per graph (its
    experts' weights can stay in the 50 MB L2)."""
    cases = {c: vllm_variants(*c, bm64=args.vllm_bm64) for c in args.vllm_cases}
    if args.workers > 0 and device == "cuda":
        t0 = time.time()
        errs = precompile_vllm(cases, args.workers, device)
        print(f"vllm study: precompiled {len(errs)} variants in {time.time() - t0:.1f}s "
              f"({sum(e is not None for e in errs.values())} failed)", flush=True)
    out = []
    weights_cache = {}
    for (name, fp8, M), vvars in cases.items():
        E, topk, N, K = GEMMS[name]
        if (name, fp8) not in weights_cache:
            weights_cache.clear()
            if device == "cuda":
                torch.cuda.empty_cache()
            weights_cache[(name, fp8)] = make_weights(E, N, K, fp8, device)
        weights = weights_cache[(name, fp8)]
        dt = FP8 if fp8 else torch.bfloat16
        ours = {f"ours_{o}": moe.get_config(E, N, K, topk, M, dt, sw)
                for o, sw in (("auto", None), ("swap", True), ("noswap", False))}
        rec = dict(gemm=name, fp8=fp8, M=M, ours_cfg={k: cfg_name(c) for k, c in ours.items()},
                   vllm_own_cfg=vllm_own_config(name, M, fp8), variants={})
        for method, rot, reps_per_graph in (("cold", args.rot, 1), ("warm", 1, 8)):
            p = GemmProblem(name, M, fp8, device, weights=weights, rot=rot)
            want = p.reference(0)
            factories = {}
            for label, c in ours.items():
                factories[label] = (lambda c=c: p.launch_fns(c) * reps_per_graph)
            for label, (c, swap) in vvars.items():
                factories[label] = (lambda c=c, swap=swap: p.vllm_fns(c, swap) * reps_per_graph)
            if method == "cold":
                for label, factory in factories.items():  # correctness, outputs poisoned first
                    p.out[0].fill_(float("nan"))
                    try:
                        factory()[0]()
                        err = relerr(p.out[0], want)
                    except Exception as exc:  # noqa: BLE001
                        err = f"{type(exc).__name__}: {str(exc)[:160]}"
                    rec["variants"].setdefault(label, {})["relerr"] = err
            for label, (us, err) in time_variants(factories, args.reps).items():
                v = rec["variants"].setdefault(label, {})
                v[f"{method}_us"] = us
                if err:
                    v[f"{method}_error"] = err
            rec[f"floor_us_{method}"] = p.floor_bytes() / (args.read_bw * 1e3) if method == "cold" else None
            del p
        rec["summary"] = _vllm_summary(rec)
        out.append(rec)
        s = rec["summary"]
        print(f"vllm-peer {name} {'fp8' if fp8 else 'bf16'} M={M}: " +
              "  ".join(f"{m}: ours {_f(s[m]['ours_auto'])} vllm-own {_f(s[m]['vllm_own'])} "
                        f"vllm-best-swap {_f(s[m]['vllm_best_swap'])} vllm-best-noswap {_f(s[m]['vllm_best_noswap'])}"
                        for m in ("cold", "warm")), flush=True)
        save(out)
    return out


def _vllm_summary(rec, tol=2e-2):
    s = {}
    for m in ("cold", "warm"):
        ok = {k: v for k, v in rec["variants"].items()
              if isinstance(v.get("relerr"), float) and v["relerr"] < tol and v.get(f"{m}_us")}
        d = {k: ok[k][f"{m}_us"] if k in ok else None for k in ("ours_auto", "ours_swap", "ours_noswap", "vllm_own")}
        for o, prefix in (("swap", "S:"), ("noswap", "N:"), ("noswap_bm64", "BM64 N:")):
            cands = [(v[f"{m}_us"], k) for k, v in ok.items() if k.startswith(prefix)]
            best = min(cands) if cands else (None, None)
            d[f"vllm_best_{o}"], d[f"vllm_best_{o}_cfg"] = best
        s[m] = d
    s["wrong"] = sorted(k for k, v in rec["variants"].items()
                        if not (isinstance(v.get("relerr"), float) and v["relerr"] < tol))
    return s


# --------------------------------------------------------------------------------------------------
# read ceiling: a plain read of exactly the experts one Qwen3 w1 M=1 launch touches
# --------------------------------------------------------------------------------------------------
def _read_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def read_experts(w_ptr, ids_ptr, out_ptr, per_expert, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
        e = tl.load(ids_ptr + tl.program_id(0)).to(tl.int64)
        c = tl.program_id(1)
        base = w_ptr + e * per_expert + c * CHUNK
        acc = tl.zeros([BLOCK], tl.int32)
        for start in tl.range(0, CHUNK, BLOCK):
            acc += tl.load(base + start + tl.arange(0, BLOCK))
        tl.store(out_ptr + tl.program_id(0) * tl.num_programs(1) + c, tl.sum(acc, axis=0))
    return read_experts


def read_ceiling(device, args, save=lambda res: None):
    """µs to read exactly the experts' FP8 weights one Qwen3 w1 launch touches (M=1: 8 experts, 25.2 MB),
    for each M of --read-ms, with the GEMM bench's routings: a Triton read kernel at several CTA
    granularities (and, at M=1, torch.sum over 8 contiguous experts); cold (the routings rotated in one
    graph) and warm (one routing replayed)."""
    kern = _read_kernel()
    E, topk, N, K = GEMMS["qwen3_w1"]
    g = torch.Generator(device=device).manual_seed(3)
    w = torch.randint(-2**31, 2**31 - 1, (E, N * K // 4), device=device, dtype=torch.int32, generator=g)
    per_expert = N * K // 4
    res = []
    for M in args.read_ms:
        res.extend(_read_ceiling_m(device, args, kern, w, M))
        save(res)
    del w
    return res


def _read_ceiling_m(device, args, kern, w, M):
    E, topk, N, K = GEMMS["qwen3_w1"]
    per_expert = N * K // 4
    sets = routings(M, E, topk, args.rot, device, seed=M)  # the GEMM bench's routings of this M
    ids = [torch.unique(s.reshape(-1)).to(torch.int32).contiguous() for s in sets]
    nbytes = statistics.mean(len(i) for i in ids) * N * K
    res = []
    variants = {}
    shapes = ((24, 2048, 4), (24, 4096, 8), (48, 2048, 4), (96, 2048, 4), (96, 1024, 4), (192, 1024, 4),
              (384, 512, 4))
    if per_expert < 2**16:  # --tiny
        shapes = ((4, 128, 4),)
    for ctas_per_expert, block, warps in shapes:
        chunk = per_expert // ctas_per_expert
        assert chunk * ctas_per_expert == per_expert and chunk % block == 0
        outb = torch.empty(topk * ctas_per_expert, device=device, dtype=torch.int32)

        outb = torch.empty(E * ctas_per_expert, device=device, dtype=torch.int32)

        def mk(i, chunk=chunk, block=block, warps=warps, cpe=ctas_per_expert, outb=outb):
            return lambda: kern[(len(ids[i]), cpe)](w, ids[i], outb, per_expert, CHUNK=chunk, BLOCK=block,
                                                    num_warps=warps)
        variants[f"triton {ctas_per_expert} CTAs/expert x {chunk * 4 // 1024} KB, BLOCK {block}, {warps} warps"] = mk
    if M == 1:
        starts = [(i * topk) % E for i in range(args.rot)]
        acc = torch.empty((), device=device, dtype=torch.float32)
        variants["torch.sum (float32 view) of 8 contiguous experts"] = (
            lambda i: (lambda: torch.sum(w[starts[i]:starts[i] + topk].view(torch.float32).view(-1), dim=0,
                                         out=acc)))
    for label, mk in variants.items():
        rec = dict(label=label, M=M, experts=statistics.mean(len(i) for i in ids), bytes=nbytes)
        for method, fac in (("cold", lambda mk=mk: [mk(i) for i in range(args.rot)]),
                            ("warm", lambda mk=mk: [mk(0)] * 8)):
            best = None
            for _ in range(2):
                us, err = _try_time(fac, args.reps)
                if us is not None and (best is None or us < best):
                    best = us
                if err:
                    rec[f"{method}_error"] = err
            rec[f"{method}_us"] = best
            rec[f"{method}_GBps"] = nbytes / (best * 1e3) if best else None
        rec["floor_us"] = nbytes / (args.read_bw * 1e3)
        res.append(rec)
        print(f"read-ceiling M={M} {label}: cold {_f(rec['cold_us'], 6, 2)} µs ({_f(rec['cold_GBps'], 5, 0)} GB/s) "
              f"warm {_f(rec['warm_us'], 6, 2)} µs; floor {rec['floor_us']:.2f}", flush=True)
    return res


# --------------------------------------------------------------------------------------------------
# targeted tuning of the buckets that miss 90% of the floor (FP8 w1)
# --------------------------------------------------------------------------------------------------
def tune_candidates(name, M):
    out = []
    if name == "mixtral_w1":  # M=256: MMA within 2x of memory; bigger tiles, more warps
        for bm, bn, w, st in itertools.product((64, 128), (128, 256), (4, 8), (3, 4)):
            out.append({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 128, "num_warps": w, "num_stages": st,
                        "SWAP_AB": False})
        for w in (4, 8):
            out.append({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 256, "num_warps": w, "num_stages": 3, "SWAP_AB": False})
        for bm, bn in ((32, 256), (64, 128), (64, 256)):
            out.append({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 128, "num_warps": 8, "num_stages": 3, "SWAP_AB": True})
    else:  # qwen3_w1, M = 1 or 4: tile count vs 132 SMs (BLOCK_N), pipeline depth, warps
        for bn, bk, st in itertools.product((64, 128, 256), (128, 256), (3, 4, 5)):
            out.append({"BLOCK_M": 16, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4, "num_stages": st, "SWAP_AB": True})
        for bn, bk in ((128, 256), (256, 128), (256, 256)):
            out.append({"BLOCK_M": 16, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 8, "num_stages": 3, "SWAP_AB": True})
        for bn, bk, st in itertools.product((32, 64), (256, 512), (3, 4)):
            out.append({"BLOCK_M": 16, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4, "num_stages": st, "SWAP_AB": False})
    return out


TUNE_CASES = [("mixtral_w1", 256), ("qwen3_w1", 4), ("qwen3_w1", 1)]


def tune(device, args, table, save=lambda res: None):
    """Time the candidates beside the table's current configs (cold method, interleaved, best of 2); a
    bucket's entry changes only where a correct candidate beats the table's auto by >= 2%. Returns the
    (possibly) updated table and the records."""
    import copy
    new_table = copy.deepcopy({cls: {int(m): e for m, e in b.items()} for cls, b in table.items()})
    if args.workers > 0 and device == "cuda":
        t0 = time.time()
        jobs = {}
        for name, M in TUNE_CASES:
            jobs.setdefault((name, True), []).extend(tune_candidates(name, M))
        errs = precompile(jobs, args.workers, device)
        print(f"tune: precompiled {len(errs)} variants in {time.time() - t0:.1f}s "
              f"({sum(e is not None for e in errs.values())} failed)", flush=True)
    recs = []
    for name, M in TUNE_CASES:
        E, topk, N, K = GEMMS[name]
        weights = make_weights(E, N, K, True, device)
        p = GemmProblem(name, M, True, device, weights=weights, rot=args.rot)
        want = p.reference(0)
        current = {o: moe.get_config(E, N, K, topk, M, FP8, sw) for o, sw in (("auto", None), ("swap", True), ("noswap", False))}
        cands = {"table_" + o: c for o, c in current.items()}
        for c in tune_candidates(name, M):
            cands.setdefault(cfg_name(c), c)
        rec = dict(gemm=name, fp8=True, M=M, floor_us=p.floor_bytes() / (args.read_bw * 1e3), rows=[])
        errs = {}
        for label, c in cands.items():
            p.out[0].fill_(float("nan"))
            try:
                p.launch_fns(c)[0]()
                errs[label] = relerr(p.out[0], want)
            except Exception as exc:  # noqa: BLE001
                errs[label] = f"{type(exc).__name__}: {str(exc)[:120]}"
        timed = time_variants({k: (lambda c=c: p.launch_fns(c)) for k, c in cands.items() if isinstance(errs[k], float)},
                              args.reps)
        for label, c in cands.items():
            us = timed.get(label, (None, None))[0]
            rec["rows"].append(dict(label=label, config=cfg_name(c), cfg=c, us=us, relerr=errs[label]))
        ok = [r for r in rec["rows"] if isinstance(r["relerr"], float) and r["relerr"] < 2e-2 and r["us"]]
        base = next(r for r in rec["rows"] if r["label"] == "table_auto")
        best = min(ok, key=lambda r: r["us"])
        rec["table_auto_us"], rec["best_us"], rec["best"] = base["us"], best["us"], best["config"]
        cls = moe_shape_class(name, True)
        buckets = new_table.setdefault(cls, {})
        bucket = max([b for b in buckets if b <= M] or [min(buckets, default=M)])
        buckets.setdefault(bucket, {"auto": "swap" if current["auto"].get("SWAP_AB") else "noswap",
                                    "swap": {k: v for k, v in current["swap"].items() if k != "SWAP_AB"},
                                    "noswap": {k: v for k, v in current["noswap"].items() if k != "SWAP_AB"}})
        if base["us"] and best["us"] <= 0.98 * base["us"] and not best["label"].startswith("table_"):
            o = "swap" if best["cfg"]["SWAP_AB"] else "noswap"
            new_table[cls][bucket][o] = {k: v for k, v in best["cfg"].items() if k != "SWAP_AB"}
            new_table[cls][bucket]["auto"] = o
            rec["changed"] = f"{cls} bucket {bucket}: {o} -> {best['config']} ({base['us']:.1f} -> {best['us']:.1f} µs)"
        else:
            rec["changed"] = None
        for o in ("swap", "noswap"):  # the best of each orientation too (forced swap_ab uses it)
            bo = [r for r in ok if bool(r["cfg"].get("SWAP_AB")) == (o == "swap")]
            if bo:
                b = min(bo, key=lambda r: r["us"])
                cur = next((r for r in rec["rows"] if r["label"] == f"table_{o}"), None)
                if cur and cur["us"] and b["us"] <= 0.98 * cur["us"] and not b["label"].startswith("table_"):
                    new_table[cls][bucket][o] = {k: v for k, v in b["cfg"].items() if k != "SWAP_AB"}
        top = sorted(ok, key=lambda r: r["us"])[:4]
        print(f"tune {name} fp8 M={M}: floor {rec['floor_us']:.1f} table auto {_f(base['us'])} best " +
              ", ".join(f"{r['config']} {r['us']:.1f}" for r in top) + f"; change: {rec['changed']}", flush=True)
        recs.append(rec)
        save(dict(tune=recs, table=new_table))
        del p, weights
        if device == "cuda":
            torch.cuda.empty_cache()
    return new_table, recs


# --------------------------------------------------------------------------------------------------
# check: every w1 row (both shapes, bf16 and FP8) with an old and the installed table, interleaved
# --------------------------------------------------------------------------------------------------
def _spread(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None, None, None
    return statistics.median(vals), min(vals), max(vals)


OLD_FLAGS = {"IDS_FIRST": False, "PRELOAD": False}  # the old side runs the GEMM with its optional flags off


def check_tables(device, args, old_table, new_table, save=lambda res: None):
    """Every w1 row of the bench (both shapes, --precisions, --ms): the old and the new table's auto config,
    interleaved in args.rounds rounds (rows whose config did not change are timed once per round as one
    variant); and the layer (--check-layers) where the w1 config changed."""
    res = {"gemm": [], "layer": []}
    new_flags = dict(moe.GEMM_DEFAULTS)
    for name in ("mixtral_w1", "qwen3_w1"):
        E, topk, N, K = GEMMS[name]
        for fp8 in args.precisions_list:
            weights = make_weights(E, N, K, fp8, device)
            dt = FP8 if fp8 else torch.bfloat16
            for M in args.ms_list:
                p = GemmProblem(name, M, fp8, device, weights=weights, rot=args.rot)
                want = p.reference(0)
                cfgs = {}
                for label, tab in (("old", old_table), ("new", new_table)):
                    _install_table(tab)
                    cfgs[label] = moe.get_config(E, N, K, topk, M, dt)
                cfgs["old"].update(OLD_FLAGS)
                cfgs["new"] = dict(moe.GEMM_DEFAULTS, **cfgs["new"])
                same = cfg_name(cfgs["old"]) == cfg_name(cfgs["new"])
                variants = {"old": cfgs["old"]} if same else cfgs
                rec = dict(gemm=name, fp8=fp8, M=M, floor_us=p.floor_bytes() / (args.read_bw * 1e3),
                           old_cfg=cfg_name(cfgs["old"]), new_cfg=cfg_name(cfgs["new"]), changed=not same)
                for label, c in variants.items():
                    p.out[0].fill_(float("nan"))
                    p.launch_fns(c)[0]()
                    rec[f"{label}_relerr"] = relerr(p.out[0], want)
                runs = {k: [] for k in variants}
                for _ in range(args.rounds if not same else 2):
                    for label, c in variants.items():
                        runs[label].append(_try_time(lambda c=c: p.launch_fns(c), args.reps)[0])
                for label, vals in runs.items():
                    rec[f"{label}_runs"] = vals
                    rec[f"{label}_us"], rec[f"{label}_min"], rec[f"{label}_max"] = _spread(vals)
                if same:
                    rec.update(new_us=rec["old_us"], new_min=rec["old_min"], new_max=rec["old_max"],
                               new_relerr=rec["old_relerr"])
                res["gemm"].append(rec)
                save(res)
                print(f"check {name:10s} {'fp8 ' if fp8 else 'bf16'} M={M:<4d} floor {rec['floor_us']:7.2f} "
                      f"old {rec['old_cfg']:22s} {_f(rec['old_us'], 7, 2)} [{_f(rec['old_min'], 6, 2)}-{_f(rec['old_max'], 6, 2)}] "
                      + ("(unchanged)" if same else
                         f"new {rec['new_cfg']:22s} {_f(rec['new_us'], 7, 2)} [{_f(rec['new_min'], 6, 2)}-{_f(rec['new_max'], 6, 2)}]")
                      + f" {100 * rec['floor_us'] / rec['new_us']:.1f}% err {rec['new_relerr']:.1e}", flush=True)
                del p
            del weights
            if device == "cuda":
                torch.cuda.empty_cache()
    for layer, fp8, M in args.check_layers:
        n1, n2 = LAYERS[layer]
        ws = (make_weights(*_enk(n1), fp8, device, seed=1), make_weights(*_enk(n2), fp8, device, seed=2))
        lp = LayerProblem(layer, M, fp8, device, ws, rot=args.layer_rot)
        want = _layer_reference(lp, 0)
        rec = dict(layer=layer, fp8=fp8, M=M, floor_us=lp.floor_bytes() / (args.read_bw * 1e3))
        tabs = {"old": old_table, "new": new_table}

        def fac(label):
            _install_table(tabs[label])
            moe.GEMM_DEFAULTS.update(OLD_FLAGS if label == "old" else new_flags)
            return lp.fused_fns()
        runs = {"old": [], "new": []}
        for label in runs:
            fac(label)[0]()
            rec[f"{label}_relerr"] = relerr(lp.out[0], want)
        for _ in range(args.rounds):
            for label in runs:
                runs[label].append(_try_time(lambda label=label: fac(label), args.reps)[0])
        for label, vals in runs.items():
            rec[f"{label}_runs"] = vals
            rec[f"{label}_us"], rec[f"{label}_min"], rec[f"{label}_max"] = _spread(vals)
        res["layer"].append(rec)
        save(res)
        print(f"check layer {layer} {'fp8 ' if fp8 else 'bf16'} M={M}: old {_f(rec['old_us'], 7, 2)} "
              f"[{_f(rec['old_min'], 6, 2)}-{_f(rec['old_max'], 6, 2)}] new {_f(rec['new_us'], 7, 2)} "
              f"[{_f(rec['new_min'], 6, 2)}-{_f(rec['new_max'], 6, 2)}] err old {rec['old_relerr']:.1e} "
              f"new {rec['new_relerr']:.1e}", flush=True)
        del lp, ws
        if device == "cuda":
            torch.cuda.empty_cache()
    _install_table(new_table)
    moe.GEMM_DEFAULTS.update(new_flags)
    return res


def moe_shape_class(name, fp8):
    E, topk, N, K = GEMMS[name]
    return f"E{E}_N{N}_K{K}_top{topk}_{'fp8' if fp8 else 'bf16'}"


def bench(device, ms, precisions, args, table, save=lambda res: None):
    if args.workers > 0 and device == "cuda":
        t0 = time.time()
        jobs = table_jobs(table, precisions)
        errs = precompile(jobs, args.workers, device)
        print(f"precompiled {len(errs)} table configs in {time.time() - t0:.1f}s "
              f"({sum(e is not None for e in errs.values())} failed)", flush=True)
        t0 = time.time()
        vjobs = {(n, fp8, M): {"vllm": (vllm_own_config(n, M, fp8)[0], None)}
                 for n in ("mixtral_w1", "qwen3_w1") for fp8 in precisions for M in ms}
        verrs = precompile_vllm(vjobs, args.workers, device, per_job=1)
        print(f"precompiled {len(verrs)} vLLM peer variants in {time.time() - t0:.1f}s "
              f"({sum(e is not None for e in verrs.values())} failed)", flush=True)
    gpu_warmup(device)
    bw, read_bw = copy_bandwidth(device)
    args.read_bw = read_bw
    print(f"copy bandwidth {bw:.0f} GB/s (read+write), read {read_bw:.0f} GB/s", flush=True)
    res = {"copy_bandwidth_GBps": bw, "read_bandwidth_GBps": read_bw, "floor_basis": "read", "gemm": [], "layer": [],
           "method": f"CUDA-graph replays, {args.rot} routings per graph (layer: {args.layer_rot}), "
                     f"median of {args.reps} replays, each variant timed twice interleaved, best kept"}
    tol = 2e-2
    for name in ("mixtral_w1", "qwen3_w1"):
        for fp8 in precisions:
            E, topk, N, K = GEMMS[name]
            weights = make_weights(E, N, K, fp8, device)
            for M in ms:
                p = GemmProblem(name, M, fp8, device, weights=weights, rot=args.rot)
                want = p.reference(0)
                entry = lookup_entry(name, fp8, M, table)
                rec = dict(gemm=name, fp8=fp8, M=M, floor_us=p.floor_bytes() / (read_bw * 1e3))
                auto_cfg = moe.get_config(E, N, K, topk, M, FP8 if fp8 else torch.bfloat16)
                variants = {"auto": auto_cfg}
                if entry:
                    for o in ("swap", "noswap"):
                        if o in entry:
                            variants[o] = dict(entry[o], SWAP_AB=o == "swap")
                factories = {label: (lambda cfg=cfg: p.launch_fns(cfg)) for label, cfg in variants.items()}
                vcfg, vsrc = vllm_own_config(name, M, fp8)
                rec["vllm_cfg"], rec["vllm_cfg_source"] = vcfg, vsrc
                factories["vllm"] = lambda vcfg=vcfg: p.vllm_fns(vcfg)
                factories["loop"] = lambda: [peer_loop_w1(p, i) for i in range(len(p.ids))]
                factories["grouped_mm"] = lambda: [peer_grouped_w1(p, i) for i in range(len(p.ids))]
                for label, cfg in variants.items():
                    rec[f"{label}_cfg"] = cfg
                for label, factory in factories.items():  # correctness of each, outputs poisoned first
                    p.out[0].fill_(float("nan"))
                    try:
                        factory()[0]()
                        rec[f"{label}_relerr"] = relerr(p.out[0], want)
                    except Exception as exc:  # noqa: BLE001
                        rec[f"{label}_error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
                for label, (us, err) in time_variants(factories, args.reps).items():
                    rec[f"{label}_us"] = us
                    if err:
                        rec[f"{label}_error"] = err
                res["gemm"].append(rec)
                save(res)
                print(_fmt_gemm(rec), flush=True)
                del p
            del weights
    for layer in ("mixtral", "qwen3"):
        for fp8 in precisions:
            n1, n2 = LAYERS[layer]
            ws = (make_weights(*_enk(n1), fp8, device, seed=1), make_weights(*_enk(n2), fp8, device, seed=2))
            for M in args.layer_ms:
                lp = LayerProblem(layer, M, fp8, device, ws, rot=args.layer_rot)
                rec = dict(layer=layer, fp8=fp8, M=M, floor_us=lp.floor_bytes() / (read_bw * 1e3))
                want = _layer_reference(lp, 0)
                factories = {"fused": lp.fused_fns, "loop": lp.loop_fns, "grouped_mm": lp.grouped_fns}
                for label, factory in factories.items():
                    lp.out[0] = None
                    try:
                        factory()[0]()
                        rec[f"{label}_relerr"] = relerr(lp.out[0], want)
                    except Exception as exc:  # noqa: BLE001
                        rec[f"{label}_error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
                for label, (us, err) in time_variants(factories, args.reps).items():
                    rec[f"{label}_us"] = us
                    if err:
                        rec[f"{label}_error"] = err
                res["layer"].append(rec)
                save(res)
                print(_fmt_layer(rec), flush=True)
                del lp
            del ws
            if device == "cuda":
                torch.cuda.empty_cache()
    if args.extras:
        l2_warm(device, precisions, args, res, save)
        if True in precisions:
            layer_breakdown(device, args, res, save)
    return res


def _enk(name):
    E, topk, N, K = GEMMS[name]
    return E, N, K


def _layer_reference(lp, i):
    from importlib import import_module
    fused_moe_reference = import_module(moe.__package__ + ".moe_reference").fused_moe_reference
    extra = dict(w1_scale=lp.s1, w2_scale=lp.s2) if lp.fp8 else {}
    ids = lp.ids[i]
    # Loop over the touched experts only (the reference loops over slots: fine for these sizes).
    return fused_moe_reference(lp.x[i], lp.w1, lp.w2, lp.tw[i], ids, dtype=torch.float32, **extra)


def _f(v, w=7, d=1):
    return f"{v:{w}.{d}f}" if isinstance(v, (int, float)) and v is not None else f"{'-':>{w}}"


def _fmt_gemm(r):
    best = r.get("auto_us")
    pct = 100 * r["floor_us"] / best if best else None
    return (f"{r['gemm']:11s} {'fp8 ' if r['fp8'] else 'bf16'} M={r['M']:<4d} floor {_f(r['floor_us'])} "
            f"auto {_f(r.get('auto_us'))} ({_f(pct, 5, 0)}%) swap {_f(r.get('swap_us'))} "
            f"noswap {_f(r.get('noswap_us'))} loop {_f(r.get('loop_us'))} grouped_mm {_f(r.get('grouped_mm_us'))}")


def _fmt_layer(r):
    pct = 100 * r["floor_us"] / r["fused_us"] if r.get("fused_us") else None
    return (f"layer {r['layer']:8s} {'fp8 ' if r['fp8'] else 'bf16'} M={r['M']:<4d} floor {_f(r['floor_us'])} "
            f"fused {_f(r.get('fused_us'))} ({_f(pct, 5, 0)}%) loop {_f(r.get('loop_us'))} "
            f"grouped_mm {_f(r.get('grouped_mm_us'))}  err {r.get('fused_relerr')}")


def machine_info(device):
    import triton
    info = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                python=platform.python_version(), torch=torch.__version__, triton=triton.__version__,
                host=platform.node())
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
        info["sm_count"] = torch.cuda.get_device_properties(0).multi_processor_count
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--ms", default=",".join(map(str, MS)))
    ap.add_argument("--layer-ms", default=",".join(map(str, MS)))
    ap.add_argument("--precisions", default="bf16,fp8")
    ap.add_argument("--gemms", default="qwen3_w1,qwen3_w2,mixtral_w1,mixtral_w2")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rot", type=int, default=ROT)
    ap.add_argument("--layer-rot", type=int, default=8)
    ap.add_argument("--sweep-rot", type=int, default=8)
    ap.add_argument("--sweep-reps", type=int, default=5)
    ap.add_argument("--workers", type=int, default=max(1, min(15, (os.cpu_count() or 2) - 1)),
                    help="processes that compile the sweep's variants in parallel first (0: none)")
    ap.add_argument("--tiny", action="store_true", help="CPU smoke test of this script (tiny shapes)")
    ap.add_argument("--report", metavar="JSON", help="print the markdown tables of a moe_bench.json and exit")
    ap.add_argument("--no-extras", dest="extras", action="store_false",
                    help="skip the L2-warm comparison and the per-piece layer breakdown")
    ap.add_argument("--vllm", action="store_true",
                    help="vLLM 0.33.0's fused_moe_kernel (from its wheel) beside ours, HBM-cold and L2-warm")
    ap.add_argument("--vllm-cases", default=",".join(f"{n}:{m}" for n, _, m in VLLM_CASES),
                    help="FP8 w1 cases of --vllm, e.g. qwen3_w1:1,mixtral_w1:256")
    ap.add_argument("--vllm-bm64", action="store_true",
                    help="--vllm: also vLLM's kernel with BLOCK_M 64 and no swap (wgmma), outside the spec's grid")
    ap.add_argument("--read-ms", default="1", help="--read-ceiling: the M values whose expert sets are read")
    ap.add_argument("--read-ceiling", action="store_true",
                    help="time a plain read of the 8 experts (25 MB) a Qwen3 w1 M=1 launch touches")
    ap.add_argument("--tune", action="store_true",
                    help="targeted sweep of the FP8 buckets under 90%% of the floor; --bench then uses the result")
    ap.add_argument("--table", metavar="JSON", help="with --bench: use the 'table' of this JSON (e.g. a tune file)")
    ap.add_argument("--report-peer", metavar="JSON", help="print the tables of a moe_peer JSON and exit")
    ap.add_argument("--report-tune", metavar="JSON", help="with --report-peer: also a moe_tune JSON")
    ap.add_argument("--tag", default="", help="suffix of the output file names, e.g. _v4")
    ap.add_argument("--pdl-ab", action="store_true",
                    help="the whole layer (Qwen3, Mixtral; --precisions; --layer-ms) and the Qwen3 FP8 w1 "
                         "GEMM at M = 1, 4 with the --pdl-modes, interleaved; writes moe_pdl{--tag}.json")
    ap.add_argument("--pdl-modes", default="0,1,2", help="--pdl-ab: the modes compared (moe.PDL's values)")
    ap.add_argument("--pdl-all-gemms", action="store_true",
                    help="--pdl-ab: the w1 GEMM alone at every --layer-ms of both shapes and --precisions")
    ap.add_argument("--rounds", type=int, default=3, help="--pdl-ab: interleaved rounds per case")
    ap.add_argument("--report-pdl", metavar="JSON", help="print the table of a moe_pdl JSON and exit")
    ap.add_argument("--check-old", metavar="JSON",
                    help="time every w1 row with this JSON's 'table' (old) and the installed table (new, or "
                         "--table), interleaved in --rounds rounds; writes moe_check{--tag}.json")
    ap.add_argument("--report-check", metavar="JSON", help="print the table of a moe_check JSON and exit")
    ap.add_argument("--check-layers", default="",
                    help="--check-old: layer cases too, e.g. qwen3:fp8:4,mixtral:fp8:256")
    args = ap.parse_args(argv)
    if args.report:
        report(args.report)
        return
    if args.report_peer:
        report_peer(args.report_peer, args.report_tune)
        return
    if args.report_pdl:
        report_pdl(args.report_pdl)
        return
    if args.report_check:
        report_check(args.report_check)
        return
    device = "cuda" if torch.cuda.is_available() else "cpu"
    ms = [int(v) for v in args.ms.split(",")]
    args.layer_ms = [int(v) for v in args.layer_ms.split(",")]
    args.read_ms = [int(v) for v in args.read_ms.split(",")]
    args.vllm_cases = [(c.split(":")[0], True, int(c.split(":")[1])) for c in args.vllm_cases.split(",")]
    precisions = [p == "fp8" for p in args.precisions.split(",")]
    if args.tiny:
        GEMMS.update({"mixtral_w1": (8, 2, 64, 64), "mixtral_w2": (8, 2, 64, 32),
                      "qwen3_w1": (16, 4, 64, 32), "qwen3_w2": (16, 4, 32, 32)})
    os.makedirs(args.out, exist_ok=True)
    info = machine_info(device)
    table = None
    if args.sweep:
        def save_rows(rows):
            with open(os.path.join(args.out, "moe_sweep_partial.json"), "w") as fh:
                json.dump(dict(machine=info, rows=rows), fh, default=str)

        rows, errors, compiled = run_sweep(device, args.gemms.split(","), ms, precisions, args, save_rows)
        best = best_configs(rows, tol=2e-2)
        table = table_from(best)
        bad = [r for r in rows if "us" in r and not r["relerr"] < 2e-2]
        summary = []
        for (name, fp8, M), d in sorted(best.items()):
            s, n = d.get("swap"), d.get("noswap")
            summary.append(dict(gemm=name, fp8=fp8, M=M, swap_us=s and s["us"], swap_cfg=s and s["config"],
                                noswap_us=n and n["us"], noswap_cfg=n and n["config"]))
            print(f"{name:11s} {'fp8 ' if fp8 else 'bf16'} M={M:<4d} swap {_f(s and s['us'])} "
                  f"{s and s['config']}  noswap {_f(n and n['us'])} {n and n['config']}")
        out = dict(machine=info, rows=rows, invalid={f"{k[0]}|{int(k[1])}|{k[2]}": v for k, v in errors.items() if v},
                   compiled_variants_in_timing_process=compiled, wrong=bad, best=summary, table=table)
        with open(os.path.join(args.out, "moe_sweep.json"), "w") as fh:
            json.dump(out, fh, indent=1, default=str)
        print(f"sweep: {len(rows)} timings, {len(bad)} wrong, {compiled} compiles in the timing process")
    def dump(fname, obj):
        with open(os.path.join(args.out, fname + args.tag + ".json"), "w") as fh:
            json.dump(dict(obj, machine=info, vllm_peer=vllm_peer_source()), fh, indent=1, default=str)

    args.pdl_modes = [int(v) for v in args.pdl_modes.split(",")]
    args.ms_list, args.precisions_list = ms, precisions
    args.check_layers = [(c.split(":")[0], c.split(":")[1] == "fp8", int(c.split(":")[2]))
                         for c in args.check_layers.split(",") if c]
    if args.check_old:
        gpu_warmup(device)
        copy_bw, args.read_bw = copy_bandwidth(device)
        if args.read_bw != args.read_bw:  # CPU smoke test: no bandwidth
            args.read_bw = 1.0
        print(f"copy bandwidth {copy_bw:.0f} GB/s (read+write), read {args.read_bw:.0f} GB/s", flush=True)
        import copy
        from importlib import import_module
        cur = copy.deepcopy(import_module(moe.__package__ + ".moe_configs").TABLE)
        if args.table:
            cur = {cls: {int(m): e for m, e in b.items()} for cls, b in json.load(open(args.table))["table"].items()}
        base = dict(copy_bandwidth_GBps=copy_bw, read_bandwidth_GBps=args.read_bw,
                    method=f"CUDA-graph replays, {args.rot} routings per graph (HBM-cold), median of {args.reps} "
                           f"replays; checks in {args.rounds} interleaved rounds (median, min, max)")
        old = {cls: {int(m): e for m, e in b.items()} for cls, b in json.load(open(args.check_old))["table"].items()}
        chk = dict(base, old_table_file=args.check_old, new_table=cur)
        chk.update(check_tables(device, args, old, cur, lambda r: dump("moe_check", dict(chk, **r))))
        dump("moe_check", chk)
    if args.vllm or args.read_ceiling or args.tune:
        gpu_warmup(device)
        copy_bw, args.read_bw = copy_bandwidth(device)
        if args.read_bw != args.read_bw:  # CPU smoke test: no bandwidth
            args.read_bw = 1.0
        print(f"copy bandwidth {copy_bw:.0f} GB/s (read+write), read {args.read_bw:.0f} GB/s", flush=True)
        study = dict(copy_bandwidth_GBps=copy_bw, read_bandwidth_GBps=args.read_bw,
                     method=f"CUDA-graph replays; cold: {args.rot} routings per graph; warm: one routing, "
                            f"8 launches per graph; median of {args.reps} replays, every variant timed twice "
                            f"interleaved, best kept")
        if args.vllm:
            from importlib import import_module
            cur = table if table is not None else import_module(moe.__package__ + ".moe_configs").TABLE
            study["vllm"] = vllm_study(device, args, cur, lambda r: dump("moe_peer", dict(study, vllm=r)))
            dump("moe_peer", study)
        if args.read_ceiling:
            study["read_ceiling"] = read_ceiling(device, args, lambda r: dump("moe_peer", dict(study, read_ceiling=r)))
            dump("moe_peer", study)
        if args.tune:
            from importlib import import_module
            cur = table if table is not None else import_module(moe.__package__ + ".moe_configs").TABLE
            table, recs = tune(device, args, cur, lambda r: dump("moe_tune", r))
            dump("moe_tune", dict(tune=recs, table=table))
            _install_table(table)
    if args.pdl_ab:
        pdl_res = pdl_ab(device, args, precisions, lambda r: dump("moe_pdl", r))
        if pdl_res is not None:
            dump("moe_pdl", pdl_res)
    if args.bench:
        if args.table:
            table = json.load(open(args.table))["table"]
            _install_table(table)
        if table is None:
            from importlib import import_module
            table = import_module(moe.__package__ + ".moe_configs").TABLE
        elif table:
            _install_table(table)
        def save(res):
            with open(os.path.join(args.out, "moe_bench" + args.tag + ".json"), "w") as fh:
                json.dump(dict(res, machine=info, table=table, vllm_peer=vllm_peer_source()), fh, indent=1,
                      default=str)

        save(bench(device, ms, precisions, args, table, save))


def _ratio(a, b, fmt="{:.2f}x"):
    return fmt.format(a / b) if a and b and a == a and b == b else "-"


def report(path):
    """Markdown tables from a moe_bench.json; % of the HBM floor against the read bandwidth measured in
    the same run (the copy figure is printed too)."""
    b = json.load(open(path))
    bw, copy_bw = b["read_bandwidth_GBps"], b["copy_bandwidth_GBps"]
    # Files written before "floor_basis" computed floor_us with the copy bandwidth: rescale to the read one.
    k = 1.0 if b.get("floor_basis") == "read" else copy_bw / bw
    print(f"Machine: {b['machine'].get('gpu')}, torch {b['machine']['torch']}, triton {b['machine']['triton']}, "
          f"{b['machine']['date']}. Read bandwidth {bw:.0f} GB/s, copy {copy_bw:.0f} GB/s (read+write). "
          f"{b['method']}.\n")
    has_vllm = any("vllm_us" in r for r in b["gemm"])
    print("| GEMM | prec | M | floor µs | auto µs | % floor | Swap-AB µs | no swap µs | swap gain | "
          + ("vLLM 0.33 kernel µs | auto vs vLLM | " if has_vllm else "")
          + "per-expert loop µs | grouped_mm µs | auto vs grouped_mm |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if has_vllm else ""))
    for r in b["gemm"]:
        fl = r["floor_us"] * k
        a, sw, ns = r.get("auto_us"), r.get("swap_us"), r.get("noswap_us")
        lp, gm, vl = r.get("loop_us"), r.get("grouped_mm_us"), r.get("vllm_us")
        vcol = f"{_f(vl) if vl else 'failed'} | {_ratio(vl, a)} | " if has_vllm else ""
        print(f"| {r['gemm']} | {'fp8' if r['fp8'] else 'bf16'} | {r['M']} | {fl:.1f} | {_f(a)} | "
              f"{_ratio(100 * fl, a, '{:.0f}%')} | {_f(sw)} | {_f(ns)} | {_ratio(ns, sw)} | " + vcol +
              f"{_f(lp) if lp else 'failed'} | {_f(gm) if gm else 'failed'} | {_ratio(gm, a)} |")
    print("\n| layer | prec | M | floor µs | fused µs | % floor | per-expert loop µs | grouped_mm µs | "
          "rel. err vs fp32 ref |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in b["layer"]:
        fl = r["floor_us"] * k
        f_ = r.get("fused_us")
        lp = r.get("loop_us")
        gm = r.get("grouped_mm_us")
        print(f"| {r['layer']} | {'fp8' if r['fp8'] else 'bf16'} | {r['M']} | {fl:.1f} | {_f(f_)} | "
              f"{_ratio(100 * fl, f_, '{:.0f}%')} | {_f(lp) if lp else 'failed'} | {_f(gm) if gm else 'failed'} | "
              f"{r.get('fused_relerr', float('nan')):.1e} |")


def report_peer(path, tune_path=None):
    """Markdown tables of a moe_peer JSON (vLLM's kernel beside ours, both methods; the read ceiling) and,
    if given, of a moe_tune JSON."""
    b = json.load(open(path))
    m = b["machine"]
    print(f"Machine: {m.get('gpu')}, torch {m['torch']}, triton {m['triton']}, {m['date']}. Read bandwidth "
          f"{b['read_bandwidth_GBps']:.0f} GB/s. {b['method']}.\n")
    if b.get("vllm"):
        print("| GEMM | prec | M | method | floor µs | ours auto | ours Swap-AB | ours no swap | ours swap gain | "
              "vLLM own config | vLLM best Swap-AB (config) | vLLM best no swap (config) | vLLM swap gain | "
              "ours auto vs vLLM best |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in b["vllm"]:
            for meth in ("cold", "warm"):
                s = r["summary"][meth]
                vb = min([v for v in (s["vllm_best_swap"], s["vllm_best_noswap"]) if v] or [None]) \
                    if (s["vllm_best_swap"] or s["vllm_best_noswap"]) else None
                fl = r.get("floor_us_cold")
                print(f"| {r['gemm']} | {'fp8' if r['fp8'] else 'bf16'} | {r['M']} | "
                      f"{'HBM-cold' if meth == 'cold' else 'L2-warm'} | {_f(fl) if meth == 'cold' else '-'} | "
                      f"{_f(s['ours_auto'])} | {_f(s['ours_swap'])} | {_f(s['ours_noswap'])} | "
                      f"{_ratio(s['ours_noswap'], s['ours_swap'])} | {_f(s['vllm_own'])} | "
                      f"{_f(s['vllm_best_swap'])} ({s['vllm_best_swap_cfg']}) | "
                      f"{_f(s['vllm_best_noswap'])} ({s['vllm_best_noswap_cfg']}) | "
                      f"{_ratio(s['vllm_best_noswap'], s['vllm_best_swap'])} | {_ratio(vb, s['ours_auto'])} |"
                      + (f" BLOCK_M 64 no swap: {_f(s['vllm_best_noswap_bm64'])} ({s['vllm_best_noswap_bm64_cfg']}), "
                         f"swap gain over it {_ratio(s['vllm_best_noswap_bm64'], s['vllm_best_swap'])} |"
                         if s.get("vllm_best_noswap_bm64") else ""))
        wrong = {f"{r['gemm']} M={r['M']}": r["summary"]["wrong"] for r in b["vllm"] if r["summary"]["wrong"]}
        print(f"\nVariants failing the check (rel. err >= 2e-2 or error): {wrong or 'none'}")
        print("vLLM's own config per case: " + "; ".join(
            f"{r['gemm']} M={r['M']}: {r['vllm_own_cfg'][1]} {vcfg_name(r['vllm_own_cfg'][0], None)}" for r in b["vllm"]))
    if b.get("read_ceiling"):
        print("\n| plain read of the experts one Qwen3 w1 launch touches | MB | cold µs | cold GB/s | "
              "% of floor | warm µs |")
        print("|---|---|---|---|---|---|")
        for r in b["read_ceiling"]:
            print(f"| M={r.get('M', 1)}: {r['label']} | {r['bytes'] / 1e6:.1f} | {_f(r['cold_us'], 7, 2)} | "
                  f"{_f(r['cold_GBps'], 5, 0)} | "
                  f"{_ratio(100 * r['floor_us'], r['cold_us'], '{:.0f}%')} | {_f(r['warm_us'], 7, 2)} |")
    if tune_path:
        t = json.load(open(tune_path))
        print("\n| tuned case | floor µs | table auto µs (before) | best µs | best config | table change |")
        print("|---|---|---|---|---|---|")
        for r in t["tune"]:
            print(f"| {r['gemm']} fp8 M={r['M']} | {r['floor_us']:.1f} | {_f(r['table_auto_us'])} | "
                  f"{_f(r['best_us'])} | {r['best']} | {r['changed'] or 'none (within 2%)'} |")


def report_check(path):
    """Markdown table of a moe_check JSON (--check-old): every w1 row and layer case with the old and the
    new table, median (min-max) µs over interleaved rounds."""
    ck = json.load(open(path))

    def rng(r, k):
        return f"{_f(r[k + '_us'], 6, 2)} ({_f(r[k + '_min'], 6, 2)}-{_f(r[k + '_max'], 6, 2)})"

    m = ck["machine"]
    print(f"Machine: {m.get('gpu')}, torch {m['torch']}, triton {m['triton']}, {m['date']}; read "
          f"{ck['read_bandwidth_GBps']:.0f} GB/s. Old: {ck['old_table_file']} with the optional GEMM flags off; "
          f"new: the installed table and flags. {ck['method']}.\n")
    print("| GEMM | prec | M | floor µs | old config | old µs | new config | new µs | new % floor | change |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in ck["gemm"]:
        print(f"| {r['gemm']} | {'fp8' if r['fp8'] else 'bf16'} | {r['M']} | {r['floor_us']:.2f} | {r['old_cfg']} | "
              f"{rng(r, 'old')} | {r['new_cfg']} | {rng(r, 'new')} | {100 * r['floor_us'] / r['new_us']:.1f}% | "
              f"{r['new_us'] - r['old_us']:+.2f} µs |")
    for r in ck["layer"]:
        print(f"| layer {r['layer']} | {'fp8' if r['fp8'] else 'bf16'} | {r['M']} | {r['floor_us']:.2f} | old table | "
              f"{rng(r, 'old')} | new table | {rng(r, 'new')} | {100 * r['floor_us'] / r['new_us']:.1f}% | "
              f"{r['new_us'] - r['old_us']:+.2f} µs |")


def _install_table(table):
    """Use a table measured in this run for the automatic choice (before it is committed)."""
    from importlib import import_module
    mod = import_module(moe.__package__ + ".moe_configs")
    mod.TABLE.clear()
    mod.TABLE.update({cls: {int(m): e for m, e in b.items()} for cls, b in table.items()})


if __name__ == "__main__":
    main()
