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
            what = {"cwd": cwd, "exec": executable}.get(_STEPS.get(step, ""), None)
            raise OSError(error, os.strerror(error), *([what] if what else []))
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
        data = self.socket.recv(_REPLY.size, socket.MSG_WAITALL)
        if len(data) < _REPLY.size:
            raise LauncherGone(f"it ended (exit status {self.process.poll()})")
        return _REPLY.unpack(data)

    def close(self) -> None:
        """End it (it exits at the end of its socket) and reap it."""
        self.socket.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
