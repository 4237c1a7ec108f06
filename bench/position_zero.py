"""washout makes no order effect of its own: identical no-op tests, the same wall at every
position of a run.

Goal: K identical tests running `true` (the shortest trial there is, so
anything washout does around a trial shows), >= 100 runs per order, on this machine and
on an SSH worker (a real sshd on loopback, as tests/sshd.py starts it): the median wall at
position 0 within 1% of the later positions' (pooled), and `washout analyze` finds no
evidence of an order effect (no test significant).

Each setting is one `washout run` of the real CLI into a fresh store. Positions are
compared within the same runs (every run has one trial at each position, interleaved in
time), so the machine's other load mostly cancels: the table gives the median per
position over every run, the ratio of position 0 to each later position and to all of them
pooled, and the median over runs of the within-run ratio (position 0 / mean of the
others), the figure least moved by load that changes from run to run. `ctl` is the same
ratio between two later positions, where there is nothing to find: the noise floor (about
1% on a shared 2-core VM, which is why the goal pools the later positions).

Run under `chrt -f 1` (SCHED_FIFO; root or CAP_SYS_NICE), washout, its trials and the sshd
started here inherit it: the processes of other users of a shared machine then cannot
preempt a trial, and what remains is washout's own doing. Without it, on a machine loaded
beyond its cores, a trial's wall includes the scheduler's delay in waking the controller
(and, over SSH, the worker's shell), which grows with their recent CPU use. The header
says which policy ran; quote it with the figures.

``--load`` runs the goal's settings itself, started before the first setting and stopped
(with everything they started) when the benchmark ends, however it ends: ``quiet`` (none),
``hogs`` (two CPU hogs, a busy loop each) or ``mixed`` (the two CPU hogs, an I/O hog writing
and fsyncing a file in a temporary directory, and a loop starting ``true`` processes).
``--against WASHOUT`` runs every setting also with another washout (e.g. main's checkout:
``/path/to/main/.venv/bin/washout``), in turn with this one (A B A B), so a change is
measured side by side under the same load.

Run: [chrt -f 1] .venv/bin/python bench/position_zero.py [--runs 100] [--tests 3]
     [--where local ssh] [--repeat 1] [--load quiet|hogs|mixed] [--against WASHOUT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))
from _common import WASHOUT, header, load, verdict  # noqa: E402

GOAL = 0.01
"""Position 0's median within 1% of the later positions' (pooled)."""


def spec_text(tests: int, runs: int, worker: str = "") -> str:
    lines = ["[experiment]", 'name = "position-zero"', f"runs = {runs}", "seed = 14", ""]
    for i in range(tests):
        lines += ["[[test]]", f'name = "t{i}"', 'command = "true"', ""]
    return "\n".join(lines) + worker


HOGS = {
    "cpu": "while :; do :; done",
    "io": 'while :; do dd if=/dev/zero of="$1/io" bs=64k count=64 conv=fsync 2>/dev/null; done',
    "spawn": "while :; do /bin/true; done",
}
"""The load's processes, each a shell loop given the load's temporary directory."""
LOADS = {"quiet": [], "hogs": ["cpu", "cpu"], "mixed": ["cpu", "cpu", "io", "spawn"]}
"""The goal's settings: which of HOGS each starts."""


@contextlib.contextmanager
def background_load(kind: str, work: Path) -> Iterator[None]:
    """The ``kind`` of load running meanwhile: each hog in a session of its own, its whole
    group killed at the end, however the benchmark ends (SIGTERM included)."""
    hogs = [
        subprocess.Popen(
            ["/bin/sh", "-c", HOGS[name], "hog", str(work)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for name in LOADS[kind]
    ]

    def stop(*_: object) -> None:
        for hog in hogs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(hog.pid, signal.SIGKILL)
            hog.wait()
        hogs.clear()

    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        yield
    finally:
        stop()
        signal.signal(signal.SIGTERM, previous)


def run_washout(
    work: Path,
    name: str,
    text: str,
    env: dict[str, str] | None = None,
    washout: str = WASHOUT,
) -> Path:
    """One `washout run` (of ``washout``) into ``work/name.db``; returns the store."""
    spec, db = work / f"{name}.toml", work / f"{name}.db"
    spec.write_text(text)
    subprocess.run(
        [washout, "run", str(spec), "--db", str(db), "--quiet"],
        check=True,
        stdout=subprocess.DEVNULL,
        env=env,
        cwd=work,
    )
    return db


def positions(db: Path) -> dict[tuple[str, int], dict[int, float]]:
    """Wall seconds of every ok trial, from the store's long format:
    {(worker, run): {position: wall}}."""
    from washout.data.store import Store

    store = Store.open(db)
    try:
        frame = store.long_frame()
    finally:
        store.close()
    frame = frame[(frame["metric"] == "wall") & (frame["status"] == "ok")]
    runs: dict[tuple[str, int], dict[int, float]] = {}
    for worker, run, position, wall in zip(
        frame["worker"], frame["run"], frame["position"], frame["value"]
    ):
        runs.setdefault((str(worker), int(run)), {})[int(position)] = float(wall)
    return runs


def bootstrap_interval(
    complete: list[dict[int, float]], k: int, draws: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95% percentile bootstrap interval (Efron & Tibshirani 1993, ch. 13) of position 0's
    median over the later positions' pooled median, resampling whole runs (a run's trials
    share its moment on the machine)."""
    import numpy as np

    first = np.array([r[0] for r in complete])
    later = np.array([[r[p] for p in range(1, k)] for r in complete])
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(complete), (draws, len(complete)))
    ratios = np.median(first[picks], axis=1) / np.median(later[picks].reshape(draws, -1), axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


def analyze(db: Path) -> tuple[str, list[str], dict[str, int]]:
    """`washout analyze`'s verdict, the significant tests and each test's CI case."""
    out = subprocess.run(
        [WASHOUT, "analyze", str(db), "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result = json.loads(out)["order"]
    rows = result["tests"]
    return (
        result["verdict"],
        [r["test"] for r in rows if r["significant"]],
        {r["test"]: r["ci_case"] for r in rows},
    )


def report(label: str, db: Path) -> bool:
    """Print one setting's figures; whether both goals hold."""
    runs = positions(db)
    k = max(len(r) for r in runs.values())
    by_position = {p: statistics.median(r[p] for r in runs.values() if p in r) for p in range(k)}
    later = statistics.median(w for r in runs.values() for p, w in r.items() if p > 0)
    complete = [r for r in runs.values() if len(r) == k]
    within = statistics.median(r[0] / statistics.mean(r[p] for p in range(1, k)) for r in complete)
    control = statistics.median(r[1] / r[k - 1] for r in complete) if k > 2 else float("nan")
    off = abs(by_position[0] / later - 1)
    verdict_text, significant, cases = analyze(db)
    print(f"\n{label}: {len(runs)} runs, {sum(len(r) for r in runs.values())} trials")
    print("| position | " + " | ".join(str(p) for p in range(k)) + " | later pooled |")
    print("|---" * (k + 2) + "|")
    print(
        "| median wall | "
        + " | ".join(f"{by_position[p] * 1e3:.4f} ms" for p in range(k))
        + f" | {later * 1e3:.4f} ms |"
    )
    print(
        "| position 0 / this | "
        + " | ".join(f"{by_position[0] / by_position[p]:.4f}" for p in range(k))
        + f" | {by_position[0] / later:.4f} |"
    )
    low, high = bootstrap_interval(complete, k)
    print(
        f"position 0 / later pooled: {by_position[0] / later:.4f}, 95% bootstrap interval "
        f"over runs {low:.4f}-{high:.4f}"
    )
    print(
        f"within-run ratio, position 0 / mean of the others (median over runs): {within:.4f};"
        f" ctl, position 1 / position {k - 1}: {control:.4f}"
    )
    print(
        f"washout analyze: verdict {verdict_text}, significant: {significant or 'none'}; "
        f"CI cases {cases}"
    )
    ok_median = off <= GOAL
    ok_analyze = not significant
    print(
        f"goal position 0 within 1% of the later positions: {off * 100:.2f}%  {verdict(ok_median)}"
    )
    print(f"goal no evidence from washout analyze: {verdict(ok_analyze)}")
    return ok_median and ok_analyze


def ssh_setting(work: Path, tests: int, runs: int, name: str, washout: str = WASHOUT) -> Path:
    from sshd import SshdFarm

    home = work / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(home)}  # no ~/.ssh/config of the user's
    env.pop("SSH_AUTH_SOCK", None)
    (work / f"sshd-{name}").mkdir()
    farm = SshdFarm(work / f"sshd-{name}")
    try:
        (server,) = farm.start(1)
        worker = server.worker_toml("w", farm.known_hosts)
        return run_washout(work, name, spec_text(tests, runs, worker), env, washout)
    finally:
        farm.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="runs per order kind")
    parser.add_argument("--tests", type=int, default=3)
    parser.add_argument("--where", nargs="+", default=["local", "ssh"], choices=["local", "ssh"])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--load", choices=sorted(LOADS), default="quiet")
    parser.add_argument("--against", help="another washout, run in turn with this one")
    args = parser.parse_args()
    header("Position 0 against later positions, identical no-op tests (bench/position_zero.py)")
    print(
        f"{args.tests} tests of `true`, {args.runs} runs per order; scheduling: "
        f"{'SCHED_FIFO (chrt -f)' if os.sched_getscheduler(0) == os.SCHED_FIFO else 'normal'}"
        f"; load started here: {args.load} ({', '.join(LOADS[args.load]) or 'none'})"
    )
    washouts = {"this": WASHOUT, **({"against": args.against} if args.against else {})}
    results = []
    with (
        tempfile.TemporaryDirectory(prefix="washout-bench-") as tmp,
        background_load(args.load, Path(tmp)),
    ):
        work = Path(tmp)
        for i in range(args.repeat):
            for where in args.where:
                for which, washout in washouts.items():
                    name = f"{where}-{which}-{i}"
                    if where == "local":
                        text = spec_text(args.tests, args.runs)
                        db = run_washout(work, name, text, washout=washout)
                    else:
                        db = ssh_setting(work, args.tests, args.runs, name, washout)
                    label = f"{where}, {which} ({washout}), repeat {i + 1}"
                    label += f", load started: {args.load}"
                    results.append(report(f"{label} (load average {load()})", db))
    print(
        f"\nall goals met in {sum(results)} of {len(results)} settings; load average: "
        f"{load()} (at end)"
    )


if __name__ == "__main__":
    main()
