"""What one controller costs per trial when it drives many SSH workers at once.

Starts W real sshd servers on 127.0.0.1 (as the tests do: tests/sshd.py; needs
scripts/services/sshd.sh), then measures three layers, all W workers concurrently:

1. the floor: asyncssh's own ``conn.run("true")`` on a reused connection (one channel, the
   login shell's start-up, the command): what any SSH runner pays;
2. washout's executor: ``SSHExecutor.run("true")`` (a request to the worker's runner, a
   channel kept open from one command to the next, which runs it under ``timeout`` and
   the worker's launcher, timed by it; marker parsing), the same without the launcher
   (``WASHOUT_LAUNCHER=off`` at its connection: GNU time, the runner's clock, as on a
   worker without a compiler), and the same with the trial's health read around it (what
   every trial of the engine does unless ``[experiment] health = false``);
3. the whole engine: an experiment of K no-op tests x R runs per order on W workers
   (the whole capture once, the check before each run, which without provenance files
   takes the facts the runner read after the previous trial, SQLite writes, progress),
   via the library: over the whole session (connecting and the first capture included),
   and from the first trial's start to the last one's end (the steady state: trials, each
   run's environment check and the store's writes).

Layers 1 and 2 alternate round by round (a shared machine's changing load weighs on both
alike; compare their ratio). For each: controller CPU per trial (``time.process_time`` of
this process: asyncssh, the engine, SQLite; the sshd servers are separate processes) and
wall per trial per worker.
"Overhead" is wall per trial minus the trial's own duration as measured on the worker.

``--stored-wall`` measures instead what issue 31 asks of the stored wall: on one worker
(this machine, over loopback), ``true``, ``sleep 0.01`` and ``sleep 0.1`` each run by the
SSH executor, by the local executor and by the SSH executor without the launcher, in
turn (A B C A B C ...), ``--trials`` times each; the medians side by side, and whether
each SSH median is within 0.3 ms of the local one (the goal). Every side runs the command
in this process's locale (``LANG`` and ``LC_*`` passed as the test's environment): an SSH
session has no ``LANG`` of its own here, and ``sleep`` with ``LANG=C.UTF-8`` loads the
locale, 0.2-0.25 ms that ``hyperfine -N 'sleep 0.1'`` shows alike over SSH and locally,
which made the SSH wall look that much shorter than the local one.

Run: .venv/bin/python bench/ssh_overhead.py [--workers 8] [--trials 40] [--tests 5 --runs 4]
     .venv/bin/python bench/ssh_overhead.py --stored-wall [--trials 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))
import asyncssh  # noqa: E402
import pandas as pd  # noqa: E402
from _common import header, load  # noqa: E402
from sshd import SshdFarm  # noqa: E402

from washout.harness.engine import Experiment, execute  # noqa: E402
from washout.harness.executors.base import CommandOptions  # noqa: E402
from washout.harness.executors.local import LocalExecutor  # noqa: E402
from washout.harness.executors.ssh import SSHExecutor  # noqa: E402
from washout.harness.spec import WorkerSpec, parse_spec_text  # noqa: E402


def workers_of(farm: SshdFarm) -> list[WorkerSpec]:
    return [
        WorkerSpec(
            host="127.0.0.1",
            port=s.port,
            user=s.user,
            key=str(farm.client_key),
            known_hosts=str(farm.known_hosts),
            name=f"w{i}",
        )
        for i, s in enumerate(farm.servers)
    ]


Layer = tuple[float, float, float]
"""(wall per trial per worker, controller CPU per trial, median worker-side duration)"""
COMMANDS = ("true", "sleep 0.01", "sleep 0.1")
"""The commands whose stored wall over SSH must be within GOAL of the local executor's."""
GOAL = 0.3e-3
LOCALE = {k: v for k, v in os.environ.items() if k == "LANG" or k.startswith("LC_")}
"""This process's locale, given to every side's command (the module's docstring)."""


async def without_launcher(executors: list[SSHExecutor]) -> None:
    """Connect these executors as to workers without a launcher (GNU time, the runner's
    clock): ``WASHOUT_LAUNCHER=off`` while they connect."""
    os.environ["WASHOUT_LAUNCHER"] = "off"
    try:
        await asyncio.gather(*(e.connect() for e in executors))
    finally:
        del os.environ["WASHOUT_LAUNCHER"]


async def stored_walls(worker: WorkerSpec, trials: int) -> dict[str, list[list[float]]]:
    """Per command, the stored walls of its trials over SSH, locally and over SSH without
    the launcher, run in turn."""
    ssh, plain, here = SSHExecutor(worker), SSHExecutor(worker), LocalExecutor()
    await ssh.connect()
    await without_launcher([plain])
    assert ssh.link.launcher is not None, ssh.launcher_notes()
    walls: dict[str, list[list[float]]] = {c: [[], [], []] for c in COMMANDS}
    try:
        for command in COMMANDS:
            for _ in range(trials):
                for side, executor in zip(walls[command], (ssh, here, plain), strict=True):
                    options = CommandOptions(timeout=60, env=LOCALE)
                    result = await executor.run(command, options)
                    assert result.status == "ok", result
                    side.append(result.duration)
    finally:
        await asyncio.gather(ssh.close(), plain.close(), here.close())
    return walls


def report_stored_walls(farm: SshdFarm, trials: int, repeat: int) -> None:
    """Print the stored wall over SSH beside the local executor's, per repeat."""
    worker = workers_of(farm)[0]
    print(
        f"{'command':<12}{'repeat':>7}{'SSH':>11}{'local':>11}{'SSH - local':>13}"
        f"{'no launcher':>13}{'goal':>6}{'minimums: SSH - local':>23}{'no launcher':>13}"
    )
    for k in range(repeat):
        walls = asyncio.run(stored_walls(worker, trials))
        for command, sides in walls.items():
            ssh, here, plain = (statistics.median(side) * 1e3 for side in sides)
            low_ssh, low_here, low_plain = (min(side) * 1e3 for side in sides)
            met = "met" if abs(ssh - here) <= GOAL * 1e3 else "no"
            print(
                f"{command:<12}{k + 1:>7}{ssh:>8.3f} ms{here:>8.3f} ms{ssh - here:>+10.3f} ms"
                f"{plain:>10.3f} ms{met:>6}{low_ssh - low_here:>+20.3f} ms"
                f"{low_plain - low_here:>+10.3f} ms"
            )
    print(
        f"load average: {load()} (at end); medians (and minimums) of {trials} trials each, "
        "A B C in turn; the goal is judged on medians"
    )


async def channels(workers: list[WorkerSpec], trials: int) -> list[Layer]:
    """Layers 1, 2, 2b (no launcher, as on a worker without a compiler) and 2h (with the
    health readings), each on connections of its own, in rounds: all workers
    once through layer 1, then 2, then 2b, then 2h, so a load that changes during the run
    (a shared machine) weighs on each alike."""
    conns = await asyncio.gather(
        *(
            asyncssh.connect(
                w.host, port=w.port, username=w.user, client_keys=[w.key], known_hosts=w.known_hosts
            )
            for w in workers
        )
    )
    timed, untimed = [SSHExecutor(w) for w in workers], [SSHExecutor(w) for w in workers]
    healthy = [SSHExecutor(w) for w in workers]
    await asyncio.gather(*(e.connect() for e in timed + healthy))
    await without_launcher(untimed)
    durations: list[list[float]] = [[0.0], [], [], []]

    async def floor(i: int) -> None:
        await conns[i].run("true", check=True)

    def executor(
        pool: list[SSHExecutor], layer: int, health: str | None = None
    ) -> Callable[[int], Awaitable[None]]:
        async def one(i: int) -> None:
            result = await pool[i].run("true", CommandOptions(timeout=60, health=health))
            assert result.status == "ok", result
            durations[layer].append(result.duration)

        return one

    steps = (floor, executor(timed, 1), executor(untimed, 2), executor(healthy, 3, "/"))
    wall, cpu = [0.0] * 4, [0.0] * 4
    for _ in range(trials):
        for layer, step in enumerate(steps):
            c0, t0 = time.process_time(), time.perf_counter()
            await asyncio.gather(*(step(i) for i in range(len(workers))))
            wall[layer] += time.perf_counter() - t0
            cpu[layer] += time.process_time() - c0
    for conn in conns:
        conn.close()
    await asyncio.gather(*(e.close() for e in timed + untimed + healthy))
    n = trials * len(workers)
    return [(wall[k] / trials, cpu[k] / n, statistics.median(durations[k])) for k in range(4)]


def engine(
    farm: SshdFarm, work: Path, tests: int, runs: int, health: bool = True
) -> tuple[float, float, float, float, int]:
    """The engine: (wall per trial per worker, the same from the first trial's start to the
    last one's end, CPU per trial, median duration, trials)."""
    lines = ["[experiment]", 'name = "ssh-overhead"', f"runs = {runs}", "seed = 1"]
    lines += [f"health = {'true' if health else 'false'}"]
    lines += [f'[[test]]\nname = "t{i}"\ncommand = "true"' for i in range(tests)]
    for s in farm.servers:
        lines.append(s.worker_toml(f"w{s.port}", farm.known_hosts))
    text = "\n".join(lines) + "\n"
    experiment = Experiment.prepare(parse_spec_text(text, "bench"), text, "bench")
    store = experiment.create_store(work / "bench.db")
    cpu, t0 = time.process_time(), time.perf_counter()
    outcome = execute(experiment, store)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu
    assert outcome.complete and outcome.failures == 0, outcome
    frame = store.long_frame()
    store.close()
    per_worker = experiment.plan.total_trials
    total = per_worker * len(farm.servers)
    times = frame.groupby("worker").agg(
        first=("started", "min"), last=("ended", "max"), trials=("value", "size")
    )
    spans = (pd.to_datetime(times["last"]) - pd.to_datetime(times["first"])).dt.total_seconds()
    steady = float((spans / times["trials"]).mean())
    return wall / per_worker, steady, cpu / total, float(frame["value"].median()), total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--trials", type=int, default=40, help="per worker, layers 1 and 2")
    parser.add_argument("--tests", type=int, default=5, help="engine layer: tests")
    parser.add_argument("--runs", type=int, default=4, help="engine layer: runs per order")
    parser.add_argument(
        "--no-health", action="store_true", help="engine layer: [experiment] health = false"
    )
    parser.add_argument(
        "--stored-wall",
        action="store_true",
        help="only the stored wall over SSH beside the local executor's (one worker)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="--stored-wall: repeats")
    args = parser.parse_args()
    if args.stored_wall:
        header("SSH workers: the stored wall beside the local executor's, 1 sshd on loopback")
    else:
        header(f"SSH workers: controller cost per trial, {args.workers} sshd on loopback")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        home = work / "home"
        (home / ".ssh").mkdir(parents=True)
        os.environ["HOME"] = str(home)  # no ~/.ssh/config of the user's
        os.environ.pop("SSH_AUTH_SOCK", None)
        (work / "sshd").mkdir()
        farm = SshdFarm(work / "sshd")
        if args.stored_wall:
            try:
                farm.start(1)
                report_stored_walls(farm, args.trials, args.repeat)
            finally:
                farm.stop_all()
            return
        try:
            farm.start(args.workers)
            workers = workers_of(farm)
            layers = asyncio.run(channels(workers, args.trials))
            (f_wall, f_cpu, _), (e_wall, e_cpu, e_dur), (n_wall, n_cpu, n_dur) = layers[:3]
            h_wall, h_cpu, h_dur = layers[3]
            g_wall, g_steady, g_cpu, g_dur, total = engine(
                farm, work, args.tests, args.runs, not args.no_health
            )
        finally:
            farm.stop_all()
    print(f"load average: {load()} (at end)")
    print(f"{'layer':<44}{'wall/trial/worker':>19}{'overhead':>11}{'ctl CPU/trial':>15}")
    print(
        f"{'1 asyncssh conn.run(true) (floor)':<44}{f_wall * 1e3:>16.1f} ms"
        f"{'':>11}{f_cpu * 1e3:>12.2f} ms"
    )
    print(
        f"{'2 SSHExecutor.run(true)':<44}{e_wall * 1e3:>16.1f} ms"
        f"{(e_wall - e_dur) * 1e3:>8.1f} ms{e_cpu * 1e3:>12.2f} ms"
    )
    print(
        f"{'2b SSHExecutor.run(true), no launcher':<44}{n_wall * 1e3:>16.1f} ms"
        f"{(n_wall - n_dur) * 1e3:>8.1f} ms{n_cpu * 1e3:>12.2f} ms"
    )
    print(
        f"{'2h SSHExecutor.run(true), health read':<44}{h_wall * 1e3:>16.1f} ms"
        f"{(h_wall - h_dur) * 1e3:>8.1f} ms{h_cpu * 1e3:>12.2f} ms"
    )
    health = "health off" if args.no_health else "health on"
    label = f"3 engine: {args.tests} x {2 * args.runs} runs, {health} ({total})"
    print(
        f"{label:<44}{g_wall * 1e3:>16.1f} ms{(g_wall - g_dur) * 1e3:>8.1f} ms"
        f"{g_cpu * 1e3:>12.2f} ms"
    )
    label = "3b engine, first trial to last"
    print(f"{label:<44}{g_steady * 1e3:>16.1f} ms{(g_steady - g_dur) * 1e3:>8.1f} ms")
    print(
        f"ratios to the floor: executor {e_wall / f_wall:.2f}, engine {g_wall / f_wall:.2f} "
        f"(first trial to last {g_steady / f_wall:.2f})"
    )
    print(
        f"worker-side duration of 'true' (median): executor {e_dur * 1e3:.1f} ms "
        f"({n_dur * 1e3:.1f} ms without the launcher), "
        f"engine {g_dur * 1e3:.1f} ms"
    )
    print(
        f"washout's own cost over the floor: {(e_wall - f_wall) * 1e3:+.1f} ms wall, "
        f"{(e_cpu - f_cpu) * 1e3:+.2f} ms controller CPU per trial"
    )


if __name__ == "__main__":
    main()
