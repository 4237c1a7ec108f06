"""Start-up: `washout --version` and `washout --help` in at most 0.3 s; and what a quick form
costs besides its trials.

Each command is run N times as a fresh process (wall from fork to exit, median); a bare
`python -c pass` from the same interpreter is shown beside it, and the heaviest imports of
`washout --help` (python -X importtime) say where the time goes. Heavy libraries (pandas,
scipy, matplotlib, asyncssh) must not be among them: commands import those inside.

The quick form's fixed cost: `washout run true /bin/true --runs 100` (200 trials of a no-op,
into a fresh store each time) as a whole, beside `hyperfine -N --runs 100 true /bin/true`
when hyperfine is installed: nearly all of washout's wall is its imports, the store and the
summary's analysis. Not a goal; shown so a change to what the summary imports is seen.

Run: .venv/bin/python bench/startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PYTHON, WASHOUT, fmt_runs, header, load, median, run_child, verdict  # noqa: E402

HEAVY = (
    "pandas",
    "numpy",
    "scipy",
    "matplotlib",
    "asyncssh",
    "sklearn",
    "statsmodels",
    "pydantic",
    "jinja2",
    "sqlite3",
)


def import_profile(args: list[str], top: int = 8) -> tuple[list[tuple[int, str]], list[str]]:
    """(the ``top`` slowest top-level imports in microseconds, heavy packages imported)."""
    code = "import sys; sys.argv = ['washout', *sys.argv[1:]]\nfrom washout.cli import main\nmain()"
    out = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", code, *args], capture_output=True, text=True
    )
    rows = []
    heavy = set()
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (p.strip() for p in line[len("import time:") :].split("|"))
        if not cumulative.isdigit():
            continue
        base = name.strip().split(".")[0]
        if base in HEAVY:
            heavy.add(base)
        if not name.startswith(" "):  # top-level import (not nested)
            rows.append((int(cumulative), name.strip()))
    rows.sort(reverse=True)
    return rows[:top], sorted(heavy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    header("Start-up (bench/startup.py)")
    plain = {**os.environ, "TYPER_USE_RICH": "0"}
    cases = [
        ("python -c pass", [PYTHON, "-c", "pass"], None),
        ("washout --version", [WASHOUT, "--version"], None),
        ("washout --help", [WASHOUT, "--help"], None),
        ("washout analyze --help", [WASHOUT, "analyze", "--help"], None),
        ("TYPER_USE_RICH=0 washout --help", [WASHOUT, "--help"], plain),
        ("TYPER_USE_RICH=0 washout analyze --help", [WASHOUT, "analyze", "--help"], plain),
    ]
    for _, argv, env in cases:  # warm the page cache
        run_child(argv, env=env)
    results: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    for _ in range(args.runs):
        for name, argv, env in cases:  # interleaved, so load changes hit every case alike
            child = run_child(argv, env=env)
            results[name].append(child.wall)
            cpu[name].append(child.cpu)
    print()
    print(
        f"| command | wall (median of {args.runs}) | CPU user+sys (median) | goal wall <= 0.3 s |"
    )
    print("|---|---|---|---|")
    for name, _, _ in cases:
        goal = "" if not name.startswith("washout") else verdict(median(results[name]) <= 0.3)
        print(f"| `{name}` | {fmt_runs(results[name])} | {median(cpu[name]):.3f} s | {goal} |")
    print(
        "(TYPER_USE_RICH=0: Typer's plain Click help instead of its rich panels, what "
        "`rich_markup_mode=None` on the app would give; shown for comparison)"
    )
    print()
    quick_form(args.runs)
    print()
    for what in (["--help"], ["--version"]):
        rows, heavy = import_profile(what)
        print(f"slowest top-level imports of `washout {' '.join(what)}` (cumulative):")
        for us, name in rows:
            print(f"  {us / 1000:7.1f} ms  {name}")
        print(f"  heavy libraries imported: {', '.join(heavy) if heavy else 'none'}")
    print(f"load average: {load()} (at end)")


def quick_form(runs: int) -> None:
    """The quick form's whole wall on 200 no-op trials, interleaved with hyperfine's."""
    commands = ["true", "/bin/true"]
    hyperfine = shutil.which("hyperfine")
    walls: dict[str, list[float]] = {"washout": [], "hyperfine": []}
    with tempfile.TemporaryDirectory() as work:
        for i in range(runs + 1):  # the first of each warms the page cache
            db = Path(work, f"q{i}.db")
            quick = [WASHOUT, "run", *commands, "--runs", "100", "--db", str(db), "--quiet"]
            child = run_child(quick, cwd=work)
            if i:
                walls["washout"].append(child.wall)
            if hyperfine:
                child = run_child([hyperfine, "-N", "--runs", "100", *commands], cwd=work)
                if i:
                    walls["hyperfine"].append(child.wall)
    print(f"| the quick form, 2 commands x 100 runs, whole (median of {runs}) | wall |")
    print("|---|---|")
    print(f"| `washout run true /bin/true --runs 100` | {fmt_runs(walls['washout'])} |")
    if walls["hyperfine"]:
        print(f"| `hyperfine -N --runs 100 true /bin/true` | {fmt_runs(walls['hyperfine'])} |")


if __name__ == "__main__":
    main()
