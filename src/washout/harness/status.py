"""Progress of an experiment from its store alone (works while another process writes)."""

from __future__ import annotations

import statistics
from typing import Any

from washout.data.store import Store, describe_writer, writer_of


def progress_of(store: Store) -> dict[str, Any]:
    """Planned and done slots, failures, runs done, the live writer (``writer``: host, pid,
    started; None when no washout process is writing it) and an ETA from mean trial
    duration.

    The plan is rebuilt from the stored spec and seed, so "done" means exactly what
    ``resume`` will skip.
    """
    from washout.harness.engine import Experiment, count_done

    experiment = Experiment.from_store(store)
    workers = experiment.spec.workers
    planned = experiment.plan.total_trials * workers
    done = count_done(experiment, store)
    counts = store.counts()
    durations = store.finished_durations()
    mean = statistics.fmean(durations) if durations else None
    runs_done = store.conn.execute("SELECT count(*) FROM run WHERE status = 'done'").fetchone()[0]
    remaining = planned - done
    return {
        "planned": planned,
        "done": done,
        "remaining": remaining,
        "runs_planned": len(experiment.plan.runs) * workers,
        "runs_done": runs_done,
        "ok": counts.get("ok", 0),
        "failed": counts.get("failed", 0),
        "timeout": counts.get("timeout", 0),
        "interrupted": counts.get("interrupted", 0),
        "running": counts.get("running", 0),
        "superseded": counts.get("superseded", 0),
        "writer": writer_of(store.path),
        "eta_seconds": None if mean is None else remaining * mean / workers,
        "complete": remaining == 0,
        "seed": experiment.plan.seed,
        "name": experiment.spec.experiment.name,
    }


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def describe(store: Store) -> str:
    """The text of ``washout status``."""
    p = progress_of(store)
    lines = [f"{store.path}: experiment {p['name']!r}, seed {p['seed']}"]
    if p["complete"]:
        lines.append(
            f"complete: {p['done']} of {p['planned']} trials, "
            f"{p['runs_done']} of {p['runs_planned']} runs"
        )
    elif p["writer"] is not None:
        eta = "unknown" if p["eta_seconds"] is None else _duration(p["eta_seconds"])
        lines.append(
            f"running ({describe_writer(p['writer'])}): {p['done']} of "
            f"{p['planned']} trials done, {p['runs_done']} of {p['runs_planned']} "
            f"runs; ETA {eta}"
        )
    else:
        lines.append(
            f"stopped; `washout resume {store.path}` continues it: {p['done']} of "
            f"{p['planned']} trials done, {p['runs_done']} of {p['runs_planned']} runs"
        )
    lines.append(
        f"failed {p['failed']}, timed out {p['timeout']}, interrupted {p['interrupted']}"
        + (f", superseded {p['superseded']}" if p["superseded"] else "")
    )
    for worker, run, pos, test, status, reason in store.failures(5):
        lines.append(f"  {worker} run {run} position {pos} {test}: {status}: {reason}")
    return "\n".join(lines)
