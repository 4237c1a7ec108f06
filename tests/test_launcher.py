"""The launcher (washout/harness/launcher): local commands started from a small process of
its own, with real processes: max RSS against GNU time's, a killed launcher, no compiler."""

from __future__ import annotations

import asyncio
import os
import select
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import gone, washout

from washout.harness.executors import local
from washout.harness.executors.base import CommandOptions, CommandResult
from washout.harness.executors.local import LocalExecutor

pytestmark = pytest.mark.skipif(
    local.launcher_program()[0] is None, reason=f"no launcher: {local.launcher_program()[1]}"
)

GNU_TIME = "/usr/bin/time"


def gnu_max_rss(argv: list[str]) -> float:
    """Peak RSS in bytes of ``argv`` as GNU time -v reports it."""
    done = subprocess.run([GNU_TIME, "-v", *argv], capture_output=True, text=True, timeout=60)
    line = next(x for x in done.stderr.splitlines() if "Maximum resident set size" in x)
    return int(line.rsplit(":", 1)[1]) * 1024.0


def own_max_rss(executor: LocalExecutor, command: str, env: dict[str, str] | None = None) -> float:
    async def go() -> CommandResult:
        return await executor.run(command, CommandOptions(timeout=60, env=env or {}))

    result = asyncio.run(go())
    assert result.status == "ok", result.reason
    return result.resources["max_rss"]


@pytest.mark.skipif(not Path(GNU_TIME).exists(), reason="no GNU time")
def test_max_rss_is_the_commands_own_as_gnu_time_says(tmp_path: Path) -> None:
    """``true``, ``sleep 0.1`` and a 400 MiB allocation, each started by the launcher and
    by GNU time in turn: the means within 5% (issue 31), though the test runner that
    starts them holds a hundred times more than ``true``. One run of ``true`` takes one of
    a dozen peaks from 964 to 1112 KiB under either tool (101 of each, quiet: means 1032
    and 1029 KiB), so the median of 41 can jump between clusters (CI once saw 1096
    against 1032 KiB); the mean of 41 moves by about 1%. The launcher first serves a
    command with an 800 kB environment: its peak then was above any of ``true``'s, and CI
    saw every later ``true`` report it (1116 against 1054 KiB) until the launcher learned
    to forget it."""
    alloc = tmp_path / "alloc.py"
    alloc.write_text("b = b'x' * (400 << 20)\n")
    executor = LocalExecutor()
    try:
        own_max_rss(executor, "true", {f"WASHOUT_BIG{i}": "x" * 100_000 for i in range(8)})
        for command, n in (("true", 41), ("sleep 0.1", 15), (f"{sys.executable} {alloc}", 3)):
            argv = local.argv_for(command)
            assert argv[0] != "/bin/sh"  # the same process under both
            pairs = [(own_max_rss(executor, command), gnu_max_rss(argv)) for _ in range(n)]
            ours, theirs = (statistics.fmean(side) for side in zip(*pairs, strict=True))
            assert abs(ours / theirs - 1) <= 0.05, (command, ours, theirs)
    finally:
        asyncio.run(executor.close())


def launcher_of(pid_file: Path) -> int:
    """The launcher of the command that wrote its pid to ``pid_file``: its parent."""
    while not pid_file.exists() or not pid_file.read_text().strip():
        pass
    stat = Path(f"/proc/{pid_file.read_text().strip()}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_a_killed_launcher_loses_its_command_and_the_next_gets_a_new_one(tmp_path: Path) -> None:
    """Killed during a command, the launcher cannot say how it ended: the command is
    ``lost`` (its group killed, as a lost SSH connection's), and the next command starts
    from a new launcher."""
    pid_file = tmp_path / "pid"
    executor = LocalExecutor()

    async def go() -> tuple[CommandResult, CommandResult]:
        command = f"echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; exec sleep 60"
        task = asyncio.ensure_future(executor.run(command, CommandOptions(timeout=60)))
        launcher = await asyncio.to_thread(launcher_of, pid_file)
        assert Path(f"/proc/{launcher}/exe").resolve() == local.launcher_program()[0]
        os.kill(launcher, signal.SIGKILL)
        lost = await asyncio.wait_for(task, 10)
        return lost, await executor.run("echo again", CommandOptions(timeout=60))

    try:
        lost, again = asyncio.run(go())
    finally:
        asyncio.run(executor.close())
    assert lost.status == "lost" and "launcher ended" in lost.reason
    # killed by washout, or (its launcher killed before its reply) by the kernel as the
    # launcher exits, which may come just after the launcher's socket has closed
    assert gone(int(pid_file.read_text()))
    assert (again.status, again.stdout) == ("ok", b"again\n")


def test_a_launcher_killed_mid_run_costs_no_recorded_trial(tmp_path: Path) -> None:
    """The engine takes a lost local command as a lost worker's: the trial is kept as
    interrupted, its run is run again whole, every other trial stays recorded."""
    marker = tmp_path / "killed-once"
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f"""
[experiment]
runs = 2
orders = ["fixed"]
[[test]]
name = "a"
command = "true"
[[test]]
name = "kills"
command = "test -e {marker} || {{ touch {marker}; kill -9 $PPID; sleep 30; }}"
"""
    )
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet", timeout=120)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT test, status, superseded FROM trial").fetchall()
    assert marker.exists()
    kept = [(test, status) for test, status, superseded in rows if not superseded]
    assert sorted(kept) == [("a", "ok")] * 2 + [("kills", "ok")] * 2
    assert ("kills", "interrupted", 1) in rows


def test_without_a_compiler_commands_start_from_washout_and_say_so(tmp_path: Path) -> None:
    """No ``cc``: no launcher, a warning in the run's output, and ``true``'s ``max_rss``
    absent (washout's own peak is all a child started by it can report); with one, the
    launcher is built into the cache under its source's hash."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "CC": "no-such-cc"}
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[experiment]\nruns = 1\norders = ["fixed"]\n[[test]]\nname = "t"\ncommand = "true"\n'
    )
    db = tmp_path / "r.db"
    done = washout("run", spec, "--db", db, env=env)
    assert "Note: no launcher (no C compiler (cc) to build it)" in done.stdout
    with sqlite3.connect(db) as conn:
        names = {n for (n,) in conn.execute("SELECT name FROM metric")}
    assert "wall" in names and "max_rss" not in names
    assert not (tmp_path / "cache" / "washout").exists()
    env["CC"] = shutil.which("cc") or "cc"
    built = subprocess.run(
        [
            sys.executable,
            "-c",
            "from washout.harness.launcher.build import launcher_program as p; print(p()[0])",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(built).parent == tmp_path / "cache" / "washout"
    assert Path(built).name == local.launcher_program()[0].name  # the same source's hash


def test_the_launcher_kills_what_a_command_left_in_its_group_before_it_replies(
    tmp_path: Path,
) -> None:
    """A command's background child in its process group is SIGKILLed by the launcher
    between the command's exit and its reaping (the zombie leader keeps the group's id
    from reuse), so it is dead by the time the launcher replies, with no kill from
    washout."""
    from washout.harness.launcher.client import Launcher

    program = local.launcher_program()[0]
    assert program is not None
    launcher = Launcher(program)
    read, write = os.pipe()
    try:
        pid = launcher.start(
            "/bin/sh",
            ("/bin/sh", "-c", f"sleep 300 & echo $! > {tmp_path}/pid"),
            local.environment_block(dict(os.environ)),
            (write,),
            None,
            None,
            False,
        )
        os.close(write)
        end = launcher.finished()
        left = int((tmp_path / "pid").read_text())
        assert end.status == 0 and pid != left
        assert gone(left, within=1.0)  # killed, not waited for: it dies as the reply comes
    finally:
        os.close(read)
        launcher.close()
        if (tmp_path / "pid").exists():
            _kill_quietly(int((tmp_path / "pid").read_text()))


def test_a_command_dies_with_its_launcher_without_a_kill_from_washout(tmp_path: Path) -> None:
    """The launcher SIGKILLed while its command runs: the kernel kills the command with it.
    Washout kills the group of a command whose pid it heard; killed between its ``vfork``
    and its reply (one loaded CPU: 12 of 150 kills from another thread landed there), the
    launcher left a command washout could not name, running beside the next trials."""
    from washout.harness.launcher.client import Launcher

    program = local.launcher_program()[0]
    assert program is not None
    launcher = Launcher(program)
    read, write = os.pipe()
    block = local.environment_block(dict(os.environ))
    pid = launcher.start("/bin/sleep", ("/bin/sleep", "60"), block, (write,), None, None, False)
    os.close(write)
    try:
        os.kill(launcher.process.pid, signal.SIGKILL)
        assert gone(pid)
    finally:
        os.close(read)
        launcher.close()
        _kill_quietly(pid)


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_commands_exit_closes_no_pipe_before_the_launcher_has_replied() -> None:
    """The launcher holds the command's output descriptors until it has timed the exit and
    replied: the end of the command's output comes after the reply, so washout, waiting on
    both, wakes once at the end (on the reply), not also on the pipes' end of file beside
    the launcher as it takes the exit's time. Before, the exit closed the last write end
    and the end of file came first in most of these trials."""
    from washout.harness.launcher.client import Launcher

    program = local.launcher_program()[0]
    assert program is not None
    launcher = Launcher(program)
    env = local.environment_block(dict(os.environ))
    early = 0
    try:
        for _ in range(200):
            read, write = os.pipe()
            launcher.start("/bin/true", ("true",), env, (write,), None, None, False)
            os.close(write)
            while os.read(read, 4096):  # blocks until the last write end is closed
                pass
            os.close(read)
            poller = select.poll()
            poller.register(launcher.socket.fileno(), select.POLLIN)
            early += not poller.poll(0)
            assert launcher.finished().status == 0
    finally:
        launcher.close()
    assert early == 0, f"the end of file came before the reply in {early} of 200 trials"
