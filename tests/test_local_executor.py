"""The local executor on its own: output, exit status, timeouts, cancellation, stray children."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from conftest import gone

from washout.harness.executors import local
from washout.harness.executors.base import CommandOptions, CommandResult
from washout.harness.executors.local import LocalExecutor


def run(command: str, timeout: float | None = 30, **options) -> CommandResult:
    async def once() -> CommandResult:
        executor = LocalExecutor()
        try:
            return await executor.run(command, CommandOptions(timeout, **options))
        finally:
            await executor.close()

    return asyncio.run(once())


@pytest.fixture(params=["launcher", "pidfd", "thread"])
def waiting(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every way of learning that a child exited: its launcher's reply, or (without a
    launcher, as where there is no C compiler) a pidfd in the loop or a thread."""
    if request.param == "launcher":
        if local.launcher_program()[0] is None:
            pytest.skip(f"no launcher here: {local.launcher_program()[1]}")
        return request.param
    if request.param == "pidfd" and not local.HAVE_PIDFD:
        pytest.skip("no pidfds on this kernel")
    monkeypatch.setattr(local, "launcher_program", lambda: (None, "as if no compiler"))
    monkeypatch.setattr(local, "HAVE_PIDFD", request.param == "pidfd")
    return request.param


def test_output_and_status(waiting: str) -> None:
    big = run("head -c 300000 /dev/zero; echo err >&2")
    assert (big.status, big.exit_code, big.reason) == ("ok", 0, "")
    assert len(big.stdout) == 300000 and big.stderr == b"err\n"
    assert big.duration > 0 and big.ended >= big.started
    failed = run("echo out; exit 3")
    assert (failed.status, failed.exit_code, failed.reason) == ("failed", 3, "exit code 3")
    assert failed.stdout == b"out\n"
    killed = run("kill -9 $$")
    assert (killed.status, killed.reason) == ("failed", "killed by signal 9")


def test_env_cwd_and_a_command_that_cannot_start(tmp_path: Path, waiting: str) -> None:
    result = run("echo $WASHOUT_X; pwd", env={"WASHOUT_X": "hello"}, cwd=str(tmp_path))
    assert result.stdout.decode().split() == ["hello", str(tmp_path)]
    missing = run("true", cwd=str(tmp_path / "nowhere"))
    assert missing.status == "failed" and missing.reason.startswith("could not start")


def test_a_directory_made_anew_under_its_name_is_the_one_entered(
    tmp_path: Path, waiting: str
) -> None:
    """The launcher enters a command's directory for every command (it is its own, then
    the child's): one removed and made again under the same name is the new one."""
    where = tmp_path / "d"
    where.mkdir()
    (where / "old").touch()
    assert run("ls", cwd=str(where)).stdout == b"old\n"
    shutil.rmtree(where)
    where.mkdir()
    (where / "new").touch()
    assert run("ls", cwd=str(where)).stdout == b"new\n"
    assert run("pwd").stdout.decode().strip() == os.getcwd()


def test_timeout_kills_the_whole_group(tmp_path: Path, waiting: str) -> None:
    pids = tmp_path / "pids"
    t0 = time.monotonic()
    result = run(f"trap '' TERM; sleep 300 & echo $! > {pids}; wait", timeout=0.5)
    assert time.monotonic() - t0 < local.KILL_GRACE + 5
    assert result.status == "timeout" and "process group killed" in result.reason
    assert gone(int(pids.read_text()))


def test_cancelling_kills_the_group_at_once(tmp_path: Path, waiting: str) -> None:
    pids = tmp_path / "pids"

    async def cancelled() -> None:
        task = asyncio.ensure_future(
            LocalExecutor().run(f"sleep 300 & echo $! > {pids}; wait", CommandOptions(timeout=None))
        )
        while not pids.exists() or not pids.read_text().strip():
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    t0 = time.monotonic()
    asyncio.run(cancelled())
    assert time.monotonic() - t0 < 10
    assert gone(int(pids.read_text()))


def test_an_escaped_grandchild_holding_the_pipes_is_given_up(waiting: str) -> None:
    """A child in a session of its own survives the group kill and keeps stdout open:
    the trial still ends, about a second later, with what was written before."""
    t0 = time.monotonic()
    result = run("echo before; setsid sleep 3 &")
    assert result.status == "ok" and result.stdout == b"before\n"
    assert time.monotonic() - t0 < 2.5


def test_a_plain_command_starts_the_program_found_on_path(tmp_path: Path) -> None:
    """PATH is searched once, by washout; a name with a slash stays relative to the cwd."""
    (tmp_path / "prog").write_text("#!/bin/sh\necho from-prog\n")
    (tmp_path / "prog").chmod(0o755)
    assert local._start("prog 1", str(tmp_path)) == (str(tmp_path / "prog"), ("prog", "1"))
    assert local._start("./prog", None)[0] == "/bin/sh"  # not in washout's own cwd
    result = run("./prog", cwd=str(tmp_path))
    assert result.stdout == b"from-prog\n"
    result = run("prog", env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert result.stdout == b"from-prog\n"


def test_a_relative_directory_and_program_are_washouts_own(
    tmp_path: Path, waiting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative working directory, and a program named relative to it, are relative to
    washout's own directory, however the command starts (the launcher's own is ``/``)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "prog").write_text("#!/bin/sh\npwd\n")
    (tmp_path / "sub" / "prog").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    assert run("./sub/prog").stdout == f"{tmp_path}\n".encode()
    assert run("./prog", cwd="sub").stdout == f"{tmp_path / 'sub'}\n".encode()


STARTS = [("launcher", None), ("launcher", "/"), ("posix_spawn", None), ("popen", "/")]
"""Every way a command starts: from a launcher (with a working directory or without), or
without one, by posix_spawn (no working directory) or Popen (one)."""


@pytest.fixture
def starting(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """The working directory of a command started as the test's ``start`` parameter says."""
    start, cwd = request.param
    if start != "launcher":
        monkeypatch.setattr(local, "launcher_program", lambda: (None, "as if no compiler"))
    elif local.launcher_program()[0] is None:
        pytest.skip(f"no launcher here: {local.launcher_program()[1]}")
    return cwd


@pytest.mark.parametrize("starting", STARTS, ids=[f"{s}-{c}" for s, c in STARTS], indirect=True)
def test_a_command_gets_only_its_three_streams_and_default_signals(starting: str | None) -> None:
    """Whichever way it starts (a launcher; posix_spawn; Popen for a working directory), a command
    inherits no descriptor but stdin, stdout and stderr, not even one washout's own parent
    left inheritable, and SIGPIPE at its default, which Python ignores."""
    kept_r, kept_w = os.pipe()
    os.set_inheritable(kept_w, True)
    try:
        listed = run("ls /proc/$$/fd", cwd=starting)  # the shell's, listed by ls
    finally:
        os.close(kept_r)
        os.close(kept_w)
    assert listed.stdout.split() == [b"0", b"1", b"2"]
    piped = run("kill -s PIPE $$", cwd=starting)
    assert piped.reason == f"killed by signal {signal.SIGPIPE}"
    interrupted = run("kill -s INT $$", cwd=starting)  # the launcher ignores it; not its child
    assert interrupted.reason == f"killed by signal {signal.SIGINT}"


@pytest.mark.parametrize("starting", STARTS, ids=[f"{s}-{c}" for s, c in STARTS], indirect=True)
def test_pinning_reaches_the_command_and_leaves_washout_as_it_was(starting: str | None) -> None:
    """A command runs on its CPUs (inherited from the starting thread, which takes them
    for the start only): washout's own CPUs are the same afterwards."""
    own = os.sched_getaffinity(0)
    cpu = min(own)
    result = run("grep Cpus_allowed_list /proc/self/status", cpus=str(cpu), cwd=starting)
    assert result.stdout.split()[-1] == str(cpu).encode()
    assert os.sched_getaffinity(0) == own
