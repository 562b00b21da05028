"""Small readers of ``ast`` nodes the classifier shares: integer literals, a call's short name."""
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
