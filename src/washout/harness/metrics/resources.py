"""What every trial's processes used, as metrics: ``user`` and ``system`` CPU seconds of the
measured command's process tree and its peak RSS (``max_rss``, bytes), hyperfine's "User"
and "System" times and pyperf's ``mem_max_rss``. The executor measures them (locally
wait4(2), over SSH the shell's ``times`` and GNU time); a measure it could not take is
absent, never 0. A test's own metric of the same name wins. They are no source a spec
chooses: every trial has them (``washout.data.longformat.RESOURCE_METRICS``)."""

from __future__ import annotations

from collections.abc import Container

from washout.harness.executors.base import CommandResult


def resource_values(result: CommandResult, named: Container[str]) -> dict[str, float]:
    """The trial's resource metrics and its health metrics (:mod:`.health`), whatever its
    status, less those the test names itself."""
    return {
        k: v
        for part in (result.resources, result.health)
        for k, v in part.items()
        if k not in named
    }
