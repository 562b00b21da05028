"""The tree's word index answers as the regex tests do: on every file, the matcher of the names the
file holds as words says what the matcher of all names says, and a file the index rules out is one
no test can match (random names and files: mentions as calls, imports, methods, inside longer
words, in strings)."""
from __future__ import annotations

import os
import random

import pytest

from jitguard.static import prefilter

RNG = random.Random(os.urandom(8))


def _name(rng: random.Random) -> str:
    return rng.choice("abcdefgh_") + "".join(rng.choice("abcdefgh0123_") for _ in range(rng.randrange(0, 4)))


def _file(rng: random.Random, names: list[str]) -> bytes:
    parts = []
    for _ in range(rng.randrange(0, 12)):
        n = rng.choice(names) if rng.random() < 0.7 else _name(rng)
        parts.append(rng.choice([
            f"{n}(x)\n", f"from m import {n}\n", f"    {n},\n", f"ops.{n}(y)\n", f"obj.{n} (z)\n",
            f"x{n}(1)\n", f"{n}_tail = 1\n", f"'{n}'\n", f"{n}[grid](a)\n", f"k = {n}\n", "import os\n",
            f"# {n}\n", f"é{n}(2)\n",
        ]))
    return "".join(parts).encode()


@pytest.mark.parametrize("n_names", [3, 40])  # a substring search per name, and the index
def test_the_index_answers_as_the_regex_tests(n_names):
    seed = RNG.randrange(2**32)
    rng = random.Random(seed)
    pool = sorted({_name(rng) for _ in range(3 * n_names)})
    names = rng.sample(pool, min(n_names, len(pool)))
    files = {f"f{i}.py": _file(rng, pool) for i in range(300)}
    full = prefilter.NameMatcher(names)
    quals = frozenset({b"ops", b"m"})
    per_file = full.within(prefilter.WordIndex(files.items()))
    assert per_file is not None
    seen = 0
    for d, data in files.items():
        sub = per_file.get(d)
        if sub is None:  # ruled out: nothing may match
            assert not full(data) and not full.calls_named(data, quals), (seed, d)
            assert not full.launches_named_kernel(data), (seed, d)
            continue
        seen += 1
        assert sub.names and set(sub.names) <= set(full.names)
        assert sub(data) == full(data), (seed, d)
        assert sub.calls_named(data, quals) == full.calls_named(data, quals), (seed, d)
        assert sub.launches_named_kernel(data) == full.launches_named_kernel(data), (seed, d)
    assert 0 < seen < len(files)


def test_a_name_that_is_not_ascii_is_looked_for_in_every_file():
    files = {"a.py": "kérnel(x)\n".encode(), "b.py": b"other(x)\n"}
    index = prefilter.WordIndex(files.items())
    assert prefilter.NameMatcher(["kérnel", "other"]).within(index) is None
    assert prefilter.NameMatcher(["kérnel"])(files["a.py"])
    assert index.naming(["other"]) == {"b.py"} and index.naming(["kérnel"]) is None
