"""The examples' READMEs show what washout prints today: every README line
"`washout analyze docs/examples/NAME.csv`" is followed by a block whose verdict and order
table (header and rows) are what the analysis of that recorded CSV renders now. The tables
depend on the data alone (no timing, no machine), so a change of the analysis or of its
table fails here until the READMEs are re-rendered."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

from washout.analysis.compute import analyze
from washout.analysis.result import Options
from washout.report.render import Settings, renderer

ANALYZE_LINE = re.compile(r"`washout analyze (docs/examples/[\w.-]+\.csv)`")
FENCE = re.compile(r"^\s*```")

# Every example whose README pastes the analysis of a recorded CSV: the guard cannot pass
# by finding nothing.
EXPECTED = {
    "examples/numpy/README.md": ["docs/examples/numpy.csv"],
    "examples/pagecache/README.md": [
        "docs/examples/pagecache-keep.csv",
        "docs/examples/pagecache-drop.csv",
    ],
    "examples/redis/README.md": ["docs/examples/redis.csv", "docs/examples/redis-confirm.csv"],
    "examples/sysbench/README.md": ["docs/examples/sysbench.csv"],
}


def pasted_outputs(readme: Path) -> list[tuple[str, list[str]]]:
    """Each (CSV, the lines of the fenced block after its analyze line) in ``readme``."""
    lines = readme.read_text().splitlines()
    found = []
    for i, line in enumerate(lines):
        match = ANALYZE_LINE.search(line)
        if match is None:
            continue
        start = next(j for j in range(i + 1, len(lines)) if FENCE.match(lines[j]))
        end = next(j for j in range(start + 1, len(lines)) if FENCE.match(lines[j]))
        found.append((match.group(1), lines[start + 1 : end]))
    return found


def verdict_and_order_table(lines: list[str]) -> list[str]:
    """The verdict line and the order table (its header to its last row), right-stripped."""
    lines = [line.rstrip() for line in lines]
    header = next(i for i, line in enumerate(lines) if "n fixed / random" in line)
    end = next(i for i in range(header, len(lines)) if lines[i].startswith("Δ median %"))
    return [lines[0], *lines[header:end]]


@pytest.mark.parametrize("readme", sorted(EXPECTED))
def test_readme_shows_todays_analysis_of_its_recorded_trials(readme: str) -> None:
    pasted = pasted_outputs(ROOT / readme)
    assert [csv for csv, _ in pasted] == EXPECTED[readme]
    for csv, block in pasted:
        analysis = analyze(ROOT / csv, Options())
        printed = renderer("table")(analysis, Settings(width=None, color=False)).text
        assert verdict_and_order_table(block) == verdict_and_order_table(printed.splitlines()), (
            f"{readme}: re-render `washout analyze {csv}`"
        )
