"""Byte-level tests that decide which files are worth a LibCST parse.

A kernel is defined through Triton's ``jit`` (``@triton.jit``, ``from triton import jit as j``,
``triton.jit(fn)``, a ``@libentry()`` stack over ``@triton.jit``) or Gluon's (``@gluon.jit``, with
``gluon`` from ``triton.experimental`` or a package's re-export), so a file that defines one contains
the bytes ``triton`` or ``gluon``, and ``jit``: phase 1 parses only those. A file that launches a kernel defined
elsewhere names that kernel (``from m import k``, ``m.k[grid]``, ``self.k[grid]``) and holds a launch
(``...](``, ``.run(``, ``.warmup(``), or, importing it, binds it to its grid (``g = k[grid]``) or hands
it to a function (``launch(k, grid, n=n)``): phase 2 parses the remaining files whose bytes contain
both, the name as a whole word. Phase 3 (in the runner) parses modules that launch targets go through
(re-exports such as ``pkg/__init__.py`` doing ``from .ops import k``, aliases ``k2 = ops.k``) and the
modules of the functions kernels are handed to.
The tests over-approximate (a mention in a comment is enough), never under-approximate for code
that reaches a kernel by name at a launch-shaped call; without one, only the kernels a file imports
by name count (``import m`` then ``launch(m.k, ...)`` is not read).
"""
from __future__ import annotations

import hashlib
import re
from typing import Iterable


# Bump when the phase-2 test changes: memoized verdicts are keyed by it.
PREFILTER_VERSION = "6"
# Spaced forms ("k[grid] (x)", "k.run (x)"); the usual ones are found with plain byte search.
_LAUNCH_SPACED = (re.compile(rb"\]\s+\("), re.compile(rb"\.run\s+\("), re.compile(rb"\.warmup\s+\("))


def may_define_kernels(data: bytes) -> bool:
    """``triton`` (or Gluon's ``gluon``, re-exported by a package of the project) and ``jit``."""
    return (b"triton" in data or b"gluon" in data) and b"jit" in data


def may_launch(data: bytes) -> bool:
    """A subscript call (``k[grid](...)``) or a ``.run(`` / ``.warmup(`` call appears."""
    if b"](" in data or b".run(" in data or b".warmup(" in data:
        return True
    return any(p.search(data) is not None for p in _LAUNCH_SPACED)


# Deeper than this, the factored alternation's nested groups would hit the recursion limits of
# the regex compiler (a kernel named with 1,000 characters): such names are matched flat.
_MAX_TRIE_DEPTH = 64


def _trie_regex(words: Iterable[str]) -> str:
    """An alternation factored by common prefixes: fast for hundreds of names in ``re``. A chain
    of nodes with one child each is one literal (no group per character); names whose groups
    would nest deeper than ``_MAX_TRIE_DEPTH`` go in a flat alternation, longest first."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    deep: list[str] = []

    def build(node: dict, prefix: str, depth: int) -> str:
        alts = []
        optional = False
        for ch in sorted(node):
            if ch == "":
                optional = True
                continue
            literal, child = ch, node[ch]
            while len(child) == 1 and "" not in child:  # a chain: one literal
                (nxt, child), = child.items()
                literal += nxt
            if depth >= _MAX_TRIE_DEPTH:
                deep.extend(prefix + literal + rest for rest in _words(child))
                continue
            alts.append(re.escape(literal) + build(child, prefix + literal, depth + 1))
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if optional:
            body = "(?:" + body + ")?"
        return body

    factored = build(trie, "", 0)
    if not deep:
        return factored
    flat = "|".join(re.escape(w) for w in sorted(deep, key=lambda w: (-len(w), w)))
    return f"(?:{factored}|{flat})" if factored else f"(?:{flat})"


def _words(node: dict) -> list[str]:
    """Every word below ``node`` (iteratively: a chain may be thousands of characters long)."""
    out, stack = [], [("", node)]
    while stack:
        prefix, n = stack.pop()
        for ch, child in n.items():
            if ch == "":
                out.append(prefix)
            else:
                stack.append((prefix + ch, child))
    return out


# The bytes of an ASCII identifier, [A-Za-z0-9_]. Every other byte becomes a space: the words of a
# file are then exactly the runs a name must fill to match NameMatcher's pattern as a whole identifier.
WORD_BYTES = frozenset(c for c in range(256) if chr(c).isascii() and (chr(c).isalnum() or c == 95))
_WORD_BYTES = bytes(c if c in WORD_BYTES else 32 for c in range(256))


def words(data: bytes) -> set[bytes]:
    """The maximal runs of ``[A-Za-z0-9_]`` in ``data``."""
    return set(data.translate(_WORD_BYTES).split())


def after_keyword(data: bytes, at: re.Pattern[bytes], keyword: bytes) -> bool:
    r"""``at`` (``name[ \t]*\(``) matches right after ``keyword`` and blanks: ``b"def"`` finds what
    ``\bdef[ \t]+name[ \t]*\(`` does, ``b"."`` what ``\.[ \t]*name[ \t]*\(`` does. Searched from
    the name, which few places hold, not tried at every position (7x as fast on vLLM's files)."""
    for m in at.finditer(data):
        start = i = m.start()
        while i and data[i - 1] in b" \t":
            i -= 1
        j = i - len(keyword)
        if j < 0 or data[j:i] != keyword:
            continue
        if keyword == b"." or (i < start and (j == 0 or data[j - 1] not in WORD_BYTES)):
            return True
    return False


def import_statements(data: bytes) -> bytes:
    """The lines that hold ``import`` (through the closing parenthesis of ``from m import (``),
    joined: where a file's imported names are (byte searches, no regex over the whole file)."""
    parts = []
    i = data.find(b"import")
    while i >= 0:
        start = data.rfind(b"\n", 0, i) + 1
        end = data.find(b"\n", i)
        end = len(data) if end < 0 else end
        opened = data.find(b"(", i, end)
        if opened >= 0 and data.find(b")", opened, end) < 0:
            close = data.find(b")", opened)
            end = len(data) if close < 0 else close
        parts.append(data[start:end])
        i = data.find(b"import", end)
    return b" ".join(parts)


class WordIndex:
    """Which files hold a word: built once per scan (one pass over the bytes of every file), so that
    each later test of a set of names over the tree looks at the files naming one of them, not at
    every file (phases 2-4 tested the whole tree with a regex each: ~5 s of a cold vLLM scan). It
    keeps each file's set of words: a question intersects them with its few names, which costs
    less than making a word -> files table of every word (0.49 s against 0.61 s on vLLM)."""

    def __init__(self, files: Iterable[tuple[str, bytes]]) -> None:
        self.keys: list[str] = []
        self._words: list[set[bytes]] = []
        for key, data in files:
            self.keys.append(key)
            self._words.append(words(data))

    def names_in(self, names: Iterable[str]) -> dict[str, tuple[str, ...]] | None:
        """File -> the ``names`` it holds as words, sorted (files holding none left out); None when
        a name is not ASCII."""
        wanted = set(names)
        if not all(n.isascii() for n in wanted):
            return None
        encoded = {n.encode() for n in wanted}
        out: dict[str, tuple[str, ...]] = {}
        for key, held in zip(self.keys, self._words):
            hit = held.intersection(encoded)
            if hit:
                out[key] = tuple(sorted(w.decode() for w in hit))
        return out

    def naming(self, names: Iterable[str]) -> set[str] | None:
        """The files holding one of ``names`` as a word; None when a name is not ASCII (its bytes
        are not one word here: every file may hold it)."""
        wanted = list(names)
        if not all(n.isascii() for n in wanted):
            return None
        encoded = {n.encode() for n in wanted}
        return {key for key, held in zip(self.keys, self._words) if not held.isdisjoint(encoded)}


# Up to this many names, a substring search per name rules files out faster than a regex or an index.
FEW_NAMES = 16


class NameMatcher:
    """Does a file mention any of ``names`` as a whole identifier?"""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = sorted({n for n in names if n and n.isidentifier()})
        self.digest = hashlib.blake2b(
            "\0".join([PREFILTER_VERSION, *self.names]).encode(), digest_size=16
        ).hexdigest()
        self._few = [n.encode() for n in self.names] if len(self.names) <= FEW_NAMES else None
        self._bytes: frozenset[bytes] | None = None  # the names as bytes, made on first need
        if self.names:
            alternation = rb"(?:" + _trie_regex(self.names).encode() + rb")"
            if all(name.isascii() for name in self.names):
                # An ASCII identifier begins and ends with a word byte ([A-Za-z0-9_] in a bytes
                # pattern), so \b on each side is the whole-identifier test of the lookarounds
                # below, and re runs it 1.7x as fast (vLLM's 780 kernel names over its files).
                self._re: re.Pattern[bytes] | None = re.compile(rb"\b" + alternation + rb"\b")
            else:
                self._re = re.compile(rb"(?<![A-Za-z0-9_])" + alternation + rb"(?![A-Za-z0-9_])")
        else:
            self._re = None

    def __call__(self, data: bytes) -> bool:
        return self._re is not None and self._re.search(data) is not None

    def within(self, index: WordIndex) -> dict[str, "NameMatcher"] | None:
        """File of ``index`` -> a matcher of the names it holds as words, for the files any test
        here can match (each needs a whole-word mention of a name): on such a file it answers as
        this one does, with a pattern of a few names instead of all; None: test every file."""
        present = index.names_in(self.names)
        if present is None:
            return None
        matchers: dict[tuple[str, ...], NameMatcher] = {}
        out: dict[str, NameMatcher] = {}
        for d, ns in present.items():
            m = matchers.get(ns)
            if m is None:
                m = matchers[ns] = NameMatcher(ns)
            out[d] = m
        return out

    @property
    def few(self) -> bool:
        """Few names: a substring search per name rules a file out faster than any index."""
        return self._few is not None

    def may_match(self, data: bytes) -> bool:
        """False when no test here can match ``data`` (it holds none of the names at all)."""
        if self._few is not None:
            return any(n in data for n in self._few)
        return self._re is not None

    def calls_named(self, data: bytes, qualifiers: frozenset[bytes] | None = None) -> bool:
        """Calls one of the names as a function of another module: ``ops.name(`` with ``ops`` one
        of ``qualifiers`` (the modules' short names), or ``name(`` where the file also imports
        ``name`` (``from m import name``); not as a method of some object (``obj.name(``)."""
        if self._re is None:
            return False
        if self._few is not None and not any(n in data for n in self._few):
            return False  # a plain substring search per name is much faster than the regex
        imported: set[bytes] = set()
        called: set[bytes] = set()
        for m in self._re.finditer(data):
            start, end = m.span()
            name = m.group()
            if _CALL_AFTER.match(data, end):
                if start and data[start - 1:start] == b".":
                    q = _QUALIFIER.search(data, max(0, start - 80), start - 1)
                    if qualifiers is not None and q is not None and q.group(1) in qualifiers:
                        return True
                    continue
                called.add(name)
            else:
                line_start = data.rfind(b"\n", 0, start) + 1
                before = data[line_start:start]
                if _IMPORT_BEFORE.search(before) or (not before.strip() and _ALONE_AFTER.match(data, end)):
                    imported.add(name)
            if called & imported:
                return True
        return False

    def launches_named_kernel(self, data: bytes) -> bool:
        """Phase 2: holds a launch-shaped call and names a kernel where code can reach it:
        subscripted or ``.run``/``.warmup`` (``k[grid]``, ``m.k[grid]``, ``self.k.run``), imported
        (``from m import k``, ``k as j``, a line of a parenthesized import), or bound to another
        name (``j = m.k``, ``j = a if c else k``, ``return k``). With no launch-shaped call, a
        kernel imported here may still be launched from here: bound to its grid for a later call
        (``g = k[grid]`` then ``g(x, n)``), or handed to a function that launches it
        (``launch(k, grid, n=n)``).

        Each mention of a name is looked at in its context (the rest of its line before and
        after): linear in the file size, unlike one big alternation."""
        if self._re is None:
            return False
        if not may_launch(data):
            return bool(self.handed_imports(data, subscripted=True))
        for m in self._re.finditer(data):
            start, end = m.span()
            if _AFTER.match(data, end):
                return True
            line_start = data.rfind(b"\n", 0, start) + 1
            before = data[line_start:start]
            if _IMPORT_BEFORE.search(before) or _BIND_BEFORE.search(before):
                return True
            if not before.strip() and _ALONE_AFTER.match(data, end):
                return True  # "    k," on its own line: inside "from m import (...)"
        return False

    def handed_imports(self, data: bytes, subscripted: bool = False) -> frozenset[str]:
        """The names a file imports and then hands to a function (``launch(k, grid, n=n)``), or with
        ``subscripted`` also binds to a grid (``g = k[grid]``): kernels of another module that may be
        launched from here. Only the import statements are searched for the names (a small part of
        the file), then the file for the few names they import."""
        if self._re is None:
            return frozenset()
        if self._bytes is None:
            self._bytes = frozenset(n.encode() for n in self.names if n.isascii())
        held = words(import_statements(data)) & self._bytes
        if not held:
            return frozenset()
        few = NameMatcher(n.decode() for n in held)
        handed: set[bytes] = set()
        for m in few._re.finditer(data):
            start, end = m.span()
            line_start = data.rfind(b"\n", 0, start) + 1
            before = data[line_start:start]
            if _IMPORT_BEFORE.search(before) or (not before.strip() and _ALONE_AFTER.match(data, end)):
                continue
            if (subscripted and _SUBSCRIPT_AFTER.match(data, end) and not before.endswith(b".")) or (
                    _ARG_BEFORE.search(before) and _ARG_AFTER.match(data, end)):
                handed.add(m.group())
        return frozenset(n.decode() for n in handed)


_CALL_AFTER = re.compile(rb"\s*\(")
_QUALIFIER = re.compile(rb"(?<![A-Za-z0-9_.])([A-Za-z_][A-Za-z0-9_]*)$")
_AFTER = re.compile(rb"\s*(?:\[|\.\s*(?:run|warmup)\b|as\b)")
_SUBSCRIPT_AFTER = re.compile(rb"[ \t]*\[")
_ARG_BEFORE = re.compile(rb"[(,][ \t]*$")  # an argument of a call (or an item of a tuple)
_ARG_AFTER = re.compile(rb"[ \t]*[,)]")
_IMPORT_BEFORE = re.compile(rb"\bimport\b")
_BIND_BEFORE = re.compile(rb"(?:=|\belse|\bor|\band|\breturn)\s*(?:[A-Za-z_][\w.]*\.)?$")
_ALONE_AFTER = re.compile(rb"[ \t]*,?[ \t]*(?:#[^\n]*)?(?:\r?\n|$)")
