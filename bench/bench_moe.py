"""Benchmark of jitguard.kernels.moe on an H200: grouped GEMM (w1 / w2) and the full fused MoE layer.

Modes (combine freely):
  --sweep   time every candidate config of the grouped GEMM, both orientations, for the four GEMM shapes
            (Mixtral-8x7B and Qwen3-MoE, w1 and w2), bf16 and FP8, M in {1, 4, 16, 32, 64, 256}; check each
            against a float32 reference; write moe_sweep.json with the best config per orientation, the
            automatic choice, and the table for kernels/moe_configs.py.
  --bench   time the w1 GEMM (auto / Swap-AB forced / Swap-AB off, each with its best config) and the full
            layer against peers in the same run: a per-expert PyTorch loop (bf16 matmul, FP8 via
            torch._scaled_mm), torch._grouped_mm / torch._scaled_grouped_mm where present; report % of
            the HBM floor (touched experts' weights + activations + output over the copy bandwidth
            measured in this run). Writes moe_bench.json.

Timing: CUDA-graph replays; each graph holds R launches over R different routings (consecutive launches
touch different experts, so weights come from HBM, not L2); median of the replays, divided by R.
Usage: python bench/bench_moe.py --sweep --bench --out bench/results
"""
from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
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
    return f"{'S' if swap else 'N'}{c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']}w{c['num_warps']}s{c['num_stages']}"


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

    def launch_fns(self, cfg):
        al = self.aligned(cfg["BLOCK_M"])
        fns = []
        for i in range(len(self.ids)):
            sid, eid, _ = al[i]

            def f(i=i, sid=sid, eid=eid):
                moe.grouped_gemm(self.a[i], self.w, sid, eid, top_k=self.top_k_arg,
                                 num_valid_tokens=self.M * self.topk, config=cfg, out=self.out[i],
                                 topk_weights=self.tw[i] if self.is_w2 else None,
                                 a_scale=self.a_scale, w_scale=self.w_scale)
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

    def fused_fns(self, swap_ab=None):
        fns = []
        for i in range(len(self.ids)):
            def f(i=i):
                self.out[i] = moe.fused_moe(self.x[i], self.w1, self.w2, self.tw[i], self.ids[i],
                                            swap_ab=swap_ab, **self.extra)
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


def extra_configs():
    """Decode-latency candidates outside the first sweep (qwen3_w1 FP8, M = 1 and 4)."""
    out = []
    for bk, st in itertools.product((128, 256, 512), (2, 3, 4, 5, 6)):
        out.append({"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": bk, "num_warps": 4, "num_stages": st, "SWAP_AB": True})
    for st in (3, 4):
        out.append({"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 256, "num_warps": 8, "num_stages": st, "SWAP_AB": True})
    for bn, bk, st in itertools.product((16, 32), (128, 256, 512), (3, 4, 5)):
        out.append({"BLOCK_M": 16, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4, "num_stages": st, "SWAP_AB": False})
    return out


def extra_sweep(device, args, res, save):
    E, topk, N, K = GEMMS["qwen3_w1"]
    weights = make_weights(E, N, K, True, device)
    out = []
    for M in (1, 4):
        p = GemmProblem("qwen3_w1", M, True, device, weights=weights, rot=args.rot)
        want = p.reference(0)
        for c in extra_configs() + [moe.get_config(E, N, K, topk, M, FP8)]:
            p.out[0].fill_(float("nan"))
            us, err = _try_time(lambda: p.launch_fns(c), args.reps)
            rec = dict(M=M, config=cfg_name(c), us=us, error=err)
            if us is not None:
                rec["relerr"] = relerr(p.out[0], want)
            out.append(rec)
        best = sorted((r for r in out if r["M"] == M and r["us"] and r["relerr"] < 2e-2), key=lambda r: r["us"])[:3]
        print(f"extra sweep qwen3_w1 fp8 M={M}: " + ", ".join(f"{r['config']} {r['us']:.2f}" for r in best), flush=True)
    res["extra_sweep_qwen3_w1_fp8"] = out
    save(res)


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


def bench(device, ms, precisions, args, table, save=lambda res: None):
    if args.workers > 0 and device == "cuda":
        t0 = time.time()
        jobs = table_jobs(table, precisions)
        if args.extras and True in precisions:
            jobs[("qwen3_w1", True)] = jobs.get(("qwen3_w1", True), []) + extra_configs()
        errs = precompile(jobs, args.workers, device)
        print(f"precompiled {len(errs)} table configs in {time.time() - t0:.1f}s "
              f"({sum(e is not None for e in errs.values())} failed)", flush=True)
    gpu_warmup(device)
    bw, read_bw = copy_bandwidth(device)
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
        if True in precisions:
            extra_sweep(device, args, res, save)
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
    args = ap.parse_args(argv)
    if args.report:
        report(args.report)
        return
    device = "cuda" if torch.cuda.is_available() else "cpu"
    ms = [int(v) for v in args.ms.split(",")]
    args.layer_ms = [int(v) for v in args.layer_ms.split(",")]
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
    if args.bench:
        if table is None:
            from importlib import import_module
            table = import_module(moe.__package__ + ".moe_configs").TABLE
        elif table:
            _install_table(table)
        def save(res):
            with open(os.path.join(args.out, "moe_bench.json"), "w") as fh:
                json.dump(dict(res, machine=info, table=table), fh, indent=1, default=str)

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
    print("| GEMM | prec | M | floor µs | auto µs | % floor | Swap-AB µs | no swap µs | swap gain | "
          "per-expert loop µs | grouped_mm µs | auto vs grouped_mm |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in b["gemm"]:
        fl = r["floor_us"] * k
        a, sw, ns = r.get("auto_us"), r.get("swap_us"), r.get("noswap_us")
        lp, gm = r.get("loop_us"), r.get("grouped_mm_us")
        print(f"| {r['gemm']} | {'fp8' if r['fp8'] else 'bf16'} | {r['M']} | {fl:.1f} | {_f(a)} | "
              f"{_ratio(100 * fl, a, '{:.0f}%')} | {_f(sw)} | {_f(ns)} | {_ratio(ns, sw)} | "
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


def _install_table(table):
    """Use a table measured in this run for the automatic choice (before it is committed)."""
    from importlib import import_module
    mod = import_module(moe.__package__ + ".moe_configs")
    mod.TABLE.clear()
    mod.TABLE.update({cls: {int(m): e for m, e in b.items()} for cls, b in table.items()})


if __name__ == "__main__":
    main()
