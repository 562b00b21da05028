"""Why the scan reads source with stdlib ``ast``: the cost of LibCST on the same corpus.

    python bench/parser_cost.py [ROOT]    # default: bench/corpus/vllm-0.33.0 (bench/fetch_vllm.py)

Measures in one process, on one core: ``ast.parse`` of every .py file (the scan-speed ceiling: a
cold scan should stay within 2x of it), LibCST's ``parse_module`` of the files whose bytes mention
``triton`` (what a LibCST scan would at least have to parse after the pre-filter), and parse +
``QualifiedNameProvider`` (what qualified-name resolution through LibCST costs) on a sample of
those. Prints a table and writes bench/results/parser_cost.json.
"""
from __future__ import annotations

import ast
import datetime
import json
import pathlib
import platform
import random
import sys
import time

import libcst as cst
from libcst.metadata import MetadataWrapper, QualifiedNameProvider

HERE = pathlib.Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[0]) if argv else HERE / "corpus" / "vllm-0.33.0"
    if not root.is_dir():
        print(f"{root}: no corpus (run python bench/fetch_vllm.py first)", file=sys.stderr)
        return 2
    sources = [(p, p.read_bytes()) for p in sorted(root.rglob("*.py"))]
    t = time.perf_counter()
    for _, src in sources:
        try:
            ast.parse(src)
        except SyntaxError:
            pass
    t_ast = time.perf_counter() - t
    triton_files = [(p, s) for p, s in sources if b"triton" in s]
    t = time.perf_counter()
    for _, src in triton_files:
        try:
            cst.parse_module(src)
        except Exception:
            pass
    t_cst = time.perf_counter() - t
    sample = random.Random(0).sample(triton_files, min(40, len(triton_files)))
    t = time.perf_counter()
    for _, src in sample:
        try:
            MetadataWrapper(cst.parse_module(src)).resolve(QualifiedNameProvider)
        except Exception:
            pass
    t_meta = time.perf_counter() - t
    per_file_meta = t_meta / max(1, len(sample))
    result = {
        "benchmark": "parser_cost",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "versions": {"libcst": getattr(cst, "__version__", "?")},
        "corpus": {"root": str(root.name), "py_files": len(sources), "triton_files": len(triton_files)},
        "ast_parse_all_s": round(t_ast, 3),
        "libcst_parse_triton_files_s": round(t_cst, 3),
        "libcst_qualified_names_per_file_s": round(per_file_meta, 4),
        "libcst_qualified_names_sample": len(sample),
        "libcst_qualified_names_all_triton_files_est_s": round(per_file_meta * len(triton_files), 1),
    }
    print(f"{'pass':58s} {'files':>6s} {'seconds':>9s}")
    print(f"{'ast.parse, every file':58s} {len(sources):6d} {t_ast:9.2f}")
    print(f"{'libcst.parse_module, files mentioning triton':58s} {len(triton_files):6d} {t_cst:9.2f}")
    print(f"{'libcst parse + QualifiedNameProvider (sample; per file)':58s} {len(sample):6d} {per_file_meta:9.3f}")
    print(f"{'  -> estimated for every file mentioning triton':58s} {len(triton_files):6d} "
          f"{per_file_meta * len(triton_files):9.1f}")
    out = HERE / "results" / "parser_cost.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
