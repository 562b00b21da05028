"""The one finding type shared by the static scan, the runtime watcher, the reports and the fixer.

Data flows one way: source or trace -> facts -> ``Finding`` -> (report renderers | fixes), so the
renderers in ``jitguard/report/`` and the codemod never care where a finding came from.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Literal

FixSafety = Literal["safe", "unsafe", "manual"]
EditKind = Literal["add_do_not_specialize", "remove_entry", "drop_constexpr"]
Source = Literal["static", "runtime"]
DNS = "do_not_specialize"
DNSOA = "do_not_specialize_on_alignment"
Confidence = Literal["high", "medium", "low"]
CONFIDENCE_LEVELS: tuple[Confidence, ...] = ("high", "medium", "low")  # most to least sure

_ATOMS = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def plain(value: Any) -> Any:
    """``dataclasses.asdict``'s result (dataclasses, lists, tuples, dicts of str, int, float, bool and
    None), without its deep copy of every atom: the cache writes each file's facts and each finding
    through it, and ``asdict`` cost more than parsing the file."""
    cls = value.__class__
    if cls in _ATOMS:
        return value
    # atoms inline: lists of strings (evidence, rules) are most of what the cache writes
    if cls is list:
        return [v if v.__class__ in _ATOMS else plain(v) for v in value]
    if cls is tuple:
        return tuple([v if v.__class__ in _ATOMS else plain(v) for v in value])
    if cls is dict:
        return {k if k.__class__ in _ATOMS else plain(k): v if v.__class__ in _ATOMS else plain(v)
                for k, v in value.items()}
    if not is_dataclass(cls):
        return copy.deepcopy(value)  # what asdict does with anything else
    return fields_dict(value)


def fields_dict(obj: Any, **given: Any) -> dict[str, Any]:
    """A dataclass's fields in order, as plain data; ``given``: fields already converted."""
    names = _FIELD_NAMES.get(obj.__class__)
    if names is None:
        names = _FIELD_NAMES[obj.__class__] = tuple(f.name for f in fields(obj))
    out = {}
    for n in names:
        v = given[n] if n in given else getattr(obj, n)
        out[n] = v if v.__class__ in _ATOMS or n in given else plain(v)
    return out


@dataclass(frozen=True)
class Edit:
    """One change to a kernel's decorator or signature."""

    kind: EditKind
    param: str | None = None  # add_do_not_specialize / drop_constexpr: the parameter
    entry: str | int | None = None  # remove_entry: the entry as written (a name or an index)
    option: str = DNS  # remove_entry: the list it is removed from (do_not_specialize[_on_alignment])

    def describe(self) -> str:
        if self.kind == "add_do_not_specialize":
            return f"add {self.param!r} to {DNS}"
        if self.kind == "drop_constexpr":
            return f"remove tl.constexpr from {self.param!r}"
        return f"remove {self.entry!r} from the {self.option} list"


@dataclass(frozen=True)
class Fix:
    """The fix a finding carries, decided by the rule that made the finding (``jitguard fix`` only
    applies it): the edits of one kernel, how safe they are, and why.

    ``edits`` is empty for a manual fix (the reason says what to do). The kernel is located by the
    position of its ``def`` (``path``, ``line``) and, for the codemod, the line of its jit decorator
    or ``k = triton.jit(f)`` statement (``jit_line``); ``function`` is the def's name, checked there
    too. ``digest`` is the content digest of the file the fix was decided on: a file changed since
    is not edited.
    """

    applicability: FixSafety
    reason: str
    edits: tuple[Edit, ...] = ()
    path: str | None = None
    line: int | None = None
    jit_line: int | None = None
    function: str | None = None
    digest: str | None = None

    def describe(self) -> str:
        return "; ".join(e.describe() for e in self.edits) or "no automatic edit"

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Fix | None":
        if not isinstance(data, dict):
            return None
        fields = dict(data)
        fields["edits"] = tuple(Edit(**e) for e in fields.get("edits") or ())
        return cls(**fields)


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
    # the fix, decided where the finding is made (its applicability is ``fix_safety``)
    fix: Fix | None = field(default=None, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Finding":
        fields = dict(data)
        fields["fix"] = Fix.from_dict(fields.get("fix"))
        return cls(**fields)

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code, self.param or "")


@dataclass(frozen=True)
class FileError:
    """A file that could not be analyzed, with a reason about the file (never a jitguard crash)."""

    path: str
    message: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return plain(self)
