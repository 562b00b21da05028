"""Tests, benchmarks, warm-up and scripts (rules test-callers and warmup-callers in docs/provenance.md):
code that picks the sizes it passes to a kernel, to exercise it or to compile its variants ahead, so
what it passes is no evidence of serving. Files are told by their path in the project (``exercise_path``,
when the tree is walked), a module's own script code by its main guard and function names
(``ScriptCode``, when the file is extracted), callers seen from another module by their file and a
warm-up name (``exercise_caller``, when modules are linked). Light: the file walk imports it."""
from __future__ import annotations

import ast
import re

# tests and benchmarks: folders named so, files named like pytest's (`test_*.py`, `*_test.py`,
# `conftest.py`) or like benchmarks
_EXERCISE_DIRS = frozenset({"test", "tests", "benchmark", "benchmarks"})
_EXERCISE_FILE = re.compile(r"^(test_\w*|\w+_test|conftest|bench_\w+|benchmark_\w+)$")


def exercise_path(rel: str) -> bool:
    """A test or a benchmark, by its path in the project (``rel``, posix or native): what
    it passes to a kernel are sizes picked to exercise it."""
    parts = rel.replace("\\", "/").split("/")
    return any(p in _EXERCISE_DIRS for p in parts[:-1]) or bool(_EXERCISE_FILE.match(parts[-1].rsplit(".", 1)[0]))


WARMUP = re.compile(r"warm_?up", re.IGNORECASE)
# functions named like tests, benchmarks or a script's main: `test`, `test2`, `test_add`, `bench_moe`,
# `benchmark`, `main`
_SCRIPT_FUNCTION = re.compile(r"(^|\.)((test|bench|benchmark)(_\w*|\d*)|main)$")


def exercise_caller(exercise_file: bool, module: str | None, function: str | None) -> bool:
    """A call or launch made by test, benchmark or warm-up code, seen from another module (``exercise_file``:
    its file is a test or a benchmark, exercise_path; the module's dotted name; the calling
    function's module-qualified name, None at module level: either named `*warmup*`): it picks the
    sizes it passes, so they tell nothing of serving (rules test-callers, warmup-callers). Those made in
    a module's own script code, its functions named like a test or a warm-up included, are dropped when
    the file is extracted (ScriptCode)."""
    return exercise_file or bool(WARMUP.search(function or module or ""))


def main_guard(test: ast.AST) -> bool:
    """``__name__ == "__main__"`` (either way round): the test of a module's script block."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = (test.left, test.comparators[0])
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


class ScriptCode:
    """A module's own warm-up, test and script code (rules warmup-callers, test-callers): what runs
    under ``if __name__ == "__main__":`` and the functions named like a warm-up, a test, a benchmark or
    a script's main (and those defined inside them). Calls and launches made there pick their sizes:
    not evidence of serving."""

    def __init__(self, tree: ast.Module, functions: dict) -> None:
        self.guarded: set[int] = set()  # ids of the nodes under a module-level main guard
        for st in tree.body:
            if isinstance(st, ast.If) and main_guard(st.test):
                for sub in st.body:
                    self.guarded.update(id(n) for n in ast.walk(sub))
        # (a function defined under the guard needs no entry: its calls are guarded nodes themselves)
        self.functions = {q for q in functions if _SCRIPT_FUNCTION.search(q) or WARMUP.search(q)}

    def holds(self, node: ast.AST, fn) -> bool:
        """``node`` (a call or launch), written in ``fn`` (a FunctionInfo, None at module level), is
        script code."""
        if id(node) in self.guarded:
            return True
        while fn is not None:
            if fn.qual in self.functions:
                return True
            fn = fn.parent
        return False
