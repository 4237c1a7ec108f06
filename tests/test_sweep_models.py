"""The smooth model's adaptive shrinkage: each term's penalty follows its fitted strength, so
the one real interaction among several is kept and the others shrunk, and a small sample
predicts the settings it left out better than with one penalty weight per term order."""

from __future__ import annotations

import numpy as np
import pytest

from washout.sweep.incremental import r2_score
from washout.sweep.models import _Smooth
from washout.sweep.space import Space, full_grid


class _OneWeightPerOrder(_Smooth):
    """The smooth model as before adaptive shrinkage: with every factor clipped to 1 the
    reweighted fit is the first one, whose LOO error it does not beat, so it is not kept."""

    ADAPT_RANGE = 1.0


@pytest.fixture(scope="module")
def one_interaction() -> tuple[Space, np.ndarray]:
    """6 x 5 x 4 x 3 settings: main effects of a and b, an a x c interaction, no other, and
    noise of sd 0.3 (the a x c term's sd is about 3)."""
    space = full_grid(
        ["a", "b", "c", "d"],
        [[1.0, 2, 3, 4, 5, 6], [1.0, 2, 3, 4, 5], [1.0, 2, 3, 4], [1.0, 2, 3]],
    )
    a, b, c, _ = (space.codes[:, f] for f in range(4))
    rng = np.random.default_rng(1)
    y = 10 + a + 0.5 * b + 3 * np.sin(a) * c + rng.normal(0, 0.3, len(space))
    return space, y


@pytest.mark.parametrize("seed", range(5))
def test_the_real_interaction_is_shrunk_least_and_the_rest_predicted_better(
    one_interaction: tuple[Space, np.ndarray], seed: int
) -> None:
    space, y = one_interaction
    rows = np.random.default_rng(seed).choice(len(space), 40, replace=False)
    rest = np.setdiff1d(np.arange(len(space)), rows)
    adaptive = _Smooth(space, space.codes[rows], y[rows], seed)
    uniform = _OneWeightPerOrder(space, space.codes[rows], y[rows], seed)
    pairs = {t: w for t, w in zip(adaptive.terms, adaptive.weights) if len(t) == 2}
    assert min(pairs, key=lambda t: pairs[t]) == (0, 2)
    assert pairs[(0, 2)] < 1 < np.median([w for t, w in pairs.items() if t != (0, 2)])
    assert np.all(uniform.weights == 1)
    r2_adaptive = r2_score(y[rest], adaptive.predict(space.codes[rest]))
    r2_uniform = r2_score(y[rest], uniform.predict(space.codes[rest]))
    assert r2_adaptive > r2_uniform
