"""Facts of many files -> findings: resolve launches to kernels across modules, run every rule,
apply inline ``# jitguard: ignore[...]`` suppressions. Select/ignore filters are the runner's job."""
from __future__ import annotations

import os
from dataclasses import replace
from typing import NamedTuple

from jitguard.findings import Finding
from jitguard.static.facts import (
    BUCKETED, METHOD_CALL, STABLE, UNKNOWN, USE_ADDRESS, USE_COMPARE, USE_LOOP_BOUND, VARYING, Accessor, ArgFacts,
    CallFacts, EntryRef, FileFacts, KernelFacts, ReturnFacts, ReturnRef,
)
from jitguard.static.names import module_prefixes, reexport
from jitguard.static.param_uses import INDEX_TERM
from jitguard.static.program import BoundLaunch, Program
from jitguard.static.exercise import exercise_caller
from jitguard.static.provenance.rules import confidence, limit
from jitguard.static.provenance.value import _RANK, in_place_of_name  # one class order

_LEVELS = limit("caller-elsewhere", "levels")
_SITES = limit("caller-elsewhere", "sites")
_CHAIN = limit("caller-elsewhere", "chain")
_FIXED_LEVELS = limit("caller-fixed-leading", "levels")
_RETURN_NESTING = limit("returns-elsewhere", "nesting")
_REEXPORTS = limit("returns-elsewhere", "reexports")

NON_OPTIONS = {"grid", "warmup"}


class CallerValue(NamedTuple):
    """What callers in other modules pass for an entry parameter (the most varying caller's)."""

    provenance: str
    evidence: tuple[str, ...]
    by_name: bool
    guess: bool
    value_type: str
    rules: tuple[str, ...] = ()  # the inference rules it rests on, outermost first
    div16: bool = False  # every caller passes a multiple of 16 (a guard, a factor of 16): one value class


class _Index:
    def __init__(self, facts: list[FileFacts]):
        self.kernels: dict[str, tuple[KernelFacts, FileFacts]] = {}
        self.same_name: dict[str, list[tuple[KernelFacts, FileFacts]]] = {}
        self.all: list[tuple[KernelFacts, FileFacts]] = []
        self.modules: dict[str, FileFacts] = {}
        self.aliases: dict[str, str] = {}
        for f in facts:
            if f.module:
                self.modules.setdefault(f.module, f)
            for k in f.kernels:
                self.kernels.setdefault(k.qualname, (k, f))
                self.same_name.setdefault(k.qualname, []).append((k, f))
                self.all.append((k, f))
            for name, target in f.aliases.items():
                self.aliases.setdefault(name, target)

    def resolve(self, name: str, depth: int = 0, near: str = "") -> tuple[KernelFacts, FileFacts] | None:
        if depth > 8:
            return None
        if name in self.kernels:
            cands = self.same_name[name]
            if len(cands) == 1 or not near:
                return cands[0]
            # the same qualified name in several files: the one that shares the longest path prefix
            return max(cands, key=lambda kf: len(os.path.commonprefix([kf[1].path, near])))
        if name in self.aliases and self.aliases[name] != name:
            hit = self.resolve(self.aliases[name], depth + 1, near)
            if hit is not None:
                return hit
        # a re-export: pkg.kernel where pkg/__init__.py does "from .ops import kernel"
        target = reexport(name, self.modules)
        return self.resolve(target, depth + 1, near) if target is not None else None


def _place_after_star(launch, kernel: KernelFacts, args: dict, tail: list) -> None:
    """Positionals after a ``*args`` of unknown length, placed from the end: only when every other
    parameter is accounted for (passed by keyword, by heuristics, or has no default), so the length of
    the star is determined by the kernel's signature. Autotuned kernels (configs supply parameters)
    and parameters with defaults make it ambiguous: then nothing is placed."""
    if kernel.autotune_key is not None or launch.star_kwargs:
        return
    keywords = {a.keyword for a in launch.args if a.keyword is not None}
    before = sum(1 for a in launch.args if a.position is not None and a.keyword is None)
    rest = [p for p in kernel.params[before:] if p.name not in keywords and p.name not in kernel.heuristics]
    if any(p.default is not None for p in rest) or len(rest) < len(tail):
        return
    for p, a in zip(rest[len(rest) - len(tail):], tail):
        args[p.name] = a


# Keywords Triton's launcher takes besides the kernel's parameters.
LAUNCH_OPTIONS = frozenset({
    "num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
    "launch_pdl", "launch_cluster", "num_buffers_warp_spec", "num_consumer_groups", "reg_dec_producer",
    "reg_inc_consumer", "waves_per_eu", "matrix_instr_nonkdim", "kpack", "debug", "sanitize_overflow",
    "extern_libs", "instrumentation_mode", "grid", "stream", "warmup", "device", "ctas_per_cga",
})


def _spec_fits(launch, kernel: KernelFacts) -> bool:
    """A launcher's dict binds to a kernel by name: most of its keys must be the kernel's parameters
    (or launch options), and at least one of its keys or the launcher's own parameters must be."""
    names = {p.name for p in kernel.params}
    keys = [k for k in launch.keywords_order if k not in LAUNCH_OPTIONS and not k.startswith("_")]
    matched = sum(k in names for k in keys)
    if keys and matched * 3 < len(keys) * 2:
        return False
    return matched > 0 or any(k in names for k in launch.param_keywords)


def _bind(launch, file: FileFacts, kernel: KernelFacts, kfile: FileFacts) -> BoundLaunch:
    params = kernel.params
    names = {p.name for p in params}
    args = {}
    options: list[str] = []
    if launch.kind == "spec":
        by_name = set(launch.param_keywords)
        for arg in launch.args:
            if arg.keyword in names:
                args.setdefault(arg.keyword, arg)
            elif arg.keyword in LAUNCH_OPTIONS and arg.keyword not in by_name and arg.keyword not in NON_OPTIONS:
                options.append(arg.keyword)
        return BoundLaunch(launch=launch, file=file, kernel=kernel, kernel_file=kfile, args=args, options=options)
    tail = [a for a in launch.args if a.after_star is not None]
    if tail:
        _place_after_star(launch, kernel, args, tail)
    for arg in launch.args:
        if arg.keyword is None:
            if arg.position is not None and arg.position < len(params):
                args[params[arg.position].name] = arg
        elif arg.keyword in names:
            args[arg.keyword] = arg
        elif arg.keyword not in NON_OPTIONS:
            options.append(arg.keyword)
    return BoundLaunch(launch=launch, file=file, kernel=kernel, kernel_file=kfile, args=args, options=options)




class _Callers:
    """Calls of module-level functions from other files (FileFacts.calls), for entry parameters:
    a parameter that no caller in its own module passes gets its class from the callers elsewhere."""

    def __init__(self, facts: list[FileFacts], index: _Index, method_defs: dict[str, list[str]] | None = None):
        self.index = index
        self.method_defs = method_defs or {}
        # obj.meth(...) calls on objects of unknown class, by method name
        self.method_sites: dict[str, list[tuple[CallFacts, FileFacts]]] = {}
        self.sites: dict[str, list[tuple[CallFacts, FileFacts]]] = {}
        self.memo: dict[EntryRef, CallerValue | None] = {}
        self.ops = op_registry(facts)  # function -> [(namespace, op)] it is registered as
        self.op_sites: dict[str, list[tuple[str, CallFacts, FileFacts]]] = {}  # op -> torch.ops calls
        for f in facts:
            for c in f.calls:
                op = next((k for k in map(op_key, c.targets) if k is not None), None)
                if op is not None:
                    self.op_sites.setdefault(op[1], []).append((op[0], c, f))
                    continue
                for t in dict.fromkeys(self.canonical(t) for t in c.targets):
                    if t.startswith(METHOD_CALL):
                        self.method_sites.setdefault(t[len(METHOD_CALL):], []).append((c, f))
                        continue
                    self.sites.setdefault(t, []).append((c, f))
        self.by_leaf: dict[str, list[str]] = {}
        for t in self.sites:
            self.by_leaf.setdefault(t.rsplit(".", 1)[-1], []).append(t)

    def canonical(self, name: str, depth: int = 0) -> str:
        """``pkg.f`` where pkg/__init__.py does ``from .ops import f`` -> ``pkg.ops.f``."""
        if depth > 8:
            return name
        target = reexport(name, self.index.modules)
        return self.canonical(target, depth + 1) if target is not None else name

    def direct_sites(self, fq: str) -> list[tuple[CallFacts, FileFacts]]:
        """The calls of ``fq`` by its name (not through methods or custom ops)."""
        sites = self.sites.get(fq)
        if sites is None:  # module names computed from another root ("ops.f" vs "pkg.ops.f")
            short = fq.rsplit(".", 1)[-1]
            sites = [x for k in self.by_leaf.get(short, ()) if k.endswith("." + fq) or fq.endswith("." + k)
                     for x in self.sites[k]]
        return sites

    def resolve(self, ref: EntryRef | None, depth: int = 0) -> CallerValue | None:
        """What callers elsewhere pass for the entry parameter ``ref``; the most varying caller wins."""
        if not isinstance(ref, EntryRef) or depth > _LEVELS:
            return None
        key = ref
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = None  # a cycle resolves to nothing
        fq, base, index, acc = ref.function, ref.param, ref.position, ref.accessor
        short = fq.rsplit(".", 1)[-1]
        best, aligned = None, True
        sites = self.direct_sites(fq)
        # torch.ops.<ns>.<op>(...) where this function is registered as custom op <op>
        via: dict[int, str] = {}
        for c, f in self.method_callers(fq):
            via[id(c)] = METHOD_CALL
            sites = list(sites) + [(c, f)]
        for ns, op in self.ops.get(fq, ()):
            for cns, c, f in self.op_sites.get(op, ()):
                if (not ns or ns == cns) and id(c) not in via:
                    via[id(c)] = f"torch.ops.{cns}.{op}"
                    sites = list(sites) + [(c, f)]
        for c, f in sites[:_SITES]:
            if exercise_caller(f.exercise, f.module, c.function):
                continue  # warm-up, tests and benchmarks pick their sizes: not evidence of serving
            a = _arg_at(c, base, index)
            if a is None:
                continue
            if acc is not None:
                # p.shape[i] / p.stride(i) of the tensor this caller passes
                got = layout_item(a, acc)
                if got is None and _plain_entry(a, f):
                    deeper = self.resolve(a.entry.with_accessor(acc), depth + 1)
                    if deeper is not None and deeper.provenance != UNKNOWN:
                        got = deeper
                if got is None:
                    continue
            else:
                got = CallerValue(a.provenance, tuple(a.evidence), a.by_name, a.guess, a.value_type, tuple(a.rules),
                                  a.div16)
            if acc is None and a.entry and a.provenance != VARYING:
                deeper = self.resolve_parts(a.entry, a.also, depth + 1)
                if deeper is not None and deeper.provenance != UNKNOWN:
                    got = deeper
                    if got.provenance == VARYING and (a.provenance == BUCKETED or a.bucketed):
                        got = got._replace(provenance=BUCKETED)
            if via.get(id(c)) == METHOD_CALL:  # obj.meth(...), the object's class unknown
                callee = f"{fq.rsplit('.', 2)[-2]}.{short} (through an object)"
                if got.provenance == VARYING and got.guess:
                    # a binding by name and a structural guess (the size of a tensor or list
                    # nothing is known of) do not add up to evidence: len(offsets) of a
                    # LoRA stack in sglang
                    got = got._replace(provenance=UNKNOWN, guess=False)
                bound = ("caller-elsewhere", "method-by-name")
            else:
                callee = f"{via[id(c)]} -> {short}" if id(c) in via else short
                bound = ("caller-elsewhere", "custom-op") if id(c) in via else ("caller-elsewhere",)
            where = f"{callee}({base}={a.text}) called in {c.function or f.module} ({f.path}:{c.line})"
            got = got._replace(evidence=(where,) + tuple(got.evidence),
                               rules=bound + tuple(r for r in got.rules if r not in bound))
            aligned = aligned and got.div16
            if best is None or (_RANK[got.provenance], not got.by_name) > (_RANK[best.provenance], not best.by_name):
                best = got
        if best is not None:
            best = best._replace(div16=aligned)
        self.memo[key] = best
        return best

    def fixed_everywhere(self, ref: EntryRef, depth: int = 0) -> CallerValue | None:
        """``p.shape[0]`` of the entry parameter ``ref`` when every caller in other modules passes a
        tensor whose leading dim is fixed: weight-like, or laid out with a fixed leading dim, or
        handed on from an entry parameter of its own for which the same holds (rule
        caller-elsewhere). None when one caller passes something else or the callers are unknown."""
        if ref.accessor is None or depth > _FIXED_LEVELS:
            return None
        key = ("fixed", ref)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = None  # a cycle fixes nothing
        fq, short = ref.function, ref.function.rsplit(".", 1)[-1]
        sites = self.direct_sites(fq)
        sites = [(c, f) for c, f in sites if not exercise_caller(f.exercise, f.module, c.function)]
        out = None
        if sites and len(sites) <= _SITES:
            first, used, held = None, [], False
            for c, f in sites:
                a = _arg_at(c, ref.param, ref.position)
                if a is None:
                    return None
                got = layout_item(a, ref.accessor)
                if got is not None and got.provenance == STABLE and not got.by_name:
                    why, rules = got.evidence, got.rules
                elif got is None and getattr(a, "weight", "") == "weight":
                    why, rules = (f"{a.text}: a weight-like tensor, fixed for the model",), ("weight-like",)
                elif got is None and getattr(a, "weight", "") == "held":
                    held = True
                    why, rules = (f"{a.text}: a tensor the object holds, as fixed as the object",), ("held-leading",)
                elif got is None and _plain_entry(a, f):
                    deeper = self.fixed_everywhere(a.entry.with_accessor(ref.accessor), depth + 1)
                    if deeper is None:
                        return None
                    why, rules = deeper.evidence, deeper.rules
                    held = held or deeper.provenance == BUCKETED
                else:
                    return None
                used += [r for r in rules if r not in used]
                if first is None:
                    where = f"{short}({ref.param}={a.text}) called in {c.function or f.module} ({f.path}:{c.line})"
                    more = f" and {len(sites) - 1} more caller{'s' if len(sites) > 2 else ''}" if len(sites) > 1 else ""
                    first = (where + more,) + tuple(why)
            # one caller's tensor is held by an object, not named a weight: a few variants per process
            out = CallerValue(BUCKETED if held else STABLE, first, False, False, "int",
                              ("held-leading",) * held + ("caller-fixed-leading",)
                              + tuple(r for r in used if r not in ("caller-fixed-leading", "held-leading")))
        self.memo[key] = out
        return out
    def resolve_parts(self, ref: EntryRef, also, depth: int = 0) -> CallerValue | None:
        """``resolve`` over a value resting on ``ref`` and the entry parameters ``also`` (``p + q``):
        the most varying part that callers make vary; fixed only when every part is fixed."""
        got = self.resolve(ref, depth)
        if not also:
            return got
        parts = [got] + [self.resolve(e, depth) for e in also]
        moving = [g for g in parts if g is not None and g.provenance in (VARYING, BUCKETED)]
        if moving:
            return max(moving, key=lambda g: (_RANK[g.provenance], not g.by_name))
        if any(g is None or g.provenance == UNKNOWN for g in parts):
            return None  # a part nothing is known of: the whole is not known fixed
        return got

    def method_callers(self, fq: str) -> list[tuple[CallFacts, FileFacts]]:
        """``obj.meth(...)`` calls that bind to the method ``fq`` = module.Class.meth: the tree defines
        few functions named ``meth`` (the runner's ``method_defs``), and of those this one is the
        nearest to the call (the longest common directory prefix, strictly)."""
        parts = fq.split(".")
        if len(parts) < 3 or ".".join(parts[:-1]) in self.index.modules:
            return []
        home = self.index.modules.get(".".join(parts[:-2]))
        defs = self.method_defs.get(parts[-1])
        if home is None or not defs or home.path not in defs:
            return []
        out = []
        for c, f in self.method_sites.get(parts[-1], ()):
            near = _shared_dirs(f.path, home.path)
            if all(_shared_dirs(f.path, d) < near for d in defs if d != home.path):
                out.append((c, f))
        return out


def _plain_entry(a, f) -> bool:
    """The argument is a parameter of a module-level function of its file, handed on as it is: a
    layout asked of the callee is asked of that function's callers (not of methods: bound by name)."""
    if a.entry is None or a.entry.accessor is not None:
        return False
    fq, module = a.entry.function, getattr(f, "module", "") or ""
    qual = fq[len(module) + 1:] if module and fq.startswith(module + ".") else fq
    return "." not in qual


def layout_item(a, acc: Accessor) -> CallerValue | None:
    """``.shape[i]`` / ``.stride(i)`` of the tensor a caller passes, from the layout its module
    recorded (ArgFacts.layout); None if not known."""
    lay = getattr(a, "layout", None)
    item = lay.item(acc) if lay is not None else None
    if item is None:
        return None
    what = "dimension" if acc.kind == "shape" else "stride"
    return CallerValue(item.provenance, (f"{a.text}{acc}: {what} {acc.index} of the tensor as the caller lays it out",)
                       + tuple(item.evidence), False, bool(item.guess), "int",
                       ("caller-layout",) + tuple(r for r in item.rules if r != "caller-layout"))


def _arg_at(call: CallFacts, name: str, index):
    """The argument a call passes for parameter ``name`` (at ``index`` when positional), or None."""
    a = next((x for x in call.args if x.keyword == name), None)
    if a is None and isinstance(index, int) and index >= 0:
        a = next((x for x in call.args if x.keyword is None and x.position == index), None)
    return a


def _shared_dirs(a: str, b: str) -> int:
    """How many leading directories two paths share."""
    n = 0
    for x, y in zip(a.replace(os.sep, "/").split("/")[:-1], b.replace(os.sep, "/").split("/")[:-1]):
        if x != y:
            break
        n += 1
    return n


def _follow_entries(program: Program, callers: _Callers) -> None:
    """Launch arguments that rest on an entry parameter (UNKNOWN, or classified by its name alone)
    take the class of what callers in other modules pass: structure over names."""
    for b in program.launches:
        for name, arg in list(b.args.items()):
            if _guessed_leading(arg):
                # the leading dim guessed to vary, of a tensor every caller elsewhere passes fixed
                got = callers.fixed_everywhere(arg.entry)
                if got is not None:
                    b.args[name] = replace(arg, provenance=got.provenance, evidence=[arg.evidence[0]] + list(got.evidence)[:_CHAIN - 1]
                                           if arg.evidence else list(got.evidence)[:_CHAIN],
                                           # held by an object: still the guess, as fixed as the object
                                           guess=got.provenance == BUCKETED, div16=False,
                                           rules=list(got.rules) + [r for r in arg.rules if r not in got.rules])
                continue
            if not arg.entry or (arg.provenance == VARYING and not by_convention(arg)):
                continue
            got = callers.resolve_parts(arg.entry, arg.also)
            if got is None or got.provenance == UNKNOWN:
                continue
            cls, evidence, by_name, guess, vtype, rules, div16 = got
            if cls == VARYING and (arg.provenance == BUCKETED or arg.bucketed):
                cls = BUCKETED  # bucketed here (next_power_of_2 of the parameter): still a few values
            if cls == STABLE and (by_name or not (arg.by_name or arg.provenance == UNKNOWN
                                                  or (by_convention(arg) and confidence(rules) == "high"))):
                continue  # only structure may overturn a class, and only one resting on a convention
            if cls == arg.provenance and by_name:
                continue
            if "returns-elsewhere" in arg.rules:
                # what another module's function returns with this parameter: that chain, then the
                # callers' (in place of the parameter's name, its last step, where a name classed it)
                evidence = tuple(arg.evidence[:-1] if arg.by_name else arg.evidence) + tuple(evidence)
                rules = ("returns-elsewhere",) + tuple(r for r in rules if r != "returns-elsewhere")
            b.args[name] = replace(
                arg, provenance=cls, evidence=list(evidence)[:_CHAIN], by_name=by_name, guess=guess, rules=list(rules),
                div16=arg.div16 or div16,
                value_type=arg.value_type if arg.value_type not in ("unknown", "none") else vtype,
            )


def by_convention(arg) -> bool:
    """Classed by its name, or varying by a rule read in place of the name (empty-skip, live-slice:
    ``InferenceRule.in_place_of_name``): what callers or returns in other modules show by structure
    settles it; a name from there does not."""
    return arg.by_name or (arg.provenance == VARYING and in_place_of_name(arg))


def _guessed_leading(arg) -> bool:
    """VARYING only as the guessed leading dim of an entry parameter's tensor (handed_entry): callers
    elsewhere that all pass a fixed one make it STABLE."""
    return arg.provenance == VARYING and arg.guess and not arg.by_name and arg.entry is not None \
        and arg.entry.accessor is not None and arg.entry.accessor.kind == "shape"


def leading_ref(ref: EntryRef) -> bool:
    """``p.shape[0]`` of an entry parameter: asked of callers elsewhere only where its leading dim was
    guessed to vary (``_guessed_leading``; layouts of model dims are read from files read anyway)."""
    return ref.accessor is not None and ref.accessor.kind == "shape" and ref.accessor.index == 0


def _unsettled(arg) -> bool:
    """An argument whose class callers elsewhere could still change."""
    return bool(arg.entry) and arg.value_type in ("int", "unknown") and \
        (not (arg.provenance == VARYING and not by_convention(arg)) or _guessed_leading(arg))


def launch_entry_refs(facts: list[FileFacts]) -> set[EntryRef]:
    """Entry parameters that unsettled launch arguments of value-specialized parameters rest on: the
    runner reads their callers' files (phase 4)."""
    out: set[EntryRef] = set()
    for b in build_program(facts, follow=False).launches:
        k = b.kernel
        skip = k.unspecialized() | set(k.heuristics)
        for name, arg in b.args.items():
            p = k.param(name)
            if p is None or p.pointer or name in skip or not _unsettled(arg):
                continue
            out.add(arg.entry)
            out.update(arg.also)
    return out


def op_key(target: str) -> tuple[str, str] | None:
    """``torch.ops.<ns>.<op>`` (or ``.<overload>`` after it) -> (ns, op)."""
    parts = target.split(".")
    if len(parts) in (4, 5) and parts[0] == "torch" and parts[1] == "ops":
        return parts[2], parts[3]
    return None


def op_registry(facts) -> dict[str, list[tuple[str, str]]]:
    """Function -> [(namespace or "", op)] it is registered as a PyTorch custom op under."""
    out: dict[str, list[tuple[str, str]]] = {}
    for f in facts:
        for row in getattr(f, "custom_ops", None) or ():
            if isinstance(row, (list, tuple)) and len(row) == 3:
                ns, op, fq = row
                out.setdefault(str(fq), []).append((str(ns), str(op)))
    return out


def caller_entry_refs(facts: list[FileFacts], refs: set[EntryRef], registry=None) -> set[EntryRef]:
    """One level up: in these files' calls of the functions of ``refs`` (directly, or through
    ``torch.ops.<ns>.<op>`` for a function registered as that op in ``registry``), the entry
    parameters the arguments for those parameters rest on."""
    by_leaf: dict[str, list[EntryRef]] = {}
    for ref in refs:
        by_leaf.setdefault(ref.function.rsplit(".", 1)[-1], []).append(ref)
        for ns, op in (registry or {}).get(ref.function, ()):
            by_leaf.setdefault("torch.ops:" + op, []).append(ref)
    out: set[EntryRef] = set()
    for f in facts:
        for c in f.calls:
            for t in c.targets:
                op = op_key(t)
                leaf = "torch.ops:" + op[1] if op is not None else t.rsplit(".", 1)[-1]
                for ref in by_leaf.get(leaf, ()):
                    a = _arg_at(c, ref.param, ref.position)
                    if a is None:
                        continue
                    if ref.accessor is not None:
                        # the caller hands on a tensor parameter of its own: its callers' layout
                        if a.layout is None and _plain_entry(a, f):
                            out.add(a.entry.with_accessor(ref.accessor))
                    elif _unsettled(a):
                        out.add(a.entry)
                        out.update(e for e in a.also if e.accessor is None)
    return out


class _Returns:
    """returns-elsewhere: arguments resting on what a function of another module returns at one call
    take the class of that module's summary of it (FileFacts.returns) bound to the call's arguments."""

    def __init__(self, facts: list[FileFacts], modules: dict[str, FileFacts]):
        self.modules = modules
        self.summaries: dict[tuple[str, int | None], ReturnFacts] = {}
        for f in facts:
            for r in f.returns:
                self.summaries.setdefault((f"{f.module}.{r.function}" if f.module else r.function, r.item), r)

    def summary(self, ref: ReturnRef) -> ReturnFacts | None:
        name: str | None = ref.function
        for _ in range(_REEXPORTS):  # through re-exports: pkg.f where pkg/__init__.py imports f from .ops
            got = self.summaries.get((name, ref.item))
            if got is not None or name is None:
                return got
            name = reexport(name, self.modules)
        return None

    def resolve(self, arg: ArgFacts, depth: int = 0) -> ArgFacts:
        """``arg`` with the class its ReturnRef gives (VARYING / BUCKETED by structure, or the entry
        parameter a varying return would rest on), or ``arg`` itself."""
        ref = arg.returns
        if ref is None or depth > _RETURN_NESTING or (arg.provenance != UNKNOWN and not by_convention(arg)):
            return arg
        s = self.summary(ref)
        if s is None:
            return arg
        short = ref.function.rsplit(".", 1)[-1]
        what = f"{ref.text}: {'' if ref.item is None else f'element {ref.item} of '}what {short}() " \
            f"({ref.function}) returns with this call's arguments"
        found = []  # (class, evidence, rules, guess, by_name, entry the class may still be settled by)
        if s.provenance in (VARYING, BUCKETED):
            found.append((s.provenance, [what] + s.evidence, s.rules, s.guess, s.by_name, None))
        entry, bucketed, chain, chain_rules = None, False, [], []
        for dep in s.deps:
            a = _arg_at(ref, dep.param, dep.position)
            if a is None:
                continue
            a = self.resolve(a, depth + 1)
            if a.provenance in (VARYING, BUCKETED):
                cls = BUCKETED if BUCKETED in (a.provenance, dep.provenance) else VARYING
                found.append((cls, [what] + dep.evidence + [f"{dep.param} = {a.text} (line {ref.line})"] + a.evidence,
                              dep.rules + a.rules, a.guess, a.by_name, a.entry if a.by_name else None))
            elif a.provenance == UNKNOWN and a.entry is not None and entry is None:
                entry, bucketed = a.entry, dep.provenance == BUCKETED or a.bucketed
                chain = [what] + dep.evidence + [f"{dep.param} = {a.text} (line {ref.line})"] + a.evidence
                chain_rules = ["returns-elsewhere"] + dep.rules + a.rules
        if not found:
            if entry is not None and arg.entry is None and arg.provenance == UNKNOWN:
                # unknown here: the entry parameter the return varies with, for its callers elsewhere
                return replace(arg, entry=entry, bucketed=bucketed, evidence=list(dict.fromkeys(chain))[:_CHAIN],
                               rules=list(dict.fromkeys(chain_rules)))
            return arg
        cls, evidence, rules, guess, by_name, named_entry = max(found, key=lambda x: (_RANK[x[0]], not x[4]))
        if by_name and by_convention(arg):
            return arg  # a name against a name or a skipped empty case: nothing structural to overturn it with
        if named_entry is not None and arg.entry is None:
            # varying by the name of an entry parameter: what its callers elsewhere pass may settle it
            entry = named_entry
        if arg.by_name:
            # the steps that led here (callers in this module, assignments), in place of the name
            # that classed the value, their last step
            evidence = list(arg.evidence[:-1]) + list(evidence)
        return replace(arg, provenance=cls, entry=arg.entry or entry, bucketed=arg.bucketed or bucketed,
                       evidence=list(dict.fromkeys(evidence))[:_CHAIN], by_name=by_name, guess=guess, rules=list(dict.fromkeys(["returns-elsewhere"] + list(rules))), div16=False,
                       value_type=arg.value_type if arg.value_type not in ("unknown", "none") else s.value_type,
                       returns=None)

    def apply(self, facts: list[FileFacts]) -> None:
        if not self.summaries:
            return
        for f in facts:
            for la in f.launches:
                la.args = [self.resolve(a) for a in la.args]
            for c in f.calls:
                c.args = [self.resolve(a) for a in c.args]


def return_refs(facts: list[FileFacts]) -> set[tuple[str, int | None]]:
    """(function, element) of the calls of other modules' functions that unsettled arguments of
    value-specialized launch parameters rest on (their arguments' own such calls too): the runner
    reads the defining modules for what those return (returns-elsewhere)."""
    out: set[tuple[str, int | None]] = set()

    def add(a: ArgFacts, depth: int = 0) -> None:
        ref = a.returns
        if ref is None or depth > _RETURN_NESTING or (a.provenance != UNKNOWN and not by_convention(a)):
            return
        out.add((ref.function, ref.item))
        for x in ref.args:
            add(x, depth + 1)

    for b in build_program(facts, follow=False).launches:
        k = b.kernel
        skip = k.unspecialized() | set(k.heuristics)
        for name, arg in b.args.items():
            p = k.param(name)
            if p is not None and not p.pointer and name not in skip:
                add(arg)
    return out


def return_modules(ref: str, modules) -> list[tuple[str, str]]:
    """(module, function qualified in it) that may define the function ``ref`` names: the longest
    module prefixes first."""
    return [(m, ref[len(m) + 1:]) for m in module_prefixes(ref) if m in modules and "." not in ref[len(m) + 1:]]


def build_program(facts: list[FileFacts], *, varying_names=frozenset(), stable_names=frozenset(),
                  follow: bool = True, method_defs: dict[str, list[str]] | None = None) -> Program:
    index = _Index(facts)
    _Returns(facts, index.modules).apply(facts)
    program = Program(files=list(facts), kernels=index.kernels, all_kernels=index.all,
                      varying_names=frozenset(varying_names), stable_names=frozenset(stable_names))
    forwarders = {q for f in facts for q in f.forwarders}
    packs_at = {q: i for f in facts for q, i in f.forwarder_packs.items()}
    callers = None
    for f in facts:
        for la in f.launches:
            if la.via:
                if not forwarders:
                    continue
                callers = callers or _Callers([], index)
                if not any(callers.canonical(v) in forwarders for v in la.via):
                    continue  # the kernel handed to a function that is not known to launch it
                at = next((packs_at[c] for v in la.via if (c := callers.canonical(v)) in packs_at), None)
                items = next((items for i, items in la.packs if i == at), None)
                if items and not any(a.keyword is None for a in la.args):
                    # launch(k, grid, (x, n)) with def launch(kernel, grid, args): kernel[grid](*args)
                    la = replace(la, args=list(items) + la.args)
            # `fn = k1 if c else k2; fn[grid](...)` / if-elif chains: the launch may be any of them
            seen: set[int] = set()
            for target in la.targets:
                hit = index.resolve(target, near=f.path)
                if hit is None or id(hit[0]) in seen:
                    continue
                if la.kind == "spec" and not _spec_fits(la, hit[0]):
                    continue
                seen.add(id(hit[0]))
                program.launches.append(_bind(la, f, hit[0], hit[1]))
    _index_counts(program)
    if follow and any(f.calls for f in facts):
        _follow_entries(program, _Callers(facts, index, method_defs))
    return program


_AS_INDEX = {USE_ADDRESS: "offsets of an address", USE_LOOP_BOUND: "loop bounds",
             USE_COMPARE: "bounds of its program ids or offsets", INDEX_TERM: "terms of an index"}


def _index_counts(program: Program) -> None:
    """An element count resting on the element-count guess (``n = x.numel()``) of a tensor that the
    same launch, or another launch in the same function, passes to a kernel parameter whose loaded
    values the kernel uses as integers (ParamFacts.index_load): ``x`` is an index or metadata tensor
    (slots, lengths, request indices), one entry per token or request times a small width, not
    tokens times a model dim: rule index-count instead of element-count (and of count-times-dim)."""
    bound: dict[int, list] = {}
    for b in program.launches:
        bound.setdefault(id(b.launch), []).append(b)
    for b in program.launches:
        for name, arg in list(b.args.items()):
            if not arg.counts or "element-count" not in arg.rules:
                continue
            # this launch first, then the others of the file, in order
            hit = None
            for la in [b.launch] + [x for x in b.file.launches if x is not b.launch]:
                if la.function != b.launch.function:
                    continue
                for other in ([b] if la is b.launch else bound.get(id(la), ())):
                    hit = next(((other, p, a) for p, a in other.args.items()
                                if a.tensor_root in arg.counts and (q := other.kernel.param(p)) is not None
                                and q.index_load is not None), None)
                    if hit is not None:
                        break
                if hit is not None:
                    break
            if hit is None:
                continue
            other, pname, tensor = hit
            use = other.kernel.param(pname).index_load
            where = "" if other.launch is b.launch else f" at launch line {other.launch.line}"
            why = (f"element count of an index tensor: {other.kernel.name}{where} loads through {pname} and uses "
                   f"the values as {_AS_INDEX.get(use.kind, 'integers')} (line {use.line} `{use.context}`)")
            rules = [("index-count" if r == "element-count" else r) for r in arg.rules if r != "count-times-dim"]
            evidence = list(arg.evidence)
            head, _, said = evidence[-1].partition(": ") if evidence else ("", "", "")
            if said.startswith("element count of"):
                evidence[-1] = f"{head}: {why}"  # the count's own step (the innermost), which said "of an activation"
            else:
                evidence.append(f"{tensor.text}: {why}")
            b.args[name] = replace(arg, rules=rules, evidence=evidence)


def _silenced(codes: list[str] | None, code: str) -> bool:
    """Whether a ``# jitguard: ignore[...]`` comment with these codes (None: no comment on the line;
    []: every code) silences ``code``; a short code is a prefix (``JG00``)."""
    if codes is None:
        return False
    return not codes or code in codes or any(code.startswith(c) for c in codes if len(c) < 5)


def _suppressed(finding: Finding, by_path: dict[str, FileFacts], kernel_lines: dict[tuple[str, str], list[int]]) -> bool:
    """The finding's own line, or its kernel's decorator and def lines, carry an ignore comment for it."""
    def hit(path: str, line: int) -> bool:
        f = by_path.get(path)
        return f is not None and _silenced(f.suppressions.get(line), finding.code)

    if hit(finding.path, finding.line):
        return True
    kpath = (finding.details or {}).get("kernel_path", finding.path)
    lines = kernel_lines.get((kpath, finding.kernel))
    return lines is not None and any(hit(kpath, line) for line in lines)


def link(facts: list[FileFacts], *, varying_names=frozenset(), stable_names=frozenset(),
         method_defs: dict[str, list[str]] | None = None,
         suppressed: list[Finding] | None = None, counts: dict[str, int] | None = None) -> list[Finding]:
    """Every finding over the files, sorted, with inline suppressions applied. ``method_defs``: the
    files that define each method name whose calls through objects the runner recorded.
    ``suppressed``: if given, the findings that inline comments hid are appended to it (those on a
    kernel's lines, and those a comment on a launch line kept from being made). ``counts``: if given,
    ``counts["launches"]`` is set to the launch sites bound to a kernel of the files (a call written
    like a launch, ``subprocess.run(...)``, ``self.layers[i](x)``, that reaches none is not one)."""
    from jitguard.static.rules import RULES

    program = build_program(facts, varying_names=varying_names, stable_names=stable_names, method_defs=method_defs)
    if counts is not None:
        counts["launches"] = len({(b.file.path, b.launch.line, b.launch.column) for b in program.launches})
    by_path = {f.path: f for f in facts}
    kernel_lines: dict[tuple[str, str], list[int]] = {}
    for k, f in program.all_kernels:
        kernel_lines[(f.path, k.qualname)] = k.suppressed_lines
    launches = program.launches
    findings: list[Finding] = []
    # suppressions, in one place: a rule sees the launches not silenced for its code, and a finding
    # on a silenced line (its own, or its kernel's decorator / def) is dropped
    for code, rule in RULES.items():
        if rule.check is None:
            continue
        program.launches = [b for b in launches if not _silenced(b.file.suppressions.get(b.launch.line), code)]
        silenced_launches = len(program.launches) < len(launches)
        kept: list[Finding] = []
        try:
            for finding in rule.check(program):
                if not _suppressed(finding, by_path, kernel_lines):
                    kept.append(finding)
                elif suppressed is not None:
                    suppressed.append(finding)
            if suppressed is not None and silenced_launches:
                # what the silenced launches alone would have reported: counted, never listed
                seen = {(f.path, f.kernel, f.param) for f in kept}
                seen.update((f.path, f.kernel, f.param) for f in suppressed if f.code == code)
                program.launches = launches
                for finding in rule.check(program):
                    ident = (finding.path, finding.kernel, finding.param)
                    if ident not in seen:
                        seen.add(ident)
                        suppressed.append(finding)
        finally:
            program.launches = launches
        findings.extend(kept)
    findings.sort(key=Finding.sort_key)
    return findings
