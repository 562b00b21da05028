"""Source -> FileFacts: kernels (with parameter uses), launches (with argument provenance), imports,
aliases and inline suppressions of one file. The one entry point is ``extract_file``.

The scanner reads files with the stdlib ``ast`` (a C parser: ~20x faster than a LibCST parse, which
is what makes a vLLM-sized tree scan in seconds) and resolves names structurally through imports and
aliases (``names.py``), never by matching text. The work is split by what it finds: ``source``
(decode, parse, suppressions), ``scopes`` (the walk), ``kernels``, ``launches``, ``callers``; this
module runs them in order over one file.
"""
from __future__ import annotations

import ast

from jitguard.static.cache import content_digest
from jitguard.static.callers import _LIBRARY_ROOTS, CallerFacts
from jitguard.static.errors import SourceError
from jitguard.static.facts import METHOD_CALL, FileFacts
from jitguard.static.exercise import ScriptCode
from jitguard.static.kernels import KernelDiscovery
from jitguard.static.launches import LaunchExtraction, _unwrap_alias
from jitguard.static.names import IMPORT, LOCAL, Scope, dotted, earlier_imported, qualified, resolve_relative
from jitguard.static.provenance import Classifier, FunctionInfo
from jitguard.static.scopes import Walker
from jitguard.static.source import Source, decode, parse, suppressions

__all__ = ["extract_file", "decode", "suppressions"]



def _bound_grid(name: str, fn) -> tuple[ast.Subscript, list, list] | None:
    """The ``kernel[grid]`` a local of ``fn`` (or of an enclosing function) is bound to, once, with the
    arguments bound with it: ``functools.partial(kernel[grid], x, BLOCK=64)`` binds the leading
    positionals and keywords of every later call. (subscript, positionals, keywords)."""
    f = fn
    while f is not None:
        if name in f.assigns:
            entries = f.assigns[name]
            node = entries[0].node if len(entries) == 1 and entries[0].kind == "expr" else None
            if isinstance(node, ast.Subscript) and dotted(node.value) is not None:
                return node, [], []
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Subscript) \
                    and dotted(node.args[0].value) is not None and f.scope is not None \
                    and any(q == "functools.partial" for q, _ in qualified(node.func, f.scope)):
                return node.args[0], list(node.args[1:]), list(node.keywords)
            return None
        if name in f.params:
            return None
        f = f.parent
    return None


class _Extractor(KernelDiscovery, LaunchExtraction, CallerFacts):
    def __init__(self, path: str, text: str, tree: ast.Module, module: str, varying, stable, calls_of=None,
                 returns_of=None, handed_of=None):
        self.calls_of = calls_of  # record only calls of these (short) names; None: every imported call
        self.handed_of = handed_of  # imported names that, handed to a function, may be kernels
        # (qualified function, element or None): summarize what these return (FileFacts.returns)
        self.summarize = returns_of or ()
        self.path = path
        self.src = Source(text)
        self.tree = tree
        self.module = module
        self.is_package = path.replace("\\", "/").rsplit("/", 1)[-1] == "__init__.py"
        self.varying = frozenset(varying)
        self.stable = frozenset(stable)
        self.walker = Walker(module, self.is_package)
        self.returns_of: dict = {}  # own_returns per function, shared with the Classifier
        self.unrooted: dict = {}  # id -> (ArgFacts, node, fn) of the tensor arguments (LaunchExtraction.arg)

    def short(self, node: ast.AST, limit: int = 80) -> str:
        text = " ".join(self.src.segment(node).split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def fq(self, expr: ast.AST, scope: Scope) -> list[str]:
        out = []
        for name, source in qualified(expr, scope):
            if source == IMPORT:
                out.append(resolve_relative(name, self.module, self.is_package))
            elif source == LOCAL:
                out.append(f"{self.module}.{name}" if self.module else name)
        return out

    def import_target(self, func: ast.AST, fn: FunctionInfo | None) -> str | None:
        """The fully qualified function of another module of the tree that ``func`` names through an
        import (None for a library's, or anything else): what returns-elsewhere asks about."""
        scope = fn.scope if fn is not None and fn.scope is not None else self.top
        q = qualified(func, scope)
        if not q or q[0][1] != IMPORT:
            return None
        target = resolve_relative(q[0][0], self.module, self.is_package)
        return None if target.split(".")[0] in _LIBRARY_ROOTS or "." not in target else target

    def run(self) -> FileFacts:
        w = self.walker
        self.top = w.run(self.tree)
        facts = FileFacts(path=self.path, module=self.module, suppressions=suppressions(self.src.text))
        facts.kernels = self.discover()
        info = w.info
        launches: list[tuple[ast.Call, Scope, FunctionInfo | None, str]] = []
        imported: list[tuple[ast.Call, FunctionInfo | None, str]] = []
        op_calls: list[tuple[ast.Call, FunctionInfo | None, tuple[str, str]]] = []
        script = ScriptCode(self.tree, info.functions)
        for call, scope, fn in w.calls:
            if script.holds(call, fn):
                continue  # the module's tests and script block pick their sizes (rule test-callers)
            func = call.func
            if isinstance(func, ast.Subscript) and dotted(func.value) is not None:
                launches.append((call, scope, fn, "grid"))
            elif isinstance(func, ast.Subscript) and isinstance(func.value, ast.Call) and self.targets(func.value, scope, fn):
                launches.append((call, scope, fn, "grid"))  # factory(...)[grid](...): targets() follows its returns
            elif isinstance(func, ast.Subscript) and isinstance(func.value, ast.Subscript) \
                    and dotted(func.value.value) is not None and self.targets(func.value, scope, fn):
                launches.append((call, scope, fn, "grid"))  # KERNELS[mode][grid](...): a display of kernels
            elif isinstance(func, ast.Subscript) and isinstance(func.value, ast.Call) and len(func.value.args) == 1 \
                    and not func.value.keywords and dotted(func.value.args[0]) is not None:
                # wrap(kernel)[grid](...): a wrapper handing the kernel back (a decorator applied late)
                inner = ast.copy_location(ast.Subscript(value=func.value.args[0], slice=func.slice, ctx=ast.Load()), func)
                synthetic = ast.copy_location(ast.Call(func=inner, args=call.args, keywords=call.keywords), call)
                launches.append((synthetic, scope, fn, "grid"))
            elif isinstance(func, ast.Attribute) and func.attr in ("run", "warmup") and dotted(func.value) is not None:
                launches.append((call, scope, fn, func.attr))
            elif isinstance(func, ast.Name) and fn is not None and (bound := _bound_grid(func.id, fn)) is not None:
                # k = kernel[grid]; k(*args): the call launches kernel[grid] (with what a partial binds)
                sub, args, keywords = bound
                named = {kw.arg for kw in call.keywords}
                synthetic = ast.copy_location(ast.Call(func=sub, args=args + call.args, keywords=[
                    kw for kw in keywords if kw.arg not in named] + call.keywords), call)
                launches.append((synthetic, scope, fn, "grid"))
            callee = None
            q = None  # qualified(func, scope), made once where asked
            if isinstance(func, ast.Name):
                q = qualified(func, scope)
                if q and q[0][1] == LOCAL:
                    callee = q[0][0]
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                if func.value.id in ("self", "cls") and fn is not None and fn.class_name:
                    callee = f"{fn.qual.rsplit('.', 1)[0]}.{func.attr}"
                else:
                    q = qualified(func, scope)
                    if q and q[0][1] == LOCAL:
                        callee = q[0][0]
            if callee is None or callee not in info.functions:
                callee = self.instance_call(func, scope) or callee
            if (call.args or call.keywords) and isinstance(func, (ast.Name, ast.Attribute)):
                if q is None:
                    q = qualified(func, scope)
                if q and q[0][1] == IMPORT:
                    target = resolve_relative(q[0][0], self.module, self.is_package)
                    op = self.op_call(target) if isinstance(func, ast.Attribute) else None
                    if op is not None:
                        op_calls.append((call, fn, op))
                    elif self.calls_of is None or target.rsplit(".", 1)[-1] in self.calls_of:
                        # a name imported in the branches of an ``if`` (one module per platform):
                        # the call is a call of each (rule conditional-import)
                        for t in [target] + [resolve_relative(e, self.module, self.is_package)
                                             for e in earlier_imported(func, scope)]:
                            if t.split(".")[0] not in _LIBRARY_ROOTS:
                                imported.append((call, fn, t))
                elif isinstance(func, ast.Attribute) and self.calls_of and func.attr in self.calls_of \
                        and (callee is None or callee not in info.functions):
                    # obj.meth(...) on an object of unknown class: a call of some method named so
                    # (link.py binds it to one definition, nearest in the tree)
                    imported.append((call, fn, METHOD_CALL + func.attr))
            if callee is not None and callee in info.functions:
                info.calls.setdefault(callee, []).append((call, fn))
            elif (forward := self.autograd_forward(func, scope)) is not None:
                # Fn.apply(a, b) calls Fn.forward(ctx, a, b): its arguments bind one place on
                info.calls.setdefault(forward, []).append((self.apply_call(call, info.functions[forward]), fn))
        facts.custom_ops = self.op_registrations()
        if op_calls:
            # an op registered in this module binds like a local call (layouts, positions, keywords);
            # others are recorded as calls for link.py to bind to a registration elsewhere
            prefix = f"{self.module}." if self.module else ""
            local: dict[str, list[tuple[str, str]]] = {}
            for ns, op, f in facts.custom_ops:
                if f.startswith(prefix) and f[len(prefix):] in info.functions:
                    local.setdefault(op, []).append((ns, f[len(prefix):]))
            for call, fn, (ns, op) in op_calls:
                quals = [q for rns, q in local.get(op, ()) if not rns or rns == ns]
                for q in dict.fromkeys(quals):
                    info.calls.setdefault(q, []).append((call, fn))
                if not quals:
                    imported.append((call, fn, f"torch.ops.{ns}.{op}"))
        specs = self.launchers(facts.kernels)
        # forwarders: def launch(kernel, grid, **kw): kernel[grid](**kw)
        self.local_forwarders = {}
        for call, scope, fn, kind in launches:
            if kind != "grid" or fn is None or fn.parent is not None or fn.class_name is not None:
                continue
            callee = call.func.value
            if isinstance(callee, ast.Name) and callee.id in fn.params and fn.params[callee.id].kind == "pos" \
                    and callee.id not in fn.assigns:
                star = [a.value.id for a in call.args if isinstance(a, ast.Starred) and isinstance(a.value, ast.Name)
                        and a.value.id in fn.params and fn.params[a.value.id].kind == "pos"
                        and a.value.id not in fn.assigns]
                dicts = [kw.value.id for kw in call.keywords if kw.arg is None and isinstance(kw.value, ast.Name)
                         and kw.value.id in fn.params and fn.params[kw.value.id].kind != "star"
                         and kw.value.id not in fn.assigns]
                plain = [a for a in call.args if not isinstance(a, ast.Starred)]
                if (len(star) == 1 and not plain) or dicts:
                    # def launch(kernel, grid, args, consts): kernel[grid](*args, **consts): the
                    # handed call's tuple and dict arguments are the launch's (forwarder_packs: where
                    # the tuple is, for calls in other modules)
                    facts.forwarders[f"{self.module}.{fn.qual}" if self.module else fn.qual] = callee.id
                    if len(star) == 1 and not plain:
                        facts.forwarder_packs[f"{self.module}.{fn.qual}" if self.module else fn.qual] = \
                            fn.params[star[0]].index
                    self.local_forwarders[fn.qual] = (fn.params[callee.id].index,
                                                      fn.params[star[0]] if len(star) == 1 and not plain else None,
                                                      [fn.params[d] for d in dicts])
            # what it splats: its **kwargs, or a parameter holding a dict (launch(kernel, grid, args))
            splat = {a.arg for a in (fn.node.args.kwarg,) if a is not None} | {
                p.name for p in fn.params.values() if p.kind != "star" and p.name not in fn.assigns}
            if isinstance(callee, ast.Name) and callee.id in fn.params and fn.params[callee.id].kind != "star" \
                    and callee.id not in fn.assigns and any(
                        kw.arg is None and isinstance(kw.value, ast.Name) and kw.value.id in splat - {callee.id}
                        for kw in call.keywords):
                facts.forwarders[f"{self.module}.{fn.qual}" if self.module else fn.qual] = callee.id
        handed = self.handed_kernels(facts.kernels)
        if launches or specs or imported or handed or self.summarize:
            classifier = Classifier(info, self.src.segment, self.varying, self.stable, returns=self.returns_of,
                                    module=self.module, resolve=self.import_target)
            for call, fn, target in imported:
                classifier.at(fn, call)  # the guards before each call or launch hold for its arguments
                facts.calls.append(self.imported_call(call, fn, target, classifier))
            for call, scope, fn, kind in launches:
                classifier.at(fn, call)
                la = self.launch(call, scope, fn, kind, classifier)
                if la is not None:
                    facts.launches.append(la)
            for st, fn, ret, spec, targets in specs:
                classifier.at(fn, ret)
                facts.launches.append(self.spec_launch(st, fn, ret, spec, targets, classifier))
            for call, fn, kernels, via in handed:
                classifier.at(fn, call)
                facts.launches.append(self.handed_launch(call, fn, kernels, via, classifier))
            for qual, item in self.summarize:
                got = classifier.return_facts(qual, item)
                if got is not None:
                    facts.returns.append(got)
        counted = {c for la in facts.launches for a in la.args for c in a.counts}
        for c in facts.calls:  # link.py matches counts and tensors of launches only
            for a in c.args:
                a.counts = []
        if counted:  # a tensor's binding matters only where some count is of it: made for those files only
            for la in facts.launches:
                for a in la.args:
                    got = self.unrooted.get(id(a))
                    if got is not None and got[0] is a:
                        root = classifier.tensor_root(got[1], got[2])
                        a.tensor_root = root if root in counted else None
        facts.imports = dict(w.imports)
        for qual, value, scope in w.alias_values:
            inner = _unwrap_alias(value)
            if inner is None:
                continue
            names = [n for n in self.fq(inner, scope) if "<locals>" not in n]
            if names:
                facts.aliases[f"{self.module}.{qual}" if self.module else qual] = names[0]
        return facts


def extract_file(
    path: str,
    source: bytes | str,
    module: str,
    *,
    varying_names: frozenset[str] = frozenset(),
    stable_names: frozenset[str] = frozenset(),
    calls_of: frozenset[str] | None = None,
    returns_of: frozenset[tuple[str, int | None]] | None = None,
    handed_of: frozenset[str] | None = None,
    digest: str | None = None,
) -> FileFacts:
    """Facts about one file. Raises SourceError for a file that can't be parsed or decoded.
    ``calls_of``: record only the calls of functions with these short names (FileFacts.calls).
    ``returns_of``: (function qualified in the module, element or None) whose returns to summarize
    for calls in other modules (FileFacts.returns).
    ``handed_of``: short names of kernels of other modules that this file imports and hands to a
    function or binds to a grid (``launch(k, grid, n=n)``, ``g = k[grid]``): recorded as launches
    (link.py keeps those through a function that launches its kernel parameter).
    ``digest``: the ``content_digest`` of ``source`` where the caller has it (the scan does)."""
    text = decode(source)
    tree = parse(path, text, source if isinstance(source, bytes) else None)
    try:
        facts = _Extractor(path, text, tree, module, varying_names, stable_names, calls_of,
                           sorted(returns_of or (), key=lambda r: (r[0], -1 if r[1] is None else r[1])),
                           handed_of).run()
    except RecursionError:
        raise SourceError("too deeply nested to analyze") from None
    facts.digest = digest or content_digest(source if isinstance(source, bytes) else source.encode("utf-8"))
    return facts
