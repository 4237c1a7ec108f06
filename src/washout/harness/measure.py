"""A trial's metrics taken by their sources (``washout.harness.metrics``), in the order a
trial runs: each source's ``before`` (before the trial), ``start`` (just before the
measured command; a sampler), the command, each reading's ``stop``, then each source's
``value``. The engine takes a plain test's metrics with it (:class:`TrialMetrics`);
``roles.TrialSide`` those taken around the trial (on a role, sampled, counted).

A metric with no value is a MetricError, which fails the trial with its reason ("metric
rps: no number in stdout"), or a MetricUnavailable (this machine cannot give it), which
leaves the trial ok and says so in its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from washout.harness.executors.base import CommandResult, Executor
from washout.harness.metrics.base import (
    MetricError,
    MetricUnavailable,
    Reading,
    Text,
    Trial,
)
from washout.harness.metrics.file import File
from washout.harness.metrics.stdout import Stdout
from washout.harness.metrics.wall import Wall
from washout.harness.spec import MetricSpec, Spec, Test

__all__ = ["MetricError", "MetricUnavailable", "TrialMetrics", "extract", "files_removed_outside"]


class TrialMetrics:
    """Some metrics of one trial, each taken on its side (``side(role)``), by name."""

    __slots__ = ("metrics", "trial", "side", "readings", "sampled", "notes")

    def __init__(
        self,
        metrics: Mapping[str, MetricSpec],
        trial: Trial,
        side: Callable[[str | None], Executor],
    ) -> None:
        self.metrics = metrics
        self.trial = trial
        self.side = side
        self.readings: dict[str, Reading] = {}
        self.sampled: set[str] = set()
        """The metrics whose value their reading gives."""
        self.notes: list[str] = []
        """Why a metric has no value although the trial is ok ("not available")."""

    async def before(self) -> None:
        """Each source's work before the trial (MetricError naming the metric)."""
        for name, m in self.metrics.items():
            try:
                await m.source.before(self.trial, self.side(m.role))
            except MetricError as err:
                raise MetricError(f"metric {name}: {err}") from None

    async def start(self) -> None:
        """Each source's work just before the measured command (MetricError naming the
        metric: the trial cannot run); a metric the machine cannot give is noted and left
        out."""
        for name, m in self.metrics.items():
            try:
                reading = await m.source.start(self.trial, self.side(m.role))
            except MetricUnavailable as err:
                self.notes.append(f"metric {name}: not available: {err}")
                self.sampled.add(name)  # no value to take after the trial either
                continue
            except MetricError as err:
                raise MetricError(f"metric {name}: {err}") from None
            if reading is not None:
                self.readings[name] = reading
                self.sampled.add(name)

    async def stop(self) -> tuple[dict[str, float], str | None]:
        """Right after the command: each reading's value, and the first failure's reason."""
        values: dict[str, float] = {}
        failure = None
        readings, self.readings = self.readings, {}
        for name, reading in readings.items():
            try:
                values[name] = await reading.stop()
            except MetricError as err:
                failure = failure or f"metric {name}: {err}"
        return values, failure

    async def values(self, result: CommandResult) -> dict[str, float]:
        """Once the trial is over: each source's value but those read while it ran
        (MetricError naming the metric, for the first that has none)."""
        self.trial.result = result
        values: dict[str, float] = {}
        for name, m in self.metrics.items():
            if name in self.sampled:
                continue
            try:
                values[name] = await m.source.value(self.trial, self.side(m.role))
            except MetricUnavailable as err:
                self.notes.append(f"metric {name}: not available: {err}")
            except MetricError as err:
                raise MetricError(f"metric {name}: {err}") from None
        return values

    async def close(self) -> None:
        """Readings still running cancelled, and what the sources left removed."""
        for reading in self.readings.values():
            await reading.cancel()
        self.readings = {}
        await self.trial.clean_up()


def extract(
    spec: MetricSpec,
    *,
    stdout: bytes,
    wall: float,
    file_content: bytes | None,
    stdout_cut: bool = False,
) -> float:
    """The value of a metric read after its trial (wall, stdout, a file's content) from
    that trial's outputs, without a worker: the pure part of those sources, for checks
    of what any output gives. MetricError for a source taken while a trial runs."""
    source = spec.source
    if isinstance(source, Wall):
        return wall
    if isinstance(source, File):
        if file_content is None:
            raise MetricError(f"file {source.path} could not be read")
        return source.parser.read(Text.of(file_content, f"file {source.path}"))
    if isinstance(source, Stdout):
        return source.parser.read(Text.of(stdout, "stdout", stdout_cut))
    raise MetricError(f"{type(source).__name__.lower()} is taken while the trial runs")


def files_removed_outside(spec: Spec, tests: list[Test]) -> list[str]:
    """The ``file`` metrics of a run on this machine that name an existing file outside
    their test's working directory, each said once: the file is removed before every trial
    (a value must come from the trial that wrote it), so ``validate`` and ``run`` warn of
    it. Workers elsewhere are not looked at: their files are not this machine's."""
    if spec.worker or spec.cluster or spec.allocate:
        return []
    said: dict[Path, str] = {}
    for test in tests:
        workdir = Path(test.cwd or ".").resolve()
        for name, m in test.metrics.items():
            file = m.source
            if not isinstance(file, File):
                continue
            path = file.removes_outside(workdir)
            if path is not None and path not in said:
                said[path] = (
                    f"test {test.name!r} metric {name!r}: file {file.path} exists outside "
                    f"the working directory ({workdir}); it is removed before every trial"
                )
    return list(said.values())
