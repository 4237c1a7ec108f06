"""washout's log: silent by default, `-v` tells what the session does, `-vv` every trial;
a library caller sees it through ``logging.getLogger("washout")``."""

from __future__ import annotations

import logging
from pathlib import Path

from conftest import washout
from fake_executor import FakeExecutor, Scripted
from test_engine_policies import experiment

from washout.harness.engine import execute


def test_the_log_is_silent_by_default_and_grows_with_v(tmp_path: Path) -> None:
    quiet = washout("run", "true", "sleep 0", "--runs", "2", "--db", tmp_path / "q.db")
    assert "washout.harness" not in quiet.stderr
    some = washout("-v", "run", "true", "sleep 0", "--runs", "2", "--db", tmp_path / "v.db")
    assert "run 0 (fixed order)" in some.stderr and "before this session" in some.stderr
    assert "position 0" not in some.stderr
    every = washout("-vv", "run", "true", "sleep 0", "--runs", "2", "--db", tmp_path / "vv.db")
    # --runs 2: each command twice in all (hyperfine's meaning), so 4 trials
    assert every.stderr.count(": ok (") == 4 and "reset: no reset configured" in every.stderr


def test_a_rerun_is_logged_as_a_warning(tmp_path: Path, caplog) -> None:
    x = experiment(runs=1)
    lost = FakeExecutor(
        script=lambda c, n: Scripted("lost") if (c, n) == ("run-b", 0) else Scripted()
    )
    with caplog.at_level(logging.INFO, logger="washout"), x.create_store(tmp_path / "x.db") as s:
        assert execute(x, s, executors=[lost]).complete
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "re-running it whole" in warnings[0].getMessage()
    assert warnings[0].name == "washout.harness.engine"
