"""Full-size calibration of the drift analysis (the CI variants are in
tests/test_stats_drift.py: test_no_drift_is_reported_where_there_is_none, test_real_drift_is_found).

Every scenario of tests/test_stats_drift.py's DRIFT_SCENARIOS (no drift; a wandering AR(1)
machine state; the first trial after the reset, carryover and run-level noise together; 1%
drift per position of one test; every test 1% and 0.1% slower per run) at 5, 10, 20, 50,
100 and 200 runs per order with 2 and 8 tests, EXPERIMENTS simulated experiments per cell,
1% trial noise. For each finding drift can report (a trend with position or time since the
reset, a trend across runs, a wandering level): where the scenario makes it false, the
experiment-wide false-positive rate, "ok" when it is at most alpha + 2 Monte-Carlo standard
errors; where it is true, the power. Exits 1 if a false-positive rate is above its bound.

``--limits`` adds a wander slower than the calibrated one (AR(1) 0.995 per trial), where a
trend across runs cannot be told from the wander over these experiments' lengths: its
rates are printed for the record and do not count towards the exit status.

Run: nice -n 10 .venv/bin/python bench/drift_calibration.py [--experiments 200]
         [--runs 5 10 20 50 100 200] [--tests 2 8] [--scenarios "no drift" ...] [--limits]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _common import header  # noqa: E402
from test_calibration import false_positive_bound, rate_cells  # noqa: E402
from test_stats_drift import (  # noqa: E402
    ALPHA,
    DRIFT_SCENARIOS,
    FINDINGS,
    MACHINE,
    DriftScenario,
    finding_rates,
)

SLOWER_WANDER = DriftScenario(
    "AR(1) machine state, 0.995 per trial (beyond the calibrated range)",
    lambda t: {"machine_ar1": (0.995, MACHINE[1])},
    breaks=frozenset({"wandering level"}),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=200)
    parser.add_argument("--runs", type=int, nargs="+", default=[5, 10, 20, 50, 100, 200])
    parser.add_argument("--tests", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--scenarios", nargs="+", default=None)
    parser.add_argument("--limits", action="store_true")
    args = parser.parse_args()
    header("Calibration of the drift analysis (bench/drift_calibration.py)")
    bound = false_positive_bound(args.experiments)
    print(
        f"{args.experiments} experiments per cell, alpha {ALPHA}, bound alpha + 2 MC se = "
        f"{bound:.4f}; trial noise 1%; the machine state AR(1) {MACHINE[0]} per trial, "
        f"sd {MACHINE[1]:.0%}\n"
    )
    print(f"| scenario | tests | runs per order | {' | '.join(FINDINGS)} | s per experiment |")
    print(f"|---|---:|---:|{'---:|' * len(FINDINGS)}---:|")
    chosen = [s for s in DRIFT_SCENARIOS if args.scenarios is None or s.name in args.scenarios]
    ok = True
    for scenario in chosen + ([SLOWER_WANDER] if args.limits else []):
        for tests in args.tests:
            for runs in args.runs:
                started = time.perf_counter()
                rates = finding_rates(scenario, tests, runs, args.experiments, seed=10_000)
                cells, within = rate_cells(rates, scenario.breaks, bound)
                ok &= within or scenario is SLOWER_WANDER
                took = (time.perf_counter() - started) / args.experiments
                print(
                    f"| {scenario.name} | {tests} | {runs} | {' | '.join(cells)} | {took:.2f} |",
                    flush=True,
                )
    print(f"\nevery false-positive rate within its bound: {'yes' if ok else 'NO'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
