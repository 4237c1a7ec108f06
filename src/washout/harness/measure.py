"""Metric extraction from a trial's output: pure functions, one per source.

Each returns a finite float or raises :class:`MetricError` whose message is the reason the
store keeps for a failed trial ("no number in stdout", "json path a.b: no key 'b'", ...).
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

from washout.harness.spec import MetricSpec

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
"""A decimal number as a whole token: optional sign, digits with an optional fraction, an
optional exponent (``12``, ``-3.5``, ``.5``, ``1e6``). No thousands separators, units or
``inf``/``nan``."""
_ENCLOSING = "\"'([{<"
_TRAILING = "\"')]}>,;:."


class MetricError(Exception):
    """A metric could not be read from a trial's output."""


def _finite(value: float, what: str) -> float:
    if not math.isfinite(value):
        raise MetricError(f"{what} is {value}, not a finite number")
    return value


def _to_float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise MetricError(f"{what} is {type(value).__name__}, not a number")
    try:
        return _finite(float(value), what)
    except ValueError:
        raise MetricError(f"{what} = {str(value)[:40]!r} is not a number") from None


def last_number(text: str, where: str = "stdout") -> float:
    """The last whitespace-delimited token that is a number as a whole (:data:`NUMBER`),
    once enclosing quotes or brackets and a trailing ``,;:.`` are stripped, and of a
    ``name=value`` token its value: hyperfine users' ``| tail -1`` habit, built in.

    Tokens that merely contain digits are not numbers: ``1,234,567`` (thousands
    separators), ``2024-01-02`` (a date), ``v1.2.3`` (a version), ``12ms`` (a unit) are
    skipped, never read in part.
    """
    for line in reversed(text.splitlines()):
        for token in reversed(line.split()):
            word = token.rpartition("=")[2].lstrip(_ENCLOSING).rstrip(_TRAILING)
            if NUMBER.fullmatch(word):
                return _to_float(word, f"last number in {where}")
    raise MetricError(f"no number in {where}")


def json_value(text: str, path: str, where: str = "stdout") -> float:
    """The number at a dotted path (``a.b.0.c``, list indices as numbers) of a JSON document.

    Integers are read as floats (what a metric is), so a 5,000-digit integer is an
    infinite value, refused like any other, rather than Python's integer-size error; a
    document nested too deeply for the parser's recursion is refused with a reason. Its size
    is bounded by what is read: ``output_tail`` bytes of stdout, METRIC_FILE_LIMIT of a file.
    """
    try:
        data: Any = json.loads(text, parse_int=float)
    except json.JSONDecodeError as err:
        raise MetricError(
            f"{where} is not a JSON document ({err.msg} at line {err.lineno})"
        ) from None
    except RecursionError:
        raise MetricError(
            f"{where}: JSON nested deeper than washout reads (about "
            f"{sys.getrecursionlimit()} levels)"
        ) from None
    for key in filter(None, path.replace("[", ".").replace("]", "").split(".")):
        if (
            isinstance(data, list)
            and key.lstrip("-").isdigit()
            and -len(data) <= int(key) < len(data)
        ):
            data = data[int(key)]
        elif isinstance(data, dict) and key in data:
            data = data[key]
        else:
            raise MetricError(f"json path {path}: no {key!r} in {where}")
    return _to_float(data, f"json path {path}")


def regex_value(text: str, pattern: str, where: str = "stdout") -> float:
    """The named group ``value`` of the last match of ``pattern``."""
    matches = list(re.finditer(pattern, text, re.MULTILINE))
    if not matches:
        raise MetricError(f"regex {pattern!r} does not match {where}")
    value = matches[-1].group("value")
    if value is None:
        raise MetricError(f"regex {pattern!r}: group 'value' did not take part in the match")
    return _to_float(value, f"regex group 'value' in {where}")


def extract(spec: MetricSpec, *, stdout: bytes, wall: float, file_content: bytes | None) -> float:
    """The value of one metric of a trial, by its spec."""
    if spec.wall:
        return wall
    if spec.file is not None:
        if file_content is None:
            raise MetricError(f"file {spec.file} could not be read")
        text, where = file_content.decode("utf-8", errors="replace"), f"file {spec.file}"
    else:
        text, where = stdout.decode("utf-8", errors="replace"), "stdout"
    return parse(spec, text, where)


def parse(spec: MetricSpec, text: str, where: str) -> float:
    """``text`` read by the metric's parser: ``json``, ``regex``, else its last number."""
    if spec.json_path is not None:
        return json_value(text, spec.json_path, where)
    if spec.regex is not None:
        return regex_value(text, spec.regex, where)
    return last_number(text, where)
