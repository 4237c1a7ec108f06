"""The one analysis and its renderers (issue 30): every output is rendered from one result and
says the same thing; the JSON is that result and reads back into it; the run's summary of
many tests costs a few seconds."""

from __future__ import annotations

import html
import json
import re
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from conftest import MEMCACHED, NPBENCH, ROOT
from test_report_sweep import silo_sweep

import washout
from washout.analysis.compute import analyze, sweep_analysis
from washout.analysis.result import Analysis, Options
from washout.analysis.units import metric_value, time_unit
from washout.report import text
from washout.report.markdown import md_text
from washout.report.render import Settings, renderer
from washout.report.words import render_words

REPORT = Options(carryover=None, drift=None, describe=True)
"""What ``washout report`` and the run's summary ask of the analysis."""


class Cells(HTMLParser):
    """The rows of each table of an HTML page, by the id of the section it is in, and the
    page's text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.section = ""
        self.row: list[str] | None = None
        self.cell: list[str] | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section":
            self.section = dict(attrs).get("id") or ""
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.row is not None and self.cell is not None:
            self.row.append("".join(self.cell))
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.tables.setdefault(self.section, []).append(self.row)
            self.row = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)
        self.text.append(data)


def _words(s: str) -> str:
    return " ".join(s.split())


def _outputs(analysis: Analysis, tmp_path: Path) -> dict[str, str]:
    """Every format's text of one analysis (Markdown's figures written beside it)."""
    out = {}
    for fmt in ("table", "json", "csv", "md", "html"):
        rendered = renderer(fmt)(analysis, Settings(stem="r", workers=1))
        for name, data in rendered.files.items():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_bytes(data)
        out[fmt] = rendered.text
    return out


def assert_outputs_agree(analysis: Analysis, tmp_path: Path) -> None:
    """The terminal, JSON, CSV, Markdown and HTML outputs of ``analysis`` show the same
    tests, values, verdicts and ratios, and those are the JSON's numbers."""
    outputs = _outputs(analysis, tmp_path)
    data = json.loads(outputs["json"])
    again = Analysis.from_dict(data)
    assert again.to_dict() == data
    # Read back from its JSON, the analysis renders the same terminal text: renderers read
    # the result and nothing else.
    assert renderer("table")(again, Settings()).text == outputs["table"]
    page = Cells()
    page.feed(outputs["html"])
    page_text = _words("".join(page.text))
    terminal, md = outputs["table"], outputs["md"]
    sentences = [text.verdict(analysis), *render_words(analysis)] if not analysis.sweep else []
    for sentence in sentences:
        assert sentence in terminal
        assert md_text(sentence) in md
        assert _words(sentence) in page_text
    order = data["order"]
    if order is not None:
        table = text.order_table(analysis.order)  # type: ignore[arg-type]
        frame = pd.read_csv(__import__("io").StringIO(outputs["csv"]))
        assert list(frame["test"].astype(str)) == [t["test"] for t in order["tests"]]
        html_rows = page.tables["tests"][1:]
        md_rows = [line.replace("**", "") for line in md.splitlines() if line.startswith("| ")]
        assert len(html_rows) == len(table.rows) == len(order["tests"])
        for row, cells, t, csv_row in zip(
            table.rows, html_rows, order["tests"], frame.to_dict("records"), strict=True
        ):
            # The cells show the JSON's numbers, as the CSV has them.
            for key in ("median_fixed", "median_random", "kw_p", "delta_median_pct"):
                if t[key] is None:
                    assert pd.isna(csv_row[key])
                else:
                    assert float(csv_row[key]) == t[key]
            column = dict(zip(table.columns, row))
            unit = time_unit(t["median_fixed"]) if t["metric"] == "wall" else None
            if t["median_fixed"] is not None:
                shown = metric_value(t["metric"], t["median_fixed"], unit)
                assert column["median fixed"] == shown
            assert column["Δ median %"] == text.percent(t["delta_median_pct"])
            assert column["p (KW)"] == text.p_value(t["kw_p"])
            assert column["significant"] == ("yes" if t["significant"] else "no")
            assert bool(csv_row["significant"]) == t["significant"]
            assert cells == row  # the HTML row, cell for cell
            assert "| " + " | ".join(md_text(c) for c in row) + " |" in md_rows
            narrow = [c for c, name in zip(row, table.columns) if name not in table.wide]
            line = next(x for x in terminal.splitlines() if x.startswith(f" {row[0]} "))
            assert [c.strip() for c in line.split("│")] == narrow
    comparison = data["comparison"]
    if comparison is not None:
        rankings = comparison["rankings"]
        for head, lines in text.ranking_lines(analysis.comparison):  # type: ignore[arg-type]
            for line in lines:
                assert f"    {line}" in terminal
                assert _words(md_text(f"{head} {line}")) in _words(md)
                assert _words(f"{head} {line}") in page_text
        for r in rankings:
            phrase = f"{r['ratio']:.2f} times" if r["ratio"] > 1 else f"{1 / r['ratio']:.2f} times"
            significant = r["ratio_ci"] is not None and not (
                r["ratio_ci"][0] <= 1 <= r["ratio_ci"][1]
            )
            if significant:
                assert phrase in terminal and phrase in md and phrase in page_text
            else:
                said = f"No significant difference between {r['fastest']!r} and {r['test']!r}"
                assert said in terminal and f"ratio {r['ratio']:.2f}" in terminal
        rows = text.comparison_table(analysis.comparison).rows  # type: ignore[arg-type]
        assert page.tables["comparison"][1:] == rows
    if analysis.sweep is not None:
        for _, table in text.sweep_tables(analysis.sweep):
            for row in table.rows:
                shown = [[c.strip() for c in x.split("│")] for x in terminal.splitlines()]
                assert row in shown
                assert "| " + " | ".join(md_text(c) for c in row) + " |" in md.replace("**", "")
                assert row in page.tables["sweep"]
        assert list(pd.read_csv(__import__("io").StringIO(outputs["csv"]))["term"]) == [
            p.term for p in analysis.sweep.important_points
        ]


@pytest.mark.parametrize("source", [MEMCACHED, NPBENCH], ids=["memcached", "npbench"])
def test_every_renderer_agrees_on_the_papers_data(source: Path, tmp_path: Path) -> None:
    assert_outputs_agree(analyze(source, REPORT), tmp_path)


def test_every_renderer_agrees_on_a_sweep(tmp_path: Path) -> None:
    settings, sweep = silo_sweep()
    assert_outputs_agree(sweep_analysis(sweep, settings, "silo"), tmp_path)


def test_every_renderer_agrees_on_the_quickstart(tmp_path: Path) -> None:
    """The README's quickstart, run for real (3 runs per order kind instead of 30)."""
    result = washout.run(
        washout.Spec.read(ROOT / "examples/quickstart.toml"), runs=3, db=tmp_path / "q.db"
    )
    assert result.complete
    analysis = analyze(result.db, Options(carryover=None, drift=None, compare=True))
    assert analysis.order is not None and analysis.comparison is not None
    assert analysis.carryover is not None and analysis.drift is not None
    assert_outputs_agree(analysis, tmp_path)


def test_json_of_the_analysis_is_versioned_and_complete(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "washout", "analyze", str(MEMCACHED), "--format", "json"]
        + ["--carryover", "--drift", "--claim", "./cmd_set_test.sh < ./cmd_get_test.sh"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    data = json.loads(proc.stdout)
    assert (data["schema"], data["schema_version"]) == ("washout-analysis", 1)
    documented = (ROOT / "docs/api.md").read_text()
    for key in data:
        assert f"`{key}`" in documented, key  # every key in the table of docs/api.md
    assert Analysis.from_dict(data).to_dict() == data


def test_the_summary_of_2000_tests_takes_seconds(tmp_path: Path) -> None:
    """Issue 32: 2,000 tests x 1 run each way took 91 s to summarise, one pass over the data
    per pair of tests; the summary is the time from the last trial's end to the exit."""
    db = tmp_path / "many.db"
    values = ",".join(str(i) for i in range(2000))
    proc = subprocess.run(
        [sys.executable, "-m", "washout", "run", "true {x}", "-L", "x", values]
        + ["--runs", "2", "--seed", "1", "--db", str(db), "-q"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    done = time.time()
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(db) as c:
        (last,) = c.execute("SELECT max(ended) FROM trial").fetchone()
    summary = done - datetime.fromisoformat(last).timestamp()
    assert "'true 0'" in proc.stdout or "true 0" in proc.stdout
    assert proc.stdout.count("\n") > 4000  # both tables, a row per test
    assert summary < 30, f"the summary took {summary:.1f} s"


def test_carryover_and_drift_are_taken_unasked_up_to_a_limit_of_tests() -> None:
    """A report takes carryover and drift where the source supports them; past WHY_TESTS
    tests (a paper-scale source: drift's resampling alone took minutes) only when asked,
    and it says so in one note."""
    from simulate_longformat import simulate

    from washout.analysis.compute import WHY_TESTS

    def frame(tests: int) -> pd.DataFrame:
        return simulate(tests=tuple(f"t{i:03d}" for i in range(tests)), runs=3, seed=1)

    many = frame(WHY_TESTS + 1)
    auto = washout.analyze(many, carryover=None, drift=None)
    assert auto.carryover is None and auto.drift is None
    assert f"taken for at most {WHY_TESTS} tests unless asked" in " ".join(auto.notes)
    asked = washout.analyze(many, carryover=None, drift=True)
    assert asked.drift is not None and asked.carryover is None
    few = washout.analyze(frame(WHY_TESTS), carryover=None, drift=None)
    assert few.drift is not None and few.carryover is not None


def test_values_near_the_float_limit_give_valid_json(tmp_path: Path) -> None:
    """Issue 32: finite values whose mean overflows a float gave a ValueError traceback; the
    JSON now has null there, and nothing is written to stderr (by the analysis, OrderSage's
    table or a plan)."""
    rows = ["run,order,position,test,metric,value,status,worker"]
    for run in range(8):
        for position, (test, value) in enumerate((("a", 1e308), ("b", 1.7e308))):
            order = "fixed" if run % 2 == 0 else "random"
            rows.append(f"{run},{order},{position},{test},wall,{value * (1 - run / 100)},ok,w")
    path = tmp_path / "huge.csv"
    path.write_text("\n".join(rows) + "\n")
    printed = {}
    for fmt in ("json", "table", "csv"):
        proc = subprocess.run(
            [sys.executable, "-m", "washout", "analyze", str(path), "--format", fmt],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        printed[fmt] = proc.stdout
    data = json.loads(printed["json"])
    first = data["order"]["tests"][0]
    assert first["mean_fixed"] is None  # beyond a float: undefined, not an error
    # fixed runs 0, 2, 4, 6: the median of 1, 0.98, 0.96, 0.94 e308, halves first (no overflow)
    assert first["median_fixed"] == pytest.approx(0.97e308)
    assert data["comparison"]["summaries"][0]["mean"] is None
    # OrderSage's table and a plan from the same pilot: the same undefined values, no
    # RuntimeWarning on stderr
    for args in (["analyze", "--compat", "ordersage"], ["plan", "--detect", "5%", "--pilot"]):
        proc = subprocess.run(
            [sys.executable, "-m", "washout", *args, str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_html_escapes_what_the_terminal_prints_as_is() -> None:
    """One sentence, two outputs: the terminal prints a test's name as it is, the HTML
    report escapes it."""
    trials = pd.DataFrame(
        {
            "run": [0, 0, 1, 1],
            "order": ["fixed", "fixed", "random", "random"],
            "position": [0, 1, 0, 1],
            "test": ["<b>a</b>", "b", "b", "<b>a</b>"],
            "metric": ["wall"] * 4,
            "value": [1.0, 2.0, 2.0, 1.0],
            "status": ["ok"] * 4,
        }
    )
    analysis = analyze(trials)
    assert "<b>a</b>" in renderer("table")(analysis, Settings()).text
    page = renderer("html")(analysis, Settings(workers=1)).text
    assert "<b>a</b>" not in page and html.escape("<b>a</b>") in page
    assert re.search(r"<th scope=\"row\">&lt;b&gt;a&lt;/b&gt;</th>", page)
