"""``jitguard.predict``: which variants Triton would compile for a sequence of calls, without a GPU.

Uses Triton's own argument binder for the target (``triton.compiler.make_backend``), the same code
``JITFunction.run`` uses to build its cache key, so CI on a CPU can assert "one variant for batch
sizes 1..512". Nothing is compiled; a call costs a few microseconds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from jitguard.runtime import compat, keys
from jitguard.runtime.trace import DiffEntry, Param


@dataclass
class PredictedVariant:
    key: str
    params: list[Param]
    options: dict[str, Any] | None
    calls: list[int] = field(default_factory=list)  # indices into the calls given
    closest: int | None = None  # index of the closest earlier variant
    diff: list[DiffEntry] = field(default_factory=list)
    remedy: str | None = None
    config: int | None = None  # autotuned kernels: index of the config in the autotuner's list
    autotuning: bool = False  # first compiled while the autotuner benchmarks a new key (expected)

    def describe(self) -> str:
        return ", ".join(f"{p.name}: {keys.describe(p)}" for p in self.params)


@dataclass
class Prediction:
    kernel: str
    target: str
    variants: list[PredictedVariant]

    def __len__(self) -> int:
        return len(self.variants)

    def __iter__(self):
        return iter(self.variants)

    @property
    def keys(self) -> list[str]:
        return [v.key for v in self.variants]

    def explain(self) -> str:
        lines = [f"{self.kernel} on {self.target}: {len(self.variants)} variant"
                 f"{'s' if len(self.variants) != 1 else ''}"]
        for i, v in enumerate(self.variants, 1):
            tuned = f", config {v.config}" + (" while benchmarking" if v.autotuning else "") if v.config is not None else ""
            lines.append(f"  #{i} ({len(v.calls)} call{'s' if len(v.calls) != 1 else ''}, first: call "
                         f"{v.calls[0]}{tuned}): {v.describe()}")
            if v.diff:
                lines.append(f"      why: {'; '.join(d.what for d in v.diff)}")
        fixes = list(dict.fromkeys(v.remedy for v in self.variants if v.remedy))
        lines.extend(f"  fix: {f}" for f in fixes)
        return "\n".join(lines)


def _split_call(call: Any) -> tuple[tuple, dict]:
    if isinstance(call, dict):
        return (), dict(call)
    if (isinstance(call, tuple) and len(call) == 2 and isinstance(call[0], (tuple, list))
            and isinstance(call[1], dict)):
        return tuple(call[0]), dict(call[1])
    if isinstance(call, (tuple, list)):
        return tuple(call), {}
    return (call,), {}


def _layers(kernel: Any):
    """(jit_function, [heuristics layers outermost first], autotuner or None)."""
    jf_cls = compat.jit_function_class()
    heuristics, tuner, fn = [], None, kernel
    for _ in range(16):
        if isinstance(fn, jf_cls):
            return fn, heuristics, tuner
        if hasattr(fn, "values") and hasattr(fn, "arg_names") and hasattr(fn, "fn"):
            heuristics.append(fn)
        elif hasattr(fn, "configs") and hasattr(fn, "keys") and hasattr(fn, "fn"):
            tuner = tuner or fn
        else:
            break
        fn = fn.fn
    raise TypeError(f"jitguard.predict: expected a @triton.jit kernel (optionally wrapped by "
                    f"@triton.autotune / @triton.heuristics), got {type(kernel).__name__}")


def predict(kernel: Any, calls: Iterable[Any], target: str = "cuda:90") -> Prediction:
    """Distinct specialization keys Triton would compile ``kernel`` for over ``calls``.

    Each call is a tuple of positional arguments, a dict of keyword arguments, or an
    ``(args, kwargs)`` pair; launch options (``num_warps=4``) go in the kwargs as at a launch.
    Tensor arguments may be torch tensors or any object with ``data_ptr()`` and ``dtype``.
    For an autotuned kernel, as Triton does: a call with a new autotune key (the values of the
    ``key=[...]`` arguments and the argument dtypes) benchmarks every config, so each config's key
    is predicted for it; a call with a key seen before runs the config chosen then, which offline
    is taken to be the first one (a real run may pick another: per autotune key, the count of
    variants is the same, their configs may differ).
    """
    jf, heuristics, tuner = _layers(kernel)
    binder = compat.make_binder(jf, target)
    implicit = compat.implicit_run_kwargs(jf)
    params = compat.jit_params(jf)
    arg_names = [p[0] for p in params]
    qual = f"{getattr(jf.fn, '__module__', '?')}.{getattr(jf.fn, '__qualname__', '?')}"
    configs = [getattr(c, "all_kwargs", lambda: {})() for c in tuner.configs] if tuner else [{}]
    config_names = {name for cfg in configs for name in cfg}
    tuned_keys: set = set()
    by_key: dict[str, PredictedVariant] = {}
    order: list[PredictedVariant] = []
    decoded: list[keys.Variant] = []
    for i, call in enumerate(calls):
        args, kwargs = _split_call(call)
        chosen = range(len(configs))
        if tuner is not None:
            named = {**dict(zip(arg_names, args)), **kwargs}
            tkey = tuple(named.get(k) for k in tuner.keys) + tuple(
                str(v.dtype) for v in named.values() if hasattr(v, "dtype"))
            benchmarking = tkey not in tuned_keys
            tuned_keys.add(tkey)
            chosen = range(len(configs)) if benchmarking else range(1)
        for c in chosen:
            cfg = configs[c]
            kw = dict(kwargs)
            kw.update(cfg)
            for h in reversed(heuristics):  # innermost heuristics see the outer ones' results
                named = {**dict(zip(arg_names, args)), **kw}
                for name, fn in h.values.items():
                    kw[name] = fn(named)
            for name, value in implicit.items():
                if name == "debug":
                    kw["debug"] = kw.get("debug", getattr(jf, "debug", None)) or value
                else:
                    kw[name] = value
            try:
                key, text = compat.bind_key(binder, jf, args, kw)
            except TypeError as exc:
                raise TypeError(f"jitguard.predict: call {i} does not bind to {qual}: {exc}") from None
            v = by_key.get(key)
            if v is None:
                var = keys.decode_key(text, params)
                idx = keys.closest(var, decoded)
                entries = keys.diff(decoded[idx], var) if idx is not None else []
                keys.mark_config_changes(entries, config_names)
                v = PredictedVariant(key, var.params, var.options, [], idx, entries,
                                     keys.remedy(entries, decorator=compat.jit_decorator(jf)),
                                     config=c if tuner is not None else None,
                                     autotuning=tuner is not None and benchmarking)
                by_key[key] = v
                order.append(v)
                decoded.append(var)
            if not v.calls or v.calls[-1] != i:
                v.calls.append(i)
    return Prediction(qual, target, order)
