"""Durations as people write them in a spec: ``90``, ``"90s"``, ``"1.5m"``, ``"2h"``,
``"500ms"``."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|min|m|h|d)?\s*$")


def parse_duration(value: object) -> float:
    """Seconds from a number or a string with a unit; ValueError if neither or not > 0."""
    if isinstance(value, bool):
        raise ValueError('expected a duration such as 30, "30s", "5m" or "2h"')
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _PATTERN.match(value)):
        seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    else:
        raise ValueError('expected a duration such as 30, "30s", "5m" or "2h"')
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise ValueError("a duration must be a positive, finite number of seconds")
    return seconds
