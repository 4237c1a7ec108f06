"""The HTML report: one self-contained file (inline CSS and SVG figures, no scripts, no
external fonts or styles) that opens offline, reads on a laptop screen and prints.

Every text from the data goes through jinja2 autoescaping; the SVG figures are matplotlib's
output, which escapes its own text (tests/test_report_browser.py checks both in Chromium).
"""

from __future__ import annotations

from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING

from markupsafe import Markup

from washout.analysis.parallel import Progress, run_jobs
from washout.report import document, figures
from washout.report.render import Rendered, Settings
from washout.version import __version__

if TYPE_CHECKING:
    import jinja2
    import pandas as pd

    from washout.analysis.result import Analysis
    from washout.sweep.result import SweepResult

TEMPLATES = Path(__file__).parent / "templates"


@cache
def _environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
    )


def _svgs(
    items: list[document.FigureItem],
    templates: list[str],
    progress: Progress | None = None,
    workers: int | None = None,
) -> dict[str, Markup]:
    """Every figure drawn and written as SVG, keyed by its key, on ``workers`` processes
    (:func:`washout.analysis.parallel.run_jobs`: by default every usable core), while this
    one compiles the ``templates`` that will take them (they need no figure)."""
    jobs = [partial(_svg, item) for item in items]
    texts = run_jobs(jobs, progress, workers, partial(_compile, templates))
    return {item.key: Markup(text.decode()) for item, text in zip(items, texts, strict=True)}


def _svg(item: document.FigureItem) -> bytes:
    """One figure drawn and written as SVG: a job for run_jobs, in whichever process."""
    return figures.svg(item.draw(), item.key).encode()


def _compile(templates: list[str]) -> None:
    """Import jinja2 and compile ``templates`` into the cached environment."""
    for name in templates:
        _environment().get_template(name)


def render_sweep_section(
    sweep: SweepResult, settings: pd.DataFrame, metric: str | None = None
) -> str:
    """The sweep section alone, as an HTML fragment (``<section id="sweep">``): the
    summary, significant terms, knee and turning points, ranges, and the R^2, coefficient
    and tile-map figures. ``sweep`` is washout.sweep's result; ``settings`` the measured
    settings (parameter columns, then the metric unless ``metric`` names it)."""
    part = document.sweep_part(sweep, settings, metric)
    return _sweep_html(part, _svgs(part.figures, ["sweep.j2"]))


def _sweep_html(part: document.SweepPart, svgs: dict[str, Markup]) -> str:
    template = _environment().get_template("sweep.j2")
    return template.render(sweep=part, svgs=svgs)


def render_html(
    report: document.Report, progress: Progress | None = None, workers: int | None = None
) -> str:
    """The whole report (:func:`washout.report.document.build_report`) as one HTML
    document; ``progress`` hears of every figure drawn. The figures are drawn on
    ``workers`` processes (default: every core this process may use); the document is the
    same however many."""
    templates = ["report.html.j2"] + (["sweep.j2"] if report.sweep else [])
    svgs = _svgs(report.all_figures(), templates, progress, workers)
    sweep_html = Markup(_sweep_html(report.sweep, svgs)) if report.sweep else Markup("")
    template = _environment().get_template("report.html.j2")
    return template.render(
        r=report,
        svgs=svgs,
        sweep_html=sweep_html,
        matters=report.order_matters,
        version=__version__,
        csv_uri=_data_uri(report.tests_csv[1]) if report.tests_csv else "",
    )


def _data_uri(csv_text: str) -> str:
    """The CSV as a ``data:`` URI, so the page links its whole table and stays one file."""
    import base64

    return "data:text/csv;charset=utf-8;base64," + base64.b64encode(csv_text.encode()).decode()


def render(analysis: Analysis, settings: Settings) -> Rendered:
    """The ``html`` format: the report of ``analysis`` as one self-contained file."""
    report = document.build_report(analysis, settings.stem)
    return Rendered(render_html(report, settings.progress, settings.workers))
