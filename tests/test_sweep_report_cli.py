"""The report's sweep section from the CLI: washout explore --report, washout report SWEEP_DIR."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import FIXTURES, washout

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
