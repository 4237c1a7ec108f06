"""Which trials were unhealthy, and the trials without them (pure: a long-format frame in,
frames out, with what was set aside and why): what ``analyze --healthy-only`` and a
report's health column read.

A trial is *flagged* when one of its health metrics (:mod:`washout.data.health`, measured
around it) passes a limit of :class:`HealthLimits`. The defaults are the peers': any
thermal throttle event of the trial's CPUs and any page swapped in or out (BenchExec
warns of a run during which either counter increased: benchexec/systeminfo.py,
``CPUThrottleCheck.has_throttled``, ``SwapCheck.has_swapped``), any new kernel log record
(Krun marks an execution during which a new dmesg line appeared as errored: Barrett et
al., "Virtual Machine Warmup Blows Hot and Cold", OOPSLA 2017), and other processes
using more than a tenth of a CPU on the trial's CPUs over the trial (the limit of
``washout check``'s ``busy`` item). Context switches, migrations, APERF/MPERF and the
frequency are recorded and shown but judged only with a limit given (Krun's APERF/MPERF
bounds are the user's configuration, not a default).

Only ok trials are judged (the analyses use no other); a trial is one (worker, run,
position, test) of status ok, which the failure policy makes unique. A trial without any
health metric (health off, or a store from before it) is counted as unmeasured, never
flagged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from washout.data.health import (
    APERF_MPERF,
    HEALTH_PREFIX,
    INVOLUNTARY_SWITCHES,
    KERNEL_LOG,
    MIGRATIONS,
    OTHER_CPU,
    SWAP_IN,
    SWAP_OUT,
    THROTTLES,
)
from washout.stats.trials import require_columns

if TYPE_CHECKING:
    import pandas as pd

TRIAL = ("worker", "run", "position", "test")
"""The columns that name one trial among the ok ones."""
TICK_FLOOR = 0.02
"""Seconds of other processes' CPU time below which no trial is flagged for it, however
short: ``/proc/stat`` counts whole clock ticks of 10 ms (USER_HZ 100), so a reading
before and one after may each be off by one (``washout.harness.metrics.health``)."""


@dataclass(frozen=True)
class HealthLimits:
    """When a trial is unhealthy: a count above its limit, a share above its limit, a
    ratio outside its bounds; None leaves that measure unjudged."""

    throttles: float | None = 0
    """Thermal throttle events of the trial's CPUs (BenchExec: any)."""
    swapped: float | None = 0
    """Pages swapped in plus out (BenchExec: any)."""
    kernel_log: float | None = 0
    """New kernel log records (Krun: any)."""
    other_cpu: float | None = 0.10
    """Other processes' CPU seconds per second of the trial, in CPUs (washout check's
    ``busy``: a tenth of one CPU); never below :data:`TICK_FLOOR` seconds."""
    involuntary_switches: float | None = None
    migrations: float | None = None
    aperf_mperf: tuple[float, float] | None = None
    """Lowest and highest APERF/MPERF (Krun's ``AMPERF_RATIO_BOUNDS``; its tests use
    0.93 and 1.03)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FlaggedTrial:
    """One trial set aside: where it ran and why (each reason names the measure, its value
    and the limit it passed)."""

    worker: str
    run: int
    position: int
    test: str
    causes: tuple[str, ...]
    """What each reason is, in one word (``throttled``, ``swapped``, ``kernel-log``,
    ``busy``, ``switched``, ``migrated``, ``clocked``), in the reasons' order."""
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Stratum:
    """One test's metric over its ok trials, the healthy ones against the unhealthy ones
    (pooled over workers): how many of each, their medians, and the unhealthy median's
    shift from the healthy one in % (None where either side has no value)."""

    test: str
    metric: str
    healthy: int
    unhealthy: int
    median_healthy: float | None
    median_unhealthy: float | None
    shift_pct: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HealthJudgement:
    """Which ok trials were unhealthy and why (``unhealthy``), of how many with health
    measures (``judged``; ``unmeasured`` had none and are never judged), by which
    ``limits``, and each affected test's metrics healthy against unhealthy (``strata``)."""

    unhealthy: tuple[FlaggedTrial, ...]
    judged: int
    unmeasured: int
    limits: HealthLimits = field(default_factory=HealthLimits)
    strata: tuple[Stratum, ...] = ()

    def causes(self) -> dict[str, int]:
        """How many unhealthy trials each cause flagged, the most frequent first."""
        counts = Counter(cause for t in self.unhealthy for cause in t.causes)
        return dict(counts.most_common())

    def to_dict(self) -> dict[str, Any]:
        return {
            "unhealthy": [t.to_dict() for t in self.unhealthy],
            "judged": self.judged,
            "unmeasured": self.unmeasured,
            "limits": self.limits.to_dict(),
            "strata": [s.to_dict() for s in self.strata],
        }


@dataclass(frozen=True)
class HealthSplit:
    """A frame split by its trials' health: ``healthy`` (every row of the trials not
    flagged, failed trials' rows as they were), ``flagged`` (the rows of the unhealthy
    trials), both without the health rows; ``judgement`` says which trials and why."""

    healthy: pd.DataFrame
    flagged: pd.DataFrame
    judgement: HealthJudgement


def _reasons(
    row: dict[str, float], seconds: float | None, limits: HealthLimits
) -> list[tuple[str, str]]:
    """Why one trial (its health values by metric, its duration) is unhealthy: each
    cause in a word, and in words."""

    def value(name: str) -> float | None:
        v = row.get(name)
        return None if v is None or v != v else float(v)  # NaN: not measured

    reasons: list[tuple[str, str]] = []
    counts = (
        ("throttled", limits.throttles, value(THROTTLES), "thermal throttle event(s)"),
        ("kernel-log", limits.kernel_log, value(KERNEL_LOG), "new kernel log record(s)"),
        (
            "switched",
            limits.involuntary_switches,
            value(INVOLUNTARY_SWITCHES),
            "involuntary context switch(es)",
        ),
        ("migrated", limits.migrations, value(MIGRATIONS), "CPU migration(s)"),
    )
    for kind, limit, got, what in counts:
        if limit is not None and got is not None and got > limit:
            reasons.append((kind, f"{kind} {got:g} {what} (limit {limit:g})"))
    swap_in, swap_out = value(SWAP_IN), value(SWAP_OUT)
    if limits.swapped is not None and (swap_in is not None or swap_out is not None):
        pages = (swap_in or 0.0) + (swap_out or 0.0)
        if pages > limits.swapped:
            reasons.append(
                ("swapped", f"swapped {pages:g} page(s) in or out (limit {limits.swapped:g})")
            )
    other = value(OTHER_CPU)
    if limits.other_cpu is not None and other is not None and seconds and seconds > 0:
        if other > max(limits.other_cpu * seconds, TICK_FLOOR):
            reasons.append(
                (
                    "busy",
                    f"busy: other processes used {other / seconds:.2f} CPU over the trial "
                    f"({other:.3g} s; limit {limits.other_cpu:g})",
                )
            )
    ratio = value(APERF_MPERF)
    if limits.aperf_mperf is not None and ratio is not None:
        low, high = limits.aperf_mperf
        if not low <= ratio <= high:
            reasons.append(
                ("clocked", f"clocked APERF/MPERF {ratio:.3f} (bounds {low:g}-{high:g})")
            )
    return reasons


def has_health(frame: pd.DataFrame) -> bool:
    """Whether a long-format frame holds any health measure."""
    from washout.data.longformat import present

    if "metric" not in frame.columns:
        return False
    return any(str(name).startswith(HEALTH_PREFIX) for name in present(frame["metric"]))


def _seconds(rows: pd.DataFrame) -> pd.Series:
    """Each row's trial duration from its ``started`` and ``ended`` stamps (NaN where
    either is missing)."""
    import pandas as pd

    started = pd.to_datetime(rows["started"], utc=True, errors="coerce", format="ISO8601")
    ended = pd.to_datetime(rows["ended"], utc=True, errors="coerce", format="ISO8601")
    return (ended - started).dt.total_seconds()


def split_by_health(frame: pd.DataFrame, limits: HealthLimits | None = None) -> HealthSplit:
    """Split a long-format frame that holds its trials' health rows (a store's with
    ``resources=True``, as export writes it and ``washout.load`` gives it) into its
    healthy and its flagged trials, by ``limits`` (module docstring). Other processes'
    CPU share needs the trials' ``started`` and ``ended``; without them it is not judged."""
    import numpy as np

    limits = limits or HealthLimits()
    require_columns(frame, ("run", "position", "test", "metric", "value", "status"), "health")
    frame = frame if "worker" in frame.columns else frame.assign(worker="local")
    is_health = frame["metric"].astype(str).str.startswith(HEALTH_PREFIX).to_numpy()
    measures, rest = frame.loc[is_health], frame.loc[~is_health]
    ok_status = (measures["status"].astype(str) == "ok").to_numpy()
    ok = measures.loc[ok_status & measures["value"].notna().to_numpy()]
    ok_keys = trial_keys(ok)
    values: dict[tuple[str, int, int, str], dict[str, float]] = {}
    for key, metric, value in zip(ok_keys, _texts(ok["metric"]), ok["value"].tolist()):
        values.setdefault(key, {})[metric] = float(value)
    seconds: dict[tuple[str, int, int, str], float] = {}
    if {"started", "ended"} <= set(ok.columns):
        seconds = dict(zip(ok_keys, _seconds(ok)))
    unhealthy = tuple(
        FlaggedTrial(*key, causes=tuple(c for c, _ in found), reasons=tuple(r for _, r in found))
        for key, row in sorted(values.items())
        if (found := _reasons(row, seconds.get(key), limits))
    )
    rest_ok = (rest["status"].astype(str) == "ok").to_numpy()
    if not values:  # nothing measured (health off, an older store): nothing to look up
        unmeasured = len(rest.loc[rest_ok, [*TRIAL]].drop_duplicates())
        judgement = HealthJudgement((), 0, unmeasured, limits)
        return HealthSplit(rest.reset_index(drop=True), rest.iloc[:0], judgement)
    flagged = {(t.worker, t.run, t.position, t.test) for t in unhealthy}
    rest_keys = trial_keys(rest)
    is_flagged = np.array([k in flagged for k in rest_keys], dtype=bool) & rest_ok
    ok_trials = {k for k, good in zip(rest_keys, rest_ok) if good}
    healthy = rest.loc[~is_flagged].reset_index(drop=True)
    sick = rest.loc[is_flagged].reset_index(drop=True)
    judgement = HealthJudgement(
        unhealthy=unhealthy,
        judged=len(ok_trials & values.keys()),
        unmeasured=len(ok_trials - values.keys()),
        limits=limits,
        strata=_strata(healthy, sick),
    )
    return HealthSplit(healthy, sick, judgement)


def _strata(healthy: pd.DataFrame, unhealthy: pd.DataFrame) -> tuple[Stratum, ...]:
    """Each metric of each test with an unhealthy trial (the tests' own metrics, not the
    resource metrics), its ok values healthy against unhealthy."""
    import numpy as np

    from washout.stats.trials import without_resource_metrics

    def medians(rows: pd.DataFrame) -> dict[tuple[str, str], tuple[int, float | None]]:
        rows = without_resource_metrics(rows)
        rows = rows.loc[(rows["status"].astype(str) == "ok").to_numpy() & rows["value"].notna()]
        grouped = rows.groupby([rows["test"].astype(str), rows["metric"].astype(str)])["value"]
        return {(str(t), str(m)): (int(v.size), float(np.median(v))) for (t, m), v in grouped}

    sick, well = medians(unhealthy), medians(healthy)
    strata = []
    for key in sorted(sick):
        n_sick, m_sick = sick[key]
        n_well, m_well = well.get(key, (0, None))
        shift = None
        if m_well is not None and m_sick is not None and m_well != 0:
            shift = (m_sick / m_well - 1) * 100
        strata.append(Stratum(*key, n_well, n_sick, m_well, m_sick, shift))
    return tuple(strata)


def trial_keys(rows: pd.DataFrame) -> list[tuple[str, int, int, str]]:
    """Each row's trial (:data:`TRIAL`), as plain values (columns turned into lists at
    once: iterating a pandas column element by element was most of the quick form's
    summary per trial)."""
    return list(
        zip(
            _texts(rows["worker"]),
            rows["run"].astype(int).tolist(),
            rows["position"].astype(int).tolist(),
            _texts(rows["test"]),
        )
    )


def _texts(column: pd.Series) -> list[str]:
    """A column's values as ``str``, as ``astype(str)`` gives them, without converting the
    column (a categorical's categories are converted, not each row)."""
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        names = [str(c) for c in column.cat.categories.tolist()]
        return [names[code] if code >= 0 else "nan" for code in column.cat.codes.tolist()]
    return [str(v) for v in column.tolist()]
