"""How each kernel parameter is used inside a @triton.jit body (stdlib ``ast``).

Every read of a parameter (directly, or through locals computed from it) is put in one class:

* ``compare`` - comparisons, masks, ``if``/``while`` tests: unspecializing costs nothing;
* ``loop_bound`` - ``range`` / ``tl.range`` bounds: costs nothing;
* ``address`` - reaches the pointer of a load/store/atomic or a block pointer's strides/offsets:
  dropping divisibility by 16 may cost vectorized loads;
* ``constexpr`` - a compile-time constant is required there (``tl.arange`` bounds, block shapes,
  ``tl.static_range``, ``tl.zeros`` shapes, ``tl.reshape`` ...);
* ``call`` - handed to another function (a @triton.jit helper): effect unknown;
* ``other`` - arithmetic that reaches none of the above (a value stored, a scale).

A read in the test of an ``if`` or of a conditional expression that the compiler decides (only
``tl.constexpr`` parameters, literals and operators) is also marked ``branch``: it selects the code
that is compiled.
"""
from __future__ import annotations

import ast
from typing import NamedTuple

from jitguard.static.facts import (
    USE_ADDRESS,
    USE_CALL,
    USE_COMPARE,
    USE_CONSTEXPR,
    USE_LOOP_BOUND,
    USE_OTHER,
    ParamUse,
)
from jitguard.static.provenance.syntax import _call_name, node_fields, per_node, walked

FLOW = "flow"  # an operand of an expression assigned to a local: its uses are the local's uses
# names that are never identifiers: what a ``tl.load`` returns (one per load, numbered), and the
# program id / ``tl.arange`` / a loop counter (an index of the kernel's own iteration space)
_LOADED = "\0load"
_INDEX = "\0index"
INDEX_TERM = "index_term"  # the kind of an index use (KernelUses.index_loads): a term added to an index

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
_LIB_ROOTS = {"tl", "libdevice", "math", "triton", "language", "tle", "tldevice"}
_BLOCK_PTR = ["base", "shape", "strides", "offsets", "block_shape", "order"]
_BLOCK_PTR_KIND = {"base": USE_ADDRESS, "shape": USE_COMPARE, "strides": USE_ADDRESS, "offsets": USE_ADDRESS,
                   "block_shape": USE_CONSTEXPR, "order": USE_CONSTEXPR}


def _keyword_use(arg: str | None, kind: str) -> str:
    """The use of a keyword argument of a load, store or atomic read in a context of ``kind``."""
    if arg in ("mask", "other", "shape"):
        return USE_COMPARE
    if arg in ("pointer", "base", "ptr", "strides"):
        return USE_ADDRESS
    if arg == "block_shape":
        return USE_CONSTEXPR
    return USE_OTHER if kind == FLOW else kind


class _Reads:
    """Collects (name, kind, name node, context node) for every Name read, and local data flow."""

    def __init__(self, segment, constexprs: frozenset[str] = frozenset()):
        self.segment = segment
        self.constexprs = constexprs
        self.reads: list[tuple[str, str, ast.AST, ast.AST]] = []
        self.deps: dict[str, set[str]] = {}
        self.branch: set[int] = set()  # ids of the Name nodes read in an if / conditional test
        # each tl.load: (the name its value is read under, the names read in its pointer outside
        # loads nested in it); the reads of a nested load's pointer: (start, end) in ``reads``
        self.loads: list[tuple[str, frozenset[str]]] = []
        # ``a + b`` / ``a - b``: the reads of a in reads[start:middle], of b in reads[middle:end]
        self.sums: list[tuple[int, int, int, ast.BinOp]] = []
        self._sum_terms: list | None = None
        self._walked: dict[int, tuple[ast.AST, tuple[ast.AST, ...]]] = {}  # id(node) -> (node, its walk)
        # arguments of calls of other functions: (callee's name, position or keyword, the argument)
        self.handed: list[tuple[str, int | str, ast.AST]] = []
        self._load_spans: list[tuple[int, int]] = []

    def test(self, node: ast.AST, ctx: ast.AST | None = None) -> None:
        """The test of an ``if`` or a conditional expression: compare uses; they select code when
        the compiler decides the test."""
        start = len(self.reads)
        self.expr(node, USE_COMPARE, ctx)
        if _compile_time(node, self.constexprs):
            self.branch.update(id(r[2]) for r in self.reads[start:])

    def code(self, node: ast.AST) -> str:
        text = " ".join(self.segment(node).split())
        return text if len(text) <= 80 else text[:77] + "..."

    # ---- expressions ----
    # expressions with a scope of their own (their names are not the kernel's), and the sums
    _NO_READ_SCOPES = frozenset({ast.Lambda, ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp})
    _SUMS = frozenset({ast.Add, ast.Sub})

    def expr(self, node: ast.AST | None, kind: str, ctx: ast.AST | None = None) -> None:
        if node is None:
            return
        ctx = ctx if ctx is not None else node
        cls = node.__class__  # the parser's own classes: an identity test is isinstance's answer
        if cls is ast.Name:
            self.reads.append((node.id, kind, node, ctx))
        elif cls is ast.Compare:
            for x in [node.left, *node.comparators]:
                self.expr(x, USE_COMPARE, node)
        elif cls is ast.Call:
            self.call(node, kind, ctx)
        elif cls is ast.Attribute:
            self.expr(node.value, kind, ctx)
        elif cls in self._NO_READ_SCOPES:
            return
        elif cls is ast.IfExp:
            self.test(node.test, node)
            self.expr(node.body, kind, ctx)
            self.expr(node.orelse, kind, ctx)
        elif cls is ast.BinOp and node.op.__class__ in self._SUMS:
            start = len(self.reads)
            self.expr(node.left, kind, ctx)
            middle = len(self.reads)
            self.expr(node.right, kind, ctx)
            self.sums.append((start, middle, len(self.reads), node))
        else:
            for name in node_fields(node.__class__):  # in ast.iter_child_nodes's order
                v = getattr(node, name, None)
                for child in (v if v.__class__ is list else (v,)):
                    if isinstance(child, (ast.expr, ast.keyword, ast.comprehension)):
                        self.expr(child.value if isinstance(child, ast.keyword) else child, kind, ctx)

    def call(self, node: ast.Call, kind: str, ctx: ast.AST) -> None:
        func = node.func
        name = _call_name(func)
        is_attr = isinstance(func, ast.Attribute)
        if is_attr and name in ("to", "cast") and not (isinstance(func.value, ast.Name) and func.value.id in _LIB_ROOTS):
            bitcast = any(kw.arg == "bitcast" and isinstance(kw.value, ast.Constant) and kw.value.value is True
                          for kw in node.keywords)
            # x.to(tl.uint16, bitcast=True): new bits, not the value (a float's bits as a table index)
            self.expr(func.value, USE_OTHER if bitcast and kind == FLOW else kind, ctx)
            for a in node.args:
                self.expr(a, USE_OTHER, node)
            return
        if is_attr and name in _CONSTEXPR_ARGS:
            if name == "arange":
                self.reads.append((_INDEX, kind, node, ctx))
            positions, keywords = _CONSTEXPR_ARGS[name]
            for i, a in enumerate(node.args):
                k = kind if name == "dot" else (USE_CONSTEXPR if i in positions else kind)
                self.expr(a, k, node)
            for kw in node.keywords:
                self.expr(kw.value, USE_CONSTEXPR if kw.arg in keywords else kind, node)
            return
        if is_attr and name in _MEMORY:
            if name == "load":
                self.load(node, kind, ctx)
                return
            for i, a in enumerate(node.args):
                if i == 0:
                    self.expr(a, USE_ADDRESS, node)
                else:
                    self.expr(a, USE_OTHER if kind == FLOW else kind, node)
            for kw in node.keywords:
                self.expr(kw.value, _keyword_use(kw.arg, kind), node)
            return
        if is_attr and name == "make_block_ptr":
            for i, a in enumerate(node.args):
                key = _BLOCK_PTR[i] if i < len(_BLOCK_PTR) else "order"
                self.expr(a, _BLOCK_PTR_KIND[key], node)
            for kw in node.keywords:
                self.expr(kw.value, _BLOCK_PTR_KIND.get(kw.arg or "", USE_OTHER), node)
            return
        if name == "range":
            for a in node.args:
                self.expr(a, USE_LOOP_BOUND, node)
            for kw in node.keywords:
                self.expr(kw.value, USE_CONSTEXPR if kw.arg in ("num_stages", "loop_unroll_factor", "flatten",
                                                               "warp_specialize", "disallow_acc_multi_buffer")
                          else USE_LOOP_BOUND, node)
            return
        if name == "program_id":
            self.reads.append((_INDEX, kind, node, ctx))
        lib = is_attr and isinstance(func.value, ast.Name) and func.value.id in _LIB_ROOTS
        if name in _TL_PLAIN or lib or (isinstance(func, ast.Name) and name in ("min", "max", "abs", "int", "float", "bool", "len")):
            for a in node.args:
                self.expr(a, kind, ctx)
            for kw in node.keywords:
                self.expr(kw.value, kind, ctx)
            return
        # a call to another function (a jit helper): the args are handed over
        self.expr(func, USE_OTHER, node)
        for i, a in enumerate(node.args):
            self.expr(a, USE_CALL, node)
            if name is not None and not isinstance(a, ast.Starred):
                self.handed.append((name, i, a))
        for kw in node.keywords:
            self.expr(kw.value, USE_CALL, node)
            if name is not None and kw.arg is not None:
                self.handed.append((name, kw.arg, kw.value))

    def load(self, node: ast.Call, kind: str, ctx: ast.AST) -> None:
        """``tl.load(ptr, mask, other, ...)``: the pointer is an address, mask and other compare uses;
        the loaded value is read where the load stands (``kind``), under a name of its own."""
        start = end = len(self.reads)
        for i, a in enumerate(node.args):
            self.expr(a, USE_ADDRESS if i == 0 else USE_COMPARE, node)
            if i == 0:
                end = len(self.reads)
        for kw in node.keywords:
            pointer = kw.arg in ("pointer", "base", "ptr")
            if pointer:
                start = len(self.reads)
            self.expr(kw.value, _keyword_use(kw.arg, kind), node)
            if pointer:
                end = len(self.reads)
        nested = [s for s in self._load_spans if start <= s[0] and s[1] <= end]
        names = frozenset(self.reads[i][0] for i in range(start, end)
                          if not any(a <= i < b for a, b in nested))
        self._load_spans.append((start, end))
        value = f"{_LOADED}{len(self.loads)}"
        self.loads.append((value, names))
        self.reads.append((value, kind, node, ctx))

    def walked(self, node: ast.AST) -> tuple[ast.AST, ...]:
        """``syntax.walk(node)`` (``ast.walk`` less contexts and operators), made once per node."""
        return per_node(self._walked, node, walked)

    def sum_terms(self, index_like: set[str], loaded: set[str]) -> list:
        """For each of ``sums``: ((names read in the left term, whether it is an index alone), the
        same of the right term); an index alone reads a program id, an arange, a loop counter or what
        flows from those, and nothing loaded (made once per kernel)."""
        if self._sum_terms is None:
            def term(a, b):
                names = {self.reads[i][0] for i in range(a, b)}
                return names, (_INDEX in names or not names.isdisjoint(index_like)) and names.isdisjoint(loaded) \
                    and not any(n.startswith(_LOADED) for n in names)
            self._sum_terms = [(term(a, m), term(m, b)) for a, m, b, _ in self.sums]
        return self._sum_terms

    # ---- statements ----
    @staticmethod
    def targets(target: ast.AST) -> list[str]:
        if isinstance(target, ast.Name):
            return [target.id]
        if isinstance(target, (ast.Tuple, ast.List)):
            out: list[str] = []
            for el in target.elts:
                out.extend(_Reads.targets(el))
            return out
        if isinstance(target, ast.Starred):
            return _Reads.targets(target.value)
        return []

    def flow(self, targets: list[str], value: ast.AST | None, augment: bool = False) -> None:
        if value is None:
            return
        start = len(self.reads)
        self.expr(value, FLOW)
        names = {n for n, k, _, _ in self.reads[start:] if k == FLOW}
        for t in targets:
            self.deps.setdefault(t, set()).update(names)
            if augment:
                self.deps[t].add(t)

    def block(self, stmts) -> None:
        for st in stmts:
            self.stmt(st)

    def stmt(self, st: ast.stmt) -> None:
        if isinstance(st, ast.Assign):
            names: list[str] = []
            for t in st.targets:
                names.extend(self.targets(t))
            self.flow(names, st.value)
        elif isinstance(st, ast.AnnAssign):
            self.flow(self.targets(st.target), st.value)
        elif isinstance(st, ast.AugAssign):
            self.flow(self.targets(st.target), st.value, augment=True)
        elif isinstance(st, (ast.Expr, ast.Return)):
            self.expr(st.value, USE_OTHER)
        elif isinstance(st, ast.Assert):
            self.expr(st.test, USE_COMPARE)
        elif isinstance(st, ast.If):
            self.test(st.test)
            self.block(st.body)
            self.block(st.orelse)
        elif isinstance(st, ast.While):
            self.expr(st.test, USE_COMPARE)
            self.block(st.body)
            self.block(st.orelse)
        elif isinstance(st, ast.For):
            if isinstance(st.iter, ast.Call):
                self.call(st.iter, USE_LOOP_BOUND, st.iter)
            else:
                self.expr(st.iter, USE_LOOP_BOUND)
            for t in self.targets(st.target):
                self.deps.setdefault(t, set()).add(_INDEX)  # a loop counter: an index, as a program id is
            self.block(st.body)
            self.block(st.orelse)
        elif isinstance(st, ast.With):
            for item in st.items:
                self.expr(item.context_expr, USE_OTHER)
            self.block(st.body)
        elif isinstance(st, ast.Try):
            self.block(st.body)
            for h in st.handlers:
                self.block(h.body)
            self.block(st.orelse)
            self.block(st.finalbody)
        # nested defs, match statements and the rest: look at nothing rather than guess


_COMPILE_TIME = (ast.Name, ast.Constant, ast.BoolOp, ast.UnaryOp, ast.Compare, ast.BinOp, ast.boolop,
                 ast.unaryop, ast.cmpop, ast.operator, ast.Load)


def _compile_time(test: ast.AST, constexprs: frozenset[str]) -> bool:
    """A test made of constexpr parameters, literals and operators only (``if HAS_BIAS:``,
    ``if NUM_CHUNKS > 1:``), which the compiler evaluates: the branch not taken is never compiled."""
    names = [n.id for n in ast.walk(test) if isinstance(n, ast.Name)]
    return bool(names) and all(n in constexprs for n in names) and \
        all(isinstance(n, _COMPILE_TIME) for n in ast.walk(test))


class KernelUses(NamedTuple):
    uses: dict[str, list[ParamUse]]  # each parameter's uses
    pointers: set[str]  # the parameters used as pointers
    # the parameters through which the kernel loads values that it uses as integers (an offset of
    # an address, a loop bound, a comparison with a program id or an offset): the use that shows it
    index_loads: dict[str, ParamUse]
    # the functions each parameter is handed to as a pointer (``helper(p)``, ``helper(p + off)``),
    # and those the values loaded through it are handed to (``helper(tl.load(p + i))``): (callee's
    # name, position or keyword); kernels.py asks the jit helpers of the file
    handed: dict[str, list[tuple[str, int | str]]]
    loaded_handed: dict[str, list[tuple[str, int | str]]]


def _closure(start, flows_into: dict[str, list[str]]) -> set[str]:
    """``start`` and every local it flows into, transitively."""
    names = set(start)
    todo = list(names)
    while todo:
        for local in flows_into.get(todo.pop(), ()):
            if local not in names:
                names.add(local)
                todo.append(local)
    return names


_INDEX_CALLS = frozenset({"program_id", "arange"})


def _handed_values(reads: _Reads, value: str, flows_into, by_name) -> list[tuple[str, int | str]]:
    """The calls a loaded ``value`` (or a local it flows into) is handed to as an argument of its own:
    (callee's name, position or keyword); kernels.py asks the jit helpers of the file how they use it."""
    args = {id(arg): (callee, where) for callee, where, arg in reads.handed}
    out = []
    # in source order: the closure is a set, whose order follows the hash seed
    for i in sorted(i for n in _closure((value,), flows_into) for i in by_name.get(n, ())):
        _, kind, node, _ = reads.reads[i]
        if kind == USE_CALL and id(node) in args:
            out.append(args[id(node)])
    return out


def _as_index(reads: _Reads, value: str, flows_into, by_name, index_like: set[str],
              loaded: set[str]) -> ParamUse | None:
    """The first use of a loaded ``value`` (or of a local it flows into) as an integer: an offset in
    an address, a loop bound, a comparison with an index of the kernel's iteration space (a program
    id, ``tl.arange``, a loop counter, or what flows from those), a term added to such an index
    (``start + tl.arange(0, B)``: positions). None for data: loads only feeding arithmetic, stores of
    values, ``tl.dot``. ``loaded``: every name a loaded value flows into."""
    values = _closure((value,), flows_into)
    for i in sorted(i for n in values for i in by_name.get(n, ())):
        _, kind, node, ctx = reads.reads[i]
        hit = kind in (USE_ADDRESS, USE_LOOP_BOUND)
        if kind == USE_COMPARE and isinstance(ctx, ast.Compare):
            # the other side of the comparison is an index: made of the program id, tl.arange or a
            # loop counter, and not of the loaded value (``pos - tl.arange(0, W) >= 0`` is no such test)
            for side in [ctx.left, *ctx.comparators]:
                inside = reads.walked(side)
                if node in inside:
                    continue
                if any(isinstance(x, ast.Call) and _call_name(x.func) in _INDEX_CALLS for x in inside) or (
                        any(isinstance(x, ast.Name) and x.id in index_like for x in inside)
                        and not any(isinstance(x, ast.Name) and x.id in values for x in inside)):
                    hit = True
        if hit:
            return ParamUse(kind=kind, line=node.lineno, column=node.col_offset + 1, context=reads.code(ctx))
    for (start, middle, end, sum_node), (left, right) in zip(reads.sums, reads.sum_terms(index_like, loaded)):
        # a term holds the value; the other is an index alone: made of program ids, aranges, loop
        # counters and values not loaded (``offs * WIDTH``), none of what any load gave
        for ours, names, index in (((start, middle), left[0], right[1]), ((middle, end), right[0], left[1])):
            if index and not names.isdisjoint(values):
                node = next(reads.reads[i][2] for i in range(*ours) if reads.reads[i][0] in values)
                return ParamUse(kind=INDEX_TERM, line=node.lineno, column=node.col_offset + 1,
                                context=reads.code(sum_node))
    return None


def analyze_uses(fn: ast.FunctionDef, params: list[str], segment,
                 constexprs: frozenset[str] = frozenset()) -> KernelUses:
    """Uses of each parameter in ``fn``'s body, the parameters used as pointers, and those whose
    loaded values the kernel uses as integers. ``constexprs``: the parameters annotated tl.constexpr
    (a test of only those selects code)."""
    reads = _Reads(segment, constexprs)
    try:
        reads.block(fn.body)
    except RecursionError:
        return KernelUses({p: [] for p in params}, set(), {}, {}, {})
    # the locals each name flows into (reads.deps inverted): what a parameter reaches, transitively
    flows_into: dict[str, list[str]] = {}
    for local, srcs in reads.deps.items():
        for src in srcs:
            flows_into.setdefault(src, []).append(local)
    by_name: dict[str, list[int]] = {}  # name -> indices of its (non-flow) reads, in order
    for i, (name, kind, _, _) in enumerate(reads.reads):
        if kind != FLOW:
            by_name.setdefault(name, []).append(i)
    texts: dict[int, str] = {}  # id(context node) -> its short text
    memory = _MEMORY | {"make_block_ptr"}
    out: dict[str, list[ParamUse]] = {}
    pointers: set[str] = set()
    index_like: set[str] | None = None
    as_index: dict[str, ParamUse | None] = {}  # loaded value -> its use as an integer
    index_loads: dict[str, ParamUse] = {}
    loaded_handed: dict[str, list[tuple[str, int | str]]] = {}
    for p in params:
        names = _closure((p,), flows_into)
        if reads.loads and p not in constexprs:
            hit = None
            for value, pointer in reads.loads:
                if hit is None and not pointer.isdisjoint(names):
                    if value not in as_index:
                        if index_like is None:
                            index_like = _closure((_INDEX,), flows_into)
                            loaded = _closure([v for v, _ in reads.loads], flows_into)
                        as_index[value] = _as_index(reads, value, flows_into, by_name, index_like, loaded)
                    hit = as_index[value]
            if hit is not None:
                index_loads[p] = hit
            elif reads.handed:
                got = [x for value, pointer in reads.loads if not pointer.isdisjoint(names)
                       for x in _handed_values(reads, value, flows_into, by_name)]
                if got:
                    loaded_handed[p] = got
        picked = sorted(i for n in names for i in by_name.get(n, ()))
        uses: list[ParamUse] = []
        seen = set()
        for i in picked:
            name, kind, node, ctx = reads.reads[i]
            key = (kind, node.lineno, node.col_offset)
            if key in seen:
                continue
            seen.add(key)
            text = texts.get(id(ctx))
            if text is None:
                text = texts[id(ctx)] = reads.code(ctx)
            uses.append(ParamUse(kind=kind, line=node.lineno, column=node.col_offset + 1, context=text,
                                 branch=id(node) in reads.branch))
        out[p] = uses
        low = p.lower()
        if low.endswith(("ptr", "ptrs", "_p", "pointer", "_desc", "descriptor")) or low.startswith("ptr_"):
            pointers.add(p)
            continue
        for i in by_name.get(p, ()):
            _, kind, node, ctx = reads.reads[i]
            if (kind == USE_ADDRESS and isinstance(ctx, ast.Call) and _call_name(ctx.func) in memory
                    and ctx.args and _is_pointer_base(ctx.args[0], p)):
                pointers.add(p)
                break
    handed: dict[str, list[tuple[str, int | str]]] = {}
    for callee, where, arg in reads.handed:
        for p in params:
            if _is_pointer_base(arg, p):
                handed.setdefault(p, []).append((callee, where))
    return KernelUses(out, pointers, index_loads, handed, loaded_handed)


def _is_pointer_base(expr: ast.AST, p: str) -> bool:
    """``p`` or ``p + offs`` / ``p + a * b + ...``: p is the leftmost term of a sum (the base)."""
    if isinstance(expr, ast.Name):
        return expr.id == p
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return _is_pointer_base(expr.left, p)
    return False
