"""The Classifier: follows a launch argument through local assignments, tuple unpacking of shapes,
closures, module constants and the wrapper functions of the same module that call the launcher, to a
class (VARYING, BUCKETED, STABLE, UNKNOWN) with the evidence for it."""
from __future__ import annotations

import ast
import builtins
import copy

from jitguard.static.facts import BUCKETED, STABLE, UNKNOWN, VARYING, ArgFacts, EntryRef, ReturnDep, ReturnFacts, ReturnRef
from jitguard.static.names import dotted
from jitguard.static.provenance.bindings import Entry, FunctionInfo, ModuleInfo, ParamInfo
from jitguard.static.provenance.conventions import (
    _ALLOC, _ARITH_FUNCS, _ARRAY_MODULES, _BUCKET, _DATA_DEP, _HOST_RANDOM, _LIKE, _RANDOM_MODULES, _REDUCE, _ROUND_UP, _STABLE_CALLS,
    annotation_vtype, name_class, strong_stable, weight_like,
)
from jitguard.static.provenance.guards import GuardedValues
from jitguard.static.provenance.memo import Memos
from jitguard.static.provenance.syntax import _call_name, _int_index, int_literal, is_none, per_node, pow2_form, stops_at_first_success, walk
from jitguard.static.provenance.rules import RULES, confidence, limit
from jitguard.static.provenance.tensors import _TENSOR_OWN_TENSORS, TensorLayouts
from jitguard.static.provenance.value import Prov, join, model_dim

_LITERAL = ("literal",)
_BUILTINS = frozenset(dir(builtins)) | {"self", "cls"}
# attributes and methods only a tensor (or an array) has: a name read through one is no list
_TENSOR_ONLY = frozenset({"shape", "stride", "device", "dtype", "numel", "tolist", "item", "cumsum", "data_ptr",
                          "is_cuda", "contiguous", "view", "ndim", "dim", "element_size"})
_TO_INT = {"ceil", "floor", "int", "trunc", "round", "cdiv", "ceil_div", "div_up", "ceildiv"}
_DEPTH = limit("assignment", "depth")
_FIXED_DEPTH = limit("fixed-loop", "depth")
_FIXED_RANGE = limit("fixed-loop", "range")
# a range over a tensor dim the conventions guess fixed is not a held collection (held-collection-loop)
_GUESSED_DIMS = frozenset({"model-dim", "existing-stride", "row-size", "shape-product", "name-over-guess"})
_RETURNS_DEPTH = limit("returns", "depth")
_CALLER_DEPTH = limit("local-caller", "depth")
_WINDOW_DEPTH = limit("single-pass-return", "depth")
_WINDOW_RETURNS = limit("single-pass-return", "returns")
_CALLERS = limit("local-caller", "callers")
_ATTR_VALUES = limit("object-attribute", "values")
_PER_CALL_NESTING = limit("returns-per-call", "nesting")
_ELSEWHERE_ARGS = limit("returns-elsewhere", "arguments")
# the value a parameter is bound to when the summary for other modules asks whether the return varies
# with it (returns-elsewhere): its evidence text marks where the chain reaches the parameter
_PARAM_MARK = "\0the parameter"
# calls that return a power of two (rule pow2-floor)
_POW2_CALLS = frozenset({"next_power_of_2", "next_pow2", "next_power_of_two"})
# conventions that a value is a multiple of 16: arithmetic other than `*` makes it a count again
_ALIGNED_BY_CONVENTION = frozenset({"count-times-dim", "alignment-guard-convention"})


def _one_element(node: ast.AST | None) -> bool:
    """``[x]`` / ``(x,)``: a list or tuple literal of one element, not starred."""
    return isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) == 1 and not isinstance(node.elts[0], ast.Starred)


def _target_path(target: ast.AST, name: str) -> tuple[int, ...] | None:
    """Where ``name`` sits in a loop target: ``()`` for ``for name in``, ``(0,)`` for ``for name, b
    in``, ``(1, 0)`` for ``for a, (name, c) in``; None if it is not there or under a star."""
    if isinstance(target, ast.Name):
        return () if target.id == name else None
    if isinstance(target, (ast.Tuple, ast.List)):
        for i, el in enumerate(target.elts):
            if isinstance(el, ast.Starred):
                if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(el)):
                    return None
                continue
            sub = _target_path(el, name)
            if sub is not None:
                if any(isinstance(e, ast.Starred) for e in target.elts[:i]):
                    return None  # its position counts from the end: not read
                return (i,) + sub
    return None


def _component(node: ast.AST, path: tuple[int, ...]) -> ast.AST | None:
    """The part of ``node`` at ``path`` through tuple/list literals written in the code; None where
    a step is anything else."""
    for i in path:
        if not isinstance(node, (ast.Tuple, ast.List)) or i >= len(node.elts) \
                or any(isinstance(x, ast.Starred) for x in node.elts):
            return None
        node = node.elts[i]
    return node



# code whose body runs when called or iterated, not where it is written (read-before-assign)
_DEFERRED = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.GeneratorExp)


def _flow_spans(fn_node: ast.AST, nodes: tuple[ast.AST, ...]) -> tuple[dict, list, list]:
    """What read-before-assign asks of a function, made once per function from its walk
    (``nodes``): the end of each assignment statement by its first line, the line spans of its
    loops, the spans of the code in it that runs later (lambdas, nested functions, generators)."""
    ends = {st.lineno: (st.end_lineno or st.lineno, st.end_col_offset or 0)
            for st in nodes if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign))}
    loops = [(n.lineno, n.end_lineno or n.lineno) for n in nodes if isinstance(n, (ast.For, ast.AsyncFor, ast.While))]
    deferred = [((n.lineno, n.col_offset), (n.end_lineno or n.lineno, n.end_col_offset or 0))
                for n in nodes if isinstance(n, _DEFERRED) and n is not fn_node]
    return ends, loops, deferred

class Classifier(TensorLayouts, GuardedValues, Memos):
    def __init__(self, info: ModuleInfo, segment, varying: frozenset[str], stable: frozenset[str],
                 returns: dict | None = None, module: str = "", resolve=None):
        self.info = info
        # resolve(func, fn): the fully qualified function of another module of the tree a call's
        # ``func`` names through an import (None: not one); returns-elsewhere records those calls
        self.module = module
        self.resolve = resolve
        self.segment = segment
        self.varying = varying
        self.stable = stable
        # returns-per-call: the parameters bound to one call's arguments, (id(function), name) -> class
        self._bound: dict[tuple[int, str], Prov] = {}
        self._per_call: dict[tuple, Prov | None] = {}
        self._bound_stack: list[int] = []
        self._binds_only: dict[int, bool] = {}
        self._comprehension_elements: dict[tuple[int, int], tuple[ast.AST, ast.AST]] = {}
        self._memos_init(returns)
        self._guards_init()

    # ---- helpers ----

    def code(self, node: ast.AST) -> str:
        text = " ".join(self.segment(node).split())
        return text if len(text) <= 60 else text[:57] + "..."

    def by_name(self, name: str | None) -> str | None:
        return name_class(name, self.varying, self.stable)

    def lookup(self, name: str, fn: FunctionInfo | None) -> tuple[FunctionInfo | None, str]:
        """Where ``name`` is bound: ('assign'|'param'|'import'|'module'|'free') and the function."""
        f = fn
        while f is not None:
            if name in f.assigns:
                return f, "assign"
            if name in f.params:
                return f, "param"
            if name in f.imported:
                return f, "import"
            f = f.parent
        if name in self.info.constants:
            return None, "module"
        if name in self.info.imported:
            return None, "import"
        return None, "free"

    def lookup_read(self, t: ast.Name, fn: FunctionInfo | None) -> tuple[FunctionInfo | None, str]:
        """``lookup`` of the name ``t`` reads, where it is read: a parameter read before the body
        assigns it is the parameter (rule read-before-assign)."""
        if fn is not None and self.reads_incoming(t, fn):
            return fn, "param"
        return self.lookup(t.id, fn)

    def apply_name(self, name: str, prov: Prov) -> Prov:
        cls = self.by_name(name)
        if cls is None:
            return prov
        return Prov(cls, prov.vtype, (f"{name}: the name suggests a {'per-call' if cls == VARYING else 'fixed'} value",),
                    False, True, rules=(self.name_rule(name, cls),), ret=prov.ret)

    def name_rule(self, name: str, cls: str) -> str:
        """The rule a name's verdict cites: the project's own list, or the built-in conventions."""
        if name in self.varying or name in self.stable:
            return "configured-name"
        return "name-varying" if cls == VARYING else "name-stable"

    # ---- entry point ----
    def classify(self, expr: ast.AST, fn: FunctionInfo | None, depth: int = 0) -> Prov:
        try:
            return self._classify(expr, fn, depth)
        except RecursionError:
            return Prov(UNKNOWN)

    def _classify(self, e: ast.AST, fn: FunctionInfo | None, depth: int) -> Prov:
        out = self._classify_node(e, fn, depth)
        if fn is not None and (out.cls == UNKNOWN or (out.cls == VARYING and out.by_name)) \
                and out.vtype in ("int", "unknown") and not isinstance(e, ast.Constant):
            out = self.live_count(e, fn, out)  # buf[:n] in the function: n is a live count (guards.py)
        if self._gfacts and fn is self._gfn:
            out = self.guarded(e, fn, out)  # guards before the launch in force (guards.py)
        return out

    def _classify_node(self, e: ast.AST, fn: FunctionInfo | None, depth: int) -> Prov:
        if depth > _DEPTH:
            return Prov(UNKNOWN)
        d = depth + 1
        if isinstance(e, ast.Constant):
            v = e.value
            if isinstance(v, bool):
                return Prov(STABLE, "bool", (f"literal {v}",), rules=_LITERAL)
            if isinstance(v, int):
                return Prov(STABLE, "int", (f"literal {v}",), v != 0 and v % 16 == 0, rules=_LITERAL)
            if isinstance(v, float):
                return Prov(STABLE, "float", (f"literal {v}",), rules=_LITERAL)
            if v is None:
                return Prov(STABLE, "none", ("None",), rules=_LITERAL)
            return Prov(STABLE, "str", rules=_LITERAL)
        if isinstance(e, ast.Name):
            if fn is not None and self.reads_incoming(e, fn):
                return self.param(fn, e.id, d).by("read-before-assign")  # before the body assigns it
            return self.name(e.id, fn, d)
        if isinstance(e, ast.UnaryOp):
            inner = self._classify(e.operand, fn, d)
            return inner.as_type("bool") if isinstance(e.op, ast.Not) else inner._replace(div16=inner.div16 and isinstance(e.op, ast.USub))
        if isinstance(e, ast.BinOp):
            row = self.row_size(e, fn) if isinstance(e.op, ast.FloorDiv) else None
            if row is not None:
                return row
            left, right = self._classify(e.left, fn, d), self._classify(e.right, fn, d)
            out = join([left, right], "float" if isinstance(e.op, ast.Div) else None)
            if isinstance(e.op, ast.Mult):
                out = out._replace(div16=left.div16 or right.div16)
                if out.cls == VARYING and not out.div16 and any(
                        "row-size" in f.rules and model_dim(f, c) for f, c in ((right, left), (left, right))):
                    # rows * (x.numel() // rows): a count times the size of one row (its model dims)
                    out = out.by("count-times-dim")
            elif isinstance(e.op, ast.LShift):
                shift = int_literal(e.right)
                out = out._replace(div16=left.div16 or (shift is not None and shift >= 4))
                if pow2_form(e) and right.cls == VARYING:
                    return Prov(BUCKETED, "int", (f"{self.code(e)}: a power of two (few distinct values)",) + right.evidence,
                                rules=("bucket",) + right.rules)
                if pow2_form(e) and right.cls != VARYING and right.entry is not None:
                    out = out._replace(bucket=True)
            elif isinstance(e.op, ast.Pow) and pow2_form(e) and right.cls == VARYING:
                return Prov(BUCKETED, "int", (f"{self.code(e)}: a power of two (few distinct values)",) + right.evidence,
                            rules=("bucket",) + right.rules)
            elif isinstance(e.op, ast.Pow) and pow2_form(e) and right.cls != VARYING and right.entry is not None:
                out = out._replace(bucket=True)
            elif not isinstance(e.op, (ast.Add, ast.Sub)):
                out = out._replace(div16=False)
            if not isinstance(e.op, ast.Mult) and _ALIGNED_BY_CONVENTION & set(out.rules):
                # x.numel() // x.size(-1), x.numel() - 1: a count again, which the convention says nothing of
                out = out._replace(rules=tuple(r for r in out.rules if r not in _ALIGNED_BY_CONVENTION))
            if isinstance(e.op, (ast.FloorDiv, ast.Div, ast.Sub)):
                out = self.rows_of_count(e, left, right, out, fn)  # x.numel() // x.shape[-1]: rows
            if isinstance(e.op, (ast.FloorDiv, ast.Div)) and right.cls == VARYING and self.written_int(e.left, fn):
                # 512 // n: a budget written in the code shared out over a count is no longer that
                # count: a name saying "model dimension" does not describe the count the guess is about
                out = out._replace(guess=False).by("budget-split")
            if isinstance(e.op, (ast.FloorDiv, ast.Div)) and left.cls == VARYING and right.cls == VARYING \
                    and confidence(left.rules, left.by_name) != "high" and confidence(right.rules, right.by_name) != "high" \
                    and not (self.sources(e.left, fn) & self.sources(e.right, fn)):
                # tokens // requests: the batch cancels out, what is left is often a configured ratio
                return out.why(f"{self.code(e)}: a quotient of two per-call counts (often a configured ratio)",
                               "count-ratio", "arithmetic")
            if out.cls == VARYING:
                return out.why(f"{self.code(e)}: arithmetic on a varying value", "arithmetic")
            return out
        if isinstance(e, ast.Compare):
            out = join([self._classify(x, fn, d) for x in [e.left, *e.comparators]])
            return out._replace(vtype="bool", div16=False)
        if isinstance(e, ast.BoolOp):
            return join([self._classify(x, fn, d) for x in e.values])
        if isinstance(e, ast.IfExp):
            return join([self._classify(e.body, fn, d), self._classify(e.orelse, fn, d)])
        if isinstance(e, ast.Attribute):
            return self.attribute(e, fn, d)
        if isinstance(e, ast.Subscript):
            return self.subscript(e, fn, d)
        if isinstance(e, ast.Call):
            return self.call(e, fn, d)
        if isinstance(e, ast.NamedExpr):
            return self._classify(e.value, fn, d)
        if isinstance(e, (ast.Tuple, ast.List)):
            return Prov(UNKNOWN, "tuple")
        return Prov(UNKNOWN)

    # ---- names ----
    def name(self, name: str, fn: FunctionInfo | None, depth: int) -> Prov:
        owner, where = self.lookup(name, fn)
        if where == "assign":
            return self._memo_cycle((id(owner), name), lambda: self._assigned(name, owner, depth), Prov(UNKNOWN),
                                    memo=self._memo)
        if where == "param":
            return self.param(owner, name, depth)
        if where == "module":
            key = (0, name)
            if key in self._busy:
                return Prov(STABLE, evidence=(f"{name}: module-level value",), rules=("module-constant",))
            self._busy.add(key)
            try:
                inner = self._classify(self.info.constants[name], None, depth)
            finally:
                self._busy.discard(key)
            if inner.cls in (UNKNOWN, STABLE):
                return Prov(STABLE, inner.vtype, (f"{name}: module-level constant",), inner.div16,
                            rules=("module-constant",))
            if name not in self.info.rebound:
                return self.import_time(name, inner)
            return inner.why(f"module-level {name} = {self.code(self.info.constants[name])}")
        if where == "import":
            return Prov(STABLE, "unknown", (f"{name}: imported constant",), rules=("imported-name",))
        return self.apply_name(name, Prov(UNKNOWN))

    def _assigned(self, name: str, owner: FunctionInfo, depth: int) -> Prov:
        """A local of ``owner``: the most varying of the values it is assigned."""
        entries = owner.assigns[name]
        # `x = f(x)` (x = min(x, cap)): the earlier values first; the reassignment sees them
        own = [en for en in entries if ((en.kind in ("expr", "aug") and en.node is not None
                                         and name in self.names_in(en.node))
                                        or self.unpacks_itself(name, en, owner))]
        first = [self.entry(name, en, owner, depth) for en in entries if all(en is not o for o in own)]
        if own and not first and name in owner.params and not self.reassigned_in_body(entries, owner):
            # a parameter reassigned only from itself and only under a condition (`if c: x =
            # x.contiguous()`): the reads see what the callers pass too (rule param-reassigned)
            first = [self.param(owner, name, depth)]
        if own and first:
            self._memo[(id(owner), name)] = join(first)  # what the reassignment sees (dropped after)
        last = self.last_reassignment(name, entries, own, owner)
        if last is not None:
            # x = f(x) unconditionally after every other assignment and before every read:
            # the reads see its value alone (it sees the earlier ones)
            out = self.entry(name, last, owner, depth).why(
                f"{name} as reassigned at line {last.line}, before every read", "last-reassignment")
        else:
            out = join(first + [self.entry(name, en, owner, depth) for en in own])
        return self.apply_name(name, out) if out.cls == UNKNOWN else out

    def reads_incoming(self, t: ast.Name, fn: FunctionInfo) -> bool:
        """``t`` reads a parameter of ``fn`` that the body assigns, but before any assignment of it can
        have run: each assignment statement ends after the read (``a, x = f(x)``: the read is in its own
        right-hand side), none in a loop around the read, and the read is not in code that runs later
        (rule read-before-assign)."""
        entries = fn.assigns.get(t.id)
        if not entries or t.id not in fn.params or fn.params[t.id].kind == "star":
            return False
        ends, loops, deferred = per_node(self._flow, fn.node, lambda n: _flow_spans(n, self.walk(n)))
        at = (t.lineno, t.col_offset)
        for en in entries:
            if en.kind == "loop" and en.stmt is not None:
                it = en.stmt.iter  # for x in f(x): the iterable is read before x is bound
                end = (it.end_lineno or it.lineno, it.end_col_offset or 0)
            else:
                end = ends.get(en.line, (en.line, 0))
            if at >= end:
                return False
        if any(first <= t.lineno <= last and any(first <= en.line <= last for en in entries) for first, last in loops):
            return False
        return not any(start <= at < stop for start, stop in deferred)

    def power_of_two(self, e: ast.AST, fn: FunctionInfo | None, seen: frozenset[str] = frozenset()) -> bool:
        """``e`` is always a power of two by its code (rule pow2-floor): a literal one, a
        ``next_power_of_2`` call, ``1 << k``, ``2 ** k``, ``max``/``min`` of such values, or a local
        every assignment of which is one (a reassignment from itself included)."""
        if (v := int_literal(e)) is not None:
            return v > 0 and v & (v - 1) == 0
        if isinstance(e, ast.BinOp):
            return pow2_form(e)
        if isinstance(e, ast.Call):
            name = _call_name(e.func)
            if name in _POW2_CALLS:
                return True
            return name in ("max", "min") and isinstance(e.func, ast.Name) and bool(e.args) and not e.keywords \
                and all(self.power_of_two(a, fn, seen) for a in e.args)
        if isinstance(e, ast.Name) and fn is not None:
            if e.id in seen:
                return True  # `x = max(x, 16)`: what x was before, which the other assignments decide
            owner, where = self.lookup(e.id, fn)
            if where != "assign":
                return False
            entries = owner.assigns[e.id]
            if e.id in owner.params and not self.assigned_before_use(owner.node, e.id):
                return False  # the caller's value may reach a read unassigned
            return all(en.kind == "expr" and en.node is not None and self.power_of_two(en.node, owner, seen | {e.id})
                       for en in entries)
        return False

    def assigned_before_use(self, fn_node: ast.AST, name: str) -> bool:
        """The first statement of the function body that touches ``name`` assigns it on every path
        without reading it (``x = ...``), or is an ``if``/``else`` each branch of which does so or
        assigns it from a ``next_power_of_2``-like call of anything (``x = next_power_of_2(x)``): no
        later read sees the parameter's own value."""
        def assigns(block: list) -> bool:
            for st in block:
                if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in st.targets):
                    return name not in self.names_in(st.value) or (
                        isinstance(st.value, ast.Call) and _call_name(st.value.func) in _POW2_CALLS)
                if name in self.names_in(st):
                    return isinstance(st, ast.If) and bool(st.orelse) and assigns(st.body) and assigns(st.orelse)
            return False
        return assigns(getattr(fn_node, "body", []))

    @staticmethod
    def reassigned_in_body(entries: list[Entry], fn: FunctionInfo) -> bool:
        """One of ``entries`` is a statement of ``fn``'s own body (not under an ``if``, loop or
        ``try``): every read after it sees the reassigned value."""
        lines = {st.lineno for st in fn.node.body if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign))}
        return any(en.line in lines for en in entries)

    def last_reassignment(self, name: str, entries: list[Entry], own: list[Entry], fn: FunctionInfo) -> Entry | None:
        """The ``name = f(name)`` statement of ``fn``'s own body (not under an ``if``, loop or ``try``)
        that comes after every other assignment of ``name`` and before every read of it outside its
        own right-hand side: what every read sees (rule last-reassignment). None otherwise."""
        if len(entries) < 2 or not own:
            return None
        last = max(entries, key=lambda en: en.line)
        if last.kind != "expr" or all(last is not o for o in own) \
                or sum(en.line == last.line for en in entries) != 1:
            return None
        st = next((st for st in fn.node.body if isinstance(st, ast.Assign) and st.value is last.node
                   and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)), None)
        if st is None:
            return None
        # reads in its own right-hand side, or in an earlier reassignment from itself (`x = g(x)` in a
        # branch): those feed values of the name, not a use that sees an earlier value
        inside = {id(n) for en in own if en.node is not None for n in self.walk(en.node)}
        inside |= {id(n) for n in self.walk(st.value)}
        # `if x is None:` asks whether a value was given, it uses none
        inside |= {id(n.left) for n in self.walk_of(fn.node, ast.Compare)
                   if len(n.ops) == 1 and isinstance(n.ops[0], (ast.Is, ast.IsNot)) and is_none(n.comparators[0])}
        end = st.end_lineno or st.lineno
        for node in self.walk_of(fn.node, ast.Name):
            if node.id == name and isinstance(node.ctx, ast.Load) and id(node) not in inside and node.lineno <= end:
                return None
        return last

    def entry(self, name: str, en: Entry, fn: FunctionInfo, depth: int) -> Prov:
        where = f"line {en.line}"
        if en.kind == "loop":
            dims = self._dims_iterated(en.node, fn)
            if dims is not None:
                # for s in x.shape[1:]: n *= s -- each value is a dim of x, not a counter
                t, start = dims
                if start >= 1:
                    return Prov(STABLE, "int", (f"{name}: a non-leading dimension of {self.code(t)} ({where})",),
                                rules=("shape-product", "model-dim"))
                return self.dim(t, 0, fn, depth, line=en.line).why(
                    f"{name}: a dimension of {self.code(t)}, the leading one among them ({where})", "shape-product")
            if en.node is not None and self.fixed_collection(en.node, fn):
                return Prov(STABLE, "unknown", (f"{name}: loop over a fixed set of values written in the code ({where})",),
                            rules=("fixed-loop",))
            few = self.few_loop_values(name, en, fn, depth) or self.loop_over_returns(name, en, fn, depth)
            if few is not None:
                return few
            return Prov(VARYING, "int", (f"{name}: loop variable ({where})",), rules=("loop-counter",))
        if en.kind == "opaque":
            return Prov(UNKNOWN)
        if en.kind == "stride":
            return self.stride(en.node, en.index, fn, depth).why(
                f"{name} = {self.code(en.node)}.stride()[{en.index}] (unpacked, {where})")
        if en.kind == "dim":
            return self.name_overrides_guess(name, self.dim(en.node, en.index, fn, depth, target=name, ndim=en.ndim, line=en.line))
        if en.kind == "item":
            element = self.comprehension_element(en, fn)
            if element is not None:
                # a, b = (s // v for s in t) with t a tuple written here: element i with s = t[i]
                inner = self._classify(element, fn, depth)
                if inner.cls == UNKNOWN:
                    return self.apply_name(name, inner)
                return inner.why(f"{name} = element {en.index} of {self.code(en.node)} ({where})", "unpacked-comprehension")
            # a, b = f(...) with f a function of this module returning a tuple: take element i
            call = en.node
            if en.index is not None and isinstance(call, ast.Call) and (callee := self.local_callee(call, fn)) is not None:
                got = self.returns_at(callee, call, fn, depth, item=en.index)
                if got is not None and got.cls != UNKNOWN:
                    return got.why(f"{name} = element {en.index} of what {callee.name}() returns with the arguments "
                                   f"of line {en.line}", "returns-per-call")
                got = self.returns(callee, depth, item=en.index)
                if got is not None and got.cls != UNKNOWN:
                    return got.why(f"{name} = element {en.index} of what {callee.name}() returns (line {en.line})", "returns")
            if en.index is not None and isinstance(call, ast.Attribute) and call.attr in self.info.attrs:
                # a, b = meta.plan: element i of the tuples assigned to .plan in this module
                got = self.assigned_attr(call.attr, depth, item=en.index)
                if got is not None and got.cls in (VARYING, BUCKETED):
                    return got.why(f"{name} = element {en.index} of {self.code(call)} (line {en.line})", "object-attribute")
            ref = self.imported_return(call, fn, depth, en.index) if isinstance(call, ast.Call) else None
            return self.apply_name(name, Prov(UNKNOWN, ret=ref))
        shape_dim = self._shape_dim(en.node)
        if shape_dim is not None:  # n = x.shape[i] / x.size(i): the target's name is evidence for i
            t, index = shape_dim
            return self.name_overrides_guess(name, self.dim_at(t, index, fn, depth, target=name, line=en.line))
        inner = self._classify(en.node, fn, depth)
        if inner.cls == UNKNOWN:
            return self.apply_name(name, inner)
        return self.name_overrides_guess(name, inner).why(f"{name} = {self.code(en.node)} ({where})", "assignment")

    def comprehension_element(self, en: Entry, fn: FunctionInfo | None) -> ast.AST | None:
        """Element ``en.index`` of an unpacked ``(expr for s in t)`` / ``[expr for s in t]`` (one
        ``for``, no ``if``) over a tuple or list written in the code (directly, or a local bound once
        to one, without starred items): ``expr`` with ``s`` replaced by that item of ``t``. None
        where the comprehension or ``t`` is anything else."""
        comp = en.node
        if en.index is None or not isinstance(comp, (ast.GeneratorExp, ast.ListComp)) or len(comp.generators) != 1:
            return None
        gen = comp.generators[0]
        if gen.ifs or gen.is_async or not isinstance(gen.target, ast.Name):
            return None
        seq = gen.iter
        if isinstance(seq, ast.Name) and fn is not None:
            owner, where = self.lookup(seq.id, fn)
            entries = owner.assigns[seq.id] if where == "assign" else []
            seq = entries[0].node if len(entries) == 1 and entries[0].kind == "expr" else None
            # the tuple's names are read where it is built; a later rebinding (the unpack itself)
            # must not stand in for them: only a tuple built in the same function is taken
            if owner is not fn:
                return None
        if not isinstance(seq, (ast.Tuple, ast.List)) or en.index >= len(seq.elts) \
                or any(isinstance(x, ast.Starred) for x in seq.elts):
            return None
        key = (id(en), en.index)
        made = self._comprehension_elements.get(key)
        if made is None:
            var, item = gen.target.id, seq.elts[en.index]

            class _Bind(ast.NodeTransformer):
                def visit_Name(self, node: ast.Name) -> ast.AST:
                    return item if node.id == var and isinstance(node.ctx, ast.Load) else node

            made = (_Bind().visit(copy.deepcopy(comp.elt)), comp)  # keeps the copy (and its ids) alive
            self._comprehension_elements[key] = made
        return made[0]

    def unpacks_itself(self, name: str, en: Entry, fn: FunctionInfo | None) -> bool:
        """``a, b = (s // v for s in (a, b))``: the element read is the name's earlier value."""
        if en.kind != "item":
            return False
        element = self.comprehension_element(en, fn)
        return element is not None and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(element))

    def _dims_iterated(self, node: ast.AST | None, fn=None, depth: int = 0) -> tuple[ast.AST, int] | None:
        """``x.shape`` / ``x.size()`` / ``x.shape[i:]`` iterated over (directly, or through a name bound
        once to one): (x, first dim). A slice's start the code does not fix (``shape[axis + 1:]``) is
        taken as past the leading dim unless it may be 0: a slice that starts at a computed place is a
        run of trailing dims; ``shape[:k]`` starts at the leading dim."""
        if isinstance(node, ast.Name) and fn is not None and depth < 3:
            owner, where = self.lookup(node.id, fn)
            if where == "assign" and len(owner.assigns[node.id]) == 1 and owner.assigns[node.id][0].kind == "expr":
                return self._dims_iterated(owner.assigns[node.id][0].node, owner, depth + 1)
            return None
        start = 0
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.step is None:
            lo = node.slice.lower
            start = 0 if lo is None else self.known_int(lo, fn)
            if start is None:
                # shape[axis + 1:]: a computed start plus a positive literal is past the leading dim
                start = 1 if isinstance(lo, ast.BinOp) and isinstance(lo.op, ast.Add) and \
                    ((int_literal(lo.right) or 0) > 0 or (int_literal(lo.left) or 0) > 0) else None
            if start is None or start < 0:
                return None
            node = node.value
        if isinstance(node, ast.Attribute) and node.attr == "shape":
            return node.value, start
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and not node.args and not node.keywords:
            return node.func.value, start
        return None

    @staticmethod
    def _shape_dim(node: ast.AST) -> tuple[ast.AST, ast.AST] | None:
        """(tensor, index expression) of ``x.shape[i]`` / ``x.size(i)``."""
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
                and not isinstance(node.slice, (ast.Slice, ast.Tuple)):
            return node.value.value, node.slice
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and len(node.args) == 1 and not node.keywords:
            return node.func.value, node.args[0]
        return None

    def known_int(self, node: ast.AST, fn, depth: int = 0) -> int | None:
        """The int an index expression holds when the code fixes it: a literal, a name bound once to
        one (locally or at module level), or a parameter every caller in this module leaves at its
        literal default or passes the same literal (``x.size(dim)`` with ``dim=0``)."""
        v = int_literal(node)
        if v is not None or not isinstance(node, ast.Name) or depth > 3:
            return v
        owner, where = self.lookup(node.id, fn)
        if where == "module":
            return self.known_int(self.info.constants[node.id], None, depth + 1)
        if where == "assign":
            entries = owner.assigns[node.id]
            if len(entries) == 1 and entries[0].kind == "expr":
                return self.known_int(entries[0].node, owner, depth + 1)
            return None
        if where == "param":
            p = owner.params[node.id]
            callers = self.info.calls.get(owner.qual, [])
            if p.kind == "star" or not callers:
                return None
            values = set()
            for call, caller in callers[:_CALLERS]:
                arg = self.arg_for(call, p)
                if isinstance(arg, str):
                    return None
                got = self.known_int(arg if arg is not None else p.default, caller if arg is not None else None,
                                     depth + 1) if (arg is not None or p.default is not None) else None
                if got is None:
                    return None
                values.add(got)
            return values.pop() if len(values) == 1 else None
        return None

    def caller_ints(self, node: ast.AST, fn) -> list[tuple[int, int]] | None:
        """``[(value, line of the call)]`` for an index that is a parameter of ``fn`` to which every
        caller in this module passes a literal (or leaves its literal default), two or more values
        among them (``cumsum(x, 0)`` and ``cumsum(x, -1)``); None otherwise (known_int: one value)."""
        if not isinstance(node, ast.Name) or fn is None:
            return None
        owner, where = self.lookup(node.id, fn)
        if where != "param" or owner is not fn:
            return None
        p = owner.params[node.id]
        callers = self.info.calls.get(owner.qual, [])
        if p.kind == "star" or not callers or len(callers) > _CALLERS:
            return None
        got = []
        for call, caller in callers:
            arg = self.arg_for(call, p)
            if isinstance(arg, str) or (arg is None and p.default is None):
                return None
            v = self.known_int(arg, caller) if arg is not None else self.known_int(p.default, None)
            if v is None:
                return None
            got.append((v, call.lineno))
        return got if len({v for v, _ in got}) > 1 else None

    def dim_at(self, t: ast.AST, index: ast.AST, fn, depth, target: str | None = None, ndim: int | None = None,
               line: int = 0) -> Prov:
        """``t.shape[index]`` / ``t.size(index)`` (rule dim-per-caller where callers set the index)."""
        return self.at_index(index, fn, lambda i: self.dim(t, i, fn, depth, target=target, ndim=ndim, line=line,
                                                           index=index))

    def at_index(self, index: ast.AST, fn, one) -> Prov:
        """``one(i)`` for the dim or stride index ``index`` holds: with an index the callers in this
        module set to different literals, the most varying of what they name (rule dim-per-caller)."""
        idx = self.known_int(index, fn)
        values = self.caller_ints(index, fn) if idx is None else None
        if not values:
            return one(idx)
        got = {v: one(v) for v, _ in values}
        best = join(list(got.values()))
        if best.cls == UNKNOWN:
            return best
        v, at = next((v, at) for v, at in values if got[v].cls == best.cls)
        return got[v].why(f"{self.code(index)} is {v} at the call of line {at}", "dim-per-caller")

    def name_overrides_guess(self, name: str, prov: Prov) -> Prov:
        """``num_experts = x.shape[0]``: the leading dim of a tensor we know nothing about is only a
        guess; a name that says model dimension (or configured maximum) wins over it."""
        if prov.cls == VARYING and prov.guess and strong_stable(name, self.varying, self.stable):
            return Prov(STABLE, prov.vtype, (f"{name}: the name says a fixed dimension, over the guess that "
                                            f"a leading dimension varies",) + prov.evidence[:1], prov.div16, True,
                        rules=("name-over-guess",) + prov.rules)
        return prov

    def sources(self, node: ast.AST, fn: FunctionInfo | None) -> frozenset[str]:
        """What a value is computed from in ``fn`` (rule count-ratio: two counts are independent when
        they share none): the parameters and fields (``meta.batch_size``) it reads, through the
        function's locals; a tensor's sizes and views (``x.shape[0]``, ``x.reshape(-1, d)``) come
        from the tensor. Modules, builtins and module constants are no source."""
        out: set[str] = set()
        seen: set[str] = set()
        todo = [node]
        while todo:
            e = todo.pop()
            if isinstance(e, ast.Name):
                if e.id in seen:
                    continue
                seen.add(e.id)
                owner, where = self.lookup(e.id, fn)
                if where in ("assign", "param"):
                    out.add(e.id)  # itself too: `x = x.contiguous()` reads the parameter x
                if where == "assign":
                    todo.extend(en.node for en in owner.assigns[e.id] if en.kind not in ("loop", "opaque")
                                and en.node is not None)
            elif isinstance(e, ast.Attribute) and e.attr not in _TENSOR_OWN_TENSORS and (field := dotted(e)):
                if self.lookup(field[0], fn)[1] in ("assign", "param"):
                    out.add(".".join(field))
            elif isinstance(e, ast.Call):
                todo.extend(e.args)
                todo.extend(k.value for k in e.keywords)
                if isinstance(e.func, ast.Attribute):
                    todo.append(e.func.value)
            else:
                todo.extend(ast.iter_child_nodes(e))
        return frozenset(out)

    def written_int(self, node: ast.AST, fn) -> bool:
        """An int written in the code: a literal, or a name bound once to one (locally or at module
        level)."""
        if int_literal(node) is not None:
            return True
        if isinstance(node, ast.Name):
            owner, where = self.lookup(node.id, fn)
            if where == "module":
                return int_literal(self.info.constants[node.id]) is not None
            if where == "assign":
                entries = owner.assigns[node.id]
                return len(entries) == 1 and entries[0].kind == "expr" and int_literal(entries[0].node) is not None
        return False

    def fixed_collection(self, node: ast.AST, fn, depth: int = 0) -> bool:
        """A literal list/tuple/set (or a module constant holding one), or zip/product/enumerate of
        those: a loop over it takes a fixed, small set of values."""
        if depth > _FIXED_DEPTH:
            return False
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return all(not isinstance(x, ast.Starred) for x in node.elts)
        if isinstance(node, ast.Dict):
            return True
        if isinstance(node, ast.Name):
            owner, where = self.lookup(node.id, fn)
            if where == "module":
                return node.id not in self.info.rebound and node.id not in self.info.filled \
                    and self.fixed_collection(self.info.constants[node.id], None, depth + 1)
            if where == "assign" and len(owner.assigns[node.id]) == 1 and owner.assigns[node.id][0].kind == "expr":
                return self.fixed_collection(owner.assigns[node.id][0].node, owner, depth + 1)
            return False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            return self.written_range(node, fn) is not None
        if isinstance(node, ast.Call) and _call_name(node.func) in ("zip", "product", "enumerate", "reversed", "sorted", "list", "tuple"):
            return bool(node.args) and all(self.fixed_collection(a, fn, depth + 1) for a in node.args)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("items", "keys", "values"):
            return self.fixed_collection(node.func.value, fn, depth + 1)
        return False

    # ---- loops over a few values fixed for the process, and values computed once at import ----
    def import_time(self, name: str, inner: Prov) -> Prov:
        """``X = (torch.ones(()) / 448.0).item()`` at module level, never rebound nor mutated: computed
        once at import, one value for the process (its type kept: a float is never specialized)."""
        return Prov(STABLE, inner.vtype, (f"{name}: module-level value computed once at import "
                                          f"({self.code(self.info.constants[name])})",), rules=("import-time",))

    def written_range(self, call: ast.Call, fn) -> range | None:
        """``range(4)``, ``range(0, N, 2)`` with every bound an int the code fixes, and few values."""
        if call.keywords or not 1 <= len(call.args) <= 3:
            return None
        bounds = [self.known_int(a, fn) for a in call.args]
        if any(b is None for b in bounds) or (len(bounds) == 3 and bounds[2] == 0):
            return None
        got = range(*bounds)
        return got if len(got) <= _FIXED_RANGE else None

    def few_loop_values(self, name: str, en: Entry, fn: FunctionInfo, depth: int) -> Prov | None:
        """A loop variable that takes the same few values each call: the candidates of a loop that
        stops at the first that works (``retry-candidates``), or the items of a collection an object
        or the module holds (``held-collection-loop``). BUCKETED (a few values), reported low."""
        where = f"line {en.line}"
        if en.stmt is not None and stops_at_first_success(en.stmt):
            source = self._classify(en.node, fn, depth + 1)
            if source.cls != VARYING:
                return Prov(BUCKETED, "unknown", (f"{name}: a candidate of a loop that stops at the first one that "
                                                  f"works ({where}): the same few values each call",),
                            rules=("retry-candidates",))
        held = self.held_collection(en.node, fn, depth)
        if held is not None:
            is_range = isinstance(en.node, ast.Call) and isinstance(en.node.func, ast.Name) and en.node.func.id == "range"
            return Prov(BUCKETED, "int" if is_range else "unknown",
                        (f"{name}: loop over {held} ({where}): the same few values each call",),
                        rules=("held-collection-loop",))
        return None

    def held_collection(self, node: ast.AST | None, fn, depth: int, level: int = 0) -> str | None:
        """What a loop runs over when it is a collection an object or the module holds (``self.x``,
        ``obj.x``, an imported module's attribute, a module-level name never rebound), ``range()`` of
        bounds fixed for the process, or zip/enumerate/.items() of those: a few words for the
        evidence; None otherwise."""
        if node is None or level > _FIXED_DEPTH:
            return None
        if isinstance(node, ast.Attribute):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if not isinstance(base, ast.Name):
                return None
            owner, where = self.lookup(base.id, fn)
            if where == "import":
                return f"{self.code(node)}, held by an imported module"
            if base.id in ("self", "cls"):
                return f"{self.code(node)}, a collection held by the object"
            if where == "module" and base.id not in self.info.rebound:
                return f"{self.code(node)}, held by the module-level {base.id}"
            # another object (metadata, a plan): held when every value this module gives `.attr` is
            # fixed (`Meta(ratios=self.ratios)`, `meta.ratios = (1, 2)`); not an object that is itself
            # a per-call loop variable (for req in per_call: for n in req.lens)
            values = self.info.attrs.get(node.attr, [])[:_ATTR_VALUES]
            if not values or (where == "assign" and any(
                    en.kind == "loop" and self.held_collection(en.node, owner, depth, level + 1) is None
                    for en in owner.assigns[base.id])):
                return None
            for value, vfn, _ in values:
                if not (self.fixed_collection(value, vfn) or self.held_collection(value, vfn, depth, level + 1) is not None
                        or self._classify(value, vfn, depth + 2).cls == STABLE):
                    return None
            return f"{self.code(node)}, a collection this module fills with fixed values only"
        if isinstance(node, ast.Name):
            owner, where = self.lookup(node.id, fn)
            if where == "module":
                return f"the module-level {node.id}" if node.id not in self.info.rebound else None
            if where == "assign" and len(owner.assigns[node.id]) == 1 and owner.assigns[node.id][0].kind == "expr":
                return self.held_collection(owner.assigns[node.id][0].node, owner, depth, level + 1)
            return None
        if not isinstance(node, ast.Call):
            return None
        name = _call_name(node.func)
        if isinstance(node.func, ast.Name) and name == "range":
            if node.args and not node.keywords and all(self.fixed_bound(a, fn, depth) for a in node.args):
                return f"{self.code(node)}, bounds fixed for the process"
            return None
        if name in ("zip", "product", "enumerate", "reversed", "sorted", "list", "tuple", "set") and node.args \
                and not any(isinstance(a, ast.Starred) for a in node.args):
            parts = node.args[:1] if name == "enumerate" else node.args
            held = [a for a in parts if not self.fixed_collection(a, fn)]
            if held and all(self.held_collection(a, fn, depth, level + 1) is not None for a in held):
                return f"{self.code(node)}, collections held by an object or the module"
            return None
        if isinstance(node.func, ast.Attribute) and name in ("items", "keys", "values") and not node.args:
            return self.held_collection(node.func.value, fn, depth, level + 1)
        return None

    def fixed_bound(self, node: ast.AST, fn, depth: int) -> bool:
        """A ``range()`` bound fixed for the process by what the code shows: STABLE, not by a name
        alone, not a tensor dim (which the conventions only guess fixed)."""
        got = self._classify(node, fn, depth + 1)
        return got.cls == STABLE and not got.by_name and not (_GUESSED_DIMS & set(got.rules)) \
            and not any(RULES[r].name_only for r in got.rules if r in RULES)

    # ---- loops over what a helper of the module returns ----
    def loop_over_returns(self, name: str, en: Entry, fn: FunctionInfo, depth: int) -> Prov | None:
        """``for a, b in helper(...)`` (or over a local bound once to such a call) with ``helper`` a
        function of this module some of whose returns are a list/tuple literal of one element: on
        those paths the loop runs once, ``name`` being that element's component. Every return such
        a literal: the element's class (``single-element-return``); fixed on those paths and varying
        only on the others: varying, never above low (``single-pass-return``). None where the loop
        is over anything else, a return can't be read, or the one-element paths are not all fixed
        while others vary (the loop counter decides)."""
        call, owner = en.node, fn
        if isinstance(call, ast.Name):
            owner, where = self.lookup(call.id, fn)
            entries = owner.assigns[call.id] if where == "assign" else []
            call = entries[0].node if len(entries) == 1 and entries[0].kind == "expr" else None
        if not isinstance(call, ast.Call) or not isinstance(en.stmt, (ast.For, ast.AsyncFor)):
            return None
        path = _target_path(en.stmt.target, name)
        callee = self.local_callee(call, owner) if path is not None else None
        if callee is None:
            return None
        paths = self.return_paths(callee, call, owner, path, depth, 0)
        if paths is None or not any(one for one, _, _ in paths):
            return None
        singles = [p for one, p, _ in paths if one]
        others = [p for one, p, _ in paths if not one]
        at = f"what {callee.name}() returns (line {en.line})"
        if not others:
            return join(singles).why(f"{name}: the one element of {at}: the loop runs once",
                                     "single-element-return")
        if any(p.cls != STABLE for p in singles):
            return None
        rest = join(others)
        lines = ", ".join(str(line) for line in sorted({line for one, _, line in paths if one}))
        if rest.cls != VARYING:
            return join(singles + others).why(f"{name}: loop over {at}: fixed on every return path", "single-pass-return")
        return rest.why(f"{name}: loop over {at}: one pass with fixed values on its one-element returns "
                        f"(line {lines}), varying only on the others", "single-pass-return")

    def return_paths(self, callee: FunctionInfo, call: ast.Call, fn: FunctionInfo | None, path: tuple[int, ...],
                     depth: int, level: int) -> list[tuple[bool, Prov, int]] | None:
        """Per return of ``callee`` at this call (its parameters bound to the call's arguments where
        the call binds): (a one-element literal?, the class of component ``path`` of what the loop
        variable takes on that path, the return's line). A return of another helper of the module
        is followed into its returns, ``single-pass-return``'s depth deep. None where ``callee`` has
        too many returns, none of them (nor of the helpers it returns) is a one-element literal, it
        is a generator, or a literal's component at ``path`` is not written there."""
        returns = [st for st in self.own_returns(callee.node)
                   if st.value is not None and not is_none(st.value)]
        if not returns or len(returns) > _WINDOW_RETURNS or depth > _RETURNS_DEPTH:
            return None
        nested = {id(st): self.local_callee(st.value, callee)
                  if isinstance(st.value, ast.Call) and level + 1 < _WINDOW_DEPTH else None for st in returns}
        if not any(_one_element(st.value) for st in returns) and not any(nested.values()):
            return None  # a cheap look first: no fast path here nor in a helper it returns
        if self.walk_of(callee.node, ast.Yield) or self.walk_of(callee.node, ast.YieldFrom):
            return None  # a generator: the loop runs over what it yields, not over what it returns
        bound = self.bind_call(callee, call, fn, depth)
        key = ("loop", id(callee), path, None if bound is None else tuple(sorted((k[1], v) for k, v in bound.items())))
        if key in self._per_call:
            return self._per_call[key]
        self._per_call[key] = None  # a helper returning itself: no paths

        def read() -> list[tuple[bool, Prov, int]] | None:
            out = []
            for st in returns:
                v = st.value
                if _one_element(v):
                    part = _component(v.elts[0], path)
                    if part is None:
                        return None
                    out.append((True, self._classify(part, callee, depth + 2), st.lineno))
                    continue
                inner = nested[id(st)]
                if inner is not None:
                    got = self.return_paths(inner, v, callee, path, depth + 2, level + 1)
                    if got is not None:
                        out.extend(got)
                        continue
                out.append((False, self.loop_over_value(v, path, callee, depth + 2), st.lineno))
            return out

        got = read() if bound is None else self.under_binding(callee, bound, read)
        self._per_call[key] = got
        return got

    def used_as_tensor(self, name: str, fn) -> bool:
        """``name`` is a parameter or a local of ``fn`` whose tensor methods or attributes the function
        reads (``name.shape``, ``name.tolist()``, ``name.cumsum(0)``): a tensor, not a list."""
        owner, where = self.lookup(name, fn)
        if where not in ("param", "assign") or owner is None:
            return False
        entries = owner.assigns.get(name, []) if where == "assign" else []
        if len(entries) == 1 and entries[0].kind == "expr" and isinstance(entries[0].node, ast.Call):
            func = entries[0].node.func  # cu = torch.tensor(lens).cumsum(0), torch.cumsum(x, 0)
            parts = dotted(func)
            if (isinstance(func, ast.Attribute) and func.attr in _TENSOR_ONLY) or (parts and parts[0] == "torch"):
                return True
        return any(isinstance(n, ast.Attribute) and n.attr in _TENSOR_ONLY and isinstance(n.value, ast.Name)
                   and n.value.id == name for n in walk(owner.node))

    def length(self, node: ast.AST, text: str, fn, depth: int) -> Prov:
        """``len(node)`` (written ``text``): a tensor's first dim, a fixed collection's length, or a
        per-call count (rule collection-length, a guess)."""
        dims, _, w, desc = self.tensor(node, fn, depth)
        if dims:
            return Prov(dims[0].cls, "int", (f"{text}: first dim of {desc}",) + dims[0].evidence,
                        rules=("allocated-layout",) + dims[0].rules)
        if w or self.fixed_collection(node, fn):
            return Prov(STABLE, "int", (f"{text}: length of a fixed collection",),
                        rules=("weight-like" if w else "fixed-loop",))
        return Prov(VARYING, "int", (f"{text}: length of a per-call collection",), guess=True,
                    rules=("collection-length",))

    def aggregate(self, e: ast.Call, name: str, comp: ast.AST, fn, depth: int) -> Prov:
        """``sum``/``max``/``min`` of a comprehension of one loop (rule comprehension-aggregate): its item
        expression's class, as in the loop written out; a sum also counts the items."""
        gen = comp.generators[0]
        if self.fixed_collection(gen.iter, fn):
            return Prov(STABLE, "int", (f"{self.code(e)}: {name} over a collection written in the code",),
                        rules=("comprehension-aggregate", "fixed-loop"))
        parts = [self._classify(comp.elt, fn, depth)]
        if name == "sum":  # also as many terms as items
            parts.append(self.length(gen.iter, f"len({self.code(gen.iter)})", fn, depth))
        out = join(parts)._replace(div16=False)
        if out.cls == STABLE:
            return out
        return out.why(f"{self.code(e)}: {name} over the items of {self.code(gen.iter)}", "comprehension-aggregate")

    def loop_over_value(self, v: ast.AST, path: tuple[int, ...], fn: FunctionInfo, depth: int) -> Prov:
        """The class of component ``path`` of a loop variable over ``v``, a return of a helper other
        than a one-element literal: the components of a literal of several elements; a
        comprehension's element when it reads none of its own targets; a loop counter otherwise."""
        if isinstance(v, (ast.Tuple, ast.List)) and not any(isinstance(x, ast.Starred) for x in v.elts):
            parts = [_component(x, path) for x in v.elts]
            if all(p is not None for p in parts):
                return join([self._classify(p, fn, depth) for p in parts])
        if isinstance(v, (ast.ListComp, ast.GeneratorExp)):
            part = _component(v.elt, path)
            targets = {n.id for g in v.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            if part is not None and not (self.names_in(part) & targets):
                return self._classify(part, fn, depth)
            what = self.code(part) if part is not None else "an element"
            return Prov(VARYING, "int", (f"{what}: loop variable of the comprehension returned at line {v.lineno}",),
                        rules=("loop-counter",))
        return Prov(VARYING, "int", (f"{self.code(v)}: looped over, returned at line {v.lineno}",), rules=("loop-counter",))

    def returns(self, callee: FunctionInfo, depth: int, item: int | None = None, field: str | None = None) -> Prov | None:
        """What a module-level function returns (its params resolved through its callers); with
        ``item``, element ``item`` of the tuples it returns; with ``field``, that field of the
        records it returns (None unless every return is one whose constructor call is seen)."""
        return self._memo_cycle((id(callee), f"returns:{item}:{field}"),
                                lambda: self._returned(callee, depth, item, field), memo=self._memo,
                                stop=depth > _RETURNS_DEPTH)

    def _returned(self, callee: FunctionInfo, depth: int, item: int | None, field: str | None) -> Prov | None:
        """``returns`` computed (memoized there)."""
        values = []
        for st in self.own_returns(callee.node):
            value = st.value
            if item is not None:
                if value is None or is_none(value):
                    continue  # `return None`: nothing to unpack (the caller checks for it)
                if not isinstance(value, (ast.Tuple, ast.List)) or item >= len(value.elts) \
                        or any(isinstance(e, ast.Starred) for e in value.elts):
                    return None
                value = value.elts[item]
            elif value is None or isinstance(value, (ast.Tuple, ast.List, ast.Dict)):
                return None
            values.append((st, value))
        if field is not None:
            fields = [self.field_value(v, field, callee, depth + 2) for _, v in values]
            return join(fields) if fields and all(f is not None for f in fields) else None
        return join([self.bounded_return(st, v, callee, self._classify(v, callee, depth + 2))
                     for st, v in values]) if values else None

    def returns_at(self, callee: FunctionInfo, call: ast.Call, fn: FunctionInfo | None, depth: int,
                   item: int | None = None, field: str | None = None) -> Prov | None:
        """What ``callee`` returns at this one call (element ``item`` of the tuple, with ``item``): its
        parameters bound to the classes of the call's arguments, not to the most varying of what
        every caller passes (``_ceil_div(K // 32, 4)`` is fixed though another call passes a token
        count). None where the call can't be bound, or the return reads more than the parameters,
        the helper's own locals and constants: the summary over the callers (``returns``) decides."""
        bound = self.bind_call(callee, call, fn, depth)
        if bound is None:
            return None
        return self.returns_with(callee, bound, depth, item, field)

    def returns_with(self, callee: FunctionInfo, bound: dict[tuple[int, str], Prov], depth: int,
                     item: int | None = None, field: str | None = None) -> Prov | None:
        """What ``callee`` returns with its parameters bound to ``bound`` ((id(callee), name) -> class)."""
        key = (id(callee), item, field, tuple(sorted((k[1], v) for k, v in bound.items())))
        if key not in self._per_call:
            self._per_call[key] = self.under_binding(
                callee, bound, lambda: self.returns(callee, depth, item=item, field=field))
        return self._per_call[key]

    def bind_call(self, callee: FunctionInfo, call: ast.Call, fn: FunctionInfo | None,
                  depth: int) -> dict[tuple[int, str], Prov] | None:
        """The classes of what one call passes for each of ``callee``'s parameters (their defaults
        where it leaves them out), keyed as ``self._bound`` is; None where the call can't be bound
        (``*args``, ``**kw``, a parameter neither passed nor defaulted) or the helper reads more than
        its parameters, locals and constants (``binds_only``), or bindings nest too deep."""
        if len(self._bound_stack) >= _PER_CALL_NESTING or depth > _RETURNS_DEPTH or not self.binds_only(callee):
            return None
        bound: dict[tuple[int, str], Prov] = {}
        for p in callee.params.values():
            arg = self.arg_for(call, p)
            if isinstance(arg, str) or p.kind == "star":
                return None
            if arg is None:
                if p.default is None:
                    return None
                bound[(id(callee), p.name)] = self._classify(p.default, None, depth + 1).why(
                    f"{p.name} defaults to {self.code(p.default)}", "default")
                continue
            vt = annotation_vtype(self.code(p.annotation) if p.annotation is not None else None)
            got = self._classify(arg, fn, depth + 1).why(f"{p.name} = {self.code(arg)} at line {call.lineno}")
            bound[(id(callee), p.name)] = got.as_type(vt) if vt != "unknown" else got
        return bound

    def under_binding(self, callee: FunctionInfo, bound: dict[tuple[int, str], Prov], compute):
        """``compute()`` with ``callee``'s parameters bound (``bind_call``): the helper's locals
        depend on the binding, so what is known of them is hidden, they are classified afresh, and
        nothing learnt under the binding is kept (another function's parameter summarized over a
        call inside the helper would hold the bound value)."""
        inner = self.nested_in(callee)
        memo, tensors = self._memo, self._tensor_memo
        hidden = {k: memo.pop(k) for k in [k for k in memo if k[0] in inner]}
        saved_t = {k: tensors.pop(k) for k in [k for k in tensors if k[0] in inner]}
        before, before_t = set(memo), set(tensors)
        saved_bound = self._bound
        self._bound = {**self._bound, **bound}
        self._bound_stack.append(id(callee))
        try:
            return compute()
        finally:
            self._bound_stack.pop()
            self._bound = saved_bound
            for k in [k for k in memo if k not in before]:
                del memo[k]
            for k in [k for k in tensors if k not in before_t]:
                del tensors[k]
            memo.update(hidden)
            tensors.update(saved_t)

    # ---- fields of records (dataclass / NamedTuple / attrs classes of this module) ----
    def field_value(self, node: ast.AST, field: str, fn: FunctionInfo | None, depth: int) -> Prov | None:
        """What field ``field`` holds in the record ``node`` evaluates to: the argument its constructor
        call passes for it (by keyword, or by position in the class body's order) or the default
        written in the class; through locals bound to such a call, a function of this module that
        returns one (bound to this call's arguments), or a parameter annotated with the class (every
        constructor call in the module). None where the record's construction is not seen."""
        if depth > _RETURNS_DEPTH:
            return None
        if isinstance(node, ast.IfExp):
            both = [self.field_value(x, field, fn, depth + 1) for x in (node.body, node.orelse)]
            return join(both) if all(b is not None for b in both) else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            rec = self.info.records.get(node.func.id)
            if rec is not None and self.lookup(node.func.id, fn)[1] == "free":
                return self.constructor_field(rec, node, field, fn, depth)
            callee = self.local_callee(node, fn)
            if callee is None or not self.may_return_record(callee):
                return None
            got = self.returns_at(callee, node, fn, depth, field=field) or self.returns(callee, depth, field=field)
            return got.why(f"{self.code(node)}: .{field} of the record {callee.name}() returns") if got is not None else None
        if not isinstance(node, ast.Name):
            return None
        owner, where = self.lookup(node.id, fn)
        if where == "param":
            p = owner.params[node.id]
            ann = p.annotation.value if isinstance(p.annotation, ast.Constant) else \
                (p.annotation.id if isinstance(p.annotation, ast.Name) else None)
            rec = self.info.records.get(ann) if isinstance(ann, str) else None
            if rec is None or not rec.calls or field not in rec.fields:
                return None
            got = [self.constructor_field(rec, call, field, caller, depth) for call, caller in rec.calls[:_ATTR_VALUES]]
            if not all(g is not None for g in got):
                return None
            # built somewhere else, perhaps once (a plan, a bundle): as for object-attribute, a field
            # filled from the size of something we know nothing about is not evidence it changes
            return join([g._replace(cls=UNKNOWN, guess=False) if g.cls == VARYING and g.guess else g for g in got])
        if where != "assign":
            return None
        entries = owner.assigns[node.id]
        if any(en.kind != "expr" for en in entries):
            return None

        def fields() -> Prov | None:
            got = [self.field_value(en.node, field, owner, depth + 1) for en in entries]
            return join(got) if all(g is not None for g in got) else None
        return self._memo_cycle((id(owner), f"field:{node.id}.{field}"), fields, memo=self._memo)

    def may_return_record(self, callee: FunctionInfo) -> bool:
        """A return of ``callee`` builds a record of this module or hands on a local (a cheap look
        before the arguments of a call are classified for ``field_value``)."""
        if not self.info.records:
            return False
        for st in self.walk_of(callee.node, ast.Return):
            if isinstance(st.value, ast.Name) or (
                    isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Name)
                    and (st.value.func.id in self.info.records or st.value.func.id in self.info.functions)):
                return True
        return False

    def constructor_field(self, rec, call: ast.Call, field: str, fn: FunctionInfo | None, depth: int) -> Prov | None:
        """The class of the value ``Cls(...)`` passes for ``field`` (its default when left out)."""
        if field not in rec.fields:
            return None
        pos = rec.fields.index(field)
        args = call.args
        if any(isinstance(a, ast.Starred) for a in args[:pos + 1]):
            return None
        value = args[pos] if pos < len(args) else next((kw.value for kw in call.keywords if kw.arg == field), None)
        if value is None:
            if any(kw.arg is None for kw in call.keywords):
                return None  # Cls(**kw): the field may be in kw
            if field not in rec.defaults:
                return None
            return self._classify(rec.defaults[field], None, depth + 1).why(
                f"{rec.name}.{field} defaults to {self.code(rec.defaults[field])}", "record-field")
        return self._classify(value, fn, depth + 1).why(
            f".{field} = {self.code(value)} in {rec.name}(...) (line {call.lineno})", "record-field")

    def nested_in(self, callee: FunctionInfo) -> set[int]:
        """ids of ``callee`` and the functions defined inside it (the memo keys of their locals)."""
        out = {id(callee)}
        for f in self.info.functions.values():
            p = f.parent
            while p is not None:
                if p is callee:
                    out.add(id(f))
                    break
                p = p.parent
        return out

    def binds_only(self, callee: FunctionInfo) -> bool:
        """Every name the helper's returns read, through its own assignments, is one of its parameters,
        one of its locals, a module constant, an import or a called function: nothing a binding of
        the parameters would leave stale (no ``global`` / ``nonlocal``, no free variable, no ``*args``)."""
        if callee.node is None or any(p.kind == "star" for p in callee.params.values()):
            return False
        key = id(callee)
        if key in self._binds_only:
            return self._binds_only[key]
        ok = True
        # the body's nodes: the function's walk less its signature, decorators and return annotation
        head = {id(n) for part in (callee.node.args, *getattr(callee.node, "decorator_list", ()),
                                   getattr(callee.node, "returns", None),
                                   *getattr(callee.node, "type_params", ()))
                if part is not None for n in ast.walk(part)}
        head.add(id(callee.node))
        nodes = [n for n in self.walk(callee.node) if id(n) not in head]
        skip = {id(n) for a in nodes if isinstance(a, (ast.AnnAssign, ast.arg)) and a.annotation is not None
                for n in ast.walk(a.annotation)}
        for node in nodes:
            if isinstance(node, (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom)):
                ok = False
                break
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) not in skip \
                    and self.lookup(node.id, callee)[1] == "free" and node.id not in _BUILTINS \
                    and node.id not in self.info.functions and node.id not in self.info.records:
                ok = False  # a module-level name bound other than by a plain assignment (a loop, `global`)
                break
        self._binds_only[key] = ok
        return ok

    # ---- parameters of the enclosing function: follow the callers in this module ----
    def _callee(self, call: ast.Call, fn: FunctionInfo) -> str:
        """How a caller reaches ``fn``: its name, or ``torch.ops.ns.op -> fn`` for a custom op."""
        parts = dotted(call.func) if isinstance(call.func, ast.Attribute) else None
        if parts and len(parts) >= 4 and parts[1] == "ops" and fn.name not in parts:
            return f"{'.'.join(parts[:4])} -> {fn.name}"
        return fn.name

    def called_at(self, call: ast.Call, caller: FunctionInfo | None, fn: FunctionInfo, name: str, arg: ast.AST) -> str:
        """The evidence line of what one caller passes ``fn`` for ``name``: ``f(x=a) called in g (line N)``."""
        where = caller.qual if caller is not None else "module level"
        return f"{self._callee(call, fn)}({name}={self.code(arg)}) called in {where} (line {call.lineno})"

    def param(self, fn: FunctionInfo, name: str, depth: int) -> Prov:
        p = fn.params[name]
        bound = self._bound.get((id(fn), name))
        if bound is not None:
            return bound
        key = (id(fn), "param:" + name)
        if key in self._memo:
            return self._memo[key]
        vt = annotation_vtype(self.code(p.annotation) if p.annotation is not None else None)
        return self._memo_cycle(key, lambda: self._param(fn, p, name, depth, vt), Prov(UNKNOWN, vt), memo=self._memo,
                                stop=depth > _CALLER_DEPTH)

    def _param(self, fn: FunctionInfo, p: ParamInfo, name: str, depth: int, vt: str) -> Prov:
        """``param`` computed (memoized there): what the callers in this module pass."""
        results: list[Prov] = []
        callers = self.info.calls.get(fn.qual, []) if p.kind != "star" else []
        for call, caller in callers[:_CALLERS]:  # warm-up, test and script code records none (ScriptCode)
            arg = self.arg_for(call, p)
            if arg is None:
                if p.default is not None:
                    results.append(self._classify(p.default, None, depth).why(f"{name} defaults to {self.code(p.default)}", "default"))
                continue
            if isinstance(arg, str):  # *args / **kwargs at the call: can't map
                continue
            with self.guarded_at(caller, call):
                r = self._classify(arg, caller, depth + 4)
            results.append(r.why(self.called_at(call, caller, fn, name, arg), "local-caller"))
        out = join(results) if results else Prov(UNKNOWN)
        if out.cls == UNKNOWN:
            named = self.apply_name(name, out)
            if named.cls != UNKNOWN:
                out = named
            elif not results and p.default is not None:
                dflt = self._classify(p.default, None, depth)
                if dflt.cls == STABLE:
                    out = Prov(STABLE, dflt.vtype, (f"{name} defaults to {self.code(p.default)} and no caller in this module passes it",),
                               rules=("default",))
        if vt == "unknown" and not results and isinstance(p.default, ast.Constant) \
                and type(p.default.value) is float:
            # no caller here passes it and its default is a float literal (``scale=1.0``): a
            # float, which Triton never specializes, whatever its name suggests
            vt = "float"
        if vt != "unknown":
            out = out.as_type(vt)
        if not results and p.kind != "star" and fn.parent is None and (fn.class_name is None or fn.is_method):
            # an entry parameter: a module-level function's, or a method's (called through
            # objects elsewhere: link.py binds obj.meth(...) calls by name)
            out = out._replace(entry=EntryRef(fn.qual, name, p.index))
        return out

    @staticmethod
    def arg_for(call: ast.Call, p: ParamInfo):
        """The argument expression a call passes for ``p``; None if defaulted; 'star' if unmappable."""
        pos = 0
        for a in call.args:
            if isinstance(a, ast.Starred):
                return "star"
            if p.kind == "pos" and pos == p.index:
                return a
            pos += 1
        for kw in call.keywords:
            if kw.arg == p.name:
                return kw.value
        if any(kw.arg is None for kw in call.keywords):
            return "star"
        return None

    # ---- attributes, shapes, strides ----
    def attribute(self, e: ast.Attribute, fn, depth) -> Prov:
        attr = e.attr
        if attr in ("ndim", "itemsize", "dtype", "device", "is_cuda", "layout"):
            return Prov(STABLE, "int" if attr in ("ndim", "itemsize") else "unknown", (f"{self.code(e)}: tensor metadata",),
                        rules=("tensor-metadata",))
        if attr in ("T", "mT", "data"):
            return Prov(UNKNOWN, "tensor")
        base = e
        while isinstance(base, ast.Attribute):
            base = base.value
        root = base.id if isinstance(base, ast.Name) else None
        if isinstance(e.value, (ast.Name, ast.Call)) and root not in ("self", "cls"):
            # meta.count with meta a record this module builds: what its constructor passes
            got = self.field_value(e.value, attr, fn, depth)
            if got is not None and got.cls != UNKNOWN:
                return got
        named = self.by_name(attr)
        if root in ("self", "cls") or (root and ("config" in root.lower() or "cfg" in root.lower())):
            return Prov(STABLE, "unknown", (f"{self.code(e)}: attribute of {root} (fixed for the model)",),
                        rules=("self-attribute",))
        if root is not None and attr in self.info.attrs and self.lookup(root, fn)[1] != "import":
            got = self.assigned_attr(attr, depth)
            if got is not None and got.cls in (VARYING, BUCKETED):
                return got.by("object-attribute")
        if named is not None:
            return Prov(named, "unknown", (f"{self.code(e)}: the attribute name suggests a {'per-call' if named == VARYING else 'fixed'} value",), False, True,
                        rules=(self.name_rule(attr, named),))
        if root is not None and self.lookup(root, fn)[1] == "import":
            return Prov(STABLE, "unknown", (f"{self.code(e)}: attribute of an imported module",), rules=("module-attribute",))
        return Prov(UNKNOWN)

    def subscript(self, e: ast.Subscript, fn, depth) -> Prov:
        if isinstance(e.slice, (ast.Slice, ast.Tuple)):
            return Prov(UNKNOWN)
        v = e.value
        if isinstance(v, ast.Attribute) and v.attr == "shape":
            return self.dim_at(v.value, e.slice, fn, depth, line=e.lineno)
        idx = self.known_int(e.slice, fn)
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and not v.args and not v.keywords:
            if v.func.attr == "size":
                return self.dim(v.func.value, idx, fn, depth, line=e.lineno)
            if v.func.attr == "stride":
                return self.stride(v.func.value, idx, fn, depth)
        if isinstance(v, ast.Name):
            owner, where = self.lookup(v.id, fn)
            if where == "assign" and len(owner.assigns[v.id]) == 1:
                en = owner.assigns[v.id][0]
                if en.kind == "expr" and isinstance(en.node, ast.Attribute) and en.node.attr == "shape":
                    return self.dim(en.node.value, idx, owner, depth, line=e.lineno)
                if en.kind == "expr" and isinstance(en.node, ast.Call) and isinstance(en.node.func, ast.Attribute) \
                        and en.node.func.attr in ("stride", "size") and not en.node.args and not en.node.keywords:
                    # st = x.stride(); st[0]
                    t = en.node.func.value
                    return self.stride(t, idx, owner, depth) if en.node.func.attr == "stride" else \
                        self.dim(t, idx, owner, depth, line=e.lineno)
                if en.kind == "expr" and isinstance(en.node, (ast.Tuple, ast.List)) and idx is not None:
                    els = en.node.elts
                    if -len(els) <= idx < len(els) and not any(isinstance(x, ast.Starred) for x in els):
                        return self._classify(els[idx], owner, depth)
            if where == "assign" and len(owner.assigns[v.id]) > 1:
                out = self.appended_items(v, owner, depth)
                if out is not None:
                    if out.cls == VARYING:
                        return out.why(f"{self.code(e)}: an element of {v.id}, built by appending per-call values", "appended-list")
                    return out
        return Prov(UNKNOWN)

    def appended_items(self, v: ast.Name, owner: FunctionInfo, depth: int) -> Prov | None:
        """Any element of the list ``v`` names, built by appending (``v = [...]`` then ``v.append(x)``):
        the most varying of the values put in; None where ``v`` is bound otherwise."""
        entries = owner.assigns[v.id]
        first = entries[0]
        if len(entries) < 2 or first.kind != "expr" or not isinstance(first.node, ast.List) \
                or not all(en.kind == "aug" for en in entries[1:]) or any(isinstance(x, ast.Starred) for x in first.node.elts):
            return None
        return self._memo_cycle((id(owner), "items:" + v.id), lambda: join(
            [self._classify(x, owner, depth) for x in first.node.elts]
            + [self._classify(en.node, owner, depth) for en in entries[1:]]), Prov(UNKNOWN), keep=False, memo=self._memo)

    def assigned_attr(self, attr: str, depth: int, item: int | None = None) -> Prov | None:
        """What ``<obj>.attr`` holds, from this module's ``<obj>.attr = value`` assignments and
        constructor calls ``Cls(attr=value)``: the most varying of those values (with ``item``,
        element ``item`` of the tuples assigned, or returned by the function called there)."""
        return self._memo_cycle((0, f"attr:{attr}:{item}"), lambda: self._assigned_attr(attr, depth, item), memo=self._memo,
                                stop=depth > _RETURNS_DEPTH)

    def _assigned_attr(self, attr: str, depth: int, item: int | None) -> Prov | None:
        """``assigned_attr`` computed (memoized there)."""
        results = []
        for value, vfn, line in self.info.attrs.get(attr, [])[:_ATTR_VALUES]:
            where = vfn.qual if vfn is not None else "module level"
            if item is None:
                got = self._classify(value, vfn, depth + 2)
            elif isinstance(value, (ast.Tuple, ast.List)) and item < len(value.elts) \
                    and not any(isinstance(x, ast.Starred) for x in value.elts):
                got = self._classify(value.elts[item], vfn, depth + 2)
            elif isinstance(value, ast.Call) and (callee := self.local_callee(value, vfn)) is not None:
                got = self.returns(callee, depth + 2, item=item) or Prov(UNKNOWN)
            else:
                continue
            if got.cls == VARYING and got.guess:
                # Objects hold plans, descriptors and bundles, mostly built once: that a field
                # was filled from the size of a tensor or list we know nothing about is not
                # evidence that it changes between calls (sglang: len(layers), t[0].shape[0]).
                got = got._replace(cls=UNKNOWN, guess=False)
            results.append(got.why(f".{attr} = {self.code(value)} in {where} (line {line})", "object-attribute"))
        return join(results) if results else None

    def local_callee(self, call: ast.Call, fn: FunctionInfo | None) -> FunctionInfo | None:
        """The function of this module a call runs: ``f(...)`` (a module-level function),
        ``self.m(...)`` (a method of the caller's class), ``obj.m(...)`` (the one method named ``m``
        in this module's classes)."""
        func = call.func
        if isinstance(func, ast.Name):
            f = self.info.functions.get(func.id)
            return f if f is not None and not f.is_method and self.lookup(func.id, fn)[1] in ("free", "module") else None
        if not isinstance(func, ast.Attribute):
            return None
        if isinstance(func.value, ast.Name) and func.value.id in ("self", "cls") and fn is not None and fn.class_name:
            return self.info.functions.get(f"{fn.qual.rsplit('.', 1)[0]}.{func.attr}")
        found = [f for f in self.info.functions.values() if f.name == func.attr and f.is_method and f.parent is None]
        return found[0] if len(found) == 1 else None

    def host_random(self, recv: ast.AST, fn: FunctionInfo | None) -> bool:
        """``recv`` is the standard library's ``random``/``secrets`` module or NumPy's ``random``, as
        imported here (a local or parameter of that name is something else)."""
        parts = dotted(recv)
        return parts is not None and tuple(parts) in _RANDOM_MODULES and self.lookup(parts[0], fn)[1] == "import"

    # ---- calls ----
    def call(self, e: ast.Call, fn, depth) -> Prov:
        name = _call_name(e.func)
        recv = e.func.value if isinstance(e.func, ast.Attribute) else None
        args = [a for a in e.args if not isinstance(a, ast.Starred)]
        if recv is not None and name == "size":
            if not args:
                return Prov(UNKNOWN, "tuple")
            return self.dim_at(recv, args[0], fn, depth, line=e.lineno)
        if recv is not None and name == "stride" and args:
            return self.at_index(args[0], fn, lambda i: self.stride(recv, i, fn, depth, index=args[0]))
        if isinstance(e.func, ast.Name) and name in self.info.functions and not self.info.functions[name].is_method:
            callee = self.info.functions[name]
            returned = self.returns_at(callee, e, fn, depth)
            if returned is not None:
                return returned.why(f"{self.code(e)}: what {name}() returns with this call's arguments", "returns-per-call")
            returned = self.returns(callee, depth)
            if returned is not None:
                return returned.why(f"{self.code(e)}: what {name}() returns", "returns")
        if recv is not None and name in ("numel", "nelement") and isinstance(recv, ast.Subscript) \
                and _int_index(recv.slice) and self.tensor(recv.value, fn, depth)[0] is None:
            return Prov(STABLE, "int", (f"{self.code(e)}: size of one row (the non-leading dimensions)",), rules=("row-size",))
        if recv is not None and name in ("numel", "nelement"):
            return self.element_count(e, recv, fn, depth)
        if name == "len" and isinstance(e.func, ast.Name) and args:
            return self.length(args[0], self.code(e), fn, depth)
        if recv is not None and name in ("bit_length", "__index__", "__int__", "conjugate"):
            inner = self._classify(recv, fn, depth)
            return inner._replace(vtype="int", div16=False)
        if name in _DATA_DEP and recv is not None:
            return Prov(VARYING, "unknown", (f"{self.code(e)}: value read from device data",), rules=("device-data",))
        if name in _HOST_RANDOM and recv is not None and self.host_random(recv, fn):
            return Prov(VARYING, _HOST_RANDOM[name], (f"{self.code(e)}: a draw of the host random-number generator, "
                                                       f"new each call",), rules=("host-random",))
        if name in _REDUCE and recv is not None:
            reduced = self.reduction(e, recv, args, fn, depth)
            if reduced is not None:
                return reduced
        if name in _STABLE_CALLS:
            return Prov(STABLE, "int", (f"{self.code(e)}: device/tensor property",), rules=("tensor-metadata",))
        if name in ("tuple", "list") and isinstance(e.func, ast.Name) and len(e.args) == 1 and not e.keywords \
                and isinstance(e.args[0], ast.Name):
            # tuple(v) of a list built by appending, handed to a kernel whole: each element is a value
            # of the key (a tuple argument is specialized element by element)
            owner, where = self.lookup(e.args[0].id, fn)
            out = self.appended_items(e.args[0], owner, depth) if where == "assign" else None
            if out is not None and out.cls == VARYING:
                return out.why(f"{self.code(e)}: the elements of {e.args[0].id}, built by appending per-call values",
                               "appended-list")
        if name == "int" and isinstance(e.func, ast.Name) and len(args) == 1 and not e.keywords \
                and isinstance(args[0], ast.Subscript) and _int_index(args[0].slice) \
                and isinstance(args[0].value, ast.Name) and self.lookup("int", fn)[1] == "free" \
                and self.used_as_tensor(args[0].value.id, fn) and self.tensor(args[0].value, fn, depth)[2] is False:
            # int(cu_seqlens[-1]): one element of a tensor read to the host, .item() written another way
            return Prov(VARYING, "int", (f"{self.code(e)}: value read from device data (an element of the "
                                         f"tensor {args[0].value.id}, as .item())",), rules=("device-data",))
        if name in ("float", "bool") and isinstance(e.func, ast.Name):
            inner = self._classify(args[0], fn, depth) if args else Prov(STABLE)
            return inner._replace(vtype=name, div16=False)
        if name and _BUCKET.search(name.lower()):
            inner = join([self._classify(a, fn, depth) for a in args]) if args else Prov(UNKNOWN)
            if inner.cls == VARYING:
                return Prov(BUCKETED, "int", (f"{self.code(e)}: bucketed (a few distinct values)",) + inner.evidence,
                            rules=("bucket",) + inner.rules)
            return inner._replace(vtype="int", div16=False, bucket=inner.entry is not None)
        if name in ("sum", "max", "min") and isinstance(e.func, ast.Name) and len(args) == 1 and not e.keywords \
                and isinstance(args[0], (ast.GeneratorExp, ast.ListComp)) and len(args[0].generators) == 1 \
                and self.lookup(name, fn)[1] == "free":
            return self.aggregate(e, name, args[0], fn, depth)
        if name in _ARITH_FUNCS or (recv is not None and isinstance(recv, ast.Name) and recv.id == "math"):
            parts = [self._classify(a, fn, depth) for a in args]
            out = join(parts)
            if name in _TO_INT and out.vtype == "float":
                # math.ceil(n / BLOCK), int(a / b): a true division rounded to an int
                out = out.as_type("int")
            if name in _ROUND_UP and len(parts) == 2:
                step = int_literal(args[1])
                # round_up(v, 4) of a multiple of 16 is v itself: it stays one
                keeps = step is not None and 0 < step and 16 % step == 0
                out = out._replace(div16=parts[1].div16 or (keeps and parts[0].div16))
                if out.cls == VARYING and not out.div16 and step is None and parts[1].cls in (STABLE, UNKNOWN):
                    out = out.by("aligned-round-up")
                elif out.cls == VARYING and not out.div16 and keeps and "aligned-round-up" in parts[0].rules:
                    out = out.by("aligned-round-up")
            elif name in ("min", "max"):
                # min(round_up(v, 64), cap): a multiple of 16, or the one fixed cap: the parts fixed
                # for the model add at most one value each, never a per-call class
                moving = [p for p in parts if p.cls != STABLE]
                out = out._replace(div16=all(p.div16 for p in (moving or parts)))
                if name == "max" and not out.div16 and any((v := int_literal(a)) is not None and v >= 16 for a in args) \
                        and all(self.power_of_two(a, fn) for a in args):
                    # max(next_power_of_2(h), 16): a power of two of at least 16 (pow2-floor)
                    out = out._replace(div16=True).by("pow2-floor")
            else:
                out = out._replace(div16=False)
            if name not in _ROUND_UP and name not in ("min", "max") and _ALIGNED_BY_CONVENTION & set(out.rules):
                out = out._replace(rules=tuple(r for r in out.rules if r not in _ALIGNED_BY_CONVENTION))  # cdiv(numel, b)
            if out.cls == VARYING:
                return out.why(f"{self.code(e)}: arithmetic on a varying value", "arithmetic")
            return out.as_type(out.vtype if out.vtype != "unknown" else "int")
        if name in _ALLOC or name in _LIKE:
            return Prov(UNKNOWN, "tensor")
        ref = self.imported_return(e, fn, depth, None)
        return Prov(UNKNOWN, ret=ref) if ref is not None else Prov(UNKNOWN)

    # ---- returns-elsewhere: functions of other modules of the tree ----
    def imported_return(self, call: ast.Call, fn: FunctionInfo | None, depth: int, item: int | None) -> ReturnRef | None:
        """A call of a function imported from another module of the tree (``from .m import f; f(...)``,
        ``import pkg.m as m; m.f(...)``), with its arguments classified here: link.py binds them to
        the parameters of that module's summary of ``f`` (returns-elsewhere). None for anything else,
        and for calls whose arguments can't be mapped (``*args``, ``**kw``)."""
        if self.resolve is None or (not call.args and not call.keywords):
            return None
        parts = dotted(call.func)
        if parts is None or self.lookup(parts[0], fn)[1] != "import" or len(call.args) + len(call.keywords) > _ELSEWHERE_ARGS \
                or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        target = self.resolve(call.func, fn)
        if target is None:
            return None
        args = [self.call_arg(a, fn, depth, i, None) for i, a in enumerate(call.args)]
        args += [self.call_arg(k.value, fn, depth, None, k.arg) for k in call.keywords]
        return ReturnRef(target, item, args, call.lineno, self.code(call))

    def call_arg(self, node: ast.AST, fn: FunctionInfo | None, depth: int, position: int | None,
                 keyword: str | None) -> ArgFacts:
        p = self._classify(node, fn, depth + 1)
        def qualify(entry: EntryRef | None) -> EntryRef | None:
            if entry is None or not self.module:
                return entry
            return EntryRef(f"{self.module}.{entry.function}", entry.param, entry.position, entry.accessor)

        entry = qualify(p.entry)
        return ArgFacts(text=self.code(node), position=position, keyword=keyword, provenance=p.cls, value_type=p.vtype,
                        evidence=list(p.evidence[:4]), line=getattr(node, "lineno", 0), div16=p.div16, guess=p.guess,
                        by_name=p.by_name, entry=entry, bucketed=p.bucket and p.entry is not None,
                        rules=list(dict.fromkeys(p.rules)), returns=p.ret, also=[qualify(e) for e in p.also])

    def return_facts(self, qual: str, item: int | None) -> ReturnFacts | None:
        """What module-level function ``qual`` returns (element ``item``), for calls in other modules:
        its class with the parameters unknown, and each parameter it varies with (bound to a varying
        value, the return varies, through the chain kept in the dep)."""
        callee = self.info.functions.get(qual)
        if callee is None or callee.is_method or callee.parent is not None:
            return None
        self.at(None, None)
        unknown = {(id(callee), p.name): Prov(UNKNOWN) for p in callee.params.values()}
        free = self.binds_only(callee)
        base = self.returns_with(callee, unknown, 0, item) if free else self.returns(callee, 0, item=item)
        if base is None:
            return None
        deps: list[ReturnDep] = []
        if free and base.cls != VARYING:
            for p in callee.params.values():
                mark = Prov(VARYING, "int", (_PARAM_MARK,))
                got = self.returns_with(callee, {**unknown, (id(callee), p.name): mark}, 0, item)
                if got is not None and got.cls in (VARYING, BUCKETED) and _PARAM_MARK in got.evidence:
                    chain = got.evidence[:got.evidence.index(_PARAM_MARK)]
                    deps.append(ReturnDep(p.name, p.index, got.cls, list(chain), list(dict.fromkeys(got.rules))))
        return ReturnFacts(qual, item, base.cls, list(base.evidence[:6]), list(dict.fromkeys(base.rules)), base.guess,
                           base.by_name, base.vtype, deps)


    def multi_dim(self, t: ast.AST, fn) -> bool:
        """The function reads a non-leading dim of the tensor named ``t`` (``t.shape[-1]``,
        ``t.size(1)``, ``t.shape[1:]``, ``a, b = t.shape``, ``t.view(-1, d)``): it has 2 or more dims."""
        if not isinstance(t, ast.Name) or fn is None:
            return False
        is_t = lambda n: isinstance(n, ast.Name) and n.id == t.id  # noqa: E731
        for node in self.walk(fn.node):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
                    and is_t(node.value.value) and (isinstance(node.slice, ast.Slice) or int_literal(node.slice) not in (0, None)):
                return True
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_t(node.func.value):
                if node.func.attr == "size" and len(node.args) == 1 and int_literal(node.args[0]) not in (0, None):
                    return True
                if node.func.attr in ("view", "reshape") and len(node.args) >= 2:
                    return True
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
                    and is_t(node.value.value) and any(isinstance(x, (ast.Tuple, ast.List)) and len(x.elts) >= 2
                                                       for x in node.targets):
                return True
        return False

    def reduction(self, e: ast.Call, recv: ast.AST, args: list, fn, depth) -> Prov | None:
        """``lengths.max()``, ``counts[:r].sum()``, ``np.max(a)``: a value computed from the contents
        of a tensor or array, like ``.item()``, unless those contents are fixed for the model (a
        weight-like tensor, a module constant, an attribute of self/an imported module)."""
        data = recv
        if isinstance(recv, ast.Name) and recv.id in _ARRAY_MODULES and self.lookup(recv.id, fn)[1] in ("import", "free"):
            if not args:
                return None
            data = args[0]
        base = data
        while isinstance(base, (ast.Subscript, ast.Attribute, ast.Call)):
            if isinstance(base, ast.Call):
                if not isinstance(base.func, ast.Attribute):
                    break
                base = base.func.value
            else:
                base = base.value
        if isinstance(base, ast.Constant) or isinstance(data, (ast.Tuple, ast.List, ast.Set, ast.ListComp)):
            return None  # (1, 2).count... / a literal: not an array's contents
        if self.tensor(data, fn, depth)[2] or weight_like(data):
            return Prov(STABLE, "unknown", (f"{self.code(e)}: reduction of a weight-like tensor",), rules=("reduction-of-fixed",))
        if isinstance(base, ast.Name):
            where = self.lookup(base.id, fn)[1]
            if base.id in ("self", "cls") or where in ("module", "import"):
                return Prov(STABLE, "unknown", (f"{self.code(e)}: reduction of a value fixed for the model",),
                            rules=("reduction-of-fixed",))
        return Prov(VARYING, "unknown", (f"{self.code(e)}: computed from the contents of {self.code(data)} (a reduction)",),
                    rules=("reduction",))
