"""How much of jitguard scan's default output rests on how host code names its variables.

    python bench/renamed_locals.py                      # the six codebases of bench/codebases.py
    python bench/renamed_locals.py --only vllm,sglang   # some of them

A codebase nobody here read names things its own way. The inference rules say that a finding resting
on a name alone is never above low (docs/provenance.md); this checks it on whole codebases. Each
codebase is written out three times, each through ``ast.unparse`` (comments and layout dropped alike):

* ``plain``: as it is;
* ``renamed``: in every function that is not a Triton kernel, each local variable (a name the
  function or a function nested in it assigns: ``n = x.shape[0]``, loop targets, ``with ... as v``)
  is renamed ``v1``, ``v2``, ... consistently in that function and the functions nested in it.
  Attributes, globals, imports, kernels (those the scan of ``plain`` discovers) and their parameters
  (the findings name them) keep their names;
* ``params``: the same, and parameters too (``self`` and ``cls`` aside) where no call in the codebase
  passes an argument by that keyword (so that every call still binds as before).

Each is scanned at every level; a default-level (high, medium) finding of ``plain`` that a renamed copy
has not at a default level, or the other way round, depends on a name the copy changed (and one of
the codebase as it is that ``plain`` has not, on a comment or the layout). Each such change is listed
with the rules of both chains, which must include one the registry calls a convention (structural
evidence reads no names), and the high level must not move; the figures per codebase are written to
bench/results/renamed_locals.json.
"""
from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile

BENCH = pathlib.Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from jitguard import __version__  # noqa: E402
from jitguard.static.provenance.rules import CONVENTIONAL, RULES  # noqa: E402

import codebases  # noqa: E402

RESULTS = BENCH / "results" / "renamed_locals.json"


def _is_kernel(node: ast.AST, kernel_lines: set[int]) -> bool:
    """A def the scan discovered as a kernel (its def line, from the scan of the unparsed copy)."""
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno in kernel_lines


def _walk(fn: ast.AST, kernel_lines: set[int]):
    """``ast.walk`` of ``fn`` that does not enter the kernels nested in it (their names stay)."""
    todo = [fn]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(c for c in ast.iter_child_nodes(node) if not _is_kernel(c, kernel_lines))


def _locals_of(fn: ast.AST, kernel_lines: set[int], params: frozenset[str] = frozenset()) -> list[str]:
    """The names ``fn`` and the functions nested in it assign, less every parameter of any of them
    not in ``params``, names declared global or nonlocal, and names bound otherwise than by a Name
    (imports, ``except ... as e``, match patterns): renaming those is safe within ``fn``'s tree."""
    stored, kept = [], set()
    for node in _walk(fn, kernel_lines):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) and node.id not in stored:
            stored.append(node.id)
        elif isinstance(node, ast.arg):
            if node.arg in params and node.arg not in stored:
                stored.append(node.arg)
            elif node.arg not in params:
                kept.add(node.arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            kept.update(node.names)
        elif isinstance(node, ast.alias):
            kept.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            kept.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            kept.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            kept.add(node.rest)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not fn:
            kept.add(node.name)
    return [n for n in stored if n not in kept]


class _Rename(ast.NodeTransformer):
    """Renames the locals of every outermost function that is not a kernel (methods included), and
    the parameters named in ``params``."""

    def __init__(self, kernel_lines: set[int], params: frozenset[str] = frozenset()) -> None:
        self.kernel_lines = kernel_lines
        self.params = params
        self.renamed = 0

    def _function(self, fn):
        if _is_kernel(fn, self.kernel_lines):
            return fn
        names = {n: f"v{self.renamed + i + 1}" for i, n in enumerate(_locals_of(fn, self.kernel_lines, self.params))}
        self.renamed += len(names)
        for node in _walk(fn, self.kernel_lines):
            if isinstance(node, ast.Name) and node.id in names:
                node.id = names[node.id]
            elif isinstance(node, ast.arg) and node.arg in names:
                node.arg = names[node.arg]
        return fn  # nested functions were renamed with it

    visit_FunctionDef = visit_AsyncFunctionDef = _function


def _keywords(trees: list[ast.AST]) -> set[str]:
    """Every keyword any call of the codebase passes (``f(x=1)``, ``partial(f, x=1)``)."""
    return {kw.arg for t in trees for node in ast.walk(t) if isinstance(node, ast.Call)
            for kw in node.keywords if kw.arg}


def write_plain(src: pathlib.Path, plain: pathlib.Path) -> tuple[dict[pathlib.Path, str], int]:
    """``plain``: every .py file under ``src`` that parses, through ``ast.unparse``; ({relative
    path: text}, files that did not parse)."""
    texts: dict[pathlib.Path, str] = {}
    skipped = 0
    for path in sorted(src.rglob("*.py")):
        try:
            texts[path.relative_to(src)] = ast.unparse(ast.parse(path.read_bytes()))
        except (SyntaxError, ValueError, RecursionError):
            skipped += 1
    for rel, text in texts.items():
        (plain / rel).parent.mkdir(parents=True, exist_ok=True)
        (plain / rel).write_text(text + "\n", encoding="utf-8")
    return texts, skipped


def write_renamed(texts: dict[pathlib.Path, str], kernels: dict[str, set[int]], out: dict[str, pathlib.Path]) -> dict:
    """The copies ``renamed`` and ``params`` (``out``: their roots) of the unparsed ``texts``, whose
    kernels (``kernels``: def lines per relative posix path) keep their names; counts."""
    trees = {rel: ast.parse(t) for rel, t in texts.items()}
    params = frozenset({node.arg for t in trees.values() for node in ast.walk(t) if isinstance(node, ast.arg)}
                       - _keywords(list(trees.values())) - {"self", "cls"})
    counts = {"locals_renamed": 0, "with_params_renamed": 0}
    for rel, text in texts.items():
        lines = kernels.get(rel.as_posix(), set())
        for name, kept, key in (("renamed", frozenset(), "locals_renamed"), ("params", params, "with_params_renamed")):
            r = _Rename(lines, kept)
            body = ast.unparse(r.visit(ast.parse(text)))
            counts[key] += r.renamed
            (out[name] / rel).parent.mkdir(parents=True, exist_ok=True)
            (out[name] / rel).write_text(body + "\n", encoding="utf-8")
    return counts


def scan(tree: pathlib.Path) -> tuple[dict, dict[str, set[int]]]:
    """{(path, kernel, param, code): (level, rules, evidence)} of a scan of ``tree`` at every level,
    and the def lines of the kernels it discovered, per path (relative, posix)."""
    result, _ = codebases.scan(tree, keep_facts=True)
    rel = lambda p: pathlib.Path(os.path.relpath(os.path.abspath(p), tree)).as_posix()  # noqa: E731
    found = {}
    for f in result.findings:
        d = f.details
        found[(rel(f.path), f.kernel, f.param, f.code)] = (codebases.level_of(f), list(d.get("rules", [])),
                                                          list(d.get("evidence", []))[:4])
    kernels: dict[str, set[int]] = {}
    for ff in result.facts:
        kernels.setdefault(rel(ff.path), set()).update(k.line for k in ff.kernels)
    return found, kernels


def compare(plain: dict, renamed: dict) -> dict:
    shown = codebases.DEFAULT_LEVELS
    lost = sorted(k for k, v in plain.items() if v[0] in shown and renamed.get(k, ("none",))[0] not in shown)
    gained = sorted(k for k, v in renamed.items() if v[0] in shown and plain.get(k, ("none",))[0] not in shown)
    row = lambda k, a, b: {"path": k[0], "kernel": k[1], "param": k[2], "code": k[3],  # noqa: E731
                           "plain": a.get(k, ("none", [], []))[0], "renamed": b.get(k, ("none", [], []))[0],
                           "rules_plain": a.get(k, (None, []))[1], "rules_renamed": b.get(k, (None, []))[1],
                           "evidence_plain": a.get(k, (None, [], []))[2]}
    changes = [dict(row(k, plain, renamed), change="lost") for k in lost] \
        + [dict(row(k, plain, renamed), change="gained") for k in gained]
    for c in changes:
        # a class that changes with a local's name must rest, on one side, on a rule the registry calls
        # a convention (a name, or a guess a name corrects): structural evidence does not read names
        c["convention"] = sorted({r for r in c["rules_plain"] + c["rules_renamed"]
                                  if r in RULES and RULES[r].evidence == CONVENTIONAL})
    default_plain = sum(v[0] in shown for v in plain.values())
    return {"default_plain": default_plain, "default_renamed": sum(v[0] in shown for v in renamed.values()),
            "high_plain": sum(v[0] == "high" for v in plain.values()),
            "high_renamed": sum(v[0] == "high" for v in renamed.values()),
            "lost": len(lost), "gained": len(gained),
            "kept_share": round(1 - len(lost) / default_plain, 4) if default_plain else None,
            "high_changed": sum("high" in (c["plain"], c["renamed"]) for c in changes),
            "unexplained": sum(not c["convention"] for c in changes),
            "changes": changes}


VARIANTS = {"renamed": "locals renamed", "params": "locals and parameters renamed"}


def _row(codebase: str, copy: str, files: int, renamed: int, got: dict) -> None:
    print(f"{codebase:14} {copy:8} {files:6} {renamed:8} {got['default_plain']:14} {got['default_renamed']:5} "
          f"{got['lost']:5} {got['gained']:6} {got['kept_share']!s:>6} {got['high_changed']:13} {got['unexplained']:14}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated codebase names")
    ap.add_argument("--results", default=str(RESULTS))
    args = ap.parse_args(argv)
    chosen = [cb for cb in codebases.CODEBASES if not args.only or cb.name in args.only.split(",")]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    doc = {"benchmark": "renamed_locals", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "jitguard": __version__, "jitguard_commit": commit, "python": platform.python_version(),
           "machine": platform.machine(), "codebases": {}}
    print(f"{'codebase':14} {'copy':8} {'files':>6} {'renamed':>8} {'default before':>14} {'after':>5} {'lost':>5} "
          f"{'gained':>6} {'kept':>6} {'high changed':>13} {'no convention':>14}")
    for cb in chosen:
        src = codebases.fetch(cb)
        with tempfile.TemporaryDirectory() as tmp:
            roots = {name: pathlib.Path(tmp, name, src.name) for name in ("plain", *VARIANTS)}
            texts, skipped = write_plain(src, roots["plain"])
            plain, kernels = scan(roots["plain"])
            counts = {"files": len(texts), "files_not_parsed": skipped, **write_renamed(texts, kernels, roots)}
            entry = {"spec": cb.spec, **counts}
            # comments and layout alone (ast.unparse of the same code): what the copies start from
            entry["unparsed"] = compare(scan(src)[0], plain)
            _row(cb.name, "unparsed", counts["files"], 0, entry["unparsed"])
            for name in VARIANTS:
                entry[name] = compare(plain, scan(roots[name])[0])
                _row(cb.name, name, counts["files"],
                     counts["locals_renamed" if name == "renamed" else "with_params_renamed"], entry[name])
        doc["codebases"][cb.name] = entry
    pathlib.Path(args.results).parent.mkdir(parents=True, exist_ok=True)
    if os.path.abspath(args.results) == str(RESULTS) and args.only and RESULTS.exists():
        kept = json.loads(RESULTS.read_text())["codebases"]
        doc["codebases"] = {**kept, **doc["codebases"]}
    pathlib.Path(args.results).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"-> {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
