"""The one finding type shared by the static scan, the runtime watcher, the reports and the fixer.

Data flows one way: source or trace -> facts -> ``Finding`` -> (report renderers | fixes), so the
renderers in ``jitguard/report/`` and the codemod never care where a finding came from.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

FixSafety = Literal["safe", "unsafe", "manual"]
Source = Literal["static", "runtime"]
Confidence = Literal["high", "medium", "low"]
CONFIDENCE_LEVELS: tuple[Confidence, ...] = ("high", "medium", "low")  # most to least sure


@dataclass(frozen=True)
class Finding:
    code: str  # stable rule code, e.g. "JG001"
    path: str  # file the finding points at (posix, relative to the scan root where possible)
    line: int  # 1-based
    column: int  # 1-based
    kernel: str  # kernel qualified name, e.g. "pkg.mod.fused_kernel" or "Cls.kernel"
    param: str | None  # kernel parameter the finding is about (None for kernel-level findings)
    message: str  # one line, says what and the fix
    fix_safety: FixSafety
    source: Source = "static"
    # how sure the finding is, from the evidence it rests on (docs/provenance.md); a runtime finding
    # was observed, so it is "high"; the static analysis sets it per finding
    confidence: Confidence = "medium"
    details: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Finding":
        return cls(**data)

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code, self.param or "")


@dataclass(frozen=True)
class FileError:
    """A file that could not be analyzed, with a reason about the file (never a jitguard crash)."""

    path: str
    message: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
