"""The mechanism behind the pagecache result: each read's throughput by how many of the two
writers (write-a, write-b) ran before it in the same run.

Reads the long format on stdin:
    .venv/bin/washout export washout-results/pagecache-keep.db | .venv/bin/python3 examples/pagecache/writers_before.py
"""

import sys

import pandas as pd

trials = pd.read_csv(sys.stdin)
position = trials.pivot_table(index="run", columns="test", values="position", aggfunc="first")
reads = trials[trials["test"].isin(["seqread", "randread"]) & (trials["metric"] == "KiB_per_s")]
writers_before = [
    int((position.loc[run, ["write-a", "write-b"]] < pos).sum())
    for run, pos in zip(reads["run"], reads["position"])
]
table = (reads.assign(writers_before=writers_before)
         .groupby(["test", "order", "writers_before"])["value"]
         .agg(["count", "median", "min", "max"]).round(0))
print("KiB/s of each read, by the writers that ran before it in its run")
print(table.to_string())
