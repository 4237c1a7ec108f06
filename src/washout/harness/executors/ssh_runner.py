"""The controller's end of a runner: one long-lived channel on a worker's connection that
runs :data:`~washout.harness.executors.ssh_wrapper.RUNNER`, one command at a time.

A runner is an asyncssh session (callbacks, no reader tasks): the channel's bytes go
straight to the :class:`~washout.harness.executors.ssh_wrapper.Capture` of the command in
flight, and its end (the runner exited, was killed, or the connection dropped) wakes the
command's waiter at once, so a runner that died never leaves a command hanging.
"""

from __future__ import annotations

import asyncio

import asyncssh

from washout.harness.executors.ssh_wrapper import Capture


class Runner(asyncssh.SSHClientSession[bytes]):
    """One runner channel: :meth:`start` hands it a command, :meth:`wait` waits for that
    command's end markers or the runner's end, whichever comes first."""

    def __init__(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn
        self.chan: asyncssh.SSHClientChannel[bytes] | None = None
        self.got: Capture | None = None
        self.gone: str | None = None
        """Why the runner ended (its exit status or signal, or the connection's error)."""
        self.dropped: Exception | None = None
        """The connection's error when the channel ended with the connection."""
        self._waiter: asyncio.Future[None] | None = None
        self.reads: tuple[str, ...] = ()
        """The files this runner reads after each command (its ``a``, once set)."""

    @classmethod
    async def open(cls, conn: asyncssh.SSHClientConnection, command: str) -> Runner:
        """Start a runner on ``conn`` (the connection's errors propagate)."""
        _, runner = await conn.create_session(lambda: cls(conn), command, encoding=None)
        assert isinstance(runner, Runner)
        return runner

    def connection_made(self, chan: asyncssh.SSHClientChannel[bytes]) -> None:  # type: ignore[override]
        self.chan = chan

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        got = self.got
        if got is None:
            return  # between commands: what an escaped daemon wrote after the last one
        if datatype == asyncssh.EXTENDED_DATA_STDERR:
            got.add_err(data)
        else:
            got.add_out(data)
        if got.complete:
            self._wake()

    def exit_status_received(self, status: int) -> None:
        self._end(f"exit status {status}")

    def exit_signal_received(self, signal: str, core_dumped: bool, msg: str, lang: str) -> None:
        self._end(f"signal {signal}")

    def connection_lost(self, exc: Exception | None) -> None:
        self.dropped = exc
        self._end(f"channel closed: {exc}" if exc else "channel closed")

    def _end(self, why: str) -> None:
        self.gone = self.gone or why
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    @property
    def usable(self) -> bool:
        """Whether it can take a command: alive, on an open connection, none in flight."""
        return self.gone is None and self.got is None and not self.conn.is_closed()

    def start(self, got: Capture, request: bytes) -> None:
        """Send one command's request; its output goes to ``got`` from now on."""
        assert self.chan is not None and self.got is None
        self.got = got
        self._waiter = asyncio.get_running_loop().create_future()
        self.chan.write(request)

    async def wait(self, timeout: float | None) -> bool:
        """Wait for the command's end or the runner's; False when ``timeout`` passed first."""
        assert self._waiter is not None
        if not self._waiter.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._waiter), timeout)
            except TimeoutError:
                return False
        return True

    def finish(self) -> None:
        """The command is done: the runner may take the next one."""
        self.got = self._waiter = None

    def close(self) -> None:
        """End the channel: its stdin closes, so the runner kills what still runs, and exits."""
        self.gone = self.gone or "closed by washout"
        if self.chan is not None:
            self.chan.close()
