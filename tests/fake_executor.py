"""A worker for unit tests of the engine's policies: commands do nothing and end as scripted.

The engine's retry, abort, lost-worker and resume rules are decisions about outcomes, not
about processes; this executor hands the engine the outcomes a test scripts, so those rules
are tested in milliseconds. Everything about real processes (timeouts, process groups,
output, SSH) is tested against the real executors elsewhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from washout.harness.executors.base import CommandOptions, CommandResult


@dataclass(frozen=True)
class Scripted:
    """How one call of a command ends."""

    status: str = "ok"
    duration: float = 0.01
    stdout: bytes = b""
    exit_code: int | None = None
    reason: str = ""


Script = Callable[[str, int], Scripted]
"""``script(command, n)``: how the ``n``-th call (from 0) of ``command`` ends."""


def always_ok(command: str, n: int) -> Scripted:
    return Scripted()


@dataclass
class FakeExecutor:
    """Records every command it is given, in order, and answers from ``script``.

    ``on_call(command, n)`` runs before answering (e.g. to send a signal mid-run). Every
    command the engine runs for itself (environment checks, no-ops) is answered ``ok``
    with no output unless the script says otherwise.
    """

    name: str = "fake"
    script: Script = always_ok
    on_call: Callable[[str, int], None] | None = None
    host: str = "fake-host"
    workdir: str | None = None
    local: bool = False
    calls: list[str] = field(default_factory=list)
    connects: int = 0
    closes: int = 0
    _counts: dict[str, int] = field(default_factory=dict)

    async def connect(self) -> None:
        self.connects += 1

    def launcher_notes(self) -> list[str]:
        return []

    async def run(self, command: str, options: CommandOptions) -> CommandResult:
        n = self._counts.get(command, 0)
        self._counts[command] = n + 1
        self.calls.append(command)
        if self.on_call is not None:
            self.on_call(command, n)
        s = self.script(command, n)
        await asyncio.sleep(0)  # a real command suspends the engine: signals are handled here
        started = datetime.now(UTC)
        exit_code = s.exit_code if s.exit_code is not None else (0 if s.status == "ok" else 1)
        return CommandResult(
            status=s.status,
            exit_code=None if s.status in ("lost", "timeout") else exit_code,
            stdout=s.stdout,
            stderr=b"",
            started=started,
            ended=started + timedelta(seconds=s.duration),
            duration=s.duration,
            reason=s.reason or ("" if s.status == "ok" else f"scripted {s.status}"),
            cpus=options.cpus,
        )

    async def read_file(self, path: str, cwd: str | None = None) -> bytes:
        raise OSError(f"{path}: the fake worker has no files")

    async def remove_file(self, path: str, cwd: str | None = None) -> None:
        return None

    async def kill_leftovers(self, sessions: list[str]) -> int:
        self.calls.append(f"kill leftovers of {len(sessions)} session(s)")
        return 0

    async def mirror(self, directory: Path) -> str:
        return "the fake worker needs no files"

    async def reboot(self, timeout: float, command: str | None = None) -> str:
        self.calls.append("reboot")
        return "rebooted (scripted)"

    async def close(self) -> None:
        self.closes += 1

    def trial_calls(self, commands: set[str]) -> list[str]:
        """The calls that were trials (of the given test commands), in order."""
        return [c for c in self.calls if c in commands]
