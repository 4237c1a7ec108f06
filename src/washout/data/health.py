"""Health metrics in the store: their names (``health.*``, measured around every trial by
:mod:`washout.harness.metrics.health`) and their long-format rows, which the long format
itself leaves out, as it leaves out the resource metrics: a test's metrics are what the
analyses cover unless a user names another.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

HEALTH_PREFIX = "health."
INVOLUNTARY_SWITCHES = "health.involuntary_switches"
MIGRATIONS = "health.migrations"
OTHER_CPU = "health.other_cpu"
THROTTLES = "health.throttles"
SWAP_IN = "health.swap_in"
SWAP_OUT = "health.swap_out"
KERNEL_LOG = "health.kernel_log"
APERF_MPERF = "health.aperf_mperf"
CPUFREQ_MHZ = "health.cpufreq_mhz"
HEALTH_METRICS: tuple[str, ...] = (
    INVOLUNTARY_SWITCHES,
    MIGRATIONS,
    OTHER_CPU,
    THROTTLES,
    SWAP_IN,
    SWAP_OUT,
    KERNEL_LOG,
    APERF_MPERF,
    CPUFREQ_MHZ,
)
"""Every health metric, in the order they are listed to users."""

_ROWS = """
SELECT r.idx, r.order_kind, t.position, t.test, m.name, m.value, t.status, w.name,
       t.started, t.ended
FROM metric m JOIN trial t ON t.id = m.trial_id JOIN run r ON r.id = t.run_id
JOIN worker w ON w.id = r.worker_id
WHERE m.name LIKE 'health.%'
  AND t.status IN ('ok', 'failed', 'timeout', 'interrupted', 'warmup')
  AND t.superseded = 0
ORDER BY w.id, r.idx, t.position, t.id
"""


def health_rows(path: str | Path) -> pd.DataFrame:
    """The health metrics of a store's trials as long-format rows (``run, order, position,
    test, metric, value, status, worker, started, ended``): one row per trial and measure
    taken (a measure not taken has no row), of the trials the long format has (warmups
    with their status; no superseded or running trial). A test's own metric named like
    one is the long format's already, and not repeated here. Added to
    :meth:`Store.long_frame`'s rows, this is the frame
    :func:`washout.stats.health.split_by_health` reads."""
    import pandas as pd

    from washout.data.longformat import COLUMNS
    from washout.data.store import Store

    store = Store.open(path, readonly=True)
    try:
        own = {(test, m) for test, metrics in store.tests() for m in metrics}
        rows = [r for r in store.conn.execute(_ROWS) if (r[3], r[4]) not in own]
    finally:
        store.close()
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return frame.astype({"run": "int64", "position": "int64", "value": "float64"})
