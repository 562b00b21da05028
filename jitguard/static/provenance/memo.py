"""The classifier's memo tables (mixed into provenance.Classifier): answers kept per key with cycles
cut short (``_memo_cycle``: names, parameters, tensor layouts, record fields), and the tables made
once per syntax node (its walk, the nodes of one kind in it, the names it reads, a function's own
returns)."""
from __future__ import annotations

import ast

from jitguard.static.provenance.syntax import names_read, own_returns, per_node, walked


class Memos:
    def _memos_init(self, returns: dict | None = None) -> None:
        self._busy: set = set()  # the keys being computed: asked again, a cycle
        self._memo: dict = {}  # names and parameters -> Prov (guards.py swaps it per guarded site)
        self._tensor_memo: dict = {}  # layouts, weight-likeness, handed entries (swapped as _memo)
        # ast.walk of a node and the names read in it, made once per node: the per-function
        # questions (calls, shape unpackings, attribute reads, `x = f(x)`) each read the same walk.
        # The node is kept with its walk, so an id is never reused while its entry lives.
        self._walks: dict[int, tuple[ast.AST, tuple[ast.AST, ...]]] = {}
        self._walks_of: dict[tuple[int, type], tuple[ast.AST, ...]] = {}
        self._names: dict[int, tuple[ast.AST, frozenset[str]]] = {}
        self._flow: dict[int, tuple] = {}  # read-before-assign's spans per function (classify._flow_spans)
        # own_returns per function: the extractor's table when it hands one (its launchers read it first)
        self._returns: dict[int, tuple[ast.AST, list[ast.Return]]] = {} if returns is None else returns

    def _memo_cycle(self, key, compute, cycle=None, keep: bool = True, memo: dict | None = None, stop: bool = False):
        """``compute()`` once per ``key`` (in ``memo``, the layout memo unless told, with ``keep``);
        ``cycle`` when asked again while it runs (a path that leads back to where it started adds
        nothing) or, with ``stop`` (a depth bound reached), instead of computing; or the value
        ``compute`` put under ``key`` for such a cycle to see (the earlier values of ``x = f(x)``),
        which is dropped when it ends. Without ``keep`` nothing is remembered: an answer that rests
        on a cycle cut short would then stand for the whole (``tensor``, the weight-like callers)."""
        memo = self._tensor_memo if memo is None else memo
        if key in memo:
            return memo[key]
        if stop or key in self._busy:
            return cycle
        self._busy.add(key)
        try:
            out = compute()
        finally:
            self._busy.discard(key)
            memo.pop(key, None)
        if keep:
            memo[key] = out
        return out

    def walk(self, node: ast.AST) -> tuple[ast.AST, ...]:
        """``ast.walk(node)`` in its order, made once per node."""
        return per_node(self._walks, node, walked)

    def walk_of(self, node: ast.AST, kind: type) -> tuple[ast.AST, ...]:
        """The nodes of ``kind`` in ``ast.walk(node)``, in its order, made once per node."""
        nodes = self.walk(node)  # first: it keeps ``node`` alive, so its id stays its own
        key = (id(node), kind)
        got = self._walks_of.get(key)
        if got is None:
            got = self._walks_of[key] = tuple([n for n in nodes if isinstance(n, kind)])
        return got

    def own_returns(self, fn_node: ast.AST) -> list[ast.Return]:
        """``syntax.own_returns(fn_node)``, made once per function."""
        return per_node(self._returns, fn_node, own_returns)

    def names_in(self, node: ast.AST) -> frozenset[str]:
        """The identifiers of every ``ast.Name`` inside ``node`` (itself included)."""
        return per_node(self._names, node, names_read)
