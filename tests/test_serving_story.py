"""The serving story, end to end on a CPU: the loop of examples/serving_loop.py on the uncorrected
twins under ``jitguard.watch`` -> ``jitguard fix --from-trace --write`` on a copy -> the same loop on
the fixed copy compiles nothing after its first step.

Triton's real JIT path runs with the stand-in sm_90 driver (tests/runtime_helpers.py): every compile
is a real ptxas compile, launches are skipped. The expected variant counts come from Triton's value
classes of each step's ints (== 1, % 16 == 0, other), computed here from the stream itself.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import random
import shutil
import sys

import pytest
from click.testing import CliRunner

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

import jitguard  # noqa: E402
from jitguard.cli import main  # noqa: E402
from jitguard.runtime.steps import reset_steps  # noqa: E402
from jitguard.runtime.trace import load_trace  # noqa: E402
from runtime_helpers import stand_in_driver  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
RNG = random.Random(os.urandom(8))


def _load_loop():
    spec = importlib.util.spec_from_file_location("serving_loop_under_test", ROOT / "examples" / "serving_loop.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


loop = _load_loop()


def _cls(v: int) -> str:
    return "one" if v == 1 else "div16" if v % 16 == 0 else "other"


def _expected(stream) -> tuple[dict, dict]:
    """Variants Triton must compile for the twins over ``stream``, and the step of each first use:
    RoPE/FP8 keys on (num_tokens, T4 = ceil(T/4)*4); the MoE GEMM on (EM, num_valid_tokens = T*topk)."""
    bm = loop.MOE_CONFIG["BLOCK_M"]
    first: dict[str, dict] = {"rope_fp8": {}, "moe_gemm": {}}
    for i, s in enumerate(stream):
        t = s.num_tokens
        slots = t * loop.TOPK
        em = -(-(slots + min(loop.NUM_EXPERTS, slots) * (bm - 1)) // bm) * bm
        first["rope_fp8"].setdefault((_cls(t), _cls((t + 3) // 4 * 4)), i)
        first["moe_gemm"].setdefault((_cls(em), _cls(slots)), i)
    counts = {"rope_fp8": len(first["rope_fp8"]), "moe_gemm": len(first["moe_gemm"]), "moe_align_block_size": 1}
    new_at: dict[int, dict] = {}
    for name, keys in first.items():
        for step in keys.values():
            new_at.setdefault(step, {}).setdefault(name, 0)
            new_at[step][name] += 1
    new_at.setdefault(0, {})["moe_align_block_size"] = 1
    return counts, new_at


def _stream():
    """A fresh seeded serving stream whose batch sizes reach at least 3 value-class pairs of the
    RoPE/FP8 kernel and 2 of the MoE GEMM (so the twins must recompile mid-traffic)."""
    while True:
        seed = RNG.randrange(1 << 31)
        stream = loop.serving_stream(RNG.randrange(30, 60), seed)
        counts, _ = _expected(stream)
        if counts["rope_fp8"] >= 3 and counts["moe_gemm"] >= 2:
            return seed, stream


def test_serving_stream_shape():
    seed = RNG.randrange(1 << 31)
    stream = loop.serving_stream(300, seed)
    assert stream == loop.serving_stream(300, seed)  # seeded
    assert len(stream) == 300 and all(s.num_tokens >= 1 for s in stream)
    assert all(s.num_tokens == s.decode_tokens + s.prefill_tokens for s in stream)
    assert all(s.num_tokens <= 8192 for s in stream)
    decode = [s for s in stream if s.kind == "decode"]
    assert len(decode) > len(stream) / 2  # mostly decode batches
    assert max(s.num_tokens for s in decode) < min(256, max(s.num_tokens for s in stream))
    assert stream[0].kind == "prefill"  # a server's first step prefills its first prompt


def test_percentile_matches_linear_interpolation():
    vals = [RNG.uniform(0, 100) for _ in range(RNG.randrange(2, 500))]
    s = sorted(vals)
    for q in (0, 50, 90, 99, 100):
        pos = (len(s) - 1) * q / 100
        lo = int(pos)
        want = s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (pos - lo)
        assert loop.percentile(vals, q) == pytest.approx(want)


def test_story_twins_recompile_fix_from_trace_then_none(tmp_path, monkeypatch):
    seed, stream = _stream()
    want, new_at = _expected(stream)
    app = tmp_path / "app"
    app.mkdir()
    for f in loop.TWIN_FILES.values():
        shutil.copy2(ROOT / "fixtures" / f, app / f)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9 warns when unset (same default)
    trace_path = tmp_path / "trace.json"

    with stand_in_driver():
        # before: the uncorrected twins recompile whenever a batch size enters a new value class
        twins = loop.load_kernels(str(app))
        reset_steps()
        with jitguard.watch(mode="record", trace=trace_path) as w:
            before = loop.run_loop(twins, stream, device="cpu", seed=seed)
        assert before["variants"] == want, (seed, [s.num_tokens for s in stream])
        got_at = {c["step"]: c["new_variants"] for c in before["compile_steps"]}
        assert got_at == new_at
        assert before["compiles_after_first_step"] == sum(want.values()) - sum(new_at[0].values())
        assert before["compiles_after_first_step"] >= 2

        # the watcher saw the same compiles, at the same steps, each recompile with a reason
        trace = load_trace(trace_path)
        events = [e for e in trace.compiles() if not e.warmup]
        assert len(events) == sum(want.values())
        assert sorted(e.step for e in events) == sorted(s for s, d in new_at.items() for _ in range(sum(d.values())))
        assert all(e.diff and e.remedy for e in events if e.variant >= 2)

        # the fix from the trace (merged with the scan), applied to the copy
        res = CliRunner().invoke(main, ["fix", "--from-trace", str(trace_path), "--unsafe-fixes",
                                        "--write", "--no-cache", str(app)])
        assert res.exit_code == 0, res.output
        rope_src = (app / loop.TWIN_FILES["rope"]).read_text()
        moe_src = (app / loop.TWIN_FILES["moe"]).read_text()
        assert '@triton.jit(do_not_specialize=["num_tokens", "scale_stride"])' in rope_src
        assert '@triton.jit(do_not_specialize=["EM", "num_valid_tokens"])' in moe_src

        # after: the same loop on the fixed copy compiles each kernel once, at the first step
        fixed = loop.load_kernels(str(app))
        assert fixed.jit_kernels["rope_fp8"] is not twins.jit_kernels["rope_fp8"]
        reset_steps()
        with jitguard.watch(mode="record") as w2:
            after = loop.run_loop(fixed, stream, device="cpu", seed=seed)
    assert after["variants"] == {"rope_fp8": 1, "moe_gemm": 1, "moe_align_block_size": 1}
    assert after["compiles_after_first_step"] == 0
    assert [c["step"] for c in after["compile_steps"]] == [0]
    assert w2.recompile_count == 0
    assert {e.step for e in w2.compiles} == {0}
    assert len(after["per_step_ms"]) == len(stream)
