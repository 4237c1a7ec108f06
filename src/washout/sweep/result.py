"""What a sweep returns: frozen results carrying everything its summary and report show, so
neither has to fit anything again (``to_dict()`` gives the JSON of ``washout explore`` and
``sweep.json``)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

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
    """A significant term and its share of variance."""

    term: str
    share: float


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
class SweepResult:
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

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON; optional fields that do not apply are left out."""
        optional = {"r2_unmeasured", "directory", "r2_noise_ceiling", "stopped", "versus"}
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in optional and value is None:
                continue
            out[f.name] = _plain(value)
        return out

    def with_fields(self, **changes: Any) -> SweepResult:
        """A copy with some fields replaced (a runner adds its directory, a comparison its
        joint ranges)."""
        return replace(self, **changes)


def _plain(value: Any) -> Any:
    """Dataclasses, tuples and dicts as JSON-ready dicts and lists."""
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
