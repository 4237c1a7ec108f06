"""Full-size calibration of the analyses (the CI variant is tests/test_calibration.py).

1. The suite: every scenario of tests/test_calibration.py (no effect; first trial after the
   reset 10% slower; 1% drift per position; one test 5% faster in random orders only; 5%
   run-level noise over 1% trial noise; an 8% c-after-b carryover with the first-after-reset
   effect; the claim's d truly 2% faster than e under 5% shared run noise; d 2% faster in
   random orders only under that noise) at 20, 50, 100 and 200 runs per order, EXPERIMENTS
   simulated experiments each, every analysis of ``ANALYSES`` run on each (the order
   verdict, carryover, the wrong pair, first after reset, drift, and the claims analyses on
   ``CLAIM``: a false claim held, the order changes the conclusion). Prints a markdown
   table: where an analysis' null holds, its experiment-wide false-positive rate, marked
   "ok" when it is at most alpha + 2 Monte-Carlo standard errors; elsewhere its power.
   Exits 1 if a rate is above.
2. The order analysis in bulk (``--order``): the false-positive rate of many experiments
   with no order effect, and the detection rate of shifts of one test next to Noether's
   (1987) power approximation, with Monte-Carlo standard errors.

Run: nice -n 10 .venv/bin/python bench/calibration.py [--experiments 400] [--runs 20 50 ...]
         [--analyses claims "order changes conclusion" ...]  (only those columns)
     .venv/bin/python bench/calibration.py --order [EXPERIMENTS]
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_calibration import (  # noqa: E402
    ALPHA,
    ANALYSES,
    CLAIM,
    RUNS,
    SCENARIOS,
    TESTS,
    experiment_outcomes,
    false_positive_bound,
    finding_rates,
    noether_power,
    rate_cells,
    simulate,
)


def suite(experiments: int, runs_per_order: list[int], analyses: tuple[str, ...]) -> bool:
    """Print the suite's markdown table for ``analyses`` (columns); True when every
    false-positive rate is in bounds."""
    started = time.perf_counter()
    bound = false_positive_bound(experiments)
    print(
        f"{experiments} experiments per cell, {TESTS} tests, alpha {ALPHA}, "
        f"bound alpha + 2 MC se = {bound:.4f}; {platform.node()}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; the claims analyses judge "
        f"`{CLAIM}`\n"
    )
    print("| scenario | runs per order | " + " | ".join(analyses) + " |")
    print("|---|---:|" + "---:|" * len(analyses))
    calibrated = True
    for runs in runs_per_order:  # the small sizes of every scenario first
        for s, scenario in enumerate(SCENARIOS):
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
    parser.add_argument("--experiments", type=int, default=400)
    parser.add_argument("--runs", type=int, nargs="+", default=[20, 50, 100, 200])
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
    sys.exit(0 if suite(args.experiments, args.runs, tuple(args.analyses)) else 1)


if __name__ == "__main__":
    main()
