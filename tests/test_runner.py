"""The scan runner: prefilter, cache, parallel jobs, per-file errors, on real source through the
real extractor and linker. Which files get parsed is seen by wrapping ``extract_file`` (a file that
crashes the extractor is made by the wrapper too); what the cache serves, and that workers and
crashes don't change results, through ``scan_paths``.
"""
from __future__ import annotations

import os
import random
import threading

import pytest

from jitguard.config import Config
from jitguard.static import extract
from jitguard.static import runner as runner_mod
from jitguard.static.runner import scan_paths

MAIN_PID = os.getpid()
PARSED_LOG: list[str] = []


@pytest.fixture(autouse=True)
def logged_extract(monkeypatch):
    """Log each file the runner parses; ``CRASH_INTERNAL`` in a file is a bug of the extractor,
    ``CRASH_WORKER`` kills the worker process parsing it (as a crash in native code would)."""
    real = extract.extract_file

    def logged(path, source, module, **kw):
        PARSED_LOG.append(path)
        if b"CRASH_INTERNAL" in source:
            raise ValueError("engine bug")
        if b"CRASH_WORKER" in source and os.getpid() != MAIN_PID:
            os._exit(3)
        return real(path, source, module, **kw)

    monkeypatch.setattr(extract, "extract_file", logged)


def launch_sites(findings) -> list[str]:
    """The launch of every finding (each finding points at its kernel and lists its launches)."""
    return sorted(la["path"] for f in findings for la in f.details["launches"])


KERNEL = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef {name}(x, num_tokens, BLOCK: tl.constexpr):\n    pass\n"
LAUNCH = "from {mod} import {name}\n\ndef run(x):\n    {name}[(1,)](x, x.shape[0], BLOCK=64)\n"
PLAIN = "import os\n\ndef f(x):\n    return [x] * {n}\n"


def make_tree(root, rng, n_kernels=5, n_launchers=6, n_plain=20):
    """A random package: kernel modules, launcher modules importing them, unrelated modules."""
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    names = [f"k_{rng.randrange(10**6)}_{i}" for i in range(n_kernels)]
    for i, name in enumerate(names):
        (pkg / f"kern{i}.py").write_text(KERNEL.format(name=name))
    launchers = []
    for j in range(n_launchers):
        i = rng.randrange(n_kernels)
        p = pkg / f"launch{j}.py"
        p.write_text(LAUNCH.format(mod=f"pkg.kern{i}", name=names[i]))
        launchers.append(p)
    plain = []
    for j in range(n_plain):
        p = pkg / f"plain{j}.py"
        p.write_text(PLAIN.format(n=rng.randrange(100)))
        plain.append(p)
    return names, launchers, plain


def scan(root, tmp_path, **kw):
    PARSED_LOG.clear()
    kw.setdefault("jobs", 1)
    kw.setdefault("cache_dir", str(tmp_path / "cache"))
    return scan_paths([str(root)], Config(root=str(root)), **kw)


@pytest.fixture
def rng():
    seed = random.randrange(2**32)
    print("seed", seed)
    return random.Random(seed)


def test_prefilter_parses_only_kernel_and_launch_files(tmp_path, rng, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "src"
    root.mkdir()
    names, launchers, plain = make_tree(root, rng, n_plain=rng.randrange(5, 30))
    res = scan(root, tmp_path, use_cache=False)
    parsed = {os.path.basename(p) for p in PARSED_LOG}
    assert parsed == {f"kern{i}.py" for i in range(len(names))} | {p.name for p in launchers}
    assert res.files_skipped == len(plain) + 1  # + __init__.py
    assert res.files_scanned == len(names) + len(launchers) + len(plain) + 1
    # every launcher's cross-module launch is linked to its kernel
    assert launch_sites(res.findings) == sorted(f"src/pkg/{p.name}" for p in launchers)
    assert all(f.kernel.startswith("pkg.kern") for f in res.findings)


def test_module_names_follow_packages(tmp_path, rng, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_tree(tmp_path, rng, n_kernels=2, n_launchers=2, n_plain=0)
    res = scan(tmp_path, tmp_path, use_cache=False, keep_facts=True)
    mods = {f.path: f.module for f in res.facts}
    assert mods["pkg/kern0.py"] == "pkg.kern0" and mods["pkg/launch1.py"] == "pkg.launch1"


def test_warm_cache_serves_everything_and_rebuilds_changes(tmp_path, rng, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "t"
    root.mkdir()
    names, launchers, _ = make_tree(root, rng)
    cold = scan(root, tmp_path)
    assert cold.files_parsed == cold.files_analyzed > 0 and cold.cache_hits == 0
    warm = scan(root, tmp_path)
    assert PARSED_LOG == [] and warm.files_parsed == 0
    assert warm.cache_hits == cold.files_analyzed
    assert warm.findings == cold.findings
    # the cache holds unfiltered results: another selection needs no parsing either
    no001 = scan_paths([str(root)], Config(root=str(root), ignore=("JG001",)),
                       jobs=1, cache_dir=str(tmp_path / "cache"))
    assert PARSED_LOG == [] and no001.findings == [] and no001.suppressed == len(cold.findings)
    # change one launcher so it no longer launches: only that file is parsed again
    victim = rng.choice(launchers)
    victim.write_text("def run(x):\n    return x\n")
    again = scan(root, tmp_path)
    assert PARSED_LOG == []  # no longer mentions a kernel: not parsed at all
    assert len(launch_sites(again.findings)) == len(launch_sites(cold.findings)) - 1
    victim.write_text(LAUNCH.format(mod="pkg.kern0", name=names[0]) + "# changed\n")
    again = scan(root, tmp_path)
    assert [os.path.basename(p) for p in PARSED_LOG] == [victim.name]
    assert len(launch_sites(again.findings)) == len(launch_sites(cold.findings))


def test_corrupt_cache_entries_are_rebuilt(tmp_path, rng, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t").mkdir()
    make_tree(tmp_path / "t", rng)
    cold = scan(tmp_path / "t", tmp_path)
    entries = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / "cache") for f in fs]
    assert entries
    for e in entries:  # truncate, garble, or replace with valid JSON of the wrong shape
        choice = rng.randrange(3)
        with open(e, "w") as fh:
            fh.write(["", "{\"key\": ", "{\"key\": \"x\", \"facts\": 1}"][choice])
    again = scan(tmp_path / "t", tmp_path)
    assert again.findings == cold.findings
    assert again.files_parsed == cold.files_analyzed
    third = scan(tmp_path / "t", tmp_path)
    assert third.files_parsed == 0 and third.findings == cold.findings


def test_parallel_jobs_match_serial(tmp_path, rng, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_tree(tmp_path, rng, n_kernels=8, n_launchers=12, n_plain=5)
    serial = scan(tmp_path, tmp_path, use_cache=False, jobs=1)
    parallel = scan(tmp_path, tmp_path, use_cache=False, jobs=2)
    assert parallel.jobs == 2
    assert parallel.findings == serial.findings and parallel.findings


def test_worker_crash_falls_back_and_internal_errors_are_per_file(tmp_path, rng, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_tree(tmp_path, rng, n_kernels=4, n_launchers=6, n_plain=2)
    (tmp_path / "pkg" / "boom.py").write_text("import triton  # jit\nCRASH_WORKER = 1\n")
    (tmp_path / "pkg" / "bug.py").write_text("import triton  # jit\nCRASH_INTERNAL = 1\n")
    base = scan(tmp_path, tmp_path, use_cache=False, jobs=1)
    res = scan(tmp_path, tmp_path, use_cache=False, jobs=2)
    assert [e.path for e in res.internal_errors] == ["pkg/bug.py"]
    assert "ValueError: engine bug" in res.internal_errors[0].message
    assert res.findings == base.findings and len(launch_sites(res.findings)) == 6
    # internal errors are never cached: the next run tries again
    scan(tmp_path, tmp_path)
    again = scan(tmp_path, tmp_path)
    assert any(p.endswith("bug.py") for p in PARSED_LOG)
    assert len(again.internal_errors) == 1


def test_a_bug_in_the_returns_phase_is_an_internal_error_and_the_scan_goes_on(tmp_path, rng, monkeypatch):
    from jitguard.static import link

    monkeypatch.chdir(tmp_path)
    make_tree(tmp_path, rng, n_kernels=2, n_launchers=3, n_plain=1)
    base = scan(tmp_path, tmp_path, use_cache=False)

    def broken(facts):
        raise ValueError("returns bug")

    monkeypatch.setattr(link, "return_refs", broken)
    res = scan(tmp_path, tmp_path, use_cache=False)
    assert [e.path for e in res.internal_errors] == ["<returns in other modules>"]
    assert "ValueError: returns bug" in res.internal_errors[0].message
    assert res.internal_tracebacks and "returns bug" in res.internal_tracebacks[0][1]
    assert res.findings == base.findings and res.findings


def test_the_scan_collects_young_objects_rarely_and_restores_the_threshold(tmp_path, rng, monkeypatch):
    import gc

    from jitguard.static.collector import YOUNG_THRESHOLD

    monkeypatch.chdir(tmp_path)
    make_tree(tmp_path, rng, n_kernels=2, n_launchers=2, n_plain=1)
    seen = []
    real = runner_mod.collect_files
    monkeypatch.setattr(runner_mod, "collect_files", lambda *a: (seen.append(gc.get_threshold()), real(*a))[1])
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 9, 8)
        res = scan(tmp_path, tmp_path, use_cache=False)
        assert seen == [(YOUNG_THRESHOLD, 9, 8)] and res.findings
        assert gc.get_threshold() == (700, 9, 8)
        gc.set_threshold(0, 9, 8)  # the collector turned off stays off
        scan(tmp_path, tmp_path, use_cache=False)
        assert seen[-1] == (0, 9, 8) and gc.get_threshold() == (0, 9, 8)
    finally:
        gc.set_threshold(*before)


def test_source_errors_are_cached_file_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text("import triton\n@triton.jit\ndef k(:\n")
    # not UTF-8 in a string (Python refuses it; in a comment CPython 3.11 skips such bytes)
    (tmp_path / "latin.py").write_bytes(b"import triton  # jit\nname = '\xe9\xff'\n")
    res = scan(tmp_path, tmp_path)
    assert [(e.path, e.line) for e in res.errors] == [("bad.py", 3), ("latin.py", 2)]
    assert "UTF-8" in res.errors[1].message
    again = scan(tmp_path, tmp_path)
    assert PARSED_LOG == [] and [e.path for e in again.errors] == ["bad.py", "latin.py"]


def test_unreadable_file_is_a_file_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(KERNEL.format(name="ka") + "def go(x):\n    ka[(1,)](x, x.shape[0], BLOCK=64)\n")
    (tmp_path / "secret.py").write_text(KERNEL.format(name="kb"))
    real_read = runner_mod.read_bytes

    def guarded_read(path, *a, **k):  # as root, chmod 000 would not stop the read
        if str(path).endswith("secret.py"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_read(path, *a, **k)

    monkeypatch.setattr(runner_mod, "read_bytes", guarded_read)
    res = scan(tmp_path, tmp_path, use_cache=False)
    assert [(e.path, e.message) for e in res.errors] == [("secret.py", "cannot read: permission denied")]
    assert len(res.findings) == 1


def test_concurrent_scans_share_one_cache(tmp_path, rng, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # what runs at once is the cache's reads and writes; parsing is serialized, since CPython 3.11's
    # ast constructor checks its recursion depth per interpreter ("AST constructor recursion depth
    # mismatch" when two threads build ast objects at once)
    import ast
    import threading as _threading

    parse, parse_lock = ast.parse, _threading.Lock()

    def serialized_parse(*args, **kwargs):
        with parse_lock:
            return parse(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", serialized_parse)
    make_tree(tmp_path, rng, n_kernels=6, n_launchers=10, n_plain=3)
    expected = scan(tmp_path, tmp_path, use_cache=False).findings
    results, errors = [], []

    def worker():
        try:
            results.append(scan_paths([str(tmp_path)], Config(root=str(tmp_path)),
                                      jobs=1, cache_dir=str(tmp_path / "shared-cache")))
        except Exception as exc:  # pragma: no cover - the failure is the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(r.findings == expected for r in results) and len(results) == 4
    leftovers = [f for d, _, fs in os.walk(tmp_path / "shared-cache") for f in fs if ".part" in f]
    assert leftovers == []


def test_select_ignore_and_per_file_ignores_apply_after_link(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tests").mkdir()
    src = KERNEL.format(name="kk").replace("BLOCK", "n_rows") + "def g(x):\n    kk[(1,)](x, x.shape[0], x.shape[0])\n"
    (tmp_path / "a.py").write_text(src)
    (tmp_path / "tests" / "b.py").write_text(src)

    def codes(config):
        res = scan_paths([str(tmp_path)], config, jobs=1, use_cache=False)
        return sorted((f.path, f.code) for f in res.findings), res.suppressed

    # at every level: the JG002 here rests on the leading-dim convention (low for a constexpr)
    base = Config(root=str(tmp_path), confidence="low")
    assert codes(base)[0] == [("a.py", "JG001"), ("a.py", "JG002"), ("tests/b.py", "JG001"),
                              ("tests/b.py", "JG002")]
    assert codes(base.with_cli(ignore=["JG002"])) == ([("a.py", "JG001"), ("tests/b.py", "JG001")], 2)
    assert codes(base.with_cli(select=["JG002"]))[0] == [("a.py", "JG002"), ("tests/b.py", "JG002")]
    pfi = Config(root=str(tmp_path), per_file_ignores=(("tests/", ("JG00",)),), confidence="low")
    assert codes(pfi)[0] == [("a.py", "JG001"), ("a.py", "JG002")]


def test_phase2_prefilter_contexts(rng):
    from jitguard.static.prefilter import NameMatcher, may_define_kernels

    name = f"kern_{rng.randrange(16**5):x}"
    other = f"{name}_tail"  # a longer identifier that merely starts with the name
    m = NameMatcher([name])
    launch = "f(x)[0](y)\n"  # some launch-shaped call elsewhere in the file
    reach = [
        f"import m\nm.{name}[(1,)](x)\n",
        f"self.{name} .run(x, grid=(1,))\n",
        f"{launch}from m import a, {name}\n",
        f"{launch}from m import (\n    a,\n    {name},  # the kernel\n)\n",
        f"{launch}from m import {name} as k\n",
        f"{launch}k = m.{name}\n",
        f"{launch}k = None if c else {name}\n",
        f"{launch}def pick():\n    return {name}\n",
        # no launch-shaped call: the kernel bound to its grid, called later
        f"from m import {name}\ng = {name}[(n,)]\ng(x, n)\n",
        # handed to a function, which may launch it (link.py decides)
        f"from m import {name}\nlaunch({name}, grid, n=n)\n",
        f"from m import (\n    {name},\n)\nlaunch(\n    a, {name}, grid)\n",
    ]
    miss = [
        f"{launch}# {name} is documented here\n",
        f"from m import {name}\n",  # no launch-shaped call at all
        f"from m import {name}\ny = {name}\n",  # nor a subscript of the kernel, nor an argument
        f"from m import a, {name}, b\n",
        f"y = f(a, {name})\n",  # an argument, but no import of it: some other value of that name
        f"y = {name}[0]\n",  # nor a subscript
        f"{launch}{other}[0]\nfrom m import {other}\n",
    ]
    for src in reach:
        assert m.launches_named_kernel(src.encode()), src
    for src in miss:
        assert not m.launches_named_kernel(src.encode()), src
    assert may_define_kernels(b"from triton import jit as J\n")
    assert not may_define_kernels(b"import torch\n@torch.jit.script\ndef f(): pass\n")
