"""The ``json`` format: the analysis' ``to_dict()`` (docs/api.md, "The analysis as JSON"),
one comparison of the order analysis per line.

Readable, and written by json's C encoder: ``indent`` takes the pure-Python encoder, which
spent more time on 1,880 comparisons than the analysis itself (bench/analysis_scale.py).
Strict JSON: ``to_dict()`` has null where a number is undefined or beyond a float.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from washout.report.render import Rendered, Settings

if TYPE_CHECKING:
    from washout.analysis.result import Analysis


def render(analysis: Analysis, settings: Settings) -> Rendered:
    """The analysis as one JSON document (see the module doc)."""
    return Rendered(document(analysis.to_dict()) + "\n")


def document(data: dict[str, Any]) -> str:
    """``data`` as JSON: one top-level key per line, the order analysis' ``tests`` one per
    line."""
    order = data.get("order")
    lines = []
    for key, value in data.items():
        if key == "order" and order is not None:
            head = json.dumps({k: v for k, v in order.items() if k != "tests"}, allow_nan=False)
            tests = ",\n".join("  " + json.dumps(t, allow_nan=False) for t in order["tests"])
            body = f"\n{tests}\n" if tests else ""
            lines.append(f'"order": {head[:-1]}{", " if len(head) > 2 else ""}"tests": [{body}]}}')
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value, allow_nan=False)}")
    return "{" + ",\n".join(lines) + "}"
