"""Why order matters, in words: carryover (with the first trial after the reset), drift and
the user's claims, as sentences for the terminal and the reports.

:func:`render_words` reads an :class:`~washout.analysis.result.Analysis`'s parts in their
plain (JSON) form, so a field a result gains reaches a sentence without a change here. The
statistics themselves, with their sources, live in ``washout.stats.carryover``, ``drift``
and ``claims``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Any

from washout.analysis.plain import finite_or_none
from washout.report.text import counted
from washout.stats import carryover as carryover_stats
from washout.stats import drift as drift_stats

if TYPE_CHECKING:
    from washout.analysis.result import Analysis

WALL = "wall"  # the metric washout measures itself: seconds, so higher is slower

CLOCK_WORDS: dict[str, str] = {
    "position": "its position in the run",
    "time_since_reset": "the time since the reset",
    "run": "the run index (across runs)",
    drift_stats.WANDER: "a level that wandered across runs",
}


def _p(p: float | None) -> str:
    return "p=n/a" if p is None or math.isnan(p) else f"p={p:.2g}"


def _where(row: Mapping[str, Any]) -> str:
    return f" on worker {row['worker']}" if row.get("worker") else ""


def _change(delta: float | None, metric: str) -> str:
    """ "12.0% slower" for the wall time, "12.0% higher" for other metrics."""
    if delta is None:
        return "different"
    if metric == WALL:
        return f"{abs(delta):.1f}% {'slower' if delta > 0 else 'faster'}"
    return f"{abs(delta):.1f}% {'higher' if delta > 0 else 'lower'}"


def _ci(row: Mapping[str, Any]) -> str:
    """The finding's p-value (from ranks) and its family-wise interval (of the mean): they
    answer different questions, so a skewed sample can have p < alpha/m and an interval
    that includes 0; saying which is which keeps the sentence from contradicting itself."""
    lo, hi = row["ci"]
    interval = "n/a" if lo is None or hi is None else f"{lo:+.1f}% to {hi:+.1f}%"
    return f"{_p(row['p'])} on ranks; family-wise CI of the mean {interval}"


def _reset_words(
    pairs: Sequence[Mapping[str, Any]], pooled: Sequence[Mapping[str, Any]]
) -> list[str]:
    """One sentence per metric (and worker) whose first trial after the reset stands out:
    pooled over the tests when that is significant, else for the tests where it is."""
    lines = []
    for r in pooled:
        rows = [
            p
            for p in pairs
            if p["predecessor"] == carryover_stats.RESET
            and p["metric"] == r["metric"]
            and p["worker"] == r["worker"]
        ]
        found = [p for p in rows if p["significant"]]
        if r["significant"]:
            each = ", ".join(
                f"{p['test']} {p['delta_pct']:+.1f}%" for p in rows if p["delta_pct"] is not None
            )
            alone = (
                f"significant on its own for {', '.join(p['test'] for p in found)}"
                if found
                else "none significant on its own"
            )
            lines.append(
                f"The first trial after each reset{_where(r)} is "
                f"{_change(r['delta_pct'], r['metric'])} ({r['metric']}) than the trend of the "
                f"later trials, on average over {r['tests']} tests ({_ci(r)}); "
                f"by test: {each} ({alone})."
            )
        elif found:
            each = "; ".join(
                f"{p['test']} {_change(p['delta_pct'], r['metric'])} ({_ci(p)})" for p in found
            )
            lines.append(
                f"The first trial after the reset{_where(r)} differs from the trend of the "
                f"later trials ({r['metric']}) for {len(found)} of {len(rows)} tests: {each}. "
                f"On average over the tests it is {_change(r['delta_pct'], r['metric'])} "
                f"({_p(r['p'])}, not significant)."
            )
    return lines


def _carryover_words(
    pairs: Sequence[Mapping[str, Any]], pooled: Sequence[Mapping[str, Any]]
) -> list[str]:
    if not pairs:
        return [
            "Carryover: nothing to compare (no random-order runs, so no test ever followed "
            "different tests)."
        ]
    reset = _reset_words(pairs, pooled)
    predecessors = [p for p in pairs if p["predecessor"] != carryover_stats.RESET]
    found = [p for p in predecessors if p["significant"]]
    unpaired = (
        "no test follows more than one other test, so a shift one test leaves on the next "
        "cannot be told apart from its position"
    )
    if not predecessors:  # two tests: each always follows the other
        if reset:
            return [*reset, f"No pair of tests can be compared: {unpaired}."]
        tested = [r for r in pooled if r["p"] is not None and not math.isnan(r["p"])]
        judged = (
            f"the first trial after the reset, on average over the tests, is not "
            f"significant after correction ({', '.join(_p(r['p']) for r in tested)})"
            if tested
            else "nothing could be judged"
        )
        return [f"No evidence of carryover: {judged}; {unpaired}."]
    if not found:
        if not reset:
            return [
                f"No evidence of carryover: none of the {len(pairs)} comparisons (each "
                "test right after the reset and after each other test) is significant "
                "after correction."
            ]
        return reset + [
            f"No test is shifted by the test before it: none of the "
            f"{len(predecessors)} predecessor pairs is significant after "
            "correction."
        ]
    return reset + [
        f"{p['test']} ({p['metric']}){_where(p)} {_after(p)} {p['predecessor']} is "
        f"{_change(p['delta_pct'], p['metric'])} than {_after(p).removeprefix('right ')} other "
        f"tests ({p['n_after']} vs {p['n_other']} trials, {_ci(p)})."
        for p in found
    ]


def _after(pair: Mapping[str, Any]) -> str:
    """ "right after" (the test before) or "two positions after" (lag 2)."""
    return "two positions after" if pair.get("lag") == 2 else "right after"


def _drift_words(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    tested = [r for r in rows if r["p"] is not None and not math.isnan(r["p"])]
    few = [r for r in rows if 0 < r["n"] < r["min_n"]]
    needs = (
        f"a trend with position or time since the reset needs {drift_stats.MIN_TRIALS} "
        f"random-order trials of a test after the first position, a trend across runs or a "
        f"wandering level {drift_stats.MIN_RUNS}"
    )
    if not tested:
        if few:
            return [
                f"Too few trials to judge drift: {needs}, and no test has more than "
                f"{max(r['n'] for r in few)}."
            ]
        return [
            "Drift: nothing to compare (no random-order trials after the first position "
            "whose position, time or run varies)."
        ]
    found = [r for r in rows if r["significant"]]
    if not found:
        judged = (
            f"none of the {len(tested)} comparisons (trends with position, time since "
            "reset or run, a wandering level) is significant after correction"
        )
        rest = f"; {len(few)} more had too few trials to judge ({needs})" if few else ""
        return [f"No evidence of drift: {judged}{rest}."]
    return [_drift_sentence(r) for r in found]


def _drift_sentence(r: Mapping[str, Any]) -> str:
    """One significant drift row in words: a trend with its clock, or a wandering level."""
    head = f"{r['test']} ({r['metric']}){_where(r)}"
    if r["against"] == drift_stats.WANDER:
        return (
            f"{head}: the level changed across the experiment, not monotonically: it "
            f"wandered by about {r['wander_pct']:.1f}% (standard deviation of its slow part, "
            f"over {r['n']} runs, {_p(r['p'])})."
        )
    return (
        f"{head} drifts with {CLOCK_WORDS[r['against']]}: "
        f"Spearman rho = {r['spearman']:+.2f} (n={r['n']}, {_p(r['p'])})."
    )


def _side(side: Mapping[str, Any], a: str, b: str) -> str:
    ci = side.get("ratio_ci")
    interval = (
        f" ({side['ratio_ci_confidence'] * 100:.3g}% CI {ci[0]:.4g} to {ci[1]:.4g})" if ci else ""
    )
    return (
        f"per-run ratio {a}/{b} {side['ratio']:.4g}{interval} over "
        f"{counted(side['n_runs'], 'run')}, "
        f"median {a} {side['median_a']:.4g} vs {b} {side['median_b']:.4g}, {_p(side['p'])}"
    )


def _claim_words(c: Mapping[str, Any]) -> str:
    head = f"Claim {c['claim']!r} ({c['metric']})"
    fixed, random = c["fixed"], c["random"]
    if fixed is None and random is None:
        return f"{head}: no fixed- or random-order runs with both tests to check it on."
    if fixed is None or random is None:
        kind, side = ("fixed", fixed) if fixed else ("random", random)
        verdict = "holds" if side["holds"] else "does not hold"
        return (
            f"{head} {verdict} in {kind} order ({_side(side, c['a'], c['b'])}); "
            f"there are no {'random' if kind == 'fixed' else 'fixed'}-order trials to "
            "tell whether order changes it."
        )
    detail = f"(fixed: {_side(fixed, c['a'], c['b'])}; random: {_side(random, c['a'], c['b'])})"
    if fixed["holds"] and random["holds"]:
        return f"{head} holds in both fixed and random order {detail}."
    if not fixed["holds"] and not random["holds"]:
        return f"{head} holds in neither fixed nor random order {detail}."
    held, missed = ("fixed", "random") if fixed["holds"] else ("random", "fixed")
    interaction = f"interaction {_p(c['interaction_p'])}"
    if c["order_changes_conclusion"]:
        return (
            f"{head} holds in {held} order but not in {missed} order: the conclusion "
            f"depends on the order, the per-run ratio differs between them ({interaction}) "
            f"{detail}."
        )
    return (
        f"{head} holds in {held} order and falls short of significance in {missed} order, "
        f"but the per-run ratio does not differ between the orders ({interaction}): more "
        f"runs, not another order, would settle it {detail}."
    )


class Row(Mapping[str, Any]):
    """A result row (a frozen dataclass) read as its JSON object: each field's value, None
    where a number is undefined, a list for a tuple, a nested result as a Row. A view, not
    a copy: converting every one of a paper-scale study's 88,000 carryover pairs, to name
    the few that are significant, was a large part of its report."""

    __slots__ = ("_item",)

    def __init__(self, item: Any) -> None:
        self._item = item

    def __getitem__(self, key: str) -> Any:
        try:
            value = getattr(self._item, key)
        except AttributeError:
            raise KeyError(key) from None
        if value is None or type(value) in (str, bool, int):  # most fields: as they are
            return value
        return Row(value) if is_dataclass(value) else finite_or_none(value)

    def __iter__(self) -> Iterator[str]:
        return iter(f.name for f in fields(self._item))

    def __len__(self) -> int:
        return len(fields(self._item))


def why_parts(analysis: Analysis) -> dict[str, list[Row]]:
    """``{"carryover": [...], "first_after_reset": [...], "drift": [...], "claims": [...]}``,
    keys only for what the analysis has: carryover pairs (largest |Delta%| first;
    predecessor ``(reset)``: the test's first trial after the reset), the first trial after
    the reset pooled over the tests of each metric, drift correlations (strongest first) and
    claim evaluations, each row read as its plain (JSON) form."""
    out: dict[str, list[Row]] = {}
    if analysis.carryover is not None:
        out["carryover"] = [Row(p) for p in analysis.carryover.pairs]
        out["first_after_reset"] = [Row(r) for r in analysis.carryover.first_after_reset]
    if analysis.drift is not None:
        out["drift"] = [Row(r) for r in analysis.drift.rows]
    if analysis.claims is not None:
        out["claims"] = [Row(c) for c in analysis.claims]
    return out


def render_words(analysis: Analysis) -> list[str]:
    """Human sentences for an analysis' why: the first trial after the reset and
    significant carryover and drift (or that there is none), and for each claim whether it
    holds under each order."""
    d = why_parts(analysis)
    lines: list[str] = []
    if "carryover" in d:
        lines += _carryover_words(d["carryover"], d.get("first_after_reset", []))
    if "drift" in d:
        lines += _drift_words(d["drift"])
    for c in d.get("claims", []):
        lines.append(_claim_words(c))
    return lines


def context_words(analysis: Analysis) -> list[str]:
    """Whether a metric depends on the context its trials ran in: each significant test x
    metric (x worker) with the spread the context alone makes and its interval, or that none
    does; then every claim's and ranking's margin set against that spread."""
    result = analysis.context
    if result is None:
        return []
    found = result.significant()
    lines = []
    if not found:
        lines.append(
            f"No metric depends on its context: none of the {result.family_size} tests across "
            f"context levels is significant ({result.correction}, alpha = {result.alpha:g})."
        )
    for r in found:
        name = f"{r.test} ({r.metric})" + (f" on worker {r.worker}" if r.worker else "")
        eta = "" if r.eta_squared is None else f", eta^2_H {r.eta_squared:.2f}"
        line = (
            f"{name} depends on its context: Kruskal-Wallis across {r.levels} levels "
            f"{_p(r.kw_p)}{eta}"
        )
        if r.spread is not None:
            line += f"; the context alone moves it by {r.spread:.1%}"
            if r.spread_ci is not None:
                line += f" (interval {r.spread_ci[0]:.1%} to {r.spread_ci[1]:.1%})"
        lines.append(line + ".")
    claims = {c.claim for c in analysis.claims or ()}
    for m in analysis.context_margins:  # a ranking's sentence names its tests already
        lines.append((f"Claim {m.about!r}: " if m.about in claims else "") + m.sentence() + ".")
    return lines
