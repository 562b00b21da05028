"""What the scan benchmarks share: the ceiling they compare against (read and ``ast.parse`` every
file, in this process: the stdlib's C parser) and jitguard's bytecode compiled ahead of the timed
processes, as ``pip install`` does (else a PYTHONDONTWRITEBYTECODE environment, or a read-only tree,
compiles jitguard's modules again in every process timed)."""
from __future__ import annotations

import ast
import compileall
import os
import pathlib
import time
import warnings


def ast_parse_all(files: list[pathlib.Path]) -> dict:
    """Wall and CPU seconds of reading and parsing every file, and how many Python refuses."""
    errors = 0
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for f in files:
            data = f.read_bytes()
            try:
                ast.parse(data, filename=str(f))
            except (SyntaxError, ValueError):
                errors += 1
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
            "syntax_errors": errors}


def compile_ahead(code: str) -> None:
    """Write the bytecode of the jitguard package under ``code`` (a directory holding jitguard/)."""
    compileall.compile_dir(os.path.join(code, "jitguard"), quiet=1)
