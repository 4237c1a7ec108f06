"""The health metrics' names (``health.*``, measured around every trial by
:mod:`washout.harness.metrics.health`), and how the counters read around a trial become
them: the one parser of ``/proc/stat`` and ``/proc/vmstat`` lines, for the readings taken in
washout's own process and those a launcher's batch records raw
(:mod:`washout.data.store.batch`). A store's long format has their rows where it has the
resource metrics' (``resources=True``: export, ``washout.load``, a report), one per measure
taken; the analyses leave both out unless a user names one
(:func:`washout.stats.trials.without_resource_metrics`).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable
from dataclasses import dataclass

HEALTH_PREFIX = "health."
INVOLUNTARY_SWITCHES = "health.involuntary_switches"
MIGRATIONS = "health.migrations"
OTHER_CPU = "health.other_cpu"
THROTTLES = "health.throttles"
SWAP_IN = "health.swap_in"
SWAP_OUT = "health.swap_out"
KERNEL_LOG = "health.kernel_log"
APERF_MPERF = "health.aperf_mperf"
CPUFREQ_MHZ = "health.cpufreq_mhz"
HEALTH_METRICS: tuple[str, ...] = (
    INVOLUNTARY_SWITCHES,
    MIGRATIONS,
    OTHER_CPU,
    THROTTLES,
    SWAP_IN,
    SWAP_OUT,
    KERNEL_LOG,
    APERF_MPERF,
    CPUFREQ_MHZ,
)
"""Every health metric, in the order they are listed to users."""


BUSY_FIELDS = (0, 1, 2, 5, 6, 7)
"""The fields of a ``cpuN`` line of ``/proc/stat`` that count a CPU busy: user, nice,
system, irq, softirq, steal (proc(5); guest time is already in user and nice, idle and
iowait are not busy)."""


@dataclass(frozen=True)
class Reading:
    """One reading of the machine's counters, for the trial's CPUs; None where a counter
    could not be read."""

    busy: int | None = None
    """Clock ticks the CPUs spent busy since boot (:data:`BUSY_FIELDS`), summed."""
    throttles: int | None = None
    """Their thermal throttle counters, summed (core and package; a package's count is
    counted once per CPU of it among them)."""
    swap: tuple[int, int] | None = None
    """``pswpin`` and ``pswpout``."""
    cpufreq_khz: float | None = None
    """Their mean ``scaling_cur_freq``."""
    msr: tuple[int, int] | None = None
    """Their APERF and MPERF, summed."""
    kernel_log: int | None = None
    """Kernel log records since the previous reading."""


def _delta(before: int | None, after: int | None) -> float | None:
    """A counter's increase; None when either reading is missing or it went back (a
    counter reset, not a negative count)."""
    if before is None or after is None or after < before:
        return None
    return float(after - before)


def health_values(
    before: Reading, after: Reading, *, own_cpu: float | None, tick: float
) -> dict[str, float]:
    """The health metrics of a trial from the readings around it (pure): ``own_cpu`` is
    the trial's user plus system seconds (None: unknown, so other processes' time is
    too), ``tick`` the seconds of one ``/proc/stat`` clock tick."""
    values: dict[str, float] = {}
    busy = _delta(before.busy, after.busy)
    if busy is not None and own_cpu is not None:
        # /proc/stat counts whole ticks: a short trial's own time may exceed them
        values[OTHER_CPU] = max(0.0, busy * tick - own_cpu)
    throttles = _delta(before.throttles, after.throttles)
    if throttles is not None:
        values[THROTTLES] = throttles
    if before.swap is not None and after.swap is not None:
        for name, first, last in zip((SWAP_IN, SWAP_OUT), before.swap, after.swap):
            if (moved := _delta(first, last)) is not None:
                values[name] = moved
    if before.kernel_log is not None and after.kernel_log is not None:
        values[KERNEL_LOG] = float(after.kernel_log)
    if before.msr is not None and after.msr is not None:
        aperf, mperf = _delta(before.msr[0], after.msr[0]), _delta(before.msr[1], after.msr[1])
        if aperf is not None and mperf:
            values[APERF_MPERF] = aperf / mperf
    if before.cpufreq_khz is not None and after.cpufreq_khz is not None:
        values[CPUFREQ_MHZ] = (before.cpufreq_khz + after.cpufreq_khz) / 2000.0
    return values


def busy_ticks(text: bytes, cpus: set[int]) -> int | None:
    """The busy ticks of ``cpus`` summed from ``/proc/stat``; None if one of them has no
    line there."""
    return busy_in(text, stat_needles(cpus))


def stat_needles(cpus: Iterable[int]) -> tuple[bytes, ...]:
    """How each CPU's line of ``/proc/stat`` starts, with the newline before it."""
    return tuple(b"\ncpu%d " % cpu for cpu in sorted(cpus))


_BUSY = operator.itemgetter(*(i + 1 for i in BUSY_FIELDS))
"""A split ``cpuN`` line's busy fields (field 0 is its name)."""


def busy_in(text: bytes, needles: tuple[bytes, ...]) -> int | None:
    """:func:`busy_ticks` of the CPUs whose lines start with ``needles`` (after their
    newline), each line found by its name, not by splitting the whole file."""
    total = 0
    for needle in needles:
        at = text.find(needle) + 1
        if not at and not text.startswith(needle[1:]):  # a CPU without a line
            return None
        end = text.find(b"\n", at)
        ticks = line_busy(text[at : end if end >= 0 else len(text)])
        if ticks is None:
            return None
        total += ticks
    return total


@functools.lru_cache(maxsize=1024)
def line_busy(line: bytes) -> int | None:
    """The busy ticks of one ``cpuN`` line (None: not numbers). Cached: a CPU's line moves
    once per clock tick (10 ms), so the readings around a short trial mostly find the
    line they parsed before, and six ``int`` of bytes were a third of a reading (the
    size holds every line of a 1024-CPU machine)."""
    fields = line.split()
    try:
        try:
            return sum(map(int, _BUSY(fields)))
        except IndexError:  # a kernel older than steal time (2.6.11): what it has
            return sum(int(fields[i + 1]) for i in BUSY_FIELDS if i + 1 < len(fields))
    except ValueError:
        return None


def swap_pages(text: bytes) -> tuple[int, int] | None:
    """``pswpin`` and ``pswpout`` of ``/proc/vmstat`` (None without them)."""
    found = []
    for key in (b"pswpin ", b"pswpout "):
        at = text.find(b"\n" + key) + 1 or (0 if text.startswith(key) else -1)
        if at < 0:
            return None
        end = text.find(b"\n", at)
        value = text[at + len(key) : end if end >= 0 else len(text)].strip()
        if not value.isdigit():
            return None
        found.append(int(value))
    return found[0], found[1]


def pair(first: int | None, second: int | None) -> tuple[int, int] | None:
    return None if first is None or second is None else (first, second)


def counter(text: bytes) -> int | None:
    """The number a small counter file holds (None: not a number)."""
    text = text.strip()
    return int(text) if text.isdigit() else None


def reading_of(
    busy: int | None,
    throttles: list[int | None],
    freqs: list[int | None],
    aperf: list[int | None],
    mperf: list[int | None],
    swap: tuple[int, int] | None,
    kernel_log: int | None,
) -> Reading:
    """A reading of the trial's CPUs from their counters' values (None: unreadable):
    their throttle counters summed over those that could be read, their frequency the mean
    and their APERF and MPERF the sums where every CPU gave one (none given: absent). The
    one assembly of a reading, whether washout read the files or a launcher's batch did."""
    read = [n for n in throttles if n is not None]
    freq = total_of(freqs)
    return Reading(
        busy=busy,
        throttles=sum(read) if read else None,
        swap=swap,
        cpufreq_khz=None if freq is None else freq / len(freqs),
        msr=pair(total_of(aperf), total_of(mperf)),
        kernel_log=kernel_log,
    )


def total_of(values: list[int | None]) -> int | None:
    """The sum of every CPU's value; None when one is missing (or there is none)."""
    if not values or None in values:
        return None
    return sum(v for v in values if v is not None)
