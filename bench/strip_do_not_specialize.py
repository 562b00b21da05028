"""Copy a source tree with every do_not_specialize / do_not_specialize_on_alignment entry stripped.

The stripped entries are the ground truth of bench/vllm_recall.py: each is a (kernel, parameter)
somebody found varying per call. Kernels are found by the scan's own discovery
(jitguard.static.extract: triton.jit resolved through imports and aliases) and located in the LibCST
tree by the position the scan recorded, as `jitguard fix` locates them; the keyword is removed from
the node, so the rest of the file round-trips byte for byte.

    python bench/strip_do_not_specialize.py SRC_ROOT DST_ROOT [--record stripped.json]

Writes DST_ROOT (a full copy of SRC_ROOT, changed files rewritten) and a JSON record:
{"root": ..., "files": N, "entries": [{"path", "module", "kernel", "function", "option", "entry",
"param", "literal"}...], "unresolved": [...], "errors": [...]}.
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


def _entries(value: cst.BaseExpression) -> tuple[list, bool]:
    if not isinstance(value, (cst.List, cst.Tuple)):
        return [], False
    out, literal = [], True
    for el in value.elements:
        v = el.value
        if isinstance(v, cst.SimpleString) and isinstance(v.evaluated_value, str):
            out.append(v.evaluated_value)
        elif isinstance(v, cst.Integer):
            out.append(int(v.value, 0))
        else:
            literal = False
    return out, literal


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
            values, literal = _entries(arg.value)
            if not literal and not values:
                unresolved.append({"path": rel, "kernel": k.qualname, "option": option,
                                   "value": module.code_for_node(arg.value)})
            for v in values:
                if isinstance(v, int):
                    param = params[v] if -len(params) <= v < len(params) else None
                else:
                    param = v if v in params else None
                entries.append({"path": rel, "module": mod, "kernel": k.qualname, "function": k.function,
                                "option": option, "entry": v, "param": param, "literal": literal})
    if not strip_ids:
        return text, entries, unresolved
    new = wrapper.module.visit(_Strip(strip_ids))
    return new.code, entries, unresolved


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
          f"({len(record['unresolved'])} non-literal, {len(record['errors'])} errors) -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
