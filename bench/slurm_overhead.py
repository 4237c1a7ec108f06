"""What a trial costs through Slurm: every command a job step (``srun --overlap``) into
the node's allocation.

Needs a running Slurm (scripts/services/slurm.sh starts a single-host one). Allocates one
node, then measures on it, for a no-op command ``true``:

1. the floor: ``srun --jobid=J --overlap -N1 -n1 true`` started by a subprocess, what any
   Slurm runner pays per step (srun's start-up, the controller's step creation, the
   node's slurmstepd);
2. washout's executor: ``SlurmExecutor.run("true")`` (the same plus the bash wrapper and
   the node-side clock), with the ``wall`` it records (measured on the node) beside it;
3. the whole engine: ``washout run`` of K no-op tests x R runs per order with
   ``[cluster] kind = "slurm"`` (allocation and release included once), per trial;
and, for comparison, ``LocalExecutor.run("true")`` on this machine, and the design washout
does not use: one long-lived step per node, a shell reading commands from srun's stdin.

"Overhead" is wall per trial minus the wall washout records for it.

Run: .venv/bin/python bench/slurm_overhead.py [--trials 40] [--tests 5 --runs 4]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WASHOUT, header, load, run_child  # noqa: E402

from washout.harness.executors.base import CommandOptions
from washout.harness.executors.local import LocalExecutor  # noqa: E402
from washout.harness.executors.slurm import SlurmExecutor, step_argv  # noqa: E402


def allocate(name: str) -> tuple[str, str]:
    """One node's job for the measurements: (job id, node)."""
    out = subprocess.run(
        ["salloc", "--no-shell", "-N1", f"--job-name={name}", "--time=30"],
        capture_output=True,
        text=True,
        check=True,
    )
    job = re.search(r"Granted job allocation (\d+)", out.stderr)
    assert job, out.stderr
    node = subprocess.run(
        ["squeue", "-h", "-j", job.group(1), "-o", "%N"], capture_output=True, text=True
    ).stdout.strip()
    return job.group(1), node


def floor(job: str, node: str, trials: int) -> float:
    """srun alone: wall per step."""
    argv = [*step_argv(job, node), "true"]
    t0 = time.perf_counter()
    for _ in range(trials):
        subprocess.run(argv, check=True)
    return (time.perf_counter() - t0) / trials


def long_lived_step(job: str, node: str, trials: int) -> float:
    """The alternative design: one step per node kept open, a shell on the node reading
    commands from srun's stdin and answering on stdout; wall per command."""
    loop = 'while read -r line; do eval "$line"; echo "done $?"; done'
    proc = subprocess.Popen(
        [*step_argv(job, node), "bash", "-c", loop],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("/bin/true\n")  # the step's own start-up stays out of the figure
    proc.stdout.readline()
    t0 = time.perf_counter()
    for _ in range(trials):
        proc.stdin.write("/bin/true\n")
        assert proc.stdout.readline() == "done 0\n"
    wall = (time.perf_counter() - t0) / trials
    proc.stdin.close()
    proc.wait()
    return wall


async def per_trial(executor: LocalExecutor | SlurmExecutor, trials: int) -> tuple[float, float]:
    """(wall per trial, median recorded wall) of ``executor.run("true")``."""
    recorded = []
    t0 = time.perf_counter()
    for _ in range(trials):
        result = await executor.run("true", CommandOptions(timeout=60))
        assert result.status == "ok", result
        recorded.append(result.duration)
    return (time.perf_counter() - t0) / trials, statistics.median(recorded)


def engine(work: Path, tests: int, runs: int) -> tuple[float, int]:
    """Wall per trial of a whole ``washout run`` through Slurm, and its trial count."""
    lines = [
        "[experiment]",
        'name = "slurm-bench"',
        f"runs = {runs}",
        "seed = 1",
        "[cluster]",
        'kind = "slurm"',
        'time_limit = "30m"',
    ]
    for i in range(tests):
        lines += ["[[test]]", f'name = "t{i}"', 'command = "true"']
    spec = work / "spec.toml"
    spec.write_text("\n".join(lines) + "\n")
    trials = tests * runs * 2
    child = run_child([WASHOUT, "run", str(spec), "--db", str(work / "x.db"), "-q"], cwd=work)
    return child.wall / trials, trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--tests", type=int, default=5)
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()
    if shutil.which("salloc") is None:
        sys.exit("needs Slurm: run scripts/services/slurm.sh")
    header("Per-trial cost through Slurm (one node, srun steps into its allocation)")
    print(f"load before: {load()}")
    name = "washout-bench-overhead"
    job, node = allocate(name)
    try:
        srun_wall = floor(job, node, args.trials)
        kept_wall = long_lived_step(job, node, args.trials)
        slurm_wall, slurm_recorded = asyncio.run(per_trial(SlurmExecutor(job, node), args.trials))
        local_wall, local_recorded = asyncio.run(per_trial(LocalExecutor(), args.trials))
    finally:
        subprocess.run(["scancel", f"--name={name}"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        engine_wall, engine_trials = engine(Path(tmp), args.tests, args.runs)
    print(f"load after: {load()}")
    rows = [
        ("0 a long-lived step fed commands (not used)", kept_wall, None),
        ("1 srun --overlap true (the floor)", srun_wall, None),
        ('2 SlurmExecutor.run("true")', slurm_wall, slurm_recorded),
        (f"3 washout run via [cluster], {engine_trials} trials", engine_wall, None),
        ('  LocalExecutor.run("true") (this machine)', local_wall, local_recorded),
    ]
    print(f"{'layer':50} {'wall/trial':>11} {'recorded wall':>14} {'overhead':>9}")
    for label, wall, recorded in rows:
        rec = f"{recorded * 1e3:11.2f} ms" if recorded is not None else " " * 14
        over = f"{(wall - recorded) * 1e3:6.1f} ms" if recorded is not None else ""
        print(f"{label:50} {wall * 1e3:8.1f} ms {rec} {over:>9}")


if __name__ == "__main__":
    main()
