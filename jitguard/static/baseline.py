"""Baselines: today's findings recorded in a file, so that a scan reports only the new ones.

An entry is keyed by what a finding is about, never by where it sits: the file (relative to the
baseline file's directory, so the scan may run from anywhere), the kernel's qualified name, the
parameter, the code, and the finding's evidence with line numbers and whitespace taken out. Lines
added above a kernel, or code elsewhere reformatted, leave every key as it was; a change to how the
value is computed (the evidence) makes the finding new again. A finding whose launches include the
one an entry was recorded from still matches it when another launch now comes first. Several
findings with one key (two launches of one kernel passing the same options) are one entry with a
``count``.

An entry that matches no finding any more is *stale*: the finding was fixed, or its code changed
enough to be a new finding. ``jitguard scan --write-baseline FILE`` rewrites the file without them.

File format (JSON, sorted, one entry per key)::

    {"schema": "jitguard.baseline", "version": 1, "jitguard_version": "0.1.0",
     "entries": [{"path": "pkg/ops.py", "kernel": "pkg.ops.k", "param": "n", "code": "JG001",
                  "evidence": ["n = x.shape[0]: leading (token/batch) dimension of x"],
                  "count": 1}]}
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from jitguard.findings import Finding

SCHEMA = "jitguard.baseline"
VERSION = 1

# Where a piece of evidence names a line: "(line 40)", "line 40", "ops.py:88" (the file stays).
_PAREN_LINE = re.compile(r"\s*\((?:at )?lines? \d+(?:-\d+)?\)")
_LINE = re.compile(r"\b(lines?) \d+(?:-\d+)?\b")
_PATH_LINE = re.compile(r"(\.pyi?):\d+(?::\d+)?\b")
# The details that say what a finding rests on, besides its evidence, for rules without one.
_DETAIL_KEYS = ("option", "entry", "options", "reference_options")
# A file named in evidence ("called in pkg.mod.f (src/pkg/mod.py:88)") is written relative to where
# the scan ran: only its name takes part in the key.
_PATH_DIRS = re.compile(r"(?<![\w.])(?:[\w.+-]+/)+(?=[\w.+-]+\.pyi?\b)")


class BaselineError(Exception):
    """The baseline file can't be read or isn't a jitguard baseline (a usage error, exit 2)."""


def readable_evidence(text: str) -> str:
    """One piece of evidence without line numbers, whitespace collapsed (what the file stores)."""
    text = _PAREN_LINE.sub("", text)
    text = _LINE.sub(r"\1", text)
    text = _PATH_LINE.sub(r"\1", text)
    return " ".join(text.split())


def _canonical(text: str) -> str:
    """What two pieces of evidence are compared by: no whitespace at all, and no trailing comma
    before a closing bracket (a formatter's choice)."""
    text = _PATH_DIRS.sub("", re.sub(r"\s+", "", readable_evidence(text)))
    return re.sub(r",([)\]}])", r"\1", text)


def evidence_of(finding: Finding) -> list[str]:
    """The finding's evidence, line numbers out: its provenance chain where it has one, else the
    do_not_specialize entry or launch options it is about, else its message."""
    details = finding.details or {}
    out: list[str] = []
    evidence = details.get("evidence")
    if isinstance(evidence, list):
        out.extend(readable_evidence(e) for e in evidence if isinstance(e, str))
    for key in _DETAIL_KEYS:
        if key in details:
            out.append(f"{key}={json.dumps(details[key], sort_keys=True)}")
    if not out:
        out.append(readable_evidence(finding.message))
    return out


def _launch_evidence(finding: Finding) -> list[list[str]]:
    """The evidence of each launch the finding names (a finding's own evidence is its first
    launch's): an entry recorded from one launch still matches when another launch comes first."""
    out = []
    for rec in (finding.details or {}).get("launches") or []:
        ev = rec.get("evidence") if isinstance(rec, dict) else None
        if isinstance(ev, list) and ev and all(isinstance(e, str) for e in ev):
            out.append([readable_evidence(e) for e in ev])
    return out


def _relative(path: str, base_dir: str) -> str:
    """``path`` (absolute, or relative to the current directory) relative to ``base_dir``, posix;
    links resolved, so that a tree reached through a symlinked directory keeps its keys."""
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(base_dir))
    return rel.replace(os.sep, "/")


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the baseline file's directory, posix
    kernel: str
    param: str | None
    code: str
    evidence: tuple[str, ...]
    count: int = 1

    @property
    def key(self) -> tuple:
        return (self.path, self.kernel, self.param or "", self.code,
                tuple(_canonical(e) for e in self.evidence))

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kernel": self.kernel, "param": self.param, "code": self.code,
                "evidence": list(self.evidence), "count": self.count}

    def describe(self) -> str:
        what = f"{self.kernel}.{self.param}" if self.param else self.kernel
        times = f" (x{self.count})" if self.count > 1 else ""
        return f"{self.path}: {self.code} {what}{times}"


def entry_of(finding: Finding, base_dir: str) -> Entry:
    return Entry(_relative(finding.path, base_dir), finding.kernel, finding.param, finding.code,
                 tuple(evidence_of(finding)))


def _keys(finding: Finding, base_dir: str) -> list[tuple]:
    """The keys a finding answers to, best first: its own, then one per launch it names."""
    e = entry_of(finding, base_dir)
    keys = [e.key]
    for ev in _launch_evidence(finding):
        k = Entry(e.path, e.kernel, e.param, e.code, tuple(ev)).key
        if k not in keys:
            keys.append(k)
    return keys


@dataclass
class Baseline:
    path: str  # the file
    entries: list[Entry] = field(default_factory=list)

    @property
    def base_dir(self) -> str:
        return os.path.dirname(os.path.realpath(self.path))

    @classmethod
    def from_findings(cls, path: str, findings: Iterable[Finding]) -> "Baseline":
        base = os.path.dirname(os.path.realpath(path))
        counts: Counter = Counter()
        first: dict[tuple, Entry] = {}
        for f in findings:
            e = entry_of(f, base)
            counts[e.key] += 1
            first.setdefault(e.key, e)
        entries = [Entry(e.path, e.kernel, e.param, e.code, e.evidence, counts[k])
                   for k, e in first.items()]
        entries.sort(key=lambda e: (e.path, e.kernel, e.param or "", e.code, e.evidence))
        return cls(path, entries)

    def to_json(self) -> str:
        import jitguard

        doc = {"schema": SCHEMA, "version": VERSION, "jitguard_version": jitguard.__version__,
               "entries": [e.to_dict() for e in self.entries]}
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"

    def write(self) -> None:
        from jitguard.atomic_write import write_text_atomic

        write_text_atomic(self.path, self.to_json())


def load(path: str) -> Baseline:
    """Read a baseline file; ``BaselineError`` with a one-line reason when it isn't one."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such file (write one with --write-baseline {path})") from None
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise BaselineError(f"{path}: not a jitguard baseline (no \"schema\": \"{SCHEMA}\")")
    if doc.get("version") != VERSION:
        raise BaselineError(f"{path}: baseline version {doc.get('version')!r}; this jitguard reads "
                            f"version {VERSION} (rewrite it with --write-baseline)")
    entries = []
    for i, raw in enumerate(doc.get("entries", [])):
        try:
            evidence = raw["evidence"]
            if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
                raise TypeError("evidence must be a list of strings")
            count = raw.get("count", 1)
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise TypeError("count must be a positive integer")
            param = raw.get("param")
            if param is not None and not isinstance(param, str):
                raise TypeError("param must be a string or null")
            if not all(isinstance(raw[k], str) for k in ("path", "kernel", "code")):
                raise TypeError("path, kernel and code must be strings")
            entries.append(Entry(raw["path"], raw["kernel"], param, raw["code"], tuple(evidence), count))
        except (KeyError, TypeError) as exc:
            raise BaselineError(f"{path}: entry {i}: {exc}") from None
    return Baseline(path, entries)


@dataclass
class Applied:
    """What a baseline did to a scan's findings."""

    new: list[Finding]  # findings not in the baseline (what is reported)
    baselined: int  # findings the baseline matched (not reported)
    stale: list[Entry]  # entries (with their unmatched count) that matched nothing


def _under(path: str, roots: Sequence[str]) -> bool:
    for root in roots:
        if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def apply(baseline: Baseline, findings: Sequence[Finding], *, scanned: Sequence[str] = (),
          enabled=lambda code: True) -> Applied:
    """Drop the findings the baseline holds. An entry counts as stale only where this scan could
    have found it again: its file lies under one of the ``scanned`` paths (all, when empty) and its
    code is ``enabled`` (a scan with --select JG001 says nothing about JG002 entries)."""
    base = baseline.base_dir
    left: Counter = Counter()
    by_key: dict[tuple, Entry] = {}
    for e in baseline.entries:
        left[e.key] += e.count
        by_key.setdefault(e.key, e)
    new: list[Finding] = []
    matched = 0
    keyed = [(f, _keys(f, base)) for f in findings]
    unmatched = []
    for f, keys in keyed:  # own evidence first, so that an alternative never takes another's entry
        if left[keys[0]] > 0:
            left[keys[0]] -= 1
            matched += 1
        else:
            unmatched.append((f, keys))
    taken = set()
    for f, keys in unmatched:
        k = next((k for k in keys[1:] if left[k] > 0), None)
        if k is None:
            continue
        left[k] -= 1
        matched += 1
        taken.add(id(f))
    new = [f for f, _ in unmatched if id(f) not in taken]
    order = {id(f): i for i, f in enumerate(findings)}
    new.sort(key=lambda f: order[id(f)])
    roots = [os.path.realpath(p) for p in scanned]
    stale = []
    for k, e in by_key.items():
        if left[k] <= 0 or not enabled(e.code):
            continue
        if roots and not _under(os.path.normpath(os.path.join(base, e.path)), roots):
            continue
        stale.append(Entry(e.path, e.kernel, e.param, e.code, e.evidence, left[k]))
    return Applied(new, matched, stale)
