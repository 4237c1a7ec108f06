"""The user's own claims ("A beats B") checked under both orders.

A claim compares one metric of two tests: ``A < B``, ``A > 1.1 * B``, ``A <= 0.9*B``
(operators ``<``, ``<=``, ``>``, ``>=``; an optional positive factor multiplies B). Test
names may contain spaces, dashes, dots and braces; a name with other awkward characters
is quoted, ``'...'`` or ``"..."``.

A claim *holds* on a set of trials when both:
- the medians satisfy it: median(A) op k * median(B); and
- a one-sided Mann-Whitney U test (Mann & Whitney 1947, Ann. Math. Statist. 18(1)) of A's
  values against k times B's values, as ``scipy.stats.mannwhitneyu`` computes it
  (alternative "less" for < and <=, "greater" for > and >=), is significant.
``<`` and ``<=`` use the same test (a rank test cannot tell them apart); they differ only
in the median check, where ties satisfy ``<=``.

Each claim is evaluated separately on fixed-order and on random-order trials, so a
conclusion that is an artefact of the fixed order (the ordering trap: Duplyakin et al.,
USENIX ATC 2023, where a uFS result flipped once the order was randomised) shows up as
``order_changes_conclusion``. Significance is family-wise over the claims x metrics
evaluated within one order kind (Bonferroni or Holm, ``washout.stats.family``): a single
claim on a single metric is judged at alpha itself. Medians come with the distribution-free
confidence interval of ``washout.stats.median_ci`` (Le Boudec 2010, Thm 2.1) at 1 - alpha.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from washout.errors import WashoutError
from washout.stats.family import adjust, check_alpha, check_method
from washout.stats.trials import usable_trials

if TYPE_CHECKING:
    import pandas as pd

OPERATORS: tuple[str, ...] = ("<=", ">=", "<", ">")
EVALUATED_ORDERS: tuple[str, ...] = ("fixed", "random")
_FORM = 'expected e.g. "A < B", "A > 1.1 * B" or "A <= 0.9*B" (quote names as \'...\')'
_FACTOR = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*\*\s*(.*)$", re.S)


@dataclass(frozen=True)
class Claim:
    """A parsed claim: ``a op factor * b``."""

    text: str
    a: str
    op: str
    factor: float
    b: str

    def holds_for(self, left: float, right: float) -> bool:
        """Whether ``left op factor * right``."""
        k = self.factor * right
        return {"<": left < k, "<=": left <= k, ">": left > k, ">=": left >= k}[self.op]


def _bad(text: str, problem: str) -> WashoutError:
    return WashoutError(f"claim {text!r}: {problem}")


def _name(text: str, part: str, side: str) -> str:
    """A test name: a quoted string, or the stripped raw text."""
    s = part.strip()
    if s[:1] in ("'", '"'):
        if len(s) < 2 or s[-1] != s[0] or s[0] in s[1:-1]:
            raise _bad(text, f"unbalanced quotes around test {side}; {_FORM}")
        s = s[1:-1]
    elif any(c in s for c in "'\"*"):
        raise _bad(text, f"cannot read test {side} from {part.strip()!r}; {_FORM}")
    if not s.strip():
        raise _bad(text, f"test {side} is missing; {_FORM}")
    return s


def parse_claim(text: str) -> Claim:
    """Parse one claim, or raise a one-line WashoutError naming it and what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise WashoutError(f"claim {text!r}: empty; {_FORM}")
    s = text.strip()
    # The left name runs to the first operator outside quotes.
    i, quote = 0, ""
    while i < len(s):
        c = s[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "<>":
            break
        i += 1
    if quote:
        raise _bad(text, f"unbalanced quotes; {_FORM}")
    if i == len(s):
        raise _bad(text, f"no comparison operator (<, <=, >, >=); {_FORM}")
    op = s[i:i + 2] if s[i + 1:i + 2] == "=" else s[i]
    left, right = s[:i], s[i + len(op):]
    if left.rstrip().endswith(("=", "!")):
        shown = left.rstrip()[-1] + op
        raise _bad(text, f"operator {shown!r} is not one of {', '.join(OPERATORS)}")
    if right.lstrip()[:1] in ("<", ">", "="):
        shown = op + right.lstrip()[:1]
        raise _bad(text, f"operator {shown!r} is not one of {', '.join(OPERATORS)}")
    factor = 1.0
    m = _FACTOR.match(right)
    if m:
        factor, right = float(m.group(1)), m.group(2)
        if not (math.isfinite(factor) and factor > 0):
            raise _bad(text, f"factor {m.group(1)} must be a positive number")
    if any(c in right for c in "<>") and right.strip()[:1] not in ("'", '"'):
        raise _bad(text, f"more than one comparison; {_FORM}")
    return Claim(text=s, a=_name(text, left, "A"), op=op, factor=factor, b=_name(text, right, "B"))


@dataclass(frozen=True)
class ClaimSide:
    """A claim evaluated on the trials of one order kind."""

    holds: bool
    median_a: float
    median_b: float
    p: float
    n_a: int
    n_b: int
    ci_a: tuple[float, float] | None
    ci_b: tuple[float, float] | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ci_a"] = list(self.ci_a) if self.ci_a else None
        d["ci_b"] = list(self.ci_b) if self.ci_b else None
        return d


@dataclass(frozen=True)
class ClaimResult:
    """One claim on one metric, under fixed and under random order."""

    claim: str
    a: str
    op: str
    factor: float
    b: str
    metric: str
    fixed: ClaimSide | None
    random: ClaimSide | None
    order_changes_conclusion: bool | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["fixed"] = self.fixed.to_dict() if self.fixed else None
        d["random"] = self.random.to_dict() if self.random else None
        return d


def _known(text: str, name: str, tests: Sequence[str]) -> None:
    if name not in tests:
        shown = ", ".join(repr(t) for t in list(tests)[:20]) + (", ..." if len(tests) > 20 else "")
        raise _bad(text, f"unknown test {name!r} (tests: {shown})")


def _metrics_for(claim: Claim, ok: "pd.DataFrame", metric: str | None) -> list[str]:
    have = {t: sorted(ok.loc[ok["test"] == t, "metric"].unique()) for t in (claim.a, claim.b)}
    if metric is not None:
        for t in (claim.a, claim.b):
            if metric not in have[t]:
                raise _bad(claim.text, f"test {t!r} has no metric {metric!r} (its metrics: "
                                       f"{', '.join(have[t]) or 'none'})")
        return [metric]
    shared = [m for m in have[claim.a] if m in have[claim.b]]
    if not shared:
        raise _bad(claim.text, f"tests {claim.a!r} and {claim.b!r} share no metric")
    return shared


def _one_sided(claim: Claim, a: Any, b: Any) -> float:
    """p of the one-sided Mann-Whitney U test of A against factor * B."""
    import numpy as np
    from scipy.stats import mannwhitneyu

    kb = claim.factor * b
    if np.ptp(np.concatenate([a, kb])) == 0:
        return 1.0  # all values equal: no evidence either way
    alternative = "less" if claim.op in ("<", "<=") else "greater"
    return float(mannwhitneyu(a, kb, alternative=alternative).pvalue)


def evaluate_claims(
    df: "pd.DataFrame",
    claims: Sequence[str],
    *,
    metric: str | None = None,
    alpha: float = 0.05,
    correction: str = "bonferroni",
) -> list[ClaimResult]:
    """Evaluate each claim on each metric (``metric``, default every metric both tests
    share) under fixed and random order. Unknown tests or metrics are one-line errors."""
    import numpy as np

    from washout.stats.median_ci import median_ci

    level, method = check_alpha(alpha), check_method(correction)
    ok, _ = usable_trials(df, "claim evaluation")
    tests = sorted(df["test"].dropna().astype(str).unique())
    parsed = [parse_claim(c) for c in claims]
    for c in parsed:
        _known(c.text, c.a, tests)
        _known(c.text, c.b, tests)

    # (claim, metric, order) -> raw side; p-values corrected per order kind afterwards.
    jobs: list[tuple[Claim, str]] = [(c, m) for c in parsed for m in _metrics_for(c, ok, metric)]
    raw: dict[str, list[dict[str, Any] | None]] = {}
    for order in EVALUATED_ORDERS:
        sides: list[dict[str, Any] | None] = []
        here = ok[ok["order"] == order]
        for c, m in jobs:
            sel = here[here["metric"] == m]
            a = sel.loc[sel["test"] == c.a, "value"].to_numpy(dtype=float)
            b = sel.loc[sel["test"] == c.b, "value"].to_numpy(dtype=float)
            if len(a) == 0 or len(b) == 0:
                sides.append(None)
                continue
            ci_a, ci_b = median_ci(a, 1 - level), median_ci(b, 1 - level)
            sides.append(dict(
                median_a=float(np.median(a)), median_b=float(np.median(b)),
                p=_one_sided(c, a, b), n_a=int(len(a)), n_b=int(len(b)),
                ci_a=ci_a[:2] if ci_a else None, ci_b=ci_b[:2] if ci_b else None,
            ))
        raw[order] = sides

    evaluated: dict[str, list[ClaimSide | None]] = {}
    for order, sides in raw.items():
        significant, _ = adjust([s["p"] if s else float("nan") for s in sides], level, method)
        evaluated[order] = [
            None if s is None else ClaimSide(
                holds=bool(sig and c.holds_for(s["median_a"], s["median_b"])), **s)
            for s, sig, (c, _m) in zip(sides, significant, jobs)
        ]

    results = []
    for i, (c, m) in enumerate(jobs):
        fixed, random = evaluated["fixed"][i], evaluated["random"][i]
        changes = None if fixed is None or random is None else fixed.holds != random.holds
        results.append(ClaimResult(
            claim=c.text, a=c.a, op=c.op, factor=c.factor, b=c.b, metric=m,
            fixed=fixed, random=random, order_changes_conclusion=changes,
        ))
    return results


def claims_frame(results: Sequence[ClaimResult]) -> "pd.DataFrame":
    """One row per claim x metric x order kind."""
    import pandas as pd

    rows = []
    for r in results:
        for order in EVALUATED_ORDERS:
            side = getattr(r, order)
            rows.append({
                "claim": r.claim, "metric": r.metric, "order": order,
                **(side.to_dict() if side else {"holds": None}),
                "order_changes_conclusion": r.order_changes_conclusion,
            })
    return pd.DataFrame(rows)
