"""How a test's metric depends on which of some other tests ran before it in the same run.

Reads washout's long format on stdin and prints, per order kind, the count, median, min and
max of TEST's METRIC, grouped by which of the BEFORE tests preceded it in its run ("none" if
none did). The pagecache and redis examples use it to show the mechanism of an order effect:

    .venv/bin/washout export washout-results/pagecache-keep.db \
        | .venv/bin/python3 examples/pagecache/ran_before.py randread KiB_per_s write-a write-b
"""

import sys

import pandas as pd

test, metric, before = sys.argv[1], sys.argv[2], sys.argv[3:]
trials = pd.read_csv(sys.stdin)
position = trials.pivot_table(
    index=["worker", "run"], columns="test", values="position", aggfunc="first"
)
rows = trials[(trials["test"] == test) & (trials["metric"] == metric) & (trials["status"] == "ok")]


def preceded_by(worker: str, run: int, pos: int) -> str:
    earlier = [b for b in before if position.loc[(worker, run), b] < pos]
    return "+".join(earlier) or "none"


groups = [preceded_by(w, r, p) for w, r, p in zip(rows["worker"], rows["run"], rows["position"])]
table = (
    rows.assign(ran_before=groups)
    .groupby(["order", "ran_before"])["value"]
    .agg(["count", "median", "min", "max"])
)
print(f"{test} {metric}, by which of {', '.join(before)} ran before it in its run")
print(table.to_string(float_format=lambda v: f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"))
