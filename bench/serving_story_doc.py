"""Write docs/serving_story.md from bench/serving_story.py's results: every output block is pasted
verbatim from the run's transcript.txt, every figure read from its serving_story.json.

    python bench/serving_story_doc.py MAIN_RESULTS_DIR [CPU_STAND_IN_RESULTS_DIR] OUT.md
    python bench/serving_story_doc.py bench/results/serving_story bench/results/serving_story_standin docs/serving_story.md
"""
import json, pathlib, re, sys

main_dir = pathlib.Path(sys.argv[1])       # the run the story is told with
cpu_dir = pathlib.Path(sys.argv[2]) if len(sys.argv) > 3 else None  # the CPU stand-in run (optional appendix)
out = pathlib.Path(sys.argv[-1])

def load(d):
    doc = json.loads((d / "serving_story.json").read_text())
    tr = (d / "transcript.txt").read_text().splitlines()
    return doc, tr

def block(tr, prefix, nth=0):
    """The command starting with '$ prefix' and its output (up to the blank line after [time])."""
    hits = [i for i, l in enumerate(tr) if l.startswith("$ " + prefix)]
    i = hits[nth]
    j = i + 1
    while j < len(tr) and not (tr[j].startswith("[") and tr[j].endswith(" s]")):
        j += 1
    return "\n".join(tr[i:j + 1])

def section7(tr):
    i = tr.index("## 7. What each side found, and the latencies")
    return "\n".join(l for l in tr[i + 1:] if l is not None).rstrip()

def fence(t):
    return "```\n" + t.rstrip() + "\n```"

doc, tr = load(main_dir)
m, v = doc["machine"], doc["versions"]
stand_in = doc["stand_in"]
runs = doc["runs"]
b, a = runs["before_cold"], runs["after_cold"]
where = (f"{m.get('gpu')} (Triton {v['triton']}, torch {v['torch']}, Python {m['python']}), {doc['date']}"
         if not stand_in else
         f"a CPU-only machine with the stand-in sm_90 driver (Triton {v['triton']}, torch {v['torch']}, "
         f"Python {m['python']}), {doc['date']}")
rel = main_dir.as_posix()
label = "" if not stand_in else (
    "\n> **This is the CPU stand-in run**: Triton's real JIT path compiles real sm_90 code with the "
    "bundled ptxas and every compile hook fires, but launches are skipped (no GPU). Compile stalls, "
    "variant counts, the report and the fix are real; the latency of a step without a compile is host "
    "overhead only. The H200 run replaces it when it is committed under "
    "`bench/results/serving_story/`.\n")

same = doc.get("same_outputs_as_before_cold") or {}
same_txt = ""
if same:
    same_txt = ("\n- Every output byte (sha256 of each sampled step's outputs, taken after timing the step) is "
                "identical before and after the fix, and with the shipped kernels: " + ", ".join(
                    f"{k} {v['identical']}/{v['steps_compared']} steps" for k, v in same.items()) + ".")
bw, aw = runs["before_warm"], runs["after_warm"]
stall_steps = [c["step"] for c in b["compile_steps"] if c["step"] > 0]
headline = (
    f"**In short{' (CPU stand-in run)' if stand_in else ''}:** on {'the CPU stand-in' if stand_in else m.get('gpu')}, "
    f"the uncorrected kernels compiled {b['compiles_after_first_step']} new variants mid-traffic, stalling "
    f"{len(stall_steps)} steps for {b['stall_ms_after_first_step']:.0f} ms in all (slowest step "
    f"{b['latency_ms']['max']:.0f} ms against a median of {b['latency_ms']['p50']:.2f} ms; p99 "
    f"{b['latency_ms']['p99']:.2f} ms). `jitguard report` named the arguments ("
    + ", ".join(f"`{r['param']}`" for r in doc["static_vs_runtime"] if r["runtime"])
    + f") and the value classes they moved between; `jitguard fix --from-trace` wrote the "
    f"`do_not_specialize` lists; the same loop then compiled nothing after its first step, cold or warm "
    f"(slowest step {a['latency_ms']['max']:.2f} ms, p99 {a['latency_ms']['p99']:.2f} ms)"
    + ("" if stand_in or not doc.get("same_outputs_as_before_cold") else ", with byte-identical outputs")
    + f". With a warm Triton cache the twins still loaded {bw['compiles_after_first_step']} variants mid-traffic "
    f"(slowest step {bw['latency_ms']['max']:.1f} ms; after the fix {aw['latency_ms']['max']:.1f} ms).")
so, ro = doc["static_only"], doc["runtime_only"]
parts = ["What the static scan of the untouched twins (`jitguard scan app`, run first) reported:", "",
         fence(block(tr, "jitguard scan app", 0)), ""]
if so == ["moe_gemm_kernel_uncorrected.EM"]:
    parts.append("Only the scan flagged `EM`, the padded slot count of the MoE GEMM: it varies per call, "
                 "but `moe_align_block_size` always rounds it up to a multiple of BLOCK_M = 16, so at run time "
                 "it never left its value class and never recompiled. The fix adds it anyway (scan and trace "
                 "findings are merged); it feeds only a bounds check, so that costs nothing.")
elif so:
    parts.append("Only the scan flagged: " + ", ".join(f"`{x}`" for x in so) + ".")
if ro:
    parts.append("Only the runtime trace found: " + ", ".join(f"`{x}`" for x in ro) + ".")
else:
    parts.append("Every parameter that recompiled at run time was also found by the scan: for these "
                 "twins the runtime trace found nothing the scan missed. What the trace adds is the "
                 "evidence: the step, the stall and the value class each parameter moved between.")
scan_vs_runtime = "\n".join(x if x == "" or x.startswith("```") or x.endswith(":") else x + "\n" for x in parts)
text = f"""# The serving story: latency spikes -> `jitguard report` -> `jitguard fix` -> no recompiles

A serving loop calls the same kernels every step with a different number of tokens. If a kernel
specializes on an integer that follows the batch size, Triton compiles a new variant the first time
the batch size falls into a new value class (`== 1`, `% 16 == 0`, anything else) -- in the middle of
traffic, while every request in the batch waits. This page runs that loop on the project's own
kernels, lets jitguard say which argument did it, fixes it with `jitguard fix`, and runs it again.

{headline}

Everything below is pasted from one run of `python bench/serving_story.py` on {where}.
Files: `{rel}/` (`transcript.txt` is the whole run; `serving_story.json` has every figure,
each step's latency, the machine and the versions).
{label}
## The loop

`examples/serving_loop.py` is one transformer layer's worth of two kernels per step: the fused
inverse-RoPE + FP8 quantization kernel (o: [T, 8, 512] bf16) and the mixture-of-experts grouped
GEMM (8 experts, top-2, [T, 2048] x [1024, 2048] per expert, bf16, one fixed Swap-AB config), with
the slots sorted by expert by `moe_align_block_size`. The batch sizes T come from a seeded
simulation of a server with chunked prefill, starting empty: Poisson arrivals, log-normal prompts
(median 700 tokens), exponential outputs (mean 200), a budget of 8192 tokens a step. Of
{doc['stream']['steps']} steps, {doc['stream']['decode_steps']} are decode batches
({doc['stream']['decode_num_tokens']['min']}..{doc['stream']['decode_num_tokens']['max']} tokens) and
{doc['stream']['prefill_steps']} carry prefill chunks (up to {doc['stream']['prefill_num_tokens']['max']} tokens).
A step's latency is host wall time from its start until the GPU is done (JIT compiles included);
the loop also counts, from Triton's own in-memory caches and without jitguard, the steps in which a
kernel gained a compiled variant. `--kernels` picks where the kernels come from: the uncorrected
twins in `fixtures/`, a copy of them, or `corrected` (`jitguard.kernels`).

The story script works in a fresh directory: `app/` is a copy of `fixtures/rope_fp8_uncorrected.py`
and `fixtures/moe_uncorrected.py` (the "application"), `serving_loop.py` a copy of the loop.

## 1. The loop stalls mid-traffic

From a cold Triton cache, under `jitguard run` (warn mode: a warning per recompile, the summary at exit):

{fence(block(tr, "TRITON_CACHE_DIR=cache-before jitguard run --mode warn"))}

The first step compiles every kernel ({b['first_step_ms']:.0f} ms). Then, with the cache warm in
memory, {b['compiles_after_first_step']} more variants are compiled at steps
{", ".join(str(c['step']) for c in b['compile_steps'] if c['step'] > 0)}: those steps took
{b['stall_ms_after_first_step']:.0f} ms together, against a median step of {b['latency_ms']['p50']:.3f} ms.

## 2. `jitguard report` says which argument, where, and the fix

{fence(block(tr, "jitguard report trace_before.json"))}

## 3. `jitguard fix --from-trace` edits the decorators

Without `--write` it prints the diff. The RoPE/FP8 fixes are marked unsafe because `num_tokens` and
`scale_stride` feed address arithmetic (dropping their divisibility by 16 can cost vectorized
stores); the shipped kernel `jitguard.kernels.rope_fp8` carries exactly this decorator and its
benchmark (`bench/bench_rope_fp8.py`) measures it, so here they are applied with `--unsafe-fixes`:

{fence(block(tr, "jitguard fix --from-trace trace_before.json app"))}

{fence(block(tr, "jitguard fix --from-trace trace_before.json --unsafe-fixes"))}

{fence(block(tr, "jitguard scan app", 1))}

## 4. The same loop on the fixed code: nothing compiles after the first step

{fence(block(tr, "TRITON_CACHE_DIR=cache-after jitguard run --mode warn"))}

## 5. The figures

Cold: a fresh `TRITON_CACHE_DIR`; warm: the same directory in a second process (a new variant is
then loaded from Triton's disk cache instead of compiled, which still stalls the step, less).
`corrected` is the same loop on the shipped kernels (`--kernels corrected`).

{fence(section7(tr))}

{scan_vs_runtime}
## Reading the numbers

- The stalled steps are about 1% of the {doc['stream']['steps'] - 1} steps after the first, so p99 sits at
  their edge; p99.9 and max show them in full. A longer run dilutes them in p99 but they do not go
  away: they hit the first minutes after every server start, and in a tensor-parallel job one rank's
  compile stalls every other rank at the next collective (`jitguard report DIR` shows those
  stragglers across ranks).
- With a warm Triton cache a new variant is loaded from disk instead of compiled: the stall is
  shorter but still there, and the count of variants added after the first step is the same.
- The first step compiles every kernel once, before and after the fix alike (here
  {b['first_step_ms']:.0f} ms and {a['first_step_ms']:.0f} ms: a cold process varies); the fix removes
  the compiles that came later.{same_txt}

## Run it yourself

```
python bench/serving_story.py                  # the whole story; results in bench/results/serving_story/
python examples/serving_loop.py                # the twins in fixtures/, timed per step
jitguard run --trace t.json -- python examples/serving_loop.py
jitguard report t.json
python examples/serving_loop.py --kernels corrected --json lat.json
python examples/serving_loop.py --device stand-in   # no GPU: real sm_90 compiles, launches skipped
```

`tests/test_serving_story.py` keeps the story true in CI (CPU, stand-in driver): it runs the same loop
on a copy of the twins over a fresh random stream under `jitguard.watch`, checks the variant counts and
the steps that added them against Triton's value classes of each step's ints, runs `jitguard fix
--from-trace --unsafe-fixes --write` on the copy, and checks that the loop on the fixed copy compiles
each kernel once, at the first step.
"""
text = text.replace("{scan_vs_runtime}", scan_vs_runtime).replace("{headline}", headline)
if cpu_dir is not None and cpu_dir != main_dir:
    cdoc, ctr = load(cpu_dir)
    cv = cdoc["versions"]
    i = ctr.index("## 7. What each side found, and the latencies")
    table = "\n".join(ctr[i + 1:])
    table = table[table.index("latency per step"):].rstrip()
    text += f"""
## The same story on a CPU (stand-in driver)

`python bench/serving_story.py --device stand-in` (the default without a GPU) runs the whole story
with Triton's real JIT path compiling real sm_90 code with the bundled ptxas, launches skipped
(Triton {cv['triton']}, torch {cv['torch']}, {cdoc['date']}; files in `{cpu_dir.as_posix()}/`).
Compile stalls, variant counts, the report and the fix are real; the latency of a step without a
compile is host overhead only.

{fence(table)}
"""
out.write_text(text.replace("{headline}", headline))
print("wrote", out)
