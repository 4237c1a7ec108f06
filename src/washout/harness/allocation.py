"""Workers that are allocated for a session and given back at its end: Slurm nodes
(``[cluster] kind = "slurm"``) or whatever an ``[allocate]`` command obtains (a cloud CLI,
Terraform, a testbed's tool), released by ``[release]``.

:func:`allocated` wraps a whole session: it obtains the workers, yields their executors,
and releases them at the end, whatever happened (done, Ctrl-C, SIGTERM, a failing trial or
worker, an error). If washout itself is killed (SIGKILL) before it can release, a release
guard does it: a small process in a session of its own that waits for washout's end of a
pipe to close and then runs the release (``scancel --name`` of the session's jobs, or the
``[release]`` command); a release that ran tells the guard to stand down. A Slurm
allocation also ends at its ``time_limit``, whatever happens to the controller.

Slurm: one job per node (``salloc --no-shell -N1``, nodes kept apart with ``--exclude``),
so a node can be rebooted by renewing its own job with ``--reboot`` while the others run
on. Every job of a session has one unique name, which is what the guard cancels. On
``resume`` the same nodes are asked for (``--nodelist``): a worker's schedule belongs to
its machine; their fingerprint and provenance are checked against their first capture as
for any worker. An ``[allocate]`` command on resume is told the stored worker names
(``WASHOUT_WORKERS``) and must print workers of those names.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shlex
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from pydantic import ValidationError

from washout.errors import ExitCode, WashoutError, WorkerError
from washout.harness.executors.base import CommandOptions, CommandResult, Executor
from washout.harness.executors.local import LocalExecutor
from washout.harness.spec import AllocateSpec, ClusterSpec, Spec, WorkerSpec, validation_error

log = logging.getLogger(__name__)

_GRANTED = re.compile(r"Granted job allocation (\d+)")
_GUARD = """trap '' INT HUP TERM
while read -r word rest; do
  case $word in
    hosts) WASHOUT_HOSTS=$rest; export WASHOUT_HOSTS ;;
    released) exit 0 ;;
  esac
done
exec /bin/sh -c "$0"
"""
"""The guard: it blocks reading a pipe only washout writes (``hosts ...`` when the
allocated hosts are known, ``released`` when the release ran); at its end (washout gone)
it runs the release command (its ``$0``)."""


class ReleaseGuard:
    """Runs a release command when washout dies before it released (see module doc)."""

    def __init__(self, command: str, env: dict[str, str] | None = None) -> None:
        alive_r, self._alive_w = os.pipe()  # the write end is close-on-exec: only ours
        try:
            self._process = subprocess.Popen(
                ["/bin/sh", "-c", _GUARD, command],
                stdin=alive_r,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                cwd=os.getcwd(),
                start_new_session=True,
            )
        finally:
            os.close(alive_r)

    def tell_hosts(self, hosts: list[str]) -> None:
        """The allocated hosts, for the release command's ``WASHOUT_HOSTS``."""
        os.write(self._alive_w, ("hosts " + " ".join(hosts) + "\n").encode())

    def stand_down(self) -> None:
        """The release ran: the guard exits without running it again."""
        if self._alive_w < 0:
            return
        try:
            os.write(self._alive_w, b"released\n")
        finally:
            os.close(self._alive_w)
            self._alive_w = -1
        self._process.wait()


def _one_line(result: CommandResult) -> str:
    err = result.stderr.decode("utf-8", errors="replace").strip().replace("\n", " | ")
    return f"{result.reason}{': ' + err[-400:] if err else ''}"


def salloc_argv(
    cluster: ClusterSpec,
    job_name: str,
    *,
    node: str | None = None,
    exclude: list[str] | None = None,
    reboot: bool = False,
) -> list[str]:
    """The salloc of one node's job: the ``[cluster]`` request for a single node, held
    without a shell until washout cancels it (or its time limit ends it)."""
    argv = ["salloc", "--no-shell", "--nodes=1", f"--job-name={job_name}"]
    if cluster.partition:
        argv.append(f"--partition={cluster.partition}")
    if cluster.time_limit is not None:
        argv.append(f"--time={max(1, -(-int(cluster.time_limit) // 60))}")
    if cluster.exclusive:
        argv.append("--exclusive")
    if node:
        argv.append(f"--nodelist={node}")
    if exclude:
        argv.append(f"--exclude={','.join(exclude)}")
    if reboot:
        argv.append("--reboot")
    return argv + list(cluster.args)


def parse_hosts(text: str, allocate: AllocateSpec, source: str) -> list[WorkerSpec]:
    """The workers an ``[allocate]`` command printed: JSON (a list of host names or of
    ``[[worker]]`` tables) or one host per line (blank lines and ``#`` comments skipped),
    with ``[allocate]``'s user, port, key, known_hosts and workdir as defaults."""
    where = f"{source}: [allocate] command output"
    stripped = text.strip()
    entries: list[Any]
    if stripped.startswith(("[", "{")):
        try:
            entries = json.loads(stripped)
        except ValueError as err:
            raise WorkerError(f"{where}: not valid JSON: {err}") from None
        if not isinstance(entries, list):
            raise WorkerError(f"{where}: JSON must be a list of hosts or worker tables")
    else:
        entries = [
            line.strip()
            for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")
        ]
    defaults = {
        key: value
        for key in ("user", "port", "key", "known_hosts", "workdir")
        if (value := getattr(allocate, key)) is not None
    }
    workers = []
    for i, entry in enumerate(entries):
        fields = {"host": entry} if isinstance(entry, str) else entry
        if not isinstance(fields, dict):
            raise WorkerError(f"{where}: entry {i + 1} = {entry!r}: expected a host or a table")
        try:
            workers.append(WorkerSpec.model_validate({**defaults, **fields}))
        except ValidationError as err:
            raise validation_error(err, where, WorkerSpec, (f"host {i + 1}",)) from None
    if len(workers) != allocate.workers:
        raise WorkerError(
            f"{where}: {len(workers)} host(s), but allocate.workers = {allocate.workers}"
        )
    names = [w.label for w in workers]
    if len(set(names)) != len(names):
        raise WorkerError(f"{where}: two hosts have one name: {sorted(names)}")
    return workers


class SlurmAllocation:
    """One Slurm job per node, all under one name (see the module docstring)."""

    def __init__(self, cluster: ClusterSpec, name: str, source: str, reboot: bool) -> None:
        self.cluster = cluster
        self.source = source
        self.reboot = reboot
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[:40] or "experiment"
        self.job_name = f"washout-{safe}-{secrets.token_hex(4)}"
        self.jobs: dict[str, str] = {}
        self._local = LocalExecutor("controller")
        self.guard: ReleaseGuard | None = None

    @property
    def release_command(self) -> str:
        return shlex.join(["scancel", f"--name={self.job_name}"])

    async def _salloc(self, argv: list[str], timeout: float | None) -> tuple[str, str]:
        """Run salloc; the job id and the node it was granted."""
        result = await self._local.run(shlex.join(argv), CommandOptions(timeout=timeout))
        granted = _GRANTED.search(result.stderr.decode("utf-8", errors="replace"))
        if result.status != "ok" or not granted:
            raise WorkerError(f"{self.source}: [cluster] {shlex.join(argv)}: {_one_line(result)}")
        job = granted.group(1)
        shown = await self._local.run(f"squeue -h -j {job} -o %N", CommandOptions(timeout=60))
        node = shown.stdout.decode().strip()
        if shown.status != "ok" or not node:
            raise WorkerError(f"{self.source}: Slurm job {job}: no node: {_one_line(shown)}")
        return job, node

    async def _check_reboot_allowed(self) -> None:
        shown = await self._local.run("scontrol show config", CommandOptions(timeout=60))
        program = re.search(rb"^RebootProgram\s*=\s*(.*)$", shown.stdout, re.MULTILINE)
        if shown.status != "ok" or program is None or program.group(1).strip() in (b"", b"(null)"):
            raise WorkerError(
                f"{self.source}: reset.kind = 'reboot' through Slurm: this cluster has no "
                "RebootProgram (scontrol show config), so its nodes cannot be rebooted "
                "through Slurm; use a reset command, or ask the site to allow reboots"
            )

    async def acquire(self, previous: list[str]) -> list[Executor]:
        """A job per node: the stored nodes on resume, else any distinct nodes."""
        if self.reboot:
            await self._check_reboot_allowed()
        self.guard = ReleaseGuard(self.release_command)
        wanted: list[str | None] = list(previous) or [None] * self.cluster.nodes
        executors: list[Executor] = []
        from washout.harness.executors.slurm import SlurmExecutor

        for node in wanted:
            argv = salloc_argv(self.cluster, self.job_name, node=node, exclude=list(self.jobs))
            job, got = await self._salloc(argv, None)
            self.jobs[got] = job
            executors.append(SlurmExecutor(job, got, self.cluster.workdir, self.renew))
        return executors

    async def renew(self, node: str, timeout: float) -> str:
        """Give back ``node``'s job and allocate the node again with ``--reboot``: the new
        job id."""
        await self._local.run(shlex.join(["scancel", self.jobs[node]]), CommandOptions(timeout=60))
        argv = salloc_argv(self.cluster, self.job_name, node=node, reboot=True)
        job, _ = await self._salloc(argv, timeout)
        self.jobs[node] = job
        return job

    def describe(self) -> str:
        return f"Slurm jobs {self.job_name}: " + ", ".join(
            f"{node} (job {job})" for node, job in self.jobs.items()
        )

    async def release(self) -> None:
        """Cancel every job of the session (pending ones too)."""
        result = await self._local.run(self.release_command, CommandOptions(timeout=120))
        if self.guard is not None:
            self.guard.stand_down()
        if result.status != "ok":
            raise WorkerError(
                f"{self.release_command} {result.status}: {_one_line(result)}; "
                "the nodes may still be held"
            )


class HookAllocation:
    """The workers an ``[allocate]`` command prints, given back by ``[release]``."""

    def __init__(self, spec: Spec, name: str, source: str) -> None:
        assert spec.allocate is not None
        self.allocate = spec.allocate
        self.release_spec = spec.release
        self.source = source
        self.env = {"WASHOUT_EXPERIMENT": name}
        self.workers: list[WorkerSpec] = []
        self._local = LocalExecutor("controller")
        self.guard: ReleaseGuard | None = None

    async def acquire(self, previous: list[str]) -> list[Executor]:
        """Run the allocate command (the stored worker names in ``WASHOUT_WORKERS`` on
        resume) and connect to what it printed."""
        if previous:
            self.env["WASHOUT_WORKERS"] = " ".join(previous)
        if self.release_spec is not None:
            self.guard = ReleaseGuard(self.release_spec.command, self.env)
        result = await self._local.run(
            self.allocate.command, CommandOptions(timeout=self.allocate.timeout, env=self.env)
        )
        if result.status != "ok":
            raise WorkerError(
                f"{self.source}: allocate.command {self.allocate.command!r} "
                f"{result.status}: {_one_line(result)}"
            )
        self.workers = parse_hosts(
            result.stdout.decode("utf-8", "replace"), self.allocate, self.source
        )
        self.env["WASHOUT_HOSTS"] = " ".join(w.host for w in self.workers)
        if self.guard is not None:
            self.guard.tell_hosts([w.host for w in self.workers])
        names = sorted(w.label for w in self.workers)
        if previous and names != sorted(previous):
            raise WorkerError(
                f"{self.source}: allocate.command printed workers {names} on resume, but the "
                f"experiment ran on {sorted(previous)}: a worker's schedule belongs to its "
                'machine; print the same names (JSON "name" keeps a name across addresses)'
            )
        from washout.harness.executors.ssh import SSHExecutor

        return [SSHExecutor(w) for w in self.workers]

    def describe(self) -> str:
        return "allocated " + ", ".join(f"{w.label} ({w.host})" for w in self.workers)

    async def release(self) -> None:
        """Run the release command, if any."""
        if self.release_spec is None:
            return
        result = await self._local.run(
            self.release_spec.command,
            CommandOptions(timeout=self.release_spec.timeout, env=self.env),
        )
        if self.guard is not None:
            self.guard.stand_down()
        if result.status != "ok":
            raise WorkerError(
                f"{self.source}: release.command {self.release_spec.command!r} "
                f"{result.status}: {_one_line(result)}"
            )


class AllocationError(WorkerError):
    """The workers could not be allocated (nothing ran; what was obtained is released)."""

    exit_code = ExitCode.WORKER_FAILED


@asynccontextmanager
async def allocated(
    spec: Spec, source: str, previous: list[str], note: Callable[[str, str], None]
) -> AsyncIterator[list[Executor] | None]:
    """The session's allocated workers (None when the spec lists its workers or runs
    here), released when the block ends however it ends. ``note(kind, message)`` records
    what was allocated and released, and (kind "error") a release that failed."""
    name = spec.experiment.name
    allocation: SlurmAllocation | HookAllocation
    if spec.cluster is not None:
        reboot = spec.reset is not None and spec.reset.kind == "reboot"
        allocation, how = SlurmAllocation(spec.cluster, name, source, reboot), "from Slurm"
    elif spec.allocate is not None:
        allocation, how = HookAllocation(spec, name, source), f"by {spec.allocate.command!r}"
    else:
        yield None
        return
    try:
        try:
            log.info("allocating %d worker(s) %s", spec.schedules, how)
            executors = await allocation.acquire(previous)
        except WashoutError as err:
            raise AllocationError(str(err)) from None
        note("allocate", allocation.describe())
        log.info("%s", allocation.describe())
        yield executors
    finally:
        try:
            await allocation.release()
        except WashoutError as err:
            note("error", str(err))
        else:
            note("release", "released " + allocation.describe())
            log.info("released %s", allocation.describe())
