"""Simulated experiments in the long format, with effects injected where we choose.

Used by the tests of carryover, drift, claims and planning: the truth is known, so the
statistics can be checked for finding it (power) and for not finding what is not there
(family-wise false positives).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from washout.data.longformat import COLUMNS

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def simulate(
    *,
    tests: Sequence[str] = ("a", "b", "c", "d", "e"),
    runs: int = 20,
    means: Mapping[str, float] | None = None,
    cv: float = 0.02,
    carryover: Mapping[tuple[str, str], float] | None = None,
    carryover2: Mapping[tuple[str, str], float] | None = None,
    drift_per_position: Mapping[str, float] | None = None,
    random_factor: Mapping[str, float] | None = None,
    first_after_reset: float = 1.0,
    run_cv: float = 0.0,
    machine_ar1: tuple[float, float] | None = None,
    lognormal: float = 0.0,
    integer: bool = False,
    failed: float = 0.0,
    short_runs: float = 0.0,
    workers: Sequence[str] = ("local",),
    metrics: Sequence[str] = ("wall",),
    orders: Sequence[str] = ("fixed", "random"),
    seed: int = 0,
) -> pd.DataFrame:
    """A long-format frame: per worker, ``runs`` runs of each order kind, interleaved
    (F R F R ...), random runs fresh permutations, every trial ok unless ``failed``.

    value = mean[test] * (1 + cv * N(0, 1)) * carryover[(test, predecessor)]
            * carryover2[(test, the test two positions earlier)]
            * (1 + drift[test] * position) * random_factor[test] (random runs only)
            * first_after_reset (position 0 only) * (1 + run_cv * N(0, 1)) (one draw per run,
            shared by every trial of the run: run-to-run level differences)
            * exp(machine[k]) (k the trial's place in its worker's sequence of trials).

    ``machine_ar1`` = (phi, sd): a machine state that wanders without a trend, the log-level
    machine[k] = phi * machine[k - 1] + sd * sqrt(1 - phi^2) * N(0, 1), an AR(1) over the
    worker's trials in the order they ran, across the whole experiment, started from its
    stationary law N(0, sd^2) (so every trial's log-level has sd ``sd`` and neighbours
    correlation phi; every metric of a trial shares it). It is drawn from its own stream, so
    the other draws of a seed are the same with and without it.

    ``lognormal`` > 0: heavy-tailed trial noise, exp(lognormal * N(0, 1)) in place of
    (1 + cv * N(0, 1)) (the same draw). ``integer``: values rounded to whole numbers, so a
    metric of a few distinct values has many ties. ``failed``: the share of trials that fail
    (status ``failed``, no value; they still ran, so they still precede the next trial).
    ``short_runs``: the share of runs cut short (an interrupted run that was not re-run, as
    imported data can have): the run stops after a uniformly drawn 1 to len(tests) - 1
    trials, the rest never ran. Each of these draws from its own stream too.
    Trials start 10 s apart inside a run; runs start 1000 s apart.
    """
    rng = np.random.default_rng(seed)
    means = means or {t: 100.0 + 10 * i for i, t in enumerate(tests)}
    carryover = carryover or {}
    carryover2 = carryover2 or {}
    drift = drift_per_position or {}
    factor = random_factor or {}
    machine = _machine_state(machine_ar1, len(workers), runs * len(orders) * len(tests), seed)
    fails = np.random.default_rng([seed, 2])
    cuts = np.random.default_rng([seed, 3])
    rows = []
    for w, worker in enumerate(workers):
        for run in range(runs * len(orders)):
            order = orders[run % len(orders)]
            if order == "fixed":
                perm = list(tests)
            elif order == "reverse":
                perm = list(reversed(tests))
            else:
                perm = [tests[i] for i in rng.permutation(len(tests))]
            run_level = 1 + run_cv * rng.standard_normal() if run_cv else 1.0
            if short_runs and cuts.random() < short_runs:
                perm = perm[: cuts.integers(1, len(perm))] if len(perm) > 1 else perm
            for pos, test in enumerate(perm):
                pred = perm[pos - 1] if pos else "(reset)"
                pred2 = perm[pos - 2] if pos > 1 else "(reset)"
                started = EPOCH + timedelta(seconds=1000 * run + 10 * pos)
                trial = run * len(tests) + pos
                state = 1.0 if machine is None else float(np.exp(machine[w, trial]))
                for metric in metrics:
                    noise = rng.standard_normal()
                    spread = np.exp(lognormal * noise) if lognormal else 1 + cv * noise
                    value = means[test] * spread
                    value *= carryover.get((test, pred), 1.0)
                    value *= carryover2.get((test, pred2), 1.0)
                    value *= 1 + drift.get(test, 0.0) * pos
                    value *= run_level * (first_after_reset if pos == 0 else 1.0) * state
                    if order == "random":
                        value *= factor.get(test, 1.0)
                    value = float(round(value)) if integer else value
                    ok = not (failed and fails.random() < failed)
                    rows.append(
                        (
                            run,
                            order,
                            pos,
                            test,
                            metric,
                            value if ok else float("nan"),
                            "ok" if ok else "failed",
                            worker,
                            started.isoformat(),
                            (started + timedelta(seconds=5)).isoformat(),
                        )
                    )
    return pd.DataFrame(
        rows,
        columns=list(COLUMNS),
    )


def with_context(
    frame: pd.DataFrame,
    *,
    levels: Sequence[int],
    context_effect: Callable[[str, int], float] | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """``frame`` (from :func:`simulate`) with a ``context_env_bytes`` column: each test's
    trials, run by run, take the environment paddings ``levels`` in turn, in a fresh seeded
    random order every ``len(levels)`` trials (each level equally often, its order
    random); every metric of a trial is multiplied by ``context_effect(test, env_bytes)``.
    The context is drawn apart from everything else, as the experiment would draw it."""
    rng = np.random.default_rng(seed)
    out = frame.copy()
    trials = out.drop_duplicates(["worker", "run", "test"]).sort_values(["worker", "run"])
    padding = {}
    for (worker, test), runs in trials.groupby(["worker", "test"], sort=True)["run"]:
        cycles = -(-len(runs) // len(levels))
        drawn = np.concatenate([rng.permutation(levels) for _ in range(cycles)])
        padding.update({(worker, test, run): int(p) for run, p in zip(runs, drawn)})
    keys = zip(out["worker"], out["test"], out["run"])
    out["context_env_bytes"] = [padding[key] for key in keys]
    if context_effect is not None:
        factor = [context_effect(t, p) for t, p in zip(out["test"], out["context_env_bytes"])]
        out["value"] = out["value"] * np.asarray(factor, dtype=float)
    return out


def _machine_state(
    ar1: tuple[float, float] | None, workers: int, trials: int, seed: int
) -> np.ndarray | None:
    """The stationary AR(1) log-levels of ``simulate``'s ``machine_ar1``: one row per worker
    (each machine wanders on its own), ``trials`` in the order they ran; None without it."""
    if ar1 is None:
        return None
    phi, sd = ar1
    if not (-1.0 < phi < 1.0 and sd >= 0.0):
        raise ValueError(f"machine_ar1 needs -1 < phi < 1 and sd >= 0, got {ar1}")
    rng = np.random.default_rng([seed, 1])
    shocks = rng.standard_normal((workers, trials))
    level = np.empty((workers, trials))
    level[:, 0] = sd * shocks[:, 0]
    for k in range(1, trials):
        level[:, k] = phi * level[:, k - 1] + sd * np.sqrt(1.0 - phi * phi) * shocks[:, k]
    return level
