"""Coverage of `washout plan`'s interval for the runs needed (the CI variant is
tests/test_stats_power.py::test_the_plans_interval_covers_the_true_runs_needed_at_about_its_confidence).

For each population (normal with CV 3%; lognormal with sigma 0.25 and 0.5, the skew of
latencies) the "true" runs needed to detect a shift (2%, 15%, 30%: some 50 runs) at alpha
0.01 with power 0.8 are :func:`runs_needed_for` on 4,000 of the population's quantiles
(10,000 simulated experiments per size). Then PILOTS pilots of each size are drawn, each gets
:func:`runs_needed_interval` (the plan's interval, nominally 80%), and the share whose
interval holds the true number is printed with its Monte-Carlo standard error, and how
often the truth lies below and above it.

Run: nice -n 10 .venv/bin/python bench/plan_interval.py [--pilots 200] [--sizes 10 20 50]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
from _common import header
from scipy.stats import norm

from washout.stats.power import PLAN_CONFIDENCE, PowerSearch, runs_needed_for, runs_needed_interval

ALPHA_PER_TEST = 0.01
# name: (the population's quantile function, the shift to detect in %)
POPULATIONS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float]] = {
    "normal, CV 3%": (lambda q: 100.0 * (1.0 + 0.03 * norm.ppf(q)), 2.0),
    "lognormal, sigma 0.25": (lambda q: 100.0 * np.exp(0.25 * norm.ppf(q)), 15.0),
    "lognormal, sigma 0.5": (lambda q: 100.0 * np.exp(0.5 * norm.ppf(q)), 30.0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pilots", type=int, default=200)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 50])
    parser.add_argument("--populations", nargs="+", choices=list(POPULATIONS), default=None)
    args = parser.parse_args()
    header("washout plan: coverage of the runs-needed interval")
    print(
        f"alpha {ALPHA_PER_TEST}, power 0.8; nominal coverage "
        f"{PLAN_CONFIDENCE}; {args.pilots} pilots per cell\n"
    )
    print("| population | detect | true runs | pilot trials | covered (MC se) | below | above |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    quantiles = (np.arange(4000) + 0.5) / 4000
    started = time.perf_counter()
    for name in args.populations or POPULATIONS:
        ppf, delta = POPULATIONS[name]
        truth, _ = runs_needed_for(
            ppf(quantiles), delta, PowerSearch(alpha_per_test=ALPHA_PER_TEST, n_sim=10_000)
        )
        assert truth is not None
        for size in args.sizes:
            rng = np.random.default_rng([size, len(name)])
            below = above = 0
            for k in range(args.pilots):
                lo, hi = runs_needed_interval(
                    ppf(rng.uniform(size=size)),
                    delta,
                    PowerSearch(alpha_per_test=ALPHA_PER_TEST, seed=k),
                )
                below += lo is not None and truth < lo
                above += hi is not None and truth > hi
            covered = 1 - (below + above) / args.pilots
            se = math.sqrt(covered * (1 - covered) / args.pilots)
            print(
                f"| {name} | {delta:g}% | {truth} | {size} | {covered:.3f} ({se:.3f}) | "
                f"{below / args.pilots:.3f} | {above / args.pilots:.3f} |",
                flush=True,
            )
    print(f"\nelapsed {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
