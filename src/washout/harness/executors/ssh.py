"""An SSH worker (asyncssh): one connection per worker, reused for every command of a run.

Connecting follows OpenSSH's conventions: ``host`` may be an alias from ``~/.ssh/config``
(HostName, Port, User, IdentityFile, ProxyJump all apply), keys come from ``key``, the
config, ``~/.ssh/id_*`` or ssh-agent, and the host key must already be in ``known_hosts``
(the worker's file, else ``~/.ssh/known_hosts``): an unknown or changed key is refused with
the command that would trust it, never accepted. (A ``UserKnownHostsFile none`` that the
user wrote in ~/.ssh/config is honoured as written.)

Each command is a small POSIX shell wrapper fed on stdin to ``bash -s`` (else ``/bin/sh
-s``) on the worker:

- the user's command runs under ``setsid`` (its own session and process group), stdin from
  /dev/null, pinned with ``taskset -c`` when ``cpus`` is set;
- the timeout is enforced *on the worker* by coreutils ``timeout``, which SIGTERMs the whole
  group, then SIGKILLs it after a grace period, so no network delay stretches it (exit 124
  or 137 after at least the timeout counts as timed out); every command runs under it,
  with or without a timeout, so all trials pay the same; after every command
  whatever the trial left in its group is killed, so a stray child cannot perturb the next
  trial (as the local executor does);
- ``wall`` is the worker's own clock around the command (bash's ``$EPOCHREALTIME``, a
  builtin, or ``date +%s.%N`` where there is no bash; the fork/exec of the command is
  included, as locally), not the controller's, so it contains no network round trip. When
  the worker's ``date`` has no ``%N`` the controller's time around the whole
  SSH exchange is used instead (one round trip and the channel set-up included).
- the wrapper reports the group id and the exit code with its timestamps as
  marker lines on stderr carrying a per-executor random token; they are picked out as
  stderr streams in and stripped before the output is stored; only the last
  ``output_tail`` bytes of each stream are kept;
- the channel's stdin stays open for the whole command and a watcher in the wrapper blocks
  reading it: when it closes (washout died, or the connection dropped) the watcher kills
  the command's group, so a trial never outlives its controller on the worker.

A connection that drops during a command yields ``CommandResult(status="lost")`` (the
engine keeps the trial as ``interrupted`` and re-runs its whole run); the next command
reconnects with bounded exponential backoff, first killing the process group the lost
command left behind. Reboot resets issue the reboot command, wait for the connection to
drop, reconnect with backoff within the reset timeout and verify that the boot id changed.

Workers need POSIX ``sh``, util-linux ``setsid`` (and ``taskset`` for ``cpus``), coreutils
``timeout`` and ``date``, and a login shell that runs ``a && b || c`` (sh, bash, zsh, ksh,
fish; not csh): any mainstream Linux. The first connection checks them and names what is
missing. No agent is installed on a worker.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shlex
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

import asyncssh

from washout.errors import WashoutError
from washout.harness.executors.base import (
    METRIC_FILE_LIMIT,
    OUTPUT_TAIL,
    TAIL_BYTES,
    CommandResult,
    OutputTail,
    tail,
)
from washout.harness.spec import WorkerSpec

KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL for a timed-out process group (as locally)."""
CONNECT_TIMEOUT = 20.0
"""Seconds for one connection attempt (TCP, key exchange and authentication)."""
KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 5.0, 3
"""A silent connection is declared dead after about 15-20 s (detects a vanished worker)."""
RECONNECT_WINDOW = 20.0
"""How long a dropped connection is retried (backoff 0.5 s doubling to 5 s) before the
worker is given up."""
BACKSTOP_MARGIN = 15.0
"""Seconds past a command's timeout (and grace) after which the controller stops waiting
for a worker whose own timeout did not report back (a stalled network)."""
SHELL = "command -v bash >/dev/null 2>&1 && exec bash -s || exec /bin/sh -s"
"""What the login shell starts to read the wrapper from stdin: bash when the worker has it
(its $EPOCHREALTIME reads the clock without a fork), else POSIX sh (``date``)."""
DEFAULT_BOOT_ID = "cat /proc/sys/kernel/random/boot_id"
DEFAULT_REBOOT = 'if [ "$(id -u)" = 0 ]; then reboot; else sudo -n reboot; fi'
"""Reboot as root directly, otherwise through passwordless sudo (``-n``: fail, never prompt)."""

REQUIRED_TOOLS = ("setsid", "timeout", "date")
"""What the wrapper runs every trial with, checked once per worker when it connects."""
NAME_NOT_FOUND = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}
"""getaddrinfo's answers for a name that does not exist (others may pass: EAI_AGAIN)."""

_TRANSIENT = (
    OSError,
    asyncssh.ConnectionLost,
    asyncssh.DisconnectError,
    TimeoutError,
    asyncssh.ChannelOpenError,
)


class _Unreachable(Exception):
    """A connection attempt failed in a way that retrying may fix (refused, reset, timeout)."""


def remote_path(path: str) -> str:
    """``path`` quoted for the worker's shell, with a leading ``~/`` meaning ``$HOME``."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def wrapper_script(
    command: str,
    *,
    token: str,
    timeout: float | None,
    cwd: str | None,
    env: dict[str, str] | None,
    cpus: str | None,
    keep_stdout: bool = True,
) -> str:
    """The ``sh`` script that runs one command on the worker (see the module docstring).

    Nothing but the command runs between the two clock readings: ``setsid`` and ``taskset``
    exec in place and ``timeout`` forks the command and then only waits, so no helper
    competes with the trial for CPU. The watcher that has the command's group killed when
    the channel closes (washout died or lost the connection) is started before the first
    reading and only blocks on a read; at the end of the channel it signals the wrapper,
    whose trap kills the group (and ends the wrapper).
    The script is one ``{ ... }`` block, so the shell has read all of it before it runs
    and what follows on stdin (nothing, then the end of the channel) is the watcher's.
    Without ``keep_stdout`` the command's stdout is /dev/null (``output_tail = 0``).
    """
    mark = f"@@washout:{token}:"
    lines = ["{"]
    if cwd:
        lines.append(f"cd -- {remote_path(cwd)} || exit 1")
    for key, value in (env or {}).items():
        lines.append(f"export {key}={shlex.quote(value)}")
    launch = "setsid"
    needs = []
    if cpus:
        needs.append(("taskset", f"for cpus = {cpus!r}"))
        launch += f" taskset -c {shlex.quote(cpus)}"
    # Always under timeout(1) (0 disables it), so a test with a timeout and one without
    # carry the same process structure, and the same fork, in their wall.
    needs.append(("timeout", "needed to run trials"))
    launch += f" timeout -k {KILL_GRACE:g} {0 if timeout is None else timeout:.3f}"
    for tool, why in needs:
        message = shlex.quote(f"washout: needs {tool} ({why}), which is missing on the worker")
        lines.append(f"command -v {tool} >/dev/null 2>&1 || {{ echo {message} >&2; exit 127; }}")
    lines += [
        "exec 3<&0",
        """trap 'kill -s KILL -- "-$g" 2>/dev/null; exit 129' USR1""",
        "(while read -r _; do :; done <&3; kill -s USR1 $$) >/dev/null 2>&1 &",
        "w=$!",
        "t0=${EPOCHREALTIME:-$(date +%s.%N)}",
        f"{launch} /bin/sh -c {shlex.quote(command)} </dev/null"
        f"{'' if keep_stdout else ' >/dev/null'} 3<&- &",
        "g=$!",
        f"printf '{mark}pgid %s\\n' \"$g\" >&2",
        'wait "$g"; rc=$?',
        "t1=${EPOCHREALTIME:-$(date +%s.%N)}",
        'kill -s KILL -- -"$g" "$w" 2>/dev/null',
        f'printf \'{mark}end %s %s %s\\n\' "$rc" "$t0" "$t1" >&2',
        'exit "$rc"',
        "}",
    ]
    return "\n".join(lines) + "\n"


def _markers(token: str) -> re.Pattern[bytes]:
    return re.compile(rb"@@washout:" + token.encode() + rb":(pgid|end)([^\n]*)\n")


_MISSING_TOOL = re.compile(rb"washout: needs ([a-z]+) \(([^)\n]*)\), which is missing")
MARKER_ROOM = 128
"""Bytes of stderr kept from one chunk to the next so a marker line split between two
chunks is still seen (a marker line is under 80 bytes)."""


class _Capture:
    """What a command's channel gave: the ends of stdout and stderr, and the wrapper's
    markers, picked out of stderr as it streams (so a long stderr cannot push the group
    id out of the kept tail)."""

    def __init__(self, markers: re.Pattern[bytes], keep: int) -> None:
        self.markers = markers
        self.keep = keep
        self.out = OutputTail(keep)
        self.err = OutputTail(max(keep, TAIL_BYTES) + 2 * MARKER_ROOM)
        self.group: int | None = None
        self.end: tuple[int, float | None] | None = None
        self.ended = asyncio.Event()
        self._recent = b""

    def add_err(self, chunk: bytes) -> None:
        self.err.add(chunk)
        recent = self._recent + chunk
        for m in self.markers.finditer(recent):
            fields = m.group(2).split()
            if m.group(1) == b"pgid" and len(fields) == 1 and fields[0].isdigit():
                self.group = self.group or int(fields[0])
            elif m.group(1) == b"end" and len(fields) == 3 and fields[0].lstrip(b"-").isdigit():
                t0, t1 = _nanoseconds(fields[1]), _nanoseconds(fields[2])
                wall = (t1 - t0) / 1e9 if t0 is not None and t1 is not None else None
                self.end = int(fields[0]), wall
                self.ended.set()
        self._recent = recent[-MARKER_ROOM:]

    def stderr(self) -> bytes:
        """Stderr without the markers, at most ``keep`` bytes (TAIL_BYTES at least)."""
        data = self.markers.sub(b"", self.err.value())
        keep = max(self.keep, TAIL_BYTES)
        return data[len(data) - keep :] if len(data) > keep else data


class _ConnectOptions(TypedDict, total=False):
    """The keyword arguments of ``asyncssh.connect`` a worker's spec sets."""

    connect_timeout: float
    keepalive_interval: float
    keepalive_count_max: int
    port: int
    username: str
    client_keys: list[str]
    known_hosts: str


class SSHExecutor:
    """Runs commands on one ``[[worker]]`` over SSH."""

    def __init__(self, worker: WorkerSpec) -> None:
        self.worker = worker
        self.name = worker.label
        self.host = f"{worker.host}:{worker.port}" if worker.port else worker.host
        self.workdir = worker.workdir
        self._conn: asyncssh.SSHClientConnection | None = None
        self._token = secrets.token_hex(8)
        self._markers = _markers(self._token)
        self._lock = asyncio.Lock()
        self._orphan_group: int | None = None
        self._workdir_made = False
        self._tools_checked = False
        self._given_up: str | None = None

    # -- connections ------------------------------------------------------------------

    def _where(self) -> str:
        return f"worker {self.name}"

    def _options(self) -> _ConnectOptions:
        w = self.worker
        opts: _ConnectOptions = {
            "connect_timeout": CONNECT_TIMEOUT,
            "keepalive_interval": KEEPALIVE_INTERVAL,
            "keepalive_count_max": KEEPALIVE_COUNT,
        }
        if w.port:
            opts["port"] = w.port
        if w.user:
            opts["username"] = w.user
        for field, value in (("key", w.key), ("known_hosts", w.known_hosts)):
            if value is not None and not Path(value).expanduser().is_file():
                raise WashoutError(f"{self._where()}: {field} = {value!r}: no such file")
        if w.key:
            opts["client_keys"] = [str(Path(w.key).expanduser())]
        if w.known_hosts:
            opts["known_hosts"] = str(Path(w.known_hosts).expanduser())
        return opts

    async def _host_key_error(self, options: _ConnectOptions) -> WashoutError:
        """The refusal, with the ssh-keyscan line for the real address (an alias's
        HostName and Port from ~/.ssh/config, which ssh-keyscan does not read)."""
        w = self.worker
        host, port = w.host, options.get("port")
        try:
            resolved = await asyncssh.SSHClientConnectionOptions.construct(
                config=(), host=w.host, **options
            )
            host, port = resolved.host or host, resolved.port or port
        except (asyncssh.Error, OSError, ValueError, TypeError):
            pass
        target = f"[{host}]:{port}" if port and port != 22 else host
        file = w.known_hosts or "~/.ssh/known_hosts"
        scan = f"ssh-keyscan {'-p ' + str(port) + ' ' if port and port != 22 else ''}{host}"
        return WashoutError(
            f"{self._where()}: the host key of {target} is not in {file} (unknown, or changed "
            f"since it was recorded); washout never accepts an unverified key. If this is the "
            f"right machine, trust it with: {scan} >> {file} (and compare the fingerprint with "
            f"the worker's own)"
        )

    async def _open(self) -> asyncssh.SSHClientConnection:
        """One connection attempt: the connection, a permanent WashoutError, or _Unreachable."""
        options = self._options()
        try:
            return await asyncssh.connect(self.worker.host, **options)
        except asyncssh.HostKeyNotVerifiable:
            raise await self._host_key_error(options) from None
        except asyncssh.PermissionDenied:
            user = f"{self.worker.user}@" if self.worker.user else ""
            how = (
                f"key {self.worker.key!r}"
                if self.worker.key
                else "ssh-agent, ~/.ssh/config and ~/.ssh/id_* keys"
            )
            raise WashoutError(
                f"{self._where()}: {user}{self.worker.host} refused the "
                f"login with {how} (is the public key in authorized_keys?)"
            ) from None
        except asyncssh.KeyImportError as err:
            raise WashoutError(
                f"{self._where()}: key = {self.worker.key!r}: cannot load it: "
                f"{err} (an encrypted key goes into ssh-agent: ssh-add it and "
                "leave key out)"
            ) from None
        except socket.gaierror as err:
            if err.errno in NAME_NOT_FOUND:
                raise WashoutError(
                    f"{self._where()}: host name {self.worker.host!r} not found"
                ) from None
            raise _Unreachable(_describe(err)) from None  # e.g. no DNS server reachable now
        except _TRANSIENT as err:
            raise _Unreachable(_describe(err)) from None
        except (asyncssh.Error, ValueError) as err:
            raise WashoutError(
                f"{self._where()}: cannot connect to {self.worker.host}: {_describe(err)}"
            ) from None

    def _alive(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def _prepare(self) -> None:
        """After each (re)connection: check the tools trials need (first time), kill what a
        lost command left, make the workdir."""
        assert self._conn is not None
        steps = []
        if not self._tools_checked:
            steps.append(
                f"for t in {' '.join(REQUIRED_TOOLS)}; do command -v $t >/dev/null "
                '2>&1 || echo "lacks $t"; done'
            )
        if self._orphan_group is not None:
            steps.append(f"kill -s KILL -- -{self._orphan_group} 2>/dev/null")
            self._orphan_group = None
        if self.workdir and not self._workdir_made:
            steps.append(f"mkdir -p -- {remote_path(self.workdir)} || echo 'mkdir failed'")
        if not steps:
            return
        result = await self._conn.run("; ".join(steps) + "; true", encoding=None)
        said = _output(result.stdout).decode("utf-8", errors="replace").split("\n")
        lacking = [line.split()[1] for line in said if line.startswith("lacks ")]
        if lacking:
            raise WashoutError(
                f"{self._where()} lacks "
                + ", ".join(f"`{t}`" for t in lacking)
                + " (needed to run trials)"
            )
        self._tools_checked = True
        if self.workdir and not self._workdir_made:
            if "mkdir failed" in said:
                raise WashoutError(
                    f"{self._where()}: workdir = {self.workdir!r}: cannot "
                    f"create it: {tail(_output(result.stderr), 200).strip()}"
                )
            self._workdir_made = True

    async def connect(self) -> None:
        """Open the connection (one attempt; a failure is this worker's one-line error)."""
        async with self._lock:
            if self._alive():
                return
            try:
                self._conn = await self._open()
                await self._prepare()
            except (_Unreachable, *_TRANSIENT) as err:
                self._conn = None
                port = f" port {self.worker.port}" if self.worker.port else ""
                raise WashoutError(
                    f"{self._where()}: cannot connect to {self.worker.host}{port}: {_describe(err)}"
                ) from None

    async def _reconnect(self, window: float, what: str) -> float:
        """Reconnect with exponential backoff for up to ``window`` seconds; returns the
        seconds it took. Permanent errors (host key, login) are raised at once."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        delay, last = 0.5, "no attempt"
        async with self._lock:
            while not self._alive():
                try:
                    self._conn = await asyncio.wait_for(
                        self._open(), max(0.1, start + window - loop.time()) + 1
                    )
                    await self._prepare()
                    break
                except (_Unreachable, *_TRANSIENT) as err:
                    last = str(err) or type(err).__name__
                    self._conn = None
                remaining = start + window - loop.time()
                if remaining <= 0:
                    raise WashoutError(
                        f"{self._where()}: {what} within {window:g} s (last attempt: {last})"
                    )
                await asyncio.sleep(min(delay, remaining))
                delay = min(delay * 2, 5.0)
        return loop.time() - start

    async def _connection(self) -> asyncssh.SSHClientConnection:
        """The live connection; after a drop, reconnect (and give the worker up if that
        fails within RECONNECT_WINDOW: every later command raises at once)."""
        if not self._alive():
            try:
                await self._reconnect(
                    RECONNECT_WINDOW, "the connection dropped and could not be re-established"
                )
            except WashoutError as err:
                self._given_up = str(err)
                raise
        assert self._conn is not None
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()
            try:
                await asyncio.wait_for(conn.wait_closed(), 5)
            except (TimeoutError, *_TRANSIENT):
                pass

    # -- commands ---------------------------------------------------------------------

    async def run(
        self,
        command: str,
        *,
        timeout: float | None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        cpus: str | None = None,
        output_tail: int = OUTPUT_TAIL,
    ) -> CommandResult:
        if self._given_up:
            raise WashoutError(self._given_up)
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        try:
            conn = await self._connection()
        except WashoutError as err:
            if self._given_up is None:
                raise
            return self._lost(started, t0, str(err), None, cpus)
        script = wrapper_script(
            command,
            token=self._token,
            timeout=timeout,
            cwd=cwd,
            env=env,
            cpus=cpus,
            keep_stdout=output_tail > 0,
        )
        got = _Capture(self._markers, output_tail)
        proc = None

        async def collect(stream: asyncssh.SSHReader[bytes], add: Callable[[bytes], None]) -> None:
            while chunk := await stream.read(65536):
                add(chunk)

        try:
            # stdin stays open: the wrapper kills the command's group when it closes.
            proc = await conn.create_process(SHELL, encoding=None)
            proc.stdin.write(script.encode())
            readers = [
                asyncio.ensure_future(collect(proc.stdout, got.out.add)),
                asyncio.ensure_future(collect(proc.stderr, got.add_err)),
            ]
            waiter = asyncio.ensure_future(got.ended.wait())
            both = asyncio.gather(*readers)
            try:
                backstop = None if timeout is None else timeout + KILL_GRACE + BACKSTOP_MARGIN
                watched: set[asyncio.Future[Any]] = {both, waiter}
                done, _ = await asyncio.wait(
                    watched, timeout=backstop, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    self._orphan_group = got.group
                    self._drop()
                    return self._lost(
                        started,
                        t0,
                        f"no answer from the worker {backstop:g} s "
                        "into the command (its own timeout did not report back)",
                        got,
                        cpus,
                    )
                if both not in done:
                    # The wrapper is done; a daemon it spawned may still hold the pipes.
                    await asyncio.wait({both}, timeout=1.0)
                for task in readers:
                    if task.done():
                        task.result()  # a connection error surfaces here
            finally:
                await _cancel(*readers, waiter, both)
        except asyncio.CancelledError:
            await self._kill_group(got.group)
            if proc is not None:
                proc.close()
            raise
        except _TRANSIENT as error:
            self._drop()
            if got.end is None:
                self._orphan_group = got.group
                return self._lost(
                    started,
                    t0,
                    f"connection lost during the command: {_describe(error)}",
                    got,
                    cpus,
                )
            # The command finished (its end marker arrived); only the connection did not.
        duration = time.perf_counter() - t0
        status_code = proc.exit_status if proc is not None else None
        if proc is not None:
            proc.close()
        stdout, stderr = got.out.value(), got.stderr()
        if got.end is None:
            if status_code is None or not self._alive():
                self._orphan_group = got.group
                self._drop()
                return self._lost(started, t0, "connection lost during the command", got, cpus)
            code = status_code
        else:
            code, worker_wall = got.end
            if worker_wall is not None:
                duration = worker_wall
        finished = datetime.now(UTC)
        # timeout(1) exits 124 when it stopped the command (137 if SIGKILL was needed).
        status, why = "ok", ""
        if timeout is not None and code in (124, 137) and duration >= timeout:
            status, why = (
                "timeout",
                f"timed out after {timeout:g} s; process group killed on the worker",
            )
        elif code == 127 and (missing := _MISSING_TOOL.search(stderr)):
            status = "failed"
            why = (
                f"{self._where()} lacks `{missing.group(1).decode()}` ({missing.group(2).decode()})"
            )
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
            stdout_cut=got.out.cut,
            stderr_cut=got.err.cut,
        )

    def _lost(
        self, started: datetime, t0: float, reason: str, got: _Capture | None, cpus: str | None
    ) -> CommandResult:
        if got is None:
            return CommandResult(
                "lost",
                None,
                b"",
                b"",
                started,
                datetime.now(UTC),
                time.perf_counter() - t0,
                f"{self.name}: {reason}",
                cpus,
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

    async def _kill_group(self, group: int | None) -> None:
        """Kill a command's process group from another channel (on Ctrl-C)."""
        if group is None or not self._alive():
            return
        assert self._conn is not None
        try:
            polls = int(KILL_GRACE / 0.1)
            script = (
                f"kill -s TERM -- -{group} 2>/dev/null || exit 0\n"
                f"i=0; while [ $i -lt {polls} ] && kill -s 0 -- -{group} 2>/dev/null; "
                "do sleep 0.1; i=$((i + 1)); done\n"
                f"kill -s KILL -- -{group} 2>/dev/null; exit 0\n"
            )
            await asyncio.wait_for(self._conn.run("/bin/sh -s", input=script), KILL_GRACE + 5)
        except (*_TRANSIENT, asyncssh.Error):
            pass

    async def read_file(self, path: str, cwd: str | None = None) -> bytes:
        """A metric file's bytes (``cat`` on the worker, after checking that it is a regular
        file of at most METRIC_FILE_LIMIT bytes); OSError saying why it cannot be read."""
        q = remote_path(path)
        script = (
            _file_kind_script(path, cwd)
            + 'case "$k" in "") ;; "no such file") echo "No such file or directory" >&2;'
            + ' exit 1 ;;\n*) echo "$k, not a regular file" >&2; exit 1 ;; esac\n'
            + f"n=$(wc -c < {q}) || exit 1\n"
            + f'[ "$n" -le {METRIC_FILE_LIMIT} ] || {{ echo "$n bytes, more than the '
            + f'{METRIC_FILE_LIMIT >> 20} MiB washout reads for a metric" >&2; exit 1; }}\n'
            + f"exec cat -- {q}\n"
        )
        result = await self._small_command(script, f"cannot read {path}")
        if result.exit_status != 0:
            raise OSError(tail(_output(result.stderr), 200).strip())
        return _output(result.stdout)

    async def remove_file(self, path: str, cwd: str | None = None) -> None:
        """As locally: a regular file or a symbolic link is removed, nothing there is fine,
        anything else is left alone (OSError)."""
        script = (
            _file_kind_script(path, cwd)
            + 'case "$k" in "" | "a symbolic link") ;; "no such file") exit 0 ;;\n'
            + '*) echo "$k, not a regular file" >&2; exit 1 ;; esac\n'
            + f"rm -f -- {remote_path(path)}\n"
        )
        result = await self._small_command(script, f"cannot remove {path}")
        if result.exit_status != 0:
            raise OSError(tail(_output(result.stderr), 200).strip())

    async def _small_command(self, script: str, what: str) -> asyncssh.SSHCompletedProcess:
        """A short helper command on the worker's connection; OSError if it cannot run."""
        try:
            conn = await self._connection()
            return await asyncio.wait_for(
                conn.run("/bin/sh -s", input=script.encode(), encoding=None), 60
            )
        except (*_TRANSIENT, asyncssh.Error, WashoutError) as err:
            raise OSError(f"{self.name}: {what}: {_describe(err)}") from None

    # -- copying files (experiment.sync) ---------------------------------------------

    def openssh_command(self) -> list[str]:
        """An OpenSSH client command line for this worker with the same checks as ours
        (for rsync's ``-e``): known host keys only, never a prompt."""
        w = self.worker
        args = [
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"ConnectTimeout={CONNECT_TIMEOUT:g}",
        ]
        if w.port:
            args += ["-p", str(w.port)]
        if w.key:
            args += ["-i", str(Path(w.key).expanduser()), "-o", "IdentitiesOnly=yes"]
        if w.known_hosts:
            args += ["-o", f"UserKnownHostsFile={Path(w.known_hosts).expanduser()}"]
        return args

    async def upload(self, local_paths: list[str], remote_dir: str) -> None:
        """Copy files and directory trees into ``remote_dir`` over SFTP."""
        conn = await self._connection()
        try:
            async with conn.start_sftp_client() as sftp:
                await sftp.put(local_paths, remote_dir, recurse=True, preserve=True)
        except (asyncssh.Error, OSError) as err:
            raise WashoutError(
                f"{self._where()}: SFTP upload to {remote_dir} failed: {_describe(err)}"
            ) from None

    # -- reboot resets ----------------------------------------------------------------

    async def _boot_id(self) -> str | None:
        """The worker's boot id now; None if the connection dropped while reading it."""
        command = self.worker.boot_id_command or DEFAULT_BOOT_ID
        result = await self.run(command, timeout=30)
        if result.status == "lost":
            return None
        value = result.stdout.decode("utf-8", errors="replace").strip()
        if result.status != "ok" or not value:
            raise WashoutError(
                f"{self._where()}: boot_id_command = {command!r}: "
                f"{result.reason or 'printed nothing'}"
            )
        return value

    async def reboot(self, timeout: float, command: str | None = None) -> str:
        """Reboot the worker and wait until it is back with a new boot id.

        Issue the reboot command, wait until the connection drops (the worker is going
        down), then reconnect with backoff until SSH answers with a new boot id: a machine
        shutting down may still accept a connection for a moment, so an unchanged boot id
        means "look again later" until ``timeout`` seconds (``[reset] timeout``) have passed
        since the command. The command is the worker's ``reboot_command``, else ``command``
        (the reset's), else DEFAULT_REBOOT. Returns what happened, for the store.
        """
        loop = asyncio.get_running_loop()
        start = loop.time()
        deadline = start + timeout
        before = await self._boot_id()
        if before is None:
            raise WashoutError(f"{self._where()}: the connection dropped before the reboot")
        command = self.worker.reboot_command or command or DEFAULT_REBOOT
        conn = self._conn
        result = await self.run(command, timeout=min(30.0, timeout))
        if result.status in ("failed", "timeout"):
            err = tail(result.stderr, 300).strip().replace("\n", " | ")
            raise WashoutError(
                f"{self._where()}: reboot command {command!r} {result.status}: "
                f"{result.reason}{': ' + err if err else ''}"
            )
        if conn is not None:
            try:
                await asyncio.wait_for(conn.wait_closed(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise WashoutError(
                    f"{self._where()}: still up {timeout:g} s after the reboot "
                    f"command {command!r} (reset.timeout)"
                ) from None
        gone = loop.time() - start
        delay = 0.5
        while True:
            self._drop()
            await self._reconnect(
                max(0.0, deadline - loop.time()),
                f"SSH did not answer again after the reboot (reset.timeout = {timeout:g} s)",
            )
            after = await self._boot_id()
            if after is not None and after != before:
                break
            if loop.time() + delay >= deadline:
                raise WashoutError(
                    f"{self._where()}: boot id still {before} {timeout:g} s "
                    f"after the reboot command {command!r} (reset.timeout): "
                    "the worker did not reboot"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
        back = loop.time() - start
        return (
            f"reboot: {command}; gone after {gone:.1f} s, SSH back after {back:.1f} s; "
            f"boot id {before} -> {after}"
        )


def _nanoseconds(stamp: bytes) -> int | None:
    """``SECONDS.FRACTION`` (bash's $EPOCHREALTIME, whose radix follows the locale, or
    ``date +%s.%N``) as integer nanoseconds; None when the worker's date has no %N."""
    whole, _, fraction = stamp.replace(b",", b".").partition(b".")
    if not whole.isdigit() or not fraction.isdigit():
        return None
    return int(whole) * 10**9 + int(fraction[:9].ljust(9, b"0"))


def _file_kind_script(path: str, cwd: str | None) -> str:
    """Shell lines that ``cd`` to ``cwd`` and set ``k`` to what ``path`` is: empty for a
    regular file, else "no such file", "a symbolic link" (for a link to no regular file),
    "a FIFO", "a directory"... ."""
    q = remote_path(path)
    kinds = "".join(
        f'elif [ -{flag} {q} ]; then k="{kind}"\n'
        for flag, kind in (
            ("f", ""),
            ("d", "a directory"),
            ("p", "a FIFO"),
            ("c", "a character device"),
            ("b", "a block device"),
            ("S", "a socket"),
            ("L", "a symbolic link"),
        )
    )
    return (
        (f"cd -- {remote_path(cwd)} || exit 1\n" if cwd else "")
        + f'if [ ! -e {q} ] && [ ! -L {q} ]; then k="no such file"\n'
        + f"{kinds}else k='not a regular file'\nfi\n"
    )


def _output(data: bytes | str | None) -> bytes:
    """A completed helper command's stdout or stderr: bytes, since it ran with
    ``encoding=None``."""
    assert not isinstance(data, str)
    return data or b""


async def _cancel(*tasks: asyncio.Future[Any]) -> None:
    """Cancel what is still pending and consume every outcome (no "never retrieved")."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _describe(err: BaseException) -> str:
    """A short, one-line description of a connection error."""
    if isinstance(err, socket.gaierror):
        text = err.strerror
    elif isinstance(err, asyncssh.DisconnectError):
        text = err.reason
    elif isinstance(err, OSError) and err.errno:
        text = os.strerror(err.errno)
    elif isinstance(err, OSError) and err.strerror:
        text = err.strerror
    else:
        text = str(err)
    return " ".join((text or type(err).__name__).split())
