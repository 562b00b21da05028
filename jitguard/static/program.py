"""The linked view of a scanned tree that rules look at: kernels by qualified name, and every launch
bound to its kernel with arguments mapped to parameters."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from jitguard.findings import Finding, Fix
from jitguard.static.exercise import exercise_caller
from jitguard.static.facts import ArgFacts, FileFacts, KernelFacts, LaunchFacts


@dataclass
class BoundLaunch:
    launch: LaunchFacts
    file: FileFacts  # where the launch is written
    kernel: KernelFacts
    kernel_file: FileFacts
    args: dict[str, ArgFacts]  # param name -> argument (only what could be mapped)
    options: list[str]  # launch-option keywords in written order (num_warps, num_stages, ...)

    @cached_property
    def exercise(self) -> bool:
        """Written in warm-up, test or benchmark code, of a kernel defined elsewhere (rules
        warmup-callers, test-callers): its arguments are sizes picked to exercise the kernel, not
        what serving passes. A kernel defined in such code is judged on its own launches."""
        return (exercise_caller(self.file.exercise, self.file.module, self.launch.function)
                and not exercise_caller(self.kernel_file.exercise, self.kernel_file.module, None))


@dataclass
class Program:
    files: list[FileFacts]
    kernels: dict[str, tuple[KernelFacts, FileFacts]] = field(default_factory=dict)
    # every kernel, also those whose qualified name another file already uses (two trees scanned
    # together, or a module name computed the same for two files)
    all_kernels: list[tuple[KernelFacts, FileFacts]] = field(default_factory=list)
    launches: list[BoundLaunch] = field(default_factory=list)
    varying_names: frozenset[str] = frozenset()
    stable_names: frozenset[str] = frozenset()

    def launches_of(self, qualname: str) -> list[BoundLaunch]:
        return [b for b in self.launches if b.kernel.qualname == qualname]

    def finding(
        self,
        code: str,
        kfile: FileFacts,
        kernel: KernelFacts,
        line: int,
        column: int,
        param: str | None,
        message: str,
        fix: Fix,
        details: dict[str, Any] | None = None,
        path: str | None = None,
        confidence: str = "high",
    ) -> Finding:
        d = {"kernel_path": kfile.path, "kernel_line": kernel.line, "decorator_line": kernel.decorator_line}
        d.update(details or {})
        return Finding(
            code=code,
            path=path or kfile.path,
            line=line,
            column=column,
            kernel=kernel.qualname,
            param=param,
            message=message,
            fix_safety=fix.applicability,
            source="static",
            confidence=confidence,  # type: ignore[arg-type]
            details=d,
            fix=fix,
        )
