"""washout plan: how many runs per order an experiment needs, from a pilot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from washout.cli.app import app
from washout.errors import WashoutError

FORMATS: tuple[str, ...] = ("table", "json")
FEW_PILOT_TRIALS = 10


def parse_percent(text: str, option: str = "--detect") -> float:
    """``"2%"``, ``"2 %"`` or ``"2"`` as 2.0; a one-line error for anything else."""
    raw = text.strip().removesuffix("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise WashoutError(f"{option} = {text!r}: expected a percentage, e.g. 2%") from None
    if not (math.isfinite(value) and value > 0):
        raise WashoutError(f"{option} = {text!r}: expected a positive percentage, e.g. 2%")
    return value


@app.command("plan")
def plan_command(
    pilot: Path = typer.Option(
        ..., "--pilot", help="A pilot's store, long-format CSV or OrderSage file."
    ),
    detect: str = typer.Option(
        ..., "--detect", help="The order effect to detect, as Delta% of the mean, e.g. 2%."
    ),
    power: float = typer.Option(0.8, "--power", help="Probability of detecting it."),
    alpha: float = typer.Option(
        0.05, "--alpha", help="Family-wise level (Bonferroni over tests x metrics)."
    ),
    metric: str | None = typer.Option(
        None, "--metric", help="Only this metric (default: every metric)."
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the simulation."),
    output: str = typer.Option("table", "--format", "-f", help="table or json."),
) -> None:
    """Runs per order needed to detect a given order effect, simulated from a pilot."""
    from washout.data.sources import load_trials
    from washout.stats.power import MAX_RUNS, PLAN_CONFIDENCE, plan_runs

    if output not in FORMATS:
        raise WashoutError(f"--format = {output!r}: expected one of {', '.join(FORMATS)}")
    delta = parse_percent(detect)
    frame, _info = load_trials(pilot)
    rows = plan_runs(frame, delta, power=power, alpha=alpha, metric=metric, seed=seed)
    per_test = rows[0].alpha_per_test
    if output == "json":
        typer.echo(
            json.dumps(
                {
                    "pilot": str(pilot),
                    "detect_pct": delta,
                    "power": power,
                    "alpha": alpha,
                    "family_size": len(rows),
                    "alpha_per_test": per_test,
                    "seed": seed,
                    "tests": [r.to_dict() for r in rows],
                },
                indent=2,
            )
        )
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"Runs per order to detect a {delta:g}% order effect with power "
        f"{power:g} (Kruskal-Wallis at alpha {alpha:g}/{len(rows)} = "
        f"{per_test:.3g})"
    )
    for name in (
        "test",
        "metric",
        "CV",
        "pilot trials",
        "runs per order",
        f"{PLAN_CONFIDENCE:.0%} interval",
        "power",
    ):
        table.add_column(name, justify="left" if name in ("test", "metric") else "right")
    for r in rows:
        if r.runs_needed:
            runs = str(r.runs_needed)
        else:
            runs = f"more than {MAX_RUNS}" if r.n_pilot >= 2 else "too few pilot trials"
        spread = "-"
        if r.runs_interval:
            lo, hi = (str(n) if n else f">{MAX_RUNS}" for n in r.runs_interval)
            spread = f"{lo} to {hi}"
        table.add_row(
            r.test,
            r.metric,
            f"{r.cv * 100:.2f}%",
            f"{r.n_pilot} {r.source}",
            runs,
            spread,
            f"{r.power_at:.2f}" if r.power_at is not None else "-",
        )
    console = Console(highlight=False, markup=False)  # test names are data, not markup
    console.print(table)
    few = [r.test for r in rows if r.n_pilot < FEW_PILOT_TRIALS]
    if few:
        console.print(
            f"Note: fewer than {FEW_PILOT_TRIALS} pilot trials for {', '.join(few)}: "
            "the spread, and so the plan, is only a rough estimate."
        )
    console.print(
        f"Runs per order: enough for power {power:g} on average over pilots of this size, "
        "planned on an upper confidence limit of the pilot's variance (Kieser & Wassmer "
        "1996), since a pilot's own spread understates the noise more often than not; the "
        "power column is the simulated power at that variance. The interval is the runs "
        f"needed at either end of a {PLAN_CONFIDENCE:.0%} "
        "confidence interval of the pilot's variance (Bonett 2006): how much a pilot of "
        "this size leaves the noise, and so the plan, uncertain."
    )
    needed = [r.runs_needed for r in rows]
    if all(needed):
        worst = max(n for n in needed if n)
        highs = [r.runs_interval[1] for r in rows if r.runs_interval]
        safe = (
            ""
            if not highs
            else (
                f"; {max(h for h in highs if h)} if the pilot understated the noise"
                if all(highs)
                else f"; more than {MAX_RUNS} if the pilot understated the noise"
            )
        )
        console.print(
            f"Plan {worst} runs per order ({2 * worst} runs in all): enough for every test{safe}."
        )
