"""The health metrics' names (``health.*``, measured around every trial by
:mod:`washout.harness.metrics.health`). A store's long format has their rows where it has
the resource metrics' (``resources=True``: export, ``washout.load``, a report), one per
measure taken; the analyses leave both out unless a user names one
(:func:`washout.stats.trials.without_resource_metrics`).
"""

from __future__ import annotations

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
