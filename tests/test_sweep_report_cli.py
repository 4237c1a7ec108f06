"""The report's sweep section from the CLI: washout explore --report, washout report SWEEP_DIR."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import FIXTURES, washout

from washout import explore
from washout.errors import WashoutError
from washout.sweep.incremental import method_options
from washout.sweep.result import SweepResult, Versus

SILO = FIXTURES / "configspaces" / "silo_ycsb.csv"


def test_explore_writes_a_sweep_report(tmp_path: Path) -> None:
    out = tmp_path / "silo.html"
    washout("explore", SILO, "--metric", "tput", "--seed", "1", "--report", out)
    html = out.read_text()
    assert html.count("<svg") == 3  # R^2 by rate, coefficients, tile map
    assert "Model fit as more settings are measured" in html
    assert "the model reached the R² threshold" in html
    assert "threads:keys" in html and "<script" not in html


def test_report_reads_a_sweep_directory(tmp_path: Path) -> None:
    """The files washout sweep leaves in its directory make a report on their own."""
    result = json.loads(
        washout("explore", SILO, "--metric", "tput", "--seed", "2", "--format", "json").stdout
    )
    sweep_dir = tmp_path / "silo-sweep"
    sweep_dir.mkdir()
    (sweep_dir / "sweep.json").write_text(json.dumps(result))
    (sweep_dir / "settings.csv").write_text(SILO.read_text().replace("\r\n", "\n"))
    out = tmp_path / "r.md"
    proc = washout("report", sweep_dir, "-o", out, "--format", "md")
    assert f"sweep of {result['settings_measured']} settings" in proc.stdout
    text = out.read_text()
    assert "## Parameter space" in text and text.count("![") == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = washout("report", empty, check=False)
    assert bad.returncode == 2 and "not a sweep directory" in bad.stderr
    assert bad.stderr.count("\n") == 1


def test_the_sweep_result_round_trips_through_json() -> None:
    """sweep.json read back is the result that was written, every optional part included
    (a second system's conclusions, the runner's directory and noise ceiling)."""
    ours = explore(SILO, method_options("ours"), metric="tput")
    paper = explore(SILO, method_options("paper"), metric="tput").with_fields(
        versus=Versus("ours", ours.significant_terms, ours.important_points, ours.ranges),
        directory="silo-sweep",
        r2_noise_ceiling=0.97,
        stopped="budget spent",
    )
    assert paper.steps and paper.curves and paper.important_points and paper.ranges
    for result in (ours, paper):
        data = json.loads(json.dumps(result.to_dict()))
        again = SweepResult.from_dict(data)
        assert again == result and again.to_dict() == data
    assert isinstance(again.curves[0].x, tuple) and isinstance(again.versus, Versus)
    del data["directory"], data["versus"]
    assert SweepResult.from_dict(data).versus is None  # optional fields may be left out


def test_a_damaged_sweep_json_is_a_one_line_error(tmp_path: Path) -> None:
    """A field missing or of the wrong type is named with its file and value."""
    result = explore(SILO, metric="tput", full=True).to_dict()
    sweep_dir = tmp_path / "silo-sweep"
    sweep_dir.mkdir()
    (sweep_dir / "settings.csv").write_text(SILO.read_text())
    summary = sweep_dir / "sweep.json"
    cases = {
        "curves": ("curves: missing", lambda d: d.pop("curves")),
        "terminated": ("terminated = 'yes': expected a bool", lambda d: d.update(terminated="yes")),
        "x": (
            "curves[0].x = 'abc': expected a list",
            lambda d: d["curves"][0].update(x="abc"),
        ),
        "share": (
            "significant_terms[1].share = None: expected a float",
            lambda d: d["significant_terms"][1].update(share=None),
        ),
    }
    for message, damage in cases.values():
        data = json.loads(json.dumps(result))
        damage(data)
        summary.write_text(json.dumps(data))
        with pytest.raises(WashoutError, match="^" + re.escape(f"{summary}: {message}")):
            SweepResult.from_dict(data, str(summary))
        proc = washout("report", sweep_dir, "-o", tmp_path / "r.html", check=False)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1
        assert f"{summary}: {message}" in proc.stderr
