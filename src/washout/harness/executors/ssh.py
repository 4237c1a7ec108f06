"""An SSH worker (asyncssh): one connection per worker, reused for every command of a run.

The parts live by concern: the connection (opening, checking, reconnecting:
:mod:`~washout.harness.executors.ssh_connection`), the shell that runs each command on the
worker and what it reports (:mod:`~washout.harness.executors.ssh_wrapper`), copying a
directory to it (:mod:`~washout.harness.executors.ssh_copy`) and reboot resets
(:mod:`~washout.harness.executors.ssh_reboot`). This class puts them together as an
:class:`~washout.harness.executors.base.Executor`.

Each command runs in a runner (:mod:`~washout.harness.executors.ssh_runner`): one
long-lived channel per command in flight, kept for the next command once it is done (up
to IDLE_RUNNERS idle per worker), so a trial pays no channel set-up and no shell start;
commands that run at once (a background command, a readiness probe, a sampler beside the
trial) each get a runner of their own, so each runner runs one command at a time.

A connection that drops during a command yields ``CommandResult(status="lost")`` (the
engine keeps the trial as ``interrupted`` and re-runs its whole run); the next command
reconnects with bounded exponential backoff, first killing the process group the lost
command left behind. A runner that ends during a command on a live connection (killed on
the worker) yields ``lost`` too, its command's group killed at once; the next command
starts a new runner. ``wall`` is the worker's own clock around the command (its
launcher's, built there when it first connects; without one the runner's); when there is
neither a launcher nor a ``date`` with ``%N`` (nor bash) the controller's time around the
whole SSH exchange is used instead (one round trip and the channel set-up included).
No agent is installed on a worker.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from datetime import UTC, datetime
from pathlib import Path

import asyncssh

from washout.errors import WashoutError
from washout.harness.executors.base import CommandOptions, CommandResult, stdout_to, tail
from washout.harness.executors.ssh_connection import TRANSIENT, SSHConnection, describe, output
from washout.harness.executors.ssh_copy import mirror
from washout.harness.executors.ssh_reboot import reboot
from washout.harness.executors.ssh_runner import Runner
from washout.harness.executors.ssh_wrapper import (
    KILL_GRACE,
    MISSING_TOOL,
    Capture,
    kill_sessions_script,
    markers,
    read_file_script,
    remove_file_script,
    request,
    runner_command,
)
from washout.harness.launcher.remote import no_launcher_note
from washout.harness.spec import WorkerSpec

BACKSTOP_MARGIN = 15.0
"""Seconds past a command's timeout (and grace) after which the controller stops waiting
for a worker whose own timeout did not report back (a stalled network)."""
IDLE_RUNNERS = 2
"""Idle runners kept per worker for the next commands (a trial, and a sample or probe
beside it); more would hold sshd sessions (MaxSessions, 10 by default) for nothing."""


class SSHExecutor:
    """Runs commands on one ``[[worker]]`` over SSH."""

    local = False

    def __init__(self, worker: WorkerSpec) -> None:
        self.worker = worker
        self.name = worker.label
        self.host = f"{worker.host}:{worker.port}" if worker.port else worker.host
        self.workdir = worker.workdir
        self.link = SSHConnection(worker)
        self._token = secrets.token_hex(8)
        self._markers = markers(self._token)
        self._eot = f"@@washout:{self._token}:eot\n".encode()
        self._idle: list[Runner] = []
        self._after: tuple[str, ...] = ()
        self._read: dict[str, str] | None = None
        self.fastest_read: float | None = None
        """The fastest read after a command so far, on the worker's clock (None: not
        known, a runner without bash has no clock without a process); preemption can
        only make a read slower."""

    async def connect(self) -> None:
        """Open the connection (one attempt; a failure is this worker's one-line error)."""
        await self.link.connect()

    async def close(self) -> None:
        for runner in self._idle:
            runner.close()
        self._idle = []
        await self.link.close()

    async def run(self, command: str, options: CommandOptions) -> CommandResult:
        timeout, cpus, output_tail = options.timeout, options.cpus, options.output_tail
        if options.input is not None or stdout_to(options) not in ("null", "pipe"):
            raise WashoutError(  # (spec.py refuses them for workers elsewhere)
                f"{self.name}: a file or a terminal as a command's stdin or stdout is "
                "washout's own machine's"
            )
        if self.link.given_up:
            raise WashoutError(self.link.given_up)
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        try:
            conn = await self.link.connection()
        except WashoutError as err:
            if self.link.given_up is None:
                raise
            return self._lost(started, t0, str(err), None, cpus)
        got = Capture(self._markers, self._eot, output_tail)
        runner = None
        try:
            runner = await self._runner(conn)
            framed = request(
                command,
                token=self._token,
                timeout=timeout,
                cwd=options.cwd,
                env=options.env,
                cpus=cpus,
                keep_stdout=stdout_to(options) == "pipe",
                gnu_time=self.link.gnu_time,
                read_after=None if runner.reads == self._after else self._after,
                health=options.health,
                launcher=self.link.launcher,
            )
            runner.reads = self._after
            runner.start(got, framed)
            backstop = None if timeout is None else timeout + KILL_GRACE + BACKSTOP_MARGIN
            if not await runner.wait(backstop):
                self.link.orphan_group = got.group
                self.link.drop()
                return self._lost(
                    started,
                    t0,
                    f"no answer from the worker {backstop:g} s "
                    "into the command (its own timeout did not report back)",
                    got,
                    cpus,
                )
        except asyncio.CancelledError:
            await self.link.kill_group(got.group)
            if runner is not None:
                runner.close()
            raise
        except TRANSIENT as error:
            self.link.drop()
            self.link.orphan_group = got.group
            return self._lost(
                started, t0, f"connection lost during the command: {describe(error)}", got, cpus
            )
        assert runner is not None
        if not got.complete or got.end is None:
            return await self._runner_ended(runner, started, t0, got, cpus)
        runner.finish()
        if len(self._idle) < IDLE_RUNNERS:
            self._idle.append(runner)
        else:
            runner.close()
        code, worker_wall = got.end
        if self._after and len(got.after) == len(self._after):
            self._read = dict(zip(self._after, got.after, strict=True))
            if (took := got.read_seconds) is not None:
                self.fastest_read = (
                    took if self.fastest_read is None else min(self.fastest_read, took)
                )
        duration = time.perf_counter() - t0 if worker_wall is None else worker_wall
        finished = datetime.now(UTC)
        # timeout(1) exits 124 when it stopped the command (137 if SIGKILL was needed).
        status, why = "ok", ""
        stdout, stderr = got.out.value(), got.stderr()
        if timeout is not None and code in (124, 137) and duration >= timeout:
            status, why = (
                "timeout",
                f"timed out after {timeout:g} s; process group killed on the worker",
            )
        elif code == 127 and (missing := MISSING_TOOL.search(stderr)):
            status = "failed"
            tool, need = missing.group(1).decode(), missing.group(2).decode()
            why = f"{self.link.where()} lacks `{tool}` ({need})"
        elif code != 0:
            status, why = "failed", f"exit code {code}"
            if code > 128:
                why += f" (signal {code - 128} if it was killed)"
        return CommandResult(
            status,
            code,
            stdout,
            stderr,
            started,
            finished,
            duration,
            why,
            cpus,
            resources=got.resources,
            health=got.health_values() if options.health is not None else {},
            stdout_cut=got.out.cut,
            stderr_cut=got.err.cut,
        )

    def launcher_notes(self) -> list[str]:
        """Why this worker's commands run without a launcher, once connected (or nothing)."""
        why = self.link.no_launcher
        return [no_launcher_note(self.link.where(), why)] if why else []

    def read_after(self, paths: tuple[str, ...]) -> None:
        """From the next command on, have the runner read the first line of each of these
        files (no blanks or glob characters in their paths) after every command, outside
        its timing, with shell builtins (see :mod:`~washout.harness.executors.ssh_wrapper`)."""
        self._after = paths

    def take_read(self) -> dict[str, str] | None:
        """The first lines read after the last command that ended since the last call, by
        path (None: none ended, or :meth:`read_after` was not called)."""
        read, self._read = self._read, None
        return read

    async def _runner(self, conn: asyncssh.SSHClientConnection) -> Runner:
        """An idle runner on ``conn``, else a new one (those on an older connection, or
        that died while idle, are closed)."""
        while self._idle:
            runner = self._idle.pop()
            if runner.usable and runner.conn is conn:
                return runner
            runner.close()
        return await Runner.open(conn, runner_command(self.link.login_bash))

    async def _runner_ended(
        self, runner: Runner, started: datetime, t0: float, got: Capture, cpus: str | None
    ) -> CommandResult:
        """The runner's channel ended before the command's end markers: with the
        connection (its group is killed when the connection is back), or alone (killed
        on the worker: its group is killed now). Either way the outcome is unknown."""
        runner.close()
        if runner.dropped is not None or not self.link.alive():
            self.link.orphan_group = got.group
            self.link.drop()
            why = describe(runner.dropped) if runner.dropped else "the connection closed"
            return self._lost(started, t0, f"connection lost during the command: {why}", got, cpus)
        await self.link.kill_group(got.group)
        return self._lost(
            started, t0, f"its runner ended during the command ({runner.gone})", got, cpus
        )

    def _lost(
        self, started: datetime, t0: float, reason: str, got: Capture | None, cpus: str | None
    ) -> CommandResult:
        if got is None:
            return CommandResult.lost(
                f"{self.name}: {reason}", started, time.perf_counter() - t0, cpus
            )
        return CommandResult(
            "lost",
            None,
            got.out.value(),
            got.stderr(),
            started,
            datetime.now(UTC),
            time.perf_counter() - t0,
            f"{self.name}: {reason}",
            cpus,
            stdout_cut=got.out.cut,
            stderr_cut=got.err.cut,
        )

    async def read_file(self, path: str, cwd: str | None = None) -> bytes:
        """A metric file's bytes (``cat`` on the worker, after checking that it is a regular
        file of at most METRIC_FILE_LIMIT bytes); OSError saying why it cannot be read."""
        result = await self.link.small_command(read_file_script(path, cwd), f"cannot read {path}")
        if result.exit_status != 0:
            raise OSError(tail(output(result.stderr), 200).strip())
        return output(result.stdout)

    async def remove_file(self, path: str, cwd: str | None = None) -> None:
        """As locally: a regular file or a symbolic link is removed, nothing there is fine,
        anything else is left alone (OSError)."""
        result = await self.link.small_command(
            remove_file_script(path, cwd), f"cannot remove {path}"
        )
        if result.exit_status != 0:
            raise OSError(tail(output(result.stderr), 200).strip())

    async def kill_leftovers(self, sessions: list[str]) -> int:
        """SIGKILL the processes on the worker that trials of the given (dead) sessions
        left running, found by their session variable; returns how many."""
        if not sessions:
            return 0
        result = await self.link.small_command(
            kill_sessions_script(sessions), "cannot look for leftover trials"
        )
        said = output(result.stdout).strip()
        return int(said) if said.isdigit() else 0

    async def mirror(self, directory: Path) -> str:
        """Make the workdir an exact copy of ``directory`` (rsync, else SFTP)."""
        return await mirror(self.link, self.run, directory)

    async def reboot(self, timeout: float, command: str | None = None) -> str:
        """Reboot the worker and wait until it is back with a new boot id
        (:func:`~washout.harness.executors.ssh_reboot.reboot`)."""
        return await reboot(self.link, self.run, timeout, command)
