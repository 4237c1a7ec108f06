"""washout's end of a launcher (``launch.c``): a small long-lived process that starts each
local command on request and replies with its pid, then with its exit, its wall time
measured in C around vfork ... waitid, and wait4's resource use.

A trial started from it inherits the launcher's memory high-water mark (about a megabyte),
not washout's, so its ``max_rss`` is its own; and washout's own work is outside its timed
window. The request carries the command's stdout and stderr descriptors (SCM_RIGHTS).
"""

from __future__ import annotations

import functools
import os
import socket
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

_HEADER = struct.Struct("=6I")
_REPLY = struct.Struct("=10q")
STARTED, FINISHED = 1, 2
HEALTH = 1
"""Request flag: read the exited process's CPU migrations before reaping it."""
_STEPS = {1: "cwd", 2: "exec", 3: "cpus", 4: "fork"}


def start_error(error: int, step: str | None, executable: str, cwd: str | None) -> OSError:
    """A start the launcher could not make, as a start in washout would raise it (naming
    the directory or program it could not use)."""
    what = {"cwd": cwd, "exec": executable}.get(step or "")
    return OSError(error, os.strerror(error), *([what] if what else []))


class LauncherGone(Exception):
    """The launcher ended (killed, or never started): its command's outcome is unknown."""


@dataclass(frozen=True)
class Exit:
    """A command's end as the launcher saw it."""

    status: int
    """Its wait status (``os.waitstatus_to_exitcode`` reads it)."""
    wall: float
    """Seconds from just before its start to just after its exit was seen."""
    user: float
    system: float
    max_rss: float
    """Peak resident set, bytes (wait4's ``ru_maxrss``)."""
    involuntary: int
    """Involuntary context switches."""
    migrations: float | None
    """CPU migrations of its main thread (None: not read, or this kernel does not say)."""

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "status": self.status,
            "wall": self.wall,
            "user": self.user,
            "system": self.system,
            "max_rss": self.max_rss,
            "involuntary": self.involuntary,
            "migrations": self.migrations,
        }


def environment_block(env: dict[str, str]) -> tuple[int, bytes]:
    """An environment as the launcher's request carries it: its count and its
    ``KEY=VALUE`` strings, each NUL-terminated."""
    return len(env), b"".join(os.fsencode(f"{k}={v}") + b"\0" for k, v in env.items())


@functools.lru_cache(maxsize=64)
def _request(
    executable: str,
    argv: tuple[str, ...],
    env: tuple[int, bytes],
    cwd: str,
    cpus: str,
    health: bool,
) -> bytes:
    """A start request, header and payload (see ``launch.c``): the same for every trial of a
    test, so made once rather than per start (the environment alone is kilobytes)."""
    payload = b"".join(os.fsencode(part) + b"\0" for part in (executable, cwd, cpus, *argv))
    payload += env[1]
    flags = HEALTH if health else 0
    return _HEADER.pack(len(payload), len(argv), env[0], flags, 0, 0) + payload


class Launcher:
    """One launcher process: one command at a time."""

    def __init__(self, program: Path) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                [str(program), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.socket = ours

    def alive(self) -> bool:
        return self.process.poll() is None

    def start(
        self,
        executable: str,
        argv: tuple[str, ...],
        env: tuple[int, bytes],
        streams: tuple[int, ...],
        cwd: str | None,
        cpus: set[int] | None,
        health: bool,
    ) -> int:
        """Start a command (its stdin, stdout and stderr ``streams``; stdout and stderr with
        two, stderr with one, /dev/null for the others): its pid once it has started.
        Raises OSError as a start in washout would (naming the directory or program it
        could not use), LauncherGone if the launcher has ended."""
        cpu_list = ",".join(map(str, sorted(cpus))) if cpus else ""
        message = _request(executable, argv, env, cwd or "", cpu_list, health)
        try:  # one message, so the launcher wakes once to read it whole
            sent = socket.send_fds(self.socket, [message], list(streams))
            if sent < len(message):
                self.socket.sendall(message[sent:])
            kind, pid, error, step, *_ = self._reply()
        except OSError as err:
            raise LauncherGone(f"cannot reach it: {err}") from None
        assert kind == STARTED
        if step:
            raise start_error(error, _STEPS.get(step), executable, cwd)
        return pid

    def finished(self) -> Exit:
        """The end of the command started last (blocks until the launcher replies)."""
        kind, _, _, status, wall, user, system, rss, switches, moved = self._reply()
        assert kind == FINISHED
        return Exit(
            status,
            wall / 1e9,
            user / 1e9,
            system / 1e9,
            rss * 1024.0,  # Linux counts KiB
            switches,
            None if moved < 0 else float(moved),
        )

    def _reply(self) -> tuple[int, ...]:
        return _REPLY.unpack(self._received(_REPLY.size))

    def _received(self, size: int) -> bytes:
        """``size`` bytes from the launcher; LauncherGone if it ended first, whether its
        end reads as the socket's end or as a reset (it was killed with washout's word,
        such as a batch's stop, still unread: recv raised ECONNRESET, a traceback once)."""
        try:
            data = self.socket.recv(size, socket.MSG_WAITALL) if size else b""
        except OSError as err:
            raise LauncherGone(f"it ended ({err.strerror})") from None
        if len(data) < size:
            raise LauncherGone(f"it ended (exit status {self.process.poll()})")
        return data

    def batch(self, request: bytes, journal: int, stdout: int, stderr: int) -> None:
        """Start a batch (:func:`batch_request`): its records appended to ``journal``, its
        trials' stdout and stderr to ``stdout`` and ``stderr`` (files, or /dev/null). Raises
        LauncherGone if the launcher has ended."""
        try:
            sent = socket.send_fds(self.socket, [request], [journal, stdout, stderr])
            if sent < len(request):
                self.socket.sendall(request[sent:])
        except OSError as err:
            raise LauncherGone(f"cannot reach it: {err}") from None

    def tell(self, word: bytes) -> None:
        """Tell a running batch ``b"s"`` (stop after the trial in flight) or ``b"k"`` (kill
        it); a launcher that has ended hears nothing."""
        try:
            self.socket.send(word)
        except OSError:
            pass

    def batch_end(self) -> BatchEnd:
        """The end of the batch started last (blocks until the launcher replies)."""
        _, recorded, why, error, step, *measures, length = _BATCH_END.unpack(
            self._received(_BATCH_END.size)
        )
        record = self._received(length)
        return BatchEnd(
            recorded,
            END_REASONS[why],
            error,
            _STEPS.get(step),
            dict(zip(MEASURES, measures, strict=True)),
            record,
        )

    def close(self) -> None:
        """End it (it exits at the end of its socket) and reap it."""
        self.socket.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- batches: trials back to back, with no message to washout between them (launch.c) -----

BATCH = 4
"""Request flag: a batch (``launch.c``, ``batch``)."""
BEFORE, AFTER = 1, 2
"""When a probe is read: before each trial of a batch, after it, or both (1 | 2)."""
MEASURES = (
    "status",
    "wall",
    "user",
    "system",
    "max_rss",
    "switches",
    "migrations",
    "started",
    "ended",
    "now",
    "pid",
)
"""What the launcher knows of a batch's trial, each an integer a template's hole can hold:
its wait status; wall, user and system time (ns); max RSS (KiB); involuntary switches;
CPU migrations (-1: not read); the real-time clock (ns since the epoch) at its start, at
its end and as its record is made; its pid."""
END_REASONS = ("done", "stopped", "failed", "output", "timeout", "killed", "unstarted", "journal")
"""Why a batch ended, by the launcher's code: every trial recorded; washout asked it to stop
(the last trial recorded without its successor's start); the last trial, not recorded,
exited non-zero, wrote to its stdout or stderr, timed out, was killed at washout's word,
could not start, or its record could not be written."""
_BATCH_END = struct.Struct(f"=5q{len(MEASURES)}qq")
_COUNTS = struct.Struct("=2I")
_TRIAL = struct.Struct("=Iq2I")


def hole(code: str, index: int) -> bytes:
    """A template's hole, filled by the launcher (``launch.c``, ``fill``): the measure
    ``index`` of :data:`MEASURES` as an integer (``n``), in ns as seconds (``s``), in KiB
    as bytes (``k``), or a real-time clock reading as the store writes a time (``t``);
    probe ``index``'s value before or after the trial (``b``, ``a``); the batch's constant
    ``index`` (``c``: text the same in many records, sent once)."""
    assert len(code) == 1 and code in "nsktbac" and 0 <= index < 256
    return b"\x01" + code.encode() + bytes([index])


@dataclass(frozen=True)
class Probe:
    """A file a batch reads around its trials (``launch.c``, ``probe_read``): ``L`` the
    line of ``path`` starting with ``arg``; ``M`` the 8 bytes at offset ``arg`` (an MSR);
    ``K`` the kernel log's records since the last reading; ``W`` the ``pswpin`` and
    ``pswpout`` lines of the vmstat file ``arg`` (one string) where the swaps file ``path``
    lists a device (or did). Each value is a scalar of JSON: a record's statements hold
    nothing else."""

    kind: str
    when: int
    path: str
    arg: str = ""


@dataclass(frozen=True)
class Program:
    """A command of a batch: as :meth:`Launcher.start` takes it."""

    executable: str
    argv: tuple[str, ...]
    env: tuple[int, bytes]
    cwd: str | None
    cpus: set[int] | None


@dataclass(frozen=True)
class BatchTrial:
    """One trial of a batch: its program (an index), timeout, and the two templates of its
    record: its end, and what follows when the batch goes on (the next trial's start)."""

    program: int
    timeout: float | None
    finish: bytes
    then: bytes


@dataclass(frozen=True)
class BatchEnd:
    """How a batch ended (``launch.c``, ``batch``)."""

    recorded: int
    """Trials whose records the launcher wrote."""
    why: str
    """One of :data:`END_REASONS`."""
    error: int
    """errno of a start or a write that failed (0: none)."""
    step: str | None
    """The step of a start that failed (``cwd``, ``exec``, ``cpus``, ``fork``)."""
    measures: dict[str, int]
    """The last trial's :data:`MEASURES`."""
    record: bytes
    """The last trial's record when it was not written (its template filled in)."""


def batch_request(
    probes: list[Probe],
    programs: list[Program],
    trials: list[BatchTrial],
    health: bool,
    constants: tuple[bytes, ...] = (),
) -> bytes:
    """A batch request, header and payload (``launch.c``, ``batch``)."""
    parts = [
        p.kind.encode() + bytes([p.when]) + os.fsencode(p.path) + b"\0" + os.fsencode(p.arg) + b"\0"
        for p in probes
    ]
    parts += [constant + b"\0" for constant in constants]
    for program in programs:
        cpus = ",".join(map(str, sorted(program.cpus))) if program.cpus else ""
        strings = (program.executable, program.cwd or "", cpus, *program.argv)
        parts.append(_COUNTS.pack(len(program.argv), program.env[0]))
        parts.append(b"".join(os.fsencode(s) + b"\0" for s in strings) + program.env[1])
    for trial in trials:
        timeout = -1 if trial.timeout is None else round(trial.timeout * 1e9)
        parts.append(
            _TRIAL.pack(trial.program, timeout, len(trial.finish), len(trial.then))
            + trial.finish
            + trial.then
        )
    payload = b"".join(parts)
    flags = BATCH | (HEALTH if health else 0)
    counts = (len(programs), len(trials), flags, len(probes), len(constants))
    return _HEADER.pack(len(payload), *counts) + payload
