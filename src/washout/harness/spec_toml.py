"""A spec written as TOML (a sweep's batch, a bisect's step), so that its store holds a spec
like any other washout store: ``washout status``, ``resume``, ``analyze``, ``report`` and
``export`` read it back with the same parser (``tomllib``) as a spec file.

Only what a parsed spec can hold is written (TOML 1.0: tables, arrays, strings, integers,
floats, booleans, dates and times); :func:`toml_text` is the inverse of ``tomllib.loads``
on such data (tests/test_sweep_batch_stores.py checks the round trip).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def toml_text(data: dict[str, Any]) -> str:
    """``data`` (a parsed spec) as TOML text: top-level scalars first, then one ``[table]``
    per dict and one ``[[table]]`` per element of a list of dicts, everything below them as
    inline values."""
    head: list[str] = []
    tables: list[str] = []
    for key, value in data.items():
        if isinstance(value, dict):
            tables += ["", f"[{_key(key)}]", *_entries(value)]
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for item in value:
                tables += ["", f"[[{_key(key)}]]", *_entries(item)]
        else:
            head.append(f"{_key(key)} = {_value(value)}")
    return "\n".join([*head, *tables]).lstrip("\n") + "\n"


def _entries(table: dict[str, Any]) -> list[str]:
    return [f"{_key(k)} = {_value(v)}" for k, v in table.items()]


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _string(text: str) -> str:
    """A TOML basic string: quote, backslash and control characters escaped (TOML 1.0 allows
    every other character as it is, tab included)."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")
