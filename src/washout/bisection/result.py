"""What a bisect returns: a frozen result carrying everything its text, JSON and figure show
(``to_dict()`` is ``washout bisect --format json`` and ``DIR/result.json``; ``from_dict()``
reads it back, checking every field)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from washout.bisection.build import Build
from washout.stats.equivalence import PairedEstimate
from washout.stats.frames import FrameView
from washout.sweep.result import from_plain, to_plain

if TYPE_CHECKING:
    import pandas as pd

ENDINGS = ("first-bad", "range", "no-change", "unfinished")
"""How a bisect ends: the first bad commit; a range of commits (steps unknown, builds
skipped, the metric not monotone); good and bad not shown to differ (or within the
threshold); or not yet ended (stopped, to be resumed)."""


@dataclass(frozen=True)
class CommitRow:
    """A commit of the history and what the bisect knows of it: ``state`` good, bad,
    like-good, like-bad, unknown, skipped (its build failed) or untested; ``vs_good`` its
    measured ratio to good (the bad commit's from the check)."""

    index: int
    commit: str
    subject: str
    state: str
    build: str
    step: int | None
    vs_good: PairedEstimate | None


@dataclass(frozen=True)
class StepRow:
    """A step as the report shows it: its decision and why, the runs and looks it took,
    the error rate it was allowed (``alpha``) and spent, its margin (a fraction), its
    estimates at its last look, and what it cost."""

    index: int
    kind: str
    commit: str
    reference: str
    subject: str
    decision: str
    final: bool
    reason: str
    runs: int
    looks: int
    alpha: float
    spent: float
    margin: float | None
    vs_good: PairedEstimate | None
    vs_bad: PairedEstimate | None
    change: PairedEstimate | None
    trials: int
    seconds: float
    stores: tuple[str, ...]


@dataclass(frozen=True)
class Cost:
    """What a bisect cost: builds (and failed builds) and their time, trials, runs and the
    time spent building and measuring."""

    builds: int
    builds_failed: int
    build_seconds: float
    trials: int
    runs: int
    seconds: float


@dataclass(frozen=True)
class BisectResult(FrameView):
    """A bisect's answer and everything behind it.

    ``ending``: one of :data:`ENDINGS`. ``culprit``: the first bad commit (first-bad only);
    ``first``..``last``: the commits that may hold the change (the range; the culprit
    alone when found). ``monotone``: no step measured a commit beyond good or bad by more
    than the margin. ``change``: bad against good (every run that had both: the check's and the
    candidate steps'); ``effect``: ``last`` against the commit before
    ``first`` (the culprit against its parent), each a ratio with its interval at
    1 - alpha.
    """

    directory: str
    spec: str
    repo: str
    test: str
    metric: str
    better: str
    alpha: float
    threshold: float | None
    runs: int
    max_runs: int
    seed: int
    good: str
    bad: str
    ending: str
    culprit: str | None
    first: str | None
    last: str | None
    monotone: bool
    change: PairedEstimate | None
    effect: PairedEstimate | None
    summary: str
    notes: tuple[str, ...]
    commits: tuple[CommitRow, ...]
    steps: tuple[StepRow, ...]
    builds: tuple[Build, ...]
    cost: Cost

    def to_frame(self) -> pd.DataFrame:
        """One row per step (the step table of ``washout bisect``'s text), each estimate's
        fields as columns of their own (``vs_good.ratio``...)."""
        import pandas as pd

        return pd.json_normalize([to_plain(step) for step in self.steps])

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        plain: dict[str, Any] = to_plain(self)
        return plain

    @classmethod
    def from_dict(cls, data: object, source: str = "bisect") -> BisectResult:
        """The result ``to_dict()`` gave, each field checked against its type: a one-line
        error names ``source``, the field and the value otherwise."""
        result: BisectResult = from_plain(cls, data, source)
        return result
