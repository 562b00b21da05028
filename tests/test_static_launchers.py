"""Launch patterns beyond ``kernel[grid](...)``: launchers that return ``grid, dict(...)`` for a
framework to bind by name, and calls through instances of a module's classes. Random identifiers
everywhere, so that only structure decides."""
from __future__ import annotations

import random

from jitguard.static.extract import extract_file
from tests._static_util import pairs, rand_names, scan, scan_one


def _names(n: int) -> list[str]:
    """``n`` distinct random identifiers, for unpacking."""
    return list(rand_names(random.Random(), *"abcdefghijklmnop"[:n]).values())


def test_class_launcher_binds_dict_and_parameters_by_name():
    cls, n, m, buf, x, pos, inst, use = _names(8)
    src = f"""
import triton
import triton.language as tl

class {cls}(SomeFrameworkBase):
    @staticmethod
    @triton.jit
    def kernel({n}, {m}, x_ptr, BLOCK: tl.constexpr):
        pass

    def __call__(self, {n}, {m}, {x}):
        return ({n},), dict(x_ptr={x}, BLOCK=128, num_warps=4)

{inst} = {cls}()

def {use}({pos}, {x}):
    {buf} = {pos}.shape[0]
    {inst}({buf}, 64, {x})
"""
    found = pairs(scan_one(src))
    assert ("JG001", "kernel", n) in found  # the caller's token count reaches n by name
    assert ("JG001", "kernel", m) not in found  # a literal


def test_class_attribute_kernel_through_staticmethod_call():
    k, cls, cnt, x, use = _names(5)
    src = f"""
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {cnt}, BLOCK: tl.constexpr):
    pass

class {cls}:
    kernel = staticmethod({k})

    def launch(self, {x}):
        return ({x}.shape[0],), {{"x_ptr": {x}, "{cnt}": {x}.numel(), "BLOCK": 64}}
"""
    assert ("JG001", k, cnt) in pairs(scan_one(src))


def test_decorator_tied_launcher_and_its_callers():
    k, cnt, blk, x, run, outer = _names(6)
    src = f"""
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {cnt}, {blk}: tl.constexpr):
    pass

@some_dispatcher(kernel={k})
def {run}({x}, {cnt}):
    return ({x}.shape[0],), dict(x_ptr={x}, {blk}=64)

def {outer}({x}):
    {run}({x}, {x}.numel())
"""
    assert ("JG001", k, cnt) in pairs(scan_one(src))


def test_a_function_returning_a_dict_without_a_tie_is_no_launch():
    k, cnt, x, run, outer = _names(5)
    src = f"""
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {cnt}, BLOCK: tl.constexpr):
    pass

def {run}({x}, {cnt}):
    return ({x}.shape[0],), dict(x_ptr={x}, BLOCK=64)

def {outer}({x}):
    {run}({x}, {x}.numel())
"""
    assert not pairs(scan_one(src))


def test_a_dict_of_another_kernel_does_not_bind():
    # the class holds a kernel, but the dict's keys are not its parameters: no launch of it
    k, cls, x, p1, p2 = _names(5)
    src = f"""
import triton
import triton.language as tl

class {cls}:
    @staticmethod
    @triton.jit
    def kernel(x_ptr, {k}, BLOCK: tl.constexpr):
        pass

    def other(self, {x}):
        return ({x}.shape[0],), dict({p1}={x}.numel(), {p2}={x}.shape[0], BLOCK=4)
"""
    assert not pairs(scan_one(src))


def test_calls_through_a_module_instance_reach_call_method_parameters():
    k, cls, cnt, x, inst, use = _names(6)
    src = f"""
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {cnt}, BLOCK: tl.constexpr):
    pass

class {cls}:
    def __call__(self, {x}, {cnt}):
        {k}[(1,)]({x}, {cnt}, BLOCK=64)

{inst} = {cls}()

def {use}({x}):
    {inst}({x}, {x}.numel())
"""
    assert ("JG001", k, cnt) in pairs(scan_one(src))
    # ...and a constant passed through the instance is not reported
    assert not pairs(scan_one(src.replace(f"{inst}({x}, {x}.numel())", f"{inst}({x}, 4096)")))


def test_tensor_parameters_take_the_layout_their_callers_allocate():
    k, cnt, w, buf, x, outer, n = _names(7)
    src = f"""
import torch
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {cnt}, BLOCK: tl.constexpr):
    pass

def {w}({buf}):
    {k}[(1,)]({buf}, {buf}.stride(0), BLOCK=64)

def {outer}({x}):
    {n} = {x}.shape[0]
    {w}(torch.empty((7, {n} * 3), device={x}.device))
"""
    # stride(0) of a [7, tokens * 3] buffer follows the tokens
    assert ("JG001", k, cnt) in pairs(scan_one(src))
    # a buffer allocated with fixed dims: its stride is fixed
    assert not pairs(scan_one(src.replace(f"torch.empty((7, {n} * 3)", "torch.empty((7, 300)")))
    # and its leading dim is known to be fixed, not guessed to be a token count
    fixed = src.replace(f"{buf}.stride(0), BLOCK", f"{buf}.shape[0], BLOCK").replace(
        f"torch.empty((7, {n} * 3)", "torch.empty((7, 300)")
    assert not pairs(scan_one(fixed))
    assert ("JG001", k, cnt) in pairs(scan_one(fixed.replace(f"{w}(torch.empty((7, 300), device={x}.device))", f"{w}({x})")))


def _cross_module(caller_body: str, rng: random.Random):
    k, cnt, wrap, fwd, x = rand_names(rng, "k", "cnt", "wrap", "fwd", "x").values()
    ops = f"""
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {cnt}, BLOCK: tl.constexpr):
    pass

def {wrap}({x}, {cnt}):
    {k}[(1,)]({x}, {cnt}, BLOCK=64)
"""
    layer = f"""
from pkg.ops import {wrap}

def {fwd}({x}):
    {caller_body.format(wrap=wrap, x=x)}
"""
    return k, cnt, {"pkg.ops": ops, "pkg.layer": layer}


def test_entry_parameters_follow_callers_in_other_modules():
    rng = random.Random()
    k, cnt, sources = _cross_module("{wrap}({x}, {x}.numel())", rng)
    assert ("JG001", k, cnt) in pairs(scan(sources))
    # without the caller, nothing is known about the parameter
    assert not pairs(scan({"pkg.ops": sources["pkg.ops"]}))
    # a caller passing a constant: still nothing to report
    k, cnt, sources = _cross_module("{wrap}({x}, 4096)", rng)
    assert not pairs(scan(sources))


def test_structure_from_other_modules_overrides_a_name():
    # the wrapper's parameter is named like a token count, but every caller passes a constant
    rng = random.Random()
    k, cnt, sources = _cross_module("{wrap}({x}, 4096)", rng)
    named = {m: s.replace(cnt, "num_tokens") for m, s in sources.items()}
    assert not pairs(scan(named))
    assert ("JG001", k, "num_tokens") in pairs(scan({"pkg.ops": named["pkg.ops"]}))  # the name alone


def test_warmup_callers_are_not_evidence():
    rng = random.Random()
    body = "for n in range(1, 64):\n        {wrap}({x}, n)"
    k, cnt, sources = _cross_module(body, rng)
    assert ("JG001", k, cnt) in pairs(scan(sources))
    warm = {m: s.replace("def ", "def warmup_", 1) if m == "pkg.layer" else s for m, s in sources.items()}
    assert not pairs(scan(warm))


def test_runner_reads_the_callers_files(tmp_path):
    from jitguard.config import Config
    from jitguard.static.runner import scan_paths

    rng = random.Random()
    k, cnt, sources = _cross_module("{wrap}({x}, {x}.shape[0])", rng)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    for module, src in sources.items():
        (tmp_path / (module.replace(".", "/") + ".py")).write_text(src)
    result = scan_paths([str(tmp_path)], Config(select=("JG",), root=str(tmp_path), confidence="low"), jobs=1, use_cache=False)
    assert {(f.code, f.param) for f in result.findings} == {("JG001", cnt)}


STAR_KERNEL = """
import torch
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, s0, s1, n, BLOCK: tl.constexpr):
    pass
"""


def test_star_args_of_a_tensor_whose_rank_the_function_states():
    # *x.stride() of a tensor nothing is known about: its rank from an unpacking of its shape,
    # an assert on x.dim()/x.ndim, or an assert comparing x.shape to a tuple
    for rank_hint in ("{a}, {b} = x.shape", "assert x.dim() == 2", "assert x.ndim == 2",
                      "assert x.shape == ({a}, {b})"):
        rng = random.Random()
        hint = rank_hint.format(**rand_names(rng, "a", "b"))
        src = STAR_KERNEL + f"\ndef go(x, y):\n    {hint}\n    k[(1,)](x, *x.stride(), y.numel(), BLOCK=16)\n"
        assert pairs(scan_one(src)) == {("JG001", "k", "n")}, hint
        # a rank of 3 means the numel lands after the signature's n: nothing to report for n
        wrong = src.replace("== 2", "== 3").replace(" = x.shape", ", _c = x.shape").replace(
            "x.shape == (", "x.shape == (1, ")
        assert not pairs(scan_one(wrong)), hint
    # [:-1] of a rank-3 tensor is two strides
    src = STAR_KERNEL + "\ndef go(x, y):\n    assert x.dim() == 3\n    k[(1,)](x, *x.stride()[:-1], y.numel(), BLOCK=16)\n"
    assert pairs(scan_one(src)) == {("JG001", "k", "n")}


def test_positionals_between_two_unknown_stars_are_not_placed_from_the_end():
    src = STAR_KERNEL.replace("s0, s1, n,", "s0, s1, n, m,") + \
        "\ndef go(x, y, z):\n    k[(1,)](x, *y.stride(), z.numel(), *z.stride(), BLOCK=16)\n"
    # z.numel() is not the last positional: placing it as m (or n) would be a guess
    assert not pairs(scan_one(src))


def test_shape_bound_to_a_name_then_unpacked():
    rng = random.Random()
    s, a, b = rand_names(rng, "s", "a", "b").values()
    src = STAR_KERNEL + f"\ndef go(x):\n    {s} = x.shape\n    {a}, {b} = {s}[:2]\n    k[(1,)](x, 1, 1, {a}, BLOCK=16)\n"
    assert pairs(scan_one(src)) == {("JG001", "k", "n")}
    assert not pairs(scan_one(src.replace(f"1, 1, {a}, BLOCK", f"1, 1, {b}, BLOCK")))


def test_kernels_handed_to_a_forwarding_launcher():
    rng = random.Random()
    helper, k, cnt, x = rand_names(rng, "helper", "k", "cnt", "x").values()
    helpers = f"""
def {helper}(kernel, grid, **kwargs):
    kernel[grid](**kwargs)
"""
    ops = f"""
import triton
import triton.language as tl
from pkg.helpers import {helper}

@triton.jit
def {k}(x_ptr, {cnt}, BLOCK: tl.constexpr):
    pass

def go({x}):
    {helper}({k}, (1,), x_ptr={x}, {cnt}={x}.shape[0], BLOCK=64)
"""
    assert ("JG001", k, cnt) in pairs(scan({"pkg.helpers": helpers, "pkg.ops": ops}))
    # a function that does not launch its kernel parameter with its **kwargs: no launch
    other = helpers.replace("kernel[grid](**kwargs)", "print(kernel, grid, kwargs)")
    assert not pairs(scan({"pkg.helpers": other, "pkg.ops": ops}))
    # ...nor one nothing is known about
    assert not pairs(scan({"pkg.ops": ops}))


def test_a_kernel_made_by_a_factory_called_at_the_launch():
    # factory(...)[grid](...): the kernel is defined (and cached) inside a function that imports
    # triton lazily; the launch reaches it through the factory's returns
    make, cache, k, n, m, use, other, x = _names(8)
    src = f"""
import functools

{cache} = {{}}

def {make}(tag):
    {k}_ = {cache}.get(tag)
    if {k}_ is None:
        import triton
        import triton.language as tl

        @triton.jit
        def {k}(x_ptr, {n}, {m}, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs * {m}, 0.0, mask=offs < {n})

        {k}_ = {k}
        {cache}[tag] = {k}_
    return {k}_

def {other}():
    return None

def {use}({x}, lengths):
    {make}("a")[(1,)]({x}, int(lengths.max()), 8, BLOCK=64)
    {other}()[(1,)]({x}, int(lengths.max()), 8, BLOCK=64)
"""
    found = pairs(scan_one(src))
    assert ("JG001", k, n) in found  # the launch through the factory binds
    assert ("JG001", k, m) not in found  # a literal
    facts = extract_file("m.py", src, "m")
    assert [(la.targets, la.line) for la in facts.launches] == [([f"m.{make}.<locals>.{k}"], src.count("\n", 0, src.index(f"    {make}(\"a\")[")) + 1)]


def test_a_local_wrapper_handing_the_kernel_back_is_no_factory():
    # wrap(kernel)[grid](...) with wrap a function of the module returning its argument: the launch
    # is of the kernel passed (the factory reading finds no kernel in wrap's own returns)
    wrap, k, n, use, x = _names(5)
    src = f"""
import triton
import triton.language as tl

def {wrap}(fn):
    return fn

@triton.jit
def {k}(x_ptr, {n}, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < {n})

def {use}({x}, lengths):
    {wrap}({k})[(1,)]({x}, int(lengths.max()), BLOCK=64)
"""
    assert ("JG001", k, n) in pairs(scan_one(src))


def test_runner_follows_kernels_imported_then_handed_or_bound_to_their_grid(tmp_path):
    # pkg/helpers.py launches its kernel parameter and defines no kernel (no "jit" in it); pkg/ops.py
    # imports a kernel from pkg/kernels.py and hands it to the helper, or binds it to its grid and
    # calls that later: neither file holds a launch-shaped call ("...](")
    from jitguard.config import Config
    from jitguard.static.runner import scan_paths

    rng = random.Random()
    nm = rand_names(rng, "helper", "k", "j", "cnt", "m", "x", "g")
    files = {
        "pkg/__init__.py": "",
        "pkg/helpers.py": "def {helper}(kernel, grid, **kwargs):\n    kernel[grid](**kwargs)\n",
        "pkg/kernels.py": """
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {cnt}, BLOCK: tl.constexpr):
    pass

@triton.jit
def {j}(x_ptr, {m}, BLOCK: tl.constexpr):
    pass
""",
        "pkg/ops.py": """
from pkg.helpers import {helper}
from pkg.kernels import {k}, {j}

def handed({x}):
    {helper}({k}, (1,), x_ptr={x}, {cnt}={x}.shape[0], BLOCK=64)

def bound({x}):
    {g} = {j}[(1,)]
    {g}({x}, {x}.shape[0], BLOCK=64)
""",
    }
    for path, src in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(src.format(**nm))
    config = Config(select=("JG",), root=str(tmp_path), confidence="low")
    result = scan_paths([str(tmp_path)], config, jobs=1, use_cache=False)
    assert {(f.code, f.param) for f in result.findings} == {("JG001", nm["cnt"]), ("JG001", nm["m"])}
    # the same where pkg/ops.py defines a kernel of its own (read before any kernel name is known)
    own = "import triton\n\n@triton.jit\ndef own_kernel(x_ptr):\n    pass\n"
    (tmp_path / "pkg/ops.py").write_text(own + files["pkg/ops.py"].format(**nm))
    result = scan_paths([str(tmp_path)], config, jobs=1, use_cache=False)
    assert {(f.code, f.param) for f in result.findings} == {("JG001", nm["cnt"]), ("JG001", nm["m"])}
    # the helper must launch what it is handed: one that only prints it launches nothing
    (tmp_path / "pkg/helpers.py").write_text(
        "def {helper}(kernel, grid, **kwargs):\n    print(kernel, grid, kwargs)\n".format(**nm))
    result = scan_paths([str(tmp_path)], config, jobs=1, use_cache=False)
    assert {(f.code, f.param) for f in result.findings} == {("JG001", nm["m"])}


TWO_KERNELS = """
import triton
import triton.language as tl

@triton.jit
def {k1}(x_ptr, {n}, BLOCK: tl.constexpr):
    pass

@triton.jit
def {k2}(x_ptr, {n}, BLOCK: tl.constexpr):
    pass
"""


def test_kernels_reached_through_a_display_a_loop_or_a_default():
    rng = random.Random()
    nm = rand_names(rng, "k1", "k2", "n", "kern", "table", "x", "mode")
    both = {("JG001", nm["k1"], nm["n"]), ("JG001", nm["k2"], nm["n"])}
    forms = {
        # a dict of kernels, at module level, picked per call
        "{table} = {{'a': {k1}, 'b': {k2}}}\n\ndef go({x}, {mode}):\n"
        "    {table}[{mode}][(1,)]({x}, {x}.shape[0], BLOCK=64)\n": both,
        "{table} = {{'a': {k1}}}\n\ndef go({x}, {mode}):\n"
        "    {table}.get({mode}, {k2})[(1,)]({x}, {x}.shape[0], BLOCK=64)\n": both,
        # a loop over a tuple of kernels, written at the loop or bound to a name
        "def go({x}):\n    for {kern} in ({k1}, {k2}):\n        {kern}[(1,)]({x}, {x}.shape[0], BLOCK=64)\n": both,
        "{table} = [{k1}, {k2}]\n\ndef go({x}):\n    for {kern} in {table}:\n"
        "        {kern}[(1,)]({x}, {x}.shape[0], BLOCK=64)\n": both,
        # a kernel parameter's default
        "def go({x}, {kern}={k2}):\n    {kern}[(1,)]({x}, {x}.shape[0], BLOCK=64)\n": {("JG001", nm["k2"], nm["n"])},
    }
    for body, expected in forms.items():
        src = TWO_KERNELS.format(**nm) + "\n" + body.format(**nm)
        assert pairs(scan_one(src)) == expected, body
    # a loop over something else, a parameter with no default: nothing is known to be launched
    for body in ("def go({x}, {table}):\n    for {kern} in {table}:\n        {kern}[(1,)]({x}, {x}.shape[0], BLOCK=64)\n",
                 "def go({x}, {kern}):\n    {kern}[(1,)]({x}, {x}.shape[0], BLOCK=64)\n"):
        assert not pairs(scan_one(TWO_KERNELS.format(**nm) + "\n" + body.format(**nm))), body


def test_a_partial_of_a_kernel_and_grid_binds_the_leading_arguments():
    rng = random.Random()
    nm = rand_names(rng, "k", "m", "n", "go", "x", "fn")
    kernel = """
import functools
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {m}, {n}, BLOCK: tl.constexpr):
    pass
"""
    # the partial binds x and a literal m; the later call passes n, which varies
    body = "def {go}({x}):\n    {fn} = functools.partial({k}[(1,)], {x}, 7, BLOCK=64)\n    {fn}({x}.shape[0])\n"
    assert pairs(scan_one((kernel + body).format(**nm))) == {("JG001", nm["k"], nm["n"])}
    # the partial binds the varying value by keyword: the call's own keyword wins over it
    body = "def {go}({x}):\n    {fn} = functools.partial({k}[(1,)], {n}={x}.shape[0], BLOCK=64)\n    {fn}({x}, 7)\n"
    assert pairs(scan_one((kernel + body).format(**nm))) == {("JG001", nm["k"], nm["n"])}
    body = body.replace("{fn}({x}, 7)", "{fn}({x}, 7, {n}=16)")
    assert not pairs(scan_one((kernel + body).format(**nm)))
    # a function of the module that merely shares the name is no functools.partial
    body = ("def partial(f, *a, **kw):\n    return None\n\ndef {go}({x}):\n"
            "    {fn} = partial({k}[(1,)], {x}, 7, BLOCK=64)\n    {fn}({x}.shape[0])\n")
    assert not pairs(scan_one((kernel + body).format(**nm)))


def test_a_tuple_handed_to_a_launching_function_of_another_module():
    rng = random.Random()
    nm = rand_names(rng, "helper", "k", "cnt", "x", "args")
    helpers = "def {helper}(kernel, grid, args, consts):\n    kernel[grid](*args, **consts)\n"
    ops = """
import triton
import triton.language as tl
from pkg.helpers import {helper}

@triton.jit
def {k}(x_ptr, {cnt}, BLOCK: tl.constexpr):
    pass

def go({x}):
    {helper}({k}, (1,), ({x}, {x}.shape[0]), {{"BLOCK": 64}})

def bound({x}):
    {args} = ({x}, {x}.shape[0])
    {helper}({k}, (1,), {args}, dict(BLOCK=64))
"""
    sources = {"pkg.helpers": helpers.format(**nm), "pkg.ops": ops.format(**nm)}
    findings = scan(sources)
    assert pairs(findings) == {("JG001", nm["k"], nm["cnt"])}
    assert len([la for f in findings for la in f.details["launches"]]) == 2
    # the tuple is the launch's positionals only where the function splats that parameter
    sources["pkg.helpers"] = "def {helper}(kernel, grid, args, consts):\n    kernel[grid](*grid, **consts)\n".format(**nm)
    assert not pairs(scan(sources))
