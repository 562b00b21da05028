"""Small readers of ``ast`` nodes the classifier shares: integer literals, a call's short name, the
return statements of a function's own body."""
from __future__ import annotations

import ast


def _int_index(index: ast.AST) -> bool:
    """``x[0]`` or ``x[0, 1]``: integer literals only, so the result drops leading dimensions."""
    elts = index.elts if isinstance(index, ast.Tuple) else [index]
    return bool(elts) and all(int_literal(e) is not None for e in elts)


def int_literal(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = int_literal(node.operand)
        return -v if v is not None else None
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None


def _call_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def own_returns(fn_node: ast.AST) -> list[ast.Return]:
    """The ``return`` statements of a function's own body (those of nested functions and classes
    left out), through every compound statement, ``except`` handlers and ``match`` cases."""
    out = []
    stack = list(fn_node.body)
    while stack:
        st = stack.pop()
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(st, ast.Return):
            out.append(st)
            continue
        stack.extend(c for c in ast.iter_child_nodes(st) if isinstance(c, ast.stmt))
        for attr in ("handlers", "cases"):
            for h in getattr(st, attr, []) or []:
                stack.extend(h.body)
    return out
