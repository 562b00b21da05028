"""Source -> FileFacts: kernels (with parameter uses), launches (with argument provenance), imports,
aliases and inline suppressions of one file. The one entry point is ``extract_file``."""
from __future__ import annotations

import io
import re
import tokenize

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider, QualifiedNameSource

from jitguard.static.discover import KernelSite, _qnames, iter_kernels
from jitguard.static.errors import SourceError
from jitguard.static.facts import ArgFacts, FileFacts, KernelFacts, LaunchFacts, ParamFacts
from jitguard.static.param_uses import analyze_uses
from jitguard.static.provenance import Classifier, Entry, FunctionInfo, ModuleInfo, ParamInfo

_IGNORE = re.compile(r"#\s*jitguard:\s*ignore(?:\[([A-Za-z0-9_,\s]*)\])?")


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


def _suppressions(text: str) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    if "jitguard" not in text:
        return out
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        comments = [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        comments = [(i + 1, line[line.index("#"):]) for i, line in enumerate(text.splitlines()) if "#" in line]
    for line, comment in comments:
        m = _IGNORE.search(comment)
        if not m:
            continue
        codes = [c.strip().upper() for c in (m.group(1) or "").split(",") if c.strip()]
        out.setdefault(line, [])
        if not codes:
            out[line] = []
        elif out[line] != [] or line not in out:
            out[line] = sorted(set(out[line]) | set(codes))
        else:
            out[line] = sorted(set(codes))
    return out


def _string_list(node: cst.BaseExpression) -> tuple[list[str | int], bool]:
    """Entries of a literal list/tuple of strings or ints; (entries, is_literal)."""
    if not isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
            v = node.evaluated_value
            return ([v] if isinstance(v, str) else []), False
        return [], False
    out: list[str | int] = []
    literal = True
    for el in node.elements:
        v = el.value
        if isinstance(el, cst.StarredElement):
            literal = False
            continue
        if isinstance(v, (cst.SimpleString, cst.ConcatenatedString)):
            s = v.evaluated_value
            if isinstance(s, str):
                out.append(s)
                continue
        if isinstance(v, cst.Integer):
            out.append(int(v.value, 0))
            continue
        if isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Minus) and isinstance(v.expression, cst.Integer):
            out.append(-int(v.expression.value, 0))
            continue
        literal = False
    return out, literal


class _Walker(cst.CSTVisitor):
    """One pass: functions (params, assignments, calls), module constants/imports, launch calls."""

    def __init__(self, ext: "_Extractor"):
        self.x = ext
        self.stack: list[FunctionInfo] = []
        self.classes: list[str] = []
        self.scope_names: list[str] = []
        self.info = ext.info
        self.raw_calls: list[tuple[cst.Call, FunctionInfo | None, list[str]]] = []
        self.launch_calls: list[tuple[cst.Call, FunctionInfo | None, str | None]] = []

    @property
    def fn(self) -> FunctionInfo | None:
        return self.stack[-1] if self.stack else None

    def _qual(self, name: str) -> str:
        parts = []
        for kind, n in self.scope_names:
            parts.append(n if kind == "class" else f"{n}.<locals>")
        return ".".join(parts + [name])

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node.name.value)
        self.scope_names.append(("class", node.name.value))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.pop()
        self.scope_names.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        in_class = bool(self.scope_names) and self.scope_names[-1][0] == "class"
        cls = self.scope_names[-1][1] if in_class else None
        static = any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in node.decorators)
        qual = self._qual(node.name.value)
        info = FunctionInfo(qual=qual, name=node.name.value, node=node, class_name=cls,
                            is_method=in_class and not static, parent=self.fn)
        p = node.params
        ordered = list(p.posonly_params) + list(p.params)
        skip = 1 if info.is_method and ordered else 0
        for i, prm in enumerate(ordered[skip:]):
            info.params[prm.name.value] = ParamInfo(prm.name.value, i, prm.default, prm.annotation.annotation if prm.annotation else None, "pos")
        for prm in p.kwonly_params:
            info.params[prm.name.value] = ParamInfo(prm.name.value, -1, prm.default, prm.annotation.annotation if prm.annotation else None, "kwonly")
        for star in (p.star_arg, p.star_kwarg):
            if isinstance(star, cst.Param):
                info.params[star.name.value] = ParamInfo(star.name.value, -1, None, None, "star")
        self.info.functions[qual] = info
        self.stack.append(info)
        self.scope_names.append(("def", node.name.value))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.pop()
        self.scope_names.pop()

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def _line(self, node) -> int:
        try:
            return self.x.pos[node].start.line
        except KeyError:
            return 0

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression | None, line: int, kind: str = "expr") -> None:
        fn = self.fn
        if isinstance(target, cst.Name):
            if fn is None:
                if value is not None and not self.scope_names:
                    self.info.constants[target.value] = value
                    self.x.module_assign(target.value, value)
                elif value is not None and self.scope_names and self.scope_names[-1][0] == "class":
                    self.x.class_assign(self._qual(target.value), value)
                return
            entry = Entry(kind if value is not None else "opaque", value, line=line)
            fn.assigns.setdefault(target.value, []).append(entry)
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            els = list(target.elements)
            names = [el.value for el in els]
            if fn is None:
                return
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(els) and not any(
                isinstance(e, cst.StarredElement) for e in list(value.elements) + els
            ):
                for t, v in zip(names, value.elements):
                    self._bind(t, v.value, line, kind)
                return
            shape_of = _shape_source(value)
            if shape_of is not None:
                tensor, offset = shape_of
                star = [i for i, el in enumerate(els) if isinstance(el, cst.StarredElement)]
                n = len(els)
                for i, el in enumerate(els):
                    if isinstance(el, cst.StarredElement) or not isinstance(el.value, cst.Name):
                        continue
                    if star and i > star[0]:
                        idx, ndim = -(n - i), None
                    else:
                        idx, ndim = i + offset, (None if star or offset else n)
                    fn.assigns.setdefault(el.value.value, []).append(Entry("dim", tensor, idx, line, ndim))
                return
            for t in names:
                if isinstance(t, cst.Name):
                    fn.assigns.setdefault(t.value, []).append(Entry("item", value, line=line))
                elif isinstance(t, (cst.Tuple, cst.List)):
                    self._bind(t, None, line)
            return
        if isinstance(target, cst.StarredElement):
            self._bind(target.value, None, line)
            return
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self" and value is not None:
            cls_qual = self._class_qual()
            if cls_qual is not None:
                self.x.class_assign(f"{cls_qual}.{target.attr.value}", value)

    def _class_qual(self) -> str | None:
        # qual of the innermost class
        parts = []
        last_class = None
        for i, (kind, n) in enumerate(self.scope_names):
            parts.append(n if kind == "class" else f"{n}.<locals>")
            if kind == "class":
                last_class = ".".join(parts)
        return last_class

    def visit_Assign(self, node: cst.Assign) -> None:
        line = self._line(node)
        for t in node.targets:
            self._bind(t.target, node.value, line)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, node.value, self._line(node))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name) and self.fn is not None:
            self.fn.assigns.setdefault(node.target.value, []).append(Entry("aug", node.value, line=self._line(node)))

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        if isinstance(node.target, cst.Name) and self.fn is not None:
            self.fn.assigns.setdefault(node.target.value, []).append(Entry("expr", node.value, line=self._line(node)))

    def _loop_target(self, target: cst.BaseExpression, line: int) -> None:
        if self.fn is None:
            return
        if isinstance(target, cst.Name):
            self.fn.assigns.setdefault(target.value, []).append(Entry("loop", None, line=line))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._loop_target(el.value, line)
        elif isinstance(target, cst.StarredElement):
            self._loop_target(target.value, line)

    def visit_For(self, node: cst.For) -> None:
        self._loop_target(node.target, self._line(node))

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind_opaque(node.asname.name)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._bind_opaque(node.name.name)

    def _bind_opaque(self, target) -> None:
        if self.fn is None:
            return
        if isinstance(target, cst.Name):
            self.fn.assigns.setdefault(target.value, []).append(Entry("opaque"))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._bind_opaque(el.value)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            local = alias.evaluated_alias or alias.evaluated_name.split(".")[0]
            if self.fn is not None:
                self.fn.assigns.setdefault(local, []).append(Entry("opaque"))
            elif not self.scope_names:
                self.info.imported.add(local)
                target = alias.evaluated_name if alias.asname else alias.evaluated_name.split(".")[0]
                self.x.imports[local] = target

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        mod = ""
        if node.module is not None:
            mod = self.x.code(node.module)
        mod = "." * len(node.relative) + mod
        for alias in node.names:
            local = alias.evaluated_alias or alias.evaluated_name
            if self.fn is not None:
                self.fn.assigns.setdefault(local, []).append(Entry("opaque"))
            elif not self.scope_names:
                self.info.imported.add(local)
                base = resolve_relative(mod, self.x.module, self.x.is_package) if mod.startswith(".") else mod
                self.x.imports[local] = f"{base}.{alias.evaluated_name}" if base else alias.evaluated_name

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        fn = self.fn
        if isinstance(func, cst.Subscript) and isinstance(func.value, (cst.Name, cst.Attribute)):
            self.launch_calls.append((node, fn, "grid"))
        elif isinstance(func, cst.Attribute) and func.attr.value in ("run", "warmup") and isinstance(func.value, (cst.Name, cst.Attribute)):
            self.launch_calls.append((node, fn, func.attr.value))
        keys: list[str] = []
        if isinstance(func, cst.Name):
            f = fn
            while f is not None:
                keys.append(f"{f.qual}.<locals>.{func.value}")
                f = f.parent
            keys.append(func.value)
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            base = func.value.value
            if base in ("self", "cls") and fn is not None and fn.class_name:
                cq = fn.qual.rsplit(".", 2)[0] if fn.qual.count(".") >= 1 else fn.class_name
                keys.append(f"{cq}.{func.attr.value}")
            else:
                keys.append(f"{base}.{func.attr.value}")
        if keys:
            self.raw_calls.append((node, fn, keys))


def _shape_source(value) -> tuple[cst.BaseExpression, int] | None:
    """``x.shape`` / ``x.size()`` / ``x.shape[:k]`` / ``x.shape[a:]`` -> (x, index offset)."""
    if isinstance(value, cst.Attribute) and value.attr.value == "shape":
        return value.value, 0
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "size" and not value.args:
        return value.func.value, 0
    if isinstance(value, cst.Subscript) and len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Slice):
        inner = _shape_source(value.value)
        sl = value.slice[0].slice
        if inner is not None and sl.step is None:
            lower = sl.lower
            if lower is None:
                return inner[0], inner[1]
            if isinstance(lower, cst.Integer):
                return inner[0], inner[1] + int(lower.value, 0)
    return None


def _unwrap_alias(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """``y`` / ``a.b`` / ``wrap(...)(y)`` / ``wrap(y)``: the Name/Attribute being aliased."""
    for _ in range(6):
        if isinstance(value, (cst.Name, cst.Attribute)):
            return value
        if isinstance(value, cst.Call):
            pos = [a for a in value.args if a.keyword is None and not a.star]
            if len(pos) == 1 and isinstance(pos[0].value, (cst.Name, cst.Attribute, cst.Call)):
                value = pos[0].value
                continue
        return None
    return None


class _Extractor:
    def __init__(self, path: str, module: cst.Module, module_name: str, varying, stable):
        self.path = path
        self.tree = module
        self.module = module_name
        self.is_package = path.replace("\\", "/").rsplit("/", 1)[-1] == "__init__.py"
        self.wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self.pos = self.wrapper.resolve(PositionProvider)
        self.qmap = self.wrapper.resolve(QualifiedNameProvider)
        self.info = ModuleInfo()
        self.imports: dict[str, str] = {}
        self.aliases: dict[str, str] = {}
        self.varying = frozenset(varying)
        self.stable = frozenset(stable)

    def code(self, node: cst.CSTNode) -> str:
        return self.tree.code_for_node(node)

    def short(self, node: cst.CSTNode, limit: int = 80) -> str:
        text = re.sub(r"\s+", " ", self.code(node).strip())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def fq(self, expr: cst.BaseExpression) -> list[str]:
        """Fully qualified candidate names of a Name/Attribute expression."""
        out: list[str] = []
        value = self.qmap.get(expr)
        if value is not None and callable(value) and not isinstance(value, (set, frozenset)):
            value = value()
        for q in sorted(value or (), key=lambda q: q.name):
            name = q.name
            if q.source == QualifiedNameSource.IMPORT:
                out.append(resolve_relative(name, self.module, self.is_package))
            elif q.source == QualifiedNameSource.LOCAL:
                out.append(f"{self.module}.{name}" if self.module else name)
        return out

    def module_assign(self, name: str, value: cst.BaseExpression) -> None:
        target = _unwrap_alias(value)
        if target is not None:
            names = self.fq(target)
            if names:
                self.aliases[f"{self.module}.{name}" if self.module else name] = names[0]

    def class_assign(self, qual: str, value: cst.BaseExpression) -> None:
        target = _unwrap_alias(value)
        if target is None:
            return
        names = self.fq(target)
        qual = f"{self.module}.{qual}" if self.module else qual
        if names and not any("<locals>" in n for n in names):
            self.aliases[qual] = names[0]

    # ---- kernels ----
    def kernel(self, site: KernelSite) -> KernelFacts:
        fn = site.function
        fpos = self.pos[fn].start
        jline = self.pos[site.jit].start.line if site.jit in self.pos else fpos.line
        if site.form == "call" and site.statement is not None:
            jline = self.pos[site.statement].start.line
        p = fn.params
        params: list[ParamFacts] = []
        ordered = list(p.posonly_params) + list(p.params) + list(p.kwonly_params)
        for i, prm in enumerate(ordered):
            ann = prm.annotation.annotation if prm.annotation else None
            text = self.short(ann) if ann is not None else None
            kind = None
            if text is not None:
                kind = "constexpr" if text.split(".")[-1].split("[")[0] == "constexpr" else "typed"
            params.append(ParamFacts(prm.name.value, i, kind, text, self.short(prm.default) if prm.default else None))
        uses, pointers = analyze_uses(fn, [q.name for q in params], self.tree, self.pos)
        for q in params:
            q.uses = uses.get(q.name, [])
            q.pointer = q.name in pointers and not q.is_constexpr
        k = KernelFacts(
            qualname=f"{self.module}.{site.qualname}" if self.module else site.qualname,
            name=site.name,
            function=fn.name.value,
            line=fpos.line,
            column=fpos.column + 1,
            decorator_line=jline,
            form=site.form,
            params=params,
        )
        if site.do_not_specialize is not None:
            k.do_not_specialize, k.do_not_specialize_literal = _string_list(site.do_not_specialize.value)
            k.do_not_specialize_line = self.pos[site.do_not_specialize].start.line
        if site.do_not_specialize_on_alignment is not None:
            arg = site.do_not_specialize_on_alignment
            k.do_not_specialize_on_alignment, k.do_not_specialize_on_alignment_literal = _string_list(arg.value)
            k.do_not_specialize_on_alignment_line = self.pos[arg].start.line
        if site.autotune is not None:
            k.autotune_line = self.pos[site.autotune].start.line
            key_arg = None
            for a in site.autotune.args:
                if a.keyword is not None and a.keyword.value == "key":
                    key_arg = a
            positional = [a for a in site.autotune.args if a.keyword is None]
            if key_arg is None and len(positional) >= 2:
                key_arg = positional[1]
            if key_arg is not None:
                keys, lit = _string_list(key_arg.value)
                k.autotune_key = [str(x) for x in keys if isinstance(x, str)]
                k.autotune_key_literal = lit
            else:
                k.autotune_key = []
        for h in site.heuristics:
            if h.args and isinstance(h.args[0].value, cst.Dict):
                k.heuristics_line = k.heuristics_line or self.pos[h].start.line
                for el in h.args[0].value.elements:
                    if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString):
                        v = el.key.evaluated_value
                        if isinstance(v, str):
                            k.heuristics.append(v)
        lines = {fpos.line, jline}
        for dec in fn.decorators:
            lines.add(self.pos[dec].start.line)
            lines.add(self.pos[dec].end.line)
        if site.statement is not None:
            lines.add(self.pos[site.statement].start.line)
        k.suppressed_lines = sorted(lines)
        return k

    # ---- launches ----
    def targets(self, callee: cst.BaseExpression, fn: FunctionInfo | None, depth: int = 0) -> list[str]:
        out: list[str] = []
        if depth > 4:
            return out
        if isinstance(callee, cst.Name) and fn is not None:
            f = fn
            while f is not None:
                if callee.value in f.assigns:
                    for en in f.assigns[callee.value]:
                        if en.kind == "expr" and en.node is not None:
                            vals = [en.node.body, en.node.orelse] if isinstance(en.node, cst.IfExp) else [en.node]
                            for v in vals:
                                inner = _unwrap_alias(v)
                                if inner is not None:
                                    out.extend(self.targets(inner, f, depth + 1))
                    return out
                f = f.parent
        if isinstance(callee, cst.Attribute) and isinstance(callee.value, cst.Name) and callee.value.value in ("self", "cls"):
            if fn is not None and fn.class_name:
                cls_qual = fn.qual.split(".<locals>")[0].rsplit(".", 1)[0] if "." in fn.qual else fn.class_name
                out.append(f"{self.module}.{cls_qual}.{callee.attr.value}")
            return out
        out.extend(n for n in self.fq(callee) if "<locals>.self" not in n)
        return out

    def launch(self, call: cst.Call, fn: FunctionInfo | None, kind: str, classifier: Classifier) -> LaunchFacts | None:
        callee = call.func.value  # Subscript.value or Attribute.value
        targets = self.targets(callee, fn)
        if not targets:
            return None
        start = self.pos[call].start
        la = LaunchFacts(
            callee=self.short(callee),
            targets=list(dict.fromkeys(targets)),
            line=start.line,
            column=start.column + 1,
            kind=kind,
            function=(f"{self.module}.{fn.qual}" if fn is not None else None),
        )
        position = 0
        positional_ok = True
        for a in call.args:
            if a.star == "*":
                la.star_args = True
                positional_ok = False
                continue
            if a.star == "**":
                la.star_kwargs = True
                continue
            prov = classifier.classify(a.value, fn)
            apos = self.pos[a.value].start if a.value in self.pos else start
            arg = ArgFacts(
                text=self.short(a.value, 60),
                provenance=prov.cls,
                value_type=prov.vtype,
                evidence=list(prov.evidence)[:8],
                line=apos.line,
                column=apos.column + 1,
            )
            if a.keyword is None:
                if not positional_ok:
                    continue
                arg.position = position
                position += 1
            else:
                arg.keyword = a.keyword.value
                la.keywords_order.append(a.keyword.value)
                la.options[a.keyword.value] = self.short(a.value, 60)
            la.args.append(arg)
        return la


def extract_file(
    path: str,
    source: bytes | str,
    module: str,
    *,
    varying_names: frozenset[str] = frozenset(),
    stable_names: frozenset[str] = frozenset(),
) -> FileFacts:
    """Facts about one file. Raises SourceError for a file that can't be parsed."""
    if isinstance(source, bytes):
        try:
            text = source.decode("utf-8") if not source.startswith(b"\xef\xbb\xbf") else source[3:].decode("utf-8")
        except UnicodeDecodeError as exc:
            cookie = re.search(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", source[:400], re.M)
            if cookie is None:
                raise SourceError(f"not valid UTF-8 ({exc.reason} at byte {exc.start}) and no coding declaration") from None
            try:
                text = source.decode(cookie.group(1).decode("ascii"))
            except (LookupError, UnicodeDecodeError) as exc2:
                raise SourceError(f"cannot decode with the declared encoding: {exc2}") from None
    else:
        text = source
    if "\x00" in text:
        raise SourceError("source contains a NUL byte")
    try:
        tree = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise SourceError(f"syntax error: {exc.message}", line=exc.raw_line) from None
    except RecursionError:
        raise SourceError("too deeply nested to parse") from None
    except Exception as exc:  # libcst raises a few other exception types on exotic input
        raise SourceError(f"cannot parse: {type(exc).__name__}: {exc}".splitlines()[0]) from None
    try:
        return _extract(path, tree, text, module, varying_names, stable_names)
    except RecursionError:
        raise SourceError("too deeply nested to analyze") from None


def _extract(path, tree, text, module, varying, stable) -> FileFacts:
    ext = _Extractor(path, tree, module, varying, stable)
    facts = FileFacts(path=path, module=module, suppressions=_suppressions(text))
    sites = list(iter_kernels(ext.wrapper))
    for site in sites:
        facts.kernels.append(ext.kernel(site))
    walker = _Walker(ext)
    ext.wrapper.visit(walker)
    info = ext.info
    for call, fn, keys in walker.raw_calls:
        for key in keys:
            if key in info.functions:
                info.calls.setdefault(key, []).append((call, fn))
                break
    classifier = Classifier(tree, info, ext.pos, ext.varying, ext.stable)
    for call, fn, kind in walker.launch_calls:
        la = ext.launch(call, fn, kind, classifier)
        if la is not None:
            facts.launches.append(la)
    facts.imports = ext.imports
    facts.aliases = {k: v for k, v in ext.aliases.items()}
    # kernels defined in this file are known by their module-qualified names already
    return facts
