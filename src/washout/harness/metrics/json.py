"""``json = "dotted.path"``: the number at a path of a JSON document (stdout, a file or a
sample's reading)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field

from washout.harness.fields import StrictModel
from washout.harness.metrics.base import MetricError, Text, to_float


def json_value(text: str, path: str, where: str = "stdout", cut: bool = False) -> float:
    """The number at a dotted path (``a.b.0.c``, list indices as numbers) of a JSON document.

    Integers are read as floats (what a metric is), so a 5,000-digit integer is an
    infinite value, refused like any other, rather than Python's integer-size error; a
    document nested too deeply for the parser's recursion is refused with a reason. Its size
    is bounded by what is read: ``output_tail`` bytes of stdout, METRIC_FILE_LIMIT of a file.
    A ``cut`` text has lost the document's start, so it is refused whatever its end parses
    to (a padded ``   12345`` cut to ``345`` would otherwise read 345).
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
    return to_float(data, f"json path {path}")


class JsonKeys(StrictModel):
    json_path: str | None = Field(default=None, alias="json")
    """The dotted path of the number in a JSON document (``jobs.0.read.iops``)."""


@dataclass(frozen=True)
class JsonPath:
    """The parser of ``json = "path"``: :func:`json_value`."""

    path: str
    key: ClassVar[str] = "json"

    @classmethod
    def of(cls, keys: JsonKeys) -> JsonPath:
        return cls(str(keys.json_path))

    def read(self, text: Text) -> float:
        return json_value(text.text, self.path, text.where, text.cut)
