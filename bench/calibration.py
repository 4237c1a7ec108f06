"""Full-size calibration of the analyses (the CI variant is tests/test_calibration.py).

1. The suite: every scenario of tests/test_calibration.py (its SCENARIOS: no effect; a first
   trial after the reset 10% slower; 1% drift per position; one test 5% faster in random
   orders only; 5% run-level noise; an 8% c-after-b carryover with and without the
   first-after-reset effect, and under 5% run-level noise; lag 2: b slowing the test two
   positions later by 8%; a wandering (AR(1)) machine state; heavy tails (lognormal sigma
   0.3); whole-number values with ties; 10% failed trials with 20% of runs cut short; 2 and
   8 tests; the claims' scenarios) at 5, 10, 20, 50, 100 and 200 runs per order,
   EXPERIMENTS simulated experiments each, every analysis of ``ANALYSES`` run on each (the
   order verdict, carryover, the wrong pair, first after reset, drift, the claims analyses
   on each scenario's claim, the "times faster" interval of washout.stats.compare). Prints a
   markdown table: where an analysis' null holds, its experiment-wide false-positive rate,
   marked "ok" when it is at most alpha + 2 Monte-Carlo standard errors; elsewhere its power.
   Exits 1 if a rate is above.
2. The order analysis in bulk (``--order``): the false-positive rate of many experiments
   with no order effect, and the detection rate of shifts of one test next to Noether's
   (1987) power approximation, with Monte-Carlo standard errors.

Run: nice -n 10 .venv/bin/python bench/calibration.py [--experiments 300] [--runs 5 10 ...]
         [--scenarios NAME ...] [--analyses claims "order changes conclusion" ...]
     .venv/bin/python bench/calibration.py --order [EXPERIMENTS]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_calibration import (  # noqa: E402
    ALPHA,
    ANALYSES,
    RUNS,
    SCENARIO,
    SCENARIOS,
    SIZES,
    TESTS,
    Scenario,
    experiment_outcomes,
    false_positive_bound,
    finding_rates,
    noether_power,
    rate_cells,
    simulate,
)


def suite(
    experiments: int,
    runs_per_order: list[int],
    analyses: tuple[str, ...],
    scenarios: tuple[Scenario, ...],
) -> bool:
    """Print the suite's markdown table for ``analyses`` (columns) and ``scenarios`` (rows,
    the small sizes of every scenario first); True when every false-positive rate is in
    bounds."""
    started = time.perf_counter()
    bound = false_positive_bound(experiments)
    print(
        f"{experiments} experiments per cell, alpha {ALPHA}, bound alpha + 2 MC se = "
        f"{bound:.4f}; {platform.node()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load "
        f"{os.getloadavg()[0]:.1f}\n"
    )
    print("| scenario | runs per order | " + " | ".join(analyses) + " |")
    print("|---|---:|" + "---:|" * len(analyses))
    calibrated = True
    for runs in runs_per_order:
        for scenario in scenarios:
            s = SCENARIOS.index(scenario)
            rates = finding_rates(
                scenario, runs, experiments, seed=100_000 * (s + 1) + runs, analyses=analyses
            )
            cells, within = rate_cells(rates, scenario.breaks, bound)
            calibrated &= within
            print(f"| {scenario.name} | {runs} | " + " | ".join(cells) + " |", flush=True)
    print(f"\nelapsed {time.perf_counter() - started:.0f} s")
    return calibrated


def order_bulk(experiments: int) -> None:
    """The order analysis' false positives and power, experiments simulated in bulk."""
    started = time.perf_counter()
    se = math.sqrt(ALPHA * (1 - ALPHA) / experiments)
    print(f"{experiments} experiments, {TESTS} tests, {RUNS} runs per order, alpha = {ALPHA}")
    for correction in ("bonferroni", "holm"):
        any_hit, _ = experiment_outcomes(simulate(experiments, 0.0, seed=101), correction)
        print(
            f"no effect, {correction:10s}: experiment-wide false positives "
            f"{any_hit.mean():.4f} (alpha {ALPHA}, MC se {se:.4f})"
        )
    for shift in (0.5, 0.75, 1.0, 1.25):
        _, hit = experiment_outcomes(
            simulate(experiments, shift, seed=102, skewed=False), "bonferroni"
        )
        expected = noether_power(RUNS, shift, ALPHA / TESTS)
        print(
            f"shift {shift:4.2f} sd: detected {hit.mean():.4f}, Noether {expected:.4f}, "
            f"MC se {math.sqrt(expected * (1 - expected) / experiments):.4f}"
        )
    print(f"elapsed {time.perf_counter() - started:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=300)
    parser.add_argument("--runs", type=int, nargs="+", default=list(SIZES))
    parser.add_argument(
        "--scenarios",
        nargs="+",
        choices=list(SCENARIO),
        default=list(SCENARIO),
        metavar="SCENARIO",
        help="only these rows (default: every scenario)",
    )
    parser.add_argument(
        "--analyses",
        nargs="+",
        choices=list(ANALYSES),
        default=list(ANALYSES),
        metavar="ANALYSIS",
        help=f"only these columns, in this order (of: {'; '.join(ANALYSES)})",
    )
    parser.add_argument(
        "--order",
        type=int,
        nargs="?",
        const=20000,
        default=None,
        metavar="EXPERIMENTS",
        help="the order analysis in bulk instead",
    )
    args = parser.parse_args()
    if args.order is not None:
        order_bulk(args.order)
        return
    chosen = tuple(SCENARIO[name] for name in args.scenarios)
    sys.exit(0 if suite(args.experiments, args.runs, tuple(args.analyses), chosen) else 1)


if __name__ == "__main__":
    main()
