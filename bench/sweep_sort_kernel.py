"""The measured program of bench/sweep_sort.toml: sort n random values of a dtype with one
of numpy's sort kinds; prints the best nanoseconds per element of 7 sorts (fresh copies).
The minimum, as timeit reports, is the least disturbed by other processes on a busy
machine; per element, as the paper divides throughput by threads, so size acts through
cache effects and log n rather than sheer volume."""

import sys
import time

import numpy as np

n, kind, dtype = int(sys.argv[1]), sys.argv[2], sys.argv[3]
data = (np.random.default_rng(0).random(n) * 30000).astype(dtype)
times = []
for _ in range(7):
    work = data.copy()
    start = time.perf_counter()
    work.sort(kind=kind)
    times.append(time.perf_counter() - start)
print(f"{min(times) / n * 1e9:.4f}")
