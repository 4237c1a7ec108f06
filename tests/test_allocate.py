"""Allocation hooks: ``[allocate]`` runs a real command that prints the workers (loopback
sshd servers the test started), ``[release]`` runs at the end whatever happened (done,
Ctrl-C, SIGKILL of washout, a failed allocation), and ``resume`` allocates again."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, ok_trials, trial_workers, wait_for, washout
from sshd import SshdFarm, sshd_farm  # noqa: F401 (fixture)

from washout.errors import WashoutError
from washout.harness.allocation import parse_hosts
from washout.harness.spec import AllocateSpec


def hook_spec(tmp_path: Path, hosts: list[dict], runs: int = 2, test: str = "true") -> Path:
    """A spec whose [allocate] prints ``hosts`` as JSON and logs each call (with the
    stored workers it was told of), and whose [release] logs that it ran."""
    (tmp_path / "hosts.json").write_text(json.dumps(hosts))
    log = tmp_path / "log"
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""
[experiment]
name = "hooks"
runs = {runs}
seed = 1

[allocate]
command = 'echo "allocate $WASHOUT_WORKERS" >> {log}; cat {tmp_path / "hosts.json"}'
workers = {len(hosts)}

[release]
command = 'echo "release $WASHOUT_HOSTS" >> {log}'

[[test]]
name = "a"
command = "{test}"

[[test]]
name = "b"
command = "{test}"
""")
    return spec


def farm_hosts(farm: SshdFarm, n: int) -> list[dict]:
    return [
        {
            "name": f"w{i}",
            "host": "127.0.0.1",
            "port": server.port,
            "user": server.user,
            "key": str(server.client_key),
            "known_hosts": str(farm.known_hosts),
        }
        for i, server in enumerate(farm.start(n))
    ]


def log_lines(tmp_path: Path) -> list[str]:
    path = tmp_path / "log"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.ssh
def test_allocated_workers_run_the_experiment_and_are_released(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    spec = hook_spec(tmp_path, farm_hosts(sshd_farm, 2))
    db = tmp_path / "x.db"
    washout("run", spec, "--db", db, "-q")
    assert trial_workers(db) == {"w0", "w1"}
    assert log_lines(tmp_path) == ["allocate ", "release 127.0.0.1 127.0.0.1"]


@pytest.mark.ssh
@pytest.mark.timeout(200)
def test_ctrl_c_releases_and_resume_allocates_the_same_workers_again(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    spec = hook_spec(tmp_path, farm_hosts(sshd_farm, 1), runs=6, test="sleep 0.3")
    db = tmp_path / "x.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "washout", "run", str(spec), "--db", str(db), "-q"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: ok_trials(db) >= 2, 60, "no trial finished")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert log_lines(tmp_path) == ["allocate ", "release 127.0.0.1"]
    washout("resume", db, "-q", timeout=120)
    assert log_lines(tmp_path)[2:] == ["allocate w0", "release 127.0.0.1"]
    assert trial_workers(db) == {"w0"} and ok_trials(db) >= 2 * 2 * 6


@pytest.mark.ssh
def test_resume_refuses_workers_of_other_names(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    hosts = farm_hosts(sshd_farm, 1)
    spec = hook_spec(tmp_path, hosts)
    db = tmp_path / "x.db"
    washout("run", spec, "--db", db, "-q")
    with sqlite3.connect(db) as c:  # as if the last run had been cut short
        last = "(SELECT max(id) FROM trial)"
        c.execute(f"DELETE FROM metric WHERE trial_id = {last}")
        c.execute(f"DELETE FROM trial WHERE id = {last}")
    (tmp_path / "hosts.json").write_text(json.dumps([{**hosts[0], "name": "other"}]))
    proc = washout("resume", db, "-q", check=False)
    assert proc.returncode == 3
    (line,) = proc.stderr.strip().splitlines()
    assert "printed workers ['other'] on resume" in line and "['w0']" in line
    assert log_lines(tmp_path)[-1] == "release 127.0.0.1"  # what it allocated is given back


@pytest.mark.ssh
def test_sigkill_of_washout_still_runs_the_release(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    spec = hook_spec(tmp_path, farm_hosts(sshd_farm, 1), runs=50, test="sleep 0.3")
    db = tmp_path / "x.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "washout", "run", str(spec), "--db", str(db), "-q"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: ok_trials(db) >= 1, 60, "no trial finished")
    assert log_lines(tmp_path) == ["allocate "]
    proc.kill()
    proc.wait()
    wait_for(lambda: len(log_lines(tmp_path)) == 2, 20, "the release did not run")
    assert log_lines(tmp_path)[1] == "release 127.0.0.1"  # the guard knew the hosts


@pytest.mark.parametrize(
    "printed, expected",
    [
        ("exit 7", "allocate.command 'exit 7' failed: exit code 7"),
        ("echo onlyone", "1 host(s), but allocate.workers = 2"),
        ("echo '[1, 2]'", "entry 1 = 1: expected a host or a table"),
        ("echo '{not json'", "not valid JSON"),
    ],
)
def test_a_failed_allocation_is_one_line_and_still_released(
    tmp_path: Path, printed: str, expected: str
) -> None:
    log = tmp_path / "log"
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""
[allocate]
command = "{printed}"
workers = 2
[release]
command = "echo released >> {log}"
[[test]]
name = "a"
command = "true"
""")
    proc = washout("run", spec, "--db", tmp_path / "x.db", "-q", check=False)
    assert proc.returncode == 3
    (line,) = proc.stderr.strip().splitlines()
    assert expected in line, line
    assert log.read_text() == "released\n"


def test_hosts_are_read_from_lines_or_json_with_the_tables_defaults() -> None:
    spec = AllocateSpec(command="x", workers=2, user="bench", port=2222)
    lines = parse_hosts("# two nodes\nnode1\n\n  node2  \n", spec, "s.toml")
    assert [(w.host, w.user, w.port, w.label) for w in lines] == [
        ("node1", "bench", 2222, "node1:2222"),  # named as a [[worker]] would be
        ("node2", "bench", 2222, "node2:2222"),
    ]
    tables = parse_hosts('[{"host": "10.0.0.7", "name": "n0", "port": 22}, "10.0.0.8"]', spec, "s")
    assert [(w.host, w.port, w.label) for w in tables] == [
        ("10.0.0.7", 22, "n0"),
        ("10.0.0.8", 2222, "10.0.0.8:2222"),
    ]
    with pytest.raises(WashoutError, match=r"unknown key 'hots'.*did you mean 'host'"):
        parse_hosts('[{"hots": "a"}, "b"]', spec, "s")
    with pytest.raises(WashoutError, match="two hosts have one name"):
        parse_hosts("a\na\n", spec, "s")
