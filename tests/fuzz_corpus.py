"""The fuzz corpus: mutants of real kernel files and generated programs, and the oracle they must
pass. Used by tests/test_fuzz_corpus.py (about a minute in CI) and bench/fuzz_corpus.py (longer).

Inputs (hypothesis strategies):
* ``mutants``: a seed file (fixtures/, the shipped kernels/, kernel files of bench/corpus when it is
  there) with 1-6 edits: lines deleted, duplicated, swapped, re-indented; hostile bytes inserted (NUL,
  form feed, lone CR, BOM, \\x85, U+2028, fullwidth letters, invalid UTF-8, coding declarations that
  Python refuses or that can't encode back, 300 open brackets, a 1,000-character name); an
  identifier renamed everywhere; truncation; a splice of another seed.
* ``kernels``: kernels built from parts (parameters, tl.constexpr, do_not_specialize entries of
  every kind, autotune keys, launches with varying, stable and literal arguments, spaced and
  fullwidth names), so that scan and fix have real work on each one.
* ``programs``: hypothesmith programs (valid Python from the grammar) after a kernel.
* a ``.gitignore`` of random and broken patterns beside them.

The oracle (``check_batch``), for one directory of such files: ``jitguard scan`` then ``fix``
(planned, written, planned again) within a time limit, and:
* no internal error and no exception (a crash), no batch over the time limit (a hang);
* every file the scan reads (the prefilter's phase 1: its bytes mention triton and jit) that
  Python can't parse (``ast.parse`` of its bytes) is an ``errors`` entry; one Python parses is
  analyzed, or an error for a reason about jitguard's limits (nesting depth);
* every edited file still parses, the fix is idempotent (planned again: nothing to change), and its
  diff applies with ``git apply --check`` where git is installed.
"""
from __future__ import annotations

import ast
import faulthandler
import os
import random
import re
import shutil
import signal
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent


# --- seeds -------------------------------------------------------------------------------------

def seed_files(corpus_limit: int = 40, max_bytes: int = 60_000) -> list[tuple[str, bytes]]:
    """(name, bytes) of the fixtures, the shipped kernels and, where bench/corpus is there, up to
    ``corpus_limit`` kernel files of it (every k-th of the sorted list: the same on every run)."""
    out = []
    for base in ("fixtures", "kernels"):
        for p in sorted((ROOT / base).rglob("*.py")):
            out.append((str(p.relative_to(ROOT)), p.read_bytes()))
    corpus = ROOT / "bench" / "corpus"
    if corpus.is_dir() and corpus_limit:
        found = []
        for p in sorted(corpus.rglob("*.py")):
            try:
                data = p.read_bytes()
            except OSError:
                continue
            if len(data) <= max_bytes and b"triton" in data and b"jit" in data:
                found.append((str(p.relative_to(ROOT)), data))
        step = max(1, len(found) // corpus_limit)
        out.extend(found[::step][:corpus_limit])
    return out


# --- mutants -----------------------------------------------------------------------------------

HOSTILE = [
    b"\x00", b"\x0c", b"\r", b"\r\n", b"\xef\xbb\xbf", "\x85".encode(), "\u2028".encode(),
    "\u2029".encode(), "\uff4e".encode(), "\uff22".encode(), b"\xff\xfe", b"\xc3", b"\t", b"\\",
    b"'''", b'"""', b"(", b")", b"[", b"]", b"{", b"}", b"#", b":", b",", b"\n", b" " * 9,
    b"# coding: latin-1\n", b"# coding: rot13\n", b"# coding: idna\n", b"# coding: nosuch\n",
    b"# -*- coding: utf-16 -*-\n", b"\xef\xbb\xbf# coding: latin-1\n", b"# jitguard: ignore[JG001]",
    b"@triton.jit\n", b"@triton.jit()\n", b"@triton.jit(do_not_specialize=[", b"do_not_specialize=",
    b"do_not_specialize_on_alignment=", b": tl.constexpr", b"tl.constexpr", b"[grid](", b"](",
    b".run(", b"lambda: ", b"async ", b"await ", b"yield ", b":=", b"*", b"**", b"x" * 1000,
    b"(" * 300, b"[" * 120, b"not " * 200, b"-" * 400 + b"1", b"import triton.language as tl\n",
    b"from triton import jit as j\n", b"from . import ", b"from .. import *\n", b"global x\n",
    b"if True:\n", b"class C:\n", b"def f(*, a, b=1, **kw):\n", b"    pass\n", b"\x1c\x1d\x1e",
]


def _apply(data: bytes, op: tuple, other: bytes) -> bytes:
    kind, a, b, tok = op
    lines = data.splitlines(keepends=True) or [b""]
    i, j = a % len(lines), b % len(lines)
    if kind == "delete":
        lo, hi = sorted((i, j))
        del lines[lo:min(hi + 1, lo + 8)]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    elif kind == "swap":
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "indent":
        lines[i] = (b" " * (b % 9) if b % 3 else b"\t") + lines[i].lstrip(b" \t")
    elif kind == "insert":
        pos = a % (len(data) + 1)
        return data[:pos] + tok + data[pos:]
    elif kind == "byte":
        if data:
            pos = a % len(data)
            return data[:pos] + bytes([b % 256]) + data[pos + 1:]
    elif kind == "truncate":
        return data[: a % (len(data) + 1)]
    elif kind == "splice":
        theirs = other.splitlines(keepends=True) or [b""]
        k = b % len(theirs)
        lines[i:i] = theirs[k:k + 1 + a % 20]
    elif kind == "rename":
        names = sorted(set(re.findall(rb"\b[A-Za-z_][A-Za-z0-9_]*\b", data)))
        if names:
            old = names[a % len(names)]
            new = [b"n" * 1000, "\uff4e\uff55\uff4d".encode(), b"class", b"tl", b"x", old + old,
                   names[b % len(names)], b"_" + old, "n\u0301".encode()][b % 9]
            return re.sub(rb"\b" + re.escape(old) + rb"\b", lambda m: new, data)
    elif kind == "top":
        return tok + data
    return b"".join(lines)


_OPS = st.tuples(
    st.sampled_from(["delete", "duplicate", "swap", "indent", "insert", "insert", "byte",
                     "truncate", "splice", "rename", "rename", "top"]),
    st.integers(0, 2**20), st.integers(0, 2**20), st.sampled_from(HOSTILE),
)


def mutants(seeds: list[tuple[str, bytes]]) -> st.SearchStrategy[bytes]:
    datas = [d for _, d in seeds]

    @st.composite
    def build(draw):
        data = draw(st.sampled_from(datas))
        other = draw(st.sampled_from(datas))
        for op in draw(st.lists(_OPS, min_size=1, max_size=6)):
            data = _apply(data, op, other)
        return data

    return build()


# --- kernels built from parts ------------------------------------------------------------------

_NAMES = ["n", "num_tokens", "M", "N", "K", "stride_m", "seq_len", "eps", "BLOCK", "BLOCK_M",
          "layer", "max_len", "n_experts", "\uff4e", "x" * 200, "scale_stride", "HEAD_DIM"]
_ARGS = ["x.shape[0]", "x.shape[1]", "x.numel()", "x.stride(0)", "16", "1", "0.5", "True",
         "n", "len(x)", "triton.next_power_of_2(n)", "BLOCK", "x.size(0)", "max(1, n)", "-1",
         "x.shape[0] * 2", "cfg.n", "None"]


@st.composite
def kernels(draw) -> bytes:
    params = draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=6, unique=True))
    constexpr = set(draw(st.lists(st.sampled_from(params), max_size=3)))
    sig = ", ".join(["x_ptr"] + [p + (": tl.constexpr" if p in constexpr else "") +
                                 (" = 4" if draw(st.booleans()) and p == params[-1] else "")
                                 for p in params])
    entries = draw(st.lists(st.one_of(st.sampled_from(params + ["nope", "num_token"]).map(repr),
                                      st.integers(-2, 9).map(str)), max_size=4))
    jit_args = []
    if entries:
        jit_args.append("do_not_specialize=[" + ", ".join(entries) + ("," if draw(st.booleans()) else "") + "]")
    if draw(st.booleans()):
        jit_args.append("do_not_specialize_on_alignment=[" + ", ".join(entries[:1]) + "]")
    spacing = draw(st.sampled_from(["", " ", "\n    "]))
    deco = "@triton.jit" + (f"({spacing}" + ", ".join(jit_args) + ")" if jit_args or draw(st.booleans()) else "")
    lines = ["import triton", "import triton.language as tl", ""]
    if draw(st.booleans()):
        key = draw(st.lists(st.sampled_from(params), max_size=2, unique=True))
        lines.append(f"@triton.autotune(configs=[triton.Config({{}}, num_warps=4)], key={key!r})")
    lines += [deco, f"def kern(x_ptr{sig[len('x_ptr'):]}):"]
    body = draw(st.sampled_from([
        "    pass",
        f"    offs = tl.arange(0, 16)\n    tl.store(x_ptr + offs * {params[0]}, offs)",
        f"    for i in range(0, {params[0]}):\n        tl.load(x_ptr + i)",
        f"    if {params[0]} > 1:\n        tl.store(x_ptr, 1.0, mask=tl.arange(0, 16) < {params[-1]})",
    ]))
    lines += [body, "", "", "def launch(x, n, cfg):"]
    for _ in range(draw(st.integers(1, 3))):
        args = [draw(st.sampled_from(_ARGS)) for _ in params]
        kw = draw(st.booleans())
        call = ", ".join(["x"] + ([f"{p}={a}" for p, a in zip(params, args)] if kw else args))
        opts = draw(st.sampled_from(["", ", num_warps=4", ", num_stages=2, num_warps=8"]))
        grid = draw(st.sampled_from(["(1,)", "grid", "(triton.cdiv(n, 16),)", " (1,) "]))
        lines.append(f"    kern[{grid}]({call}{opts})")
    return ("\n".join(lines) + "\n").encode()


def programs() -> st.SearchStrategy[bytes]:
    """hypothesmith programs (valid Python from the grammar) after a kernel and its launch."""
    import hypothesmith

    head = (b"import triton\n\n@triton.jit\ndef k(x_ptr, n):\n    pass\n\n"
            b"def launch(x):\n    k[(1,)](x, x.shape[0])\n\n")
    return hypothesmith.from_grammar().map(lambda src: head + src.encode("utf-8", "surrogatepass"))


_PATTERNS = ["*.py", "[z-a]", "[[:alpha:]]*", "\\", "!f0*.py", "gen/", "**/x", "f1?.py", "[!f]*",
             "/f2*.py", "a/**/b", "# comment", "", "   ", "f3*.py/", "[", "]", "\\[z-a]", "!"]


def gitignores() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(_PATTERNS), max_size=5).map(lambda ps: "\n".join(ps) + "\n")


def batches(seeds) -> st.SearchStrategy[tuple[list[tuple[str, bytes]], str | None]]:
    """4-12 (kind, bytes) files and maybe a .gitignore: half mutants, a quarter each built
    kernels and hypothesmith programs."""
    one = st.one_of(
        mutants(seeds).map(lambda d: ("mutant", d)), mutants(seeds).map(lambda d: ("mutant", d)),
        kernels().map(lambda d: ("kernel", d)), programs().map(lambda d: ("program", d)),
    )
    return st.tuples(st.lists(one, min_size=4, max_size=12), st.one_of(st.none(), gitignores()))


# --- the oracle --------------------------------------------------------------------------------

@dataclass
class BatchResult:
    files: int = 0
    parsed_ok: int = 0  # Python parses it
    bad: int = 0  # Python refuses it and the scan reads it
    errors: int = 0
    findings: int = 0
    fixed_files: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)  # crash / hang / missed / false error ...


class Hang(Exception):
    pass


def _python_parses(data: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False
    return True


_LIMIT_REASONS = ("too deeply nested", "recursion limit", "out of memory")


def check_batch(files: list[bytes], gitignore: str | None, workdir: Path,
                time_limit_s: float = 60.0) -> BatchResult:
    """Scan and fix ``files`` in ``workdir`` (emptied first); what went wrong is in ``problems``."""
    from jitguard.config import Config
    from jitguard.static import prefilter
    from jitguard.static.fixes import plan_fixes, write_plan
    from jitguard.static.runner import scan_paths

    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    names = [f"f{i:02d}.py" for i in range(len(files))]
    for name, data in zip(names, files):
        (workdir / name).write_bytes(data)
    if gitignore is not None:
        (workdir / ".git").mkdir()
        (workdir / ".gitignore").write_text(gitignore)
    res = BatchResult(files=len(files))
    t0 = time.perf_counter()

    def on_alarm(signum, frame):
        raise Hang()

    old = signal.signal(signal.SIGALRM, on_alarm) if hasattr(signal, "SIGALRM") else None
    # a hang in native code (no Python frame for the alarm to interrupt): dump and exit
    faulthandler.dump_traceback_later(time_limit_s * 3, exit=True)
    if old is not None:
        signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    cwd = os.getcwd()
    try:
        os.chdir(workdir)
        result = scan_paths(["."], Config(root=str(workdir)), jobs=1, use_cache=False, keep_facts=True)
        res.findings = len(result.findings)
        res.errors = len(result.errors)
        for e in result.internal_errors:
            res.problems.append(f"crash: scan internal error in {e.path}: {e.message}")
        errors = {e.path: e.message for e in result.errors}
        scanned = _scanned_names(workdir)
        for name, data in zip(names, files):
            ok = _python_parses(data)
            res.parsed_ok += ok
            if name not in scanned or not prefilter.may_define_kernels(data):
                continue  # excluded by the .gitignore, or never read past the prefilter
            if not ok:
                res.bad += 1
                if name not in errors:
                    res.problems.append(f"missed: {name}: Python refuses it, the scan reported no error")
            elif name in errors and not any(r in errors[name] for r in _LIMIT_REASONS):
                res.problems.append(f"false error: {name}: Python parses it, the scan says: {errors[name]}")
        plan = plan_fixes(result.findings, unsafe=True, roots=["."], jobs=1)
        for ff in plan.files:
            if ff.error and ff.error.startswith("cannot edit ("):
                res.problems.append(f"crash: fix on {ff.path}: {ff.error}")
        for ff in plan.changed_files:
            if not _python_parses(ff.new_data):
                res.problems.append(f"crash: fix on {ff.path} gives a file that does not parse")
        diff = _diffs(plan)
        write_plan(plan)
        res.fixed_files = sum(1 for ff in plan.files if ff.written)
        # each fix is decided on the scanned bytes: scan the fixed files again and plan once more
        rescan = scan_paths(["."], Config(root=str(workdir)), jobs=1, use_cache=False)
        again = plan_fixes(rescan.findings, unsafe=True, roots=["."], jobs=1)
        for ff in again.changed_files:
            res.problems.append(f"not idempotent: fix on {ff.path} changes it again")
        if diff and shutil.which("git"):
            for name, data in zip(names, files):  # the patch applies to the files as they were
                if (workdir / name).exists():
                    (workdir / name).write_bytes(data)
            (workdir / "fix.diff").write_bytes(diff)
            p = subprocess.run(["git", "apply", "--check", "fix.diff"], cwd=workdir,
                               capture_output=True, text=True)
            if p.returncode != 0:
                res.problems.append(f"bad diff: git apply --check: {p.stderr.strip()[:300]}")
    except Hang:
        res.problems.append(f"hang: over {time_limit_s:.0f} s")
    except Exception as exc:  # noqa: BLE001 - anything escaping scan or fix is a crash
        import traceback

        res.problems.append(f"crash: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-4)}")
    finally:
        if old is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        faulthandler.cancel_dump_traceback_later()
        os.chdir(cwd)
    res.seconds = time.perf_counter() - t0
    return res


def _scanned_names(workdir: Path) -> set[str]:
    """The files the scan walks (after the .gitignore)."""
    from jitguard.config import Config
    from jitguard.static.files import collect_files

    return {f.display for f in collect_files(["."], Config(root=str(workdir))).files}


def _diffs(plan) -> bytes:
    from jitguard.cli.fix import _unified_diff

    return b"".join(_unified_diff(ff.path, ff.snapshot.data, ff.new_data) for ff in plan.changed_files)


def save_failure(files: list[bytes], gitignore: str | None, problems: list[str], where: Path) -> Path:
    """Keep a failing batch for a reproduction (``python -m jitguard scan DIR``)."""
    where.mkdir(parents=True, exist_ok=True)
    d = where / f"batch-{int(time.time() * 1000)}-{random.randrange(10**6)}"
    d.mkdir()
    for i, data in enumerate(files):
        (d / f"f{i:02d}.py").write_bytes(data)
    if gitignore is not None:
        (d / "gitignore.txt").write_text(gitignore)
    (d / "problems.txt").write_text("\n".join(problems) + "\n")
    return d
