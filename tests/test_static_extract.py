"""extract_file on odd and bad input: it never crashes (a SourceError is about the file), facts
round-trip through JSON, and suppressions are read from comments."""
from __future__ import annotations

import json
import pathlib
import random
import sys

import pytest

from jitguard.static.errors import SourceError
from jitguard.static.extract import extract_file, suppressions
from jitguard.static.facts import FileFacts
from jitguard.static.link import link

ROOT = pathlib.Path(__file__).resolve().parents[1]

ODD = '''
import triton, functools
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 0.0, mask=tl.arange(0, BLOCK) < n)

def deco(*a, **kw):
    return lambda f: f

@deco(1, key=lambda z: z)
@(lambda f: f)
@functools.partial(deco, 2)
def weird(*args, n=None, **kwargs):
    match args:
        case [int(m), *rest] if (q := m * 2) > 0:
            k[(1,)](args[0], q, BLOCK=16)
        case {"a": aa, **others}:
            k[(1,)](aa, *others, BLOCK=16)
        case Point(x=px) | [px]:
            k[lambda meta: (1,)](px, len(rest), **kwargs)
        case _:
            pass
    async def inner():
        async with deco() as (c, d):
            await c
        async for e in d:
            yield e
    k.run(*args, grid=(1,), warmup=False)
    k.warmup(**kwargs)
    [k[(i,)](i, i, BLOCK=16) for i in range(3)]
    global G
    G = (yield)
    return f"{n!r:>{10}}"

class C(metaclass=type):
    kern = k
    def m(self, x):
        self.kern[(1,)](x, x.shape[0], BLOCK=16)
        (self.kern)[(1,)](x, 1, BLOCK=16)
        self.missing[(1,)](x)
        del x
        try:
            pass
        except* ValueError as eg:
            raise eg from None
'''


def test_odd_syntax_is_analyzed_without_crash():
    facts = extract_file("odd.py", ODD, "odd")
    assert [kf.name for kf in facts.kernels] == ["k"]
    assert facts.launches, "launches inside match cases, comprehensions and methods are found"
    findings = link([facts])
    assert any(f.code == "JG001" and f.param == "n" for f in findings)
    json.dumps(facts.to_dict())


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 695 syntax needs Python 3.12")
def test_pep695_syntax():
    src = "import triton\ntype Alias = int\ndef f[T](x: T) -> T:\n    return x\nclass C[T]:\n    pass\n"
    assert extract_file("p.py", src, "p").kernels == []


@pytest.mark.parametrize(
    "data,needle",
    [
        (b"def f(:\n    pass\n", "syntax error"),
        (b"x = '\xff\xfe'\n", "UTF-8"),
        (b"x = 1\x00\n", ""),
        (b"# -*- coding: nope-codec -*-\nx = '\xe9'\n", "encoding"),
    ],
)
def test_bad_files_raise_source_error(data, needle):
    with pytest.raises(SourceError) as err:
        extract_file("bad.py", data, "bad")
    assert needle in str(err.value)


def test_declared_encoding_and_bom_are_honoured():
    latin = "# -*- coding: latin-1 -*-\nimport triton\n@triton.jit\ndef k(x):\n    s = 'é'\n".encode("latin-1")
    assert [k.name for k in extract_file("l.py", latin, "l").kernels] == ["k"]
    bom = b"\xef\xbb\xbfimport triton\n@triton.jit\ndef k(x):\n    pass\n"
    assert [k.name for k in extract_file("b.py", bom, "b").kernels] == ["k"]


def test_deeply_nested_expression_is_a_source_error_or_facts():
    src = "x = " + "(" * 2000 + "1" + ")" * 2000 + "\n"
    try:
        extract_file("deep.py", src, "deep")
    except SourceError:
        pass


def test_mutated_fixtures_never_crash():
    """Delete or duplicate random lines of every fixture: SourceError or facts, never anything else."""
    rng = random.Random()
    files = sorted((ROOT / "fixtures" / "lint").rglob("*.py"))
    for _ in range(60):
        path = rng.choice(files)
        lines = path.read_text().splitlines(keepends=True)
        for _ in range(rng.randint(1, 4)):
            if not lines:  # a short file (a package's __init__.py) deleted whole
                break
            i = rng.randrange(len(lines))
            if rng.random() < 0.5:
                del lines[i]
            else:
                lines.insert(i, lines[rng.randrange(len(lines))])
        try:
            facts = extract_file(path.name, "".join(lines), "m")
        except SourceError:
            continue
        link([facts])


def test_facts_round_trip_through_json():
    facts = []
    for path in sorted((ROOT / "fixtures" / "lint").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        facts.append(extract_file(rel, path.read_bytes(), rel[:-3].replace("/", ".")))
    again = [FileFacts.from_dict(json.loads(json.dumps(f.to_dict()))) for f in facts]
    assert [f.to_dict() for f in again] == [f.to_dict() for f in facts]
    assert [x.to_dict() for x in link(again)] == [x.to_dict() for x in link(facts)]


def test_facts_to_dict_keeps_every_field_as_asdict_does():
    # to_dict skips asdict's deep copies; what it writes must be what asdict would
    import dataclasses

    seen = 0
    for path in sorted((ROOT / "fixtures" / "lint").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        f = extract_file(rel, path.read_bytes(), rel[:-3].replace("/", "."), calls_of=None)
        data = f.to_dict()
        for key in ("kernels", "launches", "calls"):
            assert data[key] == [dataclasses.asdict(x) for x in getattr(f, key)]
            seen += len(data[key])
    assert seen > 50

    rng = random.Random()
    line = rng.randint(1, 5)
    text = "\n" * (line - 1) + "x = 1  # jitguard: ignore[jg001, JG002]\ny = 2  # jitguard: ignore\ns = '# jitguard: ignore'\n"
    got = suppressions(text)
    assert got == {line: ["JG001", "JG002"], line + 1: []}


def test_findings_to_dict_is_asdict_and_a_copy():
    # Finding.to_dict (the tree memo, every report) skips asdict's deep copies: the same data, and
    # nothing it returns is shared with the finding
    import dataclasses

    from jitguard.config import Config
    from jitguard.static.runner import scan_paths

    got = scan_paths([str(ROOT / "fixtures")], Config(confidence="low"), use_cache=False, jobs=1).findings
    assert len(got) > 20 and any(f.fix is not None and f.fix.edits for f in got)
    assert any(f.details.get("launches") for f in got)
    for f in got:
        data = f.to_dict()
        assert data == dataclasses.asdict(f)
        assert json.dumps(data) == json.dumps(dataclasses.asdict(f))
        if f.details.get("launches"):
            data["details"]["launches"][0]["evidence"] = None
            data["details"]["launches"].append(None)
            assert f.details["launches"][-1] is not None and f.details["launches"][0]["evidence"] is not None
