"""Whatever ``washout export`` writes, ``analyze``, ``report`` and ``washout.load`` read back,
to the same trials and the same analysis as the store's: a real run with warmups, failures,
a timeout and a run re-run after SIGTERM, exported as CSV, JSON and Parquet, with and
without the superseded trials. And warmups cut short are superseded like any trial."""

from __future__ import annotations

import io
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import is_health, washout
from test_robustness import start, wait_for_trials, write_spec

import washout as api

MIXED = """
[experiment]
name = "mixed"
runs = 3
seed = 11
warmup = 1
timeout = "1s"
orders = ["fixed", "random", "reverse"]
[[test]]
name = "fine"
command = "echo 5"
[test.metrics.n]
stdout = "last-number"
[[test]]
name = "flaky"
command = "if [ -e {stop} ]; then exit 3; fi; touch {stop}; echo 7"
[test.metrics.n]
stdout = "last-number"
[[test]]
name = "slow"
command = "sleep {sleep}"
"""
"""Three order kinds, warmups, a test that fails after its first trial, one that times out
once the file ``slow`` says so: every status an export can hold."""


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of every status, order kind and warmup, with a run superseded (SIGTERM
    mid-run, then resume)."""
    tmp = tmp_path_factory.mktemp("mixed")
    spec = write_spec(
        tmp / "m.toml", MIXED.format(stop=tmp / "stop", sleep="$(cat " + str(tmp / "s") + ")")
    )
    (tmp / "s").write_text("0.3")
    db = tmp / "m.db"
    proc = start("run", spec, "--db", db, "--quiet")
    wait_for_trials(db, "status = 'running' AND test = 'slow' AND run_id > 1")  # position 2
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    (tmp / "s").write_text("2")  # now slow times out
    washout("resume", db, "--quiet", check=False)
    with sqlite3.connect(db) as conn:
        found = set(conn.execute("SELECT status, superseded FROM trial"))
    assert {("ok", 0), ("failed", 0), ("timeout", 0), ("warmup", 0), ("ok", 1)} <= found
    return db


def test_every_export_is_read_back_as_the_store_holds_it(mixed_store: Path, tmp_path: Path) -> None:
    """An export with warmups was refused by analyze and report ("order = 'warmup'"). Every
    format, with or without the superseded trials, now loads to the store's own frame
    (values to the bit), and analyze gives the store's analysis."""
    db = mixed_store
    by_store = api.load(db)
    assert {"warmup", "fixed", "random", "reverse"} == set(by_store["order"])
    with sqlite3.connect(db) as conn:  # every metric any trial recorded
        recorded = {name for (name,) in conn.execute("SELECT DISTINCT name FROM metric")}
    metrics = set(by_store["metric"])
    assert recorded <= metrics  # the health measures this machine gave, besides these:
    assert {m for m in metrics if not is_health(m)} == {"user", "system", "max_rss", "n", "wall"}
    analysis = json.loads(washout("analyze", db, "--format", "json").stdout)
    for fmt in ("csv", "json", "parquet"):
        for extra in ([], ["--include-superseded"]):
            out = tmp_path / f"m{len(extra)}.{fmt}"
            washout("export", db, "--format", fmt, "-o", out, *extra)
            loaded = api.load(out)
            if not extra:
                pd.testing.assert_frame_equal(loaded, by_store, check_categorical=False)
                again = json.loads(washout("analyze", out, "--format", "json").stdout)
                assert again.pop("source")["kind"] == f"long-{fmt}"  # all but where from
                assert again == {k: v for k, v in analysis.items() if k != "source"}, fmt
            else:
                assert "superseded" in set(loaded["status"])
                washout("analyze", out)
            washout("report", out, "-o", tmp_path / f"{fmt}{len(extra)}.html")


def test_a_warmup_stopped_by_sigterm_is_superseded_on_resume(tmp_path: Path) -> None:
    """It stayed ``interrupted`` for ever, counted by status, exported as interrupted."""
    spec = write_spec(
        tmp_path / "w.toml",
        '[experiment]\nruns = 1\nwarmup = 2\nseed = 3\n[[test]]\nname = "a"\n'
        'command = "sleep 0.5"\n[[test]]\nname = "b"\ncommand = "true"\n',
    )
    db = tmp_path / "w.db"
    proc = start("run", spec, "--db", db, "--quiet")
    wait_for_trials(db, "status = 'warmup'")
    wait_for_trials(db, "status = 'running' AND id > 1")  # the second warmup of a
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    washout("resume", db, "--quiet")
    with sqlite3.connect(db) as conn:
        left = conn.execute(
            "SELECT count(*) FROM trial WHERE status = 'interrupted' AND superseded = 0"
        ).fetchone()[0]
        warm = conn.execute(
            "SELECT count(*) FROM trial WHERE status = 'warmup' AND superseded = 0"
        ).fetchone()[0]
    assert left == 0 and warm == 4  # the resumed session's own warmups
    status = washout("status", db).stdout
    assert "interrupted 0" in status and "superseded" in status
    assert "interrupted" not in set(api.load(db)["status"])


def test_a_carriage_return_in_a_name_survives_every_csv(tmp_path: Path) -> None:
    """pandas quotes a cell for a line end's characters only ("\\n"), so a test named with
    a lone carriage return was written bare and every reader took it for a line's end: the
    export read back with its values in the wrong columns (found by the fuzz test). The
    export and ``analyze --format csv`` read back whole now."""
    spec = write_spec(
        tmp_path / "r.toml",
        '[experiment]\nruns = 2\nseed = 1\n[[test]]\nname = "a\\rb"\ncommand = "true"\n'
        '[[test]]\nname = "plain"\ncommand = "true"\n',
    )
    db = tmp_path / "r.db"
    washout("run", spec, "--db", db, "--quiet")
    out = tmp_path / "e.csv"
    washout("export", db, "--format", "csv", "-o", out)
    held = api.load(db)
    read = api.load(out)
    assert sorted(set(read["test"])) == ["a\rb", "plain"]
    assert read["value"].tolist() == held["value"].tolist()
    argv = [sys.executable, "-m", "washout", "analyze", str(db), "--format", "csv"]
    csv = subprocess.run(argv, capture_output=True, check=True).stdout  # bytes: "\r" kept
    table = pd.read_csv(io.BytesIO(csv))
    assert sorted(table["test"]) == ["a\rb", "plain"]


@pytest.mark.parametrize(
    "cells",
    [
        ["x", "a\rb"],  # text: searched in one pass
        pd.array(["x", "a\rb"], dtype="string"),  # pandas' string dtype
        [{"n": 1}, "a\rb"],  # a sweep's settings hold dicts beside text
        [b"\x80", "a\rb"],  # a damaged store's bytes (astype(str) would decode them)
        pd.Categorical(["x", "a\rb"]),
    ],
)
def test_every_kind_of_column_with_a_carriage_return_is_quoted(cells: object) -> None:
    """csv_text finds a lone carriage return in every kind of column a frame holds, and
    writes what it finds none in as pandas does."""
    from washout.data.outputs import csv_text

    frame = pd.DataFrame({"n": [1, 2], "cell": cells})
    text = csv_text(frame)
    assert text.split("\n")[2] == '2,"a\rb"'
    assert pd.read_csv(io.StringIO(text))["cell"][1] == "a\rb"
    plain = frame.assign(cell=["x", "y"])
    assert csv_text(plain) == plain.to_csv(index=False)
