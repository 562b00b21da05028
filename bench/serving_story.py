"""The whole jitguard story on one machine: slow serving loop -> report -> fix -> no recompiles.

In a fresh work directory (the "application": a copy of fixtures/ in ``app/`` and of
examples/serving_loop.py), this runs, and prints as a transcript:

 1. ``jitguard scan app`` -- what the static scan finds in the uncorrected twins;
 2. the serving loop under ``jitguard run`` from a cold Triton cache, then again warm;
 3. ``jitguard report`` on the trace -- every recompile, the step it stalled, and why;
 4. ``jitguard fix --from-trace`` on ``app/`` (diff, then ``--write``), and ``jitguard scan`` again;
 5. the loop again from the fixed ``app/``, cold and warm: compiles after the first step must be 0;
 6. the shipped kernels (``--kernels corrected``) as the reference;
 7. which parameters the scan and the runtime trace each found, and a table of the latencies.

    python bench/serving_story.py [--out DIR] [--steps 300] [--device auto|cuda|stand-in]

Writes into DIR (default bench/results/serving_story): serving_story.json (machine, versions, date,
every figure of every run), transcript.txt, scan.txt, report_before.txt, report_after.txt, fix.txt,
trace_before.json, trace_after.json. Exit status 0 when the story holds (the fixed loop compiles
nothing after its first step and the twins did), 1 when it does not, 2 when a step failed.

On a machine without a CUDA GPU the loop runs on the stand-in driver (real sm_90 compiles through
Triton's JIT path, launches skipped): compile stalls and counts are real, step latencies without a
compile are host overhead only. The output says which it was.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
TWINS = ("rope_fp8_uncorrected.py", "moe_uncorrected.py")
OUT_FILES = ("serving_story.json", "transcript.txt", "scan.txt", "report_before.txt",
             "report_after.txt", "fix.txt", "trace_before.json", "trace_after.json")


class StepFailed(Exception):
    def __init__(self, message: str, loop: str | None = None):
        super().__init__(message)
        self.loop = loop  # the serving-loop run that failed, if it was one


class Story:
    def __init__(self, work: pathlib.Path, out: pathlib.Path, device: str, steps: int, seed: int,
                 moe: bool, timeout: float):
        self.work, self.out, self.device = work, out, device
        self.steps, self.seed, self.moe, self.timeout = steps, seed, moe, timeout
        self.transcript: list[str] = []
        self.runs: dict[str, dict] = {}
        self.commands: list[dict] = []

    # -- output ------------------------------------------------------------------------------
    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.transcript.append(text)
        with open(self.out / "transcript.txt", "a") as f:  # as it goes: a killed run keeps it
            f.write(text + "\n")

    def sh(self, shown: str, argv: list[str], *, env: dict | None = None, ok=(0,),
           save: str | None = None) -> str:
        """Run argv in the work directory, print ``$ shown`` and its output (stdout+stderr)."""
        self.say(f"$ {shown}")
        t0 = time.perf_counter()
        try:
            p = subprocess.run(argv, cwd=self.work, env={**os.environ, **(env or {})},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=self.timeout)
        except subprocess.TimeoutExpired as e:
            self.say((e.stdout or "") if isinstance(e.stdout, str) else "")
            raise StepFailed(f"timed out after {self.timeout:.0f} s: {shown}")
        wall = time.perf_counter() - t0
        text = p.stdout.rstrip("\n")
        if text:
            self.say(text)
        self.say(f"[exit {p.returncode}, {wall:.1f} s]" if p.returncode else f"[{wall:.1f} s]")
        self.say()
        self.commands.append({"command": shown, "exit": p.returncode, "wall_s": round(wall, 2)})
        if save:
            (self.out / save).write_text(text + "\n")
        if p.returncode not in ok:
            raise StepFailed(f"exit {p.returncode}: {shown}")
        return text

    # -- commands ----------------------------------------------------------------------------
    def jitguard(self, args: str, **kw) -> str:
        return self.sh(f"jitguard {args}", [sys.executable, "-m", "jitguard", *shlex.split(args)], **kw)

    def loop(self, name: str, kernels: str, cache: str, trace: str | None, mode: str = "warn") -> dict:
        lat = f"lat_{name}.json"
        loop_args = f"serving_loop.py --kernels {kernels} --steps {self.steps} --seed {self.seed}"
        loop_args += f" --device {self.device} --json {lat} --label {name}"
        if not self.moe:
            loop_args += " --no-moe"
        env = {"TRITON_CACHE_DIR": str(self.work / cache)}
        if trace:
            shown = (f"TRITON_CACHE_DIR={cache} jitguard run --mode {mode} --trace {trace} -- "
                     f"python {loop_args}")
            argv = [sys.executable, "-m", "jitguard", "run", "--mode", mode, "--trace", trace, "--",
                    sys.executable, *shlex.split(loop_args)]
        else:
            shown = f"TRITON_CACHE_DIR={cache} python {loop_args}"
            argv = [sys.executable, *shlex.split(loop_args)]
        try:
            self.sh(shown, argv, env=env)
        except StepFailed as e:
            raise StepFailed(str(e), loop=name) from None
        result = json.loads((self.work / lat).read_text())
        result["cache"] = "cold" if name.endswith("cold") else "warm"
        if trace:
            result["trace"] = trace_summary(self.work / trace)
        self.runs[name] = result
        return result


def trace_summary(path: pathlib.Path) -> dict:
    from jitguard.runtime.trace import load_trace

    trace = load_trace(path)
    compiles = trace.compiles()
    return {
        "compile_events": len(compiles),
        "recompiles": sum(1 for e in compiles if e.variant >= 2),
        "events_after_first_step": sum(1 for e in compiles if (e.step or 0) > 0),
        "disk_cache_hits": sum(1 for e in compiles if e.disk_cache_hit),
        "compile_ms": round(sum(e.compile_ms or 0.0 for e in compiles), 1),
        "events": [{"kernel": e.kernel.rsplit(".", 1)[-1], "variant": e.variant, "step": e.step,
                    "compile_ms": e.compile_ms, "disk_cache_hit": e.disk_cache_hit,
                    "why": "; ".join(d.what for d in e.diff)} for e in compiles],
    }


def static_vs_runtime(scan_json: str, trace_path: pathlib.Path) -> list[dict]:
    """Per (kernel, parameter): found by the static scan, by the runtime trace, or both."""
    from jitguard.runtime.findings import findings_from_trace
    from jitguard.runtime.trace import load_trace

    rows: dict[tuple[str, str], dict] = {}

    def row(kernel: str, param: str) -> dict:
        key = (kernel.rsplit(".", 1)[-1], param)
        return rows.setdefault(key, {"kernel": key[0], "param": param, "static": None, "runtime": None})

    for f in json.loads(scan_json)["findings"]:
        if f.get("param"):
            row(f["kernel"], f["param"])["static"] = f["code"]
    for f in findings_from_trace(load_trace(trace_path)):
        if f.param:
            row(f.kernel, f.param)["runtime"] = f.code
    return sorted(rows.values(), key=lambda r: (r["kernel"], r["param"]))


def machine_info(runs: dict) -> dict:
    any_run = next(iter(runs.values()), {})
    info = {"host": platform.node(), "cpu": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "device": any_run.get("device"), "gpu": any_run.get("gpu")}
    if shutil.which("nvidia-smi"):
        try:
            info["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=30).stdout.strip()
        except Exception:
            pass
    return info


def sources() -> dict:
    """What was run: the git commit where there is one, and sha256 of the kernel sources (other
    files of the working tree may have been uncommitted)."""
    import hashlib

    out: dict = {}
    try:
        out["git_head"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                         text=True, timeout=10).stdout.strip() or None
    except Exception:
        out["git_head"] = None
    for rel in ("fixtures/rope_fp8_uncorrected.py", "fixtures/moe_uncorrected.py",
                "kernels/rope_fp8.py", "kernels/moe.py", "examples/serving_loop.py"):
        try:
            out[rel] = hashlib.sha256((ROOT / rel).read_bytes()).hexdigest()[:16]
        except OSError:
            out[rel] = None
    return out


def versions() -> dict:
    import jitguard

    out = {"jitguard": jitguard.__version__}
    for mod in ("triton", "torch", "libcst"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:
            out[mod] = None
    return out


def run_story(story: Story) -> int:
    work = story.work
    (work / "app").mkdir(parents=True, exist_ok=True)
    for f in TWINS:
        shutil.copy2(ROOT / "fixtures" / f, work / "app" / f)
    shutil.copy2(ROOT / "examples" / "serving_loop.py", work / "serving_loop.py")

    story.say("## 1. The static scan of the uncorrected twins")
    story.jitguard("scan app", ok=(0, 1, 2), save="scan.txt")  # the runtime half goes on regardless
    scan_json = subprocess.run([sys.executable, "-m", "jitguard", "scan", "--format", "json", "app"],
                               cwd=work, capture_output=True, text=True).stdout

    story.say("## 2. The serving loop on the twins: cold Triton cache, under jitguard run; then warm")
    before = story.loop("before_cold", "app", "cache-before", "trace_before.json")
    story.loop("before_warm", "app", "cache-before", "trace_before_warm.json", mode="record")

    story.say("## 3. Why it stalled")
    story.jitguard("report trace_before.json", save="report_before.txt")

    story.say("## 4. The fix, from the trace (merged with the scan)")
    fix_out = [story.jitguard("fix --from-trace trace_before.json app")]
    fix_out.append(story.jitguard("fix --from-trace trace_before.json --unsafe-fixes --write --diff app"))
    fix_out.append(story.jitguard("scan app", ok=(0, 1)))
    (story.out / "fix.txt").write_text("\n\n".join(fix_out) + "\n")

    story.say("## 5. The serving loop on the fixed app: cold Triton cache, then warm")
    after = story.loop("after_cold", "app", "cache-after", "trace_after.json")
    story.loop("after_warm", "app", "cache-after", "trace_after_warm.json", mode="record")
    story.jitguard("report trace_after.json", save="report_after.txt")

    story.say("## 6. The shipped kernels (jitguard.kernels), cold Triton cache, for reference")
    story.loop("corrected_cold", "corrected", "cache-corrected", None)

    story.say("## 7. What each side found, and the latencies")
    comparison = static_vs_runtime(scan_json, work / "trace_before.json")
    story.say(f"{'kernel':<30} {'parameter':<18} {'scan':<6} {'runtime trace'}")
    for r in comparison:
        story.say(f"{r['kernel']:<30} {r['param']:<18} {r['static'] or '-':<6} {r['runtime'] or '-'}")
    static_only = [f"{r['kernel']}.{r['param']}" for r in comparison if r["static"] and not r["runtime"]]
    runtime_only = [f"{r['kernel']}.{r['param']}" for r in comparison if r["runtime"] and not r["static"]]
    story.say(f"only the scan: {', '.join(static_only) or 'none'}; "
              f"only the runtime trace: {', '.join(runtime_only) or 'none'}")
    story.say()
    story.say("latency per step in ms; 'after step 0': variants added after the first step "
              "(warm cache: loaded from Triton's disk cache) and the time of the steps that added them")
    story.say(f"{'run':<15} {'cache':<5} {'first step':>10} {'p50':>8} {'p90':>8} {'p99':>9} "
              f"{'p99.9':>9} {'max':>9}  {'after step 0':>12}")
    for name, r in story.runs.items():
        lat = r["latency_ms"]
        story.say(f"{name:<15} {r['cache']:<5} {r['first_step_ms']:>10.1f} {lat['p50']:>8.3f} "
                  f"{lat['p90']:>8.3f} {lat['p99']:>9.3f} {lat['p99_9']:>9.3f} {lat['max']:>9.3f}  "
                  f"{r['compiles_after_first_step']:>2} in {r['stall_ms_after_first_step']:>7.1f}")
    digests = {name: r.get("output_digests") or {} for name, r in story.runs.items()}
    reference = digests["before_cold"]
    same_outputs = {}
    if reference:
        story.say()
        for name, d in digests.items():
            if name == "before_cold" or not d:
                continue
            common = sorted(set(d) & set(reference), key=int)
            equal = [k for k in common if d[k] == reference[k]]
            same_outputs[name] = {"steps_compared": len(common), "identical": len(equal)}
            story.say(f"outputs of {name} vs before_cold: identical at {len(equal)} of {len(common)} "
                      "sampled steps (sha256 of every output byte)")
    holds = (before["compiles_after_first_step"] > 0 and after["compiles_after_first_step"] == 0
             and story.runs["after_warm"]["compiles_after_first_step"] == 0
             and all(v["identical"] == v["steps_compared"]  # the fix changes no result
                     for k, v in same_outputs.items() if k.startswith("after")))
    story.say()
    story.say(f"story {'holds' if holds else 'DOES NOT HOLD'}: twins compiled "
              f"{before['compiles_after_first_step']} variants after the first step "
              f"({before['stall_ms_after_first_step']:.0f} ms of stalled steps); the fixed app "
              f"{after['compiles_after_first_step']} (cold) and "
              f"{story.runs['after_warm']['compiles_after_first_step']} (warm)")

    doc = {
        "benchmark": "serving_story",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(story.runs),
        "versions": versions(),
        "sources": sources(),
        "command": "python bench/serving_story.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "stand_in": story.device == "stand-in",
        "note": ("CPU stand-in driver: real sm_90 compiles through Triton's JIT path, launches "
                 "skipped; latencies of steps without a compile are host overhead only"
                 if story.device == "stand-in" else
                 "step latency = host wall time from the start of a step until "
                 "torch.cuda.synchronize() returns (JIT compiles included)"),
        "moe": story.moe,
        "stream": before["stream"],
        "story_holds": holds,
        "same_outputs_as_before_cold": same_outputs,
        "static_vs_runtime": comparison,
        "static_only": static_only,
        "runtime_only": runtime_only,
        "commands": story.commands,
        "runs": {k: {kk: vv for kk, vv in v.items() if kk != "stream"} for k, v in story.runs.items()},
    }
    (story.out / "serving_story.json").write_text(json.dumps(doc, indent=1) + "\n")
    (story.out / "trace_before.json").write_bytes((work / "trace_before.json").read_bytes())
    (story.out / "trace_after.json").write_bytes((work / "trace_after.json").read_bytes())
    return 0 if holds else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "serving_story"),
                    help="where to write the results (default: bench/results/serving_story)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--device", choices=("auto", "cuda", "stand-in"), default="auto")
    ap.add_argument("--no-moe", action="store_true", help="the RoPE/FP8 kernel only")
    ap.add_argument("--work", help="work directory (default: a fresh temporary one, removed after)")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per command")
    args = ap.parse_args()

    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "stand-in"
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for f in OUT_FILES:  # never leave a previous run's file beside this run's
        (out / f).unlink(missing_ok=True)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9 warns when unset (same default)

    moe = not args.no_moe
    preface: list[str] = []  # what a failed first attempt (with the MoE kernel) printed
    while True:
        work = pathlib.Path(args.work) if args.work else pathlib.Path(tempfile.mkdtemp(prefix="jitguard-story-"))
        if args.work and work.exists() and any(work.iterdir()):
            print(f"serving_story: --work {work} is not empty", file=sys.stderr)
            return 2
        story = Story(work, out, device, args.steps, args.seed, moe, args.timeout)
        (out / "transcript.txt").write_text("".join(line + "\n" for line in preface))
        story.transcript.extend(preface)
        story.say(f"# jitguard serving story: {args.steps} steps, seed {args.seed}, device {device}"
                  + ("" if moe else ", RoPE/FP8 only"))
        story.say(f"# work directory: app/ = a copy of fixtures/{{{','.join(TWINS)}}}; "
                  "serving_loop.py = examples/serving_loop.py")
        story.say()
        try:
            code = run_story(story)
        except StepFailed as e:
            story.say(f"serving_story: step failed: {e}")
            (out / "transcript.txt").write_text("\n".join(story.transcript) + "\n")
            if moe and e.loop == "before_cold":  # the MoE twin may not run here: RoPE/FP8 alone
                print("serving_story: retrying without the MoE kernel", file=sys.stderr)
                preface = (["# FIRST ATTEMPT (with the MoE kernel) FAILED; its last lines:"]
                           + story.transcript[-40:] + ["# retrying with --no-moe", ""])
                moe = False
                if not args.work:
                    shutil.rmtree(work, ignore_errors=True)
                continue
            return 2
        finally:
            if not args.work:
                shutil.rmtree(work, ignore_errors=True)
        (out / "transcript.txt").write_text("\n".join(story.transcript) + "\n")
        return code


if __name__ == "__main__":
    sys.exit(main())
