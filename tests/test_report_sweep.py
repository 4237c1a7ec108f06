"""The sweep section of the report on Silo/YCSB (Hui et al., SIGMOD 2024; every setting
measured): coefficient curves are the ANOVA's (checked against statsmodels), the sweep's
knee and turning points sit on them, the tile map shows the data (its rendering in Chromium
is in test_report_browser.py)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import statsmodels.formula.api as smf
from conftest import FIXTURES

from washout import explore
from washout.analysis.compute import sweep_analysis
from washout.analysis.result import Analysis, Options, Source
from washout.report import document, figures
from washout.report.document import build_report
from washout.report.html import render_sweep_section
from washout.report.render import Settings, renderer, write
from washout.sweep.anova import fit_anova
from washout.sweep.incremental import method_options
from washout.sweep.result import StepResult, SweepResult
from washout.sweep.space import space_from_frame

SILO = FIXTURES / "configspaces" / "silo_ycsb.csv"


def silo_sweep() -> tuple[pd.DataFrame, SweepResult]:
    """The measured settings and washout.sweep's result for them (the paper's
    treatment-coded ANOVA, so its curves compare with statsmodels' coefficients), given an
    R^2 history of four steps (--full measures everything in one)."""
    settings = pd.read_csv(SILO)
    result = explore(SILO, method_options("paper"), metric="tput", full=True)
    r2 = min(result.r2_validation)  # type: ignore[type-var]
    steps = tuple(
        StepResult(
            settings_measured=round(144 * r),
            sampling_rate=r,
            r2_validation=tuple(r2 - 0.2 * (1 - r) - 0.01 * k for k in range(10)),
            r2_min=r2 - 0.2 * (1 - r) - 0.09,
            r2_holdout=None,
        )
        for r in (0.05, 0.10, 0.15, 0.20)
    )
    return settings, result.with_fields(steps=steps)


@pytest.fixture(scope="module")
def silo() -> tuple[pd.DataFrame, SweepResult]:
    return silo_sweep()


def test_coefficient_curves_are_the_anova_coefficients(silo) -> None:
    settings, sweep = silo
    params = ["threads", "keys", "ReadRatio"]
    panels, marks = document.coefficient_panels(sweep)  # from the result: no new fit
    assert not hasattr(document, "fit_anova")  # the report draws the result's curves
    # The same model in statsmodels (treatment coding, the terms the elimination kept).
    space = space_from_frame(settings, "tput", None, "silo")
    kept = fit_anova(space.codes, space.y, space.n_levels).terms
    formula = "tput ~ " + " + ".join(":".join(f"C({params[f]})" for f in t) for t in kept)
    coef = smf.ols(formula, settings).fit().params
    threads = panels["threads"]["main effect"]
    assert threads[0] == (1.0, 0.0)  # the reference level
    assert [y for _, y in threads[1:]] == pytest.approx(
        [coef[f"C(threads)[T.{lv}]"] for lv in (2, 4, 8, 16, 28)], rel=1e-6
    )
    line = panels["keys by threads (threads:keys)"]["threads = 1"]
    assert [y for _, y in line] == pytest.approx(
        [coef[f"C(threads)[1]:C(keys)[T.{lv}]"] for lv in (512, 2048, 8192, 32768, 131072)],
        rel=1e-6,
    )
    # Every point the sweep found is drawn on a curve of the figure.
    assert len(marks) == len(sweep.important_points) > 0
    for panel, name, x, kind in marks:
        assert x in [px for px, _ in panels[panel][name]]
        assert kind in ("knee", "turning")


def test_coefficient_figure_marks_knee_and_turning_points(silo) -> None:
    settings, sweep = silo
    panels, marks = document.coefficient_panels(sweep)
    fig = figures.coefficient_curves(panels, marks, "tput")
    drawn = [line for ax in fig.axes for line in ax.get_lines() if line.get_marker() in "vD"]
    assert len(drawn) == len(marks)
    assert all(ax.get_ylabel() == "coefficient (tput)" for ax in fig.axes if ax.get_visible())
    assert fig.legends


def test_tile_map_shows_the_measured_values(silo) -> None:
    settings, _ = silo
    fig = figures.tile_map(settings, ["threads", "keys", "ReadRatio"], "tput")
    tiles = [ax for ax in fig.axes if ax.get_images()]
    assert [ax.get_title() for ax in tiles] == [f"ReadRatio = {r}" for r in (0, 20, 60, 100)]
    grid = tiles[0].get_images()[0].get_array()
    assert grid.shape == (6, 6)  # threads x keys
    assert grid[0, 0] == pytest.approx(1553616.6666666667)  # threads 1, keys 128, ReadRatio 0
    row = settings[
        (settings["threads"] == 28) & (settings["keys"] == 131072) & (settings["ReadRatio"] == 0)
    ]
    assert grid[5, 5] == pytest.approx(float(row["tput"].iloc[0]))
    assert fig.axes[-1].get_ylabel() == "tput"  # the colour bar names the metric


def test_tile_map_nests_the_next_two_parameters() -> None:
    herd = pd.read_csv(FIXTURES / "configspaces" / "herd_ycsb.csv")
    params = [c for c in herd.columns if c != "tput"]
    fig = figures.tile_map(herd, params, "tput")
    tiles = [ax for ax in fig.axes if ax.get_images()]
    n = [herd[p].nunique() for p in params]
    assert len(tiles) == n[2] * n[3]
    assert tiles[0].get_images()[0].get_array().shape == (n[0], n[1])


def test_sweep_section_html(silo) -> None:
    settings, sweep = silo
    html = render_sweep_section(sweep, settings)
    assert html.lstrip().startswith('<section id="sweep">')
    assert re.findall(r'<figure id="fig-(sweep-[a-z0-9]+)"', html) == [
        "sweep-r2",
        "sweep-coefficients",
        "sweep-tiles",
    ]
    for term in sweep.significant_terms:
        assert f'<th scope="row">{term.term}</th>' in html
    assert html.count("threads = ") >= len(sweep.important_points)
    assert "Measured 144 of 144 settings" in html


def test_sweep_needs_its_settings(silo) -> None:
    from washout.errors import WashoutError

    _, sweep = silo
    with pytest.raises(WashoutError, match="settings"):
        build_report(Analysis(Source("sweep"), Options(), sweep=sweep))


def test_sweep_in_markdown(silo, tmp_path: Path) -> None:
    settings, sweep = silo
    analysis = sweep_analysis(sweep, settings, "silo")
    out = write(renderer("md")(analysis, Settings(stem="sweep")), tmp_path / "sweep.md")
    text = out.read_text()
    assert "## Parameter space" in text and "### Knee and turning points" in text
    assert "| threads:keys |" in text
    pngs = sorted(p.name for p in (tmp_path / "sweep-figures").iterdir())
    assert pngs == ["sweep-coefficients.png", "sweep-r2.png", "sweep-tiles.png"]
    assert f"({'sweep-figures/sweep-tiles.png'})" in text


def test_sum_coded_curves_are_drawn_at_every_level() -> None:
    """The default (sum coding): a main effect's curve has every level, deviations from the
    mean that sum to zero, and the figure's caption says so."""
    sweep = explore(SILO, metric="tput", full=True)
    assert sweep.coding == "sum"
    panels, _ = document.coefficient_panels(sweep)
    threads = panels["threads"]["main effect"]
    assert [x for x, _ in threads] == [1, 2, 4, 8, 16, 28]
    assert sum(y for _, y in threads) == pytest.approx(
        0.0, abs=1e-6 * max(abs(y) for _, y in threads)
    )
    part = document.sweep_part(sweep, pd.read_csv(SILO))
    caption = next(f for f in part.figures if f.key == "sweep-coefficients")
    assert "sum-coded" in str(caption)


def test_sweep_report_gives_each_share_its_interval(tmp_path: Path) -> None:
    """A sampled sweep (the default method) states every share with its interval and the
    importance that interval gives, and every point with where the draws put it: in the
    Markdown report and in the terminal alike, in the same words and cells."""
    settings = pd.read_csv(SILO)
    sweep = explore(SILO, method_options(seed=0), metric="tput")
    assert sweep.interval_level == 0.95 and sweep.sampling_rate < 1
    analysis = sweep_analysis(sweep, settings, "silo")
    out = write(renderer("md")(analysis, Settings(stem="sweep")), tmp_path / "sweep.md")
    markdown = out.read_text().replace("\\.", ".")
    terminal = renderer("table")(analysis, Settings()).text
    sentence = (
        "Shares and points carry 95% intervals for the fully measured space's values; a term "
        "is important when its whole interval is at or above 10%, and may be important when "
        "the interval crosses it."
    )
    assert sentence in markdown and sentence in terminal
    for term in sweep.significant_terms:
        low, high = f"{100 * term.low:.1f}", f"{100 * term.high:.1f}"  # type: ignore[operator]
        assert re.search(
            rf"\| {re.escape(term.term)} \| [0-9.]+% \| {low}-{high}% \| "
            rf"{term.importance} \|",
            markdown,
        ), term
        assert re.search(
            rf"{re.escape(term.term)} +│ +[0-9.]+% │ +{low}-{high}% │ {term.importance}",
            terminal,
        ), term
    assert "| interval (draws with a point) |" in markdown
    assert "interval (draws with a point)" in terminal


def test_a_sweep_without_points_says_none_in_the_terminal_as_in_the_reports(
    silo, tmp_path: Path
) -> None:
    """A sweep that found no knee or turning point (the gzip example): the terminal printed
    the table's header over nothing; it says "None." as the Markdown and HTML reports do."""
    settings, sweep = silo
    analysis = sweep_analysis(replace(sweep, important_points=()), settings, "silo")
    terminal = renderer("table")(analysis, Settings()).text.splitlines()
    title = terminal.index("Knee and turning points")
    assert terminal[title + 1] == "None."
    assert not any("turn ratio" in line for line in terminal)
    out = write(renderer("md")(analysis, Settings(stem="sweep")), tmp_path / "sweep.md")
    assert "### Knee and turning points\n\nNone.\n" in out.read_text()
