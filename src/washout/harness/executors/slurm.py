"""A node of a Slurm allocation as a worker: every command is a job step into the
allocation (``srun --jobid=J --overlap``), started and waited on by the local executor.

Each step runs a small bash wrapper on the node (bash is on every Slurm node): ``cd`` to
the working directory, ``taskset -c`` for ``cpus``, the command in ``/bin/sh -c``, and the
node's own clock around it (bash's ``$EPOCHREALTIME``), reported with the exit code as a
marker line on stderr that is stripped before the output is kept. So ``wall`` holds
neither srun's start-up nor the controller's network round trips, as over SSH.

The process handling is the local executor's (:class:`LocalExecutor`): srun runs in its
own process group, is SIGTERMed at the timeout (srun then cancels the step), SIGKILLed
after the grace period, and killed by the local guard if washout dies (Slurm then ends the
step, its I/O gone). A step killed from the controller's side may leave processes on the
node until its job ends, so after a command that did not report its end every process of
its step is SIGKILLed (``scancel --signal=KILL JOB.STEP``) before the next command runs.
The environment reaches the node through srun (``--export=ALL``, Slurm's default).
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from washout.errors import WorkerError
from washout.harness.executors.base import (
    METRIC_FILE_LIMIT,
    CommandOptions,
    CommandResult,
)
from washout.harness.executors.local import LocalExecutor
from washout.harness.executors.ssh_wrapper import kill_sessions_script

BOOT_ID = "cat /proc/sys/kernel/random/boot_id"


def step_argv(job_id: str, node: str) -> list[str]:
    """srun of one step on ``node`` of job ``job_id``, sharing the allocation's resources
    with any other step (``--overlap``), quiet so Slurm's own notes stay out of stderr."""
    return [
        "srun",
        f"--jobid={job_id}",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={node}",
        "--quiet",
    ]


def step_script(command: str, token: str, cwd: str | None, cpus: str | None) -> str:
    """The bash wrapper one step runs on the node (see the module docstring). It prints
    the step's id first (to kill what a step killed from the controller's side leaves) and
    exits 0 when the command ran, whatever its status, which the end marker carries: so
    srun adds no "task 0: Exited with exit code" line to the trial's stderr."""
    launch = f"taskset -c {shlex.quote(cpus)} " if cpus else ""
    lines = [
        f"cd -- {shlex.quote(cwd)} || exit 1" if cwd else "",
        f"printf '@@washout:{token}:step %s\\n' \"$SLURM_STEP_ID\" >&2",
        "t0=$EPOCHREALTIME",
        f"{launch}/bin/sh -c {shlex.quote(command)} </dev/null",
        "rc=$?",
        "t1=$EPOCHREALTIME",
        f'printf \'\\n@@washout:{token}:end %s %s %s\\n\' "$rc" "$t0" "$t1" >&2',
    ]
    return "\n".join(line for line in lines if line) + "\n"


class SlurmExecutor:
    """Runs commands on one node of a Slurm job, each as a step of that job."""

    def __init__(
        self,
        job_id: str,
        node: str,
        workdir: str | None = None,
        reallocate: Callable[[str, float], Awaitable[str]] | None = None,
    ) -> None:
        self.job_id = job_id
        self._reallocate = reallocate
        self.name = node
        self.host = node
        self.workdir = workdir
        self.local = False  # its commands run as job steps, whatever machine it is
        self._local = LocalExecutor(node)
        self._token = secrets.token_hex(8)
        self._marker = re.compile(
            rb"\n?@@washout:" + self._token.encode() + rb":end (-?\d+) (\S+) (\S+)\n"
        )
        self._step = re.compile(rb"@@washout:" + self._token.encode() + rb":step (\d+)\n")

    async def _kill_step(self, step: str) -> None:
        """SIGKILL every process of a step whose srun is gone, and end the step: Slurm
        itself would leave them running until the job ends."""
        await self._local.run(
            f"scancel --quiet --signal=KILL {self.job_id}.{step}; "
            f"scancel --quiet {self.job_id}.{step}",
            CommandOptions(timeout=60),
        )

    async def connect(self) -> None:
        """A first step on the node: a node the job does not hold, or a cluster where srun
        cannot start steps, is a one-line error now rather than at the first trial."""
        result = await self.run("true", CommandOptions(timeout=120))
        if result.status != "ok":
            err = result.stderr.decode("utf-8", errors="replace").strip().replace("\n", " | ")
            raise WorkerError(
                f"{self.name}: cannot start a step in Slurm job {self.job_id}: "
                f"{result.reason}{': ' + err[-300:] if err else ''}"
            )

    async def close(self) -> None:
        return None

    def launcher_notes(self) -> list[str]:
        return []  # wall is taken on the node around the command; no rusage is kept

    async def kill_leftovers(self, sessions: list[str]) -> int:
        """SIGKILL what trials of dead sessions left on the node (a step of this job; steps
        of an earlier job ended with it)."""
        if not sessions:
            return 0
        result = await self.run(kill_sessions_script(sessions), CommandOptions(timeout=60))
        said = result.stdout.decode("utf-8", errors="replace").strip()
        return int(said) if said.isdigit() else 0

    async def mirror(self, directory: Path) -> str:
        raise WorkerError(
            f"{self.name}: [experiment] sync is not done on Slurm nodes: use a file system "
            "the nodes share (or copy the files in [setup])"
        )

    async def run(self, command: str, options: CommandOptions) -> CommandResult:
        cpus = options.cpus
        argv = step_argv(self.job_id, self.name)
        script = step_script(command, self._token, options.cwd, cpus)
        line = shlex.join([*argv, "bash", "-c", script])
        # srun runs here; the step's own script goes to the node's directory and CPUs
        # srun runs here, the trial on the node: this machine's health is not the trial's
        result = await self._local.run(line, replace(options, cwd=None, cpus=None, health=None))
        found = list(self._marker.finditer(result.stderr))
        step = self._step.search(result.stderr)
        stderr = self._step.sub(b"", self._marker.sub(b"", result.stderr))
        if not found:  # srun failed, or was killed (a timeout): so is the step, now
            if step is not None:
                await self._kill_step(step.group(1).decode())
            return replace(result, stderr=stderr, cpus=cpus)
        code = int(found[-1].group(1))
        wall = float(found[-1].group(3)) - float(found[-1].group(2))
        if code == 0:
            status, reason = "ok", ""
        elif code > 128:
            status, reason = "failed", f"killed by signal {code - 128}"
        else:
            status, reason = "failed", f"exit code {code}"
        return replace(
            result,
            status=status,
            exit_code=code,
            stderr=stderr,
            duration=wall,
            reason=reason,
            cpus=cpus,
        )

    async def _checked(self, script: str, path: str, cwd: str | None, limit: int) -> bytes:
        result = await self.run(script, CommandOptions(timeout=60, cwd=cwd, output_tail=limit))
        if result.status != "ok":
            why = result.stderr.decode("utf-8", errors="replace").strip() or result.reason
            raise OSError(why.splitlines()[-1] if why else result.reason)
        return result.stdout

    async def read_file(self, path: str, cwd: str | None = None) -> bytes:
        p = shlex.quote(path)
        script = (
            f"[ -e {p} ] || {{ echo 'No such file or directory' >&2; exit 2; }}\n"
            f"[ -f {p} ] || {{ echo 'not a regular file' >&2; exit 3; }}\n"
            f"s=$(stat -L -c %s -- {p}) || exit 4\n"
            f'[ "$s" -le {METRIC_FILE_LIMIT} ] || {{ echo "$s bytes, more than the '
            f'{METRIC_FILE_LIMIT >> 20} MiB washout reads for a metric" >&2; exit 5; }}\n'
            f"exec cat -- {p}\n"
        )
        return await self._checked(script, path, cwd, METRIC_FILE_LIMIT)

    async def remove_file(self, path: str, cwd: str | None = None) -> None:
        p = shlex.quote(path)
        script = (
            f"if [ -L {p} ] || [ -f {p} ]; then exec rm -f -- {p}; fi\n"
            f"[ -e {p} ] || exit 0\n"
            "echo 'not a regular file' >&2; exit 3\n"
        )
        await self._checked(script, path, cwd, 4096)

    async def boot_id(self) -> str:
        """The node's boot id (one step)."""
        result = await self.run(BOOT_ID, CommandOptions(timeout=60))
        value = result.stdout.decode("utf-8", errors="replace").strip()
        if result.status != "ok" or not value:
            raise WorkerError(f"{self.name}: cannot read the boot id: {result.reason}")
        return value

    async def reboot(self, timeout: float, command: str | None = None) -> str:
        """Reboot the node through Slurm and verify it: its job is given back and the node
        allocated again with ``--reboot`` (Slurm reboots a node only when no job holds it,
        with the site's RebootProgram), then the boot id must have changed (Slurm ignores
        ``--reboot`` for users who may not reboot nodes). ``command`` is not used: the site
        decides how its nodes reboot."""
        if self._reallocate is None:
            raise WorkerError(f"{self.name}: this node's allocation cannot be renewed")
        before = await self.boot_id()
        old = self.job_id
        self.job_id = await self._reallocate(self.name, timeout)
        after = await self.boot_id()
        if after == before:
            raise WorkerError(
                f"{self.name}: boot id still {before} after Slurm job {self.job_id} asked for "
                "a reboot (--reboot): Slurm did not reboot the node (only root, SlurmUser or "
                "operators may; it ignores --reboot for others)"
            )
        return f"reboot through Slurm: job {old} -> {self.job_id}; boot id {before} -> {after}"
