"""The vLLM general plugin, tested without vLLM: processes that call the plugin function the way
vLLM does (in every process, before the process group exists and before the worker module is
imported), then run a gloo job through a stand-in ``vllm.v1.worker.gpu_worker.Worker`` whose
``execute_model`` the plugin labels with steps, tear the group down and exit; plus a forked worker
that leaves through os._exit like multiprocessing's."""
from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions
from click.testing import CliRunner

from jitguard.cli.report import report as report_cmd

ROOT = Path(__file__).resolve().parents[1]

# A stand-in for vLLM's GPU worker module: vLLM calls Worker.execute_model once per engine step.
FAKE_GPU_WORKER = textwrap.dedent("""
    import torch
    import triton, triton.language as tl
    from runtime_helpers import FakeTensor

    @triton.jit
    def plugin_kernel(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)

    class Worker:
        def execute_model(self, num_tokens):
            plugin_kernel.warmup(FakeTensor(4096, torch.float32), num_tokens, BLOCK=16, grid=(1,))
            return num_tokens
""")

WORKER = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {tests!r})
    sys.path.insert(0, {fake_site!r})
    from jitguard.integrations import vllm as plugin
    plugin.register()                      # what vLLM does first in every process
    plugin.register()                      # ...possibly more than once
    assert "vllm" not in sys.modules
    import torch, torch.distributed as dist
    import jitguard
    from runtime_helpers import stand_in_driver
    from vllm.v1.worker.gpu_worker import Worker, plugin_kernel   # imported after the plugin

    rank = int(sys.argv[1])
    counts = [int(c) for c in sys.argv[2].split(",")]
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[3], rank=rank,
                            world_size=2)
    worker = Worker()
    with stand_in_driver():
        for n in counts:                   # no mark_step here: the plugin labels each step
            assert worker.execute_model(n) == n
            dist.all_reduce(torch.ones(1))
        if rank == 0:
            import multiprocessing as mp
            from runtime_helpers import FakeTensor
            def child():
                jitguard.mark_step(100)
                plugin_kernel.warmup(FakeTensor(4096, torch.float32), 1, BLOCK=32, grid=(1,))
            p = mp.get_context("fork").Process(target=child)
            p.start(); p.join()
            assert p.exitcode == 0
    dist.destroy_process_group()           # vLLM tears the group down before exit
""")


def _fake_vllm(root: Path) -> Path:
    pkg = root / "site" / "vllm" / "v1" / "worker"
    pkg.mkdir(parents=True)
    for d in (pkg, pkg.parent, pkg.parent.parent):
        (d / "__init__.py").write_text("")
    (pkg / "gpu_worker.py").write_text(FAKE_GPU_WORKER)
    return root / "site"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_plugin_writes_one_trace_per_process_with_rank(tmp_path):
    pytest.importorskip("torch")  # the worker processes run a gloo job
    pytest.importorskip("triton")
    rng = random.Random()
    trace_dir = tmp_path / "traces"
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(tests=str(ROOT / "tests"), fake_site=str(_fake_vllm(tmp_path))))
    plain = [n for n in range(2, 100) if n % 16]
    counts = {0: [rng.choice(plain) for _ in range(4)], 1: [rng.choice(plain) for _ in range(4)]}
    straggler_step = rng.randrange(1, 4)
    counts[1][straggler_step] = 16 * rng.randint(1, 5)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JITGUARD", "RANK", "WORLD_SIZE",
                                                                     "LOCAL_RANK"))}
    run_id = f"vllm-{rng.randrange(10**9)}"  # vLLM's API server would have named the run for its workers
    env.update(JITGUARD="record", JITGUARD_TRACE=str(trace_dir), JITGUARD_QUIET="1", JITGUARD_RUN_ID=run_id,
               TRITON_CACHE_DIR=str(tmp_path / "cache"), TRITON_DEFAULT_FP_FUSION="1")
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, str(script), str(r), ",".join(map(str, counts[r])), port],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in (0, 1)]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
    files = sorted(f.name for f in trace_dir.iterdir())
    assert len(files) == 3, files  # rank 0, rank 1, and rank 0's forked child
    by_name = {f: json.loads((trace_dir / f).read_text()) for f in files}
    ranks = sorted(d["process"]["rank"] for d in by_name.values())
    assert ranks == [0, 0, 1]
    assert {d["process"]["run_id"] for d in by_name.values()} == {run_id}
    for name, data in by_name.items():
        assert name.startswith(f"jitguard-trace.rank{data['process']['rank']}.pid{data['process']['pid']}")
    pids = {d["process"]["pid"] for d in by_name.values()}
    assert len(pids) == 3
    child = [d for d in by_name.values() if any(e["step"] == 100 for e in d["events"])]
    assert len(child) == 1
    # the child's trace holds only its own compile, not the parent's events from before the fork
    assert [e["step"] for e in child[0]["events"]] == [100]

    # `jitguard report DIR` on the parents: rank 1's divisible-by-16 count is a straggler compile
    parents = tmp_path / "parents"
    parents.mkdir()
    for name, data in by_name.items():
        if data is not child[0]:
            (parents / name).write_text(json.dumps(data))
    res = CliRunner().invoke(report_cmd, [str(parents), "--format", "json"])
    assert res.exit_code == 0, res.output
    merged = json.loads(res.output)
    assert [s["step"] for s in merged["straggler_steps"]] == [straggler_step]
    (s,) = merged["straggler_steps"]
    assert s["compiling_ranks"] == [1] and s["waiting_ranks"] == [0]
    assert s["compiles"][0]["culprits"] == ["n"]
    # the steps came from the plugin's wrapper around Worker.execute_model: 0, 1, 2, ...
    for name, data in by_name.items():
        if data is not child[0]:
            assert all(e["step"] is not None and 0 <= e["step"] < 4 for e in data["events"])


def test_plugin_is_inert_without_the_variable_and_imports_nothing_heavy(tmp_path):
    code = textwrap.dedent("""
        import sys
        from jitguard.integrations import vllm as plugin
        assert not {"torch", "triton", "vllm"} & set(sys.modules), sorted(sys.modules)
        plugin.register()
        assert plugin._state["watch"] is None
        assert not {"torch", "triton", "vllm"} & set(sys.modules)
        print("inert")
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JITGUARD")}
    env["JITGUARD_TRACE"] = str(tmp_path / "never")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "inert" in out.stdout, out.stderr
    assert not (tmp_path / "never").exists()


def test_plugin_entry_point_is_declared():
    tomllib = pytest.importorskip("tomllib")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    eps = data["project"]["entry-points"]["vllm.general_plugins"]
    module, func = eps["jitguard"].split(":")
    import importlib

    assert callable(getattr(importlib.import_module(module), func))
