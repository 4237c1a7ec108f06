"""The engine: executes a plan on every worker and records each trial as it finishes.

It only executes the plan and records; it decides nothing about order (that is
:mod:`washout.harness.plan`) and analyzes nothing. Resume is "re-plan from the stored spec and
seed, skip what the store already holds": a planned slot (worker, run, position) is done
when the store has a finished attempt that the failure policy accepts.

A run is the unit of order: every trial must follow its planned predecessors since its
run's reset. So a run interrupted part-way (washout killed or stopped, a worker lost) is
re-run whole, a fresh reset and then every position from 0; the trials of the interrupted
attempt stay in the store marked superseded, out of the analysis. A failed or timed-out
trial of a finished run stays as recorded (it ran, in its place).

Workers run concurrently (asyncio), each its own full schedule; a failing worker stops
only itself. One process writes a store at a time (its :class:`StoreWriter` holds the
lock). Ctrl-C stops every worker at the next trial boundary; a second Ctrl-C, or SIGTERM,
stops at once (the trial in flight is killed with its process group and kept as
``interrupted``); teardown runs in every case.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from secrets import token_hex
from typing import Any

from washout.data.store import FINISHED, ExperimentRecord, Store
from washout.data.store.integrity import damaged
from washout.data.store.journal import FINISH
from washout.data.store.writer import FOLD_SECONDS, NextTrial, StoreWriter
from washout.errors import (
    SpecError,
    StoreExistsError,
    StoreWriteError,
    WashoutError,
    WorkerError,
)
from washout.harness.allocation import allocated
from washout.harness.batch import NO_RESET, Probes, RunStart, Templates, last_result
from washout.harness.context import TrialContext, WorkerContext, prepare_context
from washout.harness.environment import (
    EnvironmentWatch,
    check_same,
    fingerprint,
    mismatch,
    noted_differences,
)
from washout.harness.executors.base import (
    SESSION_VARIABLE,
    CommandOptions,
    CommandResult,
    Executor,
    stdout_to,
)
from washout.harness.executors.local import LocalExecutor, launcher_lost
from washout.harness.idle import IdleLengths, energy_metrics, with_idle_arm
from washout.harness.launcher.client import BatchTrial, LauncherGone
from washout.harness.machine_read import require_met
from washout.harness.measure import MetricError, TrialMetrics
from washout.harness.metrics.base import Trial
from washout.harness.metrics.health import trial_cpus
from washout.harness.metrics.resources import resource_values
from washout.harness.metrics.wall import Wall
from washout.harness.pinning import parse_cpus
from washout.harness.plan import (
    Plan,
    PlannedRun,
    context_levels,
    draw_seed,
    schedule,
    with_contexts,
)
from washout.harness.roles import (
    GroupWatch,
    around_trial,
    make_groups,
    role_commands,
    watch_for,
)
from washout.harness.secrets import (
    literal_secrets,
    redact,
    redact_spec,
    redact_tail,
    secret_values,
)
from washout.harness.spec import (
    CommandSpec,
    MetricSpec,
    ResetSpec,
    Spec,
    Test,
    check_roles,
    expand_tests,
    parse_spec_text,
)
from washout.stats.energy import RAPL_RELIABLE, short_energy_note
from washout.version import __version__

log = logging.getLogger(__name__)

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

ProgressHook = Callable[[str, int], None]
"""Called as ``hook(worker, trials_done_now)`` after every finished slot."""

WARMUP_RUN = -1
"""The run index of a worker's warmup trials (``[experiment] warmup``)."""

BATCH_SECONDS = FOLD_SECONDS
"""The most a launcher batch's trials take, as their tests' longest trials so far add up
(and the longest trial a test may have had to be batched): a batch is folded, and the
progress shown, when it ends, so as often as between trials of a run."""
BATCH_BYTES = 64 << 10
"""The most a batch's templates take: they are in the launcher's memory, whose high-water
mark every trial it starts inherits (a megabyte and less is below ``true``'s own)."""
BATCH_TRIAL_BYTES, BATCH_RUN_BYTES = 192, 320
"""What a trial's templates take, its test's name apart (counted twice, and its CPUs
once), and a run's records before its first trial: how :data:`BATCH_BYTES` is counted
(``harness.batch.Templates``: 157 and 306 bytes for a one-trial run of ``true``)."""

LOST_RUN_RESTARTS = 3
"""How often one session re-runs a run whose worker connection dropped mid-trial, before
it gives that worker up (``resume`` tries again)."""


class StopRequested(Exception):
    """Ctrl-C, or a failure under ``on_failure = "abort"``, stopped the experiment at a
    trial boundary. An abort on one worker stops every worker."""

    def __init__(self, message: str, *, abort: bool = False) -> None:
        super().__init__(message)
        self.abort = abort


class RunInterrupted(Exception):
    """A trial's outcome is unknown (its worker's connection dropped): its run must be
    re-run whole."""


@dataclass
class Outcome:
    """What a call to :func:`execute` did."""

    db: Path
    seed: int
    planned: int
    done_before: int = 0
    executed: int = 0
    failures: int = 0
    stopped: str | None = None
    aborted: bool = False
    terminated: bool = False
    """Stopped by SIGTERM."""
    store_error: str | None = None
    """Why the store could not be written (the session stopped; what was committed holds)."""
    worker_errors: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """What the run's summary says about how it measured (each also an event)."""
    session: str = field(default_factory=lambda: token_hex(8))
    """The random token that marks the processes of this session's trials
    (SESSION_VARIABLE in their environment), recorded in the store."""

    @property
    def complete(self) -> bool:
        return self.stopped is None and not self.worker_errors and self.store_error is None


@dataclass(frozen=True)
class Experiment:
    """A spec ready to run: its expanded tests and its plan."""

    spec: Spec
    spec_text: str
    source: str
    tests: list[Test]
    plan: Plan

    @classmethod
    def prepare(
        cls,
        spec: Spec,
        text: str,
        source: str,
        seed: int | None = None,
        runs: int | None = None,
        context: tuple[list[str], int] | None = None,
    ) -> Experiment:
        """Expand the tests and plan the schedule (drawing a seed if none is given);
        ``runs`` and ``context`` (kinds, levels) in place of the spec's."""
        exp = spec.experiment
        update: dict[str, Any] = {} if runs is None else {"runs": runs}
        if context is not None:
            update.update(context=list(context[0]), context_levels=context[1])
        if update:
            spec = spec.model_copy(update={"experiment": exp.model_copy(update=update)})
            exp = spec.experiment
            check_roles(spec, source)  # a context the spec's workers cannot take
        chosen = seed if seed is not None else exp.seed if exp.seed is not None else draw_seed()
        tests = with_idle_arm(spec, expand_tests(spec, source), source)
        plan = schedule(len(tests), exp.runs, tuple(exp.orders), exp.design, chosen)
        if exp.context:
            levels = context_levels(exp.context, exp.context_levels, chosen)
            plan = with_contexts(plan, len(tests), levels)
        if (
            spec.reset
            and spec.reset.kind == "reboot"
            and not (spec.worker or spec.cluster or spec.allocate)
        ):
            raise SpecError(
                f"{source}: reset.kind = 'reboot': needs [[worker]], [cluster] or [allocate] "
                "(washout does not reboot the machine it runs on)"
            )
        return cls(spec, text, source, tests, plan)

    @classmethod
    def from_store(cls, store: Store, *, to_run: bool = False) -> Experiment:
        """Re-plan exactly what a store was created with. ``to_run`` (resume): a spec
        stored with its secrets masked (:func:`~washout.harness.secrets.redact_spec`) takes
        them back from its spec file, which must be as it was.

        The plan must hold the trials the store was created for: a runs-per-kind edited
        to 79378 (found by fuzzing) would otherwise have ``resume`` run a plan thousands
        of times longer than the experiment, where it should stop in one line."""
        rec = store.experiment()
        text = rec.spec_text
        masked = store.spec_redacted()
        if to_run and masked:
            text = _spec_with_secrets(store.path, rec, masked)
        spec = parse_spec_text(text, f"{store.path} (stored spec)")
        experiment = cls.prepare(
            spec,
            text,
            rec.spec_source,
            seed=rec.seed,
            runs=rec.runs_per_kind,
            context=store.context(),
        )
        if experiment.plan.total_trials != rec.planned_trials:
            raise damaged(
                store.path,
                f"experiment.planned_trials is {rec.planned_trials}, but its spec with "
                f"runs_per_kind {rec.runs_per_kind} plans {experiment.plan.total_trials}",
            )
        return experiment

    @property
    def planned_trials(self) -> int:
        """Trials the plan asks for, over every schedule (worker or worker group)."""
        return self.plan.total_trials * self.spec.schedules

    def stored_spec(self) -> tuple[str, list[str]]:
        """The spec's text as the store keeps it, its secrets masked, and what was masked
        (:func:`~washout.harness.secrets.redact_spec`)."""
        return redact_spec(self.spec_text, [t.env for t in self.tests])

    def record(self) -> ExperimentRecord:
        exp = self.spec.experiment
        return ExperimentRecord(
            name=exp.name,
            spec_text=self.stored_spec()[0],
            spec_source=self.source,
            seed=self.plan.seed,
            design=exp.design,
            runs_per_kind=exp.runs,
            planned_trials=self.plan.total_trials,
            created=datetime.now(UTC).isoformat(),
            tool_version=__version__,
        )

    def create_store(self, path: str | Path) -> StoreWriter:
        """The experiment's new store (refused if ``path`` exists), its spec and commands
        stored with their secrets masked."""
        written = literal_secrets([t.env for t in self.tests])
        tests = [(t.name, redact(t.command, written), list(t.metrics)) for t in self.tests]
        masked = self.stored_spec()[1]
        meta = {"spec_redacted": json.dumps(masked)} if masked else {}
        exp = self.spec.experiment
        if exp.context:  # what resume plans again (the command line's, maybe not the spec's)
            meta |= {"context": json.dumps(exp.context), "context_levels": str(exp.context_levels)}
        return StoreWriter.create(path, self.record(), tests, meta)


def _spec_with_secrets(db: Path, record: ExperimentRecord, masked: list[str]) -> str:
    """The text of the spec file a store was run from, once it is known to be the spec the
    store holds with its secrets masked (:meth:`Experiment.from_store`)."""
    what = ", ".join(masked)
    source = Path(record.spec_source)
    try:
        text = source.read_text(encoding="utf-8-sig")
        tests = expand_tests(parse_spec_text(text, str(source)), str(source))
    except (OSError, UnicodeDecodeError, WashoutError):
        text, tests = "", []
    if not tests or redact_spec(text, [t.env for t in tests])[0] != record.spec_text:
        raise SpecError(
            f"{db}: the stored spec has its secrets masked ({what}); resume takes them from "
            f"{str(source)!r}, which is {'changed' if tests else 'not readable'}: restore it, "
            'or give secrets through the environment (env = { TOKEN = "${TOKEN}" })'
        )
    return text


def default_db_path(name: str, directory: str | Path = "washout-results") -> Path:
    """``washout-results/NAME.db``, or ``NAME-2.db``... : never an existing file."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "experiment"
    base = Path(directory)
    candidate = base / f"{safe}.db"
    n = 2
    while candidate.exists():
        candidate = base / f"{safe}-{n}.db"
        n += 1
    return candidate


def new_store(experiment: Experiment, db: str | Path | None = None) -> StoreWriter:
    """Create the store an experiment runs into: ``db``, or else the next free
    :func:`default_db_path` (taking the next one if another washout creates that default
    name at the same instant). An explicit ``db`` that exists is refused
    (:class:`~washout.errors.StoreExistsError`)."""
    while True:
        path = db or default_db_path(experiment.spec.experiment.name)
        try:
            return experiment.create_store(path)
        except StoreExistsError:
            if db is not None:
                raise


def reopen_store(db: str | Path) -> StoreWriter:
    """An existing store opened to be written (``washout resume``, a sweep's next batch),
    holding its writer lock (:class:`~washout.errors.StoreBusyError` if another process
    holds it)."""
    return StoreWriter.reopen(db)


def resolve_env(env: dict[str, str], source: str) -> dict[str, str]:
    """Expand ``${NAME}`` from the controller's environment (so secrets stay out of specs)."""

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in os.environ:
            raise SpecError(
                f"{source}: env value ${{{m.group(1)}}}: not set in washout's environment"
            )
        return os.environ[m.group(1)]

    return {k: _ENV_REF.sub(sub, v) for k, v in env.items()}


def slot_done(statuses: list[str], policy: str, retries: int) -> bool:
    """Whether a planned slot needs no further attempt, by the failure policy."""
    if "ok" in statuses:
        return True
    finished = [s for s in statuses if s in FINISHED]
    if policy == "record":
        return bool(finished)
    if policy == "abort":
        return False
    return len(finished) >= retries + 1


def make_executors(spec: Spec) -> list[Executor]:
    """The local machine, one SSH executor per ``[[worker]]``, or one per worker group."""
    if not spec.worker:
        return [LocalExecutor()]
    groups = make_groups(spec)
    if groups:
        return list(groups)
    from washout.harness.executors.ssh import SSHExecutor

    return [SSHExecutor(w) for w in spec.worker]


@dataclass(frozen=True)
class _Ended:
    """The trial a batch ended at, run but not recorded: its run's position, its id (begun
    in the store), and its command's result."""

    position: int
    trial_id: int
    result: CommandResult


@dataclass(frozen=True)
class _TestTrials:
    """What every trial of one test on one worker shares, worked out once."""

    options: CommandOptions
    """How its command runs (a context level changes it per trial)."""
    runner: Executor | None
    """The worker itself for a plain test (nothing around its trials), else None: each
    trial's runner is made for it (:func:`~washout.harness.roles.around_trial`)."""
    metrics: dict[str, MetricSpec]
    """Its metrics not taken around the trial (the engine takes them)."""
    energy: bool
    """Whether it has energy metrics."""


class _Worker:
    """One worker's pass over the plan."""

    def __init__(
        self,
        experiment: Experiment,
        store: StoreWriter,
        executor: Executor,
        stop: asyncio.Event,
        progress: ProgressHook,
        outcome: Outcome,
        allow_mismatch: bool,
        baseline: dict[str, str],
        watch: EnvironmentWatch | GroupWatch,
        alone: bool = False,
    ) -> None:
        self.x = experiment
        self.spec = experiment.spec
        self.store = store
        self.ex = executor
        self.stop = stop
        self.progress = progress
        self.outcome = outcome
        self.allow_mismatch = allow_mismatch
        self.baseline = baseline
        self.watch = watch
        self.alone = alone
        """Whether it is the session's only worker: its plain trials then take the fast
        path (``CommandOptions.blocking``), nothing else needing the event loop."""
        self.worker_id = store.worker_id(executor.name, executor.host)
        self.workdir = executor.workdir
        envs = [resolve_env(t.env, experiment.source) for t in experiment.tests]
        self.secrets = secret_values(envs)
        # Every process of a trial carries the session's token, so that a later session
        # can find what this one left running if it dies (kill_leftovers).
        self.envs = [{**env, SESSION_VARIABLE: outcome.session} for env in envs]
        self.resets = role_commands(executor, experiment.spec, "reset")
        """What resets the worker before a run, and where (per role in a group)."""
        self._tests: dict[int, _TestTrials] = {}
        """What the trials of each test share (:meth:`_shared`), by the test's index."""
        exp = experiment.spec.experiment
        self.health = exp.health_root if exp.health else None
        """Where each trial's health counters are read (None: not read)."""
        self.lengths = (
            IdleLengths.from_store(experiment.tests, store, self.worker_id) if exp.idle else None
        )
        """How long this worker's idle trials sleep (with an idle arm)."""
        self._said_short: set[str] = set()
        """Tests whose energy trials were said to be too short for RAPL."""
        self.context: WorkerContext | None = None
        """The worker's context levels, once :meth:`prepare_context` made it ready."""
        self._compared: tuple[int, str, bool] | None = None
        """The watch's captures when the environment was last compared, with its
        fingerprint then and whether it agreed with the start (:meth:`check_environment`)."""
        self._longest: dict[str, float] = {}
        """The longest trial of each test this session, in seconds (:meth:`_show_running`)."""
        self._recent: dict[str, float] = {}
        """The longest of each test's latest trials, in seconds: its last batch's, or the
        one it last ran alone. Whether its trials may run in a batch (:meth:`_batch_test`):
        one long trial (a cold first run, a moment of load) no longer keeps a test of short
        trials out of batches for the rest of the session (600 trials of a command whose
        first took 0.15 s ran one at a time)."""
        self._typical: dict[str, float] = {}
        """Each test's mean trial in its last batch, in seconds: what a batch is sized by
        (a session's first trials, with cold caches, take many times longer)."""
        self._unbatched: set[int] = set()
        """Tests whose trials printed in a batch: run one at a time from then on."""

    def _cwd(self, cwd: str | None) -> str | None:
        if cwd and self.workdir and not cwd.startswith("/"):
            return f"{self.workdir.rstrip('/')}/{cwd}"
        return cwd or self.workdir

    async def _command(
        self,
        what: str,
        command: str,
        timeout: float | None,
        cwd: str | None,
        on_controller: bool = False,
        side: Executor | None = None,
    ) -> CommandResult:
        runner: Executor = LocalExecutor() if on_controller else side or self.ex
        # [experiment] env reaches setup, reset and teardown as it reaches every test
        env = resolve_env(self.spec.experiment.env, self.x.source)
        result = await runner.run(
            command, CommandOptions(timeout=timeout, cwd=self._cwd(cwd), env=env)
        )
        if result.status != "ok":
            err = redact_tail(result.stderr, self.secrets, result.stderr_cut, 300).strip()
            err = err.replace("\n", " | ")
            raise WorkerError(
                f"{self.ex.name}: {what} command {command!r} {result.status}: "
                f"{result.reason}{': ' + err if err else ''}"
            )
        return result

    async def prepare_context(self) -> None:
        """Make the worker ready for the plan's context levels (washout.harness.context),
        before its setup: a worker that cannot take them stops here, in one line."""
        if self.x.plan.levels:
            cwds = [self._cwd(t.cwd) for t in self.x.tests]
            earlier = [
                m for _, w, kind, m in self.store.events() if (kind, w) == ("context", self.ex.name)
            ]
            self.context, note, moved = await prepare_context(
                self.ex, self.x.plan.levels, cwds, self.envs[0], earlier
            )
            self.store.event("context", note, self.ex.name)
            if moved:
                log.warning("%s: %s", self.ex.name, note)

    async def setup(self) -> None:
        for side, s in role_commands(self.ex, self.spec, "setup"):  # per role in a group
            assert isinstance(s, CommandSpec)
            await self._command("setup", s.command, s.timeout, s.cwd, side=side)
            self.store.event("setup", f"setup done: {s.command}", side.name)

    async def teardown(self) -> None:
        for side, t in role_commands(self.ex, self.spec, "teardown"):
            assert isinstance(t, CommandSpec)
            await self._command("teardown", t.command, t.timeout, t.cwd, side=side)
            self.store.event("teardown", f"teardown done: {t.command}", side.name)

    async def check_environment(self, run_index: int) -> None:
        """Record the environment before a run (before its reset) and refuse a provenance
        change since the experiment started. Cheap: the moment's facts (read after the
        last command), and the fingerprint and comparison worked out again only after a
        whole capture, the one thing that changes a fingerprinted fact."""
        facts = await self.watch.before_run()
        if self._compared is None or self._compared[0] != self.watch.captures:
            agrees = self._mismatch(run_index, facts) is None
            self._compared = self.watch.captures, fingerprint(facts), agrees
        _, fingerprinted, agrees = self._compared
        self.store.record_environment(self.worker_id, run_index, facts, fingerprinted, defer=True)
        problem = None if agrees else self._mismatch(run_index, facts)
        if problem:
            message = f"provenance changed during the experiment: {problem}"
            self.store.event("mismatch", message, self.ex.name)
            if not self.allow_mismatch:
                raise WorkerError(message + " (use --allow-mismatch to record and proceed)")

    def _mismatch(self, run_index: int, facts: dict[str, str]) -> str | None:
        """How the environment before run ``run_index`` differs from the start (or None)."""
        name = self.ex.name
        return mismatch(
            f"{name} at the start", self.baseline, f"{name} before run {run_index}", facts
        )

    async def reset(self, run_id: int) -> None:
        """Reset the worker and record it.

        Trial 0 must follow washout's own work as every later trial follows its
        predecessor. From the reset's record on, the path to position 0 is the path
        between two later trials: the record waits for the trial's start (one journal
        write), then the trial's own work and its start. Locally no process runs in
        between: trials start from the launcher, which carries none of washout's state,
        and the no-op that used to run here made position 0 up to 2.3% faster than later
        positions (bench/RESULTS.md, "No order effect of washout's own").
        """
        started = datetime.now(UTC)
        infos = []
        for side, reset in self.resets:
            assert isinstance(reset, ResetSpec)
            if reset.kind == "reboot":  # prepare() refuses a reboot without workers
                infos.append(await side.reboot(reset.timeout, reset.command))
            elif reset.kind != "none":
                await self._command(
                    "reset",
                    reset.command or "",
                    reset.timeout,
                    None,
                    on_controller=reset.kind == "local",
                    side=side,
                )
                infos.append(f"{reset.kind}: {reset.command}")
        info = "; ".join(infos) or NO_RESET
        self.store.record_reset(run_id, started, datetime.now(UTC), info, defer=True)
        log.debug("%s: reset: %s", self.ex.name, info)

    def _shared(self, index: int) -> _TestTrials:
        """What every trial of test ``index`` shares on this worker (made at its first)."""
        found = self._tests.get(index)
        if found is None:
            test = self.x.tests[index]
            # a plain test on a plain worker: the worker itself runs it, nothing around it
            plain = around_trial(self.ex, test) is self.ex
            found = self._tests[index] = _TestTrials(
                options=CommandOptions(
                    timeout=test.timeout,
                    cwd=self._cwd(test.cwd),
                    env=self.envs[index],
                    cpus=test.cpus,
                    output_tail=self.spec.experiment.output_tail,
                    health=self.health,
                    blocking=self.alone and plain,
                    output=test.output,
                    input=test.input,
                ),
                runner=self.ex if plain else None,
                metrics={n: m for n, m in test.metrics.items() if not m.around_trial},
                energy=bool(energy_metrics(test.metrics)),
            )
        return found

    async def trial(
        self, trial_id: int, index: int, level: int | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Run one trial of test ``index``, already committed as ``running``: its status and
        the fields that finish it in the store (the caller commits them with the next
        trial's start). Stopped at once (a second Ctrl-C), it is finished here as
        ``interrupted``.

        Its ``file`` metrics are removed first, so a value is only ever read from a file this
        trial wrote. Stored output is redacted whole, then cut to its tail. At a context
        ``level`` its command, environment and working directory are that level's.
        """
        test, shared = self.x.tests[index], self._shared(index)
        command = test.command if self.lengths is None else self.lengths.command(test)
        options = shared.options
        context: TrialContext | None = None
        if command is not None and self.context is not None and level is not None:
            command, options, context = self.context.trial(level, command, options)
        runner = (  # with its role, background, samples, counters around it
            shared.runner if shared.runner is not None else around_trial(self.ex, test)
        )
        plain = self._plain(index)
        try:
            try:
                if plain is not None:
                    await plain.before()
                if command is None:  # an idle trial before its test has a length
                    assert self.lengths is not None
                    raise MetricError(self.lengths.missing(test))
            except MetricError as err:
                now = datetime.now(UTC)
                return "failed", self._finished(
                    "failed",
                    str(err),
                    CommandResult("failed", None, b"", b"", now, now, 0.0, cpus=test.cpus),
                    {},
                    context,
                )
            await self._around("prepare", test.prepare, self.spec.prepare)
            self._show_running(test)
            fold = (  # off this machine, a trial running long is shown running anyway
                None
                if runner.local
                else asyncio.get_running_loop().call_later(
                    FOLD_SECONDS, self.store.fold_during_trial
                )
            )
            try:
                result = await runner.run(command, options)
            finally:
                if fold is not None:
                    fold.cancel()
            self._longest[test.name] = max(result.duration, self._longest.get(test.name, 0.0))
            self._recent[test.name] = result.duration
        except asyncio.CancelledError:
            self._interrupted(trial_id, index, context)
            raise
        return await self._settled(index, result, plain, context)

    def _interrupted(self, trial_id: int, index: int, context: TrialContext | None) -> None:
        """Finish a trial stopped at once (a second Ctrl-C) as ``interrupted``."""
        self.store.finish_trial(
            trial_id,
            status="interrupted",
            reason=f"{self.outcome.stopped or 'stopped'} during this trial",
            exit_code=None,
            started=datetime.now(UTC),
            ended=datetime.now(UTC),
            duration=0.0,
            stdout_tail="",
            stderr_tail="",
            cpus=self.x.tests[index].cpus,
            metrics={},
            context=context,
        )

    def _plain(self, index: int) -> TrialMetrics | None:
        """A trial's metrics not taken around it, taken here on the test's worker."""
        shared = self._shared(index)
        if not shared.metrics:
            return None
        trial = Trial(self.ex, shared.options.cwd, self.spec.experiment.output_tail)
        return TrialMetrics(shared.metrics, trial, self._own_side)

    async def _settled(
        self,
        index: int,
        result: CommandResult,
        plain: TrialMetrics | None,
        context: TrialContext | None,
    ) -> tuple[str, dict[str, Any]]:
        """A run trial's status and the fields that finish it (:meth:`trial`), from its
        command's result: its metrics taken, its conclude run."""
        test, shared = self.x.tests[index], self._shared(index)
        # A lost connection leaves the outcome unknown: the trial was interrupted.
        status = "interrupted" if result.status == "lost" else result.status
        reason = result.reason
        metrics: dict[str, float] = {}
        if status == "ok":
            metrics.update(result.extra_metrics)  # the runner's (absent: not available)
            try:
                metrics.update(await plain.values(result) if plain is not None else {})
            except MetricError as err:
                status, reason, metrics = "failed", str(err), {}
            else:
                notes = plain.notes if plain is not None else []
                reason = "; ".join([reason, *notes] if reason else notes)
        if status != "interrupted":  # a lost worker is reconnected and its run re-run first
            await self._around("conclude", test.conclude, self.spec.conclude)
        if status == "ok" and self.lengths is not None:
            self.lengths.add(test.name, result.duration)
        if status == "ok" and shared.energy and result.duration < RAPL_RELIABLE:
            self._short_energy(test, result.duration)
        # What the trial's processes used and its health, whatever its status (a metric
        # of the test's own with the same name wins).
        used = resource_values(result, test.metrics)
        return status, self._finished(status, reason, result, {**used, **metrics}, context)

    async def _around(self, what: str, own: str | None, table: CommandSpec | None) -> None:
        """A trial's prepare (before it) or conclude (after it, its metrics read), outside
        its timing, as hyperfine's ``--prepare`` and ``--conclude``: the test's own command
        or the table's, with the table's timeout and cwd; one that fails stops the worker."""
        command = own or (table.command if table else None)
        if command:
            timeout, cwd = (table.timeout, table.cwd) if table else (None, None)
            await self._command(what, command, timeout, cwd)

    def _show_running(self, test: Test) -> None:
        """Before a trial that may run :data:`FOLD_SECONDS` or longer (its test's first of
        the session, or one of a test whose trials ran that long), fold the trial journal
        into the store, so that readers (``washout status``) see it ``running`` and every
        trial before it while it runs. Before it, not during it: washout does no work of its
        own inside a local trial's window (a fold is ~4 ms of SQLite on a CPU the command
        may need); a run of short trials is folded between trials when due, as ever."""
        if self._longest.get(test.name, FOLD_SECONDS) >= FOLD_SECONDS:
            self.store.fold()

    def _short_energy(self, test: Test, seconds: float) -> None:
        """Say once per test and session, as an event and in the log, that a trial with an
        energy metric was too short for RAPL to measure well (washout.stats.energy)."""
        if test.name in self._said_short:
            return
        self._said_short.add(test.name)
        message = short_energy_note(test.name, seconds)
        self.store.event("energy", message, self.ex.name)
        log.warning("%s: %s", self.ex.name, message)

    def _own_side(self, role: str | None) -> Executor:
        """Where a plain metric is taken: this worker."""
        return self.ex

    def _finished(
        self,
        status: str,
        reason: str,
        result: CommandResult,
        metrics: dict[str, float],
        context: TrialContext | None,
    ) -> dict[str, Any]:
        """The store fields that finish a trial, secrets redacted before anything is cut
        (nothing to redact in an empty text: most trials' reason and output)."""
        return dict(
            status=status,
            reason=reason and redact(reason, self.secrets),
            exit_code=result.exit_code,
            started=result.started,
            ended=result.ended,
            duration=result.duration,
            stdout_tail=self._tail(result.stdout, result.stdout_cut),
            stderr_tail=self._tail(result.stderr, result.stderr_cut),
            cpus=result.cpus,
            metrics=metrics,
            context=context,
        )

    def _tail(self, output: bytes, cut: bool) -> str:
        """An output's stored tail, redacted whole before it is cut."""
        return redact_tail(output, self.secrets, cut) if output else ""

    async def run_trials(
        self,
        run_index: int,
        run_id: int,
        tests: list[int],
        contexts: tuple[int, ...] = (),
        ended: _Ended | None = None,
    ) -> None:
        """Every position of one run in order, each attempted until the failure policy is
        satisfied; with ``ended``, from the trial a batch ended at (begun and run, not
        finished) on.

        A trial's finish and the next trial's start are one transaction (one commit per
        trial, not two, on the path between two trials); each trial is still committed as
        ``running`` before it starts. Ctrl-C stops at the next slot boundary. A trial whose
        worker was lost is kept as ``interrupted`` and ends the run (:class:`RunInterrupted`);
        one the worker never started (it was given up before) is not kept.
        """
        exp = self.spec.experiment
        policy, retries = exp.on_failure, exp.retries
        if self.stop.is_set() and ended is None:
            raise StopRequested("stopped by the user")

        def start(position: int, attempt: int) -> NextTrial:
            return run_id, position, self.x.tests[tests[position]].name, attempt, datetime.now(UTC)

        position = 0 if ended is None else ended.position
        statuses: list[str] = []
        trial_id: int | None = (
            self.store.begin_trial(*start(0, 0)) if ended is None else ended.trial_id
        )
        while trial_id is not None:
            test = self.x.tests[tests[position]]
            try:
                if ended is not None:  # run in the batch: only settled here
                    index = tests[position]
                    status, fields = await self._settled(
                        index, ended.result, self._plain(index), None
                    )
                    ended = None
                else:
                    status, fields = await self.trial(
                        trial_id, tests[position], contexts[position] if contexts else None
                    )
            except WashoutError:
                self.store.forget_trial(trial_id)
                raise
            log.debug(
                "%s: position %d %s: %s %s(%.6f s)",
                self.ex.name,
                position,
                test.name,
                status,
                fields["reason"] and fields["reason"] + " ",
                fields["duration"],
            )
            statuses = statuses + [status]
            lost = status == "interrupted"
            abort = status != "ok" and policy == "abort"
            done = not lost and slot_done(statuses, policy, retries)
            if done:
                position, statuses = position + 1, []
            go_on = (
                not (abort or lost) and position < len(tests) and not (done and self.stop.is_set())
            )
            if position == len(tests):  # the run is complete with this trial's result
                self.store.set_run_status(run_id, "done", defer=True)
            trial_id = self.store.finish_trial(
                trial_id, **fields, then=start(position, len(statuses)) if go_on else None
            )
            if lost:
                raise RunInterrupted(f"{test.name!r} at position {position}: {fields['reason']}")
            if status != "ok":
                self.outcome.failures += 1
                if abort:
                    self.store.set_run_status(run_id, "aborted")
                    raise StopRequested(
                        f"{self.ex.name}: test {test.name!r} {status} in run "
                        f"{run_index} and on_failure = 'abort'",
                        abort=True,
                    )
            if done:
                self.outcome.executed += 1
                self.progress(self.ex.name, 1)
        if position < len(tests):
            raise StopRequested("stopped by the user")

    async def warmup(self) -> None:
        """``[experiment] warmup`` trials of each test, in the tests' order, before the
        session's first run (hyperfine runs its warmups before a command's timed runs):
        stored in run -1 (order ``warmup``) with status ``warmup``, a failure's reason kept,
        so no analysis counts them. They come before the first run's environment check and
        reset, so position 0 still follows the reset as in every run. With context levels,
        a test's warmups take the levels in turn."""
        names = [t.name for t in self.x.tests]
        run_id = self.store.run_id(self.worker_id, WARMUP_RUN, "warmup", names)
        position = 0
        levels = len(self.x.plan.levels)
        for index, test in enumerate(self.x.tests):
            for k in range(self.spec.experiment.warmup):
                if self.stop.is_set():
                    raise StopRequested("stopped by the user")
                now = datetime.now(UTC)
                trial_id = self.store.begin_trial(run_id, position, test.name, 0, now)
                try:
                    status, fields = await self.trial(
                        trial_id, index, k % levels if levels else None
                    )
                except WashoutError:
                    self.store.forget_trial(trial_id)
                    raise
                if status != "ok":
                    fields["reason"] = f"{status}: {fields['reason']}"
                self.store.finish_trial(trial_id, **{**fields, "status": "warmup"})
                position += 1
        self.store.set_run_status(run_id, "warmup")

    async def execute(self) -> None:
        """Every run of the plan that the store does not hold complete, each whole: runs
        left part-way by an earlier session were superseded before (:func:`recover`); a
        run whose worker is lost mid-trial is superseded and re-run here, after the
        executor reconnects, at most :data:`LOST_RUN_RESTARTS` times. Warmups come first
        when some run is left to do."""
        exp = self.spec.experiment
        slots = self.store.slot_attempts(self.worker_id)
        left = [
            run
            for run in self.x.plan.runs
            if not run_complete(slots, run.index, len(run.tests), exp.on_failure, exp.retries)
        ]
        if exp.warmup and left:
            await self.warmup()
        at = 0
        while at < len(left):
            if self.stop.is_set():
                raise StopRequested("stopped by the user")
            ended = None
            batch = self._batchable(left[at:])
            if batch:
                done, ended = await self._batch(batch)
                at += done
                if ended is None:
                    continue
            await self._run(left[at], ended)
            at += 1

    async def _start_run(self, run: PlannedRun, run_id: int) -> None:
        """What comes before a run's first trial: a fold if due, the environment check, the
        reset."""
        self.store.fold_if_due()
        await self.check_environment(run.index)
        await self.reset(run_id)

    async def _run(self, run: PlannedRun, ended: _Ended | None = None) -> None:
        """One run whole, or from the trial a batch ended at (``ended``) on; a run whose
        worker is lost mid-trial is superseded and re-run here, after the executor
        reconnects, at most :data:`LOST_RUN_RESTARTS` times."""
        names = [self.x.tests[i].name for i in run.tests]
        run_id = self.store.run_id(self.worker_id, run.index, run.order, names, defer=True)
        log.info("%s: run %d (%s order): %s", self.ex.name, run.index, run.order, names)
        for restart in range(LOST_RUN_RESTARTS + 1):
            try:
                if ended is None:
                    await self._start_run(run, run_id)
                await self.run_trials(run.index, run_id, list(run.tests), run.contexts, ended)
                break
            except RunInterrupted as err:
                ended = None
                kept = self.store.supersede_run(run_id)
                message = (
                    f"run {run.index} lost its worker during {err}; its {kept} "
                    "trial(s) are kept as superseded"
                )
                if restart == LOST_RUN_RESTARTS:
                    raise WorkerError(
                        f"{self.ex.name}: {message}; gave up after "
                        f"{LOST_RUN_RESTARTS} re-runs ('washout resume' "
                        "re-runs it whole)"
                    ) from None
                if self.stop.is_set():
                    raise StopRequested("stopped by the user") from None
                self.store.event("rerun", message + "; re-running it whole", self.ex.name)
                log.warning("%s: %s; re-running it whole", self.ex.name, message)
                # Reconnect (and so kill what the lost trial left) before anything else:
                # a worker gone for good is then this one-line error.
                await self._command("reconnect", "true", None, None)

    # -- batches (docs/design.md, "The batch launcher") -----------------------------------
    def _batchable(self, runs: list[PlannedRun]) -> list[PlannedRun]:
        """The runs from the first of ``runs`` on that one launcher batch may run: none
        unless every trial of them needs no Python of washout's between it and the next
        (:meth:`_batch_test`), at most :data:`BATCH_SECONDS` of trials as their tests ran
        in their last batch (before one, their longest trial) and :data:`BATCH_BYTES` of
        templates."""
        if not self._batch_worker():
            return []
        taken: list[PlannedRun] = []
        seconds, size, cpus = 0.0, 0, None
        for run in runs:
            if run.contexts or not all(self._batch_test(i) for i in run.tests):
                break
            tests = [self.x.tests[i] for i in run.tests]
            if cpus is None:
                cpus = tests[0].cpus or ""
            if any((t.cpus or "") != cpus for t in tests):
                break
            seconds += sum(self._typical.get(t.name, self._recent[t.name]) for t in tests)
            size += BATCH_RUN_BYTES + sum(
                BATCH_TRIAL_BYTES + 2 * len(t.name) + len(t.cpus or "") for t in tests
            )
            if taken and (seconds > BATCH_SECONDS or size > BATCH_BYTES):
                break
            taken.append(run)
        return taken if sum(len(run.tests) for run in taken) > 1 else []

    def _batch_worker(self) -> bool:
        """Whether this worker runs batches: the local machine alone, a launcher that can,
        no context levels, idle arm or secrets, no reset, no provenance file to watch, and
        the environment as at the start."""
        watch = self.watch
        return (
            isinstance(self.ex, LocalExecutor)
            and self.alone
            and self.ex.can_batch()
            and self.context is None
            and self.lengths is None
            and not self.secrets
            and all(isinstance(r, ResetSpec) and r.kind == "none" for _, r in self.resets)
            and isinstance(watch, EnvironmentWatch)
            and not watch.provenance.files
            and bool(watch.latest)
            and self._compared is not None
            and self._compared[2]
        )

    def _batch_test(self, index: int) -> bool:
        """Whether the trials of test ``index`` may run in a batch: a plain test with no
        prepare or conclude, its metrics wall times, its stdout kept or dropped (not a
        file, not inherited), no input, its latest trials short (:attr:`_recent`) and its
        trials so far without output."""
        test, shared = self.x.tests[index], self._shared(index)
        return (
            shared.runner is self.ex
            and index not in self._unbatched
            and self._recent.get(test.name, BATCH_SECONDS) < BATCH_SECONDS
            and not (test.prepare or self.spec.prepare or test.conclude or self.spec.conclude)
            and not shared.energy
            and all(isinstance(m.source, Wall) for m in shared.metrics.values())
            and stdout_to(shared.options) in ("pipe", "null")
            and shared.options.input is None
            and test.command is not None
        )

    async def _batch(self, runs: list[PlannedRun]) -> tuple[int, _Ended | None]:
        """Run ``runs`` as one launcher batch: how many of them it completed and, where it
        ended at a trial it did not record (not ok, output, its launcher gone), that trial,
        to be settled and its run carried on from it (:meth:`_run`). The first run's
        records and its first trial's start are made as for any run; for the rest of the
        batch the launcher writes each trial's record from its template."""
        store, ex = self.store, self.ex
        assert isinstance(ex, LocalExecutor)
        first = runs[0]
        names = [self.x.tests[i].name for i in first.tests]
        run_id = store.run_id(self.worker_id, first.index, first.order, names, defer=True)
        log.info("%s: runs %d-%d as a batch", ex.name, first.index, runs[-1].index)
        await self._start_run(first, run_id)
        _, fingerprinted, _ = self._compared or (0, "", True)
        items: list[tuple[PlannedRun, int, int]] = []  # run, its id, position
        starts: dict[int, RunStart] = {}
        planned: list[tuple[int, int, int]] = []  # worker id, run index, its first item
        for r, run in enumerate(runs):
            rid = run_id
            if r:
                run_names = [self.x.tests[i].name for i in run.tests]
                rid, row = store.planned_run(self.worker_id, run.index, run.order, run_names)
                planned.append((self.worker_id, run.index, len(items)))
                starts[len(items)] = RunStart(row, run.index)
            items += [(run, rid, position) for position in range(len(run.tests))]
        ids = [store.begin_trial(run_id, 0, names[0], 0, datetime.now(UTC))]
        ids += [store.planned_trial() for _ in items[1:]]
        programs: dict[int, int] = {}
        for run, _, position in items:
            programs.setdefault(run.tests[position], len(programs))
        cpus = self.x.tests[first.tests[0]].cpus
        probes = Probes.make(self.health, trial_cpus(parse_cpus(cpus) if cpus else None))
        tick = 1.0 / os.sysconf("SC_CLK_TCK") if self.health is not None else None
        facts = dict(self.watch.latest) if isinstance(self.watch, EnvironmentWatch) else {}
        made = Templates(probes, tick, self.worker_id, fingerprinted, facts)
        trials = []
        for k, (run, rid, position) in enumerate(items):
            index = run.tests[position]
            test = self.x.tests[index]
            last = position == len(run.tests) - 1
            walls = tuple(self._shared(index).metrics)
            finish = made.end(ids[k], test.cpus, walls, rid if last else None)
            then = b""
            if k + 1 < len(items):
                nrun, nrid, npos = items[k + 1]
                nname = self.x.tests[nrun.tests[npos]].name
                then = made.begin(ids[k + 1], nrid, npos, nname, starts.get(k + 1))
            trials.append(BatchTrial(programs[index], test.timeout, finish, then))
        commands = [(str(self.x.tests[i].command), self._shared(i).options) for i in programs]
        try:
            end, out, err = await ex.run_batch(
                commands, probes.probes, trials, made.constants, store.journal_descriptor, self.stop
            )
        except asyncio.CancelledError:  # stopped at once: the trial in flight is killed
            k = self._batch_taken(items, ids, planned, "killed")
            if k < len(items):
                self._interrupted(ids[k], items[k][0].tests[items[k][2]], None)
            raise
        except LauncherGone as gone:
            k = self._batch_taken(items, ids, planned, "lost")
            if k == len(items):
                return len(runs), None
            index = items[k][0].tests[items[k][2]]
            lost = launcher_lost(gone)
            result = CommandResult.lost(lost, datetime.now(UTC), 0.0, self.x.tests[index].cpus)
            return _completed(items, k), _Ended(items[k][2], ids[k], result)
        k = self._batch_taken(items, ids, planned, end.why)
        if end.why in ("done", "stopped"):
            run, _, position = items[k - 1]
            if position < len(run.tests) - 1:  # stopped part-way through a run
                raise StopRequested("stopped by the user")
            return _completed(items, k), None
        run, _, position = items[k]
        index = run.tests[position]
        test = self.x.tests[index]
        if end.why == "output":  # its trials print: they run one at a time from now on
            self._unbatched.add(index)
        command = commands[programs[index]][0]
        options = self._shared(index).options
        executable, _ = ex.program_of(command, options)
        result = last_result(end, out, err, test.timeout, test.cpus, (executable, options.cwd))
        self._longest[test.name] = max(result.duration, self._longest[test.name])
        self._recent[test.name] = max(result.duration, self._recent[test.name])
        return _completed(items, k), _Ended(position, ids[k], result)

    def _batch_taken(
        self,
        items: list[tuple[PlannedRun, int, int]],
        ids: list[int],
        planned: list[tuple[int, int, int]],
        why: str,
    ) -> int:
        """Take in a batch's records (:meth:`StoreWriter.take_batch`): how many trials it
        recorded. Each counts as a slot done; the ids of the runs and trials it did not
        begin (after a stop: those after the last recorded; else after the one it ended
        at) are given back; each test's longest trial is brought up to date."""
        records = self.store.take_batch()
        walls = [params[5] for record in records for name, params in record if name == FINISH]
        taken: dict[str, list[float]] = {}
        for (run, _, position), wall in zip(items, walls, strict=False):
            name, seconds = self.x.tests[run.tests[position]].name, float(wall or 0)
            taken.setdefault(name, []).append(seconds)
            log.debug("%s: position %d %s: ok (%.6f s)", self.ex.name, position, name, seconds)
        for name, each in taken.items():
            self._longest[name] = max(self._longest[name], *each)
            self._recent[name] = max(each)
            self._typical[name] = sum(each) / len(each)
        k = len(walls)
        begun = min(len(items), k if why in ("done", "stopped") else k + 1)
        self.store.unplan(
            [(worker, index) for worker, index, first in planned if first >= begun],
            ids[begun] if begun < len(items) else None,
        )
        if k:
            self.outcome.executed += k
            self.progress(self.ex.name, k)
        return k


def _completed(items: list[tuple[PlannedRun, int, int]], recorded: int) -> int:
    """How many runs of a batch's trials (run, run id, position) the first ``recorded``
    complete."""
    return sum(position == len(run.tests) - 1 for run, _, position in items[:recorded])


def _handler_put_back(
    loop: asyncio.AbstractEventLoop, sig: signal.Signals, previous: object
) -> int:
    """Give ``sig`` back its handler from before the run once the loop stops handling it;
    how many Ctrl-C presses came in between. The loop leaves Python's default handler
    (``remove_signal_handler``), and a press there raised KeyboardInterrupt out of a run
    that had ended: status 130 and nothing of what ran printed (CI saw it). Such a press
    is counted, and the handler put back all the same."""
    late, removed = 0, False
    while True:
        try:
            if not removed:
                loop.remove_signal_handler(sig)  # which sets the default, not what was there
                removed = True
            if previous is not None:
                signal.signal(sig, previous)  # type: ignore[arg-type]
            return late
        except KeyboardInterrupt:
            late += 1


def run_complete(
    slots: dict[tuple[int, int], list[str]], run_index: int, length: int, policy: str, retries: int
) -> bool:
    """Whether every position of a run has its attempts done by the failure policy."""
    return all(slot_done(slots.get((run_index, pos), []), policy, retries) for pos in range(length))


def recover(experiment: Experiment, store: StoreWriter) -> None:
    """Prepare a store for its next session: trials left ``running`` by a killed process
    become ``interrupted``, and every run left part-way is superseded (its trials kept,
    out of the analysis) so that it is re-run whole; so are warmups cut short (the next
    session runs its warmups again); each step is logged as an event."""
    exp = experiment.spec.experiment
    notes = []
    interrupted = store.mark_interrupted()
    if interrupted:
        notes.append(
            f"{interrupted} trial(s) in flight when washout stopped were kept as interrupted"
        )
    for worker_id, name, *_ in store.workers():
        slots = store.slot_attempts(worker_id)
        if any(i == WARMUP_RUN and "interrupted" in s for (i, _), s in slots.items()):
            warmups = [t.name for t in experiment.tests]
            kept = store.supersede_run(store.run_id(worker_id, WARMUP_RUN, "warmup", warmups))
            notes.append(
                f"{name}: its warmups were interrupted; their {kept} trial(s) are kept as "
                "superseded"
            )
        started = {idx for idx, _ in slots}
        for run in experiment.plan.runs:
            if run.index in started and not run_complete(
                slots, run.index, len(run.tests), exp.on_failure, exp.retries
            ):
                names = [experiment.tests[i].name for i in run.tests]
                kept = store.supersede_run(store.run_id(worker_id, run.index, run.order, names))
                notes.append(
                    f"{name}: run {run.index} was interrupted part-way; its {kept} "
                    "trial(s) are kept as superseded and it is re-run whole after a "
                    "fresh reset"
                )
    for note in notes:
        store.event("resume", note)
        log.info("resume: %s", note)


def count_done(experiment: Experiment, store: Store) -> int:
    """Planned slots already done, over every worker in the store: the slots of complete
    runs, exactly what ``resume`` will skip (a run left part-way is re-run whole)."""
    exp = experiment.spec.experiment
    done = 0
    for worker_id, *_ in store.workers():
        slots = store.slot_attempts(worker_id)
        done += sum(
            len(run.tests)
            for run in experiment.plan.runs
            if run_complete(slots, run.index, len(run.tests), exp.on_failure, exp.retries)
        )
    return done


async def _each_worker(
    executors: list[Executor],
    step: Callable[[Executor], Awaitable[object]],
    store: StoreWriter,
    outcome: Outcome,
) -> list[Executor]:
    """Run ``step`` on every worker at once. A worker whose step fails with a one-line
    error (cannot connect, cannot sync) is recorded as that worker's error and left out;
    the others go on."""
    results = await asyncio.gather(*(step(ex) for ex in executors), return_exceptions=True)
    kept = []
    for ex, result in zip(executors, results):
        if isinstance(result, WashoutError):
            outcome.worker_errors[ex.name] = str(result)
            store.event("error", str(result), ex.name)
            await ex.close()
        elif isinstance(result, BaseException):
            raise result
        else:
            kept.append(ex)
    return kept


async def _kill_leftovers(executor: Executor, sessions: list[str], store: StoreWriter) -> None:
    """Before anything runs on a worker: kill what trials of earlier sessions (all dead:
    this one holds the writer lock) left running there, so no old trial runs beside the
    new ones."""
    try:
        killed = await executor.kill_leftovers(sessions)
    except OSError as err:
        store.event(
            "resume", f"could not look for processes of earlier trials: {err}", executor.name
        )
        return
    if killed:
        store.event(
            "resume",
            f"killed {killed} process(es) that trials of an earlier session left running",
            executor.name,
        )


async def _run_all(
    experiment: Experiment,
    store: StoreWriter,
    executors: list[Executor],
    stop: asyncio.Event,
    progress: ProgressHook,
    outcome: Outcome,
    allow_mismatch: bool,
    sync: Callable[[Executor], Awaitable[object]] | None,
) -> None:
    """Connect, sync, compare provenance across workers, then run every worker at once."""
    executors = await _each_worker(executors, lambda ex: ex.connect(), store, outcome)
    for note in dict.fromkeys(note for ex in executors for note in ex.launcher_notes()):
        store.event("launcher", note)
        outcome.notes.append(note)
        log.warning("%s", note)
    try:
        await require_met(executors, experiment.spec.experiment.require)
    except WashoutError as err:
        store.event("refused", str(err))
        raise
    earlier = [s for s in store.sessions() if s != outcome.session]
    if earlier:
        executors = await _each_worker(
            executors, lambda ex: _kill_leftovers(ex, earlier, store), store, outcome
        )
    if sync is not None:
        executors = await _each_worker(executors, sync, store, outcome)
    if not executors:
        return
    # Provenance at setup: all workers must agree now, and each must still match what it
    # ran when the experiment started (its first capture in the store, if resuming).
    started_with = {e["worker"]: e["data"] for e in reversed(store.environments())}
    watches = {ex.name: watch_for(ex, experiment.spec) for ex in executors}
    current = await asyncio.gather(*(watches[ex.name].capture() for ex in executors))
    baselines = {}
    for ex, facts in zip(executors, current):
        worker_id = store.worker_id(ex.name, ex.host)
        store.record_environment(worker_id, None, facts, fingerprint(facts))
        baselines[ex.name] = started_with.get(ex.name, facts)
    between = [(ex.name, facts) for ex, facts in zip(executors, current)]
    since = [
        [(f"{ex.name} when the experiment started", baselines[ex.name]), (f"{ex.name} now", f)]
        for ex, f in zip(executors, current)
    ]
    for note in noted_differences(between, "between workers") + [
        line for pair in since for line in noted_differences(pair, "since the experiment started")
    ]:
        store.event("differs", note)
        outcome.notes.append(note)
        log.warning("%s", note)
    try:
        check_same(between, "between workers")
        for pair in since:
            check_same(pair, "since the experiment started")
    except WashoutError as err:
        store.event("mismatch", str(err))
        if not allow_mismatch:
            raise

    async def one(ex: Executor) -> None:
        worker = _Worker(
            experiment,
            store,
            ex,
            stop,
            progress,
            outcome,
            allow_mismatch,
            baselines[ex.name],
            watches[ex.name],
            alone=len(executors) == 1,
        )
        set_up = False
        try:
            await worker.prepare_context()
            await worker.setup()
            set_up = True
            await worker.execute()
        except StoreWriteError as err:  # every worker writes the same store: stop them all
            outcome.store_error = outcome.store_error or str(err)
            stop.set()
        except StopRequested as err:
            outcome.stopped = str(err)
            outcome.aborted = outcome.aborted or err.abort
            _note(store, outcome, "stopped", str(err), ex.name)
            if err.abort:
                stop.set()
        except WashoutError as err:
            outcome.worker_errors[ex.name] = str(err)
            _note(store, outcome, "error", str(err), ex.name)
        finally:
            # Teardown whenever setup ran, even after Ctrl-C, SIGTERM or an error: what
            # setup started (a server) must not outlive the session.
            if set_up:
                try:
                    await worker.teardown()
                except StoreWriteError as err:  # it ran; only its event was not stored
                    outcome.store_error = outcome.store_error or str(err)
                except WashoutError as err:
                    _note(store, outcome, "error", str(err), ex.name)
                    outcome.worker_errors.setdefault(ex.name, str(err))
            await ex.close()

    await asyncio.gather(*(one(ex) for ex in executors))


def _note(
    store: StoreWriter, outcome: Outcome, kind: str, message: str, worker: str | None = None
) -> None:
    """Record an event about how the session went, unless the store cannot be written
    any more (then that is what the outcome says)."""
    try:
        store.event(kind, message, worker)
    except StoreWriteError as err:
        outcome.store_error = outcome.store_error or str(err)


def execute(
    experiment: Experiment,
    store: StoreWriter,
    *,
    executors: list[Executor] | None = None,
    progress: ProgressHook | None = None,
    allow_mismatch: bool = False,
    on_stop_request: Callable[[int], None] | None = None,
    sync: Callable[[Executor], Awaitable[object]] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> Outcome:
    """Run (or resume) an experiment into ``store``; returns what was done.

    ``store`` holds its writer lock (:func:`new_store`, :func:`reopen_store`) until it is
    closed; first this tidies what an earlier session left (:func:`recover`).
    ``on_start(done)`` is told how many planned slots are done before anything runs.
    ``on_stop_request(n)`` is told of the n-th Ctrl-C (1: stopping at the next trial
    boundary; 2: stopping now). SIGTERM stops now, like a second Ctrl-C, and sets
    ``Outcome.terminated``.
    """
    store.hold_checkpoints()  # the log is checkpointed before a run, never between two trials
    recover(experiment, store)
    outcome = Outcome(
        db=store.path,
        seed=experiment.plan.seed,
        planned=experiment.planned_trials,
    )
    store.add_session(outcome.session)
    outcome.done_before = count_done(experiment, store)
    log.info(
        "%s: %d of %d planned trials done before this session (seed %d)",
        store.path,
        outcome.done_before,
        outcome.planned,
        outcome.seed,
    )
    if on_start is not None:
        on_start(outcome.done_before)
    previous_workers = [name for _, name, *_ in store.workers()]
    if sync is None and experiment.spec.experiment.sync:
        from washout.harness.executors.sync import directory_sync

        sync = directory_sync(experiment.spec.experiment.sync, experiment.source)
    hook = progress or (lambda worker, n: None)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        presses = 0

        def told() -> None:
            nonlocal presses
            presses += 1
            if on_stop_request:
                on_stop_request(presses)

        def on_interrupt() -> None:
            told()
            stop.set()
            if presses >= 2:
                now("stopped at once by the user")

        def on_terminate() -> None:
            outcome.terminated = True
            now("stopped by SIGTERM")

        def now(why: str) -> None:
            outcome.stopped = why
            stop.set()
            if task is not None:
                task.cancel()

        installed = []  # (signal, the handler it had before): put back when the loop ends
        for sig, handler in ((signal.SIGINT, on_interrupt), (signal.SIGTERM, on_terminate)):
            previous = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, handler)
                installed.append((sig, previous))
            except (RuntimeError, ValueError):
                pass

        def allocation_note(kind: str, message: str) -> None:
            if kind == "error":
                outcome.worker_errors.setdefault("allocation", message)
            _note(store, outcome, kind, message)

        spec = experiment.spec
        try:
            workers = (
                allocated(spec, experiment.source, previous_workers, allocation_note)
                if executors is None
                else nullcontext(executors)
            )
            async with workers as given:
                chosen = given if given is not None else make_executors(spec)
                await _run_all(experiment, store, chosen, stop, hook, outcome, allow_mismatch, sync)
        except asyncio.CancelledError:
            _note(store, outcome, "stopped", outcome.stopped or "stopped")
        finally:
            late = sum(_handler_put_back(loop, sig, previous) for sig, previous in installed)
            for _ in range(late):  # the run has ended: a late press stops nothing more
                told()

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: no event loop in this thread
        asyncio.run(main())
    else:  # called from inside a running loop (Jupyter, a sync wrapper): use a thread
        with ThreadPoolExecutor(1, thread_name_prefix="washout-engine") as pool:
            pool.submit(asyncio.run, main()).result()
    return outcome
