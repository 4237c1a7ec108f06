"""``[experiment] sync = "dir"``: make every worker's workdir an exact copy of a local directory.

Run once per worker after connecting and before provenance capture and setup, so every
worker starts from the same bytes (and the provenance hashes see them). Each executor
copies in its own way (:meth:`Executor.mirror`; over SSH rsync, else SFTP); files in the
workdir that the directory lacks are deleted, so the workdir must be a directory washout
owns: a root, a home or a top-level directory is refused. The local machine needs no copy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from washout.errors import WashoutError
from washout.harness.executors.base import Executor


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


async def sync_worker(executor: Executor, directory: Path) -> str:
    """Copy ``directory`` to one worker's workdir; returns how (for the log)."""
    return await executor.mirror(directory)


def directory_sync(value: str, source: str) -> Callable[[Executor], Awaitable[str]]:
    """The engine's ``sync`` hook for ``experiment.sync`` (the directory checked now)."""
    directory = sync_directory(value, source)

    async def hook(executor: Executor) -> str:
        return await sync_worker(executor, directory)

    return hook
