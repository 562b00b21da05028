"""What scan tests share: the jitguard CLI run in a working directory, `scan --format json` checked
against the report's own JSON Schema, and the smallest module with one JG001."""
from __future__ import annotations

import json
import os

import jsonschema
from click.testing import CliRunner

from jitguard.cli import main
from jitguard.report.json import SCAN_SCHEMA


def run(args, cwd):
    """``jitguard ARGS`` with ``cwd`` as the working directory (restored after)."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(old)


def scan_json(cwd, *args):
    """``jitguard scan --format json ARGS`` in ``cwd``, no cache, one job: the result and the
    document, which must validate against the scan schema."""
    r = run(["scan", "--no-cache", "-j", "1", "--format", "json", *args], cwd)
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCAN_SCHEMA)
    return r, doc


def simple_module(param: str, kernel: str = "k") -> str:
    """One kernel whose ``param`` gets a leading dim at its one launch: one JG001 on ``param``."""
    return f'''import triton
import triton.language as tl


@triton.jit
def {kernel}(x_ptr, {param}, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < {param})


def launch(x):
    n = x.shape[0]
    {kernel}[(1,)](x, n, BLOCK=128)
'''
