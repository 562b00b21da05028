"""Helpers shared by the rule modules (not a rule)."""
from __future__ import annotations

import re

from jitguard.findings import Edit, Fix, FixSafety
from jitguard.static.facts import BUCKETED, VARYING, ArgFacts, FileFacts, KernelFacts
from jitguard.static.program import BoundLaunch, Program
from jitguard.static.provenance import strong_stable
from jitguard.static.provenance.rules import RULES
from jitguard.static.provenance.rules import confidence as chain_confidence


def kernel_fix(kfile: FileFacts, k: KernelFacts, applicability: FixSafety, reason: str,
               edits: tuple[Edit, ...] = ()) -> Fix:
    """A fix of kernel ``k``, located by its def and jit lines in ``kfile`` as the scan read it."""
    return Fix(applicability, reason, tuple(edits), path=kfile.path, line=k.line, jit_line=k.decorator_line,
               function=k.function, digest=kfile.digest or None)


def manual(kfile: FileFacts, k: KernelFacts, reason: str) -> Fix:
    """A fix for a human: nothing to edit, the reason says what to do."""
    return kernel_fix(kfile, k, "manual", reason)


def where_used(uses) -> str:
    """'line 12 `mask = offs < n`, line 14 ...' for a few ParamUse."""
    parts = [f"line {u.line}" + (f" `{u.context}`" if u.context else "") for u in uses[:3]]
    more = f" and {len(uses) - 3} more" if len(uses) > 3 else ""
    return ", ".join(parts) + more


def where(b: BoundLaunch, kernel_path: str) -> str:
    """'launch line 88' in the kernel's file, 'pkg/ops.py:88' elsewhere."""
    if b.launch.kind == "spec":  # a launcher returning grid and keyword arguments
        at = f"line {b.launch.line}" if b.file.path == kernel_path else f"{b.file.path}:{b.launch.line}"
        return f"launcher {b.launch.callee} {at}"
    if b.file.path == kernel_path:
        return f"launch line {b.launch.line}"
    return f"{b.file.path}:{b.launch.line}"


def origin(arg: ArgFacts) -> str:
    """Where the value comes from, in a few words: the innermost evidence's expression."""
    if not arg.evidence:
        return arg.text
    head = arg.evidence[-1].split(": ", 1)[0]
    head = re.sub(r" \(line \d+\)$", "", head)
    if " = " in head:
        head = head.split(" = ", 1)[1]
    return head


def source_of(arg: ArgFacts, b: BoundLaunch, kernel_path: str) -> str:
    """'x.shape[0] at launch line 88' or 'num_tokens at launch line 88, from x.numel()'."""
    src = origin(arg)
    at = where(b, kernel_path)
    if src == arg.text or src in arg.text:
        return f"{arg.text} at {at}"
    return f"{arg.text} at {at}, from {src}"


def few_values(arg: ArgFacts) -> str | None:
    """How a value that takes a few values per process (a few-variants rule, provenance/rules.py)
    takes them, for a message; None for a per-call or a bucketed per-call value."""
    if arg.provenance != BUCKETED or not any(r in RULES and RULES[r].few_variants for r in arg.rules):
        return None
    if any(r in RULES and RULES[r].guard_bound for r in arg.rules):
        return "takes a few values (bounded by a guard before the launch)"
    return "takes the same few values each call, a few variants per process each compiled on first use"


def one_class(arg: ArgFacts) -> bool:
    """The value's class is decided by a step that leaves several values of one value class (a
    ``one_class`` rule, provenance/rules.py): one compile as a plain int, like a bucket."""
    return bool(arg.rules) and arg.rules[0] in RULES and RULES[arg.rules[0]].one_class


def varying_hits(program: Program, accept, provenances=(VARYING,)) -> dict[tuple[int, str], list[tuple[BoundLaunch, ArgFacts]]]:
    """(kernel qualname, param) -> launches passing a VARYING (or other listed class) value, for
    params ``accept(k, p, arg)``."""
    out: dict[tuple[str, str], list[tuple[BoundLaunch, ArgFacts]]] = {}
    for b in program.launches:
        if b.launch.kind == "warmup":
            continue  # kernel.warmup(...) compiles ahead on purpose: its varying args enumerate variants
        if b.exercise:
            continue  # a test's, a benchmark's or a warm-up's launch of a kernel defined elsewhere
        k = b.kernel
        for name, arg in b.args.items():
            p = k.param(name)
            if p is None or arg.provenance not in provenances:
                continue
            if arg.guess and "stride" not in p.name.lower() and strong_stable(p.name, program.varying_names, program.stable_names):
                continue  # the kernel's own parameter name (max_num_reqs, num_experts) outweighs a guess
            if not accept(k, p, arg):
                continue
            out.setdefault((id(k), name), []).append((b, arg))
    return out


_LEVEL = {"high": 0, "medium": 1, "low": 2}


def arg_confidence(arg: ArgFacts) -> str:
    """How sure the class of one launch argument is, from the inference rules its chain cites."""
    return chain_confidence(arg.rules, arg.by_name)


def most_sure(hits: list[tuple[BoundLaunch, ArgFacts]]) -> list[tuple[BoundLaunch, ArgFacts]]:
    """The hits with the most sure first (stable otherwise): its argument speaks for the finding."""
    return sorted(hits, key=lambda h: _LEVEL[arg_confidence(h[1])])


def launch_records(hits, kernel_path: str) -> list[dict]:
    return [
        {
            "path": b.file.path,
            "line": b.launch.line,
            "column": b.launch.column,
            "arg": a.text,
            "provenance": a.provenance,
            "value_type": a.value_type,
            "evidence": list(a.evidence),
            "rules": list(a.rules),
            "confidence": arg_confidence(a),
        }
        for b, a in hits
    ]


def uses_record(param) -> list[dict]:
    return [u.to_dict() for u in param.uses]


def constexpr_spelling(p) -> str:
    """A constexpr parameter's annotation as written: ``gl.constexpr`` in a Gluon kernel,
    ``tl.constexpr`` (or an alias) elsewhere; ``tl.constexpr`` when it can't be told."""
    text = p.annotation_text
    return text if text and text.endswith("constexpr") else "tl.constexpr"
