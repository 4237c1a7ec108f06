"""Experiments on SSH workers through the real CLI, against real sshd servers on loopback:
several workers at once, sync, pinning, one worker that cannot connect, host key checks,
~/.ssh/config aliases with ProxyJump and keys from ssh-agent."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import exported, washout
from sshd import Sshd, SshdFarm, free_port, run_async, sshd_farm  # noqa: F401 (fixture)

from washout.errors import WashoutError
from washout.harness.executors.base import CommandOptions
from washout.harness.executors.ssh import SSHExecutor
from washout.harness.executors.ssh_copy import sftp
from washout.harness.spec import WorkerSpec

pytestmark = pytest.mark.ssh


def query(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def test_two_workers_concurrent_synced_pinned_with_per_worker_results(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    a, b = sshd_farm.start(2)
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "build.txt").write_text("build 42\n")
    (src / "sub" / "data.txt").write_text("payload\n")
    wa, wb = tmp_path / "wa", tmp_path / "wb"
    wa.mkdir()
    (wa / "stale.txt").write_text("left over from an older build\n")
    spec = tmp_path / "spec.toml"
    spec.write_text(
        """
[experiment]
name = "two"
runs = 1
seed = 3
sync = "src"
cpus = "0"

[provenance]
files = ["build.txt"]

[setup]      # slow on wa only: wb must not wait for it
command = 'case "$PWD" in */wa) sleep 4;; esac'

[[test]]
name = "pinned"
command = "grep Cpus_allowed_list: /proc/self/status | cut -f2"
[test.metrics.cpu]
stdout = "last-number"

[[test]]
name = "synced"
command = "cat sub/data.txt build.txt; echo 7 > result.txt"
[test.metrics.result]
file = "result.txt"
"""
        + a.worker_toml("wa", sshd_farm.known_hosts, wa)
        + b.worker_toml("wb", sshd_farm.known_hosts, wb)
    )
    db = tmp_path / "two.db"
    washout("run", spec, "--db", db, "--quiet")

    frame = exported(db)
    assert set(frame["worker"]) == {"wa", "wb"}
    assert set(frame["status"]) == {"ok"}
    for _worker, rows in frame.groupby("worker"):
        assert len(rows) == 2 * 2  # 2 tests x (1 fixed + 1 random run), one metric each
        assert (rows[rows["metric"] == "cpu"]["value"] == 0).all()  # taskset -c 0 applied
        assert (rows[rows["metric"] == "result"]["value"] == 7).all()  # read on the worker
    assert {c for (c,) in query(db, "SELECT DISTINCT cpus FROM trial")} == {"0"}
    outputs = {o for (o,) in query(db, "SELECT stdout_tail FROM trial WHERE test = 'synced'")}
    assert outputs == {"payload\nbuild 42\n"}
    assert not (wa / "stale.txt").exists()  # the workdir is an exact copy of src
    assert (wb / "sub" / "data.txt").read_text() == "payload\n"
    ((wa_ready,),) = query(db, "SELECT time FROM event WHERE kind = 'setup' AND worker = 'wa'")
    ((wb_done,),) = query(
        db,
        "SELECT max(t.ended) FROM trial t JOIN run r ON t.run_id = r.id "
        "JOIN worker w ON r.worker_id = w.id WHERE w.name = 'wb'",
    )
    assert wb_done < wa_ready  # the workers ran concurrently
    hosts = dict(query(db, "SELECT name, host FROM worker"))
    assert hosts == {"wa": f"127.0.0.1:{a.port}", "wb": f"127.0.0.1:{b.port}"}


def test_unreachable_and_untrusted_workers_fail_alone(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    (good,) = sshd_farm.start(1)
    (untrusted,) = sshd_farm.start(1, trust=False)
    dead_port = free_port()
    kh = sshd_farm.known_hosts
    spec = tmp_path / "spec.toml"
    spec.write_text(
        """
[experiment]
name = "partial"
runs = 1
seed = 1

[[test]]
name = "t"
command = "true"
"""
        + good.worker_toml("good", kh)
        + untrusted.worker_toml("untrusted", kh)
        + f"""
[[worker]]
name = "dead"
host = "127.0.0.1"
port = {dead_port}
key = "{sshd_farm.client_key}"
known_hosts = "{kh}"
"""
    )
    db = tmp_path / "partial.db"
    proc = washout("run", spec, "--db", db, "--quiet", check=False)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    frame = exported(db)
    assert set(frame["worker"]) == {"good"} and len(frame) == 2
    events = dict(query(db, "SELECT worker, message FROM event WHERE kind = 'error'"))
    assert f"cannot connect to 127.0.0.1 port {dead_port}" in events["dead"]
    scan = f"ssh-keyscan -p {untrusted.port} 127.0.0.1 >> {kh}"
    assert f"the host key of [127.0.0.1]:{untrusted.port} is not in {kh}" in events["untrusted"]
    assert scan in events["untrusted"] and "never accepts" in events["untrusted"]
    assert "Worker untrusted stopped: worker untrusted: the host key" in proc.stdout
    assert "\n" not in events["untrusted"]

    # Doing what the message says trusts the key; resume then runs that worker too.
    subprocess.run(scan, shell=True, check=True, capture_output=True)
    proc = washout("resume", db, "--quiet", check=False)
    assert proc.returncode == 3  # "dead" is still down
    assert set(exported(db)["worker"]) == {"good", "untrusted"}


def test_changed_host_key_is_refused(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    (server,) = sshd_farm.start(1)
    impostor = Sshd(tmp_path / "impostor", sshd_farm.client_key)  # a different host key
    sshd_farm.known_hosts.write_text(
        impostor.known_hosts_line().replace(f":{impostor.port}", f":{server.port}")
    )
    worker = WorkerSpec(
        host="127.0.0.1",
        port=server.port,
        key=str(sshd_farm.client_key),
        known_hosts=str(sshd_farm.known_hosts),
        name="w",
    )
    with pytest.raises(WashoutError) as err:
        run_async(SSHExecutor(worker).connect())
    assert "unknown, or changed since it was recorded" in str(err.value)


def test_ssh_config_alias_proxyjump_and_agent(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    jump, target = sshd_farm.start(2)
    home = Path(os.environ["HOME"])
    (home / ".ssh" / "known_hosts").write_text(sshd_farm.known_hosts.read_text())
    (home / ".ssh" / "config").write_text(f"""
Host jumphost
    HostName 127.0.0.1
    Port {jump.port}
    User {jump.user}
Host bench-target
    HostName 127.0.0.1
    Port {target.port}
    User {target.user}
    ProxyJump jumphost
""")
    sock = tmp_path / "agent.sock"
    agent = subprocess.run(
        ["ssh-agent", "-a", str(sock)], capture_output=True, text=True, check=True
    )
    agent_pid = int(agent.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(
            ["ssh-add", str(sshd_farm.client_key)], env=env, check=True, capture_output=True
        )
        os.environ["SSH_AUTH_SOCK"] = str(sock)  # restored by the fixture's monkeypatch
        executor = SSHExecutor(WorkerSpec(host="bench-target"))

        async def go() -> tuple[str, list[int]]:
            await executor.connect()
            try:
                result = await executor.run("echo $SSH_CONNECTION", CommandOptions(timeout=30))
                return result.stdout.decode(), jump.session_pids()
            finally:
                await executor.close()

        assert jump.session_pids() == []
        out, via_jump = run_async(go())
        assert out.split()[2:] == ["127.0.0.1", str(target.port)]
        assert via_jump, "the connection did not go through the jump host"
    finally:
        os.kill(agent_pid, 15)


def test_sftp_copy_when_rsync_is_absent(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    (server,) = sshd_farm.start(1)
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f.bin").write_bytes(bytes(range(256)) * 100)
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    workdir = tmp_path / "w"
    workdir.mkdir()
    (workdir / "old").write_text("stale")
    executor = SSHExecutor(
        WorkerSpec(
            host="127.0.0.1",
            port=server.port,
            workdir=str(workdir),
            key=str(sshd_farm.client_key),
            known_hosts=str(sshd_farm.known_hosts),
        )
    )

    async def go() -> bytes:
        await executor.connect()
        try:
            await sftp(executor.link, executor.run, src, str(workdir))
            return (
                await executor.run("./run.sh", CommandOptions(timeout=30, cwd=str(workdir)))
            ).stdout
        finally:
            await executor.close()

    assert run_async(go()) == b"ran\n"
    assert (workdir / "d" / "f.bin").read_bytes() == bytes(range(256)) * 100
    assert not (workdir / "old").exists()


def test_sync_refuses_a_broad_workdir(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    (server,) = sshd_farm.start(1)
    (tmp_path / "src").mkdir()
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[experiment]\nruns = 1\nsync = "src"\n[[test]]\nname = "t"\n'
        'command = "true"\n' + server.worker_toml("w", sshd_farm.known_hosts, Path("/tmp"))
    )
    proc = washout("run", spec, "--db", tmp_path / "x.db", "--quiet", check=False)
    assert proc.returncode == 3
    assert "workdir = '/tmp': too broad for experiment.sync" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_untrusted_alias_gets_the_keyscan_line_for_its_real_address(sshd_farm: SshdFarm) -> None:
    (server,) = sshd_farm.start(1, trust=False)
    home = Path(os.environ["HOME"])
    (home / ".ssh" / "config").write_text(
        f"Host lab-node\n  HostName 127.0.0.1\n  Port {server.port}\n"
        f"  IdentityFile {sshd_farm.client_key}\n"
    )
    with pytest.raises(WashoutError) as err:
        run_async(SSHExecutor(WorkerSpec(host="lab-node")).connect())
    assert str(err.value).startswith(
        f"worker lab-node: the host key of [127.0.0.1]:{server.port} is not in ~/.ssh/known_hosts"
    )
    assert f"ssh-keyscan -p {server.port} 127.0.0.1 >> ~/.ssh/known_hosts" in str(err.value)
