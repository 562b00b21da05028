"""Tests for jitguard.kernels.rope_fp8 (fused inverse RoPE + FP8 block quantization) and its twin.

CPU: the kernels run in Triton's interpreter in ONE child process started with TRITON_INTERPRET=1
(this file is also that child's script), so the setting can't leak into other tests that import
Triton normally in this pytest process. The parent draws fresh random inputs, the child runs the
corrected kernel, its uncorrected twin and a launch into poisoned buffers, and the parent compares
with the PyTorch reference: scales exactly, fp8 values up to the interpreter's fp8 rounding (its
cast rounds ties away from zero and can lose the carry into the exponent; see
shared/TRITON_FACTS.md). The real JIT path for sm_90 (a stand-in driver, no GPU) checks the
number of compiled variants. GPU tests (marker ``gpu``): bit-exact, and compiles counted on a GPU.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from jitguard.kernels.rope_fp8 import CANDIDATE_CONFIGS
from jitguard.kernels.rope_fp8_reference import (
    inv_rope_fp8_quant_reference,
    power_of_two_scale,
)

ROOT = Path(__file__).resolve().parents[1]
TWIN_PATH = ROOT / "fixtures" / "rope_fp8_uncorrected.py"

# (name, G, hpg, nope, rope, quant_group, T): T around multiples of 4 and 16; every o is strided.
CPU_CASES = [
    ("default_T1", 1, 2, 448, 64, 128, 1),
    ("default_T3", 1, 2, 448, 64, 128, 3),
    ("default_T4", 2, 1, 448, 64, 128, 4),
    ("default_T15", 1, 2, 448, 64, 128, 15),
    ("default_T16", 2, 2, 448, 64, 128, 16),
    ("default_T17", 1, 3, 448, 64, 128, 17),
    ("nope192_T33", 2, 2, 192, 64, 128, 33),
    ("d128_q64_T12", 3, 2, 96, 32, 64, 12),  # rope = one 32-wide chunk, 2 blocks per head
    ("gather_T13", 1, 2, 96, 64, 32, 13),  # rope spans two 32-wide chunks: the gather path
    ("d384_T8", 1, 2, 320, 64, 128, 8),  # 3 blocks per head: padded to 4 inside the kernel
    ("norope_T5", 2, 1, 128, 0, 128, 5),
    ("scale_edges_T8", 1, 2, 448, 64, 128, 8),  # block maxima at and next to 1.75 * 2^k
]

# Cases the interpreter child also runs with a PDL launch config (PDL must switch itself off there).
PDL_INTERPRETER_CASES = ("default_T17", "gather_T13")

# Block maxima that sit on the division-free scale's boundary (mantissa 1.75: 448 = 1.75 * 2^8)
# and on either side of it, and at the ends of the mantissa range; all exact in bfloat16.
EDGE_MANTISSAS = (1.75, 1.7578125, 1.7421875, 1.0, 1.9921875)


def _load_twin():
    spec = importlib.util.spec_from_file_location("rope_fp8_uncorrected_fixture", TWIN_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _make_inputs(G, hpg, nope, rope, T, device="cpu", dtype=torch.bfloat16, max_pos=4096):
    """A strided o (slice of a padded [T+pad, H+1, D+64] buffer), positions, cos/sin cache."""
    H, D = G * hpg, nope + rope
    big = (torch.randn(T + 3, H + 1, D + 64, device=device) * torch.rand(1, device=device).item()
           * 20).to(dtype)
    o = big[2:2 + T, 1:, 32:32 + D]
    # A few rows with a wide dynamic range exercise the fp8 subnormals and many exponents.
    if T > 2:
        o[1] = (torch.randn(H, D, device=device) * torch.exp2(torch.randint(
            -20, 20, (H, 1), device=device).float())).to(dtype)
    positions = torch.randint(0, max_pos, (T,), device=device, dtype=torch.int64)
    angles = torch.rand(max_pos, rope // 2, device=device) * 2 * math.pi
    cache = torch.cat([angles.cos(), angles.sin()], dim=1).float()
    return o, positions, cache


def _scale_edge_fill(o, quant_group_size=128):
    """Overwrite o (in place) so that every quantization block's max |value| is m * 2^k with m
    from EDGE_MANTISSAS and a random k in [-30, 30], placed in the block's first 64 dims (nope
    dims in every block, also the rope block); the rest of the block is below 2^(k-1), so the
    rotated rope pairs stay under 2^k."""
    T, H, D = o.shape
    nb = D // quant_group_size
    k = torch.randint(-30, 31, (T, H, nb, 1), device=o.device).float()
    vals = (torch.rand(T, H, nb, quant_group_size, device=o.device) * 2 - 1) * 0.5 * torch.exp2(k)
    m = torch.tensor(EDGE_MANTISSAS, device=o.device)[torch.randint(0, len(EDGE_MANTISSAS),
                                                                    (T, H, nb), device=o.device)]
    sign = torch.randint(0, 2, (T, H, nb), device=o.device).float() * 2 - 1
    idx = torch.randint(0, 64, (T, H, nb, 1), device=o.device)
    vals.scatter_(3, idx, (sign * m)[..., None] * torch.exp2(k))
    o.copy_(vals.reshape(T, H, D).to(o.dtype))


def _fp8_admissible(q_kernel, q_ref, prequant):
    """Elementwise: equal, or within one fp8 step of the exact value (ties, interpreter rounding),
    or the interpreter's lost carry (RNE gives 2^(e+1), the interpreter 2^e)."""
    k, r, v = q_kernel.float(), q_ref.float(), prequant.float()
    same = k == r
    step = torch.exp2(torch.floor(torch.log2(v.abs().clamp(min=2.0 ** -6))) - 3)
    near = (k - v).abs() <= step
    r_mant, _ = torch.frexp(r)
    carry = (r_mant.abs() == 0.5) & (r == 2 * k) & (v.abs() >= r.abs() * (1 - 2.0 ** -5))
    return same, same | near | carry


def _check_views(q, scales, G, hpg, D, qg, T):
    T4 = (T + 3) // 4 * 4
    nsb = hpg * D // qg
    assert q.shape == (T, G, hpg * D) and q.dtype == torch.float8_e4m3fn
    assert q.stride() == (hpg * D, T * hpg * D, 1)
    assert scales.shape == (T, G, nsb) and scales.dtype == torch.float32
    assert scales.stride() == (1, nsb * T4, T4)


def _odd_offset_copy(o):
    """o's values in a buffer where every row starts at an odd element: token and head strides
    odd, data pointer 2 bytes past a 4-byte boundary (word loads of bf16 pairs don't fit)."""
    T, H, D = o.shape
    big = torch.zeros(T, H, D + 1, dtype=o.dtype, device=o.device)
    big[:, :, 1:] = o
    odd = big[:, :, 1:]
    assert odd.stride(1) % 2 == 1 and (odd.data_ptr() % 4 == 2 or o.element_size() != 2)
    return odd


# --------------------------------------------------------------------------------------------------
# The interpreter child
# --------------------------------------------------------------------------------------------------
def _interpreter_child(case_dir: str) -> None:
    assert os.environ.get("TRITON_INTERPRET") == "1"
    from jitguard.kernels import rope_fp8

    twin = _load_twin()
    cases = torch.load(os.path.join(case_dir, "cases.pt"))
    results = {}
    for name, c in cases.items():
        args = (c["o"], c["positions"], c["cache"], c["G"], c["hpg"], c["nope"], c["rope"], c["qg"])
        q, scales = rope_fp8.fused_inv_rope_fp8_quant(*args)
        tq, tscales = twin.fused_inv_rope_fp8_quant(*args)
        q_buf, scale_buf = rope_fp8._allocate(c["o"], c["G"], c["hpg"], c["qg"])
        q_buf.view(torch.uint8).fill_(0x7F)  # NaN in float8_e4m3fn
        scale_buf.fill_(float("nan"))
        # A persistent config (3 programs here: the interpreter counts as one SM) loops over tiles
        # and, with num_stages >= 2, prefetches the next tile as 32-bit words (bf16 pairs).
        prefetch = rope_fp8.LaunchConfig(block_t=4, num_warps=1, num_stages=3, programs_per_sm=3)
        rope_fp8._launch(rope_fp8._inv_rope_fp8_quant_kernel, *args[:3], q_buf, scale_buf, *args[3:],
                         prefetch)
        # The same on a copy of o whose rows start at odd elements (2-byte aligned): the kernel
        # must notice at run time that word loads don't fit and assemble the words from bf16.
        o_odd = _odd_offset_copy(c["o"])
        q_odd, s_odd = rope_fp8._allocate(o_odd, c["G"], c["hpg"], c["qg"])
        q_odd.view(torch.uint8).fill_(0x7F)
        s_odd.fill_(float("nan"))
        rope_fp8._launch(rope_fp8._inv_rope_fp8_quant_kernel, o_odd, *args[1:3], q_odd, s_odd,
                         *args[3:], prefetch)
        pdl_out = None
        if name in PDL_INTERPRETER_CASES:
            # A PDL config in the interpreter: PDL is switched off there (USE_PDL stays 0, so
            # no griddepcontrol is traced) and the results are the same.
            q_pdl, s_pdl = rope_fp8._allocate(c["o"], c["G"], c["hpg"], c["qg"])
            rope_fp8._launch(rope_fp8._inv_rope_fp8_quant_kernel, *args[:3], q_pdl, s_pdl,
                             *args[3:], rope_fp8.LaunchConfig(maxnreg=80, pdl=2))
            pdl_out = (q_pdl, s_pdl)
        results[name] = dict(
            q=q.contiguous(), q_stride=q.stride(), scales=scales.contiguous(),
            scales_stride=scales.stride(), scales_padded=scales.as_strided(
                (scale_buf.shape[2], scales.shape[1], scales.shape[2]), scales.stride()).clone(),
            twin_q=tq.contiguous(), twin_scales=tscales.contiguous(),
            poisoned_q=q_buf, poisoned_scales=scale_buf, odd_q=q_odd, odd_scales=s_odd,
            pdl_out=pdl_out)
    torch.save(results, os.path.join(case_dir, "results.pt"))


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """Inputs drawn here, outputs computed by the interpreter child: {name: (inputs, outputs)}."""
    seed = int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    cases = {}
    for name, G, hpg, nope, rope, qg, T in CPU_CASES:
        o, positions, cache = _make_inputs(G, hpg, nope, rope, T)
        if name.startswith("scale_edges"):
            _scale_edge_fill(o, qg)
        cases[name] = dict(o=o, positions=positions, cache=cache, G=G, hpg=hpg, nope=nope,
                           rope=rope, qg=qg)
    case_dir = tmp_path_factory.mktemp("rope_fp8_interp")
    torch.save(cases, case_dir / "cases.pt")
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(case_dir)],
                          env=env, capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    assert proc.returncode == 0, f"interpreter child failed (seed {seed}):\n{proc.stderr[-4000:]}"
    results = torch.load(case_dir / "results.pt")
    return seed, {name: (cases[name], results[name]) for name in cases}


@pytest.mark.parametrize("case", [c[0] for c in CPU_CASES])
def test_interpreter_matches_reference(interpreted, case):
    seed, table = interpreted
    c, out = table[case]
    T, D = c["o"].shape[0], c["nope"] + c["rope"]
    q_ref, s_ref, pre = inv_rope_fp8_quant_reference(
        c["o"], c["positions"], c["cache"], c["G"], c["hpg"], c["nope"], c["rope"], c["qg"],
        return_prequant=True)
    T4 = (T + 3) // 4 * 4
    nsb = c["hpg"] * D // c["qg"]
    assert out["q_stride"] == (c["hpg"] * D, T * c["hpg"] * D, 1)
    assert out["scales_stride"] == (1, nsb * T4, T4)
    assert torch.equal(out["scales"], s_ref), f"scales differ (seed {seed})"
    same, ok = _fp8_admissible(out["q"], q_ref, pre)
    assert ok.all(), f"{(~ok).sum().item()} fp8 values off by more than the interpreter's rounding (seed {seed})"
    assert same.float().mean().item() > 0.85, f"too many fp8 values differ (seed {seed})"
    assert torch.all(out["scales_padded"][T:] == 0), "padding rows T..T4-1 must be zero"


@pytest.mark.parametrize("case", [c[0] for c in CPU_CASES])
def test_interpreter_writes_every_element(interpreted, case):
    _, table = interpreted
    c, out = table[case]
    T = c["o"].shape[0]
    q_buf, scale_buf = out["poisoned_q"], out["poisoned_scales"]
    assert not torch.any(q_buf.view(torch.uint8) & 0x7F == 0x7F), "an fp8 output was not written"
    assert not torch.isnan(scale_buf).any(), "a scale (or a padding row) was not written"
    assert torch.all(scale_buf[:, :, T:] == 0)
    assert torch.equal(q_buf.transpose(0, 1).view(torch.uint8), out["q"].view(torch.uint8))


@pytest.mark.parametrize("case", [c[0] for c in CPU_CASES])
def test_interpreter_prefetch_with_odd_strides(interpreted, case):
    """The prefetching persistent config on rows that start at odd elements: same bytes."""
    _, table = interpreted
    c, out = table[case]
    T = c["o"].shape[0]
    q_buf, scale_buf = out["odd_q"], out["odd_scales"]
    assert not torch.isnan(scale_buf).any() and torch.all(scale_buf[:, :, T:] == 0)
    assert torch.equal(q_buf.transpose(0, 1).view(torch.uint8), out["q"].view(torch.uint8))
    assert torch.equal(scale_buf.permute(2, 0, 1)[:T], out["scales"])


@pytest.mark.parametrize("case", PDL_INTERPRETER_CASES)
def test_interpreter_pdl_config_runs_without_pdl(interpreted, case):
    """A PDL launch config under TRITON_INTERPRET=1: no griddepcontrol, the same bytes."""
    _, table = interpreted
    _, out = table[case]
    q_buf, scale_buf = out["pdl_out"]
    assert torch.equal(q_buf.transpose(0, 1).view(torch.uint8), out["q"].view(torch.uint8))
    assert torch.equal(scale_buf.permute(2, 0, 1)[:out["q"].shape[0]], out["scales"])


@pytest.mark.parametrize("case", [c[0] for c in CPU_CASES])
def test_twin_computes_the_same(interpreted, case):
    _, table = interpreted
    _, out = table[case]
    assert torch.equal(out["twin_q"].view(torch.uint8), out["q"].view(torch.uint8))
    assert torch.equal(out["twin_scales"], out["scales"])


# --------------------------------------------------------------------------------------------------
# Reference, wrapper validation, T = 0 (no kernel launch)
# --------------------------------------------------------------------------------------------------
def test_power_of_two_scale_is_exact_ceil_log2():
    k = torch.randint(-30, 30, (200,)).float()
    exact = 448.0 * torch.exp2(k)  # amax / 448 is exactly 2^k: scale 2^k
    above = torch.nextafter(exact, torch.full_like(exact, math.inf))  # just above: 2^(k+1)
    rand = torch.rand(200) * torch.exp2(torch.randint(-40, 40, (200,)).float())
    amax = torch.cat([exact, above, rand, torch.tensor([0.0, 1e-12])])
    got = power_of_two_scale(amax)
    for a, s in zip(amax.tolist(), got.tolist()):
        ratio = float(torch.tensor(max(a, float(torch.tensor(1e-10))) / 448.0, dtype=torch.float32))
        mant, exp = math.frexp(ratio)
        want = 2.0 ** (exp - 1 if mant == 0.5 else exp)
        assert s == want, (a, s, want)


def test_reference_rotation_inverts_rope():
    o, positions, cache = _make_inputs(1, 2, 64, 64, 9, dtype=torch.float32)
    from jitguard.kernels.rope_fp8_reference import inverse_rope

    y = inverse_rope(o, positions, cache, 64, 64).double()
    cs = cache.double()[positions]
    c, s = cs[:, None, :32], cs[:, None, 32:]
    a, b = y[..., 64::2], y[..., 65::2]
    forward = torch.stack([a * c - b * s, b * c + a * s], dim=-1).flatten(-2)  # RoPE undoes it
    want = o[..., 64:].double()
    # the reference rotates in float32: its error is a few ulp of the head's largest value (one row
    # of _make_inputs spans 2^-20..2^20 per head), so the bound scales with it
    scale = want.abs().amax(dim=-1, keepdim=True)
    assert ((forward - want).abs() <= 1e-5 * scale + 1e-6).all()
    assert torch.equal(y[..., :64], o[..., :64].double())


def _valid_args(T=4):
    o, positions, cache = _make_inputs(1, 2, 448, 64, T)
    return dict(o=o, positions=positions, cos_sin_cache=cache, n_groups=1, heads_per_group=2)


@pytest.mark.parametrize("mutate, arg", [
    (lambda a: a.update(o=a["o"].float().half().to(torch.int16)), "o"),
    (lambda a: a.update(o=a["o"][:, 0]), "o"),
    (lambda a: a.update(o=a["o"][..., ::2].repeat(1, 1, 2)[..., :512]), None),  # valid: contiguous
    (lambda a: a.update(o=a["o"].transpose(1, 2).contiguous().transpose(1, 2)), "o"),
    (lambda a: a.update(heads_per_group=3), "o.shape[1]"),
    (lambda a: a.update(positions=a["positions"].int().float()), "positions"),
    (lambda a: a.update(positions=a["positions"][:-1]), "positions"),
    (lambda a: a.update(cos_sin_cache=a["cos_sin_cache"].double()), "cos_sin_cache"),
    (lambda a: a.update(cos_sin_cache=a["cos_sin_cache"][:, :32]), "cos_sin_cache"),
    (lambda a: a.update(rope_dim=63, nope_dim=449), "rope_dim"),
    (lambda a: a.update(nope_dim=440), "nope_dim"),
    (lambda a: a.update(quant_group_size=96), "quant_group_size"),
    (lambda a: a.update(n_groups=0), "n_groups"),
    (lambda a: a.update(n_groups=1.0), "n_groups"),
    (lambda a: a.update(positions=a["positions"].to("meta")), "positions"),
])
def test_validation_names_the_argument(mutate, arg):
    from jitguard.kernels.rope_fp8 import _validate

    args = _valid_args()
    mutate(args)
    kwargs = dict(nope_dim=448, rope_dim=64, quant_group_size=128)
    kwargs.update({k: args.pop(k) for k in list(args) if k in kwargs})
    call = lambda: _validate(args["o"], args["positions"], args["cos_sin_cache"],  # noqa: E731
                             args["n_groups"], args["heads_per_group"], **kwargs)
    if arg is None:
        call()
        return
    with pytest.raises(ValueError) as err:
        call()
    assert arg in str(err.value)


def test_wrapper_rejects_cpu_tensors_outside_the_interpreter():
    from jitguard.kernels import rope_fp8

    if type(rope_fp8._inv_rope_fp8_quant_kernel).__name__ == "InterpretedFunction":
        pytest.skip("this process imported the kernel under TRITON_INTERPRET=1")
    with pytest.raises(ValueError, match="CUDA"):
        rope_fp8.fused_inv_rope_fp8_quant(**_valid_args())


@pytest.mark.parametrize("module", ["corrected", "twin"])
def test_zero_tokens_returns_empty_without_launch(module):
    from jitguard.kernels import rope_fp8

    fn = rope_fp8.fused_inv_rope_fp8_quant if module == "corrected" else \
        _load_twin().fused_inv_rope_fp8_quant
    q, scales = fn(**_valid_args(T=0))  # CPU tensors: a launch would raise
    assert q.shape == (0, 1, 1024) and q.dtype == torch.float8_e4m3fn
    assert scales.shape == (0, 1, 8) and scales.dtype == torch.float32


# --------------------------------------------------------------------------------------------------
# The analyzer and the fixer on the twin (through the CLI)
# --------------------------------------------------------------------------------------------------
def _jitguard(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "jitguard", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd or str(ROOT))


def _decorator_and_params(source: str):
    import ast

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "_inv_rope_fp8_quant_kernel":
            return [ast.unparse(d) for d in node.decorator_list], [a.arg for a in node.args.args]
    raise AssertionError("kernel not found")


def test_twin_kernel_is_generated_from_the_corrected_one():
    """The twin's kernel is the corrected kernel's text but for the decorator and the two parameter
    comments (tests/rope_fp8_twin.py); a change to one kernel without the other fails here."""
    sys.path.insert(0, str(ROOT / "tests"))
    import rope_fp8_twin

    corrected = (ROOT / "kernels" / "rope_fp8.py").read_text()
    twin = TWIN_PATH.read_text()
    assert twin == rope_fp8_twin.generated_twin(twin, corrected), "run python tests/rope_fp8_twin.py --write"
    first, last = rope_fp8_twin.kernel_span(twin)
    kernel = "".join(twin.splitlines(keepends=True)[first:last + 1])
    assert kernel.startswith("@triton.jit\ndef _inv_rope_fp8_quant_kernel(") and "do_not_specialize" not in kernel
    # out of step: a corrected-kernel edit the twin lacks is reported, and a missing substitution target too
    edited = corrected.replace("tl.store(s_ptr, tl.where(tok_ok[:, None], scale, 0.0), mask=s_ok)",
                               "tl.store(s_ptr, tl.where(tok_ok[:, None], scale, 1.0), mask=s_ok)")
    assert edited != corrected and rope_fp8_twin.generated_twin(twin, edited) != twin
    with pytest.raises(ValueError, match="SUBSTITUTIONS"):
        rope_fp8_twin.twin_kernel(corrected.replace("# T: varies with every batch\n", "# T\n"))


def test_scan_reports_the_twin_and_fix_turns_it_into_the_corrected_kernel(tmp_path):
    corrected_src = (ROOT / "kernels" / "rope_fp8.py").read_text()
    twin_src = TWIN_PATH.read_text()
    corrected_deco, corrected_params = _decorator_and_params(corrected_src)
    twin_deco, twin_params = _decorator_and_params(twin_src)
    assert twin_deco == ["triton.jit"] and twin_params == corrected_params

    scan = _jitguard("scan", "--isolated", "--format", "json", str(TWIN_PATH))
    assert scan.returncode == 1, scan.stderr
    found = {(f["code"], f.get("param")) for f in json.loads(scan.stdout)["findings"]}
    assert {("JG001", "num_tokens"), ("JG001", "scale_stride")} <= found
    clean = _jitguard("scan", "--isolated", str(ROOT / "kernels" / "rope_fp8.py"))
    assert clean.returncode == 0, clean.stdout + clean.stderr

    # Both parameters feed address arithmetic, so the fixer marks the edit unsafe: it is applied
    # with --unsafe-fixes (unspecializing them costs no vectorized access here: see the kernel).
    copy = tmp_path / "rope_fp8_uncorrected.py"
    copy.write_text(twin_src)
    fix = _jitguard("fix", "--write", "--unsafe-fixes", str(copy), cwd=str(tmp_path))
    assert fix.returncode == 0, fix.stdout + fix.stderr
    fixed_deco, fixed_params = _decorator_and_params(copy.read_text())
    assert fixed_deco == corrected_deco and fixed_params == corrected_params
    # and the fixed twin's kernel is the corrected kernel, body included (comments aside)
    assert _kernel_dump(copy.read_text()) == _kernel_dump(corrected_src)


def _kernel_dump(source: str) -> str:
    import ast

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "_inv_rope_fp8_quant_kernel":
            return ast.dump(node, include_attributes=False)
    raise AssertionError("kernel not found")


# --------------------------------------------------------------------------------------------------
# Triton's real JIT path for sm_90 without a GPU: count compiled variants
# --------------------------------------------------------------------------------------------------
def _Ptr(dtype, ptr=1 << 20):
    from jitguard.testing import FakeTensor

    return FakeTensor(ptr, dtype)


def _fresh_copy(kernel):
    """A new JITFunction with the same source and decorator settings: an empty cache."""
    return type(kernel)(kernel.fn, do_not_specialize=kernel.do_not_specialize)


def _variants_over(kernel, token_counts, config=None):
    """Compile through JITFunction.run for sm_90 (stand-in driver) with the launcher's options
    for ``config`` (default: the kernel's default config), PDL included as on an H200."""
    from jitguard.kernels import rope_fp8
    from jitguard.testing import stand_in_driver

    config = rope_fp8.CONFIG if config is None else config
    G, hpg, nope, rope, qg = 1, 8, 448, 64, 128
    with stand_in_driver():
        for T in token_counts:
            kernel.warmup(
                _Ptr(torch.bfloat16), _Ptr(torch.int64), _Ptr(torch.float32),
                _Ptr(torch.float8_e4m3fn), _Ptr(torch.float32),
                T, (T + 3) // 4 * 4, G * hpg * (nope + rope), nope + rope, rope, 132 * 25,
                N_GROUPS=G, HEADS_PER_GROUP=hpg, NOPE_DIM=nope, ROPE_DIM=rope, QUANT_GROUP=qg,
                BLOCK_T=config.block_t, BLOCK_Q=4, ROPE_CHUNK=64, NUM_STAGES=config.num_stages,
                grid=(1,), **rope_fp8._launch_options(config, config.pdl))
    return list(kernel.device_caches[0][0].values())


def test_one_compile_for_any_T_sm90_without_gpu():
    """Real sm_90 compiles through JITFunction.run: corrected 1 variant, the twin 4; with PDL
    on and off (launch_pdl is a compile option and USE_PDL a constexpr: constants per config)."""
    import dataclasses

    from jitguard.kernels import rope_fp8

    if type(rope_fp8._inv_rope_fp8_quant_kernel).__name__ == "InterpretedFunction":
        pytest.skip("this process imported the kernel under TRITON_INTERPRET=1")
    token_counts = list(range(1, 200)) + [1000, 1024, 4096, 8191, 32768]
    corrected = _variants_over(_fresh_copy(rope_fp8._inv_rope_fp8_quant_kernel), token_counts)
    twin = _variants_over(_fresh_copy(_load_twin()._inv_rope_fp8_quant_kernel), token_counts)
    assert len(corrected) == 1
    # num_tokens in {==1, %16, other} x T4 in {%16, other}, T4 never 1: (1,o) (o,o) (o,16) (16,16)
    assert len(twin) == 4
    other = dataclasses.replace(rope_fp8.CONFIG, pdl=0 if rope_fp8.CONFIG.pdl else 2)
    flipped = _variants_over(_fresh_copy(rope_fp8._inv_rope_fp8_quant_kernel),
                             token_counts[::7], other)
    assert len(flipped) == 1
    for compiled, cfg in ((corrected[0], rope_fp8.CONFIG), (flipped[0], other)):
        assert bool(compiled.metadata.launch_pdl) == bool(cfg.pdl)
        assert ("griddepcontrol.wait" in compiled.asm["ptx"]) == bool(cfg.pdl)


@pytest.mark.parametrize("pdl, l2_prefetch", [(0, False), (1, False), (2, False), (3, False),
                                               (0, True), (2, True)])
def test_pdl_wait_precedes_every_memory_access_sm90(pdl, l2_prefetch):
    """sm_90 PTX and SASS (no GPU): with PDL, griddepcontrol.wait (SASS ACQBULK) comes before
    the first global load or store, and launch_dependents (PREEXIT) only after it (pdl 2: under
    a run-time test of the grid size against pdl_wave; 3: always); without PDL neither is there
    and the launch is a plain one. ``l2_prefetch``: before the wait only L2 prefetches (never a
    load into registers), and only with PDL."""
    import re

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from jitguard.kernels import rope_fp8

    if type(rope_fp8._inv_rope_fp8_quant_kernel).__name__ == "InterpretedFunction":
        pytest.skip("this process imported the kernel under TRITON_INTERPRET=1")
    options = rope_fp8._launch_options(
        rope_fp8.LaunchConfig(maxnreg=80, pdl=pdl, l2_prefetch=l2_prefetch), pdl)
    consts = dict(N_GROUPS=1, HEADS_PER_GROUP=8, NOPE_DIM=448, ROPE_DIM=64, QUANT_GROUP=128,
                  BLOCK_T=4, BLOCK_Q=4, ROPE_CHUNK=64, NUM_STAGES=1,
                  USE_PDL=options.pop("USE_PDL", 0), L2_PREFETCH=options.pop("L2_PREFETCH", False))
    sig = {"o_ptr": "*bf16", "positions_ptr": "*i64", "cos_sin_ptr": "*fp32",
           "q_ptr": "*fp8e4nv", "scale_ptr": "*fp32", "num_tokens": "i32", "scale_stride": "i32",
           "o_stride_t": "i32", "o_stride_h": "i32", "cos_sin_stride": "i32", "pdl_wave": "i32",
           **{k: "constexpr" for k in consts}}
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 7, 8, 9)}
    compiled = triton.compile(ASTSource(rope_fp8._inv_rope_fp8_quant_kernel, sig, consts, attrs),
                              target=GPUTarget("cuda", 90, 32), options=options)
    assert bool(compiled.metadata.launch_pdl) == bool(pdl)
    ptx = [line.strip() for line in compiled.asm["ptx"].splitlines()]

    def first(pattern):
        return next((i for i, line in enumerate(ptx) if re.search(pattern, line)), None)

    wait, trigger = first(r"griddepcontrol\.wait"), first(r"griddepcontrol\.launch_dependents")
    memory = first(r"^(@%p\d+\s+)?(ld|st)\.global")
    prefetch = first(r"prefetch\.global\.L2")
    assert memory is not None
    if not pdl:
        assert wait is None and trigger is None and prefetch is None
        return
    assert wait is not None and wait < memory
    assert (prefetch is not None and prefetch < wait) if l2_prefetch else prefetch is None
    assert (trigger is not None and wait < trigger) if pdl >= 2 else trigger is None
    if pdl == 2:  # the trigger sits behind a branch on the grid size (%nctaid.x vs pdl_wave)
        assert any("%nctaid.x" in line for line in ptx[:trigger])
        assert any(re.match(r"@%p\d+ bra", line) for line in ptx[wait:trigger])
    try:  # Triton disassembles the cubin on first access (its cuobjdump / nvdisasm)
        sass = compiled.asm["sass"]
    except Exception:  # no disassembler in this Triton: the PTX order above is what is checked
        sass = None
    if sass:  # ptxas kept the order
        lines = sass.splitlines()
        acq = next(i for i, ln in enumerate(lines) if re.search(r"\bACQBULK\b", ln))
        assert acq < next(i for i, ln in enumerate(lines) if re.search(r"\b(LDG|STG)\b", ln))
        if pdl >= 2:
            assert acq < next(i for i, ln in enumerate(lines) if re.search(r"\bPREEXIT\b", ln))


# --------------------------------------------------------------------------------------------------
# GPU (needs CUDA): bit-exact against the reference, and compiles counted on a real GPU
# --------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("T", [1, 3, 4, 17, 1000, 8192])
@pytest.mark.parametrize("G, hpg", [(1, 8), (8, 8)])
def test_gpu_bit_exact(T, G, hpg):
    from jitguard.kernels.rope_fp8 import fused_inv_rope_fp8_quant

    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    o, positions, cache = _make_inputs(G, hpg, 448, 64, T, device="cuda")
    q, scales = fused_inv_rope_fp8_quant(o, positions, cache, G, hpg)
    q_ref, s_ref = inv_rope_fp8_quant_reference(o, positions, cache, G, hpg)
    _check_views(q, scales, G, hpg, 512, 128, T)
    assert torch.equal(scales, s_ref)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
    T4 = (T + 3) // 4 * 4
    padded = scales.as_strided((T4, G, scales.shape[2]), scales.stride())
    assert torch.all(padded[T:] == 0)


@pytest.mark.gpu
@pytest.mark.parametrize("T", [1, 17, 1000, 8192])
@pytest.mark.parametrize("G, hpg", [(1, 8), (8, 8)])
@pytest.mark.parametrize("config", range(len(CANDIDATE_CONFIGS)))
def test_gpu_bit_exact_every_candidate_config(config, T, G, hpg):
    from jitguard.kernels import rope_fp8

    cfg = rope_fp8.CANDIDATE_CONFIGS[config]
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    o, positions, cache = _make_inputs(G, hpg, 448, 64, T, device="cuda")
    q_buf, scale_buf = rope_fp8._allocate(o, G, hpg, 128)
    q_buf.view(torch.uint8).fill_(0x7F)
    scale_buf.fill_(float("nan"))
    rope_fp8._launch(rope_fp8._inv_rope_fp8_quant_kernel, o, positions, cache, q_buf, scale_buf,
                     G, hpg, 448, 64, 128, cfg)
    q, scales = rope_fp8._views(q_buf, scale_buf, T)
    q_ref, s_ref = inv_rope_fp8_quant_reference(o, positions, cache, G, hpg)
    assert torch.equal(scales, s_ref), cfg
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)), cfg
    assert not torch.isnan(scale_buf).any() and torch.all(scale_buf[:, :, T:] == 0), cfg


@pytest.mark.gpu
@pytest.mark.parametrize("config", range(len(CANDIDATE_CONFIGS)))
def test_gpu_bit_exact_odd_strides_every_candidate_config(config):
    """Rows starting at odd elements (no 4-byte word loads): every config still bit-exact."""
    from jitguard.kernels import rope_fp8

    cfg = rope_fp8.CANDIDATE_CONFIGS[config]
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    G, hpg, T = 2, 4, 1001
    o, positions, cache = _make_inputs(G, hpg, 448, 64, T, device="cuda")
    o = _odd_offset_copy(o)
    q_buf, scale_buf = rope_fp8._allocate(o, G, hpg, 128)
    q_buf.view(torch.uint8).fill_(0x7F)
    scale_buf.fill_(float("nan"))
    rope_fp8._launch(rope_fp8._inv_rope_fp8_quant_kernel, o, positions, cache, q_buf, scale_buf,
                     G, hpg, 448, 64, 128, cfg)
    q, scales = rope_fp8._views(q_buf, scale_buf, T)
    q_ref, s_ref = inv_rope_fp8_quant_reference(o, positions, cache, G, hpg)
    assert torch.equal(scales, s_ref), cfg
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)), cfg
    assert not torch.isnan(scale_buf).any() and torch.all(scale_buf[:, :, T:] == 0), cfg


@pytest.mark.gpu
@pytest.mark.parametrize("name, G, hpg, nope, rope, qg, T", [c for c in CPU_CASES])
def test_gpu_bit_exact_shapes_and_poison(name, G, hpg, nope, rope, qg, T):
    from jitguard.kernels import rope_fp8

    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    o, positions, cache = _make_inputs(G, hpg, nope, rope, T, device="cuda")
    q_buf, scale_buf = rope_fp8._allocate(o, G, hpg, qg)
    q_buf.view(torch.uint8).fill_(0x7F)
    scale_buf.fill_(float("nan"))
    rope_fp8._launch(rope_fp8._inv_rope_fp8_quant_kernel, o, positions, cache, q_buf, scale_buf,
                     G, hpg, nope, rope, qg)
    q, scales = rope_fp8._views(q_buf, scale_buf, T)
    q_ref, s_ref = inv_rope_fp8_quant_reference(o, positions, cache, G, hpg, nope, rope, qg)
    assert torch.equal(scales, s_ref)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
    assert not torch.isnan(scale_buf).any() and torch.all(scale_buf[:, :, T:] == 0)


@pytest.mark.gpu
@pytest.mark.parametrize("G, hpg", [(1, 8), (8, 8)])
def test_gpu_bit_exact_scale_edges(G, hpg):
    """Block maxima on and next to the division-free scale's boundary: bit-exact scales and q."""
    from jitguard.kernels.rope_fp8 import fused_inv_rope_fp8_quant

    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    o, positions, cache = _make_inputs(G, hpg, 448, 64, 257, device="cuda")
    _scale_edge_fill(o)
    q, scales = fused_inv_rope_fp8_quant(o, positions, cache, G, hpg)
    q_ref, s_ref = inv_rope_fp8_quant_reference(o, positions, cache, G, hpg)
    mant = (s_ref.view(torch.int32) & 0x7FFFFF)
    assert torch.all(mant == 0)  # the reference's scales are powers of two
    assert torch.equal(scales, s_ref)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))


@pytest.mark.gpu
def test_gpu_one_compile_over_T_1_to_4096(monkeypatch):
    """On the GPU, through Triton's own cache: the corrected kernel compiles once for T = 1..4096,
    with the default config and with PDL flipped; the twin once per specialization class."""
    import dataclasses

    from jitguard.kernels import rope_fp8

    twin = _load_twin()
    corrected_kernel = _fresh_copy(rope_fp8._inv_rope_fp8_quant_kernel)
    flipped_kernel = _fresh_copy(rope_fp8._inv_rope_fp8_quant_kernel)
    flipped = dataclasses.replace(rope_fp8.CONFIG, pdl=0 if rope_fp8.CONFIG.pdl else 2)
    twin_kernel = _fresh_copy(twin._inv_rope_fp8_quant_kernel)
    monkeypatch.setattr(twin, "_inv_rope_fp8_quant_kernel", twin_kernel)
    G, hpg = 1, 8
    o_all, pos_all, cache = _make_inputs(G, hpg, 448, 64, 4096, device="cuda")
    for T in range(1, 4097):
        o, positions = o_all[:T], pos_all[:T]
        q_buf, scale_buf = rope_fp8._allocate(o, G, hpg, 128)
        rope_fp8._launch(corrected_kernel, o, positions, cache, q_buf, scale_buf, G, hpg, 448, 64, 128)
        q_f, s_f = rope_fp8._allocate(o, G, hpg, 128)
        rope_fp8._launch(flipped_kernel, o, positions, cache, q_f, s_f, G, hpg, 448, 64, 128,
                         flipped)
        tq, ts = twin.fused_inv_rope_fp8_quant(o, positions, cache, G, hpg)
        if T in (1, 16, 17, 4096):
            q, s = rope_fp8._views(q_buf, scale_buf, T)
            assert torch.equal(q.view(torch.uint8), tq.view(torch.uint8)) and torch.equal(s, ts)
            assert torch.equal(q_f.view(torch.uint8), q_buf.view(torch.uint8))
            assert torch.equal(s_f, scale_buf)
    dev = torch.cuda.current_device()
    n_corrected = len(corrected_kernel.device_caches[dev][0])
    n_flipped = len(flipped_kernel.device_caches[dev][0])
    n_twin = len(twin_kernel.device_caches[dev][0])
    print(f"compiles over T=1..4096: corrected {n_corrected} (pdl={rope_fp8.CONFIG.pdl}; with "
          f"pdl={flipped.pdl}: {n_flipped}), uncorrected twin {n_twin}")
    assert n_corrected == 1 and n_flipped == 1
    assert n_twin == 4
    (ck,) = flipped_kernel.device_caches[dev][0].values()
    assert bool(ck.metadata.launch_pdl) == bool(flipped.pdl)


def _early_trigger_producer():
    """A producer for the PDL race check: it first lets the next kernel in the stream start
    (griddepcontrol.launch_dependents), then copies src to dst with a few programs looping over it,
    so a consumer launched with PDL overlaps it for as long as the copy runs (~1 ms for 8 MB on 4
    programs). A consumer that waits (griddepcontrol.wait) sees dst complete; one that doesn't reads
    what dst held before. Defined here, not at import: this file is also the interpreter child."""
    import triton
    import triton.language as tl

    @triton.jit
    def pdl_early_trigger_copy(src_ptr, dst_ptr, n_elements, BLOCK: tl.constexpr):
        tl.extra.cuda.gdc_launch_dependents()
        offs = tl.arange(0, BLOCK)
        for start in range(tl.program_id(0) * BLOCK, n_elements, tl.num_programs(0) * BLOCK):
            ok = start + offs < n_elements
            tl.store(dst_ptr + start + offs, tl.load(src_ptr + start + offs, mask=ok), mask=ok)

    return pdl_early_trigger_copy


@pytest.mark.gpu
@pytest.mark.parametrize("pdl, l2_prefetch, T", [(1, False, 4099), (2, False, 4099),
                                                 (2, True, 61), (2, True, 32771)])
def test_gpu_pdl_waits_for_an_early_triggering_producer(pdl, l2_prefetch, T):
    """The previous kernel in the stream lets its dependents start at once
    (griddepcontrol.launch_dependents) and then writes o slowly over poison (bf16 NaN); this
    kernel, launched with PDL, must still see all of o (its griddepcontrol.wait), several times.
    With ``l2_prefetch`` (T = 61 and 32771: grids of under 0.4 and over 4 waves, where the first
    wave prefetches o's lines into L2 before the wait, while the producer still writes them)."""
    from jitguard.kernels import rope_fp8

    if not rope_fp8._pdl_supported(torch.device("cuda")):
        pytest.skip("programmatic dependent launch needs compute capability 9.0+")
    producer = _early_trigger_producer()
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    G, hpg = 1, 8
    o_src, positions, cache = _make_inputs(G, hpg, 448, 64, T, device="cuda")
    big_src = o_src._base
    big_dst = torch.empty_like(big_src)
    o_dst = big_dst.as_strided(o_src.shape, o_src.stride(), o_src.storage_offset())
    q_ref, s_ref = inv_rope_fp8_quant_reference(o_src, positions, cache, G, hpg)
    cfg = rope_fp8.LaunchConfig(maxnreg=80, pdl=pdl, l2_prefetch=l2_prefetch)
    for _ in range(3):
        big_dst.view(torch.int16).fill_(-1)  # 0xFFFF: NaN in bfloat16
        q_buf, scale_buf = rope_fp8._allocate(o_dst, G, hpg, 128)
        producer[(4,)](big_src.view(-1), big_dst.view(-1), big_src.numel(), BLOCK=1024, num_warps=4)
        compiled = rope_fp8._launch(rope_fp8._inv_rope_fp8_quant_kernel, o_dst, positions, cache,
                                    q_buf, scale_buf, G, hpg, 448, 64, 128, cfg)
        q, s = rope_fp8._views(q_buf, scale_buf, T)
        assert torch.equal(s, s_ref)
        assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
    assert compiled.metadata.launch_pdl


if __name__ == "__main__":
    _interpreter_child(sys.argv[1])
