"""The report's figures: each function draws one figure and returns a matplotlib ``Figure``;
:func:`svg` turns it into an inline SVG string (HTML report), :func:`png` into PNG bytes
(Markdown report).

The order figures follow Duplyakin et al., "Avoiding the Ordering Trap in Systems Performance
Measurement" (USENIX ATC 2023): fixed vs random medians with their CIs (their Fig. 5),
p-values against the corrected threshold with the effect size (Fig. 2), Delta% per test
(Fig. 4), counts of CI cases (Fig. 6). The sweep figures follow Hui et al. (SIGMOD 2024):
R^2 against the sampling rate, ANOVA coefficient curves with knee and turning points, and a
tile map of the parameter space.

Figures are built on ``matplotlib.figure.Figure`` directly (no pyplot state), so drawing is
free of global side effects. Every text that comes from the user's data goes through
:func:`label`, which stops matplotlib from reading ``$...$`` as mathtext; matplotlib escapes
the XML itself (checked in tests/test_report_figures.py, and in Chromium in
tests/test_report_browser.py).
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from washout.report.text import where

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from washout.stats.order import OrderAnalysis, OrderComparison

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies, and in print.
CASE_COLOURS: dict[int | None, str] = {1: "#D55E00", 2: "#0072B2", 3: "#E69F00", None: "#999999"}
CASE_NAMES: dict[int | None, str] = {
    1: "case 1: CIs disjoint",
    2: "case 2: each median inside the other's CI",
    3: "case 3: CIs overlap partly",
    None: "no CI (too few trials)",
}
ORDER_STYLE: dict[str, tuple[str, str]] = {  # order kind -> (colour, marker)
    "fixed": ("#0072B2", "s"),
    "random": ("#E69F00", "o"),
    "reverse": ("#009E73", "^"),
    "williams": ("#CC79A7", "D"),
}
SIGNIFICANT = "#D55E00"
NOT_SIGNIFICANT = "#56B4E9"
WIDTH_IN = 9.0  # fits a laptop screen at 100 % and an A4/Letter page
MAX_TICK_LABEL = 28


def label(text: object) -> str:
    """User text made literal for matplotlib: ``$`` would start mathtext (and may fail)."""
    return str(text).replace("$", r"\$")


def short(text: object, limit: int = MAX_TICK_LABEL) -> str:
    """A tick label that stays readable: long names are cut with an ellipsis."""
    s = str(text)
    return label(s if len(s) <= limit else s[: limit - 1] + "…")


def test_label(test: OrderComparison, with_metric: bool = False) -> str:
    """How a comparison is named in figures: test, metric (where there are several),
    worker (in a per-worker analysis)."""
    return where(test, with_metric)


def several_metrics(tests: Sequence[OrderComparison]) -> bool:
    """Whether the comparisons span more than one metric (then labels name it)."""
    return len({t.metric for t in tests}) > 1


def _figure(height_in: float, width_in: float = WIDTH_IN) -> Figure:
    return Figure(figsize=(width_in, max(height_in, 2.0)), layout="constrained")


def _fixed_figure(
    height_in: float,
    margins: tuple[float, float, float, float],
    width_in: float = WIDTH_IN,
    grid: tuple[int, int] = (1, 1),
    gaps: tuple[float, float] = (0.0, 0.0),
) -> Figure:
    """A figure whose axes sit at fixed ``margins`` (left, bottom, right, top) and ``gaps``
    between panels (across, down), in inches, for ``grid`` (rows, columns) of panels.

    The figures a report draws for every experiment use it: constrained layout would solve
    the same margins by drawing each figure two or three times, most of a figure's cost."""
    left, bottom, right, top = margins
    rows, cols = grid
    across, down = gaps
    panel_w = (width_in - left - right - (cols - 1) * across) / cols
    panel_h = (height_in - bottom - top - (rows - 1) * down) / rows
    fig = Figure(figsize=(width_in, height_in))
    fig.subplots_adjust(
        left=left / width_in,
        bottom=bottom / height_in,
        right=1 - right / width_in,
        top=1 - top / height_in,
        wspace=across / panel_w,
        hspace=down / panel_h,
    )
    return fig


def _names_room(names: Sequence[str]) -> float:
    """Inches the test names of :func:`_test_axis` take away from their axis (8 pt text,
    upright on an x axis); none past 40 tests, which get a rank axis."""
    if len(names) > 40:
        return 0.0
    longest = max((len(short(n)) for n in names), default=0)
    return 0.1 + longest * 0.066


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _power_of_ten(value: float, _pos: object = None) -> str:
    """A log axis's tick label as plain text (10⁻⁵; none between decades): matplotlib's
    default writes mathtext, whose parser costs more than the rest of a figure."""
    if not value > 0:
        return ""
    exponent = round(math.log10(value))
    if not math.isclose(value, 10.0**exponent):
        return ""
    return "1" if exponent == 0 else "10" + str(exponent).translate(SUPERSCRIPT)


def svg(fig: Figure, key: str) -> str:
    """The figure as an SVG element to inline in HTML.

    The XML prolog and DOCTYPE are dropped (not allowed mid-document), the date is left out,
    text stays text (``svg.fonttype = none``: searchable, and escaped by matplotlib), and
    every element id is prefixed with ``key`` so the ids of all figures on one page are
    unique (matplotlib names groups ``figure_1``, ``axes_1``... in every figure). The ids
    matplotlib hashes (clip paths, markers) get a fixed salt instead of a random one, so
    the same figure always gives the same SVG, whichever process draws it.
    """
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "washout"}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, dpi=RASTER_DPI)
    text = buf.getvalue()
    text = text[text.find("<svg") :]
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", key) + "-"
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', text)
    text = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", text)
    text = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', text)
    return text.replace("<svg ", f'<svg role="img" aria-label="{_attr(key)}" ', 1)


def png(fig: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG bytes (Markdown report)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


def _attr(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


def finite(x: object) -> TypeGuard[float]:
    """Whether ``x`` is a number that can be drawn or printed (not NaN or infinite, not a
    bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x))


# ---------------------------------------------------------------------------------------
# Axes: units on every tick, and a scale that shows every value
# ---------------------------------------------------------------------------------------

DENSE = 500
"""Scatter points of one kind above which a figure draws them as an image inside its SVG
(rasterized): an SVG element per trial made a page of 2.3M trials hundreds of megabytes,
and each costs time to write."""
RASTER_DPI = 144
"""The resolution of what an SVG holds as an image: sharp on a high-density screen."""
SKEWED = 10.0
"""A percentage axis goes symmetric-log when its largest |value| is this many times its
typical (median) |value|: one bar at -9,728% flattened every other on a linear axis."""


def _metric_ticks(value: float, _pos: object = None, metric: str = "") -> str:
    """A tick of a metric's axis with its unit: a time with an SI prefix (``17.5 ms``),
    bytes in binary units, other metrics with SI prefixes (``45 M``)."""
    from washout.analysis.units import BYTE_METRICS, SECOND_METRICS, byte_size, si_prefix

    if not math.isfinite(value):
        return ""
    if metric in BYTE_METRICS:
        return byte_size(value)
    unit = "s" if metric in SECOND_METRICS else ""
    name, size = si_prefix(value) if unit or abs(value) >= 1e3 else ("", 1.0)
    number = f"{value / size:.3g}"
    return f"{number} {name}{unit}".rstrip() if name or unit else number


def metric_axis(ax: Any, metric: str, axis: str = "y") -> None:
    """Tick labels of ``metric``'s values with their unit and SI prefix (no offset or
    exponent above the axis), and the metric's name as the axis' label."""
    from functools import partial

    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_formatter(FuncFormatter(partial(_metric_ticks, metric=metric)))
    (ax.set_ylabel if axis == "y" else ax.set_xlabel)(label(metric))


def _percent_ticks(value: float, _pos: object = None) -> str:
    """A percentage tick: ``+40%``, ``-1,000%``, ``0%``."""
    if not math.isfinite(value):
        return ""
    if value == 0:
        return "0%"
    return f"{value:+,.3g}%" if abs(value) < 1000 else f"{value:+,.0f}%"


def percent_axis(ax: Any, values: Sequence[float], axis: str = "x") -> bool:
    """Percent ticks on ``axis``, symmetric-log when ``values`` are skewed (:data:`SKEWED`):
    linear over most of them (their 75th percentile, rounded up to 1-2-5), logarithmic
    beyond, ticks at 0 and at that bound's decades, so every value shows and no label
    crowds another. Returns whether the axis went symmetric-log."""
    import numpy as np
    from matplotlib.ticker import FixedLocator

    data = np.asarray([v for v in values if finite(v)], dtype=float)
    magnitude = np.abs(data)
    target = ax.yaxis if axis == "y" else ax.xaxis
    skewed = bool(magnitude.size) and float(magnitude.max()) > SKEWED * max(
        float(np.median(magnitude)) if magnitude.size else 0.0, 1.0
    )
    if skewed:  # the scale first: setting it resets an axis' ticks
        bulk = max(float(np.percentile(magnitude, 75)), 1.0)
        step = 10.0 ** math.floor(math.log10(bulk))
        linear = next(k * step for k in (1, 2, 5, 10) if k * step >= bulk)
        (ax.set_yscale if axis == "y" else ax.set_xscale)("symlog", linthresh=linear, linscale=1.5)
        ticks = [0.0]
        bound = linear
        while bound <= float(magnitude.max()) * 10:
            ticks += [t for t in (-bound, bound) if data.min() <= t * 1.5 and t <= data.max() * 1.5]
            bound *= 10
        target.set_major_locator(FixedLocator(sorted(ticks)))
    target.set_major_formatter(FuncFormatter(_percent_ticks))
    target.set_minor_formatter(NullFormatter())
    return skewed


def _points(ax: Any, x: Any, y: Any, **style: Any) -> None:
    """A scatter of trials as markers, drawn as an image inside the SVG when dense."""
    ax.plot(x, y, linestyle="none", rasterized=len(y) > DENSE, **style)


# ---------------------------------------------------------------------------------------
# Order analysis (washout.stats.order.OrderAnalysis)
# ---------------------------------------------------------------------------------------


PANELS_MAX = 16  # beyond this many tests, one compact axis reads better than panels


def _case_legend(fig: Figure, tests: Sequence[OrderComparison]) -> None:
    handles = [
        Line2D([], [], color=CASE_COLOURS[c], lw=2.5, label=CASE_NAMES[c])
        for c in (1, 2, 3, None)
        if any(t.ci_case == c for t in tests)
    ]
    handles += [
        Line2D([], [], marker="s", color="black", linestyle="none", label="fixed-order median"),
        Line2D([], [], marker="o", color="black", linestyle="none", label="random-order median"),
    ]
    fig.legend(handles=handles, loc="lower center", ncols=3, fontsize=8, frameon=False)


LEGEND_ROOM = 0.5  # inches under the axes for the two rows of the CI-case legend


def ci_medians(tests: Sequence[OrderComparison], ncols: int = 4) -> Figure:
    """Per test, the fixed and random medians with their distribution-free CIs, coloured by
    CI case (Duplyakin et al. 2023, Fig. 5 and Algorithm 2). Up to :data:`PANELS_MAX` tests,
    one panel per test with its own y axis in the metric's unit; more tests share one axis,
    relative to each test's fixed-order median (:func:`ci_medians_relative`)."""
    n = len(tests)
    if n > PANELS_MAX:
        return ci_medians_relative(tests)
    ncols = max(1, min(ncols, n))
    nrows = max(1, math.ceil(n / ncols))
    fig = _fixed_figure(
        1.0 + 2.3 * nrows,
        (0.95, 0.3 + LEGEND_ROOM, 0.15, 0.65),
        grid=(nrows, ncols),
        gaps=(0.95, 0.55),
    )
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.set_visible(False)
            continue
        t = tests[i]
        colour = CASE_COLOURS.get(t.ci_case, CASE_COLOURS[None])
        for x, side, marker in ((0, "fixed", "s"), (1, "random", "o")):
            med = getattr(t, f"median_{side}")
            ci = getattr(t, f"ci_{side}")
            if not finite(med):
                continue
            if ci:
                lo, hi = float(ci[0]), float(ci[1])
                ax.errorbar(
                    [x],
                    [med],
                    yerr=[[med - lo], [hi - med]],
                    fmt=marker,
                    color=colour,
                    ecolor=colour,
                    elinewidth=2.2,
                    capsize=7,
                    markersize=7,
                )
            else:
                ax.plot(
                    [x],
                    [med],
                    marker=marker,
                    color=colour,
                    linestyle="none",
                    markersize=7,
                    markerfacecolor="white",
                )
        if not (finite(t.median_fixed) or finite(t.median_random)):
            ax.text(
                0.5,
                0.5,
                "no successful trials",
                transform=ax.transAxes,
                ha="center",
                va="center",
                fontsize=9,
                color=CASE_COLOURS[None],
            )
            ax.set_yticks([])
        ax.set_xlim(-0.6, 1.6)
        ax.set_xticks([0, 1], ["fixed", "random"])
        ax.set_title(short(test_label(t, several_metrics(tests)), 30), fontsize=9, color="black")
        metric_axis(ax, t.metric)
        ax.yaxis.label.set_fontsize(9)
        ax.tick_params(labelsize=8)
        for spine in ax.spines.values():
            spine.set_edgecolor(colour)
            spine.set_linewidth(1.6)
        ax.grid(axis="y", alpha=0.3)
    _case_legend(fig, tests)
    fig.suptitle("Fixed vs random medians with their CIs, coloured by CI case", fontsize=12)
    return fig


def ci_medians_relative(tests: Sequence[OrderComparison]) -> Figure:
    """Many tests on one axis: each test's fixed and random medians and CIs as a percentage
    difference from its own fixed-order median (so tests of any scale and unit compare),
    sorted by the random median's difference, coloured by CI case. Tests without a
    fixed-order median cannot be placed and are left out."""
    several = several_metrics(tests)
    rows = []
    for t in tests:
        ref = t.median_fixed
        if not finite(ref) or float(ref) == 0:
            continue
        ref = float(ref)

        def rel(v: float, ref: float = ref) -> float:
            return (float(v) / ref - 1.0) * 100.0

        random = rel(t.median_random) if finite(t.median_random) else math.nan
        rows.append((random, test_label(t, several), t, rel))
    rows.sort(key=lambda r: (r[0] if math.isfinite(r[0]) else math.inf, r[1]))
    n = len(rows)
    names = [r[1] for r in rows]
    margins = (0.35 + _names_room(names), 0.5 + LEGEND_ROOM, 0.35, 0.5)
    fig = _fixed_figure(max(1.6 + 0.2 * n, 3.0), margins)
    ax = fig.subplots()
    # One line per colour for the CIs (NaN between them) and per colour and marker for the
    # medians: a few artists to draw instead of four per test.
    cis: dict[str, tuple[list[float], list[float]]] = {}
    medians: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for y, (random, _, t, rel) in enumerate(rows):
        colour = CASE_COLOURS.get(t.ci_case, CASE_COLOURS[None])
        for dy, side, marker, centre in ((0.18, "fixed", "s", 0.0), (-0.18, "random", "o", random)):
            ci = getattr(t, f"ci_{side}")
            if ci:
                xs, ys = cis.setdefault(colour, ([], []))
                xs += [rel(ci[0]), rel(ci[1]), math.nan]
                ys += [y + dy, y + dy, math.nan]
            if math.isfinite(centre):
                xs, ys = medians.setdefault((colour, marker), ([], []))
                xs.append(centre)
                ys.append(y + dy)
    for colour, (xs, ys) in cis.items():
        ax.plot(xs, ys, color=colour, lw=2)
    for (colour, marker), (xs, ys) in medians.items():
        ax.plot(xs, ys, marker=marker, color=colour, markersize=4.5, linestyle="none")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(n), [short(name) for name in names], fontsize=7)
    ax.set_ylim(-0.8, n - 0.2)
    drawn = [x for xs, _ in [*cis.values(), *medians.values()] for x in xs if finite(x)]
    skewed = percent_axis(ax, drawn)
    ax.set_xlabel(
        "difference from the test's fixed-order median (%"
        + (", symmetric log beyond the typical difference" if skewed else "")
        + ")"
    )
    ax.set_ylabel("test, sorted by the random median's difference")
    ax.grid(axis="x", alpha=0.3)
    _case_legend(fig, tests)
    fig.suptitle(
        "Fixed vs random medians with their CIs, relative to the fixed median", fontsize=12
    )
    return fig


def _sorted_by(tests: Sequence[OrderComparison], key: str) -> list[OrderComparison]:
    def rank(t: OrderComparison) -> tuple[float, str]:
        value = getattr(t, key)
        return (-float(value) if finite(value) else math.inf, test_label(t, True))

    return sorted(tests, key=rank)


def _test_axis(ax: Any, labels: list[str], horizontal: bool = False) -> None:
    """Tick labels per test while they fit; past 40 tests, a rank axis."""
    n = len(labels)
    if n <= 40:
        if horizontal:
            ax.set_yticks(range(n), [short(s) for s in labels], fontsize=8)
        else:
            # Upright: names slanted at an angle overlapped their neighbours' boxes.
            ax.set_xticks(range(n), [short(s) for s in labels], fontsize=8, rotation=90)


def kw_significance(analysis: OrderAnalysis) -> Figure:
    """Kruskal-Wallis p-values against the family-wise corrected threshold (log scale), and
    the effect size eta^2_H, tests sorted by effect size (Duplyakin et al. 2023, Fig. 2)."""
    tests = [t for t in _sorted_by(analysis.tests, "eta_squared") if finite(t.kw_p)]
    names = [test_label(t, several_metrics(tests)) for t in tests]
    n = len(tests)
    room = _names_room(names)
    fig = _fixed_figure(5.0 + room, (0.95, 0.5 + room, 0.15, 0.5), gaps=(0, 0.15))
    ax_p, ax_e = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    xs = list(range(n))
    tiny = 1e-300  # p underflows to 0 for huge effects; drawn at the floor of the log axis
    ps = [max(float(t.kw_p or 0.0), tiny) for t in tests]
    sig = [t.significant for t in tests]
    for flag, colour, name in (
        (True, SIGNIFICANT, "significant"),
        (False, NOT_SIGNIFICANT, "not significant"),
    ):
        sel = [i for i in xs if sig[i] == flag]
        if sel:
            ax_p.plot(sel, [ps[i] for i in sel], "o", color=colour, label=f"p ({name})")
    if n > 1:
        ax_p.plot(xs, ps, "-", color="#777777", lw=0.8, zorder=0)
    alpha = analysis.alpha
    per_test = analysis.alpha_per_test
    correction = analysis.correction
    if finite(per_test):
        ax_p.axhline(
            float(per_test),
            color=SIGNIFICANT,
            ls="--",
            lw=1.2,
            label=f"corrected threshold ({label(correction)}, m = "
            f"{analysis.family_size}): {float(per_test):.3g}",
        )
    elif correction == "holm" and finite(alpha) and n:
        # Holm's step-down compares the r-th smallest p with alpha / (m - r + 1) (Holm 1979).
        m = analysis.family_size or n
        by_p = sorted(xs, key=lambda i: ps[i])
        levels = {i: float(alpha) / (m - r) for r, i in enumerate(by_p) if m - r > 0}
        ax_p.plot(
            list(levels),
            list(levels.values()),
            "_",
            color=SIGNIFICANT,
            markersize=16,
            mew=2,
            label="Holm threshold for the p-value's rank",
        )
    if finite(alpha) and alpha != per_test:
        ax_p.axhline(
            float(alpha),
            color="#555555",
            ls=":",
            lw=1.2,
            label=f"uncorrected alpha: {float(alpha):.3g}",
        )
    ax_p.set_yscale("log")
    ax_p.yaxis.set_major_formatter(_power_of_ten)
    ax_p.yaxis.set_minor_formatter(NullFormatter())
    ax_p.set_ylabel("Kruskal-Wallis p-value (log)")
    ax_p.grid(axis="y", alpha=0.3)
    ax_p.legend(fontsize=8, loc="best")
    etas = [float(t.eta_squared) if finite(t.eta_squared) else 0.0 for t in tests]
    ax_e.bar(
        xs,
        etas,
        color=[SIGNIFICANT if s else NOT_SIGNIFICANT for s in sig],
        label="eta²_H (bar colour: significance)",
    )
    ax_e.set_ylabel("effect size eta²_H")
    ax_e.set_xlabel("test, sorted by effect size" if n <= 40 else "test rank by effect size")
    ax_e.grid(axis="y", alpha=0.3)
    ax_e.legend(fontsize=8, loc="upper right")
    _test_axis(ax_e, names)
    fig.suptitle("Does order change the distribution? p-values and effect sizes", fontsize=12)
    return fig


def delta_pct(tests: Sequence[OrderComparison]) -> Figure:
    """Delta% per test, sorted (Duplyakin et al. 2023, Fig. 4), of the medians the tables
    show: (median fixed - median random) / median fixed x 100; bars coloured by
    significance, on a symmetric-log axis when one test's effect dwarfs the others'."""
    tests = [t for t in tests if finite(t.delta_median_pct)]
    tests.sort(key=lambda t: (float(t.delta_median_pct or 0.0), test_label(t, True)))
    n = len(tests)
    names = [test_label(t, several_metrics(tests)) for t in tests]
    margins = (0.35 + _names_room(names), 0.55, 0.35, 0.4)
    fig = _fixed_figure(max(1.6 + 0.28 * n if n <= 40 else 5.0, 2.5), margins)
    ax = fig.subplots()
    ys = list(range(n))
    vals = [float(t.delta_median_pct or 0.0) for t in tests]
    sig = [t.significant for t in tests]
    ax.barh(ys, vals, color=[SIGNIFICANT if s else NOT_SIGNIFICANT for s in sig], height=0.7)
    ax.axvline(0, color="black", lw=0.8)
    skewed = percent_axis(ax, vals)
    ax.set_xlabel(
        "Δ median % = (median fixed − median random) / median fixed"
        + (" (symmetric log beyond the typical |Δ|)" if skewed else "")
    )
    ax.set_ylabel("test" if n <= 40 else "test rank by Δ%")
    _test_axis(ax, names, horizontal=True)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(
        handles=[
            Line2D([], [], color=SIGNIFICANT, lw=6, label="significant after correction"),
            Line2D([], [], color=NOT_SIGNIFICANT, lw=6, label="not significant"),
        ],
        fontsize=8,
        loc="best",
    )
    ax.set_title("How much faster or slower is the fixed order? Δ median % per test", fontsize=12)
    return fig


def effect_distribution(order: OrderAnalysis) -> Figure:
    """Across every comparison (the paper's summary of its 1,880 configurations): how
    many shifted by how much (Δ median %, symmetric-log bins) and how strongly (eta^2_H),
    significant ones stacked in the warm colour."""
    import numpy as np

    tests = order.tests
    fig = _fixed_figure(3.4, (0.8, 0.75, 0.15, 0.55), grid=(1, 2), gaps=(0.8, 0.0))
    ax_d, ax_e = fig.subplots(1, 2)
    deltas = np.array(
        [float(t.delta_median_pct or 0.0) for t in tests if finite(t.delta_median_pct)]
    )
    sig_d = np.array([t.significant for t in tests if finite(t.delta_median_pct)], dtype=bool)
    if deltas.size:
        top = max(float(np.abs(deltas).max()), 1.0)
        edges = np.geomspace(1.0, top * 1.001, 12)
        bins = np.concatenate([-edges[::-1], [0.0], edges]).tolist()
        ax_d.hist(
            [deltas[sig_d], deltas[~sig_d]],
            bins=bins,
            stacked=True,
            color=[SIGNIFICANT, NOT_SIGNIFICANT],
            label=["significant", "not significant"],
        )
        ax_d.set_xscale("symlog", linthresh=1.0)
    ax_d.xaxis.set_major_formatter(FuncFormatter(_percent_ticks))
    ax_d.xaxis.set_minor_formatter(NullFormatter())
    ax_d.set_xlabel("Δ median % (symmetric log beyond ±1%)")
    ax_d.set_ylabel("comparisons (count)")
    ax_d.legend(fontsize=8, loc="upper right")
    etas = np.array([float(t.eta_squared) for t in tests if finite(t.eta_squared)])
    sig_e = np.array([t.significant for t in tests if finite(t.eta_squared)], dtype=bool)
    if etas.size:
        ax_e.hist(
            [etas[sig_e], etas[~sig_e]],
            bins=np.linspace(0, max(float(etas.max()), 0.01), 21).tolist(),
            stacked=True,
            color=[SIGNIFICANT, NOT_SIGNIFICANT],
        )
    ax_e.set_xlabel("effect size eta²_H")
    ax_e.set_ylabel("comparisons (count)")
    for ax in (ax_d, ax_e):
        ax.grid(axis="y", alpha=0.3)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    hits = len(order.significant)
    fig.suptitle(
        f"Across {len(tests):,} comparisons: order matters in {hits:,} "
        f"({100 * hits / max(len(tests), 1):.0f}%)",
        fontsize=12,
    )
    return fig


def p_distribution(order: OrderAnalysis) -> Figure:
    """Across every comparison: the Kruskal-Wallis p-values (log bins), significant ones in
    the warm colour, and the corrected threshold; under no order effect at all they would
    spread evenly over (0, 1)."""
    import numpy as np

    rows = [(max(float(t.kw_p), 1e-300), t.significant) for t in order.tests if finite(t.kw_p)]
    ps = np.array([p for p, _ in rows])
    sig = np.array([s for _, s in rows], dtype=bool)
    fig = _fixed_figure(3.2, (0.8, 0.6, 0.25, 0.45))
    ax = fig.subplots()
    if ps.size:
        low = min(float(np.log10(ps.min())), -4.0)
        edges = np.logspace(low, 0.0, 30).tolist()
        ax.hist(
            [ps[sig], ps[~sig]],
            bins=edges,
            stacked=True,
            color=[SIGNIFICANT, NOT_SIGNIFICANT],
            label=["significant", "not significant"],
        )
        ax.set_xscale("log")
        ax.set_xlim(10.0**low, 1.0)
        ax.xaxis.set_major_formatter(_power_of_ten)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.legend(fontsize=8, loc="upper left")
    level = order.alpha_per_test
    if finite(level):
        ax.axvline(float(level), color=SIGNIFICANT, ls="--", lw=1.2)
        ax.text(
            float(level),
            0.97,
            f"corrected threshold {float(level):.2g} ",
            transform=ax.get_xaxis_transform(),
            ha="right",
            va="top",
            fontsize=8,
            color=SIGNIFICANT,
        )
    ax.set_xlabel("Kruskal-Wallis p-value (log)")
    ax.set_ylabel("comparisons (count)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"p-values of the {len(ps):,} comparisons", fontsize=12)
    return fig


def ci_case_counts(analysis: OrderAnalysis) -> Figure:
    """How many tests fall in each CI case (Duplyakin et al. 2023, Fig. 6)."""
    fig = _fixed_figure(3.4, (0.85, 0.55, 0.15, 0.4), width_in=6.5)
    ax = fig.subplots()
    cases: list[int | None] = [1, 2, 3, None]
    counts = [sum(1 for t in analysis.tests if t.ci_case == c) for c in cases]
    for i, (c, k) in enumerate(zip(cases, counts)):
        bar = ax.bar([i], [k], color=CASE_COLOURS[c], label=CASE_NAMES[c])
        ax.bar_label(bar, fontsize=9)
    ax.set_xticks(range(4), ["case 1", "case 2", "case 3", "no CI"])
    ax.set_ylabel("tests (count)")
    ax.set_xlabel("CI case (Algorithm 2)")
    ax.set_ylim(0, max(counts + [1]) * 1.2)
    locator = ax.yaxis.get_major_locator()
    assert isinstance(locator, MaxNLocator)  # a linear axis's default AutoLocator
    locator.set_params(integer=True)
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title("CI cases across tests", fontsize=12)
    return fig


# ---------------------------------------------------------------------------------------
# Trials (long format: run, order, position, test, metric, value, status, worker, started)
# ---------------------------------------------------------------------------------------


def time_axis(trials: pd.DataFrame) -> tuple[pd.Series, str]:
    """The x values for 'value against time' and their axis label.

    ISO-8601 ``started`` -> datetimes (UTC); numbers -> seconds as given; nothing usable ->
    the run index, which is the order the runs happened in.
    """
    import pandas as pd

    started = trials["started"] if "started" in trials.columns else pd.Series(dtype=object)
    if started.notna().any():
        numeric = pd.to_numeric(started, errors="coerce")
        if numeric.notna().sum() == started.notna().sum():
            return numeric, "trial start (s, as recorded)"
        parsed = pd.to_datetime(started, errors="coerce", utc=True, format="ISO8601")
        if parsed.notna().any():
            return parsed, "trial start (UTC)"
    return trials["run"], "run number (the source has no timestamps)"


def _order_scatter(ax: Any, frame: pd.DataFrame, x: pd.Series) -> None:
    for kind in sorted(frame["order"].astype(str).unique(), key=_order_rank):
        sel = frame["order"].astype(str) == kind
        _order_points(ax, kind, x[sel], frame.loc[sel, "value"])


def _order_points(ax: Any, kind: str, x: Any, y: Any) -> None:
    """One order kind's trials as points, in its colour and marker."""
    colour, marker = ORDER_STYLE.get(kind, ("#555555", "x"))
    _points(
        ax,
        x,
        y,
        marker=marker,
        color=colour,
        alpha=0.55,
        markersize=4.5,
        label=f"{label(kind)} order",
    )


def _order_rank(kind: str) -> tuple[int, str]:
    kinds = list(ORDER_STYLE)
    return (kinds.index(kind) if kind in kinds else len(kinds), kind)


def trials_over_run(frame: pd.DataFrame, test: str, metric: str) -> Figure:
    """One test's trials: value against position in the run, and against time; fixed and
    random order marked apart, and trials whose ``unhealthy`` column is true (where the
    frame has one) ringed. Position effects show as a trend on the left, drift and
    warm-up on the right.

    A report draws one per test and metric, so it is drawn cheaply: its layout is fixed
    rather than solved (matplotlib's constrained layout draws a figure several times to
    place it), and its axes carry a few ticks each (every tick is four artists to draw)."""
    fig = Figure(figsize=(WIDTH_IN, 3.3))
    fig.subplots_adjust(left=0.11, right=0.96, bottom=0.2, top=0.86, wspace=0.05)
    ax_pos, ax_time = fig.subplots(1, 2, sharey=True)
    import pandas as pd

    # A long-format CSV may leave positions empty: those trials have no point on the left.
    _order_scatter(ax_pos, frame, pd.to_numeric(frame["position"], errors="coerce").astype(float))
    ax_pos.set_xlabel("position in the run (0 = first)")
    metric_axis(ax_pos, metric)
    ax_pos.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
    ax_pos.yaxis.set_major_locator(MaxNLocator(nbins=5))  # shared with ax_time
    x, xlabel = time_axis(frame)
    _order_scatter(ax_time, frame, x)
    ax_time.set_xlabel(xlabel, loc="left")  # the date's offset takes the right
    if str(x.dtype).startswith("datetime"):
        import matplotlib.dates as mdates

        locator = mdates.AutoDateLocator()
        ax_time.xaxis.set_major_locator(locator)
        ax_time.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    else:
        ax_time.xaxis.set_major_locator(MaxNLocator(nbins=6))
    if "unhealthy" in frame.columns and frame["unhealthy"].any():
        sick = frame["unhealthy"].to_numpy(dtype=bool)
        position = pd.to_numeric(frame["position"], errors="coerce").astype(float)
        for ax, xs in ((ax_pos, position), (ax_time, x)):
            ax.scatter(
                xs[sick],
                frame.loc[sick, "value"],
                s=70,
                facecolors="none",
                edgecolors="black",
                linewidths=1.1,
                label="unhealthy",
            )
    for ax in (ax_pos, ax_time):
        ax.grid(alpha=0.3)
    ax_pos.legend(fontsize=8, loc="best")
    fig.suptitle(f"{short(test, 70)}: each trial by position and by time", fontsize=11)
    return fig


def jitter(n: int, width: float) -> np.ndarray:
    """Horizontal offsets for ``n`` points in a strip ``width`` wide: spread evenly by the
    golden ratio (deterministic, so the same trials draw the same figure) over 60 % of it."""
    import numpy as np

    return ((np.arange(n) * 0.618) % 1 - 0.5) * width * 0.6


def trials_overview(frame: pd.DataFrame, metric: str) -> Figure:
    """Every trial of one metric, all tests side by side: per test a strip of points per
    order kind (fixed and random in their colours, jittered apart), each strip's median a
    bar. Tests differ in scale (a slow test beside a fast one), so each is drawn as the
    percentage difference from its own fixed-order median (the reference of
    :func:`ci_medians_relative`); a test without a non-zero reference is left out and
    named. One such figure per metric replaces a figure per test, which the report keeps
    for the tests the analysis flags."""
    import numpy as np

    tests = list(dict.fromkeys(frame["test"].astype(str)))
    orders = frame["order"].astype(str).to_numpy()
    names = frame["test"].astype(str).to_numpy()
    values = frame["value"].to_numpy(dtype=float)
    kinds = sorted(set(orders), key=_order_rank)
    width = 0.8 / len(kinds)
    points: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {k: ([], []) for k in kinds}
    bars: list[float] = []  # x0, x1, nan, ... and y, y, nan, ...: all medians in one line
    bar_ys: list[float] = []
    drawn: list[str] = []
    for test in tests:
        mine = names == test
        fixed = values[mine & (orders == "fixed")]
        ref = float(np.median(fixed if len(fixed) else values[mine]))
        if not finite(ref) or ref == 0:
            continue
        i = len(drawn)
        drawn.append(test)
        for k, kind in enumerate(kinds):
            rel = (values[mine & (orders == kind)] / ref - 1.0) * 100.0
            if not len(rel):
                continue
            centre = i - 0.4 + width * (k + 0.5)
            points[kind][0].append(centre + jitter(len(rel), width))
            points[kind][1].append(rel)
            med = float(np.median(rel))
            bars += [centre - width * 0.4, centre + width * 0.4, math.nan]
            bar_ys += [med, med, math.nan]
    room = _names_room(drawn)
    fig = _fixed_figure(2.8 + room, (1.15, 0.15 + room, 0.1, 0.45))
    ax = fig.subplots()
    for kind, (xs, ys) in points.items():
        if xs:
            _order_points(ax, kind, np.concatenate(xs), np.concatenate(ys))
    ax.plot(bars, bar_ys, color="black", lw=1.6, label="median")
    ax.axhline(0, color="#777777", lw=0.8, zorder=0)
    ax.set_xlim(-0.6, max(len(drawn), 1) - 0.4)
    _test_axis(ax, drawn)
    every = [v for ys in points.values() for chunk in ys[1] for v in chunk.tolist()]
    if not percent_axis(ax, every, axis="y"):
        ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
    ax.set_ylabel("% from the fixed median")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(
        fontsize=8, loc="lower right", bbox_to_anchor=(1, 1), ncols=len(kinds) + 1, frameon=False
    )
    left_out = [t for t in tests if t not in drawn]
    title = f"{label(metric)}: every trial of every test"
    if left_out:
        title += f" (left out, median 0: {short(', '.join(left_out), 60)})"
    fig.suptitle(title, fontsize=11, x=0.09, ha="left")
    return fig


def per_worker(frame: pd.DataFrame, test: str, metric: str) -> Figure:
    """One test on every worker side by side: fixed and random trials per worker, medians
    marked, so a worker that disagrees (a stale build, a hot machine) stands out."""
    import numpy as np

    workers = sorted(frame["worker"].astype(str).unique())
    kinds = sorted(frame["order"].astype(str).unique(), key=_order_rank)
    slanted = len(workers) > 4
    room = _names_room(workers) if slanted else 0.15
    fig = _fixed_figure(
        3.0 + room,
        (0.95, 0.45 + room, 0.15, 0.4),
        width_in=min(WIDTH_IN, max(5.5, 3.0 + 1.2 * len(workers) * len(kinds) / 2)),
    )
    ax = fig.subplots()
    width = 0.8 / max(len(kinds), 1)
    for k, kind in enumerate(kinds):
        colour, marker = ORDER_STYLE.get(kind, ("#555555", "x"))
        for w, worker in enumerate(workers):
            vals = frame.loc[
                (frame["worker"].astype(str) == worker) & (frame["order"].astype(str) == kind),
                "value",
            ].to_numpy()
            if len(vals) == 0:
                continue
            centre = w - 0.4 + width * (k + 0.5)
            _points(
                ax,
                centre + jitter(len(vals), width),
                vals,
                marker=marker,
                color=colour,
                alpha=0.5,
                markersize=4,
                label=f"{label(kind)} order" if w == 0 else None,
            )
            med = float(np.median(vals))
            ax.plot(
                [centre - width * 0.4, centre + width * 0.4],
                [med, med],
                color="black",
                lw=2,
                label="median" if (w == 0 and k == 0) else None,
            )
    ax.set_xticks(
        range(len(workers)),
        [short(w, 20) for w in workers],
        fontsize=8,
        rotation=90 if slanted else 0,
    )
    ax.set_xlabel("worker")
    metric_axis(ax, metric)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.suptitle(f"{short(test, 30)}: per worker, fixed and random", fontsize=10)
    return fig


# ---------------------------------------------------------------------------------------
# Sweeps (washout.sweep's result, Hui et al. SIGMOD 2024)
# ---------------------------------------------------------------------------------------

R2_TARGET = 0.9  # Hui et al. 2024: sampling stops when every validation R^2 reaches 0.9


def r2_by_rate(
    history: Sequence[tuple[float, Sequence[float | None]]], target: float = R2_TARGET
) -> Figure:
    """Validation R^2 of every split against the sampling rate (one ``(rate, R^2 per
    split)`` per step), the minimum over splits joined (the quantity the stopping rule
    tests), and the target."""
    fig = _figure(3.4, width_in=7.0)
    ax = fig.subplots()
    rates: list[float] = []
    mins: list[float] = []
    for sampling_rate, r2_splits in sorted(history, key=lambda s: float(s[0])):
        rate = 100.0 * float(sampling_rate)
        r2 = [float(v) for v in r2_splits if finite(v)]
        if not r2:
            continue
        ax.plot(
            [rate] * len(r2),
            r2,
            "o",
            color="#56B4E9",
            alpha=0.6,
            markersize=4,
            label="R² of one validation split" if not rates else None,
        )
        rates.append(rate)
        mins.append(min(r2))
    ax.plot(rates, mins, "-s", color="#0072B2", markersize=5, label="minimum over splits")
    ax.axhline(target, color=SIGNIFICANT, ls="--", lw=1.2, label=f"target R² = {target:g}")
    ax.set_xlabel("sampling rate (% of settings measured)")
    ax.set_ylabel("validation R²")
    lows = [m for m in mins if math.isfinite(m)]
    ax.set_ylim(min([0.0] + lows) - 0.05, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Model fit as more settings are measured", fontsize=12)
    return fig


def coefficient_curves(
    panels: dict[str, dict[str, list[tuple[float, float]]]],
    marks: Sequence[tuple[str, str, float, str]],
    metric: str,
    shares: dict[str, float] | None = None,
    ncols: int = 3,
) -> Figure:
    """ANOVA coefficient against level, one panel per main effect or interaction (a line
    per level of the fixed parameter), with the sweep's knee and turning points marked on
    their line (Hui et al. 2024, section 4). ``marks`` are ``(panel, line, x, kind)``."""
    titles = list(panels)
    n = len(titles)
    ncols = max(1, min(ncols, n))
    nrows = max(1, math.ceil(n / ncols))
    fig = _figure(1.2 + 2.7 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    shapes = {"knee": "v", "turning": "D"}
    palette = [
        "#0072B2",
        "#E69F00",
        "#009E73",
        "#CC79A7",
        "#56B4E9",
        "#D55E00",
        "#F0E442",
        "#000000",
    ]
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.set_visible(False)
            continue
        title = titles[i]
        all_x: list[float] = []
        for k, (line, pts) in enumerate(panels[title].items()):
            xs, ys = [x for x, _ in pts], [y for _, y in pts]
            all_x += xs
            colour = palette[k % len(palette)]
            ax.plot(xs, ys, "-o", color=colour, markersize=3.5, lw=1.3, label=label(line))
            for panel, mline, x, kind in marks:
                if panel == title and mline == line and x in xs:
                    ax.plot(
                        [x],
                        [ys[xs.index(x)]],
                        marker=shapes.get(kind, "x"),
                        color=colour,
                        markersize=10,
                        markeredgecolor="black",
                        linestyle="none",
                    )
        main = title.split(" by ")[0] if " by " in title else title
        share = (shares or {}).get(title.split("(")[-1].rstrip(")") if " by " in title else title)
        ax.set_title(
            short(title, 44) + (f"\n{100 * share:.0f}% of variance" if share else ""), fontsize=9
        )
        ax.set_xlabel(f"{label(main)} (level)", fontsize=9)
        ax.set_ylabel(f"coefficient ({label(metric)})", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if all_x and min(all_x) > 0 and max(all_x) / min(all_x) >= 50:
            ax.set_xscale("log", base=2)
        ax.legend(fontsize=6.5, loc="best", ncols=2 if len(panels[title]) > 4 else 1)
    handles = [
        Line2D(
            [],
            [],
            marker=m,
            color="grey",
            markeredgecolor="black",
            linestyle="none",
            markersize=8,
            label=f"{kind} point",
        )
        for kind, m in shapes.items()
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    fig.suptitle(
        f"Effect of each parameter on {label(metric)} (treatment-coded ANOVA "
        f"coefficients, lowest level = 0)",
        fontsize=11,
    )
    return fig


def tile_map(
    settings: pd.DataFrame, params: Sequence[str], metric: str, cmap: str = "viridis"
) -> Figure:
    """The measured parameter space as tiles: the first two parameters within a tile (rows,
    columns), tiles nested by the next two (columns of tiles, rows of tiles). Parameters
    beyond four are averaged over; unmeasured cells stay blank."""
    import numpy as np

    inner_y, inner_x = params[0], params[1] if len(params) > 1 else None
    outer_x = params[2] if len(params) > 2 else None
    outer_y = params[3] if len(params) > 3 else None

    def levels(p: str | None) -> list[Any]:
        return sorted(settings[p].dropna().unique().tolist(), key=_level_key) if p else [None]

    ly, lx, loy, lox = levels(inner_y), levels(inner_x), levels(outer_y), levels(outer_x)
    vmin, vmax = float(settings[metric].min()), float(settings[metric].max())
    fig = _figure(1.4 + 2.2 * len(loy), width_in=min(WIDTH_IN, 2.0 + 2.4 * len(lox)))
    axes = fig.subplots(len(loy), len(lox), squeeze=False, sharex=True, sharey=True)
    image = None
    for r, oy in enumerate(loy):
        for c, ox in enumerate(lox):
            sel = settings
            if outer_y:
                sel = sel[sel[outer_y] == oy]
            if outer_x:
                sel = sel[sel[outer_x] == ox]
            grid = np.full((len(ly), len(lx)), np.nan)
            keys = [inner_y] + ([inner_x] if inner_x else [])
            for key, val in sel.groupby(keys)[metric].mean().items():
                ky, kx = key if isinstance(key, tuple) else (key, None)
                grid[ly.index(ky), lx.index(kx) if inner_x else 0] = val
            ax = axes[r][c]
            image = ax.imshow(
                grid,
                origin="lower",
                aspect="auto",
                cmap=cmap,
                vmin=vmin,
                vmax=vmax,
                interpolation="nearest",
            )
            ax.set_xticks(
                range(len(lx)),
                [short(v, 8) for v in lx],
                fontsize=7,
                rotation=90 if sum(len(short(v, 8)) + 1 for v in lx) > 14 else 0,
            )
            ax.set_yticks(range(len(ly)), [short(v, 8) for v in ly], fontsize=7)
            parts = [
                f"{label(outer_y)} = {label(oy)}" if outer_y else "",
                f"{label(outer_x)} = {label(ox)}" if outer_x else "",
            ]
            title = ", ".join(p for p in parts if p)
            if title:
                ax.set_title(title, fontsize=8)
            if c == 0:
                ax.set_ylabel(label(inner_y), fontsize=8)
            if r == len(loy) - 1:
                ax.set_xlabel(label(inner_x) if inner_x else "", fontsize=8)
    if image is not None:
        bar = fig.colorbar(image, ax=axes, shrink=0.8)
        bar.set_label(label(metric))
    rest = [p for p in params[4:]]
    fig.suptitle(
        f"{label(metric)} across the parameter space"
        + (f" (mean over {', '.join(label(p) for p in rest)})" if rest else ""),
        fontsize=11,
    )
    return fig


def _level_key(v: Any) -> tuple[int, Any]:
    """Numeric levels in numeric order, then the others as text."""
    try:
        return (0, float(v))
    except (TypeError, ValueError):
        return (1, str(v))
