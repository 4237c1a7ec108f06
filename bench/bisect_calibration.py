"""Calibration of ``washout bisect`` on generated real git repositories, beside ``git bisect run``.

Each repetition r generates a repository with examples/bisect/make_repo.py (seed r): a small
C program over 64 commits, one commit (drawn) making it 3% slower, one other commit (drawn,
not the culprit's parent) that does not compile, run-level noise 5% (log-normal), trial
noise 1%, and an order effect between builds: a trial right after a trial of a slower
build runs 1% slower. The noise is real to the program: the spec's reset writes the
machine's state for the next run (the next line of a seeded list: a speed factor and a
seed for the run's trials) into a file every trial of the run reads, and each trial draws
its own noise from that seed and a counter file; the order effect comes from a file naming
the last build that ran. Every method runs on the same repository with its own copy of
that state (the same stream of machine states), the program built with ``cc -O2``:

- **washout**: ``washout bisect examples/bisect/spec.toml --good good --bad bad`` (the
  real CLI; defaults: 10 runs a look up to 60, alpha 0.05, the margin half the change);
- **git bisect run, one measurement**: the usual practice: good and bad measured once
  each, the threshold half-way; each step builds the commit (exit 125, skip, when it does
  not compile), runs the reset and the program once, and says bad when above the
  threshold;
- **git bisect run, median of N** (N = ``--median-of``, default 10): the same with the
  median of N runs (each after the reset) for good, bad and every step.

A method is *right* when it names the planted commit alone, *wrong* when it names another
commit alone (a wrong one with confidence), otherwise it ended with a range (skips, steps
left unknown) or failed. Goals: washout right in >= 95% of repetitions and wrong in at most
alpha = 5% of them. Builds, trials (program runs) and wall time are per repetition.

Run: nice -n 10 .venv/bin/python bench/bisect_calibration.py [--reps 100] [--commits 64]
         [--out bisect-calibration.jsonl]  (appends one JSON line per repetition and skips
         repetitions already in --out, so a stopped run continues)
     .venv/bin/python bench/bisect_calibration.py --table bisect-calibration.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, ROOT, WASHOUT, header  # noqa: E402

MAKE_REPO = ROOT / "examples" / "bisect" / "make_repo.py"
SPEC = ROOT / "examples" / "bisect" / "spec.toml"
BUILD = "cc -O2 -o prog prog.c -lm"
METHODS = ("washout", "git bisect run (1 measurement)", "git bisect run (median of N)")

SCRIPT = r"""#!/bin/sh
# git bisect run: build (skip if it does not compile), measure, compare with the threshold.
echo build >> "$DEMO/builds"
cc -O2 -o prog prog.c -lm 2>/dev/null || exit 125
values=""
i=0
while [ "$i" -lt "$N" ]; do
  sh "$DEMO/machine.sh"
  values="$values $(./prog "$DEMO" | awk '{print $2}')"
  i=$((i + 1))
done
median=$(echo $values | tr ' ' '\n' | sort -g |
  awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}')
awk -v m="$median" -v t="$THRESHOLD" 'BEGIN { exit (m > t) }'   # 1 (bad) when slower
"""


def state_dir(demo: Path, name: str) -> Path:
    """A method's own copy of the machine's state (same seed: the same stream)."""
    where = demo / name
    where.mkdir()
    for file in ("machines", "machine.sh"):
        shutil.copy(demo / file, where / file)
    return where


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def count_lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def run_washout(demo: Path, seed: int) -> dict[str, object]:
    state = state_dir(demo, "state-washout")
    started = time.monotonic()
    proc = subprocess.run(
        [
            str(WASHOUT),
            "bisect",
            str(SPEC),
            "--repo",
            str(demo / "repo"),
            "--good",
            "good",
            "--bad",
            "bad",
            "--build",
            BUILD,
            "--dir",
            str(demo / "bisect"),
            "--seed",
            str(seed),
            "--quiet",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "BISECT_DEMO": str(state)},
        check=False,
    )
    wall = time.monotonic() - started
    if proc.returncode != 0:
        return {"named": None, "ending": "failed", "error": proc.stderr[-500:], "wall": wall}
    result = json.loads(proc.stdout)
    return {
        "named": result["culprit"],
        "ending": result["ending"],
        "range": [result["first"], result["last"]],
        "builds": result["cost"]["builds"],
        "trials": count_lines_or(state / "trials"),
        "wall": wall,
    }


def count_lines_or(path: Path) -> int:
    """The program's own trial counter (the number in DIR/trials)."""
    return int(path.read_text()) if path.exists() else 0


def measure(worktree: Path, state: Path, n: int) -> float:
    """Build ``worktree`` and the median of ``n`` runs, each after the reset."""
    subprocess.run(BUILD, shell=True, cwd=worktree, check=True, capture_output=True)
    with (state / "builds").open("a") as f:
        f.write("build\n")
    values = []
    for _ in range(n):
        subprocess.run(["sh", state / "machine.sh"], check=True)
        out = subprocess.run(
            ["./prog", str(state)], cwd=worktree, capture_output=True, text=True, check=True
        )
        values.append(float(out.stdout.split()[1]))
    return statistics.median(values)


def run_git_bisect(demo: Path, n: int, name: str) -> dict[str, object]:
    """``git bisect run`` with a median-of-``n`` threshold script in a clone of the repo."""
    state = state_dir(demo, f"state-{name}")
    clone = demo / f"clone-{name}"
    subprocess.run(["git", "clone", "-q", str(demo / "repo"), str(clone)], check=True)
    started = time.monotonic()
    git(clone, "checkout", "-q", "good")
    good = measure(clone, state, n)
    git(clone, "checkout", "-q", "bad")
    bad = measure(clone, state, n)
    script = demo / f"step-{name}.sh"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    env = {**os.environ, "DEMO": str(state), "N": str(n), "THRESHOLD": str((good + bad) / 2)}
    git(clone, "bisect", "start", "bad", "good")
    proc = subprocess.run(
        ["git", "-C", str(clone), "bisect", "run", str(script)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    wall = time.monotonic() - started
    named, ending = None, "range"
    for line in proc.stdout.splitlines():
        if line.endswith(" is the first bad commit"):
            named, ending = line.split()[0], "first-bad"
    if proc.returncode != 0 and named is None and "could be any of" not in proc.stdout:
        ending = "failed"
    return {
        "named": named,
        "ending": ending,
        "builds": count_lines(state / "builds"),
        "trials": count_lines_or(state / "trials"),
        "wall": wall,
    }


def repetition(rep: int, commits: int, median_of: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bisect-cal-") as tmp:
        demo = Path(tmp) / "demo"
        made = subprocess.run(
            [PYTHON, MAKE_REPO, demo, "--commits", str(commits), "--seed", str(rep)],
            capture_output=True,
            text=True,
            check=True,
        )
        culprit_revision = int(made.stdout.split("culprit revision ")[1].split(",")[0])
        culprit = git(demo / "repo", "log", "--format=%H", f"--grep=^revision {culprit_revision}$")
        out: dict[str, Any] = {"rep": rep, "culprit": culprit.strip()}
        out[METHODS[0]] = run_washout(demo, rep)
        out[METHODS[1]] = run_git_bisect(demo, 1, "one")
        out[METHODS[2]] = run_git_bisect(demo, median_of, "median")
        return out


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson's 95% interval for a proportion (Wilson 1927, JASA 22(158))."""
    if n == 0:
        return (math.nan, math.nan)
    z = 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def _share(k: int, n: int) -> str:
    """``k`` of ``n`` as a percentage with its Wilson interval."""
    lo, hi = wilson(k, n)
    return f"{100 * k / n:.0f}% ({k}/{n}; {100 * lo:.0f}-{100 * hi:.0f}%)"


def _mean(outcomes: list[dict[str, Any]], key: str) -> str:
    vals = [float(o[key]) for o in outcomes if key in o]
    return f"{statistics.fmean(vals):.1f}" if vals else "n/a"


def table(rows: list[dict[str, Any]], median_of: int) -> str:
    """The markdown table of RESULTS.md."""
    lines = [
        "| method | right commit | wrong commit named | range / failed | builds | trials | "
        "wall time |",
        "|---|---|---|---|---|---|---|",
    ]
    for method in METHODS:
        outcomes = [r[method] for r in rows]
        named = [(o["named"], r["culprit"]) for o, r in zip(outcomes, rows)]
        right = sum(1 for got, want in named if got == want)
        wrong = sum(1 for got, want in named if got not in (None, want))
        n = len(outcomes)
        name = method.replace("median of N", f"median of {median_of}")
        lines.append(
            f"| {name} | {_share(right, n)} | {_share(wrong, n)} | "
            f"{_share(n - right - wrong, n)} | {_mean(outcomes, 'builds')} | "
            f"{_mean(outcomes, 'trials')} | {_mean(outcomes, 'wall')} s |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--first", type=int, default=1, help="the first repetition's seed")
    parser.add_argument("--commits", type=int, default=64)
    parser.add_argument("--median-of", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("bisect-calibration.jsonl"))
    parser.add_argument("--table", type=Path, help="only print the table of a finished --out")
    args = parser.parse_args()
    if args.table:
        rows = [json.loads(line) for line in args.table.read_text().splitlines() if line]
        print(table(rows, args.median_of))
        return 0
    header("washout bisect calibration")
    done = set()
    if args.out.exists():
        done = {json.loads(line)["rep"] for line in args.out.read_text().splitlines() if line}
    for rep in range(args.first, args.first + args.reps):
        if rep in done:
            continue
        row = repetition(rep, args.commits, args.median_of)
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        brief = ", ".join(
            f"{m.split(' (')[0][:11]}{'' if '(' not in m else ' ' + m.split('(')[1][:6]}: "
            f"{'right' if row[m]['named'] == row['culprit'] else row[m]['ending']}"
            for m in METHODS
        )
        print(f"rep {rep}: {brief}", flush=True)
    rows = [json.loads(line) for line in args.out.read_text().splitlines() if line]
    print()
    print(table(rows, args.median_of))
    return 0


if __name__ == "__main__":
    sys.exit(main())
