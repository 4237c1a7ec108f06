"""The case studies under examples/ run end to end on real software, shortened.

For each example: its install script's prerequisite check (``install.sh --check``), then
``washout run SPEC --runs 2`` against the real redis-server, fio, sysbench or numpy, then
``washout export``, ``washout analyze`` and ``washout report`` on the store it wrote. The
programs come from ``scripts/services/examples.sh``; without them a test is skipped with that
hint. Sizes are cut through each example's environment variables (fewer requests, shorter
sysbench runs, smaller files, fewer kernel calls), so that the module stays under three minutes.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, is_health, washout

from washout.data.longformat import RESOURCE_METRICS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the examples need Linux"),
]

RUNS = 2  # per order kind


@dataclass(frozen=True)
class Example:
    """An example's spec and what its store must hold: tests in spec order, their metrics."""

    name: str
    spec: str
    metrics: dict[str, tuple[str, ...]]


REDIS = Example(
    "redis",
    "examples/redis/spec.toml",
    {
        t: ("rps", "p50_ms", "p99_ms", "server_cpu_ms")
        for t in ("set", "get", "incr", "lpush", "lpop", "sadd", "hset", "mset")
    },
)
SYSBENCH = Example(
    "sysbench",
    "examples/sysbench/spec.toml",
    {
        "cpu": ("events_per_s", "p99_ms"),
        "memory": ("MiB_per_s", "p99_ms"),
        "threads": ("events", "p99_ms"),
        "mutex": ("total_s", "avg_ms"),
    },
)
NUMPY = Example(
    "numpy",
    "examples/numpy/spec.toml",
    {t: ("median_s", "first_s", "wall") for t in ("softmax", "spmv", "sort", "fft")},
)
PAGECACHE = {
    spec: Example(
        "pagecache",
        f"examples/pagecache/{spec}",
        {t: ("KiB_per_s", "clat_p99_ns") for t in ("write-a", "write-b", "seqread", "randread")},
    )
    for spec in ("spec.toml", "spec-drop.toml")
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def disk_dir():
    """A fresh directory on disk (/var/tmp): pytest's tmp_path may be on a tmpfs, which has
    no page cache of its own to drop and no O_DIRECT on older kernels."""
    path = Path(tempfile.mkdtemp(prefix="washout-examples-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def example_env(tmp_path: Path, disk_dir: Path) -> dict[str, str]:
    """The environment the examples run in here: small sizes, a private port and paths."""
    return {
        **os.environ,
        "REDIS_PORT": str(_free_port()),
        "REDIS_DIR": str(tmp_path / "redis"),
        "REDIS_REQUESTS": "2000",
        "PAGECACHE_DIR": str(disk_dir / "pagecache"),
        "PAGECACHE_SIZE": "16m",
        "SYSBENCH_TIME": "1",
        "NUMPY_PYTHON": sys.executable,
        "NUMPY_REPEATS": "2",
    }


def _prerequisites(name: str, env: dict[str, str]) -> None:
    """The example's own install script in check mode; skip with its message when unmet."""
    proc = subprocess.run(
        ["bash", str(ROOT / "examples" / name / "install.sh"), "--check"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    if proc.returncode != 0:
        pytest.skip(f"examples/{name}: {proc.stderr.strip()}")


def _run_example(example: Example, tmp_path: Path, env: dict[str, str]) -> None:
    """Run the spec shortened, then check the store, the analysis and the report."""
    _prerequisites(example.name, env)
    db = tmp_path / "results.db"
    washout(
        "run", example.spec, "--runs", RUNS, "--db", db, "--quiet", cwd=ROOT, env=env, timeout=150
    )

    pairs = {(t, m) for t, metrics in example.metrics.items() for m in metrics}
    rows = list(csv.DictReader(io.StringIO(washout("export", db).stdout)))
    rows = [  # the spec's metrics
        r for r in rows if r["metric"] not in RESOURCE_METRICS and not is_health(r["metric"])
    ]
    assert len(rows) == 2 * RUNS * len(pairs)
    assert {r["status"] for r in rows} == {"ok"}, [r for r in rows if r["status"] != "ok"][:3]
    assert {r["order"] for r in rows} == {"fixed", "random"}
    assert {(r["test"], r["metric"]) for r in rows} == pairs
    values = [float(r["value"]) for r in rows]
    assert all(math.isfinite(v) and v > 0 for v in values), values
    fixed = {(r["test"], int(r["position"])) for r in rows if r["order"] == "fixed"}
    assert fixed == {(t, i) for i, t in enumerate(example.metrics)}

    analysis = json.loads(washout("analyze", db, "--format", "json").stdout)["order"]
    assert {(t["test"], t["metric"]) for t in analysis["tests"]} == pairs
    assert all(t["n_fixed"] == RUNS and t["n_random"] == RUNS for t in analysis["tests"])
    assert analysis["family_size"] == len(pairs)
    assert analysis["verdict"] in ("no-evidence", "order-matters")
    table = washout("analyze", db).stdout
    assert "order matters" in table.lower()  # the verdict line
    assert all(test in table for test in example.metrics)

    report = tmp_path / "report.html"
    washout("report", db, "-o", report, timeout=300)
    html = report.read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html")
    assert all(test in html for test in example.metrics)


@pytest.mark.redis
def test_redis_example(tmp_path: Path, example_env: dict[str, str]) -> None:
    _run_example(REDIS, tmp_path, example_env)
    port = int(example_env["REDIS_PORT"])
    with socket.socket() as sock:  # teardown stopped the private server ...
        assert sock.connect_ex(("127.0.0.1", port)) != 0, f"redis still listens on {port}"
    assert not Path(example_env["REDIS_DIR"]).exists()  # ... and removed its directory


@pytest.mark.parametrize("spec", sorted(PAGECACHE))
def test_pagecache_example(spec: str, tmp_path: Path, example_env: dict[str, str]) -> None:
    _run_example(PAGECACHE[spec], tmp_path, example_env)
    assert not Path(example_env["PAGECACHE_DIR"]).exists(), "teardown left the data files"


def test_sysbench_example(tmp_path: Path, example_env: dict[str, str]) -> None:
    _run_example(SYSBENCH, tmp_path, example_env)


def test_numpy_example(tmp_path: Path, example_env: dict[str, str]) -> None:
    _run_example(NUMPY, tmp_path, example_env)


def _cached_pages(path: Path) -> int:
    """Pages of the file in the page cache, as fincore(1) (mincore(2)) counts them."""
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "PAGES", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.strip())


@pytest.mark.skipif(
    shutil.which("fincore") is None, reason="fincore missing: run scripts/services/examples.sh"
)
@pytest.mark.parametrize("way", ["", "fadvise"])
def test_pagecache_drop_reset_evicts_the_data(way: str, disk_dir: Path) -> None:
    """The drop reset leaves no page of the data cached: by drop_caches where it can (root),
    by fadvise on the files otherwise (forced with PAGECACHE_DROP=fadvise)."""
    data = disk_dir / "data"
    (data / "sub").mkdir(parents=True)
    files = [data / "f.dat", data / "sub" / "g.dat"]
    for f in files:
        f.write_bytes(os.urandom(4 << 20))
        f.read_bytes()
    subprocess.run(["sync"], check=True)
    pages = (4 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert [_cached_pages(f) for f in files] == [pages, pages]
    proc = subprocess.run(
        ["sh", str(ROOT / "examples/pagecache/drop-cache.sh"), str(data)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PAGECACHE_DROP": way},
    )
    if way == "fadvise" or os.geteuid() != 0:
        assert proc.stdout.startswith("evicted"), proc.stdout
    else:
        assert proc.stdout.startswith("dropped the page cache"), proc.stdout
    assert [_cached_pages(f) for f in files] == [0, 0]
