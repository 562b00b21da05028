"""Structural name resolution on the stdlib ``ast``: what does ``tr.jit`` or ``ops.kernel`` name?

Follows ``import x.y as z``, ``from x import y as z`` (relative ones too) and module-level
definitions, per scope (a function's own imports shadow the module's). Kernels are discovered here
only: the codemod locates each one by the position the scan recorded (static/codemod.py).
"""
from __future__ import annotations

import ast

LOCAL = "local"
IMPORT = "import"


def dotted(expr: ast.AST) -> list[str] | None:
    """``a.b.c`` -> ['a', 'b', 'c']; None for anything that isn't a Name/Attribute chain."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return parts[::-1]


def resolve_relative(name: str, module: str, is_package: bool) -> str:
    """'.ops.k' seen in module 'pkg.sub.mod' -> 'pkg.sub.ops.k'."""
    if not name.startswith("."):
        return name
    level = len(name) - len(name.lstrip("."))
    rest = name[level:]
    parts = module.split(".") if module else []
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)] if len(parts) >= level - 1 else []
    base = ".".join(parts)
    if not rest:
        return base
    return f"{base}.{rest}" if base else rest


class Scope:
    """Bindings of one module, class or function body."""

    def __init__(self, kind: str, name: str, parent: "Scope | None"):
        self.kind = kind  # "module" | "class" | "function"
        self.name = name
        self.parent = parent
        self.imports: dict[str, str] = {}  # local name -> dotted target (relative kept as '.x')
        # local name -> the targets of earlier imports of it in this scope (``if rocm: from .a import f
        # else: from .b import f``): a call of ``f`` may call any of them
        self.earlier_imports: dict[str, list[str]] = {}
        self.defs: set[str] = set()  # names bound by def/class/assignment

    @property
    def prefix(self) -> str:
        """Qualified prefix of names defined in this scope ('' at module level)."""
        parts = []
        s: Scope | None = self
        while s is not None and s.kind != "module":
            parts.append(s.name if s.kind == "class" else f"{s.name}.<locals>")
            s = s.parent
        return ".".join(reversed(parts))


def _bind_import(scope: Scope, local: str, target: str) -> None:
    old = scope.imports.get(local)
    if old is not None and old != target:
        earlier = scope.earlier_imports.setdefault(local, [])
        if old not in earlier:
            earlier.append(old)
    scope.imports[local] = target


def add_import(scope: Scope, node: ast.AST) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                _bind_import(scope, alias.asname, alias.name)
            else:
                root = alias.name.split(".")[0]
                _bind_import(scope, root, root)
    elif isinstance(node, ast.ImportFrom):
        base = "." * (node.level or 0) + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                continue
            local = alias.asname or alias.name
            if base.endswith("."):
                _bind_import(scope, local, base + alias.name)
            else:
                _bind_import(scope, local, f"{base}.{alias.name}" if base else alias.name)


def _binding_scope(root: str, scope: Scope) -> tuple[Scope, str] | None:
    """The scope that binds ``root`` as seen from ``scope`` and how (IMPORT or LOCAL); None when no
    scope does. Class scopes are skipped for lookups from inside their methods, as Python does."""
    s: Scope | None = scope
    first = True
    while s is not None:
        if s.kind == "class" and not first:
            s = s.parent
            continue
        if root in s.imports:
            return s, IMPORT
        if root in s.defs:
            return s, LOCAL
        first = False
        s = s.parent
    return None


def earlier_imported(expr: ast.AST, scope: Scope) -> list[str]:
    """The other targets a Name/Attribute chain may name through earlier imports of its root in the
    scope that binds it (imports in the branches of an ``if``/``try``): [] for most names."""
    parts = dotted(expr)
    bound = _binding_scope(parts[0], scope) if parts is not None else None
    if bound is None or bound[1] != IMPORT:
        return []
    return [".".join([t] + parts[1:]) for t in bound[0].earlier_imports.get(parts[0], ())]


def qualified(expr: ast.AST, scope: Scope) -> list[tuple[str, str]]:
    """Qualified names of a Name/Attribute chain seen in ``scope``: [(name, LOCAL|IMPORT)].

    Class scopes are skipped for lookups from inside their methods, as Python does.
    """
    parts = dotted(expr)
    bound = _binding_scope(parts[0], scope) if parts is not None else None
    if bound is None:
        return []
    s, kind = bound
    if kind == IMPORT:
        return [(".".join([s.imports[parts[0]]] + parts[1:]), IMPORT)]
    return [(".".join(([s.prefix] if s.prefix else []) + parts), LOCAL)]


def is_triton_name(names, attrs: tuple[str, ...]) -> bool:
    """True if a qualified name is ``triton....<attr>`` (also through re-exports like
    ``pkg.triton_utils.triton.jit``): the last part is ``attr`` and a part before it is ``triton``.

    Gluon's ``jit`` (``triton.experimental.gluon.jit``) has ``triton`` in it; re-exported, as
    ``from pkg.triton_utils import gluon``, it is ``pkg.triton_utils.gluon.jit``: Triton's module
    name ``gluon`` right before ``jit`` (``is_gluon_name``)."""
    for q in names:
        parts = q.split(".")
        if len(parts) >= 2 and parts[-1] in attrs and "triton" in parts[:-1]:
            return True
    return "jit" in attrs and is_gluon_name(names)


def is_gluon_name(names) -> bool:
    """A qualified name of Gluon's ``jit``: ``triton.experimental.gluon.jit``, its re-exports
    (``pkg.gluon.jit``, ``from pkg import gluon``), ``from triton.experimental.gluon import jit``."""
    for q in names:
        parts = q.split(".")
        if len(parts) >= 2 and parts[-1] == "jit" and parts[-2] == "gluon":
            return True
        if parts[:3] == ["triton", "experimental", "gluon"] and parts[-1] == "jit":
            return True
    return False


def module_prefixes(name: str) -> list[str]:
    """``a.b.c.d`` -> ``["a.b.c", "a.b", "a"]``: the modules a dotted name may go through, longest first."""
    parts = name.split(".")
    return [".".join(parts[:cut]) for cut in range(len(parts) - 1, 0, -1)]


def reexport(name: str, modules) -> str | None:
    """One step through a re-export: ``pkg.k`` where ``pkg`` (the longest prefix of ``name`` that is a
    module in ``modules``, module name -> FileFacts) binds ``k`` by an import (``from .ops import k``)
    -> ``pkg.ops.k``; None when that module binds no such import."""
    for prefix in module_prefixes(name):
        f = modules.get(prefix)
        if f is None:
            continue
        head, _, rest = name[len(prefix) + 1:].partition(".")
        target = f.imports.get(head)
        if target is None or target == name:
            return None
        return f"{target}.{rest}" if rest else target
    return None
