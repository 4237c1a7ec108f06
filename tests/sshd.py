"""Real OpenSSH servers for the SSH tests: unprivileged-port sshd instances on 127.0.0.1.

Each :class:`Sshd` has its own generated host key, config and pid file, and accepts one
generated client key (the current user logs in with it; root may, with the key only). The
tests write their own known_hosts files from :meth:`Sshd.known_hosts_line`, so nothing in
the user's ~/.ssh is read or changed. ``scripts/services/sshd.sh`` installs the binaries.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

from washout.harness.spec import WorkerSpec

SSHD = "/usr/sbin/sshd"
T = TypeVar("T")


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` in a thread of its own: other tests in the session (Playwright's sync
    API) may leave an event loop running in the main thread."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path) -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path


def _wait_listening(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                s.settimeout(1)
                if s.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"sshd on port {port} did not start")


class Sshd:
    """One sshd on 127.0.0.1:``port`` serving ``user`` with ``client_key``; ``env`` is set
    in every session it starts (sshd's SetEnv: a worker's own environment)."""

    def __init__(self, base: Path, client_key: Path, env: dict[str, str] | None = None) -> None:
        self.dir = base
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.user = getpass.getuser()
        self.client_key = client_key
        self.host_key = keygen(self.dir / "host_ed25519")
        self.pid_file = self.dir / "sshd.pid"
        self.boot_id_file = self.dir / "boot_id"
        self.boot_id_file.write_text(str(uuid.uuid4()) + "\n")
        (self.dir / "authorized_keys").write_text(Path(f"{client_key}.pub").read_text())
        self.config = self.dir / "sshd_config"
        self.config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key}",
                    f"PidFile {self.pid_file}",
                    f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
                    "PermitRootLogin prohibit-password",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    "MaxStartups 200",
                    "MaxSessions 200",
                    "LogLevel ERROR",
                    # bash sources ~/.bashrc in a top-level shell started by sshd, SHLVL=1
                    # makes it a nested one: the machine's own rc files (pyenv init on a
                    # developer's box: half a second per command) stay out of the tests and
                    # benchmarks.
                    " ".join(["SetEnv SHLVL=1", *(f"{k}={v}" for k, v in (env or {}).items())]),
                    f"Subsystem sftp {_sftp_server()}",
                ]
            )
            + "\n"
        )

    def start(self) -> None:
        """Start (daemonized; pid in ``pid_file``) and wait until it answers."""
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(exist_ok=True)
        self.pid_file.unlink(missing_ok=True)
        subprocess.run(
            [SSHD, "-f", str(self.config), "-E", str(self.dir / "sshd.log")],
            check=True,
            capture_output=True,
        )
        _wait_listening(self.port, time.monotonic() + 10)

    def listener_pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def session_pids(self) -> list[int]:
        """The per-connection sshd processes (children of the listener)."""
        pid = self.listener_pid()
        if pid is None:
            return []
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def stop(self) -> None:
        """Kill the listener and every session it serves (as a power-off would)."""
        pid = self.listener_pid()
        if pid is None:
            return
        for child in self.session_pids():
            _kill(child)
        _kill(pid)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.02)
        self.pid_file.unlink(missing_ok=True)

    def known_hosts_line(self) -> str:
        key = Path(f"{self.host_key}.pub").read_text().split()
        return f"[127.0.0.1]:{self.port} {key[0]} {key[1]}\n"

    def worker_toml(
        self, name: str, known_hosts: Path, workdir: Path | None = None, extra: str = ""
    ) -> str:
        """A ``[[worker]]`` table for this server."""
        lines = [
            "[[worker]]",
            f'name = "{name}"',
            'host = "127.0.0.1"',
            f"port = {self.port}",
            f'user = "{self.user}"',
            f'key = "{self.client_key}"',
            f'known_hosts = "{known_hosts}"',
        ]
        if workdir is not None:
            lines.append(f'workdir = "{workdir}"')
        return "\n".join(lines) + ("\n" + extra if extra else "") + "\n"

    def worker_spec(self, known_hosts: Path, workdir: Path | None = None) -> WorkerSpec:
        """The same worker as :meth:`worker_toml`, as a spec for an executor."""
        return WorkerSpec(
            host="127.0.0.1",
            port=self.port,
            user=self.user,
            key=str(self.client_key),
            known_hosts=str(known_hosts),
            workdir=None if workdir is None else str(workdir),
        )

    def reboot_script(self, down: float = 0.5) -> Path:
        """A script that simulates a reboot of this worker: drop every session, stay down
        for ``down`` seconds, write a fresh boot id, start sshd again. It detaches itself,
        so the reboot command returns before the connection drops, as a real one does."""
        script = self.dir / "reboot.sh"
        config, log = shlex.quote(str(self.config)), shlex.quote(str(self.dir / "sshd.log"))
        flag = shlex.quote(str(self.dir / "rebooting"))
        # Returns once the detached copy runs in its own session (out of the command's
        # process group, which washout kills when the command ends).
        script.write_text(f"""#!/bin/sh
if [ "$1" != detached ]; then
  rm -f {flag}
  setsid "$0" detached </dev/null >/dev/null 2>&1 &
  while [ ! -e {flag} ]; do sleep 0.05; done
  exit 0
fi
touch {flag}
sleep 0.2
listener=$(cat {shlex.quote(str(self.pid_file))})
pkill -KILL -P "$listener"
kill -KILL "$listener"
rm -f {shlex.quote(str(self.pid_file))}
sleep {down}
cat /proc/sys/kernel/random/uuid > {shlex.quote(str(self.boot_id_file))}
{SSHD} -f {config} -E {log}
""")
        script.chmod(0o755)
        return script


def _sftp_server() -> str:
    for candidate in ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server"):
        if os.access(candidate, os.X_OK):
            return candidate
    return "internal-sftp"


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


class SshdFarm:
    """Start sshd servers for one test; all are stopped at the end of it."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.client_key = keygen(base / "client_ed25519")
        self.known_hosts = base / "known_hosts"
        self.known_hosts.write_text("")
        self.servers: list[Sshd] = []

    def start(
        self, n: int = 1, trust: bool = True, env: dict[str, str] | None = None
    ) -> list[Sshd]:
        """Start ``n`` servers; ``trust`` adds their host keys to ``known_hosts``; ``env``
        is set in their sessions."""
        new = []
        for _ in range(n):
            server = Sshd(self.base / f"sshd{len(self.servers)}", self.client_key, env)
            self.servers.append(server)
            server.start()
            if trust:
                with self.known_hosts.open("a") as f:
                    f.write(server.known_hosts_line())
            new.append(server)
        return new

    def stop_all(self) -> None:
        for server in self.servers:
            server.stop()


@pytest.fixture
def sshd_farm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A farm of sshd servers, with HOME pointed at an empty directory (no ~/.ssh/config,
    keys or known_hosts of the real user) and no ssh-agent, for this test and its
    subprocesses."""
    if not os.access(SSHD, os.X_OK) or shutil.which("ssh-keygen") is None:
        pytest.skip("sshd missing: run scripts/services/sshd.sh")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    (tmp_path / "sshd").mkdir()
    farm = SshdFarm(tmp_path / "sshd")
    try:
        yield farm
    finally:
        farm.stop_all()
