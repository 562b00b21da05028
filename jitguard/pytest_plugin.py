"""pytest plugin (entry point ``pytest11``): Triton compiles per test, and a recompile budget marker.

    pytest --jitguard                    report compiles per test at the end of the session
    pytest --jitguard-trace=DIR          also write one trace per watched test into DIR
    @pytest.mark.jitguard(max_recompiles=0)   fail the test if it recompiles a kernel
    @pytest.mark.jitguard(max_compiles=0)     fail the test if it compiles anything at all
    (``max_compiles`` alone sets no recompile budget; give both to enforce both)

A recompile is a second or later variant of a kernel in this process (so a test that only compiles
what an earlier test already compiled does not count), or an autotune re-benchmark. Loading the
plugin imports nothing from Triton; a test is watched only with --jitguard or the marker.
"""
from __future__ import annotations

import os
import re

import pytest

_KEY = "jitguard_results"


def pytest_addoption(parser):
    group = parser.getgroup("jitguard", "Triton recompile watcher")
    group.addoption("--jitguard", action="store_true", default=False,
                    help="Watch Triton compiles in every test and report them per test.")
    group.addoption("--jitguard-trace", default=None, metavar="DIR",
                    help="With --jitguard: write each watched test's trace into DIR.")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "jitguard(max_recompiles=0, max_compiles=None): fail the test if Triton recompiles "
        "(or compiles) more than this while it runs; max_compiles alone sets no recompile budget.",
    )
    setattr(config, _KEY, [])


def _marker_limits(item):
    marker = item.get_closest_marker("jitguard")
    if marker is None:
        return None
    if marker.args:
        raise pytest.UsageError(f"{item.nodeid}: use @pytest.mark.jitguard(max_recompiles=N), not positional args")
    unknown = set(marker.kwargs) - {"max_recompiles", "max_compiles"}
    if unknown:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.jitguard got unknown argument(s) {sorted(unknown)}")
    # max_recompiles defaults to 0 only when no budget is given: max_compiles=N alone allows
    # recompiles within its N compiles
    default_recompiles = None if "max_compiles" in marker.kwargs else 0
    limits = {"max_recompiles": marker.kwargs.get("max_recompiles", default_recompiles),
              "max_compiles": marker.kwargs.get("max_compiles")}
    for k, v in limits.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.jitguard({k}=...) must be an int >= 0")
    return limits


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    limits = _marker_limits(item)
    enabled = item.config.getoption("--jitguard")
    if limits is None and not enabled:
        yield
        return
    from jitguard.runtime.watch import watch

    w = watch(mode="record")
    w.__enter__()
    try:
        outcome = yield
    finally:
        w.__exit__(None, None, None)
    trace_dir = item.config.getoption("--jitguard-trace")
    if enabled:
        getattr(item.config, _KEY).append((item.nodeid, w))
        if trace_dir and w.trace.events:
            safe = re.sub(r"[^\w.-]+", "_", item.nodeid)[-150:]
            w.to_json(os.path.join(trace_dir, f"{safe}.json"))
    if limits is None or outcome.excinfo is not None:
        return
    problems = []
    if limits["max_compiles"] is not None and w.compile_count > limits["max_compiles"]:
        problems.append(f"{w.compile_count} compile{'s' if w.compile_count != 1 else ''} "
                        f"(max_compiles={limits['max_compiles']})")
        offending = w.events
    else:
        offending = w.recompiles
    if limits["max_recompiles"] is not None and len(w.recompiles) > limits["max_recompiles"]:
        n = len(w.recompiles)
        problems.append(f"{n} recompile{'s' if n != 1 else ''} (max_recompiles={limits['max_recompiles']})")
    if not problems:
        return
    from jitguard.runtime.text import explain_event

    text = "\n".join(explain_event(e) for e in offending[:10])
    exc = pytest.fail.Exception(f"jitguard: {' and '.join(problems)}:\n{text}", pytrace=False)
    if hasattr(outcome, "force_exception"):
        outcome.force_exception(exc)
    else:  # pytest < 8
        raise exc


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    results = getattr(config, _KEY, None)
    if not config.getoption("--jitguard") or results is None:
        return
    tr = terminalreporter
    tr.section("jitguard: Triton compiles per test")
    rows = [(nodeid, w) for nodeid, w in results if w.trace.events]
    if not rows:
        tr.write_line(f"no Triton compiles in {len(results)} watched test{'s' if len(results) != 1 else ''}")
        return
    total_c = sum(w.compile_count for _, w in rows)
    total_r = sum(len(w.recompiles) for _, w in rows)
    total_ms = sum(e.compile_ms or 0 for _, w in rows for e in w.trace.events)
    for nodeid, w in rows:
        ms = sum(e.compile_ms or 0 for e in w.trace.events)
        kernels = sorted({e.kernel.rsplit(".", 1)[-1] for e in w.trace.events})
        tr.write_line(f"{w.compile_count:4d} compiles {len(w.recompiles):4d} recompiles {ms:9.1f} ms  "
                      f"{nodeid}  [{', '.join(kernels)}]")
        for e in w.recompiles[:5]:
            if e.diff:
                tr.write_line(f"       #{e.variant} {e.kernel.rsplit('.', 1)[-1]}: "
                              f"{'; '.join(d.what for d in e.diff)}")
    tr.write_line(f"total: {total_c} compiles, {total_r} recompiles, {total_ms:.1f} ms in "
                  f"{len(rows)} of {len(results)} watched tests")
