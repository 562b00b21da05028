"""The outputs pasted in docs/ are real: each block marked ``<!-- docs-check: in repo -->`` or
``<!-- docs-check: in example -->`` is re-run, command by command, and compared with a run now
(as tests/test_readme.py does for README). ``in example`` runs in a fresh directory (a git work
tree) holding the files the doc shows, marked ``<!-- docs-check: file NAME -->`` before their
block, and the repository files named by ``<!-- docs-check: copy SRC [as DEST] -->``; the commands
of one doc share that directory, in order, as a reader following the doc would.

A block's output ends at the next ``$ `` line; ``(exit N)`` at its end is checked against the exit
status. The generated table of docs/scan.md is compared with bench/results/scan_speed.json.

After a change that moves what the docs quote: ``python tests/test_docs.py --update`` rewrites
the marked blocks and the table with real output (then read the diff).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MARK = re.compile(r"^<!-- docs-check: (.*?) -->$")
FENCE = re.compile(r"^```")
EXIT = re.compile(r"^\(exit(?: status)? (\d+)\)$")


@dataclass
class Command:
    line: str  # as written, without "$ "
    expected: list[str]
    status: int | None  # from "(exit N)", if the doc gives one


@dataclass
class Block:
    where: str  # "repo" | "example"
    start: int  # index of the first line inside the fence
    end: int  # index of the closing fence
    commands: list[Command] = field(default_factory=list)


@dataclass
class Doc:
    path: Path
    lines: list[str]
    files: dict[str, str] = field(default_factory=dict)  # example file -> text
    copies: list[tuple[str, str]] = field(default_factory=list)  # (repo path, example path)
    blocks: list[Block] = field(default_factory=list)


def parse(path: Path) -> Doc:
    lines = path.read_text().split("\n")
    doc = Doc(path, lines)
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if not m:
            i += 1
            continue
        words = m.group(1).split()
        if words[0] == "copy":
            src = words[1]
            dest = words[3] if len(words) > 3 and words[2] == "as" else src
            doc.copies.append((src, dest))
            i += 1
            continue
        assert FENCE.match(lines[i + 1]), f"{path.name}:{i + 1}: a docs-check mark must precede a ``` block"
        end = next(j for j in range(i + 2, len(lines)) if FENCE.match(lines[j]))
        body = lines[i + 2:end]
        if words[0] == "file":
            doc.files[words[1]] = "\n".join(body) + "\n"
        elif words[0] == "in":
            block = Block(words[1], i + 2, end)
            for line in body:
                if line.startswith("$ "):
                    block.commands.append(Command(line[2:], [], None))
                elif block.commands:
                    block.commands[-1].expected.append(line)
            for c in block.commands:
                while c.expected and c.expected[-1] == "":
                    c.expected.pop()
                if c.expected and EXIT.match(c.expected[-1]):
                    c.status = int(EXIT.match(c.expected.pop()).group(1))
                    while c.expected and c.expected[-1] == "":
                        c.expected.pop()
            doc.blocks.append(block)
        else:
            raise AssertionError(f"{path.name}:{i + 1}: unknown docs-check mark {m.group(1)!r}")
        i = end + 1
    return doc


def _normalize(text: str) -> str:
    return re.sub(r'"duration_s": [0-9.e-]+', '"duration_s": 0', text)


def _env(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "JITGUARD_DEBUG", "PYTHONPATH")}
    env.update(PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
               JITGUARD_CACHE_DIR=cache, COLUMNS="80", PYTHONUNBUFFERED="1", LC_ALL="C.UTF-8",
               GIT_AUTHOR_NAME="docs", GIT_AUTHOR_EMAIL="docs@example.invalid",
               GIT_COMMITTER_NAME="docs", GIT_COMMITTER_EMAIL="docs@example.invalid")
    return env


def _example_dir(doc: Doc, base: str) -> str:
    d = os.path.join(base, "example")
    os.makedirs(d)
    for name, text in doc.files.items():
        Path(d, name).parent.mkdir(parents=True, exist_ok=True)
        Path(d, name).write_text(text)
    for src, dest in doc.copies:
        Path(d, dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / src, Path(d, dest))
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "as in the doc"]):
        subprocess.run(["git", *args], cwd=d, env=_env(""), check=True, capture_output=True)
    return d


def run_doc(doc: Doc) -> list[tuple[Block, list[tuple[Command, str, int]]]]:
    """Every marked block's commands, run: (command, output, status)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="jitguard-docs-") as base:
        env = _env(os.path.join(base, "cache"))
        example = None
        for block in doc.blocks:
            if block.where == "example" and example is None:
                example = _example_dir(doc, base)
            cwd = str(ROOT) if block.where == "repo" else example
            ran = []
            for c in block.commands:
                p = subprocess.run(["bash", "-c", c.line.split("   #")[0] + " 2>&1"], cwd=cwd, env=env,
                                   stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=600)
                ran.append((c, p.stdout.decode("utf-8", "backslashreplace"), p.returncode))
            out.append((block, ran))
    return out


def marked_docs() -> list[Path]:
    return sorted(p for p in DOCS.glob("*.md") if "<!-- docs-check: in " in p.read_text())


# --- the generated speed table --------------------------------------------------------------------

SPEED_BEGIN = "<!-- scan_speed:begin (generated from bench/results/scan_speed.json) -->"
SPEED_END = "<!-- scan_speed:end -->"


def speed_table(data: dict) -> str:
    cold, warm, ast_all = data["cold"], data["warm"], data["ast_parse_all"]
    summary = cold["summary"]
    machine = data["machine"]
    load = machine.get("loadavg_at_start") or [0.0]
    rows = [
        ("corpus", f"{data['corpus']['name']}: {data['corpus']['py_files']} .py files, "
                   f"{data['corpus']['bytes'] / 1e6:.1f} MB"),
        ("machine", f"{machine['cpus']} CPUs ({machine['cpu']}), shared: load average "
                    f"{load[0]:.1f} at start"),
        ("`ast.parse` of every file (the ceiling)", f"{ast_all['seconds']:.2f} s"),
        ("cold scan (empty cache, `--jobs` default)",
         f"{cold['seconds']:.2f} s = {data['cold_over_ast']:.2f}x the ceiling"),
        ("warm scan (cached)", f"{warm['seconds']:.2f} s"),
        ("peak memory of the scan's process tree",
         f"{cold['peak_rss_sum_mb']:.0f} MB (sum of RSS over the main process and its workers)"),
        ("files analyzed / never parsed (prefilter)",
         f"{summary['files_analyzed']} / {summary['files_skipped']}"),
        ("kernels / launches found", f"{summary['kernels']} / {summary['launches']}"),
        ("files that could not be analyzed / internal errors",
         f"{len(data['file_errors'])} / {len(data['internal_errors'])}"),
    ]
    runs = len(cold.get("all_seconds") or [1])
    lines = ["| | figure |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows), "",
             f"Each figure is the best of {runs} interleaved runs (every run is in the JSON; this "
             "shared machine's load varies within a run). Date "
             f"{data['date']}, jitguard commit `{data['versions']['jitguard_commit'][:10]}`."]
    return "\n".join(lines)


def _speed_block(text: str) -> tuple[int, int]:
    a = text.index(SPEED_BEGIN) + len(SPEED_BEGIN) + 1
    return a, text.index(SPEED_END)


# --- tests ----------------------------------------------------------------------------------------

def pytest_generate_tests(metafunc):
    if "doc_path" in metafunc.fixturenames:
        metafunc.parametrize("doc_path", marked_docs(), ids=lambda p: p.name)


def test_pasted_outputs_in_docs_are_what_the_commands_print_now(doc_path):
    doc = parse(doc_path)
    assert doc.blocks
    for block, ran in run_doc(doc):
        for c, output, status in ran:
            want = _normalize("\n".join(c.expected))
            got = _normalize(output.rstrip("\n"))
            assert got == want, (f"{doc_path.name}: `$ {c.line}` prints something else now "
                                 "(python tests/test_docs.py --update rewrites the docs)")
            if c.status is not None:
                assert status == c.status, f"{doc_path.name}: `$ {c.line}` exits {status}, not {c.status}"


def test_scan_speed_table_is_generated_from_its_results_file():
    text = (DOCS / "scan.md").read_text()
    a, b = _speed_block(text)
    data = json.loads((ROOT / "bench" / "results" / "scan_speed.json").read_text())
    assert text[a:b].rstrip("\n") == speed_table(data)


def test_runtime_docs_point_at_no_machine_and_keep_the_path_clean():
    """docs/runtime.md and README: no path of one machine; the PYTHONPATH recipe adds no empty
    entry (an empty entry is the current directory on sys.path)."""
    for p in (DOCS / "runtime.md", DOCS / "multirank.md"):
        assert "/work/" not in p.read_text(), p.name
    for p in (*DOCS.glob("*.md"), ROOT / "README.md"):
        text = p.read_text()
        assert not re.search(r"[^+]:\$\{?PYTHONPATH\b|\$PYTHONPATH:|\$\{PYTHONPATH\}:", text), p.name


def update() -> None:
    for path in marked_docs():
        doc = parse(path)
        lines = list(doc.lines)
        for block, ran in reversed(run_doc(doc)):
            new: list[str] = []
            for c, output, status in ran:
                new.append(f"$ {c.line}")
                new.extend(output.rstrip("\n").split("\n") if output.strip() else [])
                if c.status is not None:
                    new.append(f"(exit {status})")
                    new.append("")
            while new and new[-1] == "":
                new.pop()
            lines[block.start:block.end] = new
        path.write_text("\n".join(lines))
    text = (DOCS / "scan.md").read_text()
    a, b = _speed_block(text)
    data = json.loads((ROOT / "bench" / "results" / "scan_speed.json").read_text())
    (DOCS / "scan.md").write_text(text[:a] + speed_table(data) + "\n" + text[b:])


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_docs.py --update")
    update()
