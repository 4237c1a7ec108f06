"""``stdout = "last-number"``: the last number a trial prints (hyperfine users' ``| tail
-1`` habit, built in); and the stdout source itself, the measured command's output read
by the metric's parser (``last-number``, ``json`` or ``regex``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Literal

from washout.harness.executors.base import Executor
from washout.harness.fields import StrictModel
from washout.harness.metrics.base import (
    OWN_OUTPUT,
    MetricError,
    Parser,
    Source,
    Text,
    Trial,
    to_float,
)

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


def last_number(text: str, where: str = "stdout", cut: bool = False) -> float:
    """The last whitespace-delimited token that is a number as a whole (:data:`NUMBER`, or
    grouped by threes with :data:`GROUP_SEPARATORS`), once enclosing quotes or brackets and
    a trailing ``,;:.`` are stripped, and of a ``name=value`` token its value.

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
                return to_float(word, f"last number in {where}")
            if GROUPED.fullmatch(word):
                digits = word.translate(dict.fromkeys(map(ord, GROUP_SEPARATORS)))
                return to_float(digits, f"last number in {where}")
    raise MetricError(f"no number in {where}")


@dataclass(frozen=True)
class LastNumber:
    """The parser of ``stdout = "last-number"``, and of a ``file`` or ``sample`` given no
    other: :func:`last_number`."""

    key: ClassVar[str] = "stdout"

    @classmethod
    def of(cls, keys: StdoutKeys) -> LastNumber:
        return cls()

    def read(self, text: Text) -> float:
        return last_number(text.text, text.where, text.cut)


class StdoutKeys(StrictModel):
    stdout: Literal["last-number"] | None = None
    """The last number printed; also how a ``file`` or a ``sample`` is read when no ``json``
    or ``regex`` is given."""


@dataclass(frozen=True)
class Stdout(Source):
    """The measured command's stdout (the kept tail of it), read by ``parser``."""

    parser: Parser
    elsewhere: ClassVar[str | None] = OWN_OUTPUT

    async def value(self, trial: Trial, side: Executor) -> float:
        """The parser over the kept stdout; a failure on a cut (or discarded) stdout says
        how much of it washout keeps."""
        result = trial.finished()
        try:
            return self.parser.read(Text.of(result.stdout, "stdout", result.stdout_cut))
        except MetricError as err:
            kept = trial.output_tail
            if result.stdout_cut or not kept:
                raise MetricError(
                    f"{err} (only the last {kept} bytes of stdout are kept: "
                    "[experiment] output_tail)"
                ) from None
            raise
