"""The incremental-sampling loop on an already measured space, and the summary every sweep
prints: sampling rate, validation R^2, significant terms, ranked points and fair ranges.

Conclusions are always drawn by the paper's ANOVA (main effects + 2-way interactions, or main
effects only with ``anova-main``), whichever model decided termination, so a sample's
conclusions compare directly with ``full`` ones. It is fitted on:

- ``measured`` (the paper): the measured settings only;
- ``predicted`` (ours): every setting of the space, the measured ones with their values and
  the others with the terminating model's predictions. Termination certified that the model
  predicts unmeasured settings well; the ANOVA then sees the balanced full grid that the
  ``full`` analysis sees, instead of an unbalanced sample whose Type-III tests (conditional on
  reference levels under treatment coding) and shares swing with the few settings at the
  reference levels.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from washout.errors import WashoutError
from washout.sweep.anova import fit_anova
from washout.sweep.conclusions import Conclusions, conclude, fair_ranges, points_json, terms_json
from washout.sweep.incremental import LoopOptions, LoopResult, Step, r2_score, run_loop, split_r2
from washout.sweep.models import get_model
from washout.sweep.space import Space


def conclusions_of(space: Space, rows: np.ndarray, y: np.ndarray, model: str) -> Conclusions:
    """The ANOVA's conclusions on some rows (main effects only if ``model`` is anova-main)."""
    data = space.subset(rows)
    data.y = y
    fit = fit_anova(data.codes, y, space.n_levels, interactions=model != "anova-main")
    return conclude(fit, data)


def loop_conclusions(
    space: Space, result: LoopResult, options: LoopOptions, analysis: str | None = None
) -> tuple[Conclusions, Space]:
    """The ANOVA's conclusions after a loop, on the measured or the predicted space (see above),
    and the settings they were drawn from. ``analysis`` (anova or anova-main) overrides the
    ANOVA's terms, which otherwise follow ``options.model``."""
    if options.conclude == "predicted" and len(result.measured) < len(space):
        fitted = get_model(options.model)(
            space, space.codes[result.measured], result.y, options.seed
        )
        values = fitted.predict(space.codes)
        values[result.measured] = result.y
        rows = np.arange(len(space))
    else:
        rows, values = result.measured, result.y
    data = space.subset(rows)
    data.y = values
    return conclusions_of(space, rows, values, analysis or options.analysis or options.model), data


def conclusion_signature(space: Space, result: LoopResult, options: LoopOptions) -> tuple:
    """What must not change between batches for the ``stable`` rule: the important terms and
    every point's term, parameter, fixed level, type and level."""
    c, _ = loop_conclusions(space, result, options)
    points = sorted(
        (k[0], k[1], k[2], p.kind, p.value) for k, p in c.curves.items() if p is not None
    )
    return (tuple(sorted(c.important)), tuple(points))


def summary(
    space: Space,
    result: LoopResult,
    options: LoopOptions,
    full: bool = False,
    unmeasured_r2: bool = False,
) -> dict:
    """The JSON-ready summary of a finished loop (the keys of ``washout explore``'s JSON)."""
    c, data = loop_conclusions(space, result, options)
    last = result.steps[-1] if result.steps else None
    out: dict = {
        "sampling_rate": len(result.measured) / len(space),
        "settings_measured": int(len(result.measured)),
        "settings_total": int(len(space)),
        "terminated": bool(result.terminated),
        "r2_validation": [_num(v) for v in (last.r2_splits if last else [])],
    }
    if unmeasured_r2:
        out["r2_unmeasured"] = _num(unmeasured(space, result, options))
    if last is not None and last.r2_holdout is not None:
        out["r2_holdout"] = _num(last.r2_holdout)
    out.update(
        {
            "model": options.model,
            "sampler": "full" if full else options.sampler,
            "rule": options.rule,
            "conclusions_from": "all rows" if full else options.conclude,
            "exact_fit": c.exact_fit,
            "seed": options.seed,
            "significant_terms": terms_json(c),
            "important_points": points_json(c, data),
            "ranges": fair_ranges(data, c),
            "steps": [
                {
                    "settings_measured": s.measured,
                    "sampling_rate": s.ratio,
                    "r2_validation": [_num(v) for v in s.r2_splits],
                    "r2_min": _num(np.nanmin(s.r2_splits))
                    if np.isfinite(s.r2_splits).any()
                    else None,
                    "r2_holdout": _num(s.r2_holdout),
                }
                for s in result.steps
            ],
        }
    )
    return out


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
) -> dict:
    """Run the loop on a measured space (reading a row = measuring a setting), or with
    ``full`` analyse every row (validation splits over all of them)."""
    if space.y is None:
        raise ValueError("explore needs a measured space")
    options.check()
    require_variation(space.y, space.source, space.metric)
    if full:
        rows = np.arange(len(space))
        scores = split_r2(space, rows, space.y, options.model, options.splits, options.seed)
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
