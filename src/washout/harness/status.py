"""Progress of an experiment from its store alone (works while another process writes)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from washout.data.store import Store, describe_writer, writer_of
from washout.errors import ExitCode
from washout.harness.printable import printable

if TYPE_CHECKING:
    from washout.harness.engine import Experiment, Outcome


@dataclass(frozen=True)
class Progress:
    """How far an experiment is: planned and done slots (``done`` is exactly what
    ``resume`` skips), runs, trials by status, finished trials in the trial journal not
    folded into the store yet (counted nowhere else), the live writer (host, pid, started;
    None when no washout process writes the store) and an ETA from the mean trial
    duration."""

    name: str
    seed: int
    planned: int
    done: int
    runs_planned: int
    runs_done: int
    ok: int
    failed: int
    timeout: int
    interrupted: int
    running: int
    superseded: int
    journaled: int
    writer: dict[str, Any] | None
    eta_seconds: float | None

    @property
    def remaining(self) -> int:
        return self.planned - self.done

    @property
    def complete(self) -> bool:
        return self.remaining == 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "remaining": self.remaining, "complete": self.complete}


def progress_of(store: Store, experiment: Experiment | None = None) -> Progress:
    """The progress of the experiment in ``store``: of ``experiment`` where the caller has
    just run it from there, else of the plan rebuilt from the stored spec and seed (a
    plan of many runs takes milliseconds to draw)."""
    from washout.harness.engine import Experiment, count_done

    if experiment is None:
        experiment = Experiment.from_store(store)
    planned = experiment.planned_trials
    done = count_done(experiment, store)
    counts = store.counts()
    durations = store.finished_durations()
    mean = statistics.fmean(durations) if durations else None
    runs_done = store.runs_done()
    schedules = experiment.spec.schedules
    return Progress(
        name=experiment.spec.experiment.name,
        seed=experiment.plan.seed,
        planned=planned,
        done=done,
        runs_planned=len(experiment.plan.runs) * schedules,
        runs_done=runs_done,
        ok=counts.get("ok", 0),
        failed=counts.get("failed", 0),
        timeout=counts.get("timeout", 0),
        interrupted=counts.get("interrupted", 0),
        running=counts.get("running", 0),
        superseded=counts.get("superseded", 0),
        journaled=store.journaled(),
        writer=writer_of(store.path),
        eta_seconds=None if mean is None else (planned - done) * mean / schedules,
    )


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def describe(store: Store) -> str:
    """The text of ``washout status``."""
    p = progress_of(store)
    lines = [f"{store.path}: experiment {p.name!r}, seed {p.seed}"]
    if p.complete:
        lines.append(
            f"complete: {p.done} of {p.planned} trials, {p.runs_done} of {p.runs_planned} runs"
        )
    elif p.writer is not None:
        eta = "unknown" if p.eta_seconds is None else _duration(p.eta_seconds)
        lines.append(
            f"running ({describe_writer(p.writer)}): {p.done} of "
            f"{p.planned} trials done, {p.runs_done} of {p.runs_planned} "
            f"runs; ETA {eta}"
        )
    else:
        lines.append(
            f"stopped; `washout resume {store.path}` continues it: {p.done} of "
            f"{p.planned} trials done, {p.runs_done} of {p.runs_planned} runs"
        )
    lines.append(
        f"failed {p.failed}, timed out {p.timeout}, interrupted {p.interrupted}"
        + (f", superseded {p.superseded}" if p.superseded else "")
    )
    if p.journaled:
        lines.append(
            f"{p.journaled} more finished trial(s) in the trial journal, not counted above: "
            + (
                "folded into the store between runs"
                if p.writer is not None
                else f"`washout resume {store.path}` folds them in"
            )
        )
    context = store.context()
    if context is not None:
        lines.append(f"context randomized per trial: {', '.join(context[0])} ({context[1]} levels)")
    for worker, run, pos, test, status, reason in store.failures(5):
        lines.append(f"  {worker} run {run} position {pos} {test}: {status}: {printable(reason)}")
    return "\n".join(lines)


def exit_code(outcome: Outcome, store: Store) -> ExitCode:
    """How a session ended, the most serious first (docs/guarantees.md lists the codes)."""
    if outcome.terminated:
        return ExitCode.TERMINATED
    if outcome.aborted:
        return ExitCode.ABORTED
    if outcome.stopped:
        return ExitCode.INTERRUPTED
    if outcome.worker_errors:
        return ExitCode.WORKER_FAILED
    if store.tests_without_success():
        return ExitCode.TEST_ALWAYS_FAILED
    return ExitCode.DONE
