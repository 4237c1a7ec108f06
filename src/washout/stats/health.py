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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
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
    import numpy as np
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


def _causes(
    measured: Callable[[str], np.ndarray], seconds: np.ndarray, limits: HealthLimits
) -> list[tuple[str, np.ndarray, Callable[[int], str]]]:
    """Each limit's judgement of every trial at once, in the order reasons are given: its
    cause in a word, which trials pass it, and the reason for trial ``i`` in words.
    ``measured(name)`` is a health metric's value per trial (NaN: not measured),
    ``seconds`` each trial's duration (NaN: not known)."""
    import numpy as np

    found: list[tuple[str, np.ndarray, Callable[[int], str]]] = []
    counts = (
        ("throttled", limits.throttles, THROTTLES, "thermal throttle event(s)"),
        ("kernel-log", limits.kernel_log, KERNEL_LOG, "new kernel log record(s)"),
        (
            "switched",
            limits.involuntary_switches,
            INVOLUNTARY_SWITCHES,
            "involuntary context switch(es)",
        ),
        ("migrated", limits.migrations, MIGRATIONS, "CPU migration(s)"),
    )
    for kind, limit, name, what in counts:
        if limit is not None:
            got = measured(name)
            # NaN (not measured) passes no limit
            found.append((kind, got > limit, partial(_count_reason, kind, got, what, limit)))
    if limits.swapped is not None:
        swap_in, swap_out = measured(SWAP_IN), measured(SWAP_OUT)
        pages = np.where(np.isnan(swap_in), 0.0, swap_in) + np.where(
            np.isnan(swap_out), 0.0, swap_out
        )
        either = ~(np.isnan(swap_in) & np.isnan(swap_out))
        swapped = limits.swapped
        found.append(
            (
                "swapped",
                either & (pages > swapped),
                lambda i: f"swapped {pages[i]:g} page(s) in or out (limit {swapped:g})",
            )
        )
    if limits.other_cpu is not None:
        other, share = measured(OTHER_CPU), limits.other_cpu
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            busy = (seconds > 0) & (other > np.maximum(share * seconds, TICK_FLOOR))
        found.append(
            (
                "busy",
                busy,
                lambda i: (
                    f"busy: other processes used {other[i] / seconds[i]:.2f} CPU over the trial "
                    f"({other[i]:.3g} s; limit {share:g})"
                ),
            )
        )
    if limits.aperf_mperf is not None:
        ratio, (low, high) = measured(APERF_MPERF), limits.aperf_mperf
        found.append(
            (
                "clocked",
                ~np.isnan(ratio) & ~((low <= ratio) & (ratio <= high)),
                lambda i: f"clocked APERF/MPERF {ratio[i]:.3f} (bounds {low:g}-{high:g})",
            )
        )
    return found


def _count_reason(kind: str, got: np.ndarray, what: str, limit: float, i: int) -> str:
    """A count's reason for trial ``i`` in words."""
    return f"{kind} {got[i]:g} {what} (limit {limit:g})"


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
    CPU share needs the trials' ``started`` and ``ended``; without them it is not judged.

    Judged column by column over every trial at once (a trial's health values in one row
    of a trials x measures array), the reasons put in words for the flagged trials only:
    a pass in Python per trial was most of the quick form's summary per trial."""
    import numpy as np

    limits = limits or HealthLimits()
    require_columns(frame, ("run", "position", "test", "metric", "value", "status"), "health")
    frame = frame if "worker" in frame.columns else frame.assign(worker="local")
    trials = TrialCodes.of(frame)
    is_health = _texts_where(frame["metric"], lambda name: name.startswith(HEALTH_PREFIX))
    status_ok = _texts_where(frame["status"], lambda status: status == "ok")
    is_ok = is_health & status_ok & frame["value"].notna().to_numpy()
    ok, rest = frame.loc[is_ok], frame.loc[~is_health]
    rest_ok = status_ok[~is_health]
    ok_codes, rest_codes = trials.codes[is_ok], trials.codes[~is_health]
    names, metric_codes = _text_ranks(ok["metric"])
    # each trial's last value of each measure, as a trials x measures array
    cells, last = _last_rows(ok_codes * len(names) + metric_codes)
    table = np.full((trials.count, len(names)), np.nan)
    table.flat[cells] = ok["value"].to_numpy(dtype=float)[last]
    columns = {str(name): table[:, j] for j, name in enumerate(names)}
    blank = np.full(trials.count, np.nan)
    seconds = blank
    if {"started", "ended"} <= set(ok.columns):  # each trial's from its last row
        timed, last = _last_rows(ok_codes)
        seconds = blank.copy()
        seconds[timed] = _seconds(ok.iloc[last]).to_numpy(dtype=float)
    causes = _causes(lambda name: columns.get(name, blank), seconds, limits)
    flagged = np.zeros(trials.count, dtype=bool)
    for _, passed, _ in causes:
        flagged |= passed
    unhealthy = tuple(
        FlaggedTrial(
            *trials.key(i),
            causes=tuple(kind for kind, passed, _ in causes if passed[i]),
            reasons=tuple(reason(i) for _, passed, reason in causes if passed[i]),
        )
        for i in np.flatnonzero(flagged).tolist()  # in the trials' order
    )
    measured = np.zeros(trials.count, dtype=bool)
    measured[ok_codes] = True
    ok_trials = np.zeros(trials.count, dtype=bool)
    ok_trials[rest_codes[rest_ok]] = True
    is_flagged = flagged[rest_codes] & rest_ok
    healthy = rest.loc[~is_flagged].reset_index(drop=True)
    sick = rest.loc[is_flagged].reset_index(drop=True)
    judgement = HealthJudgement(
        unhealthy=unhealthy,
        judged=int((ok_trials & measured).sum()),
        unmeasured=int((ok_trials & ~measured).sum()),
        limits=limits,
        strata=_strata(healthy, sick) if unhealthy else (),
    )
    return HealthSplit(healthy, sick, judgement)


def _last_rows(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each code found in ``codes`` and the position of its last row there (a value given
    twice counts once, the later one, as a dict filled row by row keeps it)."""
    import numpy as np

    found, first_from_end = np.unique(codes[::-1], return_index=True)
    return found, len(codes) - 1 - first_from_end


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


@dataclass(frozen=True)
class TrialCodes:
    """Which trial (:data:`TRIAL`) each row of a frame belongs to, as an integer: the
    trials numbered in order (worker and test as text, as ``astype(str)`` gives them, run
    and position as integers), so whole columns are judged at once and a trial's key is
    made only where one is shown."""

    codes: np.ndarray
    """Each row's trial, 0 .. count - 1."""
    levels: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    """Each trial's worker and test (as indexes into ``names``), run and position."""
    names: tuple[np.ndarray, np.ndarray]
    """The workers' and the tests' texts, in order."""

    @property
    def count(self) -> int:
        return len(self.levels[0])

    @classmethod
    def of(cls, rows: pd.DataFrame) -> TrialCodes:
        """The trials of ``rows`` (which have every column of :data:`TRIAL`)."""
        import numpy as np
        import pandas as pd

        workers, worker = _text_ranks(rows["worker"])
        tests, test = _text_ranks(rows["test"])
        columns = {
            "worker": worker,
            "run": rows["run"].to_numpy(dtype=np.int64),
            "position": rows["position"].to_numpy(dtype=np.int64),
            "test": test,
        }
        grouped = pd.DataFrame(columns).groupby(list(TRIAL), sort=True)
        index = grouped.size().index
        worker_of, run_of, position_of, test_of = (
            index.get_level_values(name).to_numpy(dtype=np.int64) for name in TRIAL
        )
        codes = grouped.ngroup().to_numpy(dtype=np.int64)
        return cls(codes, (worker_of, run_of, position_of, test_of), (workers, tests))

    def key(self, i: int) -> tuple[str, int, int, str]:
        """Trial ``i``'s worker, run, position and test."""
        worker, run, position, test = (int(level[i]) for level in self.levels)
        return str(self.names[0][worker]), run, position, str(self.names[1][test])


def flag_rows(rows: pd.DataFrame, unhealthy: tuple[FlaggedTrial, ...]) -> np.ndarray:
    """Which of ``rows`` (with every column of :data:`TRIAL`) belong to one of the
    ``unhealthy`` trials, row by row."""
    import numpy as np

    if not unhealthy or not len(rows):
        return np.zeros(len(rows), dtype=bool)
    trials = TrialCodes.of(rows)
    marked = {(t.worker, t.run, t.position, t.test) for t in unhealthy}
    hit = np.array([trials.key(i) in marked for i in range(trials.count)], dtype=bool)
    return hit[trials.codes]


def _texts_where(column: pd.Series, test: Callable[[str], bool]) -> np.ndarray:
    """Which rows' values, as text, pass ``test`` (each distinct value tested once)."""
    import numpy as np

    names, ranks = _text_ranks(column)
    return np.array([test(str(name)) for name in names], dtype=bool)[ranks]


def _text_ranks(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A column's distinct values as text (as ``astype(str)`` gives them), in order, and
    each row's as an index into them; a categorical's categories are converted, not each
    row."""
    import numpy as np
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        texts = np.array([str(c) for c in column.cat.categories.tolist()] + ["nan"], dtype=object)
        codes = column.cat.codes.to_numpy()
        row_texts = np.where(codes >= 0, codes, len(texts) - 1)
    else:
        row_texts, uniques = pd.factorize(column, use_na_sentinel=False)
        texts = np.array([str(v) for v in uniques.tolist()], dtype=object)
    names, inverse = np.unique(texts.astype(str), return_inverse=True)
    return names, inverse.reshape(-1)[row_texts]
