"""Kernel discovery: the one place that knows the shapes a Triton kernel definition can take.

Finds ``@triton.jit`` kernels through LibCST's qualified-name metadata (never by matching text), so
``import triton as tr`` / ``from triton import jit as tjit`` / a re-export such as
``from pkg.triton_utils import triton`` all resolve. Forms understood:

* ``@triton.jit`` and ``@triton.jit(...)`` on a function, possibly stacked with ``@triton.autotune``,
  ``@triton.heuristics`` and wrapper decorators (``@libentry()``), at module level, in a class
  (``@staticmethod``), or nested in a function;
* ``name = triton.jit(fn)``, ``name = triton.jit(fn, do_not_specialize=[...])``,
  ``name = triton.jit(**kw)(fn)`` and the same wrapped in autotune/heuristics/other calls, at module
  level or as a class attribute.

``iter_kernels`` yields a ``KernelSite`` holding the CST nodes, so the codemod (jitguard fix) edits
the nodes of exactly the kernels the linter reports. The scanner itself recognizes the same forms on
the stdlib ``ast`` (extract.py, for speed); tests/test_static_discovery.py checks both agree.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider

from jitguard.static.names import is_triton_name

JIT_NAMES = ("jit",)
AUTOTUNE_NAMES = ("autotune",)
HEURISTICS_NAMES = ("heuristics",)
DNS = "do_not_specialize"
DNSOA = "do_not_specialize_on_alignment"


@dataclass
class KernelSite:
    """One kernel definition and the nodes that make it a kernel.

    ``qualname`` is local to the module ("k", "Cls.k", "outer.<locals>.k"); ``name`` is the binding
    launches use. ``jit`` is the decorator (form "decorator") or the ``triton.jit(...)`` call (form
    "call"); ``jit_call`` is the call that carries jit keywords (``@triton.jit(...)``'s call, or the
    call holding ``do_not_specialize=``), None for a bare ``@triton.jit``.
    """

    qualname: str
    name: str
    function: cst.FunctionDef
    form: str  # "decorator" | "call"
    jit: cst.CSTNode
    jit_call: cst.Call | None
    autotune: cst.Call | None = None
    heuristics: list[cst.Call] = field(default_factory=list)
    do_not_specialize: cst.Arg | None = None
    do_not_specialize_on_alignment: cst.Arg | None = None
    statement: cst.CSTNode | None = None  # the Assign for form "call"
    class_name: str | None = None


def _qnames(qmap: Mapping, node: cst.CSTNode) -> set[str]:
    value = qmap.get(node)
    if value is None:
        return set()
    if callable(value) and not isinstance(value, (set, frozenset)):
        value = value()
    return {q.name for q in value}




def _kwarg(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


class _Resolver:
    def __init__(self, wrapper: MetadataWrapper):
        self.qmap = wrapper.resolve(QualifiedNameProvider)

    def names(self, node: cst.CSTNode) -> set[str]:
        return _qnames(self.qmap, node)

    def kind(self, expr: cst.BaseExpression) -> str | None:
        """'jit' / 'autotune' / 'heuristics' for an expression naming that triton function."""
        if not isinstance(expr, (cst.Name, cst.Attribute)):
            return None
        names = self.names(expr)
        if is_triton_name(names, JIT_NAMES):
            return "jit"
        if is_triton_name(names, AUTOTUNE_NAMES):
            return "autotune"
        if is_triton_name(names, HEURISTICS_NAMES):
            return "heuristics"
        return None


class _Collector(cst.CSTVisitor):
    def __init__(self, resolver: _Resolver):
        self.r = resolver
        self.sites: list[KernelSite] = []
        self.scope: list[tuple[str, str]] = []  # ("class"|"def", name)
        self.functions: dict[str, cst.FunctionDef] = {}  # local qualname -> def
        self.pending: list[tuple[str, str, cst.Call, cst.CSTNode, str | None]] = []
        self._prefixes_for_pending: list[str] = []

    def _prefix(self) -> str:
        parts = []
        for kind, name in self.scope:
            parts.append(name if kind == "class" else f"{name}.<locals>")
        return ".".join(parts)

    def _qual(self, name: str) -> str:
        prefix = self._prefix()
        return f"{prefix}.{name}" if prefix else name

    def _class_name(self) -> str | None:
        return self.scope[-1][1] if self.scope and self.scope[-1][0] == "class" else None

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope.append(("class", node.name.value))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        qual = self._qual(node.name.value)
        self.functions[qual] = node
        site = self._decorated(node, qual)
        if site is not None:
            self.sites.append(site)
        self.scope.append(("def", node.name.value))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scope.pop()

    def _decorated(self, node: cst.FunctionDef, qual: str) -> KernelSite | None:
        jit_dec = None
        jit_call = None
        autotune = None
        heuristics: list[cst.Call] = []
        for dec in node.decorators:
            expr = dec.decorator
            call = expr if isinstance(expr, cst.Call) else None
            kind = self.r.kind(call.func if call is not None else expr)
            if kind == "jit" and jit_dec is None:
                jit_dec, jit_call = dec, call
            elif kind == "autotune" and call is not None and autotune is None:
                autotune = call
            elif kind == "heuristics" and call is not None:
                heuristics.append(call)
        if jit_dec is None:
            return None
        return KernelSite(
            qualname=qual,
            name=node.name.value,
            function=node,
            form="decorator",
            jit=jit_dec,
            jit_call=jit_call,
            autotune=autotune,
            heuristics=heuristics,
            do_not_specialize=_kwarg(jit_call, DNS) if jit_call is not None else None,
            do_not_specialize_on_alignment=_kwarg(jit_call, DNSOA) if jit_call is not None else None,
            class_name=self._class_name(),
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        if not isinstance(node.value, cst.Call):
            return
        self.pending.append(
            (self._qual(node.targets[0].target.value), node.targets[0].target.value, node.value, node,
             self._class_name())
        )
        # the function the call wraps is looked up after the walk (it may be defined later in a class)
        self._prefixes_for_pending.append(self._prefix())

    def unwrap(self, call: cst.Call) -> tuple[cst.Name, cst.Call, cst.Call | None, list[cst.Call]] | None:
        """For ``[autotune(...)(][heuristics(...)(]triton.jit[(kw)](fn[, kw])...``: (fn name node,
        jit node, jit call carrying keywords, wrapper calls outermost first)."""
        wrappers: list[cst.Call] = []
        expr: cst.BaseExpression = call
        for _ in range(8):
            if not isinstance(expr, cst.Call):
                return None
            func = expr.func
            kind = self.r.kind(func)
            if kind == "jit":
                # triton.jit(fn, **kw)
                if expr.args and expr.args[0].keyword is None and isinstance(expr.args[0].value, cst.Name):
                    return expr.args[0].value, expr, expr, wrappers
                return None
            if isinstance(func, cst.Call) and self.r.kind(func.func) == "jit":
                # triton.jit(**kw)(fn)
                if expr.args and isinstance(expr.args[0].value, cst.Name):
                    return expr.args[0].value, expr, func, wrappers
                return None
            # a wrapper: autotune(...)(inner), heuristics(...)(inner), libentry()(inner), wrap(inner)
            positional = [a for a in expr.args if a.keyword is None and a.star == ""]
            if len(positional) != 1:
                return None
            wrappers.append(func if isinstance(func, cst.Call) else expr)
            expr = positional[0].value
        return None

    def finish(self) -> None:
        for (qual, name, call, stmt, cls_name), prefix in zip(self.pending, self._prefixes_for_pending):
            found = self.unwrap(call)
            if found is None:
                continue
            fn_name, jit_node, jit_call, wrappers = found
            fn_qual = f"{prefix}.{fn_name.value}" if prefix else fn_name.value
            fn = self.functions.get(fn_qual) or self.functions.get(fn_name.value)
            if fn is None:
                continue
            autotune = None
            heuristics = []
            for w in wrappers:
                kind = self.r.kind(w.func) if isinstance(w, cst.Call) else None
                if kind == "autotune" and autotune is None:
                    autotune = w
                elif kind == "heuristics":
                    heuristics.append(w)
            # a function decorated with @triton.jit and re-wrapped (k2 = autotune(...)(k)) is an alias
            if any(s.function is fn and s.form == "decorator" for s in self.sites):
                continue
            kw_call = jit_call if (jit_call is not None and any(a.keyword is not None for a in jit_call.args)) else None
            self.sites.append(
                KernelSite(
                    qualname=qual,
                    name=name,
                    function=fn,
                    form="call",
                    jit=jit_node,
                    jit_call=kw_call,
                    autotune=autotune,
                    heuristics=heuristics,
                    do_not_specialize=_kwarg(jit_call, DNS) if jit_call is not None else None,
                    do_not_specialize_on_alignment=_kwarg(jit_call, DNSOA) if jit_call is not None else None,
                    statement=stmt,
                    class_name=cls_name,
                )
            )


def iter_kernels(wrapper: MetadataWrapper) -> Iterator[KernelSite]:
    """Every Triton kernel defined in the module wrapped by ``wrapper``, in source order."""
    collector = _Collector(_Resolver(wrapper))
    wrapper.visit(collector)
    collector.finish()
    pos = wrapper.resolve(PositionProvider)
    sites = collector.sites
    sites.sort(key=lambda s: (pos[s.function].start.line if s.form == "decorator" else pos[s.statement].start.line))
    yield from sites


__all__ = ["KernelSite", "iter_kernels", "is_triton_name", "DNS", "DNSOA"]
