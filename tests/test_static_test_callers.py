"""test-callers: tests and benchmarks of a library pass sizes chosen to exercise its kernels, so what
they pass is no evidence of serving. A test passing one literal-shaped tensor must not fix a wrapper's
leading dim (scanning a repository with its tests/ would hide the finding its package alone gives), a
benchmark sweeping a model dim must not make that dim a per-call value, and a benchmark's own launch
of a library kernel is not one of the kernel's serving launches. A kernel defined in a test is judged
on its own launches. Random identifiers; only the module names follow the test and benchmark
conventions the rule reads."""
from __future__ import annotations

import pathlib
import random

import pytest

from jitguard.config import Config
from jitguard.static.runner import scan_paths
from tests._static_util import MASKED_KERNEL, rand_names

LIBRARY = MASKED_KERNEL + """
def {f}({x}, {w}):
    {b} = {x}.shape[0]
    {c} = {x}.stride(0)
    {k}[(1,)]({x}, {b}, BLOCK=16)
    {k2}[(1,)]({w}, {c}, BLOCK=16)
"""

SECOND_KERNEL = """
@triton.jit
def {k2}(x_ptr, {n2}, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < {n2}), mask=offs < {n2})
"""

CALLERS = {
    # one literal-shaped tensor: read as a fixed leading dim, it hid the wrapper's finding
    "literal-shape": """
import torch
from {pkg}.{lib} import {f}

def {t}():
    {f}(torch.randn(4, 4096), torch.randn(8, 8))
""",
    # a sweep over a trailing (model) dim: read as a per-call value, it made the stride a finding
    "sweep": """
import torch
from {pkg}.{lib} import {f}

def {t}({s}):
    for {i} in range(len({s})):
        {f}(torch.randn(4, {i}), torch.randn(8, 8))
""",
}

PLACES = {
    "tests package": ("tests", "{m}"),
    "pytest file": ("{d}", "test_{m}"),
    "benchmarks package": ("benchmarks", "{m}"),
    "bench file": ("{d}", "bench_{m}"),
    "conftest": ("{d}", "conftest"),
}


def _library(tmp_path, nm: dict) -> pathlib.Path:
    """The package: a wrapper launching two kernels; its folder."""
    pkg = tmp_path / nm["pkg"]
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / f"{nm['lib']}.py").write_text(LIBRARY.format(**nm) + SECOND_KERNEL.format(**nm))
    return pkg


def _scan(tmp_path, caller: str | None, place: tuple[str, str] | None, nm: dict) -> dict:
    _library(tmp_path, nm)
    if caller is not None:
        folder = tmp_path / place[0].format(**nm)
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text("")
        (folder / (place[1].format(**nm) + ".py")).write_text(CALLERS[caller].format(**nm))
    result = scan_paths([str(tmp_path)], Config(root=str(tmp_path), confidence="low"), use_cache=False, jobs=1)
    return {f.param: f.confidence for f in result.findings if f.code == "JG001"}


def _names(rng):
    return rand_names(rng, "k", "k2", "n", "n2", "f", "x", "w", "b", "c", "t", "i", "s", "pkg", "lib", "m", "d")


@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_test_passing_a_literal_shape_does_not_hide_the_leading_dim_finding(tmp_path, place):
    nm = _names(random.Random())
    (tmp_path / "alone").mkdir()
    (tmp_path / "with").mkdir()
    alone = _scan(tmp_path / "alone", None, None, nm)
    with_tests = _scan(tmp_path / "with", "literal-shape", PLACES[place], nm)
    assert alone == {nm["n"]: "medium"}
    assert with_tests == alone


@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_benchmark_sweeping_a_model_dim_adds_no_finding(tmp_path, place):
    nm = _names(random.Random())
    got = _scan(tmp_path, "sweep", PLACES[place], nm)
    assert nm["n2"] not in got  # the stride over the swept dim: fixed for serving
    assert got == {nm["n"]: "medium"}


def test_the_same_callers_in_a_library_module_are_evidence(tmp_path):
    # the control: a module that is neither a test nor a benchmark fixes (literal shape) and varies (sweep)
    nm = _names(random.Random())
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert _scan(tmp_path / "a", "literal-shape", ("{d}", "{m}"), nm) == {}  # every caller passes 4 rows
    assert nm["n2"] in _scan(tmp_path / "b", "sweep", ("{d}", "{m}"), nm)


def test_a_test_function_in_a_library_module_is_no_evidence(tmp_path):
    nm = _names(random.Random())
    nm["t"] = "test_" + nm["t"]
    assert _scan(tmp_path, "literal-shape", ("{d}", "{m}"), nm) == {nm["n"]: "medium"}


BENCH_LAUNCH = """
from {pkg}.{lib} import {k2}

def {t}(x, {s}):
    for {i} in range(len({s})):
        {k2}[(1,)](x, {i}, BLOCK=16)
"""


def test_a_benchmark_launching_a_library_kernel_is_not_one_of_its_serving_launches(tmp_path):
    nm = _names(random.Random())
    _library(tmp_path, nm)
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / f"{nm['m']}.py").write_text(BENCH_LAUNCH.format(**nm))
    result = scan_paths([str(tmp_path)], Config(root=str(tmp_path), confidence="low"), use_cache=False, jobs=1)
    assert nm["n2"] not in {f.param for f in result.findings if f.code == "JG001"}


def test_a_kernel_defined_in_a_test_is_judged_on_its_own_launches(tmp_path):
    nm = _names(random.Random())
    (tmp_path / "tests").mkdir()
    src = MASKED_KERNEL.format(**nm) + """
def {t}({x}, {s}):
    for {i} in range(len({s})):
        {k}[(1,)]({x}, {i}, BLOCK=16)
"""
    (tmp_path / "tests" / f"test_{nm['m']}.py").write_text(src.format(**nm))
    result = scan_paths([str(tmp_path)], Config(root=str(tmp_path)), use_cache=False, jobs=1)
    assert {(f.code, f.param) for f in result.findings} == {("JG001", nm["n"])}


def test_a_folder_named_tests_above_the_folder_scanned_does_not_count(tmp_path):
    # a checkout kept under ~/tests/: its library callers are still evidence
    nm = _names(random.Random())
    root = tmp_path / "tests" / "checkout"
    root.mkdir(parents=True)
    assert _scan(root, "literal-shape", ("{d}", "{m}"), nm) == {}


@pytest.mark.parametrize("rel,expected", [
    ("tests/kernels/utils.py", True), ("pkg/test/helpers.py", True), ("benchmarks/kernels/moe.py", True),
    ("test_ops.py", True), ("pkg/ops_test.py", True), ("conftest.py", True), ("scripts/bench_moe.py", True),
    ("benchmark_moe.py", True), ("pkg/ops/testing.py", False), ("pkg/latest.py", False), ("pkg/contest.py", False),
    ("pkg/benchmarking/ops.py", False), ("pkg/attestation_test_vectors/x.py", False),
])
def test_exercise_path(rel, expected):
    from jitguard.static.exercise import exercise_path

    assert exercise_path(rel) is expected


# a kernel module's own script block and test functions (ScriptCode): the same as tests elsewhere
SCRIPT_MODULE = MASKED_KERNEL + """
import torch

def {f}({x}):
    {b} = {x}.shape[0]
    {k}[(1,)]({x}, {b}, BLOCK=16)

{script}
"""

SCRIPTS = {
    "main guard": 'if __name__ == "__main__":\n    {f}(torch.randn(4, 4096))',
    "test function": "def test_{t}():\n    {f}(torch.randn(4, 4096))",
    "bare test function": "def test():\n    {f}(torch.randn(4, 4096))",
    "main function": "def main():\n    {f}(torch.randn(4, 4096))",
    # warm-up code enumerates the sizes it compiles for: the same (rule warmup-callers)
    "warm-up function": "def {t}_warmup():\n    {f}(torch.randn(4, 4096))",
    "function defined under the guard": 'if __name__ == "__main__":\n    def {t}():\n        {f}(torch.randn(4, 4096))\n'
                                        '    {t}()',
}


def _script_scan(tmp_path, script: str, nm: dict) -> dict:
    (tmp_path / f"{nm['m']}.py").write_text(SCRIPT_MODULE.format(script=script.format(**nm), **nm))
    result = scan_paths([str(tmp_path)], Config(root=str(tmp_path), confidence="low"), use_cache=False, jobs=1)
    return {f.param: f.confidence for f in result.findings if f.code == "JG001"}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_modules_own_script_code_does_not_fix_its_wrappers_leading_dim(tmp_path, script):
    nm = _names(random.Random())
    assert _script_scan(tmp_path, SCRIPTS[script], nm) == {nm["n"]: "medium"}


def test_a_plain_function_of_the_module_is_still_a_caller(tmp_path):
    # the boundary: nothing says a private helper is a script, so its literal shape fixes the dim
    nm = _names(random.Random())
    assert _script_scan(tmp_path, "def _{t}():\n    {f}(torch.randn(4, 4096))", nm) == {}


def test_a_launch_in_a_modules_script_code_is_not_a_serving_launch(tmp_path):
    nm = _names(random.Random())
    src = MASKED_KERNEL + """
def main({x}, {s}):
    for {i} in range(len({s})):
        {k}[(1,)]({x}, {i}, BLOCK=16)
"""
    (tmp_path / f"{nm['m']}.py").write_text(src.format(**nm))
    result = scan_paths([str(tmp_path)], Config(root=str(tmp_path), confidence="low"), use_cache=False, jobs=1)
    assert [f for f in result.findings if f.code == "JG001"] == []


def test_files_named_one_by_one_are_told_by_their_place_in_the_project(tmp_path):
    # a pre-commit hook passes file names: tests/<helper>.py is a test there as in a scan of the tree
    nm = _names(random.Random())
    pkg = _library(tmp_path, nm)
    (tmp_path / "tests").mkdir()
    helper = tmp_path / "tests" / f"{nm['m']}.py"
    helper.write_text(CALLERS["literal-shape"].format(**nm))
    named = [str(pkg / "__init__.py"), str(pkg / f"{nm['lib']}.py"), str(helper)]
    result = scan_paths(named, Config(root=str(tmp_path), confidence="low"), use_cache=False, jobs=1)
    assert {f.param: f.confidence for f in result.findings if f.code == "JG001"} == {nm["n"]: "medium"}
