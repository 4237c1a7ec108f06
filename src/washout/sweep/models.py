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

from washout.errors import choose
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
        self.net = MLPRegressor(
            hidden_layer_sizes=(10, 10, 5), solver="lbfgs", random_state=seed, max_iter=1000
        )
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
    """Penalized full-dummy main effects + 2-way interactions (see module docstring).

    The penalty weights and whether to model log(y) are chosen together by leave-one-out
    error on the metric's own scale: for a linear smoother the LOO residual is r_i / (1 - h_ii)
    (Hastie, Tibshirani & Friedman, Elements of Statistical Learning, eq. 7.52), so each
    candidate costs one solve.
    """

    LAMBDAS_MAIN = (0.1, 1.0)
    LAMBDAS_PAIR = (0.3, 3.0, 30.0)
    RIDGE = 1e-3

    def __init__(self, space: Space, codes: np.ndarray, y: np.ndarray, seed: int) -> None:
        self.n_levels = space.n_levels
        ordered = [all(isinstance(v, (int, float)) for v in lv) for lv in space.levels]
        self.pairs = [
            (a, b)
            for a, b in combinations(range(len(self.n_levels)), 2)
            if self.n_levels[a] > 1 and self.n_levels[b] > 1
        ]
        x = self._design(codes)
        from scipy.linalg import block_diag

        p_main = block_diag(
            *[
                _difference_penalty(n, ordered[f]) + self.RIDGE * np.eye(n)
                for f, n in enumerate(self.n_levels)
            ]
        )
        p_pair = np.zeros((0, 0))
        if self.pairs:
            p_pair = block_diag(
                *[
                    np.kron(
                        _difference_penalty(self.n_levels[a], ordered[a]), np.eye(self.n_levels[b])
                    )
                    + np.kron(
                        np.eye(self.n_levels[a]), _difference_penalty(self.n_levels[b], ordered[b])
                    )
                    + np.eye(self.n_levels[a] * self.n_levels[b])
                    for a, b in self.pairs
                ]
            )
        n_main = p_main.shape[0]
        gram = x.T @ x
        size = gram.shape[0]
        scale = max(len(y), 1) / max(size, 1)
        best = np.inf
        self.log, self.mean, self.beta = False, float(y.mean()), np.zeros(size)
        for log in (False, True) if np.all(y > 0) else (False,):
            target = np.log(y) if log else y
            mean = float(target.mean())
            t = target - mean
            xty = x.T @ t
            for lm, lp in product(self.LAMBDAS_MAIN, self.LAMBDAS_PAIR):
                pen = np.zeros((size, size))
                pen[:n_main, :n_main] = lm * scale * p_main
                pen[n_main:, n_main:] = lp * scale * p_pair
                try:
                    inv = np.linalg.inv(gram + pen)
                except np.linalg.LinAlgError:
                    continue
                beta = inv @ xty
                hat = np.einsum("ij,jk,ik->i", x, inv, x, optimize=True)
                loo = t - (t - x @ beta) / np.maximum(1.0 - hat, 1e-9)
                pred = np.exp(loo + mean) if log else loo + mean
                error = float(np.sum((y - pred) ** 2))
                if error < best:
                    best, self.log, self.mean, self.beta = error, log, mean, beta

    def _design(self, codes: np.ndarray) -> np.ndarray:
        parts = [np.eye(n)[codes[:, f]] for f, n in enumerate(self.n_levels)]
        for a, b in self.pairs:
            cell = codes[:, a] * self.n_levels[b] + codes[:, b]
            parts.append(np.eye(self.n_levels[a] * self.n_levels[b])[cell])
        return np.hstack(parts)

    def predict(self, codes: np.ndarray) -> np.ndarray:
        out = self._design(codes) @ self.beta + self.mean
        return np.exp(out) if self.log else out


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
    return choose(MODELS, name, source, "model")
