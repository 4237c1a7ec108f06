"""What one controller costs per trial when it drives many SSH workers at once.

Starts W real sshd servers on 127.0.0.1 (as the tests do: tests/sshd.py; needs
scripts/services/sshd.sh), then measures three layers, all W workers concurrently:

1. the floor: asyncssh's own ``conn.run("true")`` on a reused connection (one channel, the
   login shell's start-up, the command): what any SSH runner pays;
2. washout's executor: ``SSHExecutor.run("true")`` (a request to the worker's runner, a
   channel kept open from one command to the next, which runs it under ``timeout``, GNU
   time where the worker has it, with the worker-side clock and CPU times; marker
   parsing), the same without GNU time (what ``max_rss`` costs), and the same with the
   trial's health read around it (what every trial of the engine does unless
   ``[experiment] health = false``);
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

Run: .venv/bin/python bench/ssh_overhead.py [--workers 8] [--trials 40] [--tests 5 --runs 4]
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


async def channels(workers: list[WorkerSpec], trials: int) -> list[Layer]:
    """Layers 1, 2, 2b (no GNU time, as on a worker without it: no ``max_rss``) and 2h
    (with the health readings), each on connections of its own, in rounds: all workers
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
    await asyncio.gather(*(e.connect() for e in timed + untimed + healthy))
    for e in untimed:
        e.link.gnu_time = False
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
    args = parser.parse_args()
    header(f"SSH workers: controller cost per trial, {args.workers} sshd on loopback")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        home = work / "home"
        (home / ".ssh").mkdir(parents=True)
        os.environ["HOME"] = str(home)  # no ~/.ssh/config of the user's
        os.environ.pop("SSH_AUTH_SOCK", None)
        (work / "sshd").mkdir()
        farm = SshdFarm(work / "sshd")
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
        f"{'2b SSHExecutor.run(true), no GNU time':<44}{n_wall * 1e3:>16.1f} ms"
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
        f"({n_dur * 1e3:.1f} ms without GNU time), "
        f"engine {g_dur * 1e3:.1f} ms"
    )
    print(
        f"washout's own cost over the floor: {(e_wall - f_wall) * 1e3:+.1f} ms wall, "
        f"{(e_cpu - f_cpu) * 1e3:+.2f} ms controller CPU per trial"
    )


if __name__ == "__main__":
    main()
