"""Callers can tell what went wrong by the kind of WashoutError, and each stays one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_executor import FakeExecutor, Scripted
from test_engine_policies import RESET, experiment

from washout.data.sources import load_trials
from washout.errors import SourceError, SpecError, StoreError, StoreExistsError, WorkerError
from washout.harness.engine import execute
from washout.harness.environment import check_same
from washout.harness.spec import parse_spec_text


def test_a_bad_spec_is_a_spec_error_naming_file_field_and_value() -> None:
    with pytest.raises(SpecError) as err:
        parse_spec_text(
            '[experiment]\nname = "x"\nruns = -1\n[[test]]\nname = "t"\ncommand = "true"\n',
            "bad.toml",
        )
    assert str(err.value).startswith("bad.toml: experiment.runs = -1") and "\n" not in str(
        err.value
    )


def test_an_unreadable_file_of_trials_is_a_source_error(tmp_path: Path) -> None:
    bad = tmp_path / "trials.csv"
    bad.write_text("run,order\n1,fixed\n")
    with pytest.raises(SourceError, match="trials.csv"):
        load_trials(bad)
    with pytest.raises(SourceError, match="no such file"):
        load_trials(tmp_path / "absent.csv")


def test_a_failed_reset_stops_its_worker_with_a_worker_error(tmp_path: Path) -> None:
    x = experiment(runs=1)
    fake = FakeExecutor(script=lambda c, n: Scripted("failed") if c == RESET else Scripted())
    with x.create_store(tmp_path / "x.db") as store:
        outcome = execute(x, store, executors=[fake])
    (message,) = outcome.worker_errors.values()
    assert "reset command 'reset-the-worker' failed" in message and "\n" not in message


def test_workers_that_disagree_are_a_worker_error() -> None:
    a = {"kernel": "6.1", "file:app.bin": "sha256:1"}
    b = {"kernel": "6.1", "file:app.bin": "sha256:2"}
    with pytest.raises(WorkerError, match="file:app.bin differs: a has 'sha256:1'"):
        check_same([("a", a), ("b", b)], "between workers")


def test_a_taken_store_path_is_a_store_error(tmp_path: Path) -> None:
    x = experiment(runs=1)
    x.create_store(tmp_path / "x.db").close()
    with pytest.raises(StoreExistsError) as err:
        x.create_store(tmp_path / "x.db")
    assert isinstance(err.value, StoreError)
