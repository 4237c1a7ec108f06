"""Run a sweep: the incremental-sampling loop, each batch of settings measured by the engine.

Each batch is one washout experiment in its own store (``DIR/batch-NNN-KEY.db``, its spec
kept as TOML, so every washout command reads it as any other store): one test per setting,
``repeats`` runs in fresh random orders, a reset before every run, every trial recorded as
it finishes. A setting's value is the mean of its metric over its successful
trials. Resume is what the engine's resume is, batch by batch: the loop is a pure function
of the seed and the measured values, so re-running the sweep re-chooses the same batches,
reads the finished ones from their stores and resumes the unfinished one. ``KEY`` is a hash
of the batch's whole experiment spec, so a batch is reused only by an identical batch: once
the spec is edited (another command, metric, reset, seed ...) its batches are measured anew.

Outputs beside the stores: ``settings.csv`` (parameters and metric of every measured
setting, for ``washout explore --full`` and reports) and ``sweep.json`` (the summary).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from washout.data.outputs import csv_text, write_output
from washout.errors import WashoutError, choose
from washout.harness.spec_toml import toml_text
from washout.sweep.explore import require_variation, summary
from washout.sweep.incremental import (
    METHODS,
    LoopOptions,
    LoopResult,
    Step,
    StopSampling,
    run_loop,
)
from washout.sweep.result import SweepResult
from washout.sweep.space import Space
from washout.sweep.spec import (
    SweepSection,
    batch_spec,
    batch_spec_data,
    first_batch,
    load_sweep,
    loop_options,
    sweep_space,
)

Notify = Callable[[str], None]


def _measure_batch(
    section: SweepSection,
    rest: dict[str, Any],
    text_source: str,
    space: Space,
    rows: np.ndarray,
    batch: int,
    seed: int,
    directory: Path,
    progress: Callable[[int, int], None] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run (or resume) one batch: the mean metric of each setting over its successful trials,
    and the variance of that mean (sample variance / count; NaN with a single trial)."""
    from washout.harness.engine import Experiment, execute, reopen_store

    where = f"{text_source} (batch {batch})"
    data = batch_spec_data(section, rest, space, [int(r) for r in rows], batch, seed)
    spec = batch_spec(data, where)
    experiment = Experiment.prepare(spec, toml_text(data), text_source, seed=seed + batch)
    path = batch_path(directory, batch, json.dumps(data, sort_keys=True))
    store = reopen_store(path) if path.exists() else experiment.create_store(path)
    try:
        total = experiment.plan.total_trials
        done = [0]

        def hook(worker: str, n: int) -> None:
            done[0] += n
            if progress is not None:
                progress(done[0], total)

        outcome = execute(experiment, store, progress=hook)
        if not outcome.complete:
            reason = outcome.stopped or "; ".join(outcome.worker_errors.values())
            raise StopSampling(f"batch {batch} stopped: {reason}")
        frame = store.long_frame()
    finally:
        store.close()
    frame = frame[(frame["metric"] == section.metric) & (frame["status"] == "ok")]
    groups = frame.groupby("test")["value"]
    means, mean_var = groups.mean(), groups.var(ddof=1) / groups.count()
    values = []
    for test in experiment.tests:
        if test.name not in means.index or not np.isfinite(means[test.name]):
            raise WashoutError(
                f"{path}: test {test.name!r}: no successful trial with metric "
                f"{section.metric!r} (see `washout status {path}`); fix the "
                "command and run the sweep again"
            )
        values.append(float(means[test.name]))
    return np.asarray(values), np.asarray(
        [float(mean_var.get(t.name, np.nan)) for t in experiment.tests]
    )


def batch_path(directory: Path, batch: int, canonical: str) -> Path:
    """``DIR/batch-NNN-KEY.db``: KEY (SHA-256 of the batch's spec as canonical JSON, 12 hex
    digits) ties the store to exactly what it measures, whatever text the store keeps."""
    key = hashlib.sha256(canonical.encode()).hexdigest()[:12]
    return directory / f"batch-{batch:03d}-{key}.db"


def run_sweep(
    spec_path: str | Path,
    directory: str | Path | None = None,
    seed: int | None = None,
    notify: Notify | None = None,
    progress: Callable[[int, int], None] | None = None,
    method: str | None = None,
) -> SweepResult:
    """Run the sweep a spec describes; returns its result (also written to sweep.json).
    ``method`` (``ours`` or ``paper``; ``washout sweep --method``) replaces the spec's
    ``[sweep] method``; the options the section sets still override single parts."""
    section, rest, _ = load_sweep(spec_path)
    if method is not None:
        choose(METHODS, method, "--method", "method")
        section = section.model_copy(update={"method": method})
    source = str(spec_path)
    space = sweep_space(section, source)
    exp = rest.get("experiment", {})
    seed = seed if seed is not None else int(exp.get("seed", 0))
    name = str(exp.get("name", Path(spec_path).stem))
    out = Path(directory) if directory is not None else Path("washout-results") / f"{name}-sweep"
    first_batch(section, rest, space, seed, source)  # a spec error costs nothing
    out.mkdir(parents=True, exist_ok=True)
    options = loop_options(section, seed)
    say = notify or (lambda message: None)
    started = time.monotonic()
    batch_counter = [0]
    per_setting: list[float] = []
    noise: list[np.ndarray] = []

    def measure(rows: np.ndarray) -> np.ndarray:
        batch = batch_counter[0]
        batch_counter[0] += 1
        if section.budget_hours is not None and per_setting:
            spent = time.monotonic() - started
            expected = float(np.mean(per_setting)) * len(rows)
            if spent + expected > section.budget_hours * 3600:
                raise StopSampling(
                    f"the next batch ({len(rows)} settings, about {expected:.0f} s) "
                    f"would pass budget_hours = {section.budget_hours}"
                )
        say(f"batch {batch}: measuring {len(rows)} settings x {section.repeats} repeats")
        t0 = time.monotonic()
        values, mean_var = _measure_batch(
            section, rest, source, space, rows, batch, seed, out, progress
        )
        noise.append(mean_var)
        per_setting.append((time.monotonic() - t0) / max(len(rows), 1))
        return values

    def on_step(step: Step) -> None:
        finite = [v for v in step.r2_splits if np.isfinite(v)]
        worst = f"{min(finite):.3f}" if finite else "n/a"
        left = len(space) - step.measured
        eta = float(np.mean(per_setting)) * left if per_setting else float("nan")
        say(
            f"{step.measured}/{len(space)} settings measured: worst split R^2 {worst}"
            + (f", holdout R^2 {step.r2_holdout:.3f}" if step.r2_holdout is not None else "")
            + (
                "; threshold reached"
                if step.passed
                else f"; at most {eta / 60:.1f} min more if every setting is needed"
            )
        )

    result = run_loop(space, measure, options, on_step=on_step)
    if result.stopped:
        say(f"stopped: {result.stopped}")
    summary_ = _finish(space, result, options, out, section, noise)
    ceiling = summary_.r2_noise_ceiling
    if ceiling is not None and ceiling < options.threshold:
        say(
            f"note: repeat noise alone caps R^2 near {ceiling:.2f}, below the threshold "
            f"{options.threshold}: more repeats (or a quieter machine) are needed to reach it"
        )
    return summary_


def noise_ceiling(y: np.ndarray, mean_var: np.ndarray) -> float | None:
    """The R^2 a perfect model could reach given repeat noise: 1 - mean Var(setting mean) /
    Var(setting means), the reliability of the setting means (the idea of ICC(1,k), Shrout &
    Fleiss, Psychological Bulletin 1979). None when no setting has two successful trials."""
    finite = np.isfinite(mean_var)
    if finite.sum() == 0 or len(y) < 2 or np.var(y, ddof=1) == 0:
        return None
    return float(1.0 - np.mean(mean_var[finite]) / np.var(y, ddof=1))


def _finish(
    space: Space,
    result: LoopResult,
    options: LoopOptions,
    out: Path,
    section: SweepSection,
    noise: list[np.ndarray],
) -> SweepResult:
    """Write settings.csv and sweep.json; return the result."""
    import pandas as pd

    rows = {
        p: [space.level(f, int(c)) for c in space.codes[result.measured, f]]
        for f, p in enumerate(space.parameters)
    }
    rows[section.metric] = list(result.y)
    write_output(out / "settings.csv", csv_text(pd.DataFrame(rows)), option="--dir")
    if len(result.measured) < 2:
        raise WashoutError(
            f"{out}: only {len(result.measured)} setting(s) measured: nothing to analyse"
        )
    require_variation(result.y, str(out / "settings.csv"), section.metric)
    result_summary = summary(space, result, options).with_fields(
        directory=str(out),
        r2_noise_ceiling=noise_ceiling(
            result.y, np.concatenate(noise[::-1]) if noise else np.empty(0)
        ),
        stopped=result.stopped,
    )
    write_output(out / "sweep.json", json.dumps(result_summary.to_dict(), indent=2), option="--dir")
    return result_summary
