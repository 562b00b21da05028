"""``x.numel()`` and strides: where the code shows a tensor's rank (rule shown-rank), a 1-d tensor's
element count is a count, a count times literal trailing dims stays one, and 2 or more dims with a
trailing one that is not a literal are a count times model dims (count-times-dim, low); where it
shows nothing, the element-count guess is low. Identifiers are random: structure decides."""
from __future__ import annotations

import random

from tests._static_util import rand_ident
from tests.test_provenance_rules import KERNEL, _names, _scan


def _launches(tmp_path, body: str) -> list[tuple[str, list[str]]]:
    """(confidence, rules) of each JG001/JG002 finding of KERNEL plus ``body``, at every level."""
    rng = random.Random()
    k, n = rand_ident(rng), rand_ident(rng)
    src = KERNEL.format(k=k, n=n) + body.replace("KERNEL", k)
    return [(f.confidence, f.details["rules"]) for f in _scan(tmp_path, src, "low").findings
            if f.code in ("JG001", "JG002")]


def _levels(tmp_path, body: str) -> list[str]:
    return [level for level, _ in _launches(tmp_path, body)]


def test_the_rank_a_helper_returns_reaches_numel_through_the_callers(tmp_path):
    nm = _names("h", "g", "f", "m", "n", "s", "o", "p", "x", "k", "y", "b")
    body = """
import torch

def {h}({m}, {n}, {s}):
    {o} = torch.empty({shape})
    if {s} == 1:
        return {o}, {o}
    {p} = torch.empty(({s}, {m}, {n}))
    return {o}, {p}

def {g}({p}, {o}):
    KERNEL[(1,)]({o}, {o}.numel(), BLOCK=64)
    return {o}

def {f}({x}, {k}, {s}):
    {y}, {b} = {h}({x}.shape[0], {k}, {s})
    {y} = {g}({b}, {y})
    return {y}
"""
    # [tokens, a size nothing here tells of]: a count times a model dim, low
    got = _launches(tmp_path, body.format(shape="({m}, {n})".format(**nm), **nm))
    assert [level for level, _ in got] == ["low"]
    assert {"shown-rank", "count-times-dim"} <= set(got[0][1]), got
    # 1-d: the count itself, at the leading-dim guess's level; times a literal 3: still a count
    assert _levels(tmp_path, body.format(shape="{m}".format(**nm), **nm)) == ["medium"]
    assert _levels(tmp_path, body.format(shape="({m}, 3)".format(**nm), **nm)) == ["medium"]
    # times a literal multiple of 16: one value class, nothing to report
    assert _levels(tmp_path, body.format(shape="({m}, 16)".format(**nm), **nm)) == []
    # a plain return works the same way
    plain = """
import torch

def {h}({m}, {n}):
    return torch.empty({shape})

def {f}({x}, {k}):
    {y} = {h}({x}.shape[0], {k})
    KERNEL[(1,)]({y}, {y}.numel(), BLOCK=64)
"""
    assert _levels(tmp_path, plain.format(shape="({m}, {n})".format(**nm), **nm)) == ["low"]
    assert _levels(tmp_path, plain.format(shape="({m},)".format(**nm), **nm)) == ["medium"]


def test_a_slice_of_a_buffer_counts_its_length(tmp_path):
    nm = _names("f", "x", "lens", "buf", "n", "t", "k")
    body = """
import torch

def {f}({x}, {lens}, {k}):
    {buf} = torch.empty({shape}, dtype=torch.int32)
    {n} = int({lens}.max())
    {t} = {buf}[:{n}]
    KERNEL[(1,)]({t}, {t}.numel(), BLOCK=64)
"""
    # a 1-d buffer sliced to a count read off the data: that count, from the code alone
    assert _levels(tmp_path, body.format(shape="4096", **nm)) == ["high"]
    assert _levels(tmp_path, body.format(shape="(4096, 3)", **nm)) == ["high"]
    # rows of a size nothing here tells of: the count times it, low
    assert _levels(tmp_path, body.format(shape="(4096, {k})".format(**nm), **nm)) == ["low"]


def test_a_helper_that_reads_a_trailing_dim_shows_two_dims(tmp_path):
    nm = _names("chk", "a", "f", "x")
    body = """
def {chk}({a}):
    return {a}.ndim == 2 and {a}.shape[1] % 8 == 0

def {f}({x}):
    if not {chk}({x}):
        raise ValueError({x}.shape)
    KERNEL[(1,)]({x}, {x}.numel(), BLOCK=64)
"""
    got = _launches(tmp_path, body.format(**nm))
    assert [level for level, _ in got] == ["low"] and "count-times-dim" in got[0][1], got
    # without the helper nothing shows the rank: the element-count guess, low, and no count-times-dim
    got = _launches(tmp_path, body.format(**nm).replace(f"{nm['a']}.ndim == 2 and {nm['a']}.shape[1] % 8 == 0",
                                                        f"{nm['a']}.is_contiguous()"))
    assert [level for level, _ in got] == ["low"] and "count-times-dim" not in got[0][1], got
    assert "element-count" in got[0][1]


def test_an_asserted_rank(tmp_path):
    nm = _names("f", "x")
    body = """
def {f}({x}):
    {guard}
    KERNEL[(1,)]({x}, {x}.numel(), BLOCK=64)
"""
    for guard, level in (("assert {x}.dim() == 1", "medium"),
                         ("assert {x}.is_cuda and {x}.ndim == 1", "medium"),
                         ("if {x}.ndim != 1:\n        raise ValueError('1-d')", "medium"),
                         ("assert {x}.dim() == 2", "low"),
                         ("assert {x}.dim() >= 1", "low"),  # not a rank
                         ("pass", "low")):
        got = _launches(tmp_path, body.format(guard=guard.format(**nm), **nm))
        assert [lv for lv, _ in got] == [level], guard
        if "== 2" in guard:
            assert "count-times-dim" in got[0][1]


def test_flattening_keeps_the_factors(tmp_path):
    nm = _names("f", "x", "k", "o", "d")
    body = """
import torch

def {f}({x}, {k}):
    {o} = torch.empty(({x}.shape[0], {inner})){flat}
    KERNEL[(1,)]({o}, {arg}, BLOCK=64)
"""
    for flat in (".view(-1)", ".reshape(-1)", ".flatten()"):
        for arg in ("{o}.numel()", "{o}.shape[0]"):
            got = _levels(tmp_path, body.format(flat=flat, arg=arg.format(**nm), inner=nm["k"], **nm))
            assert got == ["low"], (flat, arg)  # tokens times a size nothing here tells of
            got = _levels(tmp_path, body.format(flat=flat, arg=arg.format(**nm), inner="3", **nm))
            assert got == ["medium"], (flat, arg)  # tokens times 3: a count
    # the flattened tensor of unknown rank: its element count, the guess (low)
    assert _levels(tmp_path, """
def {f}({x}):
    {o} = {x}.view(-1)
    KERNEL[(1,)]({o}, {o}.numel(), BLOCK=64)
""".format(**nm)) == ["low"]
    # whose trailing dim the code reads: a count times model dims, low
    got = _launches(tmp_path, """
def {f}({x}):
    {d} = {x}.shape[-1]
    {o} = {x}.flatten()
    KERNEL[(1,)]({o}, {o}.numel(), BLOCK=64)
""".format(**nm))
    assert [lv for lv, _ in got] == ["low"] and "count-times-dim" in got[0][1]


def test_rows_of_an_element_count(tmp_path):
    nm = _names("f", "x", "h")
    body = """
def {f}({x}, {h}):
    KERNEL[(1,)]({x}, {arg}, BLOCK=64)
"""
    # divided by a dim or a size fixed for the model: rows, the leading-dim guess (medium)
    for arg in ("{x}.numel() // {x}.shape[-1]", "{x}.numel() // {h}", "{x}.numel() // {x}.size(-1)"):
        got = _launches(tmp_path, body.format(arg=arg.format(**nm), **nm))
        assert [lv for lv, _ in got] == ["medium"] and "rows-of-count" in got[0][1], arg
    # by a part of a dim (x.shape[-1] // heads, through a local or not): the rows times heads, a count
    # times a model dim (low); divided by a literal, the part is a size again (rows, medium)
    for d in ("{x}.shape[-1] // {h}", "{x}.size(-1) // {h}"):
        for arg in (f"{{x}}.numel() // ({d})", f"{{x}}.numel() // {{d}}"):
            src = body.replace("    KERNEL", "    {d} = " + d + "\n    KERNEL") if "{d}" in arg else body
            got = _launches(tmp_path, src.format(arg=arg.format(**nm, d="hd"), d="hd", **nm))
            assert [lv for lv, _ in got] == ["low"] and "count-times-dim" in got[0][1], (d, arg)
    got = _launches(tmp_path, body.format(arg="{x}.numel() // ({x}.shape[-1] // 2)".format(**nm), **nm))
    assert [lv for lv, _ in got] == ["medium"] and "rows-of-count" in got[0][1]
    # by a literal: the element count halved, still the element-count guess (low)
    assert _levels(tmp_path, body.format(arg="{x}.numel() // 2".format(**nm), **nm)) == ["low"]
    # one less than the element count: the intervals of a vector of boundaries (cu_seqlens), 1-d
    got = _launches(tmp_path, body.format(arg="{x}.numel() - 1".format(**nm), **nm))
    assert [lv for lv, _ in got] == ["medium"] and "boundary-count" in got[0][1], got
    for arg in ("{x}.numel() - 2", "{x}.numel() + 1"):
        assert _levels(tmp_path, body.format(arg=arg.format(**nm), **nm)) == ["low"], arg


def test_a_stride_over_a_count_and_a_size_nothing_tells_of_is_low(tmp_path):
    nm = _names("f", "x", "h", "c", "n", "o")
    body = """
import torch

def {f}({x}, {h}, {c}):
    {n} = {x}.shape[0] - 1
    {o} = torch.empty({shape})
    KERNEL[(1,)]({o}, {o}.stride(0), BLOCK=64)
"""
    # [heads, chunks, chunk size]: stride 0 = chunks * chunk size, a count times a configured size
    got = _launches(tmp_path, body.format(shape="{h}, {n}, {c}".format(**nm), **nm))
    assert [lv for lv, _ in got] == ["low"] and "count-times-dim" in got[0][1], got
    # times a literal: a count (3) or one value class (16)
    assert _levels(tmp_path, body.format(shape="{h}, {n}, 3".format(**nm), **nm)) == ["medium"]
    assert _levels(tmp_path, body.format(shape="{h}, {n}, 16".format(**nm), **nm)) == []
    # a size before the count is no model dim by the layout convention: stride 0 = c * n stays a count
    assert _levels(tmp_path, body.format(shape="{h}, {c}, {n}".format(**nm), **nm)) == ["medium"]
