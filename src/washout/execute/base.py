"""The Executor protocol: what the engine needs from a worker, whatever carries it.

The engine is asynchronous so one controller can drive many workers at once; an executor
runs one command at a time for its worker. Time stamps are the controller's UTC clock and
``duration`` is measured by the executor around the process (hyperfine-style wall time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

TAIL_BYTES = 4096
"""How much of a trial's stdout/stderr the store keeps (the tail: errors come last)."""


def tail(data: bytes, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of output, decoded leniently for storage."""
    return data[-limit:].decode("utf-8", errors="replace")


@dataclass(frozen=True)
class CommandResult:
    """The outcome of one command on a worker.

    ``status`` is ``ok`` (exit 0), ``failed`` (non-zero exit or a signal), ``timeout``
    (killed at its timeout, with its whole process group) or ``lost`` (the connection to the
    worker dropped, so the outcome is unknown). ``reason`` says why in words when not ok.
    """

    status: str
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    started: datetime
    ended: datetime
    duration: float
    reason: str = ""
    cpus: str | None = None
    extra_metrics: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class Executor(Protocol):
    """A worker as the engine sees it."""

    name: str
    """Worker name as recorded in the store (``local`` for the local machine)."""

    async def connect(self) -> None:
        """Open what is needed (a connection); idempotent; called again after a reset."""

    async def run(
        self,
        command: str,
        *,
        timeout: float | None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        cpus: str | None = None,
    ) -> CommandResult:
        """Run a shell command in its own process group; kill the group at ``timeout``."""

    async def read_file(self, path: str, cwd: str | None = None) -> bytes:
        """Read a file on the worker (relative paths resolve against ``cwd``)."""

    async def close(self) -> None:
        """Release connections; idempotent."""
