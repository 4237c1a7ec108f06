"""One protocol for every output format: a renderer turns an
:class:`~washout.analysis.result.Analysis` into text (and, for some formats, files beside
it) and reads nothing else; :func:`write` is where every rendered output reaches the disk.

Formats, one module each: ``table`` (the terminal: :mod:`washout.report.terminal`),
``json`` (:mod:`~washout.report.json_format`: the result's ``to_dict()``), ``csv``
(:mod:`~washout.report.csv_format`), ``md`` (:mod:`~washout.report.markdown`) and ``html``
(:mod:`~washout.report.html`). A renderer does no I/O: what it makes is returned, so
rendering the same analysis twice gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from washout.analysis.result import Analysis

Progress = Callable[[int, int], None]
"""Called with (figures done, figures in all) while a report's figures are drawn."""

FORMATS: dict[str, str] = {
    "table": "washout.report.terminal",
    "json": "washout.report.json_format",
    "csv": "washout.report.csv_format",
    "md": "washout.report.markdown",
    "html": "washout.report.html",
}
"""Each format's module; each has a ``render`` that is a :class:`Renderer`."""


@dataclass(frozen=True)
class Settings:
    """How to render: ``width`` of a terminal (None: as wide as the lines are),
    ``color`` for a terminal; ``stem`` names the files written beside a Markdown or HTML
    report (``STEM-figures/``, ``STEM-tests.csv``); ``progress`` hears of every figure
    drawn, on ``workers`` processes (None: every usable core); ``time_unit``: the
    comparison's times in that unit (hyperfine's ``--time-unit``; None: each in its own)."""

    width: int | None = None
    color: bool = False
    stem: str = "report"
    progress: Progress | None = None
    workers: int | None = None
    time_unit: tuple[str, float] | None = None


@dataclass(frozen=True)
class Rendered:
    """A rendered output: its text, the files that go beside it (a path relative to the
    text's directory, and the bytes), and the files those replace (glob patterns relative
    to the text's directory: a report's old figures, ``STEM-figures/*.png``)."""

    text: str
    files: dict[str, bytes] = field(default_factory=dict)
    replaces: tuple[str, ...] = ()


class Renderer(Protocol):
    """Renders an analysis in one format."""

    def __call__(self, analysis: Analysis, settings: Settings, /) -> Rendered: ...


def renderer(fmt: str) -> Renderer:
    """The renderer of ``fmt`` (a key of :data:`FORMATS`), imported when asked for: the
    reports' modules import matplotlib."""
    render: Renderer = import_module(FORMATS[fmt]).render
    return render


def write(rendered: Rendered, out: Path, *sources: Path) -> Path:
    """Write ``rendered`` to ``out`` and its files beside it, each through
    :func:`washout.data.outputs.write_output` (never over a store's files or the
    ``sources``, whole or not at all, streams as streams): every rendered output washout
    writes goes through here. A file that cannot be written is a one-line error naming it."""
    from washout.data.outputs import write_output
    from washout.errors import WashoutError

    for pattern in rendered.replaces:
        for stale in out.parent.glob(pattern):
            if stale.is_file():
                try:
                    stale.unlink()
                except OSError as err:
                    raise WashoutError(f"{stale}: cannot remove: {err.strerror}") from None
    for name, data in rendered.files.items():
        write_output(out.parent / name, data, *sources)
    write_output(out, rendered.text, *sources)
    return out
