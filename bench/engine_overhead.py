"""The engine's cost per trial and per run, side by side with hyperfine.

Goal: the marginal wall time per trial of `washout run` on a no-op command
(`true`) at most 1.5x hyperfine's mean time per run of `true` with `-N` (no shell).

Per trial: `washout run SPEC --quiet` with K tests of `true` and a fixed number of runs,
for two values of K; the slope (wall difference / trial difference) is the marginal cost
of one trial: start-up, environment capture (once per run) and the analysis at the end
cancel out. Per run: the same with a fixed K and two numbers of runs; the slope per run
minus K x the per-trial cost is the cost of a run (environment capture, reset bookkeeping).

The quick form (goal: marginal cost per trial <= 1.2x `hyperfine -N true` with one
command and <= 1.3x with two): `washout run true [/bin/true] --runs R --quiet` for two values of R
(R trials of each command, as hyperfine's `--runs`; the slope divides by the trials the
stores hold); the slope per trial includes every per-run cost (with one command each run
is one trial) and the summary's analysis of the extra trials, since that is what a
hyperfine user pays.

The engine starts a plain command such as `true` directly (anything with shell syntax with
`/bin/sh -c COMMAND`), and records each trial by one write(2) to the store's trial journal
(its finish together with the next trial's start), folded into SQLite at most every 0.1 s.
hyperfine is shown three ways: `-N true` (exec, no shell: the
goal's yardstick and exactly the process washout starts), `-N '/bin/sh -c true'` (what washout
starts for a command with shell syntax) and with its default shell (which subtracts the
shell's own start-up).

The floor (what any Python controller that records every trial durably pays):
a loop that starts `true` with ``os.posix_spawn`` and reaps it with ``os.wait4``, alone,
with one SQLite transaction per trial (WAL, ``synchronous=NORMAL``: the trial's row and its
three resource metrics) and with one write(2) of the same record as a line of JSON to an
append-only file (washout's trial journal), in this process. If the floor is above a goal,
no change inside washout's engine can meet it. The launcher's floor: a Python loop that
starts `true` through washout's own launcher (as every local trial starts), alone and with
the two health readings around each trial; what the quick form costs beyond it is the
engine's own bookkeeping per trial (records, the run's work, failure policy, progress).

``--quick-only``: only the quick form, `hyperfine -N --runs 2000 true`, the launcher's
floor and the batch floor (bench/batch_floor.c: the trials started back to back from a small
C process, the health counters read and a journal record written for each, no Python
between them: what a batch launcher pays before its Python work), interleaved (A B A B),
``--repeat`` times.

``--stored-wall`` (goal: the stored median wall of `true` and `sleep 0.01` within 0.1 ms of
`hyperfine -N`'s median): `washout run CMD --runs 300` and `hyperfine -N --runs 300 CMD`
in turn, ``--repeat`` times, each command's median compared: what washout stores as
``wall`` holds the command's own time, not the harness's. In turn with them, the same
without the launcher (``WASHOUT_LAUNCHER=off``: started from washout's own process).

Needs hyperfine: `apt-get install -y hyperfine` (Debian/Ubuntu) or `cargo install hyperfine`.

Run: .venv/bin/python bench/engine_overhead.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WASHOUT, header, load, median, run_child, verdict  # noqa: E402


def spec_text(tests: int, runs: int, command: str = "true") -> str:
    lines = ["[experiment]", 'name = "overhead"', f"runs = {runs}", "seed = 1", ""]
    for i in range(tests):
        lines += ["[[test]]", f'name = "t{i}"', f"command = {json.dumps(command)}", ""]
    return "\n".join(lines)


def washout_wall(work: Path, tests: int, runs: int, quiet: bool = True):  # -> ChildRun
    """Wall and CPU time of one `washout run` of ``tests`` x 2 x ``runs`` trials into a
    fresh DB (CPU: the controller and every process it started)."""
    spec = work / f"k{tests}-r{runs}.toml"
    spec.write_text(spec_text(tests, runs))
    db = work / f"k{tests}-r{runs}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    argv = [WASHOUT, "run", str(spec), "--db", str(db)] + (["--quiet"] if quiet else [])
    return run_child(argv, cwd=work)


QUICK_FORMS = {"one command": ["true"], "two commands": ["true", "/bin/true"]}
"""The quick form's two cases: `true` twice under two names (both exec'd directly)."""
QUICK_RUNS = (10, 3010)
"""The quick form's two sizes (``--runs``): the slope between them is the marginal cost per
trial. washout's start-up (~0.7 s) varied by 0.1-0.2 s from one run to the next here,
which over 1,000 trials (the sizes were 10 and 1010) moved a round's figure by
100-200 us a trial, a third of `true`'s own time; over 3,000 by a third of that."""
QUICK_LIMITS = {"one command": 1.2, "two commands": 1.3}
"""The goal per case: marginal cost per trial at most this times `hyperfine -N true`'s."""


def stored_trials(db: Path) -> int:
    """How many trials a finished run recorded: the slope's divisor, counted rather than
    derived from the options, so it stays right whatever ``--runs`` means."""
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM trial").fetchone()[0])


def quick_slope(work: Path, commands: list[str], runs: tuple[int, int]) -> tuple[float, float]:
    """Marginal wall and CPU per trial of `washout run CMD... --runs R --quiet` between
    the two values of R (each into a fresh DB); ``--runs R`` is hyperfine's: R trials of
    each command in all."""
    measured, counts = [], []
    for r in runs:
        db = work / f"quick-{len(commands)}-{r}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        measured.append(
            run_child(
                [WASHOUT, "run", *commands, "--runs", str(r), "--db", str(db), "--quiet"], cwd=work
            )
        )
        counts.append(stored_trials(db))
    trials = counts[1] - counts[0]
    return (
        (measured[1].wall - measured[0].wall) / trials,
        (measured[1].cpu - measured[0].cpu) / trials,
    )


def python_floor(trials: int, work: Path, record: str) -> float:
    """Wall per trial of the floor loop (module docstring): start `true` with posix_spawn,
    reap it with wait4, and record it (``record``): not at all (``none``), in one SQLite
    transaction (``commit``) or by one write(2) to an append-only file (``journal``)."""
    true = "/usr/bin/true" if Path("/usr/bin/true").exists() else "/bin/true"
    conn = None
    journal = None
    if record == "journal":
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        journal = os.open(work / "floor.journal", flags)
    if record == "commit":
        db = work / "floor.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("CREATE TABLE trial (id INTEGER PRIMARY KEY, status TEXT, duration REAL)")
        conn.execute("CREATE TABLE metric (trial_id INTEGER, name TEXT, value REAL)")
    t0 = time.perf_counter()
    for _ in range(trials):
        start = time.perf_counter()
        pid = os.posix_spawn(true, [true], os.environ)
        _, _, usage = os.wait4(pid, 0)
        duration = time.perf_counter() - start
        if conn is not None:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "INSERT INTO trial (status, duration) VALUES ('ok', ?)", (duration,)
            ).lastrowid
            conn.executemany(
                "INSERT INTO metric VALUES (?, ?, ?)",
                [(row, "user", usage.ru_utime), (row, "system", usage.ru_stime)]
                + [(row, "max_rss", usage.ru_maxrss * 1024.0)],
            )
            conn.execute("COMMIT")
        if journal is not None:
            line = [("ok", duration), ("user", usage.ru_utime), ("system", usage.ru_stime)]
            line.append(("max_rss", usage.ru_maxrss * 1024.0))
            os.write(journal, (json.dumps(line) + "\n").encode())
    wall = (time.perf_counter() - t0) / trials
    if conn is not None:
        conn.close()
    if journal is not None:
        os.close(journal)
    return wall


def launcher_floor(trials: int, health: bool) -> float:
    """Wall per trial of a Python loop that starts `true` through washout's own launcher
    (one request and its two replies, the command's stderr on a pipe, as every trial's),
    and with ``health`` the two health readings around it (``LocalHealth``, as the engine
    reads them): what any trial started from the launcher costs before washout's own
    bookkeeping (its records, the run's, the failure policy, the progress)."""
    from washout.harness.launcher.build import launcher_program
    from washout.harness.launcher.client import Launcher, environment_block
    from washout.harness.metrics.health import LocalHealth

    program = launcher_program()[0]
    if program is None:
        sys.exit("washout's launcher could not be built here (no C compiler?)")
    true = shutil.which("true") or "/bin/true"
    env = environment_block(dict(os.environ))
    cpus = os.sched_getaffinity(0)
    readings = LocalHealth("/") if health else None
    launcher = Launcher(program)
    try:
        t0 = time.perf_counter()
        for _ in range(trials):
            if readings is not None:
                readings.reading(cpus)
            r, w = os.pipe()
            launcher.start(true, (true,), env, (w,), None, None, health)
            os.close(w)
            launcher.finished()
            os.close(r)
            if readings is not None:
                readings.reading(cpus)
        return (time.perf_counter() - t0) / trials
    finally:
        launcher.close()
        if readings is not None:
            readings.close()


def hyperfine_mean(args: list[str], runs: int, work: Path) -> tuple[float, float]:
    """hyperfine's mean wall time per run and mean user + system CPU of the command."""
    out = work / "hf.json"
    subprocess.run(
        [
            "hyperfine",
            "--runs",
            str(runs),
            "--warmup",
            "100",
            "--style",
            "none",
            "--export-json",
            str(out),
            *args,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    result = json.loads(out.read_text())["results"][0]
    return result["mean"], result["user"] + result["system"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10, help="runs per order for the trial slope")
    parser.add_argument("--k", type=int, nargs=2, default=(10, 110), help="two test counts")
    parser.add_argument(
        "--quick-only", action="store_true", help="only the quick form and hyperfine -N true"
    )
    parser.add_argument(
        "--stored-wall", action="store_true", help="only the stored wall against hyperfine's"
    )
    args = parser.parse_args()
    if shutil.which("hyperfine") is None:
        sys.exit(
            "hyperfine not found: install it with `apt-get install -y hyperfine` "
            "(Debian/Ubuntu) or `cargo install hyperfine`, then re-run"
        )
    header("Engine overhead per trial and per run (bench/engine_overhead.py)")
    if args.quick_only:
        quick_only(args.repeat)
        return
    if args.stored_wall:
        stored_wall(args.repeat)
        return
    k1, k2 = args.k
    r = args.runs
    trials = (2 * r * k1, 2 * r * k2)
    with tempfile.TemporaryDirectory(prefix="washout-bench-") as tmp:
        work = Path(tmp)
        washout_wall(work, 2, 1)  # warm caches (imports, page cache)
        slopes, cpu_slopes, run_costs, loud_slopes = [], [], [], []
        hf_n, hf_sh, hf_shell, hf_n_cpu, hf_sh_cpu = [], [], [], [], []
        quick: dict[str, list[float]] = {label: [] for label in QUICK_FORMS}
        quick_cpu: dict[str, list[float]] = {label: [] for label in QUICK_FORMS}
        floor_bare: list[float] = []
        floor_commit: list[float] = []
        floor_journal: list[float] = []
        floor_launcher: list[float] = []
        r1, r2 = 5, 55
        for _ in range(args.repeat):
            t1, t2 = washout_wall(work, k1, r), washout_wall(work, k2, r)
            slope = (t2.wall - t1.wall) / (trials[1] - trials[0])
            slopes.append(slope)
            cpu_slopes.append((t2.cpu - t1.cpu) / (trials[1] - trials[0]))
            l1, l2 = washout_wall(work, k1, r, quiet=False), washout_wall(work, k2, r, quiet=False)
            loud_slopes.append((l2.wall - l1.wall) / (trials[1] - trials[0]))
            u1, u2 = washout_wall(work, k1, r1), washout_wall(work, k1, r2)
            per_run = (u2.wall - u1.wall) / (2 * (r2 - r1)) - k1 * slope
            run_costs.append(per_run)
            for label, commands in QUICK_FORMS.items():
                wall, cpu = quick_slope(work, commands, QUICK_RUNS)
                quick[label].append(wall)
                quick_cpu[label].append(cpu)
            for sink, cpu_sink, argv, n in (
                (hf_n, hf_n_cpu, ["-N", "true"], 2000),
                (hf_sh, hf_sh_cpu, ["-N", "/bin/sh -c true"], 2000),
                (hf_shell, [], ["true"], 1000),
            ):
                mean, cpu = hyperfine_mean(argv, n, work)
                sink.append(mean)
                cpu_sink.append(cpu)
            floor_bare.append(python_floor(2000, work, "none"))
            floor_commit.append(python_floor(2000, work, "commit"))
            floor_journal.append(python_floor(2000, work, "journal"))
            floor_launcher.append(launcher_floor(2000, health=True))
            print(
                f"  repeat: washout {slope * 1e3:.3f} ms/trial (progress bar on: "
                f"{loud_slopes[-1] * 1e3:.3f}), {per_run * 1e3:.2f} ms/run; hyperfine -N true "
                f"{hf_n[-1] * 1e3:.3f} ms, -N 'sh -c true' {hf_sh[-1] * 1e3:.3f} ms, "
                f"shell {hf_shell[-1] * 1e3:.3f} ms; quick form "
                + ", ".join(f"{label} {quick[label][-1] * 1e3:.3f} ms" for label in QUICK_FORMS)
                + f"; floor {floor_bare[-1] * 1e3:.3f} ms, with a commit "
                f"{floor_commit[-1] * 1e3:.3f} ms, with a journal write "
                f"{floor_journal[-1] * 1e3:.3f} ms; load {load()}",
                flush=True,
            )
    per_trial = median(slopes)
    print()
    print(f"| what | time per trial (median of {args.repeat}) | ratio to hyperfine -N true |")
    print("|---|---|---|")
    rows = [
        (
            f"`washout run` marginal per trial (slope {trials[0]} -> {trials[1]} trials, --quiet)",
            per_trial,
        ),
        (
            "`washout run` marginal per trial, progress bar on (stderr not a TTY)",
            median(loud_slopes),
        ),
        *(
            (
                f"quick form `washout run {' '.join(commands)} --runs R --quiet` marginal per "
                f"trial (slope R {QUICK_RUNS[0]} -> {QUICK_RUNS[1]}, per-run costs included)",
                median(quick[label]),
            )
            for label, commands in QUICK_FORMS.items()
        ),
        ("`hyperfine -N true`", median(hf_n)),
        (
            "`hyperfine -N '/bin/sh -c true'` (what washout starts for commands with shell syntax)",
            median(hf_sh),
        ),
        ("`hyperfine true` (default shell, shell start-up subtracted)", median(hf_shell)),
        ("floor: Python posix_spawn + wait4 loop", median(floor_bare)),
        ("floor with one SQLite commit per trial (durable recording)", median(floor_commit)),
        ("floor with one journal write(2) per trial (as durable)", median(floor_journal)),
        (
            "launcher floor: the loop through washout's launcher, two health readings a trial",
            median(floor_launcher),
        ),
    ]
    for name, t in rows:
        print(f"| {name} | {t * 1e3:.3f} ms | {t / median(hf_n):.2f}x |")
    print()
    print(
        f"CPU per trial (user + system, less sensitive to the machine's other load): "
        f"washout (controller + its children) {median(cpu_slopes) * 1e3:.3f} ms; the child "
        f"alone under hyperfine: `true` {median(hf_n_cpu) * 1e3:.3f} ms, `/bin/sh -c true` "
        f"{median(hf_sh_cpu) * 1e3:.3f} ms; so washout's own CPU per trial (it starts `true` "
        f"directly) is about {(median(cpu_slopes) - median(hf_n_cpu)) * 1e3:.3f} ms"
    )
    print(
        f"per run (environment capture + run bookkeeping, slope {2 * r1} -> {2 * r2} runs "
        f"of {k1} tests, minus {k1} trials): {median(run_costs) * 1e3:.2f} ms"
    )
    ratio = per_trial / median(hf_n)
    print(f"goal per trial <= 1.5x hyperfine -N true: {ratio:.2f}x  {verdict(ratio <= 1.5)}")
    for label, limit in QUICK_LIMITS.items():
        q = median(quick[label]) / median(hf_n)
        print(
            f"goal quick form, {label}, per trial <= {limit}x hyperfine -N true: {q:.2f}x  "
            f"{verdict(q <= limit)} (CPU per trial {median(quick_cpu[label]) * 1e3:.3f} ms)"
        )
    print(f"  against the same processes (-N '/bin/sh -c true'): {per_trial / median(hf_sh):.2f}x")
    print(
        f"floor (Python start + reap): {median(floor_bare) / median(hf_n):.2f}x hyperfine -N "
        f"true; with one journal write per trial {median(floor_journal) / median(hf_n):.2f}x, "
        f"with one commit per trial {median(floor_commit) / median(hf_n):.2f}x"
    )
    print(f"load average: {load()} (at end)")


WALL_COMMANDS = ("true", "sleep 0.01")
"""The commands whose stored wall is compared with hyperfine's (``--stored-wall``)."""


WITHOUT_LAUNCHER = {**os.environ, "WASHOUT_LAUNCHER": "off"}
"""washout's environment where it starts local commands itself (as without a compiler)."""


def stored_median_wall(
    work: Path, command: str, runs: int, env: dict[str, str] | None = None
) -> float:
    """The median ``wall`` washout stores for ``runs`` trials of ``command`` (quick form)."""
    db = work / "wall.db"
    for suffix in ("", "-wal", "-shm", "-trials"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    argv = [WASHOUT, "run", command, "--runs", str(runs), "--db", str(db), "--quiet"]
    run_child(argv, cwd=work, env=env)
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT m.value FROM metric m JOIN trial t ON t.id = m.trial_id"
            " WHERE m.name = 'wall' AND t.status = 'ok'"
        ).fetchall()
    return median([v for (v,) in rows])


def hyperfine_median(command: str, runs: int, work: Path) -> float:
    """hyperfine -N's median wall time of ``command`` over ``runs`` runs."""
    out = work / "hf.json"
    subprocess.run(
        ["hyperfine", "-N", "--runs", str(runs), "--warmup", "20", "--style", "none"]
        + ["--export-json", str(out), command],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return float(json.loads(out.read_text())["results"][0]["median"])


def stored_wall(repeat: int, runs: int = 300) -> None:
    """``--stored-wall``: the stored median wall against hyperfine -N's, A B A B (and, in
    turn with them, washout's without its launcher)."""
    diffs: dict[str, list[float]] = {command: [] for command in WALL_COMMANDS}
    without: dict[str, list[float]] = {command: [] for command in WALL_COMMANDS}
    with tempfile.TemporaryDirectory(prefix="washout-bench-") as tmp:
        work = Path(tmp)
        washout_wall(work, 2, 1)  # warm caches (imports, page cache)
        for _ in range(repeat):
            for command in WALL_COMMANDS:
                ours = stored_median_wall(work, command, runs)
                theirs = hyperfine_median(command, runs, work)
                own = stored_median_wall(work, command, runs, WITHOUT_LAUNCHER)
                diffs[command].append(ours - theirs)
                without[command].append(own - theirs)
                print(
                    f"  {command}: stored median {ours * 1e3:.3f} ms, hyperfine -N median "
                    f"{theirs * 1e3:.3f} ms, difference {(ours - theirs) * 1e3:+.3f} ms "
                    f"(without the launcher {(own - theirs) * 1e3:+.3f} ms); load {load()}",
                    flush=True,
                )
    for command, found in diffs.items():
        d = median(found)
        print(
            f"goal stored wall of {command!r} within 0.1 ms of hyperfine -N's: "
            f"{d * 1e3:+.3f} ms (median of {repeat})  {verdict(abs(d) <= 1e-4)}; without "
            f"the launcher {median(without[command]) * 1e3:+.3f} ms"
        )
    print(f"load average: {load()} (at end)")


def batch_floor(trials: int, work: Path) -> float:
    """Wall per trial of bench/batch_floor.c (built here with ``cc``): `true` started
    ``trials`` times back to back from a small C process, as the launcher starts a trial,
    with the health counters read around each and one journal record written after it:
    what a batch launcher (issue 31) pays before any Python work, for the yardstick's
    `hyperfine -N true`."""
    program = work / "batch_floor"
    if not program.exists():
        source = Path(__file__).resolve().parent / "batch_floor.c"
        subprocess.run(
            [os.environ.get("CC", "cc"), "-O2", "-o", str(program), str(source)], check=True
        )
    true = shutil.which("true") or "/bin/true"
    out = subprocess.run(
        [str(program), str(trials), "1", str(work / "batch.journal"), true],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout) / 1e3


def quick_only(repeat: int) -> None:
    """The quick form against `hyperfine -N --runs 2000 true`, A B A B, ``repeat`` times."""
    quick: dict[str, list[float]] = {label: [] for label in QUICK_FORMS}
    hf: list[float] = []
    floors: dict[bool, list[float]] = {False: [], True: []}
    batch: list[float] = []
    with tempfile.TemporaryDirectory(prefix="washout-bench-") as tmp:
        work = Path(tmp)
        washout_wall(work, 2, 1)  # warm caches (imports, page cache)
        for _ in range(repeat):
            for label, commands in QUICK_FORMS.items():
                quick[label].append(quick_slope(work, commands, QUICK_RUNS)[0])
                hf.append(hyperfine_mean(["-N", "true"], 2000, work)[0])
                print(
                    f"  {label}: quick form {quick[label][-1] * 1e3:.3f} ms/trial, hyperfine "
                    f"-N true {hf[-1] * 1e3:.3f} ms, ratio {quick[label][-1] / hf[-1]:.2f}x; "
                    f"load {load()}",
                    flush=True,
                )
            for health in floors:
                floors[health].append(launcher_floor(2000, health))
            batch.append(batch_floor(2000, work))
            print(
                f"  launcher floor {floors[False][-1] * 1e3:.3f} ms/trial, with the health "
                f"readings {floors[True][-1] * 1e3:.3f} ms ({floors[True][-1] / hf[-1]:.2f}x "
                f"the last hyperfine -N true); batch floor (C) {batch[-1] * 1e3:.3f} ms "
                f"({batch[-1] / hf[-1]:.2f}x); load {load()}",
                flush=True,
            )
    for label, limit in QUICK_LIMITS.items():
        q = median(quick[label]) / median(hf)
        print(
            f"goal quick form, {label}, per trial <= {limit}x hyperfine -N true: {q:.2f}x  "
            f"{verdict(q <= limit)} (median of {repeat}; hyperfine {median(hf) * 1e3:.3f} ms)"
        )
    bare, read = median(floors[False]), median(floors[True])
    print(
        f"launcher floor (a Python loop of start + finished through washout's launcher): "
        f"{bare / median(hf):.2f}x hyperfine -N true; with the two health readings per trial "
        f"{read / median(hf):.2f}x; the quick form's own work per trial beyond it "
        f"{(median(quick['one command']) - read) * 1e6:.0f} us (one command)"
    )
    print(
        f"batch floor (bench/batch_floor.c: the trials started back to back from C, health "
        f"counters and a journal record each): {median(batch) / median(hf):.2f}x hyperfine -N "
        f"true; a batch launcher's Python work per trial must stay within "
        f"{(1.2 * median(hf) - median(batch)) * 1e6:.0f} us for the one-command goal"
    )
    print(f"load average: {load()} (at end)")


if __name__ == "__main__":
    main()
