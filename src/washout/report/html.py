"""The HTML report: one self-contained file (inline CSS and SVG figures, no scripts, no
external fonts or styles) that opens offline, reads on a laptop screen and prints.

Every text from the data goes through jinja2 autoescaping; the SVG figures are matplotlib's
output, which escapes its own text (tests/test_report_html.py checks both in a browser).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from washout import __version__
from washout.report import document, figures

if TYPE_CHECKING:
    import jinja2
    import pandas as pd

TEMPLATES = Path(__file__).parent / "templates"


def _environment() -> "jinja2.Environment":
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
    )


def _svgs(items: list[document.FigureItem]) -> dict[str, Markup]:
    return {item.key: Markup(figures.svg(item.figure, item.key)) for item in items}


def render_sweep_section(
    sweep: dict[str, Any],
    settings: "pd.DataFrame",
    r2_history: list[dict[str, Any]] | None = None,
    metric: str | None = None,
) -> str:
    """The sweep section alone, as an HTML fragment (``<section id="sweep">``): the
    summary, significant terms, knee and turning points, ranges, and the R^2, coefficient
    and tile-map figures. ``sweep`` is washout.sweep's result dict; ``settings`` the measured
    settings (parameter columns, then the metric unless ``metric`` names it)."""
    return _sweep_html(document.sweep_part(sweep, settings, r2_history, metric))


def _sweep_html(part: document.SweepPart) -> str:
    template = _environment().get_template("sweep.j2")
    return template.render(sweep=part, svgs=_svgs(part.figures))


def render_html(
    analysis: dict[str, Any] | None,
    trials: "pd.DataFrame | None",
    meta: dict[str, Any] | None = None,
    sweep: dict[str, Any] | None = None,
    *,
    settings: "pd.DataFrame | None" = None,
    r2_history: list[dict[str, Any]] | None = None,
) -> str:
    """The whole report as one HTML document.

    ``analysis`` is ``OrderAnalysis.to_dict()``, ``trials`` the long-format frame it came
    from, ``meta`` what the store knows about the experiment (name, seed, design, runs,
    spec_text, workers with provenance, failures; any subset). ``sweep`` adds the sweep
    section and then needs ``settings`` (and takes ``r2_history``).
    """
    report = document.build_report(analysis, trials, meta, sweep, settings, r2_history)
    items = [item for section in report.sections for item in section.figures]
    sweep_html = Markup(_sweep_html(report.sweep)) if report.sweep else Markup("")
    template = _environment().get_template("report.html.j2")
    return template.render(
        r=report,
        svgs=_svgs(items),
        sweep_html=sweep_html,
        matters=bool(analysis and analysis.get("verdict") == "order-matters"),
        version=__version__,
    )


def write_html(path: str | Path, *args: Any, **kwargs: Any) -> Path:
    """:func:`render_html` written to ``path`` (UTF-8); returns the path."""
    out = Path(path)
    out.write_text(render_html(*args, **kwargs), encoding="utf-8")
    return out
