"""Robustness of ``jitguard fix`` on a real codebase: the vLLM 0.33.0 tree with every
``do_not_specialize`` stripped, fixed with ``jitguard fix --write --unsafe-fixes``.

Checks, each reported in bench/results/vllm_fix_robustness.json:

1. every file still compiles (``python -m compileall``; files that did not compile before the fix
   are listed apart, the fix must add none);
2. a second ``fix --write --unsafe-fixes`` run changes nothing (tree digests before/after);
3. the re-scan reports no JG001/JG002 for the parameters the fix handled;
4. the diff touches only decorator lines / ``name = triton.jit(...)`` assignments, or the
   ``tl.constexpr`` annotation of a parameter (JG002 unsafe fix): every changed line is classified;
5. how much of what vLLM's authors wrote was restored (recall per stripped entry), and what the
   fix added beyond it.

Usage::

    python bench/vllm_fix_robustness.py --original ORIG_TREE --stripped STRIPPED_TREE
    python bench/vllm_fix_robustness.py   # bench/corpus/vllm-0.33.0 (bench/fetch_vllm.py), stripped
                                          # by bench/strip_do_not_specialize.py into a scratch dir

The stripped tree is copied into a scratch directory first: the inputs are never modified.
"""
from __future__ import annotations

import argparse
import ast
import datetime as dt
import difflib
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "vllm_fix_robustness.json"


def tree_digest(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*.py")):
        out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def run(cmd: list[str], cwd: Path) -> tuple[int, str, str, float]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr, time.perf_counter() - t0


def compile_failures(root: Path) -> set[str]:
    """Files that don't compile (byte-compiled into a scratch prefix: the tree stays clean)."""
    bad = set()
    for p in sorted(root.rglob("*.py")):
        try:
            compile(p.read_bytes(), str(p), "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            bad.add(str(p.relative_to(root)))
    return bad


def compileall(root: Path) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, PYTHONPYCACHEPREFIX=cache)
        p = subprocess.run([sys.executable, "-m", "compileall", "-q", str(root)],
                           capture_output=True, text=True, env=env)
        return p.returncode, (p.stdout + p.stderr)[-4000:]


# --- what the fix changed ----------------------------------------------------------------------


def _is_jit_expr(node: ast.AST) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr == "jit"
    if isinstance(target, ast.Name):
        return "jit" in target.id
    return False


def line_kinds(source: bytes) -> dict[int, str]:
    """line -> "decorator" | "jit_call" | "signature" for the lines a fix may touch."""
    kinds: dict[int, str] = {}
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                for ln in range(d.lineno, d.end_lineno + 1):
                    kinds[ln] = "decorator"
            body_start = node.body[0].lineno
            for ln in range(node.lineno, body_start):
                kinds.setdefault(ln, "signature")
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Call) and _is_jit_expr(sub):
                    for ln in range(node.lineno, node.end_lineno + 1):
                        kinds.setdefault(ln, "jit_call")
                    break
    return kinds


def changed_lines(a: bytes, b: bytes) -> tuple[list[int], int]:
    """(lines of ``a`` replaced or deleted, lines inserted) — insertions are attributed to the line
    before them in ``a``."""
    sm = difflib.SequenceMatcher(a=a.splitlines(), b=b.splitlines(), autojunk=False)
    touched: list[int] = []
    inserted = 0
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "delete"):
            touched.extend(range(i1 + 1, i2 + 1))
        if tag in ("replace", "insert"):
            inserted += max(0, (j2 - j1) - (i2 - i1))
            if tag == "insert":
                touched.append(max(i1, 1))
    return touched, inserted


def dns_sets(source: bytes) -> dict[tuple[str, int], set[str]]:
    """(kernel function name, def line) -> names in its do_not_specialize (indices resolved)."""
    out = {}
    tree = ast.parse(source)

    def entries(call: ast.Call, params: list[str]) -> set[str]:
        for kw in call.keywords:
            if kw.arg == "do_not_specialize":
                try:
                    vals = ast.literal_eval(kw.value)
                except ValueError:
                    return {"<non-literal>"}
                return {params[v] if isinstance(v, int) and 0 <= v < len(params) else str(v) for v in vals}
        return set()

    funcs = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            params = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
            funcs[node.name] = (node, params)
            for d in node.decorator_list:
                if _is_jit_expr(d):
                    out[(node.name, node.lineno)] = entries(d, params) if isinstance(d, ast.Call) else set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            fn_name = None
            if _is_jit_expr(call) and call.args and isinstance(call.args[0], ast.Name):
                fn_name, jit_call = call.args[0].id, call
            elif isinstance(call.func, ast.Call) and _is_jit_expr(call.func) and call.args and isinstance(call.args[0], ast.Name):
                fn_name, jit_call = call.args[0].id, call.func
            if fn_name in funcs:
                fnode, params = funcs[fn_name]
                out[(fn_name, fnode.lineno)] = entries(jit_call, params)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--original", type=Path, help="the unstripped tree (for recall)")
    ap.add_argument("--stripped", type=Path, help="the tree with do_not_specialize stripped")
    ap.add_argument("--keep", type=Path, help="keep the fixed tree here")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--output", type=Path, default=RESULTS)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="jg-fix-bench-"))
    tree = work / "tree"
    # Run one commit's code for every step (other work may land in the checkout meanwhile).
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "jitguard"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    snap = work / "code"
    snap.mkdir()
    archive = subprocess.run(["git", "archive", "HEAD", "jitguard"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(snap)], input=archive.stdout, check=True)
    os.environ["PYTHONPATH"] = str(snap) + os.pathsep + os.environ.get("PYTHONPATH", "")
    strip_record = None
    if args.stripped is None:
        # the corpus (bench/fetch_vllm.py) stripped by bench/strip_do_not_specialize.py, with its record
        if args.original is None:
            args.original = HERE / "corpus" / "vllm-0.33.0"
        if not args.original.exists():
            wheels = sorted(Path("/tmp/vllmdl").glob("vllm-0.33.0-*.whl"))
            cmd = [sys.executable, str(HERE / "fetch_vllm.py")] + (["--wheel", str(wheels[0])] if wheels else [])
            subprocess.run(cmd, check=True)
        rec = work / "stripped.json"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(HERE / "strip_do_not_specialize.py"), str(args.original), str(tree),
                        "--record", str(rec)], check=True)
        strip_seconds = time.perf_counter() - t0
        strip_record = json.loads(rec.read_text())
        strip_record["seconds_wall"] = round(strip_seconds, 1)
    else:
        shutil.copytree(args.stripped, tree, symlinks=True)
    jitguard = [sys.executable, "-m", "jitguard"]
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []

    before = tree_digest(tree)
    stripped_bytes = {rel: (tree / rel).read_bytes() for rel in before}
    fail_before = compile_failures(tree)

    rc1, out1, err1, t1 = run([*jitguard, "fix", "--write", "--unsafe-fixes", "--no-cache", *jobs, "."], tree)
    after1 = tree_digest(tree)
    changed = sorted(rel for rel in after1 if after1[rel] != before.get(rel))
    fail_after = compile_failures(tree)
    ca_rc, ca_out = compileall(tree)

    rc2, out2, err2, t2 = run([*jitguard, "fix", "--write", "--unsafe-fixes", "--no-cache", *jobs, "."], tree)
    after2 = tree_digest(tree)
    second_changed = sorted(rel for rel in after2 if after2[rel] != after1.get(rel))

    rc3, out3, err3, t3 = run([*jitguard, "scan", "--format", "json", "--no-cache", "--exit-zero", *jobs, "."], tree)
    try:
        rescan = json.loads(out3)
    except json.JSONDecodeError:
        rescan = {"findings": [], "parse_error": (out3 + err3)[-2000:]}

    # --- what changed, line by line
    kinds_count: dict[str, int] = {"decorator": 0, "jit_call": 0, "signature": 0, "other": 0}
    other_examples = []
    signature_examples = []
    inserted_total = 0
    added: list[dict] = []  # (file, kernel, param) the fix put in do_not_specialize
    for rel in changed:
        a, b = stripped_bytes[rel], (tree / rel).read_bytes()
        kinds = line_kinds(a)
        touched, inserted = changed_lines(a, b)
        inserted_total += inserted
        for ln in touched:
            k = kinds.get(ln, "other")
            kinds_count[k] += 1
            if k == "other" and len(other_examples) < 20:
                other_examples.append(f"{rel}:{ln}: {a.splitlines()[ln - 1].decode(errors='replace').strip()}")
            if k == "signature" and len(signature_examples) < 20:
                signature_examples.append(f"{rel}:{ln}: {a.splitlines()[ln - 1].decode(errors='replace').strip()}")
        sa, sb = dns_sets(a), dns_sets(b)
        for key, names in sb.items():
            for n in sorted(names - sa.get(key, set())):
                added.append({"file": rel, "kernel": key[0], "param": n})

    fixed_params = {(d["file"], d["kernel"], d["param"]) for d in added}
    left_jg001 = [
        f for f in rescan.get("findings", [])
        if f.get("code") in ("JG001", "JG002")
        and (f.get("path", ""), f.get("kernel", "").split(".")[-1], f.get("param")) in fixed_params
    ]
    rescan_codes: dict[str, int] = {}
    for f in rescan.get("findings", []):
        rescan_codes[f["code"]] = rescan_codes.get(f["code"], 0) + 1

    # --- recall against what vLLM's authors wrote (the stripped entries)
    recall = None
    orig_entries: set[tuple[str, str, str]] = set()
    not_restorable: list[str] = []
    if strip_record is not None:
        for e in strip_record["entries"]:
            if not e.get("param"):
                continue  # an entry that named nothing (a typo or bad index in vLLM itself)
            if e.get("option") != "do_not_specialize":
                not_restorable.append(f"{e['path']}:{e['function']}.{e['param']} ({e['option']})")
                continue
            orig_entries.add((e["path"], e["function"], e["param"]))
    elif args.original:
        for rel in before:
            p = args.original / rel
            if not p.exists() or b"do_not_specialize" not in p.read_bytes():
                continue
            try:
                so, ss = dns_sets(p.read_bytes()), dns_sets(stripped_bytes[rel])
            except SyntaxError:
                continue
            ss_by_name = {k[0]: v for k, v in ss.items()}
            for (kname, _), names in so.items():
                for n in names - ss_by_name.get(kname, set()):
                    orig_entries.add((rel, kname, n))
    if orig_entries:
        restored = orig_entries & fixed_params
        recall = {
            "stripped_do_not_specialize_entries": len(orig_entries),
            "restored": len(restored),
            "recall": round(len(restored) / len(orig_entries), 4),
            "added_beyond_original": len(fixed_params - orig_entries),
            "stripped_on_alignment_entries_not_restorable": len(not_restorable),
            "not_restored_examples": sorted(f"{a}:{b}.{c}" for a, b, c in orig_entries - fixed_params)[:60],
            "added_beyond_examples": sorted(f"{a}:{b}.{c}" for a, b, c in fixed_params - orig_entries)[:60],
        }

    summary_line = lambda err: next((ln for ln in reversed(err.splitlines()) if "fix" in ln), "")  # noqa: E731
    from importlib.metadata import version

    result = {
        "benchmark": "vllm_fix_robustness",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count(), "load_avg": os.getloadavg()},
        "versions": {"jitguard": version("jitguard"), "libcst": version("libcst"), "click": version("click")},
        "inputs": {"original": str(args.original) if args.original else None,
                   "stripped": str(args.stripped) if args.stripped else "bench/strip_do_not_specialize.py",
                   "python_files": len(before),
                   "strip": {k: strip_record[k] for k in ("files", "changed_files", "seconds_wall")}
                   | {"entries": len(strip_record["entries"]), "unresolved": len(strip_record["unresolved"]),
                      "errors": strip_record["errors"]} if strip_record else None},
        "command": "jitguard fix --write --unsafe-fixes --no-cache .",
        "code": {"commit": commit, "uncommitted_changes_in_checkout_not_used": bool(dirty)},
        "first_run": {"exit_code": rc1, "seconds": round(t1, 1), "summary": summary_line(err1),
                      "files_changed": len(changed), "notes_lines": len(err1.splitlines())},
        "compiles": {"compileall_exit_code": ca_rc, "compileall_tail": ca_out if ca_rc else "",
                     "failing_before_fix": sorted(fail_before), "failing_after_fix": sorted(fail_after),
                     "new_failures": sorted(fail_after - fail_before)},
        "second_run": {"exit_code": rc2, "seconds": round(t2, 1), "summary": summary_line(err2),
                       "files_changed": second_changed},
        "rescan": {"exit_code": rc3, "seconds": round(t3, 1), "findings_by_code": rescan_codes,
                   "jg001_jg002_left_on_fixed_params": left_jg001[:20],
                   "count_left_on_fixed_params": len(left_jg001)},
        "diff": {"lines_touched": sum(kinds_count.values()), "by_kind": kinds_count,
                 "lines_inserted": inserted_total, "other_examples": other_examples,
                 "signature_examples": signature_examples,
                 "params_added_to_do_not_specialize": len(added)},
        "recall_vs_original": recall,
        "ok": {
            "all_compile": not (fail_after - fail_before) and ca_rc == 0,
            "second_run_changes_nothing": not second_changed,
            "no_jg001_on_fixed_params": not left_jg001,
            "only_decorator_or_annotation_lines": kinds_count["other"] == 0,
        },
    }
    if args.keep:
        if args.keep.exists():
            shutil.rmtree(args.keep)
        shutil.copytree(tree, args.keep, symlinks=True)
        (args.keep.parent / f"{args.keep.name}.fix1.stderr.txt").write_text(err1)
        (args.keep.parent / f"{args.keep.name}.fix1.diff").write_text(out1)
    shutil.rmtree(work, ignore_errors=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")

    print(f"{'check':45s} result")
    for k, v in result["ok"].items():
        print(f"{k:45s} {'PASS' if v else 'FAIL'}")
    print(f"files: {len(before)} python, {len(changed)} changed; lines touched by kind: {kinds_count}")
    print(f"first run {t1:.0f}s: {result['first_run']['summary']}")
    print(f"second run {t2:.0f}s: {result['second_run']['summary']}")
    if recall:
        print(f"recall vs vLLM's own lists: {recall['restored']}/{recall['stripped_do_not_specialize_entries']} "
              f"({recall['recall']}), {recall['added_beyond_original']} added beyond them")
    print(f"wrote {args.output}")
    return 0 if all(result["ok"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
