"""Metrics read while a trial runs: a command or file sampled on a role, and energy from
Linux powercap (RAPL).

A sampler takes one reading just before the measured command starts, one every
``interval`` while it runs (none without an interval), and one just after it ends; the
readings become one value: their ``mean`` or ``max``, or the ``delta`` of a counter (last
minus first). Readings are taken from the controller through the role's executor, so a
worker runs nothing of washout's between readings; each reading is one short process
there (an in-process read for a local ``file``). Without an interval nothing of washout's
runs during the timed window at all (powercap reads every :data:`POWERCAP_INTERVAL`, so
no wrap of its counters is missed); ``bench/sampling_overhead.py`` measures what an
interval costs the measured command.

Powercap energy counters are read with shell builtins (one ``sh`` per reading, no
other process), summed over the chosen zones with wrap-around handled
(:func:`energy_delta_uj`), and given as joules or as mean watts over the readings' span.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from washout.harness.executors.base import CommandOptions, Executor
from washout.harness.measure import MetricError, parse
from washout.harness.spec import MetricSpec, SampleSpec

T = TypeVar("T")
Zones = dict[str, tuple[str, int, int]]
"""A powercap reading: zone directory (``intel-rapl:0``) -> (name, energy_uj,
max_energy_range_uj)."""
_TOP_LEVEL = re.compile(r"intel-rapl:\d+")
READ_TIMEOUT = 10.0
"""Seconds a powercap reading may take."""
POWERCAP_INTERVAL = 30.0
"""Seconds between powercap readings during a trial: far below the time a counter takes to
wrap at full power (its range, about 262 kJ on current packages, over the package's
watts), so every wrap is seen; a reading costs the worker one ``sh`` of builtins."""


class MetricUnavailable(Exception):
    """This machine cannot give the metric (no powercap zone, a counter not supported)."""


def aggregate(values: list[float], how: str) -> float:
    """``mean`` or ``max`` of the readings, or ``delta``: last minus first (a counter)."""
    if how == "mean":
        return statistics.fmean(values)
    if how == "max":
        return max(values)
    return values[-1] - values[0]


def energy_delta_uj(before: int, after: int, max_range: int) -> int:
    """Energy between two readings of one powercap counter, in microjoules.

    ``energy_uj`` counts up to ``max_energy_range_uj`` and starts again from 0 (Linux,
    Documentation/power/powercap/powercap.rst: "max_energy_range_uj: range of the above
    energy counter in micro-joules"), so a reading below the one before means it wrapped
    once: ``after + max_energy_range_uj - before``. Two wraps between readings cannot be
    told from one: sample at an ``interval`` shorter than the counter's range at full
    power (minutes on current packages) for long trials.
    """
    return after - before if after >= before else after + max_range - before


def powercap_script(root: str) -> str:
    """Shell lines (builtins only) printing ``dir name energy_uj max_energy_range_uj`` for
    every readable ``intel-rapl`` zone under ``root`` (zones and sub-zones)."""
    return (
        f"root={shlex.quote(root)}\n"
        'for z in "$root"/intel-rapl:*; do\n'
        '  [ -r "$z/energy_uj" ] || continue\n'
        '  read -r e < "$z/energy_uj" || continue\n'
        '  read -r m < "$z/max_energy_range_uj" || continue\n'
        '  n=unnamed; [ -r "$z/name" ] && read -r n < "$z/name"\n'
        '  echo "${z##*/} $n $e $m"\n'
        "done\n"
    )


def parse_powercap(text: str) -> Zones:
    """The zones of one reading (lines of :func:`powercap_script`); bad lines skipped."""
    zones: Zones = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2].isdigit() and parts[3].isdigit():
            zones[parts[0]] = (parts[1], int(parts[2]), int(parts[3]))
    return zones


def choose_zones(zones: Zones, names: list[str], root: str) -> list[str]:
    """The zones to sum: every zone (or sub-zone) with one of ``names``; by default every
    top-level ``package-*`` zone (the sockets; a ``psys`` zone would count them twice),
    else every top-level zone."""
    if not zones:
        raise MetricUnavailable(
            f"no readable powercap zone under {root} (no RAPL here, or energy_uj is "
            "readable by root only, as since Linux 5.10)"
        )
    if names:
        chosen = [z for z, (name, _, _) in zones.items() if name in names]
        missing = sorted(set(names) - {zones[z][0] for z in chosen})
        if missing:
            have = ", ".join(sorted({name for name, _, _ in zones.values()}))
            raise MetricError(f"powercap zone {missing[0]!r} not under {root} (zones: {have})")
        return sorted(chosen)
    top = [z for z in zones if _TOP_LEVEL.fullmatch(z)]
    packages = [z for z in top if zones[z][0].startswith("package")]
    return sorted(packages or top)


def energy_uj(readings: list[Zones], chosen: list[str]) -> int:
    """Energy over consecutive readings of the chosen zones, each step wrap-corrected."""
    total = 0
    for before, after in zip(readings, readings[1:]):
        for z in chosen:
            if z not in before or z not in after:
                raise MetricError(f"powercap zone {z} disappeared between readings")
            total += energy_delta_uj(before[z][1], after[z][1], after[z][2])
    return total


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


async def _sample(sample: SampleSpec, m: MetricSpec, side: Executor, cwd: str | None) -> float:
    """One reading of a ``sample``: its command's stdout or its file, parsed."""
    if sample.file is not None:
        try:
            data = await side.read_file(sample.file, cwd)
        except OSError as err:
            raise MetricError(f"sample file {sample.file}: {err.strerror or err}") from None
        return parse(m, data.decode("utf-8", errors="replace"), f"sample file {sample.file}")
    command = str(sample.command)
    result = await side.run(command, CommandOptions(timeout=sample.timeout, cwd=cwd))
    if result.status != "ok":
        raise MetricError(f"sample command {command!r} {result.status}: {result.reason}")
    text = result.stdout.decode("utf-8", errors="replace")
    return parse(m, text, f"sample {command!r}", result.stdout_cut)


async def _powercap(m: MetricSpec, side: Executor) -> Zones:
    result = await side.run(powercap_script(m.powercap_root), CommandOptions(timeout=READ_TIMEOUT))
    if result.status != "ok":
        raise MetricError(f"reading powercap under {m.powercap_root}: {result.reason}")
    return parse_powercap(result.stdout.decode("utf-8", errors="replace"))


async def start_sampler(m: MetricSpec, side: Executor, cwd: str | None) -> Sampler[Any]:
    """A started sampler for a ``sample`` or ``powercap`` metric on ``side``
    (:class:`MetricUnavailable` when the machine has no powercap zone)."""
    sample = m.sample
    if sample is not None:

        async def read_sample() -> float:
            return await _sample(sample, m, side, cwd)

        def combine(values: list[float], _: float) -> float:
            return aggregate(values, sample.aggregate)

        sampled = Sampler(read_sample, sample.interval, combine)
        await sampled.begin()
        return sampled
    chosen: list[str] = []

    async def read_zones() -> Zones:
        return await _powercap(m, side)

    def energy(readings: list[Zones], elapsed: float) -> float:
        joules = energy_uj(readings, chosen) / 1e6
        if m.powercap == "joules":
            return joules
        if elapsed <= 0:
            raise MetricError("powercap: no time between the first and last reading")
        return joules / elapsed

    counted = Sampler(read_zones, POWERCAP_INTERVAL, energy)
    await counted.begin()
    try:
        chosen += choose_zones(counted.readings[0], m.powercap_zones, m.powercap_root)
    except (MetricUnavailable, MetricError):
        await counted.cancel()
        raise
    return counted
