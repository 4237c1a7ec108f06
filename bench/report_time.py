"""The time `washout report` takes and the size of what it writes, small and at paper scale.

Two goals:
- the redis example's own trials (docs/examples/redis.csv, the long-format export of the
  store examples/redis wrote: 8 tests x 4 metrics, 12 runs per order) reported in at most
  3 s; its report has the same figures as the store's (4 order figures, an overview of
  every trial per metric, and a trials figure per flagged test);
- with ``--paper-scale``, a dataset shaped like the ordering-trap paper's long-term data
  (1,880 configurations, 2.3M trials, generated as bench/analysis_scale.py generates it)
  reported in at most 30 s into a page of at most 10 MB: the report summarises across the
  tests and details only the most affected.

Each run is a fresh process (wall from fork to exit, CPU and peak RSS from wait4, its
forked children included); a process that only imports what a report needs (pandas,
matplotlib, jinja2) is timed beside it, interleaved, as the floor no report can go under.
The analysis and the figures run on every core the report may use
(washout.analysis.parallel), so the wall depends on the cores free: the script says how
many it had, and the load.

Run: .venv/bin/python bench/report_time.py [--runs 5] [--source FILE] [--paper-scale]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, ROOT, WASHOUT, fmt_runs, header, load, median, run_child, verdict  # noqa: E402

GOAL_S = 3.0
PAPER_GOAL_S = 30.0
PAPER_GOAL_MB = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each side")
    parser.add_argument("--source", type=Path, default=ROOT / "docs/examples/redis.csv")
    parser.add_argument(
        "--paper-scale",
        action="store_true",
        help="report a generated 1,880-configuration, 2.3M-trial dataset instead",
    )
    parser.add_argument("--keep", type=Path, help="with --paper-scale: generate into this dir")
    args = parser.parse_args()
    header("Report time (bench/report_time.py)")
    with tempfile.TemporaryDirectory(prefix="washout-report-") as tmp:
        source, goal_s, goal_mb = args.source, GOAL_S, None
        if args.paper_scale:
            work = args.keep or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            source, goal_s, goal_mb = work / "longterm.csv", PAPER_GOAL_S, PAPER_GOAL_MB
            if not source.exists():
                script = Path(__file__).resolve().parent / "analysis_scale.py"
                generate = [PYTHON, str(script), "--_generate", str(work), "--no-db"]
                subprocess.run(generate, check=True)
        out = Path(tmp) / "report.html"
        report = [WASHOUT, "report", str(source), "-o", str(out)]
        imports = [PYTHON, "-c", "import pandas, matplotlib.figure, jinja2"]
        run_child(report)  # warm the page cache
        figures = out.read_text(encoding="utf-8").count("<svg ")
        size_mb = out.stat().st_size / 1e6
        reports, floors = [], []
        for _ in range(args.runs):  # interleaved, so both sides see the same load
            reports.append(run_child(report))
            floors.append(run_child(imports))
    wall = median([r.wall for r in reports])
    print(f"source: {source} ({figures} figures, a page of {size_mb:.1f} MB)")
    print(f"usable cores: {len(os.sched_getaffinity(0))} (the analysis and figures on as many)")
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
    print(f"goal wall <= {goal_s:.0f} s: {wall:.2f} s  {verdict(wall <= goal_s)}")
    if goal_mb is not None:
        print(f"goal page <= {goal_mb:.0f} MB: {size_mb:.1f} MB  {verdict(size_mb <= goal_mb)}")
    above = wall - median([f.wall for f in floors])
    print(f"per figure above the imports: {above / max(figures, 1):.3f} s")
    print(f"load average: {load()} (at end)")


if __name__ == "__main__":
    main()
