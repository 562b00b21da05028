"""jitguard scan over vLLM 0.33.0's Gluon kernels (``@gluon.jit``), with hand verdicts.

Scans the whole vLLM tree (bench/corpus/vllm-0.33.0: cross-module launches need it), lists every
Gluon kernel (its jit decorator names ``gluon``), every launch of one with the provenance of each
integer or constexpr argument, and every finding on one. Verdicts are read by hand from the code
and kept in bench/results/gluon_vllm_verdicts.json (kernel -> verdict and reason; finding ->
verdict and reason); this script joins them, so a finding without a verdict shows as "unchecked".

    python bench/gluon_vllm.py      # writes bench/results/gluon_vllm.json, prints a table
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", default=str(ROOT / "bench" / "corpus" / "vllm-0.33.0"))
    ap.add_argument("--verdicts", default=str(ROOT / "bench" / "results" / "gluon_vllm_verdicts.json"))
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "gluon_vllm.json"))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()

    import jitguard
    from jitguard.config import Config
    from jitguard.static.runner import scan_paths

    tree = os.path.realpath(args.tree)
    os.chdir(tree)
    t0 = time.perf_counter()
    r = scan_paths(["vllm"], Config(root=tree, respect_gitignore=False), jobs=args.jobs,
                   use_cache=False, keep_facts=True)
    seconds = time.perf_counter() - t0
    verdicts = json.loads(Path(args.verdicts).read_text()) if Path(args.verdicts).exists() else {}

    kernels = []
    for f in r.facts:
        lines = None
        for k in f.kernels:
            if lines is None:
                lines = Path(f.path).read_text(encoding="utf-8", errors="replace").splitlines()
            deco = " ".join(lines[k.decorator_line - 1:k.line])
            if "gluon" in deco.split("def ")[0]:
                kernels.append((f, k))
    gluon = {k.qualname for _, k in kernels}
    launches = {}
    handed = {}  # a kernel handed to a function (a candidate launch, bound only to a forwarder)
    for f in r.facts:
        for la in f.launches:
            for t in la.targets or []:
                if t in gluon:
                    (handed if la.via else launches).setdefault(t, []).append((f, la))
    findings = [x for x in r.findings if x.kernel in gluon]

    rows = []
    for f, k in kernels:
        sites = launches.get(k.qualname, [])
        v = verdicts.get("kernels", {}).get(k.qualname, {})
        rows.append({
            "kernel": k.qualname, "path": f.path, "line": k.line,
            "params": len(k.params), "constexpr_params": sum(p.is_constexpr for p in k.params),
            "launches": [{"path": lf.path, "line": la.line,
                          "args": [{"param": _param(k, a), "text": a.text, "provenance": a.provenance}
                                   for a in la.args if _param(k, a) is not None]} for lf, la in sites],
            "handed_to": [{"path": lf.path, "line": la.line, "via": la.via} for lf, la in handed.get(k.qualname, [])],
            "findings": [{"code": x.code, "param": x.param, "message": x.message} for x in findings
                         if x.kernel == k.qualname],
            "verdict": v.get("verdict", "unchecked"), "reason": v.get("reason"),
        })
    checked = []
    for x in findings:
        v = verdicts.get("findings", {}).get(f"{x.code} {x.kernel} {x.param}", {})
        checked.append({"code": x.code, "kernel": x.kernel, "param": x.param, "path": x.path, "line": x.line,
                        "message": x.message, "verdict": v.get("verdict", "unchecked"), "reason": v.get("reason")})
    launched = [row for row in rows if row["launches"]]
    hand = {k: v for k, v in verdicts.items() if k in ("about", "not_launched")}
    doc = {
        "what": "jitguard scan of vLLM 0.33.0, restricted to its Gluon kernels (@gluon.jit), with hand verdicts",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "versions": {"jitguard": getattr(jitguard, "__version__", "?"), "vllm": "0.33.0"},
        "scan": {"seconds": round(seconds, 1), "files_scanned": r.files_scanned, "kernels": r.kernels,
                 "launches": r.launches, "findings": len(r.findings), "errors": len(r.errors),
                 "internal_errors": len(r.internal_errors)},
        "gluon": {"kernels": len(kernels), "files": len({f.path for f, _ in kernels}),
                  "launched_kernels": len(launched), "launch_sites": sum(len(x["launches"]) for x in rows),
                  "findings": len(findings)},
        "findings": checked,
        "verdict_counts": _counts(row["verdict"] for row in rows if row["launches"] or row["handed_to"]),
        **hand,
        "kernels": rows,
    }
    Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"vLLM 0.33.0: {r.kernels} kernels, {len(kernels)} Gluon kernels in {doc['gluon']['files']} files, "
          f"{len(launched)} launched from {doc['gluon']['launch_sites']} sites, {len(findings)} findings "
          f"({seconds:.0f} s)")
    print(f"{'kernel':<72} {'launches':>8} {'findings':>8}  verdict")
    for row in rows:
        if row["launches"] or row["findings"] or row["handed_to"]:
            n = len(row["launches"]) or f"({len(row['handed_to'])})"
            print(f"{row['kernel'][-72:]:<72} {n:>8} {len(row['findings']):>8}  {row['verdict']}")
    for c in checked:
        print(f"  {c['code']} {c['kernel'].rsplit('.', 1)[-1]}.{c['param']}: {c['verdict']}: {c['reason']}")
    print(f"-> {args.json}")
    return 0


def _counts(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        key = v.split(":")[0]
        out[key] = out.get(key, 0) + 1
    return out


def _param(k, a):
    if a.keyword:
        return a.keyword if k.param(a.keyword) is not None else None
    if a.position is not None and a.position < len(k.params):
        return k.params[a.position].name
    return None


if __name__ == "__main__":
    sys.exit(main())
