"""Launches of kernels: ``k[grid](...)``, ``k.run(...)`` / ``k.warmup(...)``, launcher functions that
return ``grid, dict(...)``, and calls that hand a kernel to a forwarder; each argument with its
provenance (provenance.Classifier)."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import NamedTuple

from jitguard.static.facts import ArgFacts, EntryRef, KernelFacts, LaunchFacts
from jitguard.static.callers import _LIBRARY_ROOTS
from jitguard.static.names import IMPORT, LOCAL, Scope, qualified, resolve_relative
from jitguard.static.provenance import Classifier, FunctionInfo, int_literal
from jitguard.static.provenance.syntax import own_returns, per_node


_SCALARS = frozenset({"int", "float", "bool", "none", "str"})


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


class LauncherReturn(NamedTuple):
    """``return grid, dict(...)`` in a launcher function tied to kernels (``launchers``)."""

    node: ast.AST  # the function's def
    function: FunctionInfo
    ret: ast.Return
    spec: ast.AST  # the dict (display or dict(...) call)
    targets: list[str]  # qualified names of the kernels it launches


class LaunchExtraction:
    """The launch half of the file extractor (mixed into extract._Extractor): uses its ``walker``,
    ``module``, ``short``, ``fq`` and ``returns_of`` (id of a def -> (def, its own returns))."""

    # ---- launches ----
    def targets(self, callee: ast.AST, scope: Scope, fn: FunctionInfo | None, depth: int = 0) -> list[str]:
        if depth > 4:
            return []
        if isinstance(callee, ast.Name) and fn is not None:
            f = fn
            while f is not None:
                if callee.id in f.assigns:
                    if all(en.kind == "opaque" for en in f.assigns[callee.id]):
                        return self.fq(callee, f.scope)  # a def nested in the function (a kernel made there)
                    out: list[str] = []
                    for en in f.assigns[callee.id]:
                        if en.kind == "expr" and en.node is not None:
                            vals = [en.node.body, en.node.orelse] if isinstance(en.node, ast.IfExp) else [en.node]
                            for v in vals:
                                inner = _unwrap_alias(v)
                                if inner is not None:
                                    out.extend(self.targets(inner, f.scope, f, depth + 1))
                        elif en.kind == "loop" and isinstance(en.stmt, ast.For) and isinstance(en.stmt.target, ast.Name):
                            # for k in (k1, k2): k[grid](...): each kernel the loop goes over
                            out.extend(self.displayed_targets(en.node, f, depth))
                    return out
                if callee.id in f.params:
                    default = f.params[callee.id].default
                    if default is None:
                        return []
                    # def op(x, kernel=_k): kernel[grid](...): the default, as the def's own scope sees it
                    return self.targets(default, f.parent.scope if f.parent else self.top, f.parent, depth + 1)
                f = f.parent
        if isinstance(callee, ast.Subscript) and not isinstance(callee.slice, ast.Slice):
            # KERNELS[mode][grid](...): each kernel of the dict (or tuple) display the name is bound to
            return self.displayed_targets(callee.value, fn, depth)
        if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) and fn is not None \
                and callee.value.id not in ("self", "cls"):
            # k = make(); k.name[grid](...) where make() returns Namespace(name=kernel, ...)
            made = self.made_by(callee.value.id, fn)
            if made is not None:
                out = []
                for f, value in self.returned_fields(made, callee.attr):
                    out.extend(self.targets(value, f.scope, f, depth + 1))
                if out:
                    return out
        if isinstance(callee, ast.Call) and isinstance(callee.func, ast.Attribute) and callee.func.attr == "get" \
                and 1 <= len(callee.args) <= 2 and not callee.keywords:
            # KERNELS.get(mode, k1)[grid](...): a kernel of the dict display, or the default
            out = self.displayed_targets(callee.func.value, fn, depth)
            if out and len(callee.args) == 2:
                out.extend(self.targets(callee.args[1], scope, fn, depth + 1))
            return out
        if isinstance(callee, ast.Call):
            # factory(...)[grid](...): a function of the module that makes (or caches) a kernel and
            # returns it, called at the launch (a lazy `import triton`): the kernels its returns name
            made = self.factory(callee.func, scope)
            if made is None:
                return []
            out = []
            for ret in own_returns(made.node):
                if ret.value is not None:
                    out.extend(self.targets(ret.value, made.scope, made, depth + 1))
            return out
        if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) and callee.value.id in ("self", "cls"):
            if fn is not None and fn.class_name:
                return [f"{self.module}.{fn.qual.rsplit('.', 1)[0]}.{callee.attr}"]
            return []
        return self.fq(callee, scope)

    def bound_value(self, node: ast.AST, fn: FunctionInfo | None) -> tuple[ast.AST | None, FunctionInfo | None]:
        """``node`` itself, or for a name the expression it is bound to once (a local of ``fn`` or of
        an enclosing function, or a name of the module): (expression or None, the function whose
        scope reads it; None: the module's)."""
        if not isinstance(node, ast.Name):
            return node, fn
        f = fn
        while f is not None:
            if node.id in f.assigns:
                entries = f.assigns[node.id]
                return (entries[0].node if len(entries) == 1 and entries[0].kind == "expr" else None), f
            if node.id in f.params:
                return None, f
            f = f.parent
        return self.walker.info.constants.get(node.id), None

    def displayed_targets(self, node: ast.AST, fn: FunctionInfo | None, depth: int) -> list[str]:
        """The kernels among the items of the tuple, list or set display (the values of the dict
        display) that ``node`` is or is bound to once (``bound_value``)."""
        value, owner = self.bound_value(node, fn)
        if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
            items = [e for e in value.elts if not isinstance(e, ast.Starred)]
        elif isinstance(value, ast.Dict):
            items = [v for k, v in zip(value.keys, value.values) if k is not None]
        else:
            return []
        scope = owner.scope if owner else self.top
        return [t for v in items for t in self.targets(v, scope, owner, depth + 1)]

    def factory(self, func: ast.AST, scope: Scope) -> FunctionInfo | None:
        """The function of this module (not a method) that ``func`` names at a call, as ``scope`` sees
        the name: a kernel factory where its returns name a kernel (``targets``)."""
        if not isinstance(func, ast.Name):
            return None
        q = qualified(func, scope)
        if not q or q[0][1] != LOCAL:
            return None
        made = self.walker.info.functions.get(q[0][0])
        return made if made is not None and not made.is_method else None

    def made_by(self, name: str, fn: FunctionInfo) -> FunctionInfo | None:
        """The module-level function of this module whose call a local is bound to, once."""
        f = fn
        while f is not None and name not in f.assigns:
            if name in f.params:
                return None
            f = f.parent
        if f is None:
            return None
        entries = f.assigns[name]
        if len(entries) != 1 or entries[0].kind != "expr" or not isinstance(entries[0].node, ast.Call):
            return None
        made = self.factory(entries[0].node.func, f.scope)
        return made if made is not None and made.parent is None else None

    @staticmethod
    def returned_fields(fn: FunctionInfo, field: str) -> list[tuple[FunctionInfo, ast.AST]]:
        """``return Namespace(field=value, ...)`` / ``return {"field": value}`` in ``fn``: the values."""
        out = []
        for node in ast.walk(fn.node):
            if not isinstance(node, ast.Return) or node.value is None:
                continue
            v = node.value
            if isinstance(v, ast.Call):
                out.extend((fn, kw.value) for kw in v.keywords if kw.arg == field)
            elif isinstance(v, ast.Dict):
                out.extend((fn, val) for key, val in zip(v.keys, v.values)
                           if isinstance(key, ast.Constant) and key.value == field)
        return out

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
                known = self.local_dict(kw.value, fn, classifier)
                if known is None:
                    la.star_kwargs = True
                    continue
                owner, items = known
                for key, value in items:  # kernel[grid](x, **kw) with kw = dict(n=..., BLOCK=...) above
                    la.keywords_order.append(key)
                    la.options[key] = self.short(value, 60)
                    la.args.append(self.arg(value, classifier, owner, keyword=key))
                continue
            la.keywords_order.append(kw.arg)
            la.options[kw.arg] = self.short(kw.value, 60)
            la.args.append(self.arg(kw.value, classifier, fn, keyword=kw.arg))

    @staticmethod
    def local_dict(value: ast.AST, fn, classifier: Classifier):
        """``**kw`` where ``kw`` is a local bound once to a dict display with string keys or to
        ``dict(k=v, ...)``: (the function it is bound in, [(key, value)]); None otherwise."""
        if not isinstance(value, ast.Name) or fn is None:
            return None
        owner, where = classifier.lookup(value.id, fn)
        entries = owner.assigns.get(value.id, []) if where == "assign" else []
        if len(entries) != 1 or entries[0].kind != "expr":
            return None
        node = entries[0].node
        if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
            return owner, [(k.value, v) for k, v in zip(node.keys, node.values)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args \
                and all(k.arg is not None for k in node.keywords) and classifier.lookup("dict", owner)[1] == "free":
            return owner, [(k.arg, k.value) for k in node.keywords]
        return None

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
                                div16=prov.div16, by_name=prov.by_name, guess=prov.guess, rules=list(dict.fromkeys(prov.rules))))
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
        out = ArgFacts(
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
            rules=list(dict.fromkeys(prov.rules)),
            counts=list(prov.counted) if "element-count" in prov.rules else [],
            returns=prov.ret,
            also=[self.entry_ref(prov._replace(entry=e)) for e in prov.also],
        )
        if prov.vtype not in _SCALARS:  # its tensor_root, once the file's counts are known (extract.py)
            self.unrooted[id(out)] = (out, node, fn)
        return out

    def entry_ref(self, prov) -> EntryRef | None:
        """The entry parameter a value rests on, its function qualified by this module."""
        if prov.entry is None or not self.module:
            return prov.entry
        return replace(prov.entry, function=f"{self.module}.{prov.entry.function}")

    @staticmethod
    def _spec_dict(node: ast.AST) -> bool:
        """A dict display with string keys, or ``dict(k=v, ...)``."""
        if isinstance(node, ast.Dict):
            return bool(node.keys) and all(k is None or (isinstance(k, ast.Constant) and isinstance(k.value, str))
                                           for k in node.keys)
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
            and not node.args and bool(node.keywords)

    def own_returns(self, fn_node: ast.AST) -> list[ast.Return]:
        """``syntax.own_returns(fn_node)``, made once per function: ``returns_of`` is the table the
        file's Classifier reads too (Classifier's ``returns``)."""
        return per_node(self.returns_of, fn_node, own_returns)

    def _spec_returns(self, st) -> list[tuple[ast.Return, ast.AST]]:
        """``return grid, dict(...)`` / ``return grid, {...}, extra`` in a function's own body."""
        if id(st) not in self.walker.tuple_returns:  # no return of a 2- or 3-tuple of its own
            return []
        out = []
        for node in self.own_returns(st):
            v = node.value
            if isinstance(v, ast.Tuple) and 2 <= len(v.elts) <= 3 and self._spec_dict(v.elts[1]) \
                    and not self._spec_dict(v.elts[0]):
                out.append((node, v.elts[1]))
        return out

    def launchers(self, kernels: list[KernelFacts]) -> list[LauncherReturn]:
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
                out.append(LauncherReturn(st, info, ret, spec, list(dict.fromkeys(targets))))
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
        """Calls that hand a kernel of this module (or one of ``handed_of``, imported) to a function,
        with keyword, dict or tuple arguments: ``launch_autotuned(k, grid, n=x.shape[0])``. Kept as
        launches bound only when link.py finds the function to be a forwarder (it launches its kernel
        parameter with its **kwargs, a dict or a tuple parameter)."""
        local = {k.name: k.qualname for k in kernels if "." not in k.qualname[len(self.module) + 1:]} \
            if self.module else {k.name: k.qualname for k in kernels if "." not in k.qualname}
        if not local and not self.handed_of:
            return []
        out = []
        forwarders = getattr(self, "local_forwarders", {})
        for call, scope, fn in self.walker.calls:
            if not isinstance(call.func, (ast.Name, ast.Attribute)) or not (call.keywords or any(
                    self.dict_items(a, fn, scope) is not None for a in call.args) or (
                    isinstance(call.func, ast.Name) and call.func.id in forwarders)):
                continue
            values = list(call.args) + [kw.value for kw in call.keywords if kw.arg is not None]
            handed = [(v.id not in local, fq) for v in values if isinstance(v, ast.Name)
                      and (fq := self.handed_kernel(v, scope, local)) is not None]
            if not handed:
                continue
            via = self.fq(call.func, scope)
            if via:  # this module's kernels first: an imported name handed beside one is rarely a kernel
                out.append((call, fn, list(dict.fromkeys(fq for _, fq in sorted(handed, key=lambda h: h[0]))), via))
        return out

    def handed_kernel(self, v: ast.Name, scope: Scope, local: dict[str, str]) -> str | None:
        """The kernel a name handed to a function may be: one of this module's, or a name imported
        from a module of the tree (link.py keeps the launch only where it names a kernel and the
        function launches its kernel parameter)."""
        if v.id not in local and (not self.handed_of or v.id not in self.handed_of):
            return None
        q = qualified(v, scope)
        if not q:
            return None
        name, source = q[0]
        if source == LOCAL:
            return local.get(v.id) if name == v.id else None
        if source == IMPORT and self.handed_of:
            target = resolve_relative(name, self.module, self.is_package)
            if "." in target and target.split(".")[0] not in _LIBRARY_ROOTS:
                return target
        return None

    def handed_launch(self, call: ast.Call, fn, kernels: list[str], via: list[str], classifier: Classifier) -> LaunchFacts:
        la = LaunchFacts(callee=self.short(call.func), targets=list(kernels), line=call.lineno,
                         column=call.col_offset + 1, kind="grid",
                         function=(f"{self.module}.{fn.qual}" if fn is not None else None), via=list(via))
        local = getattr(self, "local_forwarders", {}).get(call.func.id) if isinstance(call.func, ast.Name) else None
        if local is not None:
            # a forwarder of this module: its tuple parameter is the launch's positionals, its dict
            # parameters the launch's keywords
            _, star, dicts = local
            given = [a for a in call.args if not isinstance(a, ast.Starred)]
            if len(given) != len(call.args):
                return la
            byname = {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}

            def passed(p):
                return given[p.index] if 0 <= p.index < len(given) else byname.get(p.name)

            node = passed(star) if star is not None else None
            owner = fn
            if isinstance(node, ast.Name):
                owner_fn, where = classifier.lookup(node.id, fn)
                entries = owner_fn.assigns.get(node.id, []) if where == "assign" else []
                node = entries[0].node if len(entries) == 1 and entries[0].kind == "expr" else None
                owner = owner_fn
            if isinstance(node, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in node.elts):
                for i, e in enumerate(node.elts):
                    la.args.append(self.arg(e, classifier, owner, position=i))
            elif star is not None:
                la.star_args = True
            for p in dicts:
                got = self.dict_items(passed(p), fn) if passed(p) is not None else None
                if got is None:
                    la.star_kwargs = True
                    continue
                owner, items = got
                for key, value in items:
                    la.keywords_order.append(key)
                    la.args.append(self.arg(value, classifier, owner, keyword=key))
            return la
        self.add_keywords(la, call, classifier, fn)
        for i, a in enumerate(call.args):  # launch(k, grid, (x, n)): a tuple the function may splat
            node, owner = self.bound_value(a, fn)  # or one a local is bound to once
            if isinstance(node, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in node.elts):
                la.packs.append((i, [self.arg(e, classifier, owner, position=j) for j, e in enumerate(node.elts)]))
        for a in call.args:  # launch(k, grid, dict(n=...)): a dict the forwarder splats into the launch
            got = self.dict_items(a, fn)
            if got is not None:
                owner, items = got
                for key, value in items:
                    la.keywords_order.append(key)
                    la.args.append(self.arg(value, classifier, owner, keyword=key))
        return la

    def dict_items(self, node: ast.AST, fn, scope=None):
        """(function, [(key, value)]) of a dict display with string keys, ``dict(k=v)``, or a local
        bound once to one; None otherwise."""
        if isinstance(node, ast.Dict) and node.keys and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                            for k in node.keys):
            return fn, [(k.value, v) for k, v in zip(node.keys, node.values)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args \
                and node.keywords and all(k.arg is not None for k in node.keywords):
            return fn, [(k.arg, k.value) for k in node.keywords]
        if isinstance(node, ast.Name) and fn is not None:
            value, owner = self.bound_value(node, fn)
            if owner is not None and isinstance(value, (ast.Dict, ast.Call)):
                return self.dict_items(value, owner)
        return None
