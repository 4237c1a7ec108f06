"""Slurm workers against the real single-host Slurm of scripts/services/slurm.sh: a real
experiment through it, every trial on the node it allocated, and no job left behind after
the end, Ctrl-C, SIGTERM, SIGKILL or a failing trial; resume allocates again. The spec's
``[cluster]`` table is checked up front without Slurm."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, ok_trials, trial_workers, wait_for, washout
from sshd import run_async

from washout.harness.allocation import salloc_argv
from washout.harness.executors.base import CommandOptions
from washout.harness.executors.slurm import SlurmExecutor
from washout.harness.spec import ClusterSpec, parse_spec_text

STATUS_FILE = Path(os.environ.get("WASHOUT_SLURM_STATUS", "/tmp/washout-slurm-unavailable"))


def _node() -> str | None:
    """The idle or allocated node of the local Slurm, if it answers."""
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%N %T"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.stdout.splitlines():
        node, state = line.split()
        if state.rstrip("*~#") in ("idle", "mixed", "allocated", "completing"):
            return node
    return None


@pytest.fixture(scope="module")
def node() -> str:
    """The Slurm node; skip only when scripts/services/slurm.sh said why it could not
    start Slurm, otherwise a missing Slurm is a failure."""
    found = _node()
    if found is None:
        if STATUS_FILE.exists():
            pytest.skip(f"Slurm unavailable: {STATUS_FILE.read_text().strip()}")
        pytest.fail("no Slurm node answers: run scripts/services/slurm.sh")
    return found


def jobs_of(experiment: str) -> list[str]:
    """Slurm jobs (any state) a washout session of ``experiment`` holds."""
    out = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True, check=True)
    return [j for j in out.stdout.split() if j.startswith(f"washout-{experiment}-")]


def spec_text(name: str, tests: str, runs: int = 2) -> str:
    return f"""
[experiment]
name = "{name}"
runs = {runs}
seed = 3

[cluster]
kind = "slurm"
nodes = 1
time_limit = "10m"
{tests}
"""


QUICK = """
[reset]
command = "true"

[[test]]
name = "a"
command = "true"

[[test]]
name = "host"
command = "hostname -s"
[test.metrics.n]
regex = '(?P<value>[0-9]*)'
"""


def statuses(db: Path) -> list[str]:
    with sqlite3.connect(db) as c:
        return [s for (s,) in c.execute("SELECT status FROM trial WHERE superseded = 0")]


@pytest.mark.slurm
def test_an_experiment_runs_on_the_node_slurm_allocates_and_gives_it_back(
    node: str, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.toml"
    resets = tmp_path / "resets"
    tests = f"""
[reset]
command = "hostname -s >> {resets}"

[[test]]
name = "env"
command = 'test "$FROM_SPEC" = here && test "$(pwd)" = {tmp_path}'
env = {{ FROM_SPEC = "here" }}
cwd = "{tmp_path}"

[[test]]
name = "quick"
command = "true"
"""
    spec.write_text(spec_text("slurm-run", tests))
    db = tmp_path / "x.db"
    proc = washout("run", spec, "--db", db, "-q", check=False)
    assert proc.returncode == 0, proc.stderr
    assert trial_workers(db) == {node}
    assert resets.read_text().split() == [node] * 4  # each run's reset ran as a step
    with sqlite3.connect(db) as c:
        env_status = {s for (s,) in c.execute("SELECT status FROM trial WHERE test = 'env'")}
        events = [k for (k,) in c.execute("SELECT kind FROM event")]
    assert env_status == {"ok"}  # env and cwd reached the node through srun
    assert events.count("allocate") == 1 and events.count("release") == 1
    assert jobs_of("slurm-run") == []


def _executor_job(node: str) -> tuple[str, str]:
    """A job of our own for executor-level tests: (job id, its name)."""
    name = f"washout-exec-test-{os.getpid()}"
    out = subprocess.run(
        ["salloc", "--no-shell", "-N1", f"--job-name={name}", "--time=5", f"-w{node}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stderr.split("Granted job allocation ")[1].split()[0], name


@pytest.mark.slurm
def test_steps_keep_the_nodes_status_wall_and_timeout(node: str, tmp_path: Path) -> None:
    job, name = _executor_job(node)
    try:
        ex = SlurmExecutor(job, node, str(tmp_path))

        async def scenario() -> list:
            await ex.connect()
            failed = await ex.run("echo out; echo err >&2; exit 3", CommandOptions(timeout=30))
            slept = await ex.run("sleep 0.3", CommandOptions(timeout=30, health="/"))
            timed = await ex.run(
                f"echo $$ > {tmp_path}/pid; exec sleep 60", CommandOptions(timeout=1)
            )
            (tmp_path / "metric.json").write_text('{"v": 2}')
            read = await ex.read_file("metric.json", str(tmp_path))
            await ex.remove_file("metric.json", str(tmp_path))
            await ex.remove_file("metric.json", str(tmp_path))  # none there is fine
            (tmp_path / "dir").mkdir()
            refused = []
            for call in (ex.read_file("dir", str(tmp_path)), ex.remove_file("dir", str(tmp_path))):
                try:
                    await call
                except OSError as err:
                    refused.append(str(err))
            return [failed, slept, timed, read, refused]

        failed, slept, timed, read, refused = run_async(scenario())
        assert (failed.status, failed.exit_code, failed.reason) == ("failed", 3, "exit code 3")
        assert failed.stdout == b"out\n" and failed.stderr.strip() == b"err"  # no marker left
        assert slept.status == "ok" and 0.3 <= slept.duration < 0.6  # the node's own clock
        assert slept.health == {}  # not this machine's around srun: not the trial's
        assert timed.status == "timeout"
        pid = int((tmp_path / "pid").read_text())
        wait_for(lambda: not Path(f"/proc/{pid}").exists(), 10, "the timed-out step survived")
        assert read == b'{"v": 2}' and not (tmp_path / "metric.json").exists()
        assert refused == ["not a regular file", "not a regular file"]
    finally:
        subprocess.run(["scancel", f"--name={name}"], check=True)


def _start(spec: Path, db: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "washout", "run", str(spec), "--db", str(db), "-q"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


SLOW_TESTS = """
[[test]]
name = "a"
command = "sleep 0.4"

[[test]]
name = "b"
command = "sleep 0.4"
"""


@pytest.mark.slurm
@pytest.mark.timeout(240)
def test_ctrl_c_releases_the_allocation_and_resume_allocates_again(
    node: str, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text("slurm-intr", SLOW_TESTS, runs=4))
    db = tmp_path / "x.db"
    proc = _start(spec, db)
    wait_for(lambda: ok_trials(db) >= 2, 120, "no trial finished")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert jobs_of("slurm-intr") == []
    done = washout("resume", db, "-q", timeout=180)
    assert done.returncode == 0
    assert trial_workers(db) == {node}
    assert set(statuses(db)) == {"ok"} and len(statuses(db)) == 2 * 2 * 4
    with sqlite3.connect(db) as c:
        events = [k for (k,) in c.execute("SELECT kind FROM event")]
    assert events.count("allocate") == 2 and events.count("release") == 2
    assert jobs_of("slurm-intr") == []


@pytest.mark.slurm
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_sigterm_and_sigkill_of_washout_leave_no_job(
    node: str, tmp_path: Path, sig: signal.Signals
) -> None:
    name = f"slurm-{sig.name.lower()}"
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(name, SLOW_TESTS, runs=20))
    db = tmp_path / "x.db"
    proc = _start(spec, db)
    wait_for(lambda: ok_trials(db) >= 1, 120, "no trial finished")
    assert jobs_of(name), "the session holds no job while it runs"
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    assert proc.returncode == (143 if sig == signal.SIGTERM else -9)
    # after SIGKILL the release guard cancels the job once washout is gone
    wait_for(lambda: not jobs_of(name), 30, f"a job survived {sig.name}")


@pytest.mark.slurm
def test_a_failing_trial_under_abort_releases_the_allocation(node: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    tests = '[[test]]\nname = "crash"\ncommand = "sh -c \'kill -SEGV $$\'"\n'
    spec.write_text(
        spec_text("slurm-crash", tests).replace("seed = 3", 'seed = 3\non_failure = "abort"')
    )
    db = tmp_path / "x.db"
    proc = washout("run", spec, "--db", db, "-q", check=False)
    assert proc.returncode == 5, proc.stderr
    with sqlite3.connect(db) as c:
        (reason,) = c.execute("SELECT reason FROM trial").fetchone()
    assert reason == "killed by signal 11"
    assert jobs_of("slurm-crash") == []


@pytest.mark.slurm
def test_reboot_through_slurm_is_refused_where_the_site_has_no_reboot_program(
    node: str, tmp_path: Path
) -> None:
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True)
    if "RebootProgram           = (null)" not in config.stdout:
        pytest.skip("this Slurm has a RebootProgram: rebooting its node would stop the tests")
    spec = tmp_path / "spec.toml"
    spec.write_text(
        spec_text("slurm-reboot", QUICK.replace('command = "true"\n', 'kind = "reboot"\n', 1))
    )
    proc = washout("run", spec, "--db", tmp_path / "x.db", "-q", check=False)
    assert proc.returncode == 3
    (line,) = proc.stderr.strip().splitlines()
    assert "no RebootProgram" in line and "Traceback" not in proc.stderr
    assert jobs_of("slurm-reboot") == []


@pytest.mark.parametrize(
    "cluster, expected",
    [
        ('kind = "pbs"', "cluster.kind = 'pbs'"),
        ('kind = "slurm"\nnodes = 0', "cluster.nodes = 0"),
        ('kind = "slurm"\nargs = ["-N", "2"]', "washout sets -N itself"),
        ('kind = "slurm"\nargs = ["--time=5"]', "washout sets --time itself"),
        ('kind = "slurm"\nargs = ["gpu"]', "is not an option"),
        ('kind = "slurm"\ntime_limit = "soon"', "cluster.time_limit = 'soon'"),
        ('kind = "slurm"\nnode = 2', "unknown key 'node' in [cluster] (did you mean 'nodes'?)"),
    ],
)
def test_a_bad_cluster_table_is_one_line_naming_the_field(
    tmp_path: Path, cluster: str, expected: str
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(f'[cluster]\n{cluster}\n\n[[test]]\nname = "a"\ncommand = "true"\n')
    proc = washout("validate", spec, check=False)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert str(spec) in line and expected in line, line


def test_cluster_and_workers_are_exclusive_and_the_plan_counts_nodes(tmp_path: Path) -> None:
    both = '[cluster]\nkind = "slurm"\n[[worker]]\nhost = "a"\n'
    both += '[[test]]\nname = "a"\ncommand = "true"\n'
    spec = tmp_path / "spec.toml"
    spec.write_text(both)
    proc = washout("validate", spec, check=False)
    assert proc.returncode == 2 and "both [[worker]] and [cluster]" in proc.stderr
    parsed = parse_spec_text(
        '[experiment]\nruns = 2\n[cluster]\nkind = "slurm"\nnodes = 3\n'
        '[[test]]\nname = "a"\ncommand = "true"\n',
        "s",
    )
    assert parsed.schedules == 3
    spec.write_text(
        '[experiment]\nruns = 2\n[cluster]\nkind = "slurm"\nnodes = 3\n'
        '[[test]]\nname = "a"\ncommand = "true"\n'
    )
    assert "3 worker(s): 12 trials planned" in washout("validate", spec).stdout


@pytest.mark.slurm
def test_the_example_runs_on_the_node_and_leaves_no_job(node: str, tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    washout("run", ROOT / "examples/slurm/spec.toml", "--runs", "2", "--db", db, "-q")
    assert trial_workers(db) == {node} and len(statuses(db)) == 2 * 2 * 2
    assert jobs_of("slurm-example") == []


def test_salloc_asks_for_one_node_with_the_clusters_options() -> None:
    cluster = ClusterSpec.model_validate(
        {
            "kind": "slurm",
            "nodes": 2,
            "partition": "compute",
            "time_limit": "90s",
            "exclusive": True,
            "args": ["--account=perf"],
        }
    )
    assert salloc_argv(cluster, "washout-x-1", node="n1", exclude=["n0"], reboot=True) == [
        "salloc",
        "--no-shell",
        "--nodes=1",
        "--job-name=washout-x-1",
        "--partition=compute",
        "--time=2",  # minutes, rounded up: never shorter than asked
        "--exclusive",
        "--nodelist=n1",
        "--exclude=n0",
        "--reboot",
        "--account=perf",
    ]
    bare = ClusterSpec.model_validate({"kind": "slurm"})
    assert salloc_argv(bare, "j") == ["salloc", "--no-shell", "--nodes=1", "--job-name=j"]
