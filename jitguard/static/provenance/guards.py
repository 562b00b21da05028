"""Guards before a launch: the conditions that hold at a statement because an ``assert``, an early
exit (``if E > C: return``, ``if E % K: raise``) or the enclosing ``if`` dominates it, read as
facts about expressions: ``E % K == 0`` (alignment) and ``E <= C`` / ``E >= C`` / ``E != C``
(range), and an early return on ``E == 0`` (an empty case skipped). Only the statements of the
function body on the way to the statement count: a guard inside a branch the statement is not in,
or after it, says nothing about it. A use says as much as a guard: ``buf[:E]`` anywhere in the
function makes E the live count of a buffer (``live_count``). ``ast`` only.

    facts = dominating_facts(fn_node, launch_call)
    # [Fact(expr=<a.size(0)>, op="mod0", bound=<128>, line=12), ...]
"""
from __future__ import annotations

import ast
import math
from typing import NamedTuple

from jitguard.static.facts import BUCKETED, STABLE, UNKNOWN, VARYING
from jitguard.static.provenance.rules import limit
from jitguard.static.provenance.syntax import per_node
from jitguard.static.provenance.value import Prov


class Fact(NamedTuple):
    """``expr op bound`` holds where the guard dominates: op is ``mod0`` (``expr % bound == 0``),
    ``le``, ``lt``, ``ge``, ``gt``, ``eq`` or ``ne``."""

    expr: ast.AST
    op: str
    bound: ast.AST
    line: int
    skip: bool = False  # from an early ``return`` / ``continue`` (nothing to do), not a ``raise``


_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_CMP = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
_NEGATED = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "gt": "le", "le": "gt"}
_MIRRORED = {"eq": "eq", "ne": "ne", "lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}
_RANGE_MAX = limit("range-guard", "bound")
_QUOTIENT_VALUES = limit("bounded-quotient", "values")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def dominating_facts(fn_node: ast.AST, target: ast.AST) -> list[Fact]:
    """The facts that hold at ``target`` (a node inside ``fn_node``'s body, not in a nested def)."""
    out: list[Fact] = []
    body = getattr(fn_node, "body", None)
    if not isinstance(body, list) or getattr(target, "end_lineno", None) is None:
        return out
    _walk_block(body, target, out)
    return out


def live_stop(n: ast.AST) -> ast.AST | None:
    """E of a leading slice ``X[:E]`` (``X[0:E]``, ``X[:E, ...]``; E not a literal), else None."""
    if not isinstance(n, ast.Subscript):
        return None
    sl = n.slice.elts[0] if isinstance(n.slice, ast.Tuple) and n.slice.elts else n.slice
    if isinstance(sl, ast.Slice) and sl.upper is not None and sl.step is None \
            and (sl.lower is None or _zero(sl.lower)) and not isinstance(sl.upper, ast.Constant):
        return sl.upper
    return None


def _contains(stmt: ast.stmt, target: ast.AST) -> bool:
    """``target`` lies inside ``stmt``, by source positions (the statements of one block never
    overlap, ``a; b`` included)."""
    start, end = (stmt.lineno, stmt.col_offset), (stmt.end_lineno, stmt.end_col_offset)
    return start <= (target.lineno, target.col_offset) and (target.end_lineno, target.end_col_offset) <= end


def _walk_block(block: list, target: ast.AST, out: list[Fact]) -> bool:
    """Collect the guards of ``block`` before the statement holding ``target``, then descend into it.
    False when ``target`` is not in ``block``."""
    for st in block:
        if not _contains(st, target):
            _guard(st, out)
            continue
        if isinstance(st, _SCOPES):
            return True  # inside a nested def: its own body decides, not the enclosing one's
        if isinstance(st, ast.If):
            if _in(st.body, target):
                out.extend(facts_of(st.test, True, st.lineno))
                _walk_block(st.body, target, out)
            elif _in(st.orelse, target):
                out.extend(facts_of(st.test, False, st.lineno))
                _walk_block(st.orelse, target, out)
            return True
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(st, name, None)
            if isinstance(inner, list) and _in(inner, target):
                _walk_block(inner, target, out)
                return True
        for name in ("handlers", "cases"):
            for h in getattr(st, name, None) or []:
                if _in(h.body, target):
                    _walk_block(h.body, target, out)
                    return True
        return True  # the target is in the statement itself (the launch expression)
    return False


def _in(block: list, target: ast.AST) -> bool:
    return any(_contains(st, target) for st in block)


def _exits(block: list) -> bool:
    """The block always leaves: its last statement returns, raises, continues or breaks."""
    return bool(block) and isinstance(block[-1], _EXITS)


def _guard(st: ast.stmt, out: list[Fact]) -> None:
    """The facts a statement before the target leaves holding after it."""
    if isinstance(st, ast.Assert):
        out.extend(facts_of(st.test, True, st.lineno))
    elif isinstance(st, ast.If):
        if _exits(st.body) and not _exits(st.orelse):
            out.extend(_skipping(st.body, facts_of(st.test, False, st.lineno)))
        elif _exits(st.orelse) and not _exits(st.body):
            out.extend(_skipping(st.orelse, facts_of(st.test, True, st.lineno)))


def _skipping(block: list, facts: list[Fact]) -> list[Fact]:
    """``facts`` left by an early exit, marked where the exit returns or continues (the case has
    nothing to do) rather than raises (the case is an error)."""
    if isinstance(block[-1], (ast.Return, ast.Continue)):
        return [f._replace(skip=True) for f in facts]
    return facts


def facts_of(test: ast.AST, holds: bool, line: int) -> list[Fact]:
    """The facts ``test`` gives when it is ``holds`` (True, or False after an early exit)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return facts_of(test.operand, not holds, line)
    if isinstance(test, ast.BoolOp):
        # a and b holding: both do; a or b failing: neither does. Other combinations say nothing.
        if isinstance(test.op, ast.And) == holds:
            return [f for v in test.values for f in facts_of(v, holds, line)]
        return []
    if isinstance(test, ast.BinOp) and isinstance(test.op, ast.Mod):
        # `if E % K: raise` / `assert not E % K`: E % K is 0 where it is false
        return [] if holds else [Fact(test.left, "mod0", test.right, line)]
    if isinstance(test, (ast.Name, ast.Attribute, ast.Call)):
        # `if n: ... else: <here>`: n is 0 (what that says of a non-int is never used: only ints are refined)
        zero = ast.copy_location(ast.Constant(0), test)
        return [Fact(test, "ne" if holds else "eq", zero, line)]
    if not isinstance(test, ast.Compare):
        return []
    out = []
    left = test.left
    for op, right in zip(test.ops, test.comparators):
        name = _CMP.get(type(op))
        if name is not None and (holds or len(test.ops) == 1):
            out.extend(_atom(left, name if holds else _NEGATED[name], right, line))
        left = right
    return out


def _atom(left: ast.AST, op: str, right: ast.AST, line: int) -> list[Fact]:
    """One comparison as a fact: ``E % K == 0`` is an alignment; a comparison with a bound on either
    side is a range fact about the other side."""
    for a, b, o in ((left, right, op), (right, left, _MIRRORED[op])):
        if o == "eq" and isinstance(a, ast.BinOp) and isinstance(a.op, ast.Mod) and _zero(b):
            return [Fact(a.left, "mod0", a.right, line)]
    return [Fact(left, op, right, line), Fact(right, _MIRRORED[op], left, line)]


def _zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


# ---- what the classifier makes of the facts --------------------------------------------------------
def value_class(v: int) -> str:
    """Triton's value class of a plain int (0 and -16 count as multiples of 16)."""
    return "==1" if v == 1 else "%16" if v % 16 == 0 else "other"


def _range_prov(lo: int, hi: int, text: str, kind: str, prov, rule: str):
    """What a value bounded to ``lo..hi`` by guards is (``rule``: the guards' rule, ``text`` the
    evidence that says where, ``kind`` how the code bounds it): one value is STABLE; a few values are
    BUCKETED, a few variants each compiled on first use; all in one value class, one compile as a
    plain int and one per value as a ``tl.constexpr`` (``range-one-class`` first: JG001 reads it)."""
    classes = sorted({value_class(v) for v in range(lo, hi + 1)})
    if lo == hi:
        return Prov(STABLE, "int", (f"{text}: one value",), classes == ["%16"], rules=(rule,))
    if len(classes) == 1:
        return Prov(BUCKETED, "int", (f"{text}: {kind}{hi - lo + 1} values in one value class ({classes[0]})",)
                    + prov.evidence, classes == ["%16"], rules=("range-one-class", rule) + prov.rules)
    return Prov(BUCKETED, "int", (f"{text}: {kind}at most {hi - lo + 1} values, {len(classes)} value classes "
                                  f"({' / '.join(classes)})",) + prov.evidence, rules=(rule,) + prov.rules)


def _count_in_place_of_name(prov, text: str, rule: str):
    """A value unknown, or varying by its name alone, read as a per-call count by ``rule`` (empty-skip,
    live-slice): what callers and returns elsewhere may still settle (its entry parameters and the
    call it rests on) is kept."""
    return Prov(VARYING, "int", (text,), entry=prov.entry, rules=(rule,), ret=prov.ret, also=prov.also)


class GuardedValues:
    """The part of the Classifier that reads guards: ``at(fn, node)`` makes the facts dominating
    ``node`` (a launch, a call to a launcher) hold for what is classified next in ``fn``; a value
    those facts bound is refined (``alignment-guard``, ``alignment-guard-convention``,
    ``range-guard``). Memos are kept per set of facts, so a value refined at one launch is not
    taken for refined at another."""

    def _guards_init(self) -> None:
        self._gfn = None
        self._gfacts: dict = {}
        self._memos: dict = {None: (self._memo, self._tensor_memo)}
        self._dominating: dict = {}
        self._return_ranges: dict = {}
        self._canons: dict = {}
        self._stops: dict = {}

    # ---- context ----
    def at(self, fn, node) -> None:
        """Classify what follows as the values at ``node`` in ``fn`` (None: no guards)."""
        facts = self._facts_at(fn, node) if fn is not None and node is not None else {}
        key = None
        if facts:
            key = (id(fn.node), frozenset((id(f.expr), f.op) for fs in facts.values() for f in fs))
        self._gfn, self._gfacts = (fn, facts) if facts else (None, {})
        self._memo, self._tensor_memo = self._memos.setdefault(key, ({}, {}))

    def guarded_at(self, fn, node):
        """``with self.guarded_at(caller, call):`` the caller's guards before the call hold inside."""
        return _Context(self, fn, node)

    def _facts_at(self, fn, node) -> dict:
        """{canon key: facts} of the guards dominating ``node`` that can refine a value: each set of
        facts gets its own memo, so facts that cannot change a class (``assert x.is_contiguous()``,
        ``assert w.shape[1] == 4096``, a bound on a fixed value) are left out."""
        key = (id(fn.node), id(node))
        got = self._dominating.get(key)
        if got is not None:
            return got
        got = {}
        upper: set = set()
        for f in dominating_facts(fn.node, node):
            if f.op == "mod0":
                k = self.const_int(f.bound, fn)
                if not (k and k % 16 == 0) and not (k is None and self.alignment_like(f.bound, fn)):
                    continue
            else:
                c = self.const_int(f.bound, fn)
                if c is None or (f.op in ("le", "lt", "eq") and c > _RANGE_MAX + 1):
                    continue
            ck = self.canon(f.expr, fn)
            if ck is None:
                continue
            if f.op in ("le", "lt", "eq"):
                upper.add(ck)
            got.setdefault(ck, []).append(f)
        for ck in list(got):
            if ck not in upper and all(f.op != "mod0" and not self._empty_skip(f, fn) for f in got[ck]):
                del got[ck]  # lower bounds alone bound nothing (an empty case skipped says something else)
            elif ck in upper and all(f.op != "mod0" for f in got[ck]) and self._fixed(got[ck][0].expr, fn):
                del got[ck]  # a bound on a value fixed anyway (`assert x.dim() == 2`)
        self._dominating[key] = got
        return got

    def _empty_skip(self, f: Fact, fn) -> bool:
        """``f`` says the value is not 0 because the function returns (or continues) when it is:
        ``if n == 0: return``, ``if not n: return``, ``if n <= 0: continue`` (rule empty-skip)."""
        if not f.skip or f.op not in ("ne", "gt", "ge"):
            return False
        c = self.const_int(f.bound, fn)
        return c == (1 if f.op == "ge" else 0)

    def skipped_when_empty(self, e: ast.AST, fn) -> Fact | None:
        """The guard in force by which the function skips the case ``e == 0``, if any."""
        key = self.canon(e, fn)
        for f in self._gfacts.get(key, ()) if key is not None else ():
            if self._empty_skip(f, fn):
                return f
        return None

    def _live_stops(self, fn) -> dict:
        """{canon key of E: the first ``X[:E]``} of the leading slices in ``fn``'s body (not in a
        nested def)."""
        out: dict = {}
        for n in fn.slices:
            stop = live_stop(n)
            ck = self.canon(stop, fn) if stop is not None else None
            if ck is not None:
                out.setdefault(ck, n)
        return out

    def live_count(self, e: ast.AST, fn, prov):
        """``prov`` of ``e``, read in ``fn``, as the live count of a buffer where ``fn`` takes the
        first ``e`` of a tensor (rule live-slice): a fact of the function, whatever launch or call it
        is classified for, so it needs no memo of its own."""
        if not fn.slices:
            return prov
        stops = per_node(self._stops, fn.node, lambda node: self._live_stops(fn))
        key = self.canon(e, fn) if stops else None
        sliced = stops.get(key) if key is not None else None
        if sliced is None:
            return prov
        return _count_in_place_of_name(prov, f"{self.code(e)}: the first {self.code(e)} of {self.code(sliced.value)} "
                                             f"taken at line {sliced.lineno}: the part of a buffer this call uses",
                                       "live-slice")

    def _fixed(self, e: ast.AST, fn) -> bool:
        """``e`` is STABLE without guards (classified with the memo of no guards)."""
        saved = (self._gfn, self._gfacts, self._memo, self._tensor_memo)
        self._gfn, self._gfacts = None, {}
        self._memo, self._tensor_memo = self._memos[None]
        try:
            return self._classify(e, fn, 0).cls == STABLE
        finally:
            self._gfn, self._gfacts, self._memo, self._tensor_memo = saved

    # ---- the same value, whatever it is spelled as ----
    def canon(self, e: ast.AST, fn, depth: int = 0):
        """A key equal for expressions that denote the same value in ``fn``: ``a.size(0)``,
        ``a.shape[0]`` and ``M`` after ``M, K = a.shape`` have one key. Names bound more than once are
        not keyed (the value at the guard may not be the one at the launch). None: no key."""
        memo_key = (id(e), id(fn))
        if memo_key in self._canons:
            return self._canons[memo_key]
        self._canons[memo_key] = None  # cycles
        out = self._canon(e, fn, depth) if depth <= 8 else None
        self._canons[memo_key] = out
        return out

    def _canon(self, e, fn, depth):
        d = depth + 1
        if isinstance(e, ast.Constant):
            return ("const", e.value)
        if isinstance(e, ast.Name):
            owner, where = self.lookup(e.id, fn)
            if where == "assign":
                entries = owner.assigns[e.id]
                if len(entries) != 1 or e.id in owner.params:
                    return None  # bound twice (a parameter rebound counts)
                en = entries[0]
                inner = None
                if en.kind == "dim" and en.index is not None:
                    t = self.canon(en.node, owner, d)
                    inner = ("dim", t, en.index) if t is not None else None
                elif en.kind == "expr":
                    inner = self.canon(en.node, owner, d)
                return inner if inner is not None else ("local", id(owner), e.id)
            if where == "param":
                return ("param", id(owner), e.id)
            return (where, e.id)
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "shape":
            t, i = self.canon(e.value.value, fn, d), self.known_int(e.slice, fn)
            return ("dim", t, i) if t is not None and i is not None else None
        if isinstance(e, ast.Call):
            if e.keywords or any(isinstance(a, ast.Starred) for a in e.args):
                return None
            if isinstance(e.func, ast.Attribute) and e.func.attr == "size" and len(e.args) == 1:
                t, i = self.canon(e.func.value, fn, d), self.known_int(e.args[0], fn)
                return ("dim", t, i) if t is not None and i is not None else None
            parts = [self.canon(x, fn, d) for x in [e.func, *e.args]]
            return None if None in parts else ("call", *parts)
        if isinstance(e, ast.Attribute):
            v = self.canon(e.value, fn, d)
            return None if v is None else ("attr", v, e.attr)
        if isinstance(e, ast.BinOp):
            l, r = self.canon(e.left, fn, d), self.canon(e.right, fn, d)
            return None if l is None or r is None else ("bin", type(e.op).__name__, l, r)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            v = self.canon(e.operand, fn, d)
            return None if v is None else ("neg", v)
        return None

    def const_int(self, e: ast.AST, fn, depth: int = 0) -> int | None:
        """An int the code fixes: ``known_int`` (a literal, a name bound once to one, a module
        constant) or arithmetic of those (``2 ** 7``, ``BLOCK * 2``)."""
        v = self.known_int(e, fn)
        if v is not None or depth > 4:
            return v
        if isinstance(e, ast.BinOp):
            a, b = self.const_int(e.left, fn, depth + 1), self.const_int(e.right, fn, depth + 1)
            if a is None or b is None:
                return None
            try:
                if isinstance(e.op, ast.Mult):
                    return a * b
                if isinstance(e.op, ast.Add):
                    return a + b
                if isinstance(e.op, ast.Sub):
                    return a - b
                if isinstance(e.op, ast.FloorDiv) and b:
                    return a // b
                if isinstance(e.op, ast.Pow) and 0 <= b <= 64:
                    return a ** b
                if isinstance(e.op, ast.LShift) and 0 <= b <= 64:
                    return a << b
            except (OverflowError, ValueError):
                return None
        return None

    def alignment_like(self, k: ast.AST, fn, depth: int = 0) -> bool:
        """A K the code does not fix that reads as a configured alignment: a function's result
        (``get_alignment()``, ``mod.align(dtype)``, not a method of a local like ``x.size(1)``), an
        imported name or a module attribute, a parameter whose default is a multiple of 16, or a local
        bound once to one of those. A parameter without such a default (``n % topk``, ``T % H`` with
        ``H=1``) or a tensor dim is a count, not an alignment."""
        if depth > 4:
            return False
        if isinstance(k, ast.Call):
            func = k.func
            if isinstance(func, ast.Name):
                return self.lookup(func.id, fn)[1] in ("import", "free", "module")
            base = func
            while isinstance(base, ast.Attribute):
                base = base.value
            return isinstance(base, ast.Name) and self.lookup(base.id, fn)[1] in ("import", "free")
        if isinstance(k, ast.Attribute):
            base = k
            while isinstance(base, ast.Attribute):
                base = base.value
            return isinstance(base, ast.Name) and self.lookup(base.id, fn)[1] == "import"
        if isinstance(k, ast.Name):
            owner, where = self.lookup(k.id, fn)
            if where in ("import", "module"):
                return True
            if where == "param":
                d = owner.params[k.id].default
                v = self.const_int(d, None) if d is not None else None
                return bool(v) and v % 16 == 0
            if where == "assign" and len(owner.assigns[k.id]) == 1 and owner.assigns[k.id][0].kind == "expr":
                return self.alignment_like(owner.assigns[k.id][0].node, owner, depth + 1)
        return False

    # ---- refinement ----
    def multiple(self, e: ast.AST, fn, depth: int = 0) -> tuple[int, list, object]:
        """(m, guards, unresolved): ``e`` is a multiple of ``m`` by the alignment guards in force
        (through ``* c``, ``// c`` with c dividing m, ``+`` / ``-`` of multiples); ``unresolved`` is
        a guard ``e % K == 0`` on ``e`` itself whose K the code does not fix."""
        c = self.const_int(e, fn) if depth else None
        if c is not None:
            return (abs(c) or 1), [], None
        m, used, unresolved = 1, [], None
        key = self.canon(e, fn)
        for f in self._gfacts.get(key, ()) if key is not None else ():
            if f.op != "mod0":
                continue
            k = self.const_int(f.bound, fn)
            if k:
                m, used = math.lcm(m, abs(k)), used + [f]
            elif unresolved is None and self.alignment_like(f.bound, fn):
                unresolved = f
        if isinstance(e, ast.BinOp) and depth < 6:
            lm, lu, lk = self.multiple(e.left, fn, depth + 1)
            rm, ru, rk = self.multiple(e.right, fn, depth + 1)
            cand = 1
            if isinstance(e.op, ast.Mult):
                cand, unresolved = lm * rm, unresolved or lk or rk
            elif isinstance(e.op, ast.FloorDiv) and (c := self.const_int(e.right, fn)) and lm % c == 0:
                cand = lm // abs(c)
            elif isinstance(e.op, (ast.Add, ast.Sub)) and (lu or ru):
                cand = math.gcd(lm, rm)
            if (lu or ru) and cand > m:
                m, used = cand, used + lu + ru
        return m, used, unresolved

    def bounds(self, e: ast.AST, fn, facts: dict | None = None) -> tuple[int, int, list] | None:
        """(lo, hi, guards): the range guards in force (or ``facts``, {canon key: facts}) bound ``e``
        to lo..hi. Values are taken for counts (>= 0). None when no guard gives an upper bound."""
        key = self.canon(e, fn)
        lo, hi, used, excluded = 0, None, [], set()
        for f in (self._gfacts if facts is None else facts).get(key, ()) if key is not None else ():
            if f.op == "mod0":
                continue
            c = self.const_int(f.bound, fn)
            if c is None:
                continue
            used.append(f)
            if f.op in ("le", "lt", "eq"):
                c2 = c - 1 if f.op == "lt" else c
                hi = c2 if hi is None else min(hi, c2)
            if f.op in ("ge", "gt", "eq"):
                lo = max(lo, c + 1 if f.op == "gt" else c)
            if f.op == "ne":
                excluded.add(c)
        if hi is None:
            return None
        while lo in excluded:
            lo += 1
        while hi in excluded:
            hi -= 1
        return lo, hi, used

    def guarded(self, e: ast.AST, fn, prov):
        """``prov`` of ``e`` with the guards in force applied."""
        if isinstance(e, ast.Constant) or (prov.cls == STABLE and (prov.div16 or prov.vtype not in ("int", "unknown"))):
            return prov
        if prov.vtype not in ("int", "unknown"):
            return prov
        if prov.cls in (VARYING, BUCKETED) or (prov.cls != STABLE and prov.vtype == "int"):
            got = self.bounds(e, fn)
            if got is not None and got[0] <= got[1] <= _RANGE_MAX:
                lo, hi, used = got
                lines = ", ".join(str(f.line) for f in used)
                text = f"{self.code(e)}: between {lo} and {hi} by the guards at line {lines}"
                return _range_prov(lo, hi, text, "", prov, "range-guard")
        if prov.cls == UNKNOWN or (prov.cls == VARYING and prov.by_name):
            skip = self.skipped_when_empty(e, fn)
            if skip is not None:
                # the code handles an empty case: a count of what this call has (a model dim or a
                # configured size is never 0), by the code's structure, not by the value's name
                return _count_in_place_of_name(prov, f"{self.code(e)}: skipped when 0 by the guard at line "
                                                     f"{skip.line}: the count of what this call has, an empty case "
                                                     f"possible", "empty-skip")
        if prov.rules and prov.rules[0] == "range-one-class" and not isinstance(e, ast.Name):
            # arithmetic on a value bounded to one class may span classes again (2..8 times 2)
            prov = prov.why(f"{self.code(e)}: arithmetic on a bounded value", "range-guard")
        if prov.div16:
            return prov
        m, used, unresolved = self.multiple(e, fn)
        if m % 16 == 0 and used:
            lines = ", ".join(str(f.line) for f in used)
            return prov._replace(div16=True).why(f"{self.code(e)}: a multiple of {m} by the guard at line {lines}",
                                                 "alignment-guard")
        if unresolved is not None and prov.cls in (VARYING, BUCKETED):
            return prov.why(f"{self.code(e)}: a multiple of {self.code(unresolved.bound)} by the guard at line "
                            f"{unresolved.line} (an alignment, by convention a multiple of 16)",
                            "alignment-guard-convention")
        return prov

    # ---- a helper's return bounded by the guards before it (bounded-quotient) ----
    def bounded_return(self, st: ast.Return, value: ast.AST, fn, prov):
        """``prov`` of ``value``, returned by ``st`` of ``fn``, with the range guards that dominate the
        return applied to a quotient of the guarded value (``if M >= 4096: return 40`` ...
        ``return 8 + M // 128``): a bucketing that leaves few values, not the count it buckets."""
        if prov.cls not in (VARYING, BUCKETED) or prov.vtype not in ("int", "unknown"):
            return prov
        facts = self._return_facts(fn, st)
        got = self._span(value, fn, facts, 0) if facts else None
        if got is None or not got[3] or not got[2]:
            return prov  # only a quotient of a guarded value: a bare bound is range-guard's
        lo, hi, used, _ = got
        if hi - lo + 1 > _QUOTIENT_VALUES:
            return prov
        lines = ", ".join(str(line) for line in sorted({f.line for f in used}))
        text = f"{self.code(value)}: between {lo} and {hi} by the guards at line {lines} in {fn.name}()"
        return _range_prov(lo, hi, text, "a bucketing, ", prov, "bounded-quotient")

    def _return_facts(self, fn, st: ast.Return) -> dict:
        """{canon key: range facts} of the guards dominating ``st`` whose bound the code fixes, of any
        size (the quotient decides how few values are left)."""
        key = (id(fn.node), id(st))
        got = self._return_ranges.get(key)
        if got is None:
            got = {}
            for f in dominating_facts(fn.node, st):
                if f.op != "mod0" and self.const_int(f.bound, fn) is not None:
                    ck = self.canon(f.expr, fn)
                    if ck is not None:
                        got.setdefault(ck, []).append(f)
            self._return_ranges[key] = got
        return got

    def _span(self, e: ast.AST, fn, facts: dict, depth: int):
        """(lo, hi, guards, divided) of ``e``: an int the code fixes, a value ``facts`` bound, a local of
        ``fn`` bound once to one of those, and ``// c``, ``>> c`` (c fixed in the code; ``divided``),
        ``+``, ``-`` of those. None otherwise."""
        c = self.const_int(e, fn)
        if c is not None:
            return c, c, [], False
        if depth > 6:
            return None
        if isinstance(e, ast.Name):
            owner, where = self.lookup(e.id, fn)
            entries = owner.assigns[e.id] if where == "assign" else ()
            if len(entries) == 1 and entries[0].kind == "expr" and e.id not in owner.params and owner is fn:
                return self._span(entries[0].node, fn, facts, depth + 1)  # `b = M // 32; return b`
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.FloorDiv, ast.RShift)):
            c = self.const_int(e.right, fn)
            shift = isinstance(e.op, ast.RShift)
            if c is None or c < 0 or (c == 0 and not shift) or (shift and c > 64):
                return None
            inner = self._span(e.left, fn, facts, depth + 1)
            d = 1 << c if shift else c
            return None if inner is None else (inner[0] // d, inner[1] // d, inner[2], True)
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            left, right = self._span(e.left, fn, facts, depth + 1), self._span(e.right, fn, facts, depth + 1)
            if left is None or right is None:
                return None
            (a, b, u, p), (x, y, v, q) = left, right
            lo, hi = (a + x, b + y) if isinstance(e.op, ast.Add) else (a - y, b - x)
            return lo, hi, u + v, p or q
        got = self.bounds(e, fn, facts)
        return None if got is None or got[0] > got[1] else (*got, False)


class _Context:
    def __init__(self, classifier: GuardedValues, fn, node):
        self.c, self.fn, self.node = classifier, fn, node

    def __enter__(self):
        c = self.c
        self.saved = (c._gfn, c._gfacts, c._memo, c._tensor_memo)
        c.at(self.fn, self.node)
        return c

    def __exit__(self, *exc):
        c = self.c
        c._gfn, c._gfacts, c._memo, c._tensor_memo = self.saved
        return False
