"""Shared test helpers: the real CLI in a subprocess, and the published data in tests/data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "data"  # published data; data/README.md says whose
ARTIFACT = FIXTURES / "ordersage-artifact"  # the ordering-trap paper's memcached and npbench trials
MEMCACHED = ARTIFACT / "memcached" / "all_exp_results.csv"
NPBENCH = ARTIFACT / "npbench" / "all_test_results.csv"
CONFIGSPACES = FIXTURES / "configspaces"  # fully measured parameter spaces


def washout(*args: str | Path, cwd: Path | None = None, check: bool = True,
            timeout: float = 120, **kwargs) -> subprocess.CompletedProcess[str]:
    """Run the real ``washout`` CLI (this interpreter's package) and capture its output."""
    proc = subprocess.run([sys.executable, "-m", "washout", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"washout {' '.join(map(str, args))} exited {proc.returncode}\n"
                             f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


@pytest.fixture
def run_washout():
    return washout
