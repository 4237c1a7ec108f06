"""The comparison in hyperfine's export formats (``--export-json``, ``--export-markdown``,
``--export-csv``, ``--export-asciidoc``, ``--export-orgmode``): the same keys and columns,
so scripts written for hyperfine read them.

JSON: ``{"results": [{"command", "mean", "stddev", "median", "user", "system", "min",
"max", "times", "memory_usage_byte"?, "exit_codes", "parameters"?}]}`` in seconds and
bytes (hyperfine 1.20's keys; ``times``, ``memory_usage_byte`` (each trial's peak RSS,
where every trial has one) and ``exit_codes`` are those of the successful trials, so
every exit code is 0, and ``user``/``system`` are null where washout did not measure
them). CSV: hyperfine's columns
``command,mean,stddev,median,user,system,min,max`` plus ``parameter_NAME`` per parameter.
Markdown, AsciiDoc and Org (``--export-asciidoc``, ``--export-orgmode``): hyperfine's
table, Mean ± σ, Min, Max in one unit, and Relative: the order-safe ratio to the fastest
test (:mod:`washout.stats.compare`) with its CI; hyperfine writes a standard deviation after
``±`` there, which a ratio of paired runs does not have. Each laid out as hyperfine 1.15
writes it.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from washout.data.importers.hyperfine import CSV_FIELDS
from washout.data.outputs import write_output

if TYPE_CHECKING:
    from washout.analysis.result import Analysis
    from washout.stats.compare import Comparison

SORTS = ("auto", "command", "mean-time")
"""hyperfine's ``--sort`` methods."""

Parameters = Mapping[str, Mapping[str, Any]]
"""Per test name, its parameter values (``-P``/``-L`` scans or spec grids)."""


def check_sort(method: str) -> str:
    """``method`` if it is one of hyperfine's ``--sort`` methods, else a one-line error."""
    from washout.errors import WashoutError

    if method not in SORTS:
        raise WashoutError(f"--sort = {method!r}: expected {', '.join(SORTS)} (hyperfine's)")
    return method


def sorted_comparison(comparison: Comparison, method: str) -> Comparison:
    """The comparison in hyperfine's ``--sort`` order (src/options.rs, ``SortOrder``):
    ``auto``, as computed (the tables in the tests' order, the summary's ratios by size);
    ``command``, both in the tests' order; ``mean-time``, the tables by mean, the summary by
    size."""
    if check_sort(method) == "command":
        place = {s.test: i for i, s in enumerate(comparison.summaries)}
        ranked = sorted(comparison.rankings, key=lambda r: place.get(r.test, len(place)))
        return replace(comparison, rankings=tuple(ranked))
    if method == "mean-time":
        ordered = sorted(comparison.summaries, key=lambda s: s.mean)
        return replace(comparison, summaries=tuple(ordered))
    return comparison


def in_order(analysis: Analysis, method: str) -> Analysis:
    """``analysis`` with its comparison in ``--sort`` order (:func:`sorted_comparison`)."""
    if analysis.comparison is None:
        return analysis
    return replace(analysis, comparison=sorted_comparison(analysis.comparison, method))


def json_results(
    comparison: Comparison, commands: Mapping[str, str], parameters: Parameters
) -> str:
    """hyperfine's JSON export: one result per test, its command the test's command."""
    results = []
    for s in comparison.summaries:
        row: dict[str, Any] = {
            "command": commands.get(s.test, s.test),
            "mean": s.mean,
            "stddev": s.stddev,
            "median": s.median,
            "user": s.user,
            "system": s.system,
            "min": s.min,
            "max": s.max,
            "times": list(s.times),
            **(
                {"memory_usage_byte": [round(b) for b in s.max_rss_by_trial]}
                if s.max_rss_by_trial
                else {}
            ),
            "exit_codes": [0] * len(s.times),
        }
        if parameters.get(s.test):
            row["parameters"] = {k: str(v) for k, v in parameters[s.test].items()}
        results.append(row)
    return json.dumps({"results": results}, indent=2) + "\n"


def csv_results(comparison: Comparison, commands: Mapping[str, str], parameters: Parameters) -> str:
    """hyperfine's CSV export (a missing value is an empty field)."""
    names = sorted({k for p in parameters.values() for k in p})
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    fields = CSV_FIELDS[1:]  # after "command"
    writer.writerow([*CSV_FIELDS, *(f"parameter_{n}" for n in names)])
    for s in comparison.summaries:
        values = [getattr(s, f) for f in fields]
        writer.writerow(
            [
                commands.get(s.test, s.test),
                *("" if v is None else repr(v) for v in values),
                *(parameters.get(s.test, {}).get(n, "") for n in names),
            ]
        )
    return buffer.getvalue()


def _table(
    comparison: Comparison, commands: Mapping[str, str], unit: tuple[str, float] | None
) -> tuple[list[str], list[list[str]]]:
    """hyperfine's table of its Markdown, AsciiDoc and Org exports, as header and rows of
    cells: Command, Mean ± σ, Min, Max (one unit: ``unit``, as hyperfine's
    ``--time-unit``, else chosen by the smallest mean) and Relative (1.00 for the fastest,
    else the ratio and its CI)."""
    from washout.analysis.units import time_unit
    from washout.report.text import ratio_ci

    summaries = comparison.summaries
    timed = comparison.metric == "wall"
    if not timed or not summaries:
        unit = ("", 1.0)
    elif unit is None:
        unit = time_unit(min(s.mean for s in summaries))
    head = f" [{unit[0]}]" if timed else ""
    relative = {r.test: r for r in comparison.rankings}
    fastest = comparison.rankings[0].fastest if comparison.rankings else None
    rows = []
    for s in summaries:
        mean = f"{s.mean / unit[1]:.1f}"
        if s.stddev is not None:
            mean += f" ± {s.stddev / unit[1]:.1f}"
        if s.test == fastest:
            rel = "1.00"
        elif s.test in relative:
            r = relative[s.test]
            rel = f"{r.ratio:.2f} ({ratio_ci(r.ratio_ci, r.confidence, r.runs_for_ci)})"
        else:
            rel = ""
        command = commands.get(s.test, s.test)
        rows.append([command, mean, f"{s.min / unit[1]:.1f}", f"{s.max / unit[1]:.1f}", rel])
    return ["Command", f"Mean{head}", f"Min{head}", f"Max{head}", "Relative"], rows


def markdown_results(
    comparison: Comparison, commands: Mapping[str, str], unit: tuple[str, float] | None = None
) -> str:
    """hyperfine's Markdown table (:func:`_table`)."""
    head, rows = _table(comparison, commands, unit)
    lines = ["| " + " | ".join(head) + " |", "|:---|---:|---:|---:|---:|"]
    for command, *cells in rows:
        quoted = command.replace("|", "\\|")
        lines.append(f"| `{quoted}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def asciidoc_results(
    comparison: Comparison, commands: Mapping[str, str], unit: tuple[str, float] | None = None
) -> str:
    """hyperfine's AsciiDoc table (``--export-asciidoc``, :func:`_table`): one cell a line,
    a blank line between rows."""
    head, rows = _table(comparison, commands, unit)
    lines = ['[cols="<,>,>,>,>"]', "|==="] + [f"| {cell} " for cell in head]
    for command, *cells in rows:
        quoted = command.replace("|", "\\|")
        lines += ["", f"| `{quoted}` "] + [f"| {cell} " for cell in cells]
    return "\n".join([*lines, "|==="]) + "\n"


def orgmode_results(
    comparison: Comparison, commands: Mapping[str, str], unit: tuple[str, float] | None = None
) -> str:
    """hyperfine's Org table (``--export-orgmode``, :func:`_table`), its spacing kept."""
    head, rows = _table(comparison, commands, unit)

    def line(first: str, rest: list[str]) -> str:
        return f"| {first}  |" + "".join(f"  {cell} |" for cell in rest)

    lines = [line(head[0], head[1:]), "|--+--+--+--+--|"]
    for command, *cells in rows:
        quoted = command.replace("|", "\\vert{}")  # Org's entity for a bar in a cell
        lines.append(line(f"={quoted}=", cells))
    return "\n".join(lines) + "\n"


def write_exports(
    comparison: Comparison,
    commands: Mapping[str, str],
    parameters: Parameters,
    exports: Mapping[str, Path],
    unit: tuple[str, float] | None = None,
    sort: str = "auto",
) -> None:
    """Write the comparison to each ``{format: path}`` asked for (``json``, ``markdown``,
    ``csv``, ``asciidoc``, ``orgmode``; ``unit``: the tables', as hyperfine's
    ``--time-unit``; ``sort``: the tables' order, as hyperfine's ``--sort``, which leaves
    JSON and CSV in the tests' order); a file that cannot be written is a one-line error
    naming its option."""
    tables = sorted_comparison(comparison, sort)
    texts = {
        "json": lambda: json_results(comparison, commands, parameters),
        "csv": lambda: csv_results(comparison, commands, parameters),
        "markdown": lambda: markdown_results(tables, commands, unit),
        "asciidoc": lambda: asciidoc_results(tables, commands, unit),
        "orgmode": lambda: orgmode_results(tables, commands, unit),
    }
    for fmt, path in exports.items():
        write_output(path, texts[fmt](), option=f"--export-{fmt}")
