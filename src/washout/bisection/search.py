"""Where a bisect stands and which commit it tests next (pure).

Commits are indexed along the first-parent history, good at 0 and bad at N. The bracket
(lo, hi] holds the change: lo is the latest commit judged like good (0 at first), hi the
earliest judged like bad (N at first); only commits inside it are ever tested, so every
like-good commit precedes every like-bad one. The next candidate is the testable commit
inside the bracket nearest its middle (the lower of two), as ``git bisect`` takes the
middle and, after ``git bisect skip``, a commit near it: a commit whose build failed, or
whose step ended unknown, is not testable. The bisect ends when no commit inside the
bracket is testable: with the first bad commit when the bracket holds one commit, else
with the range (lo, hi]. A step's looks, levels and decision follow from the bisect's
options (:func:`look_plan`, :func:`look_level`, :func:`decision`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from washout.bisection.state import Config, State, Step
from washout.stats.equivalence import look_levels, look_runs


@dataclass(frozen=True)
class Bracket:
    """The change lies in commits lo + 1 .. hi (indices along the history)."""

    lo: int
    hi: int

    @property
    def size(self) -> int:
        return self.hi - self.lo


def bracket(last: int, like_good: Collection[int], like_bad: Collection[int]) -> Bracket:
    """The bracket after these decisions, in a history whose bad commit is ``last``."""
    return Bracket(max([0, *like_good]), min([last, *like_bad]))


def next_candidate(where: Bracket, untestable: Collection[int]) -> int | None:
    """The testable commit inside the bracket nearest its middle, or None."""
    inside = [i for i in range(where.lo + 1, where.hi) if i not in untestable]
    if not inside:
        return None
    middle = (where.lo + where.hi) / 2
    return min(inside, key=lambda i: (abs(i - middle), i))


def look_plan(step: Step, config: Config) -> list[int]:
    """The runs (per worker, cumulative) at each look of a step: ``runs`` more per look up
    to ``max_runs``; an effect step has one look of ``runs``."""
    if step.kind == "effect":
        return [config.runs]
    return look_runs(config.runs, config.max_runs)


def look_level(step: Step, config: Config, look: int) -> float:
    """The level of a step's look (1-based): its share of the step's alpha (an effect
    step's one look estimates at 1 - alpha)."""
    if step.kind == "effect":
        return step.alpha
    return look_levels(step.alpha, config.runs, config.max_runs)[look - 1]


def finished(step: Step, config: Config) -> bool:
    """Whether a step needs no more looks: its decision is final, or its runs are capped."""
    last = step.last
    return last is not None and (last.final or len(step.looks) >= len(look_plan(step, config)))


def decision(step: Step, config: Config) -> str | None:
    """A finished step's decision (unknown when its runs reached the cap undecided); None
    while it runs."""
    if not finished(step, config):
        return None
    assert step.last is not None
    return step.last.decision if step.last.final else "unknown"


def values(step: Step, key: str) -> list[float]:
    """Every run's ``x``, ``y`` or ``d`` over a step's looks."""
    return [v for look in step.looks for v in getattr(look, key)]


@dataclass(frozen=True)
class Standing:
    """Where a bisect stands: its bracket, what cannot be tested, the next commit to
    test (None when the search is over) and the step still running, if any."""

    bracket: Bracket
    untestable: frozenset[int]
    next: int | None
    running: Step | None


def standing(state: State) -> Standing:
    """Where the candidate steps of ``state`` leave the search."""
    config = state.config
    index = {commit.sha: i for i, commit in enumerate(state.commits)}
    steps = state.candidates()
    running = steps[-1] if steps and not finished(steps[-1], config) else None
    done = [(index[s.commit], decision(s, config)) for s in steps if s is not running]
    where = bracket(
        len(state.commits) - 1,
        [i for i, d in done if d == "like-good"],
        [i for i, d in done if d == "like-bad"],
    )
    untestable = frozenset(
        {index[sha] for sha, build in state.builds.items() if not build.ok}
        | {i for i, d in done if d == "unknown"}
    )
    following = None if running else next_candidate(where, untestable)
    return Standing(where, untestable, following, running)
