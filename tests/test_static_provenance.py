"""Provenance classes of launch arguments (docs/provenance.md), on random identifiers so that only
the code's structure can decide."""
from __future__ import annotations

import random

import pytest

from jitguard.static.extract import extract_file
from jitguard.static.facts import BUCKETED, STABLE, UNKNOWN, VARYING
from jitguard.static.provenance.rules import confidence
from tests._static_util import rand_ident, rand_names

KERNEL = """
import torch
import triton
import triton.language as tl

@triton.jit
def kern(x_ptr, v, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < v)
"""


def launch_arg(body: str, rng: random.Random, params: str = "x", keys: str = "abcdtu"):
    """The facts of the argument passed as ``v`` by ``body`` (which binds ``ARG``), in a function
    taking ``params``; ``{k}`` for each of ``keys`` in both is a random identifier."""
    names = rand_names(rng, *keys, "fn")
    fn = names.pop("fn")
    text = body.format(**names)
    src = KERNEL + f"\ndef {fn}({params.format(**names)}):\n" + \
        "".join(f"    {line}\n" for line in text.splitlines()) + "    kern[(1,)](x, ARG, BLOCK=16)\n"
    facts = extract_file("m.py", src, "m")
    (launch,) = [la for la in facts.launches if la.callee == "kern"]
    return next(a for a in launch.args if a.position == 1)


def provenance(body: str, rng: random.Random, params: str = "x") -> tuple[str, str]:
    """Class and value type of the argument passed as ``v`` by ``body`` (which binds ``ARG``)."""
    arg = launch_arg(body, rng, params)
    return arg.provenance, arg.value_type


CASES = [
    ("ARG = x.shape[0]", VARYING),
    ("ARG = x.size(0)", VARYING),
    ("ARG = x.numel()", VARYING),
    ("ARG = len(x)", VARYING),
    ("ARG = x.shape[-1]", STABLE),
    ("ARG = x.shape[1]", STABLE),
    ("{a}, {b}, {c}, {d} = x.shape\nARG = {a}", VARYING),
    ("{a}, {b}, {c}, {d} = x.shape\nARG = {d}", STABLE),
    ("{a} = x.shape[0]\nARG = triton.cdiv({a}, 16)", VARYING),
    ("{a} = x.shape[0]\nARG = ({a} + 15) // 16 * 16", VARYING),
    ("{a} = x.shape[0]\nARG = min({a}, 64)", VARYING),
    ("{a} = x.shape[0]\nARG = triton.next_power_of_2({a})", BUCKETED),
    ("{a} = x.shape[0]\nARG = 1 << ({a} - 1).bit_length()", BUCKETED),
    ("ARG = 128", STABLE),
    ("ARG = self_like = 3", STABLE),
    ("ARG = x.stride(0)", STABLE),
    ("{t} = triton.cdiv(x.shape[0], 4) * 4\n{u} = torch.empty(({t}, 7))\nARG = {u}.stride(0)", STABLE),
    ("{t} = triton.cdiv(x.shape[0], 4) * 4\n{u} = torch.empty((7, {t}))\nARG = {u}.stride(0)", VARYING),
    ("{t} = triton.cdiv(x.shape[0], 4) * 4\n{u} = torch.empty((7, {t})).T\nARG = {u}.stride(1)", VARYING),
    ("{t} = triton.cdiv(x.shape[0], 4) * 4\n{u} = torch.empty((7, {t})).T\nARG = {u}.stride(0)", STABLE),
    ("{u} = torch.empty((x.shape[0], 64))\nARG = {u}.stride(0)", STABLE),
    ("{u} = torch.empty((64, x.shape[0] * 32))\nARG = {u}.stride(0)", VARYING),
    ("{u} = x.view(-1, 64)\nARG = {u}.shape[0]", VARYING),
    # x.view(n, -1) of an [n, 64] tensor: n keeps the varying dim apart, -1 is the rest
    ("{t} = torch.empty((x.shape[0], 64))\n{u} = {t}.view(x.shape[0], -1)\nARG = {u}.shape[1]", STABLE),
    ("{t} = torch.empty((x.shape[0], 64))\n{u} = {t}.view(4, -1)\nARG = {u}.shape[1]", VARYING),
    ("{t} = torch.empty((x.shape[0], 64))\n{u} = {t}.view(-1)\nARG = {u}.shape[0]", VARYING),
    ("ARG = int(x.max().item())", VARYING),
    ("ARG = 0\nfor {a} in range(x.shape[0]):\n    ARG = {a}", VARYING),
    ("for ARG in (16, 32, 64):\n    pass", STABLE),
    ("ARG = {a}() if False else 3", STABLE),
    # a list built by appending per-call values: its elements vary; a literal list's do not
    ("{a} = [0]\nfor {b} in x:\n    {a}.append({a}[-1] + {b}.numel())\nARG = {a}[-1]", VARYING),
    ("{a} = [0, 16]\nARG = {a}[-1]", STABLE),
    ("{a} = [0]\n{a}.append(64)\nARG = {a}[-1]", STABLE),
    # as_strided / empty_strided write the strides out
    ("{t} = x.shape[0] * 4\n{u} = torch.empty(64 * {t}).as_strided((2, x.shape[0], 64), (64 * {t}, 1, {t}))\nARG = {u}.stride(2)", VARYING),
    ("{t} = x.shape[0] * 4\n{u} = torch.empty(64 * {t}).as_strided((2, x.shape[0], 64), (64 * {t}, 1, {t}))\nARG = {u}.stride(1)", STABLE),
    ("{u} = torch.empty_strided((x.shape[0], 8), (1, x.shape[0]))\nARG = {u}.stride(1)", VARYING),
    # tuple unpacking of strides and of shape slices: each name is one stride / dim of the tensor
    ("{a}, {b} = x.stride()\nARG = {a}", STABLE),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, {t}, 3))\n{a}, {b}, {c} = {u}.stride()\nARG = {a}", VARYING),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, {t}, 3))\n{a}, {b}, {c} = {u}.stride()\nARG = {b}", STABLE),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, {t}, 3))\n{d} = {u}.stride()\n{a}, {b}, {c} = {d}\nARG = {a}", VARYING),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, 3, {t}))\n{a}, {b} = {u}.shape[-2:]\nARG = {b}", VARYING),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, 3, {t}))\n{a}, {b} = {u}.shape[-2:]\nARG = {a}", STABLE),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, {t}, 3, 5))\n{a}, {b} = {u}.shape[-3:-1]\nARG = {a}", VARYING),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, {t}, 3, 5))\n{a}, {b} = {u}.shape[-3:-1]\nARG = {b}", STABLE),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, {t}, 3, 5))\n*_, {b} = {u}.shape[:2]\nARG = {b}", VARYING),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, {t}, 3, 5))\n*_, {b} = {u}.shape[:-1]\nARG = {b}", STABLE),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, 3, {t}))\n*_, {a}, {b} = {u}.shape\nARG = {b}", VARYING),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, 3, {t}))\n*_, {a}, {b} = {u}.shape\nARG = {a}", STABLE),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, {t}, 3))\n{d} = {u}.stride()\nARG = {d}[0]", VARYING),
    ("{t} = x.shape[0]\n{u} = torch.empty((7, {t}, 3))\n{d} = {u}.stride()\nARG = {d}[1]", STABLE),
    # unsqueeze(k) of a known layout: a dim of size 1 at k, the others moved along
    ("{u} = torch.empty((len(x), 64)).unsqueeze(0)\nARG = {u}.shape[1]", VARYING),
    ("{u} = torch.empty((len(x), 64)).unsqueeze(0)\nARG = {u}.shape[0]", STABLE),
    ("{u} = torch.empty((64, len(x))).unsqueeze(-1)\nARG = {u}.shape[-2]", VARYING),
    ("{u} = torch.empty((64, len(x))).unsqueeze(1)\nARG = {u}.stride(0)", VARYING),
    ("{u} = torch.empty((len(x), 64)).unsqueeze(1)\nARG = {u}.stride(0)", STABLE),
    # torch.randint(low, high, size) / (high, size): the sizes are the tuple, not the value bounds
    ("{u} = torch.randint(-3, 3, (len(x), 64))\nARG = {u}.shape[0]", VARYING),
    ("{u} = torch.randint(3, (len(x), 64))\nARG = {u}.shape[0]", VARYING),
    ("{u} = torch.randint(0, len(x), (7, 64))\nARG = {u}.shape[1]", STABLE),
    ("{u} = torch.randint(-3, 3, (7, len(x)))\nARG = {u}.stride(0)", VARYING),
]


@pytest.mark.parametrize("body,expected", CASES)
def test_structural_provenance(body, expected):
    cls, _ = provenance(body, random.Random())
    assert cls == expected, body


def test_weight_shapes_are_stable():
    rng = random.Random()
    assert provenance("ARG = self.weight.shape[0]", rng, params="self, x")[0] == STABLE
    assert provenance("ARG = w13.shape[0]", rng, params="x, w13")[0] == STABLE


def test_wrapper_called_with_a_varying_value_in_the_same_module():
    rng = random.Random()
    wrapper, caller, n = rand_names(rng, "wrapper", "caller", "n").values()
    src = KERNEL + f"""
def {wrapper}(x, {n}):
    kern[(1,)](x, {n}, BLOCK=16)

def {caller}(y):
    {wrapper}(y, y.shape[0])
"""
    (launch,) = extract_file("m.py", src, "m").launches
    arg = launch.args[1]
    assert arg.provenance == VARYING
    assert any(caller in e for e in arg.evidence)


def test_wrapper_called_only_with_constants_is_stable():
    rng = random.Random()
    wrapper, n = rand_names(rng, "wrapper", "n").values()
    src = KERNEL + f"""
def {wrapper}(x, {n}):
    kern[(1,)](x, {n}, BLOCK=16)

def a(y):
    {wrapper}(y, 128)

def b(y):
    {wrapper}(y, n_const)

n_const = 256
"""
    (launch,) = extract_file("m.py", src, "m").launches
    assert launch.args[1].provenance == STABLE


def test_unknown_entry_parameter_stays_unknown_without_name_evidence():
    rng = random.Random()
    p = rand_ident(rng)
    src = KERNEL + f"\ndef go(x, {p}):\n    kern[(1,)](x, {p}, BLOCK=16)\n"
    (launch,) = extract_file("m.py", src, "m").launches
    assert launch.args[1].provenance == UNKNOWN


@pytest.mark.parametrize("name,expected", [("num_tokens", VARYING), ("batch_size", VARYING),
                                           ("hidden_size", STABLE), ("head_dim", STABLE),
                                           ("max_num_tokens", STABLE), ("seq_len", VARYING),
                                           ("max_spec_len", VARYING), ("max_model_len", STABLE),
                                           ("num_speculative_tokens", STABLE), ("max_bs", STABLE),
                                           ("bs", VARYING)])
def test_names_are_evidence_for_entry_parameters(name, expected):
    src = KERNEL + f"\ndef go(x, {name}):\n    kern[(1,)](x, {name}, BLOCK=16)\n"
    (launch,) = extract_file("m.py", src, "m").launches
    assert launch.args[1].provenance == expected
    assert launch.args[1].by_name


def test_config_names_extend_the_patterns():
    name = rand_ident(random.Random())
    src = KERNEL + f"\ndef go(x, {name}):\n    kern[(1,)](x, {name}, BLOCK=16)\n"
    (launch,) = extract_file("m.py", src, "m", varying_names=frozenset({name})).launches
    assert launch.args[1].provenance == VARYING
    (launch,) = extract_file("m.py", src, "m", stable_names=frozenset({name})).launches
    assert launch.args[1].provenance == STABLE


def test_multiples_of_16_are_one_value_class():
    rng = random.Random()
    for body in ("ARG = x.shape[0] * 64", "{u} = torch.empty((x.shape[0], 128))\nARG = {u}.stride(0)"):
        src_cls = provenance(body, rng)
        assert src_cls[0] in (VARYING, STABLE)
    src = KERNEL + "\ndef go(x):\n    kern[(1,)](x, x.shape[0] * 64, BLOCK=16)\n"
    (launch,) = extract_file("m.py", src, "m").launches
    assert launch.args[1].provenance == VARYING and launch.args[1].div16


def test_slices_of_persistent_buffers_and_per_token_weights_vary():
    rng = random.Random()
    # buf[:n] of a self buffer has n rows; router weights are per token
    assert provenance("{a} = self.buf[: x.shape[0]]\nARG = {a}.shape[0]", rng, params="self, x")[0] == VARYING
    assert provenance("ARG = topk_weights.shape[0]", rng, params="x, topk_weights")[0] == VARYING
    assert provenance("ARG = self.buf.shape[0]", rng, params="self, x")[0] == STABLE
    # a row of it sliced, buf[i, a:b]: the slice is the result's leading dim
    assert provenance("{a} = self.buf[i0, lo:hi]\nARG = {a}.shape[0]", rng, params="self, x, i0, lo, hi")[0] == VARYING
    # a row of it, whole: the trailing dims are the buffer's
    assert provenance("{a} = self.buf[i0]\nARG = {a}.shape[0]", rng, params="self, x, i0")[0] == STABLE
    # a buffer another object holds: allocated once, at its capacity; a live slice of it still varies
    for held in ("state.kv_score_buffer", "meta.out_buf", "ctx.workspace"):
        root = held.split(".")[0]
        assert provenance(f"ARG = {held}.shape[0]", rng, params=f"x, {root}")[0] == STABLE, held
        assert provenance(f"{{a}} = {held}[: x.shape[0]]\nARG = {{a}}.shape[0]", rng,
                          params=f"x, {root}")[0] == VARYING, held
    # an object named like a pool is no tensor: what its methods return is not its capacity
    assert provenance("ARG = state.kv_pool.shape[0]", rng, params="x, state")[0] == VARYING


def test_cache_capacities_are_fixed():
    rng = random.Random()
    assert provenance("num_cache_lines = conv_states.shape[0]\nARG = num_cache_lines", rng, params="x, conv_states")[0] == STABLE
    assert provenance("ARG = key_cache.shape[0]", rng, params="x, key_cache")[0] == STABLE
    # ...but the hidden states of the batch are activations
    assert provenance("ARG = hidden_states.shape[0]", rng, params="x, hidden_states")[0] == VARYING


def test_elements_of_a_tuple_returned_by_a_module_function():
    rng = random.Random()
    helper = rand_ident(rng, "h")
    src = KERNEL + f"""
def {helper}(x):
    return x.shape[-1], x.shape[0]

def go(x):
    a, b = {helper}(x)
    kern[(1,)](x, a, BLOCK=16)
    kern[(1,)](x, b, BLOCK=16)
"""
    first, second = extract_file("m.py", src, "m").launches
    assert first.args[1].provenance == STABLE
    assert second.args[1].provenance == VARYING


def _launch_args(src: str) -> list:
    return [la.args[1] for la in extract_file("m.py", src, "m").launches]


def test_a_helper_returns_per_call_what_that_call_passes():
    # the same helper, called with a model dim at one site and a token count at another: each call
    # takes the class of its own arguments, not the most varying over all calls
    rng = random.Random()
    helper, a, b, m, k, r, c = rand_names(rng, *"habmkrc").values()
    src = KERNEL + f"""
def {helper}({a}, {b}):
    return ({a} + {b} - 1) // {b}

def go(x):
    {m}, {k} = x.shape
    {r} = {helper}({m}, 128)
    {c} = {helper}({k} // 32, 4)
    kern[(1,)](x, {c}, BLOCK=16)
    kern[(1,)](x, {r}, BLOCK=16)
"""
    fixed, varying = _launch_args(src)
    assert fixed.provenance == STABLE, fixed.evidence
    assert varying.provenance == VARYING and "returns-per-call" in varying.rules


def test_a_tuple_returned_per_call_and_a_default_bound():
    rng = random.Random()
    helper, a, b, p, q = rand_names(rng, *"habpq").values()
    src = KERNEL + f"""
def {helper}({a}, {b}=64):
    return {a} * 2, {b}

def go(x):
    {p}, {q} = {helper}(x.shape[-1])
    kern[(1,)](x, {p}, BLOCK=16)
    kern[(1,)](x, {q}, BLOCK=16)

def other(x):
    {helper}(x.shape[0], x.shape[0])
"""
    first, second = _launch_args(src)
    assert first.provenance == STABLE and second.provenance == STABLE


def test_a_call_that_cannot_be_bound_keeps_the_summary_over_callers():
    # *args at the call: the parameters can't be bound, so the callers' most varying value decides
    rng = random.Random()
    helper, a, b = rand_names(rng, *"hab").values()
    src = KERNEL + f"""
def {helper}({a}, {b}):
    return ({a} + {b} - 1) // {b}

def go(x, *rest):
    kern[(1,)](x, {helper}(*rest), BLOCK=16)

def other(x):
    {helper}(x.shape[0], 4)
"""
    (arg,) = _launch_args(src)
    assert arg.provenance == VARYING and "returns-per-call" not in arg.rules


RECORDS = {
    "namedtuple": "from typing import NamedTuple\n\nclass {R}(NamedTuple):\n    {p}: int\n    {q}: int = 8\n",
    "dataclass": "from dataclasses import dataclass\n\n@dataclass(frozen=True)\nclass {R}:\n    {p}: int\n    {q}: int = 8\n",
    "attrs": "import attr\n\n@attr.s\nclass {R}:\n    {p} = attr.ib()\n    {q} = attr.ib(default=8)\n",
}


@pytest.mark.parametrize("kind", sorted(RECORDS))
def test_a_record_field_holds_what_its_constructor_passes(kind):
    # the field names and the object's name are random: the class body's order and the
    # constructor call decide, positionally, by keyword, or through the default
    rng = random.Random()
    R, p, q, o = rand_names(rng, *"Rpqo").values()
    R = R.capitalize()
    rec = RECORDS[kind].format(R=R, p=p, q=q)
    cases = [(f"{R}(x.shape[0], 64)", p, VARYING), (f"{R}(x.shape[0], 64)", q, STABLE),
             (f"{R}(64, x.shape[0])", q, VARYING), (f"{R}(64, x.shape[0])", p, STABLE),
             (f"{R}({q}=x.shape[0], {p}=64)", q, VARYING), (f"{R}(x.shape[0])", q, STABLE)]
    for ctor, fld, expected in cases:
        src = KERNEL + rec + f"\ndef go(x):\n    {o} = {ctor}\n    kern[(1,)](x, {o}.{fld}, BLOCK=16)\n"
        (arg,) = _launch_args(src)
        assert arg.provenance == expected, (kind, ctor, fld, arg.evidence)
        assert "record-field" in arg.rules, (ctor, fld)


def test_a_record_returned_by_a_helper_takes_that_call_s_arguments():
    rng = random.Random()
    R, p, q, o, mk, n = rand_names(rng, *"Rpqomn").values()
    R = R.capitalize()
    src = KERNEL + RECORDS["namedtuple"].format(R=R, p=p, q=q) + f"""
def {mk}({n}):
    return {R}({p}={n} * 2, {q}=4)

def go(x):
    {o} = {mk}(x.shape[-1])
    kern[(1,)](x, {o}.{p}, BLOCK=16)
    kern[(1,)](x, {mk}(x.shape[0]).{p}, BLOCK=16)

def other(x):
    return {mk}(x.numel())
"""
    fixed, varying = _launch_args(src)
    assert fixed.provenance == STABLE, fixed.evidence
    assert varying.provenance == VARYING and "record-field" in varying.rules


def test_a_parameter_annotated_with_a_record_takes_every_constructor_call():
    rng = random.Random()
    R, p, q, b = rand_names(rng, *"Rpqb").values()
    R = R.capitalize()
    rec = RECORDS["dataclass"].format(R=R, p=p, q=q)
    for value, expected in (("int(t.max().item())", VARYING), ("64", STABLE)):
        src = KERNEL + rec + f"""
def build(t):
    return {R}({value})

def run(x, {b}: "{R}"):
    kern[(1,)](x, {b}.{p}, BLOCK=16)
"""
        (arg,) = _launch_args(src)
        assert arg.provenance == expected and "record-field" in arg.rules, (value, arg.evidence)


def test_a_record_field_is_structural_evidence():
    # a field filled from data read off the device, reached through the record's constructor: every
    # step follows from the code, so the chain is high; the same attribute on an object whose
    # construction is not seen is left to the conventions
    rng = random.Random()
    R, p, q, o = rand_names(rng, *"Rpqo").values()
    R = R.capitalize()
    rec = RECORDS["namedtuple"].format(R=R, p=p, q=q)
    src = KERNEL + rec + f"\ndef go(x):\n    {o} = {R}(int(x.max().item()))\n    kern[(1,)](x, {o}.{p}, BLOCK=16)\n"
    (arg,) = _launch_args(src)
    assert arg.provenance == VARYING and confidence(arg.rules, arg.by_name) == "high", arg.rules
    unseen = KERNEL + rec + f"\ndef go(x, {o}):\n    kern[(1,)](x, {o}.{p}, BLOCK=16)\n"
    (arg,) = _launch_args(unseen)
    assert "record-field" not in arg.rules


def _wrapped(rng: random.Random, wrapper_body: str, caller_body: str) -> object:
    """The ``v`` argument of the launch in a wrapper ``W(x, ...)`` whose one caller is a method that
    hands it a tensor held by its object (``self.<attr>``), names all random."""
    names = rand_names(rng, "w", "a", "b", "c", "attr", "cls", "meth")
    text = KERNEL + "\ndef {w}(x, {a}):\n".format(**names) + "".join(
        f"    {line}\n" for line in wrapper_body.format(**names).splitlines()) + \
        "\nclass {cls}:\n    def {meth}(self, {b}, {c}):\n".format(**names) + "".join(
        f"        {line}\n" for line in caller_body.format(**names).splitlines())
    (launch,) = extract_file("m.py", text, "m").launches
    return launch.args[1]


def test_a_parameter_reassigned_from_itself_keeps_what_its_callers_pass():
    rng = random.Random()
    launch = "kern[(1,)](x, x.shape[0], BLOCK=16)"
    # if c: x = x.contiguous() on a tensor every caller takes from its object: the rows are fixed
    arg = _wrapped(rng, "if {a}:\n    x = x.contiguous()\n" + launch, "{w}(self.{attr}, {b})")
    assert arg.provenance == STABLE and "param-reassigned" in arg.rules and "local-caller" in arg.rules
    # a slice of it is not: x[:n] has n rows
    arg = _wrapped(rng, "if {a}:\n    x = x[:{a}]\n" + launch, "{w}(self.{attr}, {b})")
    assert arg.provenance == VARYING
    # the caller passes a tensor nothing is known of: the guess stands
    arg = _wrapped(rng, "if {a}:\n    x = x.contiguous()\n" + launch, "{w}({c}, {b})")
    assert arg.provenance == VARYING


def test_a_parameter_reassigned_from_itself_says_so_once_in_each_read():
    rng = random.Random()
    names = rand_names(rng, "w", "a", "b", "c", "f")
    # x.shape[0] and then x.shape[1] of a parameter whose one reassignment is weight-like (a
    # `.weight` of it), its caller's tensor unknown: each read tells the reassignment once
    text = KERNEL + "\ndef {w}(x, {a}):\n    if {a}:\n        x = x.weight\n".format(**names) + \
        "".join(f"    kern[(1,)](x, x.shape[{i}], BLOCK=16)\n" for i in range(3)) + \
        "\ndef {f}({b}, {c}):\n    {w}({b}, {c})\n".format(**names)
    launches = extract_file("m.py", text, "m").launches
    assert len(launches) == 3
    for launch in launches:
        arg = launch.args[1]
        assert arg.provenance == STABLE and "param-reassigned" in arg.rules
        assert sum(e.count("reassigned only from itself") for e in arg.evidence) == 1, arg.evidence


def test_a_recursive_call_is_no_evidence_of_what_a_parameter_holds():
    rng = random.Random()
    body = "if {a}:\n    return {w}(x.t(), None)\nkern[(1,)](x, x.shape[0], BLOCK=16)"
    arg = _wrapped(rng, body, "{w}(self.{attr}, {b})")
    assert arg.provenance == STABLE and "recursive-caller" in arg.rules
    arg = _wrapped(rng, body, "{w}({c}, {b})")
    assert arg.provenance == VARYING


def test_a_conditional_view_of_a_held_tensor_is_that_tensor():
    rng = random.Random()
    launch = "kern[(1,)](x, x.shape[0], BLOCK=16)"
    arg = _wrapped(rng, launch, "{a} = self.{attr}.view(torch.uint8) if {b} else self.{attr}\n{w}({a}, {b})")
    assert arg.provenance == STABLE
    # one branch a tensor nothing is known of: either may be passed
    arg = _wrapped(rng, launch, "{a} = self.{attr} if {b} else {c}\n{w}({a}, {b})")
    assert arg.provenance == VARYING
    # a layout known in both branches: each dim the most varying
    arg = _wrapped(rng, launch, "{a} = torch.empty(({c}.shape[0], 8)) if {b} else torch.empty((4, 8))\n{w}({a}, {b})")
    assert arg.provenance == VARYING and "conditional-tensor" in arg.rules


def test_the_shape_of_an_object_holding_tensors_is_the_one_it_records():
    rng = random.Random()
    # q.<attr>.stride(0): q holds a tensor, so q is no tensor; q.shape is the shape it records
    body = "{a}, {b} = x.shape\n{c} = x.{t}.stride(0)\nARG = {a}"
    assert provenance(body, rng, params="x") == (STABLE, "int")
    # what a tensor itself hands out (x.grad, x.T) leaves x a tensor: the leading-dim guess stands
    assert provenance("{a}, {b} = x.shape\n{c} = x.grad.stride(0)\nARG = {a}", rng)[0] == VARYING
    assert provenance("{a}, {b} = x.shape\n{c} = x.T.contiguous()\nARG = {a}", rng)[0] == VARYING
    assert provenance("{a}, {b} = x.shape\nARG = {a}", rng)[0] == VARYING


@pytest.mark.parametrize("module, imports", [("random", "import random"), ("np.random", "import numpy as np"),
                                             ("secrets", "import secrets")])
def test_a_draw_of_the_host_random_generator_varies_per_call(module, imports):
    rng = random.Random()
    fn, obj = rand_names(rng, "fn", "obj").values()
    draw = "randbits(31)" if module == "secrets" else "randint(0, 1 << 20)" if module == "np.random" else "getrandbits(31)"
    src = imports + "\n" + KERNEL + f"\ndef {fn}(x, {obj}):\n    kern[(1,)](x, {module}.{draw}, BLOCK=16)\n" \
        f"    kern[(1,)](x, {obj}.{draw}, BLOCK=16)\n"
    facts = extract_file("m.py", src, "m")
    by_module, by_object = [next(a for a in la.args if a.position == 1) for la in facts.launches]
    assert by_module.provenance == VARYING and by_module.value_type == "int" and by_module.rules == ["host-random"]
    # the same method of an object passed in (a generator seeded once, or anything else) is not the module's
    assert by_object.provenance == UNKNOWN


def test_a_float_draw_of_the_host_random_generator_is_a_float():
    rng = random.Random()
    fn = rand_ident(rng, "f")
    src = "import random\n" + KERNEL + f"\ndef {fn}(x):\n    kern[(1,)](x, random.random(), BLOCK=16)\n"
    (launch,) = extract_file("m.py", src, "m").launches
    arg = next(a for a in launch.args if a.position == 1)
    assert (arg.provenance, arg.value_type) == (VARYING, "float")


@pytest.mark.parametrize("open_, close", [("(", ")"), ("[", "]")])
def test_a_comprehension_over_a_written_tuple_unpacks_element_by_element(open_, close):
    rng = random.Random()
    # element 0 is the leading dim (varies), element 1 a trailing one (fixed for the model)
    comp = f"{open_}{{d}} // 2 for {{d}} in {{t}}{close}"
    body = "{a}, {b} = x.shape\n{t} = ({a}, {b})\n{c}, {u} = " + comp + "\nARG = {c}"
    assert provenance(body, rng)[0] == VARYING
    body = "{a}, {b} = x.shape\n{t} = ({a}, {b})\n{c}, {u} = " + comp + "\nARG = {u}"
    assert provenance(body, rng)[0] == STABLE
    # the names rebound by the unpack itself read their earlier values
    body = "{a}, {b} = x.shape\n{t} = ({a}, {b})\n{a}, {b} = " + comp + "\nARG = {a}"
    assert provenance(body, rng)[0] == VARYING
    # a filter, or a sequence not written here: nothing is known of element i (not the leading dim)
    body = "{a}, {b} = x.shape\n{t} = ({a}, {b})\n{c}, {u} = " + f"{open_}{{d}} for {{d}} in {{t}} if {{d}}{close}" \
        + "\nARG = {c}"
    assert provenance(body, rng)[0] != VARYING
    body = "{a}, {b} = x.shape\n{c}, {u} = " + f"{open_}{{d}} // 2 for {{d}} in y{close}" + "\nARG = {c}"
    assert provenance(body, rng, params="x, y")[0] != VARYING


# resized-dim: a non-leading dim the code resizes like another dim of the same tensor (a spatial dim
# of a feature map or image) varies; a model dim resized alone, rounded, or by a literal stays fixed
RESIZED = [
    ("{a}, {b}, {c}, {d} = x.shape\n{t}, {u} = {c} + 2 * {p}, {d} + 2 * {q}\nARG = {c}", VARYING),
    ("{a}, {b}, {c}, {d} = x.shape\n{t} = torch.empty(({a}, {b}, 2 * {c}, 2 * {d}))\nARG = {d}", VARYING),
    ("{a}, {b}, {c}, {d} = x.shape\n{t} = ({c} * {p}, {d} * {p})\nARG = {c}", VARYING),
    ("{c}, {d} = x.shape[-2:]\n{t} = torch.empty(({c} + {p}, {d} + {q}))\nARG = {d}", VARYING),
    ("{t} = torch.empty((x.shape[0], x.shape[1] * {p}, x.shape[2] * {p}))\nARG = x.shape[2]", VARYING),
    ("{a}, {b}, {c}, {d} = x.shape\n{t} = torch.empty(({a}, {b} + {p}, {c} + 2 * {q}))\nARG = {b}", VARYING),
    # one dim padded: a model dim brought to a multiple, not a picture
    ("{a}, {b}, {c}, {d} = x.shape\n{t} = {c} + {p}\nARG = {c}", STABLE),
    # rounded up to blocks: (n + bn - 1) // bn on two model dims
    ("{a}, {b}, {c} = x.shape\n{t}, {u} = ({b} + {p} - 1) // {p}, ({c} + {q} - 1) // {q}\nARG = {c}", STABLE),
    # a literal offset is an index, not a pad
    ("{a}, {b}, {c} = x.shape\n{t}, {u} = {b} - 1, {c} - 1\nARG = {c}", STABLE),
    # different factors, and products with another dim (rows times heads), are no resize
    ("{a}, {b}, {c} = x.shape\n{t}, {u} = {b} * {p}, {c} * {q}\nARG = {c}", STABLE),
    ("{a}, {b}, {c} = x.shape\n{t}, {u} = {a} * {b}, {a} * {c}\nARG = {c}", STABLE),
    ("{a}, {b}, {c} = x.shape\n{t}, {u} = {b} * 1, {c} * 1\nARG = {c}", STABLE),
]


@pytest.mark.parametrize("body,expected", RESIZED)
def test_resized_dims(body, expected):
    arg = launch_arg(body, random.Random(), params="x, {p}, {q}", keys="abcdtupq")
    assert arg.provenance == expected, body
    assert ("resized-dim" in arg.rules) == (expected == VARYING), (body, arg.rules)
    if expected == VARYING:  # what sizes reach the map is configuration: never above low
        assert confidence(arg.rules, arg.by_name) == "low", arg.rules


# a loop over what a helper of the module returns, the helper returning a one-element literal on
# some paths (a fast path: the loop runs once with that element) or on all of them
FAST_PATH_HELPER = """
def {h}({n}, {s}):
    if {n} <= 0:
        return [(0, 0)]
    if {s} >= {n}:
        return [(0, {n})]
    return [({b}, min({n}, {b} + {s})) for {b} in range(0, {n}, {s})]
"""
LOOPS = {
    "call": "    for {p}, {q} in {h}(x.shape[0], {s}):\n        kern[(1,)](x, ARG, BLOCK=16)\n",
    "local": "    {w} = {h}(x.shape[0], {s})\n    for {p}, {q} in {w}:\n        kern[(1,)](x, ARG, BLOCK=16)\n",
}


def _loop_arg(helper: str, loop: str, arg: str, rng: random.Random, method: bool = False):
    names = rand_names(rng, "h", "n", "s", "b", "p", "q", "w", "f", "C")
    if method:  # the helper and the launcher are methods of one class: `self.h(...)`
        indent = lambda text: "".join(f"    {line}\n" if line else "\n" for line in text.splitlines())
        helper = helper.replace("def {h}(", "def {h}(self, ")
        loop = loop.replace("{h}(", "self.{h}(")
        src = "class {C}:\n" + indent(helper) + "\n    def {f}(self, x, {s}):\n" + indent(loop)
    else:
        src = helper + "\ndef {f}(x, {s}):\n" + loop
    src = KERNEL + src.replace("ARG", arg).format(**names)
    (launch,) = [la for la in extract_file("m.py", src, "m").launches if la.callee == "kern"]
    return next(a for a in launch.args if a.position == 1)


@pytest.mark.parametrize("loop", sorted(LOOPS))
@pytest.mark.parametrize("method", [False, True])
def test_a_loop_over_a_helper_with_a_one_element_fast_path_is_low(loop, method):
    rng = random.Random()
    # fixed (0) on the fast paths, a loop counter only on the comprehension's: never above low
    arg = _loop_arg(FAST_PATH_HELPER, LOOPS[loop], "{p}", rng, method)
    assert arg.provenance == VARYING and arg.rules[0] == "single-pass-return", (arg.rules, arg.evidence)
    assert confidence(arg.rules, arg.by_name) == "low"
    # the other component is the varying count on the fast path too: still a loop counter, high
    arg = _loop_arg(FAST_PATH_HELPER, LOOPS[loop], "{q}", rng, method)
    assert arg.provenance == VARYING and "single-pass-return" not in arg.rules, arg.rules
    assert confidence(arg.rules, arg.by_name) == "high"
    # a fast path whose element varies (`[(n, 0)]`) leaves the loop counter
    helper = FAST_PATH_HELPER.replace("return [(0, {n})]", "return [({n}, 0)]")
    arg = _loop_arg(helper, LOOPS[loop], "{p}", rng, method)
    assert arg.provenance == VARYING and confidence(arg.rules, arg.by_name) == "high", arg.rules


ALWAYS_ONE = """
def {h}({n}, {s}):
    if {s} > 0:
        return [(0, {n})]
    return ((0, {n} * 2),)
"""


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_loop_over_a_helper_that_always_returns_one_element_takes_that_element(loop):
    rng = random.Random()
    arg = _loop_arg(ALWAYS_ONE, LOOPS[loop], "{p}", rng)
    assert arg.provenance == STABLE and "single-element-return" in arg.rules, (arg.rules, arg.evidence)
    # the element's other component is the call's leading dim: varying through it, not as a counter
    arg = _loop_arg(ALWAYS_ONE, LOOPS[loop], "{q}", rng)
    assert arg.provenance == VARYING and "single-element-return" in arg.rules and "loop-counter" not in arg.rules
    # the same helper called with a fixed size: fixed
    arg = _loop_arg(ALWAYS_ONE, LOOPS[loop].replace("x.shape[0]", "x.shape[1]"), "{q}", rng)
    assert arg.provenance == STABLE, (arg.rules, arg.evidence)


NO_FAST_PATH = {
    "comprehension": "\ndef {h}({n}, {s}):\n    return [({b}, min({n}, {b} + {s})) for {b} in range(0, {n}, {s})]\n",
    # an empty list and a literal of two windows are no single pass
    "several": FAST_PATH_HELPER.replace("return [(0, 0)]", "return []").replace(
        "return [(0, {n})]", "return [(0, {n}), ({n}, {n})]"),
    # a generator: the loop runs over what it yields, whatever a `return` hands to StopIteration
    "generator": FAST_PATH_HELPER.replace(
        "return [({b}, min({n}, {b} + {s})) for {b} in range(0, {n}, {s})]",
        "for {b} in range(0, {n}, {s}):\n        yield {b}, min({n}, {b} + {s})"),
}


@pytest.mark.parametrize("helper", sorted(NO_FAST_PATH))
@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_loop_over_a_helper_without_a_fast_path_is_a_loop_counter(helper, loop):
    arg = _loop_arg(NO_FAST_PATH[helper], LOOPS[loop], "{p}", random.Random())
    assert arg.provenance == VARYING and list(arg.rules) == ["loop-counter"], arg.rules
    assert confidence(arg.rules, arg.by_name) == "high"


def _own(rules: list[str]) -> list[str]:
    """The rules of a value less the `ARG = ...` assignment that hands it to the launch."""
    return [r for r in rules if r != "assignment"]


# batch-first-3d: `B, T, C = x.shape` with the leading target named a batch puts the sequence second;
# the other names random, so that only the place and the batch name decide
@pytest.mark.parametrize("batch", ["B", "bs", "batch", "batch_size"])
def test_the_second_dim_of_a_batch_first_3d_unpacking_is_the_sequence(batch):
    rng = random.Random()
    body = batch + ", {b}, {c} = x.shape\nARG = {b}"
    arg = launch_arg(body, rng)
    assert (arg.provenance, _own(arg.rules)) == (VARYING, ["batch-first-3d"])
    assert confidence(arg.rules, arg.by_name) == "medium"  # a convention, like the leading-dim guess
    # the last dim is the model dim it was
    assert launch_arg(batch + ", {b}, {c} = x.shape\nARG = {c}", rng).provenance == STABLE


@pytest.mark.parametrize("body", [
    "{a}, {b}, {c} = x.shape\nARG = {b}",            # the leading target not named a batch
    "num_tokens, {b}, {c} = x.shape\nARG = {b}",      # tokens-first [T, H, D]: the second is heads
    "max_batch_size, {b}, {c} = x.shape\nARG = {b}",  # a configured maximum: a persistent buffer
    "B, H, {c} = x.shape\nARG = H",                   # the second named a model dim
    "B, num_heads, {c} = x.shape\nARG = num_heads",
    "B, Hq, {c} = x.shape\nARG = Hq",                 # a model dim's letter in mixed case
    "bs, n_heads, {c} = x.shape\nARG = n_heads",
    "B, {b}, {c}, {d} = x.shape\nARG = {b}",          # 4-d: sequence-dim's, which wants the name to agree
    "B, {b} = x.shape\nARG = {b}",                    # 2-d [B, C]
])
def test_no_batch_first_sequence_where_the_place_or_names_do_not_say_so(body):
    arg = launch_arg(body, random.Random())
    assert arg.provenance == STABLE and "batch-first-3d" not in arg.rules, (body, arg.rules)


# stride-over-varying: a stride over a dim the code shows varies varies with it
STRIDES = [
    # [B, L, C]: stride 0 = L * C, a count times a model dim (count-times-dim, never above low)
    ("B, {b}, {c} = x.shape\nARG = x.stride(0)", ["stride-over-varying", "count-times-dim", "batch-first-3d"]),
    # stride 1 = C: nothing after it varies
    ("B, {b}, {c} = x.shape\nARG = x.stride(1)", None),
    ("B, {b}, {c} = x.shape\nARG = x.stride(-1)", None),
    # a 5-d feature map whose spatial dims are padded alike: stride 2 = H * W varies (resized-dim, low)
    ("{a}, {b}, {c}, {d}, {t} = x.shape\n{u} = torch.empty(({c} + {p}, {d} + 2 * {p}, {t} + 2 * {p}))\n"
     "ARG = x.stride(2)", ["stride-over-varying", "resized-dim"]),
    ("{a}, {b}, {c}, {d}, {t} = x.shape\n{u} = torch.empty(({d} * {p}, {t} * {p}))\n"
     "{q}, {q}, {q}, {q}, {q} = x.stride()\nARG = x.stride(3)", ["stride-over-varying", "resized-dim"]),
    # resized dims read without an unpacking
    ("{u} = torch.empty((x.shape[2] * {p}, x.shape[3] * {p}))\nARG = x.stride(1)", ["stride-over-varying", "resized-dim"]),
    # the innermost resized dim has stride 1 after it: the stride over nothing varying stays fixed
    ("{a}, {b}, {c}, {d} = x.shape\n{u} = torch.empty(({c} * {p}, {d} * {p}))\nARG = x.stride(3)", None),
    # model dims only after it: the existing-stride convention stands
    ("{a}, {b}, {c}, {d} = x.shape\nARG = x.stride(0)", None),
]


@pytest.mark.parametrize("body,rules", STRIDES)
def test_a_stride_over_a_dim_the_code_shows_varies(body, rules):
    arg = launch_arg(body, random.Random(), params="x, {p}", keys="abcdtupq")
    if rules is None:
        assert (arg.provenance, _own(arg.rules)) == (STABLE, ["existing-stride"]), (body, arg.rules)
        return
    assert arg.provenance == VARYING and _own(arg.rules) == rules, (body, arg.rules)
    assert confidence(arg.rules, arg.by_name) == "low"  # the dims it rests on are never above low here


# count-ratio: a quotient of two per-call counts that rest on conventions divides the batch back out
@pytest.mark.parametrize("body", [
    "{a} = x.shape[0]\n{b} = {u}.shape[0]\nARG = {a} // {b}",   # two leading-dim guesses
    "{a} = x.shape[0]\nARG = {a} // len({u})",                   # a guess over a collection's length
    "{a} = x.numel() // x.shape[-1]\n{b} = {u}.shape[0]\nARG = int({a} / {b})",  # rows over a count, true division
    "{a} = x.shape[0]\nARG = {a} // {u}.{b}.shape[0]",           # a tensor an object holds, another source
])
def test_a_quotient_of_two_counts_resting_on_conventions_is_never_above_low(body):
    arg = launch_arg(body, random.Random(), params="x, {u}")
    assert arg.provenance == VARYING and "count-ratio" in arg.rules, arg.rules
    assert confidence(arg.rules, arg.by_name) == "low"


@pytest.mark.parametrize("body, level", [
    ("{a} = x.shape[0]\nARG = {a} // 16", "medium"),                       # a count over a literal: a count
    ("{a} = x.shape[0]\nARG = {a} // {u}.shape[-1]", "medium"),            # over a model dim
    ("{a} = x.shape[0]\n{b} = int({u}.max().item())\nARG = {a} // {b}", "medium"),  # a device value on one side
    ("{a} = int(x.sum().item())\n{b} = int({u}.max().item())\nARG = {a} // {b}", "high"),
    ("{a} = x.shape[0]\n{b} = {u}.shape[0]\nARG = {a} * {b}", "medium"),   # a product is not a quotient
])
def test_a_quotient_keeps_its_level_where_a_side_is_not_a_conventional_count(body, level):
    arg = launch_arg(body, random.Random(), params="x, {u}")
    assert arg.provenance == VARYING and "count-ratio" not in arg.rules, arg.rules
    assert confidence(arg.rules, arg.by_name) == level


@pytest.mark.parametrize("body", [
    # a split of a count into at most a fixed number of programs: rows per program varies with it
    "{a} = x.shape[0]\n{b} = max(1, min({a}, 132))\nARG = ({a} + {b} - 1) // {b}",
    # the rows of a flattened view over the leading dim of the same tensor: not two counts
    "{a} = x.reshape(-1, x.shape[-1]).shape[0]\nARG = {a} // x.shape[0]",
    # a parameter reassigned from itself is still that parameter
    "x = x.contiguous()\n{a} = x.reshape(-1, x.shape[-1]).shape[0]\nARG = {a} // x.shape[0]",
    # the same field on both sides
    "{a} = {u}.{b}.shape[0] * x.shape[-1]\nARG = {a} // {u}.{b}.size(0)",
])
def test_a_quotient_of_counts_sharing_a_source_is_no_count_ratio(body):
    arg = launch_arg(body, random.Random(), params="x, {u}")
    assert "count-ratio" not in arg.rules, arg.rules


# pow2-floor: max(p, 16) with p always a power of two by its code is a multiple of 16
_GIVEN_OR_PICKED = ("if {a} is None:\n    {a} = triton.next_power_of_2(min(x.shape[1], 64))\n"
                    "else:\n    {a} = triton.next_power_of_2({a})\n{a} = max({a}, 16)\n")


@pytest.mark.parametrize("body", [
    "{a} = max(triton.next_power_of_2(x.shape[1]), 16)\nARG = x.shape[0] * {a}",
    "{a} = max(1 << x.shape[1].bit_length(), 32)\nARG = x.shape[0] * {a}",
    _GIVEN_OR_PICKED + "ARG = x.shape[0] * {a}",
    # a stride over a varying dim times the floored tile: still a multiple of 16
    _GIVEN_OR_PICKED + "{u} = torch.empty((x.shape[0], x.shape[0] + 1, 3 * {a}))\nARG = {u}.stride(0)",
])
def test_a_power_of_two_floored_at_16_keeps_a_product_in_one_value_class(body):
    arg = launch_arg(body, random.Random(), params="x, {a}=None")
    assert arg.provenance == VARYING and arg.div16, (arg.rules, arg.evidence)


@pytest.mark.parametrize("body", [
    "{a} = max(x.shape[1], 16)\nARG = x.shape[0] * {a}",                             # not a power of two
    "{a} = max(triton.next_power_of_2(x.shape[1]), 8)\nARG = x.shape[0] * {a}",       # floored below 16
    "{a} = max({a}, 16)\nARG = x.shape[0] * {a}",                                     # the caller's value
    "if {a} is None:\n    {a} = triton.next_power_of_2(x.shape[1])\n{a} = max({a}, 16)\n"
    "ARG = x.shape[0] * {a}",                                                         # given: not replaced
    "{a} = triton.next_power_of_2(x.shape[1])\n{b} = {a} * 3\n{a} = max({a}, 16)\n"
    "ARG = x.shape[0] * {a}",                                                         # read before the floor
])
def test_no_power_of_two_floor_where_the_code_does_not_show_one(body):
    arg = launch_arg(body, random.Random(), params="x, {a}=None")
    assert arg.provenance == VARYING and not arg.div16, (arg.rules, arg.evidence)


def _read_before_assign(launch_line: str, after: str) -> str:
    """The class of ``v`` at a launch in a function whose parameter ``n`` a caller in the module
    passes ``len(y)`` and the body assigns 64 after ``launch_line``."""
    rng = random.Random()
    fn, caller, n, g = rand_names(rng, "fn", "caller", "n", "g").values()
    src = KERNEL + f"""
def {fn}(x, {n}):
{launch_line.format(n=n, g=g)}
    {n} = 64
{after.format(n=n, g=g)}
    return {n}

def {caller}(x, y):
    return {fn}(x, len(y))
"""
    (launch,) = [la for la in extract_file("m.py", src, "m").launches if la.callee == "kern"]
    return launch.args[1].provenance


def test_a_parameter_read_before_the_body_assigns_it_is_what_callers_pass():
    # rule read-before-assign: the launch runs before `n = 64`, so it sees len(y)
    assert _read_before_assign("    kern[(1,)](x, {n}, BLOCK=16)", "") == VARYING
    # in its own right-hand side too: `c, n = f(n), 64`
    assert _read_before_assign("    {g}, {n} = kern[(1,)](x, {n}, BLOCK=16), {n}", "") == VARYING


def test_a_read_in_a_lambda_written_before_the_assignment_runs_after_it():
    # the lambda runs at `g()`, after `n = 64`: the read sees 64, not the caller's value
    assert _read_before_assign("    {g} = lambda: kern[(1,)](x, {n}, BLOCK=16)", "    {g}()") == STABLE
