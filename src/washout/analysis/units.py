"""How a metric's values are written: times in hyperfine's units, bytes in binary units, other
metrics with SI prefixes; one function per kind, so every output writes a value alike.

hyperfine shows a time in the largest of s, ms and µs it reaches, with three decimals for
seconds and one otherwise (``1.020 s``, ``9.3 ms``); sizes are written as a spec writes them
(``12.3 MiB``). A metric washout knows nothing of (``rps``, ``iops``) has no unit: its values
get SI prefixes (``45.0 M``, from a thousand up) and four significant digits.
"""

from __future__ import annotations

import math

TIME_UNITS: tuple[tuple[str, float], ...] = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6))
"""hyperfine's units for a time, largest first: a value is shown in the largest unit it
reaches (so 0.0093 s is 9.3 ms)."""
SECOND_METRICS: tuple[str, ...] = ("wall", "user", "system")
BYTE_METRICS: tuple[str, ...] = ("max_rss",)
SI_PREFIXES: tuple[tuple[str, float], ...] = (
    ("T", 1e12),
    ("G", 1e9),
    ("M", 1e6),
    ("k", 1e3),
    ("", 1.0),
    ("m", 1e-3),
    ("µ", 1e-6),
    ("n", 1e-9),
)


TIME_UNIT_NAMES: dict[str, tuple[str, float]] = {
    "second": TIME_UNITS[0],
    "millisecond": TIME_UNITS[1],
    "microsecond": TIME_UNITS[2],
}
"""hyperfine's ``-u/--time-unit`` values and the unit each shows times in."""


def named_time_unit(name: str) -> tuple[str, float]:
    """The unit of hyperfine's ``--time-unit NAME``; a one-line error for another name."""
    from washout.errors import WashoutError

    found = TIME_UNIT_NAMES.get(name)
    if found is None:
        raise WashoutError(
            f"--time-unit = {name!r}: expected {', '.join(TIME_UNIT_NAMES)} (hyperfine's)"
        )
    return found


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit (name, size in seconds) to show ``seconds`` in."""
    for name, size in TIME_UNITS:
        if abs(seconds) >= size:
            return name, size
    return TIME_UNITS[-1]


def seconds(value: float | None, unit: tuple[str, float] | None = None) -> str:
    """A time with hyperfine's automatic unit (or the given one) and its decimals (three
    for seconds, one otherwise): ``1.020 s``, ``9.3 ms``; ``-`` if none."""
    if value is None or not math.isfinite(value):
        return "-"
    name, size = unit or time_unit(value)
    if abs(value / size) >= 1e6:  # a million seconds and more: no wall of digits
        return f"{value / size:.4g} {name}"
    return f"{value / size:.{3 if name == 's' else 1}f} {name}"


BINARY_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def byte_size(value: float | None) -> str:
    """Bytes in binary units, as sizes are written in a spec: ``12.3 MiB``; ``-`` if none.
    Three significant digits; a value that would round to a thousand of a unit (1,020 KiB)
    is written in the next one up (``0.996 MiB``), never as ``1.02e+03 KiB``."""
    if value is None or not math.isfinite(value):
        return "-"
    for i, (name, size) in enumerate(BINARY_UNITS):
        if abs(value) >= size:
            if abs(value) / size >= 999.5 and i > 0:
                name, size = BINARY_UNITS[i - 1]
            scaled = value / size
            return f"{scaled:.3g} {name}" if abs(scaled) < 999.5 else f"{scaled:.0f} {name}"
    return f"{value:.0f} B"


def si_prefix(value: float) -> tuple[str, float]:
    """The SI prefix (name, factor) to write ``value`` with: the largest it reaches."""
    for name, size in SI_PREFIXES:
        if abs(value) >= size:
            return name, size
    return SI_PREFIXES[-1] if value else ("", 1.0)


def number(value: float | None) -> str:
    """A value of a metric without a unit: four significant digits, with an SI prefix from
    a thousand up (``45.00 M``, ``3.142``, ``0.1130``); scientific below 0.001 (a milli
    without a unit reads as a unit); ``-`` if none."""
    if value is None or not math.isfinite(value):
        return "-"
    if value and abs(value) < 1e-3:
        return f"{value:.3e}"
    name, size = si_prefix(value) if abs(value) >= 1e3 else ("", 1.0)
    scaled = value / size
    digits = max(0, 3 - int(math.floor(math.log10(abs(scaled))))) if scaled else 0
    return f"{scaled:.{digits}f}" + (f" {name}" if name else "")


def metric_value(metric: str, value: float | None, unit: tuple[str, float] | None = None) -> str:
    """A value of ``metric``: a time with its unit, bytes for ``max_rss``, else
    :func:`number`."""
    if metric in SECOND_METRICS:
        return seconds(value, unit)
    if metric in BYTE_METRICS:
        return byte_size(value)
    return number(value)


def unit_name(metric: str) -> str:
    """The unit ``metric`` is measured in, for an axis: ``s``, ``B`` or none."""
    return "s" if metric in SECOND_METRICS else "B" if metric in BYTE_METRICS else ""
