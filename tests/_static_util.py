"""Helpers for the static-analysis tests: extract + link sources given as strings."""
from __future__ import annotations

import random
import string

from jitguard.static.extract import extract_file
from jitguard.static.link import link


def scan(sources: dict[str, str], **names):
    """{module name: source} -> findings. Paths are module paths with .py."""
    facts = []
    for module, src in sources.items():
        path = module.replace(".", "/") + ".py"
        facts.append(extract_file(path, src, module, **names))
    return link(facts, **names)


def scan_one(src: str, module: str = "m", **names):
    return scan({module: src}, **names)


def pairs(findings, code=None):
    return {(f.code, f.kernel.rsplit(".", 1)[-1], f.param) for f in findings if code is None or f.code == code}


def rand_ident(rng: random.Random, prefix: str = "v") -> str:
    """A random identifier that no name pattern knows (so only structure can classify it)."""
    return prefix + "".join(rng.choice(string.ascii_lowercase) for _ in range(5)) + str(rng.randint(10, 99)) + "q"


def rand_names(rng: random.Random, *keys: str) -> dict[str, str]:
    """A distinct random identifier (``rand_ident``) for each of ``keys``: the braces of a template."""
    out: dict[str, str] = {}
    while len(set(out.values())) < len(keys):
        out = {key: rand_ident(rng) for key in keys}
    return out


# one kernel whose plain int {n} only bounds a mask: the provenance tests append launches to it
MASKED_KERNEL = """
import triton
import triton.language as tl

@triton.jit
def {k}(x_ptr, {n}, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < {n})
"""
