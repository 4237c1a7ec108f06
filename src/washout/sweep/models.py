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
  Each term's penalty is then reweighted by the inverse of its fitted variance (adaptive
  shrinkage, after the adaptive lasso: Zou, JASA 2006), kept when it lowers the LOO error:
  weak terms are shrunk harder and strong ones less, which one weight per order cannot do.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations, product
from typing import Protocol, runtime_checkable

import numpy as np

from washout.errors import choose
from washout.sweep.anova import fit_anova
from washout.sweep.space import Space


class Predictor(Protocol):
    def predict(self, codes: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class Posterior(Predictor, Protocol):
    """A predictor that can also draw from its posterior predictive distribution."""

    def draws(
        self, codes: np.ndarray, n: int, rng: np.random.Generator, undersmooth: float = 1.0
    ) -> np.ndarray:
        """``n`` draws (n x len(codes)) of the metric at the settings ``codes``: a new
        measurement there, given the training data (parameter uncertainty and noise), from
        the model with its penalty divided by ``undersmooth`` (no effect on a model without
        one)."""
        ...


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


def _cell_penalty(sizes: list[int], ordered: list[bool]) -> np.ndarray:
    """Penalty of a term's full cell table: along each ordered axis first differences of
    neighbouring cells (a Kronecker sum, as tensor-product P-splines: Eilers & Marx 2003,
    Chemometrics and Intelligent Laboratory Systems), plus a ridge of 1 that shrinks the
    whole term towards zero."""
    total: np.ndarray = np.eye(int(np.prod(sizes)))
    for axis, (n, is_ordered) in enumerate(zip(sizes, ordered)):
        if not is_ordered or n < 2:
            continue
        mats = [np.eye(m) for m in sizes]
        mats[axis] = _difference_penalty(n, True)
        kron: np.ndarray = mats[0]
        for m in mats[1:]:
            kron = np.kron(kron, m)
        total = total + kron
    return total


class _Smooth:
    """Penalized full-dummy main effects, 2-way and (where the data demands them) 3-way
    interactions (see module docstring).

    The penalty weights, whether to model log(y), and whether to add 3-way terms are chosen
    together by leave-one-out error on the metric's own scale: for a linear smoother the LOO
    residual is r_i / (1 - h_ii) (Hastie, Tibshirani & Friedman, Elements of Statistical
    Learning, eq. 7.52), so each candidate costs one solve. 3-way terms are candidates only
    among the factors of the strongest 2-way interactions (:data:`TRIPLE_FACTORS`), with
    at most as many cells as training settings, and are kept only when they lower the
    LOO error: a hierarchical model that grows an order where the data demands it.

    Before the 3-way step, each main effect's and 2-way term's penalty is multiplied by the
    mean fitted variance of its order's terms over its own, clipped to
    [1 / :data:`ADAPT_RANGE`, :data:`ADAPT_RANGE`], and the weights are chosen again: the
    adaptive lasso's weights 1 / |initial estimate| (Zou, JASA 2006, gamma = 1) per term
    instead of per coefficient. The reweighted fit is kept only when its LOO error is lower.
    With few settings one weight for all 2-way terms either lets the many weak ones overfit
    or flattens the few real ones (herd at 29 of 600 settings, rs at 115 of 3,840).
    """

    LAMBDAS_MAIN = (0.1, 1.0)
    LAMBDAS_PAIR = (0.3, 3.0, 30.0)
    LAMBDAS_TRIPLE = (0.3, 3.0, 30.0)
    TRIPLE_FACTORS = 4
    RIDGE = 1e-3
    ADAPT_RANGE = 30.0

    def __init__(
        self,
        space: Space,
        codes: np.ndarray,
        y: np.ndarray,
        seed: int,
        scales: tuple[bool, ...] = (False, True),
    ) -> None:
        self.n_levels = space.n_levels
        self.scales = scales if np.all(y > 0) else (False,)  # log: every value positive
        ordered = [all(isinstance(v, (int, float)) for v in lv) for lv in space.levels]
        varied = [f for f, n in enumerate(self.n_levels) if n > 1]
        self.terms: list[tuple[int, ...]] = [(f,) for f in range(len(self.n_levels))]
        self.terms += list(combinations(varied, 2))
        penalties = [
            _difference_penalty(n, ordered[f]) + self.RIDGE * np.eye(n)
            for f, n in enumerate(self.n_levels)
        ] + [
            _cell_penalty([self.n_levels[f] for f in t], [ordered[f] for f in t])
            for t in self.terms[len(self.n_levels) :]
        ]
        x = self._design(codes, self.terms)
        order = np.asarray([len(t) for t in self.terms for _ in range(self._width(t))])
        self.log, self.mean, self.beta = False, float(y.mean()), np.zeros(x.shape[1])
        self._fitted: tuple | None = None  # what the chosen fit solved (for draws)
        best, lambdas = self._choose(x, y, penalties, order, {})
        self.weights = self._adaptive_weights(x)
        reweighted = [p * w for p, w in zip(penalties, self.weights)]
        error, adapted = self._choose(x, y, reweighted, order, {}, best)
        if error < best:  # _choose replaced the coefficients
            best, lambdas, penalties = error, adapted, reweighted
        else:
            self.weights = np.ones(len(self.terms))
        triples = self._triples(x, len(y))
        if triples:
            x3 = np.hstack([x, self._design(codes, triples)])
            pen3 = penalties + [
                _cell_penalty([self.n_levels[f] for f in t], [ordered[f] for f in t])
                for t in triples
            ]
            order3 = np.concatenate([order, [3] * sum(self._width(t) for t in triples)])
            error, _ = self._choose(x3, y, pen3, order3, lambdas, best)
            if error < best:  # _choose replaced the coefficients
                self.terms, best = self.terms + triples, error
        spread = float(np.sum((y - y.mean()) ** 2))  # R^2 of the chosen fit's LOO predictions:
        self.loo_r2 = 1.0 - best / spread if spread > 0 else np.nan

    def _term_variances(self, x: np.ndarray) -> np.ndarray:
        """Variance over the training settings of each term's fitted contribution."""
        offsets = np.cumsum([0] + [self._width(t) for t in self.terms])
        return np.array(
            [
                float(np.var(x[:, lo:hi] @ self.beta[lo:hi]))
                for lo, hi in zip(offsets[:-1], offsets[1:])
            ]
        )

    def _adaptive_weights(self, x: np.ndarray) -> np.ndarray:
        """Each term's penalty factor: its order's mean fitted variance over its own, clipped
        to [1 / ADAPT_RANGE, ADAPT_RANGE] (see the class docstring)."""
        variances = self._term_variances(x)
        sizes = np.array([len(t) for t in self.terms])
        weights = np.ones(len(self.terms))
        for k in set(sizes.tolist()):
            mean = float(variances[sizes == k].mean())
            if mean > 0:
                ratio = mean / np.maximum(variances[sizes == k], mean / self.ADAPT_RANGE)
                weights[sizes == k] = np.clip(ratio, 1 / self.ADAPT_RANGE, self.ADAPT_RANGE)
        return weights

    def _triples(self, x: np.ndarray, n: int) -> list[tuple[int, ...]]:
        """3-way terms among the factors of the strongest fitted 2-way interactions (``x``: the
        training settings' design of the current terms)."""
        variances = self._term_variances(x)
        strength: dict[int, float] = {}
        for t, v in zip(self.terms, variances):
            if len(t) == 2:
                for f in t:
                    strength[f] = strength.get(f, 0.0) + float(v)
        top = sorted(strength, key=lambda f: -strength[f])[: self.TRIPLE_FACTORS]
        return [
            t for t in combinations(sorted(top), 3) if np.prod([self.n_levels[f] for f in t]) <= n
        ]

    def _width(self, term: tuple[int, ...]) -> int:
        return int(np.prod([self.n_levels[f] for f in term]))

    def _choose(
        self,
        x: np.ndarray,
        y: np.ndarray,
        penalties: list[np.ndarray],
        order: np.ndarray,
        fixed: dict[int, float],
        best: float = np.inf,
    ) -> tuple[float, dict[int, float]]:
        """The scale and penalty weights (per term order; ``fixed`` ones kept) with the least
        LOO error; sets ``log``, ``mean`` and ``beta`` when it beats ``best``.

        With fewer settings than coefficients the dual form is solved (n x n instead of
        p x p; Saunders, Gammerman & Vovk, ICML 1998, kernel ridge regression): with
        K = X P^-1 X' and M = (K + I)^-1 the residuals are M t, 1 - h_ii = M_ii and
        beta = P^-1 X' M t. Every term's P is positive definite (its ridge), so P^-1 exists
        block by block, and K for any weights is a weighted sum of one K per term order.
        """
        from scipy.linalg import block_diag

        size = x.shape[1]
        n = len(y)
        scale = max(n, 1) / max(size, 1)
        grids = {1: self.LAMBDAS_MAIN, 2: self.LAMBDAS_PAIR, 3: self.LAMBDAS_TRIPLE}
        orders = sorted(set(order.tolist()))
        choices = [[fixed[k]] if k in fixed else list(grids[k]) for k in orders]
        chosen: dict[int, float] = dict(fixed)
        dual = n < size
        if dual:
            p_inv = block_diag(*[np.linalg.inv(p) for p in penalties])
            a_k = {k: p_inv[np.ix_(order == k, order == k)] @ x[:, order == k].T for k in orders}
            k_k = {k: x[:, order == k] @ a_k[k] for k in orders}
        else:
            pen_base = block_diag(*penalties)
            gram = x.T @ x
        for log in self.scales:
            target = np.log(y) if log else y
            mean = float(target.mean())
            t = target - mean
            xty = None if dual else x.T @ t
            for combo in product(*choices):
                weights = {k: lam * scale for k, lam in zip(orders, combo)}
                try:
                    if dual:
                        kernel = sum(k_k[k] / weights[k] for k in orders)
                        m = np.linalg.inv(kernel + np.eye(n))
                        resid = m @ t
                        loo_resid = resid / np.maximum(np.diag(m), 1e-9)
                    else:
                        weight = np.zeros(size)
                        for k in orders:
                            weight[order == k] = weights[k]
                        root = np.sqrt(weight)
                        inv = np.linalg.inv(gram + pen_base * root[:, None] * root[None, :])
                        beta = inv @ xty
                        hat = np.einsum("ij,ij->i", x @ inv, x)
                        loo_resid = (t - x @ beta) / np.maximum(1.0 - hat, 1e-9)
                except np.linalg.LinAlgError:
                    continue
                loo = t - loo_resid
                pred = np.exp(loo + mean) if log else loo + mean
                error = float(np.sum((y - pred) ** 2))
                if error < best:
                    if dual:
                        beta = np.zeros(size)
                        for k in orders:
                            beta[order == k] = a_k[k] @ resid / weights[k]
                    best, self.log, self.mean, self.beta = error, log, mean, beta
                    chosen = dict(zip(orders, combo))
                    self._fitted = (x, y, penalties, order, weights)
        return best, chosen

    def _design(self, codes: np.ndarray, terms: list[tuple[int, ...]]) -> np.ndarray:
        parts = []
        for t in terms:
            cell = np.zeros(len(codes), dtype=int)
            for f in t:
                cell = cell * self.n_levels[f] + codes[:, f]
            parts.append(np.eye(self._width(t))[cell])
        return np.hstack(parts)

    def predict(self, codes: np.ndarray) -> np.ndarray:
        out = self._design(codes, self.terms) @ self.beta + self.mean
        return np.exp(out) if self.log else out

    def draws(
        self, codes: np.ndarray, n: int, rng: np.random.Generator, undersmooth: float = 1.0
    ) -> np.ndarray:
        """Posterior predictive draws (see :class:`Posterior`) on the fitted scale (log or
        raw), exponentiated on the log scale, with every penalty weight divided by
        ``undersmooth``.

        The penalized fit is the posterior mean under the Gaussian prior
        beta ~ N(0, sigma^2 P^-1) that its penalty P (with the chosen weights) encodes, so
        beta | y, sigma^2 ~ N(beta_hat, sigma^2 (X'X + P)^-1) (Wahba, JRSS B 1983; Wood 2017,
        §6.10), and with the reference prior on sigma^2 its marginal posterior is the scaled
        inverse chi-square with n degrees of freedom and scale t'(I + X P^-1 X')^-1 t / n,
        the residual plus the penalty at the fit (the conjugate normal linear model: O'Hagan
        & Forster, Kendall's Advanced Theory of Statistics 2B, 2004, §11.7). Each beta is
        drawn by perturbation (:class:`_PenalizedSystem`). A new measurement's noise is
        drawn at the fit's leave-one-out error (at the chosen penalties), not its residual
        variance: at an unmeasured setting the model errs by its misfit as well as the
        noise, and LOO error estimates both (Wood 2017, §6.2.2); with the residual variance
        the 95% intervals covered silo's full shares in 83% of seeded runs (bench/RESULTS.md,
        "Sweeps", part F). A Bayesian interval carries the penalty's bias as well as
        the fit's variance, which is why such intervals cover near their nominal level on
        average where frequentist ones around the shrunk estimate do not (Nychka, JASA 1988;
        Marra & Wood, Scand. J. Statist. 2012); undersmoothing narrows the bias further
        (uncertainty.UNDERSMOOTH).
        """
        if self._fitted is None:
            raise ValueError("no penalized fit succeeded: no posterior")
        x, y, penalties, order, weights = self._fitted
        t = (np.log(y) if self.log else y) - self.mean
        system = _PenalizedSystem(x, penalties, order, weights, undersmooth)
        rss, df = system.residual(t)
        sigma = np.full(n, np.sqrt(rss / max(df, 1.0)))
        beta = system.perturbed(t, sigma, rng)
        fitted = system if undersmooth == 1.0 else _PenalizedSystem(x, penalties, order, weights)
        error = np.sqrt(np.mean(fitted.loo_residuals(t) ** 2))
        new = self._design(codes, self.terms) @ beta + rng.standard_normal((len(codes), n)) * error
        new = new.T + self.mean
        return np.exp(new) if self.log else new


class _PenalizedSystem:
    """The penalized least-squares system of a :class:`_Smooth` fit, with every penalty
    weight divided by ``divide``: X (n x p), penalty blocks P_b times their weights, solved
    in the dual form (n x n) when n < p, as the fit is."""

    def __init__(
        self,
        x: np.ndarray,
        penalties: list[np.ndarray],
        order: np.ndarray,
        weights: dict[int, float],
        divide: float = 1.0,
    ) -> None:
        self.x, self.penalties = x, penalties
        self.blocks: list[tuple[int, int, float]] = []  # (first column, end, weight)
        start = 0
        for p in penalties:
            self.blocks.append((start, start + len(p), weights[int(order[start])] / divide))
            start += len(p)
        rows, size = x.shape
        self.dual = rows < size
        if self.dual:  # beta = P^-1 X' (X P^-1 X' + I)^-1 t
            self.a = np.vstack(
                [np.linalg.inv(p) @ x[:, lo:hi].T / w for p, (lo, hi, w) in self._pairs()]
            )
            self.m = np.linalg.inv(x @ self.a + np.eye(rows))
        else:  # beta = (X'X + P)^-1 X't
            gram = x.T @ x
            for p, (lo, hi, w) in self._pairs():
                gram[lo:hi, lo:hi] += p * w
            self.a_inv = np.linalg.inv(gram)

    def _pairs(self) -> list[tuple[np.ndarray, tuple[int, int, float]]]:
        return list(zip(self.penalties, self.blocks))

    def residual(self, t: np.ndarray) -> tuple[float, float]:
        """The fit's residual sum of squares and residual degrees of freedom n - tr(H)."""
        if self.dual:
            resid, df = self.m @ t, float(np.trace(self.m))
        else:
            hat = np.einsum("ij,ij->i", self.x @ self.a_inv, self.x)
            resid, df = t - self.x @ (self.a_inv @ (self.x.T @ t)), len(t) - float(hat.sum())
        return float(resid @ resid), df

    def loo_residuals(self, t: np.ndarray) -> np.ndarray:
        """Leave-one-out residuals of the fit, in closed form: r_i / (1 - h_ii), with
        1 - h_ii = M_ii in the dual form (Wood 2017, §6.2.2; as :meth:`_Smooth._choose`)."""
        if self.dual:
            return (self.m @ t) / np.maximum(np.diag(self.m), 1e-9)
        hat = np.einsum("ij,ij->i", self.x @ self.a_inv, self.x)
        return (t - self.x @ (self.a_inv @ (self.x.T @ t))) / np.maximum(1.0 - hat, 1e-9)

    def perturbed(self, t: np.ndarray, sigma: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Posterior draws of beta (p x len(sigma)), one per noise level ``sigma``: the fit
        to perturbed data t + e, e ~ N(0, sigma^2 I), shrunk towards a perturbed prior mean
        beta_0 ~ N(0, sigma^2 P^-1), is an exact draw from N(beta_hat, sigma^2 (X'X + P)^-1)
        (Papandreou & Yuille, ICCV 2011), at the cost of one product with the fit's own
        matrices."""
        n = len(sigma)
        prior = (
            np.vstack(
                [
                    np.linalg.cholesky(np.linalg.inv(p))
                    @ rng.standard_normal((hi - lo, n))
                    / np.sqrt(w)
                    for p, (lo, hi, w) in self._pairs()
                ]
            )
            * sigma
        )
        data = t[:, None] + rng.standard_normal((len(t), n)) * sigma
        if self.dual:
            return prior + self.a @ (self.m @ (data - self.x @ prior))
        shrunk = np.vstack([p * w @ prior[lo:hi] for p, (lo, hi, w) in self._pairs()])
        return self.a_inv @ (self.x.T @ data + shrunk)


def smooth_model(space: Space, codes: np.ndarray, y: np.ndarray, seed: int) -> Predictor:
    return _Smooth(space, codes, y, seed)


def additive_model(name: str, threshold: float) -> Model:
    """The model ``name`` as the conclusions' ANOVA needs its predictions: ``smooth`` refitted
    on the metric's own scale when that fit's leave-one-out R^2 meets ``threshold`` itself,
    else as leave-one-out error chose it; any other model as it is (see
    :func:`washout.sweep.incremental.loop_conclusions`)."""
    if name != "smooth":
        return get_model(name)

    def fit(space: Space, codes: np.ndarray, y: np.ndarray, seed: int) -> Predictor:
        raw = _Smooth(space, codes, y, seed, scales=(False,))
        return raw if raw.loo_r2 >= threshold else _Smooth(space, codes, y, seed)

    return fit


MODELS: dict[str, Model] = {
    "anova": anova_model,
    "anova-main": anova_main_model,
    "mlp": mlp_model,
    "smooth": smooth_model,
}


def get_model(name: str, source: str = "--model") -> Model:
    """The model called ``name``, or a one-line error listing the choices."""
    return choose(MODELS, name, source, "model")
