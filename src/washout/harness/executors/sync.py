"""``[experiment] sync = "dir"``: make every worker's workdir an exact copy of a local directory.

Run once per worker after connecting and before provenance capture and setup, so every
worker starts from the same bytes (and the provenance hashes see them). rsync over OpenSSH
when both ends have rsync (fast, incremental: ``rsync -a --delete``); otherwise SFTP over
the worker's asyncssh connection (the workdir is emptied, then the tree uploaded). Either
way files in the workdir that the directory lacks are deleted, so the workdir must be a
directory washout owns: a root, a home or a top-level directory is refused.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath

from washout.errors import WashoutError
from washout.harness.executors.base import Executor, tail
from washout.harness.executors.ssh import SSHExecutor, remote_path

SYNC_TIMEOUT = 3600.0
"""Seconds one worker's copy may take before it is that worker's error."""


def sync_directory(value: str, source: str) -> Path:
    """The local directory named by ``experiment.sync`` (relative to the spec file)."""
    path = Path(value).expanduser()
    spec_file = Path(source)
    if not path.is_absolute() and spec_file.is_file():
        path = spec_file.parent / path
    if not path.is_dir():
        raise WashoutError(
            f"{source}: experiment.sync = {value!r}: not a directory (looked for {path})"
        )
    return path


def _check_workdir(executor: SSHExecutor, directory: Path) -> str:
    workdir = executor.workdir
    if not workdir:
        raise WashoutError(
            f"worker {executor.name}: experiment.sync needs a workdir to copy {directory} into"
        )
    parts = [p for p in PurePosixPath(workdir).parts if p not in ("/", ".")]
    if ".." in parts or not parts or parts == ["~"] or (workdir.startswith("/") and len(parts) < 2):
        raise WashoutError(
            f"worker {executor.name}: workdir = {workdir!r}: too broad for experiment.sync, "
            f"which makes it an exact copy of {directory} (deleting other files); use a "
            "directory of its own, such as /srv/washout/NAME or ~/washout/NAME"
        )
    return workdir.rstrip("/")


async def _has_rsync(executor: SSHExecutor) -> bool:
    if shutil.which("rsync") is None or shutil.which("ssh") is None:
        return False
    result = await executor.run("command -v rsync", timeout=60)
    return result.status == "ok"


async def _rsync(executor: SSHExecutor, directory: Path, workdir: str) -> None:
    ssh = " ".join(shlex.quote(a) for a in executor.openssh_command())
    target = executor.worker.host
    if executor.worker.user:
        target = f"{executor.worker.user}@{target}"
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
            f"worker {executor.name}: experiment.sync: rsync did not finish "
            f"within {SYNC_TIMEOUT:g} s"
        ) from None
    if proc.returncode != 0:
        why = tail(err, 300).strip().replace("\n", " | ")
        raise WashoutError(
            f"worker {executor.name}: experiment.sync: rsync of {directory} "
            f"to {workdir} failed (exit {proc.returncode}): {why}"
        )


async def _sftp(executor: SSHExecutor, directory: Path, workdir: str) -> None:
    q = remote_path(workdir)
    emptied = await executor.run(f"rm -rf -- {q} && mkdir -p -- {q}", timeout=SYNC_TIMEOUT)
    if emptied.status != "ok":
        raise WashoutError(
            f"worker {executor.name}: experiment.sync: cannot empty {workdir}: "
            f"{emptied.reason}: {tail(emptied.stderr, 200).strip()}"
        )
    remote = workdir[2:] if workdir.startswith("~/") else workdir
    entries = [str(p) for p in sorted(directory.iterdir())]
    if entries:
        await executor.upload(entries, remote)


async def sync_worker(executor: Executor, directory: Path) -> str:
    """Copy ``directory`` to one worker's workdir; returns how (for the log)."""
    if not isinstance(executor, SSHExecutor):
        return "local worker: the directory is already here"
    workdir = _check_workdir(executor, directory)
    if await _has_rsync(executor):
        await _rsync(executor, directory, workdir)
        return f"rsync {directory}/ -> {executor.name}:{workdir}/"
    await _sftp(executor, directory, workdir)
    return f"sftp {directory}/ -> {executor.name}:{workdir}/"


def directory_sync(value: str, source: str) -> Callable[[Executor], Awaitable[str]]:
    """The engine's ``sync`` hook for ``experiment.sync`` (the directory checked now)."""
    directory = sync_directory(value, source)

    async def hook(executor: Executor) -> str:
        return await sync_worker(executor, directory)

    return hook
