"""Source -> FileFacts: kernels (with parameter uses), launches (with argument provenance), imports,
aliases and inline suppressions of one file. The one entry point is ``extract_file``.

The scanner reads files with the stdlib ``ast`` (a C parser: ~20x faster than a LibCST parse, which
is what makes a vLLM-sized tree scan in seconds) and resolves names structurally through imports and
aliases (``names.py``), never by matching text. ``discover.py`` recognizes the same kernel forms on a
LibCST tree for the codemod; tests check that both agree.
"""
from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
import warnings

from jitguard.static.errors import SourceError
from jitguard.static import source as _source
from jitguard.static.facts import BUCKETED, METHOD_CALL, UNKNOWN, VARYING, ArgFacts, CallFacts, FileFacts, KernelFacts, LaunchFacts, ParamFacts
from jitguard.static.names import IMPORT, LOCAL, Scope, add_import, dotted, is_triton_name, qualified, resolve_relative
from jitguard.static.param_uses import analyze_uses
from jitguard.static.provenance import Classifier, Entry, FunctionInfo, ModuleInfo, ParamInfo, int_literal

# Callees from these packages are never wrappers of the scanned code's kernels: their calls are not
# recorded for the cross-module following of entry parameters.
_LIBRARY_ROOTS = frozenset(getattr(sys, "stdlib_module_names", ())) | {
    "torch", "triton", "numpy", "np", "jax", "cupy", "einops", "transformers", "pytest", "typing_extensions",
    "tl", "libdevice",
}
_IGNORE = re.compile(r"#\s*jitguard:\s*ignore(?:\[([A-Za-z0-9_,\s]*)\])?")
DNS = "do_not_specialize"
# A custom op's name in a registration: "op", "ns::op", "ns::op.overload".
_OP_NAME = re.compile(r"(?:([A-Za-z_]\w*)::)?([A-Za-z_]\w*)(?:\.[A-Za-z_]\w*)?\Z")
# Decorators that register the decorated function under a plain op name ("op"); with "ns::op"
# any decorator call does.
_OP_DECORATORS = frozenset({"custom_op", "triton_op", "impl", "register_kernel", "register_fake"})
DNSOA = "do_not_specialize_on_alignment"


def _record_fields(cls: ast.ClassDef) -> list[str] | None:
    """The annotated fields, in order, of a dataclass or NamedTuple (what positional arguments of
    its constructor fill); None for another class."""
    record = any(dotted(d.func if isinstance(d, ast.Call) else d) and
                 dotted(d.func if isinstance(d, ast.Call) else d)[-1] == "dataclass" for d in cls.decorator_list) \
        or any(dotted(b) and dotted(b)[-1] == "NamedTuple" for b in cls.bases)
    if not record:
        return None
    return [st.target.id for st in cls.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)]


def suppressions(text: str) -> dict[int, list[str]]:
    """line -> codes silenced by a ``# jitguard: ignore[...]`` comment there ([] = every code)."""
    out: dict[int, list[str]] = {}
    if "jitguard" not in text:
        return out
    try:
        comments = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline)
                    if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        comments = [(i + 1, line[line.index("#"):]) for i, line in enumerate(text.splitlines()) if "#" in line]
    for line, comment in comments:
        m = _IGNORE.search(comment)
        if not m:
            continue
        codes = sorted({c.strip().upper() for c in (m.group(1) or "").split(",") if c.strip()})
        out[line] = codes
    return out


def _entries(node: ast.AST) -> tuple[list[str | int], bool]:
    """Entries of a literal list/tuple of strings or ints; (entries, is_literal)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value], False
    if not isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [], False
    out: list[str | int] = []
    literal = True
    for el in node.elts:
        if isinstance(el, ast.Constant) and isinstance(el.value, (str, int)) and not isinstance(el.value, bool):
            out.append(el.value)
        elif isinstance(el, ast.UnaryOp) and isinstance(el.op, ast.USub) and isinstance(el.operand, ast.Constant) \
                and isinstance(el.operand.value, int):
            out.append(-el.operand.value)
        else:
            literal = False
    return out, literal


def _keyword(call: ast.Call | None, name: str) -> ast.keyword | None:
    if call is None:
        return None
    for kw in call.keywords:
        if kw.arg == name:
            return kw
    return None


def _unwrap_alias(value: ast.AST) -> ast.AST | None:
    """``y`` / ``a.b`` / ``wrap(...)(y)`` / ``wrap(y)``: the Name/Attribute being aliased."""
    for _ in range(6):
        if isinstance(value, (ast.Name, ast.Attribute)):
            return value
        if isinstance(value, ast.Call):
            pos = [a for a in value.args if not isinstance(a, ast.Starred)]
            if len(pos) == 1 and isinstance(pos[0], (ast.Name, ast.Attribute, ast.Call)):
                value = pos[0]
                continue
        return None
    return None


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


class _Source:
    def __init__(self, text: str):
        self.text = text
        self._lines: list[bytes] | None = None

    def segment(self, node: ast.AST) -> str:
        try:
            if self._lines is None:
                self._lines = [line.encode("utf-8") for line in self.text.splitlines(keepends=True)]
            l0, l1 = node.lineno - 1, node.end_lineno - 1
            c0, c1 = node.col_offset, node.end_col_offset
            if l0 == l1:
                return self._lines[l0][c0:c1].decode("utf-8", "replace")
            parts = [self._lines[l0][c0:]] + self._lines[l0 + 1:l1] + [self._lines[l1][:c1]]
            return b"".join(parts).decode("utf-8", "replace")
        except (AttributeError, IndexError, TypeError):
            try:
                return ast.unparse(node)
            except Exception:  # pragma: no cover - unparse of odd nodes
                return "?"


class _Walker:
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

    def exprs(self, node: ast.AST, scope: Scope, fn: FunctionInfo | None) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                self.calls.append((sub, scope, fn))
                f = sub.func
                # lst.append(v): v is one of the values lst holds (cu = [0]; cu.append(cu[-1] + n))
                if isinstance(f, ast.Attribute) and f.attr in ("append", "insert") and isinstance(f.value, ast.Name) \
                        and sub.args and fn is not None and scope.kind == "function" and f.value.id in fn.assigns:
                    fn.assigns[f.value.id].append(Entry("aug", sub.args[-1], line=sub.lineno))
            elif isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                if scope.kind == "function" and fn is not None:
                    fn.assigns.setdefault(sub.target.id, []).append(Entry("expr", sub.value, line=sub.lineno))


class _Extractor:
    def __init__(self, path: str, text: str, tree: ast.Module, module: str, varying, stable, calls_of=None):
        self.calls_of = calls_of  # record only calls of these (short) names; None: every imported call
        self.path = path
        self.src = _Source(text)
        self.tree = tree
        self.module = module
        self.is_package = path.replace("\\", "/").rsplit("/", 1)[-1] == "__init__.py"
        self.varying = frozenset(varying)
        self.stable = frozenset(stable)
        self.walker = _Walker(module, self.is_package)

    def short(self, node: ast.AST, limit: int = 80) -> str:
        text = " ".join(self.src.segment(node).split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def fq(self, expr: ast.AST, scope: Scope) -> list[str]:
        out = []
        for name, source in qualified(expr, scope):
            if source == IMPORT:
                out.append(resolve_relative(name, self.module, self.is_package))
            elif source == LOCAL:
                out.append(f"{self.module}.{name}" if self.module else name)
        return out

    def kind(self, expr: ast.AST, scope: Scope) -> str | None:
        names = [n for n, _ in qualified(expr, scope)]
        if not names:
            return None
        for kind in ("jit", "autotune", "heuristics"):
            if is_triton_name(names, (kind,)):
                return kind
        return None

    def constant(self, node: ast.AST) -> ast.AST:
        """A module-level constant's value for a Name (``do_not_specialize=_SHAPE_ARGS``)."""
        for _ in range(3):
            if isinstance(node, ast.Name) and node.id in self.walker.info.constants:
                node = self.walker.info.constants[node.id]
            else:
                break
        return node

    # ---- discovery (the same forms as discover.py) ----
    def discover(self) -> list[KernelFacts]:
        out: list[KernelFacts] = []
        decorated: set[int] = set()
        for st, scope, info in self.walker.functions:
            jit_dec = jit_call = autotune = None
            heuristics: list[ast.Call] = []
            for dec in st.decorator_list:
                call = dec if isinstance(dec, ast.Call) else None
                kind = self.kind(call.func if call is not None else dec, scope)
                if kind == "jit" and jit_dec is None:
                    jit_dec, jit_call = dec, call
                elif kind == "autotune" and call is not None and autotune is None:
                    autotune = call
                elif kind == "heuristics" and call is not None:
                    heuristics.append(call)
            if jit_dec is None:
                continue
            decorated.add(id(st))
            prefix = scope.prefix
            out.append(self.kernel(st, f"{prefix}.{st.name}" if prefix else st.name, st.name, "decorator",
                                   jit_dec.lineno, jit_call, autotune, heuristics, None))
        for stmt, scope in self.walker.assign_calls:
            found = self.unwrap(stmt.value, scope)
            if found is None:
                continue
            fn_name, jit_call, wrappers = found
            fn = self.walker.defs.get((id(scope), fn_name)) or self.walker.defs.get((id(self.top), fn_name))
            if fn is None or id(fn) in decorated:
                continue
            autotune = next((w for w in wrappers if self.kind(w.func, scope) == "autotune"), None)
            heuristics = [w for w in wrappers if self.kind(w.func, scope) == "heuristics"]
            name = stmt.targets[0].id
            prefix = scope.prefix
            out.append(self.kernel(fn, f"{prefix}.{name}" if prefix else name, name, "call", stmt.lineno,
                                   jit_call, autotune, heuristics, stmt))
        out.sort(key=lambda k: (k.decorator_line, k.line))
        return out

    def unwrap(self, call: ast.Call, scope: Scope):
        """``[autotune(...)(][heuristics(...)(]triton.jit[(kw)](fn[, kw])...`` -> (fn name, jit call
        carrying keywords, wrapper calls outermost first)."""
        wrappers: list[ast.Call] = []
        expr: ast.AST = call
        for _ in range(8):
            if not isinstance(expr, ast.Call):
                return None
            func = expr.func
            if self.kind(func, scope) == "jit":
                if expr.args and isinstance(expr.args[0], ast.Name):
                    return expr.args[0].id, expr, wrappers
                return None
            if isinstance(func, ast.Call) and self.kind(func.func, scope) == "jit":
                if expr.args and isinstance(expr.args[0], ast.Name):
                    return expr.args[0].id, func, wrappers
                return None
            positional = [a for a in expr.args if not isinstance(a, ast.Starred)]
            if len(positional) != 1 or len(expr.args) != 1:
                return None
            wrappers.append(func if isinstance(func, ast.Call) else expr)
            expr = positional[0]
        return None

    def kernel(self, fn, local_qual, name, form, jit_line, jit_call, autotune, heuristics, stmt) -> KernelFacts:
        a = fn.args
        ordered = list(a.posonlyargs) + list(a.args)
        defaults = [None] * (len(ordered) - len(a.defaults)) + list(a.defaults)
        pairs = list(zip(ordered, defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
        params: list[ParamFacts] = []
        for i, (arg, dflt) in enumerate(pairs):
            text = self.short(arg.annotation) if arg.annotation is not None else None
            kind = None
            if text is not None:
                kind = "constexpr" if text.split(".")[-1].split("[")[0].strip() == "constexpr" else "typed"
            params.append(ParamFacts(arg.arg, i, kind, text, self.short(dflt) if dflt is not None else None))
        uses, pointers = analyze_uses(fn, [p.name for p in params], self.src.segment)
        for p in params:
            p.uses = uses.get(p.name, [])
            p.pointer = p.name in pointers and not p.is_constexpr
        k = KernelFacts(
            qualname=f"{self.module}.{local_qual}" if self.module else local_qual,
            name=name,
            function=fn.name,
            line=fn.lineno,
            column=fn.col_offset + 1,
            decorator_line=jit_line,
            form=form,
            params=params,
        )
        dns = _keyword(jit_call, DNS)
        if dns is not None:
            k.do_not_specialize, k.do_not_specialize_literal = _entries(self.constant(dns.value))
            k.do_not_specialize_line = dns.value.lineno
        dnsoa = _keyword(jit_call, DNSOA)
        if dnsoa is not None:
            k.do_not_specialize_on_alignment, k.do_not_specialize_on_alignment_literal = _entries(self.constant(dnsoa.value))
            k.do_not_specialize_on_alignment_line = dnsoa.value.lineno
        if autotune is not None:
            k.autotune_line = autotune.lineno
            key = _keyword(autotune, "key")
            value = key.value if key is not None else (autotune.args[1] if len(autotune.args) >= 2 else None)
            if value is not None:
                keys, lit = _entries(self.constant(value))
                k.autotune_key = [x for x in keys if isinstance(x, str)]
                k.autotune_key_literal = lit
            else:
                k.autotune_key = []
        for h in heuristics:
            if h.args and isinstance(h.args[0], ast.Dict):
                k.heuristics_line = k.heuristics_line or h.lineno
                for key in h.args[0].keys:
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        k.heuristics.append(key.value)
        lines = {fn.lineno, jit_line}
        for dec in fn.decorator_list:
            lines.update(range(dec.lineno - 0, (dec.end_lineno or dec.lineno) + 1))
            lines.add(dec.lineno)
        if stmt is not None:
            lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
        k.suppressed_lines = sorted(lines)
        return k

    # ---- launches ----
    def targets(self, callee: ast.AST, scope: Scope, fn: FunctionInfo | None, depth: int = 0) -> list[str]:
        if depth > 4:
            return []
        if isinstance(callee, ast.Name) and fn is not None:
            f = fn
            while f is not None:
                if callee.id in f.assigns:
                    out: list[str] = []
                    for en in f.assigns[callee.id]:
                        if en.kind == "expr" and en.node is not None:
                            vals = [en.node.body, en.node.orelse] if isinstance(en.node, ast.IfExp) else [en.node]
                            for v in vals:
                                inner = _unwrap_alias(v)
                                if inner is not None:
                                    out.extend(self.targets(inner, f.scope, f, depth + 1))
                    return out
                if callee.id in f.params:
                    return []
                f = f.parent
        if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) and callee.value.id in ("self", "cls"):
            if fn is not None and fn.class_name:
                return [f"{self.module}.{fn.qual.rsplit('.', 1)[0]}.{callee.attr}"]
            return []
        return self.fq(callee, scope)

    def launch(self, call: ast.Call, scope: Scope, fn: FunctionInfo | None, kind: str, classifier: Classifier) -> LaunchFacts | None:
        callee = call.func.value
        targets = self.targets(callee, scope, fn)
        if not targets:
            return None
        la = LaunchFacts(
            callee=self.short(callee),
            targets=list(dict.fromkeys(targets)),
            line=call.lineno,
            column=call.col_offset + 1,
            kind=kind,
            function=(f"{self.module}.{fn.qual}" if fn is not None else None),
        )
        position = 0
        after = None  # positions after an unexpandable *args are counted from it
        for a in call.args:
            if after is not None:
                if isinstance(a, ast.Starred):
                    expanded = self.expand_star(a.value, fn, classifier, call)
                    if expanded is None:
                        # a second unknown length: the positionals between the two stars can't be
                        # placed (they are not the last ones); those after the last star still are
                        # the launch's last positionals, placed from the end as for one star
                        la.args = [x for x in la.args if x.after_star is None]
                        after = 0
                        continue
                    for arg in expanded:
                        arg.after_star = after
                        la.args.append(arg)
                        after += 1
                    continue
                arg = self.arg(a, classifier, fn)
                arg.after_star = after
                la.args.append(arg)
                after += 1
                continue
            if isinstance(a, ast.Starred):
                expanded = self.expand_star(a.value, fn, classifier, call)
                if expanded is None:
                    la.star_args = True
                    after = 0
                    continue
                for arg in expanded:
                    arg.position = position
                    la.args.append(arg)
                    position += 1
                continue
            la.args.append(self.arg(a, classifier, fn, position=position))
            position += 1
        self.add_keywords(la, call, classifier, fn)
        return la

    def add_keywords(self, la: LaunchFacts, call: ast.Call, classifier: Classifier, fn) -> None:
        """A launch's keyword arguments: each one bound by name; ``**kw`` marks the launch."""
        for kw in call.keywords:
            if kw.arg is None:
                la.star_kwargs = True
                continue
            la.keywords_order.append(kw.arg)
            la.options[kw.arg] = self.short(kw.value, 60)
            la.args.append(self.arg(kw.value, classifier, fn, keyword=kw.arg))

    def expand_star(self, value: ast.AST, fn, classifier: Classifier, call: ast.Call) -> list[ArgFacts] | None:
        """``*args`` whose length is known: a tuple/list literal (or a local bound once to one), or
        ``*x.stride()`` / ``*x.shape`` of a tensor allocated here. None when it can't be mapped."""
        node = value
        if isinstance(node, ast.Name) and fn is not None:
            owner, where = classifier.lookup(node.id, fn)
            entries = owner.assigns.get(node.id, []) if where == "assign" else []
            if len(entries) == 1 and entries[0].kind == "expr":
                node = entries[0].node
                fn = owner
        if isinstance(node, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in node.elts):
            return [self.arg(e, classifier, fn) for e in node.elts]
        window = None
        sliced = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.step is None:
            sliced = node.slice
            node = node.value
        recv = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args and node.func.attr in ("stride", "size"):
            recv, what = node.func.value, node.func.attr
        elif isinstance(node, ast.Attribute) and node.attr == "shape":
            recv, what = node.value, "size"
        if recv is None:
            return None
        dims, strides, _, _ = classifier.tensor(recv, fn, 0)
        rank = len(dims) if dims is not None else self.rank(recv, fn)
        if sliced is not None:
            lo_v = 0 if sliced.lower is None else int_literal(sliced.lower)
            hi_v = rank if sliced.upper is None else int_literal(sliced.upper)
            if lo_v is not None and hi_v is not None and rank is not None:
                lo_v, hi_v = (v + rank if v < 0 else v for v in (lo_v, hi_v))
            if lo_v is None or hi_v is None or lo_v < 0 or hi_v < 0 or lo_v > hi_v:
                return None
            window = (lo_v, min(hi_v, rank) if rank is not None else hi_v)  # x.stride()[:2], [:-1] of a known rank
        elif rank is None:
            return None
        if dims is None and window is None:
            window = (0, rank)
        indices = range(*window) if window is not None else range(len(dims))
        out = []
        for i in indices:
            if dims is not None and i < len(dims):
                prov = strides[i] if what == "stride" else dims[i]
            else:  # a tensor of unknown layout: the same rules as x.stride(i) / x.shape[i]
                prov = classifier.stride(recv, i, fn, 0) if what == "stride" else classifier.dim(recv, i, fn, 0)
            out.append(ArgFacts(text=f"{self.short(recv, 40)}.{what}({i})", provenance=prov.cls, value_type="int",
                                evidence=list(prov.evidence)[:8], line=value.lineno, column=value.col_offset + 1,
                                div16=prov.div16, by_name=prov.by_name, guess=prov.guess))
        return out

    @staticmethod
    def rank(t: ast.AST, fn) -> int | None:
        """The number of dims of a tensor nothing else is known about, where the function says it:
        ``a, b, c = x.shape`` or ``assert x.dim() == 3`` / ``x.ndim == 3``."""
        if not isinstance(t, ast.Name) or fn is None:
            return None
        f = fn
        while f is not None:
            for entries in f.assigns.values():
                for en in entries:
                    if en.kind == "dim" and en.ndim is not None and isinstance(en.node, ast.Name) and en.node.id == t.id:
                        return en.ndim
            if t.id in f.params or t.id in f.assigns:
                break
            f = f.parent
        if f is None:
            return None
        for node in ast.walk(f.node):
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
                left, right = node.left, node.comparators[0]
                for a, b in ((left, right), (right, left)):
                    if isinstance(a, ast.Attribute) and a.attr == "shape" and isinstance(a.value, ast.Name) \
                            and a.value.id == t.id and isinstance(b, (ast.Tuple, ast.List)) \
                            and not any(isinstance(e, ast.Starred) for e in b.elts):
                        return len(b.elts)  # assert x.shape == (m, n)
                    n = int_literal(b)
                    if n is None:
                        continue
                    if isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) and a.func.attr == "dim" \
                            and not a.args and isinstance(a.func.value, ast.Name) and a.func.value.id == t.id:
                        return n
                    if isinstance(a, ast.Attribute) and a.attr == "ndim" and isinstance(a.value, ast.Name) \
                            and a.value.id == t.id:
                        return n
        return None

    def arg(self, node: ast.AST, classifier: Classifier, fn, position=None, keyword=None) -> ArgFacts:
        prov = classifier.classify(node, fn)
        return ArgFacts(
            text=self.short(node, 60),
            position=position,
            keyword=keyword,
            provenance=prov.cls,
            value_type=prov.vtype,
            evidence=list(prov.evidence)[:8],
            line=node.lineno,
            column=node.col_offset + 1,
            div16=prov.div16,
            by_name=prov.by_name,
            guess=prov.guess,
            entry=self.entry_ref(prov),
            bucketed=prov.bucket and prov.entry is not None,
        )

    def entry_ref(self, prov) -> list | None:
        if prov.entry is None:
            return None
        qual, name, index = prov.entry
        return [f"{self.module}.{qual}" if self.module else qual, name, index]

    def imported_call(self, call: ast.Call, fn, target: str, classifier: Classifier) -> CallFacts:
        cf = CallFacts(targets=[target], line=call.lineno,
                       function=(f"{self.module}.{fn.qual}" if fn is not None else None))
        position = 0
        for a in call.args:
            if isinstance(a, ast.Starred):
                cf.star_args = True
                break
            arg = self.arg(a, classifier, fn, position=position)
            del arg.evidence[4:]
            arg.layout = self.layout(a, classifier, fn, arg)
            cf.args.append(arg)
            position += 1
        for kw in call.keywords:
            if kw.arg is None:
                cf.star_kwargs = True
                continue
            arg = self.arg(kw.value, classifier, fn, keyword=kw.arg)
            del arg.evidence[4:]
            arg.layout = self.layout(kw.value, classifier, fn, arg)
            cf.args.append(arg)
        return cf

    @staticmethod
    def layout(node: ast.AST, classifier: Classifier, fn, arg: ArgFacts) -> list | None:
        """The dims and strides of a tensor argument whose layout this module knows (allocated here,
        or a view of one), kept only when one of them varies: the callee's entry parameter takes them."""
        if arg.value_type not in ("tensor", "unknown") or isinstance(node, (ast.Constant, ast.BinOp, ast.Compare)):
            return None
        dims, strides, weight, _ = classifier.tensor(node, fn, 0)
        if dims is None or strides is None or weight or len(dims) != len(strides):
            return None

        def item(p, named: bool) -> list:
            # a dim that varies only by its name is not evidence against the callee's rule
            return [UNKNOWN if named and p.cls in (VARYING, BUCKETED) else p.cls, p.guess, list(p.evidence)[:3]]

        # a stride varies by name when every varying dim after it does
        named_after = [all(d.by_name for d in dims[i + 1:] if d.cls in (VARYING, BUCKETED)) for i in range(len(dims))]
        out = [[item(p, p.by_name) for p in dims],
               [item(p, p.by_name or named_after[i]) for i, p in enumerate(strides)]]
        if not any(x[0] in (VARYING, BUCKETED) for x in out[0] + out[1]):
            return None
        return out

    # ---- launchers: functions that return a launch's grid and keyword arguments ----
    def instance_call(self, func: ast.AST, scope: Scope) -> str | None:
        """``obj(...)`` where ``obj = Cls(...)`` at module level, or ``Cls(...)(...)``, with ``Cls`` a
        class of this module: a call of ``Cls.__call__``."""
        info = self.walker.info
        value = None
        if isinstance(func, ast.Name):
            q = qualified(func, scope)
            if q and q[0][1] == LOCAL and q[0][0] == func.id:
                value = info.constants.get(func.id)
        elif isinstance(func, ast.Call):
            value = func
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            target = f"{value.func.id}.__call__"
            if target in info.functions:
                return target
        return None

    @staticmethod
    def _spec_dict(node: ast.AST) -> bool:
        """A dict display with string keys, or ``dict(k=v, ...)``."""
        if isinstance(node, ast.Dict):
            return bool(node.keys) and all(k is None or (isinstance(k, ast.Constant) and isinstance(k.value, str))
                                           for k in node.keys)
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
            and not node.args and bool(node.keywords)

    def _spec_returns(self, st) -> list[tuple[ast.Return, ast.AST]]:
        """``return grid, dict(...)`` / ``return grid, {...}, extra`` in a function's own body."""
        out = []
        stack = list(st.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.Return):
                v = node.value
                if isinstance(v, ast.Tuple) and 2 <= len(v.elts) <= 3 and self._spec_dict(v.elts[1]) \
                        and not self._spec_dict(v.elts[0]):
                    out.append((node, v.elts[1]))
                continue
            stack.extend(c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt))
            for attr in ("handlers", "cases"):
                for h in getattr(node, attr, []) or []:
                    stack.extend(h.body)
        return out

    def launchers(self, kernels: list[KernelFacts]) -> list:
        """Functions tied to a kernel that return ``grid, dict(...)``: a framework launches the kernel
        with the dict's entries and the function's own arguments, bound to the kernel's parameters
        by name. The tie is structural: the kernel is an argument of one of the function's
        decorators (``@launcher(kernel=k)``), or the function is a method of a class whose body
        binds the kernel (``kernel = staticmethod(triton.jit(f))``, a jitted staticmethod)."""
        w = self.walker
        out = []
        class_attrs: dict[str, list[str]] | None = None
        for st, scope, info in w.functions:
            returns = self._spec_returns(st)
            if not returns:
                continue
            targets: list[str] = []
            for dec in st.decorator_list:
                if not isinstance(dec, ast.Call):
                    continue
                for value in list(dec.args) + [k.value for k in dec.keywords]:
                    if isinstance(value, (ast.Name, ast.Attribute)):
                        targets.extend(n for n in self.fq(value, scope) if "<locals>" not in n)
            if scope.kind == "class":
                if class_attrs is None:
                    class_attrs = {}
                    for k in kernels:
                        local = k.qualname[len(self.module) + 1:] if self.module else k.qualname
                        owner, _, attr = local.rpartition(".")
                        class_attrs.setdefault(owner, []).append(attr)
                    for qual, value, vscope in w.alias_values:
                        if vscope.kind == "class" and _unwrap_alias(value) is not None:
                            owner, _, attr = qual.rpartition(".")
                            class_attrs.setdefault(owner, []).append(attr)
                prefix = f"{self.module}.{scope.prefix}" if self.module else scope.prefix
                targets.extend(f"{prefix}.{a}" for a in dict.fromkeys(class_attrs.get(scope.prefix, [])))
            if not targets:
                continue
            for ret, spec in returns:
                out.append((st, info, ret, spec, list(dict.fromkeys(targets))))
        return out

    def spec_launch(self, st, fn: FunctionInfo, ret: ast.Return, spec: ast.AST, targets: list[str],
                    classifier: Classifier) -> LaunchFacts:
        la = LaunchFacts(callee=f"{fn.name}()", targets=targets, line=ret.lineno, column=ret.col_offset + 1,
                         kind="spec", function=f"{self.module}.{fn.qual}" if self.module else fn.qual)
        if isinstance(spec, ast.Dict):
            items = []
            for k, v in zip(spec.keys, spec.values):
                if k is None:
                    la.star_kwargs = True
                else:
                    items.append((k.value, v))
        else:
            items = []
            for kw in spec.keywords:
                if kw.arg is None:
                    la.star_kwargs = True
                else:
                    items.append((kw.arg, kw.value))
        for key, value in items:
            la.keywords_order.append(key)
            la.options[key] = self.short(value, 60)
            la.args.append(self.arg(value, classifier, fn, keyword=key))
        given = {key for key, _ in items}
        for name, p in fn.params.items():
            if p.kind == "star" or name in given:
                continue
            node = ast.Name(id=name, ctx=ast.Load())
            node.lineno, node.col_offset = ret.lineno, ret.col_offset
            node.end_lineno, node.end_col_offset = ret.lineno, ret.col_offset
            arg = self.arg(node, classifier, fn, keyword=name)
            arg.text = name
            la.args.append(arg)
            la.param_keywords.append(name)
        return la

    def handed_kernels(self, kernels: list[KernelFacts]) -> list:
        """Calls that hand a kernel of this module to a function, with keyword arguments:
        ``launch_autotuned(k, grid, n=x.shape[0])``. Kept as launches bound only when link.py finds
        the function to be a forwarder (it launches its kernel parameter with its **kwargs)."""
        local = {k.name: k.qualname for k in kernels if "." not in k.qualname[len(self.module) + 1:]} \
            if self.module else {k.name: k.qualname for k in kernels if "." not in k.qualname}
        if not local:
            return []
        out = []
        for call, scope, fn in self.walker.calls:
            if not call.keywords or not isinstance(call.func, (ast.Name, ast.Attribute)):
                continue
            values = list(call.args) + [kw.value for kw in call.keywords if kw.arg is not None]
            hit = next((v.id for v in values if isinstance(v, ast.Name) and v.id in local
                        and (q := qualified(v, scope)) and q[0][1] == LOCAL and q[0][0] == v.id), None)
            if hit is None:
                continue
            via = self.fq(call.func, scope)
            if via:
                out.append((call, fn, local[hit], via))
        return out

    def handed_launch(self, call: ast.Call, fn, kernel_fq: str, via: list[str], classifier: Classifier) -> LaunchFacts:
        la = LaunchFacts(callee=self.short(call.func), targets=[kernel_fq], line=call.lineno,
                         column=call.col_offset + 1, kind="grid",
                         function=(f"{self.module}.{fn.qual}" if fn is not None else None), via=list(via))
        self.add_keywords(la, call, classifier, fn)
        return la

    # ---- PyTorch custom ops: torch.ops.<ns>.<op>(...) is a call of the function registered as <op> ----
    @staticmethod
    def op_call(target: str) -> tuple[str, str] | None:
        """``torch.ops.<ns>.<op>`` / ``torch.ops.<ns>.<op>.<overload>`` -> (ns, op)."""
        parts = target.split(".")
        if len(parts) in (4, 5) and parts[0] == "torch" and parts[1] == "ops":
            return parts[2], parts[3]
        return None

    @staticmethod
    def _op_names(values) -> list[tuple[str, str]]:
        out = []
        for v in values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str) and len(v.value) <= 200:
                m = _OP_NAME.match(v.value)
                if m:
                    out.append((m.group(1) or "", m.group(2)))
        return out

    def op_registrations(self) -> list[list[str]]:
        """[namespace or "", op, qualified function] for each registration of a function as a custom
        op: ``@torch.library.custom_op("ns::op")`` (and ``triton_op``, ``impl``...), and any call whose
        arguments hold a string literal ``"op"`` / ``"ns::op"`` and a function (``lib.impl("op", f,
        "CUDA")``, a project's ``register_op(op_name="op", op_func=f)``, ``custom_op("ns::op")(f)``).
        link.py uses a registration only where some ``torch.ops.<ns>.<op>(...)`` call exists."""
        w = self.walker
        prefix = f"{self.module}." if self.module else ""
        out: list[list[str]] = []
        for call, scope, _ in w.calls:
            values = list(call.args) + [k.value for k in call.keywords]
            strings = values + (list(call.func.args) + [k.value for k in call.func.keywords]
                                if isinstance(call.func, ast.Call) else [])
            ops = self._op_names(strings)
            if not ops:
                continue
            fns = []
            for v in values:
                if not isinstance(v, (ast.Name, ast.Attribute)):
                    continue
                q = qualified(v, scope)
                if not q:
                    continue
                name, source = q[0]
                if source == LOCAL and name in w.info.functions:
                    fns.append(prefix + name)
                elif source == IMPORT:
                    target = resolve_relative(name, self.module, self.is_package)
                    if target.split(".")[0] not in _LIBRARY_ROOTS:
                        fns.append(target)
            out.extend([ns, op, f] for ns, op in ops for f in fns)
        for st, _, info in w.functions:
            for dec in st.decorator_list:
                if not isinstance(dec, ast.Call):
                    continue
                attr = dec.func.attr if isinstance(dec.func, ast.Attribute) else \
                    dec.func.id if isinstance(dec.func, ast.Name) else None
                for ns, op in self._op_names(list(dec.args) + [k.value for k in dec.keywords]):
                    if ns or attr in _OP_DECORATORS:
                        out.append([ns, op, prefix + info.qual])
        seen: set[tuple] = set()
        return [r for r in out if not (tuple(r) in seen or seen.add(tuple(r)))]

    def run(self) -> FileFacts:
        w = self.walker
        self.top = w.run(self.tree)
        facts = FileFacts(path=self.path, module=self.module, suppressions=suppressions(self.src.text))
        facts.kernels = self.discover()
        info = w.info
        launches: list[tuple[ast.Call, Scope, FunctionInfo | None, str]] = []
        imported: list[tuple[ast.Call, FunctionInfo | None, str]] = []
        op_calls: list[tuple[ast.Call, FunctionInfo | None, tuple[str, str]]] = []
        for call, scope, fn in w.calls:
            func = call.func
            if isinstance(func, ast.Subscript) and dotted(func.value) is not None:
                launches.append((call, scope, fn, "grid"))
            elif isinstance(func, ast.Attribute) and func.attr in ("run", "warmup") and dotted(func.value) is not None:
                launches.append((call, scope, fn, func.attr))
            callee = None
            if isinstance(func, ast.Name):
                q = qualified(func, scope)
                if q and q[0][1] == LOCAL:
                    callee = q[0][0]
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                if func.value.id in ("self", "cls") and fn is not None and fn.class_name:
                    callee = f"{fn.qual.rsplit('.', 1)[0]}.{func.attr}"
                else:
                    q = qualified(func, scope)
                    if q and q[0][1] == LOCAL:
                        callee = q[0][0]
            if callee is None or callee not in info.functions:
                callee = self.instance_call(func, scope) or callee
            if (call.args or call.keywords) and isinstance(func, (ast.Name, ast.Attribute)):
                q = qualified(func, scope)
                if q and q[0][1] == IMPORT:
                    target = resolve_relative(q[0][0], self.module, self.is_package)
                    op = self.op_call(target) if isinstance(func, ast.Attribute) else None
                    if op is not None:
                        op_calls.append((call, fn, op))
                    elif target.split(".")[0] not in _LIBRARY_ROOTS and (
                            self.calls_of is None or target.rsplit(".", 1)[-1] in self.calls_of):
                        imported.append((call, fn, target))
                elif isinstance(func, ast.Attribute) and self.calls_of and func.attr in self.calls_of \
                        and (callee is None or callee not in info.functions):
                    # obj.meth(...) on an object of unknown class: a call of some method named so
                    # (link.py binds it to one definition, nearest in the tree)
                    imported.append((call, fn, METHOD_CALL + func.attr))
            if callee is not None and callee in info.functions:
                info.calls.setdefault(callee, []).append((call, fn))
        facts.custom_ops = self.op_registrations()
        if op_calls:
            # an op registered in this module binds like a local call (layouts, positions, keywords);
            # others are recorded as calls for link.py to bind to a registration elsewhere
            prefix = f"{self.module}." if self.module else ""
            local: dict[str, list[tuple[str, str]]] = {}
            for ns, op, f in facts.custom_ops:
                if f.startswith(prefix) and f[len(prefix):] in info.functions:
                    local.setdefault(op, []).append((ns, f[len(prefix):]))
            for call, fn, (ns, op) in op_calls:
                quals = [q for rns, q in local.get(op, ()) if not rns or rns == ns]
                for q in dict.fromkeys(quals):
                    info.calls.setdefault(q, []).append((call, fn))
                if not quals:
                    imported.append((call, fn, f"torch.ops.{ns}.{op}"))
        specs = self.launchers(facts.kernels)
        # forwarders: def launch(kernel, grid, **kw): kernel[grid](**kw)
        for call, scope, fn, kind in launches:
            if kind != "grid" or fn is None or fn.parent is not None or fn.class_name is not None:
                continue
            callee = call.func.value
            star = fn.node.args.kwarg
            if isinstance(callee, ast.Name) and callee.id in fn.params and fn.params[callee.id].kind != "star" \
                    and star is not None and callee.id not in fn.assigns and any(
                        kw.arg is None and isinstance(kw.value, ast.Name) and kw.value.id == star.arg for kw in call.keywords):
                facts.forwarders[f"{self.module}.{fn.qual}" if self.module else fn.qual] = callee.id
        handed = self.handed_kernels(facts.kernels)
        if launches or specs or imported or handed:
            classifier = Classifier(info, self.src.segment, self.varying, self.stable)
            for call, fn, target in imported:
                facts.calls.append(self.imported_call(call, fn, target, classifier))
            for call, scope, fn, kind in launches:
                la = self.launch(call, scope, fn, kind, classifier)
                if la is not None:
                    facts.launches.append(la)
            for st, fn, ret, spec, targets in specs:
                facts.launches.append(self.spec_launch(st, fn, ret, spec, targets, classifier))
            for call, fn, kernel_fq, via in handed:
                facts.launches.append(self.handed_launch(call, fn, kernel_fq, via, classifier))
        facts.imports = dict(w.imports)
        for qual, value, scope in w.alias_values:
            inner = _unwrap_alias(value)
            if inner is None:
                continue
            names = [n for n in self.fq(inner, scope) if "<locals>" not in n]
            if names:
                facts.aliases[f"{self.module}.{qual}" if self.module else qual] = names[0]
        return facts


def decode(source: bytes | str) -> str:
    """The text Python reads from ``source`` (static/source.py decides, for scan and fix alike)."""
    return _source.decode(source)


def extract_file(
    path: str,
    source: bytes | str,
    module: str,
    *,
    varying_names: frozenset[str] = frozenset(),
    stable_names: frozenset[str] = frozenset(),
    calls_of: frozenset[str] | None = None,
) -> FileFacts:
    """Facts about one file. Raises SourceError for a file that can't be parsed or decoded.
    ``calls_of``: record only the calls of functions with these short names (FileFacts.calls)."""
    text = decode(source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # the bytes, when given: Python's own decoding (a codec that decodes this file one way
            # as a whole and another line by line is refused here as Python refuses it)
            tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise SourceError(f"syntax error: {exc.msg}", line=exc.lineno) from None
    except (ValueError, TypeError) as exc:  # e.g. NUL bytes
        raise SourceError(f"cannot parse: {exc}") from None
    except (RecursionError, MemoryError):
        raise SourceError("too deeply nested to parse") from None
    try:
        return _Extractor(path, text, tree, module, varying_names, stable_names, calls_of).run()
    except RecursionError:
        raise SourceError("too deeply nested to analyze") from None
