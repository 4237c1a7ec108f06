"""Invisible while measuring: the controller's CPU during a sleeping trial, and its memory
over a long run.

Goals: washout's own CPU time during a 2-second sleeping trial at most 10 ms (no
polling loops), measured on the controller process and excluding its start-up; the
controller's memory flat over a 100,000-trial run.

1. CPU during a trial. The trial itself samples the controller (its parent, $PPID) just
   before and just after `sleep 2`: the on-CPU nanoseconds of every controller thread from
   /proc/PID/task/*/schedstat (nanosecond resolution; /proc/PID/stat's utime+stime in clock
   ticks is shown beside it). The difference is what washout spent while the trial slept:
   start-up, environment capture and the recording of other trials are outside it.
2. Memory over a long run. `washout run` of 100,000 trials of `true` (100 tests x 500 runs
   per order), progress bar on, RSS of the controller sampled every second from outside
   (psutil) together with the trials recorded so far (read from the store, which WAL lets us
   read while it is written). If the run does not finish within --budget seconds it is
   stopped with Ctrl-C (SIGINT: it stops at a trial boundary, as a user would) and the trend
   (least-squares slope of RSS against trials over the second half of the trials run) is
   extrapolated to 100,000 trials, saying so. Once every trial is recorded the controller
   analyzes the run for its summary; that phase's peak RSS is reported apart, since it is
   no longer measuring.

Run: .venv/bin/python bench/invisible.py [--budget 300]
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WASHOUT, header, load, verdict  # noqa: E402

SAMPLE = (
    'for f in /proc/$PPID/task/*/schedstat; do read -r ns rest < "$f"; '
    "t=$((t + ns)); done; read -r s < /proc/$PPID/stat; "
    'echo "$t $(echo "${s#*) }" | cut -d" " -f12-13)"'
)
"""Shell: print the controller's on-CPU ns (all threads) and its utime, stime in ticks."""


def cpu_during_sleep(work: Path, runs: int) -> list[tuple[float, float]]:
    """(schedstat ms, stat-ticks ms) of controller CPU during each `sleep 2` trial."""
    out = work / "samples"
    out.mkdir()
    command = f"t=0; {SAMPLE} > {out}/$$.before; sleep 2; t=0; {SAMPLE} > {out}/$$.after"
    spec = work / "sleep.toml"
    spec.write_text(
        f'[experiment]\nname = "sleep"\nruns = {runs}\nseed = 1\n\n'
        f"[[test]]\nname = \"sleep-a\"\ncommand = '{command}'\n\n"
        f"[[test]]\nname = \"sleep-b\"\ncommand = '{command}'\n"
    )
    subprocess.run(
        [WASHOUT, "run", str(spec), "--db", str(work / "sleep.db"), "--quiet"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    ticks_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
    results = []
    for before in sorted(out.glob("*.before")):
        b = before.read_text().split()
        a = before.with_suffix(".after").read_text().split()
        ns = int(a[0]) - int(b[0])
        ticks = (int(a[1]) + int(a[2])) - (int(b[1]) + int(b[2]))
        results.append((ns / 1e6, ticks * ticks_ms))
    return results


def trials_recorded(db: Path) -> int | None:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
        try:
            return conn.execute("SELECT count(*) FROM trial WHERE status != 'running'").fetchone()[
                0
            ]
        finally:
            conn.close()
    except sqlite3.Error:
        return None


def memory_over_run(work: Path, budget: float, tests: int, runs: int):
    """Samples (seconds, trials, RSS MB) of a long run while trials remained, the peak RSS
    (MB) after the last trial was recorded (the run's summary analysis), and whether it
    finished."""
    import psutil

    spec = work / "long.toml"
    lines = ["[experiment]", 'name = "long"', f"runs = {runs}", "seed = 1", ""]
    for i in range(tests):
        lines += ["[[test]]", f'name = "t{i}"', 'command = "true"', ""]
    spec.write_text("\n".join(lines))
    db = work / "long.db"
    proc = subprocess.Popen(
        [WASHOUT, "run", str(spec), "--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ps = psutil.Process(proc.pid)
    samples = []
    summary_peak = 0.0
    t0 = time.monotonic()
    stopped = False
    while proc.poll() is None:
        time.sleep(1.0)
        try:
            if ps.status() == psutil.STATUS_ZOMBIE:
                break
            rss = ps.memory_info().rss / 2**20
        except psutil.NoSuchProcess:
            break
        done = trials_recorded(db) if db.exists() else None
        if done is not None and done >= 2 * tests * runs:  # all recorded: the summary
            summary_peak = max(summary_peak, rss)
        elif done is not None and not stopped:  # after Ctrl-C it prints its summary
            samples.append((time.monotonic() - t0, done, rss))
        if not stopped and time.monotonic() - t0 > budget:
            proc.send_signal(signal.SIGINT)
            stopped = True
    proc.wait()
    return samples, summary_peak, not stopped


def slope(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--budget",
        type=float,
        default=300.0,
        help="seconds the long run may take before it is stopped",
    )
    parser.add_argument("--sleep-runs", type=int, default=3, help="runs per order of `sleep 2`")
    args = parser.parse_args()
    header("Invisible while measuring (bench/invisible.py)")
    with tempfile.TemporaryDirectory(prefix="washout-bench-") as tmp:
        work = Path(tmp)
        cpu = cpu_during_sleep(work, args.sleep_runs)
        print()
        print(f"controller CPU during each 2 s sleeping trial ({len(cpu)} trials):")
        print("  schedstat (ns resolution): " + ", ".join(f"{c:.2f}" for c, _ in cpu) + " ms")
        print("  stat utime+stime (10 ms ticks): " + ", ".join(f"{t:.0f}" for _, t in cpu) + " ms")
        worst = max(c for c, _ in cpu)
        print(
            f"goal <= 10 ms of controller CPU during a 2 s trial: worst {worst:.2f} ms  "
            f"{verdict(worst <= 10.0)}"
        )
        sys.stdout.flush()

        tests, runs = 100, 500
        planned = 2 * tests * runs
        samples, summary_peak, finished = memory_over_run(work, args.budget, tests, runs)
    if not samples:
        print("no memory samples (the run ended before the store could be read)")
        return
    done = samples[-1][1]
    late = [x for x in samples if x[1] >= done / 2]  # second half of the trials
    per_1000 = slope([x[1] for x in late], [x[2] for x in late]) * 1000 if len(late) > 2 else 0.0
    elapsed = samples[-1][0]
    print()
    print(
        f"long run: {done:,} of {planned:,} trials of `true` in {elapsed:.0f} s "
        f"({'finished' if finished else f'stopped by SIGINT after the {args.budget:.0f} s budget'})"
    )
    print("| trials recorded | controller RSS |")
    print("|---|---|")
    step = max(1, len(samples) // 12)
    shown = samples[::step]
    if shown[-1] is not samples[-1]:
        shown.append(samples[-1])
    for _, n, rss in shown:
        print(f"| {n:,} | {rss:.1f} MB |")
    first = next(x for x in samples if x[1] > 0)
    print(
        f"RSS {first[2]:.1f} MB at {first[1]:,} trials, {late[0][2]:.1f} MB at {late[0][1]:,}, "
        f"{samples[-1][2]:.1f} MB at {done:,} (max {max(x[2] for x in samples):.1f} MB)"
    )
    print(
        "  (early growth is SQLite's page cache filling up to its bound, PRAGMA cache_size "
        "= 2 MB by default)"
    )
    print(f"slope over the second half of the trials: {per_1000 * 1024:.1f} KB per 1,000 trials")
    rest = max(planned - done, 0)
    growth = per_1000 * rest / 1000
    scope = (
        "measured"
        if finished
        else f"extrapolated from the second-half slope over the remaining {rest:,}"
    )
    print(f"growth over the remaining trials to {planned:,} ({scope}): {growth:+.1f} MB")
    flat = abs(growth) <= 5.0 and abs(late[-1][2] - late[0][2]) <= 5.0
    print(
        f"goal memory flat over 100,000 trials (second-half growth and extrapolation within 5 MB): "
        f"{verdict(flat)}" + ("" if finished else " (extrapolated)")
    )
    if summary_peak:
        print(
            f"after the last trial, the run's summary (analysis of all {planned:,} trials) "
            f"peaked at {summary_peak:.1f} MB RSS"
        )
    print(f"load average: {load()} (at end)")


if __name__ == "__main__":
    main()
