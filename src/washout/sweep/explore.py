"""The incremental-sampling loop on an already measured space, and the result every sweep
returns (:class:`washout.sweep.result.SweepResult`): sampling rate, validation R^2, the
learning curve, significant terms, ranked points, their curves and fair ranges. How the
conclusions are drawn (measured or predicted space, coding) is in conclusions.py and
incremental.loop_conclusions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from washout.errors import WashoutError
from washout.sweep.conclusions import curves_json, fair_ranges, points_json, terms_json
from washout.sweep.incremental import (
    LoopOptions,
    LoopResult,
    Step,
    loop_conclusions,
    r2_score,
    run_loop,
    split_r2,
)
from washout.sweep.models import get_model
from washout.sweep.result import StepResult, SweepResult
from washout.sweep.space import Space


def summary(
    space: Space,
    result: LoopResult,
    options: LoopOptions,
    full: bool = False,
    unmeasured_r2: bool = False,
) -> SweepResult:
    """The result of a finished loop, with everything its summary and report show."""
    c, data = loop_conclusions(space, result, options)
    last = result.steps[-1] if result.steps else None
    steps = tuple(
        StepResult(
            settings_measured=s.measured,
            sampling_rate=s.ratio,
            r2_validation=tuple(_num(v) for v in s.r2_splits),
            r2_min=_num(np.nanmin(s.r2_splits)) if np.isfinite(s.r2_splits).any() else None,
            r2_holdout=_num(s.r2_holdout),
        )
        for s in result.steps
    )
    worst = [s.r2_min for s in steps if s.r2_min is not None]
    return SweepResult(
        sampling_rate=len(result.measured) / len(space),
        settings_measured=int(len(result.measured)),
        settings_total=int(len(space)),
        terminated=bool(result.terminated),
        r2_validation=tuple(_num(v) for v in (last.r2_splits if last else [])),
        r2_holdout=None if last is None else _num(last.r2_holdout),
        r2_unmeasured=_num(unmeasured(space, result, options)) if unmeasured_r2 else None,
        r2_best=max(worst) if worst else None,
        method=options.method,
        model=options.model,
        sampler="full" if full else options.sampler,
        rule=options.rule,
        conclusions_from="all rows" if full else options.conclude,
        coding=options.coding,
        validation=options.validation,
        exact_fit=c.exact_fit,
        seed=options.seed,
        significant_terms=terms_json(c),
        important_points=points_json(c, data),
        ranges=fair_ranges(data, c),
        steps=steps,
        curves=curves_json(c, data),
        interval_level=c.level,
    )


def unmeasured(space: Space, result: LoopResult, options: LoopOptions) -> float:
    """R^2 on the settings never measured, of the model fitted on all measured ones."""
    left = np.ones(len(space), dtype=bool)
    left[result.measured] = False
    if space.y is None or left.sum() < 2:
        return np.nan
    fitted = get_model(options.model)(space, space.codes[result.measured], result.y, options.seed)
    return r2_score(space.y[left], fitted.predict(space.codes[left]))


def require_variation(y: np.ndarray, where: str, metric: str | None) -> None:
    """A metric with one value everywhere has nothing to explain: say so in one line rather
    than fit a model whose every term "explains" nothing with share 0."""
    if len(y) and np.ptp(y) == 0:
        raise WashoutError(
            f"{where}: metric {metric or 'value'!r} does not vary (all "
            f"{len(y)} settings measured {y[0]:g}): nothing to explore"
        )


def explore(
    space: Space,
    options: LoopOptions,
    full: bool = False,
    on_step: Callable[[Step], None] | None = None,
) -> SweepResult:
    """Run the loop on a measured space (reading a row = measuring a setting), or with
    ``full`` analyse every row (validation splits over all of them)."""
    if space.y is None:
        raise ValueError("explore needs a measured space")
    options.check()
    require_variation(space.y, space.source, space.metric)
    if full:
        rows = np.arange(len(space))
        scores = split_r2(
            space, rows, space.y, options.model, options.splits, options.seed, options.validation
        )
        passed = bool(np.all(np.asarray(scores) >= options.threshold))
        result = LoopResult(
            rows, space.y.copy(), [Step(len(rows), 1.0, scores, None, passed)], passed
        )
        return summary(space, result, options, full=True)
    y = space.y
    result = run_loop(space, lambda idx: y[idx], options, on_step=on_step)
    return summary(space, result, options, unmeasured_r2=True)


def _num(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)
