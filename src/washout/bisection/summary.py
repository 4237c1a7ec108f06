"""A bisect's state read as an answer (pure): how it ended, the culprit or the range, every
commit's and every step's estimate, the change and the culprit's effect, and the cost.

The estimates shown are Hodges-Lehmann ratios with Tukey's interval at 1 - alpha (two-sided),
for reading; the decisions were taken at their looks' far smaller levels
(:mod:`washout.stats.equivalence`).
"""

from __future__ import annotations

import math
from pathlib import Path

from washout.bisection.result import BisectResult, CommitRow, Cost, StepRow
from washout.bisection.search import decision, finished, standing, values
from washout.bisection.state import State, Step
from washout.stats.equivalence import PairedEstimate, paired_estimate


def measured_change(state: State) -> float:
    """log(bad / good) as the check step estimated it (0 before it ran)."""
    check = state.step("check")
    d = values(check, "d") if check else []
    return math.log(paired_estimate(d, 0.5).ratio) if d else 0.0


def _estimate(step: Step | None, key: str, alpha: float) -> PairedEstimate | None:
    data = values(step, key) if step else []
    return paired_estimate(data, 1.0 - alpha) if data else None


def summarize(state: State, root: Path) -> BisectResult:
    """The result of the bisect whose state is ``state`` (in directory ``root``)."""
    c = state.config
    commits = state.commits
    check = state.step("check")
    effect_step = state.step("effect")
    where = standing(state)
    lo, hi = where.bracket.lo, where.bracket.hi
    steps = state.candidates()
    by_commit = {s.commit: s for s in steps}
    pooled = [v for s in state.steps if s.kind != "effect" for v in values(s, "d")]
    change = paired_estimate(pooled, 1.0 - c.alpha) if pooled else None  # every good-bad run
    apart = [s for s in steps if s.last is not None and s.last.apart]
    whole = lo == 0 and hi == len(commits) - 1
    effect = change if whole else _estimate(effect_step, "d", c.alpha)
    if effect_step is not None and (effect_step.commit, effect_step.reference) != (
        commits[hi].sha,
        commits[lo].sha,
    ):
        effect = None

    notes: list[str] = []
    threshold_log = None if c.threshold is None else math.log1p(c.threshold)
    culprit = first = last = None
    if check is None or not finished(check, c):
        ending = "unfinished"
    elif decision(check, c) != "differ" or (
        threshold_log is not None and abs(measured_change(state)) <= threshold_log
    ):
        ending = "no-change"
    elif where.running is not None or where.next is not None or effect is None:
        ending = "unfinished"
    else:
        ending = "first-bad" if hi - lo == 1 else "range"
        first, last = commits[lo + 1].sha, commits[hi].sha
        culprit = last if ending == "first-bad" else None

    rows = []
    estimate: PairedEstimate | None
    for i, commit in enumerate(commits):
        build = state.builds.get(commit.sha)
        step = by_commit.get(commit.sha)
        if i == 0:
            kind, estimate = "good", PairedEstimate(1.0, 1.0, 1.0, None, 0)
        elif i == len(commits) - 1:
            kind, estimate = "bad", change
        elif build is not None and not build.ok:
            kind, estimate = "skipped", None
        elif step is not None:
            kind = decision(step, c) or "testing"
            estimate = _estimate(step, "x", c.alpha)
        else:
            kind, estimate = "untested", None
        rows.append(
            CommitRow(
                index=i,
                commit=commit.sha,
                subject=commit.subject,
                state=kind,
                build=build.status if build else "",
                step=step.index if step else None,
                vs_good=estimate,
            )
        )

    if apart:
        shown = ", ".join(s.commit[:10] for s in apart)
        notes.append(
            f"not monotone: {shown} lie(s) beyond good or bad by more than the margin; "
            "every step's estimate is in the steps table"
        )
    inside = [r for r in rows if lo < r.index < hi and r.state in ("skipped", "unknown")]
    if ending == "range" and inside:
        kinds = sorted({r.state for r in inside})
        notes.append(
            f"{len(inside)} commit(s) inside the range could not be judged ({', '.join(kinds)})"
        )
    if c.threshold is not None:
        notes.append(f"margin {100 * c.threshold:g}% (--threshold) on either side of good and bad")
    else:
        notes.append(
            "margins from the change each run measured: like good means nearer good than bad "
            "and not beyond good by more than the change (like bad the same way round)"
        )
    notes.append(
        f"error rates: every decision at its step's share of alpha = {c.alpha:g}, spent over "
        "its looks (Lan-DeMets, Pocock type); the chance that any step decided wrongly is at "
        f"most {c.alpha:g}"
    )

    result_steps = tuple(_step_row(s, state) for s in state.steps)
    trials = sum(look.trials for s in state.steps for look in s.looks)
    runs = sum(len(look.d) for s in state.steps for look in s.looks)
    builds = tuple(state.builds[sha.sha] for sha in commits if sha.sha in state.builds)
    cost = Cost(
        builds=len(builds),
        builds_failed=sum(1 for b in builds if not b.ok),
        build_seconds=sum(b.seconds for b in builds),
        trials=trials,
        runs=runs,
        seconds=state.seconds,
    )
    result = BisectResult(
        directory=str(root),
        spec=c.spec_source,
        repo=c.repo,
        test=c.test,
        metric=c.metric,
        better=c.better,
        alpha=c.alpha,
        threshold=c.threshold,
        runs=c.runs,
        max_runs=c.max_runs,
        seed=c.seed,
        good=c.good,
        bad=c.bad,
        ending=ending,
        culprit=culprit,
        first=first,
        last=last,
        monotone=not apart,
        change=change,
        effect=effect,
        summary="",
        notes=tuple(notes),
        commits=tuple(rows),
        steps=result_steps,
        builds=builds,
        cost=cost,
    )
    return _with_summary(result, state)


def _step_row(step: Step, state: State) -> StepRow:
    c = state.config
    subject = next((x.subject for x in state.commits if x.sha == step.commit), "")
    last = step.last
    return StepRow(
        index=step.index,
        kind=step.kind,
        commit=step.commit,
        reference=step.reference,
        subject=subject,
        decision=decision(step, c) or "running",
        final=bool(last and last.final),
        reason=last.reason if last else "not measured yet",
        runs=len(values(step, "d")),
        looks=len(step.looks),
        alpha=step.alpha,
        spent=sum(look.level for look in step.looks),
        margin=None if step.margin is None else math.expm1(step.margin),
        vs_good=_estimate(step, "x", c.alpha),
        vs_bad=_estimate(step, "y", c.alpha),
        change=_estimate(step, "d", c.alpha),
        trials=sum(look.trials for look in step.looks),
        seconds=sum(look.seconds for look in step.looks),
        stores=tuple(look.store for look in step.looks),
    )


def _percent(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.2f}%"


def _with_summary(result: BisectResult, state: State) -> BisectResult:
    """The result with its one-sentence answer."""
    from dataclasses import replace

    subjects = {x.sha: x.subject for x in state.commits}
    effect = result.effect
    size = ""
    if effect is not None:
        size = f"{result.metric} {_percent(effect.ratio)}"
        if effect.low is not None and effect.high is not None:
            size += f" [{_percent(effect.low)}, {_percent(effect.high)}]"
        size += f" over {effect.runs} paired runs"
    if result.ending == "first-bad":
        assert result.culprit is not None
        text = (
            f"The first bad commit is {result.culprit[:10]} "
            f"({subjects[result.culprit][:60]}): {size} against its parent."
        )
    elif result.ending == "range":
        assert result.first is not None and result.last is not None
        count = sum(1 for r in result.commits if r.commit in _between(result, state))
        why = "the metric is not monotone" if not result.monotone else "commits in it not judged"
        text = (
            f"The change is in one of {count} commits, {result.first[:10]}..{result.last[:10]} "
            f"({why}): {size} across them."
        )
    elif result.ending == "no-change":
        change = result.change
        shown = "" if change is None else f" (bad / good {_percent(change.ratio)})"
        within = f" beyond --threshold {100 * result.threshold:g}%" if result.threshold else ""
        text = f"Good and bad were not shown to differ{within}{shown}: nothing to bisect."
    else:
        text = f"Unfinished: continue with 'washout resume {result.directory}'."
    return replace(result, summary=text)


def _between(result: BisectResult, state: State) -> set[str]:
    shas = [x.sha for x in state.commits]
    if result.first is None or result.last is None:
        return set()
    return set(shas[shas.index(result.first) : shas.index(result.last) + 1])
