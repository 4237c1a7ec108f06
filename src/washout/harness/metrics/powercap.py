"""``powercap = "joules" | "watts"``: energy from Linux powercap (RAPL) over a trial.

The energy counters are read with shell builtins (one ``sh`` per reading, no other
process) just before the measured command, every :data:`POWERCAP_INTERVAL` while it runs
(so no wrap of a counter is missed) and just after; summed over the chosen zones with
wrap-around handled (:func:`energy_delta_uj`), and given as joules or as mean watts over
the readings' span.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import Field

from washout.harness.executors.base import CommandOptions, Executor
from washout.harness.fields import NonBlank, StrictModel
from washout.harness.metrics.base import (
    MetricError,
    MetricUnavailable,
    Parser,
    Reading,
    Source,
    Trial,
)
from washout.harness.metrics.sample import Sampler

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


class PowercapKeys(StrictModel):
    powercap: Literal["joules", "watts"] | None = None
    """Energy over the trial, in joules or as mean watts."""
    powercap_zones: list[NonBlank] = Field(default_factory=list)
    """Powercap zone names to sum (``package-0``, ``dram``...); default: every package."""
    powercap_root: NonBlank = "/sys/class/powercap"


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


def is_energy(metric: Any) -> bool:
    """Whether a metric (a spec's ``MetricSpec``) is read from powercap: an energy."""
    return isinstance(metric.source, Powercap)


@dataclass(frozen=True)
class Powercap(Source):
    """Joules or mean watts of the chosen zones under ``root`` on the metric's side."""

    unit: Literal["joules", "watts"]
    zones: list[str] = field(default_factory=list)
    root: str = "/sys/class/powercap"
    key: ClassVar[str] = "powercap"
    takes: ClassVar[frozenset[str]] = frozenset()
    conflict: ClassVar[str] = "powercap is read by washout; it takes no other source"
    around: ClassVar[bool] = True

    @classmethod
    def of(cls, keys: PowercapKeys, parser: Parser) -> Powercap:
        assert keys.powercap is not None
        return cls(keys.powercap, list(keys.powercap_zones), keys.powercap_root)

    async def start(self, trial: Trial, side: Executor) -> Reading:
        """A started sampler of the zones (MetricUnavailable where there are none)."""
        chosen: list[str] = []

        async def read_zones() -> Zones:
            script = powercap_script(self.root)
            result = await side.run(script, CommandOptions(timeout=READ_TIMEOUT))
            if result.status != "ok":
                raise MetricError(f"reading powercap under {self.root}: {result.reason}")
            return parse_powercap(result.stdout.decode("utf-8", errors="replace"))

        def energy(readings: list[Zones], elapsed: float) -> float:
            joules = energy_uj(readings, chosen) / 1e6
            if self.unit == "joules":
                return joules
            if elapsed <= 0:
                raise MetricError("powercap: no time between the first and last reading")
            return joules / elapsed

        sampler = Sampler(read_zones, POWERCAP_INTERVAL, energy)
        await sampler.begin()
        try:
            chosen += choose_zones(sampler.readings[0], self.zones, self.root)
        except (MetricUnavailable, MetricError):
            await sampler.cancel()
            raise
        return sampler
