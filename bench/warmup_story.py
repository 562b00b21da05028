"""Zero JIT after start-up: the serving story's uncorrected twins, warmed up from a recorded trace.

In a fresh work directory (``app/`` = a copy of fixtures/rope_fp8_uncorrected.py and
fixtures/moe_uncorrected.py, unchanged: no ``jitguard fix``; ``serving_loop.py`` =
examples/serving_loop.py), this runs the serving loop of bench/serving_story.py five times, each
under ``jitguard run --mode record`` (which counts every compile and its step):

 1. ``record_cold``: cold Triton cache; writes the trace the other runs warm up from;
 2. ``nowarm_warmcache``: the same cache, now warm, no warm-up (variants load from disk mid-traffic);
 3. ``warmup_cold``: a new cold cache; the loop starts with ``jitguard.warmup(trace)`` (``--warmup``);
 4. ``warmup_warmcache``: run 3's cache, warm, and the warm-up again;
 5. ``env_cold``: a new cold cache; the program unchanged, ``jitguard run --warmup trace``
    (``JITGUARD_WARMUP``): the warm-up runs at the program's first compile.

plus ``jitguard warmup --check`` on the trace (no compile). Start-up is the time from the loop's
``main()`` (before torch and Triton are imported) to the end of its first step.

    python bench/warmup_story.py [--out DIR] [--steps 300] [--device auto|cuda|stand-in]

Writes DIR/warmup_story.json (machine, versions, date, every figure of every run), transcript.txt,
check.txt and trace_record.json (default DIR: bench/results/warmup_story). Exit status 0 when the
story holds (the recorded run compiled after its first step; every warmed run compiled nothing
after it and skipped no variant), 1 when it does not, 2 when a step failed.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shlex
import shutil
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import serving_story  # noqa: E402  (the Story runner, machine_info, versions, sources)

from jitguard.runtime.trace import load_trace  # noqa: E402

RUNS = (
    # name, Triton cache, how the warm-up happens
    ("record_cold", "cache-record", None),
    ("nowarm_warmcache", "cache-record", None),
    ("warmup_cold", "cache-warmup", "api"),
    ("warmup_warmcache", "cache-warmup", "api"),
    ("env_cold", "cache-env", "env"),
)
OUT_FILES = ("warmup_story.json", "transcript.txt", "check.txt", "trace_record.json")


def run_loop(story: serving_story.Story, name: str, cache: str, warm: str | None) -> dict:
    trace = f"trace_{name}.json"
    lat = f"lat_{name}.json"
    loop = (f"serving_loop.py --kernels app --steps {story.steps} --seed {story.seed} "
            f"--device {story.device} --json {lat} --label {name}")
    if not story.moe:
        loop += " --no-moe"
    if warm == "api":
        loop += " --warmup trace_record_cold.json"
    run_opts = f"--mode record --trace {trace}" + (" --warmup trace_record_cold.json" if warm == "env" else "")
    shown = f"TRITON_CACHE_DIR={cache} jitguard run {run_opts} -- python {loop}"
    argv = [sys.executable, "-m", "jitguard", "run", *shlex.split(run_opts), "--",
            sys.executable, *shlex.split(loop)]
    story.sh(shown, argv, env={"TRITON_CACHE_DIR": str(story.work / cache)})
    result = json.loads((story.work / lat).read_text())
    result["cache"] = "warm" if name.endswith("warmcache") else "cold"
    result["warm_up"] = {"api": "jitguard.warmup(trace) before the loop",
                         "env": "jitguard run --warmup trace (at the first compile)"}.get(warm, "none")
    result["trace"] = serving_story.trace_summary(story.work / trace)
    result["trace"]["from_trace"] = sum(1 for e in load_trace(story.work / trace).compiles()
                                        if e.from_trace)
    story.runs[name] = result
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "warmup_story"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--device", choices=("auto", "cuda", "stand-in"), default="auto")
    ap.add_argument("--no-moe", action="store_true", help="the RoPE/FP8 kernel only")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per command")
    args = ap.parse_args()
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "stand-in"
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for f in OUT_FILES:
        (out / f).unlink(missing_ok=True)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    os.environ["PYTHONUNBUFFERED"] = "1"
    work = pathlib.Path(tempfile.mkdtemp(prefix="jitguard-warmup-"))
    story = serving_story.Story(work, out, device, args.steps, args.seed, not args.no_moe, args.timeout)
    (out / "transcript.txt").write_text("")
    try:
        (work / "app").mkdir()
        for f in serving_story.TWINS:
            shutil.copy2(ROOT / "fixtures" / f, work / "app" / f)
        shutil.copy2(ROOT / "examples" / "serving_loop.py", work / "serving_loop.py")
        story.say(f"# jitguard warm-up story: {args.steps} steps, seed {args.seed}, device {device}; "
                  "app/ = fixtures' uncorrected twins, unchanged")
        story.say()
        for name, cache, warm in RUNS:
            story.say(f"## {name}")
            run_loop(story, name, cache, warm)
            if name == "record_cold":
                story.jitguard("warmup --check -I app trace_record_cold.json", save="check.txt", ok=(0, 1))
        code = summarize(story, args)
    except serving_story.StepFailed as e:
        story.say(f"warmup_story: step failed: {e}")
        code = 2
    finally:
        for name in ("trace_record_cold.json",):
            if (work / name).exists():
                shutil.copy2(work / name, out / "trace_record.json")
        shutil.rmtree(work, ignore_errors=True)
    return code


def summarize(story: serving_story.Story, args) -> int:
    rows = []
    story.say("latency per step in ms over steps 1..N-1; start-up = main() to the end of step 0")
    head = (f"{'run':<17} {'cache':<5} {'warm-up':<8} {'start-up':>9} {'warm-up':>8} {'step 0':>8} "
            f"{'p50':>7} {'p99':>8} {'p99.9':>8} {'max':>8}  {'compiles after step 0':>21}")
    story.say(head)
    for name, r in story.runs.items():
        lat = r["latency_ms"]
        warm_ms = (r.get("warmup") or {}).get("ms")
        label = {"none": "none", "jitguard.warmup(trace) before the loop": "api"}.get(r["warm_up"], "env")
        row = {"run": name, "cache": r["cache"], "warm_up": r["warm_up"], "startup_ms": r["startup_ms"],
               "warmup_ms": warm_ms, "first_step_ms": r["first_step_ms"], "p50": lat["p50"],
               "p99": lat["p99"], "p99_9": lat["p99_9"], "max": lat["max"],
               "compiles_after_first_step": r["compiles_after_first_step"],
               "trace_compiles_after_first_step": r["trace"]["events_after_first_step"],
               "stall_ms_after_first_step": r["stall_ms_after_first_step"],
               "compile_events": r["trace"]["compile_events"], "warmed_from_trace": r["trace"]["from_trace"]}
        rows.append(row)
        story.say(f"{name:<17} {r['cache']:<5} {label:<8} {r['startup_ms']:>9.1f} "
                  f"{(f'{warm_ms:.1f}' if warm_ms is not None else '-'):>8} {r['first_step_ms']:>8.1f} "
                  f"{lat['p50']:>7.3f} {lat['p99']:>8.3f} {lat['p99_9']:>8.3f} {lat['max']:>8.3f}  "
                  f"{r['compiles_after_first_step']:>3} ({r['stall_ms_after_first_step']:.0f} ms)")
    warmed = [r for n, r in story.runs.items() if r["warm_up"] != "none"]
    skipped = [s for r in warmed for s in ((r.get("warmup") or {}).get("skipped") or [])]
    holds = (story.runs["record_cold"]["compiles_after_first_step"] > 0
             and all(r["compiles_after_first_step"] == 0 and r["trace"]["events_after_first_step"] == 0
                     for r in warmed) and not skipped)
    story.say()
    story.say(f"story {'holds' if holds else 'DOES NOT HOLD'}: without warm-up "
              f"{story.runs['record_cold']['compiles_after_first_step']} variants compiled after step 0 "
              f"(cold) and {story.runs['nowarm_warmcache']['compiles_after_first_step']} loaded from disk "
              f"(warm cache); with it "
              + ", ".join(f"{n} {r['compiles_after_first_step']}" for n, r in story.runs.items()
                          if r["warm_up"] != "none"))
    doc = {
        "benchmark": "warmup_story",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": serving_story.machine_info(story.runs),
        "versions": serving_story.versions(),
        "sources": serving_story.sources(),
        "command": "python bench/warmup_story.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "stand_in": story.device == "stand-in",
        "note": ("CPU stand-in driver: real sm_90 compiles, launches skipped; latencies of steps "
                 "without a compile are host overhead only" if story.device == "stand-in" else
                 "step latency = host wall time from the start of a step until "
                 "torch.cuda.synchronize() returns (JIT compiles included)"),
        "moe": story.moe,
        "story_holds": holds,
        "skipped_variants": skipped,
        "table": rows,
        "commands": story.commands,
        "runs": {k: {kk: vv for kk, vv in v.items() if kk not in ("stream", "per_step_ms")}
                 for k, v in story.runs.items()},
        "per_step_ms": {k: v.get("per_step_ms") for k, v in story.runs.items()},
    }
    (story.out / "warmup_story.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
