"""The runner that runs every command on an SSH worker (one long-lived channel per command
in flight), against a real sshd on loopback: requests round-trip exactly, commands on one
runner get their own outputs, commands at once get runners of their own, and a closed
connection or a runner killed on the worker ends the command's group and reports it lost
instead of hanging."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import pytest
from conftest import alive, wait_for
from sshd import SshdFarm, run_async, sshd_farm  # noqa: F401 (fixture)

from washout.harness import environment
from washout.harness.executors.base import CommandOptions, CommandResult
from washout.harness.executors.ssh import SSHExecutor
from washout.harness.executors.ssh_wrapper import RUNNER
from washout.harness.spec import ProvenanceSpec

pytestmark = pytest.mark.ssh

AWKWARD = {
    "QUOTES": "it's \"x\" '\"'\"' `id` $(id) ${HOME} \\ \\\\",
    "LINES": "\n3\nline\r\n\n\\",
    "FRAME": "1\nx() { exit 9; }\n",
    "BYTES": "".join(chr(c) for c in range(1, 256)),
    "EMPTY": "",
    "WIDE": "é \u2603 \U0001f600",
    "BIG": "y" * 70_000,
    "BIGGER": "z" * 70_001,
}
"""Environment values a request must carry unchanged: shell syntax, newlines that look
like the request's frame, every byte but NUL, and two that together are longer than one
argument may be (128 KiB), which is no limit for a request."""


def _executor(farm: SshdFarm, shell: str = "bash", tools: Path | None = None) -> SSHExecutor:
    """An executor on a new worker whose runner runs in ``shell``: ``sh`` is a worker
    whose PATH has no bash (a few tools linked into ``tools``), so the runner starts in
    /bin/sh, as on a worker without bash."""
    (server,) = farm.start(1)
    if shell == "sh":
        assert tools is not None
        tools.mkdir()
        for tool in ("timeout", "date", "sleep", "grep", "touch"):
            (tools / tool).symlink_to(shutil.which(tool) or tool)
        server.stop()
        server.config.write_text(
            server.config.read_text().replace("SetEnv SHLVL=1", f"SetEnv SHLVL=1 PATH={tools}")
        )
        server.start()
    return SSHExecutor(server.worker_spec(farm.known_hosts))


async def _connect(executor: SSHExecutor, shell: str) -> None:
    """Connect; on an ``sh`` worker, as if its login shell were not bash (the runner's
    command then looks for bash, finds none, and runs the loop in /bin/sh)."""
    await executor.connect()
    if shell == "sh":
        executor.link.login_bash = False


SHELLS = ["bash", "sh"]


def _pids(path: Path, count: int) -> list[int]:
    wait_for(lambda: path.exists() and len(path.read_text().split()) == count, 30)
    return [int(p) for p in path.read_text().split()]


LEAVES_A_TREE = (
    "sh -c 'sleep 300 & echo $! >> {pids}; wait' & echo $! >> {pids}; echo $$ >> {pids}; wait"
)
"""A trial with a child and a grandchild, each writing its pid to a file."""


async def _tree_started(executor: SSHExecutor, pids: Path) -> asyncio.Future[CommandResult]:
    """Start :data:`LEAVES_A_TREE` on ``executor``; its result, once its three processes
    have written their pids."""
    task = asyncio.ensure_future(
        executor.run(LEAVES_A_TREE.format(pids=pids), CommandOptions(timeout=None))
    )
    while not (pids.exists() and len(pids.read_text().split()) == 3):
        await asyncio.sleep(0.05)
    return task


@pytest.mark.parametrize("shell", SHELLS)
def test_a_request_round_trips_exactly(sshd_farm: SshdFarm, tmp_path: Path, shell: str) -> None:
    """Every value reaches the command as data, byte for byte, in a cwd whose name needs
    quoting; a command text with quotes and newlines runs as written."""
    cwd = tmp_path / 'it\'s a "dir"\nhere'
    cwd.mkdir()
    executor = _executor(sshd_farm, shell, tmp_path / "bin")
    names = list(AWKWARD)
    command = "pwd\nfor v in " + " ".join(names) + ' ; do eval "printf %s. \\"\\$$v\\""; done'

    async def go() -> CommandResult:
        await _connect(executor, shell)
        try:
            return await executor.run(
                command, CommandOptions(timeout=60, cwd=str(cwd), env=AWKWARD, output_tail=1 << 20)
            )
        finally:
            await executor.close()

    result = run_async(go())
    assert result.status == "ok", result
    expected = str(cwd) + "\n" + "".join(value + "." for value in AWKWARD.values())
    assert result.stdout == expected.encode()


@pytest.mark.parametrize("shell", SHELLS)
def test_commands_back_to_back_on_one_runner_get_their_own_outputs(
    sshd_farm: SshdFarm, tmp_path: Path, shell: str
) -> None:
    """A stdout without a final newline, a stderr, exit codes, a timeout and discarded
    stdout, one after the other on the same runner: nothing of one reaches the next, and
    no command's environment or directory stays for the next; the worker's clock and
    CPU times are read in either shell."""
    executor = _executor(sshd_farm, shell, tmp_path / "bin")

    async def go() -> tuple[list[CommandResult], int]:
        await _connect(executor, shell)
        try:
            results = [
                await executor.run(
                    "printf no-newline; printf err1 >&2; cd /; export LEFT=1; exit 3",
                    CommandOptions(timeout=60, env={"MINE": "a"}),
                ),
                await executor.run(
                    'echo "[$MINE$LEFT]"; pwd; echo err2 >&2',
                    CommandOptions(timeout=60, cwd="/tmp"),
                ),
                await executor.run("echo x; sleep 30", CommandOptions(timeout=0.3)),
                await executor.run(
                    "echo gone; echo kept >&2", CommandOptions(timeout=60, output_tail=0)
                ),
                await executor.run("echo last", CommandOptions(timeout=60)),
            ]
            return results, len(executor._idle)
        finally:
            await executor.close()

    (exit3, second, timed_out, discarded, last), idle = run_async(go())
    assert (exit3.status, exit3.exit_code, exit3.stdout, exit3.stderr) == (
        "failed",
        3,
        b"no-newline",
        b"err1",
    )
    assert (second.status, second.stdout, second.stderr) == ("ok", b"[]\n/tmp\n", b"err2\n")
    assert (timed_out.status, timed_out.stdout) == ("timeout", b"x\n")
    assert (discarded.stdout, discarded.stderr) == (b"", b"kept\n")
    assert (last.status, last.stdout, last.stderr) == ("ok", b"last\n", b"")
    assert 0 < last.duration < 1 and set(last.resources) >= {"user", "system"}
    assert idle == 1  # all five on one runner


def test_a_tool_missing_for_one_command_fails_that_command_only(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    """``cpus`` on a worker without taskset: the command fails naming the tool, and the
    runner goes on with the next command."""
    executor = _executor(sshd_farm, "sh", tmp_path / "bin")

    async def go() -> tuple[CommandResult, CommandResult]:
        await _connect(executor, "sh")
        try:
            pinned = await executor.run("echo pinned", CommandOptions(timeout=60, cpus="0"))
            return pinned, await executor.run("echo next", CommandOptions(timeout=60))
        finally:
            await executor.close()

    pinned, after = run_async(go())
    assert (pinned.status, pinned.exit_code, pinned.stdout) == ("failed", 127, b"")
    assert pinned.reason == f"worker {executor.name} lacks `taskset` (for cpus = '0')"
    assert (after.status, after.stdout) == ("ok", b"next\n")


def test_commands_at_once_get_runners_of_their_own(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    """Two commands on one executor at the same time (a trial and a background command or
    a sampler) each run in a runner of its own: each waits for the other to have started,
    which only works if both run at once, and each gets its own output."""
    executor = _executor(sshd_farm)
    a, b = tmp_path / "a", tmp_path / "b"
    wait = "touch {mine}; while [ ! -e {other} ]; do sleep 0.02; done; echo {name}"

    async def go() -> list[CommandResult]:
        await executor.connect()
        try:
            return list(
                await asyncio.gather(
                    executor.run(
                        wait.format(mine=a, other=b, name="one"), CommandOptions(timeout=20)
                    ),
                    executor.run(
                        wait.format(mine=b, other=a, name="two"), CommandOptions(timeout=20)
                    ),
                )
            )
        finally:
            await executor.close()

    one, two = run_async(go())
    assert (one.status, one.stdout, two.status, two.stdout) == ("ok", b"one\n", "ok", b"two\n")


def test_a_closed_connection_kills_the_commands_group_on_the_worker(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    """The runner's stdin closes with the connection: its watcher has the command's whole
    group killed (child and grandchild too), and the command is reported lost."""
    executor = _executor(sshd_farm)
    pids = tmp_path / "pids"

    async def go() -> CommandResult:
        await executor.connect()
        try:
            task = await _tree_started(executor, pids)
            executor.link.drop()  # the connection closes under the command
            return await asyncio.wait_for(task, 20)
        finally:
            await executor.close()

    result = run_async(go())
    assert result.status == "lost" and "connection lost" in result.reason
    trial = _pids(pids, 3)
    wait_for(lambda: not any(alive(p) for p in trial), 15, "the trial outlived its connection")


def _runner_of(pid: int) -> int:
    """The runner process above ``pid`` (the first ancestor running the runner's loop)."""
    loop = "while IFS= read -r n; do"
    assert loop in RUNNER
    while pid > 1:
        status = Path(f"/proc/{pid}/status").read_text()
        pid = int(status.split("PPid:")[1].split()[0])
        if loop.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
    raise AssertionError("no runner above the command")


def test_a_runner_killed_on_the_worker_is_noticed_and_its_command_lost(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    """SIGKILL of the runner mid-command (nothing of washout left to kill the group on
    the worker): the command is reported lost at once rather than waited for, its group
    is killed from the controller, and the next command starts a new runner."""
    executor = _executor(sshd_farm)
    pids = tmp_path / "pids"

    async def go() -> tuple[CommandResult, float, CommandResult]:
        await executor.connect()
        try:
            task = await _tree_started(executor, pids)
            runner = _runner_of(int(pids.read_text().split()[2]))
            t0 = time.monotonic()
            os.kill(runner, 9)
            lost = await asyncio.wait_for(task, 20)
            took = time.monotonic() - t0
            return lost, took, await executor.run("echo again", CommandOptions(timeout=60))
        finally:
            await executor.close()

    lost, took, again = run_async(go())
    assert lost.status == "lost" and "runner ended during the command" in lost.reason, lost
    assert took < 10
    trial = _pids(pids, 3)
    wait_for(lambda: not any(alive(p) for p in trial), 15, "the trial outlived its runner")
    assert (again.status, again.stdout) == ("ok", b"again\n")


@pytest.mark.parametrize("shell", SHELLS)
def test_a_moment_slow_to_read_over_ssh_is_read_before_each_run_instead(
    sshd_farm: SshdFarm, tmp_path: Path, shell: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bash runner times its read after each command on the worker's clock; once the
    fastest read is over SSH_READ_AFTER_SECONDS (a slow thermal sensor), the check before
    a run takes that read and has the runner read nothing more, and the next check reads
    with a command of its own. A runner in /bin/sh has no clock without a process: it
    keeps reading after every command. Here the budget is set below any read."""
    executor = _executor(sshd_farm, shell, tmp_path / "bin")
    monkeypatch.setattr(environment, "SSH_READ_AFTER_SECONDS", 0.0)

    async def go() -> list[dict[str, str] | None]:
        await _connect(executor, shell)
        try:
            out = []
            for _ in range(3):
                facts = await environment.moment(executor, ProvenanceSpec(), None)
                assert facts["boot_id"], facts  # read either way
                assert (await executor.run("true", CommandOptions(timeout=60))).status == "ok"
                out.append(executor.take_read())
            return out
        finally:
            await executor.close()

    reads = run_async(go())
    if shell == "bash":
        assert executor.fastest_read is not None and 0 <= executor.fastest_read < 1.0
        assert reads[0] is not None and reads[1:] == [None, None]  # read, then not
    else:
        assert executor.fastest_read is None
        assert all(read is not None for read in reads)


@pytest.mark.parametrize("shell", SHELLS)
def test_files_read_after_each_command_come_back_with_its_end(
    sshd_farm: SshdFarm, tmp_path: Path, shell: str
) -> None:
    """The first line of each file asked for is read after every command (after it ended:
    a file the command wrote shows what it wrote), whatever its exit code; a missing file
    gives "" and no error in the command's stderr; each read is taken once."""
    executor = _executor(sshd_farm, shell, tmp_path / "bin")
    mine, missing = tmp_path / "fact", tmp_path / "absent"
    mine.write_text("one  two\nsecond line\n")
    boot_id = "/proc/sys/kernel/random/boot_id"

    async def go() -> list[tuple[CommandResult, dict[str, str] | None]]:
        await _connect(executor, shell)
        try:
            executor.read_after((str(mine), str(missing), boot_id))
            out = []
            for command in ("echo a", f"echo late > {mine}; exit 3", "true"):
                result = await executor.run(command, CommandOptions(timeout=60))
                out.append((result, executor.take_read()))
            out.append((result, executor.take_read()))
            return out
        finally:
            await executor.close()

    (first, read1), (failed, read2), _, (_, again) = run_async(go())
    assert (first.stdout, first.stderr, failed.exit_code, failed.stderr) == (b"a\n", b"", 3, b"")
    boot = Path(boot_id).read_text().strip()
    assert read1 == {str(mine): "one  two", str(missing): "", boot_id: boot}
    assert read2 == {str(mine): "late", str(missing): "", boot_id: boot}
    assert again is None
