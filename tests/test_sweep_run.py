"""washout sweep for real: processes run by the engine, stores on disk, resume, budget."""

from __future__ import annotations

import re
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from washout.errors import WashoutError
from washout.sweep.result import load_sweep_dir
from washout.sweep.runner import run_sweep

SPEC = """
[experiment]
name = "arith"
seed = 11
timeout = "20s"
[reset]
command = "true"
[sweep]
command = "expr {a} '*' 7 + {b} '*' {b} + {a} '*' {b}"
metric = "value"
repeats = 2
start = 0.25
step = 0.25
growth = 1.0                # fixed 25% batches (ours grows them)
budget_settings = 6
sampler = "coverage"
[sweep.params]
a = [1, 2, 3, 4]
b = [0, 5, 10]
[sweep.metrics.value]
stdout = "last-number"
"""


def _trials(directory: Path) -> int:
    total = 0
    for db in sorted(directory.glob("batch-*.db")):
        with sqlite3.connect(db) as conn:
            total += conn.execute("SELECT COUNT(*) FROM trial").fetchone()[0]
    return total


def test_sweep_measures_resumes_and_stops_at_the_budget(tmp_path: Path) -> None:
    spec = tmp_path / "arith.toml"
    spec.write_text(SPEC)
    out = tmp_path / "results"
    notes: list[str] = []
    result = run_sweep(spec, out, notify=notes.append)
    assert result.settings_total == 12
    assert result.settings_measured == 6 and result.terminated is False
    assert sorted(p.name[:10] for p in out.glob("batch-*.db")) == ["batch-000-", "batch-001-"]
    assert _trials(out) == 6 * 2  # every setting twice (repeats), nothing more
    settings = pd.read_csv(out / "settings.csv")
    expected = settings["a"] * 7 + settings["b"] ** 2 + settings["a"] * settings["b"]
    assert list(settings["value"]) == list(expected)  # each setting's real output
    assert len(settings.drop_duplicates(["a", "b"])) == 6
    # coverage sampling: 3 settings first, and all 4 levels of a within 6
    assert settings["a"].nunique() == 4
    read, frame = load_sweep_dir(out)  # what a report reads back: the very same result
    assert read == result and read.directory == str(out) and frame.equals(settings)
    assert any("batch 1" in n for n in notes)
    assert result.r2_noise_ceiling == 1.0  # expr prints the same number every time

    again = run_sweep(spec, out)  # resume: the same batches, read from their stores
    assert _trials(out) == 12
    assert again.significant_terms == result.significant_terms
    assert again.r2_validation == result.r2_validation


def test_an_edited_spec_measures_its_batches_anew(tmp_path: Path) -> None:
    """Before, the stores were named by batch number alone: after the command was edited,
    re-running the sweep read the old command's results back as the new one's."""
    spec = tmp_path / "arith.toml"
    spec.write_text(SPEC.replace("budget_settings = 6", "budget_settings = 3"))
    out = tmp_path / "results"
    run_sweep(spec, out)
    spec.write_text(spec.read_text().replace("'*' 7", "'*' 100"))
    run_sweep(spec, out)
    settings = pd.read_csv(out / "settings.csv")
    expected = settings["a"] * 100 + settings["b"] ** 2 + settings["a"] * settings["b"]
    assert list(settings["value"]) == list(expected)
    assert _trials(out) == 2 * 3 * 2  # both versions kept, each measured once
    run_sweep(spec, out)  # unchanged: read back, nothing measured again
    assert _trials(out) == 2 * 3 * 2


def test_a_sweep_whose_metric_does_not_vary_says_so(tmp_path: Path) -> None:
    spec = tmp_path / "flat.toml"
    spec.write_text(
        SPEC.replace(
            "expr {a} '*' 7 + {b} '*' {b} + {a} '*' {b}", "expr {a} '*' 0 + {b} '*' 0 + 4"
        ).replace("budget_settings = 6", "budget_settings = 3")
    )
    with pytest.raises(
        WashoutError,
        match=r"settings.csv: metric 'value' does not vary \(all 3 "
        r"settings measured 4\): nothing to explore",
    ):
        run_sweep(spec, tmp_path / "out")


def test_noise_ceiling_is_the_reliability_of_the_means() -> None:
    from washout.sweep.runner import noise_ceiling

    rng = np.random.default_rng(0)
    truth = rng.normal(0, 1, 400)
    trials = truth[:, None] + rng.normal(0, 1, (400, 3))  # noise variance 1, 3 repeats
    means = trials.mean(axis=1)
    ceiling = noise_ceiling(means, trials.var(axis=1, ddof=1) / 3)
    assert ceiling == pytest.approx(1 - (1 / 3) / (1 + 1 / 3), abs=0.05)  # = 0.75
    assert noise_ceiling(means, np.full(400, np.nan)) is None


def test_sweep_cli_reports_a_failing_setting_in_one_line(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    from washout.cli import main

    spec = tmp_path / "broken.toml"
    spec.write_text(
        SPEC.replace("expr {a}", "expr {a} / 0 +").replace(
            "budget_settings = 6", "budget_settings = 3"
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["washout", "sweep", str(spec), "-q"])
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2
    assert re.search(r"batch-000-[0-9a-f]{12}\.db: test 'setting-", err), err
    assert "no successful trial with metric 'value'" in err
    assert err.count("\n") == 0


def test_budget_hours_stops_before_a_batch_that_would_pass_it(tmp_path: Path) -> None:
    spec = tmp_path / "arith.toml"
    spec.write_text(SPEC.replace("budget_settings = 6", "budget_hours = 0.000001"))
    result = run_sweep(spec, tmp_path / "out")
    assert result.settings_measured == 3  # the first batch, then the estimate says no
    assert result.terminated is False
    assert "would pass budget_hours = 1e-06" in result.stopped
    assert _trials(tmp_path / "out") == 3 * 2
