"""The ``csv`` format: the analysis' main table, one row per comparison of the order
analysis (:meth:`~washout.analysis.result.Analysis.to_frame`: every field of the JSON's
``order.tests``, CIs split into ``_lo``/``_hi``), or a sweep's important points. The other
parts of an analysis do not fit one table: ``--format json`` has them all."""

from __future__ import annotations

from typing import TYPE_CHECKING

from washout.data.outputs import csv_text
from washout.report.render import Rendered, Settings

if TYPE_CHECKING:
    from washout.analysis.result import Analysis


def render(analysis: Analysis, settings: Settings) -> Rendered:
    """The table as CSV (empty fields where a value is undefined)."""
    return Rendered(csv_text(analysis.to_frame()))
