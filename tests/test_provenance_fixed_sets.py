"""Loops over a few values fixed for the process and values computed once at import
(docs/provenance.md: `retry-candidates`, `held-collection-loop`, `fixed-loop`, `import-time`), on
random identifiers so that only the code's structure decides."""
from __future__ import annotations

import random

from jitguard.config import Config
from jitguard.static.runner import scan_paths

from tests._static_util import MASKED_KERNEL, rand_names

KERNEL = "\nimport torch" + MASKED_KERNEL


def findings(tmp_path, body: str, messages: bool = False) -> dict[str, tuple[str, tuple[str, ...]]]:
    """{"n" | "BLOCK": (confidence, rules)} of the JG001/JG002 findings (every level) of KERNEL plus
    ``body``, whose placeholders {k} (the kernel), {n} (its int parameter) and {a}..{h} are random
    identifiers; with ``messages``, {"n" | "BLOCK": message}."""
    rng = random.Random()
    names = rand_names(rng, *"knabcdefgh")
    src = (KERNEL + body).format(**names)
    (tmp_path / "m.py").write_text(src)
    result = scan_paths([str(tmp_path)], Config(select=("JG",), root=str(tmp_path), confidence="low"),
                        jobs=1, use_cache=False)
    role = {names["n"]: "n", "BLOCK": "BLOCK"}
    return {role[f.param]: f.message if messages else (f.confidence, tuple(f.details["rules"]))
            for f in result.findings if f.code in ("JG001", "JG002")}


# ---- retry-candidates -----------------------------------------------------------------------------
RETRY = """
def {a}({b}):
    return [({b}, 3), ({b} // 2, 2), (16, 1)]

def {c}(x, {b}):
    for {d}, {e} in {a}({b}):
        try:
            {k}[(1,)](x, {d}, BLOCK={d}, num_stages={e})
        except RuntimeError:
            continue
        {exit}
"""


def test_a_loop_that_stops_at_the_first_candidate_that_works_takes_a_few_variants(tmp_path):
    got = findings(tmp_path, RETRY.replace("{exit}", "break"))
    assert got["BLOCK"] == ("low", ("retry-candidates",)) and got["n"][0] == "low"
    assert findings(tmp_path, RETRY.replace("{exit}", "return x"))["BLOCK"] == ("low", ("retry-candidates",))
    # without the exit every candidate is launched, one after the other: a loop counter
    assert findings(tmp_path, RETRY.replace("{exit}", "pass"))["BLOCK"] == ("high", ("loop-counter",))
    # reported as a few variants for warm-up to cover, not as a value that varies per call
    said = findings(tmp_path, RETRY.replace("{exit}", "break"), messages=True)
    assert "takes the same few values each call" in said["BLOCK"] and "varies per call" not in said["BLOCK"]
    assert "warm them up" in said["BLOCK"] and "takes the same few values each call" in said["n"]


def test_the_exit_may_sit_in_the_try_body_or_its_else(tmp_path):
    body = """
def {c}(x, {b}):
    for {d} in {a}({b}):
        try:
            {k}[(1,)](x, 7, BLOCK={d})
            {exit_in_body}
        except (RuntimeError, ValueError):
            pass
        {tail}

def {a}({b}):
    return [{b}, {b} // 2]
"""
    in_body = body.replace("{exit_in_body}", "break").replace("{tail}", "")
    in_else = body.replace("{exit_in_body}", "pass").replace("{tail}", "else:\n            break")
    assert findings(tmp_path, in_body)["BLOCK"] == ("low", ("retry-candidates",))
    assert findings(tmp_path, in_else)["BLOCK"] == ("low", ("retry-candidates",))
    # an else that does not leave the loop: every candidate that works is launched
    no_exit = body.replace("{exit_in_body}", "pass").replace("{tail}", "else:\n            pass")
    assert findings(tmp_path, no_exit)["BLOCK"] == ("high", ("loop-counter",))


def test_a_retry_over_per_call_values_still_varies(tmp_path):
    # the candidates themselves read off the device: the first that works changes with the data
    got = findings(tmp_path, """
def {c}(x, {b}):
    for {d} in {b}.tolist():
        try:
            {k}[(1,)](x, {d}, BLOCK=16)
        except RuntimeError:
            continue
        break
""")
    assert got["n"] == ("high", ("loop-counter",))


def test_a_try_that_does_not_read_the_loop_variable_is_no_attempt_of_it(tmp_path):
    got = findings(tmp_path, """
def {c}(x, {b}):
    for {d} in range(int({b}.max())):
        try:
            x.foo()
        except RuntimeError:
            continue
        {k}[(1,)](x, {d}, BLOCK=16)
        break
""")
    assert got["n"] == ("high", ("loop-counter",))


# ---- held-collection-loop --------------------------------------------------------------------------
HELD_ON_AN_OBJECT = """
class {h}:
    pass

def {a}(x, {b}):
    {e} = {h}()
    {e}.{g} = {value}
    {c}(x, {e})

def {c}(x, {e}):
    for {d} in {e}.{g}:
        {k}[(1,)](x, {d}, BLOCK={d})
"""


def test_a_loop_over_an_attribute_collection_takes_a_few_variants(tmp_path):
    # another object's attribute that this module fills with fixed values only
    got = findings(tmp_path, HELD_ON_AN_OBJECT.replace("{value}", "(16, 32)"))
    assert got["BLOCK"] == ("low", ("held-collection-loop",)) and got["n"] == ("low", ("held-collection-loop",))
    # the object's own collections, and a range over its attributes
    got = findings(tmp_path, """
class {h}:
    def {c}(self, x):
        for {d}, {e} in enumerate(self.{g}):
            {k}[(1,)](x, {e}, BLOCK={e})
        for {d} in range(self.{f}):
            {k}[(1,)](x, {d}, BLOCK=16)
""")
    assert got["BLOCK"] == ("low", ("held-collection-loop",)) and got["n"] == ("low", ("held-collection-loop",))


def test_an_attribute_this_module_fills_per_call_or_never_stays_per_call(tmp_path):
    got = findings(tmp_path, HELD_ON_AN_OBJECT.replace("{value}", "{b}.tolist()"))
    assert got["n"][0] == "high" and "loop-counter" in got["n"][1]
    # an attribute nothing in this module fills: a per-call object's as likely as a model's
    got = findings(tmp_path, """
def {c}(x, {e}):
    for {d} in {e}.{g}:
        {k}[(1,)](x, {d}, BLOCK=16)
""")
    assert got["n"] == ("high", ("loop-counter",))


def test_an_attribute_of_a_per_call_loop_variable_is_per_call(tmp_path):
    # the module fills `.g` with a fixed tuple somewhere, but the object here is one of a per-call list
    got = findings(tmp_path, """
class {h}:
    pass

def {a}():
    {f} = {h}()
    {f}.{g} = (16, 32)
    return {f}

def {c}(x, {b}):
    for {e} in {b}:
        for {d} in {e}.{g}:
            {k}[(1,)](x, {d}, BLOCK=16)
""")
    assert got["n"] == ("high", ("loop-counter",))


def test_a_range_over_a_tensor_dim_or_a_per_call_bound_stays_a_counter(tmp_path):
    for bound in ("x.shape[1]", "int({b}.max())", "{b}.{g}.shape[0]"):
        got = findings(tmp_path, f"""
def {{c}}(x, {{b}}):
    for {{d}} in range({bound}):
        {{k}}[(1,)](x, {{d}}, BLOCK=16)
""")
        assert got["n"][0] in ("high", "medium") and "loop-counter" in got["n"][1], (bound, got)


def test_a_range_of_ints_written_in_the_code(tmp_path):
    body = """
{e} = {count}

def {c}(x):
    for {d} in range(1, {e}):
        {k}[(1,)](x, {d}, BLOCK=16)
"""
    # a handful of values written in the code: a literal tuple (fixed-loop), nothing to report
    assert findings(tmp_path, body.replace("{count}", "5")) == {}
    # past 16 values: still fixed for the process, a few variants reported low
    assert findings(tmp_path, body.replace("{count}", "200"))["n"] == ("low", ("held-collection-loop",))


def test_a_module_level_collection_is_held_unless_mutated(tmp_path):
    body = """
{e} = sorted(set(triton.cdiv({count}, s) for s in (1, 2, 4)))

def {c}(x):
    for {d} in {e}:
        {k}[(1,)](x, {d}, BLOCK={d})

def {a}({b}):
    {mutate}
"""
    got = findings(tmp_path, body.replace("{count}", "4096").replace("{mutate}", "pass"))
    assert got["BLOCK"] == ("low", ("held-collection-loop",))
    got = findings(tmp_path, body.replace("{count}", "4096").replace("{mutate}", "{e}.append(int({b}.sum()))"))
    assert got["BLOCK"] == ("high", ("loop-counter",))
    # a local of the same name, mutated, is another list
    got = findings(tmp_path, body.replace("{count}", "4096").replace(
        "{mutate}", "{e} = []\n    {e}.append(int({b}.sum()))\n    return {e}"))
    assert got["BLOCK"] == ("low", ("held-collection-loop",))


def test_a_module_level_literal_list_mutated_in_place_is_no_fixed_set(tmp_path):
    body = """
{e} = [16, 32]

def {c}(x):
    for {d} in {e}:
        {k}[(1,)](x, {d}, BLOCK={d})

def {a}({b}):
    {mutate}
"""
    assert findings(tmp_path, body.replace("{mutate}", "pass")) == {}
    got = findings(tmp_path, body.replace("{mutate}", "{e}[0] = int({b}.sum())"))
    assert got["BLOCK"] == ("high", ("loop-counter",))
    # filled at import: fixed for the process, though not the literal alone
    filled = body.replace("{mutate}", "pass") + "\nfor {f} in (64, 128):\n    {e}.append({f} * 3)\n"
    assert findings(tmp_path, filled)["BLOCK"] == ("low", ("held-collection-loop",))


# ---- import-time -----------------------------------------------------------------------------------
IMPORT_TIME = """
{e} = (torch.ones(()) / 448.0).item()
{f} = int(torch.randint(0, 64, (1,)).item())

def {c}(x):
    {k}[(1,)](x, {e}, BLOCK={f})

def {a}({b}):
    {rebind}
"""


def test_a_module_level_value_computed_at_import_is_fixed_for_the_process(tmp_path):
    assert findings(tmp_path, IMPORT_TIME.replace("{rebind}", "pass")) == {}


def test_a_module_level_value_rebound_by_global_follows_its_right_hand_side(tmp_path):
    got = findings(tmp_path, IMPORT_TIME.replace("{rebind}", "global {e}, {f}\n    {e} = {b}\n    {f} = {b}"))
    assert got["n"][0] == "high" and "device-data" in got["n"][1]
    assert got["BLOCK"][0] == "high" and "device-data" in got["BLOCK"][1]


# ---- per-site-fixed -------------------------------------------------------------------------------
SITES = """
def {a}(x):
    {k}[(1,)](x, {one}, BLOCK=128)

def {b}(x):
    {k}[(1,)](x, {other}, BLOCK=128)
"""


def test_literals_in_different_value_classes_between_sites_are_a_few_variants(tmp_path):
    # a multiple of 16 at one site is a class of its own (4096 here, 1 there: two compiles)
    for one, other, classes in (("1", "4096", "%16 / ==1"), ("1", "7", "==1 / other"), ("7", "32", "%16 / other")):
        got = findings(tmp_path, SITES.replace("{one}", one).replace("{other}", other))
        assert got["n"] == ("low", ("per-site-fixed", "literal")), (one, other)
        said = findings(tmp_path, SITES.replace("{one}", one).replace("{other}", other), messages=True)["n"]
        assert f"2 variants per process ({classes})" in said and "varies per call" not in said
    # one value class at every site: one compile, nothing to say
    for one, other in (("16", "4096"), ("3", "7")):
        assert "n" not in findings(tmp_path, SITES.replace("{one}", one).replace("{other}", other))


# ---- comprehension-aggregate ----------------------------------------------------------------------
def test_a_sum_max_or_min_over_a_comprehension_reads_like_its_loop(tmp_path):
    launch = "\n    {k}[(1,)](x, {c}, BLOCK=64)\n"
    # the longest of a per-call collection's items, as `for d in b: c = max(c, len(d))` would
    got = findings(tmp_path, "\ndef {a}(x, {b}):\n    {c} = max(len({d}) for {d} in {b})" + launch)
    assert got["n"] == ("medium", ("assignment", "comprehension-aggregate", "collection-length"))
    # a sum also counts its items: fixed items over a per-call collection still vary
    got = findings(tmp_path, "\ndef {a}(x, {b}):\n    {c} = sum(16 for {d} in {b})" + launch)
    assert got["n"] == ("medium", ("assignment", "comprehension-aggregate", "collection-length"))
    # over a collection written in the code: fixed
    assert "n" not in findings(tmp_path, "\ndef {a}(x):\n    {c} = sum({d} for {d} in (3, 5))" + launch)
    assert "n" not in findings(tmp_path, "\n{e} = [1, 7]\n\ndef {a}(x):\n    {c} = max({d} * 2 for {d} in {e})" + launch)
    # a function of the module named sum is not the builtin
    body = "\ndef sum(v):\n    return 4\n\ndef {a}(x, {b}):\n    {c} = sum(len({d}) for {d} in {b})" + launch
    assert "n" not in findings(tmp_path, body)


# ---- device-data: int() of one element of a tensor -------------------------------------------------
def test_int_of_one_element_of_a_tensor_is_read_from_device_data(tmp_path):
    launch = "\n    {k}[(1,)](x, {c}, BLOCK=64)\n"
    # cu_seqlens[-1] of a tensor the function reads as one: .item() written another way
    body = "\ndef {a}(x, {b}):\n    {d} = {b}.shape[0] - 1\n    {c} = int({b}[-1])" + launch
    assert findings(tmp_path, body)["n"] == ("high", ("assignment", "device-data"))
    # a tensor the function makes with torch
    body = "\ndef {a}(x, {b}):\n    {e} = torch.tensor({b}).cumsum(0)\n    {c} = int({e}[-1])" + launch
    assert findings(tmp_path, body)["n"] == ("high", ("assignment", "device-data"))
    # a parameter nothing reads as a tensor (a block size of two ints, say): not device data
    got = findings(tmp_path, "\ndef {a}(x, {b}):\n    {c} = int({b}[0])" + launch)
    assert "device-data" not in got.get("n", ("", ()))[1]
