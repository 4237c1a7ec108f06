"""washout check: is this machine (or each worker of a spec) set up to measure, and how to
set it up (``--tune``, ``--reset``), as pyperf's ``system show/tune/reset``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from washout.cli.app import app
from washout.errors import ExitCode, choose

if TYPE_CHECKING:
    from washout.harness.machine import MachineCheck, WorkerCheck

NAME_WIDTH, VERDICT_WIDTH = 20, 14


def _lines(worker: WorkerCheck) -> list[str]:
    """One worker's check in words: what tune or reset wrote, then each item's verdict,
    what was found, and the advice."""
    lines = [f"{worker.worker} ({worker.host})"]
    if worker.error is not None:
        return [*lines, f"  error: {worker.error}"]
    for a in worker.actions:
        how = a.outcome + (f": {a.reason}" if a.reason else "")
        lines.append(f"  {a.item}: {a.path}: {a.before or '?'} -> {a.after} ({how})")
    if worker.note:
        lines.append(f"  {worker.note}")
    indent = " " * (2 + NAME_WIDTH + 1 + VERDICT_WIDTH + 1)
    for item in worker.items:
        lines.append(
            f"  {item.name:<{NAME_WIDTH}} {item.verdict:<{VERDICT_WIDTH}} {item.state}".rstrip()
        )
        if item.advice:
            lines.append(f"{indent}-> {item.advice}")
    counts = {
        v: sum(i.verdict == v for i in worker.items) for v in ("ok", "advice", "not available")
    }
    lines.append("  " + ", ".join(f"{n} {v}" for v, n in counts.items()))
    return lines


def render(result: MachineCheck) -> str:
    """The whole check as text, one block per machine."""
    return "\n\n".join("\n".join(_lines(w)) for w in result.workers)


@app.command("check")
def check_command(
    spec_path: Path | None = typer.Argument(
        None,
        metavar="[SPEC.toml]",
        help="Check each [[worker]] of this spec (default: this machine).",
    ),
    tune: bool = typer.Option(
        False,
        "--tune",
        help="Set what root can set for measuring (governor, turbo, minimum frequency, ASLR, "
        "perf sample rate), recording the values replaced on each machine.",
    ),
    reset: bool = typer.Option(
        False, "--reset", help="Write back the values --tune recorded, and remove the record."
    ),
    root: Path = typer.Option(
        Path("/"),
        "--root",
        help="Where each machine's /sys, /proc and /run are (default /; a relative path is "
        "under each worker's workdir): a container's view of its host, a laid-out tree.",
    ),
    fmt: str = typer.Option("text", "--format", "-f", help="Output: text or json."),
) -> None:
    """Is the machine set up to measure? A verdict with advice for each item (governor,
    turbo, SMT, ASLR, isolated CPUs, load, swap, thermal state, perf, RAPL, clock)."""
    from washout.harness.machine_check import check

    render_as = choose({"text": render, "json": _json}, fmt, "--format", "format")
    result = check(spec_path, tune=tune, reset=reset, root=str(root))
    typer.echo(render_as(result))
    if result.failed:
        raise typer.Exit(ExitCode.WORKER_FAILED)


def _json(result: MachineCheck) -> str:
    return json.dumps(result.to_dict(), indent=2)
