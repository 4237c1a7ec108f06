"""washout's carryover analysis (which preceding test shifts which test, washout.stats.carryover)
on a store, through the Python API, for one metric: the largest shifts first.

    .venv/bin/python3 examples/numpy/carryover.py washout-results/numpy.db wall 8

The predecessor "(reset)" stands for a test's trials at the first position of a random-order
run, right after the reset, against its trials at later positions.
"""

import sys

from washout.sources import load_trials
from washout.stats.carryover import carryover, carryover_frame

source, metric, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 10
trials, _ = load_trials(source)
result = carryover(trials, metric=metric)
print(f"family {result.family_size}, alpha/m = {result.alpha_per_test:.3g}, "
      f"random runs used {result.runs_used}")
columns = ["test", "predecessor", "n_after", "n_other", "mean_after", "mean_other",
           "delta_pct", "p", "significant"]
print(carryover_frame(result)[columns].head(rows).round(4).to_string(index=False))
