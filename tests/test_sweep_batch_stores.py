"""Every store a sweep writes is a washout store: its spec is TOML, so status, analyze,
report and export read it as any other; ``washout sweep --method``; ``washout validate`` on
sweep specs."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from conftest import washout
from hypothesis import given
from hypothesis import strategies as st
from test_sweep_run import SPEC

from washout.harness.spec_toml import toml_text


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real sweep (two batches of real processes), run by the CLI."""
    root = tmp_path_factory.mktemp("swept")
    (root / "arith.toml").write_text(SPEC)
    washout("sweep", root / "arith.toml", "--dir", root / "out", "-q", cwd=root)
    return root / "out"


def test_status_analyze_report_export_read_a_sweeps_batch_stores(swept: Path) -> None:
    """They failed with "invalid TOML": the stores kept the batch's spec as JSON, although
    the sweep tells the user to run `washout status` on them."""
    settings = json.loads((swept / "sweep.json").read_text())["settings_measured"]
    stores = sorted(swept.glob("batch-*.db"))
    assert len(stores) == 2
    seen = 0
    for db in stores:
        status = washout("status", db).stdout
        assert "complete:" in status and "-batch00" in status
        analysis = washout("analyze", db).stdout
        exported = washout("export", db).stdout.splitlines()
        assert exported[0].startswith("run,order,position,test,metric,value,status")
        names = {line.split(",")[3] for line in exported[1:]}
        assert all(n.startswith("setting-") for n in names)
        assert all(name in analysis for name in names)
        seen += len(names)
        html = swept / f"{db.stem}.html"
        washout("report", db, "-o", html)
        assert next(iter(names)) in html.read_text()
    assert seen == settings  # every measured setting is a test of exactly one store


def test_a_batch_store_resumes_from_its_own_spec(swept: Path) -> None:
    proc = washout("resume", sorted(swept.glob("batch-*.db"))[0])
    assert "complete; nothing to resume" in proc.stdout


def test_the_stored_spec_is_toml_of_the_batch(swept: Path) -> None:
    import sqlite3

    db = sorted(swept.glob("batch-*.db"))[0]
    with sqlite3.connect(db) as conn:
        (text,) = conn.execute("SELECT spec_text FROM experiment").fetchone()
    data = tomllib.loads(text)
    assert data["experiment"]["orders"] == ["random"]
    assert data["reset"] == {"command": "true"}
    assert all(t["metrics"] == {"value": {"stdout": "last-number"}} for t in data["test"])


_KEYS = st.text(min_size=1, max_size=8)
_SCALARS = (
    st.text(max_size=12)
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.booleans()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=10,
)


@given(
    st.dictionaries(_KEYS, _SCALARS, max_size=3),
    st.dictionaries(_KEYS, st.dictionaries(_KEYS, _VALUES, max_size=4), max_size=3),
    st.lists(st.dictionaries(_KEYS, _VALUES, max_size=4), min_size=1, max_size=3),
)
def test_toml_text_reads_back_as_the_same_data(top: dict, tables: dict, tests: list) -> None:
    """Any keys (quotes, control characters, DEL, non-ASCII), nested tables and arrays:
    tomllib reads back exactly what was written."""
    data = {**top, **{k: v for k, v in tables.items() if k not in top}}
    data = {**data, "test": tests} if "test" not in data else data
    assert tomllib.loads(toml_text(data)) == data


def test_sweep_method_paper_is_the_papers_method(tmp_path: Path) -> None:
    """`washout sweep --method paper` means what `explore --method paper` does (the README
    and bench/sweep_gzip.toml said so; the option did not exist)."""
    spec = tmp_path / "plain.toml"
    plain = SPEC.replace('sampler = "coverage"\n', "")
    for line in ("start = 0.25\n", "step = 0.25\n", "growth = 1.0"):
        plain = plain.replace(line, "")
    spec.write_text(plain)
    out = json.loads(
        washout(
            "sweep", spec, "--method", "paper", "--dir", tmp_path / "p", "--format", "json", "-q"
        ).stdout
    )
    assert (out["method"], out["sampler"], out["model"], out["rule"]) == (
        "paper",
        "random",
        "anova",
        "paper",
    )
    assert (out["coding"], out["validation"], out["conclusions_from"]) == (
        "treatment",
        "random",
        "measured",
    )
    bad = washout("sweep", spec, "--method", "papr", "--dir", tmp_path / "q", check=False)
    assert bad.returncode == 2 and not (tmp_path / "q").exists()
    assert bad.stderr.strip() == (
        "washout: error: --method = 'papr': unknown method (choose from ours, paper)"
    )


def test_validate_checks_sweep_specs(tmp_path: Path) -> None:
    spec = tmp_path / "arith.toml"
    spec.write_text(SPEC)
    ok = washout("validate", spec).stdout
    assert ok.startswith(f"{spec}: valid. Sweep of 12 settings (a: 4 levels, b: 3 levels)")
    assert "first batch: 3 settings, 6 trials" in ok
    broken = {
        'stdout = "last-number"': ('stdout = "bogus"', "sweep.metrics.value.stdout = 'bogus'"),
        'timeout = "20s"': ('timeout = "20 parsecs"', "experiment.timeout = '20 parsecs'"),
        'command = "true"': ('comand = "true"', "unknown key 'comand' in [reset]"),
        "repeats = 2": ("repeats = 0", "sweep.repeats = 0"),
        'sampler = "coverage"': ('sampler = "coverge"', "sweep.sampler = 'coverge'"),
        "b = [0, 5, 10]": ("b = [0, 5, 5]", "sweep.params"),
    }
    for old, (new, said) in broken.items():
        bad = tmp_path / "bad.toml"
        bad.write_text(SPEC.replace(old, new))
        proc = washout("validate", bad, check=False)
        assert proc.returncode == 2, (new, proc.stdout)
        assert proc.stderr.startswith(f"washout: error: {bad}: ") and said in proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
        run = washout("sweep", bad, "--dir", tmp_path / "never", "-q", check=False)
        assert run.returncode == 2 and run.stderr == proc.stderr
        assert not (tmp_path / "never").exists()  # the error cost nothing


def test_a_sweep_result_that_cannot_be_written_is_one_line_and_keeps_the_stores(
    swept: Path, tmp_path: Path
) -> None:
    """sweep.json cannot be written (a directory took its name): one line naming --dir and
    the file, exit 2, every batch store and settings.csv kept whole."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(swept, out)
    (out / "sweep.json").unlink()
    (out / "sweep.json").mkdir()

    def trials() -> dict[str, list[tuple[object, ...]]]:
        import sqlite3

        return {
            p.name: sqlite3.connect(p).execute("SELECT * FROM trial ORDER BY id").fetchall()
            for p in out.glob("batch-*.db")
        }

    before = trials()
    (tmp_path / "arith.toml").write_text(SPEC)
    proc = washout("sweep", tmp_path / "arith.toml", "--dir", out, "-q", cwd=tmp_path, check=False)
    (line,) = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and line.startswith(f"washout: error: --dir = '{out}/sweep.json'")
    assert "Traceback" not in proc.stderr
    assert trials() == before and len(before) == 2
    assert (out / "settings.csv").read_text().startswith((swept / "settings.csv").read_text()[:20])
