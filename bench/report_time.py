"""A report of the redis example end to end: `washout report` in at most 3 s.

The source is the redis example's own trials (docs/examples/redis.csv, the long-format
export of the store examples/redis wrote: 8 tests x 4 metrics, 12 runs per order), so the
report has the same figures as the store's: 4 order figures, an overview of every trial per
metric, and a trials figure per flagged test (13 in all). Each run is a fresh process (wall from
fork to exit, CPU and peak RSS from wait4, its forked children included); a process that
only imports what a report needs (pandas, matplotlib, jinja2) is timed beside it, as the
floor no report can go under. The figures are drawn on every core the report may use
(washout.analysis.parallel), so the wall depends on the cores free: the script says how many
it had, and the load.

Run: .venv/bin/python bench/report_time.py [--runs 5] [--source FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, WASHOUT, fmt_runs, header, load, median, run_child, verdict  # noqa: E402

GOAL_S = 3.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each side")
    parser.add_argument("--source", type=Path, default=ROOT / "docs/examples/redis.csv")
    args = parser.parse_args()
    header("Report time (bench/report_time.py)")
    with tempfile.TemporaryDirectory(prefix="washout-report-") as tmp:
        out = Path(tmp) / "report.html"
        report = [WASHOUT, "report", str(args.source), "-o", str(out)]
        imports = [PYTHON, "-c", "import pandas, matplotlib.figure, jinja2"]
        run_child(report)  # warm the page cache
        figures = out.read_text(encoding="utf-8").count("<svg ")
        reports, floors = [], []
        for _ in range(args.runs):  # interleaved, so both sides see the same load
            reports.append(run_child(report))
            floors.append(run_child(imports))
    wall = median([r.wall for r in reports])
    print(f"source: {args.source} ({figures} figures)")
    print(f"usable cores: {len(os.sched_getaffinity(0))} (figures drawn on as many processes)")
    print()
    print("| side | wall | CPU user+sys (median) | peak RSS |")
    print("|---|---|---|---|")
    sides = (("`washout report SOURCE -o report.html`", reports), ("imports alone", floors))
    for name, runs in sides:
        print(
            f"| {name} | {fmt_runs([r.wall for r in runs])} | "
            f"{median([r.cpu for r in runs]):.2f} s | {max(r.max_rss_mb for r in runs):.0f} MB |"
        )
    print()
    print(f"goal wall <= {GOAL_S:.0f} s: {wall:.2f} s  {verdict(wall <= GOAL_S)}")
    above = wall - median([f.wall for f in floors])
    print(f"per figure above the imports: {above / figures:.3f} s")
    print(f"load average: {load()} (at end)")


if __name__ == "__main__":
    main()
