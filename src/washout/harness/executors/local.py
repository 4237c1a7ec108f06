"""The local machine as a worker: each command (directly, or in ``/bin/sh -c`` if it has shell
syntax) in its own process group.

Waiting is event-driven (a pidfd and the pipes in the event loop), never a polling loop,
so washout costs no CPU while a trial runs. At a timeout the whole process group gets
SIGTERM, then SIGKILL after a grace period; after every command, whatever the trial left
behind in its group is killed too, so a stray child cannot perturb the next trial.

Output streams through: only the last ``output_tail`` bytes of each stream are kept, and a
stream that fills its pipe gets a larger pipe and larger reads, so a command printing
gigabytes is slowed as little as a reader can manage and washout's memory stays bounded.

Trials die with washout: a guard process (one per washout process, started with the first
command) waits for washout's end and then SIGKILLs every process group still registered
with it, however washout ended (SIGKILL included).
"""

from __future__ import annotations

import asyncio
import atexit
import fcntl
import functools
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import termios
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from washout.data.health import INVOLUNTARY_SWITCHES, MIGRATIONS, health_values
from washout.errors import WashoutError
from washout.harness.executors.base import (
    METRIC_FILE_LIMIT,
    SESSION_VARIABLE,
    TAIL_BYTES,
    CommandOptions,
    CommandResult,
    OutputTail,
    stdout_to,
)
from washout.harness.launcher.build import launcher_program, no_launcher_note
from washout.harness.launcher.client import (
    BatchEnd,
    BatchTrial,
    Launcher,
    LauncherGone,
    Probe,
    Program,
    batch_request,
    environment_block,
)
from washout.harness.metrics.health import LocalHealth, sched_migrations, trial_cpus
from washout.harness.pinning import parse_cpus

TURN_SECONDS = 0.1
"""The fast path (``CommandOptions.blocking``): the longest between two turns the event loop
is given before a trial, so a signal that comes between two trials (Ctrl-C, SIGTERM) and the
engine's timers wait at most about this long; one that comes during a trial ends its
blocking wait at once (:class:`_SignalWake`)."""
KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL for a timed-out process group."""
SMALL_READ, LARGE_READ = 65536, 1 << 20
"""Bytes per read of a pipe: small at first (most trials print little), large (with a pipe
grown to match) once a read fills the small size."""


_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:,+@%-]+")
_SHELL_ONLY = frozenset(
    {
        ".",
        ":",
        "alias",
        "break",
        "cd",
        "command",
        "continue",
        "eval",
        "exec",
        "exit",
        "export",
        "getopts",
        "hash",
        "read",
        "readonly",
        "return",
        "set",
        "shift",
        "source",
        "times",
        "trap",
        "type",
        "ulimit",
        "umask",
        "unalias",
        "unset",
        "wait",
    }
)


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


def plain_words(command: str) -> list[str] | None:
    """The words of a command that needs no shell (plain words, the first not a shell
    builtin nor an assignment), else None; an SSH worker's launcher starts those words too."""
    words = command.split()
    if (
        words
        and all(_PLAIN_WORD.fullmatch(w) for w in words)
        and words[0] not in _SHELL_ONLY
        and "=" not in words[0]
    ):
        return words
    return None


@functools.lru_cache(maxsize=1024)
def _start(command: str, path: str | None) -> tuple[str, tuple[str, ...]]:
    """The executable and argv of :func:`argv_for`. Cached, and the executable is the
    program found on PATH, so PATH is searched once per command rather than by every
    start (a dozen candidate paths built per trial)."""
    words = plain_words(command)
    if words:
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


_GUARD_SCRIPT = """trap '' INT HUP
while read -r _; do :; done
for g in $(cat /dev/fd/{fd}); do kill -s KILL -- "-$g"; done 2>/dev/null
"""
"""The guard: it waits for washout's end of the pipe to close, then kills every group in the
shared file. The file is read by path (/dev/fd/N): dash cannot redirect from a descriptor
above 9, and the file's number depends on what washout has open."""


class _GroupGuard:
    """Kills the registered trial process groups when washout dies.

    A ``/bin/sh`` in a session of its own blocks reading a pipe whose only writer is
    washout; when washout exits, however, the kernel closes that end, the read returns and
    the guard SIGKILLs every group listed in a memory file shared with it. Registering a
    group is one ``pwrite`` (no message, so the guard never wakes during a trial); it does
    not rely on a parent-death signal, which would reach only the group leader, and only
    when the thread that started it ends.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._written = 0
        self._file = os.memfd_create("washout-trial-groups")
        # Only washout holds the write end (close-on-exec): its closing is the signal.
        alive_r, self._alive_w = os.pipe()
        try:
            self._process = subprocess.Popen(
                ["/bin/sh", "-c", _GUARD_SCRIPT.format(fd=self._file)],
                stdin=alive_r,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(self._file,),
                cwd="/",
                start_new_session=True,
            )
        finally:
            os.close(alive_r)
        atexit.register(self.end)

    def end(self) -> None:
        """At this process's exit, close washout's end of the pipe (the guard then kills what
        is still registered, nothing after a clean end, and exits) and reap the guard; once.
        Used in-process (``washout.run`` from a script or a notebook), it was left running
        through the interpreter's teardown, which warned "ResourceWarning: subprocess N is
        still running" as it freed the guard; the CLI, which ends without that teardown,
        calls it through :func:`end_local_processes`."""
        if self._alive_w < 0:
            return
        os.close(self._alive_w)
        self._alive_w = -1
        try:
            self._process.wait(5)
        except subprocess.TimeoutExpired:  # never seen: it only reads, kills and exits
            self._process.kill()
            self._process.wait()

    def _write(self) -> None:
        text = " ".join(map(str, self._groups))
        os.pwrite(self._file, text.ljust(self._written).encode(), 0)
        self._written = len(text)

    def register(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            self._write()

    def forget(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)
            self._write()


@functools.cache
def _guard() -> _GroupGuard:
    """This process's guard, started with its first command."""
    return _GroupGuard()


def _grow_pipe(fd: int) -> None:
    """Give a busy pipe LARGE_READ bytes of buffer (fewer, larger reads); where the
    system refuses (over its pipe quota), it keeps its size."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, LARGE_READ)
    except OSError:
        pass


@functools.cache
def _devnull(flags: int = os.O_RDONLY) -> int:
    """One descriptor of /dev/null (close-on-exec) kept open for every trial's stdin (and
    for stdout under ``output_tail = 0``), rather than an open and a close per trial."""
    return os.open(os.devnull, flags)


_peak_rss_seen = 0
"""washout's own peak RSS in KiB as last read (it only grows)."""


def _launcher_streams(stdin: int | None, out: int, err: int, null: bool) -> tuple[int, ...]:
    """A command's streams as its launcher's request carries them: only those it does not
    take as /dev/null itself (launch.c: stdin, stdout, stderr; stdout, stderr; stderr)."""
    if stdin is not None:
        return stdin, out, err
    return (err,) if null else (out, err)


def _open_stream(path: str, flags: int) -> int:
    """``path`` opened for a command's stream without waiting at the open: a FIFO with no
    one at its other end would hold washout there, outside any timeout (one to write to
    fails at once, ENXIO; one to read from opens, and the command waits on its reads as
    it would under a shell's redirection). The command gets it blocking, as files are."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    os.set_blocking(fd, True)
    return fd


def _outputs(where: str) -> tuple[int | None, int, int | None, int]:
    """A command's stdout and stderr as :func:`~.base.stdout_to` says: the read end of each
    pipe washout reads (None: none) and what the command gets. stderr is a pipe (its tail
    is a failure's reason) but with ``inherit``; a file is made anew (its own descriptor,
    closed by the caller with a pipe's end)."""
    if where == "inherit":
        return None, 1, None, 2
    err_r, err_w = os.pipe()
    try:
        if where == "null":
            return None, _devnull(os.O_WRONLY), err_r, err_w
        if where == "pipe":
            return (*os.pipe(), err_r, err_w)
        return None, _open_stream(where, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), err_r, err_w
    except OSError:
        os.close(err_r)
        os.close(err_w)
        raise


def _own_peak_rss(than: int) -> int:
    """washout's own peak RSS in KiB (``VmHWM``, its memory's high-water mark: not
    ``getrusage``'s, which holds the peak of whatever process started washout), read
    again only when ``than`` exceeds what was last read, since it only grows."""
    global _peak_rss_seen
    if than > _peak_rss_seen:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    _peak_rss_seen = int(line.split()[1])
                    break
    return _peak_rss_seen


_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)
"""Signals Python ignores that a command gets back at their defaults (as Popen's
``restore_signals`` does): ``yes | head -1`` must end by SIGPIPE in a trial as in a shell."""


def _inherited_descriptors() -> list[int]:
    """Descriptors above 2 that a started program would inherit: Python opens its own
    close-on-exec, so these are only what washout's parent passed down (or a host process
    made inheritable). Read per start, since that can change."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and os.get_inheritable(fd):
                found.append(fd)
        except OSError:  # the listing's own descriptor, closed by now
            continue
    return found


def _spawn(
    executable: str,
    argv: tuple[str, ...],
    env: dict[str, str],
    streams: tuple[int | None, int, int],
    cwd: str | None,
    cpu_set: set[int] | None,
) -> tuple[int, subprocess.Popen[bytes] | None, float]:
    """Start a command in a session of its own, ``streams`` as its stdin (None:
    /dev/null), stdout and stderr, with nothing else of washout's open; its pid, Popen if
    it made one, and the ``perf_counter`` just before the start (where its wall time
    begins: everything washout prepares for a start comes before it, as hyperfine starts
    its clock just before it spawns).

    ``os.posix_spawn`` (glibc: clone with CLONE_VFORK, then exec) costs washout less than
    half of ``subprocess.Popen``'s CPU per start (bench/RESULTS.md, "Engine overhead per
    trial"), the largest part of its own work per trial of a short command. Popen remains for a
    working directory (Python's posix_spawn has no chdir action) and for the rare case of
    an output descriptor at 0-2 (washout started with a standard stream closed, or
    ``inherit``'s own). CPUs are
    pinned by inheritance: the starting thread takes the trial's CPUs for the start and
    gets its own back, so no Python runs in the child (a ``preexec_fn`` forces a full
    fork)."""
    own = os.sched_getaffinity(0) if cpu_set else None
    if cpu_set:
        os.sched_setaffinity(0, cpu_set)
    try:
        stdin, stdout, stderr = _devnull() if streams[0] is None else streams[0], *streams[1:]
        if cwd is None and min(stdout, stderr) > 2:
            actions: list[tuple[int, ...]] = [
                (os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited_descriptors()
            ]
            actions += [
                (os.POSIX_SPAWN_DUP2, stdin, 0),
                (os.POSIX_SPAWN_DUP2, stdout, 1),
                (os.POSIX_SPAWN_DUP2, stderr, 2),
            ]
            begun = time.perf_counter()
            pid = os.posix_spawn(
                executable,
                argv,
                env,
                file_actions=actions,
                setsigdef=_DEFAULT_SIGNALS,
                setsid=True,
            )
            return pid, None, begun
        begun = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            executable=executable,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        return proc.pid, proc, begun
    finally:
        if own is not None:
            os.sched_setaffinity(0, own)


class _SignalWake:
    """Signals wake the fast path's blocking wait, which otherwise sleeps until its command
    ends or times out: no wake-up of washout's at a fixed time inside the command's window
    (any fixed time is the length of some command: with a wake-up at 0.1 s, ``sleep 0.1``
    was stored 0.3-0.5 ms longer than hyperfine -N measured it).

    asyncio learns of a signal it handles (``loop.add_signal_handler``: Ctrl-C, SIGTERM)
    from the byte Python's C-level handler writes to the wakeup descriptor
    (``signal.set_wakeup_fd``, the loop's self-pipe), and handles it when the loop next
    turns; a blocking wait keeps the loop from turning. So for the wait the wakeup
    descriptor is a pipe of its own, polled with the command's, and then the loop's again,
    with every byte the pipe got handed on to it: a signal ends the wait at once, and the
    loop sees each signal as if it had gone to it directly (a signal after the swap back
    goes there itself). One that came before the swap, since the loop last turned (between
    two trials), is still unread in the loop's socket: then the wait is left to the loop
    (``due``). Only the main thread may set it; elsewhere no handler of the loop's can be
    installed either, and the wait watches no signals (``fd`` None)."""

    def __init__(self) -> None:
        self.fd: int | None = None
        """The pipe to poll during the wait (None: signals not watched)."""
        self.due = False
        """Whether the loop already has a signal to handle (one that came before the swap,
        since the loop last turned): then there is no wait to do without it."""
        self._loops = -1

    def __enter__(self) -> _SignalWake:
        read, write, _ = _wake_pipe()
        try:
            self._loops = signal.set_wakeup_fd(write)
        except ValueError:  # not the main thread
            return self
        self.fd = read
        self.due = self._loops != -1 and _unread(self._loops)
        return self

    def __exit__(self, *_: object) -> None:
        if self.fd is None:
            return
        signal.set_wakeup_fd(self._loops)
        if _wake_pipe()[2].poll(0):  # a signal came during the wait
            got = os.read(self.fd, 1 << 16)  # a pipe's whole buffer
            if self._loops != -1:
                try:
                    os.write(self._loops, got)
                except BlockingIOError:  # full: the loop has signals to read already
                    pass


def _unread(fd: int) -> bool:
    """Whether the loop's wakeup socket holds bytes its loop has not read yet: what a stream
    socket sent stays counted in its send queue until the peer reads it (SIOCOUTQ, unix(7)).
    Not a socket (another loop's pipe): said to, so the loop is asked."""
    try:
        return fcntl.ioctl(fd, termios.TIOCOUTQ, b"\0\0\0\0") != b"\0\0\0\0"
    except OSError:
        return True


@functools.cache
def _wake_pipe() -> tuple[int, int, select.poll]:
    """The pipe :class:`_SignalWake` makes the wakeup descriptor (non-blocking, as
    ``signal.set_wakeup_fd`` needs; one per process, emptied after every wait), and a poll
    of its end, which says whether a signal came without a failing read."""
    read, write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    pending = select.poll()
    pending.register(read, select.POLLIN)
    return read, write, pending


def _has_exited(pid: int) -> bool:
    """Whether child ``pid`` has exited, leaving it to be reaped (waitid(2), WNOWAIT)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


class _Child:
    """A started process as the event loop sees it: its exit and its pipes, each read into
    its OutputTail.

    Readiness callbacks on a pidfd and on the pipes, and one future awaited at a time: no
    task, transport or ``wait_for`` per command, which were most of washout's own CPU per
    trial of a no-op command (bench/engine_overhead.py). Without pidfds a thread blocks in
    ``waitpid`` instead, as Python 3.11's default child watcher does.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        pid: int,
        pipes: dict[int, OutputTail],
        proc: subprocess.Popen[bytes] | None = None,
        health: bool = False,
        launcher: Launcher | None = None,
    ) -> None:
        self.loop = loop
        self.proc = proc
        """The Popen of a command started by it (told its status when reaped), else None."""
        self.pid = pid
        self.returncode: int | None = None
        self.exited: float | None = None
        """The ``perf_counter`` just after its exit was seen (its pidfd readable, or
        wait4(2) returned its status): where its wall time ends, before any of washout's own
        work after an exit (a health reading comes after it)."""
        self.wall: float | None = None
        """Its wall time as its launcher measured it (None: started by washout itself)."""
        self.launcher = launcher
        """The launcher that started it, while it is watched through it."""
        self.launcher_gone: str | None = None
        """Why its launcher ended before saying how the command ended (None: it did not)."""
        self.resources: dict[str, float] = {}
        """CPU seconds and peak RSS of the process and its waited-for descendants
        (RESOURCE_METRICS), from wait4(2)."""
        self.health = health
        self.health_values: dict[str, float] = {}
        """With ``health``: its involuntary context switches (wait4) and its main thread's
        CPU migrations (read between its exit and its reaping)."""
        self._waiter: asyncio.Future[bool] | None = None
        self._closed: asyncio.Future[bool] | None = None
        """Told when its last pipe closes, while :meth:`drain` waits for that."""
        self._tails = pipes
        self._read_size = dict.fromkeys(pipes, SMALL_READ)
        self._open = set(pipes)
        self._watched = False
        """Whether the event loop watches its pipes and its end (:meth:`_watch`)."""
        self._pidfd: int | None = None
        if launcher is None and HAVE_PIDFD:
            self._pidfd = os.pidfd_open(pid)
        elif launcher is None:
            threading.Thread(target=self._wait_in_thread, daemon=True).start()

    @property
    def _end_fd(self) -> int | None:
        """What becomes readable at its end: its launcher's socket, or its pidfd (None: a
        thread waits for it)."""
        return self.launcher.socket.fileno() if self.launcher is not None else self._pidfd

    def _watch(self) -> None:
        """Hand its pipes and its end to the event loop (once; before then, only
        :meth:`wait_blocking` reads them)."""
        if self._watched:
            return
        self._watched = True
        for fd in self._open:  # blocking, but only read when readable: never blocks
            self.loop.add_reader(fd, self._on_output, fd)
        end = self._end_fd
        if end is not None and not self.ended:
            self.loop.add_reader(end, self._on_end)

    def _on_end(self) -> None:
        """Its end is readable: its launcher's reply, or its pidfd."""
        if self.launcher is not None:
            self._on_reply()
        else:
            self._on_exit()

    def wait_blocking(self, timeout: float | None, wake: int | None) -> bool:
        """Wait without the event loop (poll(2) on its pipes, its end and ``wake``) until it
        has ended, ``timeout`` seconds pass (None: no limit) or ``wake`` is readable, then
        read what its pipes still hold: whether it has ended with its pipes closed. The
        fast path's wait (a plain trial with nothing else to run meanwhile): no callback,
        future, timer or loop turn per command, and no wake-up of washout's while it runs,
        however long it runs. What is left (a signal to handle, a timeout, a pipe a child
        left running holds) goes on in the event loop, from where this stopped."""
        end = self._end_fd
        if end is None or self._watched:
            return False
        poller = select.poll()
        for fd in (*self._open, *([] if wake is None else [wake])):
            poller.register(fd, select.POLLIN)
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self.ended:
            poller.register(end, select.POLLIN)
        while not self.ended:
            left = -1.0 if deadline is None else max(0.0, deadline - time.monotonic()) * 1000
            ready = poller.poll(left)
            if not ready or any(fd == wake for fd, _ in ready):
                return False
            for fd, _ in ready:
                if fd != end:
                    self._read_ready(poller, fd)
                elif not self.ended:  # (a pipe's end may have seen its exit first)
                    self._on_end()
            if self.ended:
                poller.unregister(end)  # a pidfd is closed by now: no longer polled
        # its ends of the pipes close at its exit, or (held by its launcher) just after
        # the launcher's reply: what they still hold is read to their end of file, for at
        # most TURN_SECONDS (longer, they are held open by a process it left running)
        closed_by = time.monotonic() + TURN_SECONDS
        while self._open:
            ready = poller.poll(max(0.0, closed_by - time.monotonic()) * 1000)
            readable = [fd for fd, _ in ready if fd in self._open]
            if not readable or any(fd == wake for fd, _ in ready):
                return False
            for fd in readable:
                self._read_ready(poller, fd)
        return True

    def _read_ready(self, poller: select.poll, fd: int) -> None:
        """One read of a readable pipe of :meth:`wait_blocking` (the last may see its exit,
        a pidfd's), which stops polling it once it is closed."""
        if fd in self._open:
            self._on_output(fd)
            if fd not in self._open:
                poller.unregister(fd)

    def _wait_in_thread(self) -> None:
        self._reap()
        try:
            self.loop.call_soon_threadsafe(self._on_exit)
        except RuntimeError:  # the loop was closed meanwhile: nobody is waiting
            pass

    def _reap(self) -> None:
        """Wait for the process (wait4, so its resource use comes with its status).

        A process forked by washout starts out with washout's own peak RSS as its
        ``ru_maxrss`` (Linux keeps the high-water mark of the memory it leaves at exec), so
        a peak at or below washout's own is not the trial's: ``max_rss`` is then absent
        rather than wrong."""
        if self.returncode is None:
            _, status, usage = os.wait4(self.pid, 0)
            if self.exited is None:
                self.exited = time.perf_counter()
            self.returncode = os.waitstatus_to_exitcode(status)
            if self.health:
                self.health_values[INVOLUNTARY_SWITCHES] = float(usage.ru_nivcsw)
            if self.proc is not None:
                self.proc.returncode = self.returncode
            self.resources = {"user": usage.ru_utime, "system": usage.ru_stime}
            if usage.ru_maxrss > _own_peak_rss(usage.ru_maxrss):
                self.resources["max_rss"] = usage.ru_maxrss * 1024.0  # Linux counts KiB

    def _on_exit(self) -> None:
        if self.exited is None:
            self.exited = time.perf_counter()
        self._forget_pidfd()
        if self.health and (migrations := sched_migrations(self.pid)) is not None:
            self.health_values[MIGRATIONS] = migrations  # a zombie until reaped, just below
        self._reap()  # exited: wait4 returns at once
        if self._waiter is not None:
            _resolve(self._waiter, True)

    @property
    def ended(self) -> bool:
        """Whether its end is known (or its launcher's, which leaves it unknown)."""
        return self.returncode is not None or self.launcher_gone is not None

    def _on_reply(self) -> None:
        """Its launcher's reply: how it ended, or the launcher's own end."""
        assert self.launcher is not None
        if self._watched:
            self.loop.remove_reader(self.launcher.socket.fileno())
        try:
            end = self.launcher.finished()
        except LauncherGone as gone:
            self.launcher_gone = str(gone)
        else:
            self.wall = end.wall
            self.returncode = os.waitstatus_to_exitcode(end.status)
            self.resources = {"user": end.user, "system": end.system, "max_rss": end.max_rss}
            if self.health:
                self.health_values[INVOLUNTARY_SWITCHES] = float(end.involuntary)
                if end.migrations is not None:
                    self.health_values[MIGRATIONS] = end.migrations
        if self._waiter is not None:
            _resolve(self._waiter, True)

    def _forget_pidfd(self) -> None:
        if self._pidfd is not None:
            if self._watched:
                self.loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _on_output(self, fd: int) -> None:
        tail, size = self._tails[fd], self._read_size[fd]
        if size == LARGE_READ:  # into reused buffers: no allocation per read
            buffer = tail.buffer(size)
            got = os.readv(fd, [buffer])
            if got:
                tail.add_read(buffer, got)
                return
        else:
            data = os.read(fd, size)
            if data:
                tail.add(data)
                if len(data) == SMALL_READ:
                    self._read_size[fd] = LARGE_READ
                    _grow_pipe(fd)
                return
        if self._watched:
            self.loop.remove_reader(fd)
        self._open.discard(fd)
        if not self._open:
            if self._closed is not None:
                _resolve(self._closed, True)
            # its end of output is mostly its exit: seen now (not reaped, so a health
            # reading can still read it), before the event loop gets to its pidfd
            if self._pidfd is not None and self.returncode is None and _has_exited(self.pid):
                self._on_exit()

    async def wait(self, timeout: float | None) -> bool:
        """Until the process exits (True) or ``timeout`` seconds pass (False)."""
        if self.ended:
            return True
        self._watch()
        waiter = self._waiter = self.loop.create_future()
        timer = None if timeout is None else self.loop.call_later(timeout, _resolve, waiter, False)
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

    async def drain(self, limit: float) -> None:
        """Read the pipes to their end. A pipe still held open after ``limit`` seconds (by
        an escaped grandchild) is given up with what it gave so far."""
        if self._open:
            self._watch()
            closed = self._closed = self.loop.create_future()
            timer = self.loop.call_later(limit, _resolve, closed, False)
            try:
                await closed
            finally:
                timer.cancel()

    def close(self) -> None:
        """Stop watching the process and close its pipes (whatever state it is in)."""
        self._forget_pidfd()
        if self._watched and self.launcher is not None and not self.ended:
            self.loop.remove_reader(self.launcher.socket.fileno())
        for fd in self._tails:
            if fd in self._open and self._watched:
                self.loop.remove_reader(fd)
            os.close(fd)


def launcher_lost(why: object) -> str:
    """The reason of a command whose launcher ended while it ran: the kernel killed it with
    its launcher (``PR_SET_PDEATHSIG``), and washout its group when it had heard its pid."""
    return (
        f"washout's launcher ended during the command ({why}): its outcome is unknown; "
        "the command was killed"
    )


def finished(
    code: int | None,
    timed_out: float | None,
    tails: tuple[OutputTail, OutputTail],
    times: tuple[datetime, datetime, float],
    cpus: str | None,
    resources: dict[str, float],
    health: dict[str, float],
    launcher_gone: object = None,
) -> CommandResult:
    """A started command's result: its status and reason from its exit code (negative:
    the signal that killed it), the timeout it ran past, or its launcher's end; its
    stdout and stderr tails; its start, end and duration."""
    if launcher_gone is not None:
        status, why = "lost", launcher_lost(launcher_gone)
    elif timed_out is not None:
        status, why = "timeout", f"timed out after {timed_out:g} s; process group killed"
    elif code is not None and code < 0:
        status, why = "failed", f"killed by signal {-code}"
    elif code != 0:
        status, why = "failed", f"exit code {code}"
    else:
        status, why = "ok", ""
    out, err = tails
    return CommandResult(
        status,
        code,
        out.value(),
        err.value(),
        *times,
        why,
        cpus,
        resources=resources,
        health=health,
        stdout_cut=out.cut,
        stderr_cut=err.cut,
    )


async def _batch_end(launcher: Launcher, stop: asyncio.Event) -> BatchEnd:
    """The end of the batch the launcher runs, awaited in the event loop (which turns once
    for the batch, not per trial): ``stop`` set asks it to stop after the trial in flight;
    cancelled, it kills that trial and CancelledError follows its reply."""
    loop = asyncio.get_running_loop()
    ended = loop.create_future()
    fd = launcher.socket.fileno()

    def readable() -> None:
        if not ended.done():
            ended.set_result(None)

    loop.add_reader(fd, readable)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({ended, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if ended not in done:
            launcher.tell(b"s")
            await ended
    except asyncio.CancelledError:
        launcher.tell(b"k")
        launcher.batch_end()  # at once: the launcher has killed the trial in flight
        raise
    finally:
        stopping.cancel()
        loop.remove_reader(fd)
    return launcher.batch_end()


def _file_tail(fd: int, into: OutputTail) -> None:
    """What a file holds, as a stream read into ``into`` would leave it (its last bytes,
    and its length); nothing for -1."""
    if fd < 0:
        return
    size = os.fstat(fd).st_size
    into.add(os.pread(fd, into.limit, max(0, size - into.limit)))
    into.total = size


def _absolute(cwd: str | None) -> str | None:
    """A command's working directory as the launcher (whose own is ``/``) must be told it:
    washout's own, or ``cwd`` relative to it, as a start from washout would use. Where
    washout's own directory is gone, ``cwd`` as given."""
    try:
        return os.path.join(os.getcwd(), cwd or "")
    except FileNotFoundError:
        return cwd


_IDLE_LAUNCHERS: list[Launcher] = []
"""Launchers between commands, shared by every local executor of this process (one per
command running at once; one executor is made per controller-side command): each ends
when washout does, at the end of its socket."""


@atexit.register
def _end_idle_launchers() -> None:
    """End and reap the idle launchers as washout exits (killed, it leaves them to end at
    the end of their sockets)."""
    while _IDLE_LAUNCHERS:
        _IDLE_LAUNCHERS.pop().close()


def end_local_processes() -> None:
    """End and reap what this process started to run local commands (its idle launchers
    and its group guard), as its ``atexit`` handlers do: for the console script, which
    exits without them (``washout.cli.console``), so that no process of washout's outlives
    it."""
    _end_idle_launchers()
    if _guard.cache_info().currsize:
        _guard().end()


class LocalExecutor:
    """Runs commands on this machine."""

    host = "localhost"
    workdir: str | None = None
    local = True

    def __init__(self, name: str = "local") -> None:
        self.name = name
        self._environments: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        self._blocks: dict[tuple[tuple[str, str], ...], tuple[int, bytes]] = {}
        self._health: dict[str, LocalHealth] = {}
        self._turned = time.monotonic()
        """When the fast path last gave the event loop a turn (:meth:`_loop_turn`)."""
        self._after: Callable[[], dict[str, str]] | None = None
        self._read: tuple[Callable[[], dict[str, str]], dict[str, str]] | None = None
        """What :meth:`read_after`'s reader gave after the last command (with the reader)."""

    def _environment(self, env: dict[str, str] | None) -> dict[str, str]:
        """A command's whole environment: washout's own (as this executor first saw it)
        with ``env`` over it. Built once per ``env``, not per command: copying washout's
        environment (``os.environ`` decodes every variable on each pass) was most of a
        start's cost, for the trials (each has its session's token) and for the no-op
        before a run's first trial alike."""
        key = tuple(env.items()) if env else ()
        found = self._environments.get(key)
        if found is None:
            found = self._environments[key] = {**os.environ, **(env or {})}
        return found

    def _environment_block(self, env: dict[str, str] | None) -> tuple[int, bytes]:
        """:meth:`_environment` as a launcher's request carries it (built once per ``env``)."""
        key = tuple(env.items()) if env else ()
        found = self._blocks.get(key)
        if found is None:
            found = self._blocks[key] = environment_block(self._environment(env))
        return found

    def _launcher(self) -> Launcher | None:
        """An idle launcher, a new one if none is, or None where there is no launcher."""
        program = launcher_program()[0]
        if program is None:
            return None
        while _IDLE_LAUNCHERS:
            found = _IDLE_LAUNCHERS.pop()
            if found.alive():
                return found
            found.close()
        return Launcher(program)

    async def _loop_turn(self) -> None:
        """On the fast path, give the event loop a turn (Ctrl-C, SIGTERM, timers) when
        TURN_SECONDS have passed since the last: a run of short trials never waits in the
        loop, so without this it would not get one. Before the command starts: a stop at
        once ends the trial before it runs."""
        now = time.monotonic()
        if now - self._turned >= TURN_SECONDS:
            self._turned = now
            await asyncio.sleep(0)

    async def connect(self) -> None:
        return None

    def read_after(self, reader: Callable[[], dict[str, str]] | None) -> None:
        """From the next command on, call ``reader`` after every command, outside its
        timing, as an SSH worker's runner reads the moment's files after each of its
        commands (:meth:`~washout.harness.executors.ssh.SSHExecutor.read_after`); None:
        no longer."""
        self._after = reader

    def take_read(self, reader: Callable[[], dict[str, str]]) -> dict[str, str] | None:
        """What ``reader`` gave after the last command that ended since the last call
        (None: none ended, it did not end as a started command, or another reader was
        set since)."""
        read, self._read = self._read, None
        return read[1] if read is not None and read[0] is reader else None

    def launcher_notes(self) -> list[str]:
        program, why = launcher_program()
        return [] if program is not None else [no_launcher_note(why)]

    async def kill_leftovers(self, sessions: list[str]) -> int:
        return kill_session_processes(sessions)

    async def mirror(self, directory: Path) -> str:
        return "local worker: the directory is already here"

    async def reboot(self, timeout: float, command: str | None = None) -> str:
        raise WashoutError("washout does not reboot the machine it runs on")

    async def close(self) -> None:
        for reader in self._health.values():
            reader.close()
        self._health.clear()

    async def read_file(self, path: str, cwd: str | None = None) -> bytes:
        return read_metric_file(Path(cwd or ".") / path)

    async def remove_file(self, path: str, cwd: str | None = None) -> None:
        remove_metric_file(Path(cwd or ".") / path)

    async def run(self, command: str, options: CommandOptions) -> CommandResult:
        self._read = None
        if options.blocking:
            await self._loop_turn()
        timeout, cwd, cpus, output_tail = (
            options.timeout,
            options.cwd,
            options.cpus,
            options.output_tail,
        )
        full_env = self._environment(options.env)
        cpu_set = parse_cpus(cpus) if cpus else None
        guard = _guard()
        if cpu_set and not cpu_set <= os.sched_getaffinity(0):
            return CommandResult.unstarted(
                f"cannot pin to CPUs {cpus}: washout may use {sorted(os.sched_getaffinity(0))}",
                cpus=cpus,
            )
        health = None if options.health is None else self._health_reader(options.health)
        cpus_read = trial_cpus(cpu_set) if health is not None else set()
        before = health.reading(cpus_read) if health is not None else None
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        out, err = OutputTail(output_tail), OutputTail(max(output_tail, TAIL_BYTES))
        where = stdout_to(options)
        try:
            # opened for each command, so each reads it from its start (as hyperfine opens
            # its --input for each run)
            stdin = None if options.input is None else _open_stream(options.input, os.O_RDONLY)
        except OSError as error:
            return CommandResult.unstarted(
                f"could not start: input {options.input}: {error.strerror}",
                started,
                time.perf_counter() - t0,
                cpus,
            )
        try:
            out_r, out_w, err_r, err_w = _outputs(where)
        except OSError as error:
            if stdin is not None:
                os.close(stdin)
            return CommandResult.unstarted(
                f"could not start: output {where}: {error.strerror}",
                started,
                time.perf_counter() - t0,
                cpus,
            )
        launcher: Launcher | None = None
        try:
            executable, argv = _start(command, full_env.get("PATH"))
            launcher = self._launcher()
            if launcher is not None:  # timed in C, from a process of its own size
                begun, proc = time.perf_counter(), None
                pid = launcher.start(
                    executable,
                    argv,
                    self._environment_block(options.env),
                    _launcher_streams(stdin, out_w, err_w, where == "null"),
                    _absolute(cwd),
                    cpu_set,
                    health is not None,
                )
            else:
                pid, proc, begun = _spawn(
                    executable, argv, full_env, (stdin, out_w, err_w), cwd, cpu_set
                )
        except (OSError, subprocess.SubprocessError, LauncherGone) as error:
            # e.g. CPUs not on this machine, a missing program or directory
            for fd in (out_r, err_r):
                if fd is not None:
                    os.close(fd)
            if isinstance(error, LauncherGone):  # the command may have started: not again
                assert launcher is not None
                launcher.close()
                return CommandResult.lost(
                    f"washout's launcher ended as it started the command ({error}): its "
                    "outcome is unknown",
                    started,
                    time.perf_counter() - t0,
                    cpus,
                )
            if launcher is not None:
                _IDLE_LAUNCHERS.append(launcher)
            return CommandResult.unstarted(
                f"could not start: {error}", started, time.perf_counter() - t0, cpus
            )
        finally:
            if where not in ("null", "inherit"):  # its own: a pipe's end, or the file
                os.close(out_w)
            if err_r is not None:
                os.close(err_w)
            if stdin is not None:
                os.close(stdin)
        guard.register(pid)
        pipes = {fd: tail for fd, tail in ((out_r, out), (err_r, err)) if fd is not None}
        child = _Child(asyncio.get_running_loop(), pid, pipes, proc, health is not None, launcher)
        try:
            try:
                waited = False
                if options.blocking:  # the fast path: the loop only for what is left
                    with _SignalWake() as wake:
                        waited = not wake.due and child.wait_blocking(timeout, wake.fd)
                left = None if timeout is None else max(0.0, timeout - (time.perf_counter() - t0))
                timed_out = not (waited or await child.wait(left))
            except asyncio.CancelledError:
                await child.kill_group()
                raise
            if timed_out:
                await child.kill_group()
            # the command's own wall: from just before its start to just after its exit
            end = child.exited if child.exited is not None and not timed_out else None
            duration = child.wall or (end if end is not None else time.perf_counter()) - begun
            ended = datetime.now(UTC)
            if child.wall is None:  # a launcher that saw its end killed what it left behind
                _signal_group(pid, signal.SIGKILL)  # whatever the command left behind
            await child.drain(1.0)
        finally:
            guard.forget(pid)
            child.close()
            if launcher is not None and child.returncode is not None:
                _IDLE_LAUNCHERS.append(launcher)  # kept where it said how the command ended
            elif launcher is not None:
                launcher.close()
        measured = dict(child.health_values)
        if health is not None and before is not None:  # the trial's process group is gone
            used = child.resources
            measured |= health_values(
                before,
                health.reading(cpus_read),
                own_cpu=used["user"] + used["system"] if "user" in used else None,
                tick=health.tick,
            )
        if (reader := self._after) is not None:  # after the health counters' reading
            self._read = reader, reader()
        return finished(
            child.returncode,
            timeout if timed_out else None,
            (out, err),
            (started, ended, duration),
            cpus,
            child.resources,
            measured,
            child.launcher_gone,
        )

    def program_of(self, command: str, options: CommandOptions) -> tuple[str, tuple[str, ...]]:
        """The executable and argv a command starts as, with its options' PATH."""
        return _start(command, self._environment(options.env).get("PATH"))

    def can_batch(self) -> bool:
        """Whether this machine runs batches: a launcher, and pidfds for it to wait on."""
        return HAVE_PIDFD and launcher_program()[0] is not None

    async def run_batch(
        self,
        programs: list[tuple[str, CommandOptions]],
        probes: list[Probe],
        trials: list[BatchTrial],
        constants: tuple[bytes, ...],
        journal: int,
        stop: asyncio.Event,
    ) -> tuple[BatchEnd, OutputTail, OutputTail]:
        """Trials back to back from a launcher, each one's record appended to ``journal`` by
        it (``launch.c``, ``batch``; docs/design.md, "The batch launcher"): how the batch
        ended, and the last trial's stdout and stderr tails (what it wrote, if that ended
        the batch). Washout sleeps meanwhile, woken only by the batch's end or by a signal:
        ``stop`` set (the first Ctrl-C) asks the launcher to stop after the trial in flight;
        cancelled (the second), it kills that trial, and CancelledError is raised once the
        launcher has said so. Every program's options give one stdout for all (``pipe``
        or ``null``: the engine batches nothing else). Raises LauncherGone if the launcher
        ended: the trial in flight is then lost, its group killed by the launcher."""
        launcher = self._launcher()
        assert launcher is not None, "a batch without a launcher (see can_batch)"
        made = []
        for command, options in programs:
            executable, argv = self.program_of(command, options)
            cpus = parse_cpus(options.cpus) if options.cpus else None
            block = self._environment_block(options.env)
            made.append(Program(executable, argv, block, _absolute(options.cwd), cpus))
        first = programs[0][1]
        out_tail, err_tail = (
            OutputTail(first.output_tail),
            OutputTail(max(first.output_tail, TAIL_BYTES)),
        )
        kept = stdout_to(first) == "pipe"
        out = (
            os.memfd_create("washout-stdout")
            if kept
            else os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        )
        err = os.memfd_create("washout-stderr")
        health = any(options.health is not None for _, options in programs)
        try:
            request = batch_request(probes, made, trials, health, constants)
            launcher.batch(request, journal, out, err)
            end = await _batch_end(launcher, stop)
            _IDLE_LAUNCHERS.append(launcher)
            if end.why == "output":
                _file_tail(out if kept else -1, out_tail)
                _file_tail(err, err_tail)
            return end, out_tail, err_tail
        except LauncherGone:
            launcher.close()
            raise
        finally:
            os.close(out)
            os.close(err)

    def _health_reader(self, root: str) -> LocalHealth:
        """This machine's health reader under ``root`` (one per root, its files kept open)."""
        reader = self._health.get(root)
        if reader is None:
            reader = self._health[root] = LocalHealth(root)
        return reader


def kill_session_processes(sessions: list[str]) -> int:
    """SIGKILL every process of this machine whose environment has SESSION_VARIABLE set to
    one of ``sessions`` (what trials of those sessions left running; only processes
    washout may read and signal are seen); returns how many.

    Every one is found before any is killed: killed during the scan, a child (``/proc``
    lists a wrapped-around pid before its parent's) would let a parent waiting for it
    (a trial's shell) exit before the scan reached it, and the count would miss it."""
    marks = {f"{SESSION_VARIABLE}={token}".encode() for token in sessions}
    found = []
    for entry in os.scandir("/proc") if marks else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if not marks.isdisjoint(f.read().split(b"\0")):
                    found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours
            continue
    killed = 0
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # gone meanwhile
            continue
        killed += 1
    return killed


_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _FILE_KINDS if test(mode)), "a special file")


def remove_metric_file(path: Path) -> None:
    """Remove a regular file (or a symbolic link) before the trial that writes it; nothing
    there is fine. Anything else (a device, a FIFO, a directory) is left alone: OSError."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise OSError(f"{_kind(mode)}, not a regular file")
    path.unlink(missing_ok=True)


def read_metric_file(path: Path) -> bytes:
    """A regular file's bytes, at most METRIC_FILE_LIMIT of them; OSError naming the problem
    for anything else. Opened without blocking, so a FIFO with no writer cannot hang the
    engine, and checked on the open descriptor, so nothing can swap the file meanwhile."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{_kind(info.st_mode)}, not a regular file")
        if info.st_size > METRIC_FILE_LIMIT:
            raise OSError(
                f"{info.st_size} bytes, more than the {METRIC_FILE_LIMIT >> 20} MiB "
                "washout reads for a metric"
            )
        with open(fd, "rb", closefd=False) as f:
            return f.read(METRIC_FILE_LIMIT)
    finally:
        os.close(fd)
