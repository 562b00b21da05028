"""``x.numel()`` of an index or metadata tensor (rule index-count): where a launch in the same function
passes ``x`` to a kernel parameter whose loaded values the kernel uses as integers (an offset of
another address, a loop bound, a comparison with a program id or an offset), the count is a per-call
count at medium, not the element-count guess (low). Loads that only feed arithmetic or stored values
leave it low. Identifiers are random: structure decides, never a name."""
from __future__ import annotations

import ast
import random

import pytest

from jitguard.static.param_uses import analyze_uses
from tests._static_util import rand_names
from tests.test_provenance_rules import _scan

# a kernel that loads one value per program through {idx} and uses it as USE says; {n} bounds the
# programs (a plain int, so JG001 reports it when it varies)
KERNEL = """
import triton
import triton.language as tl

@triton.jit
def {k}({dst}, {idx}, {src}, {n}, {stride}, BLOCK: tl.constexpr):
    {pid} = tl.program_id(0)
    if {pid} >= {n}:
        return
    {offs} = tl.arange(0, BLOCK)
    {v} = tl.load({idx} + {pid})
    {x} = tl.load({src} + {pid} * {stride} + {offs})
    {use}
"""

USES = {
    # the loaded value offsets another pointer: a slot, a row index
    "address": "tl.store({dst} + {v} * {stride} + {offs}, {x})",
    # a loop bound: a length or a start location
    "loop": "for {j} in range(0, {v}):\n        tl.store({dst} + {j} * {stride} + {offs}, {x})",
    # compared with the kernel's offsets: a length masking the block
    "compare": "tl.store({dst} + {pid} * {stride} + {offs}, {x}, mask={offs} < {v})",
    # added to the kernel's offsets: positions from a start location
    "positions": "tl.store({dst} + {pid} * {stride} + {offs}, {v} + {offs} + {x} * 0)",
}
DATA_USES = {
    # the loaded value only scales, is summed, or is compared with a literal: data, not an index
    "scaled": "tl.store({dst} + {pid} * {stride} + {offs}, {x} * {v})",
    "summed": "tl.store({dst} + {pid}, tl.sum({x}, 0) + {v})",
    "thresholded": "tl.store({dst} + {pid} * {stride} + {offs}, tl.where({v} > 0, {x}, 0.0))",
}

HOST = """
def {f}({a}, {b}, {c}):
    {m} = {count}.numel()
    {k}[({m},)]({a}, {b}, {c}, {m}, {c}.stride(0), BLOCK=64)
"""


def _kernel(rng: random.Random, use: str, **given: str) -> tuple[str, dict[str, str]]:
    nm = rand_names(rng, "k", "dst", "idx", "src", "n", "stride", "pid", "offs", "v", "x", "j")
    nm.update(given)
    return KERNEL.format(use=use.format(**nm), **nm), nm


def _counted(tmp_path, use: str, count: str) -> tuple[dict[str, str], list[tuple[str, list[str], list[str]]]]:
    """The kernel with ``use`` launched by HOST counting its ``count`` argument ("b": the index
    tensor, "c": the data tensor beside it): its names and ``_count_findings``."""
    rng = random.Random()
    src, nm = _kernel(rng, use)
    host = rand_names(rng, "f", "a", "b", "c", "m")
    src += HOST.format(k=nm["k"], count=host[count], **host)
    return nm, _count_findings(tmp_path, src, nm["k"])


def _count_findings(tmp_path, src: str, kernel: str) -> list[tuple[str, list[str], list[str]]]:
    """(confidence, rules, evidence) of the JG001 findings on ``kernel``, at every level."""
    return [(f.confidence, f.details["rules"], f.details["launches"][0]["evidence"])
            for f in _scan(tmp_path, src, "low").findings if f.code == "JG001" and f.kernel.endswith("." + kernel)]


@pytest.mark.parametrize("use", sorted(USES))
def test_the_count_of_a_tensor_the_kernel_indexes_with_is_medium(tmp_path, use):
    nm, got = _counted(tmp_path, USES[use], "b")
    assert len(got) == 1, got
    level, rules, evidence = got[0]
    assert level == "medium", got
    assert "index-count" in rules and "element-count" not in rules, rules
    assert "index tensor" in evidence[-1] and nm["idx"] in evidence[-1], evidence


@pytest.mark.parametrize("use", sorted(DATA_USES))
def test_the_count_of_a_tensor_whose_loads_are_data_stays_low(tmp_path, use):
    _, got = _counted(tmp_path, DATA_USES[use], "b")
    assert [(level, "element-count" in rules, "index-count" in rules) for level, rules, _ in got] \
        == [("low", True, False)], got


def test_the_count_of_another_tensor_of_the_launch_stays_low(tmp_path):
    # the index tensor is passed, but the count is of the data tensor beside it
    _, got = _counted(tmp_path, USES["address"], "c")
    assert [level for level, _, _ in got] == ["low"], got


def test_a_view_of_the_index_tensor_counts_its_elements(tmp_path):
    # flat = b.view(-1): the count of the view is of the tensor the launch passes
    rng = random.Random()
    src, nm = _kernel(rng, USES["address"])
    host = rand_names(rng, "f", "a", "b", "c", "m", "w")
    src += """
def {f}({a}, {b}, {c}):
    {w} = {b}.view(-1)
    {m} = {w}.numel()
    {k}[({m},)]({a}, {b}, {c}, {m}, {c}.stride(0), BLOCK=64)
""".format(k=nm["k"], **host)
    assert [level for level, _, _ in _count_findings(tmp_path, src, nm["k"])] == ["medium"]


def test_the_tensor_passed_to_another_launch_of_the_same_function(tmp_path):
    rng = random.Random()
    # kernel d reads its tensor as data; kernel i indexes with it
    d_src, d = _kernel(rng, DATA_USES["scaled"])
    i_src, i = _kernel(rng, USES["address"])
    src = d_src + i_src.split("\n", 3)[3]  # one import block
    host = rand_names(rng, "f", "g", "a", "b", "c", "m")
    # alone, d's count of b stays low
    alone = src + HOST.format(k=d["k"], count=host["b"], **host)
    assert [level for level, _, _ in _count_findings(tmp_path, alone, d["k"])] == ["low"]
    # the same function also launches i with b: b is an index tensor, d's count of it medium
    both = alone + "    {i}[(1,)]({a}, {b}, {c}, 1, {c}.stride(0), BLOCK=64)\n".format(i=i["k"], **host)
    got = _count_findings(tmp_path, both, d["k"])
    assert [level for level, _, _ in got] == ["medium"], got
    assert f"{i['k']} at launch line" in got[0][2][-1], got
    # i launched with b in another function: that b is another binding, the count stays low
    apart = alone + """
def {g}({a}, {b}, {c}):
    {i}[(1,)]({a}, {b}, {c}, 1, {c}.stride(0), BLOCK=64)
""".format(i=i["k"], **host)
    assert [level for level, _, _ in _count_findings(tmp_path, apart, d["k"])] == ["low"]


def _index_loads(body: str, params: list[str]) -> dict[str, str]:
    fn = ast.parse(body).body[0]
    got = analyze_uses(fn, params, lambda node: ast.unparse(node))
    return {p: u.kind for p, u in got.index_loads.items()}


def test_loads_used_as_integers_are_told_from_data_in_the_kernel():
    rng = random.Random()
    a, i, o, q, pid, s, t = rand_names(rng, "a", "i", "o", "q", "pid", "s", "t").values()
    # a gather: the value loaded through i offsets the load through a; a's values are stored
    gather = f"""
def k({a}, {i}, {o}):
    {pid} = tl.program_id(0)
    {t} = tl.load({a} + tl.load({i} + {pid}))
    tl.store({o} + {pid}, {t})
"""
    assert _index_loads(gather, [a, i, o]) == {i: "address"}
    # a start and an end location loaded per program bound a loop; the data are only summed
    ranged = f"""
def k({a}, {i}, {o}):
    {pid} = tl.program_id(0)
    {s} = tl.load({i} + {pid})
    {t} = tl.load({i} + {pid} + 1)
    {q} = 0.0
    for j in range({s}, {t}):
        {q} += tl.load({a} + j)
    tl.store({o} + {pid}, {q})
"""
    assert _index_loads(ranged, [a, i, o]) == {i: "loop_bound"}
    # a value read through a local pointer, compared with the program id: a count of programs
    local = f"""
def k({a}, {i}, {o}):
    {pid} = tl.program_id(0)
    {s} = {i} + 0
    {t} = tl.load({s})
    if {pid} >= {t}:
        return
    tl.store({o} + {pid}, tl.load({a} + {pid}) * 2.0)
"""
    assert _index_loads(local, [a, i, o]) == {i: "compare"}
    # data compared with data or a literal is no index
    data = f"""
def k({a}, {i}, {o}):
    {pid} = tl.program_id(0)
    {s} = tl.load({a} + {pid})
    {t} = tl.load({i} + {pid})
    tl.store({o} + {pid}, tl.where({s} > {t}, {s}, 0.0))
"""
    assert _index_loads(data, [a, i, o]) == {}
    # a float's bits as a table index (a bit-exact lookup) and a test of the value against itself
    # scaled by an arange are no index use of what was loaded
    bits = f"""
def k({a}, {i}, {o}):
    {pid} = tl.program_id(0)
    {s} = tl.load({a} + {pid}).to(tl.uint16, bitcast=True)
    {t} = tl.load({i} + {pid})
    {q} = {t} * tl.arange(0, 4)
    tl.store({o} + {pid}, tl.load({o} + {s}.to(tl.int32)) * tl.sum(tl.where({q} >= 0, 1.0, 0.0), 0))
"""
    assert _index_loads(bits, [a, i, o]) == {}
    # a start location added to an arange: positions (an index), even though only stored; a loaded
    # value added to data, or to an arange scaled by another loaded value, is no index
    positions = f"""
def k({a}, {i}, {o}):
    {pid} = tl.program_id(0)
    {s} = tl.load({i} + {pid})
    tl.store({o} + {pid} * 4 + tl.arange(0, 4), {s} + tl.arange(0, 4))
"""
    assert _index_loads(positions, [a, i, o]) == {i: "index_term"}
    mixed = f"""
def k({a}, {i}, {o}):
    {pid} = tl.program_id(0)
    {s} = tl.load({i} + {pid})
    {t} = tl.load({a} + {pid})
    tl.store({o} + {pid}, {t} + {s} * ({pid} - tl.arange(0, 4)))
"""
    assert _index_loads(mixed, [a, i, o]) == {}


def test_a_pointer_handed_to_a_jit_helper_that_indexes_with_it(tmp_path):
    # the launched kernel hands its pointer to a helper of the module; the helper does the loads
    rng = random.Random()
    helper_src, h = _kernel(rng, USES["address"])
    _, data = _kernel(rng, DATA_USES["scaled"])
    nm = rand_names(rng, "k", "dst", "idx", "src", "n", "stride", "pid")
    host = rand_names(rng, "f", "a", "b", "c", "m")
    for callee, level in ((h, "medium"), (data, "low")):
        src = (helper_src if callee is h else KERNEL.format(use=DATA_USES["scaled"].format(**data), **data)) + """
@triton.jit
def {k}({dst}, {idx}, {src}, {n}, {stride}, BLOCK: tl.constexpr):
    {pid} = tl.program_id(0)
    {helper}({dst}, {idx} + 0, {src}, {n}, {stride}, BLOCK)
""".format(helper=callee["k"], **nm) + HOST.format(k=nm["k"], count=host["b"], **host)
        assert [lv for lv, _, _ in _count_findings(tmp_path, src, nm["k"])] == [level], (callee, src)


def test_a_loaded_value_handed_to_a_jit_helper_that_addresses_with_it(tmp_path):
    # the kernel loads a slot and hands the value to a helper, which offsets a pointer by it
    rng = random.Random()
    nm = rand_names(rng, "k", "g", "dst", "idx", "src", "n", "stride", "pid", "v", "w", "offs")
    host = rand_names(rng, "f", "a", "b", "c", "m")
    for body, level in (("tl.store({dst} + {w} * {stride} + {offs}, 1.0)", "medium"),
                        ("tl.store({dst} + {offs}, {w} * 2.0)", "low")):
        src = """
import triton
import triton.language as tl

@triton.jit
def {g}({dst}, {w}, {stride}, BLOCK: tl.constexpr):
    {offs} = tl.arange(0, BLOCK)
    BODY

@triton.jit
def {k}({dst}, {idx}, {src}, {n}, {stride}, BLOCK: tl.constexpr):
    {pid} = tl.program_id(0)
    if {pid} >= {n}:
        return
    {v} = tl.load({idx} + {pid})
    {g}({dst}, {v}, {stride}, BLOCK)
""".replace("BODY", body).format(**nm) + HOST.format(k=nm["k"], count=host["b"], **host)
        assert [lv for lv, _, _ in _count_findings(tmp_path, src, nm["k"])] == [level], src


def test_the_helpers_a_loaded_value_is_handed_to_are_listed_in_source_order_whatever_the_hash_seed():
    """A value loaded through a pointer flows into several locals, each handed to a helper: the calls
    are listed in the order the kernel makes them (kernels.py asks the first helper that uses its
    parameter as an index), not in the order of a set of names, which follows PYTHONHASHSEED."""
    import json
    import subprocess
    import sys

    rng = random.Random()
    p, v, pid, *locs = rand_names(rng, "p", "v", "pid", *(f"l{j}" for j in range(8))).values()
    helpers = [f"h{j}_{n}" for j, n in enumerate(rand_names(rng, *(f"h{j}" for j in range(8))).values())]
    rng.shuffle(helpers)
    body = [f"def k({p}):", f"    {pid} = tl.program_id(0)", f"    {v} = tl.load({p} + {pid})"]
    body += [f"    {loc} = {v} + {j}" for j, loc in enumerate(locs)]
    body += [f"    {h}({loc})" for h, loc in zip(helpers, locs)]
    script = (
        "import ast, json, sys\nfrom jitguard.static.param_uses import analyze_uses\n"
        "src = sys.stdin.read()\nfn = ast.parse(src).body[0]\n"
        f"got = analyze_uses(fn, [{p!r}], ast.unparse)\n"
        f"print(json.dumps([c for c, _ in got.loaded_handed.get({p!r}, [])]))\n"
    )
    seen = set()
    for seed in ("0", "1", "2", "3", "4", "5"):
        out = subprocess.run([sys.executable, "-c", script], input="\n".join(body) + "\n", capture_output=True,
                             text=True, check=True, env={**__import__("os").environ, "PYTHONHASHSEED": seed})
        seen.add(tuple(json.loads(out.stdout)))
    assert seen == {tuple(helpers)}, seen
