"""``sample = { command = "..." }`` or ``{ file = "..." }``: a metric read while the trial
runs, on the metric's role.

A sampler takes one reading just before the measured command starts, one every
``interval`` while it runs (none without an interval), and one just after it ends; the
readings become one value: their ``mean`` or ``max``, or the ``delta`` of a counter (last
minus first). Readings are taken from the controller through the role's executor, so a
worker runs nothing of washout's between readings; each reading is one short process
there (an in-process read for a local ``file``). Without an interval nothing of washout's
runs during the timed window at all; ``bench/sampling_overhead.py`` measures what an
interval costs the measured command.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar, Generic, Literal, Self, TypeVar

from pydantic import model_validator

from washout.harness.executors.base import CommandOptions, Executor
from washout.harness.fields import Duration, NonBlank, StrictModel
from washout.harness.metrics.base import MetricError, Parser, Reading, Source, Text, Trial

T = TypeVar("T")


class SampleSpec(StrictModel):
    """A metric read while the trial runs: ``command`` or ``file`` on the metric's role,
    at the start, every ``interval`` (absent: no reading in between) and at the end, each
    reading parsed by the metric's ``json``, ``regex`` or as its last number, then
    ``aggregate``d: ``mean``, ``max``, or ``delta`` (last minus first, for counters)."""

    command: NonBlank | None = None
    file: NonBlank | None = None
    interval: Duration | None = None
    aggregate: Literal["mean", "max", "delta"] = "mean"
    timeout: Duration = 10.0

    @model_validator(mode="after")
    def _one_reading(self) -> Self:
        if (self.command is None) == (self.file is None):
            raise ValueError("give one of command or file to sample")
        return self


class SampleKeys(StrictModel):
    sample: SampleSpec | None = None
    """A command or file read while the trial runs."""


def aggregate(values: list[float], how: str) -> float:
    """``mean`` or ``max`` of the readings, or ``delta``: last minus first (a counter)."""
    if how == "mean":
        return statistics.fmean(values)
    if how == "max":
        return max(values)
    return values[-1] - values[0]


class Sampler(Generic[T]):
    """Readings of one metric at the start, every interval and at the end of a trial."""

    def __init__(
        self,
        read: Callable[[], Awaitable[T]],
        interval: float | None,
        finish: Callable[[list[T], float], float],
    ) -> None:
        self.read = read
        self.interval = interval
        self.finish = finish
        self.readings: list[T] = []
        self.error: MetricError | None = None
        self.loop: asyncio.Task[None] | None = None
        self.first = 0.0

    async def begin(self) -> None:
        """The first reading (its errors raised now), then the loop if there is an interval."""
        self.readings.append(await self.read())
        self.first = time.monotonic()
        if self.interval is not None:
            self.loop = asyncio.create_task(self._every(self.interval))

    async def _every(self, interval: float) -> None:
        try:
            while True:
                await asyncio.sleep(interval)
                self.readings.append(await self.read())
        except MetricError as err:
            self.error = err

    async def cancel(self) -> None:
        if self.loop is not None:
            self.loop.cancel()
            await asyncio.gather(self.loop, return_exceptions=True)
            self.loop = None

    async def stop(self) -> float:
        """The last reading, then the metric's value (MetricError if a reading failed)."""
        await self.cancel()
        if self.error is not None:
            raise self.error
        self.readings.append(await self.read())
        return self.finish(self.readings, time.monotonic() - self.first)


@dataclass(frozen=True)
class Sample(Source):
    """``spec``'s command or file on the metric's side, each reading read by ``parser``."""

    spec: SampleSpec
    parser: Parser
    key: ClassVar[str] = "sample"
    takes: ClassVar[frozenset[str]] = frozenset({"json", "regex"})
    conflict: ClassVar[str] = (
        "sample reads its own command or file every interval, parsed by json, regex or as "
        "its last number; give no wall, file or stdout with it"
    )
    around: ClassVar[bool] = True

    @classmethod
    def of(cls, keys: SampleKeys, parser: Parser) -> Sample:
        assert keys.sample is not None
        return cls(keys.sample, parser)

    async def start(self, trial: Trial, side: Executor) -> Reading:
        sample = self.spec

        async def reading() -> float:
            return self.parser.read(await self._text(side, trial.cwd))

        def combine(values: list[float], _: float) -> float:
            return aggregate(values, sample.aggregate)

        sampler = Sampler(reading, sample.interval, combine)
        await sampler.begin()
        return sampler

    async def _text(self, side: Executor, cwd: str | None) -> Text:
        """One reading: the sampled file's bytes, or the sampled command's stdout."""
        sample = self.spec
        if sample.file is not None:
            try:
                data = await side.read_file(sample.file, cwd)
            except OSError as err:
                raise MetricError(f"sample file {sample.file}: {err.strerror or err}") from None
            return Text.of(data, f"sample file {sample.file}")
        command = str(sample.command)
        result = await side.run(command, CommandOptions(timeout=sample.timeout, cwd=cwd))
        if result.status != "ok":
            raise MetricError(f"sample command {command!r} {result.status}: {result.reason}")
        return Text.of(result.stdout, f"sample {command!r}", result.stdout_cut)
