"""``perf stat`` counters as metrics of a trial, through real runs under the real perf
(``scripts/services/perf.sh``): a software counter this machine always has, a hardware
counter reported as not supported where the machine has none (a VM), the measured
command run exactly as written, and perf's own refusal of an unknown event."""

from __future__ import annotations

import io
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import washout

from washout.harness.measure import MetricError
from washout.harness.metrics.perf import perf_values

pytestmark = pytest.mark.skipif(
    shutil.which("perf") is None, reason="perf missing: run scripts/services/perf.sh"
)


def _perf_csv(events: str) -> str:
    out = subprocess.run(
        ["perf", "stat", "-x", ",", "-e", events, "true"], capture_output=True, text=True
    )
    return out.stderr


def _supported(event: str) -> bool:
    """What ``perf stat -e EVENT true`` says of this machine."""
    return "<not supported>" not in _perf_csv(event)


def test_perf_values_read_perfs_csv_with_not_supported_as_such() -> None:
    text = _perf_csv("task-clock,context-switches")
    values = perf_values(text, ["task-clock", "context-switches"])
    assert isinstance(values["task-clock"], float) and values["task-clock"] > 0
    canned = (
        "# started on Sun\n\n<not supported>,,instructions,0,100.00,,\n"
        "<not counted>,,cycles,0,0,,\n"
    )
    assert perf_values(canned, ["instructions", "cycles"]) == {
        "instructions": "not supported",
        "cycles": "not counted",
    }
    with pytest.raises(MetricError, match="no event 'branches' .it reported: cycles, instr"):
        perf_values(canned, ["branches"])


def test_counters_of_a_real_trial(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        """
[experiment]
name = "perf"
runs = 1
seed = 2

[[test]]
name = "spin"
command = "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; echo \\"a  b\\" '$HOME'"
[test.metrics.ms]
perf = "task-clock"
[test.metrics.instructions]
perf = "instructions"
"""
    )
    db = tmp_path / "p.db"
    washout("run", spec, "--db", db, "--quiet")
    frame = pd.read_csv(io.StringIO(washout("export", db).stdout))
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status, reason, stdout_tail FROM trial").fetchall()
    assert [r[0] for r in rows] == ["ok", "ok"]
    # the command ran exactly as written under perf: quotes and $ untouched
    assert all(r[2] == "a  b $HOME\n" for r in rows)
    ms = frame[frame.metric == "ms"]["value"]
    assert (ms > 1).all()  # a busy loop of 30,000 steps takes milliseconds of CPU
    instructions = frame[frame.metric == "instructions"]["value"]
    if _supported("instructions"):
        assert (instructions > 1e6).all()
    else:
        assert instructions.isna().all()
        assert all(
            r[1] == "metric instructions: not available: perf event instructions not supported"
            for r in rows
        )


def test_an_event_perf_does_not_know_fails_the_trial_with_perfs_words(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        """
[experiment]
name = "perf"
runs = 1

[[test]]
name = "t"
command = "touch ran"
[test.metrics.x]
perf = "no-such-event"
"""
    )
    db = tmp_path / "p.db"
    washout("run", spec, "--db", db, "--quiet", cwd=tmp_path, check=False)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status, reason, stderr_tail FROM trial").fetchall()
    assert {r[0] for r in rows} == {"failed"}
    assert all("event syntax error: 'no-such-event'" in r[2] for r in rows)
    assert not (tmp_path / "ran").exists()  # perf refused before running the command
