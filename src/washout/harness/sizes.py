"""Byte counts as people write them in a spec: ``65536``, ``"64KiB"``, ``"1MiB"``, ``"2MB"``."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
}
_PATTERN = re.compile(r"^\s*([0-9]+)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_size(value: object) -> int:
    """Bytes from a whole number or a string with a unit (KiB/MiB/GiB or kB/MB/GB); ValueError
    if neither or negative."""
    message = 'expected a size in bytes such as 65536, "64KiB" or "1MiB"'
    if isinstance(value, bool):
        raise ValueError(message)
    if isinstance(value, int):
        size = value
    elif isinstance(value, str) and (m := _PATTERN.match(value)) and m.group(2).lower() in _UNITS:
        size = int(m.group(1)) * _UNITS[m.group(2).lower()]
    else:
        raise ValueError(message)
    if size < 0:
        raise ValueError("a size cannot be negative")
    return size
