"""One recursive pass over a module: its scopes (names.Scope), functions with their parameters and
every assignment of each local, calls, module constants, classes, and alias candidates."""
from __future__ import annotations

import ast
from collections import deque
from typing import NamedTuple

from jitguard.static.names import LOCAL, Scope, add_import, dotted, qualified, resolve_relative
from jitguard.static.provenance.bindings import Entry, FunctionInfo, ModuleInfo, ParamInfo, Record
from jitguard.static.provenance.syntax import NODE_FIELDS, int_literal, node_fields


_RECORD_DECORATORS = {"dataclass", "define", "frozen", "mutable", "attrs", "s"}
_ATTRS_MODULES = {"attr", "attrs"}


def _record(cls: ast.ClassDef) -> Record | None:
    """A dataclass, NamedTuple or attrs class: its fields in the order positional arguments of its
    constructor fill them (annotated names; ``x = attr.ib()`` for ``@attr.s``), with the defaults
    written in the body; None for another class."""
    def is_record_decorator(d) -> bool:
        parts = dotted(d.func if isinstance(d, ast.Call) else d)
        if not parts or parts[-1] not in _RECORD_DECORATORS:
            return False
        # attr.s / attrs.define / dataclasses.dataclass; a bare `s` or `attrs` is someone else's
        return parts[-1] in ("dataclass", "define", "frozen", "mutable") or parts[0] in _ATTRS_MODULES

    if not (any(is_record_decorator(d) for d in cls.decorator_list)
            or any(dotted(b) and dotted(b)[-1] == "NamedTuple" for b in cls.bases)):
        return None
    rec = Record(cls.name, [])
    for st in cls.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            ann = dotted(st.annotation.value if isinstance(st.annotation, ast.Subscript) else st.annotation)
            if ann and ann[-1] in ("ClassVar", "InitVar", "KW_ONLY"):
                continue
            name, value = st.target.id, st.value
        elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                and isinstance(st.value, ast.Call) and (dotted(st.value.func) or [""])[-1] in ("ib", "attrib", "field"):
            name, value = st.targets[0].id, st.value
        else:
            continue
        rec.fields.append(name)
        if isinstance(value, ast.Call) and (dotted(value.func) or [""])[-1] in ("ib", "attrib", "field"):
            value = next((kw.value for kw in value.keywords if kw.arg == "default"), None)
        if value is not None:
            rec.defaults[name] = value
    return rec


class _Layout(NamedTuple):
    """What a tuple unpacking reads: the dims (``x.shape``, ``x.size()``) or strides (``x.stride()``)
    of ``tensor`` from index ``start`` (negative: counted from the end) up to ``stop`` (None: the end)."""

    tensor: ast.AST
    kind: str  # "dim" | "stride"
    start: int = 0
    stop: int | None = None


def _shape_source(value) -> _Layout | None:
    """``x.shape`` / ``x.size()`` / ``x.stride()``, whole or sliced by literals (``x.shape[:k]``,
    ``x.shape[a:]``, ``x.shape[-2:]``, ``x.stride()[-3:-1]``)."""
    if isinstance(value, ast.Attribute) and value.attr == "shape":
        return _Layout(value.value, "dim")
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("size", "stride") \
            and not value.args and not value.keywords:
        return _Layout(value.func.value, "dim" if value.func.attr == "size" else "stride")
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice) and value.slice.step is None:
        inner = _shape_source(value.value)
        lower, upper = value.slice.lower, value.slice.upper
        start = 0 if lower is None else int_literal(lower)
        stop = None if upper is None else int_literal(upper)
        if inner is None or inner.start or inner.stop is not None or start is None or (upper is not None and stop is None):
            return None  # a slice of a slice, or bounds the code computes
        return inner._replace(start=start, stop=stop)
    return None


_AST = ast.AST
# methods that change a list, dict or set in place
_MUTATORS = frozenset({"append", "insert", "extend", "pop", "remove", "clear", "update", "setdefault", "add",
                       "discard", "popitem", "sort", "reverse"})
_LEAVES = (ast.expr_context, ast.operator, ast.cmpop, ast.unaryop, ast.boolop, ast.Constant)

class Walker:
    """One recursive pass: scopes, functions (params, assignments), calls, kernel candidates."""

    def __init__(self, module: str, is_package: bool):
        self.module = module
        self.is_package = is_package
        self.info = ModuleInfo()
        self.imports: dict[str, str] = {}
        self.alias_values: list[tuple[str, ast.AST, Scope]] = []  # (qualname, value, scope)
        self.calls: list[tuple[ast.Call, Scope, FunctionInfo | None]] = []
        self.functions: list[tuple[ast.AST, Scope, FunctionInfo]] = []
        self.assign_calls: list[tuple[ast.Assign, Scope]] = []
        self.defs: dict[tuple[int, str], ast.AST] = {}  # (id(scope), name) -> FunctionDef
        self.classes: dict[str, ast.ClassDef] = {}  # module-level classes
        # id of each function node with a ``return`` of a 2- or 3-tuple in its own body (launches.py
        # looks for ``return grid, dict(...)`` in those only)
        self.tuple_returns: set[int] = set()

    def run(self, tree: ast.Module) -> Scope:
        top = Scope("module", "", None)
        self.body(tree.body, top, None)
        self.constructor_fields()
        return top

    def constructor_fields(self) -> None:
        """``Meta(step=value)`` (and positionally, for a dataclass, NamedTuple or attrs class's fields)
        with ``Meta`` a class of this module: ``value`` is one of the values ``<obj>.step`` reads;
        a record class's constructor calls are kept with it (``Record.calls``)."""
        for name, cls in self.classes.items():
            rec = _record(cls)
            if rec is not None:
                self.info.records[name] = rec
        for call, scope, fn in self.calls:
            name = call.func.id if isinstance(call.func, ast.Name) else None
            cls = self.classes.get(name) if name else None
            if cls is None or qualified(call.func, scope) != [(name, LOCAL)]:
                continue
            for kw in call.keywords:
                if kw.arg is not None:
                    self.info.attrs.setdefault(kw.arg, []).append((kw.value, fn, call.lineno))
            rec = self.info.records.get(name)
            if rec is not None:
                rec.calls.append((call, fn))
            if call.args:
                if rec is None or any(isinstance(a, ast.Starred) for a in call.args):
                    continue
                for field_name, a in zip(rec.fields, call.args):
                    self.info.attrs.setdefault(field_name, []).append((a, fn, call.lineno))

    def body(self, stmts, scope: Scope, fn: FunctionInfo | None) -> None:
        for st in stmts:
            self.stmt(st, scope, fn)

    # ---- statements ----
    def stmt(self, st: ast.stmt, scope: Scope, fn: FunctionInfo | None) -> None:
        # the commonest kinds first (vLLM: Assign 29%, Expr 15%, If 13%, Return 9% of statements)
        if isinstance(st, ast.Assign):
            self.exprs(st.value, scope, fn)
            for t in st.targets:
                self.bind(t, st.value, scope, fn, st.lineno)
            if len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.Call):
                self.assign_calls.append((st, scope))
        elif isinstance(st, ast.Expr):
            self.exprs(st.value, scope, fn)
        elif isinstance(st, ast.If):
            self.exprs(st.test, scope, fn)
            self.body(st.body, scope, fn)
            self.body(st.orelse, scope, fn)
        elif isinstance(st, ast.Return):
            if st.value is not None:
                if fn is not None and isinstance(st.value, ast.Tuple) and 2 <= len(st.value.elts) <= 3:
                    self.tuple_returns.add(id(fn.node))
                self.exprs(st.value, scope, fn)
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.function(st, scope, fn)
        elif isinstance(st, ast.AnnAssign):
            if st.value is not None:
                self.exprs(st.value, scope, fn)
                self.bind(st.target, st.value, scope, fn, st.lineno)
        elif isinstance(st, (ast.Import, ast.ImportFrom)):
            add_import(scope, st)
            names = [a.asname or a.name.split(".")[0] for a in st.names if a.name != "*"] if isinstance(st, ast.Import) \
                else [a.asname or a.name for a in st.names if a.name != "*"]
            if scope.kind == "module":
                for local in names:
                    self.info.imported.add(local)
                    self.imports[local] = resolve_relative(scope.imports[local], self.module, self.is_package)
            elif fn is not None and scope.kind == "function":
                fn.imported.update(names)
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            self.exprs(st.iter, scope, fn)
            self.loop_target(st.target, scope, fn, st.lineno, st.iter, st)
            self.body(st.body, scope, fn)
            self.body(st.orelse, scope, fn)
        elif isinstance(st, ast.ClassDef):
            if scope.kind == "module":
                self.classes[st.name] = st
            scope.defs.add(st.name)
            self.bind_plain(st.name, scope, fn)
            for node in st.decorator_list + st.bases + [k.value for k in st.keywords]:
                self.exprs(node, scope, fn)
            self.body(st.body, Scope("class", st.name, scope), fn)
        elif isinstance(st, ast.AugAssign):
            self.exprs(st.value, scope, fn)
            self.mutated(st.target, fn)
            if isinstance(st.target, ast.Name) and fn is not None and scope.kind == "function":
                fn.assigns.setdefault(st.target.id, []).append(Entry("aug", st.value, line=st.lineno))
        elif isinstance(st, ast.While):
            self.exprs(st.test, scope, fn)
            self.body(st.body, scope, fn)
            self.body(st.orelse, scope, fn)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            for item in st.items:
                self.exprs(item.context_expr, scope, fn)
                if item.optional_vars is not None:
                    self.opaque(item.optional_vars, scope, fn)
            self.body(st.body, scope, fn)
        elif isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
            self.body(st.body, scope, fn)
            for h in st.handlers:
                if h.name:
                    self.bind_plain(h.name, scope, fn)
                self.body(h.body, scope, fn)
            self.body(st.orelse, scope, fn)
            self.body(st.finalbody, scope, fn)
        elif isinstance(st, ast.Global):
            self.info.rebound.update(st.names)  # rebinds a module-level name after import
        elif isinstance(st, ast.Delete):
            for t in st.targets:
                self.mutated(t, fn)
                self.exprs(t, scope, fn)
        elif type(st).__name__ == "Match":
            self.exprs(st.subject, scope, fn)
            for case in st.cases:
                for node in ast.walk(case.pattern):
                    for attr in ("name", "rest"):
                        captured = getattr(node, attr, None)
                        if isinstance(captured, str):
                            self.bind_plain(captured, scope, fn)
                if case.guard is not None:
                    self.exprs(case.guard, scope, fn)
                self.body(case.body, scope, fn)
        else:
            for child in ast.iter_child_nodes(st):
                if isinstance(child, ast.expr):
                    self.exprs(child, scope, fn)

    def function(self, st, scope: Scope, fn: FunctionInfo | None) -> None:
        scope.defs.add(st.name)
        self.defs[(id(scope), st.name)] = st
        for node in st.decorator_list + st.args.defaults + [d for d in st.args.kw_defaults if d is not None]:
            self.exprs(node, scope, fn)
        in_class = scope.kind == "class"
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in st.decorator_list)
        prefix = scope.prefix
        info = FunctionInfo(qual=f"{prefix}.{st.name}" if prefix else st.name, name=st.name, node=st,
                            class_name=scope.name if in_class else None, is_method=in_class and not static,
                            parent=fn)
        a = st.args
        ordered = list(a.posonlyargs) + list(a.args)
        n_def = len(a.defaults)
        defaults = [None] * (len(ordered) - n_def) + list(a.defaults)
        skip = 1 if info.is_method and ordered else 0
        for i, (arg, dflt) in enumerate(list(zip(ordered, defaults))[skip:]):
            info.params[arg.arg] = ParamInfo(arg.arg, i, dflt, arg.annotation, "pos")
        for arg, dflt in zip(a.kwonlyargs, a.kw_defaults):
            info.params[arg.arg] = ParamInfo(arg.arg, -1, dflt, arg.annotation, "kwonly")
        for star in (a.vararg, a.kwarg):
            if star is not None:
                info.params[star.arg] = ParamInfo(star.arg, -1, None, None, "star")
        if fn is not None and scope.kind == "function":
            fn.assigns.setdefault(st.name, []).append(Entry("opaque"))
        self.info.functions.setdefault(info.qual, info)
        child = Scope("function", st.name, scope)
        child.defs.update(info.params)
        info.scope = child
        self.functions.append((st, scope, info))
        self.body(st.body, child, info)

    # ---- bindings ----
    def bind_plain(self, name: str, scope: Scope, fn: FunctionInfo | None) -> None:
        if scope.kind == "function" and fn is not None:
            fn.assigns.setdefault(name, []).append(Entry("opaque"))
        else:
            scope.defs.add(name)

    def bind(self, target: ast.AST, value: ast.AST | None, scope: Scope, fn: FunctionInfo | None, line: int) -> None:
        if isinstance(target, ast.Name):
            name = target.id
            if scope.kind == "module":
                scope.defs.add(name)
                if value is not None:
                    self.info.constants[name] = value
                    self.alias_values.append((name, value, scope))
            elif scope.kind == "class":
                scope.defs.add(name)
                if value is not None:
                    self.alias_values.append((f"{scope.prefix}.{name}", value, scope))
            elif fn is not None:
                fn.assigns.setdefault(name, []).append(Entry("expr" if value is not None else "opaque", value, line=line))
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            els = target.elts
            if scope.kind != "function" or fn is None:
                for el in els:
                    self.bind(el.value if isinstance(el, ast.Starred) else el, None, scope, fn, line)
                return
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(els) and not any(
                isinstance(e, ast.Starred) for e in list(value.elts) + list(els)
            ):
                for t, v in zip(els, value.elts):
                    self.bind(t, v, scope, fn, line)
                return
            if isinstance(value, (ast.Tuple, ast.List)) and value.elts and isinstance(value.elts[0], ast.Starred) \
                    and not any(isinstance(e, ast.Starred) for e in list(value.elts[1:]) + list(els)) \
                    and len(els) > len(value.elts) - 1:
                # B, T, H, K, V = *k.shape, v.shape[-1]: the leading targets unpack k's shape
                rest = value.elts[1:]
                head = els[:len(els) - len(rest)]
                self.bind(ast.copy_location(ast.Tuple(elts=head, ctx=ast.Store()), target), value.elts[0].value,
                          scope, fn, line)
                for t, v in zip(els[len(head):], rest):
                    self.bind(t, v, scope, fn, line)
                return
            shape_of = _shape_source(self.shape_alias(value, fn)) if value is not None else None
            if shape_of is not None:
                self.unpack_layout(els, shape_of, scope, fn, line)
                return
            starred = any(isinstance(el, ast.Starred) for el in els)
            for i, el in enumerate(els):
                inner = el.value if isinstance(el, ast.Starred) else el
                if isinstance(inner, ast.Name):
                    index = None if starred else i
                    fn.assigns.setdefault(inner.id, []).append(Entry("item", value, index, line=line))
                else:
                    self.opaque(inner, scope, fn)
            return
        if isinstance(target, ast.Starred):
            self.opaque(target.value, scope, fn)
            return
        self.mutated(target, fn)
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self" \
                and value is not None and fn is not None and fn.class_name:
            cls_qual = fn.qual.rsplit(".", 1)[0]
            self.alias_values.append((f"{cls_qual}.{target.attr}", value, fn.scope))
        elif isinstance(target, ast.Attribute) and value is not None:
            root = target.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id not in ("self", "cls"):
                # metadata.step = value: what `<obj>.step` reads elsewhere in this module
                self.info.attrs.setdefault(target.attr, []).append((value, fn, line))

    def mutated(self, target: ast.AST, fn: FunctionInfo | None) -> None:
        """``X[k] = v`` / ``X[k] += v`` / ``del X[k]``: the object ``X`` names changes in place."""
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            self.mutated_name(target.value.id, fn)

    def mutated_name(self, name: str, fn: FunctionInfo | None) -> None:
        """``name`` changes in place here: a module-level one, unless a local or parameter of the
        function shadows it (``sizes = []; sizes.append(n)``)."""
        if fn is None:
            self.info.filled.add(name)  # at import: fixed for the process, but not its literal alone
            return
        f = fn
        while f is not None:
            if name in f.assigns or name in f.params:
                return
            f = f.parent
        self.info.rebound.add(name)

    def unpack_layout(self, els: list, src: _Layout, scope: Scope, fn: FunctionInfo, line: int) -> None:
        """``a, b = x.shape`` / ``*_, t, d = x.shape`` / ``m, n = x.shape[-2:]`` / ``s0, s1 = x.stride()``:
        each name is one dim (or stride) of ``x``, its index counted from the start of the slice, or
        (after a starred target) back from its end."""
        star = [i for i, el in enumerate(els) if isinstance(el, ast.Starred)]
        n = len(els)
        whole = src.start == 0 and src.stop is None
        for i, el in enumerate(els):
            if isinstance(el, ast.Starred) or not isinstance(el, ast.Name):
                self.opaque(el.value if isinstance(el, ast.Starred) else el, scope, fn)
                continue
            if star and i > star[0]:
                if src.stop == 0:
                    self.opaque(el, scope, fn)
                    continue
                # *_, t = x.shape: t is the last dim; *_, t = x.shape[:3]: the last of the first three
                idx, ndim = -(n - i) + (src.stop or 0), None
            else:
                idx, ndim = i + src.start, (n if whole and not star else None)
            if src.kind == "stride":
                fn.assigns.setdefault(el.id, []).append(Entry("stride", src.tensor, idx, line))
            else:
                fn.assigns.setdefault(el.id, []).append(Entry("dim", src.tensor, idx, line, ndim))

    @staticmethod
    def shape_alias(value: ast.AST, fn: FunctionInfo) -> ast.AST:
        """``s = x.shape`` earlier in the function: ``s`` / ``s[:2]`` stand for ``x.shape`` / ``x.shape[:2]``."""
        name = value.value if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice) else value
        if not isinstance(name, ast.Name):
            return value
        entries = fn.assigns.get(name.id, [])
        if len(entries) != 1 or entries[0].kind != "expr" or _shape_source(entries[0].node) is None \
                or isinstance(entries[0].node, ast.Subscript):
            return value
        if name is value:
            return entries[0].node
        return ast.Subscript(value=entries[0].node, slice=value.slice, ctx=ast.Load())

    def opaque(self, target: ast.AST, scope: Scope, fn: FunctionInfo | None) -> None:
        if isinstance(target, ast.Name):
            self.bind_plain(target.id, scope, fn)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for el in target.elts:
                self.opaque(el, scope, fn)
        elif isinstance(target, ast.Starred):
            self.opaque(target.value, scope, fn)

    def loop_target(self, target: ast.AST, scope: Scope, fn: FunctionInfo | None, line: int, it: ast.AST | None,
                    loop: ast.AST | None = None) -> None:
        if scope.kind != "function" or fn is None:
            self.opaque(target, scope, fn)
            return
        if isinstance(target, ast.Name):
            fn.assigns.setdefault(target.id, []).append(Entry("loop", it, line=line, stmt=loop))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for el in target.elts:
                self.loop_target(el, scope, fn, line, it, loop)
        elif isinstance(target, ast.Starred):
            self.loop_target(target.value, scope, fn, line, it, loop)

    # the nodes that hold no call (a Name: its id and context; the fields walked are syntax.node_fields)
    _NO_CALL_NODES = _LEAVES + (ast.Name,)

    def exprs(self, node: ast.AST, scope: Scope, fn: FunctionInfo | None) -> None:
        # ast.walk's breadth-first order, without its generators and without the leaves that hold
        # no call (contexts, operators, names): the scan's hottest loop on kernel-dense files
        queue = deque((node,))
        popleft, push = queue.popleft, queue.append
        leaves, table = self._NO_CALL_NODES, NODE_FIELDS
        while queue:
            sub = popleft()
            names = table.get(sub.__class__)
            if names is None:
                names = node_fields(sub.__class__)
            for name in names:
                v = getattr(sub, name, None)
                if v.__class__ is list:
                    for x in v:
                        if isinstance(x, _AST) and not isinstance(x, leaves):
                            push(x)
                elif isinstance(v, _AST) and not isinstance(v, leaves):
                    push(v)
            if sub.__class__ is ast.Call:
                self.calls.append((sub, scope, fn))
                f = sub.func
                # lst.append(v): v is one of the values lst holds (cu = [0]; cu.append(cu[-1] + n))
                if f.__class__ is ast.Attribute and f.attr in _MUTATORS and f.value.__class__ is ast.Name:
                    self.mutated_name(f.value.id, fn)  # X.append(v): X changes in place
                    if f.attr in ("append", "insert") and sub.args and fn is not None and scope.kind == "function" \
                            and f.value.id in fn.assigns:
                        fn.assigns[f.value.id].append(Entry("aug", sub.args[-1], line=sub.lineno))
            elif sub.__class__ is ast.Subscript:
                if fn is not None and scope.kind == "function" and sub.slice.__class__ in (ast.Slice, ast.Tuple):
                    fn.slices.append(sub)  # buf[:n]: n may be a live count (provenance rule live-slice)
            elif sub.__class__ is ast.NamedExpr and isinstance(sub.target, ast.Name):
                if scope.kind == "function" and fn is not None:
                    fn.assigns.setdefault(sub.target.id, []).append(Entry("expr", sub.value, line=sub.lineno))
