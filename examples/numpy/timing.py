"""Shared by the kernel scripts: time a kernel in this process and print the result as JSON.

Each script builds its input once (seeded, untimed), then calls the kernel ``REPEATS`` times
(environment variable NUMPY_REPEATS, default 10) and prints one JSON object:
``first_s`` (the first call: cold caches, first-touch page faults), ``median_s`` and
``min_s`` over all calls, ``repeats``. The interpreter's start and the imports are outside
these numbers; washout's ``wall`` metric measures the whole process.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any


def report(kernel: Callable[[], Any]) -> None:
    """Time ``kernel`` ``NUMPY_REPEATS`` times and print the JSON summary to stdout."""
    repeats = int(os.environ.get("NUMPY_REPEATS", "10"))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        kernel()
        times.append(time.perf_counter() - t0)
    print(
        json.dumps(
            {
                "first_s": times[0],
                "median_s": statistics.median(times),
                "min_s": min(times),
                "repeats": repeats,
            }
        )
    )
