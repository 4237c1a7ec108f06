"""washout: order-aware systems performance experiments.

Runs experiments that avoid the ordering trap (Duplyakin et al., USENIX ATC 2023), tells
whether the order of trials changed the results and why, and evaluates a system across
its parameter space with incremental sampling (Hui et al., SIGMOD 2024).

The public API (docs/api.md): :func:`run` and :func:`compare` (hyperfine's quick form),
:func:`load`, :func:`analyze` (the one analysis, as ``washout analyze`` and the run's
summary compute it), :func:`carryover`, :func:`drift`, :func:`claims`, :func:`explore`,
:func:`bisect`, :func:`check`, :class:`Spec`, :class:`Store`, :class:`RunResult`, and every
result type (``__all__``). Each function imports its heavy modules when called, so
``import washout`` (and ``washout
--help``) stays fast.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from washout.harness.machine_check import check
from washout.version import __version__

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pandas as pd

    from washout.analysis.result import Analysis as Analysis
    from washout.analysis.result import Options as Options
    from washout.bisection.result import BisectResult as BisectResult
    from washout.data.store import Store as Store
    from washout.harness.engine import Experiment
    from washout.harness.machine import MachineCheck as MachineCheck
    from washout.stats.carryover import CarryoverPair as CarryoverPair
    from washout.stats.carryover import CarryoverResult as CarryoverResult
    from washout.stats.carryover import FirstAfterReset as FirstAfterReset
    from washout.stats.claims import ClaimResult as ClaimResult
    from washout.stats.claims import ClaimSide as ClaimSide
    from washout.stats.compare import Comparison as Comparison
    from washout.stats.compare import Ranking as Ranking
    from washout.stats.compare import TestSummary as TestSummary
    from washout.stats.drift import DriftResult as DriftResult
    from washout.stats.drift import DriftRow as DriftRow
    from washout.stats.energy import NetEnergy as NetEnergy
    from washout.stats.health import FlaggedTrial as FlaggedTrial
    from washout.stats.health import HealthJudgement as HealthJudgement
    from washout.stats.health import Stratum as Stratum
    from washout.stats.order import OrderAnalysis as OrderAnalysis
    from washout.stats.order import OrderComparison as OrderComparison
    from washout.sweep.incremental import LoopOptions
    from washout.sweep.result import SweepResult as SweepResult
    from washout.sweep.space import Space


# A library logs, an application decides where it goes (``washout -v`` shows it on stderr).
logging.getLogger(__name__).addHandler(logging.NullHandler())

Correction = Literal["bonferroni", "holm"]
"""A family-wise correction (washout.stats.family)."""

RESULT_TYPES: dict[str, str] = {
    "Analysis": "washout.analysis.result",
    "Options": "washout.analysis.result",
    "OrderAnalysis": "washout.stats.order",
    "OrderComparison": "washout.stats.order",
    "Comparison": "washout.stats.compare",
    "TestSummary": "washout.stats.compare",
    "Ranking": "washout.stats.compare",
    "CarryoverResult": "washout.stats.carryover",
    "CarryoverPair": "washout.stats.carryover",
    "FirstAfterReset": "washout.stats.carryover",
    "DriftResult": "washout.stats.drift",
    "DriftRow": "washout.stats.drift",
    "ClaimResult": "washout.stats.claims",
    "ClaimSide": "washout.stats.claims",
    "HealthJudgement": "washout.stats.health",
    "FlaggedTrial": "washout.stats.health",
    "Stratum": "washout.stats.health",
    "NetEnergy": "washout.stats.energy",
    "SweepResult": "washout.sweep.result",
    "BisectResult": "washout.bisection.result",
    "MachineCheck": "washout.harness.machine",
    "Store": "washout.data.store",
}
"""The public classes, imported when first used: name -> module."""

__all__ = [
    *RESULT_TYPES,
    "RunResult",
    "Spec",
    "__version__",
    "analyze",
    "bisect",
    "carryover",
    "check",
    "claims",
    "compare",
    "drift",
    "explore",
    "load",
    "run",
]


@dataclass(frozen=True)
class Spec:
    """An experiment's spec: its TOML text and where it came from. :meth:`read` reads a
    file, :meth:`from_text` takes the text itself; :func:`run` takes either, or a path."""

    text: str
    source: str = "spec text"

    @classmethod
    def read(cls, path: str | Path) -> Spec:
        """The spec in the TOML file ``path`` (checked when it runs)."""
        from washout.harness.spec import load_spec

        return cls(load_spec(path)[1], str(path))

    @classmethod
    def from_text(cls, text: str, source: str = "spec text") -> Spec:
        """A spec given as TOML text; ``source`` names it in errors."""
        return cls(text, source)


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


def _prepared(
    spec: Spec | str | Path | Sequence[str],
    seed: int | None,
    runs: int | None,
    quick: dict[str, Any],
    context: tuple[list[str], int] | None = None,
) -> Experiment:
    """The experiment ``run`` runs: from a :class:`Spec`, a spec file's path, or commands
    (the quick form, with hyperfine's options in ``quick``); ``context`` (kinds, levels) in
    place of a spec's."""
    from washout.errors import SpecError
    from washout.harness.engine import Experiment
    from washout.harness.spec import parse_spec_text

    if isinstance(spec, str) and "\n" in spec:
        raise SpecError(
            f"spec = {spec[:40]!r}...: a str is a spec file's path; give the spec's text "
            "as washout.Spec.from_text(text)"
        )
    if isinstance(spec, str | Path):
        spec = Spec.read(spec)
    if isinstance(spec, Spec):
        given = [f"{name}=" for name, value in quick.items() if value]
        if given:
            raise SpecError(
                f"{', '.join(given)} go(es) with the quick form (a list of commands); "
                "put them in the spec"
            )
        parsed = parse_spec_text(spec.text, spec.source)
        return Experiment.prepare(
            parsed, spec.text, spec.source, seed=seed, runs=runs, context=context
        )
    from washout.harness.quick import quick_runs
    from washout.harness.spec import spec_from_commands

    commands = list(spec)
    if not commands or not all(isinstance(c, str) for c in commands):
        raise SpecError(f"commands = {commands!r:.80}: expected a list of command strings")
    parsed, text = spec_from_commands(commands, runs=10, seed=seed, context=context, **quick)
    per_kind = quick_runs(parsed, runs, None, None)
    return Experiment.prepare(parsed, text, "python", seed=seed, runs=per_kind)


def run(
    spec: Spec | str | Path | Sequence[str],
    *,
    db: str | Path | None = None,
    seed: int | None = None,
    runs: int | None = None,
    context: Sequence[str] | None = None,
    context_levels: int | None = None,
    quiet: bool = True,
    warmup: int = 0,
    prepare: str | Sequence[str] | None = None,
    reset: str | None = None,
    setup: str | None = None,
    cleanup: str | None = None,
    names: Sequence[str] | None = None,
    output: str | Sequence[str] | None = None,
    conclude: str | Sequence[str] | None = None,
    input: str | None = None,
    reference: str | None = None,
) -> RunResult:
    """Run an experiment as ``washout run`` does, without its summary or exit code.

    ``spec``: a :class:`Spec`, the path of a TOML spec, or a list of commands (hyperfine's
    quick form: each command a test; ``runs`` then counts each command's runs over both
    order kinds, as ``--runs`` does, and without it hyperfine's 3-second budget chooses;
    ``warmup``, ``prepare`` and ``conclude`` (one command, or one per command), ``reset``,
    ``setup``, ``cleanup``, ``names`` and ``output`` (``"null"``, the default, ``"pipe"``,
    ``"inherit"`` or a file's path; one, or one per command), ``input`` (a file every
    command reads as its stdin) and ``reference`` (the command the comparison's ratios are
    to, run first unless it is one of the commands) are hyperfine's options). With
    a spec, ``runs`` counts runs per order kind, as the spec's. ``context``
    (``["env", "cwd", "aslr"]``, any of them, or ``"env,cwd"``) and ``context_levels``
    randomize each trial's context as ``--context`` and ``--context-levels`` do (with a
    spec, in place of its own). ``db``: the store to
    create (refused if it exists); default ``./washout-results/NAME.db`` (the next free
    name). ``quiet=False`` prints what runs and how it ended on stderr. The store is closed
    before this returns; a store that can no longer be written raises
    :class:`~washout.errors.StoreWriteError`.
    """
    import sys

    from washout.errors import StoreWriteError
    from washout.harness.engine import execute, new_store
    from washout.harness.spec import context_choice

    quick = dict(
        warmup=warmup,
        prepare=prepare,
        conclude=conclude,
        reset=reset,
        setup=setup,
        cleanup=cleanup,
        names=list(names) if names else None,
        output=output,
        input=input,
        reference=reference,
    )
    chosen = context_choice(context, context_levels, ("context", "context_levels"))
    experiment = _prepared(spec, seed, runs, quick, chosen)
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


def compare(
    *commands: str,
    runs: int | None = None,
    db: str | Path | None = None,
    seed: int | None = None,
    warmup: int = 0,
    prepare: str | Sequence[str] | None = None,
    reset: str | None = None,
    setup: str | None = None,
    cleanup: str | None = None,
    names: Sequence[str] | None = None,
    quiet: bool = True,
    output: str | Sequence[str] | None = None,
    conclude: str | Sequence[str] | None = None,
    input: str | None = None,
    reference: str | None = None,
) -> Analysis:
    """hyperfine from Python: run ``commands`` (the quick form of :func:`run`, with its
    options) and return the analysis the run's summary prints: hyperfine's comparison
    (``.comparison``), the order analysis and why."""
    result = run(
        list(commands),
        db=db,
        seed=seed,
        runs=runs,
        quiet=quiet,
        warmup=warmup,
        prepare=prepare,
        reset=reset,
        setup=setup,
        cleanup=cleanup,
        names=names,
        output=output,
        conclude=conclude,
        input=input,
        reference=reference,
    )
    return analyze(result.db, carryover=None, drift=None, compare=True)


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
    from washout.stats.trials import without_resource_metrics

    return without_resource_metrics(load(source) if isinstance(source, str | Path) else source)


def analyze(
    source: str | Path | pd.DataFrame,
    *,
    alpha: float = 0.05,
    correction: Correction = "bonferroni",
    by_worker: bool = False,
    ci_confidence: float | None = None,
    metric: str | None = None,
    carryover: bool | None = False,
    drift: bool | None = False,
    claims: Sequence[str] = (),
    compare: bool | None = None,
    healthy_only: bool = False,
    context: bool | None = None,
    reference: str | None = None,
) -> Analysis:
    """Everything ``washout analyze`` computes, as one frozen
    :class:`~washout.analysis.result.Analysis` (``.order``, ``.comparison``,
    ``.carryover``, ``.drift``, ``.claims``, ``.notes``; ``to_dict()`` is ``--format
    json``). ``source``: a store, long CSV, OrderSage file, a sweep's directory or a
    long-format DataFrame. ``carryover``/``drift``: True asks for them (an error where the
    source cannot support them), None takes them where it can, False leaves them out;
    ``claims`` add to a store's spec's; ``compare``: hyperfine's comparison (None: for at
    most 20 tests); ``healthy_only``: the trials a health measure flags are set aside
    first (``.health`` says which and why); ``context``: whether each metric depends on the
    context its trials ran in (``.context``, and the comparisons set against it,
    ``.context_margins``), None where the trials have one; ``reference``: the test the
    comparison's ratios are to (a store's ``[experiment] reference``, else the fastest)."""
    from washout.analysis.compute import analyze as analyze_source
    from washout.analysis.result import Options

    options = Options(
        alpha=alpha,
        correction=correction,
        by_worker=by_worker,
        ci_confidence=ci_confidence,
        metric=metric,
        carryover=carryover,
        drift=drift,
        claims=tuple(claims),
        compare=compare,
        healthy_only=healthy_only,
        context=context,
        reference=reference,
    )
    return analyze_source(source, options)


def carryover(
    source: str | Path | pd.DataFrame,
    *,
    alpha: float = 0.05,
    correction: Correction = "bonferroni",
    by_worker: bool = False,
    metric: str | None = None,
) -> CarryoverResult:
    """Which preceding test shifts which test (random-order runs), and the first trial
    after the reset (:func:`washout.stats.carryover.carryover`)."""
    from washout.stats.carryover import carryover as carryover_of

    return carryover_of(
        _frame(source), alpha=alpha, correction=correction, by_worker=by_worker, metric=metric
    )


def drift(
    source: str | Path | pd.DataFrame,
    *,
    alpha: float = 0.05,
    correction: Correction = "bonferroni",
    by_worker: bool = False,
    metric: str | None = None,
    seed: int = 0,
) -> DriftResult:
    """Drift of each test with position, time since the reset and run, and a level that
    wanders across runs (:func:`washout.stats.drift.drift`; ``seed``: of its resampling)."""
    from washout.stats.drift import drift as drift_of

    return drift_of(
        _frame(source),
        alpha=alpha,
        correction=correction,
        by_worker=by_worker,
        metric=metric,
        seed=seed,
    )


def claims(
    source: str | Path | pd.DataFrame,
    claims: Sequence[str],
    *,
    metric: str | None = None,
    alpha: float = 0.05,
    correction: Correction = "bonferroni",
) -> list[ClaimResult]:
    """Whether each claim ("A < B", "A > 1.1 * B") holds under fixed and under random
    order (:func:`washout.stats.claims.evaluate_claims`)."""
    from washout.stats.claims import evaluate_claims

    return evaluate_claims(
        _frame(source), claims, metric=metric, alpha=alpha, correction=correction
    )


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
    test: str | None = None,
    metric: str | None = None,
    threshold: float | None = None,
    alpha: float = 0.05,
    runs: int = 10,
    max_runs: int = 60,
    seed: int | None = None,
    build_timeout: float | None = None,
) -> BisectResult:
    """Find the commit between ``good`` and ``bad`` that changed the spec's metric, as
    ``washout bisect SPEC --good --bad`` does; ``spec`` a bisect's directory continues
    that bisect (as ``washout resume DIR``). ``threshold`` is a fraction (0.02); the other
    options are ``washout bisect``'s. Returns the frozen
    :class:`~washout.bisection.result.BisectResult` (``to_dict()`` for JSON); a step that
    stops raises
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
        test=test,
        metric=metric,
        threshold=threshold,
        alpha=alpha,
        runs=runs,
        max_runs=max_runs,
        seed=seed,
        build_timeout=build_timeout,
    )
    return advance(start(request))


def __getattr__(name: str) -> Any:
    """The classes of the API, imported only when first used."""
    if name in RESULT_TYPES:
        from importlib import import_module

        return getattr(import_module(RESULT_TYPES[name]), name)
    raise AttributeError(f"module 'washout' has no attribute {name!r}")
