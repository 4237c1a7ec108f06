"""Metric extraction from a trial's output: pure functions, one per source.

Each returns a finite float or raises :class:`MetricError` whose message is the reason the
store keeps for a failed trial ("no number in stdout", "json path a.b: no key 'b'", ...).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

from washout.harness.spec import MetricSpec, Spec, Test, compile_regex

REGEX_BUDGET = 2.0
"""Seconds a metric regex may take on one output (a linear pattern reads 16 MiB in a
fraction of that)."""

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
"""A decimal number as a whole token: optional sign, digits with an optional fraction, an
optional exponent (``12``, ``-3.5``, ``.5``, ``1e6``). No thousands separators, units or
``inf``/``nan``."""
GROUP_SEPARATORS = "\u00a0\u2009\u202f"
"""The no-break space, thin space and narrow no-break space: what groups digits by threes
where a locale's ``printf "%'d"`` (or the SI brochure, 9th ed., 5.4.4) writes
``1 234 567``; never a decimal marker, so a number grouped by them is read whole."""
GROUPED = re.compile(rf"[-+]?\d{{1,3}}(?:[{GROUP_SEPARATORS}]\d{{3}})+(?:\.\d*)?(?:[eE][-+]?\d+)?")
"""A number whose integer part is grouped by threes with :data:`GROUP_SEPARATORS`."""
NON_FINITE = re.compile(r"[-+]?(?:nan|inf|infinity)", re.IGNORECASE)
"""``nan``, ``inf``, ``-Infinity``...: a number token, but no finite value (refused)."""
TOKEN = re.compile(rf"(?:\S|(?<=\d)[{GROUP_SEPARATORS}](?=\d))+")
"""A whitespace-delimited token; a group separator between two digits does not end one."""
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


def last_number(text: str, where: str = "stdout", cut: bool = False) -> float:
    """The last whitespace-delimited token that is a number as a whole (:data:`NUMBER`, or
    grouped by threes with :data:`GROUP_SEPARATORS`), once enclosing quotes or brackets and
    a trailing ``,;:.`` are stripped, and of a ``name=value`` token its value: hyperfine
    users' ``| tail -1`` habit, built in.

    Tokens that merely contain digits are not numbers: ``1,234,567`` (thousands
    separators), ``2024-01-02`` (a date), ``v1.2.3`` (a version), ``12ms`` (a unit) are
    skipped, never read in part. A ``nan`` or ``inf`` token is a number without a finite
    value: as the last number it fails the metric with that reason, never skipped for an
    earlier one. Of a ``cut`` text (an output longer than the tail kept of it) the first
    token may be the end of a longer one, so it is not read.
    """
    if cut:
        first = TOKEN.match(text)
        text = text[first.end() :] if first else text
    for line in reversed(text.splitlines()):
        for token in reversed(TOKEN.findall(line)):
            word = token.rpartition("=")[2].lstrip(_ENCLOSING).rstrip(_TRAILING)
            if NUMBER.fullmatch(word) or NON_FINITE.fullmatch(word):
                return _to_float(word, f"last number in {where}")
            if GROUPED.fullmatch(word):
                digits = word.translate(dict.fromkeys(map(ord, GROUP_SEPARATORS)))
                return _to_float(digits, f"last number in {where}")
    raise MetricError(f"no number in {where}")


def json_value(text: str, path: str, where: str = "stdout", cut: bool = False) -> float:
    """The number at a dotted path (``a.b.0.c``, list indices as numbers) of a JSON document.

    A ``cut`` text has lost the document's start, so it is refused whatever its end parses
    to (a padded ``   12345`` cut to ``345`` would otherwise read 345).

    Integers are read as floats (what a metric is), so a 5,000-digit integer is an
    infinite value, refused like any other, rather than Python's integer-size error; a
    document nested too deeply for the parser's recursion is refused with a reason. Its size
    is bounded by what is read: ``output_tail`` bytes of stdout, METRIC_FILE_LIMIT of a file.
    """
    if cut:
        raise MetricError(f"{where} is not a whole JSON document (its start was cut)")
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


def regex_value(text: str, pattern: str, where: str = "stdout", cut: bool = False) -> float:
    """The named group ``value`` of the last match of ``pattern`` (each line a line:
    ``^`` and ``$`` match at line breaks), found within :data:`REGEX_BUDGET` seconds.

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
    return _to_float(value, f"regex group 'value' in {where}")


def extract(
    spec: MetricSpec,
    *,
    stdout: bytes,
    wall: float,
    file_content: bytes | None,
    stdout_cut: bool = False,
) -> float:
    """The value of one metric of a trial, by its spec (``stdout_cut``: the output was
    longer than the tail kept of it)."""
    if spec.wall:
        return wall
    if spec.file is not None:
        if file_content is None:
            raise MetricError(f"file {spec.file} could not be read")
        text, where = file_content.decode("utf-8", errors="replace"), f"file {spec.file}"
        return parse(spec, text, where)
    return parse(spec, stdout.decode("utf-8", errors="replace"), "stdout", stdout_cut)


def parse(spec: MetricSpec, text: str, where: str, cut: bool = False) -> float:
    """``text`` read by the metric's parser: ``json``, ``regex``, else its last number."""
    if spec.json_path is not None:
        return json_value(text, spec.json_path, where, cut)
    if spec.regex is not None:
        return regex_value(text, spec.regex, where, cut)
    return last_number(text, where, cut)


def files_removed_outside(spec: Spec, tests: list[Test]) -> list[str]:
    """The ``file`` metrics of a run on this machine that name an existing file outside
    their test's working directory, each said once: the file is removed before every trial
    (a value must come from the trial that wrote it), so ``validate`` warns of it. Workers
    elsewhere are not looked at: their files are not this machine's."""
    if spec.worker or spec.cluster or spec.allocate:
        return []
    said: dict[Path, str] = {}
    for test in tests:
        workdir = Path(test.cwd or ".").resolve()
        for name, m in test.metrics.items():
            if m.file is None:
                continue
            path = (workdir / m.file).resolve()
            if path not in said and os.path.lexists(path) and not path.is_relative_to(workdir):
                said[path] = (
                    f"test {test.name!r} metric {name!r}: file {m.file} exists outside the "
                    f"working directory ({workdir}); it is removed before every trial"
                )
    return list(said.values())
