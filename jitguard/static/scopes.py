"""One recursive pass over a module: its scopes (names.Scope), functions with their parameters and
every assignment of each local, calls, module constants, classes, and alias candidates."""
from __future__ import annotations

import ast
from collections import deque

from jitguard.static.names import LOCAL, Scope, add_import, dotted, qualified, resolve_relative
from jitguard.static.provenance.bindings import Entry, FunctionInfo, ModuleInfo, ParamInfo


def _record_fields(cls: ast.ClassDef) -> list[str] | None:
    """The annotated fields, in order, of a dataclass or NamedTuple (what positional arguments of
    its constructor fill); None for another class."""
    record = any(dotted(d.func if isinstance(d, ast.Call) else d) and
                 dotted(d.func if isinstance(d, ast.Call) else d)[-1] == "dataclass" for d in cls.decorator_list) \
        or any(dotted(b) and dotted(b)[-1] == "NamedTuple" for b in cls.bases)
    if not record:
        return None
    return [st.target.id for st in cls.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)]


def _shape_source(value) -> tuple[ast.AST, int] | None:
    """``x.shape`` / ``x.size()`` / ``x.shape[:k]`` / ``x.shape[a:]`` -> (x, index offset)."""
    if isinstance(value, ast.Attribute) and value.attr == "shape":
        return value.value, 0
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size" \
            and not value.args and not value.keywords:
        return value.func.value, 0
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice) and value.slice.step is None:
        inner = _shape_source(value.value)
        lower = value.slice.lower
        if inner is not None:
            if lower is None:
                return inner
            if isinstance(lower, ast.Constant) and isinstance(lower.value, int):
                return inner[0], inner[1] + lower.value
    return None



_AST = ast.AST
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

    def run(self, tree: ast.Module) -> Scope:
        top = Scope("module", "", None)
        self.body(tree.body, top, None)
        self.constructor_fields()
        return top

    def constructor_fields(self) -> None:
        """``Meta(step=value)`` (and positionally, for a dataclass or NamedTuple's annotated fields)
        with ``Meta`` a class of this module: ``value`` is one of the values ``<obj>.step`` reads."""
        fields: dict[str, list[str] | None] = {}
        for call, scope, fn in self.calls:
            name = call.func.id if isinstance(call.func, ast.Name) else None
            cls = self.classes.get(name) if name else None
            if cls is None or qualified(call.func, scope) != [(name, LOCAL)]:
                continue
            for kw in call.keywords:
                if kw.arg is not None:
                    self.info.attrs.setdefault(kw.arg, []).append((kw.value, fn, call.lineno))
            if call.args:
                if name not in fields:
                    fields[name] = _record_fields(cls)
                order = fields[name]
                if order is None or any(isinstance(a, ast.Starred) for a in call.args):
                    continue
                for field_name, a in zip(order, call.args):
                    self.info.attrs.setdefault(field_name, []).append((a, fn, call.lineno))

    def body(self, stmts, scope: Scope, fn: FunctionInfo | None) -> None:
        for st in stmts:
            self.stmt(st, scope, fn)

    # ---- statements ----
    def stmt(self, st: ast.stmt, scope: Scope, fn: FunctionInfo | None) -> None:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.function(st, scope, fn)
        elif isinstance(st, ast.ClassDef):
            if scope.kind == "module":
                self.classes[st.name] = st
            scope.defs.add(st.name)
            self.bind_plain(st.name, scope, fn)
            for node in st.decorator_list + st.bases + [k.value for k in st.keywords]:
                self.exprs(node, scope, fn)
            self.body(st.body, Scope("class", st.name, scope), fn)
        elif isinstance(st, ast.Assign):
            self.exprs(st.value, scope, fn)
            for t in st.targets:
                self.bind(t, st.value, scope, fn, st.lineno)
            if len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.Call):
                self.assign_calls.append((st, scope))
        elif isinstance(st, ast.AnnAssign):
            if st.value is not None:
                self.exprs(st.value, scope, fn)
                self.bind(st.target, st.value, scope, fn, st.lineno)
        elif isinstance(st, ast.AugAssign):
            self.exprs(st.value, scope, fn)
            if isinstance(st.target, ast.Name) and fn is not None and scope.kind == "function":
                fn.assigns.setdefault(st.target.id, []).append(Entry("aug", st.value, line=st.lineno))
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            self.exprs(st.iter, scope, fn)
            self.loop_target(st.target, scope, fn, st.lineno, st.iter)
            self.body(st.body, scope, fn)
            self.body(st.orelse, scope, fn)
        elif isinstance(st, ast.While):
            self.exprs(st.test, scope, fn)
            self.body(st.body, scope, fn)
            self.body(st.orelse, scope, fn)
        elif isinstance(st, ast.If):
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
                tensor, offset = shape_of
                star = [i for i, el in enumerate(els) if isinstance(el, ast.Starred)]
                n = len(els)
                for i, el in enumerate(els):
                    if isinstance(el, ast.Starred):
                        self.opaque(el.value, scope, fn)
                        continue
                    if not isinstance(el, ast.Name):
                        self.opaque(el, scope, fn)
                        continue
                    if star and i > star[0]:
                        idx, ndim = -(n - i), None
                    else:
                        idx, ndim = i + offset, (None if star or offset else n)
                    fn.assigns.setdefault(el.id, []).append(Entry("dim", tensor, idx, line, ndim))
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

    def loop_target(self, target: ast.AST, scope: Scope, fn: FunctionInfo | None, line: int, it: ast.AST | None) -> None:
        if scope.kind != "function" or fn is None:
            self.opaque(target, scope, fn)
            return
        if isinstance(target, ast.Name):
            fn.assigns.setdefault(target.id, []).append(Entry("loop", it, line=line))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for el in target.elts:
                self.loop_target(el, scope, fn, line, it)
        elif isinstance(target, ast.Starred):
            self.loop_target(target.value, scope, fn, line, it)

    # fields that never hold a node with a call inside (names, contexts, operators, flags), and the
    # nodes that hold none (a Name: its id and context)
    _NO_CALL_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "kind", "conversion", "is_async",
                                 "type_comment", "level", "module"})
    _NO_CALL_NODES = _LEAVES + (ast.Name,)
    _call_fields: dict[type, tuple[str, ...]] = {}  # node class -> the fields that may hold one

    def exprs(self, node: ast.AST, scope: Scope, fn: FunctionInfo | None) -> None:
        # ast.walk's breadth-first order, without its generators and without the leaves that hold
        # no call (contexts, operators, names): the scan's hottest loop on kernel-dense files
        queue = deque((node,))
        popleft, push = queue.popleft, queue.append
        table, leaves = self._call_fields, self._NO_CALL_NODES
        while queue:
            sub = popleft()
            names = table.get(sub.__class__)
            if names is None:
                names = table[sub.__class__] = tuple(n for n in sub._fields if n not in self._NO_CALL_FIELDS)
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
                if isinstance(f, ast.Attribute) and f.attr in ("append", "insert") and isinstance(f.value, ast.Name) \
                        and sub.args and fn is not None and scope.kind == "function" and f.value.id in fn.assigns:
                    fn.assigns[f.value.id].append(Entry("aug", sub.args[-1], line=sub.lineno))
            elif sub.__class__ is ast.NamedExpr and isinstance(sub.target, ast.Name):
                if scope.kind == "function" and fn is not None:
                    fn.assigns.setdefault(sub.target.id, []).append(Entry("expr", sub.value, line=sub.lineno))
