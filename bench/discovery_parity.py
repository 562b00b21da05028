"""Do the scanner's discovery (stdlib ast, jitguard.static.extract) and the codemod's discovery
(LibCST + QualifiedNameProvider, jitguard.static.discover) find the same kernels?

    python bench/discovery_parity.py [ROOT]      # default: bench/corpus/vllm-0.33.0

Prints every file where the two differ and a summary line; exit status 1 if any differ.
"""
from __future__ import annotations

import os
import pathlib
import sys

import libcst as cst
from libcst.metadata import MetadataWrapper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from jitguard.static.discover import iter_kernels  # noqa: E402
from jitguard.static.errors import SourceError  # noqa: E402
from jitguard.static.extract import extract_file  # noqa: E402


def main(argv: list[str]) -> int:
    root = argv[0] if argv else str(pathlib.Path(__file__).resolve().parent / "corpus" / "vllm-0.33.0")
    files = differ = 0
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            data = open(path, "rb").read()
            if b"jit" not in data or b"triton" not in data:
                continue
            try:
                text = data.decode("utf-8")
                ours = sorted(k.qualname.split(".", 1)[1] for k in extract_file(path, text, "m").kernels)
                theirs = sorted(s.qualname for s in iter_kernels(MetadataWrapper(cst.parse_module(text))))
            except (UnicodeDecodeError, SourceError, cst.ParserSyntaxError) as exc:
                print(f"skip {path}: {exc}".splitlines()[0])
                continue
            files += 1
            if ours != theirs:
                differ += 1
                print(f"DIFF {path}: ast only {sorted(set(ours) - set(theirs))}, libcst only {sorted(set(theirs) - set(ours))}")
    print(f"{files} files that may define kernels, {differ} where the two discoveries differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
