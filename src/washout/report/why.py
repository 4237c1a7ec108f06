"""The report's "why" section: carryover, drift and claims (washout.report.words), and notes on
what the source could not support. Apart from document.py, so that it imports no
matplotlib: `washout report` runs it in a forked child while the parent imports what the
figures need (washout.report.parallel.beside)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from washout.report.words import Why


def why_for_report(
    trials: pd.DataFrame,
    claims: list[str],
    alpha: float,
    correction: str,
    by_worker: bool,
) -> tuple[Why | None, list[str]]:
    """Carryover, drift and claims for the report's "why" section, and notes on what the
    source could not support: carryover and drift need each trial's position and time."""
    from washout.errors import WashoutError
    from washout.report.words import explain

    options: dict[str, Any] = dict(alpha=alpha, correction=correction, by_worker=by_worker)
    try:
        return explain(trials, carryover=True, drift=True, claims=claims, **options), []
    except WashoutError as err:
        note = f"No carryover or drift analysis: {err}"
        return (explain(trials, claims=claims, **options) if claims else None), [note]
