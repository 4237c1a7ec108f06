"""``regex = '...(?P<value>...)...'``: the named group ``value`` of a pattern's last match,
found within a time budget."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import field_validator

from washout.harness.fields import StrictModel
from washout.harness.metrics.base import MetricError, Text, to_float

REGEX_BUDGET = 2.0
"""Seconds a metric regex may take on one output (a linear pattern reads 16 MiB in a
fraction of that)."""


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> Any:
    """A metric's regex, compiled once by the ``regex`` package (Python's ``re`` syntax,
    with a deadline a match can be given), each line a line (``^``/``$`` at line breaks).
    ValueError if it does not compile."""
    import regex  # tens of milliseconds: imported only where a spec has a regex

    try:
        return regex.compile(pattern, regex.MULTILINE)
    except (regex.error, RecursionError, OverflowError) as err:
        raise ValueError(f"not a valid regular expression: {err}") from None


def regex_value(text: str, pattern: str, where: str = "stdout", cut: bool = False) -> float:
    """The named group ``value`` of the last match of ``pattern``, found within
    :data:`REGEX_BUDGET` seconds.

    The matcher is the ``regex`` package's (Python's ``re`` syntax and matching, plus a
    deadline checked inside the matcher): a pattern that backtracks catastrophically
    (``(1|11)+2`` on 40 ones) fails the metric with a reason instead of holding the engine,
    and so its signals, for ever. Of a ``cut`` text the first line is the end of a longer
    one, so it is not read.
    """
    if cut:
        text = text[text.find("\n") + 1 :] if "\n" in text else ""
    try:
        matches = list(compile_regex(pattern).finditer(text, timeout=REGEX_BUDGET))
    except TimeoutError:
        raise MetricError(
            f"regex {pattern!r} ran past its {REGEX_BUDGET:g} s budget on {where}"
        ) from None
    if not matches:
        raise MetricError(f"regex {pattern!r} does not match {where}")
    value = matches[-1].group("value")
    if value is None:
        raise MetricError(f"regex {pattern!r}: group 'value' did not take part in the match")
    return to_float(value, f"regex group 'value' in {where}")


class RegexKeys(StrictModel):
    regex: str | None = None
    """A pattern with a named group ``value``; its last match counts."""

    @field_validator("regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value is not None and "value" not in compile_regex(value).groupindex:
            raise ValueError("the regex needs a named group (?P<value>...)")
        return value


@dataclass(frozen=True)
class Regex:
    """The parser of ``regex = '...'``: :func:`regex_value`."""

    pattern: str
    key: ClassVar[str] = "regex"

    @classmethod
    def of(cls, keys: RegexKeys) -> Regex:
        return cls(str(keys.regex))

    def read(self, text: Text) -> float:
        return regex_value(text.text, self.pattern, text.where, text.cut)
