"""Energy gross and net of the machine at rest, with intervals, and the energy readings too
short to trust (pure: long-format frames in, results out).

With ``[experiment] idle = true`` every test ``T`` with a powercap metric has an idle arm
``idle:T`` (:mod:`washout.harness.idle`): trials of ``sleep`` as long as ``T``'s median
trial, through the same readings, interleaved with the others. ``T``'s energy per trial
is then reported gross (its mean) and net of the machine at rest (its mean less the idle
arm's), each with a confidence interval. The mean, not the median: energies add up, so
the mean per trial is what a total over many trials divides into. A value that was not
measured (no RAPL, or ``energy_uj`` readable by root only) is "not available", never
estimated (codecarbon, for one, falls back to an estimate from the TDP in a VM).

RAPL's counter moves about every millisecond and carries no time stamp: a reading over a
trial shorter than about 50 ms has a large relative error, and one under a millisecond
may not see the counter move at all (:func:`short_energy_trials`).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from washout.stats.trials import require_columns

if TYPE_CHECKING:
    import pandas as pd

IDLE_PREFIX = "idle:"
"""An idle arm's test name is its test's with this before it (washout.harness.idle)."""
RAPL_UPDATE = 0.001
"""Seconds between two updates of a RAPL energy counter: about 1 ms, with no time stamp of
its own (Hahnel et al., "Measuring Energy Consumption for Short Code Paths Using RAPL",
SIGMETRICS PER 40(3), 2012; Khan et al., "RAPL in Action", ACM TOMPECS 3(2), 2018)."""
RAPL_RELIABLE = 0.05
"""Seconds of sampling below which a RAPL reading's relative error is large: a reading is
off by up to one update at each end, and updates are not evenly spaced (Khan et al.
2018), so under about 50 ms those errors are a sizeable part of the whole."""


@dataclass(frozen=True)
class NetEnergy:
    """One test's energy metric on one worker: gross (its trials' mean, with a t interval),
    the idle arm's mean, and net (their difference, with Welch's interval); ``reason``
    says why a figure is not available (then it is None, never estimated)."""

    worker: str
    test: str
    metric: str
    n: int
    n_idle: int
    gross: float | None
    gross_low: float | None
    gross_high: float | None
    idle: float | None
    net: float | None
    net_low: float | None
    net_high: float | None
    confidence: float
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _t_interval(values: list[float], confidence: float) -> tuple[float, float]:
    """The t interval of a mean (Student 1908): mean +- t(1 - a/2, n - 1) s / sqrt(n);
    NaN bounds for a single value."""
    from scipy import stats

    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return math.nan, math.nan
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def welch_interval(a: list[float], b: list[float], confidence: float) -> tuple[float, float]:
    """The confidence interval of mean(a) - mean(b) without assuming equal variances
    (Welch 1947, "The generalization of 'Student's' problem when several different
    population variances are involved", Biometrika 34: 28-35): the difference +- t(1 - a/2,
    nu) sqrt(s_a^2/n_a + s_b^2/n_b), with Welch-Satterthwaite's degrees of freedom nu =
    (s_a^2/n_a + s_b^2/n_b)^2 / ((s_a^2/n_a)^2/(n_a - 1) + (s_b^2/n_b)^2/(n_b - 1))
    (Satterthwaite 1946). NaN bounds with fewer than two values on a side; the difference
    itself when both sides are constant."""
    from scipy import stats

    na, nb = len(a), len(b)
    diff = math.fsum(a) / na - math.fsum(b) / nb
    if na < 2 or nb < 2:
        return math.nan, math.nan
    ma, mb = math.fsum(a) / na, math.fsum(b) / nb
    va = math.fsum((v - ma) ** 2 for v in a) / (na - 1) / na
    vb = math.fsum((v - mb) ** 2 for v in b) / (nb - 1) / nb
    if va + vb == 0:
        return diff, diff
    nu = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    half = stats.t.ppf(0.5 + confidence / 2, nu) * math.sqrt(va + vb)
    return diff - half, diff + half


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _usable(frame: pd.DataFrame) -> pd.DataFrame:
    """The ok rows with a finite value, ``worker`` added where a frame has none."""
    import numpy as np
    import pandas as pd

    require_columns(frame, ("test", "metric", "value", "status"), "net energy")
    if "worker" not in frame.columns:
        frame = frame.assign(worker="local")
    value = pd.to_numeric(frame["value"], errors="coerce").to_numpy(dtype=float)
    keep = (frame["status"].astype(str) == "ok").to_numpy() & np.isfinite(value)
    return frame.loc[keep].assign(value=value[keep])


def net_energy(frame: pd.DataFrame, confidence: float = 0.95) -> tuple[NetEnergy, ...]:
    """Every energy metric of every test with an idle arm (the metrics of ``idle:T``), per
    worker: gross, idle and net means with their intervals (module docstring). Trials that
    were not ok or have no value do not count; a side with none makes the figures that
    need it "not available"."""
    usable = _usable(frame)
    values: dict[tuple[str, str, str], list[float]] = {}
    for worker, test, metric, value in zip(
        usable["worker"].astype(str),
        usable["test"].astype(str),
        usable["metric"].astype(str),
        usable["value"],
    ):
        values.setdefault((worker, test, metric), []).append(float(value))
    arms = {
        (str(test).removeprefix(IDLE_PREFIX), str(metric))
        for test, metric in zip(frame["test"].astype(str), frame["metric"].astype(str))
        if str(test).startswith(IDLE_PREFIX)
    }
    workers = sorted({str(w) for w in usable["worker"]} or {"local"})
    results = []
    for worker in workers:
        for test, metric in sorted(arms):
            gross = values.get((worker, test, metric), [])
            idle = values.get((worker, IDLE_PREFIX + test, metric), [])
            results.append(_net(worker, test, metric, gross, idle, confidence))
    return tuple(results)


def _net(
    worker: str, test: str, metric: str, gross: list[float], idle: list[float], confidence: float
) -> NetEnergy:
    missing = [
        f"{side} has no measured {metric}"
        for side, got in ((f"test {test!r}", gross), (f"its idle arm {IDLE_PREFIX + test!r}", idle))
        if not got
    ]
    reason = f"not available: {'; '.join(missing)}" if missing else ""
    g = math.fsum(gross) / len(gross) if gross else None
    i = math.fsum(idle) / len(idle) if idle else None
    g_low, g_high = _t_interval(gross, confidence) if gross else (math.nan, math.nan)
    n_low, n_high = welch_interval(gross, idle, confidence) if gross and idle else (math.nan,) * 2
    return NetEnergy(
        worker=worker,
        test=test,
        metric=metric,
        n=len(gross),
        n_idle=len(idle),
        gross=g,
        gross_low=_finite(g_low),
        gross_high=_finite(g_high),
        idle=i,
        net=None if g is None or i is None else g - i,
        net_low=_finite(n_low),
        net_high=_finite(n_high),
        confidence=confidence,
        reason=reason,
    )


def short_energy_note(test: str, seconds: float) -> str:
    """What ``run`` says, once per test, of a trial with an energy metric shorter than
    :data:`RAPL_RELIABLE`."""
    return (
        f"test {test!r}: a trial lasted {seconds * 1e3:.3g} ms, under the "
        f"{RAPL_RELIABLE * 1e3:g} ms RAPL needs for a small relative error (its counter "
        f"updates about every {RAPL_UPDATE * 1e3:g} ms): make each trial longer (repeat "
        "the work inside it) to measure its energy"
    )


def short_energy_trials(frame: pd.DataFrame, metrics: Collection[str]) -> tuple[str, ...]:
    """A warning per test and energy metric (``metrics``: the powercap metrics' names)
    whose ok trials lasted under :data:`RAPL_RELIABLE` (by their ``started`` and ``ended``):
    how many, and whether some were shorter than one counter update."""
    import pandas as pd

    require_columns(frame, ("test", "metric", "status", "started", "ended"), "energy warnings")
    rows = _usable(frame)
    rows = rows.loc[rows["metric"].astype(str).isin(list(metrics)).to_numpy()]
    started = pd.to_datetime(rows["started"], utc=True, errors="coerce", format="ISO8601")
    ended = pd.to_datetime(rows["ended"], utc=True, errors="coerce", format="ISO8601")
    seconds = (ended - started).dt.total_seconds()
    warnings = []
    for (test, metric), lasted in seconds.groupby(
        [rows["test"].astype(str), rows["metric"].astype(str)], sort=True
    ):
        short = lasted[lasted < RAPL_RELIABLE]
        if short.empty:
            continue
        line = (
            f"test {test!r} metric {metric!r}: {len(short)} of {len(lasted)} trial(s) lasted "
            f"under {RAPL_RELIABLE * 1e3:g} ms (median {lasted.median() * 1e3:.3g} ms): RAPL "
            f"updates its counter about every {RAPL_UPDATE * 1e3:g} ms, so their energy "
            "carries a large relative error"
        )
        tiny = int((lasted < RAPL_UPDATE).sum())
        if tiny:
            line += f"; {tiny} lasted under one update and may read no energy at all"
        warnings.append(line)
    return tuple(warnings)
