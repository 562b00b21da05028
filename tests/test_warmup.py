"""jitguard.warmup and `jitguard warmup` on a CPU: a stand-in driver runs Triton's real JIT path
(sm_90 compiles with the bundled ptxas, launches skipped). A loop is recorded to a trace in one
process; a fresh process warms up from it, then runs the same loop under expect_no_compiles()."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions

triton = pytest.importorskip("triton")

import jitguard  # noqa: E402
from jitguard.runtime import compat, steps  # noqa: E402
from jitguard.runtime import warmup as warmup_mod  # noqa: E402
from jitguard.runtime.trace import MAX_STRING, Trace, _clip, load_trace, write_trace  # noqa: E402
from jitguard.runtime.watch import _STATE  # noqa: E402
from runtime_helpers import FakeTensor, dtype, stand_in_driver  # noqa: E402
from runtime_kernels import fresh  # noqa: E402

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

PRELUDE = textwrap.dedent(f"""
    import json, os, sys
    sys.path.insert(0, {str(TESTS)!r})
    import jitguard
    from jitguard.runtime import compat
    from jitguard.testing import FakeTensor, stand_in_driver
""")

RECORD = PRELUDE + textwrap.dedent("""
    with stand_in_driver():
        import warmup_kernels as K
        launches = K.calls(FakeTensor)
        part = sys.argv[2] if len(sys.argv) > 2 else "all"
        if part != "all":  # one rank of a job: every other launch, from its own start
            launches = launches[int(part)::2]
        with jitguard.watch(trace=sys.argv[1]):
            K.run(launches)
""")

WARM = PRELUDE + textwrap.dedent("""
    with stand_in_driver():
        import warmup_kernels as K
        report = jitguard.warmup(sys.argv[1:])
        with jitguard.expect_no_compiles():  # the whole loop again: no compile, no re-benchmark
            K.run(K.calls(FakeTensor))
        kernels = {"scale": K.scale, "tuned": K.tuned.fn, "fill": K.Ops.fill}
        print(json.dumps({
            "report": report.to_dict(),
            "summary": report.summary(),
            "tuned_cache": {repr(k): str(v) for k, v in K.tuned.cache.items()},
            "cache_keys": {n: sorted(compat.kernel_cache_keys(k, 0)) for n, k in kernels.items()},
            "tuned_keys": [compat.normalized_key(K.tuned.fn, k) for k in compat.kernel_cache_keys(K.tuned.fn, 0)],
        }))
""")


def _env(cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JITGUARD")}
    env.update(TRITON_CACHE_DIR=str(cache), TRITON_DEFAULT_FP_FUSION="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p))
    return env


def _python(script: str, *args: str, cache: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-c", script, *args], env={**_env(cache), **(env or {})},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """One trace of the whole loop, recorded in its own process from a cold Triton cache."""
    d = tmp_path_factory.mktemp("recorded")
    _python(RECORD, str(d / "trace.json"), cache=d / "cache")
    return d / "trace.json"


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    steps.reset_steps()
    with stand_in_driver():
        yield
    assert not _STATE.watches, "a test left a watch active"


def _compile_keys(trace) -> dict[str, set]:
    out: dict[str, set] = {}
    for e in trace.compiles():
        out.setdefault(e.kernel_qualname.rsplit(".", 1)[-1], set()).add(e.key)
    return out


# ---------------------------------------------------------------------------------------------
# a fresh process warms up from the trace, then the loop compiles nothing
# ---------------------------------------------------------------------------------------------

def test_trace_names_module_and_qualname(recorded):
    data = json.loads(recorded.read_text())
    assert data["version"] == 2
    fill = [e for e in data["events"] if e["kernel"].endswith("fill")]
    assert fill and fill[0]["kernel_module"] == "warmup_kernels"
    assert fill[0]["kernel_qualname"] == "Ops.fill" and fill[0]["kernel"] == "warmup_kernels.Ops.fill"


def test_fresh_process_warms_up_and_the_loop_then_compiles_nothing(recorded, tmp_path):
    trace = load_trace(recorded)
    recorded_keys = _compile_keys(trace)
    out = _python(WARM, str(recorded), cache=tmp_path / "cold-cache")
    doc = json.loads(out.stdout)
    report = doc["report"]
    # every scale and fill variant, and of tuned only the config that won
    assert report["counts"] == {"warmed": len(recorded_keys["scale"]) + 1 + 1}, doc["summary"]
    assert all(v["reason"] is None for v in report["variants"])
    # exactly the recorded variants are in Triton's in-memory caches: nothing more, nothing less
    assert set(doc["cache_keys"]["scale"]) == recorded_keys["scale"]
    assert set(doc["cache_keys"]["fill"]) == recorded_keys["fill"]
    # the autotuner: only the winning config (the second, BLOCK 64 with 2 warps) was compiled, and
    # both recorded keys map to it, so the loop never re-benchmarks
    assert report["other_configs"] == 1
    assert [a["status"] for a in report["autotune"]] == ["primed", "primed"]
    assert len(doc["tuned_keys"]) == 1 and "('constexpr', 64)" in doc["tuned_keys"][0]
    assert len(doc["tuned_cache"]) == 2
    assert all(c.startswith("BLOCK: 64, num_warps: 2") for c in doc["tuned_cache"].values())
    assert "warmed 9 of 9 variants of 3 kernels" in doc["summary"]


def test_every_recorded_facet_was_rebuilt(recorded):
    """The loop's variants differ in every facet the warm-up must rebuild."""
    whats = [", ".join(f"{p.name}={p.type}/{p.value_class}/{p.aligned16}/{p.constexpr}" for p in e.params)
             for e in load_trace(recorded).compiles() if e.kernel.endswith(".scale")]
    joined = " | ".join(whats)
    assert "y_ptr=*fp16/None/False" in joined  # an unaligned pointer
    assert "offset=i64/none" in joined  # an i64 int
    assert "n=i32/div16" in joined and "n=constexpr/one" in joined  # value classes
    assert "OUT=constexpr/None/None/triton.language.float32" in joined  # a dtype constexpr
    options = [e.options for e in load_trace(recorded).compiles() if e.kernel.endswith(".scale")]
    assert any(o.get("num_warps") == 2 for o in options)  # explicit launch options


def test_multi_rank_directory(tmp_path):
    ranks = tmp_path / "traces"
    ranks.mkdir()
    for rank in (0, 1):  # each rank launches half of the loop
        _python(RECORD, str(ranks / f"rank{rank}.json"), str(rank), cache=tmp_path / f"cache{rank}",
                env={"RANK": str(rank), "WORLD_SIZE": "2"})
    (ranks / "merged.json").write_text('{"schema": "jitguard.merged"}')  # not a trace: left out
    traces = [load_trace(ranks / f"rank{r}.json") for r in (0, 1)]
    assert [t.process.rank for t in traces] == [0, 1]
    per_rank = [_compile_keys(t) for t in traces]
    assert per_rank[0]["scale"] != per_rank[1]["scale"]  # neither rank alone saw every variant
    out = _python(WARM, str(ranks), cache=tmp_path / "cold-cache")  # the union, then the whole loop
    doc = json.loads(out.stdout)
    union = per_rank[0]["scale"] | per_rank[1]["scale"]
    assert set(doc["cache_keys"]["scale"]) == union
    # tuned's winning variant, compiled on both ranks, counts once; plus fill's
    assert doc["report"]["counts"]["warmed"] == len(union) + 1 + 1
    assert any("merged.json" in n for n in doc["report"]["notes"])


def test_jitguard_run_warmup_at_the_first_compile(recorded, tmp_path):
    """JITGUARD_WARMUP through `jitguard run --warmup`: the program is not changed; its first
    launch warms every recorded variant, so the rest of the loop compiles nothing."""
    prog = tmp_path / "prog.py"
    prog.write_text(PRELUDE + textwrap.dedent("""
        with stand_in_driver():
            import warmup_kernels as K
            launches = K.calls(FakeTensor)
            K.run(launches[:1])  # start-up: the first launch
            with jitguard.expect_no_compiles():
                K.run(launches)
        print("no compiles after start-up")
    """))
    out = subprocess.run([sys.executable, "-m", "jitguard", "run", "--mode", "warn", "--trace",
                          str(tmp_path / "t2.json"), "--warmup", str(recorded), "--", sys.executable,
                          str(prog)], env=_env(tmp_path / "cold-cache"), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "no compiles after start-up" in out.stdout
    # 9 variants, 8 compiled by the warm-up: the launch that triggered it compiles its own
    assert "jitguard warmup (at the first compile): warmed 8 of 9 variants of 3 kernels in " in out.stderr
    assert "(1 launch, 2 of 2 autotune keys primed" in out.stderr
    # the warm-up's compiles are expected ones; the launch's own compile came after 6 of them
    assert out.stderr.count("RecompileWarning:") == 1
    t2 = load_trace(tmp_path / "t2.json")
    from_trace = [e for e in t2.compiles() if e.from_trace]
    assert len(from_trace) == 8 and all(e.warmup for e in from_trace)
    launched = [e for e in t2.compiles() if not e.from_trace]
    assert len(launched) == 1 and any(c.startswith(f"{prog}:") for c in launched[0].call_stack)


def test_check_needs_no_gpu_and_warmup_without_one_says_so(recorded, tmp_path):
    env = _env(tmp_path / "cache")
    check = subprocess.run([sys.executable, "-m", "jitguard", "warmup", "--check", "-I", str(TESTS),
                            str(recorded)], env=env, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "rebuilt and checked 9 of 9 variants of 3 kernels" in check.stdout
    assert "2 of 2 autotune keys checked" in check.stdout
    compile_ = subprocess.run([sys.executable, "-m", "jitguard", "warmup", "-I", str(TESTS), str(recorded)],
                              env={**env, "CUDA_VISIBLE_DEVICES": ""},  # no GPU, also on a GPU machine
                              capture_output=True, text=True, timeout=300)
    assert compile_.returncode == 2
    assert "Triton has none here" in compile_.stderr and "--check" in compile_.stderr
    missing = subprocess.run([sys.executable, "-m", "jitguard", "warmup", "--check", str(recorded)],
                             env={**env, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, capture_output=True,
                             text=True, timeout=300)
    assert missing.returncode == 1
    assert "skipped 7 variants of warmup_kernels.scale: cannot import warmup_kernels" in missing.stdout


# ---------------------------------------------------------------------------------------------
# in this process: kernels given as objects, and every reason a variant is skipped
# ---------------------------------------------------------------------------------------------

def _record(kernel, launches) -> Trace:
    with jitguard.watch() as w:
        for args, kwargs in launches:
            kernel.warmup(*args, grid=(1,), **kwargs)
    return w.snapshot()


def _launches():
    x = FakeTensor(1 << 20, dtype("float16"))
    return [((x, x, 1000), dict(BLOCK=64)), ((x, x, 1024), dict(BLOCK=64)),
            ((x, x, 1000), dict(BLOCK=64, num_warps=8))]


def test_kernel_objects_are_warmed_in_place():
    recorded_with = fresh()
    trace = _record(recorded_with, _launches())
    target = fresh()  # another JITFunction of the same kernel: its own empty cache
    report = jitguard.warmup(trace, kernels=[target])
    assert [v.status for v in report.variants] == ["warmed"] * 3
    assert set(compat.kernel_cache_keys(target, 0)) == {e.key for e in trace.compiles()}
    # loaded as a first launch would (binary on the device, launcher built), yet never launched
    assert all(compat.compiled_kernel(target, e.key, 0).module is not None for e in trace.compiles())
    with jitguard.expect_no_compiles():
        for args, kwargs in _launches():
            target.warmup(*args, grid=(1,), **kwargs)
    again = jitguard.warmup(trace, kernels=[target])
    assert [v.status for v in again.variants] == ["present"] * 3


def test_without_kernels_a_kernel_that_cannot_be_imported_is_skipped_with_the_reason():
    trace = _record(fresh(), _launches()[:1])
    report = jitguard.warmup(trace)  # copy_body in runtime_kernels is the plain function
    assert [v.status for v in report.variants] == ["skipped"]
    assert report.variants[0].reason == "runtime_kernels.copy_body is not a @triton.jit kernel"
    with pytest.raises(warmup_mod.WarmupError, match="not a @triton.jit kernel") as info:
        jitguard.warmup(trace, strict=True)
    assert info.value.report.skipped


def _crafted(trace: Trace, edit) -> Trace:
    t = copy.deepcopy(trace)
    edit(t.events[0])
    return t


@pytest.mark.parametrize("edit, reason", [
    (lambda e: setattr(e.params[2], "name", "m"),
     "the kernel's parameters changed since the trace: recorded (x_ptr, y_ptr, m, BLOCK), now (x_ptr, y_ptr, n, BLOCK)"),
    (lambda e: setattr(e, "key", e.key.replace("'debug': False", "'debug': True")),
     "the rebuilt key differs from the recorded one (options debug: recorded True, rebuilt False)"),
    (lambda e: setattr(e, "key", e.key.replace("('i32', '')", "('nvTmaDesc', '')")),
     "parameter n has Triton type 'nvTmaDesc', an argument jitguard does not rebuild"),
    (lambda e: setattr(e, "key", e.key.replace("('constexpr', 64)", "('constexpr', some.Object(3))")),
     "constexpr BLOCK: not a Python literal nor an importable name: some.Object(3)"),
    (lambda e: setattr(e, "key", _clip(e.key + " " * MAX_STRING)), "its key was clipped in the trace"),
    (lambda e: setattr(e, "key", None), "the trace has no key for it"),
])
def test_a_variant_that_cannot_be_rebuilt_is_skipped_never_guessed(edit, reason):
    if compat.version_tuple() < (3, 3) and reason.startswith(("parameter n", "constexpr")):
        pytest.skip("Triton 3.2's keys are flat strings: this case edits a key in the 3.3+ format")
    trace = _record(fresh(), _launches()[:1])
    target = fresh()
    report = jitguard.warmup(_crafted(trace, edit), kernels=[target])
    assert [v.status for v in report.variants] == ["skipped"]
    assert report.variants[0].reason.startswith(reason), report.variants[0].reason
    assert compat.kernel_cache_keys(target, 0) == []  # nothing compiled from a guess


def test_version_1_trace_resolves_a_dotted_qualname(recorded, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS))
    old = json.loads(recorded.read_text())
    old["version"] = 1
    for e in old["events"]:
        del e["kernel_module"], e["kernel_qualname"], e["from_trace"]
    (tmp_path / "v1.json").write_text(json.dumps(old))
    assert load_trace(tmp_path / "v1.json").events[0].kernel_module is None
    report = warmup_mod.check(tmp_path / "v1.json")  # warmup_kernels.Ops.fill: module, then Ops.fill
    assert report.ok, report.summary()
    assert {v.kernel for v in report.variants} == {"warmup_kernels.scale", "warmup_kernels.tuned",
                                                   "warmup_kernels.Ops.fill"}


def test_main_module_kernel_says_how_to_warm_it():
    trace = _record(fresh(), _launches()[:1])
    for e in trace.events:
        e.kernel, e.kernel_module, e.kernel_qualname = "__main__.copy_body", "__main__", "copy_body"
    report = jitguard.warmup(trace)
    assert "defined in the program's __main__" in report.variants[0].reason


def test_another_triton_versions_trace_is_named(recorded):
    trace = load_trace(recorded)
    trace.process.triton_version = "3.1.0"
    report = warmup_mod.check(trace, kernels=["scale"])
    assert any("recorded with Triton 3.1.0" in n for n in report.notes)
    assert {v.kernel for v in report.variants} == {"warmup_kernels.scale"}  # --kernel picks


def test_written_trace_validates_against_the_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from jitguard.runtime.trace import TRACE_JSON_SCHEMA

    trace = _record(fresh(), _launches())
    with jitguard.watch(mode="raise") as w:  # warm-up compiles are expected: not recompiles
        report = jitguard.warmup(trace, kernels=[fresh()])
    assert report.ok
    assert [e.from_trace for e in w.events] == [True] * 3 and [e.variant for e in w.events] == [1, 2, 3]
    write_trace(w.snapshot(), tmp_path / "t.json")
    jsonschema.validate(json.loads((tmp_path / "t.json").read_text()), TRACE_JSON_SCHEMA)
    assert w.recompile_count == 0


FAKE_VLLM_WORKER = textwrap.dedent("""
    import warmup_kernels as K
    from jitguard.runtime import compat
    from jitguard.testing import FakeTensor

    class Worker:
        def compile_or_warm_up_model(self):
            # vLLM's own warm-up: jitguard's ran just before, so every variant is compiled by now
            self.variants_at_start = len(compat.kernel_cache_keys(K.scale, 0))

        def execute_model(self):
            K.run(K.calls(FakeTensor))
""")


def test_vllm_plugin_warms_up_before_compile_or_warm_up_model(recorded, tmp_path):
    site = tmp_path / "site" / "vllm" / "v1" / "worker"
    site.mkdir(parents=True)
    for d in (site, site.parent, site.parent.parent):
        (d / "__init__.py").write_text("")
    (site / "gpu_worker.py").write_text(FAKE_VLLM_WORKER)
    script = PRELUDE + textwrap.dedent(f"""
        sys.path.insert(0, {str(tmp_path / "site")!r})
        from jitguard.integrations import vllm as plugin
        plugin.register()                 # what vLLM does first in every process
        assert "triton" not in sys.modules
        with stand_in_driver():
            from vllm.v1.worker.gpu_worker import Worker, K
            worker = Worker()
            worker.compile_or_warm_up_model()
            with jitguard.expect_no_compiles():
                worker.execute_model()
        print("variants at the start of compile_or_warm_up_model:", worker.variants_at_start)
    """)
    out = _python(script, cache=tmp_path / "cold-cache", env={"JITGUARD_WARMUP": str(recorded)})
    n_scale = len(_compile_keys(load_trace(recorded))["scale"])
    assert f"variants at the start of compile_or_warm_up_model: {n_scale}" in out.stdout
    assert ("jitguard warmup (before vLLM's compile_or_warm_up_model): warmed 9 of 9 variants of "
            "3 kernels") in out.stderr


def test_a_bare_jit_function_given_still_primes_its_autotuner(recorded, monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS))
    import warmup_kernels as K

    report = jitguard.warmup(recorded, kernels=[K.tuned.fn])  # the JITFunction inside the autotuner
    assert [a.status for a in report.autotune] == ["primed", "primed"], report.summary()
    assert all(str(c).startswith("BLOCK: 64") for c in K.tuned.cache.values())
