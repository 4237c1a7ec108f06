"""The bisect's loop: build, measure, decide, until an honest ending (docs/bisect.md).

1. good and bad are built (a failure of either is a one-line error);
2. the **check** step: good and bad interleaved, look after look, until their per-run
   ratio is shown to differ from 1 (else the bisect ends: no change shown);
3. **candidate** steps: the next commit (:mod:`washout.bisection.search`) is built (a
   failure skips it) and measured between good and bad, look after look, until its
   decision is final or its runs reach the cap (:mod:`washout.stats.equivalence`);
4. the **effect** step: the culprit (or the range's last commit) against the commit
   before it, so the answer comes with its own paired estimate.

Every look is an ordinary washout experiment run by the engine (the same executors,
resets, provenance checks and store as ``washout run``), in its own store; every build
and look is recorded in the bisect's state as it finishes, so ``washout resume DIR``
continues where the bisect stopped, the unfinished look through the engine's resume.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from washout.bisection.build import Build, build_commit, log_path, tree_path
from washout.bisection.deploy import deploy_hook
from washout.bisection.git import history, resolve, toplevel
from washout.bisection.result import BisectResult
from washout.bisection.search import finished, look_level, look_plan, standing, values
from washout.bisection.state import Config, Look, State, Step, is_bisect_dir, locked
from washout.bisection.stepspec import check_spec, copies_builds, step_spec_text
from washout.bisection.summary import measured_change, summarize
from washout.data.outputs import write_output
from washout.errors import ExitCode, WashoutError
from washout.stats.equivalence import (
    PairedEstimate,
    check_change,
    decide_step,
    paired_estimate,
    step_alpha,
)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from washout.harness.engine import Experiment

Notify = Callable[[str], None]


class BisectStopped(WashoutError):
    """A look did not finish (Ctrl-C, SIGTERM, a worker refused or lost, an abort): the
    bisect's state is saved and ``washout resume DIR`` continues it."""

    def __init__(self, message: str, exit_code: ExitCode) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Request:
    """A new bisect as the user asked for it (the CLI's options, the API's arguments)."""

    spec: Path
    good: str
    bad: str
    repo: Path
    build: str | None = None
    build_timeout: float | None = None
    directory: Path | None = None
    test: str | None = None
    metric: str | None = None
    threshold: float | None = None
    alpha: float = 0.05
    runs: int = 10
    max_runs: int = 60
    seed: int | None = None


def default_directory(name: str) -> Path:
    """``washout-results/NAME-bisect`` (``-2``, ``-3``... when taken)."""
    from washout.harness.engine import default_db_path

    return default_db_path(f"{name}-bisect").with_suffix("")


def start(request: Request) -> Path:
    """Check a new bisect whole (spec, repository, revisions, options), create its
    directory and state; returns the directory. Nothing is built or run yet."""
    from washout.harness.plan import draw_seed
    from washout.harness.spec import load_spec

    spec, text = load_spec(request.spec)
    source = str(request.spec)
    target = check_spec(spec, source, request.test, request.metric)
    _check_options(request)
    repo = toplevel(request.repo)
    good = resolve(repo, request.good, "--good")
    bad = resolve(repo, request.bad, "--bad")
    commits = history(repo, good, bad)
    root = (request.directory or default_directory(spec.experiment.name)).resolve()
    _check_directory(root)
    config = Config(
        spec_text=text,
        spec_source=source,
        repo=str(repo),
        good=good,
        bad=bad,
        build=request.build or "true",
        build_timeout=request.build_timeout,
        test=target.test,
        metric=target.metric,
        better=target.better,
        threshold=request.threshold,
        alpha=request.alpha,
        runs=request.runs,
        max_runs=request.max_runs,
        seed=request.seed if request.seed is not None else draw_seed(),
        copies_builds=copies_builds(spec),
    )
    state = State(config=config, commits=tuple(commits), builds={})
    bisect = _Bisect(root, state)
    bisect.experiment_of(bisect.check_step(), 1)  # a spec a step cannot run fails now
    root.mkdir(parents=True, exist_ok=True)
    state.save(root)
    return root


def _check_options(request: Request) -> None:
    if not 0 < request.alpha < 1:
        raise WashoutError(f"--alpha = {request.alpha}: expected a number between 0 and 1")
    if request.runs < 2:
        raise WashoutError(f"--runs = {request.runs}: at least 2 runs per look")
    if request.max_runs < request.runs:
        raise WashoutError(f"--max-runs = {request.max_runs}: at least --runs ({request.runs})")
    if request.threshold is not None and not 0 < request.threshold < 1:
        raise WashoutError(
            f"--threshold = {request.threshold}: expected a fraction between 0 and 1 (2% is 0.02)"
        )
    if request.build_timeout is not None and not request.build_timeout > 0:
        raise WashoutError(f"--build-timeout = {request.build_timeout}: expected seconds > 0")


def _check_directory(root: Path) -> None:
    if is_bisect_dir(root):
        raise WashoutError(
            f"--dir = {str(root)!r}: holds a bisect already; continue it with "
            f"'washout resume {root}' or choose another directory"
        )
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise WashoutError(f"--dir = {str(root)!r}: exists and is not an empty directory")


def look_seed(seed: int, kind: str, index: int, look: int) -> int:
    """A look's seed: a function of the bisect's seed and where the look is."""
    digest = hashlib.sha256(f"{seed}:{kind}:{index}:{look}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def advance(root: Path, notify: Notify | None = None, allow_mismatch: bool = False) -> BisectResult:
    """Run (or resume) the bisect in ``root`` to its end; returns its result (also written to
    ``root/result.json``). Raises :class:`BisectStopped` when a look does not finish."""
    root = root.resolve()  # builds and stores are found from here, whatever the cwd
    with locked(root):
        bisect = _Bisect(root, State.load(root), notify, allow_mismatch)
        bisect.run()
        result = summarize(bisect.state, root)
        write_output(root / "result.json", json.dumps(result.to_dict(), indent=2), option="--dir")
        return result


def show(root: Path) -> BisectResult:
    """The result of the bisect in ``root`` as it stands (finished or not)."""
    return summarize(State.load(root), root.resolve())


class _Bisect:
    """One session's work on a bisect: its state, saved after every build and look."""

    def __init__(
        self,
        root: Path,
        state: State,
        notify: Notify | None = None,
        allow_mismatch: bool = False,
    ) -> None:
        from washout.harness.spec import parse_spec_text

        self.root = root
        self.state = state
        self.say = notify or (lambda message: None)
        self.allow_mismatch = allow_mismatch
        c = state.config
        self.spec = parse_spec_text(c.spec_text, c.spec_source)
        self.data: dict[str, Any] = tomllib.loads(c.spec_text.removeprefix("\ufeff"))
        self.target = check_spec(self.spec, c.spec_source, c.test, c.metric)
        self.index = {commit.sha: i for i, commit in enumerate(state.commits)}
        self.candidates = max(len(state.commits) - 2, 1)
        """Commits strictly between good and bad: what the steps' alpha is shared for."""

    def run(self) -> None:
        c = self.state.config
        for sha, option in ((c.good, "--good"), (c.bad, "--bad")):
            build = self.build(sha)
            if not build.ok:
                last = (build.log_tail.strip().splitlines() or [""])[-1]
                raise WashoutError(
                    f"{option} = {sha[:10]}: does not build ({build.reason}): "
                    f"{last[:200]!r}; log: {log_path(self.root, sha)}"
                )
        check = self.run_step(self.state.step("check") or self.check_step())
        if check.last is None or check.last.decision != "differ":
            return
        if c.threshold is not None and abs(measured_change(self.state)) <= math.log1p(c.threshold):
            return  # a change, but within the user's margin: nothing to bisect
        while True:
            where = standing(self.state)
            step = where.running
            if step is None and where.next is not None:
                sha = self.state.commits[where.next].sha
                if not self.build(sha).ok:
                    continue
                number = len(self.state.candidates()) + 1
                alpha = step_alpha(c.alpha, number, self.candidates)
                step = Step(number, "candidate", sha, c.good, alpha, self.margin())
            if step is None:
                break
            self.run_step(step)
        self.measure_effect()

    def margin(self) -> float | None:
        """A candidate step's margin: the user's threshold (a log ratio), or None: derived
        from the change each run measures (:func:`~washout.stats.equivalence.decide_step`)."""
        t = self.state.config.threshold
        return None if t is None else math.log1p(t)

    def check_step(self) -> Step:
        c = self.state.config
        return Step(0, "check", c.bad, c.good, step_alpha(c.alpha, 0, self.candidates), None)

    def measure_effect(self) -> None:
        """The culprit (or the range's last commit) against the commit before the range,
        unless that is bad against good, which the check measured."""
        where = standing(self.state).bracket
        if where.lo == 0 and where.hi == len(self.state.commits) - 1:
            return
        c = self.state.config
        lo, hi = self.state.commits[where.lo].sha, self.state.commits[where.hi].sha
        step = self.state.step("effect")
        if step is None or (step.commit, step.reference) != (hi, lo):
            step = Step(len(self.state.candidates()) + 1, "effect", hi, lo, c.alpha, None)
        self.run_step(step)

    def build(self, sha: str) -> Build:
        """The commit's build: from the state if it was built, else built now."""
        if sha in self.state.builds:
            return self.state.builds[sha]
        c = self.state.config
        commit = self.state.commits[self.index[sha]]
        self.say(f"building {commit.short} ({commit.subject[:60]})")
        build = build_commit(Path(c.repo), self.root, sha, c.build, c.build_timeout)
        if not build.ok:
            self.say(f"  {commit.short} does not build ({build.reason}): skipped")
        self.save(self.state.with_build(build), build.seconds)
        return build

    def run_step(self, step: Step) -> Step:
        """Look after look until the step's decision is final or its runs reach the cap."""
        c = self.state.config
        step = self.state.step(step.kind, step.index) or step
        self.save(self.state.with_step(step))
        commit = self.state.commits[self.index[step.commit]]
        self.say(
            f"{step.kind} step {step.index}: {commit.short} ({commit.subject[:50]}){self.eta()}"
        )
        while not finished(step, c):
            look = self.look(step, len(step.looks) + 1)
            step = step.with_look(look)
            self.save(self.state.with_step(step), look.seconds)
            self.say(f"  look {look.index}: {look.runs} runs: {look.decision}: {look.reason}")
        return step

    def eta(self) -> str:
        """How much is left, roughly: the commits in the bracket, the steps a bisection of
        them takes, at the mean time of the steps so far (builds included)."""
        done = [s for s in self.state.steps if s.looks]
        left = standing(self.state).bracket.size - 1
        if not done or left < 1:
            return ""
        steps = math.ceil(math.log2(left + 1))
        minutes = self.state.seconds / len(done) * (steps + 1) / 60  # and the effect step
        return f"; {left} commit(s) left to judge, about {steps} step(s), ETA {minutes:.1f} min"

    def builds_of(self, step: Step) -> list[str]:
        if step.kind == "candidate":
            return [step.reference, step.commit, self.state.config.bad]
        return [step.reference, step.commit]

    def directory(self, sha: str) -> str:
        """Where a build is on the workers: under their workdir, or here."""
        if self.state.config.copies_builds:
            return sha
        return str(tree_path(self.root, sha))

    def store_path(self, step: Step, look: int) -> Path:
        name = "effect" if step.kind == "effect" else f"step-{step.index:02d}"
        return self.root / "steps" / name / f"look-{look}.db"

    def experiment_of(self, step: Step, look: int) -> Experiment:
        """The look's experiment: the step's spec with this look's runs and seed."""
        from washout.harness.engine import Experiment
        from washout.harness.spec import parse_spec_text

        c = self.state.config
        plan = look_plan(step, c)
        runs = plan[look - 1] - (plan[look - 2] if look > 1 else 0)
        builds = [
            (sha, self.directory(sha), self.state.builds[sha].binaries)
            if sha in self.state.builds
            else (sha, self.directory(sha), ())
            for sha in self.builds_of(step)
        ]
        name = f"{self.spec.experiment.name}-{step.kind}-{step.index}-look-{look}"
        seed = look_seed(c.seed, step.kind, step.index, look)
        text = step_spec_text(self.data, builds, name=name, runs=runs, seed=seed)
        source = f"{c.spec_source} (bisect {step.kind} step {step.index}, look {look})"
        return Experiment.prepare(parse_spec_text(text, source), text, source, seed=seed)

    def look(self, step: Step, look: int) -> Look:
        """Run (or resume) one look of a step and decide."""
        from washout.harness.engine import Experiment, execute, reopen_store
        from washout.harness.status import exit_code

        path = self.store_path(step, look)
        shas = self.builds_of(step)
        if path.exists():
            store = reopen_store(path)
            experiment = Experiment.from_store(store, to_run=True)  # the engine's resume
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            experiment = self.experiment_of(step, look)
            store = experiment.create_store(path)
        started = time.monotonic()
        try:
            hook = deploy_hook(
                self.root,
                [self.state.builds[s] for s in shas],
                [self.directory(s) for s in shas],
                self.state.config.copies_builds,
            )
            outcome = execute(experiment, store, sync=hook, allow_mismatch=self.allow_mismatch)
            if not outcome.complete:
                why = (
                    outcome.store_error
                    or outcome.stopped
                    or "; ".join(outcome.worker_errors.values())
                )
                raise BisectStopped(
                    f"{path}: the look stopped: {why}; continue with 'washout resume {self.root}'",
                    exit_code(outcome, store),
                )
            frame = store.long_frame()
            trials = sum(store.counts().values())
        finally:
            store.close()
        logs = self._ratios(frame, self._names(experiment, len(shas)), path)
        seconds = time.monotonic() - started
        return self._decide(step, look, logs, str(path.relative_to(self.root)), trials, seconds)

    def _names(self, experiment: Experiment, builds: int) -> list[str]:
        """The judged test's name in the look, per build (a step has the spec's tests once
        per build, in order)."""
        per_build = self.target.tests
        if len(experiment.tests) != per_build * builds:
            raise WashoutError(f"{experiment.source}: not a step of this bisect's spec")
        return [experiment.tests[b * per_build + self.target.position].name for b in range(builds)]

    def _ratios(self, frame: pd.DataFrame, names: list[str], path: Path) -> dict[str, np.ndarray]:
        """The look's per-run log ratios, over the runs where every build has a successful
        trial: d = log(last / first) (bad / good), and for a candidate (the middle build)
        x = log(candidate / good) and y = log(candidate / bad)."""
        from washout.stats.claims import per_run_logs
        from washout.stats.trials import usable_trials

        ok, _ = usable_trials(frame, "the bisect")
        metric = self.state.config.metric
        have = set(ok.loc[ok["metric"] == metric, "test"].astype(str))
        for name in (names[0], names[-1]):
            if name not in have:
                raise WashoutError(
                    f"{path}: test {name!r} has no successful trial with metric {metric!r}: "
                    f"see 'washout status {path}'"
                )
        logs, orders = per_run_logs(ok, names, metric, str(path))
        logs = logs[orders == "random"]
        ratios = {"d": logs[:, -1] - logs[:, 0]}
        if len(names) == 3:
            ratios["x"], ratios["y"] = logs[:, 1] - logs[:, 0], logs[:, 1] - logs[:, 2]
        return ratios

    def _decide(
        self,
        step: Step,
        look: int,
        logs: dict[str, np.ndarray],
        store: str,
        trials: int,
        seconds: float,
    ) -> Look:
        """The look's record: its data and the step's decision on every look so far."""
        import numpy as np

        c = self.state.config
        level = look_level(step, c, look)
        pooled = {k: np.concatenate([values(step, k), v]) for k, v in logs.items()}
        apart = False
        decision: str
        if step.kind == "check":
            checked = check_change(pooled["d"], level, self.margin())
            decision, final = checked.verdict, checked.verdict != "undecided"
            reason = f"bad / good = {_ratio_text(checked.change)}"
        elif step.kind == "effect":
            effect = paired_estimate(pooled["d"], 1.0 - level)
            decision, final = "measured", True
            reason = f"{_ratio_text(effect)} against the commit before"
        elif pooled["x"].size == 0:
            decision, final = "unknown", True
            reason = "no run with a successful trial of the candidate: skipped"
        else:
            sign = 1.0 if measured_change(self.state) >= 0 else -1.0
            decided = decide_step(pooled["x"], pooled["y"], sign, level, step.margin)
            decision, final, reason, apart = (
                decided.decision,
                decided.final,
                decided.reason,
                decided.apart,
            )
        return Look(
            index=look,
            runs=look_plan(step, c)[look - 1],
            store=store,
            level=level,
            decision=decision,
            final=final,
            reason=reason,
            trials=trials,
            seconds=seconds,
            apart=apart,
            x=tuple(float(v) for v in logs.get("x", ())),
            y=tuple(float(v) for v in logs.get("y", ())),
            d=tuple(float(v) for v in logs["d"]),
        )

    def save(self, state: State, seconds: float = 0.0) -> None:
        self.state = replace(state, seconds=state.seconds + seconds)
        self.state.save(self.root)


def _ratio_text(estimate: PairedEstimate) -> str:
    """A step's ratio in its reason, with the interval its decision used and that
    interval's confidence: a check decides at its share of alpha, so its interval is wider
    than the 95% one the table shows beside it."""
    low, high, confidence = estimate.low, estimate.high, estimate.confidence
    if low is None or high is None or confidence is None:
        return f"{estimate.ratio:.4f} (too few runs for an interval)"
    return f"{estimate.ratio:.4f} [{low:.4f}, {high:.4f}] ({confidence * 100:.3g}% CI)"
