"""The local machine as a worker: each command in ``/bin/sh -c`` in its own process group.

Waiting is event-driven (asyncio's child watcher), never a polling loop, so washout costs
no CPU while a trial runs. At a timeout the whole process group gets SIGTERM, then SIGKILL
after a grace period; after every command, whatever the trial left behind in its group is
killed too, so a stray child cannot perturb the next trial.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from washout.execute.base import CommandResult
from washout.pinning import parse_cpus

KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL for a timed-out process group."""


@contextmanager
def pidfd_child_watcher(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Wait for children through pidfds in the event loop itself, on Python 3.11.

    Python 3.11's default watcher starts a thread per child to block in waitpid (about a
    quarter of washout's own cost per trial of a no-op command: bench/engine_overhead.py);
    Python 3.12+ uses pidfds by default, so this only applies to 3.11 on Linux >= 5.3, and
    only in the main thread (the watcher is process-wide). The previous watcher is
    restored afterwards.
    """
    if (sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open")
            or threading.current_thread() is not threading.main_thread()):
        yield
        return
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # kernel without pidfds
        yield
        return
    policy = asyncio.get_event_loop_policy()
    previous = policy.get_child_watcher()  # type: ignore[attr-defined]
    watcher = asyncio.PidfdChildWatcher()  # type: ignore[attr-defined]
    watcher.attach_loop(loop)
    policy.set_child_watcher(watcher)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        policy.set_child_watcher(previous)  # type: ignore[attr-defined]


_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:,+@%-]+")
_SHELL_ONLY = frozenset({
    ".", ":", "alias", "break", "cd", "command", "continue", "eval", "exec", "exit", "export",
    "getopts", "hash", "read", "readonly", "return", "set", "shift", "source", "times", "trap",
    "type", "ulimit", "umask", "unalias", "unset", "wait"})


@functools.lru_cache(maxsize=1024)
def _on_path(program: str, path: str | None) -> bool:
    return shutil.which(program, path=path) is not None


def argv_for(command: str, path: str | None = None) -> list[str]:
    """How to start ``command``: directly when it is plain words naming a program on PATH
    (no quotes, variables, globs, redirections, operators or shell builtins), otherwise
    with ``/bin/sh -c``.

    A plain command then runs with no shell between washout and the process measured, as
    ``hyperfine -N`` does: no shell start-up inside ``wall`` and half the fork/exec cost
    per trial (bench/engine_overhead.py). Anything the shell would interpret keeps the
    shell, so the meaning of a command never changes. ``path`` is the trial's PATH.
    """
    words = command.split()
    if (words and all(_PLAIN_WORD.fullmatch(w) for w in words)
            and words[0] not in _SHELL_ONLY and "=" not in words[0]
            and _on_path(words[0], path)):
        return words
    return ["/bin/sh", "-c", command]


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group, wait up to KILL_GRACE, then SIGKILL it."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), KILL_GRACE)
    except TimeoutError:
        pass
    _signal_group(proc.pid, signal.SIGKILL)
    await proc.wait()


async def _drain(task: asyncio.Task[bytes]) -> bytes:
    """Output read so far; a pipe still held open by an escaped grandchild is given up."""
    try:
        return await asyncio.wait_for(task, 1.0)
    except TimeoutError:
        task.cancel()
        return b""


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
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv_for(command, (full_env or os.environ).get("PATH")),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd, env=full_env, start_new_session=True, preexec_fn=preexec,
            )
        except (OSError, subprocess.SubprocessError) as err:  # e.g. CPUs not on this machine
            now = datetime.now(UTC)
            return CommandResult("failed", None, b"", b"", started, now,
                                 time.perf_counter() - t0, f"could not start: {err}", cpus)
        out_task = asyncio.ensure_future(proc.stdout.read())  # type: ignore[union-attr]
        err_task = asyncio.ensure_future(proc.stderr.read())  # type: ignore[union-attr]
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            timed_out = True
            await _kill_group(proc)
        except asyncio.CancelledError:
            await _kill_group(proc)
            raise
        duration = time.perf_counter() - t0
        ended = datetime.now(UTC)
        _signal_group(proc.pid, signal.SIGKILL)
        stdout, stderr = await _drain(out_task), await _drain(err_task)
        code = proc.returncode
        if timed_out:
            return CommandResult("timeout", code, stdout, stderr, started, ended, duration,
                                 f"timed out after {timeout:g} s; process group killed", cpus)
        if code != 0:
            why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            return CommandResult("failed", code, stdout, stderr, started, ended, duration, why, cpus)
        return CommandResult("ok", 0, stdout, stderr, started, ended, duration, "", cpus)
