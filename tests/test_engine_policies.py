"""The engine's policies on scripted outcomes: the plan runs in order with a reset before
every run, failures are retried, recorded or abort as the spec says, a lost worker's run is
re-run whole, and Ctrl-C then resume ends in exactly the planned trials.

The worker is :class:`fake_executor.FakeExecutor` (outcomes as scripted, no processes), so
these run in well under a second each; the same rules with real processes and real SSH are
tested in test_robustness.py, test_store_lifecycle.py and test_ssh_failures.py.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

import pytest
from fake_executor import FakeExecutor, Script, Scripted

from washout.harness.engine import LOST_RUN_RESTARTS, Experiment, execute
from washout.harness.spec import parse_spec_text

RESET = "reset-the-worker"
COMMANDS = {"a": "run-a", "b": "run-b", "c": "run-c"}


def experiment(
    runs: int = 3, on_failure: str = "record", seed: int = 7, tables: str = ""
) -> Experiment:
    tests = "".join(
        f'[[test]]\nname = "{name}"\ncommand = "{command}"\n' for name, command in COMMANDS.items()
    )
    text = (
        f'[experiment]\nname = "policies"\nruns = {runs}\nseed = {seed}\n'
        f'on_failure = "{on_failure}"\n[reset]\ncommand = "{RESET}"\n{tables}{tests}'
    )
    spec = parse_spec_text(text, "policies.toml")
    return Experiment.prepare(spec, text, "policies.toml")


def planned_commands(x: Experiment) -> list[str]:
    """Every run's reset and trials, in the order the plan says."""
    calls = []
    for run in x.plan.runs:
        calls.append(RESET)
        calls += [x.tests[i].command for i in run.tests]
    return calls


def rows(db: Path, where: str = "1") -> list[tuple]:
    """(run index, position, test, attempt, status, superseded) of the stored trials."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT r.idx, t.position, t.test, t.attempt, t.status, t.superseded FROM trial t "
            f"JOIN run r ON r.id = t.run_id WHERE {where} ORDER BY t.id"
        ).fetchall()


def run(x: Experiment, db: Path, fake: FakeExecutor):
    with x.create_store(db) if not db.exists() else _open(db) as store:
        return execute(x, store, executors=[fake])


def _open(db: Path):
    from washout.harness.engine import reopen_store

    return reopen_store(db)


def seen(fake: FakeExecutor) -> list[str]:
    """The resets and trials the worker was given (not washout's own checks)."""
    return [c for c in fake.calls if c == RESET or c in COMMANDS.values()]


def test_every_run_is_reset_then_runs_its_planned_order(tmp_path: Path) -> None:
    x = experiment(runs=4)
    fake = FakeExecutor()
    outcome = run(x, tmp_path / "x.db", fake)
    assert outcome.complete and outcome.executed == x.plan.total_trials
    assert seen(fake) == planned_commands(x)
    stored = rows(tmp_path / "x.db")
    assert len(stored) == x.plan.total_trials
    assert {r[4] for r in stored} == {"ok"} and {r[3] for r in stored} == {0}
    assert fake.connects == 1 and fake.closes == 1


def test_retry_runs_a_failed_slot_again_until_it_succeeds_or_retries_are_spent(
    tmp_path: Path,
) -> None:
    # b fails on its first call of every run and then succeeds; c always fails.
    x = experiment(runs=2, on_failure="retry:2")

    def script(command: str, n: int) -> Scripted:
        if command == "run-c":
            return Scripted("failed")
        if command == "run-b" and n % 2 == 0:
            return Scripted("failed")
        return Scripted()

    outcome = run(x, tmp_path / "x.db", FakeExecutor(script=script))
    stored = rows(tmp_path / "x.db")
    runs = len(x.plan.runs)
    b = [r for r in stored if r[2] == "b"]
    c = [r for r in stored if r[2] == "c"]
    assert [(r[3], r[4]) for r in b] == [(0, "failed"), (1, "ok")] * runs
    assert [(r[3], r[4]) for r in c] == [(0, "failed"), (1, "failed"), (2, "failed")] * runs
    assert outcome.complete and outcome.failures == runs * (1 + 3)


def test_record_counts_a_failure_as_done_and_goes_on(tmp_path: Path) -> None:
    x = experiment(runs=2)
    fake = FakeExecutor(script=lambda c, n: Scripted("failed" if c == "run-a" else "ok"))
    outcome = run(x, tmp_path / "x.db", fake)
    assert outcome.complete and seen(fake) == planned_commands(x)
    assert sum(r[4] == "failed" for r in rows(tmp_path / "x.db")) == len(x.plan.runs)


def test_abort_stops_the_whole_experiment_at_the_first_failure(tmp_path: Path) -> None:
    x = experiment(runs=3, on_failure="abort")
    fake = FakeExecutor(script=lambda c, n: Scripted("failed" if c == "run-b" else "ok"))
    outcome = run(x, tmp_path / "x.db", fake)
    assert outcome.aborted and not outcome.complete
    assert seen(fake)[-1] == "run-b" and seen(fake).count("run-b") == 1
    assert rows(tmp_path / "x.db")[-1][2:5] == ("b", 0, "failed")
    with sqlite3.connect(tmp_path / "x.db") as conn:
        assert conn.execute("SELECT status FROM run WHERE status = 'aborted'").fetchall()


def losing_trial(lost_at: int) -> Script:
    """A script whose trial number ``lost_at`` (from 0, of every test) loses its worker."""
    trials = iter(range(1_000_000))

    def script(command: str, n: int) -> Scripted:
        if command in COMMANDS.values() and next(trials) == lost_at:
            return Scripted("lost", reason="connection dropped")
        return Scripted()

    return script


def test_a_lost_worker_reruns_its_run_whole_after_a_fresh_reset(tmp_path: Path) -> None:
    x = experiment(runs=2)
    lost_at = 4  # the fifth trial the worker is given is lost with its connection
    fake = FakeExecutor(script=losing_trial(lost_at))
    outcome = run(x, tmp_path / "x.db", fake)
    assert outcome.complete
    stored = rows(tmp_path / "x.db")
    kept = [r for r in stored if not r[5]]
    superseded = [r for r in stored if r[5]]
    assert len(kept) == x.plan.total_trials and {r[4] for r in kept} == {"ok"}
    # the lost run's trials so far, the lost one as interrupted, are kept out of the analysis
    assert [r[4] for r in superseded] == ["ok"] * (lost_at % 3) + ["interrupted"]
    # the run was reset again before it was re-run from its first position
    order = seen(fake)
    lost_trial = [i for i, c in enumerate(order) if c != RESET][lost_at]
    lost_run = x.plan.runs[lost_at // 3]
    rerun = [RESET] + [x.tests[i].command for i in lost_run.tests]
    after = order[order.index(RESET, lost_trial) :]
    assert after[: len(rerun)] == rerun


def test_a_lost_trial_gets_no_conclude_and_its_run_is_rerun(tmp_path: Path) -> None:
    """[conclude] follows every trial but one whose worker was lost: that worker is
    reconnected and the run re-run first (a conclude sent to it would stop the worker)."""
    x = experiment(runs=2, tables='[conclude]\ncommand = "conclude-it"\n')
    lost_at = 4
    fake = FakeExecutor(script=losing_trial(lost_at))
    assert run(x, tmp_path / "x.db", fake).complete
    calls = [c for c in fake.calls if c in (*COMMANDS.values(), "conclude-it")]
    trial_at = [i for i, c in enumerate(calls) if c in COMMANDS.values()]
    concluded = [calls[i + 1] == "conclude-it" for i in trial_at]
    assert concluded == [i != lost_at for i in range(len(trial_at))]


def test_a_worker_lost_every_time_gives_up_with_one_line(tmp_path: Path) -> None:
    x = experiment(runs=1)
    fake = FakeExecutor(
        script=lambda c, n: Scripted("lost") if c == "run-a" else Scripted(),
    )
    outcome = run(x, tmp_path / "x.db", fake)
    assert not outcome.complete
    (error,) = outcome.worker_errors.values()
    assert f"gave up after {LOST_RUN_RESTARTS} re-runs" in error and "\n" not in error
    assert sum(r[5] for r in rows(tmp_path / "x.db")) == LOST_RUN_RESTARTS + 1


def test_ctrl_c_stops_at_a_trial_boundary_and_resume_ends_in_exactly_the_plan(
    tmp_path: Path,
) -> None:
    x = experiment(runs=3)
    db = tmp_path / "x.db"
    trials = iter(range(1000))

    def press_ctrl_c(command: str, n: int) -> None:
        if command in COMMANDS.values() and next(trials) == 7:
            os.kill(os.getpid(), signal.SIGINT)

    first = FakeExecutor(on_call=press_ctrl_c)
    outcome = run(x, db, first)
    assert outcome.stopped and not outcome.complete
    assert len(seen(first)) < len(planned_commands(x))

    second = FakeExecutor()
    from washout.data.store import Store

    with Store.open(db) as stored:
        resumed = Experiment.from_store(stored)
    outcome = run(resumed, db, second)
    assert outcome.complete
    kept = rows(db, "t.superseded = 0")
    assert len(kept) == x.plan.total_trials and {r[4] for r in kept} == {"ok"}
    # every kept run holds each planned position once, in the planned order
    for plan_run in x.plan.runs:
        stored = [r for r in kept if r[0] == plan_run.index]
        assert [r[2] for r in stored] == [x.tests[i].name for i in plan_run.tests]
    # the resumed session began with a reset: nothing ran on the worker before it
    assert seen(second)[0] == RESET


@pytest.mark.parametrize("seed", [1, 2])
def test_the_same_seed_gives_the_same_commands(tmp_path: Path, seed: int) -> None:
    a, b = FakeExecutor(), FakeExecutor()
    run(experiment(seed=seed), tmp_path / "a.db", a)
    run(experiment(seed=seed), tmp_path / "b.db", b)
    assert seen(a) == seen(b)
