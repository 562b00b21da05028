"""How each kernel parameter is used inside a @triton.jit body.

Every read of a parameter (directly, or through locals computed from it) is put in one class:

* ``compare`` - comparisons, masks, ``if``/``while`` tests: unspecializing costs nothing;
* ``loop_bound`` - ``range`` / ``tl.range`` bounds: costs nothing;
* ``address`` - reaches the pointer of a load/store/atomic or a block pointer's strides/offsets:
  dropping divisibility by 16 may cost vectorized loads;
* ``constexpr`` - a compile-time constant is required there (``tl.arange`` bounds, block shapes,
  ``tl.static_range``, ``tl.zeros`` shapes, ``tl.reshape`` ...);
* ``call`` - handed to another function (a @triton.jit helper): effect unknown;
* ``other`` - arithmetic that reaches none of the above (a value stored, a scale).
"""
from __future__ import annotations

import libcst as cst

from jitguard.static.facts import (
    USE_ADDRESS,
    USE_CALL,
    USE_COMPARE,
    USE_CONSTEXPR,
    USE_LOOP_BOUND,
    USE_OTHER,
    ParamUse,
)

FLOW = "flow"  # an operand of an expression assigned to a local: its uses are the local's uses

# tl.* functions whose listed positional args / keywords need compile-time constants.
_CONSTEXPR_ARGS: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    "arange": ((0, 1), ("start", "end")),
    "zeros": ((0,), ("shape",)),
    "ones": ((0,), ("shape",)),
    "full": ((0,), ("shape",)),
    "empty": ((0,), ("shape",)),
    "reshape": ((1, 2, 3, 4), ("shape",)),
    "view": ((1, 2, 3, 4), ("shape",)),
    "broadcast_to": ((1, 2, 3, 4), ("shape",)),
    "expand_dims": ((1,), ("axis",)),
    "static_range": ((0, 1, 2), ()),
    "static_assert": ((0,), ()),
    "multiple_of": ((1,), ("values",)),
    "max_contiguous": ((1,), ("values",)),
    "max_constancy": ((1,), ("values",)),
    "permute": ((1, 2, 3, 4), ("dims",)),
    "trans": ((1, 2, 3, 4), ("dims",)),
    "sum": ((1,), ("axis",)),
    "max": ((1,), ("axis",)),
    "min": ((1,), ("axis",)),
    "argmax": ((1,), ("axis",)),
    "argmin": ((1,), ("axis",)),
    "reduce": ((1,), ("axis",)),
    "cumsum": ((1,), ("axis",)),
    "split": ((), ()),
    "histogram": ((1,), ("num_bins",)),
    "gather": ((2,), ("axis",)),
    "dot": ((), ("input_precision", "allow_tf32", "max_num_imprecise_acc")),
}
_MEMORY = {"load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_cas", "atomic_xchg",
           "atomic_and", "atomic_or", "atomic_xor", "make_tensor_descriptor", "load_tensor_descriptor"}
_TL_PLAIN = {"cdiv", "minimum", "maximum", "where", "abs", "program_id", "num_programs", "exp", "log",
             "sqrt", "rsqrt", "cast", "to", "fdiv", "umulhi", "clamp", "floor", "ceil", "int32", "int64",
             "float32", "fma", "div_rn", "sigmoid", "rand", "randn", "randint", "philox", "assume",
             "device_assert", "debug_barrier", "inline_asm_elementwise", "advance", "min", "max"}
_RANGE = {"range"}


def _attr_name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


def _is_tl_call(func: cst.BaseExpression) -> bool:
    """``tl.x`` / ``triton.language.x`` / ``libdevice.x`` (any dotted name with a base)."""
    return isinstance(func, cst.Attribute)


class _Reads:
    """Collects (name, kind, node) for every Name read, with the context it is read in."""

    def __init__(self, module: cst.Module, pos):
        self.module = module
        self.pos = pos
        self.reads: list[tuple[str, str, cst.CSTNode, cst.CSTNode]] = []  # name, kind, name node, context node
        self.deps: dict[str, set[str]] = {}  # local -> names it is computed from

    def code(self, node: cst.CSTNode) -> str:
        text = self.module.code_for_node(node).strip().replace("\n", " ")
        return text if len(text) <= 80 else text[:77] + "..."

    # ---- expressions ----
    def expr(self, node: cst.CSTNode | None, kind: str, ctx: cst.CSTNode | None = None) -> None:
        if node is None:
            return
        ctx = ctx if ctx is not None else node
        if isinstance(node, cst.Name):
            self.reads.append((node.value, kind, node, ctx))
            return
        if isinstance(node, cst.Comparison):
            self.expr(node.left, USE_COMPARE, node)
            for c in node.comparisons:
                self.expr(c.comparator, USE_COMPARE, node)
            return
        if isinstance(node, cst.Call):
            self.call(node, kind, ctx)
            return
        if isinstance(node, cst.Attribute):
            self.expr(node.value, kind, ctx)  # x.T, n.to(...) via Call, ptr.dtype
            return
        if isinstance(node, cst.Lambda):
            return
        if isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
            return
        for child in node.children:
            if isinstance(child, cst.BaseExpression) or isinstance(
                child, (cst.Element, cst.Arg, cst.SubscriptElement, cst.Index, cst.Slice, cst.StarredElement,
                        cst.DictElement, cst.FormattedStringExpression, cst.FormattedString)
            ):
                self.expr(child, kind, ctx)

    def call(self, node: cst.Call, kind: str, ctx: cst.CSTNode) -> None:
        func = node.func
        name = _attr_name(func)
        # x.to(...), n.to(tl.int64): the receiver flows on.
        if isinstance(func, cst.Attribute) and name in ("to", "cast"):
            self.expr(func.value, kind, ctx)
            for a in node.args:
                self.expr(a.value, USE_OTHER, node)
            return
        if name in _CONSTEXPR_ARGS and _is_tl_call(func):
            positions, keywords = _CONSTEXPR_ARGS[name]
            pos_i = 0
            for a in node.args:
                if a.keyword is None:
                    k = USE_CONSTEXPR if pos_i in positions else kind
                    pos_i += 1
                else:
                    k = USE_CONSTEXPR if a.keyword.value in keywords else kind
                if name == "dot" and a.keyword is None:
                    k = kind
                self.expr(a.value, k, node)
            return
        if name in _MEMORY and _is_tl_call(func):
            first = True
            for a in node.args:
                if a.keyword is None and first:
                    self.expr(a.value, USE_ADDRESS, node)
                    first = False
                elif a.keyword is not None and a.keyword.value in ("mask", "other"):
                    self.expr(a.value, USE_COMPARE, node)
                elif a.keyword is not None and a.keyword.value in ("pointer", "base", "ptr"):
                    self.expr(a.value, USE_ADDRESS, node)
                elif a.keyword is not None and a.keyword.value in ("shape",):
                    self.expr(a.value, USE_COMPARE, node)
                elif a.keyword is not None and a.keyword.value in ("strides",):
                    self.expr(a.value, USE_ADDRESS, node)
                elif a.keyword is not None and a.keyword.value in ("block_shape",):
                    self.expr(a.value, USE_CONSTEXPR, node)
                elif a.keyword is None and name in ("load",):
                    # positional mask / other
                    self.expr(a.value, USE_COMPARE, node)
                else:
                    self.expr(a.value, USE_OTHER if kind == FLOW else kind, node)
            return
        if name == "make_block_ptr" and _is_tl_call(func):
            order = ["base", "shape", "strides", "offsets", "block_shape", "order"]
            kinds = {"base": USE_ADDRESS, "shape": USE_COMPARE, "strides": USE_ADDRESS, "offsets": USE_ADDRESS,
                     "block_shape": USE_CONSTEXPR, "order": USE_CONSTEXPR}
            i = 0
            for a in node.args:
                if a.keyword is None:
                    key = order[i] if i < len(order) else "order"
                    i += 1
                else:
                    key = a.keyword.value
                self.expr(a.value, kinds.get(key, USE_OTHER), node)
            return
        if name in _RANGE:
            for a in node.args:
                k = USE_LOOP_BOUND
                if a.keyword is not None and a.keyword.value in ("num_stages", "loop_unroll_factor", "flatten",
                                                                 "warp_specialize", "disallow_acc_multi_buffer"):
                    k = USE_CONSTEXPR
                self.expr(a.value, k, node)
            return
        if name in _TL_PLAIN or (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                                 and func.value.value in ("tl", "libdevice", "math", "triton", "language")):
            for a in node.args:
                self.expr(a.value, kind, ctx)
            return
        if isinstance(func, cst.Name) and func.value in ("min", "max", "abs", "int", "float", "bool", "len"):
            for a in node.args:
                self.expr(a.value, kind, ctx)
            return
        # a call to another function (a jit helper): args are handed over
        self.expr(func, USE_OTHER, node)
        for a in node.args:
            self.expr(a.value, USE_CALL, node)

    # ---- statements ----
    def targets(self, target: cst.BaseExpression) -> list[str]:
        if isinstance(target, cst.Name):
            return [target.value]
        if isinstance(target, (cst.Tuple, cst.List)):
            out: list[str] = []
            for el in target.elements:
                out.extend(self.targets(el.value))
            return out
        return []

    def flow(self, targets: list[str], value: cst.BaseExpression | None, augment: bool = False) -> None:
        if value is None:
            return
        start = len(self.reads)
        self.expr(value, FLOW)
        names = {n for n, k, _, _ in self.reads[start:] if k == FLOW}
        for t in targets:
            self.deps.setdefault(t, set()).update(names)
            if augment:
                self.deps[t].add(t)

    def block(self, body) -> None:
        stmts = body.body if hasattr(body, "body") else body
        if isinstance(stmts, cst.BaseSuite):
            stmts = stmts.body
        for st in stmts if isinstance(stmts, (list, tuple)) else [stmts]:
            self.stmt(st)

    def stmt(self, st: cst.CSTNode) -> None:
        if isinstance(st, cst.SimpleStatementLine):
            for small in st.body:
                self.small(small)
            return
        if isinstance(st, cst.If):
            self.expr(st.test, USE_COMPARE)
            self.block(st.body)
            if st.orelse is not None:
                if isinstance(st.orelse, cst.If):
                    self.stmt(st.orelse)
                else:
                    self.block(st.orelse.body)
            return
        if isinstance(st, cst.While):
            self.expr(st.test, USE_COMPARE)
            self.block(st.body)
            return
        if isinstance(st, cst.For):
            it = st.iter
            if isinstance(it, cst.Call):
                self.call(it, USE_LOOP_BOUND, it)
            else:
                self.expr(it, USE_LOOP_BOUND)
            for t in self.targets(st.target):
                self.deps.setdefault(t, set())
            self.block(st.body)
            if st.orelse is not None:
                self.block(st.orelse.body)
            return
        if isinstance(st, cst.With):
            for item in st.items:
                self.expr(item.item, USE_OTHER)
            self.block(st.body)
            return
        if isinstance(st, cst.Try):
            self.block(st.body)
            for h in st.handlers:
                self.block(h.body)
            return
        if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
            return
        # match statements and anything else: look at nothing rather than guess

    def small(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            names: list[str] = []
            for t in node.targets:
                names.extend(self.targets(t.target))
            self.flow(names, node.value)
        elif isinstance(node, cst.AnnAssign):
            self.flow(self.targets(node.target), node.value)
        elif isinstance(node, cst.AugAssign):
            self.flow(self.targets(node.target), node.value, augment=True)
        elif isinstance(node, cst.Expr):
            self.expr(node.value, USE_OTHER)
        elif isinstance(node, cst.Return):
            self.expr(node.value, USE_OTHER)
        elif isinstance(node, cst.Assert):
            self.expr(node.test, USE_COMPARE)


def analyze_uses(fn: cst.FunctionDef, params: list[str], module: cst.Module, pos) -> tuple[dict[str, list[ParamUse]], set[str]]:
    """Uses of each parameter in ``fn``'s body, and the set of parameters used as pointers."""
    reads = _Reads(module, pos)
    try:
        reads.block(fn.body)
    except RecursionError:
        return {p: [] for p in params}, set()
    # Locals derived from each parameter (transitively).
    derived: dict[str, set[str]] = {p: {p} for p in params}
    changed = True
    rounds = 0
    while changed and rounds < 50:
        changed = False
        rounds += 1
        for local, srcs in reads.deps.items():
            for p in params:
                if local not in derived[p] and srcs & derived[p]:
                    derived[p].add(local)
                    changed = True
    out: dict[str, list[ParamUse]] = {}
    pointers: set[str] = set()
    for p in params:
        names = derived[p]
        uses: list[ParamUse] = []
        seen = set()
        for name, kind, node, ctx in reads.reads:
            if name not in names or kind == FLOW:
                continue
            try:
                where = pos[node].start
                line, col = where.line, where.column + 1
            except KeyError:
                line, col = 0, 0
            key = (kind, line, col)
            if key in seen:
                continue
            seen.add(key)
            uses.append(ParamUse(kind=kind, line=line, column=col, context=reads.code(ctx)))
        out[p] = uses
        # A pointer: read directly (not through a local) as the address of a load/store, or named so.
        low = p.lower()
        if low.endswith(("ptr", "ptrs", "_p", "pointer", "_desc", "descriptor")) or low.startswith("ptr_"):
            pointers.add(p)
        else:
            for name, kind, node, ctx in reads.reads:
                if name == p and kind == USE_ADDRESS and isinstance(ctx, cst.Call) and _attr_name(ctx.func) in _MEMORY \
                        and ctx.args and _is_pointer_base(ctx.args[0].value, p):
                    pointers.add(p)
                    break
    return out, pointers


def _is_pointer_base(expr: cst.BaseExpression, p: str) -> bool:
    """``p`` or ``p + offs`` / ``p + a * b + ...``: p is the leftmost term of a sum (the base)."""
    if isinstance(expr, cst.Name):
        return expr.value == p
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
        return _is_pointer_base(expr.left, p)
    return False
