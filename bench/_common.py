"""Helpers shared by the benchmarks: where washout is, what machine this is, timing children.

Every benchmark prints a header (machine, date, load average, versions) so its figures can
be pasted into bench/RESULTS.md as they are.
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
WASHOUT = str(VENV_BIN / "washout") if (VENV_BIN / "washout").exists() else shutil.which("washout")
PYTHON = sys.executable


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def compile_washout() -> str:
    """Byte-compile washout's modules where they are not yet (an installed copy has them, and
    an editable one writes them on its first run), so no timed process compiles them: where
    PYTHONDONTWRITEBYTECODE is set, as on this project's machines, every washout process
    compiled the modules it imported, ~35 ms of `washout analyze`. What was done, for the
    header."""
    import compileall

    import washout

    package = Path(washout.__file__).parent
    compileall.compile_dir(package, quiet=1)
    return f"byte-compiled ({package})"


def header(title: str) -> None:
    """The machine and moment the figures belong to, and washout byte-compiled
    (:func:`compile_washout`)."""
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    print(f"# {title}")
    print(f"date (UTC):   {datetime.now(UTC).strftime('%Y-%m-%d %H:%M')}")
    print(
        f"machine:      {os.cpu_count()} x {cpu_model()}, {mem_gb:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}"
    )
    print(f"python:       {platform.python_version()} ({sys.executable})")
    print(f"load average: {load()} (at start)")
    print(f"command:      {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"washout:      {compile_washout()}")
    sys.stdout.flush()


@dataclass(frozen=True)
class ChildRun:
    """Wall time, CPU time and peak RSS of one child process."""

    wall: float
    cpu: float
    max_rss_mb: float
    returncode: int


def run_child(
    argv: list[str],
    stdout: int | None = subprocess.DEVNULL,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
) -> ChildRun:
    """Run ``argv`` to completion; wall from fork to reap, rusage of that child alone (wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, env=env, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {err[-2000:]}")
    return ChildRun(
        wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, proc.returncode
    )


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def fmt_runs(xs: list[float], unit: str = "s", digits: int = 3) -> str:
    """``median (min .. max, n = k)``."""
    return (
        f"{statistics.median(xs):.{digits}f} {unit} (min {min(xs):.{digits}f}, "
        f"max {max(xs):.{digits}f}, n = {len(xs)})"
    )


def verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def self_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
