"""The report's figures: titles, axis labels with units, legends; what they plot is the data;
their SVG inlines safely (no prolog, ids unique per figure, text escaped)."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from conftest import NPBENCH
from simulate_longformat import simulate

from washout.data.sources import load_trials
from washout.report import figures
from washout.stats.order import OrderAnalysis, OrderComparison, analyze_order
from washout.stats.trials import usable_trials


@pytest.fixture(scope="module")
def npbench() -> tuple[OrderAnalysis, object]:
    trials, _ = load_trials(NPBENCH)
    return analyze_order(trials), trials


def _has_legend(fig) -> bool:
    return bool(fig.legends) or any(ax.get_legend() is not None for ax in fig.axes)


def _title(fig) -> str:
    return fig._suptitle.get_text() if fig._suptitle else fig.axes[0].get_title()


def test_order_figures_have_titles_labels_units_and_legends(npbench) -> None:
    analysis, _ = npbench
    tests = analysis.tests
    for fig in (
        figures.ci_medians(tests),
        figures.kw_significance(analysis),
        figures.delta_pct(analysis.tests),
        figures.ci_case_counts(analysis),
    ):
        assert _title(fig)
        assert _has_legend(fig)
        for ax in fig.axes:
            shares_x = len(ax.get_shared_x_axes().get_siblings(ax)) > 1
            assert ax.get_xlabel() or ax.get_xticklabels() or shares_x
            assert ax.get_ylabel() or ax.get_yticklabels()
    delta_axis = figures.delta_pct(analysis.tests).axes[0]
    delta_axis.figure.canvas.draw()
    assert delta_axis.get_xlabel().startswith("Δ median %")
    shown = [t.get_text() for t in delta_axis.get_xticklabels() if t.get_text()]
    assert shown and all(t.endswith("%") for t in shown)  # every tick with its unit
    assert all(
        ax.get_ylabel() == "result" for ax in figures.ci_medians(tests).axes if ax.get_visible()
    )


def test_ci_medians_plot_the_medians_and_cis_coloured_by_case(npbench) -> None:
    analysis, _ = npbench
    tests = analysis.tests
    fig = figures.ci_medians(tests)
    for ax, t in zip(fig.axes, tests):
        points = [line.get_ydata()[0] for line in ax.get_lines() if line.get_marker() in "so"]
        assert points[:2] == pytest.approx([t.median_fixed, t.median_random])
        # The CI whiskers span exactly the CI.
        segs = [c.get_segments()[0] for c in ax.collections]
        assert [v for s in segs for v in (s[0][1], s[1][1])] == pytest.approx(
            [*t.ci_fixed, *t.ci_random]
        )
        spine = ax.spines["left"].get_edgecolor()
        assert np.allclose(spine[:3], _rgb(figures.CASE_COLOURS[t.ci_case]))


def _rgb(hex_colour: str) -> tuple[float, float, float]:
    return tuple(int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5))  # type: ignore[return-value]


def test_kw_figure_sorts_by_effect_size_and_draws_the_corrected_threshold(npbench) -> None:
    analysis, _ = npbench
    fig = figures.kw_significance(analysis)
    ax_p, ax_e = fig.axes
    heights = [bar.get_height() for bar in ax_e.patches]
    assert heights == sorted(heights, reverse=True)
    assert sorted(heights) == pytest.approx(sorted(t.eta_squared for t in analysis.tests))
    lines = [line.get_ydata()[0] for line in ax_p.get_lines() if line.get_linestyle() == "--"]
    assert lines == pytest.approx([0.05 / 3])
    assert ax_p.get_yscale() == "log"


def test_delta_pct_bars_are_sorted_and_equal_the_analysis(npbench) -> None:
    analysis, _ = npbench
    widths = [bar.get_width() for bar in figures.delta_pct(analysis.tests).axes[0].patches]
    assert widths == sorted(t.delta_median_pct for t in analysis.tests)


def test_ci_case_counts(npbench) -> None:
    analysis, _ = npbench
    ax = figures.ci_case_counts(analysis).axes[0]
    # Published Table 4: IS case 2, SPMV case 2, softmax case 3.
    assert [bar.get_height() for bar in ax.patches] == [0, 2, 1, 0]


def test_trials_figure_plots_every_ok_trial_by_position_and_time() -> None:
    trials = simulate(tests=("a", "b", "c"), runs=5, seed=1)
    trials.loc[3, "status"] = "failed"
    ok, excluded = usable_trials(trials, "test")
    assert excluded == 1
    frame = ok[ok["test"] == "a"].reset_index(drop=True)
    fig = figures.trials_over_run(frame, "a", "wall")
    ax_pos, ax_time = fig.axes
    assert ax_pos.get_xlabel() == "position in the run (0 = first)"
    assert ax_time.get_xlabel() == "trial start (UTC)"
    assert ax_pos.get_ylabel() == "wall"
    plotted = sorted(v for line in ax_pos.get_lines() for v in line.get_ydata())
    assert plotted == pytest.approx(sorted(frame["value"]))
    labels = [t.get_text() for t in ax_pos.get_legend().get_texts()]
    assert labels == ["fixed order", "random order"]


def test_overview_plots_every_trial_relative_to_its_test_and_names_what_it_leaves_out() -> None:
    trials = simulate(
        tests=("a", "b", "zero"), runs=6, means={"a": 10.0, "b": 5000.0, "zero": 1.0}, seed=7
    )
    trials.loc[trials["test"] == "zero", "value"] = 0.0
    fig = figures.trials_overview(trials, "wall")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    assert "left out, median 0: zero" in _title(fig)
    lines = {line.get_label(): line for line in ax.get_lines()}
    expected = []
    for test in ("a", "b"):
        mine = trials[trials["test"] == test]
        ref = mine.loc[mine["order"] == "fixed", "value"].median()
        expected += list((mine["value"] / ref - 1) * 100)
    drawn = [v for kind in ("fixed order", "random order") for v in lines[kind].get_ydata()]
    assert sorted(drawn) == pytest.approx(sorted(expected))  # every trial, on its test's scale
    medians = [v for v in lines["median"].get_ydata() if np.isfinite(v)][::2]
    assert medians[0] == pytest.approx(0.0) and medians[2] == pytest.approx(0.0)  # fixed: 0 %
    a = trials[(trials["test"] == "a")]
    a_fixed = a.loc[a["order"] == "fixed", "value"].median()
    a_random = a.loc[a["order"] == "random", "value"].median()
    assert medians[1] == pytest.approx((a_random / a_fixed - 1) * 100)
    # Fixed and random strips of a test sit apart, left and right of its tick.
    xs_fixed, xs_random = lines["fixed order"].get_xdata(), lines["random order"].get_xdata()
    assert max(xs_fixed[:6]) < 0 < min(xs_random[:6])  # 6 trials of "a" per order


def test_time_axis_without_timestamps_says_so() -> None:
    trials, _ = load_trials(NPBENCH)
    _, label = figures.time_axis(trials)
    assert label == "run number (the source has no timestamps)"


def test_per_worker_figure_shows_each_worker() -> None:
    trials = simulate(tests=("a", "b"), runs=4, workers=("n1", "n2", "n3"), seed=2)
    frame = trials[trials["test"] == "a"]
    ax = figures.per_worker(frame, "a", "wall").axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["n1", "n2", "n3"]
    medians = [
        line.get_ydata()[0]
        for line in ax.get_lines()
        if line.get_label() == "median"
        or (len(line.get_xdata()) == 2 and line.get_linewidth() == 2)
    ]
    expected = frame.groupby(["worker", "order"])["value"].median()
    assert sorted(medians) == pytest.approx(sorted(expected))


def test_svg_inlines_safely_and_reproducibly(npbench) -> None:
    analysis, _ = npbench
    fig = figures.delta_pct(analysis.tests)
    a, b = figures.svg(fig, "one"), figures.svg(fig, "two")
    assert figures.svg(figures.delta_pct(analysis.tests), "one") == a  # no random ids
    assert a.startswith("<svg ") and "<?xml" not in a and "<!DOCTYPE" not in a
    assert "<dc:date>" not in a
    ids_a = set(re.findall(r'id="([^"]+)"', a))
    ids_b = set(re.findall(r'id="([^"]+)"', b))
    assert ids_a and not ids_a & ids_b
    # Every reference points at an id of the same figure.
    refs = set(re.findall(r'(?:url\(#|href="#)([^)"]+)', a))
    assert refs and refs <= ids_a
    ET.fromstring(a)  # well-formed on its own


def test_user_text_is_literal_in_svg() -> None:
    name = '<b>x</b> & $\\alpha$ \\$ "q"'
    trials = simulate(tests=(name, "b"), runs=4, seed=1)
    analysis = analyze_order(trials)
    svg = figures.svg(figures.delta_pct(analysis.tests), "k")
    texts = [
        "".join(el.itertext()) for el in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")
    ]
    assert name in texts
    assert "<b>" not in svg


def test_kw_figure_draws_holm_thresholds_by_rank() -> None:
    trials = simulate(
        tests=("a", "b", "c", "d"), runs=10, random_factor={"a": 1.05, "b": 1.02}, seed=6
    )
    analysis = analyze_order(trials, correction="holm")
    ax_p, ax_e = figures.kw_significance(analysis).axes
    holm = next(line for line in ax_p.get_lines() if line.get_marker() == "_")
    p = {t.test: t.kw_p for t in analysis.tests}
    names = [t.get_text() for t in ax_e.get_xticklabels()]  # the figure's x order
    thresholds = dict(zip(holm.get_xdata(), holm.get_ydata()))
    ranked = sorted(range(4), key=lambda i: p[names[i]])
    assert [thresholds[i] for i in ranked] == pytest.approx([0.05 / 4, 0.05 / 3, 0.05 / 2, 0.05])


def test_many_tests_share_one_axis_relative_to_the_fixed_median() -> None:
    names = tuple(f"t{i:02d}" for i in range(figures.PANELS_MAX + 4))
    trials = simulate(tests=names, runs=6, seed=8)
    tests = analyze_order(trials).tests
    fig = figures.ci_medians(tests)
    (ax,) = fig.axes
    assert ax.get_xlabel().endswith("(%)")
    assert len(ax.get_yticklabels()) == len(names)
    # Every test's random median sits at its relative difference from the fixed median.
    expected = sorted((t.median_random / t.median_fixed - 1) * 100 for t in tests)
    random = sorted(
        x for line in ax.get_lines() if line.get_marker() == "o" for x in line.get_xdata()
    )
    assert random == pytest.approx(expected)
    assert fig.legends


def _comparisons(deltas: dict[str, float]) -> list[OrderComparison]:
    """Comparisons with these Delta% of the medians (and nothing else that matters)."""
    trials = simulate(tests=tuple(deltas), runs=4, seed=1)
    template = analyze_order(trials).tests[0]
    return [
        dataclasses.replace(template, test=name, delta_median_pct=d, significant=abs(d) > 50)
        for name, d in deltas.items()
    ]


def test_a_skewed_effect_goes_symmetric_log_and_every_bar_shows() -> None:
    """One bar at -9,728% (the pagecache example's, on a linear axis) flattened every other
    to nothing; on the symmetric-log axis the smallest is still several pixels long."""
    tests = _comparisons({"big": -9728.0, "a": 4.0, "b": -3.0, "c": 6.5, "d": 2.0})
    fig = figures.delta_pct(tests)
    ax = fig.axes[0]
    fig.canvas.draw()
    assert ax.get_xscale() == "symlog"
    widths = [abs(bar.get_window_extent().width) for bar in ax.patches]
    assert min(widths) > 5 and max(widths) < 20 * min(widths)
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert "0%" in labels and any(label.startswith("-1,000") for label in labels)
    linear = figures.delta_pct(_comparisons({"a": 4.0, "b": -3.0, "c": 6.5})).axes[0]
    assert linear.get_xscale() == "linear"


@pytest.mark.parametrize(
    "metric,value,unit",
    [("wall", 0.0177808, " ms"), ("rps", 4.5e7, " M"), ("max_rss", 3 * 2**20, "MiB")],
)
def test_metric_ticks_carry_the_unit_and_an_si_prefix(metric: str, value: float, unit: str) -> None:
    """Ticks such as 45000000 or 0.0177808 (raw numbers) become 45 M and 17.8 ms."""
    frame = simulate(tests=("a",), runs=6, seed=2, metrics=(metric,))
    frame["value"] = value * (1 + frame["value"] / frame["value"].max() / 10)
    fig = figures.trials_over_run(frame, "a", metric)
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert labels and all(unit in label for label in labels), labels
    assert fig.axes[0].get_ylabel() == metric


def test_many_comparisons_are_summarised_by_their_distributions() -> None:
    """The paper's summary of 1,880 configurations: how many differ, the distribution of
    their effects and of their p-values, each comparison counted once."""
    names = tuple(f"t{i:02d}" for i in range(60))
    factors = {n: 1.0 + 0.05 * (i % 3) for i, n in enumerate(names)}
    analysis = analyze_order(simulate(tests=names, runs=8, random_factor=factors, seed=3))
    fig = figures.effect_distribution(analysis)
    ax_d, ax_e = fig.axes
    assert sum(bar.get_height() for bar in ax_d.patches) == 60  # stacked: each once
    assert sum(bar.get_height() for bar in ax_e.patches) == 60
    assert f"order matters in {len(analysis.significant)}" in _title(fig)
    (ax_p,) = figures.p_distribution(analysis).axes
    assert sum(bar.get_height() for bar in ax_p.patches) == 60
    assert ax_p.get_xscale() == "log" and ax_p.get_xlim()[1] == 1.0
