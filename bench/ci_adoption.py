"""Adopting ``jitguard scan`` in the CI of a codebase that already has findings: vLLM 0.33.0.

    python bench/ci_adoption.py [--out PREFIX]   # writes bench/results/ci_adoption_vllm.txt and .json

On a git copy of the vLLM 0.33.0 sources (the .py files of the wheel, bench/fetch_vllm.py), from an
empty cache, one command after the other as a team would run them:
1. ``jitguard scan --write-baseline jitguard-baseline.json .``: every finding of today recorded;
2. ``jitguard scan --baseline jitguard-baseline.json .``: nothing new, the summary counts them;
3. a new file with a new kernel launched with ``num_tokens = x.shape[0]``: reported alone;
4. a one-file change (a line added to the body of a kernel that has findings, in the file with the
   most of them, chosen from the baseline), then ``jitguard scan --diff HEAD .`` with and without
   the baseline: only that kernel's findings, out of the whole tree's;
5. the other way in, on the committed tree: ``jitguard fix --add-ignore .``, then a scan (no findings),
   every changed line checked to be the old line plus a ``# jitguard: ignore[...]`` comment, every
   file compiled, and a second run checked to change nothing.
Writes the transcript (``OUT.txt``, what README's CI section pastes) and ``OUT.json`` (machine,
versions, date, every count and time).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import pathlib
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter

BENCH = pathlib.Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from fetch_vllm import ensure_corpus  # noqa: E402

NEW_OP = '''\
"""A new op: one Triton kernel scaling the rows of a [num_tokens, hidden] activation."""
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_rows_kernel(x_ptr, out_ptr, num_tokens, hidden, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = (row < num_tokens) & (cols < hidden)
    x = tl.load(x_ptr + row * hidden + cols, mask=mask)
    tl.store(out_ptr + row * hidden + cols, x * scale, mask=mask)


def scale_rows(x: torch.Tensor, scale: float) -> torch.Tensor:
    num_tokens, hidden = x.shape
    out = torch.empty_like(x)
    _scale_rows_kernel[(num_tokens,)](x, out, num_tokens, hidden, scale,
                                      BLOCK=triton.next_power_of_2(hidden))
    return out
'''


class Session:
    def __init__(self, cwd: pathlib.Path, env: dict) -> None:
        self.cwd, self.env = cwd, env
        self.lines: list[str] = []
        self.steps: list[dict] = []

    def run(self, *argv: str, show: str | None = None, keep: int | None = None) -> subprocess.CompletedProcess:
        """Run a command, add it and its output (stdout and stderr as a terminal shows them) to
        the transcript; ``keep``: show only the last lines of a long output."""
        t0 = time.perf_counter()
        proc = subprocess.run(list(argv), cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        seconds = time.perf_counter() - t0
        self.lines.append("$ " + (show or shlex.join(argv)))
        out = proc.stdout.rstrip("\n").splitlines()
        if keep is not None and len(out) > keep:
            self.lines.append(f"[... {len(out) - keep} lines cut ...]")
            out = out[-keep:]
        self.lines.extend(out)
        self.steps.append({"command": show or shlex.join(argv), "exit": proc.returncode,
                           "seconds": round(seconds, 3), "output_lines": len(proc.stdout.splitlines())})
        return proc


def jitguard_cmd() -> list[str]:
    exe = shutil.which("jitguard")
    return [exe] if exe else [sys.executable, "-m", "jitguard"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "ci_adoption_vllm"))
    ap.add_argument("--wheel", help="vllm wheel to unpack if the corpus is missing")
    args = ap.parse_args()

    corpus = ensure_corpus(args.wheel)
    work = pathlib.Path(tempfile.mkdtemp(prefix="jitguard-adopt-"))
    repo = work / "vllm-0.33.0"
    shutil.copytree(corpus / "vllm", repo / "vllm")
    env = dict(os.environ, JITGUARD_CACHE_DIR=str(work / "cache"), GIT_AUTHOR_NAME="ci",
               GIT_AUTHOR_EMAIL="ci@example.com", GIT_COMMITTER_NAME="ci",
               GIT_COMMITTER_EMAIL="ci@example.com", COLUMNS="100")
    env.pop("CI", None)
    s = Session(repo, env)
    jg = jitguard_cmd()

    def scan(*a: str, keep: int | None = None) -> subprocess.CompletedProcess:
        return s.run(*jg, "scan", *a, show=shlex.join(["jitguard", "scan", *a]), keep=keep)

    git = lambda *a, **k: s.run("git", *a, **k)  # noqa: E731
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "vLLM 0.33.0")

    # 1. record today's findings
    first = scan("--write-baseline", "jitguard-baseline.json", ".")
    baseline = json.loads((repo / "jitguard-baseline.json").read_text())
    baselined = sum(e["count"] for e in baseline["entries"])
    git("add", "jitguard-baseline.json")
    git("commit", "-qm", "jitguard baseline")
    # 2. the same tree: nothing new
    again_b = scan("--baseline", "jitguard-baseline.json", ".")
    # 3. a new kernel, launched with the token count
    new_file = repo / "vllm" / "model_executor" / "layers" / "scale_rows.py"
    new_file.write_text(NEW_OP)
    s.lines.append(f"# a new file, {new_file.relative_to(repo)}: a kernel launched with num_tokens = x.shape[0]")
    new = scan("--baseline", "jitguard-baseline.json", ".")
    git("add", "-A")
    git("commit", "-qm", "scale_rows op")
    # 4. a one-file change: a line added to the body of a kernel with findings, in the file with the most
    per_file = Counter()
    for e in baseline["entries"]:
        per_file[e["path"]] += e["count"]
    target_path = sorted(per_file, key=lambda p: (-per_file[p], p))[0]
    findings = json.loads(subprocess.run(
        [*jg, "scan", "--format", "json", "--no-baseline", target_path], cwd=repo, env=env,
        capture_output=True, text=True).stdout)["findings"]
    kernel = sorted((f for f in findings if f["code"] in ("JG001", "JG002")), key=lambda f: f["line"])[0]
    src = (repo / target_path).read_text().splitlines(keepends=True)
    body_first = kernel["details"]["kernel_line"]  # def line; its body follows the signature
    i = body_first - 1
    while not src[i].rstrip().endswith(":"):
        i += 1
    indent = re.match(r"\s*", src[i + 1]).group(0) if src[i + 1].strip() else "    "
    src.insert(i + 1, f"{indent}# reviewed: the launch passes the token count\n")
    (repo / target_path).write_text("".join(src))
    s.lines.append(f"# a one-file change: a line added to the body of {kernel['kernel'].rsplit('.', 1)[-1]}")
    git("diff", "-U1")
    diff_all = scan("--diff", "HEAD", ".")
    diff_base = scan("--diff", "HEAD", "--baseline", "jitguard-baseline.json", ".")

    # 5. the other way in: suppression comments in the code instead of a baseline file
    git("checkout", "-q", "--", ".")
    s.lines.append("# or: a comment where each finding is, instead of a baseline file")
    before = {p: p.read_bytes() for p in repo.rglob("*.py")}
    added = s.run(*jg, "fix", "--add-ignore", ".", show="jitguard fix --add-ignore .", keep=2)
    after_scan = scan("--no-baseline", ".")
    changed_files, changed_lines, only_comments = 0, 0, True
    for path, old in before.items():
        edited = path.read_bytes()
        if edited == old:
            continue
        changed_files += 1
        a, b = old.split(b"\n"), edited.split(b"\n")
        only_comments &= len(a) == len(b)
        for x, y in zip(a, b):
            if x != y:
                changed_lines += 1
                only_comments &= y.startswith(x) and re.fullmatch(
                    rb"  # jitguard: ignore\[[A-Z0-9,]+\]", y[len(x):]) is not None
        compile(edited, str(path), "exec", dont_inherit=True)
    snapshot = {path: path.read_bytes() for path in before}
    again = s.run(*jg, "fix", "--add-ignore", ".", show="jitguard fix --add-ignore .")
    idempotent = all(path.read_bytes() == data for path, data in snapshot.items())

    def summary(proc: subprocess.CompletedProcess) -> str:
        return [x for x in proc.stdout.splitlines() if x.startswith(("Found", "No findings"))][-1]

    transcript = "\n".join(s.lines) + "\n"
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".txt").write_text(transcript)
    import jitguard

    record = {
        "what": "jitguard scan adopted on a git copy of vLLM 0.33.0: baseline, a new kernel, --diff",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count()},
        "jitguard_version": jitguard.__version__,
        "git_version": subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip(),
        "corpus": json.loads((corpus / "CORPUS.json").read_text()) if (corpus / "CORPUS.json").exists() else str(corpus),
        "baselined": baselined,
        "baseline_entries": len(baseline["entries"]),
        "new_kernel_findings": [x for x in new.stdout.splitlines() if re.match(r"\S+:\d+:\d+: JG", x)],
        "changed_file": target_path,
        "changed_kernel": kernel["kernel"],
        "diff_findings": [x for x in diff_all.stdout.splitlines() if re.match(r"\S+:\d+:\d+: JG", x)],
        "add_ignore": {"files_changed": changed_files, "lines_changed": changed_lines,
                       "only_appended_comments": only_comments, "every_file_compiles": True,
                       "second_run_changes_nothing": idempotent,
                       "scan_after": summary(after_scan), "exit": added.returncode},
        "summaries": {"write_baseline": summary(first), "baseline": summary(again_b),
                      "new_kernel": summary(new), "diff": summary(diff_all),
                      "diff_with_baseline": summary(diff_base)},
        "exit": {"write_baseline": first.returncode, "baseline": again_b.returncode,
                 "new_kernel": new.returncode, "diff": diff_all.returncode,
                 "diff_with_baseline": diff_base.returncode},
        "steps": s.steps,
    }
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    print(transcript)
    width = max(len(x["command"]) for x in s.steps)
    print(f"{'command':<{width}}  exit  seconds")
    for x in s.steps:
        print(f"{x['command']:<{width}}  {x['exit']:>4}  {x['seconds']:>7.2f}")
    print(f"wrote {out.with_suffix('.txt')} and {out.with_suffix('.json')}", file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
