"""What goes wrong with real workers, against real sshd servers: a connection dropped in
the middle of a trial, reboot resets (simulated by killing and restarting a worker's sshd
with a new boot id), provenance that differs between workers, timeouts and stray children
on the worker."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import alive, wait_for, washout
from sshd import SshdFarm, run_async, sshd_farm  # noqa: F401 (fixture)

from washout.errors import WashoutError
from washout.harness.executors.base import CommandOptions
from washout.harness.executors.ssh import SSHExecutor
from washout.harness.spec import WorkerSpec

pytestmark = pytest.mark.ssh


def query(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def test_connection_dropped_mid_trial_reruns_the_run_whole_and_kills_the_orphan(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    """The trial in flight is kept as interrupted, not as a failure that ``record`` would
    count as done; its run is re-run whole after the reconnection (the attempt kept as
    superseded), and the command left running on the worker is killed."""
    (server,) = sshd_farm.start(1)
    first = tmp_path / "first"
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"""
[experiment]
name = "drop"
runs = 1
seed = 5
orders = ["fixed"]
on_failure = "record"

[[test]]
name = "fast"
command = "echo fast"

[[test]]
name = "slow"
command = "if mkdir {first} 2>/dev/null; then echo $$ > {first}/pid; sleep 60; fi; echo done"

[[test]]
name = "last"
command = "echo last"
"""
        + server.worker_toml("w", sshd_farm.known_hosts)
    )
    db = tmp_path / "drop.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "washout", "run", str(spec), "--db", str(db), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: (first / "pid").exists() and (first / "pid").read_text().strip(), 60)
        orphan = int((first / "pid").read_text())
        for pid in server.session_pids():  # the sshd process serving washout's connection
            os.kill(pid, 9)
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 0, out + err
    attempts = query(db, "SELECT test, status, superseded, reason FROM trial ORDER BY id")
    assert [a[:3] for a in attempts] == [
        ("fast", "ok", 1),
        ("slow", "interrupted", 1),
        ("fast", "ok", 0),
        ("slow", "ok", 0),
        ("last", "ok", 0),
    ]
    assert "connection lost" in attempts[1][3]
    frame = pd.read_csv(io.StringIO(washout("export", db).stdout))
    frame = frame[frame["metric"] == "wall"]
    assert list(frame["test"]) == ["fast", "slow", "last"] and set(frame["status"]) == {"ok"}
    assert not alive(orphan)  # killed on reconnect, not left to run its 60 s


def test_a_worker_lost_for_good_keeps_its_trial_interrupted_and_nothing_it_never_ran(
    sshd_farm: SshdFarm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No row stays running, no trial that never started is recorded, and once the worker
    is back ``resume`` completes the plan with every run whole."""
    from concurrent.futures import ThreadPoolExecutor

    from test_robustness import check_store_against_plan

    from washout.harness.engine import Experiment, execute
    from washout.harness.spec import load_spec

    monkeypatch.setattr("washout.harness.executors.ssh_connection.RECONNECT_WINDOW", 2.0)
    (server,) = sshd_farm.start(1)
    pid_file = tmp_path / "pid"
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(
        f"""
[experiment]
name = "gone"
runs = 1
seed = 3
on_failure = "record"

[[test]]
name = "first"
command = "if [ ! -e {pid_file} ]; then echo $$ > {pid_file}; sleep 60; fi"

[[test]]
name = "second"
command = "true"
"""
        + server.worker_toml("w", sshd_farm.known_hosts)
    )
    spec, text = load_spec(spec_path)
    experiment = Experiment.prepare(spec, text, str(spec_path))
    db = tmp_path / "gone.db"
    store = experiment.create_store(db)
    try:
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(execute, experiment, store)
            wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 60)
            server.stop()  # the worker vanishes for good
            outcome = running.result(timeout=90)
        assert "could not be re-established within 2 s" in outcome.worker_errors["w"]
        rows = query(db, "SELECT test, status, reason FROM trial ORDER BY id")
        assert [r[:2] for r in rows if r[0] == "first"][-1] == ("first", "interrupted")
        assert "connection lost" in rows[-1][2]
        assert all(status in ("ok", "interrupted") for _, status, _ in rows)  # no running row
        assert rows[-1][:2] == ("first", "interrupted")  # nothing begun after it
        server.start()
        assert execute(experiment, store).complete
    finally:
        store.close()
    check_store_against_plan(db, 2, 1, 3)


def test_reboot_reset_waits_reconnects_and_checks_the_boot_id(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    (server,) = sshd_farm.start(1)
    script = server.reboot_script(down=0.5)
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"""
[experiment]
name = "reboots"
runs = 1
seed = 2

[reset]
kind = "reboot"
command = "{script}"
timeout = "30s"

[[test]]
name = "t"
command = "cat {server.boot_id_file}"
"""
        + server.worker_toml(
            "w", sshd_farm.known_hosts, extra=f'boot_id_command = "cat {server.boot_id_file}"'
        )
    )
    initial = server.boot_id_file.read_text().strip()
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet")
    infos = [i for (i,) in query(db, "SELECT reset_info FROM run ORDER BY idx")]
    assert len(infos) == 2
    ids = [initial]
    for info in infos:
        assert info.startswith(f"reboot: {script}; gone after ")
        before, after = info.split("boot id ")[1].split(" -> ")
        assert before == ids[-1] and after != before
        ids.append(after)
    # Each trial ran after its run's reboot: it saw that run's new boot id.
    seen = [
        s.strip()
        for (s,) in query(
            db, "SELECT t.stdout_tail FROM trial t JOIN run r ON t.run_id = r.id ORDER BY r.idx"
        )
    ]
    assert seen == ids[1:]
    times = query(db, "SELECT reset_started, reset_ended FROM run")
    assert all(start < end for start, end in times)


def test_reboot_without_a_new_boot_id_is_an_error(sshd_farm: SshdFarm) -> None:
    (server,) = sshd_farm.start(1)
    worker = WorkerSpec(
        host="127.0.0.1",
        port=server.port,
        key=str(sshd_farm.client_key),
        known_hosts=str(sshd_farm.known_hosts),
        name="w",
        reboot_command=str(server.reboot_script(down=0.2)),
        boot_id_command="echo always-the-same",
    )

    async def go() -> None:
        executor = SSHExecutor(worker)
        await executor.connect()
        try:
            await executor.reboot(4)
        finally:
            await executor.close()

    with pytest.raises(
        WashoutError,
        match="boot id still always-the-same 4 s after the "
        r"reboot command .* \(reset.timeout\): the worker did not reboot",
    ):
        run_async(go())


def test_provenance_mismatch_between_workers(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    a, b = sshd_farm.start(2)
    wa, wb = tmp_path / "wa", tmp_path / "wb"
    for workdir, content in ((wa, b"build 1\n"), (wb, b"build 2 (stale)\n")):
        workdir.mkdir()
        (workdir / "app.bin").write_bytes(content)
    spec = tmp_path / "spec.toml"
    spec.write_text(
        """
[experiment]
name = "prov"
runs = 1
seed = 1

[provenance]
files = ["app.bin"]

[[test]]
name = "t"
command = "true"
"""
        + a.worker_toml("wa", sshd_farm.known_hosts, wa)
        + b.worker_toml("wb", sshd_farm.known_hosts, wb)
    )
    ha = hashlib.sha256(b"build 1\n").hexdigest()
    hb = hashlib.sha256(b"build 2 (stale)\n").hexdigest()
    proc = washout("run", spec, "--db", tmp_path / "refused.db", "--quiet", check=False)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line == (
        f"washout: error: provenance mismatch between workers: file:app.bin "
        f"differs: wa has '{ha}', wb has '{hb}' (use --allow-mismatch to record "
        "and proceed)"
    )
    db = tmp_path / "allowed.db"
    washout("run", spec, "--db", db, "--quiet", "--allow-mismatch")
    events = [m for (m,) in query(db, "SELECT message FROM event WHERE kind = 'mismatch'")]
    assert any(ha in m and hb in m and "wa" in m and "wb" in m for m in events)
    assert query(db, "SELECT count(*) FROM trial WHERE status = 'ok'") == [(4,)]


QUOTING = """printf '%s\\n' "it's" 'a "b"' '$HOME' 'back\\slash'
echo line two
printf '%s\\n' "$V" é"""


def test_timeout_and_stray_children_die_with_their_group(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    (server,) = sshd_farm.start(1)
    worker = WorkerSpec(
        host="127.0.0.1",
        port=server.port,
        key=str(sshd_farm.client_key),
        known_hosts=str(sshd_farm.known_hosts),
        workdir=str(tmp_path / "w"),
    )

    async def go():
        executor = SSHExecutor(worker)
        await executor.connect()
        try:
            slow = await executor.run(
                "sleep 60 & echo $! > bg; echo out; echo err >&2; sleep 60",
                CommandOptions(timeout=0.5, cwd=worker.workdir),
            )
            stray = await executor.run(
                "sleep 60 & echo $! > bg2; echo quick",
                CommandOptions(timeout=None, cwd=worker.workdir),
            )
            failing = await executor.run("echo oops >&2; exit 7", CommandOptions(timeout=10))
            quoting = await executor.run(
                QUOTING, CommandOptions(timeout=10, env={"V": 'it\'s $HOME \\ "x"'})
            )
            return slow, stray, failing, quoting
        finally:
            await executor.close()

    started = time.monotonic()
    slow, stray, failing, quoting = run_async(go())
    assert slow.status == "timeout" and "timed out after 0.5 s" in slow.reason
    assert slow.stdout == b"out\n" and slow.stderr.startswith(b"err\n")
    assert b"@@washout" not in slow.stderr
    assert 0.5 <= slow.duration < 3
    assert stray.status == "ok" and stray.stdout == b"quick\n" and stray.stderr == b""
    assert 0 < stray.duration < 2
    assert failing.status == "failed" and failing.exit_code == 7
    assert failing.reason == "exit code 7" and failing.stderr == b"oops\n"
    assert (
        quoting.stdout
        == ('it\'s\na "b"\n$HOME\nback\\slash\nline two\nit\'s $HOME \\ "x"\n\u00e9\n').encode()
    )
    for name in ("bg", "bg2"):
        assert not alive(int((tmp_path / "w" / name).read_text()))
    assert time.monotonic() - started < 30


def test_cancelled_trial_kills_its_remote_group(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    """A second Ctrl-C cancels the trial in flight: its group on the worker dies with it."""
    (server,) = sshd_farm.start(1)
    worker = WorkerSpec(
        host="127.0.0.1",
        port=server.port,
        key=str(sshd_farm.client_key),
        known_hosts=str(sshd_farm.known_hosts),
    )
    pid_file = tmp_path / "pid"

    async def go() -> None:
        executor = SSHExecutor(worker)
        await executor.connect()
        try:
            task = asyncio.ensure_future(
                executor.run(f"echo $$ > {pid_file}; sleep 60", CommandOptions(timeout=None))
            )
            while not (pid_file.exists() and pid_file.read_text().strip()):
                await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            await executor.close()

    run_async(go())
    assert not alive(int(pid_file.read_text()))


def test_a_worker_that_stays_down_is_given_up_after_bounded_retries(
    sshd_farm: SshdFarm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("washout.harness.executors.ssh_connection.RECONNECT_WINDOW", 2.0)
    (server,) = sshd_farm.start(1)
    worker = WorkerSpec(
        host="127.0.0.1",
        port=server.port,
        key=str(sshd_farm.client_key),
        known_hosts=str(sshd_farm.known_hosts),
        name="w",
    )

    async def go():
        executor = SSHExecutor(worker)
        await executor.connect()
        try:
            task = asyncio.ensure_future(executor.run("sleep 60", CommandOptions(timeout=None)))
            await asyncio.sleep(0.5)
            server.stop()  # the worker vanishes for good
            lost = await task
            t0 = time.monotonic()
            gave_up = await executor.run("true", CommandOptions(timeout=None))
            waited = time.monotonic() - t0
            with pytest.raises(WashoutError, match="could not be re-established within 2 s"):
                await executor.run("true", CommandOptions(timeout=None))
            return lost, gave_up, waited
        finally:
            await executor.close()

    lost, gave_up, waited = run_async(go())
    assert lost.status == "lost" and lost.reason.startswith("w: connection lost")
    assert gave_up.status == "lost" and "could not be re-established" in gave_up.reason
    assert 2.0 <= waited < 5  # retried with backoff for the window, not forever


def test_an_unknown_host_is_named_in_one_line(tmp_path: Path) -> None:
    executor = SSHExecutor(WorkerSpec(host="no-such-host.invalid", name="ghost"))
    with pytest.raises(WashoutError) as caught:
        run_async(executor.connect())
    assert str(caught.value) == "worker ghost: host name 'no-such-host.invalid' not found"


def test_a_worker_without_timeout_is_told_so_not_a_provenance_mismatch(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    good, bare = sshd_farm.start(2)
    tools = tmp_path / "bin"  # the bare worker's PATH: setsid and date, no timeout
    tools.mkdir()
    for tool in ("setsid", "date", "cat"):
        (tools / tool).symlink_to(shutil.which(tool))
    bare.stop()
    bare.config.write_text(
        bare.config.read_text().replace("SetEnv SHLVL=1", f"SetEnv SHLVL=1 PATH={tools}")
    )
    bare.start()
    spec = tmp_path / "spec.toml"
    spec.write_text(
        """
[experiment]
runs = 1
seed = 1
[[test]]
name = "t"
command = "true"
"""
        + good.worker_toml("good", sshd_farm.known_hosts)
        + bare.worker_toml("bare", sshd_farm.known_hosts)
    )
    db = tmp_path / "bare.db"
    proc = washout("run", spec, "--db", db, "--quiet", check=False)
    assert "mismatch" not in proc.stdout + proc.stderr
    events = dict(query(db, "SELECT worker, message FROM event WHERE kind = 'error'"))
    assert events["bare"] == "worker bare lacks `timeout` (needed to run trials)"
    assert query(db, "SELECT count(*) FROM trial WHERE status = 'ok'") == [(2,)]


def test_remote_output_is_bounded_and_metric_files_are_checked(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    """Over SSH as locally: a tail of output_tail bytes (the wrapper's markers still found
    behind megabytes of stderr), stdout discarded at 0, stale metric files removed and
    special files refused at once."""
    (server,) = sshd_farm.start(1)
    work = tmp_path / "w"
    work.mkdir()
    (work / "stale.txt").write_text("5\n")
    os.mkfifo(work / "pipe")
    executor = SSHExecutor(
        WorkerSpec(
            host="127.0.0.1",
            port=server.port,
            key=str(sshd_farm.client_key),
            known_hosts=str(sshd_farm.known_hosts),
            workdir=str(work),
        )
    )

    async def go():
        await executor.connect()
        try:
            big = await executor.run(
                "head -c 20000000 /dev/zero; head -c 5000000 /dev/zero >&2; echo last >&2; exit 3",
                CommandOptions(timeout=60, output_tail=65536),
            )
            discarded = await executor.run(
                "echo gone; echo kept >&2", CommandOptions(timeout=60, output_tail=0)
            )
            await executor.remove_file("stale.txt", str(work))
            t0 = time.monotonic()
            errors = []
            for name in ("pipe", "stale.txt", "."):
                try:
                    await executor.read_file(name, str(work))
                except OSError as err:
                    errors.append(str(err))
            with pytest.raises(OSError, match="a FIFO, not a regular file"):
                await executor.remove_file("pipe", str(work))
            return big, discarded, errors, time.monotonic() - t0
        finally:
            await executor.close()

    big, discarded, errors, took = run_async(go())
    assert (big.status, big.exit_code) == ("failed", 3)
    assert len(big.stdout) == 65536 and big.stdout_cut and big.stderr_cut
    assert big.stderr.endswith(b"last\n") and b"@@washout" not in big.stderr
    assert (discarded.stdout, discarded.stderr) == (b"", b"kept\n")
    assert errors == [
        "a FIFO, not a regular file",
        "No such file or directory",
        "a directory, not a regular file",
    ]
    assert took < 10 and (work / "pipe").exists()


def test_a_worker_whose_timeout_makes_no_process_group_is_refused(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    """A ``timeout`` that runs the command in the caller's process group (BusyBox's execs
    it in place) would leave a trial's children out of the group the wrapper kills."""
    (server,) = sshd_farm.start(1)
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "timeout").write_text('#!/bin/sh\nshift\nexec "$@"\n')
    (tools / "timeout").chmod(0o755)
    server.stop()
    server.config.write_text(
        server.config.read_text().replace(
            "SetEnv SHLVL=1", f"SetEnv SHLVL=1 PATH={tools}:{os.environ['PATH']}"
        )
    )
    server.start()
    executor = SSHExecutor(server.worker_spec(sshd_farm.known_hosts))
    with pytest.raises(WashoutError) as caught:
        run_async(executor.connect())
    assert str(caught.value) == (
        f"worker 127.0.0.1:{server.port}: its `timeout` does not start the command in a "
        "process group of its own (coreutils' does; needed to stop a trial's processes)"
    )
