"""Byte-level tests that decide which files are worth a LibCST parse.

A kernel is defined through Triton's ``jit`` (``@triton.jit``, ``from triton import jit as j``,
``triton.jit(fn)``, a ``@libentry()`` stack over ``@triton.jit``), so a file that defines one contains
the bytes ``triton`` and ``jit``: phase 1 parses only those. A file that launches a kernel defined
elsewhere names that kernel (``from m import k``, ``m.k[grid]``, ``self.k[grid]``): phase 2 parses the
remaining files whose bytes contain, as a whole word, the name of a kernel that phase 1 found.
Both tests over-approximate (a mention in a comment is enough), never under-approximate for code
that reaches a kernel by name.
"""
from __future__ import annotations

import hashlib
import re
from typing import Iterable


def may_define_kernels(data: bytes) -> bool:
    return b"triton" in data and b"jit" in data


def _trie_regex(words: Iterable[str]) -> str:
    """An alternation factored by common prefixes: fast for hundreds of names in ``re``."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        alts = []
        optional = False
        for ch in sorted(node):
            if ch == "":
                optional = True
                continue
            alts.append(re.escape(ch) + build(node[ch]))
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if optional:
            body = "(?:" + body + ")?"
        return body

    return build(trie)


class NameMatcher:
    """Does a file mention any of ``names`` as a whole identifier?"""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = sorted({n for n in names if n and n.isidentifier()})
        self.digest = hashlib.blake2b(
            "\0".join(self.names).encode(), digest_size=16
        ).hexdigest()
        if self.names:
            body = _trie_regex(self.names)
            self._re: re.Pattern[bytes] | None = re.compile(
                rb"(?<![A-Za-z0-9_])" + body.encode() + rb"(?![A-Za-z0-9_])"
            )
        else:
            self._re = None

    def __call__(self, data: bytes) -> bool:
        return self._re is not None and self._re.search(data) is not None
