"""The fix a finding observed at run time carries: the same plan the scan's rule attaches, for the
kernel the trace names, found in the kernel's file by its name and its ``def`` line both.

A trace is input from elsewhere (another checkout, an edited file): where the file's kernel at that
line is not the one the trace names, the fix edits nothing and says why.
"""
from __future__ import annotations

from jitguard.findings import Edit, Fix
from jitguard.static.cache import content_digest
from jitguard.static.facts import FileFacts, KernelFacts

_CHANGES_WITHOUT_EDIT = {"type", "alignment"}  # an int crossing 2**31, a pointer's alignment


def _short(kernel: str) -> str:
    """``pkg.mod.Cls.k`` / ``mod.outer.<locals>.k`` -> ``k`` (the def's name)."""
    return kernel.rsplit(".", 1)[-1]


class TraceFixes:
    """Plans for the findings of one trace; each kernel file is read and analyzed once."""

    def __init__(self) -> None:
        self._files: dict[str, FileFacts | str] = {}

    def _facts(self, path: str) -> FileFacts | str:
        """The file's facts, or why there are none."""
        if path not in self._files:
            from jitguard.static.errors import SourceError
            from jitguard.static.extract import extract_file

            try:
                with open(path, "rb") as fh:
                    data = fh.read()
                facts = extract_file(path, data, "", calls_of=frozenset())
                facts.digest = content_digest(data)
                self._files[path] = facts
            except OSError as exc:
                self._files[path] = f"cannot read {path}: {exc.strerror or exc}"
            except SourceError as exc:
                self._files[path] = f"{path} does not parse: {exc}"
        return self._files[path]

    def kernel(self, kernel: str, path: str | None, line: int | None) -> tuple[FileFacts, KernelFacts] | tuple[str, bool]:
        """The kernel the trace names (by name and def line both); else (why not, whether another
        kernel is defined at that line)."""
        if not path or not line:
            return f"the trace does not say where {kernel} is defined", False
        facts = self._facts(path)
        if isinstance(facts, str):
            return facts, False
        at = [k for k in facts.kernels if k.line == line]
        name = _short(kernel)
        hit = next((k for k in at if name in (k.function, k.name)), None)
        if hit is not None:
            return facts, hit
        if at:
            return (f"the trace names kernel {name!r} at line {line}, but the kernel defined there is "
                    f"{at[0].function!r} (the file changed since the trace, or the trace is from another "
                    f"checkout); not edited"), True
        return (f"no jit kernel {name!r} is defined with a decorator or a `k = triton.jit(f)` at line {line} "
                f"of {path}"), False

    def fix(self, code: str, kernel: str, path: str | None, line: int | None, param: str | None,
            changes: set[str], message: str) -> Fix:
        """The fix of a runtime finding: the rule's own for JG001 / JG002 on the kernel as its file
        reads now; the message, for a human, for everything else."""
        from jitguard.static.rules import jg001, jg002

        rule = {"JG001": jg001, "JG002": jg002}.get(code)
        if rule is None or param is None or (code == "JG001" and changes & _CHANGES_WITHOUT_EDIT
                                             and "value_class" not in changes):
            return Fix("manual", message, path=path, line=line, function=_short(kernel))
        found = self.kernel(kernel, path, line)
        if isinstance(found[0], str):
            why, other = found
            if other:  # never edit the other kernel
                return Fix("manual", why, path=path, line=line, function=_short(kernel))
            # what the observation calls for, unchecked against the source: never applied (no
            # digest of a source it was decided on), but the finding says what the fix would be
            edits = (Edit("add_do_not_specialize", param),) if code == "JG001" else \
                (Edit("drop_constexpr", param), Edit("add_do_not_specialize", param))
            return Fix("safe" if code == "JG001" else "unsafe",
                       f"{why}: the uses of {param!r} could not be checked; not edited",
                       edits, path=path, line=line, function=_short(kernel))
        facts, k = found
        p = k.param(param)
        if p is None:
            return Fix("manual", f"{k.function} has no parameter {param!r} in {path} as it reads now; not edited",
                       path=path, line=line, function=k.function)
        return rule.fix_for(facts, k, p)
