"""The one answer washout gives about a source: :class:`Analysis`, frozen and typed.

Everything a source supports, in one result: the fixed-vs-random order analysis, hyperfine's
comparison, carryover (with the first trial after the reset), drift, the user's claims, a
sweep's conclusions, what the source records beside its trials, what ran, what was left out
and why. ``washout analyze``, the run's summary, ``washout report``, the Python API and the
sweep commands all get it from :func:`washout.analysis.compute.analyze`; every output
(terminal, JSON, CSV, Markdown, HTML: :mod:`washout.report`) is rendered from it alone.

``to_dict()`` is the ``analyze --format json`` document under :data:`SCHEMA` version
:data:`SCHEMA_VERSION` (docs/api.md); ``Analysis.from_dict`` reads it back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, get_type_hints

from washout.analysis.plain import finite_or_none, typed
from washout.errors import WashoutError
from washout.stats.family import check_alpha, check_method
from washout.stats.median_ci import check_confidence
from washout.version import __version__

if TYPE_CHECKING:
    import pandas as pd

    from washout.stats.carryover import CarryoverResult
    from washout.stats.claims import ClaimResult
    from washout.stats.compare import Comparison
    from washout.stats.context import ContextMargin, ContextResult
    from washout.stats.drift import DriftResult
    from washout.stats.energy import NetEnergy
    from washout.stats.health import HealthJudgement
    from washout.stats.order import OrderAnalysis
    from washout.sweep.result import SweepResult

SCHEMA = "washout-analysis"
SCHEMA_VERSION = 1
"""Raised when a key changes meaning or goes away; keys may be added within a version."""


@dataclass(frozen=True)
class Options:
    """What to analyse and at what level: the CLI's options and the API's keywords.

    ``carryover`` and ``drift``: True asks for them (a source that cannot support them is
    an error), None takes them where the source supports them (a note says why not), False
    leaves them out. ``claims`` are checked besides those a store's spec makes.
    ``compare``: hyperfine's comparison; None gives it for at most
    :data:`~washout.stats.compare.COMPARED_TESTS` tests. ``describe``: what the source
    records and what ran (a report's first section). ``healthy_only``: the trials a
    health measure flags (:mod:`washout.stats.health`) are set aside before any analysis.
    ``context``: whether a metric depends
    on the context its trials ran in (``[experiment] context``); None takes it where the
    trials have context columns, True asks for it (an error where they have none).
    ``reference``: the test the comparison's ratios are to (hyperfine's ``--reference``;
    None: the fastest).
    """

    alpha: float = 0.05
    correction: str = "bonferroni"
    by_worker: bool = False
    ci_confidence: float | None = None
    metric: str | None = None
    carryover: bool | None = False
    drift: bool | None = False
    claims: tuple[str, ...] = ()
    compare: bool | None = None
    describe: bool = False
    healthy_only: bool = False
    context: bool | None = None
    reference: str | None = None

    def checked(self) -> Options:
        """These options with alpha, correction and the CI confidence checked (a one-line
        error names a bad one) and the correction's name lower-cased."""
        return replace(
            self,
            alpha=check_alpha(self.alpha),
            correction=check_method(self.correction),
            ci_confidence=None
            if self.ci_confidence is None
            else check_confidence(self.ci_confidence),
            claims=tuple(self.claims),
        )

    @property
    def why(self) -> bool:
        """Whether an analysis of why (carryover, drift or claims) may be asked for."""
        return self.carryover is not False or self.drift is not False or bool(self.claims)


@dataclass(frozen=True)
class Source:
    """Where the trials came from: ``kind`` is one of
    :data:`~washout.data.sources.SOURCE_KINDS` (store, long-csv, long-json, long-parquet,
    ordersage), frame (a DataFrame given from Python) or sweep (a sweep's directory or
    result)."""

    kind: str
    path: str | None = None


@dataclass(frozen=True)
class Worker:
    """A worker as the store knows it; ``matched``: its environment fingerprint is the one
    most workers have (None when it has none)."""

    name: str
    host: str
    fingerprint: str | None
    matched: bool | None


@dataclass(frozen=True)
class Recorded:
    """What a source records beside its trials (a store much, a CSV nothing):
    ``unsuccessful`` counts the store's trials that did not succeed (warmups and trials
    still running aside)."""

    name: str | None = None
    seed: int | None = None
    design: str | None = None
    runs_per_kind: int | None = None
    spec_text: str | None = None
    workers: tuple[Worker, ...] = ()
    unsuccessful: int | None = None


@dataclass(frozen=True)
class WhatRan:
    """What the trials say ran: runs per order kind (worker x run), tests, metrics, trials,
    workers, trials per unsuccessful status, and the first start and last end (UTC,
    ISO 8601; None without time stamps)."""

    runs: dict[str, int]
    tests: int
    metrics: tuple[str, ...]
    trials: int
    workers: int
    unsuccessful: dict[str, int]
    started: str | None
    ended: str | None


@dataclass(frozen=True)
class Excluded:
    """Values (one per trial and metric) the analyses did not use, and why."""

    what: str
    count: int
    reason: str


@dataclass(frozen=True)
class Analysis:
    """Everything washout found in a source (module doc). Parts a source or the options do
    not support are None, and ``notes`` says why.

    ``detectable_shift``: when no comparison is significant, the smallest and largest
    Delta% these trials would detect with 80% power (as ``washout plan`` simulates it).
    ``health``: which trials were unhealthy and why, where the trials have health
    measures (set aside when ``options.healthy_only``, else only shown). ``energy``: each
    energy metric gross and net of the idle arm, where one ran.
    ``trials`` (the long-format trials analysed) and ``settings`` (a sweep's measured
    settings) are what the report's figures draw; they are not part of ``to_dict()``.
    """

    SCHEMA: ClassVar[str] = SCHEMA
    SCHEMA_VERSION: ClassVar[int] = SCHEMA_VERSION

    source: Source
    options: Options
    order: OrderAnalysis | None = None
    detectable_shift: tuple[float, float] | None = None
    comparison: Comparison | None = None
    carryover: CarryoverResult | None = None
    drift: DriftResult | None = None
    claims: tuple[ClaimResult, ...] | None = None
    health: HealthJudgement | None = None
    energy: tuple[NetEnergy, ...] | None = None
    context: ContextResult | None = None
    context_margins: tuple[ContextMargin, ...] = ()
    sweep: SweepResult | None = None
    recorded: Recorded | None = None
    what_ran: WhatRan | None = None
    excluded: tuple[Excluded, ...] = ()
    notes: tuple[str, ...] = ()
    trials: pd.DataFrame | None = field(default=None, compare=False, repr=False)
    settings: pd.DataFrame | None = field(default=None, compare=False, repr=False)

    @property
    def verdict(self) -> str:
        """``order-matters``, ``no-evidence``, or ``not-compared`` (no order analysis)."""
        return self.order.verdict if self.order is not None else "not-compared"

    @property
    def first_after_reset(self) -> tuple[Any, ...]:
        """The first trial after the reset, pooled per metric (part of carryover)."""
        return tuple(self.carryover.first_after_reset) if self.carryover else ()

    @property
    def warnings(self) -> tuple[tuple[str, str], ...]:
        """Every warning, as (where, text): the order analysis' per comparison, then
        hyperfine's per test."""
        found: list[tuple[str, str]] = []
        for t in self.order.tests if self.order else ():
            where = f"{t.test}/{t.metric}" + ("" if t.worker is None else f"@{t.worker}")
            found += [(where, w) for w in t.warnings]
        for s in self.comparison.summaries if self.comparison else ():
            found += [(s.test, w) for w in s.warnings]
        return tuple(found)

    def to_dict(self) -> dict[str, Any]:
        """The ``analyze --format json`` document: plain data, strict JSON (null for NaN
        and infinities), every part a source or the options did not support null."""

        def part(value: Any) -> Any:
            return None if value is None else value.to_dict()

        return finite_or_none(
            {
                "schema": SCHEMA,
                "schema_version": SCHEMA_VERSION,
                "washout_version": __version__,
                "source": asdict(self.source),
                "options": asdict(self.options),
                "order": part(self.order),
                "detectable_shift": self.detectable_shift,
                "comparison": part(self.comparison),
                "carryover": part(self.carryover),
                "drift": part(self.drift),
                "claims": None if self.claims is None else [c.to_dict() for c in self.claims],
                "health": part(self.health),
                "energy": None if self.energy is None else [e.to_dict() for e in self.energy],
                "context": part(self.context),
                "context_margins": [m.to_dict() for m in self.context_margins],
                "sweep": part(self.sweep),
                "recorded": None if self.recorded is None else asdict(self.recorded),
                "what_ran": None if self.what_ran is None else asdict(self.what_ran),
                "excluded": [asdict(e) for e in self.excluded],
                "notes": list(self.notes),
            }
        )

    @classmethod
    def from_dict(cls, data: object, source: str = "analysis") -> Analysis:
        """The analysis ``to_dict()`` gave (read back from JSON): a one-line error names
        ``source``, the key and the value that do not fit, or a schema version this washout
        cannot read."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise WashoutError(f"{source}: not a washout analysis (schema {SCHEMA!r})")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise WashoutError(
                f"{source}: schema_version = {version!r}: this washout reads version "
                f"{SCHEMA_VERSION} (washout {__version__})"
            )
        import pandas as pd

        from washout.stats.carryover import CarryoverResult
        from washout.stats.claims import ClaimResult
        from washout.stats.compare import Comparison
        from washout.stats.context import ContextMargin, ContextResult
        from washout.stats.drift import DriftResult
        from washout.stats.energy import NetEnergy
        from washout.stats.health import HealthJudgement
        from washout.stats.order import OrderAnalysis
        from washout.sweep.result import SweepResult

        parts_types = (
            CarryoverResult,
            ClaimResult,
            Comparison,
            ContextMargin,
            ContextResult,
            DriftResult,
            HealthJudgement,
            NetEnergy,
            OrderAnalysis,
        )
        types = {t.__name__: t for t in (*parts_types, SweepResult)}
        hints = get_type_hints(cls, localns={"pd": pd, **types})
        parts: dict[str, Any] = {}
        try:
            for name in (
                "source",
                "options",
                "order",
                "detectable_shift",
                "comparison",
                "carryover",
                "drift",
                "claims",
                "health",
                "energy",
                "context",
                "context_margins",
                "recorded",
                "what_ran",
                "excluded",
                "notes",
            ):
                if name in data:
                    parts[name] = typed(hints[name], data[name], name)
        except WashoutError as err:
            raise WashoutError(f"{source}: {err}") from None
        sweep = data.get("sweep")
        if sweep is not None:
            parts["sweep"] = SweepResult.from_dict(sweep, f"{source}: sweep")
        return cls(**parts)

    def to_frame(self) -> pd.DataFrame:
        """The main table: one row per comparison of the order analysis
        (:meth:`OrderAnalysis.to_frame`), or per important point of a sweep; empty when
        there is neither."""
        import pandas as pd

        if self.order is not None:
            return self.order.to_frame()
        if self.sweep is not None:
            return self.sweep.to_frame()
        return pd.DataFrame()

    def _repr_html_(self) -> str:
        """A notebook's view: the verdict, the order table and the notes."""
        import html

        head = f"<p><b>{html.escape(self.verdict)}</b>"
        if self.order is not None:
            head += (
                f": {len(self.order.significant)} of {self.order.family_size} comparisons "
                f"significant ({html.escape(self.order.correction)}, alpha = "
                f"{self.order.alpha:g})"
            )
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        table = self.to_frame().to_html(index=False, na_rep="")
        return head + "</p>" + table + (f"<ul>{notes}</ul>" if notes else "")
