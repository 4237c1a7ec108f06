"""Where the quick form's time per trial goes: `washout run true --runs R --quiet` in this
process for a small and a large R after a warm-up (the marginal cost per trial, as the
goal's benchmark takes it: what only a large run pays, such as the summary's power
simulation, counts; imports and start-up do not), with the engine's steps on a trial's
path timed around each call (inclusive: a step's time holds the steps it calls, shown
indented under it).

bench/engine_overhead.py measures the quick form against `hyperfine -N true` and the
launcher's floor; this says which of washout's own steps the difference is made of: with
launcher batches (docs/design.md, "The batch launcher") most trials run inside
``LocalExecutor.run_batch`` and washout's Python per trial is the batch's steps divided
by the trials stored (the difference between the two runs'). Each timed call costs the
wrapper about a microsecond, so the totals run a little above an untimed run's; the
steps' shares are what to read.

Run: .venv/bin/python bench/quick_form_account.py [--runs 4000] [--small 10] [--commands true ...]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import io
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import header, load  # noqa: E402

STEPS: tuple[tuple[int, str, str, str], ...] = (
    # depth, module, class (or "" for a function), attribute
    (0, "washout.harness.engine", "Experiment", "prepare"),
    (0, "washout.harness.engine", "_Worker", "execute"),
    (1, "washout.harness.engine", "_Worker", "_batchable"),
    (1, "washout.harness.engine", "_Worker", "_start_run"),
    (1, "washout.harness.engine", "_Worker", "_batch"),
    (2, "washout.harness.batch", "Templates", "end"),
    (2, "washout.harness.batch", "Templates", "begin"),
    (2, "washout.harness.executors.local", "LocalExecutor", "run_batch"),
    (2, "washout.data.store.writer", "StoreWriter", "take_batch"),
    (2, "washout.harness.engine", "_Worker", "_batch_taken"),
    (1, "washout.harness.engine", "_Worker", "check_environment"),
    (2, "washout.data.store.writer", "StoreWriter", "record_environment"),
    (1, "washout.harness.engine", "_Worker", "reset"),
    (2, "washout.data.store.writer", "StoreWriter", "record_reset"),
    (1, "washout.data.store.writer", "StoreWriter", "run_id"),
    (1, "washout.harness.engine", "_Worker", "run_trials"),
    (2, "washout.data.store.writer", "StoreWriter", "begin_trial"),
    (2, "washout.harness.engine", "_Worker", "trial"),
    (3, "washout.harness.executors.local", "LocalExecutor", "run"),
    (4, "washout.harness.metrics.health", "LocalHealth", "reading"),
    (4, "washout.harness.launcher.client", "Launcher", "start"),
    (4, "washout.harness.executors.local", "_Child", "wait_blocking"),
    (4, "washout.harness.launcher.client", "Launcher", "finished"),
    (4, "washout.harness.executors.local", "_GroupGuard", "register"),
    (4, "washout.harness.executors.local", "_GroupGuard", "forget"),
    (2, "washout.data.store.writer", "StoreWriter", "finish_trial"),
    (3, "washout.data.store.writer", "StoreWriter", "_append"),
    (3, "washout.data.store.writer", "StoreWriter", "_fold"),
    (0, "washout.cli.commands_run", "", "_what_ran"),
    (0, "washout.cli.commands_run", "", "_analysis"),
    (1, "washout.data.store.writer", "StoreWriter", "long_frame"),
    (1, "washout.analysis.compute", "", "_analyze"),
    (2, "washout.analysis.compute", "", "_order"),
    (2, "washout.analysis.compute", "", "_why_of"),
    (2, "washout.analysis.compute", "", "_claims"),
    (2, "washout.analysis.compute", "", "_comparison"),
    (2, "washout.analysis.compute", "", "_detectable"),
)
"""The steps timed, each under the step that calls it (``_append`` also serves
``begin_trial``, ``_fold`` also the fold between runs and before a batch; a batch's first
run's environment check, reset and first start are the steps of a run alone)."""


def timed(owner: Any, name: str, spent: dict[str, list[float]], label: str) -> None:
    """Replace ``owner.name`` by a wrapper that adds each call's wall time to
    ``spent[label]``."""
    original: Callable[..., Any] = getattr(owner, name)
    record = spent.setdefault(label, [0.0, 0])

    if inspect.iscoroutinefunction(original):

        @functools.wraps(original)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            begun = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                record[0] += time.perf_counter() - begun
                record[1] += 1

    else:

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            begun = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                record[0] += time.perf_counter() - begun
                record[1] += 1

    setattr(owner, name, wrapper)


def patched() -> dict[str, list[float]]:
    """Time every step in :data:`STEPS` from now on: their (seconds, calls) so far."""
    import importlib

    spent: dict[str, list[float]] = {}
    for _, module, owner, name in STEPS:
        target = importlib.import_module(module)
        timed(getattr(target, owner) if owner else target, name, spent, f"{owner}.{name}")
    return spent


def quick_form(commands: list[str], runs: int, db: Path) -> tuple[float, int]:
    """One quick form in this process: its wall time and how many trials it stored (most
    run in launcher batches, not through ``trial``)."""
    from washout.cli import main as cli

    argv = sys.argv
    sys.argv = ["washout", "run", *commands, "--runs", str(runs), "--db", str(db), "--quiet"]
    begun = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cli()
    except SystemExit as end:
        if end.code:
            raise
    finally:
        sys.argv = argv
    wall = time.perf_counter() - begun
    with sqlite3.connect(db) as conn:
        (stored,) = conn.execute("SELECT count(*) FROM trial").fetchone()
    return wall, stored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=4000, help="the quick form's --runs")
    parser.add_argument("--small", type=int, default=10, help="the smaller --runs of the slope")
    parser.add_argument("--commands", nargs="+", default=["true"])
    args = parser.parse_args()
    header("Where the quick form's time per trial goes (bench/quick_form_account.py)")
    spent = patched()
    with tempfile.TemporaryDirectory(prefix="washout-bench-") as tmp:
        quick_form(args.commands, args.small, Path(tmp) / "warm.db")  # imports, caches
        before = {label: list(record) for label, record in spent.items()}
        small_wall, small = quick_form(args.commands, args.small, Path(tmp) / "small.db")
        middle = {label: list(record) for label, record in spent.items()}
        wall, stored = quick_form(args.commands, args.runs, Path(tmp) / "large.db")
    trials = stored - small
    print(
        f"`washout run {' '.join(args.commands)} --runs R --quiet`, R = {args.small} and "
        f"{args.runs} after a warm-up: {stored} - {small} trials, {wall:.2f} - "
        f"{small_wall:.2f} s, {(wall - small_wall) / trials * 1e6:.0f} us a trial "
        f"(load {load()})"
    )
    print(f"{'step':44} {'calls/trial':>11} {'us/trial':>9}")
    for depth, _, owner, name in STEPS:
        label = f"{owner}.{name}"
        seconds = spent[label][0] - 2 * middle[label][0] + before[label][0]
        calls = spent[label][1] - 2 * middle[label][1] + before[label][1]
        shown = "  " * depth + (label if owner else name)
        print(f"{shown:44} {calls / trials:11.2f} {seconds / trials * 1e6:9.1f}")


if __name__ == "__main__":
    main()
