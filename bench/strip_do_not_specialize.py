"""Copy a source tree with every do_not_specialize / do_not_specialize_on_alignment entry stripped.

The stripped entries are the ground truth of bench/vllm_recall.py: each is a (kernel, parameter)
somebody found varying per call. Kernels are found with the same LibCST discovery the codemod uses
(jitguard.static.discover.iter_kernels, qualified names through imports and aliases), and the
keyword is removed from the node, so the rest of the file round-trips byte for byte.

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

from jitguard.static.discover import DNS, DNSOA, iter_kernels

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
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    mod = module_name(rel)
    entries: list[dict] = []
    unresolved: list[dict] = []
    strip_ids: set[int] = set()
    for site in iter_kernels(wrapper):
        params = [p.name.value for p in list(site.function.params.posonly_params) + list(site.function.params.params)
                  + list(site.function.params.kwonly_params)]
        for option, arg in ((DNS, site.do_not_specialize), (DNSOA, site.do_not_specialize_on_alignment)):
            if arg is None:
                continue
            strip_ids.add(id(arg))
            values, literal = _entries(arg.value)
            if not literal and not values:
                unresolved.append({"path": rel, "kernel": f"{mod}.{site.qualname}", "option": option,
                                   "value": module.code_for_node(arg.value)})
            for v in values:
                if isinstance(v, int):
                    param = params[v] if -len(params) <= v < len(params) else None
                else:
                    param = v if v in params else None
                entries.append({"path": rel, "module": mod, "kernel": f"{mod}.{site.qualname}",
                                "function": site.function.name.value, "option": option, "entry": v,
                                "param": param, "literal": literal})
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
            except (UnicodeDecodeError, cst.ParserSyntaxError) as exc:
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
