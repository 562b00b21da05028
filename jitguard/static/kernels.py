"""Kernel discovery on the stdlib ``ast``: ``@triton.jit`` (with ``autotune`` / ``heuristics`` on top)
and ``k = triton.jit(f)`` forms, resolved through imports and aliases (names.py), with each kernel's
parameters, their uses, and its do_not_specialize / autotune key / heuristics entries."""
from __future__ import annotations

import ast

from jitguard.static.facts import USE_ADDRESS, USE_LOOP_BOUND, KernelFacts, ParamFacts, ParamUse
from jitguard.static.names import is_triton_name, qualified
from jitguard.static.param_uses import analyze_uses
from jitguard.static.scopes import Scope

DNS = "do_not_specialize"
_HELPER_LEVELS = 3  # jit helpers calling helpers: the codebases measured go 2 deep
DNSOA = "do_not_specialize_on_alignment"


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


class KernelDiscovery:
    """The kernel half of the file extractor (mixed into extract._Extractor): uses its ``walker``,
    ``top``, ``module``, ``src`` and ``short``."""

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

    # ---- discovery ----
    def discover(self) -> list[KernelFacts]:
        out: list[KernelFacts] = []
        self._handed: dict[int, dict[str, list]] = {}  # id(kernel) -> the pointers it hands to helpers
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
        self.handed_index_loads(out)
        return out

    def handed_index_loads(self, kernels: list[KernelFacts]) -> None:
        """A pointer a kernel hands to a jit helper of this file (``helper(p)``) whose parameter the
        helper loads integers through is one the kernel loads integers through too (through helpers
        of helpers, up to a few levels); so is one whose loaded values it hands to a helper that uses
        that parameter in an address or as a loop bound (``helper(tl.load(p + i))``)."""
        if not self._handed:
            return
        helpers: dict[str, KernelFacts] = {}
        for k in kernels:
            helpers.setdefault(k.function, k)

        def param_of(k, callee, where):
            h = helpers.get(callee)
            if h is None or h is k:
                return None
            if isinstance(where, int):
                return h.params[where] if where < len(h.params) else None
            return h.param(where)

        for _ in range(_HELPER_LEVELS):
            changed = False
            for k in kernels:
                pointers, values = self._handed.get(id(k), ({}, {}))
                for p in k.params:
                    if p.index_load is not None:
                        continue
                    for callee, where in pointers.get(p.name, ()):
                        hp = param_of(k, callee, where)
                        if hp is not None and hp.index_load is not None:
                            u = hp.index_load
                            p.index_load = ParamUse(u.kind, u.line, u.column, f"in {callee}: {u.context}")
                            break
                    for callee, where in values.get(p.name, ()) if p.index_load is None else ():
                        hp = param_of(k, callee, where)
                        u = next((u for u in hp.uses if u.kind in (USE_ADDRESS, USE_LOOP_BOUND)), None) \
                            if hp is not None and not hp.is_constexpr else None
                        if u is not None:
                            p.index_load = ParamUse(u.kind, u.line, u.column, f"in {callee}: {u.context}")
                            break
                    changed = changed or p.index_load is not None
            if not changed:
                break

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
        got = analyze_uses(fn, [p.name for p in params], self.src.segment,
                           frozenset(p.name for p in params if p.is_constexpr))
        for p in params:
            p.uses = got.uses.get(p.name, [])
            p.pointer = p.name in got.pointers and not p.is_constexpr
            p.index_load = got.index_loads.get(p.name)
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
        if got.handed or got.loaded_handed:
            self._handed[id(k)] = (got.handed, got.loaded_handed)
        return k
