"""Models that predict a setting's metric from its levels, for validating a sample.

- ``anova``: the paper's model (anova.py): OLS, every parameter categorical, main effects and
  2-way interactions, backward elimination at p > 0.05. ``anova-main``: main effects only (the
  paper's choice for HERD).
- ``mlp``: the paper's ML alternative, scikit-learn MLPRegressor(hidden_layer_sizes=(10, 10, 5),
  solver="lbfgs"); inputs are level ranks scaled to [0, 1], the metric is standardized.
- ``smooth`` (ours): the same main effects + 2-way interactions, but every level gets a
  coefficient and adjacent levels are tied together by a difference penalty (P-splines on an
  ordered factor: Eilers & Marx, Statistical Science 1996), with ridge shrinkage of the
  interactions; penalty weights by generalized cross-validation (Golub, Heath & Wahba,
  Technometrics 1979). It is fitted to log(metric) when every value is positive, since
  performance effects tend to multiply. The order of levels lets it interpolate levels the
  training split never saw, and shrinkage keeps sparse interaction cells from overfitting.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations, product
from typing import Protocol

import numpy as np

from washout.errors import WashoutError
from washout.sweep.anova import fit_anova
from washout.sweep.space import Space


class Predictor(Protocol):
    def predict(self, codes: np.ndarray) -> np.ndarray: ...


Model = Callable[[Space, np.ndarray, np.ndarray, int], Predictor]
"""(space, training level codes, training metric values, seed) -> a fitted predictor."""


def anova_model(space: Space, codes: np.ndarray, y: np.ndarray, seed: int) -> Predictor:
    return fit_anova(codes, y, space.n_levels, interactions=True)


def anova_main_model(space: Space, codes: np.ndarray, y: np.ndarray, seed: int) -> Predictor:
    return fit_anova(codes, y, space.n_levels, interactions=False)


class _MLP:
    def __init__(self, space: Space, codes: np.ndarray, y: np.ndarray, seed: int) -> None:
        from sklearn.neural_network import MLPRegressor

        self.scale = np.maximum(np.asarray(space.n_levels, dtype=float) - 1, 1.0)
        self.mean, self.sd = float(y.mean()), float(y.std()) or 1.0
        self.net = MLPRegressor(hidden_layer_sizes=(10, 10, 5), solver="lbfgs", random_state=seed,
                                max_iter=1000)
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.net.fit(codes / self.scale, (y - self.mean) / self.sd)

    def predict(self, codes: np.ndarray) -> np.ndarray:
        return self.net.predict(codes / self.scale) * self.sd + self.mean


def mlp_model(space: Space, codes: np.ndarray, y: np.ndarray, seed: int) -> Predictor:
    return _MLP(space, codes, y, seed)


def _difference_penalty(n: int, ordered: bool) -> np.ndarray:
    """D'D for first differences of n ordered level coefficients; the identity if unordered."""
    if not ordered or n < 2:
        return np.eye(n)
    d = np.diff(np.eye(n), axis=0)
    return d.T @ d


class _Smooth:
    """Penalized full-dummy main effects + 2-way interactions (see module docstring)."""

    LAMBDAS_MAIN = (0.01, 0.1, 1.0)
    LAMBDAS_PAIR = (0.1, 1.0, 10.0, 100.0)
    RIDGE = 1e-3

    def __init__(self, space: Space, codes: np.ndarray, y: np.ndarray, seed: int) -> None:
        self.n_levels = space.n_levels
        self.log = bool(np.all(y > 0))
        target = np.log(y) if self.log else y
        self.mean = float(target.mean())
        t = target - self.mean
        ordered = [all(isinstance(v, (int, float)) for v in lv) for lv in space.levels]
        self.pairs = [(a, b) for a, b in combinations(range(len(self.n_levels)), 2)
                      if self.n_levels[a] > 1 and self.n_levels[b] > 1]
        x = self._design(codes)
        blocks_main, blocks_pair = [], []
        for f, n in enumerate(self.n_levels):
            blocks_main.append(_difference_penalty(n, ordered[f]) + self.RIDGE * np.eye(n))
        for a, b in self.pairs:
            da = _difference_penalty(self.n_levels[a], ordered[a])
            db = _difference_penalty(self.n_levels[b], ordered[b])
            ia, ib = np.eye(self.n_levels[a]), np.eye(self.n_levels[b])
            blocks_pair.append(np.kron(da, ib) + np.kron(ia, db) + np.eye(len(ia) * len(ib)))
        p_main = _block_diag(blocks_main, 0)
        p_pair = _block_diag(blocks_pair, 0)
        n_main = p_main.shape[0]
        gram, xty = x.T @ x, x.T @ t
        size = gram.shape[0]
        best = (np.inf, None)
        scale = max(len(t), 1) / max(size, 1)
        for lm, lp in product(self.LAMBDAS_MAIN, self.LAMBDAS_PAIR):
            pen = np.zeros((size, size))
            pen[:n_main, :n_main] = lm * scale * p_main
            pen[n_main:, n_main:] = lp * scale * p_pair
            try:
                inv = np.linalg.inv(gram + pen)
            except np.linalg.LinAlgError:
                continue
            beta = inv @ xty
            resid = t - x @ beta
            edf = float(np.sum(inv * gram))  # trace((X'X + P)^-1 X'X)
            denom = (len(t) - edf) ** 2
            gcv = len(t) * float(resid @ resid) / denom if len(t) - edf > 1e-6 else np.inf
            if gcv < best[0]:
                best = (gcv, beta)
        self.beta = best[1] if best[1] is not None else np.linalg.lstsq(x, t, rcond=None)[0]

    def _design(self, codes: np.ndarray) -> np.ndarray:
        parts = [np.eye(n)[codes[:, f]] for f, n in enumerate(self.n_levels)]
        for a, b in self.pairs:
            cell = codes[:, a] * self.n_levels[b] + codes[:, b]
            parts.append(np.eye(self.n_levels[a] * self.n_levels[b])[cell])
        return np.hstack(parts)

    def predict(self, codes: np.ndarray) -> np.ndarray:
        out = self._design(codes) @ self.beta + self.mean
        return np.exp(out) if self.log else out


def _block_diag(blocks: list[np.ndarray], fill: float) -> np.ndarray:
    from scipy.linalg import block_diag

    return block_diag(*blocks) if blocks else np.zeros((0, 0))


def smooth_model(space: Space, codes: np.ndarray, y: np.ndarray, seed: int) -> Predictor:
    return _Smooth(space, codes, y, seed)


MODELS: dict[str, Model] = {
    "anova": anova_model,
    "anova-main": anova_main_model,
    "mlp": mlp_model,
    "smooth": smooth_model,
}


def get_model(name: str, source: str = "--model") -> Model:
    """The model called ``name``, or a one-line error listing the choices."""
    try:
        return MODELS[name]
    except KeyError:
        raise WashoutError(
            f"{source} = {name!r}: unknown model (choose from {', '.join(MODELS)})"
        ) from None
