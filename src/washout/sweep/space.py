"""A parameter space: parameters with ordered levels, settings as level codes, and (when
measured) one metric value per setting.

Levels are ordered as patsy orders a categorical factor (numbers numerically, otherwise as
text), so code 0 is the reference level of the treatment coding the paper's ANOVA uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from washout.errors import SourceError

if TYPE_CHECKING:
    import pandas as pd

Level = float | str


@dataclass
class Space:
    """Settings of a parameter space: ``codes[i, f]`` is the level index of parameter f in row i."""

    parameters: list[str]
    levels: list[list[Level]]
    codes: np.ndarray
    y: np.ndarray | None = None
    metric: str | None = None
    source: str = "<memory>"

    @property
    def n_levels(self) -> list[int]:
        return [len(lv) for lv in self.levels]

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def frame(self) -> pd.DataFrame:
        """The settings as a table: one column of level values per parameter, the metric
        last (the shape the report's sweep section reads)."""
        import pandas as pd

        data: dict[str, list[Level] | np.ndarray] = {
            p: [self.levels[f][c] for c in self.codes[:, f]] for f, p in enumerate(self.parameters)
        }
        if self.y is not None:
            data[self.metric or "metric"] = self.y
        return pd.DataFrame(data)

    def numeric_levels(self, f: int) -> np.ndarray:
        """Level values of parameter f as x-coordinates: the values if numeric, else their ranks."""
        values = self.levels[f]
        if all(isinstance(v, (int, float)) for v in values):
            return np.asarray(values, dtype=float)
        return np.arange(len(values), dtype=float)

    def level(self, f: int, code: int) -> Level:
        """The level value behind a code, as a plain Python value for JSON."""
        value = self.levels[f][code]
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    def subset(self, rows: np.ndarray) -> Space:
        """The same space restricted to some rows (levels keep their codes)."""
        return Space(
            self.parameters,
            self.levels,
            self.codes[rows],
            None if self.y is None else self.y[rows],
            self.metric,
            self.source,
        )


def ordered_levels(values: pd.Series) -> tuple[list[Level], np.ndarray]:
    """Sorted distinct levels and each value's code; numeric when every value parses as a number."""
    import pandas as pd

    numeric = pd.to_numeric(values, errors="coerce")
    if numeric.notna().all():
        uniq = np.unique(numeric.to_numpy(dtype=float))
        return [float(u) for u in uniq], np.searchsorted(uniq, numeric.to_numpy(dtype=float))
    text = values.astype(str).to_numpy()
    uniq_text = np.unique(text)
    return [str(u) for u in uniq_text], np.searchsorted(uniq_text, text)


def space_from_frame(
    frame: pd.DataFrame, metric: str | None, parameters: list[str] | None, source: str
) -> Space:
    """Build a space from a table; repeated settings are averaged into one row.

    ``parameters`` defaults to every column except the metric (what the paper's code does).
    Errors name the file, the column and the offending value.
    """
    import pandas as pd

    columns = [str(c) for c in frame.columns]
    frame = frame.set_axis(columns, axis=1)
    if metric is not None and metric not in columns:
        raise SourceError.at(
            source, "--metric", metric, f"no such column (columns: {', '.join(columns)})"
        )
    if parameters:
        for p in parameters:
            if p not in columns:
                raise SourceError.at(
                    source, "--param", p, f"no such column (columns: {', '.join(columns)})"
                )
            if p == metric:
                raise SourceError.at(source, "--param", p, "is the metric column")
    params = list(parameters) if parameters else [c for c in columns if c != metric]
    if not params:
        raise SourceError.at(source, "--param", "", "no parameter columns left besides the metric")
    if len(set(params)) != len(params):
        raise SourceError.at(source, "--param", ",".join(params), "a parameter is named twice")
    for p in params:
        if frame[p].isna().any():
            row = int(np.flatnonzero(frame[p].isna().to_numpy())[0])
            raise SourceError.at(source, f"column {p}, row {row + 2}", "", "empty value")
    y = None
    if metric is not None:
        values = pd.to_numeric(frame[metric], errors="coerce")
        bad = values.isna() | ~np.isfinite(values.fillna(0.0))
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise SourceError.at(
                source,
                f"column {metric}, row {row + 2}",
                frame[metric].iloc[row],
                "metric is not a finite number",
            )
        frame = frame.assign(**{metric: values.astype(float)})
        frame = frame.groupby(params, sort=False, as_index=False)[metric].mean()
        y = frame[metric].to_numpy(dtype=float)
    levels, codes = [], []
    for p in params:
        lv, code = ordered_levels(frame[p])
        levels.append(lv)
        codes.append(code)
    return Space(params, levels, np.column_stack(codes).astype(int), y, metric, source)


def load_space_csv(path: str | Path, metric: str, parameters: list[str] | None = None) -> Space:
    """Read a fully (or partly) measured space from CSV: one row per setting (CRLF is fine)."""
    import pandas as pd

    source = str(path)
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise SourceError(f"{source}: no such file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise SourceError(
            f"{source}: not a readable CSV file: {str(err).splitlines()[0]}"
        ) from None
    if frame.empty:
        raise SourceError(f"{source}: no rows")
    return space_from_frame(frame, metric, parameters, source)


def full_grid(parameters: list[str], levels: list[list[Level]]) -> Space:
    """Every combination of levels, first parameter varying slowest (an unmeasured space)."""
    grids = np.meshgrid(*[np.arange(len(lv)) for lv in levels], indexing="ij")
    codes = np.column_stack([g.ravel() for g in grids]).astype(int)
    return Space(list(parameters), [list(lv) for lv in levels], codes)
