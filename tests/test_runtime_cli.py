"""jitguard run, activation by environment variable, the pytest plugin, and a lazy import."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.runtime  # .ci/run runs these on several Triton versions

pytest.importorskip("triton")

from jitguard.runtime.trace import load_trace  # noqa: E402

TESTS = os.path.dirname(os.path.abspath(__file__))
RNG = random.Random(os.urandom(8))

PROG = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from runtime_helpers import stand_in_driver, FakeTensor, dtype
    import jitguard
    from runtime_kernels import fresh
    k = fresh()
    with stand_in_driver():
        x = FakeTensor(16 * 4096, dtype("float16"))
        for step, n in enumerate({ns!r}):
            jitguard.mark_step(step)
            k[(1,)](x, x, n, BLOCK=64)
    print("program done")
    sys.exit({code})
""")


def _env(tmp_path):
    env = dict(os.environ)
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    for name in ("JITGUARD", "JITGUARD_RUN_ID", "JITGUARD_RUN_ID_AUTO", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    env["PYTHONWARNINGS"] = "ignore::UserWarning:triton.knobs"
    return env


def _jitguard(*args, cwd, env):
    return subprocess.run([sys.executable, "-m", "jitguard", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_jitguard_run_records_a_trace_and_keeps_the_exit_code(tmp_path):
    odd = RNG.randrange(2, 1000) * 16 + RNG.randrange(1, 16)
    ns = [odd, odd + 16, 16 * RNG.randrange(1, 100), 1]
    code = RNG.randrange(3, 50)
    # prog.py first runs a child Python process that compiles too: it writes its own trace
    (tmp_path / "child.py").write_text(PROG.format(tests=TESTS, ns=[3, 48], code=0))
    (tmp_path / "prog.py").write_text(
        "import subprocess, sys\nsubprocess.run([sys.executable, 'child.py'], check=True)\n"
        + PROG.format(tests=TESTS, ns=ns, code=code))
    r = _jitguard("run", "--trace", "out/t.json", "--mode", "warn", "--", sys.executable, "prog.py",
                  cwd=tmp_path, env=_env(tmp_path))
    assert r.returncode == 2  # click: out/ does not exist
    assert "does not exist" in r.stderr
    (tmp_path / "out").mkdir()
    r = _jitguard("run", "--trace", "out/t.json", "--", "prog.py", cwd=tmp_path, env=_env(tmp_path))
    assert r.returncode == code, r.stderr
    assert "program done" in r.stdout
    assert "n: i32 -> i32, divisible by 16" in r.stderr and "3 variants, 2 recompiles" in r.stderr
    trace = load_trace(tmp_path / "out" / "t.json")
    assert [e.step for e in trace.events] == [0, 2, 3]
    (child_name,) = [n for n in os.listdir(tmp_path / "out") if n != "t.json"]
    child = load_trace(tmp_path / "out" / child_name)
    assert child_name == f"t.pid{child.process.pid}.json" and child.process.pid != trace.process.pid
    assert len(child.events) == 2 and child.process.argv[-1] == "child.py"
    assert trace.process.argv[-1] == "prog.py" and trace.process.mode == "warn"
    # one run id for the whole process tree, a new one for the next `jitguard run`
    assert trace.process.run_id and child.process.run_id == trace.process.run_id
    rep = _jitguard("report", str(tmp_path / "out" / "t.json"), cwd=tmp_path, env=_env(tmp_path))
    assert rep.returncode == 0 and "n: i32 -> folded constant 1" in rep.stdout


def test_jitguard_run_raise_mode_fails_the_program(tmp_path):
    ns = [17, 32]
    (tmp_path / "prog.py").write_text(PROG.format(tests=TESTS, ns=ns, code=0))
    r = _jitguard("run", "--mode", "raise", "--trace", "t.json", "--", sys.executable, "prog.py",
                  cwd=tmp_path, env=_env(tmp_path))
    assert r.returncode == 1 and "program done" not in r.stdout
    assert "RecompileError" in r.stderr and "n: i32 -> i32, divisible by 16" in r.stderr
    assert json.loads((tmp_path / "t.json").read_text())["events"][-1]["variant"] == 2


def test_env_activation_without_jitguard_run(tmp_path):
    """JITGUARD + PYTHONPATH=<site dir> in a process jitguard did not start; a directory trace."""
    site = _jitguard("run", "--print-site-dir", cwd=tmp_path, env=_env(tmp_path)).stdout.strip()
    assert os.path.isfile(os.path.join(site, "sitecustomize.py"))
    (tmp_path / "prog.py").write_text(PROG.format(tests=TESTS, ns=[5, 1], code=0))
    env = _env(tmp_path)
    env.update(JITGUARD="record", JITGUARD_TRACE=str(tmp_path / "traces") + "/", RANK="2", WORLD_SIZE="4",
               PYTHONPATH=site)
    (tmp_path / "traces").mkdir()
    r = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    (name,) = os.listdir(tmp_path / "traces")
    assert name.startswith("jitguard-trace.rank2.pid")
    trace = load_trace(tmp_path / "traces" / name)
    assert (trace.process.rank, trace.process.world_size) == (2, 4) and len(trace.events) == 2
    env["JITGUARD"] = "loud"
    r = subprocess.run([sys.executable, "-c", "pass"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "not activated" in r.stderr


def test_pytest_plugin_marker_and_report(tmp_path):
    (tmp_path / "test_k.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {TESTS!r})
        import pytest
        from runtime_helpers import stand_in_driver, FakeTensor, dtype
        from runtime_kernels import fresh

        def run(ns):
            k = fresh()
            with stand_in_driver():
                x = FakeTensor(16 * 4096, dtype("float16"))
                for n in ns:
                    k.warmup(x, x, n, BLOCK=64, grid=(1,))

        @pytest.mark.jitguard(max_recompiles=0)
        def test_recompiles():
            run([{RNG.randrange(1, 99) * 16 + 3}, {RNG.randrange(1, 99) * 16}])

        @pytest.mark.jitguard(max_recompiles=0)
        def test_one_variant():
            run([{RNG.randrange(1, 99) * 16 + 5}, {RNG.randrange(1, 99) * 16 + 7}])

        @pytest.mark.jitguard(max_compiles=2)  # a compile budget alone: its recompile is allowed
        def test_two_compiles_allowed():
            run([{RNG.randrange(1, 99) * 16 + 9}, 1])
    """))
    env = _env(tmp_path)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--jitguard", "test_k.py"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    out = r.stdout
    assert r.returncode == 1, out
    assert "1 failed, 2 passed" in out
    assert "jitguard: 1 recompile (max_recompiles=0)" in out and "n: i32 -> i32, divisible by 16" in out
    assert "Triton compiles per test" in out and "test_k.py::test_one_variant" in out


def test_import_jitguard_does_not_import_triton():
    code = "import sys, jitguard; jitguard.mark_step; import jitguard.pytest_plugin; print('triton' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False", r.stderr



def test_run_usage_errors():
    from click.testing import CliRunner

    from jitguard.cli.run import run

    r = CliRunner().invoke(run, [])
    assert r.exit_code == 2 and "give the command to run" in r.output
    r = CliRunner().invoke(run, ["--", "no-such-program-%d" % RNG.randrange(10**6)])
    assert r.exit_code == 127 and "command not found" in r.output  # as a shell says it
    r = CliRunner().invoke(run, ["--mode", "loud", "--", "python"])
    assert r.exit_code == 2 and "loud" in r.output
    r = CliRunner().invoke(run, ["--trace", "t.{host}.json", "--", "python"])
    assert r.exit_code == 2 and "unknown placeholder {host}" in r.output


def test_public_activation_api_parses_the_variables():
    from jitguard.runtime.activate import ActivationError, EnvSettings, env_settings

    n = RNG.randrange(0, 1000)
    mode = RNG.choice(["record", "warn", "raise"])
    s = env_settings({"JITGUARD": mode.upper(), "JITGUARD_MAX_RECOMPILES": str(n),
                      "JITGUARD_SUMMARY": "0", "JITGUARD_TRACE": f"/tmp/t{n}/"})
    assert s == EnvSettings(mode=mode, trace=f"/tmp/t{n}/", max_recompiles=n, summary=False)
    assert env_settings({"JITGUARD": "1"}).mode == "warn"
    assert env_settings({"JITGUARD": RNG.choice(["", "0", "off"])}) is None and env_settings({}) is None
    for bad in ({"JITGUARD": "loud"}, {"JITGUARD": "warn", "JITGUARD_MAX_RECOMPILES": str(-1 - n)},
                {"JITGUARD": "warn", "JITGUARD_MAX_RECOMPILES": "many"}):
        with pytest.raises(ActivationError):
            env_settings(bad)


def test_vllm_plugin_activates_through_the_public_function(tmp_path):
    """The plugin starts the same process-wide watch as `jitguard run` (activate_from_env), so it
    honours every JITGUARD* variable, and it uses no private name of the activation module."""
    import ast

    src = open(os.path.join(TESTS, "..", "jitguard", "integrations", "vllm.py")).read()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ImportFrom) and node.module == "jitguard.runtime.activate":
            assert not [a.name for a in node.names if a.name.startswith("_")]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "activate":
            assert not node.attr.startswith("_"), node.attr
    n = RNG.randrange(1, 50)
    code = textwrap.dedent(f"""
        from jitguard.integrations import vllm as plugin
        from jitguard.runtime import activate
        plugin.register()
        w = activate.active_watch()
        assert w is not None and w is plugin._state["watch"]
        assert (w.mode, w.max_recompiles, w.print_summary) == ("warn", {n}, False), (w.mode, w.max_recompiles)
        assert plugin.trace_path().startswith({str(tmp_path / "jg")!r} + "/")
        print("ok")
    """)
    env = _env(tmp_path)
    env.update(JITGUARD="warn", JITGUARD_MAX_RECOMPILES=str(n), JITGUARD_SUMMARY="0",
               JITGUARD_TRACE=str(tmp_path / "jg"), JITGUARD_QUIET="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_run_id_resolution(monkeypatch):
    from jitguard.runtime import process

    for name in ("JITGUARD_RUN_ID", "JITGUARD_RUN_ID_AUTO", "TORCHELASTIC_RUN_ID"):
        monkeypatch.setenv(name, "x")  # so that monkeypatch restores the original state, even
        monkeypatch.delenv(name)       # after run_id(create=True) wrote to os.environ below
    assert process.run_id() is None  # nothing names the run, and a plain watch makes up nothing
    made = process.run_id(create=True)  # the first activated process of a tree names it...
    assert os.environ["JITGUARD_RUN_ID"] == made and process.run_id() == made  # ...for its children
    assert process.new_run_id() != made
    elastic = os.urandom(6).hex()
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", elastic)
    assert process.run_id() == elastic  # torchrun's id (the same on every node) beats a made-up one
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun's default: not an id
    assert process.run_id() == made
    mine = f"job-{RNG.randrange(10**6)}"
    monkeypatch.setenv("JITGUARD_RUN_ID", mine)
    monkeypatch.delenv("JITGUARD_RUN_ID_AUTO")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", elastic)
    assert process.run_id(create=True) == mine  # the user's own id wins


def test_rank_and_pid_placeholders_in_jitguard_trace(monkeypatch, tmp_path):
    from jitguard.runtime.activate import ActivationError, env_settings, trace_path_for_process

    rank, pid = RNG.randrange(0, 512), os.getpid()
    monkeypatch.setenv("JITGUARD_TRACE_CLAIMED", str(pid + 1))  # another process owns plain paths
    tpl = str(tmp_path / "rank{rank}.json")
    assert trace_path_for_process(tpl, rank) == str(tmp_path / f"rank{rank}.json")
    # no rank: the name alone no longer tells processes apart, so a pid goes in as for plain paths
    assert trace_path_for_process(tpl, None) == str(tmp_path / f"ranknone.pid{pid}.json")
    assert trace_path_for_process(str(tmp_path / "r{rank}-p{pid}.json"), None) == str(tmp_path / f"rnone-p{pid}.json")
    assert trace_path_for_process(str(tmp_path / "r{rank:04d}.json"), rank) == str(tmp_path / f"r{rank:04d}.json")
    assert trace_path_for_process(str(tmp_path / "r{rank}") + "/", rank) == \
        str(tmp_path / f"r{rank}" / f"jitguard-trace.rank{rank}.pid{pid}.json")
    assert env_settings({"JITGUARD": "record", "JITGUARD_TRACE": tpl}).trace == tpl
    with pytest.raises(ActivationError, match="unknown placeholder"):
        env_settings({"JITGUARD": "record", "JITGUARD_TRACE": str(tmp_path / "{node}.json")})
    for bad in ("{rank!r}.json", "{rank:z}.json", "a{.json"):
        with pytest.raises(ActivationError, match="JITGUARD_TRACE"):
            env_settings({"JITGUARD": "record", "JITGUARD_TRACE": str(tmp_path / bad)})


SLEEPER = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {tests!r})
    from runtime_helpers import stand_in_driver, FakeTensor, dtype
    from runtime_kernels import fresh
    k = fresh()
    with stand_in_driver():
        x = FakeTensor(16 * 4096, dtype("float16"))
        for n in (17, 32):
            k.warmup(x, x, n, BLOCK=64, grid=(1,))
    print("ready", os.getpid(), flush=True)
    time.sleep(120)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its parent counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("how", ["SIGTERM to jitguard run", "SIGINT to the process group", "SIGINT to jitguard run"])
def test_signals_reach_the_command_which_writes_its_trace(tmp_path, how):
    import signal
    import time

    (tmp_path / "prog.py").write_text(SLEEPER.format(tests=TESTS))
    proc = subprocess.Popen([sys.executable, "-m", "jitguard", "run", "--mode", "record", "--trace", "t.json",
                             "--", sys.executable, "prog.py"], cwd=tmp_path, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("ready"), proc.stderr.read()
        child = int(line.split()[1])
        if how.startswith("SIGTERM"):
            os.kill(proc.pid, signal.SIGTERM)
            want = 128 + signal.SIGTERM
        elif how.endswith("group"):
            # what Ctrl-C does: every process of the group; jitguard run, with no terminal to tell it
            # so, passes it on only if the command has not ended within the grace period (a second
            # SIGINT while the command unwinds from the first could cut its trace short)
            os.killpg(proc.pid, signal.SIGINT)
            want = 128 + signal.SIGINT
        else:  # to jitguard run alone: passed on after the grace period
            os.kill(proc.pid, signal.SIGINT)
            want = 128 + signal.SIGINT
        rc = proc.wait(timeout=60)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert rc == want, err
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the command was left running"
    trace = load_trace(tmp_path / "t.json")
    assert [e.variant for e in trace.events] == [1, 2]


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc")
def test_jitguard_run_sleeps_while_the_command_runs(tmp_path):
    # it waits for the command without waking up to look at the clock (a SIGINT to pass on ends the
    # wait): a long serving run costs it nothing
    import signal
    import time

    def switches(pid: int) -> int:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("voluntary_ctxt_switches"))

    (tmp_path / "prog.py").write_text("import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-m", "jitguard", "run", "--mode", "record", "--trace", "t.json",
                             "--", sys.executable, "prog.py"], cwd=tmp_path, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().startswith("ready"), proc.stderr.read()
        time.sleep(0.3)
        before = switches(proc.pid)
        time.sleep(1.0)
        assert switches(proc.pid) - before <= 2  # a 0.1 s poll would be about 10
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def test_could_not_activate_is_said_once_by_jitguard_run(tmp_path):
    """Child Pythons that cannot import jitguard (another venv) run jitguard's sitecustomize too:
    one line from `jitguard run` at the end, not one on each child's stderr."""
    broken = tmp_path / "other_venv" / "jitguard"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('no jitguard in this venv')\n")
    (tmp_path / "prog.py").write_text(textwrap.dedent(f"""
        import os, subprocess, sys
        env = dict(os.environ)
        parts = env["PYTHONPATH"].split(os.pathsep)  # jitguard's site dir first, then the broken venv
        env["PYTHONPATH"] = os.pathsep.join(parts[:1] + [{str(broken.parent)!r}] + parts[1:])
        for _ in range(3):
            subprocess.run([sys.executable, "-c", "print('child ran')"], env=env, check=True)
    """))
    r = _jitguard("run", "--mode", "record", "--trace", "t.json", "--", sys.executable, "prog.py",
                  cwd=tmp_path, env=_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("child ran") == 3
    lines = [ln for ln in r.stderr.splitlines() if "could not activate" in ln]
    assert len(lines) == 1, r.stderr
    assert "3 Python processes" in lines[0] and "no jitguard in this venv" in lines[0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_worker_ended_by_sigterm_writes_no_trace(tmp_path):
    """multiprocessing's terminate() sends SIGTERM to forked workers, which hold a copy of the
    parent's watch: only the process that started the watch writes a trace."""
    (tmp_path / "prog.py").write_text(textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {TESTS!r})
        from runtime_helpers import stand_in_driver, FakeTensor, dtype
        from runtime_kernels import fresh
        k = fresh()
        with stand_in_driver():
            k.warmup(FakeTensor(16 * 4096, dtype("float16")), FakeTensor(16 * 4096, dtype("float16")), 17,
                     BLOCK=64, grid=(1,))
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        time.sleep(0.5)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        print("worker", os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM)
    """))
    r = _jitguard("run", "--mode", "record", "--trace", "traces/", "--", sys.executable, "prog.py",
                  cwd=tmp_path, env=_env(tmp_path))
    assert r.returncode == 0 and "worker True" in r.stdout, r.stderr
    assert len(os.listdir(tmp_path / "traces")) == 1  # the parent's only
