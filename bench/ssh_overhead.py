"""What one controller costs per trial when it drives many SSH workers at once.

Starts W real sshd servers on 127.0.0.1 (as the tests do: tests/sshd.py; needs
scripts/services/sshd.sh), then measures three layers, all W workers concurrently:

1. the floor: asyncssh's own ``conn.run("true")`` on a reused connection (one channel, the
   login shell's start-up, the command): what any SSH runner pays;
2. washout's executor: ``SSHExecutor.run("true")`` (the same plus the setsid/timeout
   wrapper, GNU time where the worker has it, the worker-side clock and CPU times, marker
   parsing), and the same without GNU time (what ``max_rss`` costs);
3. the whole engine: an experiment of K no-op tests x R runs per order on W workers
   (provenance capture once per run, SQLite writes, progress), via the library.

For each: controller CPU per trial (``time.process_time`` of this process: asyncssh, the
engine, SQLite; the sshd servers are separate processes) and wall per trial per worker.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))
import asyncssh  # noqa: E402
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


async def floor(workers: list[WorkerSpec], trials: int) -> tuple[float, float]:
    """asyncssh alone: (wall per command per worker, controller CPU per command)."""
    conns = await asyncio.gather(
        *(
            asyncssh.connect(
                w.host, port=w.port, username=w.user, client_keys=[w.key], known_hosts=w.known_hosts
            )
            for w in workers
        )
    )

    async def loop(conn: asyncssh.SSHClientConnection) -> None:
        for _ in range(trials):
            await conn.run("true", check=True)

    cpu, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(loop(c) for c in conns))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu
    for conn in conns:
        conn.close()
    return wall / trials, cpu / (trials * len(workers))


async def executor(
    workers: list[WorkerSpec], trials: int, gnu_time: bool = True
) -> tuple[float, float, float]:
    """SSHExecutor: (wall per trial per worker, CPU per trial, median worker-side duration);
    without ``gnu_time`` as on a worker that lacks GNU time (no ``max_rss``)."""
    executors = [SSHExecutor(w) for w in workers]
    await asyncio.gather(*(e.connect() for e in executors))
    for e in executors:
        e.link.gnu_time = e.link.gnu_time and gnu_time
    durations: list[float] = []

    async def loop(ex: SSHExecutor) -> None:
        for _ in range(trials):
            result = await ex.run("true", CommandOptions(timeout=60))
            assert result.status == "ok", result
            durations.append(result.duration)

    cpu, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(loop(e) for e in executors))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu
    await asyncio.gather(*(e.close() for e in executors))
    return wall / trials, cpu / (trials * len(workers)), statistics.median(durations)


def engine(farm: SshdFarm, work: Path, tests: int, runs: int) -> tuple[float, float, float, int]:
    """The engine: (wall per trial per worker, CPU per trial, median duration, trials)."""
    lines = ["[experiment]", 'name = "ssh-overhead"', f"runs = {runs}", "seed = 1"]
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
    return wall / per_worker, cpu / total, float(frame["value"].median()), total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--trials", type=int, default=40, help="per worker, layers 1 and 2")
    parser.add_argument("--tests", type=int, default=5, help="engine layer: tests")
    parser.add_argument("--runs", type=int, default=4, help="engine layer: runs per order")
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
            f_wall, f_cpu = asyncio.run(floor(workers, args.trials))
            e_wall, e_cpu, e_dur = asyncio.run(executor(workers, args.trials))
            n_wall, n_cpu, n_dur = asyncio.run(executor(workers, args.trials, gnu_time=False))
            g_wall, g_cpu, g_dur, total = engine(farm, work, args.tests, args.runs)
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
    label = f"3 engine: {args.tests} tests x {2 * args.runs} runs ({total} trials)"
    print(
        f"{label:<44}{g_wall * 1e3:>16.1f} ms{(g_wall - g_dur) * 1e3:>8.1f} ms"
        f"{g_cpu * 1e3:>12.2f} ms"
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
