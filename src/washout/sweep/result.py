"""What a sweep returns: frozen results carrying everything its summary and report show, so
neither has to fit anything again (``to_dict()`` gives the JSON of ``washout explore`` and
``sweep.json``; ``from_dict()`` and :func:`load_sweep_dir` read it back)."""

from __future__ import annotations

import json
import types
from dataclasses import MISSING, dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin, get_type_hints

from washout.errors import WashoutError
from washout.stats.frames import FrameView

if TYPE_CHECKING:
    import pandas as pd

Fixed = dict[str, object] | None
"""The fixed side of an interaction's curve ({parameter: level}), None for a main effect."""


@dataclass(frozen=True)
class StepResult:
    """One iteration of the loop: the learning curve's point (R^2 against sampling rate)."""

    settings_measured: int
    sampling_rate: float
    r2_validation: tuple[float | None, ...]
    r2_min: float | None
    r2_holdout: float | None


@dataclass(frozen=True)
class TermShare:
    """A significant term and its share of variance: with intervals, the estimate of the
    fully measured space's share (the posterior median), its interval [low, high] and the
    importance that interval gives (important, may be important, not important)."""

    term: str
    share: float
    low: float | None = None
    high: float | None = None
    importance: str | None = None


@dataclass(frozen=True)
class ImportantPoint:
    """A knee or turning point of an important term's curve, ranked by share x turn ratio."""

    term: str
    parameter: str
    fixed: Fixed
    type: str
    value: object
    turn_ratio: float | None
    share: float
    low: object = None
    """With intervals: the lowest and highest level of the interval where the draws put this
    curve's point, and the fraction of draws that have one (``found``)."""
    high: object = None
    found: float | None = None


@dataclass(frozen=True)
class Curve:
    """A coefficient curve of the conclusions' ANOVA: the varied parameter's level values
    (x) and the term's coefficients there (y); a main effect's or one fixed level's."""

    term: str
    parameter: str
    fixed: Fixed
    x: tuple[float, ...]
    y: tuple[float, ...]


@dataclass(frozen=True)
class Versus:
    """A second system's conclusions, analysed the same way (``washout explore --versus``)."""

    data: str
    significant_terms: tuple[TermShare, ...]
    important_points: tuple[ImportantPoint, ...]
    ranges: dict[str, list[list[object]]]


@dataclass(frozen=True)
class SweepResult(FrameView):
    """A finished sweep or exploration: how much was measured, how well the model predicts,
    the method, and the conclusions (terms, points, curves, fair ranges)."""

    sampling_rate: float
    settings_measured: int
    settings_total: int
    terminated: bool
    r2_validation: tuple[float | None, ...]
    method: str
    model: str
    sampler: str
    rule: str
    conclusions_from: str
    coding: str
    validation: str
    exact_fit: bool
    seed: int
    significant_terms: tuple[TermShare, ...]
    important_points: tuple[ImportantPoint, ...]
    ranges: dict[str, list[list[object]]]
    steps: tuple[StepResult, ...]
    curves: tuple[Curve, ...]
    r2_holdout: float | None = None
    r2_unmeasured: float | None = None
    r2_best: float | None = None
    """The highest worst-split R^2 of any iteration (what was reached when not terminated)."""
    directory: str | None = None
    r2_noise_ceiling: float | None = None
    stopped: str | None = None
    versus: Versus | None = None
    interval_level: float | None = None
    """The probability of the shares' and points' intervals (None: no intervals)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON; optional fields that do not apply are left out."""
        optional = {"r2_unmeasured", "directory", "r2_noise_ceiling", "stopped", "versus"}
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in optional and value is None:
                continue
            out[f.name] = to_plain(value)
        return out

    def to_frame(self) -> pd.DataFrame:
        """The important points, one row each (term, parameter, fixed, type, value, turn
        ratio), the sweep's conclusions."""
        import pandas as pd

        return pd.DataFrame([to_plain(p) for p in self.important_points])

    def with_fields(self, **changes: Any) -> SweepResult:
        """A copy with some fields replaced (a runner adds its directory, a comparison its
        joint ranges)."""
        return replace(self, **changes)

    @classmethod
    def from_dict(cls, data: object, source: str = "sweep") -> SweepResult:
        """The result ``to_dict()`` gave (read back from JSON), each field checked against
        its type: a one-line error names ``source``, the field and the value otherwise."""
        return from_plain(cls, data, source)


def load_sweep_dir(directory: Path) -> tuple[SweepResult, pd.DataFrame]:
    """The result (sweep.json) and the measured settings (settings.csv: parameter columns,
    the metric last) that ``washout sweep`` leaves in its directory."""
    import pandas as pd

    summary, settings = directory / "sweep.json", directory / "settings.csv"
    if not (summary.is_file() and settings.is_file()):
        raise WashoutError(
            f"{directory}: not a sweep directory (it needs the sweep.json and "
            "settings.csv that washout sweep writes)"
        )
    try:
        data, frame = json.loads(summary.read_text()), pd.read_csv(settings)
    except (ValueError, pd.errors.ParserError) as err:
        raise WashoutError(f"{directory}: cannot read the sweep's files: {err}") from None
    return SweepResult.from_dict(data, str(summary)), frame


def to_plain(value: Any) -> Any:
    """Dataclasses, tuples and dicts as JSON-ready dicts and lists (the sweep's and the
    bisect's typed results and state)."""
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: to_plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value


def from_plain(hint: Any, value: Any, source: str, where: str = "") -> Any:
    """``value`` (plain JSON data) as the type ``hint``: dataclasses from dicts, tuples
    from lists, checked at every level; the inverse of :func:`to_plain`."""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in get_args(hint):
            return None
        (hint,) = [a for a in get_args(hint) if a is not type(None)]
        origin = get_origin(hint)
    if is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, dict):
            raise _wrong(source, where, value, "an object")
        hints = get_type_hints(hint)
        given = {}
        for f in fields(hint):
            name = f"{where}.{f.name}" if where else f.name
            if f.name in value:
                given[f.name] = from_plain(hints[f.name], value[f.name], source, name)
            elif f.default is MISSING:
                raise WashoutError(f"{source}: {name}: missing")
        return hint(**given)
    expected = {tuple: list, list: list, dict: dict}.get(origin or hint)
    if expected is not None:
        if not isinstance(value, expected):
            raise _wrong(source, where, value, "a list" if expected is list else "an object")
        if origin is dict:
            return {
                k: from_plain(get_args(hint)[1], v, source, f"{where}.{k}")
                for k, v in value.items()
            }
        if origin in (tuple, list):
            items = [
                from_plain(get_args(hint)[0], v, source, f"{where}[{i}]")
                for i, v in enumerate(value)
            ]
            return tuple(items) if origin is tuple else items
        return value
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if hint in (int, str, bool) and type(value) is hint:
        return value
    if hint is object:
        return value
    raise _wrong(source, where, value, f"a {getattr(hint, '__name__', hint)}")


def _wrong(source: str, where: str, value: Any, expected: str) -> WashoutError:
    field = where or "the result"
    return WashoutError(f"{source}: {field} = {value!r:.60}: expected {expected}")
