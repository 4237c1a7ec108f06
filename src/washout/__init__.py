"""washout: order-aware systems performance experiments.

Runs experiments that avoid the ordering trap (Duplyakin et al., USENIX ATC 2023), tells
whether the order of trials changed the results and why, and evaluates a system across
its parameter space with incremental sampling (Hui et al., SIGMOD 2024).

The public API (docs/api.md): :func:`run`, :func:`load`, :func:`analyze`,
:func:`carryover`, :func:`drift`, :func:`claims`, :func:`explore`, :func:`bisect`,
:class:`Store`, :class:`RunResult`, :class:`OrderAnalysis` and :class:`BisectResult`. Each
function imports its heavy modules when called, so ``import washout`` (and ``washout
--help``) stays fast.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from washout.harness.machine_check import check
from washout.version import __version__

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pandas as pd

    from washout.bisection.result import BisectResult
    from washout.data.store import Store
    from washout.stats.carryover import CarryoverResult
    from washout.stats.claims import ClaimResult
    from washout.stats.drift import DriftResult
    from washout.stats.order import OrderAnalysis
    from washout.sweep.incremental import LoopOptions
    from washout.sweep.result import SweepResult
    from washout.sweep.space import Space


# A library logs, an application decides where it goes (``washout -v`` shows it on stderr).
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "OrderAnalysis",
    "RunResult",
    "Store",
    "BisectResult",
    "__version__",
    "analyze",
    "bisect",
    "carryover",
    "check",
    "claims",
    "drift",
    "explore",
    "load",
    "run",
]


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` did: where the data is, the seed, and how the session ended.

    ``planned`` counts trial slots over all workers; ``executed`` the trials run by this
    call; ``failures`` those that failed or timed out; ``complete`` is true when every
    planned slot is done (no stop, no worker lost); ``stopped`` says why it stopped early.
    """

    db: Path
    seed: int
    planned: int
    executed: int
    failures: int
    complete: bool
    stopped: str | None = None
    worker_errors: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the path as a string), e.g. for JSON."""
        return {**asdict(self), "db": str(self.db)}


def _spec(spec: str | Path) -> tuple[Any, str, str]:
    """The parsed spec, its text and its source name: ``spec`` is a path to a TOML file, or
    the spec's text itself (any string with a line break)."""
    from washout.harness.spec import load_spec, parse_spec_text

    if isinstance(spec, str) and "\n" in spec:
        return parse_spec_text(spec, "spec text"), spec, "spec text"
    parsed, text = load_spec(spec)
    return parsed, text, str(spec)


def run(
    spec: str | Path,
    *,
    db: str | Path | None = None,
    seed: int | None = None,
    runs: int | None = None,
    context: Sequence[str] | None = None,
    context_levels: int | None = None,
    quiet: bool = True,
) -> RunResult:
    """Run an experiment as ``washout run SPEC.toml`` does, without its summary or exit code.

    ``spec``: a path to a TOML spec, or the spec's text. ``db``: the store to create
    (refused if it exists); default ``./washout-results/NAME.db`` (the next free name).
    ``seed`` and ``runs`` override the spec's, and so do ``context`` (``["env", "cwd",
    "aslr"]``, any of them) and ``context_levels``, as ``--context``. ``quiet=False``
    prints what runs and how it ended on stderr. The store is closed before this returns;
    a store that can no longer be written raises :class:`~washout.errors.StoreWriteError`.
    """
    import sys

    from washout.errors import StoreWriteError
    from washout.harness.engine import Experiment, execute, new_store
    from washout.harness.spec import context_choice

    parsed, text, source = _spec(spec)
    chosen = context_choice(context, context_levels, ("context", "context_levels"))
    experiment = Experiment.prepare(parsed, text, source, seed=seed, runs=runs, context=chosen)
    with new_store(experiment, db) as store:
        if not quiet:
            print(
                f"washout: {len(experiment.tests)} tests, seed {experiment.plan.seed}, "
                f"data in {store.path}",
                file=sys.stderr,
            )
        outcome = execute(experiment, store)
    if outcome.store_error:
        raise StoreWriteError(outcome.store_error)
    result = RunResult(
        db=outcome.db,
        seed=outcome.seed,
        planned=outcome.planned,
        executed=outcome.executed,
        failures=outcome.failures,
        complete=outcome.complete,
        stopped=outcome.stopped,
        worker_errors=dict(outcome.worker_errors),
    )
    if not quiet:
        print(
            f"washout: {result.executed} trials run, {result.failures} failed"
            + ("" if result.complete else f"; incomplete ({result.stopped or 'worker lost'})"),
            file=sys.stderr,
        )
    return result


def load(source: str | Path) -> pd.DataFrame:
    """The long format (one row per trial and metric) of a washout store, what ``washout
    export`` writes (CSV, JSON or Parquet) or an OrderSage results file, told apart by
    content: every metric of every trial (``user``, ``system`` and ``max_rss`` too),
    ``started`` and ``ended`` as UTC datetimes."""
    from washout.data.sources import load_everything

    return load_everything(source)


def _frame(source: str | Path | pd.DataFrame) -> pd.DataFrame:
    """A long-format frame as given, or loaded from a path, without the resource metrics
    (as ``washout analyze`` analyses it: the spec's own metrics)."""
    from washout.stats.compare import without_resource_metrics

    return without_resource_metrics(load(source) if isinstance(source, str | Path) else source)


def analyze(source: str | Path | pd.DataFrame, **options: Any) -> OrderAnalysis:
    """Did order change the results? Fixed vs random per test x metric, as ``washout
    analyze`` computes it. ``options`` are those of
    :func:`washout.stats.order.analyze_order`: ``alpha``, ``correction``
    (bonferroni | holm), ``by_worker``, ``ci_confidence``."""
    from washout.stats.order import analyze_order

    return analyze_order(_frame(source), **options)


def carryover(source: str | Path | pd.DataFrame, **options: Any) -> CarryoverResult:
    """Which preceding test shifts which test (random-order runs), and the first trial
    after the reset; ``options`` as :func:`washout.stats.carryover.carryover`."""
    from washout.stats.carryover import carryover as carryover_of

    return carryover_of(_frame(source), **options)


def drift(source: str | Path | pd.DataFrame, **options: Any) -> DriftResult:
    """Drift of each test with position, time since the reset and run;
    ``options`` as :func:`washout.stats.drift.drift`."""
    from washout.stats.drift import drift as drift_of

    return drift_of(_frame(source), **options)


def claims(
    source: str | Path | pd.DataFrame, claims: Sequence[str], **options: Any
) -> list[ClaimResult]:
    """Whether each claim ("A < B", "A > 1.1 * B") holds under fixed and under random
    order; ``options`` as :func:`washout.stats.claims.evaluate_claims`."""
    from washout.stats.claims import evaluate_claims

    return evaluate_claims(_frame(source), claims, **options)


def explore(
    space: Space | str | Path,
    options: LoopOptions | None = None,
    *,
    metric: str | None = None,
    full: bool = False,
) -> SweepResult:
    """Incremental sampling on an already measured space, as ``washout explore`` does:
    ``space`` a :class:`~washout.sweep.space.Space` or a CSV path (one row per setting,
    with ``metric`` naming its metric column); ``options`` the sampling options (default:
    ours; ``washout.sweep.incremental.method_options("paper")`` for the paper's). Returns a
    frozen :class:`~washout.sweep.result.SweepResult` (sampling rate, learning curve, R^2,
    terms, points, curves, ranges; ``to_dict()`` for JSON)."""
    from threadpoolctl import threadpool_limits

    from washout.errors import WashoutError
    from washout.sweep.explore import explore as explore_space
    from washout.sweep.incremental import LoopOptions
    from washout.sweep.space import load_space_csv

    if isinstance(space, str | Path):
        if metric is None:
            raise WashoutError(f"{space}: explore needs metric= (the column to model)")
        space = load_space_csv(space, metric)
    with threadpool_limits(1):  # as the CLI: one BLAS thread, so the same numbers
        return explore_space(space, options or LoopOptions(), full=full)


def bisect(
    spec: str | Path,
    *,
    good: str | None = None,
    bad: str | None = None,
    repo: str | Path = ".",
    build: str | None = None,
    directory: str | Path | None = None,
    **options: Any,
) -> BisectResult:
    """Find the commit between ``good`` and ``bad`` that changed the spec's metric, as
    ``washout bisect SPEC --good --bad`` does; ``spec`` a bisect's directory continues
    that bisect (as ``washout resume DIR``). ``options``: ``test``, ``metric``,
    ``threshold`` (a fraction: 0.02), ``alpha``, ``runs``, ``max_runs``, ``seed``,
    ``build_timeout``. Returns the frozen :class:`~washout.bisection.result.BisectResult`
    (``to_dict()`` for JSON); a step that stops raises
    :class:`~washout.bisection.driver.BisectStopped` (its state kept for resuming)."""
    from washout.bisection.driver import Request, advance, start
    from washout.bisection.state import is_bisect_dir
    from washout.errors import WashoutError

    if is_bisect_dir(Path(spec)):
        return advance(Path(spec))
    if good is None or bad is None:
        raise WashoutError(f"{spec}: a new bisect needs good= and bad= (revisions)")
    request = Request(
        spec=Path(spec),
        good=good,
        bad=bad,
        repo=Path(repo),
        build=build,
        directory=None if directory is None else Path(directory),
        **options,
    )
    return advance(start(request))


def __getattr__(name: str) -> Any:
    """The classes of the API, imported only when first used."""
    if name == "BisectResult":
        from washout.bisection.result import BisectResult

        return BisectResult
    if name == "Store":
        from washout.data.store import Store

        return Store
    if name == "OrderAnalysis":
        from washout.stats.order import OrderAnalysis

        return OrderAnalysis
    raise AttributeError(f"module 'washout' has no attribute {name!r}")
