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
import washout.errors as api_errors
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
    "compare",
    "Spec",
    "RunResult",
    "load",
    "analyze",
    "Analysis",
    "OrderAnalysis",
    "Comparison",
    "CarryoverResult",
    "DriftResult",
    "ClaimResult",
    "SweepResult",
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
    result = api.run(api.Spec.from_text(SPEC), db=db)
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
    spec = api.Spec.from_text(SPEC)
    first, second = api.run(spec, runs=1), api.run(spec, runs=1)
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
    # The same but for where they came from (the frame holds the resource metrics, which
    # hyperfine's comparison reads as the store's does, and the analyses leave out).
    assert {**by_path.to_dict(), "source": None} == {**by_frame.to_dict(), "source": None}
    assert by_path.source.kind == "store" and by_frame.source.kind == "frame"
    assert isinstance(by_path, api.Analysis) and by_path.order is not None
    assert len(by_path.order.tests) == 2 and by_path.comparison is not None
    holm = api.analyze(store, correction="holm")
    assert holm.order is not None and holm.order.correction == "holm"
    same = [(api.carryover(x).to_dict(), api.drift(x).to_dict()) for x in (store, frame)]
    assert json.dumps(same[0]) == json.dumps(same[1])  # NaN-aware: NaN != NaN
    (claim,) = api.claims(store, ["b > a"])
    assert claim.claim == "b > a" and claim.fixed is not None and claim.random is not None


def test_load_reads_an_ordersage_file_as_analyze_does() -> None:
    frame = api.load(MEMCACHED)
    assert {"test", "order", "metric", "value"} <= set(frame.columns)
    mask = {"source": None}
    assert {**api.analyze(MEMCACHED).to_dict(), **mask} == {**api.analyze(frame).to_dict(), **mask}


def test_explore_matches_the_cli() -> None:
    data = CONFIGSPACES / "silo_ycsb.csv"
    result = api.explore(data, metric="tput", full=True)
    assert result.settings_measured == result.settings_total == 144
    cli = washout("explore", data, "--metric", "tput", "--full", "--format", "json")
    assert json.loads(cli.stdout)["significant_terms"] == result.to_dict()["significant_terms"]


def test_the_quick_form_and_compare_from_python(tmp_path: Path) -> None:
    """hyperfine from Python: a list of commands is the quick form (``runs`` counts each
    command's runs over both order kinds, as ``--runs``), and ``compare`` returns the
    analysis the run's summary prints."""
    result = api.run(["true", "sleep 0.01"], runs=8, seed=2, db=tmp_path / "q.db")
    assert result.complete and result.planned == 16
    assert set(api.load(result.db)["order"]) == {"fixed", "random"}
    log = tmp_path / "cleaned"
    analysis = api.compare(
        "true", "sleep 0.01", runs=16, seed=2, db=tmp_path / "c.db", cleanup=f"echo x >> {log}"
    )
    assert log.read_text() == "x\n"  # hyperfine's --cleanup: once, after the last run
    assert analysis.comparison is not None and analysis.order is not None
    [ranking] = analysis.comparison.rankings
    assert ranking.fastest == "true" and ranking.test == "sleep 0.01" and ranking.significant
    assert analysis.carryover is not None and analysis.drift is not None  # as the summary
    with pytest.raises(api_errors.SpecError, match=r"warmup= go\(es\) with the quick form"):
        api.run(api.Spec.from_text(SPEC), warmup=2, db=tmp_path / "w.db")


def test_a_spec_is_a_path_or_a_typed_spec(tmp_path: Path) -> None:
    with pytest.raises(api_errors.SpecError, match="Spec.from_text"):
        api.run(SPEC, db=tmp_path / "t.db")  # text where a path is expected: said so
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    assert api.Spec.read(spec) == api.Spec(SPEC, str(spec))
    with pytest.raises(api_errors.SpecError, match="cannot read spec"):
        api.Spec.read(tmp_path / "absent.toml")


def test_an_unknown_option_is_one_line_and_mypy_sees_it(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'alpah'") as err:
        api.analyze(MEMCACHED, alpah=0.01)  # type: ignore[call-arg]
    assert "\n" not in str(err.value)
    with pytest.raises(api_errors.WashoutError, match=r"^alpha = 2: expected a number"):
        api.analyze(MEMCACHED, alpha=2)
    script = tmp_path / "typo.py"
    script.write_text("import washout\nwashout.analyze('x.csv', alpah=0.01)\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert 'Unexpected keyword argument "alpah" for "analyze"' in proc.stdout


def test_every_result_type_is_a_table_and_shows_in_a_notebook(store: Path) -> None:
    import pandas as pd

    analysis = api.analyze(store, carryover=True, drift=True, claims=["b > a"])
    parts = [
        analysis,
        analysis.order,
        analysis.comparison,
        analysis.carryover,
        analysis.drift,
        *(analysis.claims or ()),
        api.explore(CONFIGSPACES / "silo_ycsb.csv", metric="tput", full=True),
    ]
    types = [
        api.Analysis,
        api.OrderAnalysis,
        api.Comparison,
        api.CarryoverResult,
        api.DriftResult,
        api.ClaimResult,
        api.SweepResult,
    ]
    for part, kind in zip(parts, types, strict=True):
        assert isinstance(part, kind)
        frame = part.to_frame()
        assert isinstance(frame, pd.DataFrame) and len(frame) > 0, kind
        assert "<table" in part._repr_html_(), kind
    assert list(analysis.carryover.to_frame().columns)[:2] == ["test", "predecessor"]


def test_the_analysis_reads_back_from_its_json(store: Path) -> None:
    analysis = api.analyze(store, carryover=True, drift=True, claims=["b > a"])
    data = json.loads(json.dumps(analysis.to_dict(), allow_nan=False))
    again = api.Analysis.from_dict(data)
    assert again.to_dict() == data
    assert again.order == analysis.order and again.claims == analysis.claims
    with pytest.raises(api_errors.WashoutError, match="schema_version = 99"):
        api.Analysis.from_dict({**data, "schema_version": 99})
    with pytest.raises(api_errors.WashoutError, match=r"order.tests\[0\].n_fixed = 'x'"):
        bad = json.loads(json.dumps(data))
        bad["order"]["tests"][0]["n_fixed"] = "x"
        api.Analysis.from_dict(bad)


def test_a_script_that_runs_an_experiment_leaves_no_process_at_its_exit(tmp_path: Path) -> None:
    """In-process use (a script, a notebook): at the interpreter's exit the trial-group
    guard and the idle launchers are ended and reaped, not left running through its
    teardown ("ResourceWarning: subprocess N is still running", under -X dev)."""
    script = f"""
import atexit, washout
import washout.harness.executors.local as local
washout.run(["true"], runs=2, db={str(tmp_path / "s.db")!r})
guard, launchers = local._guard()._process, [l.process for l in local._IDLE_LAUNCHERS]
assert guard.poll() is None and launchers and all(p.poll() is None for p in launchers)
atexit._run_exitfuncs()
atexit._clear()
print(guard.returncode, [p.returncode for p in launchers])
"""
    proc = subprocess.run(
        [sys.executable, "-X", "dev", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    guard, launchers = proc.stdout.split(" ", 1)
    assert guard == "0" and "None" not in launchers  # both ended and reaped
    assert "ResourceWarning" not in proc.stderr
