"""Calls between functions: local calls (``info.calls``, including ``obj(...)`` of a module class),
calls of imported functions with each argument's provenance and tensor layout (what link.py follows
across modules), and PyTorch custom-op registrations."""
from __future__ import annotations

import ast
import re
import sys

from jitguard.static.facts import BUCKETED, STABLE, UNKNOWN, VARYING, ArgFacts, CallFacts, LayoutItem, TensorLayout
from jitguard.static.names import IMPORT, LOCAL, Scope, qualified, resolve_relative
from jitguard.static.provenance import Classifier
from jitguard.static.provenance.conventions import weight_like
from jitguard.static.provenance.syntax import batch_of_one, statements

# Callees from these packages are never wrappers of the scanned code's kernels: their calls are not
# recorded for the cross-module following of entry parameters.
_LIBRARY_ROOTS = frozenset(getattr(sys, "stdlib_module_names", ())) | {
    "torch", "triton", "numpy", "np", "jax", "cupy", "einops", "transformers", "pytest", "typing_extensions",
    "tl", "libdevice",
}
# The base class of a custom autograd function, as imports resolve it.
_AUTOGRAD_FUNCTION = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
# A custom op's name in a registration: "op", "ns::op", "ns::op.overload".
_OP_NAME = re.compile(r"(?:([A-Za-z_]\w*)::)?([A-Za-z_]\w*)(?:\.[A-Za-z_]\w*)?\Z")
# Decorators that register the decorated function under a plain op name ("op"); with "ns::op"
# any decorator call does.
_OP_DECORATORS = frozenset({"custom_op", "triton_op", "impl", "register_kernel", "register_fake"})


class CallerFacts:
    """The call half of the file extractor (mixed into extract._Extractor): uses its ``walker``,
    ``module``, ``is_package`` and ``arg``."""

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
            arg.weight = self.weight_arg(a, classifier, fn, arg)
            cf.args.append(arg)
            position += 1
        for kw in call.keywords:
            if kw.arg is None:
                cf.star_kwargs = True
                continue
            arg = self.arg(kw.value, classifier, fn, keyword=kw.arg)
            del arg.evidence[4:]
            arg.layout = self.layout(kw.value, classifier, fn, arg)
            arg.weight = self.weight_arg(kw.value, classifier, fn, arg)
            cf.args.append(arg)
        return cf

    @staticmethod
    def layout(node: ast.AST, classifier: Classifier, fn, arg: ArgFacts) -> TensorLayout | None:
        """The dims and strides of a tensor argument whose layout this module knows (allocated here,
        or a view of one), kept only when one of them varies: the callee's entry parameter takes them."""
        if arg.value_type not in ("tensor", "unknown") or isinstance(node, (ast.Constant, ast.BinOp, ast.Compare)):
            return None
        dims, strides, weight, _ = classifier.tensor(node, fn, 0)
        if dims is None and not weight and batch_of_one(node):
            # x.unsqueeze(0) / x[None] of a tensor laid out elsewhere: a packed batch of one, the
            # rest of it unknown (its leading dim alone, for the callee's leading-dim guess)
            return TensorLayout([LayoutItem(STABLE, False, (f"{classifier.code(node)}: a new leading dim of size 1",),
                                            ("batch-of-one",))], [], leading=True)
        if dims is None or strides is None or weight or len(dims) != len(strides):
            return None

        def item(p, named: bool) -> LayoutItem:
            # a dim that varies only by its name is not evidence against the callee's rule
            return LayoutItem(UNKNOWN if named and p.cls in (VARYING, BUCKETED) else p.cls, p.guess, tuple(p.evidence)[:3],
                              tuple(p.rules))

        # a stride varies by name when every varying dim after it does
        named_after = [all(d.by_name for d in dims[i + 1:] if d.cls in (VARYING, BUCKETED)) for i in range(len(dims))]
        out = TensorLayout([item(p, p.by_name) for p in dims],
                           [item(p, p.by_name or named_after[i]) for i, p in enumerate(strides)])
        if not any(x.provenance in (VARYING, BUCKETED) for x in out.dims + out.strides) \
                and not (out.dims and out.dims[0].provenance == STABLE):
            return None  # nothing varies and the leading dim is not fixed: the callee's own rules decide
        return out

    def weight_arg(self, node: ast.AST, classifier: Classifier, fn, arg: ArgFacts) -> str:
        """What the argument's leading dim is by the object that holds it, for an entry parameter's
        leading dim there (link.py): "weight" for a tensor named like a weight (or that every caller
        in this module passes weight-like), "held" for another tensor the object holds (``self.buf``:
        as fixed as the object), "" otherwise: not a ``self.x`` a method rebinds (state of the step)
        nor a field of a record class (a per-batch object)."""
        if arg.value_type not in ("tensor", "unknown") or not isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
            return ""
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(node, ast.Attribute) and isinstance(root, ast.Name) and root.id == "self":
            # self.x / self.states.x: held by the object
            if isinstance(node.value, ast.Name):
                record = self.walker.info.records.get(fn.class_name) if fn is not None and fn.class_name else None
                if node.attr in self.state_attributes() or (record is not None and node.attr in record.fields):
                    return ""
            return "weight" if weight_like(ast.Name(id=node.attr)) else "held"
        return "weight" if classifier.tensor(node, fn, 0)[2] else ""

    def state_attributes(self) -> frozenset[str]:
        """``self.x`` the module's methods other than constructors assign (``self.routing_map =
        routing_map`` in a per-step method): per-call state the object keeps, not a weight."""
        got = getattr(self, "_state_attributes", None)
        if got is None:
            out = set()
            for st, _, info in self.walker.functions:
                if info.class_name is None or st.name in ("__init__", "__post_init__", "__new__"):
                    continue
                for node in statements(st):  # assignments are statements: no need to walk expressions
                    targets = node.targets if isinstance(node, ast.Assign) else \
                        [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else ()
                    for t in targets:
                        for x in ast.walk(t):
                            if isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) and x.value.id == "self":
                                out.add(x.attr)
            got = self._state_attributes = frozenset(out)
        return got

    # ---- torch.autograd.Function: Fn.apply(a, b) runs Fn.forward(ctx, a, b) ----
    def autograd_forward(self, func: ast.AST, scope: Scope) -> str | None:
        """``Fn.apply`` with ``Fn`` a module-level class of this module deriving from
        ``torch.autograd.Function`` and defining ``forward``: ``Fn.forward`` (rule autograd-apply)."""
        if not (isinstance(func, ast.Attribute) and func.attr == "apply" and isinstance(func.value, ast.Name)):
            return None
        q = qualified(func.value, scope)
        if not q or q[0][1] != LOCAL:
            return None
        cls = self.walker.classes.get(q[0][0])
        if cls is None or not any(t in _AUTOGRAD_FUNCTION for b in cls.bases for t in self.fq(b, scope)):
            return None
        target = f"{cls.name}.forward"
        return target if target in self.walker.info.functions else None

    @staticmethod
    def apply_call(call: ast.Call, forward) -> ast.Call:
        """``Fn.apply(a, b)`` as the call of ``Fn.forward(ctx, a, b)`` it makes: a placeholder takes
        the place of ``ctx`` (a static ``forward`` counts it among its positions)."""
        if forward.is_method:
            return call
        ctx = ast.copy_location(ast.Constant(value=None), call)
        return ast.copy_location(ast.Call(func=call.func, args=[ctx] + list(call.args), keywords=call.keywords), call)

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
