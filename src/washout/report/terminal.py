"""The terminal output: an analysis as a person reads it first, and the live table of a run.

From an :class:`~washout.analysis.result.Analysis` (:func:`render`, the ``table`` format):
the verdict, the per-comparison table (its CIs left to the wide outputs), its warnings, why
in words, the notes and what was left out, then hyperfine's table and summary last, as
hyperfine ends; for a sweep, its conclusions. ``washout analyze``, the run's summary and
the sweep commands print it. Every cell and sentence comes from :mod:`washout.report.text`,
as in the Markdown and HTML reports.

Tables are laid out here, in rich's look (``┃`` and ``━╇━`` under the header, ``│``
between cells), in one pass over the cells: rich's own tables, which measure every cell
several times, were most of the summary of a run of thousands of tests (bench/RESULTS.md,
"The run's summary of many tests"). A narrow terminal folds the text columns, never a
number.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from washout.report import text
from washout.report.render import Rendered, Settings

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import RenderableType

    from washout.analysis.result import Analysis
    from washout.stats.compare import Comparison
    from washout.sweep.result import SweepResult

STYLES: dict[str, str] = {
    "bold": "\x1b[1m",
    "red": "\x1b[31m",
    "green": "\x1b[32m",
    "yellow": "\x1b[33m",
    "dim": "\x1b[2m",
    "bold red": "\x1b[1;31m",
    "bold green": "\x1b[1;32m",
}
RESET = "\x1b[0m"
NARROWEST = 8
"""The narrowest a folded text column gets, in characters."""


class Lines:
    """Lines of output, each in a style when colours are on."""

    def __init__(self, color: bool) -> None:
        self.color = color
        self.lines: list[str] = []

    def add(self, line: str, style: str | None = None) -> None:
        if style and self.color:
            line = f"{STYLES[style]}{line}{RESET}"
        self.lines.append(line)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def render(analysis: Analysis, settings: Settings) -> Rendered:
    """The ``table`` format (see the module doc): plain text, or with ANSI colours with
    ``settings.color``; tables fit ``settings.width`` (None: no limit)."""
    out = Lines(settings.color)
    write_analysis(out, analysis, settings.width, settings.time_unit)
    return Rendered(out.text())


def write_analysis(
    out: Lines,
    analysis: Analysis,
    width: int | None,
    time_unit: tuple[str, float] | None = None,
) -> None:
    """The analysis' lines (module doc); ``time_unit`` as :class:`Settings`'."""
    if analysis.sweep is not None:
        write_sweep(out, analysis.sweep, width)
    else:
        matters = analysis.verdict == "order-matters"
        style = "bold red" if matters else "bold green" if analysis.order else "bold"
        out.add(text.verdict(analysis), style)
    if analysis.order is not None and analysis.order.tests:
        write_table(out, text.order_table(analysis.order), width, narrow=True)
        out.add(table_legend(), "dim")
        warnings = text.order_warnings(analysis.order)
        if warnings:
            out.add("warnings:", "yellow")
            for name, warning in warnings:
                out.add(f"  {name}: {warning}", "yellow")
    from washout.report.words import context_words, render_words

    for line in render_words(analysis):
        out.add(line)
    if analysis.context is not None and analysis.context.rows:
        write_table(out, text.context_table(analysis.context), width)
    for line in context_words(analysis):
        out.add(line)
    for line in text.left_out(analysis):
        out.add(line, "dim")
    for line in text.health_lines(analysis):
        out.add(line, "yellow" if analysis.health and analysis.health.unhealthy else None)
    if analysis.health is not None:
        for line in text.stratum_lines(analysis.health):
            out.add(f"  {line}")
    if analysis.energy:
        out.add("Energy per trial, gross and net of the machine at rest:", "bold")
        write_table(out, text.energy_table(analysis.energy), width)
    if analysis.comparison is not None:  # last, as hyperfine ends
        write_comparison(out, analysis.comparison, width, time_unit)


def table_legend() -> str:
    """What the order table's columns mean, under it in a terminal."""
    return (
        "Δ median % = (median fixed − median random) / median fixed; p (KW): Kruskal-Wallis; "
        "significant: after the family-wise correction"
    )


def write_table(
    out: Lines, table: text.Table, width: int | None = None, narrow: bool = False
) -> None:
    """A :class:`~washout.report.text.Table` in rich's look (module doc); ``narrow`` leaves
    out its wide columns; highlighted rows in red."""
    shown = [i for i, c in enumerate(table.columns) if not (narrow and c in table.wide)]
    names = [table.columns[i] for i in shown]
    rows = [[row[i] for i in shown] for row in table.rows]
    numeric = [name in table.numeric for name in names]
    widths = [max([len(n), *(len(r[j]) for r in rows)]) for j, n in enumerate(names)]
    if width is not None:
        _fit(widths, numeric, width)

    def line(cells: list[str], sep: str) -> list[str]:
        parts = [_fold(c, w) for c, w in zip(cells, widths)]
        height = max(len(p) for p in parts)
        lines = []
        for k in range(height):
            pieces = []
            for p, w, right in zip(parts, widths, numeric):
                piece = p[k] if k < len(p) else ""
                pieces.append(f" {piece.rjust(w) if right else piece.ljust(w)} ")
            lines.append(sep.join(pieces).rstrip())
        return lines

    for header in line(names, "┃"):
        out.add(header, "bold")
    out.add("╇".join("━" * (w + 2) for w in widths))
    flags = table.highlight or [False] * len(rows)
    for row, flag in zip(rows, flags):
        for shown_line in line(row, "│"):
            out.add(shown_line, "red" if flag else None)


def _fit(widths: list[int], numeric: list[bool], width: int) -> None:
    """Narrow the widest text columns, in place, until the table fits ``width`` (or they
    reach :data:`NARROWEST`)."""
    while sum(w + 3 for w in widths) - 1 > width:
        foldable = [j for j, w in enumerate(widths) if not numeric[j] and w > NARROWEST]
        if not foldable:
            return
        widest = max(foldable, key=lambda j: widths[j])
        widths[widest] -= 1


def _fold(cell: str, width: int) -> list[str]:
    """A cell's lines at ``width`` characters: words kept whole where they fit, longer
    ones cut."""
    if len(cell) <= width:
        return [cell]
    import textwrap

    return textwrap.wrap(cell, width, break_long_words=True, break_on_hyphens=False) or [""]


def write_comparison(
    out: Lines,
    comparison: Comparison,
    width: int | None = None,
    time_unit: tuple[str, float] | None = None,
) -> None:
    """hyperfine's table (its times in ``time_unit``, or each in its own), then its summary
    (named by what it is computed from), the notes where fixed and random orders disagree,
    and hyperfine's warnings."""
    write_table(out, text.comparison_table(comparison, time_unit), width)
    if comparison.rankings:
        out.add(text.summary_heading(comparison), "bold")
        for head, lines in text.ranking_lines(comparison):
            out.add(f"  {head}")
            for line in lines:
                out.add(f"    {line}")
    for test, warning in text.comparison_warnings(comparison):
        out.add(f"Warning ({test}): {warning}", "yellow")


def write_sweep(out: Lines, result: SweepResult, width: int | None = None) -> None:
    """A sweep's conclusions: how much was measured and how well the model predicts, the
    significant terms, the important points, and the ranges a fair comparison must cover."""
    r2 = [v for v in result.r2_validation if v is not None]
    status = "threshold reached" if result.terminated else "threshold NOT reached (budget)"
    if not result.terminated and result.r2_best is not None:
        status += f"; best worst-split R^2 {result.r2_best:.3f}"
    out.add(
        f"Measured {result.settings_measured} of {result.settings_total} settings "
        f"({result.sampling_rate:.0%}) with method {result.method} ({result.sampler} "
        f"sampling, model {result.model}, rule {result.rule}, {result.coding} "
        f"coding): {status}"
    )
    if r2:
        out.add(
            f"Validation R^2 over {len(r2)} splits: min {min(r2):.3f}, median "
            f"{sorted(r2)[len(r2) // 2]:.3f}"
        )
    if result.r2_holdout is not None:
        out.add(f"R^2 on the last batch before it was measured: {result.r2_holdout:.3f}")
    if result.r2_unmeasured is not None:
        out.add(f"R^2 on the unmeasured settings: {result.r2_unmeasured:.3f}")
    if result.exact_fit:
        out.add(
            "The model reproduces the metric exactly (no noise left): a term is "
            "significant if it explains any variance at all; p-values are limits."
        )
    intervals = text.sweep_intervals(result)
    if intervals:
        out.add(intervals)
    for title, table in text.sweep_tables(result):
        out.add(title, "bold")
        if table.rows:
            write_table(out, table, width)
        else:  # as the reports say it, not a header over nothing
            out.add("None.")


def medians_table(frame: pd.DataFrame, planned: int | None = None) -> RenderableType | None:
    """The live table under a run's progress bar (rich, which redraws it): per test, its
    successful trials so far (of ``planned`` per test) and their median wall time; None
    before any trial succeeded."""
    from rich.table import Table
    from rich.text import Text

    from washout.analysis.units import seconds
    from washout.stats.trials import usable_trials

    ok, _ = usable_trials(frame[frame["metric"] == "wall"], "the live table")
    if ok.empty:
        return None
    table = Table(show_edge=False, header_style="bold")
    for name, justify in (("test", "left"), ("trials", "right"), ("median", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for test, values in ok.groupby("test", observed=True)["value"]:
        done = str(values.size) if planned is None else f"{values.size}/{planned}"
        table.add_row(Text(str(test)), done, seconds(float(values.median())))
    return table


def frame_table(frame: pd.DataFrame, keys: int = 1) -> text.Table:
    """A wide DataFrame turned on its side: one column per row of ``frame`` (headed by its
    first ``keys`` fields), one line per other field. Used for the OrderSage-compatible
    table, whose 22 columns do not fit a terminal's width."""
    import pandas as pd

    heads = [" ".join(str(v) for v in row[:keys]) for row in frame.itertuples(index=False)]
    rows = [
        [str(column), *("" if pd.isna(v) else str(v) for v in frame.iloc[:, i])]
        for i, column in enumerate(frame.columns[keys:], start=keys)
    ]
    return text.Table(["", *heads], rows, numeric=set(heads))


def table_text(table: text.Table, width: int | None = None) -> str:
    """A table alone as plain text."""
    out = Lines(color=False)
    write_table(out, table, width)
    return out.text()


def to_text(renderable: RenderableType, width: int | None = 120) -> str:
    """A rich renderable (the live table) as plain text, for tests."""
    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=width or 200, color_system=None, highlight=False).print(renderable)
    return buffer.getvalue()
