"""Incremental sampling (Hui et al., SIGMOD 2024, §4; docs/sweep-method.md §3 and §10): measure a
start fraction of the settings, then repeat: split the measured settings 10 times into 80%
fitting and 20% validation, fit the model on each fitting part, score R^2 on its validation
part; stop when the threshold is met, else measure another batch chosen by the sampler.

Two methods (:data:`METHODS`), each a set of options; every option can be set on its own:
- ``ours`` (the default): coverage sampler, smooth model, settled rule, conclusions from the
  predicted space with sum-to-zero coding, and **adaptive batches**: start at 2%, add at least
  1% and at least a quarter of what is measured (``growth`` 1.25), the second batch at least
  :data:`HOLDOUT_MIN` settings (:func:`sample_sizes`), so a space a model can fit
  from 2-3% stops there and a hard one does not pay for many tiny iterations; its splits are
  **stratified folds** (:func:`validation_splits`): 5 folds of 20% stratified on the value,
  twice, so each setting is validated and each fold spans the range of the values.
- ``paper``: the paper's random sampler, ANOVA, rule, measured-settings conclusions and
  treatment coding, 5% then 5% steps. Sample sizes follow the paper's code exactly: at ratio r
  (np.linspace(start, 1, ...)), the sample holds n - ceil((1 - r) n) settings, and split i is
  scikit-learn's train_test_split(test_size=0.2, random_state=i) on the measured settings in
  the order the paper's sample file has them (newest batch first), so the random sampler with
  the ANOVA reproduces the paper's R^2 values.

Termination rules:
- ``paper``: every one of the splits has R^2 >= threshold (the paper's minimum over splits).
- ``holdout`` (ours): that, and the settings of the latest batches, each predicted by the model
  fitted on everything measured before it, have R^2 >= threshold. Each batch is a true
  holdout: chosen before it was measured and never used to fit the model that predicts it.
  Batches are pooled, newest first, until they hold at least :data:`HOLDOUT_MIN` settings, and
  there is no holdout R^2 until that many were predicted, so a small batch cannot pass by luck
  (nor can small validation splits, which is how the paper's rule passes wrongly on a
  handful of settings).
- ``stable`` (ours): ``holdout``, and the conclusions (important terms, points with their
  type and level) are the same as after the previous batch: we do not stop while the answer
  is still moving.
- ``settled`` (ours, the default): ``holdout``, and the shares of variance have settled: no
  share's estimate (uncertainty.py) moved by more than ``settle`` (or 5% of itself, if
  more) since the previous batch. R^2 says the model predicts; it does not say that the
  decomposition it implies has stopped changing: after R^2 was met, shares were still up to
  9 points from the full space's on spaces the project had not seen (issue 27). It does
  not catch a sample that misleads model and shares alike (bench/RESULTS.md, "Sweeps",
  part F: SS-O); the covering condition does.

Covering (part of ``settled``; ``cover``, 3 by default, 0 off; covering.py): no stop while
a cell of that strength over the kept terms' factors (all parameters before shares were
computed; with ``cover_top`` k, the k largest main effects') is empty, counting only cells a
uniform random sample of the measured size would expect at least ``cover_expect`` settings
in; and each batch's first settings go greedily to the cells the batch's size will count,
so the stop seldom waits.
SS-O seed 4 stopped at 29 settings with every fold's R^2 >= 0.92 and 0.25 on the rest: its
sample had every 2-way cell but left a 3-way one of 81 settings empty (part H).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from washout.errors import WashoutError, choose
from washout.sweep.anova import Term
from washout.sweep.conclusions import Conclusions, conclusions_of
from washout.sweep.covering import covering_picks, uncovered_cells
from washout.sweep.models import Predictor, additive_model, get_model
from washout.sweep.samplers import get_sampler
from washout.sweep.space import Space
from washout.sweep.uncertainty import HALVES, completed_draws, half_sample_completions

RULES = ("paper", "holdout", "stable", "settled")
CONCLUDE = ("measured", "predicted")
CODINGS = ("sum", "treatment")
VALIDATIONS = ("random", "folds")
FOLDS = 5
"""Folds per repetition of ``folds`` validation: each validates on 20%, as the paper's split."""
HOLDOUT_MIN = 10
"""Fewest settings the holdout R^2 is computed on (the latest batches pooled)."""
SETTLE_RELATIVE = 0.05
"""The ``settled`` rule also lets a share move by this fraction of itself."""
SETTLE_FLOOR = 0.01
"""Shares below this (1% of the variance) need not settle: no conclusion rests on them."""


@dataclass(frozen=True)
class LoopOptions:
    """The sampling options of a sweep; the defaults are ours (``METHODS["ours"]``)."""

    start: float = 0.02
    step: float = 0.01
    threshold: float = 0.9
    splits: int = 10
    sampler: str = "coverage"
    model: str = "smooth"
    rule: str = "settled"
    seed: int = 0
    budget: int | None = None  # most settings to measure; None: all
    conclude: str = "predicted"  # ANOVA conclusions on: measured settings | predicted space
    analysis: str | None = None  # the conclusions' ANOVA: anova | anova-main; None: by model
    growth: float = 1.25  # each batch adds at least (growth - 1) x the measured settings
    coding: str = "sum"  # the conclusions' ANOVA coding: sum (deviation) | treatment
    validation: str = "folds"  # the splits: folds (value-stratified 5-fold) | random (paper)
    level: float = 0.95  # the intervals' probability (shares, points)
    draws: int = 200  # posterior draws behind the intervals
    settle: float = 0.02  # rule settled: how far a share may move between batches
    cover: int = 3  # no stop while a cell of this strength over the kept factors is empty; 0 off
    cover_top: int = 0  # those factors: 0, every kept term's; k, the k largest main effects'
    cover_expect: float = 2.0  # only cells a random sample this size expects this many in; 0 all

    @property
    def method(self) -> str:
        """``ours`` or ``paper`` when the sampling options are exactly that method's, else
        ``custom``."""
        for name in METHODS:
            preset = method_options(name)
            if all(getattr(self, k) == getattr(preset, k) for k in METHOD_FIELDS):
                return name
        return "custom"

    def check(self, source: str = "options") -> None:
        """One-line errors for values the loop cannot use."""
        get_sampler(self.sampler)
        get_model(self.model)
        if self.rule not in RULES:
            raise WashoutError(
                f"{source}: rule = {self.rule!r}: unknown rule (choose from {', '.join(RULES)})"
            )
        if self.analysis not in (None, "anova", "anova-main"):
            raise WashoutError(
                f"{source}: analysis = {self.analysis!r}: unknown (choose from anova, anova-main)"
            )
        if self.coding not in CODINGS:
            raise WashoutError(
                f"{source}: coding = {self.coding!r}: unknown (choose from {', '.join(CODINGS)})"
            )
        if not 1.0 <= self.growth <= 10.0:
            raise WashoutError(f"{source}: growth = {self.growth}: must be in [1, 10]")
        if self.validation not in VALIDATIONS:
            raise WashoutError(
                f"{source}: validation = {self.validation!r}: unknown (choose from "
                f"{', '.join(VALIDATIONS)})"
            )
        if self.conclude not in CONCLUDE:
            raise WashoutError(
                f"{source}: conclude = {self.conclude!r}: unknown (choose from "
                f"{', '.join(CONCLUDE)})"
            )
        for name, value in (("start", self.start), ("step", self.step)):
            if not 0 < value <= 1:
                raise WashoutError(f"{source}: {name} = {value}: must be a fraction in (0, 1]")
        if not 0 < self.threshold <= 1:
            raise WashoutError(f"{source}: threshold = {self.threshold}: must be in (0, 1]")
        if not 0.5 <= self.level < 1:
            raise WashoutError(f"{source}: level = {self.level}: must be in [0.5, 1)")
        if self.draws < 20:
            raise WashoutError(f"{source}: draws = {self.draws}: must be at least 20")
        if not 0 < self.settle <= 1:
            raise WashoutError(f"{source}: settle = {self.settle}: must be in (0, 1]")
        if not 0 <= self.cover <= 4:
            raise WashoutError(f"{source}: cover = {self.cover}: must be a strength in 0-4")
        if self.cover_expect < 0:
            raise WashoutError(f"{source}: cover_expect = {self.cover_expect}: must be >= 0")
        if self.cover_top < 0:
            raise WashoutError(f"{source}: cover_top = {self.cover_top}: must be at least 0")
        if self.splits < 1:
            raise WashoutError(f"{source}: splits = {self.splits}: must be at least 1")
        if self.budget is not None and self.budget < 1:
            raise WashoutError(f"{source}: budget = {self.budget}: must be at least 1 setting")


METHOD_FIELDS = (
    "start",
    "step",
    "growth",
    "sampler",
    "model",
    "rule",
    "conclude",
    "coding",
    "validation",
)
"""The options a method fixes; the others (threshold, splits, seed, budget) are the user's."""
METHODS: dict[str, dict[str, object]] = {
    "ours": {},
    "paper": {
        "start": 0.05,
        "step": 0.05,
        "growth": 1.0,
        "sampler": "random",
        "model": "anova",
        "rule": "paper",
        "conclude": "measured",
        "coding": "treatment",
        "validation": "random",
    },
}


def method_options(method: str = "ours", source: str = "--method", **overrides: Any) -> LoopOptions:
    """The options of a method (``ours`` or ``paper``), with ``overrides`` (None: keep the
    method's) for single components, e.g. ``method_options("paper", model="smooth")``."""
    preset = choose(METHODS, method, source, "method")
    given = {k: v for k, v in overrides.items() if v is not None}
    return LoopOptions(**{**preset, **given})  # type: ignore[arg-type]


@dataclass
class Step:
    """One iteration: how many settings were measured, the split R^2 values, the holdout R^2."""

    measured: int
    ratio: float
    r2_splits: list[float]
    r2_holdout: float | None
    passed: bool


class StopSampling(Exception):
    """Raised by ``measure`` to end the loop early (budget spent, a batch stopped)."""


@dataclass
class LoopResult:
    measured: np.ndarray  # indices into the space, in the paper's sample order
    y: np.ndarray
    steps: list[Step] = field(default_factory=list)
    terminated: bool = False
    stopped: str | None = None  # why ``measure`` ended the loop early


def sample_sizes(
    n: int, start: float, step: float, growth: float = 1.0, least: int = 1
) -> list[int]:
    """Settings measured after each batch.

    With ``growth`` 1 (the paper): at each ratio start, start + step, ..., as
    train_test_split(test_size=1 - r) sizes the sample. Otherwise (ours) the first batch is
    that of ``start`` but at least ``least`` settings, and each later one adds
    max(ceil(step n), ceil((growth - 1) size), 1) settings: fine steps while little is
    measured, geometric ones later, so the overshoot past the size that suffices stays within
    a factor ``growth`` and the number of iterations is logarithmic. The second batch, the
    first the model predicts before it is measured, holds at least :data:`HOLDOUT_MIN`
    settings, so the holdout rule can be met there rather than only after a third batch
    (herd: 17, 27 settings instead of 17, 23, 29).
    """
    if growth > 1.0:
        grown = [min(max(n - math.ceil((1.0 - start) * n), least, 1), n)]
        while grown[-1] < n:
            last = grown[-1]
            add = max(math.ceil(step * n - 1e-9), math.ceil((growth - 1.0) * last - 1e-9), 1)
            if len(grown) == 1:  # the first predicted batch: a holdout R^2 of its own
                add = max(add, HOLDOUT_MIN)
            grown.append(min(last + add, n))
        return grown
    count = int(round((1.0 - start) / step)) + 1
    ratios = np.linspace(start, start + step * (count - 1), count)
    sizes: list[int] = []
    for r in ratios[ratios <= 1.0 + 1e-12]:
        size = n - math.ceil((1.0 - float(r)) * n) if r < 1 else n
        if size > 0 and (not sizes or size > sizes[-1]):
            sizes.append(size)
    if not sizes or sizes[-1] < n:
        sizes.append(n)
    return sizes


def r2_score(y: np.ndarray, pred: np.ndarray) -> float:
    """Coefficient of determination 1 - SS_res / SS_tot (scikit-learn's r2_score); NaN if
    fewer than 2 values or y is constant."""
    if len(y) < 2:
        return np.nan
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0:
        return np.nan
    return 1.0 - float(np.sum((y - pred) ** 2)) / ss_tot


def validation_splits(
    y: np.ndarray, splits: int, validation: str, seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(fitting, validation) positions into ``y`` of each of ``splits`` splits.

    ``random`` (the paper): scikit-learn's train_test_split(test_size=0.2, random_state=i).
    ``folds`` (ours): repeated 5-fold cross-validation stratified on the measured value (the
    settings sorted by value, each run of 5 consecutive ones dealt at random to the 5 folds),
    as many repetitions as ``splits`` needs. Every setting is validated once per repetition,
    and each fold spans the range of the values, so its R^2 denominator is the sample's
    spread, not that of 6 settings that happened to be alike: at 30 settings random 20%
    parts swing from near-constant to wide, and R^2 with them. Stratified k-fold
    cross-validation: Kohavi (IJCAI 1995), who found it less variable than plain k-fold;
    for a continuous target the strata are runs of sorted values.
    """
    if validation == "random":
        from sklearn.model_selection import train_test_split

        positions = np.arange(len(y))
        return [
            tuple(train_test_split(positions, test_size=0.2, random_state=i)) for i in range(splits)
        ]
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    order = np.argsort(y, kind="stable")
    for repetition in range(math.ceil(splits / FOLDS)):
        rng = np.random.default_rng([seed, repetition])
        fold = np.empty(len(y), dtype=int)
        for lo in range(0, len(y), FOLDS):
            block = order[lo : lo + FOLDS]
            fold[block] = rng.permutation(FOLDS)[: len(block)]
        parts += [(np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(FOLDS)]
    return parts[:splits]


def split_r2(
    space: Space,
    measured: np.ndarray,
    y: np.ndarray,
    model_name: str,
    splits: int,
    seed: int = 0,
    validation: str = "random",
) -> list[float]:
    """R^2 on the validation part of each of ``splits`` splits (:func:`validation_splits`),
    the model fitted on the fitting part."""
    model = get_model(model_name)
    scores = []
    if len(measured) < 2:
        return [np.nan] * splits
    for i, (train, test) in enumerate(validation_splits(y, splits, validation, seed)):
        fitted = _fit(model, space, measured[train], y[train], seed * 1000 + i)
        scores.append(
            np.nan
            if fitted is None or len(test) == 0
            else r2_score(y[test], fitted.predict(space.codes[measured[test]]))
        )
    return scores


def _fit(model, space: Space, rows: np.ndarray, y: np.ndarray, seed: int) -> Predictor | None:
    """Fit, or None when the model cannot be fitted on so few rows."""
    if len(rows) < 2:
        return None
    try:
        return model(space, space.codes[rows], y, seed)
    except (np.linalg.LinAlgError, ValueError):
        return None


def pooled_holdout(batches: list[tuple[np.ndarray, np.ndarray]]) -> float | None:
    """R^2 of the latest batches' values against their predictions made before each was
    measured, pooled newest first until at least :data:`HOLDOUT_MIN` settings; None while
    fewer than that were predicted: an R^2 on a handful of settings certifies little."""
    taken: list[tuple[np.ndarray, np.ndarray]] = []
    for pair in reversed(batches):
        taken.append(pair)
        if sum(len(y) for y, _ in taken) >= HOLDOUT_MIN:
            return r2_score(
                np.concatenate([y for y, _ in taken]), np.concatenate([p for _, p in taken])
            )
    return None


def run_loop(
    space: Space,
    measure: Callable[[np.ndarray], np.ndarray],
    options: LoopOptions,
    on_step: Callable[[Step], None] | None = None,
) -> LoopResult:
    """The incremental-sampling loop; ``measure(indices)`` returns the metric of those settings
    (or raises StopSampling to end the loop with what has been measured).

    Deterministic for a seed: resuming re-chooses the same settings, and ``measure`` can
    answer the ones already recorded from its store.
    """
    options.check()
    sampler = get_sampler(options.sampler)
    model = get_model(options.model)
    n = len(space)
    limit = n if options.budget is None else min(options.budget, n)
    least = 1 + sum(k - 1 for k in space.n_levels)  # the first batch estimates every main effect
    sizes = [
        s for s in sample_sizes(n, options.start, options.step, options.growth, least) if s <= limit
    ]
    if not sizes or sizes[-1] < limit:
        sizes.append(limit)
    result = LoopResult(np.empty(0, dtype=int), np.empty(0))
    predicted: list[tuple[np.ndarray, np.ndarray]] = []  # (measured, predicted before) per batch
    last_signature: object = None
    last_state: tuple[int, dict[Term, float]] | None = None
    kept: dict[Term, float] | None = None  # the terms of the latest shares computed
    for batch, size in enumerate(sizes):
        covering = options.cover if options.rule == "settled" else 0
        cover_factors = covered_factors(space, kept, options.cover_top) if covering else ()
        want = size - len(result.measured)
        first = covering_picks(
            space,
            result.measured,
            covering,
            cover_factors,
            want,
            options.seed,
            batch,
            options.cover_expect,
            size,
        )
        rest = np.asarray(
            sampler(space, result.measured, result.y, want, options.seed, batch), dtype=int
        )
        new = np.concatenate([first, rest[~np.isin(rest, first)][: want - len(first)]])
        previous = _fit(model, space, result.measured, result.y, options.seed) if batch else None
        try:
            y_new = np.asarray(measure(new), dtype=float)
        except StopSampling as stop:
            result.stopped = str(stop)
            break
        if previous is not None:
            predicted.append((y_new, previous.predict(space.codes[new])))
        holdout = pooled_holdout(predicted)
        earlier = LoopResult(result.measured, result.y)
        result.measured = np.concatenate([new, result.measured])
        result.y = np.concatenate([y_new, result.y])
        scores = split_r2(
            space,
            result.measured,
            result.y,
            options.model,
            options.splits,
            options.seed,
            options.validation,
        )
        passed = bool(np.all(np.asarray(scores) >= options.threshold))
        if options.rule in ("holdout", "stable", "settled"):
            passed = passed and holdout is not None and holdout >= options.threshold
        if options.rule == "stable":
            signature = conclusion_signature(space, result, options)
            passed = passed and signature == last_signature
            last_signature = signature
        if options.rule == "settled" and passed:
            before = (
                last_state[1]
                if last_state is not None and last_state[0] == len(earlier.measured)
                else share_state(space, earlier, options)
            )
            last_state = (len(result.measured), share_state(space, result, options))
            passed = has_settled(last_state[1], before, options.settle)
            kept = last_state[1]
        if covering and passed:
            factors = covered_factors(space, kept, options.cover_top)
            if uncovered_cells(space, result.measured, covering, factors, options.cover_expect):
                passed = False
        step = Step(len(result.measured), len(result.measured) / n, scores, holdout, passed)
        result.steps.append(step)
        if on_step is not None:
            on_step(step)
        if passed:
            result.terminated = True
            break
    return result


def covered_factors(space: Space, kept: dict[Term, float] | None, top: int) -> tuple[int, ...]:
    """The factors whose cells a stop must cover: those of every kept term (every parameter
    when the rule computed no shares), or with ``top`` those of the ``top`` largest main
    effects."""
    if kept is None:
        return tuple(range(len(space.parameters)))
    if top:
        mains = sorted((t for t in kept if len(t) == 1), key=lambda t: -kept[t])
        return tuple(sorted(t[0] for t in mains[:top]))
    return tuple(sorted({f for term in kept for f in term}))


def conclusion_model(space: Space, result: LoopResult, options: LoopOptions) -> Predictor:
    """The model that predicts the unmeasured settings for the conclusions (see
    :func:`loop_conclusions`), fitted on every measured setting."""
    return additive_model(options.model, options.threshold)(
        space, space.codes[result.measured], result.y, options.seed
    )


def loop_conclusions(
    space: Space,
    result: LoopResult,
    options: LoopOptions,
    analysis: str | None = None,
    model: Predictor | None = None,
    intervals: bool = True,
    points: bool = True,
    refits: bool = True,
) -> tuple[Conclusions, Space]:
    """The ANOVA's conclusions after a loop, and the settings they were drawn from. With
    ``conclude`` ``measured`` (the paper) the ANOVA is fitted on the measured settings only;
    with ``predicted`` (ours) on every setting of the space, the measured ones with their
    values and the others with the terminating model's predictions: termination certified
    that the model predicts unmeasured settings well, and the ANOVA then sees the balanced
    full grid that the ``full`` analysis sees instead of an unbalanced sample. The predictions
    are the terminating model's refitted on the metric's own scale (:func:`additive_model`)
    where that fit's leave-one-out R^2 meets the threshold too: the ANOVA splits the raw
    metric into additive terms, and a log-scale fit, exponentiated, estimates each setting's
    median rather than its mean (Duan, JASA 1983) and turns additive log terms into raw-scale
    interactions of every order; on silo and Lrzip that moved terms just under the 10% cut
    above it (bench/RESULTS.md, "Sweeps", part E). Where the raw fit falls short (a truly
    multiplicative space) the model that terminated the loop predicts
    (:func:`conclusion_model`, or ``model`` when given). ``analysis`` (anova or anova-main)
    overrides the ANOVA's terms, which otherwise follow ``options.model``.

    With ``intervals`` every share (and with ``points`` every studied curve's point) gets
    its interval at ``options.level`` for the fully measured space's value: that model's
    posterior predictive draws complete the space, and (with ``refits``) the model refitted
    on half-samples of the measured settings says how far another sample's fit would move
    each share (uncertainty.py). Without ``refits`` the shares are the same and their
    intervals narrower: the ``settled`` rule, which compares shares only, skips the refits.
    """
    completions = halves = None
    if intervals or (options.conclude == "predicted" and len(result.measured) < len(space)):
        fitted = model or conclusion_model(space, result, options)
        if intervals:
            completions = completed_draws(
                space,
                result.measured,
                result.y,
                fitted,
                options.draws,
                options.seed,
            )
        if completions is not None and refits:
            fit_model = additive_model(options.model, options.threshold)
            halves = half_sample_completions(
                space,
                result.measured,
                result.y,
                lambda codes, y: fit_model(space, codes, y, options.seed),
                HALVES,
                options.seed,
            )
    if options.conclude == "predicted" and len(result.measured) < len(space):
        values = fitted.predict(space.codes)
        values[result.measured] = result.y
        rows = np.arange(len(space))
    else:
        rows, values = result.measured, result.y
    data = space.subset(rows)
    data.y = values
    terms = analysis or options.analysis or options.model
    return (
        conclusions_of(
            space, rows, values, terms, options.coding, completions, options.level, points, halves
        ),
        data,
    )


def share_state(space: Space, result: LoopResult, options: LoopOptions) -> dict[Term, float]:
    """What the ``settled`` rule compares between batches: each significant term's share
    (the draws' median when the model has a posterior); nothing before two settings were
    measured."""
    if len(result.measured) < 2:
        return {}
    c, _ = loop_conclusions(space, result, options, points=False, refits=False)
    return dict(c.shares)


def has_settled(now: dict[Term, float], before: dict[Term, float], settle: float) -> bool:
    """No share moved by more than max(``settle``, :data:`SETTLE_RELATIVE` x share), a term
    absent from one side counting as 0; shares under :data:`SETTLE_FLOOR` on both sides are
    left out."""
    for term in now.keys() | before.keys():
        share, was = now.get(term, 0.0), before.get(term, 0.0)
        if max(share, was) >= SETTLE_FLOOR and abs(share - was) > max(
            settle, SETTLE_RELATIVE * share
        ):
            return False
    return True


def conclusion_signature(space: Space, result: LoopResult, options: LoopOptions) -> tuple:
    """What must not change between batches for the ``stable`` rule: the important terms and
    every point's term, parameter, fixed level, type and level."""
    c, _ = loop_conclusions(space, result, options, intervals=False)
    points = sorted(
        (k[0], k[1], k[2], p.kind, p.value) for k, p in c.curves.items() if p is not None
    )
    return (tuple(sorted(c.important)), tuple(points))
