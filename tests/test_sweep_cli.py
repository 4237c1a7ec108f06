"""washout explore as a user runs it: a real process, real files, JSON and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CONFIGSPACES as FIXTURES

ROOT = Path(__file__).resolve().parents[1]
WASHOUT = [sys.executable, "-c", "from washout.cli import main; main()"]
KEYS = {
    "sampling_rate",
    "settings_measured",
    "settings_total",
    "terminated",
    "r2_validation",
    "model",
    "sampler",
    "significant_terms",
    "important_points",
    "ranges",
}


def _run(*args: str) -> subprocess.CompletedProcess:
    """A real washout process (stdout, stderr, exit code as a user sees them)."""
    return subprocess.run([*WASHOUT, *args], capture_output=True, text=True, timeout=300)


def _call(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, *args: str
) -> subprocess.CompletedProcess:
    """The console entry point in this process (same code path, no interpreter start-up)."""
    from washout.cli import main

    monkeypatch.setattr(sys, "argv", ["washout", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    out, err = capsys.readouterr()
    code = exit_.value.code or 0
    return subprocess.CompletedProcess(args, code, out, err)


def test_explore_json_on_herd(capsys, monkeypatch) -> None:
    """The default method on herd, seed 1 (its slowest seed: 54 settings, where 8 of 10 seeds
    stop at 27): it stops within the paper's 10% with the full data's important term and
    points (bench/sweep_quality.py measures every seed)."""
    proc = _run(
        "explore",
        str(FIXTURES / "herd_ycsb.csv"),
        "--metric",
        "tput",
        "--seed",
        "1",
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert KEYS | {"r2_unmeasured"} <= set(out)
    assert out["settings_total"] == 600
    assert out["sampling_rate"] == pytest.approx(out["settings_measured"] / 600)
    assert out["terminated"] is True
    assert len(out["r2_validation"]) == 10 and min(out["r2_validation"]) >= 0.9
    assert out["r2_unmeasured"] > 0.8
    shares = [t["share"] for t in out["significant_terms"]]
    assert (
        shares == sorted(shares, reverse=True)
        and out["significant_terms"][0]["term"] == "value_size"
    )
    for point in out["important_points"]:
        assert set(point) >= {"term", "parameter", "fixed", "type", "value", "turn_ratio"}
        assert point["type"] in ("knee", "turning")
        assert point["parameter"] in point["term"].split(":")
        assert point["parameter"] in out["ranges"]
    # conclusions drawn at 10% agree with the analysis of all 600 settings
    full = json.loads(
        _call(
            capsys,
            monkeypatch,
            "explore",
            str(FIXTURES / "herd_ycsb.csv"),
            "--metric",
            "tput",
            "--full",
            "--format",
            "json",
        ).stdout
    )
    assert out["method"] == "ours" and out["coding"] == "sum" and out["validation"] == "folds"
    assert out["settings_measured"] <= 60  # at most the paper's 10% of the space
    important = [
        {t["term"] for t in r["significant_terms"] if t["share"] >= 0.1} for r in (out, full)
    ]
    assert important[0] == important[1] == {"value_size"}
    assert [(p["term"], p["type"], p["value"]) for p in out["important_points"]] == [
        (p["term"], p["type"], p["value"]) for p in full["important_points"]
    ]


def test_explore_full_and_table(capsys, monkeypatch) -> None:
    proc = _call(
        capsys,
        monkeypatch,
        "explore",
        str(FIXTURES / "silo_ycsb.csv"),
        "--metric",
        "tput",
        "--full",
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["settings_measured"] == out["settings_total"] == 144
    assert out["sampling_rate"] == 1.0 and "r2_unmeasured" not in out
    table = _call(
        capsys,
        monkeypatch,
        "explore",
        str(FIXTURES / "silo_ycsb.csv"),
        "--metric",
        "tput",
        "--param",
        "threads",
        "--param",
        "keys",
        "--param",
        "ReadRatio",
        "--full",
    )
    assert table.returncode == 0, table.stderr
    assert "Significant terms" in table.stdout and "Measured 144 of 144" in table.stdout


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--metric", "tputs"], "herd_ycsb.csv: --metric = 'tputs': no such column"),
        (
            ["--metric", "tput", "--param", "zipff"],
            "herd_ycsb.csv: --param = 'zipff': no such column",
        ),
        (["--metric", "tput", "--sampler", "sobol"], "--sampler = 'sobol': unknown sampler"),
        (["--metric", "tput", "--model", "gp"], "--model = 'gp': unknown model"),
        (["--metric", "tput", "--format", "yaml"], "--format = 'yaml': unknown format"),
    ],
)
def test_bad_input_is_one_line(capsys, monkeypatch, args: list[str], expected: str) -> None:
    proc = _call(capsys, monkeypatch, "explore", str(FIXTURES / "herd_ycsb.csv"), *args)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and expected in proc.stderr
    assert "Traceback" not in proc.stderr


def test_non_numeric_metric_names_row_and_value(tmp_path: Path, capsys, monkeypatch) -> None:
    data = tmp_path / "space.csv"
    data.write_text("a,b,y\n1,1,3.5\n1,2,oops\n2,1,4\n2,2,5\n")
    proc = _run("explore", str(data), "--metric", "y")  # a real process: exit code and stderr
    assert proc.returncode == 2
    assert f"{data}: column y, row 3 = 'oops': metric is not a finite number" in proc.stderr
    missing = _call(capsys, monkeypatch, "explore", str(tmp_path / "nope.csv"), "--metric", "y")
    assert missing.returncode == 2 and "nope.csv: no such file" in missing.stderr


def test_explore_versus_a_second_system(tmp_path: Path, capsys, monkeypatch) -> None:
    """Two systems saturating at x = 3 and x = 6: the ranges cover both knees."""
    import numpy as np

    paths = []
    for name, cap in (("a", 3), ("b", 6)):
        rng = np.random.default_rng(1)
        rows = ["x,z,y"] + [
            f"{x},{z},{100 * min(x, cap) + 4 * x + 5 * z + rng.normal(0, 1):.3f}"
            for x in range(1, 9)
            for z in range(3)
        ]
        path = tmp_path / f"{name}.csv"
        path.write_text("\n".join(rows) + "\n")
        paths.append(path)
    proc = _call(
        capsys,
        monkeypatch,
        "explore",
        str(paths[0]),
        "--metric",
        "y",
        "--full",
        "--versus",
        str(paths[1]),
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["versus"]["data"] == str(paths[1])
    assert out["ranges"] == {"x": [[1, 3], [3, 6], [6, 8]]}
    other = tmp_path / "other.csv"
    other.write_text("x,w,y\n1,1,2\n2,1,3\n")
    bad = _call(
        capsys, monkeypatch, "explore", str(paths[0]), "--metric", "y", "--versus", str(other)
    )
    assert bad.returncode == 2 and "other.csv: --param = 'z': no such column" in bad.stderr


def test_explore_says_when_a_metric_does_not_vary_or_fits_exactly(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    rows = [(a, b, c) for a in (1, 2, 3, 4) for b in (10, 20, 30) for c in ("x", "y")]
    data = tmp_path / "space.csv"
    data.write_text(
        "a,b,c,flat,additive\n"
        + "".join(f"{a},{b},{c},5,{3 * a + 0.5 * b + 2 * (c == 'y')}\n" for a, b, c in rows)
    )
    flat = _call(
        capsys,
        monkeypatch,
        "explore",
        str(data),
        "--metric",
        "flat",
        "--param",
        "a",
        "--param",
        "b",
        "--param",
        "c",
    )
    assert flat.returncode == 2 and flat.stderr.count("\n") == 1
    assert f"{data}: metric 'flat' does not vary (all 24 settings measured 5)" in flat.stderr
    additive = _call(
        capsys,
        monkeypatch,
        "explore",
        str(data),
        "--metric",
        "additive",
        "--param",
        "a",
        "--param",
        "b",
        "--param",
        "c",
        "--full",
        "--format",
        "json",
    )
    result = json.loads(additive.stdout)
    assert result["exact_fit"] is True
    assert {t["term"] for t in result["significant_terms"]} == {"a", "b", "c"}
    assert all(t["share"] > 0.01 for t in result["significant_terms"])


def test_method_paper_is_the_papers_components(capsys, monkeypatch) -> None:
    """--method paper is exactly its sampler, model, rule, conclusions, coding and steps;
    an explicit option overrides one component of a method."""

    def silo(*options: str) -> dict:
        data = str(FIXTURES / "silo_ycsb.csv")
        args = ("explore", data, "--metric", "tput", *options, "--format", "json")
        return json.loads(_call(capsys, monkeypatch, *args).stdout)

    paper = silo("--method", "paper")
    spelled = silo(
        *("--sampler", "random", "--model", "anova", "--rule", "paper"),
        *("--conclude", "measured", "--coding", "treatment"),
        *("--start", "0.05", "--step", "0.05", "--growth", "1", "--validation", "random"),
    )
    assert paper["method"] == spelled["method"] == "paper" and paper["validation"] == "random"
    assert paper == spelled
    assert [s["sampling_rate"] for s in paper["steps"]][:2] == pytest.approx([7 / 144, 14 / 144])
    mixed = silo("--method", "paper", "--model", "smooth", "--budget", "14")
    assert (mixed["method"], mixed["model"], mixed["sampler"]) == ("custom", "smooth", "random")
