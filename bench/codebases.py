"""jitguard scan on six Triton codebases: what it reports and how sure, how fast, what it misses.

    python bench/codebases.py                          # all six -> bench/results/codebases/
    python bench/codebases.py --only sglang,lmdeploy   # some of them (the summary keeps the others)
    python bench/codebases.py --repeat 3               # timing repeats (the best of each is kept)
    python bench/codebases.py sample --n 25 --seed S   # draw the hand-check samples of the last run
    python bench/codebases.py sample --level high      # and one of the high-level findings alone
    python bench/codebases.py rejudge                  # recompute judged figures from the verdict files
    python bench/codebases.py census [--add FILE ...]  # every verdict given on the last run's findings
    python bench/codebases.py --base REV               # also: the findings added / removed / re-levelled since REV

The codebases are pinned wheels (``pip download --no-deps``; megatron-core has only cp312 wheels),
of which only the .py files are kept, under bench/corpus/ (git-ignored). Per codebase, in one run:

* files, kernels, launches, findings per rule and confidence level, file errors, internal errors;
* cold and warm time of ``jitguard scan TREE`` as a user runs it (a new process, a fresh cache dir,
  then the same again), against ``ast.parse`` of the same files in this process, interleaved;
* stripped-annotation recall: every ``do_not_specialize`` / ``do_not_specialize_on_alignment``
  entry is removed (bench/strip_do_not_specialize.py) and the stripped tree scanned; a
  ``do_not_specialize`` (kernel, parameter) pair is recovered when the scan reports it as JG001 or
  JG002, at the default levels (high, medium) and at any level;
* the precision proxy: among JG001/JG002 findings on kernels that carried an annotation (kernels
  somebody looked at), the share that name an annotated parameter;
* every recall miss with why (the argument's provenance, or why no launch was bound) and, where a
  reader judged it (bench/results/codebases/NAME_judged.json; vLLM: vllm_recall_judged.json),
  whether its value varies: recall over the stripped pairs whose value varies;
* the findings on kernels the codebase did not annotate: the population the hand-check samples
  (``sample``) are drawn from; a sample whose verdicts are filled in gives the hand-checked
  precision per level;
* the census: every verdict ever given on a finding (the committed samples in git history, judged
  census files and adjudications under census/) in NAME_verdicts.json, the precision over the whole population they cover, and
  NAME_census_todo.json listing the default-level findings on unannotated kernels not judged yet
  (filled in by readers and merged with ``census --add``): with every finding judged, the precision
  of the codebase's default-level findings is measured rather than estimated from a sample.

Writes bench/results/codebases/summary.json (machine, versions, date, commit and every figure),
summary.md (the tables) and NAME.json (misses, likely false positives, unannotated findings).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import pathlib
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

BENCH = pathlib.Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from jitguard import __version__  # noqa: E402
from jitguard.config import Config  # noqa: E402
from jitguard.static.link import build_program  # noqa: E402
from jitguard.static.runner import scan_paths  # noqa: E402

import strip_do_not_specialize as strip  # noqa: E402
from parse_ceiling import ast_parse_all, compile_ahead  # noqa: E402
from scan_speed import _machine, snapshot_jitguard  # noqa: E402
from vllm_recall import _miss_detail, explain_miss, key_of  # noqa: E402
import wheel_files  # noqa: E402
from wheel_files import sha256_file  # noqa: E402

CORPUS = BENCH / "corpus"
RESULTS = BENCH / "results" / "codebases"
VARYING_CODES = ("JG001", "JG002")  # the codes that say "this value varies"
DEFAULT_LEVELS = ("high", "medium")  # what a scan reports by default
LEVELS = ("high", "medium", "low")
HOW_TO_JUDGE = ("verdict 'true' when the value reaching the parameter takes more than one value class per process in "
                "normal use (the finding is right), 'false' otherwise; a launch that nothing in the codebase reaches "
                "is judged on the value it gets when it runs (the finding is about the code, and the codebase's "
                "users may call it); reason: what in the code shows it")


@dataclass(frozen=True)
class Codebase:
    name: str
    spec: str  # the pinned requirement given to pip download
    tree: str  # under bench/corpus
    pip_args: tuple[str, ...] = ()
    judged: str = ""  # verdicts on the recall misses, under bench/results (default codebases/NAME_judged.json)


CODEBASES = (
    Codebase("vllm", "vllm==0.33.0", "vllm-0.33.0", judged="vllm_recall_judged.json"),
    Codebase("sglang", "sglang==0.5.23", "other/sglang-0.5.23"),
    Codebase("liger-kernel", "liger-kernel==0.8.5", "other/liger-kernel-0.8.5"),
    Codebase("lmdeploy", "lmdeploy==0.18.0", "other/lmdeploy-0.18.0"),
    Codebase("unsloth", "unsloth==2026.10.9", "other/unsloth-2026.10.9"),
    # no cp311 wheel exists: the .py files of the cp312 one
    Codebase("megatron-core", "megatron-core==0.19.2", "other/megatron-core-0.19.2",
             pip_args=("--python-version", "3.12")),
)


def _wheel_of(cb: Codebase) -> pathlib.Path | None:
    dist, version = cb.spec.split("==")
    prefix = f"{dist.replace('-', '_').lower()}-{version}-"
    return next((w for w in sorted((CORPUS / "wheels").glob("*.whl")) if w.name.lower().startswith(prefix)), None)


def fetch(cb: Codebase) -> pathlib.Path:
    """The unpacked .py files of ``cb``'s wheel (downloaded and unpacked once)."""
    tree = CORPUS / cb.tree
    if tree.is_dir():
        return tree
    wheels = CORPUS / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    if _wheel_of(cb) is None:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", *cb.pip_args,
               "-d", str(wheels), cb.spec]
        print("+", " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True)
    wheel = _wheel_of(cb)
    wheel_files.unpack(wheel, tree, lambda name: name.endswith(".py"))
    return tree


# ---------------------------------------------------------------------------------------------
# timing: ast.parse in this process against the scan as a user runs it


def ast_pass(files: list[pathlib.Path]) -> tuple[float, float]:
    """(wall s, CPU s) of reading and ``ast.parse`` of every file, in this process."""
    got = ast_parse_all(files)
    return got["seconds"], got["cpu_seconds"]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cli_scan(tree: pathlib.Path, cache_dir: str, out_json: str, code: str) -> tuple[float, float, dict]:
    """(wall s, CPU s of the whole process tree, workers included, JSON report) of one scan."""
    # bench/corpus is git-ignored here (and may be a link): the tree is scanned as its own project
    cmd = [sys.executable, "-m", "jitguard", "scan", str(tree), "--format", "json", "-o", out_json,
           "--cache-dir", cache_dir, "--no-respect-gitignore"]
    env = dict(os.environ, CI="1", PYTHONPATH=code)
    t0, c0 = time.perf_counter(), _children_cpu()
    proc = subprocess.run(cmd, cwd=str(tree.parent), env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"scan of {tree} failed with exit {proc.returncode}:\n{proc.stderr[-3000:]}")
    return wall, cpu, json.loads(pathlib.Path(out_json).read_text())


def timing(tree: pathlib.Path, files: list[pathlib.Path], code: str, repeat: int, tmp: str) -> dict:
    """Best of ``repeat`` interleaved (ast pass, cold scan, warm scan). Wall time is what a user
    waits; CPU time (the scan's whole process tree) is what survives a machine shared with other
    work, so both are kept and compared."""
    runs: dict[str, list[float]] = {k: [] for k in ("ast_wall", "ast_cpu", "cold_wall", "cold_cpu",
                                                    "warm_wall", "warm_cpu")}
    doc = None
    compile_ahead(code)
    for i in range(repeat):
        for k, v in zip(("ast_wall", "ast_cpu"), ast_pass(files)):
            runs[k].append(v)
        cache = os.path.join(tmp, f"cache-{tree.name}-{i}")
        wall, cpu, doc = cli_scan(tree, cache, os.path.join(tmp, "cold.json"), code)
        runs["cold_wall"].append(wall)
        runs["cold_cpu"].append(cpu)
        wall, cpu, warm_doc = cli_scan(tree, cache, os.path.join(tmp, "warm.json"), code)
        runs["warm_wall"].append(wall)
        runs["warm_cpu"].append(cpu)
        if doc["summary"]["files_scanned"] != len(files):
            raise SystemExit(f"{tree}: the timed scan read {doc['summary']['files_scanned']} of {len(files)} files")
        if warm_doc["summary"]["by_code"] != doc["summary"]["by_code"]:
            raise SystemExit(f"{tree}: the warm scan reports other findings than the cold one")
        shutil.rmtree(cache, ignore_errors=True)
    best = {k: min(v) for k, v in runs.items()}
    return {"ast_parse_s": round(best["ast_wall"], 3), "cold_s": round(best["cold_wall"], 3),
            "warm_s": round(best["warm_wall"], 3), "cold_over_ast": round(best["cold_wall"] / best["ast_wall"], 3),
            "ast_parse_cpu_s": round(best["ast_cpu"], 3), "cold_cpu_s": round(best["cold_cpu"], 3),
            "warm_cpu_s": round(best["warm_cpu"], 3),
            "cold_over_ast_cpu": round(best["cold_cpu"] / best["ast_cpu"], 3),
            "load_average": list(os.getloadavg()),
            "runs": {k: [round(x, 3) for x in v] for k, v in runs.items()},
            "cli_summary": doc["summary"]}


# ---------------------------------------------------------------------------------------------
# findings, recall, precision proxy


def level_of(f) -> str:
    return getattr(f, "confidence", "medium") or "medium"


def scan(tree: pathlib.Path, keep_facts: bool):
    # every level: the figures are split by level here. bench/corpus is git-ignored: not respected
    config = Config(select=("JG",), root=str(tree), confidence="low", respect_gitignore=False)
    t = time.perf_counter()
    result = scan_paths([str(tree)], config, use_cache=False, keep_facts=keep_facts)
    return result, time.perf_counter() - t


def by_code_level(findings) -> dict:
    out: dict[str, dict[str, int]] = {}
    for f in findings:
        row = out.setdefault(f.code, {lv: 0 for lv in LEVELS})
        row[level_of(f)] = row.get(level_of(f), 0) + 1
    return dict(sorted(out.items()))


def _launch(f) -> dict:
    return (f.details.get("launches") or [{}])[0]


def _evidence(f) -> list:
    return f.details.get("chain") or _launch(f).get("evidence", [])


def recall_and_proxy(cb: Codebase, tree: pathlib.Path, work: pathlib.Path, reuse: bool) -> tuple[dict, dict]:
    stripped = work / f"{tree.name}-stripped"
    record_path = work / f"{tree.name}-stripped.json"
    if not (reuse and record_path.exists() and stripped.is_dir()):
        strip.main([str(tree), str(stripped), "--record", str(record_path)])
    record = json.loads(record_path.read_text())
    truth, naming_no_param = strip.ground_truth(record)
    annotated = {(e["path"], e["kernel"][len(e["module"]) + 1:]) for e in record["entries"]}
    annotated |= {(u["path"], u["kernel"][len(strip.module_name(u["path"])) + 1:]) for u in record["unresolved"]}
    pairs = {(k[0], k[1], p) for k, ps in truth.items() for p in ps}
    dnsoa = {(e["path"], e["kernel"][len(e["module"]) + 1:], e["param"]) for e in record["entries"]
             if e["option"] != "do_not_specialize" and e["param"] is not None}

    result, seconds = scan(stripped, keep_facts=True)
    program = build_program(result.facts)
    found: dict[tuple, object] = {}
    for f in result.findings:
        if f.code in VARYING_CODES and f.param:
            k = (*key_of(f.details.get("kernel_path", f.path), f.kernel, stripped), f.param)
            # the most sure finding of the pair counts
            if k not in found or LEVELS.index(level_of(f)) < LEVELS.index(level_of(found[k])):
                found[k] = f

    def figures(levels: tuple[str, ...]) -> dict:
        got = {k for k, f in found.items() if level_of(f) in levels}
        hits = pairs & got
        on_annotated = {k for k in got if (k[0], k[1]) in annotated}
        matching = {k for k in on_annotated if k in pairs}
        matching_any = {k for k in on_annotated if k in pairs or k in dnsoa}
        return {"hits": len(hits), "recall": round(len(hits) / len(pairs), 4) if pairs else None,
                "findings_on_annotated_kernels": len(on_annotated), "matching_annotation": len(matching),
                "precision_proxy": round(len(matching) / len(on_annotated), 4) if on_annotated else None,
                "precision_proxy_any_annotation": round(len(matching_any) / len(on_annotated), 4) if on_annotated else None,
                "_hits": hits, "_on_annotated": on_annotated, "_matching": matching}

    default, anylevel = figures(DEFAULT_LEVELS), figures(LEVELS)
    per_level = {lv: figures((lv,)) for lv in LEVELS}

    misses = []
    for m in sorted(pairs - default["_hits"]):
        entry = {"path": m[0], "kernel": m[1], "param": m[2], **explain_miss(program, stripped, *m)}
        if m in found:
            entry["reported_at"] = level_of(found[m])
        if entry["reason"].startswith("provenance") and entry.get("args"):
            entry["detail"] = _miss_detail(entry["args"][0])
        misses.append(entry)
    judged_path = BENCH / "results" / (cb.judged or f"codebases/{cb.name}_judged.json")
    verdicts = load_verdicts(cb)
    by_verdict: dict[str, int] = {}
    for m in misses:
        m["verdict"], m["verdict_reason"] = verdicts.get((m["path"], m["kernel"], m["param"]), ("unjudged", ""))
        by_verdict[m["verdict"]] = by_verdict.get(m["verdict"], 0) + 1
    by_reason: dict[str, int] = {}
    for m in misses:
        r = m["reason"].split(" (")[0] + (f": {m['detail']}" if m.get("detail") else "")
        by_reason[r] = by_reason.get(r, 0) + 1
    still_varying = [m for m in misses if m["verdict"] in ("varies", "unclear", "unjudged")]
    n_hits = default["hits"]
    false_pos = []
    prefix = os.path.join(str(stripped), "")  # the stripped copy's place: left out of the results
    for k in sorted(default["_on_annotated"] - default["_matching"]):
        f = found[k]
        false_pos.append({"path": k[0], "kernel": k[1], "param": k[2], "code": f.code, "level": level_of(f),
                          "arg": _launch(f).get("arg"),
                          "at": f"{os.path.relpath(_launch(f).get('path'), stripped)}:{_launch(f).get('line')}",
                          "evidence": [e.replace(prefix, "") for e in _evidence(f)[:4]],
                          "annotated_params": sorted(truth.get((k[0], k[1]), set()))})
    strip_forms: dict[str, int] = {}
    for e in record["entries"]:
        strip_forms[e.get("form", "literal")] = strip_forms.get(e.get("form", "literal"), 0) + 1
    figures_out = {
        "annotations": {"entries": len(record["entries"]),
                        "do_not_specialize_entries": sum(e["option"] == "do_not_specialize" for e in record["entries"]),
                        "forms": strip_forms, "unresolved": record["unresolved"],
                        "entries_naming_no_param": len(naming_no_param), "kernels": len(annotated),
                        "pairs": len(pairs)},
        "stripped_scan": {"internal_errors": len(result.internal_errors), "file_errors": len(result.errors),
                          "kernels": len(program.kernels), "launches_bound": len(program.launches),
                          "seconds": round(seconds, 1)},
        "default_levels": {k: v for k, v in default.items() if not k.startswith("_")},
        "any_level": {k: v for k, v in anylevel.items() if not k.startswith("_")},
        "per_level": {lv: {k: v for k, v in d.items() if not k.startswith("_")} for lv, d in per_level.items()},
        "judged_file": str(judged_path.relative_to(ROOT)) if judged_path.exists() else None,
        "miss_verdicts": by_verdict,
        "recall_over_varying_pairs": round(n_hits / (n_hits + len(still_varying)), 4) if n_hits + len(still_varying) else None,
        "miss_reasons": dict(sorted(by_reason.items(), key=lambda kv: -kv[1])),
    }
    details = {"misses": misses, "likely_false_positives": false_pos, "annotated_kernels": sorted(map(list, annotated))}
    return figures_out, details


def unannotated(result, tree: pathlib.Path, annotated: set) -> list[dict]:
    out = []
    for f in result.findings:
        if not f.param and f.code in VARYING_CODES:
            continue
        rel, local = key_of(f.details.get("kernel_path", f.path), f.kernel, tree)
        if (rel, local) in annotated:
            continue
        launch = _launch(f)
        out.append({"code": f.code, "level": level_of(f), "path": rel, "line": f.line, "kernel": local,
                    "param": f.param, "message": f.message, "arg": launch.get("arg"),
                    "at": f"{launch.get('path')}:{launch.get('line')}", "evidence": _evidence(f)[:6]})
    return sorted(out, key=lambda d: (d["path"], d["line"], d["code"], d["param"] or ""))


# ---------------------------------------------------------------------------------------------
# hand-check samples


def wilson(k: int, n: int, z: float = 1.96) -> list[float]:
    if not n:
        return [0.0, 0.0]
    p = k / n
    d = 1 + z * z / n
    c = p + z * z / (2 * n)
    r = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return [round((c - r) / d, 3), round((c + r) / d, 3)]


def share_true(k: int, n: int) -> dict:
    """``k`` right of ``n`` judged: the count, the precision and its 95% interval."""
    return {"true": k, "precision": round(k / n, 3) if n else None, "interval_95": wilson(k, n)}


def sample_precision(name: str) -> dict | None:
    """The hand-checked precision of ``name``'s sample, when every drawn finding has a verdict."""
    path = RESULTS / f"{name}_sample.json"
    if not path.exists():
        return None
    doc = json.loads(path.read_text())
    rows = doc["findings"]
    judged = [r for r in rows if r.get("verdict") in ("true", "false")]
    out = {"file": os.path.relpath(path, ROOT), "seed": doc["seed"], "commit": doc["commit"],
           "drawn": len(rows), "judged": len(judged)}
    if len(judged) < len(rows):
        out["incomplete"] = True
    for lv in ("all", *LEVELS):
        sel = [r for r in judged if lv == "all" or r["level"] == lv]
        out[lv] = {"n": len(sel), **share_true(sum(r["verdict"] == "true" for r in sel), len(sel))}
    high_path = sample_path(name, "high")
    if high_path.exists():  # a sample of high findings alone: high precision over both, each finding once
        hdoc = json.loads(high_path.read_text())
        if hdoc["commit"] == doc["commit"]:
            rows_high = {finding_key(r): r for r in judged if r["level"] == "high"}
            extra = [r for r in hdoc["findings"] if r.get("verdict") in ("true", "false")]
            rows_high.update((finding_key(r), r) for r in extra)
            sel = list(rows_high.values())
            out["high"] = {"n": len(sel), **share_true(sum(r["verdict"] == "true" for r in sel), len(sel)),
                           "with": os.path.relpath(high_path, ROOT), "high_sample_seed": hdoc["seed"]}
            if len(extra) < len(hdoc["findings"]):
                out["high"]["incomplete"] = True
    return out


def rejudge(names: list[str]) -> None:
    """Recompute the judged figures of the last run (verdicts on misses, recall over varying pairs,
    hand-checked precision) from the judged and sample files, without scanning again."""
    summary_path = RESULTS / "summary.json"
    doc = json.loads(summary_path.read_text())
    for e in doc["codebases"]:
        if e["codebase"] not in names:
            continue
        cb = next(c for c in CODEBASES if c.name == e["codebase"])
        details = json.loads((RESULTS / f"{cb.name}.json").read_text())
        verdicts = load_verdicts(cb)
        by_verdict: dict[str, int] = {}
        for m in details["misses"]:
            m["verdict"], m["verdict_reason"] = verdicts.get((m["path"], m["kernel"], m["param"]), ("unjudged", ""))
            by_verdict[m["verdict"]] = by_verdict.get(m["verdict"], 0) + 1
        still = sum(m["verdict"] in ("varies", "unclear", "unjudged") for m in details["misses"])
        hits = e["recall"]["default_levels"]["hits"]
        e["recall"]["miss_verdicts"] = by_verdict
        e["recall"]["recall_over_varying_pairs"] = round(hits / (hits + still), 4) if hits + still else None
        e["hand_check"] = sample_precision(cb.name)
        e["census"] = census_precision(cb.name)
        (RESULTS / f"{cb.name}.json").write_text(json.dumps(details, indent=1) + "\n")
        print(f"{cb.name}: misses by verdict {by_verdict}, recall over varying pairs "
              f"{e['recall']['recall_over_varying_pairs']}; hand check {e['hand_check'] and e['hand_check']['all']}")
    doc["targets"] = targets(doc)
    doc["rejudged"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    summary_path.write_text(json.dumps(doc, indent=1) + "\n")
    (RESULTS / "summary.md").write_text(summary_md(doc))


def load_verdicts(cb: Codebase) -> dict:
    judged_path = BENCH / "results" / (cb.judged or f"codebases/{cb.name}_judged.json")
    verdicts = {}
    if judged_path.exists():
        for jp in json.loads(judged_path.read_text()).get("pairs", []):
            verdicts[(jp["path"], jp["kernel"], jp["param"])] = (jp["verdict"], jp.get("reason", ""))
    return verdicts


def sample_path(name: str, level: str | None = None) -> pathlib.Path:
    """NAME_sample.json: the default-level sample; NAME_high_sample.json: one of high findings only."""
    return RESULTS / (f"{name}_{level}_sample.json" if level else f"{name}_sample.json")


def draw_samples(names: list[str], n: int, seed: int, force: bool, level: str | None = None) -> None:
    summary = json.loads((RESULTS / "summary.json").read_text())
    levels = (level,) if level else DEFAULT_LEVELS
    for name in names:
        details = json.loads((RESULTS / f"{name}.json").read_text())
        if details.get("jitguard_source_modified"):
            print(f"{name}: these findings came from uncommitted changes to {details['jitguard_commit'][:10]}: "
                  f"commit them and run again before drawing", file=sys.stderr)
            continue
        population = [f for f in details["unannotated_findings"] if f["level"] in levels]
        rng = random.Random(f"{seed}:{name}" + (f":{level}" if level else ""))
        drawn = rng.sample(population, min(n, len(population)))
        path = sample_path(name, level)
        if path.exists() and not force:
            print(f"{path} exists (judged verdicts would be lost): --force to draw again", file=sys.stderr)
            continue
        doc = {"codebase": name, "seed": seed,
               "rng": f"random.Random('{seed}:{name}{':' + level if level else ''}').sample", "n": len(drawn),
               "population": len(population), "levels": list(levels),
               "commit": details.get("jitguard_commit") or summary["versions"]["jitguard_commit"],
               "how_to_judge": HOW_TO_JUDGE,
               "findings": [dict(f, verdict=None, reason="") for f in drawn]}
        path.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{name}: drew {len(drawn)} of {len(population)} {level or 'default'}-level findings on unannotated "
              f"kernels, seed {seed} -> {path}")


# ---------------------------------------------------------------------------------------------
# the census: a verdict for every default-level finding on unannotated kernels, not a sample of them

def finding_key(row: dict) -> tuple:
    return (row["path"], row["kernel"], row["param"], row["code"])


def verdicts_path(name: str) -> pathlib.Path:
    """NAME_verdicts.json: every verdict given on a finding of ``name``, whichever draw or census gave it."""
    return RESULTS / f"{name}_verdicts.json"


def _committed_samples(name: str) -> list[dict]:
    """Every version of ``name``'s sample files in git history, oldest first (the verdicts of earlier
    draws, on findings the analysis may still report)."""
    rels = [os.path.relpath(BENCH / "results" / "codebases" / sample_path(name, lv).name, ROOT) for lv in (None, "high")]
    revs = subprocess.run(["git", "log", "--reverse", "--format=%H", "--", *rels], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.split()
    docs = []
    for rev in revs:
        for rel in rels:
            shown = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=ROOT, capture_output=True, text=True)
            if shown.returncode == 0:
                docs.append(json.loads(shown.stdout))
    return docs


def census_inputs(name: str) -> list[dict]:
    """The judged files of ``name`` under RESULTS/census/ (census files filled in by readers, and
    adjudications of findings two readers judged both ways), in the order of their names."""
    docs = [json.loads(p.read_text()) for p in sorted((RESULTS / "census").glob("*.json"))]
    return [d for d in docs if d["codebase"] == name]


def collect_verdicts(name: str) -> dict:
    """Write NAME_verdicts.json from the committed inputs alone: every version of the sample files in
    git history, the sample files as they are now, and RESULTS/census/. One verdict per finding: the
    one all its readers gave; where they differ, an adjudication's (a third reader who saw both
    reasons), else the latest, and the finding is listed under ``disagreements``."""
    current = [json.loads(p.read_text()) for p in (sample_path(name), sample_path(name, "high")) if p.exists()]
    given: dict[tuple, list[dict]] = {}
    for doc in [*_committed_samples(name), *current, *census_inputs(name)]:
        source = f"sample seed {doc['seed']}" if "seed" in doc else doc.get("source", "census")
        for row in doc["findings"]:
            if row.get("verdict") not in ("true", "false"):
                continue
            entry = {"path": row["path"], "kernel": row["kernel"], "param": row["param"], "code": row["code"],
                     "arg": row.get("arg"), "verdict": row["verdict"], "reason": row.get("reason", ""),
                     "judged_at": doc["commit"], "source": source}
            if row.get("misled_by"):
                entry["misled_by"] = row["misled_by"]
            # a sample committed many times is one reading, in the place of its first version, with its
            # latest verdict (one corrected later)
            readings = given.setdefault(finding_key(entry), [])
            same = [i for i, r in enumerate(readings) if r["source"] == source]
            if same:
                readings[same[0]] = entry
            else:
                readings.append(entry)
    verdicts, disagreements = [], []
    for key, readings in sorted(given.items()):
        if len({r["verdict"] for r in readings if r["source"] != "adjudication"}) > 1:
            disagreements.append({"key": list(key), "verdicts": [
                {k: r[k] for k in ("verdict", "reason", "source")} for r in readings]})
        adjudicated = [r for r in readings if r["source"] == "adjudication"]
        verdicts.append(dict((adjudicated or readings)[-1], readers=len(readings)))
    store = {"codebase": name, "how_to_judge": HOW_TO_JUDGE, "verdicts": verdicts, "disagreements": disagreements}
    verdicts_path(name).write_text(json.dumps(store, indent=1) + "\n")
    return store


def census_precision(name: str) -> dict | None:
    """Precision over the whole population of the last run (default-level findings on unannotated
    kernels), from every verdict given on them: judged / population, true / judged, per level."""
    path = verdicts_path(name)
    if not path.exists() or not (RESULTS / f"{name}.json").exists():
        return None
    verdicts = {finding_key(v): v["verdict"] for v in json.loads(path.read_text())["verdicts"]}
    population = [f for f in json.loads((RESULTS / f"{name}.json").read_text())["unannotated_findings"]
                  if f["level"] in DEFAULT_LEVELS]
    out = {"file": os.path.relpath(path, ROOT), "population": len(population)}
    for lv in ("all", *DEFAULT_LEVELS):
        rows = [verdicts.get(finding_key(f)) for f in population if lv == "all" or f["level"] == lv]
        k = rows.count("true")
        out[lv] = {"population": len(rows), "judged": k + rows.count("false"), **share_true(k, k + rows.count("false"))}
    return out


def census(names: list[str], add: list[str]) -> None:
    """Collect the verdicts (``add``: judged files to keep under RESULTS/census/ first), write
    NAME_census_todo.json with the findings of the last run that have none (for readers to fill in and
    hand back with --add), print the coverage."""
    if add:
        (RESULTS / "census").mkdir(exist_ok=True)
    for p in map(pathlib.Path, add):  # kept with the results: the verdicts are made from them alone
        if p.resolve() != (RESULTS / "census" / p.name).resolve():
            shutil.copyfile(p, RESULTS / "census" / p.name)
    summary = json.loads((RESULTS / "summary.json").read_text())
    for name in names:
        store = collect_verdicts(name)
        judged = {finding_key(v) for v in store["verdicts"]}
        details = json.loads((RESULTS / f"{name}.json").read_text())
        population = [f for f in details["unannotated_findings"] if f["level"] in DEFAULT_LEVELS]
        todo = [dict(f, verdict=None, reason="") for f in population if finding_key(f) not in judged]
        todo_path = RESULTS / f"{name}_census_todo.json"
        if todo:
            todo_path.write_text(json.dumps({"codebase": name, "source": "census",
                                             "commit": details.get("jitguard_commit")
                                             or summary["versions"]["jitguard_commit"],
                                             "how_to_judge": HOW_TO_JUDGE, "findings": todo}, indent=1) + "\n")
        elif todo_path.exists():
            todo_path.unlink()
        got = census_precision(name)["all"]
        print(f"{name}: {got['judged']} of {got['population']} default-level findings judged, {got['true']} true "
              f"({got['precision']}); {len(store['disagreements'])} judged both ways"
              + (f"; {len(todo)} to judge in {todo_path}" if todo else ""))


# ---------------------------------------------------------------------------------------------


def scan_with(tree: pathlib.Path, repo: pathlib.Path) -> dict:
    """{(path, kernel, param, code): (level, message)} of ``jitguard scan --confidence low`` of
    ``tree`` with the jitguard source at ``repo`` (another commit's, for --base)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "scan.json"
        argv = ["jitguard", "scan", "--no-cache", "--no-respect-gitignore", "--isolated", "--format", "json",
                "-o", str(out), *(["--confidence", "low"] if _has_levels(repo) else []), "."]
        # the jitguard of ``repo``, not an editable install's (its finder sits before sys.path)
        code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
                f"sys.path.insert(0, {str(repo)!r}); from jitguard.cli import main; sys.argv = {argv!r}; main()")
        subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True)
        doc = json.loads(out.read_text())
    return {(f["path"], f["kernel"], f["param"], f["code"]): (f.get("confidence", "medium"), f["message"])
            for f in doc["findings"]}


def _has_levels(repo: pathlib.Path) -> bool:
    cli = repo / "jitguard" / "cli"
    return any("--confidence" in (cli / f).read_text() for f in ("scan.py", "options.py") if (cli / f).exists())


def differences(tree: pathlib.Path, base_repo: pathlib.Path) -> dict:
    """The findings that differ between this jitguard and the one at ``base_repo``: the ones to read."""
    new, old = scan_with(tree, ROOT), scan_with(tree, base_repo)
    row = ("path", "kernel", "param", "code")
    return {"added": [dict(zip(row, k), level=new[k][0], message=new[k][1]) for k in sorted(set(new) - set(old))],
            "removed": [dict(zip(row, k), level=old[k][0], message=old[k][1]) for k in sorted(set(old) - set(new))],
            "level_changed": [dict(zip(row, k), level=new[k][0], was=old[k][0]) for k in sorted(set(new) & set(old))
                              if new[k][0] != old[k][0]]}


def versions() -> dict:
    from importlib.metadata import version

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "jitguard"],
                                capture_output=True, text=True).stdout.strip())
    return {"python": platform.python_version(), "libcst": version("libcst"), "jitguard": __version__,
            "jitguard_commit": commit, "jitguard_source_modified": dirty}


def run_one(cb: Codebase, args, code: str, tmp: str) -> tuple[dict, dict]:
    tree = fetch(cb)
    files = sorted(tree.rglob("*.py"))
    wheel = _wheel_of(cb)
    entry: dict = {"codebase": cb.name, "spec": cb.spec, "pip_download": " ".join(
        ["pip download --no-deps --only-binary=:all:", *cb.pip_args, cb.spec]),
        "wheel": wheel.name if wheel else None, "sha256": sha256_file(wheel) if wheel else None,
        "py_files": len(files), "bytes": sum(p.stat().st_size for p in files)}
    t0 = time.perf_counter()
    entry["timing"] = None if args.no_timing else timing(tree, files, code, args.repeat, tmp)
    result, seconds = scan(tree, keep_facts=False)
    entry.update({"files_scanned": result.files_scanned, "files_analyzed": result.files_analyzed,
                  "kernels": result.kernels, "launches": result.launches,
                  "findings": len(result.findings), "by_code_level": by_code_level(result.findings),
                  "default_findings": sum(level_of(f) in DEFAULT_LEVELS for f in result.findings),
                  "file_errors": [e.to_dict() for e in result.errors],
                  "internal_errors": [e.to_dict() for e in result.internal_errors]})
    rec, details = recall_and_proxy(cb, tree, pathlib.Path(args.work), args.reuse_strip)
    entry["recall"] = rec
    annotated = {tuple(k) for k in details["annotated_kernels"]}
    details["unannotated_findings"] = unannotated(result, tree, annotated)
    entry["unannotated_findings"] = {lv: sum(f["level"] == lv for f in details["unannotated_findings"]) for lv in LEVELS}
    entry["unannotated_findings_varying_codes_default"] = sum(
        f["level"] in DEFAULT_LEVELS and f["code"] in VARYING_CODES for f in details["unannotated_findings"])
    entry["hand_check"] = sample_precision(cb.name)
    if args.base_repo is not None:
        details["differences"] = differences(tree, args.base_repo)
        entry["differences"] = {k: len(v) for k, v in details["differences"].items()}
    entry["seconds"] = round(time.perf_counter() - t0, 1)
    return entry, details


def summary_md(doc: dict) -> str:
    lines = ["# jitguard scan on six Triton codebases", "",
             f"`python bench/codebases.py` on {doc['date']} at jitguard {doc['versions']['jitguard_commit'][:10]} "
             f"(Python {doc['versions']['python']}, {doc['machine']['cpus_usable']} CPUs, {doc['machine']['cpu']}). "
             "Every figure is in summary.json; misses, likely false positives and unannotated findings in NAME.json.",
             "", "| codebase | .py files | kernels | launches | findings (default levels / all) | file / internal errors "
             "| ast.parse s | cold s | cold / ast | warm s | CPU: ast / cold / ratio |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in doc["codebases"]:
        t = e["timing"]
        timed = (f"{t['ast_parse_s']:.2f} | {t['cold_s']:.2f} | {t['cold_over_ast']:.2f}x | {t['warm_s']:.2f} | "
                 f"{t['ast_parse_cpu_s']:.2f} / {t['cold_cpu_s']:.2f} / {t['cold_over_ast_cpu']:.2f}x"
                 if t else "not timed (--no-timing) | | | | ")
        lines.append(f"| {e['codebase']} | {e['py_files']} | {e['kernels']} | {e['launches']} | {e['default_findings']} / "
                     f"{e['findings']} | {len(e['file_errors'])} / {len(e['internal_errors'])} | {timed} |")
    lines += ["", "## Findings per rule and level (high / medium / low)", "",
              "| codebase | " + " | ".join(f"JG00{i}" for i in range(1, 8)) + " |", "|---" * 8 + "|"]
    for e in doc["codebases"]:
        cells = []
        for i in range(1, 8):
            row = e["by_code_level"].get(f"JG00{i}")
            cells.append("/".join(str(row[lv]) for lv in LEVELS) if row else "")
        lines.append(f"| {e['codebase']} | " + " | ".join(cells) + " |")
    lines += ["", "## Stripped-annotation recall and precision proxy (JG001/JG002)", "",
              "| codebase | annotations (dns entries / pairs) | recall, default levels | recall, any level | "
              "proxy, default | proxy, any | misses judged (varies/fixed/no-op/unjudged) | recall over varying pairs |",
              "|---|---|---|---|---|---|---|---|"]
    for e in doc["codebases"]:
        r = e["recall"]
        a, d, y = r["annotations"], r["default_levels"], r["any_level"]
        v = r["miss_verdicts"]

        def fmt(x):
            return "-" if x is None else f"{x:.3f}"
        lines.append(f"| {e['codebase']} | {a['do_not_specialize_entries']} / {a['pairs']} | {fmt(d['recall'])} "
                     f"({d['hits']}/{a['pairs']}) | {fmt(y['recall'])} | {fmt(d['precision_proxy'])} "
                     f"({d['matching_annotation']}/{d['findings_on_annotated_kernels']}) | {fmt(y['precision_proxy'])} | "
                     f"{v.get('varies', 0) + v.get('unclear', 0)}/{v.get('fixed', 0)}/{v.get('no-op', 0)}/"
                     f"{v.get('unjudged', 0)} | {fmt(r['recall_over_varying_pairs'])} |")
    def judged_table(title: str, key: str, first: str, empty: str, row) -> None:
        lines.extend(["", f"## {title}", "", f"| codebase | {first} | true / judged | precision (95% interval) | high | "
                      "medium |", "|---|---|---|---|---|---|---|"])
        for e in doc["codebases"]:
            x = e.get(key)
            lines.append(f"| {e['codebase']} | {row(x)} |" if x else f"| {e['codebase']} | {empty} | | | | | |")

    def count(true: int, n: int) -> str:
        return f"{true}/{n}" if n else "-"

    judged_table("Hand-checked samples (default-level findings on unannotated kernels)", "hand_check",
                 "seed | at commit", "no sample yet", lambda h: (
                     f"{h['seed']} | {h['commit'][:10]} | {h['all']['true']}/{h['judged']}"
                     f"{' (incomplete)' if h.get('incomplete') else ''} | {h['all']['precision']} "
                     f"{h['all']['interval_95']} | {count(h['high']['true'], h['high']['n'])} | "
                     f"{count(h['medium']['true'], h['medium']['n'])}"))
    judged_table("Census (every default-level finding on unannotated kernels, with the verdicts given so far)",
                 "census", "findings | judged", "no verdicts yet", lambda c: (
                     f"{c['population']} | {c['all']['judged']} | {c['all']['true']}/{c['all']['judged']} | "
                     f"{c['all']['precision']} {c['all']['interval_95']} | {count(c['high']['true'], c['high']['judged'])} | "
                     f"{count(c['medium']['true'], c['medium']['judged'])}"))
    lines += ["", "## Recall misses by reason", ""]
    for e in doc["codebases"]:
        reasons = e["recall"]["miss_reasons"]
        if reasons:
            lines.append(f"- **{e['codebase']}**: " + "; ".join(f"{r} ({n})" for r, n in reasons.items()))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    global RESULTS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", nargs="?", default="run", choices=("run", "sample", "rejudge", "census"))
    ap.add_argument("--only", default="", help="comma-separated codebase names (default: all)")
    ap.add_argument("--repeat", type=int, default=2, help="interleaved timing repeats; the best is kept")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "jitguard-codebases"),
                    help="where the stripped copies go")
    ap.add_argument("--reuse-strip", action="store_true", help="reuse the stripped copies of an earlier run")
    ap.add_argument("--results", default=str(BENCH / "results" / "codebases"), help="where the results go (default bench/results/codebases)")
    ap.add_argument("--no-timing", action="store_true", help="skip the timing (figures only; for trying changes)")
    ap.add_argument("--base", help="also scan with the jitguard of this commit and list the findings that differ")
    ap.add_argument("--n", type=int, default=25, help="sample: findings drawn per codebase")
    ap.add_argument("--seed", type=int, default=None, help="sample: the seed (printed; default: from the clock)")
    ap.add_argument("--force", action="store_true", help="sample: draw again over an existing sample")
    ap.add_argument("--level", choices=LEVELS, default=None,
                    help="sample: draw from this level alone into NAME_LEVEL_sample.json (high: its verdicts "
                         "join the default sample's high findings in the high-level precision)")
    ap.add_argument("--add", nargs="*", default=[], metavar="FILE",
                    help="census: judged files (NAME_census_todo.json filled in, adjudications) to keep under census/")
    args = ap.parse_args(argv)
    RESULTS = pathlib.Path(args.results)
    names = [n for n in args.only.split(",") if n] or [cb.name for cb in CODEBASES]
    unknown = set(names) - {cb.name for cb in CODEBASES}
    if unknown:
        ap.error(f"unknown codebase(s): {', '.join(sorted(unknown))}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.command == "rejudge":
        rejudge(names)
        return 0
    if args.command == "census":
        census(names, args.add)
        rejudge(names)
        return 0
    if args.command == "sample":
        seed = args.seed if args.seed is not None else int(time.time())
        print(f"seed {seed}")
        draw_samples(names, args.n, seed, args.force, args.level)
        return 0

    summary_path = RESULTS / "summary.json"
    # with --only, the other codebases keep the figures of the last run (marked so) if it had them all
    previous = {e["codebase"]: e for e in json.loads(summary_path.read_text())["codebases"]
                if e["timing"] and "cold_over_ast_cpu" in e["timing"]} if summary_path.exists() and args.only else {}
    machine = _machine()
    doc = {"benchmark": "codebases", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "machine": machine, "versions": versions(),
           "method": f"timing: {args.repeat} interleaved repeats of (ast.parse of every .py file in this process, "
                     "cold `jitguard scan TREE --format json --cache-dir FRESH` in a new process, the same again "
                     "warm); best of each; jitguard's bytecode written once before timing, as an installed "
                     "package has it. Figures from in-process scans with select=JG, no cache.",
           "codebases": []}
    Path = pathlib.Path
    os.makedirs(args.work, exist_ok=True)
    args.base_repo = None
    if args.base:
        args.base_repo = Path(tempfile.mkdtemp()) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(args.base_repo), args.base], cwd=ROOT,
                       check=True, capture_output=True)
        doc["base"] = args.base
    try:
        run_all(args, names, previous, doc)
    finally:
        if args.base_repo is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(args.base_repo)], cwd=ROOT, capture_output=True)
    machine["loadavg_at_end"] = list(os.getloadavg())
    doc["targets"] = targets(doc)
    summary_path.write_text(json.dumps(doc, indent=1) + "\n")
    (RESULTS / "summary.md").write_text(summary_md(doc))
    for k, v in doc["targets"].items():
        print(f"  {k}: {v}")
    print(f"wrote {summary_path}, {RESULTS / 'summary.md'}")
    return 0


def run_all(args, names, previous, doc) -> None:
    Path = pathlib.Path
    with tempfile.TemporaryDirectory(prefix="jitguard-codebases-") as tmp:
        code = snapshot_jitguard(os.path.join(tmp, "code"))
        for cb in CODEBASES:
            if cb.name not in names:
                if cb.name in previous:
                    doc["codebases"].append(dict(previous[cb.name], from_earlier_run=True))
                continue
            entry, details = run_one(cb, args, code, tmp)
            doc["codebases"].append(entry)
            # the code the findings came from, with them (a sample drawn from this file cites it)
            details = {k: doc["versions"][k] for k in ("jitguard_commit", "jitguard_source_modified")} | details
            Path(RESULTS / f"{cb.name}.json").write_text(json.dumps(details, indent=1) + "\n")
            entry["census"] = census_precision(cb.name)  # the verdicts given so far, on this run's findings
            r, t = entry["recall"], entry["timing"] or {"ast_parse_s": 0, "cold_s": 0, "cold_over_ast": 0,
                                                        "cold_over_ast_cpu": 0, "warm_s": 0}
            d = r["default_levels"]
            print(f"{cb.name:<14} {entry['py_files']:>5} files {entry['kernels']:>5} kernels "
                  f"{entry['default_findings']:>5}/{entry['findings']:<5} findings  errors {len(entry['file_errors'])}"
                  f"/{len(entry['internal_errors'])} internal  ast {t['ast_parse_s']:.2f}s cold {t['cold_s']:.2f}s "
                  f"({t['cold_over_ast']:.2f}x; CPU {t['cold_over_ast_cpu']:.2f}x) warm {t['warm_s']:.2f}s  recall {d['recall']} ({d['hits']}/"
                  f"{r['annotations']['pairs']}) proxy {d['precision_proxy']} varying {r['recall_over_varying_pairs']}",
                  flush=True)
            for tag, rows in (details.get("differences") or {}).items():
                for row in rows:
                    print(f"  {tag}: {row['code']} {row['kernel'].rsplit('.', 1)[-1]}.{row['param']} "
                          f"{row.get('was', '')}{' -> ' if row.get('was') else ''}{row['level']}  ({row['path']})")


def targets(doc: dict) -> dict:
    """The measurable targets, each True / False / None (not measured yet)."""
    out = {}
    for e in doc["codebases"]:
        n, r, t = e["codebase"], e["recall"], e["timing"]
        out[f"{n}: 0 internal errors"] = not e["internal_errors"] and not r["stripped_scan"]["internal_errors"]
        if t:
            out[f"{n}: cold <= 1.5x ast.parse (wall)"] = t["cold_over_ast"] <= 1.5
            out[f"{n}: cold <= 1.5x ast.parse (CPU)"] = t["cold_over_ast_cpu"] <= 1.5
        if r["annotations"]["pairs"] >= 20:
            v = r["recall_over_varying_pairs"]
            out[f"{n}: recall over varying pairs >= 0.85"] = None if r["miss_verdicts"].get("unjudged") else v >= 0.85
        h = e.get("hand_check")
        if h and not h.get("incomplete"):
            out[f"{n}: hand-checked precision, default levels >= 0.92"] = h["all"]["precision"] >= 0.92
            if h["high"]["n"]:
                out[f"{n}: hand-checked precision, high >= 0.98"] = h["high"]["precision"] >= 0.98
        c = e.get("census")
        if c and c["all"]["judged"] == c["population"]:
            out[f"{n}: census precision, default levels >= 0.92"] = c["all"]["precision"] >= 0.92
            if c["high"]["judged"]:
                out[f"{n}: census precision, high >= 0.98"] = c["high"]["precision"] >= 0.98
        if n == "vllm":
            if t:
                out["vllm: warm <= 0.5 s"] = t["warm_s"] <= 0.5
            d = r["default_levels"]
            out["vllm: raw recall >= 0.66 with proxy >= 0.88"] = d["recall"] >= 0.66 and d["precision_proxy"] >= 0.88
    return out


if __name__ == "__main__":
    sys.exit(main())
