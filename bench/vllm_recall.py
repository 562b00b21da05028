"""Recall and a precision proxy of `jitguard scan` on vLLM 0.33.0, against its own do_not_specialize.

vLLM's ~380 hand-written do_not_specialize entries are each a parameter somebody found varying per
call. This script strips them all (bench/strip_do_not_specialize.py), scans the stripped tree with
the real runner (jitguard.static.runner.scan_paths, no cache) and measures:

* recall: share of stripped (kernel, parameter) pairs that the scan reports as JG001 or JG002;
* precision proxy: among JG001/JG002 findings on kernels that carried any annotation, the share that
  match an annotated parameter (humans looked at those kernels);

and lists every miss and every likely false positive with the reason (the argument's provenance and
evidence, or why no launch was bound). It also scans the unstripped tree and writes the JG001/JG002
findings on kernels vLLM did not annotate (the input of the hand check in vllm_handcheck.md).

    python bench/fetch_vllm.py            # once: bench/corpus/vllm-0.33.0/ (pip download --no-deps)
    python bench/vllm_recall.py           # -> bench/results/vllm_recall.json (+ _unannotated.json)
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from jitguard import __version__  # noqa: E402
from jitguard.config import Config  # noqa: E402
from jitguard.static.link import build_program  # noqa: E402
from jitguard.static.runner import scan_paths  # noqa: E402

import strip_do_not_specialize as strip  # noqa: E402

CORPUS = BENCH / "corpus" / "vllm-0.33.0"
STRIPPED = BENCH / "corpus" / "vllm-0.33.0-stripped"
RESULTS = BENCH / "results"
CODES = ("JG001", "JG002")


def module_of(rel: str) -> str:
    return strip.module_name(rel)


def key_of(path: str, kernel: str, root: pathlib.Path) -> tuple[str, str]:
    """(path relative to the corpus root, kernel qualname relative to its module)."""
    rel = os.path.relpath(os.path.abspath(path), root)
    mod = module_of(rel)
    local = kernel[len(mod) + 1:] if kernel.startswith(mod + ".") else kernel.rsplit(".", 1)[-1]
    return rel, local


def scan(root: pathlib.Path, jobs: int | None):
    config = Config(select=("JG",), root=str(root))
    t = time.perf_counter()
    result = scan_paths([str(root)], config, jobs=jobs, use_cache=False, keep_facts=True)
    return result, time.perf_counter() - t


def explain_miss(program, root, rel, local, param) -> dict:
    """Why a stripped (kernel, param) pair was not reported (paths relative to ``root``, so that the
    results do not depend on where the stripped copy was made)."""
    prefix = os.path.join(str(root), "")

    def at(b) -> str:
        return f"{os.path.relpath(b.file.path, root)}:{b.launch.line}"
    k = None
    for cand, f in program.all_kernels:
        if key_of(f.path, cand.qualname, root) == (rel, local):
            k = cand
            break
    if k is None:
        return {"reason": "kernel not discovered"}
    p = k.param(param)
    launches = [b for b in program.launches if b.kernel is k]
    if not launches:
        return {"reason": "no launch of the kernel found in the tree"}
    if p is not None and p.pointer:
        return {"reason": "parameter looks like a pointer"}
    args = [(b, b.args.get(param)) for b in launches]
    mapped = [(b, a) for b, a in args if a is not None]
    if not mapped:
        return {"reason": "argument not mapped at any launch (star-args, defaulted or heuristics)",
                "launches": [at(b) for b in launches]}
    return {
        "reason": "provenance " + "/".join(sorted({a.provenance for _, a in mapped}))
        + ("" if all(a.value_type in ("int", "unknown") for _, a in mapped) else
           " (value type " + "/".join(sorted({a.value_type for _, a in mapped})) + ")"),
        "args": [{"at": at(b), "arg": a.text, "provenance": a.provenance, "value_type": a.value_type,
                  "evidence": [e.replace(prefix, "") for e in a.evidence[:4]]} for b, a in mapped[:3]],
    }


def _miss_detail(arg: dict) -> str:
    """Which rule of docs/provenance.md classified a missed argument."""
    ev = " ".join(arg.get("evidence") or [])
    if arg.get("value_type") in ("float", "bool"):
        return f"a {arg['value_type']} (never value-specialized)"
    for needle, label in (
        ("stride of an existing tensor", "stride of a tensor passed in (a model dimension by rule)"),
        ("non-leading dimension", "non-leading dim of a tensor passed in (a model dimension by rule)"),
        ("weight-like", "dim/size of a weight-like or cache tensor"),
        ("attribute of self", "self/config attribute"),
        ("name suggests a fixed", "name of an entry parameter says fixed"),
        ("name says a fixed", "name says fixed over a leading-dim guess"),
        ("bucketed", "bucketed"),
        ("literal", "assigned a literal"),
    ):
        if needle in ev:
            return label
    return "other" if ev else "no evidence (value from another module or an unknown call)"


def summary_md(out: dict) -> str:
    """A readable summary of the JSON: figures, misses by reason, likely false positives."""
    st, sc = out["stripped"], out["scan"]
    lines = [
        "# vLLM 0.33.0: recall and precision proxy of jitguard scan",
        "",
        f"Generated by `python bench/vllm_recall.py` on {out['date']} (jitguard {out['jitguard']}, "
        f"Python {out['machine']['python']}). Every figure is in vllm_recall.json.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| do_not_specialize entries stripped | {st['do_not_specialize_entries']} "
        f"(+ {st['entries'] - st['do_not_specialize_entries']} do_not_specialize_on_alignment) on {st['kernels']} kernels |",
        f"| (kernel, parameter) pairs measured | {st['pairs']} |",
        f"| recall (pairs reported as JG001/JG002) | {out['recall']:.3f} ({out['recall_hits']}/{st['pairs']}) |",
        f"| recall over int parameters (entries on floats/bools are no-ops, JG006) | {out['recall_int_params']:.3f} |",
        f"| recall over int parameters of kernels with a launch jitguard can see | {out['recall_launch_visible']:.3f} |",
        f"| precision proxy (findings on annotated kernels that match an annotation) | {out['precision_proxy']:.3f} "
        f"({out['findings_matching_annotation']}/{out['findings_on_annotated_kernels']}) |",
        f"| precision proxy counting do_not_specialize_on_alignment parameters as annotated | {out['precision_proxy_any_annotation']:.3f} |",
        f"| recall over pairs whose value varies per call (misses judged in vllm_recall_judged.json; hits counted as varying) | {out['recall_over_varying_pairs']:.3f} |",
        f"| internal errors / file errors | {len(sc['internal_errors'])} / {len(sc['errors'])} |",
        f"| kernels / launches bound (stripped tree) | {sc['kernels']} / {sc['launches_bound']} |",
        f"| JG001/JG002 findings on unannotated kernels (unstripped tree) | {out['unannotated_findings']} "
        "(hand check: vllm_handcheck.md) |",
        "",
        "## Misses by reason",
        "",
        "| reason | pairs |",
        "|---|---|",
    ]
    for reason, n in sorted(out["miss_reasons"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {reason} | {n} |")
    vb = out.get("miss_verdicts", {})
    lines += ["", "## Misses by verdict (does the annotated value vary per call? read from the code)", "",
              "| verdict | pairs |", "|---|---|"]
    for verdict, n in sorted(vb.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {verdict} | {n} |")
    lines += ["", "Misses judged to vary (or unclear): what a better analysis could still find.", "",
              "| kernel.param | verdict | why it varies / reason | jitguard's class |", "|---|---|---|---|"]
    for m in out["misses"]:
        if m.get("verdict") in ("varies", "unclear", "unjudged"):
            lines.append(f"| `{m['kernel']}.{m['param']}` | {m['verdict']} | {m.get('verdict_reason', '').replace('|', '/')} | "
                         f"{m.get('detail', m['reason'])} |")
    lines += ["", "## Likely false positives (findings on annotated kernels that match no annotation)", "",
              "| kernel.param | code | argument | evidence | annotated |", "|---|---|---|---|---|"]
    for f in out["likely_false_positives"]:
        ev = " <- ".join(e.replace("|", "/") for e in f["evidence"][:2])
        lines.append(f"| `{f['kernel']}.{f['param']}` | {f['code']} | `{(f['arg'] or '').replace('|', '/')}` | {ev} | "
                     f"{', '.join(f['annotated_params'][:4])} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=str(CORPUS), help="unpacked vLLM tree (contains vllm/)")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", default=str(RESULTS / "vllm_recall.json"))
    ap.add_argument("--reuse-strip", action="store_true", help="reuse an earlier stripped copy and its record")
    args = ap.parse_args(argv)
    corpus = pathlib.Path(args.corpus)
    if not (corpus / "vllm").is_dir():
        print(f"no corpus at {corpus}: run python bench/fetch_vllm.py first", file=sys.stderr)
        return 2

    # 1. strip (LibCST) and record the ground truth
    t = time.perf_counter()
    record_path = STRIPPED.parent / "stripped.json"
    if not (args.reuse_strip and record_path.exists() and STRIPPED.is_dir()):
        strip.main([str(corpus), str(STRIPPED), "--record", str(record_path)])
    strip_s = time.perf_counter() - t
    record = json.loads(record_path.read_text())
    truth, unresolved_entries = strip.ground_truth(record)
    annotated_any = {(e["path"], e["kernel"][len(e["module"]) + 1:]) for e in record["entries"]}
    pairs = {(k[0], k[1], p) for k, ps in truth.items() for p in ps}

    # 2. scan the stripped tree
    result, scan_s = scan(STRIPPED, args.jobs)
    program = build_program(result.facts)
    found = {}
    for f in result.findings:
        if f.code in CODES and f.param:
            rel, local = key_of(f.details.get("kernel_path", f.path), f.kernel, STRIPPED)
            found.setdefault((rel, local, f.param), f)
    hits = pairs & set(found)
    misses = sorted(pairs - set(found))
    recall = len(hits) / len(pairs) if pairs else 0.0

    on_annotated = {k: f for k, f in found.items() if (k[0], k[1]) in annotated_any}
    matching = {k for k in on_annotated if k in pairs}
    precision = len(matching) / len(on_annotated) if on_annotated else 0.0
    false_pos = []
    for k in sorted(set(on_annotated) - matching):
        f = on_annotated[k]
        launch = (f.details.get("launches") or [{}])[0]
        false_pos.append({"path": k[0], "kernel": k[1], "param": k[2], "code": f.code,
                          "arg": launch.get("arg"), "at": f"{launch.get('path')}:{launch.get('line')}",
                          "evidence": launch.get("evidence", [])[:4],
                          "annotated_params": sorted(truth.get((k[0], k[1]), set()))})
    miss_list = [{"path": m[0], "kernel": m[1], "param": m[2], **explain_miss(program, STRIPPED, *m)} for m in misses]
    by_reason: dict[str, int] = {}
    for m in miss_list:
        r = m["reason"].split(" (")[0]
        if r.startswith("provenance") and m.get("args"):
            m["detail"] = _miss_detail(m["args"][0])
            r = f"{r}: {m['detail']}"
        by_reason[r] = by_reason.get(r, 0) + 1

    # 3. the unstripped tree: findings on kernels vLLM did not annotate (hand-check input)
    result_u, scan_u_s = scan(corpus, args.jobs)
    unannotated = []
    for f in result_u.findings:
        if f.code not in CODES or not f.param:
            continue
        rel, local = key_of(f.details.get("kernel_path", f.path), f.kernel, corpus)
        if (rel, local) in annotated_any:
            continue
        launch = (f.details.get("launches") or [{}])[0]
        unannotated.append({"code": f.code, "path": rel, "line": f.line, "kernel": local, "param": f.param,
                            "message": f.message, "arg": launch.get("arg"),
                            "at": f"{launch.get('path')}:{launch.get('line')}",
                            "evidence": launch.get("evidence", [])[:5], "use_kinds": f.details.get("use_kinds")})

    # Recall over the pairs whose value varies per call: vllm_recall_judged.json holds a verdict for
    # every pair missed (read from the code: varies / fixed / no-op / unclear). Hits are counted as
    # varying (not judged one by one); misses without a verdict stay in the denominator.
    judged_path = RESULTS / "vllm_recall_judged.json"
    verdicts = {}
    if judged_path.exists():
        for jp in json.loads(judged_path.read_text()).get("pairs", []):
            verdicts[(jp["path"], jp["kernel"], jp["param"])] = (jp["verdict"], jp["reason"])
    for m in miss_list:
        v = verdicts.get((m["path"], m["kernel"], m["param"]))
        m["verdict"], m["verdict_reason"] = v if v else ("unjudged", "")
    by_verdict: dict[str, int] = {}
    for m in miss_list:
        by_verdict[m["verdict"]] = by_verdict.get(m["verdict"], 0) + 1
    vary_missed = [m for m in miss_list if m["verdict"] in ("varies", "unclear", "unjudged")]
    recall_varying = len(hits) / (len(hits) + len(vary_missed)) if hits or vary_missed else 0.0
    # Precision proxy counting do_not_specialize_on_alignment parameters as annotated too
    # (stripped as well; the headline counts do_not_specialize pairs only, like recall).
    dnsoa = {(e["path"], e["kernel"][len(e["module"]) + 1:], e["param"]) for e in record["entries"]
             if e["option"] != "do_not_specialize" and e["param"] is not None}
    matching_any = {k for k in on_annotated if k in pairs or k in dnsoa}
    precision_any = len(matching_any) / len(on_annotated) if on_annotated else 0.0

    # Two views that explain the raw figure (the raw recall stays the headline):
    noop = [m for m in miss_list if "never value-specialized" in m.get("detail", "")]
    unseen = [m for m in miss_list if m["reason"].startswith("no launch")]
    int_pairs = len(pairs) - len(noop)
    seen_pairs = int_pairs - len(unseen)
    out = {
        "benchmark": "vllm_recall",
        "jitguard": __version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
        "corpus": json.loads((corpus / "CORPUS.json").read_text()) if (corpus / "CORPUS.json").exists() else str(corpus),
        "stripped": {"entries": len(record["entries"]),
                     "do_not_specialize_entries": sum(e["option"] == "do_not_specialize" for e in record["entries"]),
                     "kernels": len(annotated_any), "pairs": len(pairs),
                     "non_literal": record["unresolved"], "entries_naming_no_param": unresolved_entries,
                     "seconds": round(strip_s, 1)},
        "scan": {"files_scanned": result.files_scanned, "files_analyzed": result.files_analyzed,
                 "errors": [e.to_dict() for e in result.errors],
                 "internal_errors": [e.to_dict() for e in result.internal_errors],
                 "kernels": len(program.kernels), "launches_bound": len(program.launches),
                 "seconds_stripped": round(scan_s, 1), "seconds_unstripped": round(scan_u_s, 1)},
        "recall": round(recall, 4),
        "recall_hits": len(hits),
        # entries on float/bool params are no-ops (JG006 reports them): left out of this one
        "recall_int_params": round(len(hits) / int_pairs, 4) if int_pairs else 0.0,
        # ...and pairs on kernels whose launches go through an indirection jitguard does not follow
        "recall_launch_visible": round(len(hits) / seen_pairs, 4) if seen_pairs else 0.0,
        "precision_proxy": round(precision, 4),
        "precision_proxy_any_annotation": round(precision_any, 4),
        "recall_over_varying_pairs": round(recall_varying, 4),
        "miss_verdicts": by_verdict,
        "findings_on_annotated_kernels": len(on_annotated),
        "findings_matching_annotation": len(matching),
        "miss_reasons": by_reason,
        "misses": miss_list,
        "likely_false_positives": false_pos,
        "unannotated_findings": len(unannotated),
    }
    pathlib.Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    unannotated_path = pathlib.Path(args.out).with_name(pathlib.Path(args.out).stem + "_unannotated.json")
    unannotated_path.write_text(json.dumps(unannotated, indent=1) + "\n")
    pathlib.Path(args.out).with_suffix(".md").write_text(summary_md(out))
    print(f"{'stripped pairs':<34}{len(pairs):>8}")
    print(f"{'recall (JG001/JG002)':<34}{recall:>8.3f}  ({len(hits)}/{len(pairs)})")
    print(f"{'  over int params / visible launch':<34}{out['recall_int_params']:>8.3f}{out['recall_launch_visible']:>8.3f}")
    print(f"{'precision proxy':<34}{precision:>8.3f}  ({len(matching)}/{len(on_annotated)})")
    print(f"{'  counting _on_alignment params':<34}{precision_any:>8.3f}  ({len(matching_any)}/{len(on_annotated)})")
    print(f"{'recall over pairs that vary':<34}{recall_varying:>8.3f}  ({len(hits)}/{len(hits) + len(vary_missed)})")
    print("misses by verdict:", json.dumps(by_verdict))
    print(f"{'internal errors':<34}{len(result.internal_errors) + len(result_u.internal_errors):>8}")
    print(f"{'file errors':<34}{len(result.errors):>8}")
    print(f"{'unannotated JG001/JG002 findings':<34}{len(unannotated):>8}")
    print("miss reasons:", json.dumps(by_reason))
    print(f"-> {args.out}, {unannotated_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
