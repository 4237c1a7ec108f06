"""The one analysis: :func:`analyze` computes everything a source supports into an
:class:`~washout.analysis.result.Analysis`, and holds every speed-up of the way there.

- It reads what it needs: the order analysis alone reads only its own columns (much of a
  large CSV's reading time is in the others); every column when carryover, drift, claims
  or what ran are asked.
- What may run beside the order analysis runs in a forked child
  (:func:`washout.analysis.parallel.beside`), on the second core: a long CSV's row checks
  (a failed one is the error, before any result), a store's record and spec (its claims,
  which metric is better which way, the tests' order; the spec's pydantic models take
  long to import), drift and the claims. Meanwhile this process runs the order analysis,
  the caller's ``meanwhile`` (a report imports its figure libraries there), then carryover
  (the longest, whose many pairs would cost more to send back than to keep) and what ran.
- hyperfine's comparison needs each trial's run, CPU time and peak RSS, which the order
  analysis does not: for at most :data:`~washout.stats.compare.COMPARED_TESTS` tests (or
  when asked), it reads them afterwards.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from washout.analysis.result import (
    Analysis,
    Excluded,
    Options,
    Recorded,
    Source,
    WhatRan,
    Worker,
)
from washout.errors import WashoutError
from washout.stats.floats import undefined_on_overflow

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from washout.data.sources import SourceInfo
    from washout.harness.engine import Experiment
    from washout.stats.claims import ClaimResult
    from washout.stats.compare import Comparison
    from washout.stats.context import ContextMargin, ContextResult
    from washout.stats.drift import DriftResult
    from washout.stats.energy import NetEnergy
    from washout.stats.health import HealthJudgement
    from washout.stats.order import OrderAnalysis
    from washout.sweep.result import SweepResult

T = TypeVar("T")
U = TypeVar("U")

ANALYSED_ORDERS: tuple[str, str] = ("fixed", "random")


@dataclass(frozen=True)
class Context:
    """What a source says beside its trials: a store's spec and record, or a running
    experiment's spec. ``better`` maps a metric to ``lower`` or ``higher`` where the spec
    says (and all its tests agree); ``tests`` are the tests in the spec's order;
    ``reference`` the test its comparison's ratios are to (``[experiment] reference``)."""

    claims: tuple[str, ...] = ()
    better: Mapping[str, str] = field(default_factory=dict)
    tests: tuple[str, ...] = ()
    recorded: Recorded | None = None
    notes: tuple[str, ...] = ()
    reference: str | None = None

    @classmethod
    def of_experiment(cls, experiment: Experiment) -> Context:
        """The context of an experiment about to be (or just) run from its spec."""
        tests = experiment.tests
        return cls(
            claims=tuple(experiment.spec.experiment.claims),
            better=_agreed((name, m.better) for t in tests for name, m in t.metrics.items()),
            tests=tuple(t.name for t in tests),
            reference=experiment.spec.experiment.reference,
        )


@dataclass(frozen=True)
class _Why:
    """What the child computes beside the order analysis: the source's context, drift, the
    claims and hyperfine's comparison (with its notes, and the health judgement of the
    trials it read: the trials stay in the child), and why drift could not be computed.
    (Carryover and the detectable shift stay in the parent: carryover's result, 88,000
    pairs at paper scale, costs more to send back than to keep, and the shift's
    simulation needs the order analysis. With them the parent's share about matches the
    child's: bench/RESULTS.md, "Engine overhead per trial".)"""

    context: Context
    drift: DriftResult | None
    claims: tuple[ClaimResult, ...] | None
    failed: dict[str, str]
    comparison: Comparison | None
    compare_notes: list[str]
    judged: HealthJudgement | None


@undefined_on_overflow
def analyze(
    source: str | Path | pd.DataFrame,
    options: Options | None = None,
    *,
    context: Context | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> Analysis:
    """Everything ``source`` supports under ``options`` (module doc): a washout store, a
    long-format CSV, an OrderSage results file, a sweep's directory (``washout sweep
    --dir``) or a long-format DataFrame. ``context`` says what a frame's source knows
    beside its trials (a store's is read from it). ``meanwhile`` is the caller's work to
    run once the order analysis is done, while the child may still work."""
    return _analyze(source, options, context, meanwhile)


def _analyze(
    source: str | Path | pd.DataFrame,
    options: Options | None,
    context: Context | None,
    meanwhile: Callable[[], object] | None,
) -> Analysis:
    import pandas as pd

    options = (options or Options()).checked()
    if not isinstance(source, pd.DataFrame) and Path(source).is_dir():
        from washout.sweep.result import load_sweep_dir

        sweep, settings = load_sweep_dir(Path(source))
        if meanwhile is not None:
            meanwhile()
        return sweep_analysis(sweep, settings, Path(source).name, options, str(source))
    trials, info = _load(source, options)
    from washout.stats.trials import check_metric, without_resource_metrics

    if options.metric is not None:
        where = "the trials" if info is None else str(info.path)
        check_metric(trials, options.metric, where, store=info is not None and info.kind == "store")

    health, trials, unhealthy = _healthy(trials, options)
    analysed = without_resource_metrics(trials, options.metric)
    kind = "frame" if info is None else info.kind

    unsupported = _unsupported(analysed) if None in (options.carryover, options.drift) else {}

    def aside() -> _Why:
        if info is not None and info.check is not None:
            info.check()
        found = context
        if found is None:
            found = Context()
            if info is not None and info.kind == "store":
                found = _store_context(info.path, options.describe)
        drift, failed = _why_of("drift", options.drift, analysed, options, unsupported)
        claims = _claims(analysed, options, found)
        comparison, compare_notes, every = _comparison(trials, info, options, found)
        judged = _judged(every if every is not None else trials) if health is None else None
        return _Why(found, drift, claims, failed, comparison, compare_notes, judged)

    def here() -> tuple[
        OrderAnalysis | None,
        str | None,
        Any,
        dict[str, str],
        WhatRan | None,
        tuple[float, float] | None,
    ]:
        order, note = _order(analysed, options)
        if meanwhile is not None:
            meanwhile()
        carryover, failed = _why_of("carryover", options.carryover, analysed, options, unsupported)
        ran = _what_ran(analysed) if options.describe else None
        return order, note, carryover, failed, ran, _detectable(order)

    forked = (info is not None and info.check is not None) or kind == "store" or options.why
    why, (order, order_note, carryover, carryover_failed, ran, detectable) = (
        _beside(aside, here) if forked else (aside(), here())
    )
    ctx = why.context
    comparison, compare_notes = why.comparison, why.compare_notes
    if health is None:
        health = why.judged
    energy, energy_notes = _energy(analysed, options)
    in_context = _context(analysed, info, options)
    margins: tuple[ContextMargin, ...] = ()
    if in_context is not None:
        from washout.stats.context import context_margins

        margins = context_margins(in_context, why.claims or (), comparison)
    return Analysis(
        source=Source(kind, None if info is None else str(info.path)),
        options=options,
        order=order,
        detectable_shift=detectable,
        comparison=comparison,
        carryover=carryover,
        drift=why.drift,
        claims=why.claims,
        health=health,
        energy=energy,
        context=in_context,
        context_margins=margins,
        recorded=ctx.recorded if options.describe else None,
        what_ran=ran,
        excluded=(*_excluded(analysed), *_unhealthy_excluded(health, unhealthy)),
        notes=tuple(
            n
            for n in (
                None if info is None else info.journaled_note,
                *ctx.notes,
                order_note,
                *_why_notes({**carryover_failed, **why.failed}),
                *compare_notes,
                *energy_notes,
            )
            if n is not None
        ),
        trials=analysed,
    )


def _context(
    analysed: pd.DataFrame, info: SourceInfo | None, options: Options
) -> ContextResult | None:
    """Whether each test's metric depends on the context its trials ran in, per worker
    (one padding is not one layout on two machines), where the trials have context columns
    (``options.context`` None) or where asked (True: an error without them). A source read
    for the order analysis alone has no runs and positions, which the analysis takes out
    first: those trials are read again whole."""
    from washout.data.longformat import CONTEXT_COLUMNS

    if options.context is False:
        return None
    present = [c for c in CONTEXT_COLUMNS if c in analysed and analysed[c].notna().any()]
    if not present:
        if options.context:
            raise WashoutError(
                f"--context: the trials have no context ({', '.join(CONTEXT_COLUMNS)}): "
                "run with [experiment] context or run --context to randomize it"
            )
        return None
    from washout.stats.context import context_effect
    from washout.stats.trials import without_resource_metrics

    trials = analysed
    if info is not None and not {"run", "position"} <= set(analysed.columns):
        from washout.data.sources import load_trials

        trials = without_resource_metrics(load_trials(info.path)[0], options.metric)
    return context_effect(
        trials,
        alpha=options.alpha,
        correction=options.correction,
        by_worker=True,
        metric=options.metric,
    )


def _detectable(order: OrderAnalysis | None) -> tuple[float, float] | None:
    """The shifts these trials would detect, when nothing is significant (simulated as
    ``washout plan`` does); none when a mean is beyond a float, where a shift in % of it
    cannot be simulated."""
    if order is None or order.verdict != "no-evidence":
        return None
    compared = [t for t in order.tests if t.n_fixed and t.n_random]
    if any(t.mean_fixed is None or t.mean_random is None for t in compared):
        return None
    return order.detectable_span()


def sweep_analysis(
    sweep: SweepResult,
    settings: pd.DataFrame | None = None,
    name: str | None = None,
    options: Options | None = None,
    path: str | None = None,
) -> Analysis:
    """The analysis of a sweep (``washout sweep``, ``washout explore``): its result and
    the settings it measured (parameter columns, the metric last), which a report's figures
    draw."""
    return Analysis(
        source=Source("sweep", path),
        options=options or Options(),
        sweep=sweep,
        recorded=Recorded(name=name),
        settings=settings,
    )


def _load(
    source: str | Path | pd.DataFrame, options: Options
) -> tuple[pd.DataFrame, SourceInfo | None]:
    """The trials, and what kind of source they came from (None for a frame). The order
    analysis alone reads its own columns; a long CSV's row checks are left to
    :func:`analyze`, which runs them beside the analysis."""
    import pandas as pd

    from washout.data.longformat import CONTEXT_COLUMNS
    from washout.data.sources import load_trials
    from washout.stats.order import COLUMNS as ORDER_COLUMNS

    if isinstance(source, pd.DataFrame):
        return source, None
    if options.healthy_only:  # every column and measure: a trial's health and its times
        return load_trials(source, resources=True, defer_checks=True)
    alone = not (options.why or options.describe or options.compare or options.context)
    worker = ["worker"] if options.by_worker else []
    columns = (*ORDER_COLUMNS, *worker, *CONTEXT_COLUMNS) if alone else None
    return load_trials(source, columns, defer_checks=True)


def _beside(job: Callable[[], T], work: Callable[[], U]) -> tuple[T, U]:
    """``job()`` from a forked child and ``work()`` from this process, at once (one after
    the other without a second core). An error of ``job``'s (a failed row check) is raised
    first: ``work``'s own error, which the bad rows would explain, only when ``job``
    succeeds."""
    from washout.analysis.parallel import beside

    done: dict[str, Any] = {}

    def meanwhile() -> None:
        try:
            done["result"] = work()
        except Exception as err:  # shown only if ``job`` succeeds
            done["error"] = err

    first = beside(job, meanwhile)
    if "error" in done:
        raise done["error"]
    result: U = done["result"]
    return first, result


def _order(analysed: pd.DataFrame, options: Options) -> tuple[OrderAnalysis | None, str | None]:
    """The fixed-vs-random analysis, or None and why there is none: not both order kinds,
    or fewer than two tests (every order is then the same order). Told from the analysis'
    own counts: a pass over the rows to tell it first cost as much as the analysis."""
    from washout.stats.order import analyze_order

    order = analyze_order(
        analysed,
        alpha=options.alpha,
        correction=options.correction,
        by_worker=options.by_worker,
        ci_confidence=options.ci_confidence,
    )
    kinds = [
        kind
        for kind in ANALYSED_ORDERS
        if any(getattr(t, f"n_{kind}") + getattr(t, f"excluded_{kind}") for t in order.tests)
    ]
    if len(kinds) < 2:
        runs = f"only {kinds[0]}-order runs" if kinds else "no fixed- or random-order runs"
        return None, f"No order analysis: {runs}, so nothing to compare their order with"
    if len({t.test for t in order.tests}) == 1:
        return None, (
            "No order analysis: one test, so every order is the same order (compare two or "
            "more tests)"
        )
    return order, None


def _why_of(
    name: str,
    wanted: bool | None,
    analysed: pd.DataFrame,
    options: Options,
    unsupported: dict[str, str],
) -> tuple[Any, dict[str, str]]:
    """Carryover or drift (``name``) as the options ask, and why not where it was not
    computed: one asked for that the source cannot support is the error; one taken where
    the source supports it leaves a reason instead. The module is imported only when used
    (scipy's import alone is a sizable part of a large analysis)."""
    from importlib import import_module

    if wanted is False:
        return None, {}
    if wanted is None and unsupported.get(name):
        return None, {name: unsupported[name]}
    compute = getattr(import_module(f"washout.stats.{name}"), name)
    try:
        return compute(
            analysed,
            alpha=options.alpha,
            correction=options.correction,
            by_worker=options.by_worker,
            metric=options.metric,
        ), {}
    except WashoutError as err:
        if wanted:
            raise
        return None, {name: str(err)}


def _why_notes(failed: dict[str, str]) -> list[str]:
    """A note per analysis of why that was not computed, one for both when the reason is
    the same."""
    if len(failed) == 2 and len(set(failed.values())) == 1:
        return [f"No carryover or drift analysis: {next(iter(failed.values()))}"]
    return [f"No {name} analysis: {reason}" for name, reason in sorted(failed.items())]


def _claims(
    analysed: pd.DataFrame, options: Options, context: Context
) -> tuple[ClaimResult, ...] | None:
    """The claims of the options and of the source's spec, evaluated; None without any."""
    claims = list(dict.fromkeys([*options.claims, *context.claims]))
    if not claims:
        return None
    from washout.stats.claims import evaluate_claims

    return tuple(
        evaluate_claims(
            analysed,
            claims,
            metric=options.metric,
            alpha=options.alpha,
            correction=options.correction,
        )
    )


WHY_TESTS = 100
"""Carryover and drift are taken unasked for at most this many tests: their cost grows
faster than the tests (drift's resampling draws up to 10 m / alpha times for m
comparisons, and a paper-scale source has thousands; bench/RESULTS.md, "Report time"), so
a large source's report would take many minutes for findings nobody asked for."""


def _unsupported(analysed: pd.DataFrame) -> dict[str, str]:
    """Why carryover or drift cannot find anything in these trials, when it is plain
    before computing them (both look at a test's random-order trials after the first
    position, carryover at the same test after different tests in different runs), or
    why they are not taken unasked (more than :data:`WHY_TESTS` tests)."""
    from washout.data.longformat import is_in

    if not {"test", "order", "run"} <= set(analysed.columns):
        return {}
    tests = analysed["test"].nunique()
    if tests < 2:
        reason = "one test, so no trial of a run comes after another test"
        return {"carryover": reason, "drift": reason}
    if tests > WHY_TESTS:
        reason = (
            f"taken for at most {WHY_TESTS} tests unless asked (--carryover, --drift), and "
            f"there are {tests}"
        )
        return {"carryover": reason, "drift": reason}
    keys = [c for c in ("worker", "run") if c in analysed.columns]
    random = analysed.loc[is_in(analysed["order"], ("random",)), keys]
    if len(random.drop_duplicates()) < 2:
        return {
            "carryover": "fewer than two random-order runs, so no test follows different "
            "tests in different runs"
        }
    return {}


def _comparison(
    trials: pd.DataFrame, info: SourceInfo | None, options: Options, context: Context
) -> tuple[Comparison | None, list[str], pd.DataFrame | None]:
    """hyperfine's comparison, on the trials with their runs and resource metrics, the
    notes on it (why there is none, or that a metric's better direction was assumed), and
    the trials it read (every metric; None when it read none)."""
    from washout.analysis.units import SECOND_METRICS, metric_value
    from washout.data.longformat import RESOURCE_METRICS
    from washout.data.sources import load_trials
    from washout.stats.compare import COMPARED_TESTS, compare_tests, compared_metric

    if options.compare is False or not len(trials):
        return None, [], None
    tests = trials["test"].nunique()
    if options.compare is None and tests > COMPARED_TESTS:
        return (
            None,
            [
                f"No comparison table (hyperfine's): it is made for at most {COMPARED_TESTS} "
                f"tests, and there are {tests}"
            ],
            None,
        )
    every = trials
    # --healthy-only read every column and measure already
    if info is not None and not options.healthy_only:
        if info.kind == "store" or "run" not in trials.columns:
            every = load_trials(info.path, resources=True)[0]  # each trial's run, CPU, RSS
    metric = compared_metric(every, options.metric)
    if metric is None:
        return None, [], every
    said = context.better.get(metric)
    if said is None and metric in (*SECOND_METRICS, *RESOURCE_METRICS):
        said = "lower"  # a time or a size: less is better
    notes = []
    if said is None:
        notes.append(
            f"The source does not say whether a lower or a higher {metric} is better: the "
            "comparison gives each test's ratio to the lowest, not which is better"
        )
    present = set(every["test"].astype(str).unique())
    reference = options.reference or context.reference
    if options.reference is not None and options.reference not in present:
        raise WashoutError(
            f"--reference {reference!r}: no such test (tests: "
            f"{', '.join(repr(t) for t in sorted(present)[:10])})"
        )
    order = [t for t in context.tests if t in present]
    comparison = compare_tests(
        every,
        metric=metric,
        alpha=options.alpha,
        correction=options.correction,
        tests=order or None,
        lower_is_better=said != "higher",
        better_known=said is not None,
        describe=lambda v: metric_value(metric, v),
        reference=reference,
    )
    if reference is not None and not comparison.rankings and len(comparison.summaries) > 1:
        notes.append(
            f"No ratios: the reference {reference!r} has no successful random-order trial "
            "here (the ratios are paired by run)"
        )
    return (comparison if comparison.summaries else None), notes, every


def _healthy(
    trials: pd.DataFrame, options: Options
) -> tuple[HealthJudgement | None, pd.DataFrame, pd.DataFrame | None]:
    """With ``--healthy-only``: which trials were unhealthy, the trials without them, and
    the rows set aside; otherwise none of it, the trials as they are."""
    if not options.healthy_only:
        return None, trials, None
    from washout.stats.health import split_by_health

    split = split_by_health(trials)
    return split.judgement, split.healthy, split.flagged


def _judged(trials: pd.DataFrame) -> HealthJudgement | None:
    """Which trials were unhealthy, where ``trials`` hold health measures with each
    trial's worker, run, position and times (shown; nothing is set aside)."""
    from washout.stats.health import has_health, split_by_health

    needed = {"worker", "run", "position", "started", "ended"}
    if not needed <= set(trials.columns) or not has_health(trials):
        return None
    return split_by_health(trials).judgement


def _unhealthy_excluded(
    health: HealthJudgement | None, unhealthy: pd.DataFrame | None
) -> tuple[Excluded, ...]:
    """The values ``--healthy-only`` set aside, counted, and why."""
    if health is None or unhealthy is None or not health.unhealthy:
        return ()
    from washout.stats.trials import without_resource_metrics

    causes = ", ".join(f"{n} {cause}" for cause, n in health.causes().items())
    return (
        Excluded(
            f"values of {len(health.unhealthy)} unhealthy trials",
            len(without_resource_metrics(unhealthy)),
            f"--healthy-only: {causes}",
        ),
    )


def _energy(
    analysed: pd.DataFrame, options: Options
) -> tuple[tuple[NetEnergy, ...] | None, list[str]]:
    """Each energy metric gross and net of its test's idle arm, where one ran, with the
    warnings of trials too short for RAPL; none without an idle arm."""
    from washout.data.longformat import present
    from washout.stats.energy import IDLE_PREFIX, net_energy, short_energy_trials

    if "test" not in analysed.columns:
        return None, []
    if not any(str(t).startswith(IDLE_PREFIX) for t in present(analysed["test"])):
        return None, []
    energy = net_energy(analysed, confidence=1 - options.alpha)
    notes: list[str] = []
    if {"started", "ended"} <= set(analysed.columns):
        metrics = {e.metric for e in energy}
        notes = [f"Energy: {w}" for w in short_energy_trials(analysed, metrics)]
    return energy, notes


def _store_context(path: Path, describe: bool) -> Context:
    """A store's spec (claims, metrics' better directions, tests' order) and, with
    ``describe``, its record (name, seed, design, runs, spec, workers with their
    environment fingerprints, unsuccessful trials)."""
    from washout.data.store import Store
    from washout.harness.spec import parse_spec_text

    with Store.open(path, readonly=True) as store:
        exp = store.experiment()
        tests = tuple(name for name, _ in store.tests())
        recorded = _recorded(store) if describe else None
    notes: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()
    better: dict[str, str] = {}
    reference = None
    try:
        spec = parse_spec_text(exp.spec_text, str(path))
        claims = tuple(spec.experiment.claims)
        better = _agreed((name, m.better) for t in spec.test for name, m in t.metrics.items())
        reference = spec.experiment.reference
    except WashoutError as err:
        notes = (f"The store's spec could not be read (no claims from it): {err}",)
    return Context(claims, better, tests, recorded, notes, reference)


def _recorded(store: Any) -> Recorded:
    """What a store records beside its trials (see :class:`Recorded`)."""
    exp = store.experiment()
    workers = store.workers()
    prints = Counter(f for *_, f in workers if f)
    usual = prints.most_common(1)[0][0] if prints else None
    counts = store.counts()
    return Recorded(
        name=exp.name,
        seed=exp.seed,
        design=exp.design,
        runs_per_kind=exp.runs_per_kind,
        spec_text=exp.spec_text,
        workers=tuple(
            Worker(name, host, f, None if f is None else f == usual) for _, name, host, f in workers
        ),
        unsuccessful=sum(n for s, n in counts.items() if s not in ("ok", "running", "warmup")),
    )


def _agreed(pairs: Any) -> dict[str, str]:
    """metric -> direction, for the metrics every test gives the same direction."""
    seen: dict[str, set[str]] = {}
    for name, direction in pairs:
        seen.setdefault(name, set()).add(direction)
    return {name: next(iter(d)) for name, d in seen.items() if len(d) == 1}


def _what_ran(trials: pd.DataFrame) -> WhatRan | None:
    """Runs per order kind, tests, metrics, trials, workers, unsuccessful trials and the
    time span, from the trials. A trial is a (worker, run, position), told apart by one
    integer key per row rather than by hashing rows: a paper-scale study's 2.3M rows."""
    import numpy as np
    import pandas as pd

    if not len(trials):
        return None
    trial = _key(trials, ("worker", "run", "position"))
    run = _key(trials, ("worker", "run"))
    _, first_row = np.unique(trial, return_index=True)
    _, run_row = np.unique(run, return_index=True)
    status = trials["status"].iloc[first_row].astype(str).value_counts()
    kinds = trials["order"].iloc[run_row].astype(str).value_counts()
    return WhatRan(
        runs={str(k): int(n) for k, n in kinds.items()},
        tests=int(trials["test"].nunique()),
        metrics=tuple(str(m) for m in pd.unique(trials["metric"]) if not pd.isna(m)),
        trials=len(first_row),
        workers=int(trials["worker"].nunique()) if "worker" in trials.columns else 1,
        unsuccessful={str(k): int(v) for k, v in status.items() if k != "ok"},
        started=_moment(trials, "started", min),
        ended=_moment(trials, "ended", max) or _moment(trials, "started", max),
    )


def _key(trials: pd.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
    """One integer per row for its values of ``columns`` (those the frame has): the
    columns' codes in mixed radix."""
    import numpy as np
    import pandas as pd

    key = np.zeros(len(trials), dtype=np.int64)
    for column in columns:
        if column in trials.columns:
            codes, levels = pd.factorize(trials[column], use_na_sentinel=False)
            key = key * max(len(levels), 1) + codes
    return key


def _moment(trials: pd.DataFrame, column: str, pick: Callable[..., Any]) -> str | None:
    """The earliest (``min``) or latest (``max``) time stamp of ``column`` as ISO 8601 UTC,
    or None. Time stamps as washout writes them (ISO 8601, UTC) order as text, so only the
    end is parsed; a column of other forms is parsed whole."""
    import pandas as pd

    if column not in trials.columns:
        return None
    stamps = trials[column].dropna()
    if stamps.empty:
        return None
    if stamps.dtype.kind in "OU" or isinstance(stamps.dtype, pd.StringDtype):
        text = stamps if isinstance(stamps.dtype, pd.StringDtype) else stamps.astype(str)
        if text.str.endswith("+00:00").all():
            return pd.Timestamp(pick(text)).isoformat()
    parsed = pd.to_datetime(stamps, errors="coerce", utc=True, format="ISO8601").dropna()
    return pick(parsed).isoformat() if len(parsed) else None


def _excluded(analysed: pd.DataFrame) -> tuple[Excluded, ...]:
    """The values the analyses left out, counted by why: unsuccessful trials (by status),
    successful trials without a number, and runs of order kinds the order analysis does
    not compare. The resource metrics (``user``, ``system``, ``max_rss``) and the health
    measures (``health.*``) are not counted: they are analysed only when named, whatever
    the source holds (a store's analysis does not read them; an export holds them), so
    every source of the same trials says the same."""
    import numpy as np
    import pandas as pd

    found: list[Excluded] = []
    if not {"status", "value", "order"} <= set(analysed.columns):
        return tuple(found)
    status = analysed["status"].astype("category")
    for name, n in status.value_counts().items():
        if name != "ok" and n:
            why = (
                "warmups are never analysed"
                if name == "warmup"
                else "only successful trials are analysed"
            )
            found.append(Excluded(f"values of {name} trials", int(n), why))
    values = analysed["value"]
    if values.dtype.kind != "f":
        values = pd.to_numeric(values, errors="coerce")
    ok = (status == "ok").to_numpy()
    missing = int((ok & np.isnan(values.to_numpy(dtype=float))).sum())
    if missing:
        found.append(
            Excluded(
                "values successful trials did not give",
                missing,
                "the metric could not be read from the trial's output",
            )
        )
    orders = analysed["order"].astype("category")
    for name, n in orders[ok].value_counts().items():
        if name not in (*ANALYSED_ORDERS, "warmup") and n:
            found.append(
                Excluded(
                    f"values of {name}-order runs",
                    int(n),
                    "the order analysis compares fixed with random order; carryover and "
                    "drift use random-order runs",
                )
            )
    return tuple(found)
