"""Copying a local directory to an SSH worker (``[experiment] sync``): rsync over OpenSSH
when both ends have rsync (fast, incremental: ``rsync -a --delete``), otherwise SFTP over
the worker's asyncssh connection (the workdir is emptied, then the tree uploaded)."""

from __future__ import annotations

import asyncio
import shlex
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath

import asyncssh

from washout.errors import WashoutError
from washout.harness.executors.base import CommandOptions, CommandResult, tail
from washout.harness.executors.ssh_connection import CONNECT_TIMEOUT, SSHConnection, describe
from washout.harness.executors.ssh_wrapper import remote_path
from washout.harness.spec import WorkerSpec

SYNC_TIMEOUT = 3600.0
"""Seconds one worker's copy may take before it is that worker's error."""

RunCommand = Callable[[str, CommandOptions], Awaitable[CommandResult]]
"""The executor's ``run``, for the shell commands a copy needs on the worker."""


def openssh_command(worker: WorkerSpec) -> list[str]:
    """An OpenSSH client command line for this worker with the same checks as washout's
    own connection (for rsync's ``-e``): known host keys only, never a prompt."""
    args = [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        f"ConnectTimeout={CONNECT_TIMEOUT:g}",
    ]
    if worker.port:
        args += ["-p", str(worker.port)]
    if worker.key:
        args += ["-i", str(Path(worker.key).expanduser()), "-o", "IdentitiesOnly=yes"]
    if worker.known_hosts:
        args += ["-o", f"UserKnownHostsFile={Path(worker.known_hosts).expanduser()}"]
    return args


async def upload(link: SSHConnection, local_paths: list[str], remote_dir: str) -> None:
    """Copy files and directory trees into ``remote_dir`` over SFTP."""
    conn = await link.connection()
    try:
        async with conn.start_sftp_client() as sftp:
            await sftp.put(local_paths, remote_dir, recurse=True, preserve=True)
    except (asyncssh.Error, OSError) as err:
        raise WashoutError(
            f"{link.where()}: SFTP upload to {remote_dir} failed: {describe(err)}"
        ) from None


async def has_rsync(run: RunCommand) -> bool:
    """Whether rsync can copy to the worker: rsync and ssh here, rsync there."""
    if shutil.which("rsync") is None or shutil.which("ssh") is None:
        return False
    result = await run("command -v rsync", CommandOptions(timeout=60))
    return bool(result.status == "ok")


async def rsync(worker: WorkerSpec, directory: Path, workdir: str) -> None:
    """``rsync -a --delete`` of ``directory`` onto ``workdir`` over OpenSSH."""
    ssh = " ".join(shlex.quote(a) for a in openssh_command(worker))
    target = f"{worker.user}@{worker.host}" if worker.user else worker.host
    remote = workdir[2:] if workdir.startswith("~/") else workdir
    proc = await asyncio.create_subprocess_exec(
        "rsync",
        "-a",
        "--delete",
        "-e",
        ssh,
        f"{directory}/",
        f"{target}:{remote}/",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(), SYNC_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise WashoutError(
            f"worker {worker.label}: experiment.sync: rsync did not finish "
            f"within {SYNC_TIMEOUT:g} s"
        ) from None
    if proc.returncode != 0:
        why = tail(err, 300).strip().replace("\n", " | ")
        raise WashoutError(
            f"worker {worker.label}: experiment.sync: rsync of {directory} "
            f"to {workdir} failed (exit {proc.returncode}): {why}"
        )


async def sftp(link: SSHConnection, run: RunCommand, directory: Path, workdir: str) -> None:
    """Empty ``workdir`` on the worker and upload ``directory``'s tree into it."""
    q = remote_path(workdir)
    emptied = await run(f"rm -rf -- {q} && mkdir -p -- {q}", CommandOptions(timeout=SYNC_TIMEOUT))
    if emptied.status != "ok":
        raise WashoutError(
            f"worker {link.name}: experiment.sync: cannot empty {workdir}: "
            f"{emptied.reason}: {tail(emptied.stderr, 200).strip()}"
        )
    remote = workdir[2:] if workdir.startswith("~/") else workdir
    entries = [str(p) for p in sorted(directory.iterdir())]
    if entries:
        await upload(link, entries, remote)


def check_workdir(link: SSHConnection, directory: Path) -> str:
    """The worker's workdir, if it is one washout may make an exact copy of ``directory``
    (deleting what else is there): not a root, a home or a top-level directory."""
    workdir = link.workdir
    if not workdir:
        raise WashoutError(
            f"worker {link.name}: experiment.sync needs a workdir to copy {directory} into"
        )
    parts = [p for p in PurePosixPath(workdir).parts if p not in ("/", ".")]
    if ".." in parts or not parts or parts == ["~"] or (workdir.startswith("/") and len(parts) < 2):
        raise WashoutError(
            f"worker {link.name}: workdir = {workdir!r}: too broad for experiment.sync, "
            f"which makes it an exact copy of {directory} (deleting other files); use a "
            "directory of its own, such as /srv/washout/NAME or ~/washout/NAME"
        )
    return workdir.rstrip("/")


async def mirror(link: SSHConnection, run: RunCommand, directory: Path) -> str:
    """Make the worker's workdir an exact copy of ``directory``; returns how (for the log)."""
    workdir = check_workdir(link, directory)
    if await has_rsync(run):
        await rsync(link.worker, directory, workdir)
        return f"rsync {directory}/ -> {link.name}:{workdir}/"
    await sftp(link, run, directory, workdir)
    return f"sftp {directory}/ -> {link.name}:{workdir}/"
