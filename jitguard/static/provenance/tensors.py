"""Dims and strides of tensor expressions: allocations, views, transposes, slices, wrapper parameters
whose callers pass a tensor of known layout; ``x.shape[i]`` / ``x.stride(i)`` from them."""
from __future__ import annotations

import ast

from jitguard.static.facts import STABLE, UNKNOWN, VARYING, Accessor, EntryRef
from jitguard.static.names import dotted
from jitguard.static.provenance.bindings import FunctionInfo
from jitguard.static.provenance.conventions import (
    _ALLOC, _LIKE, _SAME, batch_name, heads_name, short_model_dim, strong_stable, weight_like,
)
from jitguard.static.provenance.syntax import _call_name, batch_of_one, int_literal, is_none
from jitguard.static.provenance.rules import limit
from jitguard.static.provenance.value import Prov, join, model_dim

_LAYOUT_DEPTH = limit("allocated-layout", "depth")
_BRANCHES = limit("assignment", "branches")
_CALLER_DEPTH = limit("local-caller", "depth")
_LAYOUT_CALLERS = limit("caller-layout", "callers")
_INNER_USE_DEPTH = limit("conflicting-layout", "depth")
_TRANSPOSES = {"t", "T", "mT", "transpose", "permute", "swapaxes", "movedim"}
# what only a tensor answers (``a.b.stride(0)``: ``a.b`` is a tensor) and the attributes by which a
# tensor itself hands out tensors (``x.grad.shape`` does not make ``x`` a holder of tensors)
_TENSOR_READS = {"stride", "data_ptr", "element_size", "is_contiguous", "contiguous", "numel", "storage_offset"}
_NEVER = 1 << 30  # no depth: the parameter was never found weight-like (or not) yet
_TENSOR_OWN_TENSORS = {"data", "grad", "real", "imag", "T", "mT", "H", "mH", "shape"}
# what keeps the elements of the tensor it is called on (tensor_root: the count of either is of them)
_VIEWS = _SAME | _TRANSPOSES | {"view", "reshape", "flatten", "ravel", "squeeze", "unsqueeze", "narrow",
                                "select", "expand", "as_strided", "view_as"}
_ROOT_DEPTH = 8  # views of views of views: the codebases measured stay under 4


class TensorLayouts:
    """The tensor half of the Classifier (mixed into it): uses its ``lookup``, ``_classify``, ``code``,
    ``by_name``, ``apply_name``, ``arg_for``, ``called_at``, ``_callee``, ``lookup_read`` and memo
    tables (memo.py)."""

    def tensor(self, t: ast.AST, fn, depth) -> tuple[list[Prov] | None, list[Prov] | None, bool, str]:
        """(dims, strides, weight_like, description) of a tensor expression; dims None if unknown."""
        if depth > _LAYOUT_DEPTH:
            return None, None, False, ""
        d = depth + 1
        if isinstance(t, ast.Name):
            owner, where = self.lookup(t.id, fn)
            if where == "assign":
                entries = owner.assigns[t.id]
                if len(entries) == 1 and entries[0].kind == "item":
                    got = self._returned_tensor(t.id, entries[0], owner, d)
                    if got is not None:
                        return got
                    saved = self.saved_tensor(entries[0], owner)
                    if saved is not None:
                        return self.tensor(saved[0], saved[1], d)
                if 1 <= len(entries) <= _BRANCHES and all(e.kind == "expr" for e in entries):
                    # x = x[mask] while x's layout is being read: the earlier values, if known
                    return self._memo_cycle((id(owner), "tensor:" + t.id),
                                            lambda: self._assigned_tensor(t, owner, entries, d),
                                            cycle=(None, None, weight_like(t), t.id), keep=False)
            if where == "param":
                return self._param_value(owner, t.id, d)
            if where == "module" and t.id not in self.info.rebound and t.id not in self.info.filled:
                # a module-level tensor bound once (`a = torch.tensor([1, 2])` in the module's own
                # self-check): its layout is that of its value
                got = self._memo_cycle((0, "tensor:" + t.id), lambda: self.tensor(self.info.constants[t.id], None, d),
                                       keep=False)
                if got is not None:
                    return got[0], got[1], got[2] or weight_like(t), t.id
            return None, None, weight_like(t), t.id
        if isinstance(t, ast.IfExp):
            # `a.view(...) if c else a`: either value (a None branch is no tensor, left out)
            got = [self.tensor(x, fn, d) for x in (t.body, t.orelse)
                   if not is_none(x)]
            if not got:
                return None, None, False, self.code(t)
            w = all(g[2] for g in got)
            if any(g[0] is None or g[1] is None or len(g[1]) != len(g[0]) for g in got) \
                    or len({len(g[0]) for g in got}) != 1:
                return None, None, w, self.code(t)
            n = len(got[0][0])
            dims = [join([g[0][i] for g in got], "int").by("conditional-tensor") for i in range(n)]
            strides = [join([g[1][i] for g in got], "int").by("conditional-tensor") for i in range(n)]
            return dims, strides, w, self.code(t)
        if isinstance(t, ast.Attribute):
            if t.attr in ("T", "mT"):
                dims, strides, w, desc = self.tensor(t.value, fn, d)
                if dims is not None and len(dims) == 2:
                    return dims[::-1], strides[::-1], w, desc
                return None, None, w, desc
            if t.attr in ("data", "real"):
                return self.tensor(t.value, fn, d)
            return None, None, weight_like(t), self.code(t)
        if isinstance(t, ast.Subscript):
            src, _, w, desc = self.tensor(t.value, fn, d)
            if src is not None and all("constant-tensor" in x.rules for x in src):
                # x[mask], x[1:] of a tensor built from constants: its contents are constants too,
                # so whatever it selects has a fixed size (one dim stands for it)
                dims = [Prov(STABLE, "int", (f"{self.code(t)}: a selection from a tensor built from constants",),
                             rules=("constant-tensor",))]
                return dims, _contiguous(dims), w, desc
            parts = t.slice.elts if isinstance(t.slice, ast.Tuple) else [t.slice]
            if any(isinstance(p, ast.Slice) and (p.upper is not None or p.lower is not None) for p in parts):
                # buf[:n] of a persistent buffer: its leading dim is n, which may vary; so is that of
                # buf[i, a:b] (the row's slice is the result's leading dim)
                return None, None, False, self.code(t)
            return None, None, w, desc
        if isinstance(t, ast.Call):
            name = _call_name(t.func)
            recv = t.func.value if isinstance(t.func, ast.Attribute) else None
            if name in ("as_strided", "empty_strided"):
                # x.as_strided(size, stride) / torch.empty_strided(size, stride): both written out
                pos = [a for a in t.args if not isinstance(a, ast.Starred)]
                kw = {k.arg: k.value for k in t.keywords if k.arg}
                size = kw.get("size", pos[0] if pos else None)
                stride = kw.get("stride", pos[1] if len(pos) > 1 else None)
                w = self.tensor(recv, fn, d)[2] if recv is not None and name == "as_strided" else False
                if isinstance(size, (ast.Tuple, ast.List)) and isinstance(stride, (ast.Tuple, ast.List)) \
                        and len(size.elts) == len(stride.elts) \
                        and not any(isinstance(x, ast.Starred) for x in size.elts + stride.elts):
                    dims = [self._classify(x, fn, d) for x in size.elts]
                    strides = [self._classify(x, fn, d) for x in stride.elts]
                    return dims, strides, w, self.code(t)
                return None, None, w, self.code(t)
            made = _constant_tensor(t, name)
            if made is not None:
                dims = [Prov(STABLE, "int", (f"{self.code(t)}: a tensor built from constants",), n != 0 and n % 16 == 0,
                             rules=("constant-tensor",)) for n in made]
                return dims, _contiguous(dims), False, self.code(t)
            if name in _ALLOC:
                shape = self._shape_args(t)
                if shape is not None:
                    dims = [self._classify(x, fn, d) for x in shape]
                    return dims, _contiguous(dims), False, self.code(t)
                return None, None, False, self.code(t)
            if name in _LIKE and t.args:
                dims, _, w, desc = self.tensor(t.args[0], fn, d)
                return dims, _contiguous(dims) if dims is not None else None, w, desc
            if recv is not None and name in _SAME:
                dims, strides, w, desc = self.tensor(recv, fn, d)
                if name in ("contiguous", "clone") and dims is not None:
                    strides = _contiguous(dims)
                return dims, strides, w, desc
            if recv is not None and name in ("t", "transpose", "permute", "movedim", "swapaxes"):
                dims, strides, w, desc = self.tensor(recv, fn, d)
                if dims is None:
                    return None, None, w, desc
                order = list(range(len(dims)))
                ints = [int_literal(a) for a in t.args]
                if name == "t" and len(dims) == 2:
                    order = [1, 0]
                elif name in ("transpose", "swapaxes", "movedim") and len(ints) == 2 and None not in ints:
                    a, b = (i % len(dims) for i in ints)
                    order[a], order[b] = order[b], order[a]
                elif name == "permute" and None not in ints and sorted(i % len(dims) for i in ints) == order:
                    order = [i % len(dims) for i in ints]
                else:
                    return None, None, w, desc
                return [dims[i] for i in order], [strides[i] for i in order], w, desc
            if recv is not None and name == "unsqueeze":
                return self._unsqueezed(t, recv, fn, d)
            if recv is not None and (name in ("flatten", "ravel") and not t.args and not t.keywords
                                     or name in ("view", "reshape") and len(t.args) == 1 and not t.keywords
                                     and int_literal(t.args[0]) == -1):
                # x.view(-1), x.flatten(): one dim, x's element count (the factors of x kept)
                src_dims, _, w, desc = self.tensor(recv, fn, d)
                dims = [self.element_count(t, recv, fn, d, known=(src_dims, w, desc))]
                return dims, _contiguous(dims), w, desc
            if recv is not None and name in ("view", "reshape", "expand"):
                src_dims, _, w, desc = self.tensor(recv, fn, d)
                shape = self._shape_args(t)
                if shape is None and name == "view" and len(t.args) == 1 and isinstance(t.args[0], ast.Attribute) \
                        and src_dims is not None and all("constant-tensor" in x.rules for x in src_dims):
                    # x.view(torch.bfloat16) of a constant tensor: a reinterpretation, constant sizes still
                    dims = [x._replace(div16=False) for x in src_dims]
                    return dims, _contiguous(dims), w, desc
                if shape is None:
                    return None, None, w, desc
                dims = []
                others = [self._classify(x, fn, d) for x in shape if int_literal(x) != -1]
                keeps_leading = any(o.cls == VARYING for o in others)
                for pos, x in enumerate(shape):
                    if int_literal(x) == -1 and name == "expand":
                        # expand(n, -1): -1 keeps the source's dim at that place (aligned from the right)
                        at = pos - len(shape) + len(src_dims) if src_dims is not None else -1
                        dims.append(src_dims[at] if src_dims is not None and at >= 0 else
                                    Prov(UNKNOWN, "int", (f"-1 in {self.code(t)}: a dim of {desc}",)))
                    elif int_literal(x) == -1:
                        if keeps_leading and src_dims is None and 0 < pos < len(shape) - 1 \
                                and all(o.guess for o in others if o.cls == VARYING):
                            # V.reshape(N, -1, D), N only the guess that V's leading dim varies: the -1
                            # absorbs V's middle dims, which no convention tells of
                            dims.append(Prov(UNKNOWN, "int", (f"-1 in {self.code(t)}: the middle dims of {desc}",)))
                        elif keeps_leading and src_dims is None:
                            dims.append(Prov(STABLE, "int", (f"-1 in {self.code(t)}: the rest of {desc} once its varying dimension is kept apart",),
                                             rules=("model-dim",)))
                        elif src_dims is not None and keeps_leading and len(src_dims) >= 2 \
                                and sum(x.cls == VARYING for x in src_dims) == 1:
                            # x.view(n, -1) of an [n, d] tensor: the varying dim is kept apart in n,
                            # so -1 is the product of the others
                            rest = [x for x in src_dims if x.cls != VARYING]
                            dims.append(join(rest, "int").why("-1 takes the product of the source dims other than "
                                                              "its varying one, kept apart", "allocated-layout"))
                        elif src_dims is not None:
                            dims.append(join(src_dims).why("-1 takes the product of the source dims", "allocated-layout"))
                        elif w:
                            dims.append(Prov(STABLE, "int", ("-1 of a weight-like tensor",), rules=("weight-like",)))
                        else:
                            dims.append(Prov(VARYING, "int", (f"-1 in {self.code(t)} absorbs the leading dimension of {desc}",),
                                             rules=("leading-dim",)))
                    else:
                        dims.append(self._classify(x, fn, d))
                return dims, _contiguous(dims), w, desc
            if recv is not None:
                _, _, w, desc = self.tensor(recv, fn, d)
                return None, None, w, desc
        return None, None, False, self.code(t)

    def _assigned_tensor(self, t: ast.Name, owner: FunctionInfo, entries: list, d: int):
        """``tensor()`` of a local assigned in one or more branches (``entries``), each an expression:
        the most varying layout over them."""
        key = (id(owner), "tensor:" + t.id)
        own = [e for e in entries
               if t.id in self.names_in(e.node)]
        first = [self.tensor(e.node, owner, d) for e in entries if e not in own]
        seeded = False
        if own and not first and t.id in owner.params:
            # `x = x.contiguous()` (or `x.t()`, `x.reshape(n, -1)`) of a parameter:
            # the reassignments start from what the callers pass, and each is
            # derived from it, so they alone stand for the values
            self._tensor_memo[key] = self._param_value(owner, t.id, d)
            seeded = True
        elif own and len(first) == 1 and first[0][0] is not None:
            self._tensor_memo[key] = first[0]
        got = first + [self.tensor(e.node, owner, d) for e in own]
        # seeded from a parameter: weight-like only if every value is (`x = x[:n]` is not)
        w = (all(g[2] for g in got) if seeded else any(g[2] for g in got)) or weight_like(t)
        if seeded and w and not weight_like(t):
            why, rules = self._tensor_memo.get((id(owner), "weight-why:" + t.id), ("", ()))
            # said once: an earlier read of the parameter (x.shape[0] before x.shape[1]) may have
            # said it, before the callers' evidence
            if "param-reassigned" not in rules:
                self._tensor_memo[(id(owner), "weight-why:" + t.id)] = (
                    f"{t.id} reassigned only from itself (line {entries[0].line})" + (f"; {why}" if why else ""),
                    ("param-reassigned",) + rules)
        if len(got) == 1:
            return got[0][0], got[0][1], w, t.id
        if any(g[0] is None for g in got):
            return None, None, w, t.id
        # assigned in branches: each dim and stride is the most varying over the
        # assignments. One of another rank whose layout is all fixed (the
        # `buf = torch.empty(0)` placeholder beside `buf = torch.empty(n).as_strided(...)`)
        # can't make a dim more varying: it is left out, so the ranks agree.
        rank = max(len(g[0]) for g in got)
        got = [g for g in got if len(g[0]) == rank or any(p.cls != STABLE for p in g[0] + g[1])]
        if any(len(g[0]) != rank for g in got):
            return None, None, w, t.id
        dims = [join([g[0][i] for g in got], "int") for i in range(rank)]
        strides = [join([g[1][i] for g in got], "int") for i in range(rank)]
        return dims, strides, w, t.id

    def _param_value(self, fn: FunctionInfo, name: str, depth: int):
        """``tensor()`` of a wrapper's tensor parameter: weight-like when every caller passes a
        weight-like tensor, else the layout the callers' tensors have, when known."""
        if self._param_weight(fn, name, depth):
            return None, None, True, name
        got = self._param_tensor(fn, name, depth)
        if got is not None:
            return got[0], got[1], False, name
        return None, None, weight_like(ast.Name(id=name)), name

    # ---- element counts: x.numel() ----
    def element_count(self, e: ast.AST, t: ast.AST, fn, depth, known: tuple | None = None) -> Prov:
        """``t.numel()`` (``e`` the call): the product of ``t``'s dims where its layout is known
        (allocated-layout) or its rank is shown by the code (shown-rank); a weight-like tensor's is
        fixed; 2 or more dims read by the code are a count times model dims; else the guess."""
        label = self.code(e)
        if known is None:
            dims, _, w, desc = self.tensor(t, fn, depth)
        else:
            dims, w, desc = known
        if dims is not None:
            return _product(label, f"product of the dims of {desc}", dims, "allocated-layout")
        if w:
            return Prov(STABLE, "int", (f"{label}: size of the weight-like tensor",), rules=("weight-like",))
        shown = self.shown_dims(t, fn, depth)
        if shown is not None and shown is not _CYCLE:
            return _product(label, shown[1], shown[0], "shown-rank")
        root = self.tensor_root(t, fn)
        counted = (root,) if root is not None else ()
        if self.multi_dim(t, fn) or self.copy_multi_dim(t, fn):
            return Prov(VARYING, "int", (f"{label}: element count of an activation of 2 or more dims "
                                         f"(tokens times model dims, by convention a multiple of 16)",), guess=True,
                        rules=("count-times-dim", "element-count"), counted=counted)
        passed = self.multi_dim_passed(t, fn)
        if passed is not None:
            return Prov(VARYING, "int", (f"{label}: element count of a tensor of 2 or more dims: {passed} "
                                         f"(tokens times model dims, by convention a multiple of 16)",), guess=True,
                        rules=("count-times-dim", "shown-rank", "element-count"), counted=counted)
        return Prov(VARYING, "int", (f"{label}: element count of an activation",), guess=True,
                    rules=("element-count",), counted=counted)

    def tensor_root(self, t: ast.AST, fn, depth: int = 0) -> str | None:
        """The binding a tensor expression reads, as ``"<function>:<name>"``: a local or parameter
        (``x``, ``x.view(-1)``, ``x[:, 0]``, ``x.contiguous()``), or an attribute path off one
        (``meta.slots``); a local bound once to a view, slice or copy of another is that one's
        (``flat = x.flatten()``). None for anything else (a call's result, a module constant)."""
        while depth <= _ROOT_DEPTH:
            depth += 1
            if isinstance(t, ast.Call) and isinstance(t.func, ast.Attribute) and t.func.attr in _VIEWS:
                t = t.func.value
            elif isinstance(t, ast.Subscript):
                t = t.value
            elif isinstance(t, ast.Attribute) and t.attr not in _TENSOR_OWN_TENSORS - {"data"}:
                path = dotted(t)
                if path is None:
                    return None
                owner, where = self.lookup(path[0], fn)
                return f"{owner.qual}:{'.'.join(path)}" if where in ("assign", "param") else None
            elif isinstance(t, ast.Name):
                owner, where = self.lookup(t.id, fn)
                if where not in ("assign", "param"):
                    return None
                entries = owner.assigns.get(t.id, []) if where == "assign" else []
                if len(entries) == 1 and entries[0].kind == "expr" and entries[0].node is not None \
                        and t.id not in self.names_in(entries[0].node) and _is_view(entries[0].node):
                    t, fn = entries[0].node, owner
                    continue
                return f"{owner.qual}:{t.id}"
            else:
                return None
        return None

    def rows_of_count(self, e: ast.BinOp, left: Prov, right: Prov, out: Prov, fn) -> Prov:
        """``x.numel() // d`` with ``d`` a size fixed for the model, not written in the code
        (``x.shape[-1]``, a ``hidden`` parameter): the rows left rest on the leading-dim guess, not on
        the element-count one (rule rows-of-count); a literal or constant divisor (``numel // 2``,
        ``numel // BLOCK``) is no dim: the element count divided, as before. ``x.numel() - 1``
        counts the intervals of a vector of boundaries (``cu_seqlens``): x is 1-d (boundary-count),
        unless the code shows it has more dims."""
        if out.cls != VARYING or "element-count" not in left.rules or left.cls != VARYING:
            return out
        if isinstance(e.op, ast.Sub) and int_literal(e.right) == 1 and "count-times-dim" not in left.rules \
                and _is_numel(self._single_value(e.left, fn) or e.left):
            rule = "boundary-count"  # cu_seqlens.numel() - 1: the intervals between boundaries
        elif isinstance(e.op, (ast.FloorDiv, ast.Div)) and right.cls in (STABLE, UNKNOWN) \
                and not self.written_int(e.right, fn) \
                and not {"literal", "module-constant", "imported-name"} & set(right.rules):
            if self.part_of_a_dim(e.right, fn):
                # x.numel() // (x.shape[-1] // heads): the rows times heads, a count times a model dim
                return out.why(f"{self.code(e)}: the rows times what divides the last dim into "
                               f"{self.code(e.right)}, a count times a model dim", "count-times-dim")
            rule = "rows-of-count"
        else:
            return out
        return out._replace(rules=tuple(rule if r == "element-count" else r for r in out.rules))

    def part_of_a_dim(self, d: ast.AST, fn) -> bool:
        """``d`` is a dim divided by a size not written in the code (``x.shape[-1] // heads``, directly
        or through a local bound once): a count divided by it keeps that size as a factor."""
        d = self._single_value(d, fn) or d
        return isinstance(d, ast.BinOp) and isinstance(d.op, ast.FloorDiv) and self._shape_dim(d.left) is not None \
            and not self.written_int(d.right, fn)

    def shown_dims(self, t: ast.AST, fn, depth: int) -> tuple[list[Prov], str] | None:
        """The dims of ``t`` as far as its element count goes, where ``tensor`` does not know its
        layout but the code shows its rank: the tensors every caller in the module passes, what a
        helper of the module returns (element i of a tuple, or the value), a slice of such a tensor
        (its leading dim the slice's length), copies and views of one. A leading dim nothing here
        tells of is the leading-dim guess; a trailing one stays unknown (a model dim by the layout
        convention). None where the rank is not shown."""
        if depth > _LAYOUT_DEPTH or t is None:
            return None
        d = depth + 1
        dims, _, w, desc = self.tensor(t, fn, d)
        if w:
            return None
        if dims is not None:
            return dims, f"product of the dims of {desc}"
        got = None
        if isinstance(t, ast.Name):
            got = self._shown_name(t.id, fn, d)
        elif isinstance(t, ast.Subscript):
            got = self._shown_slice(t, fn, d)
        elif isinstance(t, ast.Call):
            name = _call_name(t.func)
            recv = t.func.value if isinstance(t.func, ast.Attribute) else None
            if recv is not None and (name in _SAME or name in _TRANSPOSES):
                got = self.shown_dims(recv, fn, d)
            elif name in _LIKE and t.args:
                got = self.shown_dims(t.args[0], fn, d)
            elif (callee := self.local_callee(t, fn)) is not None and callee is not fn:
                values = [st.value for st in self.own_returns(callee.node)]
                if values and len(values) <= _BRANCHES and all(v is not None for v in values):
                    got = self._shown_join([self.shown_dims(v, callee, d) for v in values],
                                           f"what {callee.name}() returns")
        if got is None or got is _CYCLE:
            return got
        dims, how = got
        if dims and dims[0].cls == UNKNOWN:
            # a size the helper or caller was given that nothing here tells of: the leading-dim
            # guess, as for the tensor's own shape
            dims = [Prov(VARYING, "int", (f"the leading (token/batch) dimension of {self.code(t)}",), guess=True,
                         rules=("leading-dim",))] + list(dims[1:])
        return dims, how

    def _shown_name(self, name: str, fn, depth: int) -> tuple[list[Prov], str] | None:
        owner, where = self.lookup(name, fn)
        if where not in ("assign", "param"):
            return None
        key = (id(owner), "shown:" + name)
        # asked again while it is read: the tensor handed back to where it came from adds nothing
        return self._memo_cycle(key, lambda: self._shown_name_of(name, owner, where, key, depth), cycle=_CYCLE)

    def _shown_name_of(self, name: str, owner, where: str, key: tuple, depth: int):
        """``_shown_name`` once the memo has not answered: the values assigned to ``name`` (the
        earlier ones first, under ``key`` for the reassignments to see), or what the callers pass."""
        out = None
        if where == "assign":
            entries = owner.assigns[name]
            if 1 <= len(entries) <= _BRANCHES and all(e.kind in ("expr", "item") for e in entries):
                # x = f(x), x = x.contiguous(): the earlier values first; the reassignment sees them
                own = [e for e in entries
                       if name in self.names_in(e.node)]
                first = [self._shown_entry(e, owner, depth) for e in entries if e not in own]
                if own and first:
                    self._tensor_memo[key] = self._shown_join(first, name)
                got = first + [self._shown_entry(e, owner, depth) for e in own]
                out = self._shown_join(got, f"{name} as assigned")
        else:
            p = owner.params[name]
            callers = self.info.calls.get(owner.qual, [])
            if p.kind != "star" and callers and depth <= _CALLER_DEPTH:
                got = []
                for call, caller in callers[:_LAYOUT_CALLERS]:
                    arg = self.arg_for(call, p)
                    if arg is None or isinstance(arg, str):
                        got = None
                        break
                    one = self.shown_dims(arg, caller, depth + 4)
                    why = self.called_at(call, caller, owner, name, arg)
                    got.append(one if one is None or one is _CYCLE else
                               ([x.why(why, "caller-layout") for x in one[0]], one[1]))
                out = self._shown_join(got, f"the tensors the callers pass for {name}") if got else None
        if out is None:
            k = _asserted_rank(name, owner.node)
            if k is not None and k >= 1:
                why = f"{name} has {k} dim{'s' if k > 1 else ''} (asserted)"
                out = [Prov(UNKNOWN, "int", (why,))] * k, why
        return out

    def _shown_entry(self, en, fn, depth: int) -> tuple[list[Prov], str] | None:
        if en.kind == "expr":
            return self.shown_dims(en.node, fn, depth)
        call = en.node
        if en.index is None or not isinstance(call, ast.Call):
            return None
        callee = self.local_callee(call, fn)
        if callee is None or callee is fn:
            return None
        values = _returned_items(self.own_returns(callee.node), en.index)
        if not values or len(values) > _BRANCHES:
            return None
        return self._shown_join([self.shown_dims(v, callee, depth + 1) for v in values],
                                f"element {en.index} of what {callee.name}() returns (line {en.line})")

    def _shown_slice(self, t: ast.Subscript, fn, depth: int) -> tuple[list[Prov], str] | None:
        """``buf[:n]``, ``buf[a:b]`` (the leading dim sliced, the rest whole): buf's dims, the leading
        one the slice's length."""
        sl = t.slice
        parts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        first = parts[0] if parts else None
        if not isinstance(first, ast.Slice) or first.step is not None or first.upper is None \
                or any(not (isinstance(x, ast.Slice) and x.lower is None and x.upper is None and x.step is None)
                       for x in parts[1:]):
            return None
        src = self.shown_dims(t.value, fn, depth)
        if src is None or src is _CYCLE:
            return None
        n = self._classify(first.upper, fn, depth) if first.lower is None else \
            join([self._classify(first.upper, fn, depth), self._classify(first.lower, fn, depth)], "int")
        n = n._replace(div16=n.div16 and first.lower is None)
        lead = n.why(f"{self.code(t)}: the leading dimension sliced to {self.code(first.upper)}", "shown-rank")
        return [lead] + list(src[0][1:]), f"{src[1]}, sliced"

    @staticmethod
    def _shown_join(got: list, how: str) -> tuple[list[Prov], str] | None:
        """Dims shown by every one of several values, of one rank: each the most varying over them
        (a value that leads back to the tensor asked about adds nothing)."""
        if any(g is None for g in got):
            return None
        if not got:
            return None
        got = [g for g in got if g is not _CYCLE]
        if not got:
            return _CYCLE
        if len({len(g[0]) for g in got}) != 1:
            return None
        if len(got) == 1:
            return got[0]
        n = len(got[0][0])
        return [join([g[0][i] for g in got], "int") for i in range(n)], how

    def multi_dim_passed(self, t: ast.AST, fn) -> str | None:
        """``t`` (a name) is passed to a function of this module that reads a non-leading dim of
        the parameter it lands in (``multi_dim``): a description, or None."""
        if not isinstance(t, ast.Name) or fn is None:
            return None
        for node in self._call_index(fn)["calls"]:
            callee = self.local_callee(node, fn)
            if callee is None or callee is fn:
                continue
            for p in callee.params.values():
                arg = self.arg_for(node, p)
                if isinstance(arg, ast.Name) and arg.id == t.id and p.kind != "star" \
                        and self.multi_dim(ast.Name(id=p.name, ctx=ast.Load()), callee):
                    return f"{callee.name}() reads a non-leading dim of it (line {node.lineno})"
        return None

    def _param_tensor(self, fn: FunctionInfo, name: str, depth: int) -> tuple[list[Prov], list[Prov]] | None:
        """Dims and strides of a wrapper's tensor parameter when every caller in this module passes a
        tensor whose layout is known (allocated there, or a view of one): each dim and stride is the
        most varying over the callers. None when any caller's tensor is unknown, or ranks differ."""
        p = fn.params.get(name)
        callers = self.info.calls.get(fn.qual, [])
        if p is None or p.kind == "star" or not callers or depth > _CALLER_DEPTH:
            return None
        key = (id(fn), "ptensor:" + name)
        return self._memo_cycle(key, lambda: self._param_tensor_from_callers(fn, p, name, callers, depth))

    def _param_tensor_from_callers(self, fn: FunctionInfo, p, name: str, callers, depth: int):
        """``_param_tensor`` once the memo has not answered: the callers' layouts, joined."""
        out = None
        got = []
        for call, caller in callers[:_LAYOUT_CALLERS]:
            arg = self.arg_for(call, p)
            if arg is None or isinstance(arg, str):
                break
            dims, strides, w, _ = self.tensor(arg, caller, depth + 4)
            if dims is None or w or (got and len(dims) != len(got[0][0])):
                break
            why = self.called_at(call, caller, fn, name, arg)
            got.append(([x.why(why, "caller-layout") for x in dims], [x.why(why, "caller-layout") for x in strides]))
        else:
            if got:
                n = len(got[0][0])
                out = ([join([g[0][i] for g in got], "int") for i in range(n)],
                       [join([g[1][i] for g in got], "int") for i in range(n)])
        return out

    def _param_weight(self, fn: FunctionInfo, name: str, depth: int) -> bool:
        """A wrapper parameter is weight-like if every caller in this module passes a weight-like tensor."""
        if weight_like(ast.Name(id=name)):
            return True
        p = fn.params.get(name)
        callers = self.info.calls.get(fn.qual, [])
        if p is None or not callers or depth > _CALLER_DEPTH:
            return False
        # a caller's tensor that leads back here while it is read: no evidence either way
        return self._memo_cycle((id(fn), "weight:" + name), lambda: self._weight_by_depth(fn, name, p, callers, depth),
                                cycle=False, keep=False)

    def _weight_by_depth(self, fn: FunctionInfo, name: str, p, callers: list, depth: int) -> bool:
        """``_param_weight`` past its cycle guard: the answer kept for the depths it holds at, else
        the callers asked."""
        # asked again (each x.stride(i), x.shape[i] of a wrapper's parameter asks): the answer found at
        # a depth at least as deep (True) or as shallow (False) holds, since only the depth limits cut
        # the callers followed short, and a cut leaves a tensor not weight-like
        seen = self._tensor_memo.get((id(fn), "weight-seen:" + name))
        if seen is not None:
            deepest_true, shallowest_false, why = seen
            if depth <= deepest_true:
                self._tensor_memo[(id(fn), "weight-why:" + name)] = why
                return True
            if depth >= shallowest_false:
                return False
        got = self._weight_through_callers(fn, name, p, callers, depth)
        deepest_true, shallowest_false, why = seen or (-1, _NEVER, None)
        if got:
            deepest_true, why = max(deepest_true, depth), self._tensor_memo[(id(fn), "weight-why:" + name)]
        else:
            shallowest_false = min(shallowest_false, depth)
        self._tensor_memo[(id(fn), "weight-seen:" + name)] = (deepest_true, shallowest_false, why)
        return got

    def _weight_through_callers(self, fn: FunctionInfo, name: str, p, callers: list, depth: int) -> bool:
        # a recursive call (`f(x.t(), ...)` inside f) hands on what f was given: no evidence
        # either way
        outside = [(call, caller) for call, caller in callers if caller is not fn]
        if not outside:
            return False
        for call, caller in outside[:_LAYOUT_CALLERS]:
            arg = self.arg_for(call, p)
            if arg is None or isinstance(arg, str):
                return False
            if not self.tensor(arg, caller, depth + 10)[2]:
                return False
        call, caller = outside[0]
        cname = caller.qual if caller is not None else "module level"
        more = f" and {len(outside) - 1} more" if len(outside) > 1 else ""
        self._tensor_memo[(id(fn), "weight-why:" + name)] = (
            f"every caller passes a weight-like tensor: {self._callee(call, fn)}({name}={self.code(self.arg_for(call, p))}) "
            f"in {cname} (line {call.lineno}){more}",
            ("local-caller", "recursive-caller") if len(outside) < len(callers) else ("local-caller",))
        return True

    # ---- torch.autograd.Function: what backward's ctx.saved_tensors holds ----
    def saved_tensor(self, en, fn: FunctionInfo | None) -> tuple[ast.AST, FunctionInfo] | None:
        """``a, b = ctx.saved_tensors`` in ``Fn.backward(ctx, ...)``: element i is argument i of the
        ``ctx.save_for_backward(...)`` call of ``Fn.forward(ctx, ...)`` (its one such call, no
        starred arguments), with ``forward`` (rule autograd-apply)."""
        node = en.node
        if fn is None or fn.name != "backward" or fn.class_name is None or en.index is None \
                or not (isinstance(node, ast.Attribute) and node.attr == "saved_tensors"
                        and isinstance(node.value, ast.Name) and node.value.id == _first_param(fn.node)):
            return None
        forward = self.info.functions.get(f"{fn.qual.rsplit('.', 1)[0]}.forward")
        ctx = _first_param(forward.node) if forward is not None else None
        if ctx is None:
            return None
        saves = [c for c in self.walk_of(forward.node, ast.Call)
                 if isinstance(c.func, ast.Attribute) and c.func.attr == "save_for_backward"
                 and isinstance(c.func.value, ast.Name) and c.func.value.id == ctx]
        if len(saves) != 1 or saves[0].keywords or any(isinstance(a, ast.Starred) for a in saves[0].args) \
                or en.index >= len(saves[0].args):
            return None
        return saves[0].args[en.index], forward

    # ---- the leading dim of an entry parameter's tensor, handed down unchanged ----
    def handed_entry(self, t: ast.AST, fn: FunctionInfo | None, depth: int = 0) -> EntryRef | None:
        """``t.shape[0]`` where ``t`` is, unchanged (itself, ``.contiguous()``, ``.to(...)``,
        ``*_like(...)``, through ``ctx.saved_tensors``), the tensor an entry parameter of a
        module-level function holds, every caller in the module on the way handing it down so (or
        passing a weight-like tensor): that parameter's ``.shape[0]``, for link.py to ask callers in
        other modules (rule caller-elsewhere). None where a path leads elsewhere."""
        t = _unchanged(t)
        if not isinstance(t, ast.Name) or fn is None or depth > _CALLER_DEPTH:
            return None
        owner, where = self.lookup_read(t, fn)
        if owner is None:
            return None
        key = (id(owner), where, "handed:" + t.id)
        return self._memo_cycle(key, lambda: self._handed_entry_of(t, owner, where, depth))

    def _handed_entry_of(self, t: ast.Name, owner: FunctionInfo, where: str, depth: int) -> EntryRef | None:
        """``handed_entry`` of the name ``t`` bound in ``owner`` (assigned or a parameter there), once
        the memo has not answered."""
        out = None
        if where == "assign":
            entries = owner.assigns[t.id]
            if len(entries) == 1 and entries[0].kind == "expr":
                out = self.handed_entry(entries[0].node, owner, depth + 1)
            elif len(entries) == 1 and entries[0].kind == "item":
                saved = self.saved_tensor(entries[0], owner)
                out = self.handed_entry(saved[0], saved[1], depth + 1) if saved is not None else None
        elif where == "param" and owner.params[t.id].kind != "star":
            p = owner.params[t.id]
            callers = self.info.calls.get(owner.qual, [])
            if not callers:
                if owner.parent is None and owner.class_name is None and not weight_like(t):
                    out = EntryRef(owner.qual, t.id, p.index, Accessor("shape", 0))
            elif len(callers) <= _LAYOUT_CALLERS:
                refs = set()
                for call, caller in callers:
                    if caller is owner:
                        continue  # f(x.t()) inside f hands on what f was given (recursive-caller)
                    arg = self.arg_for(call, p)
                    if arg is None or isinstance(arg, str):
                        refs = None
                        break
                    if self.tensor(arg, caller, depth + 10)[2]:
                        continue  # a weight-like tensor: fixed on that path
                    got = self.handed_entry(arg, caller, depth + 1)
                    if got is None:
                        refs = None
                        break
                    refs.add(got)
                out = refs.pop() if refs and len(refs) == 1 else None
        return out

    def one_by_callers(self, t: ast.AST, fn: FunctionInfo | None, depth: int) -> str | None:
        """``t`` holds, unchanged (itself, ``.contiguous()``, ``.to(...)``), a parameter to which every
        caller in this module passes a batch of one (``x.unsqueeze(0)``, ``x[None]``), or a parameter
        of its own for which the same holds (rule batch-of-one): where the first caller does so.
        None otherwise, or with no caller here (callers elsewhere: caller-fixed-leading)."""
        t = _unchanged(t, like=False)
        if not isinstance(t, ast.Name) or fn is None or depth > _CALLER_DEPTH:
            return None
        owner, where = self.lookup_read(t, fn)
        if where != "param" or owner is None or owner.params[t.id].kind == "star":
            return None
        callers = [(c, f) for c, f in self.info.calls.get(owner.qual, []) if f is not owner]
        if not callers or len(callers) > _LAYOUT_CALLERS:
            return None
        p = owner.params[t.id]
        return self._memo_cycle((id(owner), "one:" + t.id), lambda: self._one_by_callers(owner, p, callers, depth))

    def _one_by_callers(self, fn: FunctionInfo, p, callers, depth: int) -> str | None:
        """``one_by_callers`` of ``fn``'s parameter ``p``, once the memo has not answered."""
        first = None
        for call, caller in callers:
            arg = self.arg_for(call, p)
            if arg is None or isinstance(arg, str):
                return None
            if not batch_of_one(arg) and self.one_by_callers(arg, caller, depth + 1) is None:
                return None
            if first is None:
                more = f" and {len(callers) - 1} more" if len(callers) > 1 else ""
                first = f"{fn.name}({p.name}={self.code(arg)}) at line {call.lineno}{more}"
        return first

    def weight_why(self, t: ast.AST, fn) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(evidence, rules) for a parameter found weight-like through its callers, not its name."""
        if not isinstance(t, ast.Name) or fn is None:
            return (), ()
        owner = self.lookup(t.id, fn)[0]
        got = self._tensor_memo.get((id(owner), "weight-why:" + t.id))
        return ((got[0],), got[1]) if got else ((), ())

    def _unsqueezed(self, t: ast.Call, recv: ast.AST, fn, d: int) -> tuple[list[Prov] | None, list[Prov] | None, bool, str]:
        """``x.unsqueeze(k)`` of a tensor whose layout is known: a dim of size 1 at ``k``, whose stride
        is that of the dim it goes before times its size (the last dim's 1 when it goes last)."""
        dims, strides, w, desc = self.tensor(recv, fn, d)
        k = int_literal(t.args[0]) if len(t.args) == 1 and not t.keywords else None
        if dims is None or strides is None or len(strides) != len(dims) or k is None or not -len(dims) - 1 <= k <= len(dims):
            return None, None, w, desc
        k %= len(dims) + 1
        one = Prov(STABLE, "int", (f"{self.code(t)}: a new dim of size 1",), rules=("allocated-layout",))
        if k < len(dims):
            after = join([dims[k], strides[k]], "int")
            stride = after._replace(div16=dims[k].div16 or strides[k].div16, rules=("allocated-layout",) + after.rules)
        else:
            stride = Prov(STABLE, "int", ("innermost stride 1",), rules=("allocated-layout",))
        return dims[:k] + [one] + dims[k:], strides[:k] + [stride] + strides[k:], w, desc

    @staticmethod
    def _shape_args(call: ast.Call, as_written: bool = False) -> list[ast.AST] | None:
        """The sizes of an allocation or view (`torch.empty(n, m)`, `torch.zeros((n, m))`, `size=`,
        `torch.randint(low, high, size)`); None where they are not plain dims (a starred one, a whole
        shape in one argument, `full(n, v)`). ``as_written``: the positionals as they are, starred ones
        and whole shapes too, the last still the innermost size (`y.view(*x.shape[:-1], n)`)."""
        for kw in call.keywords:
            if kw.arg == "size":
                return list(kw.value.elts) if isinstance(kw.value, (ast.Tuple, ast.List)) else None
        pos = call.args
        if not as_written and (not pos or any(isinstance(a, ast.Starred) for a in pos)):
            return None
        if _call_name(call.func) == "randint":
            # torch.randint(high, size) / torch.randint(low, high, size): the bounds of the values come
            # first, the sizes are the tuple after them
            size = pos[-1] if len(pos) >= 2 else None
            if not isinstance(size, (ast.Tuple, ast.List)) or any(isinstance(x, ast.Starred) for x in size.elts):
                return None
            return list(size.elts)
        if pos and isinstance(pos[0], (ast.Tuple, ast.List)):
            els = pos[0].elts
            return None if not as_written and any(isinstance(x, ast.Starred) for x in els) else list(els)
        if as_written:
            return list(pos)
        if _call_name(call.func) in ("full", "new_full"):
            return None
        # torch.empty(n, m): each positional a dim. torch.empty(x.shape) / torch.empty(self.shape_tuple):
        # a whole shape in one argument, not a dim
        if any(isinstance(a, ast.Attribute) and (a.attr == "shape" or len(pos) == 1) for a in pos):
            return None
        ints = [a for a in pos if not (isinstance(a, ast.Constant) and isinstance(a.value, str))]
        return ints if len(ints) == len(pos) else None

    def dim(self, t, idx, fn, depth, target: str | None = None, ndim: int | None = None, line: int = 0,
            index: ast.AST | None = None) -> Prov:
        """Dim ``idx`` of tensor ``t`` (None: not known; ``index``, the expression, then names it)."""
        dims, _, weight, desc = self.tensor(t, fn, depth)
        tdesc = self.code(t)
        shown = self.code(index) if idx is None and index is not None else idx
        label = f"{target} = {tdesc}.shape[{shown}]" if target else f"{tdesc}.shape[{shown}]"
        at = f" (line {line})" if line else ""
        if dims is not None and idx is not None and -len(dims) <= idx < len(dims):
            inner = dims[idx]
            if inner.cls == UNKNOWN and target:
                inner = self.apply_name(target, inner)
            return Prov(inner.cls, "int", (f"{label}{at}: dimension {idx} of a tensor allocated as {desc}",) + inner.evidence,
                        inner.div16, inner.by_name, rules=("allocated-layout",) + inner.rules)
        if weight:
            why, rules = self.weight_why(t, fn)
            return Prov(STABLE, "int", (f"{label}{at}: dimension of the weight-like tensor {tdesc}",) + why,
                        rules=("weight-like",) + rules)
        named = self.by_name(target) if target else None
        leading = idx == 0 or (idx is not None and ndim is not None and idx == -ndim)
        if leading:
            holder = self.tensor_holder(t, fn)
            if holder is not None:
                return Prov(STABLE, "int", (f"{label}{at}: {tdesc} is an object that holds tensors ({holder}), not a "
                                            f"tensor: its shape is the one it records",), rules=("state-object",))
            if target and strong_stable(target, self.varying, self.stable):
                return Prov(STABLE, "int", (f"{label}{at}: leading dimension, but {target} names a model dimension",),
                            rules=("name-over-guess",))
            one = self.one_by_callers(t, fn, depth)
            if one is not None:
                return Prov(STABLE, "int", (f"{label}{at}: leading dimension of {tdesc}, a batch of one: {one}",),
                            rules=("batch-of-one", "local-caller"))
            stacked = self.count_named_inside(t, fn)
            if stacked is not None:
                # `_, n_tokens, d = x.shape`: the code names a later dim the per-call count and
                # discards the leading one (a stack of layers or blocks): the guess is no evidence
                return Prov(VARYING, "int", (f"{label}{at}: leading dimension of {tdesc}, but {stacked}",),
                            guess=True, rules=("stacked-leading", "leading-dim"))
            inner_use = self.inner_size_use(target, fn) if target else None
            if inner_use is not None:
                # the same value is the innermost size of a tensor the code makes: by the model-dim
                # convention a model dimension. The two conventions disagree: the guess is no evidence
                return Prov(VARYING, "int", (f"{label}{at}: leading dimension of {tdesc}, but {inner_use}",),
                            guess=True, rules=("conflicting-layout", "leading-dim"))
            return Prov(VARYING, "int", (f"{label}{at}: leading (token/batch) dimension of {tdesc}",), guess=True,
                        rules=("leading-dim",), entry=self.handed_entry(t, fn))
        if named == VARYING and ndim == 4 and idx in (1, -3) and not self.sequence_first(t, fn, line):
            # B, T, H, D = q.shape: the position of a batch-first layout and the name agree
            return Prov(VARYING, "int", (f"{label}{at}: the sequence dimension of a batch-first [B, T, H, D] layout",),
                        guess=True, rules=("sequence-dim",))
        if named == VARYING and ndim == 4 and idx in (2, -2):
            names = self.unpacked_names(t, fn, line)
            if batch_name(names.get(0)) and heads_name(names.get(1)):
                # B, H, T, D = q.shape: head-first, the leading dim named a batch and the next heads
                return Prov(VARYING, "int", (f"{label}{at}: the sequence dimension of a head-first [B, H, T, D] layout "
                                             f"({names[0]} names a batch, {names[1]} heads)",),
                            guess=True, rules=("sequence-dim",))
        if named != STABLE and ndim == 3 and idx in (1, -2) and target and not short_model_dim(target) \
                and not strong_stable(target, self.varying, self.stable):
            batch = self.unpacked_names(t, fn, line).get(0)
            if batch_name(batch):
                # B, T, C = x.shape: the leading dim named a batch, so the layout is batch-first and
                # the next dim is the sequence
                return Prov(VARYING, "int", (f"{label}{at}: the sequence dimension of a batch-first [B, T, C] layout "
                                             f"({batch} names the leading dim a batch)",),
                            guess=True, rules=("batch-first-3d",))
        resized = self.resized_dim(t, idx, ndim, fn)
        if resized is not None:
            # a spatial dim of a feature map or image: the size of the picture, not of the model
            return Prov(VARYING, "int", (f"{label}{at}: non-leading dimension, but {resized}",),
                        rules=("resized-dim",))
        if named == VARYING:
            # the name alone: the layout callers elsewhere pass may still show what the dim is
            return Prov(VARYING, "int", (f"{label}{at}: {target} names a per-call dimension",), False, True,
                        rules=(self.name_rule(target, VARYING),),
                        entry=self.layout_entry(t, fn, Accessor("shape", idx)) if idx is not None else None)
        if idx is None:
            return Prov(UNKNOWN, "int", (f"{label}{at}: index not a literal",))
        return Prov(STABLE, "int", (f"{label}{at}: non-leading dimension (a model dimension)",), rules=("model-dim",),
                    entry=self.layout_entry(t, fn, Accessor("shape", idx)))

    @staticmethod
    def unpacked_names(t: ast.AST, fn, line: int) -> dict[int, str]:
        """``{index: name}`` of the unpacking of ``t``'s shape at ``line`` (``b, s, c = x.shape``)."""
        if fn is None:
            return {}
        return {en.index: name for name, entries in fn.assigns.items() for en in entries
                if en.kind == "dim" and en.node is t and en.line == line and en.index is not None}

    @staticmethod
    def sequence_first(t: ast.AST, fn, line: int) -> bool:
        """In the same unpacking of ``t``'s shape the leading target is named a sequence length
        (``max_seqlen, batch_size, h, d = q.shape``): an [S, B, H, D] layout by the code's own
        naming, so the second dim is no sequence dim (rule sequence-dim)."""
        if fn is None:
            return False
        for name, entries in fn.assigns.items():
            for en in entries:
                if en.kind == "dim" and en.node is t and en.index == 0 and en.line == line:
                    low = name.lower()
                    return "seq" in low or "len" in low or name in ("S", "T", "L")
        return False

    def stride(self, t, idx, fn, depth, index: ast.AST | None = None) -> Prov:
        """Stride ``idx`` of tensor ``t`` (None: not known; ``index``, the expression, then names it)."""
        dims, strides, weight, desc = self.tensor(t, fn, depth)
        label = f"{self.code(t)}.stride({self.code(index) if idx is None and index is not None else idx})"
        if strides is not None and idx is not None and -len(strides) <= idx < len(strides):
            s = strides[idx]
            return Prov(s.cls, "int", (f"{label}: stride of a tensor allocated as {desc}",) + s.evidence, s.div16, s.by_name,
                        rules=("allocated-layout",) + s.rules)
        over = self.stride_over_varying(t, idx, fn, depth)
        if over is not None:
            return over
        return Prov(STABLE, "int", (f"{label}: stride of an existing tensor (product of trailing dimensions)",),
                    rules=("existing-stride",),
                    entry=self.layout_entry(t, fn, Accessor("stride", idx)) if idx is not None else None)

    def stride_over_varying(self, t: ast.AST, idx: int | None, fn: FunctionInfo | None, depth: int) -> Prov | None:
        """``x.stride(i)`` of a tensor of unknown layout is the product of the dims after i
        (``existing-stride``); where the function shows one of those dims varies (the sequence dim of
        a batch-first unpacking, a resized spatial dim), that product, else None (rule
        stride-over-varying)."""
        if not isinstance(t, ast.Name) or fn is None or idx is None:
            return None
        resized = self._resized_of(fn).get(t.id, {})
        unpackings: dict[int, dict[int, tuple[str, object]]] = {}  # line -> {position: (name, entry)}
        for name, entries in fn.assigns.items():
            for en in entries:
                if en.kind == "dim" and isinstance(en.node, ast.Name) and en.node.id == t.id and en.ndim \
                        and en.index is not None and 0 <= en.index < en.ndim:
                    unpackings.setdefault(en.line, {})[en.index] = (name, en)
        label = f"{self.code(t)}.stride({idx})"
        for line, at in sorted(unpackings.items()):
            ndim = next(iter(at.values()))[1].ndim
            pos = idx + ndim if idx < 0 else idx
            if not 0 <= pos < ndim - 1:
                continue
            trailing = []
            for j in range(pos + 1, ndim):
                if j in at:
                    name, en = at[j]
                    trailing.append(self.dim(en.node, j, fn, depth + 1, target=name, ndim=ndim, line=line))
                elif j in resized:
                    trailing.append(Prov(VARYING, "int", (f"{t.id}.shape[{j}]: {resized[j]}",), rules=("resized-dim",)))
                else:  # `_` in the unpacking: nothing said of it but its place
                    trailing.append(Prov(STABLE, "int", (f"{t.id}.shape[{j}]: a non-leading dimension",),
                                         rules=("model-dim",)))
            shown = [d for d in trailing if d.cls == VARYING and _SHOWN_VARYING & set(d.rules)]
            if not shown:
                continue
            base = shown[0]
            stride = Prov(VARYING, "int", base.evidence, any(d.div16 for d in trailing), guess=base.guess,
                          rules=base.rules)
            if not stride.div16 and counted_times_dim(trailing, base):
                stride = stride.by("count-times-dim")  # [b, t, c]: stride t * c, a count times a model dim
            return stride.why(f"{label}: the product of the dims of {t.id} after {pos} (unpacked line {line}), one of "
                              f"which the code shows varies", "stride-over-varying")
        after = {j: why for j, why in resized.items() if idx >= 0 and j > idx}
        if after:
            j = min(after)
            return Prov(VARYING, "int", (f"{label}: the product of the dims of {t.id} after {idx}, {t.id}.shape[{j}] "
                                         f"among them: {after[j]}",), rules=("stride-over-varying", "resized-dim"))
        return None

    def _resized_of(self, fn: FunctionInfo) -> dict[str, dict[int, str]]:
        key = (id(fn), "resized")
        if key not in self._tensor_memo:
            self._tensor_memo[key] = self._resized_dims(fn)
        return self._tensor_memo[key]

    def _returned_tensor(self, name: str, en, fn: FunctionInfo, depth: int):
        """``a, b = f(...)`` with ``f`` a function of this module: the layout of element ``en.index``
        of the tuples it returns (the most varying over its returns, as for branches)."""
        call = en.node
        if en.index is None or not isinstance(call, ast.Call):
            return None
        callee = self.local_callee(call, fn)
        if callee is None:
            return None
        values = _returned_items(self.own_returns(callee.node), en.index)
        if not values or len(values) > _BRANCHES:
            return None
        got = self._memo_cycle((id(callee), f"rtensor:{en.index}"),
                               lambda: [self.tensor(v, callee, depth + 1) for v in values], keep=False)
        if got is None:
            return None
        w = any(g[2] for g in got)
        if any(g[0] is None for g in got) or len({len(g[0]) for g in got}) != 1 \
                or any(x.cls == UNKNOWN for g in got for x in g[0]):
            # a size the helper was given that nothing here tells of: its layout says no more than
            # the tensor's own shape would (the leading-dim guess still applies to it)
            return None, None, w, name
        why = f"{name} = element {en.index} of what {callee.name}() returns (line {en.line})"
        n = len(got[0][0])
        dims = [join([g[0][i] for g in got], "int").why(why, "returns") for i in range(n)]
        strides = [join([g[1][i] for g in got], "int").why(why, "returns") for i in range(n)]
        return dims, strides, w, name

    def _counted_before(self, sizes: list[ast.AST], fn: FunctionInfo) -> bool:
        """One of the outer sizes of a layout is a per-call count (``torch.empty((m, n))`` with ``m``
        varying, ``y.view(*x.shape[:-1], n)``: the leading dims of another tensor): the count sits
        there, so the innermost size is not it. ``(3, n)``, ``(num_groups, n)``: stacked or
        column-major layouts whose count is the innermost size."""
        for x in sizes:
            if isinstance(x, ast.Starred):
                return True
            if self._classify(x, fn, 0).cls == VARYING:
                return True
        return False

    def inner_size_use(self, name: str, fn: FunctionInfo | None, depth: int = 0) -> str | None:
        """Where ``fn`` uses its local ``name`` as the innermost size of a tensor of 2 or more dims
        that it allocates or views (``torch.empty(m, name)``, ``y.view(*x.shape[:-1], name)``), not
        transposed after, or passes it to a function of this module that does: a description, or
        None. Layouts keep model dims innermost, so such a value is by that convention a model dim."""
        if fn is None or depth > _INNER_USE_DEPTH:
            return None
        key = (id(fn), "inner:" + name)
        if key in self._tensor_memo:
            return self._tensor_memo[key]
        self._tensor_memo[key] = None  # cycles through mutually calling helpers
        found = None
        index = self._call_index(fn)
        for node in index["calls"]:
            cname = _call_name(node.func)
            is_view = isinstance(node.func, ast.Attribute) and cname in ("view", "reshape", "new_empty", "new_zeros",
                                                                          "new_ones", "expand")
            if cname in _ALLOC or is_view:
                shape = self._shape_args(node, as_written=True) or []
                if len(shape) >= 2 and isinstance(shape[-1], ast.Name) and shape[-1].id == name \
                        and not _is_transposed(node, *self._parents_and_transposed(fn, index)) \
                        and self._counted_before(shape[:-1], fn):
                    found = f"it is the innermost size of {self.code(node)} (line {node.lineno}), after a per-call count"
                    break
                continue
            callee = self.local_callee(node, fn)
            if callee is None or callee is fn:
                continue
            for p in callee.params.values():
                arg = self.arg_for(node, p)
                if isinstance(arg, ast.Name) and arg.id == name:
                    inner = self.inner_size_use(p.name, callee, depth + 1)
                    if inner is not None:
                        found = f"it is passed to {callee.name}({p.name}=...) (line {node.lineno}), where {inner}"
                        break
            if found:
                break
        self._tensor_memo[key] = found
        return found

    def count_named_inside(self, t: ast.AST, fn: FunctionInfo | None) -> str | None:
        """``_, n_tokens, d = x.shape`` (or ``x.size()``) in the function that reads ``x``'s leading
        dim: the leading place discarded, a later one named like a per-call count. A description, or None."""
        return self._owner_memo(t, fn, "stacked", self._count_named_in)

    def _owner_memo(self, t: ast.AST, fn: FunctionInfo | None, kind: str, find, params_only: bool = False):
        """``find(owner, name)`` for the name ``t`` in the function that binds it (only where it is a
        parameter there, with ``params_only``), made once per function and name; None for anything
        but a name bound in a function."""
        if not isinstance(t, ast.Name) or fn is None:
            return None
        owner, where = self.lookup(t.id, fn)
        if owner is None or (params_only and where != "param"):
            return None
        key = (id(owner), f"{kind}:{t.id}")
        if key in self._tensor_memo:
            return self._tensor_memo[key]
        found = self._tensor_memo[key] = find(owner, t.id)
        return found

    def _count_named_in(self, owner: FunctionInfo, name: str) -> str | None:
        found = None
        for node in self.walk_of(owner.node, ast.Assign):
            if not (len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)):
                continue
            v = node.value
            if isinstance(v, ast.Call) and not v.args and isinstance(v.func, ast.Attribute) and v.func.attr == "size":
                v = v.func
            if not (isinstance(v, ast.Attribute) and v.attr in ("shape", "size") and isinstance(v.value, ast.Name)
                    and v.value.id == name):
                continue
            elts = node.targets[0].elts
            if len(elts) < 2 or not (isinstance(elts[0], ast.Name) and elts[0].id == "_"):
                continue
            named = [e.id for e in elts[1:] if isinstance(e, ast.Name) and self.by_name(e.id) == VARYING]
            if named:
                found = f"line {node.lineno} unpacks its shape leaving the leading place out and names {named[0]} the count"
                break
        return found

    def resized_dim(self, t: ast.AST, idx: int | None, ndim: int | None, fn: FunctionInfo | None) -> str | None:
        """Dim ``idx`` (not the leading one) of ``t`` where ``fn`` resizes it the way it resizes another
        non-leading dim of the same tensor: scaled by the same factor (``h * s``, ``w * s``; ``2 * h``,
        ``2 * w``) or padded (``h + 2 * ph``, ``w + 2 * pw``, ``t + front``), not rounded after
        (``(n + b - 1) // b``), the term not itself a dim, a literal pad (``h - 1``) no resize. Rows
        and channels are not resized in pairs; the spatial dims of a feature map or image are. A
        description, or None."""
        if fn is None or idx is None or not isinstance(t, ast.Name):
            return None
        found = self._resized_of(fn).get(t.id, {})
        pos = idx + ndim if idx < 0 and ndim is not None else idx
        return found.get(pos) or found.get(idx)

    def _resized_dims(self, fn: FunctionInfo) -> dict[str, dict[int, str]]:
        """``{tensor: {dim: description}}`` for ``resized_dim``: every dim of a local tensor that ``fn``
        resizes alike with another of its non-leading dims."""
        dims: dict[str, tuple[str, int]] = {}  # local name -> (tensor, dim) for `b, c, h, w = x.shape`
        for name, entries in fn.assigns.items():
            if len(entries) == 1 and entries[0].kind == "dim" and isinstance(entries[0].node, ast.Name) \
                    and entries[0].index is not None:
                en = entries[0]
                pos = en.index + en.ndim if en.index < 0 and en.ndim is not None else en.index
                dims[name] = (en.node.id, pos)

        def dim_of(e: ast.AST) -> tuple[str, int] | None:
            if isinstance(e, ast.Name):
                return dims.get(e.id)
            if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "shape" \
                    and isinstance(e.value.value, ast.Name) and (i := int_literal(e.slice)) is not None:
                return e.value.value.id, i
            return None

        def mentions_dim(e: ast.AST) -> bool:
            return any(isinstance(n, ast.Name) and n.id in dims or isinstance(n, ast.Attribute)
                       and n.attr in ("shape", "size", "numel") for n in ast.walk(e))

        rounded: set[int] = set()  # BinOps that are the numerator of a floor division or modulo
        for b in self.walk_of(fn.node, ast.BinOp):
            if isinstance(b.op, (ast.FloorDiv, ast.Mod, ast.Div)):
                inner = b.left
                while isinstance(inner, ast.BinOp) and isinstance(inner.op, (ast.Add, ast.Sub)):
                    rounded.add(id(inner))
                    inner = inner.left
                rounded.add(id(inner))
        forms: dict[tuple[str, str], dict[int, str]] = {}
        for b in self.walk_of(fn.node, ast.BinOp):
            if not isinstance(b.op, (ast.Mult, ast.Add, ast.Sub)) or id(b) in rounded:
                continue
            sides = ((b.left, b.right), (b.right, b.left)) if isinstance(b.op, (ast.Mult, ast.Add)) else ((b.left, b.right),)
            for side, term in sides:
                got = dim_of(side)
                if got is None or got[1] == 0 or mentions_dim(term):
                    continue
                lit = int_literal(term)
                if isinstance(b.op, ast.Mult):
                    if lit is not None and lit < 2:
                        continue
                    form = ast.dump(term)  # the same factor
                else:
                    if lit is not None or isinstance(term, ast.Constant):
                        continue  # h - 1: an index, not a pad
                    form = ""  # a pad, whatever its form (`h + 2 * ph`, `t + front`)
                forms.setdefault((got[0], type(b.op).__name__ + form), {}).setdefault(got[1], self.code(b))
        out: dict[str, dict[int, str]] = {}
        for (tensor, _), at in forms.items():
            if len(at) < 2:
                continue
            how = ", ".join(f"`{code}`" for code in at.values())
            for pos in at:
                out.setdefault(tensor, {}).setdefault(pos, f"the code resizes it like another dim of {tensor} ({how})")
        return out

    def tensor_holder(self, t: ast.AST, fn: FunctionInfo | None) -> str | None:
        """``qs.shape`` where the function also reads a tensor off ``qs`` (``qs.scale.stride(0)``,
        ``qs.absmax.shape``): ``qs`` is an object holding tensors (a quantization state, a layer), whose
        ``.shape`` is one it records. A tensor's own tensor-valued attributes (``x.grad``, ``x.T``) don't
        count. The first such use, or None."""
        return self._owner_memo(t, fn, "holder", self._tensor_read_off, params_only=True)

    def _tensor_read_off(self, owner: FunctionInfo, name: str) -> str | None:
        for node in self.walk_of(owner.node, ast.Attribute):
            if node.attr in _TENSOR_READS and isinstance(node.value, ast.Attribute) \
                    and isinstance(node.value.value, ast.Name) and node.value.value.id == name \
                    and node.value.attr not in _TENSOR_OWN_TENSORS:
                return f"{self.code(node)} (line {node.lineno})"
        return None

    def _call_index(self, fn: FunctionInfo) -> dict:
        """The calls of ``fn``'s body in ``ast.walk`` order, made once per function (every local that
        ``inner_size_use`` asks about walks the same calls)."""
        key = (id(fn), "call-index")
        index = self._tensor_memo.get(key)
        if index is None:
            index = {"calls": list(self.walk_of(fn.node, ast.Call))}
            self._tensor_memo[key] = index
        return index

    @staticmethod
    def _parents_and_transposed(fn: FunctionInfo, index: dict) -> tuple[dict, set]:
        """Each node's parent and the names transposed in ``fn``, made on first need."""
        if "parents" not in index:
            parents = {}
            for node in ast.walk(fn.node):
                for child in ast.iter_child_nodes(node):
                    parents[child] = node
            index["parents"] = parents
            index["transposed"] = _transposed_names(fn.node)
        return index["parents"], index["transposed"]

    def copy_multi_dim(self, t: ast.AST, fn, seen: frozenset[str] = frozenset()) -> bool:
        """``out = torch.empty_like(x)`` (or ``x.clone()``, ``x.float()``) where the function reads a
        non-leading dim of ``x``: ``out`` has 2 or more dims too."""
        if not isinstance(t, ast.Name) or t.id in seen or len(seen) > _LAYOUT_DEPTH:
            return False  # x = x.contiguous(): the copy of itself says nothing more
        src = self._single_value(t, fn)
        if not isinstance(src, ast.Call):
            return False
        name = _call_name(src.func)
        if name in _LIKE and src.args:
            base = src.args[0]
        elif name in _SAME and isinstance(src.func, ast.Attribute):
            base = src.func.value
        else:
            return False
        owner = self.lookup(t.id, fn)[0]
        return self.multi_dim(base, owner) or self.copy_multi_dim(base, owner, seen | {t.id})

    def _single_value(self, t: ast.AST, fn) -> ast.AST | None:
        """The expression a local name is bound to, when it is bound once."""
        if not isinstance(t, ast.Name) or fn is None:
            return None
        owner, where = self.lookup(t.id, fn)
        if where != "assign":
            return None
        entries = owner.assigns[t.id]
        return entries[0].node if len(entries) == 1 and entries[0].kind == "expr" else None

    def row_size(self, e: ast.BinOp, fn) -> Prov | None:
        """``x.numel() // rows`` with ``rows`` the leading dim of the same ``x``: the size of one row,
        the product of the non-leading dims."""
        def numel_of(node):
            node = self._single_value(node, fn) or node
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("numel", "nelement") and not node.args:
                return self.code(node.func.value)
            return None

        def leading_of(node):
            if isinstance(node, ast.Name) and fn is not None:
                owner, where = self.lookup(node.id, fn)
                if where == "assign" and len(owner.assigns[node.id]) == 1:
                    en = owner.assigns[node.id][0]
                    if en.kind == "dim" and en.index == 0:
                        return self.code(en.node)
                    if en.kind == "expr":
                        node = en.node
            got = self._shape_dim(node)
            return self.code(got[0]) if got is not None and self.known_int(got[1], fn) == 0 else None

        t = numel_of(e.left)
        if t is None or leading_of(e.right) != t:
            return None
        return Prov(STABLE, "int", (f"{self.code(e)}: the element count of {t} over its leading dim, the size of one row",),
                    rules=("row-size",))

    def layout_entry(self, t, fn, accessor: Accessor) -> EntryRef | None:
        """``p.shape[i]`` / ``p.stride(i)`` of a tensor parameter of a module-level function that no
        caller in this module passes (an entry parameter): callers elsewhere may pass a tensor whose
        layout they know (link.py asks them)."""
        if not isinstance(t, ast.Name) or fn is None:
            return None
        owner, where = self.lookup_read(t, fn)
        if where != "param" or owner is None or owner.parent is not None or owner.class_name is not None:
            return None  # module-level functions only (methods bound by name: docs/provenance.md)
        p = owner.params[t.id]
        if p.kind == "star" or self.info.calls.get(owner.qual) or weight_like(t):
            return None
        return EntryRef(owner.qual, t.id, p.index, accessor)



def _unchanged(t: ast.AST, like: bool = True) -> ast.AST | None:
    """The tensor expression ``t`` holds unchanged in shape: through ``.contiguous()``, ``.to(...)``
    and the other calls that keep it (not ``view_as``/``type_as``), and with ``like`` through
    ``*_like(x)``. None for any other call."""
    while isinstance(t, ast.Call):
        name = _call_name(t.func)
        if isinstance(t.func, ast.Attribute) and name in _SAME and name not in ("view_as", "type_as"):
            t = t.func.value
        elif like and name in _LIKE and t.args:
            t = t.args[0]
        else:
            return None
    return t

def _first_param(fn_node: ast.AST) -> str | None:
    """The name of a function's first positional parameter (``ctx`` of an autograd function)."""
    a = fn_node.args
    ordered = list(a.posonlyargs) + list(a.args)
    return ordered[0].arg if ordered else None


# the rules by which the code shows a non-leading dim varies (rule stride-over-varying)
_SHOWN_VARYING = frozenset({"sequence-dim", "batch-first-3d", "resized-dim"})


def _contiguous(dims: list[Prov]) -> list[Prov]:
    """Strides of a contiguous tensor: stride i is the product of the dims after i."""
    out = []
    for i in range(len(dims)):
        trailing = dims[i + 1:]
        if not trailing:
            out.append(Prov(STABLE, "int", ("innermost stride 1",), rules=("allocated-layout",)))
            continue
        j = join(trailing)
        lead = ("the layout includes a varying dimension",) if j.cls == VARYING else ()
        p = Prov(j.cls, "int", lead + j.evidence, any(t.div16 for t in trailing), rules=("allocated-layout",) + j.rules)
        if p.cls == VARYING and not p.div16 and counted_times_dim(trailing, j):
            p = p.by("count-times-dim")  # [.., n, d]: stride n * d, a count times a model dim
        out.append(p)
    return out


_CYCLE = ([], "")  # shown_dims: the value leads back to the tensor being asked about


def _product(label: str, how: str, dims: list[Prov], rule: str) -> Prov:
    """``x.numel()`` from x's dims: their product, a multiple of 16 if one of them is, a count times
    a model dim where a dim fixed for the model (or unknown and innermost) multiplies a varying one."""
    j = join(dims)
    out = Prov(j.cls, "int", (f"{label}: {how}",) + j.evidence, div16=any(x.div16 for x in dims),
               rules=(rule,) + tuple(r for r in j.rules if r != rule), counted=j.counted)
    if out.cls == VARYING and not out.div16 and counted_times_dim(dims, j):
        out = out.by("count-times-dim")
    return out


def counted_times_dim(dims: list[Prov], count: Prov) -> bool:
    """The product of ``dims`` (``count`` their join, varying) is a count times a model dim: one of
    them is fixed for the model by a model-dim rule, or is a size nothing here tells of placed after
    a varying dim (innermost, where layouts keep model dims; `(num_groups, n)` is no such layout)."""
    after = False
    for x in dims:
        if model_dim(x, count, inner=after):
            return True
        after = after or x.cls == VARYING
    return False


def _is_view(node: ast.AST) -> bool:
    """A view, slice or copy of a tensor read off a name (``x.view(-1)``, ``x[:, 0]``, ``x.int()``)."""
    for _ in range(_ROOT_DEPTH):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _VIEWS:
            node = node.func.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return isinstance(node, (ast.Name, ast.Attribute)) and dotted(node) is not None
    return False


def _is_numel(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr in ("numel", "nelement") and not node.args


def _rank_test(test: ast.AST, name: str, negated: bool) -> int | None:
    """``name.ndim == k`` / ``name.dim() == k`` (``!=`` when ``negated``), alone or in an ``and``
    chain (an ``or`` chain when negated): k."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or if negated else ast.And) \
        else [test]
    for c in parts:
        if not isinstance(c, ast.Compare) or len(c.ops) != 1 \
                or not isinstance(c.ops[0], ast.NotEq if negated else ast.Eq):
            continue
        for a, b in ((c.left, c.comparators[0]), (c.comparators[0], c.left)):
            k = int_literal(b)
            if k is None:
                continue
            if isinstance(a, ast.Call) and not a.args and isinstance(a.func, ast.Attribute):
                a = a.func if a.func.attr in ("dim", "ndimension") else a
            if isinstance(a, ast.Attribute) and a.attr in ("ndim", "dim", "ndimension") \
                    and isinstance(a.value, ast.Name) and a.value.id == name:
                return k
    return None


def _asserted_rank(name: str, fn_node: ast.AST | None) -> int | None:
    """The rank a function's body asserts for its local ``name``: ``assert x.dim() == 2`` (or ``and``
    with other checks), ``if x.ndim != 1: raise ...``. None if it asserts none, or two different."""
    if fn_node is None:
        return None
    found = set()
    for node in ast.walk(fn_node):
        if isinstance(node, ast.Assert):
            k = _rank_test(node.test, name, False)
        elif isinstance(node, ast.If) and node.body and isinstance(node.body[-1], ast.Raise):
            k = _rank_test(node.test, name, True)
        else:
            continue
        if k is not None:
            found.add(k)
    return found.pop() if len(found) == 1 else None


def _returned_items(returns: list[ast.Return], item: int) -> list[ast.AST] | None:
    """Element ``item`` of every tuple of ``returns`` (a function's own ``return`` statements); None
    when one is not a tuple that long."""
    values = []
    for st in returns:
        v = st.value
        if not isinstance(v, (ast.Tuple, ast.List)) or item >= len(v.elts) \
                or any(isinstance(x, ast.Starred) for x in v.elts):
            return None
        values.append(v.elts[item])
    return values


def _transposed_names(fn_node: ast.AST) -> set[str]:
    """Names the function transposes somewhere (``x.t()``, ``x.T``, ``x.permute(...)``)."""
    out = set()
    for node in ast.walk(fn_node):
        if isinstance(node, ast.Attribute) and node.attr in _TRANSPOSES and isinstance(node.value, ast.Name):
            out.add(node.value.id)
    return out


def _is_transposed(call: ast.Call, parents: dict, transposed: set[str]) -> bool:
    """The tensor ``call`` makes is transposed: in the same expression, or the name it is bound to."""
    node = call
    while node in parents:
        up = parents[node]
        if isinstance(up, ast.Attribute) and up.attr in _TRANSPOSES:
            return True
        if isinstance(up, (ast.Assign, ast.AnnAssign)):
            targets = up.targets if isinstance(up, ast.Assign) else [up.target]
            return any(isinstance(t, ast.Name) and t.id in transposed for t in targets)
        if isinstance(up, ast.stmt):
            return False
        node = up
    return False


def _constant_tensor(call: ast.Call, name: str | None) -> list[int] | None:
    """The sizes of ``torch.arange(<constants>)`` or ``torch.tensor(<literal list>)``: a tensor whose
    size is written in the code."""
    if name == "arange" and call.args and len(call.args) <= 3:
        ends = [_const(a) for a in call.args]
        if None in ends:
            return None
        start, stop, step = (0, ends[0], 1) if len(ends) == 1 else (ends[0], ends[1], ends[2] if len(ends) == 3 else 1)
        return [max(0, -(-(stop - start) // step))] if step else None
    if name in ("tensor", "as_tensor", "new_tensor") and call.args:
        sizes, node = [], call.args[0]
        while isinstance(node, (ast.List, ast.Tuple)):
            if not node.elts or any(isinstance(x, ast.Starred) for x in node.elts):
                return None
            sizes.append(len(node.elts))
            node = node.elts[0]
        return sizes if sizes and isinstance(node, ast.Constant) else None
    return None


def _const(node: ast.AST) -> int | None:
    """An int written as literal arithmetic (``-(2**15)``, ``1 << 10``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _const(node.operand)
        return -v if v is not None else None
    if isinstance(node, ast.BinOp):
        a, b = _const(node.left), _const(node.right)
        if a is None or b is None:
            return None
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.FloorDiv: lambda: a // b if b else None, ast.LShift: lambda: a << b if 0 <= b < 64 else None,
               ast.Pow: lambda: a ** b if 0 <= b < 64 else None}
        f = ops.get(type(node.op))
        return f() if f is not None else None
    return None
