"""The registry of inference rules (jitguard/static/provenance/rules.py): the docs carry it, the code
cites only registered rules, and a finding's confidence follows from the rules its chain cites."""
from __future__ import annotations

import ast
import json
import pathlib
import random
import subprocess
import sys

import pytest

from jitguard.config import Config, ConfigError, config_from_table
from jitguard.static.provenance import rules as registry
from jitguard.static.runner import scan_paths

from tests._static_util import MASKED_KERNEL, rand_names

ROOT = pathlib.Path(__file__).resolve().parents[1]
STATIC = ROOT / "jitguard" / "static"


def test_docs_carry_the_registry_table():
    text = (ROOT / "docs" / "provenance.md").read_text(encoding="utf-8")
    assert registry.render_into(text) == text, "run: python -m jitguard.static.provenance docs/provenance.md"
    for rule_id in registry.RULES:
        assert f"| `{rule_id}` |" in text


def test_every_rule_has_a_reason_an_evidence_kind_and_limits_with_why():
    for r in registry.RULES.values():
        assert r.reason and r.evidence in ("structural", "conventional"), r
        assert not r.name_only or r.evidence == "conventional", r
        for name, lim in r.limits.items():
            assert isinstance(lim.value, int) and lim.value > 0 and len(lim.why) > 20, (r.id, name)
    with pytest.raises(KeyError):
        registry.cite("no-such-rule")


def _cited_ids(tree: ast.AST) -> set[str]:
    """Rule ids written in the code: ``rules=("id", ...)``, ``.why(text, "id", ...)``, ``.by("id")``,
    ``limit("id", ...)``, ``bound = ("id", ...)`` tuples of ids."""
    out: set[str] = set()

    def strings(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, (ast.Tuple, ast.List)):
            return [s for e in node.elts for s in strings(e)]
        if isinstance(node, ast.IfExp):
            return strings(node.body) + strings(node.orelse)
        if isinstance(node, ast.BinOp):
            return strings(node.left) + strings(node.right)
        return []

    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "rules":
            out.update(strings(node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("why", "by"):
            for a in node.args[1:] if node.func.attr == "why" else node.args:
                out.update(strings(a))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "limit" and node.args:
            out.update(strings(node.args[0]))
    return out


def test_the_code_cites_only_registered_rules():
    cited: set[str] = set()
    for path in [*(STATIC / "provenance").glob("*.py"), STATIC / "link.py", STATIC / "launches.py",
                 STATIC / "callers.py", STATIC / "runner.py"]:
        if path.name == "rules.py":
            continue
        cited |= _cited_ids(ast.parse(path.read_text(encoding="utf-8")))
    assert cited, "no rule ids found: the test no longer reads the code"
    assert cited <= set(registry.RULES), sorted(cited - set(registry.RULES))


def test_confidence_from_the_rules_of_a_chain():
    assert registry.confidence(["arithmetic", "reduction"]) == "high"
    assert registry.confidence(["assignment", "leading-dim"]) == "medium"
    assert registry.confidence(["allocated-layout", "name-varying"]) == "low"
    assert registry.confidence(["reduction"], by_name=True) == "low"
    # structural, but varying only off a helper's fast path: never above low, and the table says so
    assert registry.confidence(["loop-counter"]) == "high"
    assert registry.confidence(["single-pass-return", "loop-counter"]) == "low"
    table = registry.markdown()
    for r in registry.RULES.values():
        assert (f"| `{r.id}` | {r.gives} | {r.evidence}, never above low |" in table) == r.never_above_low, r.id


KERNEL = MASKED_KERNEL


def _scan(tmp_path, src: str, level: str = "medium"):
    (tmp_path / "m.py").write_text(src)
    return scan_paths([str(tmp_path)], Config(select=("JG",), root=str(tmp_path), confidence=level),
                      jobs=1, use_cache=False)


@pytest.mark.parametrize("launch_arg, params, level", [
    ("int({a}.max())", "{x}, {a}", "high"),          # a reduction of a tensor's contents
    ("{a}.item()", "{x}, {a}", "high"),              # read off the device
    ("{x}.shape[0]", "{x}", "medium"),               # the leading-dim guess
    ("{x}.numel()", "{x}", "low"),                   # element count of a tensor of unknown origin and rank
    ("{x}.numel() // {a}", "{x}, {a}", "medium"),    # its rows: the leading-dim guess (rows-of-count)
])
def test_a_finding_carries_the_confidence_of_its_chain(tmp_path, launch_arg, params, level):
    rng = random.Random()
    k, n, x, a, w = rand_names(rng, "k", "n", "x", "a", "w").values()
    src = KERNEL.format(k=k, n=n) + f"""
def {w}({params.format(x=x, a=a)}):
    {k}[(1,)]({x}, {launch_arg.format(x=x, a=a)}, BLOCK=64)
"""
    result = _scan(tmp_path, src, "low")
    (f,) = [f for f in result.findings if f.code == "JG001"]
    assert f.confidence == level, f.details.get("rules")
    assert set(f.details["rules"]) <= set(registry.RULES)


@pytest.mark.parametrize("name", ["num_rows", "step", "n", "rows", "kv_cache_len", "seq_len", "M"])
def test_wrappers_identical_but_for_a_parameter_name_give_the_same_default_result(tmp_path, name):
    # nothing is known of the value the wrapper is given: by default nothing is reported, whatever
    # the name; a name that says per-call may still raise a finding at the low level
    rng = random.Random()
    k, n, x, w = rand_names(rng, "k", "n", "x", "w").values()
    src = KERNEL.format(k=k, n=n) + f"""
def {w}({x}, {name}):
    {k}[(1,)]({x}, {name}, BLOCK=64)
"""
    assert _scan(tmp_path, src).findings == []
    low = _scan(tmp_path, src, "low").findings
    assert all(f.confidence == "low" for f in low)
    # the same wrapper handed a structural per-call value is reported, at the default level
    src2 = src + f"""
def caller(t):
    {w}(t, int(t.sum()))
"""
    (f,) = _scan(tmp_path, src2).findings
    assert f.param == n and f.confidence == "high"


def test_confidence_level_from_the_command_line_and_the_config(tmp_path):
    rng = random.Random()
    k, n, x, w = rand_names(rng, "k", "n", "x", "w").values()
    (tmp_path / "m.py").write_text(KERNEL.format(k=k, n=n) + f"""
def {w}({x}, num_tokens, lengths):
    {k}[(1,)]({x}, num_tokens, BLOCK=64)
""")

    def run(*flags):
        proc = subprocess.run([sys.executable, "-m", "jitguard", "scan", "--no-cache", "--format", "json", *flags, "."],
                              cwd=tmp_path, capture_output=True, text=True)
        return proc.returncode, json.loads(proc.stdout)

    code, doc = run("--isolated")
    assert code == 0 and doc["findings"] == [] and doc["summary"]["below_confidence"] == 1
    code, doc = run("--isolated", "--confidence", "low")
    assert code == 1 and [f["confidence"] for f in doc["findings"]] == ["low"]
    (tmp_path / "pyproject.toml").write_text('[tool.jitguard]\nconfidence = "low"\n')
    code, doc = run()
    assert code == 1 and len(doc["findings"]) == 1
    code, doc = run("--confidence", "high")
    assert code == 0 and doc["findings"] == []


def test_config_rejects_an_unknown_confidence_level(tmp_path):
    assert config_from_table({"confidence": "high"}, str(tmp_path), "pyproject.toml").confidence == "high"
    with pytest.raises(ConfigError, match="confidence"):
        config_from_table({"confidence": "sure"}, str(tmp_path), "pyproject.toml")


def _findings(tmp_path, body: str, level: str = "low") -> dict[str, str]:
    """{param: confidence} of the JG001/JG002 findings of KERNEL plus ``body`` (random kernel names)."""
    rng = random.Random()
    k, n = rand_names(rng, "k", "n").values()
    src = KERNEL.format(k=k, n=n) + body.replace("KERNEL", k)
    return {f.param: f.confidence for f in _scan(tmp_path, src, level).findings if f.code in ("JG001", "JG002")}


def test_arguments_gathered_in_a_local_dict_and_splatted(tmp_path):
    got = _findings(tmp_path, """
def w(x, lengths):
    kw = dict(BLOCK=64)
    kw2 = {"BLOCK": 64}
    KERNEL[(1,)](x, int(lengths.max()), **kw)
""")
    assert list(got.values()) == ["high"]
    # a dict built elsewhere (a parameter) stays unmapped: nothing is guessed
    assert _findings(tmp_path, """
def w(x, kw):
    KERNEL[(1,)](x, **kw)
""") == {}


def test_a_launch_through_a_bound_grid(tmp_path):
    got = _findings(tmp_path, """
def w(x, lengths):
    launch = KERNEL[(1,)]
    launch(x, int(lengths.sum()), BLOCK=64)
""")
    assert list(got.values()) == ["high"]


def test_a_loop_over_trailing_dims_is_not_a_loop_counter(tmp_path):
    body = """
def w(x):
    rows = 1
    for s in x.shape[{start}]:
        rows *= s
    KERNEL[(1,)](x, rows, BLOCK=64)
"""
    assert _findings(tmp_path, body.format(start="1:")) == {}
    assert _findings(tmp_path, body.format(start="2:")) == {}
    # the whole shape includes the leading dim: the guess that it varies
    assert list(_findings(tmp_path, body.format(start=":")).values()) == ["medium"]
    # a loop over a per-call range is a counter
    assert list(_findings(tmp_path, """
def w(x, lengths):
    for i in range(int(lengths.max())):
        KERNEL[(1,)](x, i, BLOCK=64)
""").values()) == ["high"]


def test_a_rounded_true_division_is_an_int(tmp_path):
    for expr in ("math.ceil(int(t.sum()) / 128)", "int(int(t.sum()) / 3)"):
        got = _findings(tmp_path, f"""
import math

def w(x, t):
    KERNEL[(1,)](x, {expr}, BLOCK=64)
""")
        assert list(got.values()) == ["high"], expr
    # a true division left as it is is a float: never value-specialized
    assert _findings(tmp_path, """
def w(x, t):
    KERNEL[(1,)](x, int(t.sum()) / 3, BLOCK=64)
""") == {}


def test_batch_first_sequence_dim_is_a_convention_not_a_name_alone(tmp_path):
    body = """
def w(q):
    {a}, {b}, {c}, {d} = q.shape
    KERNEL[(1,)](q, {pick}, BLOCK=64)
"""
    assert list(_findings(tmp_path, body.format(a="B", b="T", c="H", d="D", pick="T")).values()) == ["medium"]
    # the same name at a position that is not a batch-first sequence dim (nor a head-first one: the
    # second dim is not named heads): a name alone
    assert list(_findings(tmp_path, body.format(a="B", b="C", c="T", d="D", pick="T")).values()) == ["low"]
    # a model dim at that position (its name does not say per-call): not reported
    assert _findings(tmp_path, body.format(a="B", b="H", c="T", d="D", pick="H")) == {}
    # the leading dim named a sequence length: sequence-first [S, B, H, D], the second dim by its name alone
    assert list(_findings(tmp_path, body.format(a="max_seqlen", b="batch_size", c="H", d="D", pick="batch_size")
                          ).values()) == ["low"]
    assert list(_findings(tmp_path, body.format(a="S", b="bs", c="H", d="D", pick="bs")).values()) == ["low"]


def test_batch_first_3d_sequence_dim_is_a_convention_and_its_stride_a_count_times_a_dim(tmp_path):
    rng = random.Random()
    b, c = rand_names(rng, "b", "c").values()
    body = """
def w(x):
    {a}, {b}, {c} = x.shape
    KERNEL[(1,)](x, {pick}, BLOCK=64)
"""
    # the leading target named a batch: the second dim is the sequence, a convention (medium)
    assert list(_findings(tmp_path, body.format(a="batch", b=b, c=c, pick=b)).values()) == ["medium"]
    # its row stride is the sequence times a model dim: by convention a multiple of 16, never above low
    assert list(_findings(tmp_path, body.format(a="batch", b=b, c=c, pick="x.stride(0)")).values()) == ["low"]
    # the leading target named tokens: tokens-first [T, H, D], the second a model dim (not reported)
    assert _findings(tmp_path, body.format(a="num_tokens", b=b, c=c, pick=b)) == {}


def test_a_kernel_and_its_arguments_handed_to_a_launch_helper_as_a_dict(tmp_path):
    rng = random.Random()
    k, n, helper = rand_names(rng, "k", "n", "helper").values()
    src = KERNEL.format(k=k, n=n) + f"""
def {helper}(kernel, grid, args):
    kernel[grid](**args)

def w(x, lengths):
    {helper}({k}, (1,), dict(x_ptr=x, {n}=int(lengths.max()), BLOCK=64))

def v(x, t):
    kw = {{"x_ptr": x, "{n}": int(t.sum()), "BLOCK": 64}}
    {helper}({k}, (1,), kw)
"""
    (f,) = _scan(tmp_path, src).findings
    assert (f.param, f.confidence, len(f.details["launches"])) == (n, "high", 2)
    # the same call into a function that does not launch its kernel parameter: not a launch
    other = src.replace("    kernel[grid](**args)", "    return kernel, grid, args")
    assert _scan(tmp_path, other).findings == []


def test_a_launch_helper_taking_the_arguments_as_a_tuple_and_a_dict(tmp_path):
    # def launch(wrap, kernel, grid, args, consts, **options): wrap(kernel)[grid](*args, **consts, **options)
    got = _findings(tmp_path, """
def _identity(kernel):
    return kernel

def _launch(wrap, kernel, grid, args, consts, **options):
    wrap(kernel)[grid](*args, **consts, **options)

def w(x, lengths):
    rows = int(lengths.max())
    _launch(_identity, KERNEL, (rows,), (x, rows), dict(BLOCK=64), num_warps=4)
""")
    assert list(got.values()) == ["high"]


def test_kernels_made_in_a_function_and_returned_in_a_namespace(tmp_path):
    rng = random.Random()
    k, n, make = rand_names(rng, "k", "n", "make").values()
    src = f"""
import types
import triton
import triton.language as tl

def {make}():
    @triton.jit
    def {k}(x_ptr, {n}, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, 0.0, mask=offs < {n})
    return types.SimpleNamespace(run={k})

def w(x, t):
    ks = {make}()
    ks.run[(1,)](x, int(t.sum()), BLOCK=64)
"""
    (f,) = _scan(tmp_path, src).findings
    assert (f.param, f.confidence) == (n, "high")


def test_a_value_fixed_per_launch_site_but_different_between_sites(tmp_path):
    body = """
def a(x):
    KERNEL[(1,)](x, {v1}, BLOCK=64)

def b(x):
    KERNEL[(1,)](x, {v2}, BLOCK=64)
"""
    # 1 and 7: two value classes (==1, other): two compiles in one process, reported as such, low
    src = body.format(v1=1, v2=7)
    got = _findings(tmp_path, src)
    assert list(got.values()) == ["low"]
    assert _findings(tmp_path, src, "medium") == {}
    # 3 and 7: one value class, one compile: nothing to report
    assert _findings(tmp_path, body.format(v1=3, v2=7)) == {}


def test_a_size_read_with_an_index_the_code_fixes(tmp_path):
    body = """
def w(x, dim={d}):
    KERNEL[(1,)](x, x.size(dim), BLOCK=64)

def caller(t):
    w(t.float())
"""
    # dim defaults to 0 and no caller passes it: the leading dim, the guess that it varies
    assert list(_findings(tmp_path, body.format(d=0)).values()) == ["medium"]
    # dim 1: a model dim
    assert _findings(tmp_path, body.format(d=1)) == {}
    # callers that pass different dims (0 by default, 1): the most varying of the dims they name, the
    # leading one, and the call that names it
    src = body.format(d=0) + "\ndef other(t):\n    w(t, 1)\n"
    assert list(_findings(tmp_path, src).values()) == ["medium"]
    (f,) = _scan(tmp_path, KERNEL.format(k="k", n="n") + src.replace("KERNEL", "k")).findings
    assert "dim-per-caller" in f.details["rules"] and "dim is 0 at the call of line" in f.details["evidence"][0]
    # two model dims, or a caller whose dim is not a literal: nothing
    assert _findings(tmp_path, body.format(d=1) + "\ndef other(t):\n    w(t, 2)\n") == {}
    assert _findings(tmp_path, body.format(d=1) + "\ndef other(t, d):\n    w(t, d)\n") == {}


def test_a_stride_read_with_an_index_the_callers_set(tmp_path):
    body = """
import torch

def w(lengths, dim):
    n = int(lengths.max())
    x = torch.empty((8, n))
    KERNEL[(1,)](x, x.stride(dim), BLOCK=64)

def a(lengths):
    w(lengths, {d1})

def b(lengths):
    w(lengths, {d2})
"""
    # x.stride(0) is n, read off the device: callers passing 0 and 1 make it vary at one of them
    (f,) = _scan(tmp_path, KERNEL.format(k="k", n="n") + body.format(d1=0, d2=1).replace("KERNEL", "k")).findings
    assert f.confidence == "high" and f.details["rules"][:2] == ["dim-per-caller", "allocated-layout"]
    # 1 at both: the unit stride, fixed
    assert _findings(tmp_path, body.format(d1=1, d2=1)) == {}


def test_a_dim_read_with_an_index_nothing_fixes_is_shown_as_written(tmp_path):
    body = """
def w(x, dim):
    for i in range(dim):
        m = x.shape[i]
    KERNEL[(1,)](x, m, BLOCK=64)
"""
    (f,) = _scan(tmp_path, KERNEL.format(k="k", n="n") + body.replace("KERNEL", "k"), "low").findings
    assert "x.shape[i]" in f.details["evidence"][0] and "None" not in f.details["evidence"][0]


def test_a_name_the_project_lists_is_its_own_convention_medium(tmp_path):
    rng = random.Random()
    k, n, count = rand_names(rng, "k", "n", "count").values()
    (tmp_path / "m.py").write_text(KERNEL.format(k=k, n=n) + f"""
def w(x, {count}):
    {k}[(1,)](x, {count}, BLOCK=64)
""")
    cfg = Config(select=("JG",), root=str(tmp_path), varying_names=frozenset({count}))
    (f,) = scan_paths([str(tmp_path)], cfg, jobs=1, use_cache=False).findings
    assert f.confidence == "medium" and "configured-name" in f.details["rules"]


def test_a_shape_unpacked_with_more_values_after_it(tmp_path):
    # B, T, H, K, V = *k.shape, v.shape[-1]: the first four unpack k's 4-d shape
    body = """
def w(k, v):
    B, T, H, K, V = *k.shape, v.shape[-1]
    KERNEL[(1,)](k, {pick}, BLOCK=64)
"""
    assert list(_findings(tmp_path, body.format(pick="T")).values()) == ["medium"]
    assert list(_findings(tmp_path, body.format(pick="B")).values()) == ["medium"]
    assert _findings(tmp_path, body.format(pick="K")) == {}
    assert _findings(tmp_path, body.format(pick="V")) == {}


def test_the_sequence_dim_of_a_head_first_layout(tmp_path):
    # B, H, T, D = q.shape: the leading dim named a batch and the next heads put the sequence third
    body = """
def w(q):
    {b}, {h}, {t}, {d} = q.shape
    KERNEL[(1,)](q, {t}, BLOCK=64)
"""
    assert list(_findings(tmp_path, body.format(b="B", h="H", t="T", d="D")).values()) == ["medium"]
    assert list(_findings(tmp_path, body.format(b="bsz", h="num_heads", t="seq_len", d="hd")).values()) == ["medium"]
    # the name alone, without the layout's names agreeing: low
    assert list(_findings(tmp_path, body.format(b="B", h="C", t="T", d="D")).values()) == ["low"]
    assert list(_findings(tmp_path, body.format(b="x0", h="H", t="T", d="D")).values()) == ["low"]
    # a third dim not named per-call (a spatial or model dim): nothing
    assert _findings(tmp_path, body.format(b="B", h="H", t="W", d="D")) == {}


def _names(*keys: str) -> dict[str, str]:
    """A distinct random identifier for each of ``keys`` (test_provenance_element_counts reads it too)."""
    return rand_names(random.Random(), *keys)


def test_a_leading_dim_also_used_as_the_innermost_size_after_a_count_is_low(tmp_path):
    # n = w.shape[0] is the leading-dim guess; out = empty((m, n)) with m a per-call count puts n
    # where model dims go: the two conventions disagree, so the guess is no evidence
    body = """
import torch

def {f}({x}, {w}):
    {m} = {x}.shape[0]
    {n} = {w}.shape[0]
    {o} = torch.empty({shape})
    KERNEL[(1,)]({o}, {n}, BLOCK=64)
"""
    nm = _names("f", "x", "w", "m", "n", "o", "h")
    assert list(_findings(tmp_path, body.format(shape="({m}, {n})".format(**nm), **nm)).values()) == ["low"]
    # the same through a helper of the module that allocates it, and through a view after x's leading dims
    assert list(_findings(tmp_path, """
import torch

def {h}({a}, {b}):
    return torch.empty(({a}, {b}))

def {f}({x}, {w}):
    {n} = {w}.shape[0]
    {o} = {h}({x}.shape[0], {n})
    KERNEL[(1,)]({o}, {n}, BLOCK=64)
""".format(a="aa" + nm["m"], b="bb" + nm["m"], **nm)).values()) == ["low"]
    assert list(_findings(tmp_path, """
def {f}({x}, {w}):
    {n} = {w}.shape[0]
    KERNEL[(1,)]({x}, {n}, BLOCK=64)
    return {x}.view(*{x}.shape[:-1], {n})
""".format(**nm)).values()) == ["low"]
    # the leading size a stacked (3, n) or column-major (groups, n) layout: n is the count there
    for shape in ("(3, {n})", "({n} // 4, 7, {n})", "({n}, 64)"):
        assert list(_findings(tmp_path, body.format(shape=shape.format(**nm), **nm)).values()) == ["medium"], shape
    # transposed after: the innermost size of the allocation is not innermost in the tensor used
    assert list(_findings(tmp_path, body.format(shape="({m}, {n})".format(**nm), **nm)
                          .replace(")\n    KERNEL", ").t()\n    KERNEL", 1)).values()) == ["medium"]


def test_counts_times_model_dims_through_allocated_layouts_and_copies(tmp_path):
    nm = _names("f", "x", "h", "o", "p", "r", "i", "s")
    # numel of a *_like copy of a 2-d tensor (whose trailing dim the code reads): a count times a model dim
    body = """
import torch

def {f}({x}):
    {r}, {h} = {x}.shape
    {o} = torch.empty_like({x})
    KERNEL[(1,)]({o}, {arg}, BLOCK=64)
"""
    assert list(_findings(tmp_path, body.format(arg="{o}.numel()".format(**nm), **nm)).values()) == ["low"]
    # x = x.contiguous(): a copy of itself, no more known of it than before (the element-count guess, low)
    assert list(_findings(tmp_path, """
def {f}({x}):
    {x} = {x}.contiguous()
    KERNEL[(1,)]({x}, {x}.numel(), BLOCK=64)
""".format(**nm)).values()) == ["low"]
    # other arithmetic on it is a count again: the element-count guess, low as well
    assert list(_findings(tmp_path, body.format(arg="{o}.numel() - 1".format(**nm), **nm)).values()) == ["low"]
    # rows * (numel // rows): the row size is the non-leading dims, so the product is a count times them
    body = """
def {f}({x}):
    {r} = {x}.shape[0]
    {i} = {x}.numel() // {r}
    KERNEL[(1,)]({x}, {arg}, BLOCK=64)
"""
    assert _findings(tmp_path, body.format(arg="{i}".format(**nm), **nm)) == {}
    assert list(_findings(tmp_path, body.format(arg="{r} * {i}".format(**nm), **nm)).values()) == ["low"]
    assert list(_findings(tmp_path, body.format(arg="{r} * {i} + 1".format(**nm), **nm)).values()) == ["medium"]
    # a layout returned in a tuple by a helper of the module: its strides follow the sizes it was made of
    body = """
import torch

def {h}({r}, {i}):
    {p} = torch.empty(({r}, {i}))
    return {p}, {p}.stride(0)

def {f}({x}):
    {o}, {s} = {h}({outer}, {x}.shape[0])
    KERNEL[(1,)]({o}, {o}.stride(0), BLOCK=64)
"""
    # (model dim, count): stride 0 is the count (a stride of a tensor of unknown layout would be fixed)
    assert list(_findings(tmp_path, body.format(outer="{x}.shape[1]".format(**nm), **nm)).values()) == ["medium"]


def test_a_tensor_built_from_constants_has_fixed_sizes(tmp_path):
    nm = _names("f", "x", "o")
    body = """
import torch

def {f}():
    {x} = {made}
    {x} = {x}[torch.isfinite({x})]
    {o} = torch.empty_like({x})
    KERNEL[(1,)]({o}, {x}.numel(), BLOCK=64)
"""
    for made in ("torch.arange(-(2**15), 2**15, dtype=torch.int32).view(torch.bfloat16)",
                 "torch.tensor([[1.0, 2.0], [3.0, 4.0]])"):
        assert _findings(tmp_path, body.format(made=made, **nm)) == {}, made
    # from a size the code does not fix: the element-count guess as before (low)
    assert list(_findings(tmp_path, body.replace("():", "(n):").format(made="torch.arange(n)", **nm)).values()) \
        == ["low"]


def test_a_leading_dim_the_code_leaves_out_of_its_own_unpacking_is_low(tmp_path):
    rng = random.Random()
    fn, x, d, k, a, b = rand_names(rng, "fn", "x", "d", "k", "a", "b").values()
    kernel = f"""
import triton
import triton.language as tl

@triton.jit
def {k}(p, {a}, {b}, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, 0.0, mask=(offs < {a}) & (offs < {b}))
"""
    src = kernel + f"""
def {fn}({x}):
    _, n_tokens, {d} = {x}.shape
    {k}[(1,)]({x}, {x}.shape[0], n_tokens, BLOCK=16)
"""
    levels = {f.param: f for f in _scan(tmp_path, src, "low").findings if f.code == "JG001"}
    # the discarded leading place is a stack of blocks over the tokens the code names: low
    assert levels[a].confidence == "low" and "stacked-leading" in levels[a].details["rules"]
    # without the unpacking the leading-dim guess stands at medium
    src = src.replace(f"_, n_tokens, {d} = {x}.shape", f"n_tokens = {x}.shape[1]")
    levels = {f.param: f.confidence for f in _scan(tmp_path, src, "low").findings if f.code == "JG001"}
    assert levels[a] == "medium"
    # a leading place kept (B, T, H, D = q.shape) leaves the guess too
    src = src.replace(f"n_tokens = {x}.shape[1]", f"{d}, n_tokens = {x}.shape")
    levels = {f.param: f.confidence for f in _scan(tmp_path, src, "low").findings if f.code == "JG001"}
    assert levels[a] == "medium"
