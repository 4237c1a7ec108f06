"""The connection to an SSH worker (asyncssh): opening it as OpenSSH would, checking the
worker once, reconnecting after a drop, and short helper commands on it.

Connecting follows OpenSSH's conventions: ``host`` may be an alias from ``~/.ssh/config``
(HostName, Port, User, IdentityFile, ProxyJump all apply), keys come from ``key``, the
config, ``~/.ssh/id_*`` or ssh-agent, and the host key must already be in ``known_hosts``
(the worker's file, else ``~/.ssh/known_hosts``): an unknown or changed key is refused with
the command that would trust it, never accepted. (A ``UserKnownHostsFile none`` that the
user wrote in ~/.ssh/config is honoured as written.)

A dropped connection is re-established with bounded exponential backoff by the next
command, which first kills the process group the lost command left behind. Workers need
POSIX ``sh``, coreutils ``timeout`` (one that starts the command in a process group of its
own) and ``date`` (and util-linux ``taskset`` for ``cpus``), and a POSIX login shell (sh,
bash, zsh, ksh; not csh or fish): the first connection checks them and names what is
missing, and notes whether the worker has GNU time (for ``max_rss``) and whether its login
shell is bash (then the runner's loop is the channel's command, with no second shell); it
also builds the launcher there, or finds it built (:mod:`washout.harness.launcher.remote`).
"""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import TypedDict

import asyncssh

from washout.errors import WashoutError
from washout.harness.executors.base import tail
from washout.harness.executors.ssh_wrapper import (
    GNU_TIME,
    KILL_GRACE,
    kill_group_script,
    remote_path,
)
from washout.harness.launcher.build import turned_off
from washout.harness.launcher.remote import BUILT, MISSING, build_step
from washout.harness.spec import WorkerSpec

CONNECT_TIMEOUT = 20.0
"""Seconds for one connection attempt (TCP, key exchange and authentication)."""
KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 5.0, 3
"""A silent connection is declared dead after about 15-20 s (detects a vanished worker)."""
RECONNECT_WINDOW = 20.0
"""How long a dropped connection is retried (backoff 0.5 s doubling to 5 s) before the
worker is given up."""
REQUIRED_TOOLS = ("timeout", "date")
"""What the wrapper runs every trial with, checked once per worker when it connects."""
TIMEOUT_GROUP = (
    "command -v timeout >/dev/null 2>&1 && { timeout 5 /bin/sh -c "
    """'[ "$PPID" != "$1" ] && kill -s 0 -- "-$PPID"' sh $$ >/dev/null 2>&1"""
    " || echo 'timeout without group'; }"
)
"""Whether ``timeout`` runs the command as its child in a process group that it leads, as
coreutils' does (BusyBox's execs the command in the caller's group): the wrapper kills a
trial's processes by that group."""
LOGIN_BASH = "[ -n \"${BASH_VERSION-}\" ] && echo 'login bash'"
"""Whether the login shell is bash, which can run the runner's loop as the channel's command."""
NAME_NOT_FOUND = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}
"""getaddrinfo's answers for a name that does not exist (others may pass: EAI_AGAIN)."""

TRANSIENT = (
    OSError,
    asyncssh.ConnectionLost,
    asyncssh.DisconnectError,
    TimeoutError,
    asyncssh.ChannelOpenError,
)
"""Connection errors that a reconnection may cure."""


class _Unreachable(Exception):
    """A connection attempt failed in a way that retrying may fix (refused, reset, timeout)."""


class _ConnectOptions(TypedDict, total=False):
    """The keyword arguments of ``asyncssh.connect`` a worker's spec sets."""

    connect_timeout: float
    keepalive_interval: float
    keepalive_count_max: int
    port: int
    username: str
    client_keys: list[str]
    known_hosts: str


class SSHConnection:
    """One worker's connection, reopened after a drop; shared by its executor's parts."""

    def __init__(self, worker: WorkerSpec) -> None:
        self.worker = worker
        self.name = worker.label
        self.workdir = worker.workdir
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()
        self.orphan_group: int | None = None
        """The process group a lost command left on the worker, killed on reconnection."""
        self.gnu_time = False
        """Whether the worker has GNU time (found when it first connects)."""
        self.login_bash = False
        """Whether the worker's login shell is bash (found when it first connects)."""
        self.launcher: str | None = None
        """The launcher's path on the worker (built when it first connects), or None."""
        self.no_launcher = ""
        """Why the worker has no launcher (empty when it has one)."""
        self._workdir_made = False
        self._tools_checked = False
        self.given_up: str | None = None
        """Why the worker was given up (every later command fails with it), or None."""

    def where(self) -> str:
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
                raise WashoutError(f"{self.where()}: {field} = {value!r}: no such file")
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
            f"{self.where()}: the host key of {target} is not in {file} (unknown, or changed "
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
                f"{self.where()}: {user}{self.worker.host} refused the "
                f"login with {how} (is the public key in authorized_keys?)"
            ) from None
        except asyncssh.KeyImportError as err:
            raise WashoutError(
                f"{self.where()}: key = {self.worker.key!r}: cannot load it: "
                f"{err} (an encrypted key goes into ssh-agent: ssh-add it and "
                "leave key out)"
            ) from None
        except socket.gaierror as err:
            if err.errno in NAME_NOT_FOUND:
                raise WashoutError(
                    f"{self.where()}: host name {self.worker.host!r} not found"
                ) from None
            raise _Unreachable(describe(err)) from None  # e.g. no DNS server reachable now
        except TRANSIENT as err:
            raise _Unreachable(describe(err)) from None
        except (asyncssh.Error, ValueError) as err:
            raise WashoutError(
                f"{self.where()}: cannot connect to {self.worker.host}: {describe(err)}"
            ) from None

    def alive(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def _prepare(self) -> None:
        """After each (re)connection: check the tools trials need (first time), kill what a
        lost command left, make the workdir."""
        assert self._conn is not None
        steps, source = [], None
        if not self._tools_checked and not turned_off():
            build, source = build_step()  # first: it alone may read the channel's stdin
            steps.append(build)
        if not self._tools_checked:
            steps.append(
                f"for t in {' '.join(REQUIRED_TOOLS)}; do command -v $t >/dev/null "
                '2>&1 || echo "lacks $t"; done'
            )
            steps.append(TIMEOUT_GROUP)
            steps.append(
                f"{GNU_TIME} -q -f 'gnu time %M' true 2>&1 | grep -q '^gnu time [0-9]'"
                " && echo 'has gnu time'"
            )
            steps.append(LOGIN_BASH)
        if self.orphan_group is not None:
            steps.append(f"kill -s KILL -- -{self.orphan_group} 2>/dev/null")
            self.orphan_group = None
        if self.workdir and not self._workdir_made:
            steps.append(f"mkdir -p -- {remote_path(self.workdir)} || echo 'mkdir failed'")
        if not steps:
            return
        result = await self._conn.run("; ".join(steps) + "; true", input=source, encoding=None)
        said = output(result.stdout).decode("utf-8", errors="replace").split("\n")
        lacking = [line.split()[1] for line in said if line.startswith("lacks ")]
        if lacking:
            raise WashoutError(
                f"{self.where()} lacks "
                + ", ".join(f"`{t}`" for t in lacking)
                + " (needed to run trials)"
            )
        if "timeout without group" in said:
            raise WashoutError(
                f"{self.where()}: its `timeout` does not start the command in a process "
                "group of its own (coreutils' does; needed to stop a trial's processes)"
            )
        if not self._tools_checked:
            self.gnu_time = "has gnu time" in said
            self.login_bash = "login bash" in said
            built = [line[len(BUILT) :] for line in said if line.startswith(BUILT)]
            missing = [line[len(MISSING) :] for line in said if line.startswith(MISSING)]
            self.launcher = built[0] if built else None
            off = "WASHOUT_LAUNCHER=off" if turned_off() else "its build on the worker said nothing"
            self.no_launcher = "" if built else (missing or [off])[0]
        self._tools_checked = True
        if self.workdir and not self._workdir_made:
            if "mkdir failed" in said:
                raise WashoutError(
                    f"{self.where()}: workdir = {self.workdir!r}: cannot "
                    f"create it: {tail(output(result.stderr), 200).strip()}"
                )
            self._workdir_made = True

    async def connect(self) -> None:
        """Open the connection (one attempt; a failure is this worker's one-line error)."""
        async with self._lock:
            if self.alive():
                return
            try:
                self._conn = await self._open()
                await self._prepare()
            except (_Unreachable, *TRANSIENT) as err:
                self._conn = None
                port = f" port {self.worker.port}" if self.worker.port else ""
                raise WashoutError(
                    f"{self.where()}: cannot connect to {self.worker.host}{port}: {describe(err)}"
                ) from None

    async def reconnect(self, window: float, what: str) -> float:
        """Reconnect with exponential backoff for up to ``window`` seconds; returns the
        seconds it took. Permanent errors (host key, login) are raised at once."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        delay, last = 0.5, "no attempt"
        async with self._lock:
            while not self.alive():
                try:
                    self._conn = await asyncio.wait_for(
                        self._open(), max(0.1, start + window - loop.time()) + 1
                    )
                    await self._prepare()
                    break
                except (_Unreachable, *TRANSIENT) as err:
                    last = str(err) or type(err).__name__
                    self._conn = None
                remaining = start + window - loop.time()
                if remaining <= 0:
                    raise WashoutError(
                        f"{self.where()}: {what} within {window:g} s (last attempt: {last})"
                    )
                await asyncio.sleep(min(delay, remaining))
                delay = min(delay * 2, 5.0)
        return loop.time() - start

    async def connection(self) -> asyncssh.SSHClientConnection:
        """The live connection; after a drop, reconnect (and give the worker up if that
        fails within RECONNECT_WINDOW: every later command raises at once)."""
        if not self.alive():
            try:
                await self.reconnect(
                    RECONNECT_WINDOW, "the connection dropped and could not be re-established"
                )
            except WashoutError as err:
                self.given_up = str(err)
                raise
        assert self._conn is not None
        return self._conn

    def current(self) -> asyncssh.SSHClientConnection | None:
        """The connection as it is now (None when there is none), without reconnecting."""
        return self._conn

    def drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()
            try:
                await asyncio.wait_for(conn.wait_closed(), 5)
            except (TimeoutError, *TRANSIENT):
                pass

    async def small_command(self, script: str, what: str) -> asyncssh.SSHCompletedProcess:
        """A short helper script on the worker's connection; OSError if it cannot run."""
        try:
            conn = await self.connection()
            return await asyncio.wait_for(
                conn.run("/bin/sh -s", input=script.encode(), encoding=None), 60
            )
        except (*TRANSIENT, asyncssh.Error, WashoutError) as err:
            raise OSError(f"{self.name}: {what}: {describe(err)}") from None

    async def kill_group(self, group: int | None) -> None:
        """Kill a command's process group from another channel (on Ctrl-C)."""
        if group is None or not self.alive():
            return
        assert self._conn is not None
        try:
            await asyncio.wait_for(
                self._conn.run("/bin/sh -s", input=kill_group_script(group)), KILL_GRACE + 5
            )
        except (*TRANSIENT, asyncssh.Error):
            pass


def output(data: bytes | str | None) -> bytes:
    """A completed helper command's stdout or stderr: bytes, since it ran with
    ``encoding=None``."""
    assert not isinstance(data, str)
    return data or b""


def describe(err: BaseException) -> str:
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
