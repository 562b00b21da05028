"""action.yml (the composite GitHub Action) and examples/github-workflow.yml: both parse, the workflow
is complete (on, permissions, jobs, runs-on, steps) and passes only inputs the action declares, and the
action's shell steps run here as a runner would run them (bash -eo pipefail, inputs through env,
$GITHUB_OUTPUT), against a git repository with findings, a baseline and a diff base."""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import jsonschema
import pytest

yaml = pytest.importorskip("yaml")

ROOT = pathlib.Path(__file__).resolve().parents[1]
from sarif_spec import sarif_schema  # noqa: E402

SARIF_SCHEMA = sarif_schema()
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
NEEDS_GIT = pytest.mark.skipif(shutil.which("git") is None or shutil.which("bash") is None,
                               reason="needs git and bash")


def load(path: pathlib.Path) -> dict:
    return yaml.safe_load(path.read_text())


ACTION = load(ROOT / "action.yml")
WORKFLOW = load(ROOT / "examples" / "github-workflow.yml")


def test_action_is_a_composite_with_documented_inputs():
    assert ACTION["name"] and ACTION["description"]
    assert ACTION["runs"]["using"] == "composite"
    inputs = ACTION["inputs"]
    assert {"paths", "baseline", "diff-base", "format"} <= set(inputs)
    for name, spec in inputs.items():
        assert spec["description"] and isinstance(spec.get("default", ""), str), name
    for step in ACTION["runs"]["steps"]:
        assert ("uses" in step) != ("run" in step), step
        if "run" in step:
            assert step["shell"] == "bash"
            # inputs reach scripts through env only (no ${{ }} pasted into shell code)
            assert "${{" not in step["run"], step.get("name")
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@v\d+", step["uses"]), step["uses"]
        for value in list((step.get("env") or {}).values()) + list((step.get("with") or {}).values()):
            for expr in EXPR.findall(str(value)):
                m = re.fullmatch(r"inputs\.([\w-]+)", expr)
                assert m is None or m.group(1) in inputs, expr
    for out in ACTION["outputs"].values():
        assert EXPR.fullmatch(out["value"])


def test_example_workflow_is_complete_and_uses_the_action_as_declared():
    on = WORKFLOW.get("on", WORKFLOW.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in on and "push" in on
    assert WORKFLOW["permissions"]["security-events"] == "write"
    assert WORKFLOW["permissions"]["contents"] == "read"
    (job,) = WORKFLOW["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    steps = job["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@")
    ours = [s for s in steps if s.get("uses", "").split("@")[0].endswith("/jitguard")]
    assert len(ours) == 1
    assert set(ours[0]["with"]) <= set(ACTION["inputs"])
    if ours[0]["with"].get("diff-base"):
        assert steps[0]["with"]["fetch-depth"] == 0  # the base commit must be there


# --- running the shell steps ---------------------------------------------------------------------

def _value(expr: str, ctx: dict) -> str:
    """The few expression forms action.yml uses: inputs.X, github.X, runner.X, steps.ID.outputs.X."""
    parts = expr.split(".")
    if parts[0] == "steps":
        return ctx["steps"].get(parts[1], {}).get("outputs", {}).get(parts[3], "")
    return str(ctx[parts[0]][parts[1]])


def _substitute(text: str, ctx: dict) -> str:
    return EXPR.sub(lambda m: _value(m.group(1), ctx), str(text))


def _condition(cond: str | None, ctx: dict) -> bool:
    """`a == 'x' && b != 'y'`: the only condition form action.yml uses."""
    if cond is None:
        return True
    ok = True
    for clause in cond.split("&&"):
        m = re.fullmatch(r"\s*([\w.-]+)\s*(==|!=)\s*'([^']*)'\s*", clause)
        assert m, f"unsupported condition: {cond}"
        got = _value(m.group(1), ctx)
        ok &= (got == m.group(3)) if m.group(2) == "==" else (got != m.group(3))
    return ok


def run_action(repo: pathlib.Path, tmp: pathlib.Path, **inputs) -> dict:
    """Run the action's steps in ``repo``; returns {step id or name: (status, stdout, outputs)} and
    the pip command the install step ran (pip itself is a stand-in: jitguard is installed here)."""
    declared = {k: v.get("default", "") for k, v in ACTION["inputs"].items()}
    declared.update(inputs)
    shim = tmp / "shim"
    shim.mkdir(exist_ok=True)
    log = tmp / "pip.log"
    (shim / "python").write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2 $3" = "-m pip install" ]; then echo "$@" >> "{log}"; exit 0; fi\n'
        f'exec "{sys.executable}" "$@"\n')
    (shim / "python").chmod(0o755)
    ctx = {"inputs": declared, "github": {"action_path": str(ROOT)}, "runner": {"temp": str(tmp)},
           "steps": {}}
    env_base = dict(os.environ, PATH=f"{shim}:{pathlib.Path(sys.executable).parent}:{os.environ['PATH']}",
                    JITGUARD_CACHE_DIR=str(tmp / "cache"), CI="true")
    results = {}
    for step in ACTION["runs"]["steps"]:
        key = step.get("id") or step.get("name") or step.get("uses")
        if not _condition(step.get("if"), ctx):
            results[key] = None
            continue
        if "uses" in step:  # actions from the marketplace don't run here: record their inputs
            results[key] = {k: _substitute(v, ctx) for k, v in (step.get("with") or {}).items()}
            continue
        out_file = tmp / f"output-{len(results)}"
        out_file.write_text("")
        env = dict(env_base, GITHUB_OUTPUT=str(out_file))
        env.update({k: _substitute(v, ctx) for k, v in (step.get("env") or {}).items()})
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                              cwd=repo, env=env, capture_output=True, text=True)
        outputs = dict(line.split("=", 1) for line in out_file.read_text().splitlines() if "=" in line)
        if "id" in step:
            ctx["steps"][step["id"]] = {"outputs": outputs}
        results[key] = (proc.returncode, proc.stdout + proc.stderr, outputs)
        if proc.returncode != 0:
            break  # a failed step ends the job
    results["pip"] = log.read_text() if log.exists() else ""
    return results


def git(cwd, *args):
    subprocess.run(["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args], cwd=cwd,
                   check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    shutil.copytree(ROOT / "fixtures", r / "fixtures")
    git(r, "init", "-q")
    git(r, "add", "-A")
    git(r, "commit", "-qm", "base")
    return r


NEW_KERNEL = '''

@triton.jit
def added_kernel(x_ptr, num_tokens, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < num_tokens)


def launch_added(x):
    added_kernel[(1,)](x, x.shape[0], BLOCK=128)
'''


@NEEDS_GIT
def test_sarif_run_installs_scans_uploads_and_fails_on_findings(repo, tmp_path):
    res = run_action(repo, tmp_path)
    assert f"-m pip install --disable-pip-version-check {ROOT}" in res["pip"]
    status, log, out = res["Install jitguard"]
    assert status == 0 and "jitguard" in log
    status, log, out = res["scan"]
    assert status == 0 and out["exit-code"] == "1", log
    sarif = json.loads(pathlib.Path(out["sarif-file"]).read_text())
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(sarif)
    assert len(sarif["runs"][0]["results"]) == 28  # README's fixture scan
    upload = res["Upload SARIF to code scanning"]
    assert upload == {"sarif_file": out["sarif-file"], "category": "jitguard"}
    status, log, _ = res["Fail on findings"]
    assert status == 1 and log.startswith("::error title=jitguard::")


@NEEDS_GIT
def test_baseline_and_diff_base_report_only_the_new_kernel(repo, tmp_path):
    subprocess.run([sys.executable, "-m", "jitguard", "scan", "--write-baseline", "jg.json",
                    "fixtures"], cwd=repo, capture_output=True, env=dict(os.environ, JITGUARD_CACHE_DIR=str(tmp_path / "c")))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "baseline")
    res = run_action(repo, tmp_path, baseline="jg.json", **{"diff-base": "HEAD", "paths": "fixtures"})
    assert res["scan"][2]["exit-code"] == "0", res["scan"][1]
    assert res["Fail on findings"] is None  # condition false: the job passes
    with open(repo / "fixtures" / "lint" / "basic.py", "a") as fh:
        fh.write(NEW_KERNEL)
    res = run_action(repo, tmp_path, baseline="jg.json", **{"diff-base": "HEAD", "paths": "fixtures"})
    status, log, out = res["scan"]
    assert out["exit-code"] == "1"
    results = json.loads(pathlib.Path(out["sarif-file"]).read_text())["runs"][0]["results"]
    assert [(r["ruleId"], r["properties"]["kernel"], r["properties"]["param"]) for r in results] == [
        ("JG001", "basic.added_kernel", "num_tokens")]
    assert "28 baselined" in log


@NEEDS_GIT
def test_github_format_and_bad_format(repo, tmp_path):
    res = run_action(repo, tmp_path, format="github", upload="true")
    status, log, out = res["scan"]
    assert status == 0 and out["exit-code"] == "1"
    assert len([x for x in log.splitlines() if x.startswith("::warning ")]) == 10
    assert len([x for x in log.splitlines() if x.startswith("::notice ")]) == 1
    assert res["Upload SARIF to code scanning"] is None  # nothing to upload
    res = run_action(repo, tmp_path, format="xml")
    status, log, _ = res["scan"]
    assert status == 2 and "format must be sarif or github" in log
    assert "Fail on findings" not in res  # the job stopped at the failed step


def test_readme_pastes_the_example_workflow_verbatim():
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- github-workflow\b[^>]*-->\n```yaml\n(.*?)```", text, re.S)
    assert m, "README.md: no workflow block"
    assert m.group(1) == (ROOT / "examples" / "github-workflow.yml").read_text()
