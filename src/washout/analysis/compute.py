"""The one analysis: :func:`analyze` computes everything a source supports into an
:class:`~washout.analysis.result.Analysis`, and holds every speed-up of the way there.

- It reads what it needs: the order analysis alone reads only its own columns (a third
  faster on a large CSV); every column when carryover, drift, claims or what ran are asked.
- What may run beside the order analysis runs in a forked child
  (:func:`washout.analysis.parallel.beside`), on the second core: a long CSV's row checks
  (a failed one is the error, before any result), a store's record and spec (its claims,
  which metric is better which way, the tests' order; the spec's pydantic models take
  0.05 s to import), and the analyses of why (carryover, drift, claims). Meanwhile this
  process runs the order analysis, then the caller's ``meanwhile`` (a report imports its
  figure libraries there).
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

if TYPE_CHECKING:
    import pandas as pd

    from washout.data.sources import SourceInfo
    from washout.harness.engine import Experiment
    from washout.stats.carryover import CarryoverResult
    from washout.stats.claims import ClaimResult
    from washout.stats.compare import Comparison
    from washout.stats.drift import DriftResult
    from washout.stats.order import OrderAnalysis
    from washout.sweep.result import SweepResult

T = TypeVar("T")
U = TypeVar("U")

ANALYSED_ORDERS: tuple[str, str] = ("fixed", "random")


@dataclass(frozen=True)
class Context:
    """What a source says beside its trials: a store's spec and record, or a running
    experiment's spec. ``better`` maps a metric to ``lower`` or ``higher`` where the spec
    says (and all its tests agree); ``tests`` are the tests in the spec's order."""

    claims: tuple[str, ...] = ()
    better: Mapping[str, str] = field(default_factory=dict)
    tests: tuple[str, ...] = ()
    recorded: Recorded | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def of_experiment(cls, experiment: Experiment) -> Context:
        """The context of an experiment about to be (or just) run from its spec."""
        tests = experiment.tests
        return cls(
            claims=tuple(experiment.spec.experiment.claims),
            better=_agreed((name, m.better) for t in tests for name, m in t.metrics.items()),
            tests=tuple(t.name for t in tests),
        )


@dataclass(frozen=True)
class _Why:
    """What the child computes beside the order analysis."""

    context: Context
    carryover: CarryoverResult | None
    drift: DriftResult | None
    claims: tuple[ClaimResult, ...] | None
    notes: tuple[str, ...]


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
    import numpy as np

    # Values near the float limit make means and spreads overflow: those are reported as
    # undefined (null), not as warnings on stderr.
    with np.errstate(all="ignore"):
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
    from washout.stats.compare import without_resource_metrics

    analysed = without_resource_metrics(trials, options.metric)
    kind = "frame" if info is None else info.kind

    def aside() -> _Why:
        if info is not None and info.check is not None:
            info.check()
        found = context
        if found is None:
            found = Context()
            if info is not None and info.kind == "store":
                found = _store_context(info.path, options.describe)
        return _why(analysed, options, found)

    def here() -> tuple[OrderAnalysis | None, str | None]:
        order = _order(analysed, options)
        if meanwhile is not None:
            meanwhile()
        return order

    forked = (info is not None and info.check is not None) or kind == "store" or options.why
    why, (order, order_note) = _beside(aside, here) if forked else (aside(), here())
    ctx = why.context
    comparison, compare_notes = _comparison(trials, info, options, ctx)
    detectable = _detectable(order)
    return Analysis(
        source=Source(kind, None if info is None else str(info.path)),
        options=options,
        order=order,
        detectable_shift=detectable,
        comparison=comparison,
        carryover=why.carryover,
        drift=why.drift,
        claims=why.claims,
        recorded=ctx.recorded if options.describe else None,
        what_ran=_what_ran(analysed) if options.describe else None,
        excluded=_excluded(trials, analysed),
        notes=tuple(
            n for n in (*ctx.notes, order_note, *why.notes, *compare_notes) if n is not None
        ),
        trials=analysed,
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

    from washout.data.sources import load_trials
    from washout.stats.order import COLUMNS as ORDER_COLUMNS

    if isinstance(source, pd.DataFrame):
        return source, None
    alone = not (options.why or options.describe or options.compare)
    columns = (*ORDER_COLUMNS, *(["worker"] if options.by_worker else [])) if alone else None
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


def _why(analysed: pd.DataFrame, options: Options, context: Context) -> _Why:
    """Carryover, drift and the claims (the options' and the spec's), as the options ask:
    one that is asked for and that the source cannot support is the error; one taken where
    the source supports it leaves a note instead. Each module is imported only when used
    (scipy's import alone is a sizable part of a large analysis)."""
    from importlib import import_module

    shared: dict[str, Any] = dict(
        alpha=options.alpha,
        correction=options.correction,
        by_worker=options.by_worker,
        metric=options.metric,
    )
    found: dict[str, Any] = {}
    failed: dict[str, str] = {}
    unsupported = _unsupported(analysed) if None in (options.carryover, options.drift) else {}
    for name, wanted in (("carryover", options.carryover), ("drift", options.drift)):
        if wanted is False:
            continue
        if wanted is None and unsupported.get(name):
            failed[name] = unsupported[name]
            continue
        compute = getattr(import_module(f"washout.stats.{name}"), name)
        try:
            found[name] = compute(analysed, **shared)
        except WashoutError as err:
            if wanted:
                raise
            failed[name] = str(err)
    notes = []
    if len(set(failed.values())) == 1 and len(failed) == 2:
        notes.append(f"No carryover or drift analysis: {next(iter(failed.values()))}")
    else:
        notes += [f"No {name} analysis: {reason}" for name, reason in failed.items()]
    claims = list(dict.fromkeys([*options.claims, *context.claims]))
    results = None
    if claims:
        from washout.stats.claims import evaluate_claims

        results = tuple(
            evaluate_claims(
                analysed,
                claims,
                metric=options.metric,
                alpha=options.alpha,
                correction=options.correction,
            )
        )
    return _Why(context, found.get("carryover"), found.get("drift"), results, tuple(notes))


def _unsupported(analysed: pd.DataFrame) -> dict[str, str]:
    """Why carryover or drift cannot find anything in these trials, when it is plain
    before computing them: both look at a test's random-order trials after the first
    position, carryover at the same test after different tests in different runs."""
    from washout.data.longformat import is_in

    if not {"test", "order", "run"} <= set(analysed.columns):
        return {}
    if analysed["test"].nunique() < 2:
        reason = "one test, so no trial of a run comes after another test"
        return {"carryover": reason, "drift": reason}
    random = analysed.loc[is_in(analysed["order"], ("random",))]
    keys = [c for c in ("worker", "run") if c in random.columns]
    if len(random[keys].drop_duplicates()) < 2:
        return {
            "carryover": "fewer than two random-order runs, so no test follows different "
            "tests in different runs"
        }
    return {}


def _comparison(
    trials: pd.DataFrame, info: SourceInfo | None, options: Options, context: Context
) -> tuple[Comparison | None, list[str]]:
    """hyperfine's comparison, on the trials with their runs and resource metrics, and the
    notes on it: why there is none, or that a metric's better direction was assumed."""
    from washout.analysis.units import SECOND_METRICS, metric_value
    from washout.data.longformat import RESOURCE_METRICS
    from washout.data.sources import load_trials
    from washout.stats.compare import COMPARED_TESTS, compare_tests, compared_metric

    if options.compare is False or not len(trials):
        return None, []
    tests = trials["test"].nunique()
    if options.compare is None and tests > COMPARED_TESTS:
        return None, [
            f"No comparison table (hyperfine's): it is made for at most {COMPARED_TESTS} "
            f"tests, and there are {tests}"
        ]
    every = trials
    if info is not None and (info.kind == "store" or "run" not in trials.columns):
        every = load_trials(info.path, resources=True)[0]  # with each trial's run, CPU, RSS
    metric = compared_metric(every, options.metric)
    if metric is None:
        return None, []
    said = context.better.get(metric)
    notes = []
    if said is None and metric not in (*SECOND_METRICS, *RESOURCE_METRICS):
        notes.append(
            f"The comparison takes the lower {metric} as the better (the source does not "
            "say which is better)"
        )
    present = set(every["test"].astype(str).unique())
    order = [t for t in context.tests if t in present]
    comparison = compare_tests(
        every,
        metric=metric,
        alpha=options.alpha,
        correction=options.correction,
        tests=order or None,
        lower_is_better=said != "higher",
        describe=lambda v: metric_value(metric, v),
    )
    return (comparison if comparison.summaries else None), notes


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
    try:
        spec = parse_spec_text(exp.spec_text, str(path))
        claims = tuple(spec.experiment.claims)
        better = _agreed((name, m.better) for t in spec.test for name, m in t.metrics.items())
    except WashoutError as err:
        notes = (f"The store's spec could not be read (no claims from it): {err}",)
    return Context(claims, better, tests, recorded, notes)


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
    time span, from the trials."""
    import pandas as pd

    if not len(trials):
        return None
    keys = [c for c in ("worker", "run", "position") if c in trials.columns]
    one = trials.drop_duplicates(keys) if keys else trials
    runs = trials.drop_duplicates([c for c in ("worker", "run") if c in trials.columns])
    status = one["status"].astype(str).value_counts()
    started = ended = None
    if "started" in trials.columns:
        start = pd.to_datetime(trials["started"], errors="coerce", utc=True, format="ISO8601")
        if start.notna().any():
            started = start.min().isoformat()
            end = start.max()
            if "ended" in trials.columns:
                stop = pd.to_datetime(trials["ended"], errors="coerce", utc=True, format="ISO8601")
                end = max(end, stop.max()) if stop.notna().any() else end
            ended = end.isoformat()
    return WhatRan(
        runs={str(k): int(n) for k, n in runs["order"].astype(str).value_counts().items()},
        tests=int(trials["test"].nunique()),
        metrics=tuple(map(str, dict.fromkeys(trials["metric"].astype(str)))),
        trials=len(one),
        workers=int(trials["worker"].nunique()) if "worker" in trials.columns else 1,
        unsuccessful={str(k): int(v) for k, v in status.items() if k != "ok"},
        started=started,
        ended=ended,
    )


def _excluded(trials: pd.DataFrame, analysed: pd.DataFrame) -> tuple[Excluded, ...]:
    """The values the analyses left out, counted by why: resource metrics not named,
    unsuccessful trials (by status), successful trials without a number, and runs of order
    kinds the order analysis does not compare."""
    import numpy as np
    import pandas as pd

    from washout.data.longformat import RESOURCE_METRICS

    found = []
    resources = len(trials) - len(analysed)
    if resources:
        found.append(
            Excluded(
                f"values of {', '.join(RESOURCE_METRICS)}",
                resources,
                "CPU time and peak RSS are analysed only when named: analyze --metric",
            )
        )
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
