"""``perf = "EVENT"``: a hardware or software counter of the measured command from ``perf
stat`` (Linux perf).

The measured command runs under ``perf stat -x , -o FILE -e EVENT ...`` (one ``perf stat``
for every perf metric of the trial), which counts the chosen events over that command and
its children and writes them as CSV (perf-stat(1), "CSV FORMAT": counter value, unit,
event name, run time, percentage of run time measured, ...). An event the machine cannot
count (a VM without a virtual PMU) has the value ``<not supported>``, one that never ran
``<not counted>``: such a metric is reported as not available, never as 0. perf itself adds
a few milliseconds to the measured command's wall time (its start and the counters'
set-up), which ``bench/sampling_overhead.py`` measures.
"""

from __future__ import annotations

import shlex
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from washout.harness.executors.base import Executor
from washout.harness.fields import NonBlank, StrictModel
from washout.harness.metrics.base import MetricError, MetricUnavailable, Parser, Source, Trial

PERF = "perf"


class PerfKeys(StrictModel):
    perf: NonBlank | None = None
    """A ``perf stat -e`` event counted over the measured command (``instructions``...)."""


def perf_command(command: str, events: list[str], output: str) -> str:
    """``command`` under ``perf stat``, its counts written as CSV to ``output``; the
    command itself is one quoted argument of ``/bin/sh -c``, so it runs as written."""
    chosen = " ".join(f"-e {shlex.quote(event)}" for event in dict.fromkeys(events))
    return (
        f"{PERF} stat -x , -o {shlex.quote(output)} {chosen} -- /bin/sh -c {shlex.quote(command)}"
    )


def perf_values(text: str, events: list[str]) -> dict[str, float | str]:
    """Each event's count from ``perf stat -x ,`` output, or why it has none
    (``not supported``, ``not counted``). An event missing from the output is an error
    naming the events perf did report."""
    found: dict[str, float | str] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) < 3:
            continue
        value, event = fields[0].strip(), fields[2].strip()
        if value.startswith("<") and value.endswith(">"):
            found[event] = value.strip("<>")
            continue
        try:
            found[event] = float(value)
        except ValueError:
            found[event] = f"gave {value!r}, not a number"
    missing = [e for e in events if e not in found]
    if missing:
        shown = ", ".join(sorted(found)) or "none"
        raise MetricError(f"perf stat reported no event {missing[0]!r} (it reported: {shown})")
    return {e: found[e] for e in events}


@dataclass
class Counting:
    """The trial's one ``perf stat``: the events its perf metrics count, the file its
    counts go to on the test's worker, and the counts once read."""

    own: Executor
    events: list[str] = field(default_factory=list)
    output: str = field(default_factory=lambda: f"/tmp/washout-perf-{uuid.uuid4().hex}.csv")
    counts: dict[str, float | str] | None = None

    def wrap(self, command: str) -> str:
        return perf_command(command, self.events, self.output)

    async def remove(self) -> None:
        try:
            await self.own.remove_file(self.output)
        except OSError:
            pass

    async def read(self) -> dict[str, float | str]:
        """Every event's count (read once), or MetricError saying why there are none."""
        if self.counts is None:
            try:
                text = (await self.own.read_file(self.output)).decode("utf-8", errors="replace")
            except OSError as err:
                raise MetricError(
                    f"perf stat wrote no counts ({err}): is perf installed on {self.own.name}?"
                ) from None
            try:
                self.counts = perf_values(text, self.events)
            except MetricError as err:
                raise MetricError(f"perf: {err}") from None
        return self.counts


@dataclass(frozen=True)
class Perf(Source):
    """The count of ``event`` over the measured command."""

    event: str
    key: ClassVar[str] = "perf"
    takes: ClassVar[frozenset[str]] = frozenset()
    conflict: ClassVar[str] = "perf is read by washout; it takes no other source"
    around: ClassVar[bool] = True
    elsewhere: ClassVar[str | None] = (
        "perf counts the measured command, which runs on the test's own role"
    )

    @classmethod
    def of(cls, keys: PerfKeys, parser: Parser) -> Perf:
        return cls(str(keys.perf))

    async def start(self, trial: Trial, side: Executor) -> None:
        counting = trial.shared.get("perf")
        if not isinstance(counting, Counting):
            counting = trial.shared["perf"] = Counting(trial.own)
            trial.wrappers.append(counting.wrap)
            trial.cleanups.append(counting.remove)
        counting.events.append(self.event)

    async def value(self, trial: Trial, side: Executor) -> float:
        counting = trial.shared["perf"]
        count = (await counting.read())[self.event]
        if isinstance(count, str):
            raise MetricUnavailable(f"perf event {self.event} {count}")
        return count
