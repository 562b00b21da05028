"""Small readers of ``ast`` nodes the classifier shares: integer literals, a call's short name, the
return statements of a function's own body, loops that stop at the first candidate that works."""
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


def is_none(node: ast.AST | None) -> bool:
    """``node`` is the literal ``None``."""
    return isinstance(node, ast.Constant) and node.value is None


def pow2_form(e: ast.AST) -> bool:
    """``1 << k`` or ``2 ** k``: a power of two by how it is written (rules bucket and pow2-floor)."""
    return isinstance(e, ast.BinOp) and ((isinstance(e.op, ast.LShift) and int_literal(e.left) == 1)
                                         or (isinstance(e.op, ast.Pow) and int_literal(e.left) == 2))


def batch_of_one(node: ast.AST) -> bool:
    """``x.unsqueeze(0)``, ``x[None]``, ``x[None, ...]``, ``x[None, :]``: a new leading dim of size 1."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "unsqueeze":
        return len(node.args) == 1 and not node.keywords and int_literal(node.args[0]) == 0
    if isinstance(node, ast.Subscript):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return is_none(parts[0]) and all(
            is_none(p) or (isinstance(p, ast.Constant) and p.value is Ellipsis)
            or (isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None)
            for p in parts[1:])
    return False


def _call_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


# fields that hold no node but contexts and operators (``ast.Load``, ``ast.Add``, ``ast.Lt``), or
# none at all (identifiers, flags); a class's other fields, in ``_fields`` order, made on first need
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "name", "kind", "conversion", "is_async",
                          "type_comment", "level", "module"})
NODE_FIELDS: dict[type, tuple[str, ...]] = {}  # node class -> node_fields(class), filled on first use


def node_fields(cls: type) -> tuple[str, ...]:
    """The fields of AST class ``cls`` that may hold a node other than a context or an operator."""
    names = NODE_FIELDS.get(cls)
    if names is None:
        names = NODE_FIELDS[cls] = tuple(n for n in cls._fields if n not in _LEAF_FIELDS)
    return names


def walk(node: ast.AST) -> list[ast.AST]:
    """The nodes of ``ast.walk(node)`` in its breadth-first order, less the expression contexts and
    operators (leaves that no question of the classifier asks for), without its generators."""
    out = [node]
    append, extend, AST, table = out.append, out.extend, ast.AST, NODE_FIELDS
    i = 0
    while i < len(out):
        sub = out[i]
        i += 1
        names = table.get(sub.__class__) or node_fields(sub.__class__)
        for name in names:
            v = getattr(sub, name, None)
            if isinstance(v, AST):
                append(v)
            elif v.__class__ is list:
                extend([x for x in v if isinstance(x, AST)])
    return out


def per_node(memo: dict, node: ast.AST, make):
    """``make(node)``, made once per node in ``memo`` (keyed by ``id(node)``). The node is kept beside
    its answer, so an id is never reused while its entry lives (and a reused one is made again)."""
    got = memo.get(id(node))
    if got is None or got[0] is not node:
        got = memo[id(node)] = (node, make(node))
    return got[1]


def walked(node: ast.AST) -> tuple[ast.AST, ...]:
    """``walk(node)`` as a tuple, for ``per_node`` tables."""
    return tuple(walk(node))


def names_read(node: ast.AST) -> frozenset[str]:
    """The identifiers of every ``ast.Name`` inside ``node`` (itself included)."""
    return frozenset(n.id for n in walk(node) if isinstance(n, ast.Name))


def _inner_statements(st: ast.AST) -> list[ast.stmt]:
    """A statement's own statements: its ``body``, ``orelse``, ``finalbody``, then its handlers' and
    cases' bodies, in this order of ``_fields``."""
    out = []
    for attr in ("body", "orelse", "finalbody"):
        out.extend(getattr(st, attr, ()))
    for attr in ("handlers", "cases"):
        for h in getattr(st, attr, []) or []:
            out.extend(h.body)
    return out


def statements(node: ast.AST) -> list[ast.stmt]:
    """Every statement inside ``node`` (nested functions and classes included, as ``ast.walk`` finds
    them), without walking expressions."""
    out = []
    stack = list(getattr(node, "body", ()))
    while stack:
        st = stack.pop()
        out.append(st)
        stack.extend(_inner_statements(st))
    return out


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
        stack.extend(_inner_statements(st))
    return out


def stops_at_first_success(loop: ast.AST) -> bool:
    """``for c in candidates: try: launch(c) except E: continue`` then ``break`` (or ``return``): the
    loop ends at the first candidate whose attempt goes through. The attempt is a ``try`` with
    handlers in the loop's body (or in a ``with`` block there) whose body reads a loop variable;
    success leaves the loop: the ``try`` body or its ``else`` ends in ``break``/``return``, or one
    follows the ``try`` in the same block."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    return _attempt_then_exit(loop.body, names)


def _exits(stmts: list) -> bool:
    return bool(stmts) and isinstance(stmts[-1], (ast.Break, ast.Return))


def _attempt_then_exit(stmts: list, names: set[str]) -> bool:
    for i, st in enumerate(stmts):
        if isinstance(st, (ast.With, ast.AsyncWith)) and _attempt_then_exit(st.body, names):
            return True
        if not isinstance(st, ast.Try) and type(st).__name__ != "TryStar":
            continue
        if not st.handlers or not any(isinstance(n, ast.Name) and n.id in names
                                      for b in st.body for n in ast.walk(b)):
            continue
        if _exits(st.body) or _exits(st.orelse) or any(isinstance(x, (ast.Break, ast.Return)) for x in stmts[i + 1:]):
            return True
    return False
