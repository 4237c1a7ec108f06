"""The builds of a step on every worker, each checked against its build's hashes first.

The engine's ``sync`` hook, run on each worker after it connects and before anything is
measured there: SSH workers get ``DIR/worktrees`` mirrored into their workdir
(:meth:`~washout.harness.executors.base.Executor.mirror`: rsync, else SFTP); then on
every worker, local and Slurm too, each build of the step is checked with ``sha256sum
-c`` against the hashes recorded when it was built. A worker whose copy differs is
refused (the engine leaves it out and records why) with a one-line error naming the
worker, the commit and the first differing file: the field report's stale binary, where
one client/server pair silently kept an old build and faked a 4 W saving. rsync's quick
check (same size and modification time) is exactly how such a copy survives a sync.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from washout.bisection.build import Build
from washout.errors import WorkerError
from washout.harness.executors.base import CommandOptions, Executor

CHECK_TIMEOUT = 3600.0
"""Seconds a worker may take to hash one build."""
SHOWN = 3
"""Differing files named in the error (the rest are counted)."""


def check_command(build_dir: str, commit: str) -> str:
    """Print the manifest's own hash, then every file of the build that differs from it
    (``sha256sum -c`` in the build's directory; the manifest sits beside it)."""
    manifest = shlex.quote(f"../{commit}.sha256")
    return (
        f"cd -- {shlex.quote(build_dir)} && sha256sum -- {manifest} && "
        f"{{ sha256sum --quiet --strict -c -- {manifest} 2>&1; true; }}"
    )


def differing(output: str) -> list[str]:
    """The files ``sha256sum -c --quiet`` reports as differing or unreadable."""
    found = []
    for line in output.splitlines()[1:]:
        path, sep, _ = line.rpartition(": FAILED")
        if sep:
            found.append(path.removeprefix("./"))
    return found


async def check_build(executor: Executor, build: Build, build_dir: str) -> None:
    """Refuse ``executor`` (WorkerError) unless its copy of ``build`` in ``build_dir`` is
    byte for byte what was built."""
    result = await executor.run(
        check_command(build_dir, build.commit),
        CommandOptions(timeout=CHECK_TIMEOUT, cwd=executor.workdir),
    )
    output = result.stdout.decode("utf-8", errors="replace")
    where = f"{executor.name}: its copy of the build of {build.commit[:10]} ({build_dir})"
    advice = f"remove {build_dir} there and run washout resume"
    if result.status != "ok":
        reason = result.stderr.decode("utf-8", errors="replace").strip().replace("\n", " | ")
        raise WorkerError(f"{where} cannot be checked: {reason[-300:] or result.reason}; {advice}")
    manifest = output.split(" ", 1)[0]
    if manifest != build.manifest_sha256:
        raise WorkerError(
            f"{where}: its list of hashes differs from the build's ({build.commit}.sha256): "
            f"refused, a stale copy; {advice}"
        )
    files = differing(output)
    if files:
        more = f" and {len(files) - SHOWN} more" if len(files) > SHOWN else ""
        raise WorkerError(
            f"{where} differs from the build: {', '.join(files[:SHOWN])}{more}: refused, "
            f"a stale binary would be measured as this commit; {advice}"
        )


def deploy_hook(
    root: Path, builds: Sequence[Build], directories: Sequence[str], copy: bool
) -> Callable[[Executor], Awaitable[str]]:
    """The engine's ``sync`` hook for one step: copy (when ``copy``), then check each build
    in its directory on the worker."""

    async def hook(executor: Executor) -> str:
        how = await executor.mirror(root / "worktrees") if copy else "read in place"
        for build, directory in zip(builds, directories):
            await check_build(executor, build, directory)
        return how

    return hook
