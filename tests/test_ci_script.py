""".ci/run runs exactly the test command README.md's quick start gives, and cannot pass silently."""
from __future__ import annotations

import pathlib
import re
import shlex

ROOT = pathlib.Path(__file__).resolve().parents[1]


def readme_quick_start() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```(?:bash|sh|console)?\n(.*?)```", section, re.S)
    assert block, "README.md: no code block under '## Quick start'"
    return [x.strip() for x in block.group(1).splitlines() if x.strip() and not x.startswith("#")]


def ci_commands() -> list[str]:
    return [x.strip() for x in (ROOT / ".ci" / "run").read_text().splitlines()
            if x.strip() and not x.strip().startswith("#")]


def test_quick_start_is_two_commands_install_and_test():
    cmds = readme_quick_start()
    assert len(cmds) == 2
    assert "jitguard scan fixtures/" in cmds[0] and "pip install" in cmds[0]
    assert "pytest" in cmds[1] and ".[test]" in cmds[1]


def test_ci_runs_the_readme_test_command_verbatim_and_first():
    test_cmd = readme_quick_start()[1]
    cmds = ci_commands()
    assert test_cmd in cmds, f".ci/run does not run the README test command: {test_cmd}"
    first_pytest = next(c for c in cmds if "pytest" in shlex.split(c.replace("&&", " ")))
    assert first_pytest == test_cmd


def test_ci_fails_on_any_failing_command_including_pytest_exit_5():
    lines = ci_commands()
    assert lines[0] in ("set -euo pipefail", "set -eo pipefail", "set -e")
    for c in lines:
        if "pytest" in c:
            # nothing that would swallow a failure (exit 5 "no tests collected" included)
            assert "|| true" not in c and "|| :" not in c and not c.rstrip().endswith("&")
    # pytest exit code 5 is not excused anywhere in the script
    assert "exit 5" not in (ROOT / ".ci" / "run").read_text()
