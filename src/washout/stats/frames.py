"""Results that are tables: ``to_frame()`` gives a pandas DataFrame, and a notebook (Jupyter,
VS Code) shows the result as that table (``_repr_html_``, IPython's display protocol)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

SHOWN_ROWS = 60
"""Rows a notebook shows of a longer table (the first and last halves, as pandas does)."""


class FrameView:
    """A result with a table form: subclasses define :meth:`to_frame`."""

    def to_frame(self) -> pd.DataFrame:
        """The result as a DataFrame, one row per finding."""
        raise NotImplementedError

    def _repr_html_(self) -> str:
        """The table, as a notebook shows it."""
        return self.to_frame().to_html(index=False, na_rep="", max_rows=SHOWN_ROWS)
