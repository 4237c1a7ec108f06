"""washout analyze through the real console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ARTIFACT, MEMCACHED, NPBENCH
from test_stats_ordersage_compat import assert_matches_node_stats

from washout.data.sources import load_trials
from washout.errors import WashoutError
from washout.stats.order import JSON_TEST_KEYS, analyze_order

WASHOUT = Path(sys.executable).parent / "washout"


def analyze(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(WASHOUT), "analyze", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def test_table_leads_with_the_verdict_and_marks_the_significant_test() -> None:
    proc = analyze(MEMCACHED, "--ci-confidence", "0.95")  # the paper's CI cases: 95% CIs
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("Order matters: 1 of 3 comparisons differs")
    assert "alpha/3 = 0.0167" in lines[0] and "./get_hits_test.sh" in lines[0]
    head = next(line for line in lines if "┃" in line)
    assert [c.strip() for c in head.split("┃")][0] == "test"  # every column has a title
    hits = next(line for line in lines if "get_hits" in line and "│" in line)
    # Delta% of the medians beside them: (70.15 k - 67.70 k) / 70.15 k
    assert "70.15 k" in hits and "67.70 k" in hits and "+3.50" in hits
    assert "3 inconclusive" in hits and hits.rstrip().endswith("yes")
    sets = next(line for line in lines if "cmd_set" in line and "│" in line)
    assert sets.rstrip().endswith("no") and "2 likely no change" in sets


def test_table_for_no_evidence_says_so_with_family_size_and_detectable_shift() -> None:
    proc = analyze(NPBENCH)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("No evidence that order matters: 0 of 3 comparisons")
    assert "would detect shifts of about" in proc.stdout


@pytest.mark.parametrize("source", [MEMCACHED, NPBENCH])
@pytest.mark.parametrize("correction", ["bonferroni", "holm"])
def test_json_is_the_python_api_result(source: Path, correction: str) -> None:
    import washout

    proc = analyze(source, "--format", "json", "--correction", correction)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema"] == "washout-analysis" and data["schema_version"] == 1
    expected = washout.analyze(source, correction=correction)  # type: ignore[arg-type]
    assert data == json.loads(json.dumps(expected.to_dict()))
    assert [s["test"] for s in data["comparison"]["summaries"]] == sorted(
        {t["test"] for t in data["order"]["tests"]}
    )  # hyperfine's comparison beside the analysis
    assert data["order"] == json.loads(
        json.dumps(analyze_order(load_trials(source)[0], correction=correction).to_dict())
    )
    assert all(list(t) == list(JSON_TEST_KEYS) for t in data["order"]["tests"])
    assert data["order"]["alpha_per_test"] == (0.05 / 3 if correction == "bonferroni" else None)


def test_ci_confidence_defaults_to_the_verdicts_level_and_the_option_sets_it() -> None:
    default = json.loads(analyze(NPBENCH, "--format", "json").stdout)["order"]["tests"]
    assert all(1 - 0.05 / 3 <= t["ci_confidence_fixed"] < 1 for t in default)
    assert (
        default
        == json.loads(
            analyze(NPBENCH, "--format", "json", "--ci-confidence", str(1 - 0.05 / 3)).stdout
        )["order"]["tests"]
    )
    loose = json.loads(analyze(NPBENCH, "--format", "json", "--ci-confidence", "0.9").stdout)
    assert all(0.9 <= t["ci_confidence_fixed"] < 1 - 0.05 / 3 for t in loose["order"]["tests"])


def test_json_never_contains_nan_tokens(tmp_path: Path) -> None:
    path = tmp_path / "l.csv"
    path.write_text(
        "run,order,position,test,metric,value,status,worker,started,ended\n"
        "0,fixed,0,a,wall,0,ok,local,,\n1,random,0,a,wall,0,ok,local,,\n"
        "0,fixed,1,b,wall,,failed,local,,\n"
    )
    proc = analyze(path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert "NaN" not in proc.stdout and "Infinity" not in proc.stdout
    data = json.loads(proc.stdout)
    first = data["order"]["tests"][0]
    assert first["kw_p"] is None and first["delta_pct"] is None


def test_by_worker_and_csv_format() -> None:
    proc = analyze(NPBENCH, "--by-worker", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    head, *rows = proc.stdout.strip().splitlines()
    assert head.startswith("test,metric,worker,n_fixed,n_random,")
    assert len(rows) == 3 and all(",c220g2-010627.wisc.cloudlab.us," in r for r in rows)


def test_compat_ordersage_csv_reproduces_memcached_node_stats() -> None:
    proc = analyze(MEMCACHED, "--compat", "ordersage", "--format", "csv", "--ci-confidence", "0.95")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("exp_command,coeff_of_variation,KW_dist_type,")
    assert_matches_node_stats(
        proc.stdout, ARTIFACT / "memcached" / "node_stats.csv", full_precision=True
    )


def test_compat_ordersage_csv_reproduces_npbench_node_stats() -> None:
    proc = analyze(NPBENCH, "--compat", "ordersage", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("test_command,coeff_of_variation_fixed,")
    assert_matches_node_stats(
        proc.stdout, ARTIFACT / "npbench" / "node_stats.csv", full_precision=False
    )


def test_compat_table_is_readable() -> None:
    proc = analyze(NPBENCH, "--compat", "ordersage")
    assert proc.returncode == 0, proc.stderr
    assert "KW_p-value" in proc.stdout and "./npBench-softmax.sh" in proc.stdout


def test_a_store_written_by_washout_run_is_analyzed(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    subprocess.run(
        [
            str(WASHOUT),
            "run",
            "true",
            "sleep 0.01",
            "--runs",
            "12",  # each command 12 times: 6 per order kind
            "--seed",
            "3",
            "--db",
            str(db),
            "-q",
        ],
        check=True,
        capture_output=True,
        timeout=120,
        cwd=tmp_path,
    )
    proc = analyze(db, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)["order"]
    assert data["family_size"] == 2
    assert {(t["test"], t["metric"], t["n_fixed"], t["n_random"]) for t in data["tests"]} == {
        ("true", "wall", 6, 6),
        ("sleep 0.01", "wall", 6, 6),
    }


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--format", "xml"], "--format = 'xml': expected one of table, json, csv"),
        (["--correction", "sidak"], "correction = 'sidak': expected one of bonferroni, holm"),
        (["--compat", "rebench"], "--compat = 'rebench': expected one of ordersage"),
        (["--alpha", "1.5"], "alpha = 1.5: expected a number between 0 and 1"),
        (["--ci-confidence", "95"], "ci-confidence = 95.0: expected a number between 0 and 1"),
    ],
)
def test_bad_options_are_one_line_errors(args: list[str], expected: str) -> None:
    proc = analyze(NPBENCH, *args)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"washout: error: {expected}"


def test_bad_input_is_one_line_naming_file_line_field_value(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(
        "run,order,position,test,metric,value,status,worker,started,ended\n"
        "0,fixed,0,a,wall,1,ok,local,,\n0,fixed,1,b,wall,inf,ok,local,,\n"
    )
    proc = analyze(path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (
        f"washout: error: {path}: line 3: value = inf: expected a finite number"
    )
    missing = analyze(tmp_path / "absent.csv")
    assert missing.returncode == 2 and "absent.csv: no such file" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("fmt", ["json", "table", "csv"])
def test_rows_checked_beside_the_analysis_still_stop_it(tmp_path: Path, fmt: str) -> None:
    """The order analysis of a long CSV alone runs while a forked child checks its order and
    status cells and its one ok row per trial: a bad row is still the one-line error, with
    nothing on stdout, and a good file still gives the analysis."""
    header = "run,order,position,test,metric,value,status,worker\n"
    rows = [
        f"{run},{order},{pos},{test},wall,{1 + run / 10 + pos},ok,n1\n"
        for run, order in enumerate(["fixed", "random"] * 6)
        for pos, test in enumerate(["a", "b"])
    ]
    good = tmp_path / "good.csv"
    good.write_text(header + "".join(rows))
    proc = analyze(good, "--format", fmt)
    assert proc.returncode == 0 and proc.stdout and not proc.stderr, proc.stderr
    cases = {
        "twice": (rows + rows[:2], "line 26: (run, position, test, metric, worker) = "),
        "order": (rows[:3] + [rows[3].replace("random", "rnd")] + rows[4:], "line 5: order = "),
        "status": (rows[:9] + [rows[9].replace(",ok,", ",okay,")] + rows[10:], "line 11: status"),
    }
    for name, (lines, expected) in cases.items():
        path = tmp_path / f"{name}.csv"
        path.write_text(header + "".join(lines))
        proc = analyze(path, "--format", fmt)
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert proc.stderr.startswith(f"washout: error: {path}: {expected}"), proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        _, info = load_trials(path, ("order", "test", "value"), defer_checks=True)
        assert info.check is not None
        with pytest.raises(WashoutError) as deferred:
            info.check()
        with pytest.raises(WashoutError) as at_once:
            load_trials(path, ("order", "test", "value"))
        assert (
            str(deferred.value) == str(at_once.value) == proc.stderr.split(": error: ")[1].strip()
        )


# -- the renderer the post-run summary reuses, called from Python -----------------------------


def test_render_analysis_marks_significant_rows_and_lists_warnings() -> None:
    import pandas as pd

    from washout.analysis.compute import analyze as analyze_frame
    from washout.analysis.result import Options
    from washout.report.render import Settings, renderer

    rows = []
    for worker in ("n1", "n2"):
        for i in range(8):
            for position, test in enumerate(("get", "set")):
                for order, shift in (("fixed", 0.0), ("random", 100.0)):
                    shifted = test == "get" and worker == "n1"
                    rows.append(
                        {
                            "run": 2 * i + (order == "random"),
                            "order": order,
                            "position": position,
                            "test": test,
                            "metric": "p99",
                            "value": 10.0 + i + (shift if shifted else 0.0),
                            "status": "ok",
                            "worker": worker,
                        }
                    )
    rows.append(
        {
            "run": 99,
            "order": "fixed",
            "position": 0,
            "test": "get",
            "metric": "p99",
            "value": None,
            "status": "timeout",
            "worker": "n2",
        }
    )
    analysis = analyze_frame(pd.DataFrame(rows), Options(by_worker=True))
    text = renderer("table")(analysis, Settings(width=160)).text
    first, *rest = text.splitlines()
    assert first.startswith("Order matters: 1 of 4 comparisons differs") and "get @ n1" in first
    n1 = next(line for line in rest if line.lstrip().startswith("get ") and " n1 " in line)
    n2 = next(line for line in rest if line.lstrip().startswith("get ") and " n2 " in line)
    # Delta% of the medians = (13.5 - 113.5) / 13.5 * 100
    assert n1.rstrip().endswith("yes") and "1 red flag" in n1 and "-740.74" in n1
    assert n2.rstrip().endswith("no") and "2 likely no change" in n2
    assert "get @ n2: 1 unsuccessful trial(s) excluded (fixed 1, random 0)" in text
    assert "Not analysed: 1 values of timeout trials" in text


def test_render_with_nothing_to_compare_says_so() -> None:
    import pandas as pd

    from washout.analysis.compute import analyze as analyze_frame
    from washout.report.render import Settings, renderer

    frame = pd.DataFrame(
        {
            "run": [0, 0],
            "order": ["fixed", "fixed"],
            "position": [0, 1],
            "test": ["a", "b"],
            "metric": ["wall", "wall"],
            "value": [1.0, 2.0],
            "status": ["ok", "ok"],
        }
    )
    analysis = analyze_frame(frame)
    assert analysis.order is None and analysis.verdict == "not-compared"
    assert renderer("table")(analysis, Settings()).text.startswith(
        "No order analysis: only fixed-order runs, so nothing to compare their order with"
    )


def three_tests_csv(tmp_path: Path) -> Path:
    """A long-format CSV of three tests, 40 runs alternating between the orders."""
    rows = ["run,order,test,metric,value,status"]
    rows += [
        f"{i},{'fixed' if i % 2 else 'random'},t{k},wall,{1 + i % 7 + k},ok"
        for i in range(40)
        for k in range(3)
    ]
    path = tmp_path / "long.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_order_analysis_of_a_csv_loads_no_scipy(tmp_path: Path) -> None:
    """scipy.stats cost a third of a paper-scale analysis to import (bench/analysis_scale.py):
    the CSV read and the order analysis, CIs, Shapiro-Wilk and verdict included, need none."""
    path = three_tests_csv(tmp_path)
    script = (
        "import sys, json\n"
        "from washout.data.sources import load_trials\n"
        "from washout.stats.order import analyze_order\n"
        f"frame, _ = load_trials({str(path)!r})\n"
        "result = analyze_order(frame).to_dict()\n"
        "assert result['tests'][0]['shapiro_p_fixed'] is not None\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('scipy'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_analyze_of_a_csv_imports_no_run_spec(tmp_path: Path) -> None:
    """The run spec (pydantic models, 0.05 s to import) only gives a store's claims: the
    command-line analysis of a CSV, timed by bench/analysis_scale.py, leaves it out."""
    path = three_tests_csv(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "washout", "analyze", str(path)]
        + ["--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["order"]["tests"]) == 3
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "washout.stats.order" in imported
    assert "washout.harness.spec" not in imported


def test_claims_json_and_words_judge_per_run_ratios(tmp_path: Path) -> None:
    """A truly 2% faster than B under 5% run-to-run noise: the JSON has the per-run ratio and
    its CI in each order, the random-order (order-safe) ratio on top and interaction_p; the
    sentence gives the ratio; it is evaluate_claims' own result."""
    from simulate_longformat import simulate

    from washout.stats.claims import evaluate_claims

    frame = simulate(
        tests=("A", "B"), means={"A": 98.0, "B": 100.0}, runs=15, cv=0.01, run_cv=0.05, seed=2
    )
    path = tmp_path / "claim.csv"
    frame.to_csv(path, index=False)
    proc = analyze(path, "--claim", "A < B", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    [claim] = json.loads(proc.stdout)["claims"]
    [expected] = evaluate_claims(load_trials(path)[0], ["A < B"])
    assert claim == json.loads(json.dumps(expected.to_dict()))
    assert claim["fixed"]["holds"] and claim["random"]["holds"]
    assert claim["order_changes_conclusion"] is False and claim["interaction_p"] > 0.05
    assert (claim["ratio"], claim["ratio_ci"]) == (
        claim["random"]["ratio"],
        claim["random"]["ratio_ci"],
    )
    for side in (claim["fixed"], claim["random"]):
        assert side["ratio_ci"][0] < 0.98 < side["ratio_ci"][1] < 1 and side["n_runs"] == 15
    words = " ".join(analyze(path, "--claim", "A < B").stdout.split())
    assert "Claim 'A < B' (wall) holds in both fixed and random order" in words
    assert f"per-run ratio A/B {claim['fixed']['ratio']:.4g} (" in words


def test_a_metric_the_source_lacks_is_a_one_line_error(tmp_path: Path) -> None:
    """--metric restricts carryover, drift and claims to a metric and compares on it: a
    misspelt name restricted them to nothing and left no comparison without a word. Now
    one line naming the source, the value and the metrics there are; a store's resource
    and health measures, read only where asked for, are names it takes."""
    from conftest import washout

    import washout as api

    db = tmp_path / "s.db"
    washout("run", "true", "/bin/true", "--runs", "4", "--seed", "1", "--db", db, "-q")
    proc = analyze(db, "--metric", "wal")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"washout: error: {db}: metric = 'wal': no such metric here "
        "(metrics: wall, user, system, max_rss, health.*)"
    ]
    for named in ("wall", "user", "health.other_cpu"):
        assert analyze(db, "--metric", named).returncode == 0
    ordersage = analyze(db, "--compat", "ordersage", "--metric", "wal")  # the same check
    assert ordersage.returncode == 2 and ordersage.stderr == proc.stderr
    proc = analyze(MEMCACHED, "--metric", "user")  # a CSV has what it holds
    assert proc.returncode == 2 and "metric = 'user'" in proc.stderr
    trials = load_trials(MEMCACHED)[0]
    with pytest.raises(WashoutError, match="the trials: metric = 'nope'"):
        api.analyze(trials, metric="nope")
