"""The exact findings over fixtures/lint: a change in the analysis shows up here as a diff."""
from __future__ import annotations

import pathlib

import pytest

from jitguard.static.errors import SourceError
from jitguard.static.extract import extract_file
from jitguard.static.link import link

ROOT = pathlib.Path(__file__).resolve().parents[1]
LINT = ROOT / "fixtures" / "lint"

EXPECTED = {
    ("JG001", "aliased.tr_kernel", "n"),
    ("JG001", "aliased.tjit_kernel", "n"),
    ("JG001", "aliased.call_form", "n"),
    ("JG001", "aliased.call_kw_form", "count"),
    ("JG001", "basic.scale_rows", "num_tokens"),
    ("JG002", "basic.copy_prefix", "n"),
    ("JG001", "classes.Ops.shift", "count"),
    ("JG002", "classes.Ops.shift", "SIZE"),
    ("JG001", "classes.Ops.rms", "n_rows"),
    ("JG004", "dns_mistakes.typo", "num_token"),
    ("JG004", "dns_mistakes.bad_index", None),
    ("JG005", "dns_mistakes.on_constexpr", "BLOCK"),
    ("JG006", "dns_mistakes.on_float", "eps"),
    ("JG007", "options.act", None),
    ("JG001", "gluon_pkg.kernels.row_scale", "num_tokens"),
    ("JG002", "gluon_pkg.kernels.gather_rows", "N_ROWS"),
    ("JG001", "pkg.kernels.silu_and_mul", "num_tokens"),
    ("JG002", "pkg.kernels.topk_gather", "k_tokens"),
    ("JG001", "pkg.kernels.route", "num_tokens"),
    ("JG001", "provenance.attn_fwd", "seq_len"),
    ("JG001", "provenance.quant_rows", "num_tokens"),
    ("JG001", "provenance.quant_rows", "scale_stride"),
    ("JG001", "provenance.per_layer_kernel", "layer"),
    ("JG001", "provenance.gather_rows", "max_len"),
    ("JG003", "stacks.tuned_gemv", "M"),
    ("JG001", "stacks.tuned_gemv", "M"),
    ("JG001", "stacks.wrapped", "n"),
}


def _facts():
    facts = []
    for path in sorted(LINT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        module = rel[:-3].replace("/", ".").removesuffix(".__init__")
        facts.append(extract_file(rel, path.read_bytes(), module))
    return facts


def test_fixture_findings_are_exactly_the_documented_ones():
    findings = link(_facts())
    got = {(f.code, f.kernel.removeprefix("fixtures.lint."), f.param) for f in findings}
    assert got == EXPECTED


def test_cross_module_launches_resolve_to_the_kernel_file():
    findings = link(_facts())
    silu = [f for f in findings if f.kernel.endswith("silu_and_mul")]
    assert len(silu) == 1
    assert silu[0].path == "fixtures/lint/pkg/kernels.py"
    paths = {launch["path"] for launch in silu[0].details["launches"]}
    assert paths == {"fixtures/lint/pkg/layers.py", "fixtures/lint/pkg/api.py"}


def test_broken_fixture_is_a_source_error_with_a_line():
    path = LINT / "broken_syntax.py.txt"
    with pytest.raises(SourceError) as err:
        extract_file("broken.py", path.read_bytes(), "broken")
    assert err.value.line == 1
    assert "syntax" in str(err.value)
