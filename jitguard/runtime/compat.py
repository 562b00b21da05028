"""The one place that knows how Triton versions differ (hooks, key format, binder, autotuner).

Everything else in ``jitguard.runtime`` talks to Triton through the functions here, so supporting a
new Triton release means editing this file only.

| surface                         | where                                                  | versions  |
|---------------------------------|--------------------------------------------------------|-----------|
| pre/post compile hooks          | ``triton.knobs.runtime.jit_cache_hook`` / ``jit_post_compile_hook`` | 3.4+ |
|                                 | ``JITFunction.cache_hook`` / ``compiled_hook`` (class attributes)  | 3.2-3.3 |
| disk-cache-hit listener         | ``triton.knobs.compilation.listener``                  | 3.4+      |
| autotune listener               | ``triton.knobs.autotuning.listener``                   | 3.8+      |
| autotune adapter                | wrap ``Autotuner.run`` and watch ``Autotuner.cache``   | 3.2-3.7   |
| active driver                   | ``driver._active`` (None until set or first read)      | 3.5+      |
|                                 | ``driver.active`` (the ``driver.default`` LazyProxy until set) | 3.2-3.4 |
| autotuner's benchmarker         | read from the active driver when ``@triton.autotune`` runs | 3.2   |
|                                 | read at the first benchmark                            | 3.3+      |
| key format                      | ``str(specialization) + str(options)``                 | 3.3+      |
|                                 | ``''.join(types + specs) + str((constexprs, options))``, | 3.2     |
|                                 | rebuilt here in the 3.3 format (``normalized_key``)    |           |
| warm-up: the autotuner's cache  | ``Autotuner.cache`` (key tuple -> Config)              | 3.2-3.9   |
| warm-up: load without launching | ``CompiledKernel._init_handles()`` (binary, launcher)  | 3.2-3.9   |
"""
from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from typing import Any, Callable

MIN_VERSION = (3, 2)
TESTED = "3.2.0, 3.3.1, 3.4.0, 3.6.0 and 3.9.0 (CPU, stand-in driver), 3.6.0 (H200)"


class UnsupportedTritonError(RuntimeError):
    """The installed Triton has no compile hooks jitguard knows how to use."""


_triton = None


def _import_triton():
    global _triton
    if _triton is None:
        try:
            import triton  # noqa: F401
            import triton.runtime.jit  # noqa: F401
        except ImportError as exc:
            raise UnsupportedTritonError(
                f"jitguard's runtime watcher needs Triton (>= {'.'.join(map(str, MIN_VERSION))}), "
                f"but importing it failed: {exc}"
            ) from None
        _triton = triton
    return _triton


def parse_version(text: str) -> tuple[int, int, int]:
    nums = [int(x) for x in re.findall(r"\d+", text)[:3]]
    while len(nums) < 3:
        nums.append(0)
    return tuple(nums)  # type: ignore[return-value]


def triton_version() -> str:
    return _import_triton().__version__


def version_tuple() -> tuple[int, int, int]:
    return parse_version(triton_version())


def _knobs():
    triton = _import_triton()
    return getattr(triton, "knobs", None)


@dataclass(frozen=True)
class HookSite:
    """Get/set one Triton hook slot without the caller knowing where it lives."""

    name: str
    get: Callable[[], Any]
    set: Callable[[Any], None]


def _attr_site(obj: Any, attr: str, label: str) -> HookSite:
    return HookSite(label, lambda: getattr(obj, attr, None), lambda v: setattr(obj, attr, v))


def compile_hook_sites() -> tuple[HookSite, HookSite]:
    """(pre-compile, post-compile) hook slots; raises UnsupportedTritonError with the reason."""
    triton = _import_triton()
    version = version_tuple()
    if version[:2] < MIN_VERSION:
        raise UnsupportedTritonError(
            f"Triton {triton.__version__} is too old for jitguard's runtime watcher: it needs "
            f"Triton >= {'.'.join(map(str, MIN_VERSION))} (tested on {TESTED})"
        )
    knobs = _knobs()
    runtime = getattr(knobs, "runtime", None) if knobs is not None else None
    if runtime is not None and hasattr(runtime, "jit_cache_hook") and hasattr(runtime, "jit_post_compile_hook"):
        return (_attr_site(runtime, "jit_cache_hook", "triton.knobs.runtime.jit_cache_hook"),
                _attr_site(runtime, "jit_post_compile_hook", "triton.knobs.runtime.jit_post_compile_hook"))
    from triton.runtime.jit import JITFunction

    if hasattr(JITFunction, "cache_hook") and hasattr(JITFunction, "compiled_hook"):
        return (_attr_site(JITFunction, "cache_hook", "JITFunction.cache_hook"),
                _attr_site(JITFunction, "compiled_hook", "JITFunction.compiled_hook"))
    raise UnsupportedTritonError(
        f"Triton {triton.__version__} has neither triton.knobs.runtime.jit_cache_hook nor "
        f"JITFunction.cache_hook/compiled_hook: jitguard does not know how to watch its compiles "
        f"(tested on {TESTED})"
    )


def compilation_listener_site() -> HookSite | None:
    """``knobs.compilation.listener`` (3.4+): fires per compile, with ``cache_hit`` for disk hits."""
    knobs = _knobs()
    comp = getattr(knobs, "compilation", None) if knobs is not None else None
    if comp is None or not hasattr(comp, "listener"):
        return None
    return _attr_site(comp, "listener", "triton.knobs.compilation.listener")


def autotune_listener_site() -> HookSite | None:
    """``knobs.autotuning.listener`` (3.8+), or None where Triton lacks it (use the adapter)."""
    knobs = _knobs()
    at = getattr(knobs, "autotuning", None) if knobs is not None else None
    if at is None or not hasattr(at, "listener"):
        return None
    return _attr_site(at, "listener", "triton.knobs.autotuning.listener")


def explicit_driver(driver_config: Any) -> Any | None:
    """The driver made active with ``set_active`` (a real one or a stand-in), or None while Triton
    would still use its default (the machine's GPU driver, created on first use). Never creates one."""
    if isinstance(getattr(type(driver_config), "active", None), property):  # 3.5+
        return vars(driver_config).get("_active")
    active = vars(driver_config).get("active")  # 3.2-3.4: the default LazyProxy until set
    default = vars(driver_config).get("default")
    if active is None or active is default:
        return None
    return active


def machine_driver(driver_config: Any) -> Any | None:
    """The machine's own (GPU) driver, or None where this machine has none (creating it fails)."""
    try:
        default = driver_config.default  # 3.5+: a property that creates it
        init = getattr(default, "_initialize_obj", None)  # 3.2-3.4: a LazyProxy
        if init is not None:
            init()
        return default
    except Exception:
        return None


def autotuner_reads_driver_at_decoration() -> bool:
    """Triton 3.2's ``@triton.autotune`` asks the active driver for its benchmarker when the
    decorator runs (3.3+ waits for the first benchmark)."""
    return version_tuple()[:2] < (3, 3)


def autotuner_class():
    from triton.runtime.autotuner import Autotuner

    return Autotuner


def jit_function_class():
    from triton.runtime.jit import JITFunction

    return JITFunction


# ---------------------------------------------------------------------------------------------
# What a compile hook call tells us, normalized
# ---------------------------------------------------------------------------------------------

@dataclass
class CompileCall:
    jit_function: Any  # the JITFunction being compiled
    key: str  # Triton's in-memory cache key
    warmup: bool
    device: Any
    resolved: dict[str, Any]  # resolved launch options (num_warps, num_stages, num_ctas)


def compile_call(kwargs: dict[str, Any]) -> CompileCall:
    """Normalize the keyword arguments of a pre/post compile hook call."""
    fn = kwargs.get("fn")
    jf = getattr(fn, "jit_function", None) or fn
    comp = kwargs.get("compile") or {}
    key = kwargs.get("key", comp.get("key"))
    resolved = {k: comp[k] for k in ("num_warps", "num_stages", "num_ctas") if k in comp}
    warm = kwargs.get("is_manual_warmup", comp.get("is_warmup", False))
    return CompileCall(jf, key if isinstance(key, str) else str(key), bool(warm), comp.get("device"), resolved)


def jit_decorator(jit_function: Any) -> str:
    """``gluon.jit`` for a Gluon kernel (``GluonJITFunction.is_gluon()``, Triton 3.5+), else
    ``triton.jit``: the decorator a remedy names."""
    is_gluon = getattr(jit_function, "is_gluon", None)
    try:
        return "gluon.jit" if callable(is_gluon) and is_gluon() is True else "triton.jit"
    except Exception:  # a foreign object in the hook: it is not a Gluon kernel we know
        return "triton.jit"


def _kernel_caches(jit_function: Any, device: Any = None) -> list[dict]:
    """The JITFunction's in-memory ``{key: CompiledKernel}`` dicts (for ``device``, else all)."""
    caches = getattr(jit_function, "device_caches", None) or getattr(jit_function, "cache", None)
    if not caches:
        return []
    try:
        entries = [caches[device]] if device in caches else list(caches.values())
    except TypeError:
        return []
    out = []
    for entry in entries:
        cache = entry[0] if isinstance(entry, tuple) else entry  # 3.3+: (kernel_cache, ..., binder)
        if isinstance(cache, dict):
            out.append(cache)
    return out


def kernel_cache_keys(jit_function: Any, device: Any = None) -> list[str]:
    """Keys already in the JITFunction's in-memory cache (compiled before jitguard was watching)."""
    return [k for cache in _kernel_caches(jit_function, device) for k in cache if isinstance(k, str)]


def compiled_kernel(jit_function: Any, key: str, device: Any = None) -> Any:
    """The CompiledKernel Triton keeps under ``key``, or None."""
    for cache in _kernel_caches(jit_function, device):
        if key in cache:
            return cache[key]
    return None


def load_compiled(kernel: Any) -> bool:
    """Do what a compiled kernel's first launch does before it runs: load its binary on the
    current device and build its launcher (``CompiledKernel._init_handles``, 3.2-3.9; with a cold
    Triton cache the launcher is a C module compiled then, ~0.2-0.3 s on an H200 host). False where
    Triton has no such step; raises what Triton raises (e.g. OutOfResources for shared memory)."""
    init = getattr(kernel, "_init_handles", None)
    if not callable(init):
        return False
    init()
    return True


def jit_params(jit_function: Any) -> list[tuple[str, bool, bool, bool]]:
    """(name, declared constexpr, do_not_specialize, do_not_specialize_on_alignment) per parameter."""
    out = []
    for p in getattr(jit_function, "params", []):
        out.append((p.name, bool(getattr(p, "is_constexpr", False)),
                    bool(getattr(p, "do_not_specialize", False)),
                    bool(getattr(p, "do_not_specialize_on_alignment", False))))
    return out


def base_jit_function(fn: Any) -> Any:
    """Unwrap Autotuner/Heuristics layers down to the JITFunction."""
    jf_cls = jit_function_class()
    seen = 0
    while not isinstance(fn, jf_cls) and hasattr(fn, "fn") and seen < 16:
        fn = fn.fn
        seen += 1
    if not isinstance(fn, jf_cls):
        raise TypeError(f"expected a @triton.jit kernel (optionally autotuned), got {type(fn).__name__}")
    return fn


# ---------------------------------------------------------------------------------------------
# The key string: "[('*fp16', 'D'), ('i32', ''), ('constexpr', 128)]{'debug': False, ...}"
# ---------------------------------------------------------------------------------------------

def split_key(key: str) -> tuple[str, str]:
    """Split a 3.3+ key into its specialization list text and its options dict text."""
    if not key.startswith("["):
        return key, ""
    depth = 0
    quote = None
    i = 0
    n = len(key)
    while i < n:
        c = key[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
            if depth == 0:
                return key[: i + 1], key[i + 1:]
        i += 1
    return key, ""


def _node_value(node: ast.AST, text: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _Raw(ast.get_source_segment(text, node) or "?")


class _Raw(str):
    """A constexpr value Triton printed as something that is not a Python literal (e.g. a dtype)."""

    def __repr__(self) -> str:
        return str(self)


def parse_specialization(spec_text: str) -> list[tuple[Any, Any]] | None:
    """``[('i32', 'D'), ...]`` -> [("i32", "D"), ...]; None if the text is not in that format."""
    try:
        tree = ast.parse(spec_text, mode="eval")
    except SyntaxError:
        return None
    if not isinstance(tree.body, ast.List):
        return None
    out = []
    for elt in tree.body.elts:
        if isinstance(elt, ast.Tuple) and len(elt.elts) == 2:
            out.append((_node_value(elt.elts[0], spec_text), _node_value(elt.elts[1], spec_text)))
        else:
            out.append((_Raw(ast.get_source_segment(spec_text, elt) or "?"), None))
    return out


# One specialization entry as Triton prints it: ('i32', 'D'), ('constexpr', 128), ('i64', None), ...
# followed by ", " or by the closing "]". Anything else (a dtype object, a tuple, an escaped
# quote) goes through ast in parse_specialization.
_SIMPLE_ENTRY = re.compile(r"\('([^'\\]*)', (None|True|False|-?\d+|'[^'\\]*')\)(, |\])")
_ATOMS = {"None": None, "True": True, "False": False}


def split_and_parse(key: str) -> tuple[list[tuple[Any, Any]] | None, str]:
    """(entries, options text) of a 3.3+ key, in one pass: a regular expression over the common
    entries (jitguard's per-event cost is mostly this, on kernels of 40+ parameters), ast for the
    rest."""
    if key.startswith("[]"):
        return [], key[2:]
    if key.startswith("["):
        entries = []
        pos, n = 1, len(key)
        match = _SIMPLE_ENTRY.match
        while pos < n:
            m = match(key, pos)
            if m is None:
                break
            ty, attr, end = m.groups()
            if attr in _ATOMS:
                value = _ATOMS[attr]
            elif attr[0] == "'":
                value = attr[1:-1]
            else:
                value = int(attr)
            entries.append((ty, value))
            pos = m.end()
            if end == "]":
                return entries, key[pos:]
    spec_text, opt_text = split_key(key)
    return parse_specialization(spec_text), opt_text


_OPTIONS_CACHE: dict[str, Any] = {}


def parse_options(options_text: str) -> dict[str, Any] | None:
    """The explicit launch options part of a key (``{'num_warps': 4, 'debug': False}``)."""
    if not options_text:
        return {}
    if options_text in _OPTIONS_CACHE:  # a handful of distinct texts per process
        cached = _OPTIONS_CACHE[options_text]
        return dict(cached) if cached is not None else None
    try:
        value = ast.literal_eval(options_text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        value = None
    value = value if isinstance(value, dict) else None
    if len(_OPTIONS_CACHE) < 256:
        _OPTIONS_CACHE[options_text] = value
    return dict(value) if value is not None else None


# Options run() adds to every key itself (not passed by the user): shown only when they differ.
IMPLICIT_OPTIONS = ("debug", "instrumentation_mode", "fpsan_homomorphic_casts")


# ---------------------------------------------------------------------------------------------
# Triton 3.2 keys, rebuilt in the 3.3+ format so keys.decode_key reads every version the same way
# ---------------------------------------------------------------------------------------------

_DTYPES = ("fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5b16", "fp8e5", "fp16", "bf16", "fp32", "fp64",
           "i16", "i32", "i64", "i8", "i1", "u16", "u32", "u64", "u8", "u1")
_TYPE_TOKEN = re.compile(r"\*k?(?:" + "|".join(_DTYPES) + r")|" + "|".join(_DTYPES) + r"|none|nvTmaDesc")


def _format_entries(entries: list[tuple[Any, Any]], options: Any) -> str:
    return "[" + ", ".join(f"({t!r}, {a!r})" for t, a in entries) + "]" + str(options)


def _tail_options(key: str) -> tuple[tuple | None, Any]:
    """The ``str((constexpr_values, options))`` tail of a 3.2 key."""
    cut = key.find("(")
    if cut < 0:
        return None, {}
    tail = key[cut:]
    try:
        cx, opts = ast.literal_eval(tail)
        return tuple(cx), opts
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    try:  # a constexpr Triton printed as a name (``triton.language.float16``): keep it as _Raw
        tree = ast.parse(tail, mode="eval").body
        if isinstance(tree, ast.Tuple) and len(tree.elts) == 2 and isinstance(tree.elts[0], ast.Tuple):
            return (tuple(_node_value(n, tail) for n in tree.elts[0].elts),
                    ast.literal_eval(tree.elts[1]))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        m = re.search(r"(\{[^{}]*\})\)$", tail)
        opts = parse_options(m.group(1)) if m else None
        return None, opts if opts is not None else (m.group(1) if m else "")


def _entries_32(params: list, types: list[str], specs: list[str], constexprs: tuple | list) -> list:
    entries = []
    ti = si = ci = 0
    for p in params:
        if p.is_constexpr:
            entries.append(("constexpr", constexprs[ci] if ci < len(constexprs) else None))
            ci += 1
            continue
        ty = types[ti] if ti < len(types) else "?"
        ti += 1
        if ty == "none":
            entries.append(("constexpr", None))
            if not p.do_not_specialize:
                si += 1
            continue
        if p.do_not_specialize:
            entries.append((ty, None))
            continue
        spec = specs[si] if si < len(specs) else "N"
        si += 1
        if spec == "1":
            entries.append(("constexpr", True if ty in ("i1", "u1") else 1))
        elif spec == "D":
            entries.append((ty, "D"))
        else:
            entries.append((ty, None if p.do_not_specialize_on_alignment else ""))
    return entries


def normalized_key(jit_function: Any, key: str, compile_info: dict | None = None) -> str | None:
    """``key`` in the 3.3+ format (``[('*fp16', 'D'), ...]{options}``): itself from 3.3 on; for a
    3.2 key, rebuilt from the hook's ``compile`` dict when given, else parsed from the flat key.
    None when a 3.2 key cannot be read."""
    if key.startswith("["):
        return key
    params = list(getattr(jit_function, "params", []))
    constexprs, options = _tail_options(key)
    if compile_info and "signature" in compile_info:
        sig = compile_info.get("signature") or {}
        consts = compile_info.get("constants") or {}
        cfg = (compile_info.get("configs") or [None])[0]
        props = getattr(cfg, "arg_properties", None) or {}
        div = set(props.get("tt.divisibility", []))
        entries = []
        for p in params:
            if p.is_constexpr:
                entries.append(("constexpr", consts.get(p.name, consts.get(p.num))))
            elif p.name in consts or p.num in consts:
                entries.append(("constexpr", consts.get(p.name, consts.get(p.num))))
            else:
                ty = sig.get(p.name, sig.get(p.num, "?"))
                if p.do_not_specialize:
                    entries.append((ty, None))
                elif p.num in div:
                    entries.append((ty, "D"))
                else:
                    entries.append((ty, None if p.do_not_specialize_on_alignment else ""))
        return _format_entries(entries, options)
    if constexprs is None:
        return None
    flat = key[: key.find("(")]
    n_types = sum(1 for p in params if not p.is_constexpr)
    types: list[str] = []
    pos = 0
    while len(types) < n_types:
        m = _TYPE_TOKEN.match(flat, pos)
        if not m:
            return None
        types.append(m.group(0))
        pos = m.end()
    specs = list(flat[pos:])
    return _format_entries(_entries_32(params, types, specs, constexprs), options)


def bind_key(binder: Any, jit_function: Any, args: tuple, kwargs: dict) -> tuple[str, str]:
    """(Triton's key, the key in the 3.3+ format) for one call, through Triton's own binder."""
    out = binder(*args, **kwargs)
    if len(out) == 3:  # 3.3+: bound_args, specialization, options
        _, specialization, options = out
        key = str(specialization) + str(options)
        return key, key
    _, sig_and_spec, constexprs, _, excess = out  # 3.2
    key = "".join(sig_and_spec) + str((constexprs, excess))
    params = list(jit_function.params)
    n_types = sum(1 for p in params if not p.is_constexpr)
    types, specs = list(sig_and_spec[:n_types]), list(sig_and_spec[n_types:])
    return key, _format_entries(_entries_32(params, types, specs, constexprs), excess)


# ---------------------------------------------------------------------------------------------
# Offline binder (predict)
# ---------------------------------------------------------------------------------------------

def parse_target(target: str):
    """"cuda:90" -> GPUTarget("cuda", 90, 32); "hip:gfx942" -> GPUTarget("hip", "gfx942", 64)."""
    from triton.backends.compiler import GPUTarget

    m = re.fullmatch(r"\s*(cuda|hip):(\w+)\s*", target or "")
    if not m:
        raise ValueError(f"target must look like 'cuda:90' or 'hip:gfx942', got {target!r}")
    backend, arch = m.groups()
    if backend == "cuda":
        if not arch.isdigit():
            raise ValueError(f"cuda target needs a numeric compute capability, got {target!r}")
        return GPUTarget("cuda", int(arch), 32)
    return GPUTarget("hip", arch, 64)


def make_binder(jit_function: Any, target_text: Any):
    """Triton's own argument binder for ``target`` ("cuda:90", or a ``GPUTarget``; no GPU, no
    compile): returns ``binder(*args, **kwargs) -> (bound_args, specialization, options)``."""
    from triton.compiler import make_backend
    from triton.runtime import jit as jit_mod

    target = parse_target(target_text) if isinstance(target_text, str) else target_text
    try:
        backend = make_backend(target)
    except Exception as exc:  # no backend for that target in this wheel
        raise ValueError(f"Triton {triton_version()} has no backend for {target_text}: {exc}") from None
    return jit_mod.create_function_from_signature(jit_function.signature, jit_function.params, backend)


def implicit_run_kwargs(jit_function: Any) -> dict[str, Any]:
    """The kwargs ``JITFunction.run`` adds itself before binding (``debug`` everywhere; 3.6+ adds
    more), read from run()'s own source so predicted keys equal the real ones in every version."""
    import inspect

    global _RUN_KWARGS
    if _RUN_KWARGS is None:
        try:
            src = inspect.getsource(jit_function_class().run)
            _RUN_KWARGS = re.findall(r"kwargs\[[\"'](\w+)[\"']\]\s*=", src)
        except (OSError, TypeError):
            _RUN_KWARGS = ["debug"]
    knobs = _knobs()
    rt = getattr(knobs, "runtime", None)
    comp = getattr(knobs, "compilation", None)
    out: dict[str, Any] = {}
    for name in _RUN_KWARGS:
        if name == "debug":
            out[name] = bool(getattr(jit_function, "debug", None)) or bool(getattr(rt, "debug", False))
        elif comp is not None and hasattr(comp, name):
            out[name] = getattr(comp, name)
        elif rt is not None and hasattr(rt, name):
            out[name] = getattr(rt, name)
    return out


_RUN_KWARGS: list[str] | None = None


def run_kwargs(jit_function: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` as ``JITFunction.run`` hands them to its binder: with what run() adds itself."""
    kw = dict(kwargs)
    for name, value in implicit_run_kwargs(jit_function).items():
        if name == "debug":
            kw["debug"] = kw.get("debug", getattr(jit_function, "debug", None)) or value
        else:
            kw[name] = value
    return kw


def interpreter_active() -> bool:
    """TRITON_INTERPRET=1: kernels run in the interpreter and nothing is ever compiled."""
    knobs = _knobs()
    rt = getattr(knobs, "runtime", None) if knobs is not None else None
    if rt is not None and hasattr(rt, "interpret"):
        return bool(rt.interpret)
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def triton_dirs() -> tuple[str, ...]:
    """Directories whose frames are Triton's own (skipped when finding the user's launching frame)."""
    triton = _import_triton()
    return (os.path.dirname(os.path.abspath(triton.__file__)) + os.sep,)


# ---------------------------------------------------------------------------------------------
# Warm-up (jitguard.warmup): the active device and target, the autotuner's config cache
# ---------------------------------------------------------------------------------------------

def active_device_and_target() -> tuple[Any, Any]:
    """(device, GPUTarget) of Triton's active driver: where ``kernel.warmup`` compiles for."""
    from triton.runtime import driver

    device = driver.active.get_current_device()
    return device, driver.active.get_current_target()


def target_text(target: Any) -> str:
    """A GPUTarget as ``cuda:90`` / ``hip:gfx942``."""
    return f"{getattr(target, 'backend', '?')}:{getattr(target, 'arch', '?')}"


def autotuner_cache(tuner: Any) -> dict | None:
    """The autotuner's in-memory ``{key tuple: Config}`` (``Autotuner.cache`` in 3.2-3.9; the key is
    the values of ``key=[...]`` then ``str(dtype)`` of each tensor argument, as ``Autotuner.run``
    builds it). None when the autotuner has no such dict."""
    cache = getattr(tuner, "cache", None)
    return cache if isinstance(cache, dict) else None


def config_kwargs(config: Any) -> dict[str, Any]:
    """What a ``triton.Config`` passes to the kernel: its constexprs and launch options
    (``Config.all_kwargs()``, which leaves out options set to None)."""
    return dict(config.all_kwargs())
