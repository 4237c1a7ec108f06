"""What sampled and perf metrics cost the measured command: its stored wall with each.

Goal: a metric sampled without an interval (a reading just before and just after the
command, none during it) leaves the command's median wall within 1% of the command with
no such metric; the cost of an interval and of ``perf stat`` is reported.

One `washout run` of the real CLI on this machine: identical tests running the same
CPU-bound shell loop (about 0.3 s), each with one kind of extra metric, in fixed and
random orders interleaved (so the machine's other load falls on all of them alike, and
each variant is compared with `plain` within the same run):
`plain` (wall only), `ends` (a `sample` command, no interval), `every-1s`, `every-0.1s`,
`every-0.01s` (the same command every interval), and `perf` (`perf stat -e task-clock`
around the command). The table gives each test's median wall and the median over runs of
its wall divided by `plain`'s in the same run.

Run: .venv/bin/python bench/sampling_overhead.py [--runs 15]
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WASHOUT, header, load, verdict  # noqa: E402

GOAL = 0.01
"""``ends`` within 1% of ``plain``."""
LOOP = "i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done"
SAMPLE = "cat /proc/loadavg"
VARIANTS = {
    "plain": "",
    "ends": f'[test.metrics.load]\nsample = {{ command = "{SAMPLE}" }}\n',
    **{
        f"every-{t}": (
            f'[test.metrics.load]\nsample = {{ command = "{SAMPLE}", interval = "{t}" }}\n'
        )
        for t in ("1s", "0.1s", "0.01s")
    },
    "perf": '[test.metrics.task_clock]\nperf = "task-clock"\n',
}


def spec_text(runs: int, perf: bool) -> str:
    lines = ['[experiment]\nname = "sampling-overhead"', f"runs = {runs}", "seed = 18\n"]
    for name, extra in VARIANTS.items():
        if name == "perf" and not perf:
            continue
        lines.append(f'[[test]]\nname = "{name}"\ncommand = "{LOOP}"\n[test.metrics.wall]\n')
        lines[-1] += "wall = true\n" + extra
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    header("sampled and perf metrics: cost to the measured command")
    perf = shutil.which("perf") is not None
    with tempfile.TemporaryDirectory() as tmp:
        spec, db = Path(tmp) / "spec.toml", Path(tmp) / "s.db"
        spec.write_text(spec_text(args.runs, perf))
        subprocess.run([WASHOUT, "run", str(spec), "--db", str(db), "--quiet"], check=True)
        out = subprocess.run(
            [WASHOUT, "export", str(db)], check=True, capture_output=True, text=True
        ).stdout
    frame = pd.read_csv(io.StringIO(out))
    walls = frame[(frame.metric == "wall") & (frame.status == "ok")]
    medians = walls.groupby("test")["value"].median()
    # within-run ratios: every run has each test once, so load that changes from run to
    # run falls on both sides of a ratio
    per_run = walls.pivot_table(index=["order", "run"], columns="test", values="value")
    ratios = per_run.div(per_run["plain"], axis=0).median()
    print(f"load average: {load()} (at end)")
    print("\n| test | median wall | median within-run ratio to plain |\n|---|---:|---:|")
    for name in VARIANTS:
        if name in medians:
            print(f"| {name} | {medians[name]:.4f} s | {ratios[name]:.3f}x |")
    ratio = ratios["ends"]
    met = verdict(abs(ratio - 1) <= GOAL)
    print(f"\ngoal: ends within {GOAL:.0%} of plain: {met} ({ratio:.3f}x)")
    if not perf:
        print("perf not installed (scripts/services/perf.sh): its row is missing")


if __name__ == "__main__":
    main()
