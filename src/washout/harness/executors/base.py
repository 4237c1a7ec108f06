"""The Executor protocol: what the engine needs from a worker, whatever carries it.

The engine is asynchronous so one controller can drive many workers at once; an executor
runs one command at a time for its worker. Time stamps are the controller's UTC clock and
``duration`` is measured by the executor around the process (hyperfine-style wall time).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

TAIL_BYTES = 4096
"""How much of a trial's stdout/stderr the store keeps (the tail: errors come last)."""
OUTPUT_TAIL = 1 << 20
"""How much of the end of a command's stdout (what stdout metrics parse) and of its stderr
(TAIL_BYTES at least) an executor keeps by default (``[experiment] output_tail``). The rest
streams through. 0 gives the command /dev/null for stdout, as hyperfine's default
``--output=null`` does: nothing reads it, so printing costs the command no more than it
would alone."""


def tail(data: bytes, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of output, decoded leniently for storage."""
    return data[-limit:].decode("utf-8", errors="replace")


class OutputTail:
    """The last ``limit`` bytes of a stream read in chunks, and how many bytes it had.

    Chunks are kept as read and dropped whole from the front once the rest still holds
    ``limit`` bytes: memory stays within ``limit`` plus one chunk, and nothing is copied
    until :meth:`value`. A reader of a busy stream reads into :meth:`buffer`, which hands
    back the memory of dropped chunks, so gigabytes stream through a few reused buffers.
    """

    __slots__ = ("limit", "_chunks", "_kept", "total", "_spare")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._chunks: deque[bytes | memoryview] = deque()
        self._kept = 0
        self.total = 0
        self._spare: list[bytearray] = []

    def add(self, data: bytes | memoryview) -> None:
        """Append a chunk (bytes, or a view of a :meth:`buffer` it now owns)."""
        self._chunks.append(data)
        self._kept += len(data)
        self.total += len(data)
        while self._chunks and self._kept - len(self._chunks[0]) >= self.limit:
            dropped = self._chunks.popleft()
            self._kept -= len(dropped)
            if isinstance(dropped, memoryview) and isinstance(dropped.obj, bytearray):
                self._spare.append(dropped.obj)

    def add_read(self, buffer: bytearray, size: int) -> None:
        """Append the ``size`` bytes just read into ``buffer`` (from :meth:`buffer`): kept in
        place when they fill half of it or more, else copied out and the buffer reused, so
        memory stays within about twice what is kept however small the reads."""
        if 2 * size >= len(buffer):
            self.add(memoryview(buffer)[:size])
        else:
            self.add(bytes(memoryview(buffer)[:size]))
            self._spare.append(buffer)

    def buffer(self, size: int) -> bytearray:
        """A buffer of ``size`` bytes to read the next chunk into: one whose chunk was
        dropped, when there is one."""
        while self._spare:
            spare = self._spare.pop()
            if len(spare) == size:
                return spare
        return bytearray(size)

    @property
    def cut(self) -> bool:
        """Whether the stream was longer than what is kept."""
        return self.total > self.limit

    def value(self) -> bytes:
        data = b"".join(self._chunks)
        return data[len(data) - self.limit :] if len(data) > self.limit else data


SESSION_VARIABLE = "WASHOUT_SESSION"
"""The environment variable that marks every process of a trial with its session's random
token, so that ``resume`` can find what a dead session left running (hyperfine, likewise,
adds a variable of its own to what it runs)."""

METRIC_FILE_LIMIT = 16 << 20
"""The largest ``file`` metric washout reads (bytes): a metric file is a small report."""


@dataclass(frozen=True)
class CommandResult:
    """The outcome of one command on a worker.

    ``status`` is ``ok`` (exit 0), ``failed`` (non-zero exit or a signal), ``timeout``
    (killed at its timeout, with its whole process group) or ``lost`` (the connection to the
    worker dropped, so the outcome is unknown). ``reason`` says why in words when not ok.
    ``stdout`` and ``stderr`` are the ends of the streams (``output_tail`` bytes at most);
    ``stdout_cut``/``stderr_cut`` say a stream was longer. ``resources`` is what the
    command's process tree used, measured by the executor (``RESOURCE_METRICS``: user and
    system CPU seconds, peak RSS in bytes, as getrusage(2) gives them for waited-for
    children); a measure the executor could not take is absent, never 0.
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
    resources: dict[str, float] = field(default_factory=dict)
    extra_metrics: dict[str, float] = field(default_factory=dict)
    """Metrics taken around the command by what ran it (a trial's roles: sampled, energy,
    counters, other roles' files), by their metric names."""
    health: dict[str, float] = field(default_factory=dict)
    """The command's health metrics (``washout.harness.metrics.health``), measured when
    ``CommandOptions.health`` asked for them; one not measured is absent, never 0."""
    stdout_cut: bool = False
    stderr_cut: bool = False

    @classmethod
    def unstarted(
        cls,
        reason: str,
        started: datetime | None = None,
        duration: float = 0.0,
        cpus: str | None = None,
    ) -> CommandResult:
        """A command that failed before it ran: no exit code and no output; ``duration``
        is what the attempt took (the result ends now), 0 for none (it ends as it started)."""
        started = started or datetime.now(UTC)
        ended = datetime.now(UTC) if duration else started
        return cls("failed", None, b"", b"", started, ended, duration, reason, cpus)

    @classmethod
    def lost(
        cls, reason: str, started: datetime, duration: float, cpus: str | None = None
    ) -> CommandResult:
        """A command whose outcome is unknown (what carried it ended): no exit code and no
        output; it ends now."""
        return cls("lost", None, b"", b"", started, datetime.now(UTC), duration, reason, cpus)


@dataclass(frozen=True)
class CommandOptions:
    """How a command runs on a worker, whatever carries it: killed with its process group
    after ``timeout`` seconds (None: never), in ``cwd`` (None: the worker's workdir), with
    ``env`` added to the environment, pinned to ``cpus`` ("0-3,8"), and the last
    ``output_tail`` bytes of stdout kept (0: stdout is /dev/null) and of stderr (at least
    TAIL_BYTES), or stdout sent where ``output`` says (:func:`stdout_to`); with ``health``
    (a root, ``/`` on a real machine) the machine's health counters under it read just
    before and just after it, outside its timing (a trial's). One value that wrappers pass
    on, changing only what they change."""

    timeout: float | None
    cwd: str | None = None
    env: dict[str, str] | None = None
    cpus: str | None = None
    output_tail: int = OUTPUT_TAIL
    health: str | None = None
    blocking: bool = False
    """Nothing else needs the event loop while it runs (the engine's only worker, a plain
    trial): an executor may wait for it without the loop (the local fast path)."""
    output: str | None = None
    """A test's ``output`` (hyperfine's ``--output``: ``null``, ``pipe``, ``inherit`` or a
    file's path); None: as ``output_tail`` says."""
    input: str | None = None
    """A test's ``input``: the file its stdin reads, opened for each command (hyperfine's
    ``--input``); None: /dev/null."""


def stdout_to(options: CommandOptions) -> str:
    """Where a command's stdout goes: ``null``, ``pipe`` (read, its last ``output_tail``
    bytes kept: none with 0, as hyperfine's ``--output=pipe`` reads and drops it),
    ``inherit`` (washout's own stdout and stderr) or a file's path (made anew for each
    command, as hyperfine makes it for each run: src/options.rs, ``File::create``)."""
    if options.output is not None:
        return options.output
    return "pipe" if options.output_tail else "null"


@runtime_checkable
class Executor(Protocol):
    """A worker as the engine sees it: everything the engine, the environment capture and
    ``[experiment] sync`` use, and nothing else."""

    name: str
    """Worker name as recorded in the store (``local`` for the local machine)."""
    host: str
    """Where the worker is, as recorded in the store: ``localhost``, or the SSH host
    (``host:port`` with a port)."""
    workdir: str | None
    """The directory commands run in unless they say otherwise (None: as started)."""
    local: bool
    """Whether the worker is the machine washout runs on (its files are this machine's)."""

    async def connect(self) -> None:
        """Open what is needed (a connection); idempotent; called again after a reset."""

    def launcher_notes(self) -> list[str]:
        """Once connected: why this worker's commands start without a launcher, so that
        their ``wall`` and ``max_rss`` hold the harness's start of them (one line each,
        for the run's output and events; empty when they start from one)."""

    async def run(self, command: str, options: CommandOptions) -> CommandResult:
        """Run a shell command in its own process group as ``options`` say; kill the group
        at their timeout, and when washout itself dies; measure its ``RESOURCE_METRICS``."""

    async def read_file(self, path: str, cwd: str | None = None) -> bytes:
        """A metric file on the worker (relative paths resolve against ``cwd``): OSError
        unless it is a regular file of at most METRIC_FILE_LIMIT bytes."""

    async def remove_file(self, path: str, cwd: str | None = None) -> None:
        """Remove a metric file before the trial that writes it (none there is fine);
        OSError if it cannot be removed or is a directory."""

    async def kill_leftovers(self, sessions: list[str]) -> int:
        """SIGKILL what trials of earlier, dead sessions left running on the worker: every
        process whose environment has SESSION_VARIABLE set to one of ``sessions``; returns
        how many were killed."""

    async def mirror(self, directory: Path) -> str:
        """Make the worker's workdir an exact copy of the local ``directory``
        (``[experiment] sync``; the local machine already has it); returns how, for the
        log. WashoutError if the workdir is missing or too broad to be overwritten."""

    async def reboot(self, timeout: float, command: str | None = None) -> str:
        """Reboot the worker and wait until it is back (a ``reboot`` reset) within
        ``timeout`` seconds; returns what happened, for the store. WashoutError where
        washout cannot reboot the worker."""

    async def close(self) -> None:
        """Release connections; idempotent."""
