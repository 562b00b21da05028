"""jitguard: find, fix and watch Triton kernel arguments that recompile per call.

The runtime API is exported lazily so ``import jitguard`` (and ``jitguard scan``) never imports
Triton: ``jitguard.watch``, ``jitguard.expect_no_compiles``, ``jitguard.mark_step``,
``jitguard.predict``, ``jitguard.warmup``, ``jitguard.RecompileError``, ``jitguard.RecompileWarning``.
"""

__version__ = "0.1.0"

_LAZY = {
    "watch": "jitguard.runtime.watch",
    "expect_no_compiles": "jitguard.runtime.watch",
    "RecompileError": "jitguard.runtime.watch",
    "RecompileWarning": "jitguard.runtime.watch",
    "mark_step": "jitguard.runtime.steps",
    "predict": "jitguard.runtime.predict",
    "warmup": "jitguard.runtime.warmup",
    "load_trace": "jitguard.runtime.trace",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jitguard' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
