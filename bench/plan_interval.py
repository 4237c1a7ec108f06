"""Coverage of `washout plan`'s interval for the runs needed, and the true power of the runs
it prints (the CI variants are
tests/test_stats_power.py::test_the_plans_interval_covers_the_true_runs_needed_at_about_its_confidence
and tests/test_stats_power.py::test_the_printed_runs_reach_the_target_power_on_average).

For each population (normal with CV 3%; lognormal with sigma 0.25 and 0.5, the skew of
latencies) the "true" runs needed to detect a shift (2%, 15%, 30%: some 50 runs) at alpha
0.01 with power 0.8 are :func:`runs_needed_for` on 4,000 of the population's quantiles
(10,000 simulated experiments per size). Then PILOTS pilots of each size are drawn, each gets
:func:`runs_needed_interval` (the plan's interval, nominally 80%), and the share whose
interval holds the true number is printed with its Monte-Carlo standard error, and how
often the truth lies below and above it. Beside it, the true power of the runs `plan`
prints (:func:`runs_for_average_power`: planned on an upper confidence limit of the pilot's
variance chosen so that the power reaches the target on average over pilots), simulated
from the population's quantiles (TRUE_SIMS experiments): its average over the pilots and
the share of pilots whose plan falls short of the target; and the same for the plan made
on the pilot's own spread (:func:`runs_needed_for`, what `plan` printed before).

Run: nice -n 10 .venv/bin/python bench/plan_interval.py [--pilots 200] [--sizes 10 20 50]
"""

from __future__ import annotations

import argparse
import functools
import math
import time
from collections.abc import Callable

import numpy as np
from _common import header
from scipy.stats import norm

from washout.stats.power import (
    PLAN_CONFIDENCE,
    PowerSearch,
    runs_for_average_power,
    runs_needed_for,
    runs_needed_interval,
    simulated_power,
)

ALPHA_PER_TEST = 0.01
POWER = 0.8
TRUE_SIMS = 4000
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
    header("washout plan: coverage of the runs-needed interval, power of the printed runs")
    print(
        f"alpha {ALPHA_PER_TEST}, power {POWER}; nominal coverage "
        f"{PLAN_CONFIDENCE}; {args.pilots} pilots per cell\n"
    )
    print(
        "| population | detect | true runs | pilot trials | covered (MC se) | below | above "
        "| printed: mean power (MC se) | short | own spread: mean power | short |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    quantiles = (np.arange(4000) + 0.5) / 4000
    started = time.perf_counter()
    for name in args.populations or POPULATIONS:
        ppf, delta = POPULATIONS[name]
        population = ppf(quantiles)
        truth, _ = runs_needed_for(
            population, delta, PowerSearch(alpha_per_test=ALPHA_PER_TEST, n_sim=10_000)
        )
        assert truth is not None
        true_power = functools.cache(
            lambda n, p=population, d=delta: simulated_power(
                p, n, d, ALPHA_PER_TEST, n_sim=TRUE_SIMS, seed=1
            )
        )
        for size in args.sizes:
            rng = np.random.default_rng([size, len(name)])
            below = above = 0
            printed, own = [], []
            for k in range(args.pilots):
                pilot = ppf(rng.uniform(size=size))
                search = PowerSearch(alpha_per_test=ALPHA_PER_TEST, seed=k)
                lo, hi = runs_needed_interval(pilot, delta, search)
                below += lo is not None and truth < lo
                above += hi is not None and truth > hi
                printed.append(true_power(runs_for_average_power(pilot, delta, search)[0]))
                own.append(true_power(runs_needed_for(pilot, delta, search)[0]))
            covered = 1 - (below + above) / args.pilots
            se = math.sqrt(covered * (1 - covered) / args.pilots)
            power_se = float(np.std(printed)) / math.sqrt(args.pilots)
            print(
                f"| {name} | {delta:g}% | {truth} | {size} | {covered:.3f} ({se:.3f}) | "
                f"{below / args.pilots:.3f} | {above / args.pilots:.3f} | "
                f"{np.mean(printed):.3f} ({power_se:.3f}) | "
                f"{np.mean(np.array(printed) < POWER):.2f} | {np.mean(own):.3f} | "
                f"{np.mean(np.array(own) < POWER):.2f} |",
                flush=True,
            )
    print(f"\nelapsed {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
