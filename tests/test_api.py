"""The public Python API (docs/api.md): its example runs as written, its names exist, it
reads the sources the CLI reads, and ``import washout`` stays light."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CONFIGSPACES, MEMCACHED, ROOT, washout

import washout as api
from washout.errors import StoreBusyError, StoreExistsError

SPEC = """
[experiment]
name = "api-test"
runs = 6
seed = 3

[[test]]
name = "a"
command = "true"

[[test]]
name = "b"
command = "sleep 0.001"
"""

API = {
    "run",
    "RunResult",
    "load",
    "analyze",
    "OrderAnalysis",
    "carryover",
    "drift",
    "claims",
    "explore",
    "Store",
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real experiment run through the API once, for the tests that read it."""
    db = tmp_path_factory.mktemp("api") / "api.db"
    result = api.run(SPEC, db=db)
    assert result.db == db and result.complete
    return db


def test_the_docs_example_runs_as_written(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 1
    # this checkout's washout, wherever the example runs
    path = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", blocks[0]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert proc.returncode == 0, proc.stderr
    assert "'complete': True" in proc.stdout
    assert re.search(r"^(order-matters|no-evidence)$", proc.stdout, re.M)
    assert list(tmp_path.iterdir()) == []  # it wrote only into its temporary directory


def test_all_names_the_api_and_each_name_resolves() -> None:
    assert API <= set(api.__all__)
    for name in api.__all__:
        assert getattr(api, name) is not None
    from washout.data.store import Store
    from washout.stats.order import OrderAnalysis

    assert api.Store is Store and api.OrderAnalysis is OrderAnalysis
    with pytest.raises(AttributeError):
        api.no_such_name  # noqa: B018


@pytest.mark.parametrize("touch", ["", "washout.Store; washout.OrderAnalysis; washout.run"])
def test_import_washout_does_not_import_pandas_numpy_or_scipy(touch: str) -> None:
    code = (
        f"import sys, washout; {touch}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pandas', 'numpy', 'scipy')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.strip() == "[]"


def test_run_result_is_frozen_plain_data(store: Path) -> None:
    result = api.RunResult(store, 3, 24, 24, 0, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.seed = 4  # type: ignore[misc]
    assert result.to_dict() == {
        "db": str(store),
        "seed": 3,
        "planned": 24,
        "executed": 24,
        "failures": 0,
        "complete": True,
        "stopped": None,
        "worker_errors": {},
    }


def test_run_from_a_spec_file_matches_the_cli(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    result = api.run(spec, db=tmp_path / "py.db", runs=2, seed=9)
    assert (result.seed, result.planned, result.executed, result.failures) == (9, 8, 8, 0)
    assert result.complete and result.stopped is None and result.worker_errors == {}
    washout("run", spec, "--db", tmp_path / "cli.db", "--runs", "2", "--seed", "9", "-q")
    py, cli = api.load(result.db), api.load(tmp_path / "cli.db")
    key = ["order", "run", "position", "test"]
    assert py[key].sort_values(key).values.tolist() == cli[key].sort_values(key).values.tolist()
    with pytest.raises(StoreExistsError):  # never over an existing store
        api.run(spec, db=result.db)
    from washout.data.store import writer_of

    assert writer_of(result.db) is None  # run() closed the store: its writer lock is free


def test_run_defaults_to_the_clis_store_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    first, second = api.run(SPEC, runs=1), api.run(SPEC, runs=1)
    assert first.db == Path("washout-results/api-test.db")
    assert second.db == Path("washout-results/api-test-2.db")


def test_store_is_a_read_only_context_manager_that_closes(store: Path) -> None:
    from washout.harness.engine import reopen_store

    with api.Store.open(store, readonly=True) as opened, reopen_store(store) as writer:
        assert opened.counts() == {"ok": 24}  # a reader takes no writer lock
        with pytest.raises(StoreBusyError):
            reopen_store(store)
        writer.event("note", "written while a reader reads")
    with pytest.raises(Exception, match="closed"):
        opened.counts()
    with api.Store.open(store) as again:
        assert again.events()[-1][2:] == ("note", "written while a reader reads")


def test_the_analyses_take_a_path_or_a_frame(store: Path) -> None:
    frame = api.load(store)  # every metric: wall, the CPU times, peak memory and health
    counts = frame["metric"].value_counts().to_dict()
    health = {m: n for m, n in counts.items() if m.startswith("health.")}
    assert {m: n for m, n in counts.items() if m not in health} == dict.fromkeys(
        ["wall", "user", "system", "max_rss"], 24
    )
    assert "health.other_cpu" in health and all(n <= 24 for n in health.values())
    assert set(frame["test"]) == {"a", "b"} and frame["started"].notna().all()
    assert str(frame["started"].dt.tz) == "UTC"  # datetimes, not text
    assert (frame["ended"] > frame["started"]).all()
    by_path, by_frame = api.analyze(store), api.analyze(frame, alpha=0.05)
    assert by_path.to_dict() == by_frame.to_dict()
    assert isinstance(by_path, api.OrderAnalysis) and len(by_path.tests) == 2
    assert api.analyze(store, correction="holm").correction == "holm"
    same = [(api.carryover(x).to_dict(), api.drift(x).to_dict()) for x in (store, frame)]
    assert json.dumps(same[0]) == json.dumps(same[1])  # NaN-aware: NaN != NaN
    (claim,) = api.claims(store, ["b > a"])
    assert claim.claim == "b > a" and claim.fixed is not None and claim.random is not None


def test_load_reads_an_ordersage_file_as_analyze_does() -> None:
    frame = api.load(MEMCACHED)
    assert {"test", "order", "metric", "value"} <= set(frame.columns)
    assert api.analyze(MEMCACHED).to_dict() == api.analyze(frame).to_dict()


def test_explore_matches_the_cli() -> None:
    data = CONFIGSPACES / "silo_ycsb.csv"
    result = api.explore(data, metric="tput", full=True)
    assert result.settings_measured == result.settings_total == 144
    cli = washout("explore", data, "--metric", "tput", "--full", "--format", "json")
    assert json.loads(cli.stdout)["significant_terms"] == result.to_dict()["significant_terms"]
