"""Client/server trials: workers with roles, worker groups, and what runs around a trial.

A worker may carry a ``role`` (``server``, ``client``...). Workers with the same ``group``
(default ``main``), one per role, act as one worker: the group runs one schedule, is one
worker in the store and the long format (its name is the ``worker`` column), and the
analysis treats it as one. Several groups run their schedules at once, as several plain
workers do.

Within a group a test's command runs on the test's ``role``; its ``background`` commands
are started on their roles before it (each ready once its probe exits 0) and stopped
(their process groups killed) after it; its metrics may be taken on any role (a file read
there, a sample, energy, counters). Every command on a group's worker gets the other
roles' addresses as environment variables, ``WASHOUT_HOST_<ROLE>`` (``$WASHOUT_HOST_SERVER``),
never pasted into the command text: a host name reaches the shell as data, never as code
(the same rule as ``{param}`` values). ``[role.NAME]`` replaces ``[setup]``, ``[reset]``,
``[teardown]`` and ``[provenance]`` for that role's workers.

The engine meets this module at four hooks: :func:`make_groups` (its executors),
:func:`role_commands` (setup, reset and teardown per role), :func:`watch_for` (provenance
per role) and :func:`around_trial` (the measured command with what runs around it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

from washout.harness.environment import EnvironmentWatch
from washout.harness.executors.base import CommandOptions, CommandResult, Executor, tail
from washout.harness.measure import MetricError, TrialMetrics
from washout.harness.metrics.base import Trial
from washout.harness.spec import (
    DEFAULT_GROUP,
    BackgroundSpec,
    CommandSpec,
    MetricSpec,
    ProvenanceSpec,
    ResetSpec,
    Spec,
    Test,
    WorkerSpec,
)

HOST_VARIABLE = "WASHOUT_HOST_{}"
"""The variable holding a role's address in a group (role upper-cased)."""
READY_FIRST_WAIT = 0.05
"""Seconds before a readiness probe is tried again; doubled up to READY_LONGEST_WAIT."""
READY_LONGEST_WAIT = 1.0


def host_variable(role: str) -> str:
    """``WASHOUT_HOST_SERVER`` for role ``server``."""
    return HOST_VARIABLE.format(role.upper())


# -- a group as one worker -----------------------------------------------------------------


def _join(workdir: str | None, cwd: str | None) -> str | None:
    if cwd and workdir and not cwd.startswith("/"):
        return f"{workdir.rstrip('/')}/{cwd}"
    return cwd or workdir


class ExecutorProxy:
    """An :class:`Executor` that passes everything on to ``inner``: the wrappers below
    override only what they change."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.name = inner.name
        self.host = inner.host
        self.workdir = inner.workdir
        self.local = inner.local

    async def connect(self) -> None:
        await self.inner.connect()

    def launcher_notes(self) -> list[str]:
        return self.inner.launcher_notes()

    async def run(self, command: str, options: CommandOptions) -> CommandResult:
        return await self.inner.run(command, options)

    async def read_file(self, path: str, cwd: str | None = None) -> bytes:
        return await self.inner.read_file(path, cwd)

    async def remove_file(self, path: str, cwd: str | None = None) -> None:
        await self.inner.remove_file(path, cwd)

    async def kill_leftovers(self, sessions: list[str]) -> int:
        return await self.inner.kill_leftovers(sessions)

    async def mirror(self, directory: Path) -> str:
        return await self.inner.mirror(directory)

    async def reboot(self, timeout: float, command: str | None = None) -> str:
        return await self.inner.reboot(timeout, command)

    async def close(self) -> None:
        await self.inner.close()


class RoleSide(ExecutorProxy):
    """One member of a worker group, as an :class:`Executor`: every command gets the
    group's ``WASHOUT_HOST_<ROLE>`` variables and runs in the member's workdir."""

    def __init__(self, role: str, member: Executor, env: dict[str, str]) -> None:
        super().__init__(member)
        self.role = role
        self.env = env

    async def run(self, command: str, options: CommandOptions) -> CommandResult:
        cwd, env = _join(self.workdir, options.cwd), {**self.env, **(options.env or {})}
        return await self.inner.run(command, dataclasses.replace(options, cwd=cwd, env=env))

    async def read_file(self, path: str, cwd: str | None = None) -> bytes:
        return await self.inner.read_file(path, _join(self.workdir, cwd))

    async def remove_file(self, path: str, cwd: str | None = None) -> None:
        await self.inner.remove_file(path, _join(self.workdir, cwd))


class GroupExecutor(ExecutorProxy):
    """A worker group as the engine's one worker. Commands the engine runs on it go to the
    role of the trial in hand (:attr:`current`, which :func:`around_trial` sets), else to
    the first role; what runs on every role (setup, reset, teardown, provenance) goes
    through :func:`role_commands` and :func:`watch_for`."""

    def __init__(self, name: str, sides: dict[str, RoleSide]) -> None:
        super().__init__(next(iter(sides.values())))
        self.name = name
        self.sides = sides
        self.host = ",".join(f"{role}={side.host}" for role, side in sides.items())
        self.workdir = None  # each side joins its own
        self.local = all(side.local for side in sides.values())
        self.current = next(iter(sides))

    @property
    def current(self) -> str:
        """The role the engine's commands, reads and writes go to."""
        return self._current

    @current.setter
    def current(self, role: str) -> None:
        self._current = role
        self.inner = self.sides[role]

    async def connect(self) -> None:
        await asyncio.gather(*(side.connect() for side in self.sides.values()))

    def launcher_notes(self) -> list[str]:
        return [note for side in self.sides.values() for note in side.launcher_notes()]

    async def kill_leftovers(self, sessions: list[str]) -> int:
        killed = await asyncio.gather(*(s.kill_leftovers(sessions) for s in self.sides.values()))
        return sum(killed)

    async def mirror(self, directory: Path) -> str:
        done = await asyncio.gather(*(s.mirror(directory) for s in self.sides.values()))
        return "; ".join(f"{role}: {how}" for role, how in zip(self.sides, done))

    async def reboot(self, timeout: float, command: str | None = None) -> str:
        """Every role's machine (a reboot reset of a group, where no per-role reset says
        otherwise, goes through :func:`role_commands` instead)."""
        done = await asyncio.gather(*(s.reboot(timeout, command) for s in self.sides.values()))
        return "; ".join(done)

    async def close(self) -> None:
        await asyncio.gather(*(side.close() for side in self.sides.values()))


def make_groups(spec: Spec) -> list[GroupExecutor]:
    """One :class:`GroupExecutor` per worker group, its sides in spec order (empty when no
    worker has a role)."""
    from washout.harness.executors.ssh import SSHExecutor

    grouped: dict[str, list[WorkerSpec]] = {}
    for w in spec.worker:
        if w.role:
            grouped.setdefault(w.group or DEFAULT_GROUP, []).append(w)
    groups = []
    for name, workers in grouped.items():
        env = {host_variable(str(w.role)): w.address or w.host for w in workers}
        groups.append(
            GroupExecutor(
                name,
                {
                    str(w.role): RoleSide(
                        str(w.role),
                        SSHExecutor(w),
                        {**env, "WASHOUT_ROLE": str(w.role), "WASHOUT_GROUP": name},
                    )
                    for w in workers
                },
            )
        )
    return groups


def _sides(ex: Executor) -> Iterator[tuple[str | None, Executor]]:
    if isinstance(ex, GroupExecutor):
        yield from ex.sides.items()
    else:
        yield None, ex


def role_commands(
    ex: Executor, spec: Spec, what: str
) -> list[tuple[Executor, CommandSpec | ResetSpec]]:
    """Where ``setup``, ``reset`` or ``teardown`` runs and what: on each side of a group its
    role's own (``[role.NAME]``), else the top-level one; on a plain worker the top-level."""
    chosen = []
    for role, side in _sides(ex):
        own = spec.role.get(role) if role else None
        command = getattr(own, what, None) if own else None
        command = command or getattr(spec, what)
        if command is not None:
            chosen.append((side, command))
    return chosen


class GroupWatch:
    """The environment of a group: each side's own (:class:`EnvironmentWatch`, with its
    role's provenance), its keys prefixed ``role@`` so groups compare role by role."""

    def __init__(self, watches: dict[str, EnvironmentWatch]) -> None:
        self.watches = watches

    @property
    def captures(self) -> int:
        """How many whole captures its sides made (:attr:`EnvironmentWatch.captures`)."""
        return sum(w.captures for w in self.watches.values())

    @staticmethod
    def _merge(parts: list[dict[str, str]], roles: list[str]) -> dict[str, str]:
        return {f"{role}@{k}": v for role, facts in zip(roles, parts) for k, v in facts.items()}

    async def capture(self) -> dict[str, str]:
        roles = list(self.watches)
        parts = await asyncio.gather(*(w.capture() for w in self.watches.values()))
        return self._merge(list(parts), roles)

    async def before_run(self) -> dict[str, str]:
        roles = list(self.watches)
        parts = await asyncio.gather(*(w.before_run() for w in self.watches.values()))
        return self._merge(list(parts), roles)


def watch_for(ex: Executor, spec: Spec) -> EnvironmentWatch | GroupWatch:
    """The environment watch of a worker, or of each role of a group (``[role.NAME]
    provenance`` replacing ``[provenance]``)."""
    if not isinstance(ex, GroupExecutor):
        return EnvironmentWatch(ex, spec.provenance, getattr(ex, "workdir", None))
    watches = {}
    for role, side in ex.sides.items():
        own = spec.role.get(role)
        provenance: ProvenanceSpec = (own.provenance if own else None) or spec.provenance
        watches[role] = EnvironmentWatch(side.inner, provenance, side.workdir)
    return GroupWatch(watches)


# -- around a trial ----------------------------------------------------------------------


def around_trial(ex: Executor, test: Test) -> Executor:
    """What runs a test's command: the executor itself for a plain test on a plain worker,
    else a :class:`TrialSide` that also starts its background commands, samples, counts
    and reads its metrics on every role (returned as the result's ``extra_metrics``). On
    a group, the test's role becomes the one the engine's own reads and writes go to."""
    if isinstance(ex, GroupExecutor) and test.role:
        ex.current = test.role
    if not isinstance(ex, GroupExecutor) and not test.background and not _taken_around(test):
        return ex
    return TrialSide(ex, test)


def _taken_around(test: Test) -> dict[str, MetricSpec]:
    return {name: m for name, m in test.metrics.items() if m.around_trial}


class _Background:
    """One background command in flight on its side."""

    def __init__(
        self, spec: BackgroundSpec, side: Executor, cwd: str | None, env: dict[str, str]
    ) -> None:
        self.spec = spec
        self.side = side
        self.cwd = cwd
        self.task = asyncio.create_task(
            side.run(
                spec.command, CommandOptions(timeout=None, cwd=cwd, env=env, output_tail=64 << 10)
            )
        )

    @property
    def lost(self) -> bool:
        """Whether the connection to its worker dropped while it ran."""
        return self.task.done() and self.task.result().status == "lost"

    def ended(self, when: str) -> str | None:
        """Why the command is not running any more (None while it runs)."""
        if not self.task.done():
            return None
        result = self.task.result()
        err = tail(result.stderr, 300).strip().replace("\n", " | ")
        return (
            f"background {self.spec.command!r} on {self.side.name} ended {when}: "
            f"{result.reason or 'exit code 0'}{': ' + err if err else ''}"
        )

    async def ready(self, env: dict[str, str]) -> str | None:
        """Wait for the readiness probe (None when ready, else why not)."""
        if self.spec.ready is None:
            return self.ended("at once")
        deadline = time.monotonic() + self.spec.ready_timeout
        wait = READY_FIRST_WAIT
        while True:
            left = deadline - time.monotonic()
            probe = await self.side.run(
                self.spec.ready, CommandOptions(timeout=max(left, 0.1), cwd=self.cwd, env=env)
            )
            if probe.status == "ok":
                return self.ended("before the trial")
            why = self.ended("before it was ready")
            if why:
                return why
            if time.monotonic() + wait > deadline:
                return (
                    f"background {self.spec.command!r} on {self.side.name} not ready after "
                    f"{self.spec.ready_timeout:g} s: {self.spec.ready!r} {probe.reason}"
                )
            await asyncio.sleep(wait)
            wait = min(2 * wait, READY_LONGEST_WAIT)

    async def stop(self) -> None:
        """Kill its process group (the executor does, when its run is cancelled)."""
        if not self.task.done():
            self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


class TrialSide(ExecutorProxy):
    """A trial with what runs around it, as an executor whose ``run`` runs the trial's
    measured command (see :func:`around_trial`).

    Order (``measure.TrialMetrics`` takes the metrics): each metric's work before the
    trial (a role's file removed); background commands started and ready; each metric's
    start (a sampler's first reading, perf set up); the measured command (under ``perf
    stat`` for perf metrics); the samplers' last readings; background commands checked
    (one that ended during the trial fails it) and stopped; then files and counters
    become metrics. A metric the machine cannot give (no powercap, a counter perf does
    not support) is left out and said in the trial's reason; the trial stays ok.
    """

    def __init__(self, ex: Executor, test: Test) -> None:
        super().__init__(ex)
        self.test = test
        self.group = ex if isinstance(ex, GroupExecutor) else None
        self.own = self.side(test.role)

    def side(self, role: str | None) -> Executor:
        if self.group is None:
            return self.inner
        return self.group.sides[role or self.group.current]

    async def run(self, command: str, options: CommandOptions) -> CommandResult:
        env = options.env or {}
        trial = Trial(self.own, options.cwd, options.output_tail)
        taken = TrialMetrics(_taken_around(self.test), trial, self.side)
        backgrounds: list[_Background] = []
        try:
            try:
                await taken.before()
                for bg in self.test.background:
                    # a group's sides join their own workdir; a plain worker's is joined here
                    where = bg.cwd if self.group else _join(self.workdir, bg.cwd)
                    side = self.side(bg.role or self.test.role)
                    backgrounds.append(_Background(bg, side, where, env))
                    why = await backgrounds[-1].ready(env)
                    if why:
                        return CommandResult.unstarted(why)
                await taken.start()
            except MetricError as err:
                return CommandResult.unstarted(str(err))
            result = await self.own.run(trial.command(command), options)
            values, failure = await taken.stop()
            for running in backgrounds:
                failure = failure or running.ended("during the trial")
            if result.status != "ok":
                return result
            if any(running.lost for running in backgrounds):
                # its worker's connection dropped: the trial's outcome is unknown
                return dataclasses.replace(result, status="lost", reason=str(failure))
            if failure:
                return dataclasses.replace(result, status="failed", reason=failure)
            try:
                values.update(await taken.values(result))
            except MetricError as err:
                return dataclasses.replace(result, status="failed", reason=str(err))
            notes = taken.notes
            return dataclasses.replace(
                result,
                extra_metrics={**result.extra_metrics, **values},
                reason="; ".join([result.reason, *notes] if result.reason else notes),
            )
        finally:
            await taken.close()
            await asyncio.gather(*(bg.stop() for bg in backgrounds))

    async def close(self) -> None:
        """Nothing: the worker stays connected for the next trial."""
