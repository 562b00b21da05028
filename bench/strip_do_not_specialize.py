"""Copy a source tree with every do_not_specialize / do_not_specialize_on_alignment entry stripped.

The stripped entries are the ground truth of bench/vllm_recall.py: each is a (kernel, parameter)
somebody found varying per call. Kernels are found by the scan's own discovery
(jitguard.static.extract: triton.jit resolved through imports and aliases) and located in the LibCST
tree by the position the scan recorded, as `jitguard fix` locates them; the keyword is removed from
the node, so the rest of the file round-trips byte for byte.

    python bench/strip_do_not_specialize.py SRC_ROOT DST_ROOT [--record stripped.json]

Writes DST_ROOT (a full copy of SRC_ROOT, changed files rewritten) and a JSON record:
{"root": ..., "files": N, "entries": [{"path", "module", "kernel", "function", "option", "entry",
"param", "form"}...] (form: literal / resolved through module-level names, ``+`` or a table /
conditional: under an ``if`` expression, both branches kept), "unresolved": [...], "errors": [...]}.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

import libcst as cst
from libcst.metadata import MetadataWrapper

from jitguard.findings import DNS, DNSOA
from jitguard.static.codemod import KernelEdit, KernelLocator
from jitguard.static.errors import SourceError
from jitguard.static.extract import extract_file

OPTIONS = (DNS, DNSOA)


def module_name(rel: str) -> str:
    mod = rel[:-3].replace(os.sep, ".").replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def module_constants(module: cst.Module) -> dict[str, cst.BaseExpression]:
    """Module-level ``NAME = <expr>`` bindings (the last one wins), to resolve a list given by name."""
    env: dict[str, cst.BaseExpression] = {}
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                    env[small.targets[0].target.value] = small.value
                elif isinstance(small, cst.AnnAssign) and small.value is not None and isinstance(small.target, cst.Name):
                    env[small.target.value] = small.value
    return env


class _Unresolved(Exception):
    pass


def _evaluate(value: cst.BaseExpression, env: dict, depth: int = 0) -> tuple[list, bool]:
    """The entries an annotation value names, and whether one of them sits in a conditional
    (``*(() if C else ("X",))``, ``A if C else B``: both branches count, each was somebody's choice).
    Understands literals, module-level names, ``+``, ``list()``/``tuple()``, a dict literal
    subscripted by a constant, starred elements and conditional expressions; anything else raises."""
    if depth > 20:  # a cycle of names
        raise _Unresolved
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString)):
        v = value.evaluated_value
        if isinstance(v, str):
            return [v], False
        raise _Unresolved
    if isinstance(value, cst.Integer):
        return [int(value.value, 0)], False
    if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
        out, cond = [], False
        for el in value.elements:
            vals, c = _evaluate(el.value, env, depth + 1)
            out.extend(vals)
            cond |= c
        return out, cond
    if isinstance(value, cst.Name):
        if value.value in env:
            return _evaluate(env[value.value], env, depth + 1)
        raise _Unresolved
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        a, ca = _evaluate(value.left, env, depth + 1)
        b, cb = _evaluate(value.right, env, depth + 1)
        return a + b, ca or cb
    if isinstance(value, cst.IfExp):
        a, _ = _evaluate(value.body, env, depth + 1)
        b, _ = _evaluate(value.orelse, env, depth + 1)
        return a + [x for x in b if x not in a], True
    if (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("list", "tuple")
            and len(value.args) == 1):
        return _evaluate(value.args[0].value, env, depth + 1)
    if isinstance(value, cst.Subscript) and len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Index):
        table = value.value
        while isinstance(table, cst.Name) and table.value in env:
            table = env[table.value]
        keys, _ = _evaluate(value.slice[0].slice.value, env, depth + 1)
        if isinstance(table, cst.Dict) and len(keys) == 1:
            for el in table.elements:
                if isinstance(el, cst.DictElement):
                    try:
                        k, _ = _evaluate(el.key, env, depth + 1)
                    except _Unresolved:
                        continue
                    if k == keys:
                        return _evaluate(el.value, env, depth + 1)
        raise _Unresolved
    raise _Unresolved


def _entries(value: cst.BaseExpression, env: dict | None = None) -> tuple[list, str]:
    """(entries, form): form is "literal" (a list or tuple of constants written at the kernel),
    "resolved" (through names, ``+`` or a table), "conditional" (an entry under a condition) or
    "unresolved" (entries = [] then)."""
    env = env or {}
    literal = isinstance(value, (cst.List, cst.Tuple)) and all(
        isinstance(el.value, (cst.SimpleString, cst.Integer)) for el in value.elements)
    try:
        values, conditional = _evaluate(value, env)
    except _Unresolved:
        return [], "unresolved"
    return values, "literal" if literal else "conditional" if conditional else "resolved"


def _keyword(call: cst.Call | None, name: str) -> cst.Arg | None:
    for arg in call.args if call is not None else ():
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


class _Strip(cst.CSTTransformer):
    """Drop the do_not_specialize keywords of the given Call nodes; a call left with no argument that
    was a decorator call (``@triton.jit()``) becomes the bare name."""

    def __init__(self, args: set[int]):
        self.args = args

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not any(id(a) in self.args for a in original.args):
            return updated
        keep = [new for old, new in zip(original.args, updated.args) if id(old) not in self.args]
        if keep:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(args=keep)

    def leave_Decorator(self, original: cst.Decorator, updated: cst.Decorator) -> cst.Decorator:
        dec = updated.decorator
        if isinstance(dec, cst.Call) and not dec.args and isinstance(original.decorator, cst.Call) and original.decorator.args:
            return updated.with_changes(decorator=dec.func)
        return updated


def strip_source(text: str, rel: str) -> tuple[str, list[dict], list[dict]]:
    mod = module_name(rel)
    facts = extract_file(rel, text, mod, calls_of=frozenset())
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    locator = KernelLocator(wrapper)
    entries: list[dict] = []
    unresolved: list[dict] = []
    strip_ids: set[int] = set()
    env = module_constants(module)
    for k in facts.kernels:
        if k.do_not_specialize_line is None and k.do_not_specialize_on_alignment_line is None:
            continue
        loc, _ = locator.find(KernelEdit(line=k.line, jit_line=k.decorator_line, function=k.function))
        if loc is None:
            continue
        params = loc.params
        for option in OPTIONS:
            arg = _keyword(loc.call, option)
            if arg is None:
                continue
            strip_ids.add(id(arg))
            values, form = _entries(arg.value, env)
            if form == "unresolved":
                unresolved.append({"path": rel, "kernel": k.qualname, "option": option,
                                   "value": module.code_for_node(arg.value)})
            for v in values:
                if isinstance(v, int):
                    param = params[v] if -len(params) <= v < len(params) else None
                else:
                    param = v if v in params else None
                entries.append({"path": rel, "module": mod, "kernel": k.qualname, "function": k.function,
                                "option": option, "entry": v, "param": param, "form": form})
    if not strip_ids:
        return text, entries, unresolved
    new = wrapper.module.visit(_Strip(strip_ids))
    return new.code, entries, unresolved


def ground_truth(record: dict) -> tuple[dict[tuple[str, str], set[str]], list[dict]]:
    """From a strip record: the do_not_specialize parameters of each (path, kernel qualname without
    its module), and the entries that name no parameter."""
    truth: dict[tuple[str, str], set[str]] = {}
    naming_no_param: list[dict] = []
    for e in record["entries"]:
        if e["option"] != DNS:
            continue
        kkey = (e["path"], e["kernel"][len(e["module"]) + 1:])
        truth.setdefault(kkey, set())
        if e["param"] is None:
            naming_no_param.append(e)
        else:
            truth[kkey].add(e["param"])
    return truth, naming_no_param


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--record", default=None, help="JSON file for what was stripped (default DST/../stripped.json)")
    args = ap.parse_args(argv)
    t0 = time.time()
    if os.path.exists(args.dst):
        shutil.rmtree(args.dst)
    shutil.copytree(args.src, args.dst, symlinks=True)
    record = {"root": os.path.abspath(args.src), "files": 0, "changed_files": 0, "entries": [], "unresolved": [],
              "errors": []}
    for dirpath, _, files in os.walk(args.dst):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, args.dst)
            record["files"] += 1
            raw = open(path, "rb").read()
            if b"do_not_specialize" not in raw:
                continue
            try:
                text = raw.decode("utf-8")
                new, entries, unresolved = strip_source(text, rel)
            except (UnicodeDecodeError, cst.ParserSyntaxError, SourceError) as exc:
                record["errors"].append({"path": rel, "error": str(exc).splitlines()[0]})
                continue
            record["entries"].extend(entries)
            record["unresolved"].extend(unresolved)
            if new != text:
                record["changed_files"] += 1
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(new)
    record["seconds"] = round(time.time() - t0, 2)
    out = args.record or os.path.join(os.path.dirname(os.path.abspath(args.dst)), "stripped.json")
    with open(out, "w") as fh:
        json.dump(record, fh, indent=1)
    kernels = {e["kernel"] for e in record["entries"]}
    print(f"stripped {len(record['entries'])} entries from {len(kernels)} kernels in {record['changed_files']} files "
          f"({len(record['unresolved'])} unresolved, {len(record['errors'])} errors) -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
