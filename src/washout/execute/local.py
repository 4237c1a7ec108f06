"""The local machine as a worker: each command (directly, or in ``/bin/sh -c`` if it has shell
syntax) in its own process group.

Waiting is event-driven (a pidfd and the pipes in the event loop), never a polling loop,
so washout costs no CPU while a trial runs. At a timeout the whole process group gets
SIGTERM, then SIGKILL after a grace period; after every command, whatever the trial left
behind in its group is killed too, so a stray child cannot perturb the next trial.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from washout.execute.base import CommandResult
from washout.pinning import parse_cpus

KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL for a timed-out process group."""


_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:,+@%-]+")
_SHELL_ONLY = frozenset({
    ".", ":", "alias", "break", "cd", "command", "continue", "eval", "exec", "exit", "export",
    "getopts", "hash", "read", "readonly", "return", "set", "shift", "source", "times", "trap",
    "type", "ulimit", "umask", "unalias", "unset", "wait"})


def argv_for(command: str, path: str | None = None) -> list[str]:
    """How to start ``command``: directly when it is plain words naming a program on PATH
    (no quotes, variables, globs, redirections, operators or shell builtins), otherwise
    with ``/bin/sh -c``.

    A plain command then runs with no shell between washout and the process measured, as
    ``hyperfine -N`` does: no shell start-up inside ``wall`` and half the fork/exec cost
    per trial (bench/engine_overhead.py). Anything the shell would interpret keeps the
    shell, so the meaning of a command never changes. ``path`` is the trial's PATH.
    """
    return list(_start(command, path)[1])


@functools.lru_cache(maxsize=1024)
def _start(command: str, path: str | None) -> tuple[str, tuple[str, ...]]:
    """The executable and argv of :func:`argv_for`. Cached, and the executable is the
    program found on PATH, so PATH is searched once per command rather than by every
    start (a dozen candidate paths built per trial)."""
    words = command.split()
    if (words and all(_PLAIN_WORD.fullmatch(w) for w in words)
            and words[0] not in _SHELL_ONLY and "=" not in words[0]):
        found = shutil.which(words[0], path=path)
        if found is not None:  # a name with a slash stays as given: relative to the cwd
            return (words[0] if "/" in words[0] else found), tuple(words)
    return "/bin/sh", ("/bin/sh", "-c", command)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _resolve(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)


def _have_pidfd() -> bool:
    """Whether this kernel gives pidfds (Linux >= 5.3)."""
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


HAVE_PIDFD = _have_pidfd()


@functools.cache
def _devnull() -> int:
    """One descriptor of /dev/null (close-on-exec) kept open for every trial's stdin,
    rather than an open and a close per trial."""
    return os.open(os.devnull, os.O_RDONLY)


class _Child:
    """A started process as the event loop sees it: its exit and its two pipes.

    Readiness callbacks on a pidfd and on the pipes, and one future awaited at a time: no
    task, transport or ``wait_for`` per command, which were most of washout's own CPU per
    trial of a no-op command (bench/engine_overhead.py). Without pidfds a thread blocks in
    ``waitpid`` instead, as Python 3.11's default child watcher does.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, proc: subprocess.Popen[bytes],
                 stdout: int, stderr: int) -> None:
        self.loop = loop
        self.proc = proc
        self.pid = proc.pid
        self.returncode: int | None = None
        self._waiter: asyncio.Future[bool] | None = None
        self._closed: asyncio.Future[bool] = loop.create_future()
        self._chunks: dict[int, list[bytes]] = {stdout: [], stderr: []}
        self._open = {stdout, stderr}
        for fd in self._chunks:  # blocking, but only read when readable: never blocks
            loop.add_reader(fd, self._on_output, fd)
        self._pidfd: int | None = None
        if HAVE_PIDFD:
            self._pidfd = os.pidfd_open(proc.pid)
            loop.add_reader(self._pidfd, self._on_exit)
        else:
            threading.Thread(target=self._wait_in_thread, daemon=True).start()

    def _wait_in_thread(self) -> None:
        self.proc.wait()
        try:
            self.loop.call_soon_threadsafe(self._on_exit)
        except RuntimeError:  # the loop was closed meanwhile: nobody is waiting
            pass

    def _on_exit(self) -> None:
        self._forget_pidfd()
        self.returncode = self.proc.wait()  # exited: waitpid returns at once
        if self._waiter is not None:
            _resolve(self._waiter, True)

    def _forget_pidfd(self) -> None:
        if self._pidfd is not None:
            self.loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _on_output(self, fd: int) -> None:
        data = os.read(fd, 65536)
        if data:
            self._chunks[fd].append(data)
            return
        self.loop.remove_reader(fd)
        self._open.discard(fd)
        if not self._open:
            _resolve(self._closed, True)

    async def wait(self, timeout: float | None) -> bool:
        """Until the process exits (True) or ``timeout`` seconds pass (False)."""
        if self.returncode is not None:
            return True
        waiter = self._waiter = self.loop.create_future()
        timer = None if timeout is None else self.loop.call_later(timeout, _resolve, waiter,
                                                                  False)
        try:
            return await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    async def kill_group(self) -> None:
        """SIGTERM the process group, wait up to KILL_GRACE, then SIGKILL it."""
        _signal_group(self.pid, signal.SIGTERM)
        await self.wait(KILL_GRACE)
        _signal_group(self.pid, signal.SIGKILL)
        await self.wait(None)

    async def output(self, limit: float) -> tuple[bytes, bytes]:
        """Stdout and stderr. A pipe still held open after ``limit`` seconds (by an
        escaped grandchild) is given up with what it gave so far."""
        if not self._closed.done():
            timer = self.loop.call_later(limit, _resolve, self._closed, False)
            try:
                await self._closed
            finally:
                timer.cancel()
        out, err = (b"".join(chunks) for chunks in self._chunks.values())
        return out, err

    def close(self) -> None:
        """Stop watching the process and close its pipes (whatever state it is in)."""
        self._forget_pidfd()
        for fd in self._chunks:
            if fd in self._open:
                self.loop.remove_reader(fd)
            os.close(fd)


class LocalExecutor:
    """Runs commands on this machine."""

    def __init__(self, name: str = "local") -> None:
        self.name = name

    async def connect(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def read_file(self, path: str, cwd: str | None = None) -> bytes:
        target = Path(cwd or ".") / path
        return await asyncio.to_thread(target.read_bytes)

    async def run(
        self,
        command: str,
        *,
        timeout: float | None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        cpus: str | None = None,
    ) -> CommandResult:
        full_env = None if not env else {**os.environ, **env}
        cpu_set = parse_cpus(cpus) if cpus else None
        preexec = (lambda: os.sched_setaffinity(0, cpu_set)) if cpu_set else None
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        if cpu_set and not cpu_set <= os.sched_getaffinity(0):
            return CommandResult("failed", None, b"", b"", started, started, 0.0,
                                 f"cannot pin to CPUs {cpus}: washout may use "
                                 f"{sorted(os.sched_getaffinity(0))}", cpus)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            executable, argv = _start(command, (full_env or os.environ).get("PATH"))
            proc = subprocess.Popen(
                argv, executable=executable, stdin=_devnull(), stdout=out_w, stderr=err_w,
                cwd=cwd, env=full_env, start_new_session=True, preexec_fn=preexec)
        except (OSError, subprocess.SubprocessError) as err:  # e.g. CPUs not on this machine
            os.close(out_r)
            os.close(err_r)
            now = datetime.now(UTC)
            return CommandResult("failed", None, b"", b"", started, now,
                                 time.perf_counter() - t0, f"could not start: {err}", cpus)
        finally:
            os.close(out_w)
            os.close(err_w)
        child = _Child(asyncio.get_running_loop(), proc, out_r, err_r)
        try:
            try:
                timed_out = not await child.wait(timeout)
            except asyncio.CancelledError:
                await child.kill_group()
                raise
            if timed_out:
                await child.kill_group()
            duration = time.perf_counter() - t0
            ended = datetime.now(UTC)
            _signal_group(proc.pid, signal.SIGKILL)  # whatever the command left behind
            stdout, stderr = await child.output(1.0)
        finally:
            child.close()
        code = child.returncode
        if timed_out:
            return CommandResult("timeout", code, stdout, stderr, started, ended, duration,
                                 f"timed out after {timeout:g} s; process group killed", cpus)
        if code != 0:
            why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            return CommandResult("failed", code, stdout, stderr, started, ended, duration, why, cpus)
        return CommandResult("ok", 0, stdout, stderr, started, ended, duration, "", cpus)
