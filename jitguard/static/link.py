"""Facts of many files -> findings: resolve launches to kernels across modules, run every rule,
apply inline ``# jitguard: ignore[...]`` suppressions. Select/ignore filters are the runner's job."""
from __future__ import annotations

import os

from jitguard.findings import Finding
from jitguard.static.facts import FileFacts, KernelFacts
from jitguard.static.program import BoundLaunch, Program

NON_OPTIONS = {"grid", "warmup"}


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
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            mod = ".".join(parts[:cut])
            f = self.modules.get(mod)
            if f is None:
                continue
            head, rest = parts[cut], parts[cut + 1:]
            target = f.imports.get(head)
            if target is not None and target != name:
                return self.resolve(".".join([target] + rest), depth + 1, near)
            break
        return None


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


def build_program(facts: list[FileFacts], *, varying_names=frozenset(), stable_names=frozenset()) -> Program:
    index = _Index(facts)
    program = Program(files=list(facts), kernels=index.kernels, all_kernels=index.all,
                      varying_names=frozenset(varying_names), stable_names=frozenset(stable_names))
    for f in facts:
        for la in f.launches:
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
    return program


def _suppressed(finding: Finding, by_path: dict[str, FileFacts], kernel_lines: dict[tuple[str, str], list[int]]) -> bool:
    def hit(path: str, line: int) -> bool:
        f = by_path.get(path)
        if f is None or line not in f.suppressions:
            return False
        codes = f.suppressions[line]
        return not codes or finding.code in codes or any(finding.code.startswith(c) for c in codes if len(c) < 5)

    if hit(finding.path, finding.line):
        return True
    kpath = (finding.details or {}).get("kernel_path", finding.path)
    lines = kernel_lines.get((kpath, finding.kernel))
    if lines is not None and any(hit(kpath, line) for line in lines):
        return True
    return False


def link(facts: list[FileFacts], *, varying_names=frozenset(), stable_names=frozenset()) -> list[Finding]:
    """Every finding over the files, sorted, with inline suppressions applied."""
    from jitguard.static.rules import RULES

    program = build_program(facts, varying_names=varying_names, stable_names=stable_names)
    by_path = {f.path: f for f in facts}
    # launches on suppressed lines don't count
    program.launches = [
        b for b in program.launches
        if not (b.launch.line in b.file.suppressions and not b.file.suppressions[b.launch.line])
    ]
    kernel_lines: dict[tuple[str, str], list[int]] = {}
    for k, f in program.all_kernels:
        kernel_lines[(f.path, k.qualname)] = k.suppressed_lines
    findings: list[Finding] = []
    for code, rule in RULES.items():
        if rule.check is None:
            continue
        launches = program.launches
        program.launches = [
            b for b in launches
            if code not in b.file.suppressions.get(b.launch.line, [code + "x"])
        ]
        try:
            for finding in rule.check(program):
                if not _suppressed(finding, by_path, kernel_lines):
                    findings.append(finding)
        finally:
            program.launches = launches
    findings.sort(key=Finding.sort_key)
    return findings
