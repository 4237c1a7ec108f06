"""Carryover, drift and claims through the real CLI: analyze, report and the run summary."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, washout

from washout.data.sources import load_trials
from washout.stats.carryover import RESET, carryover
from washout.stats.drift import drift

MEMCACHED = FIXTURES / "ordersage-artifact" / "memcached" / "all_exp_results.csv"

SPEC = """
[experiment]
name = "claims"
runs = 8
seed = 4
claims = ["fast < slow", "slow > 100 * fast"]
[[test]]
name = "fast"
command = "sleep 0.01"
[[test]]
name = "slow"
command = "sleep 0.05"
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("why")
    spec = tmp / "c.toml"
    spec.write_text(SPEC)
    db = tmp / "c.db"
    out = washout("run", spec, "--db", db)
    return db, out.stdout


def test_run_summary_evaluates_the_specs_claims(store: tuple[Path, str]) -> None:
    _, summary = store
    # and says why order matters or not: first trial after the reset, carryover, drift
    assert "No evidence of carryover" in summary or "first trial after" in summary
    assert "no test follows more than one other test" in " ".join(summary.split())
    assert "drift" in summary
    assert "Claim 'fast < slow' (wall) holds in both fixed and random order" in summary
    assert "Claim 'slow > 100 * fast' (wall) holds in neither" in summary


def test_analyze_json_has_carryover_drift_and_claims(store: tuple[Path, str]) -> None:
    db, _ = store
    doc = json.loads(
        washout(
            "analyze", db, "--carryover", "--drift", "--claim", "slow > fast", "--format", "json"
        ).stdout
    )
    assert {"carryover", "drift", "claims", "order"} <= set(doc)
    assert doc["order"]["verdict"] in ("order-matters", "no-evidence")
    pairs = {(p["test"], p["predecessor"]) for p in doc["carryover"]["pairs"]}
    # two tests: each always follows the other, so the joint model compares no pair of
    # tests, only each test's first trial after the reset (and their mean)
    assert pairs == {("fast", "(reset)"), ("slow", "(reset)")}
    for p in doc["carryover"]["pairs"]:
        assert set(p) >= {
            "test",
            "predecessor",
            "metric",
            "n_after",
            "n_other",
            "delta_pct",
            "p",
            "significant",
        }
    assert all(len(p["ci"]) == 2 for p in doc["carryover"]["pairs"])
    assert [r["metric"] for r in doc["carryover"]["first_after_reset"]] == ["wall"]
    deltas = [abs(p["delta_pct"]) for p in doc["carryover"]["pairs"] if p["delta_pct"] is not None]
    assert deltas == sorted(deltas, reverse=True)
    against = {d["against"] for d in doc["drift"]["rows"]}
    assert against == {"position", "time_since_reset", "run", "wander"}
    claims = {c["claim"]: c for c in doc["claims"]}
    assert set(claims) == {"slow > fast", "fast < slow", "slow > 100 * fast"}  # CLI + spec
    assert claims["slow > fast"]["fixed"]["holds"] and claims["slow > fast"]["random"]["holds"]
    assert claims["slow > fast"]["order_changes_conclusion"] is False


def test_bad_claim_is_one_line(store: tuple[Path, str]) -> None:
    db, _ = store
    proc = washout("analyze", db, "--claim", "fast <", check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "fast <" in proc.stderr
    proc = washout("analyze", db, "--claim", "nope < fast", check=False)
    assert proc.returncode == 2 and "nope" in proc.stderr


def test_a_specs_claims_read_beside_the_analysis_still_refuse_csv_and_compat(
    store: tuple[Path, str],
) -> None:
    """A store's claims are read in a forked child while the order analysis runs; claims
    that a CSV or OrderSage-compatible output cannot say are still refused in one line."""
    db, _ = store
    refusal = (
        "washout: error: --carryover, --drift and --claim (or claims in the spec) go with "
        "--format table or json, without --compat"
    )
    for args in (["--format", "csv"], ["--compat", "ordersage"]):
        proc = washout("analyze", db, *args, check=False)
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert proc.stderr.strip() == refusal


def test_the_quick_form_says_it_cannot_judge_drift_rather_than_finding_it(tmp_path: Path) -> None:
    """Issue 27, as a new user tried it: ``washout run 'sleep 0.01' 'sleep 0.012'`` (10 runs
    per order kind) printed "drifts with the run index (across runs): Spearman rho = +1.00
    (n=3, p=0)". Its few trials of each command are too few to judge drift, and it says so."""
    summary = washout("run", "sleep 0.01", "sleep 0.012", "--db", tmp_path / "q.db").stdout
    assert "Too few trials to judge drift" in " ".join(summary.split()), summary
    assert " drifts with " not in summary and "p=0)" not in summary, summary


def test_memcached_carryover_points_at_get_hits_after_the_reset(tmp_path: Path) -> None:
    """On the published data the order effect of get_hits shows up as a reset effect."""
    doc = json.loads(washout("analyze", MEMCACHED, "--carryover", "--format", "json").stdout)
    significant = [p for p in doc["carryover"]["pairs"] if p["significant"]]
    assert [(p["test"], p["predecessor"]) for p in significant] == [
        ("./get_hits_test.sh", "(reset)")
    ]
    # against the line through positions 1 and 2 (three tests): a wide interval of the mean
    assert (
        significant[0]["delta_pct"] < -4
        and significant[0]["ci"][0] < -5.3 < significant[0]["ci"][1]
    )
    assert doc["carryover"]["pairs"][0] == significant[0]  # largest first
    out = tmp_path / "m.html"
    washout("report", MEMCACHED, "-o", out)
    html = out.read_text()
    assert '<section id="why">' in html
    assert (
        "The first trial after the reset differs from the trend of the later trials "
        "(result) for 1 of 3 tests: ./get_hits_test.sh 8.4% lower"
    ) in html
    assert "No test is shifted by the test before it" in html
    assert " drifts with " not in html  # its level may wander: tests/test_stats_drift.py


def test_test_names_are_never_terminal_markup(tmp_path: Path) -> None:
    """Names such as "[red]evil[/red]" print literally in every terminal table and sentence."""
    rows = ["run,order,position,test,metric,value,status,worker,started,ended"]
    for r in range(12):
        for p, t in enumerate(["[red]evil[/red]", "[bold]x", "plain"]):
            rows.append(
                f"{r},{'fixed' if r % 2 == 0 else 'random'},{p},{t},wall,"
                f"{1 + (r * 7 + p * 3) % 5 / 10},ok,local,,"
            )
    data = tmp_path / "markup.csv"
    data.write_text("\n".join(rows) + "\n")
    outputs = [
        washout("analyze", data, "--drift", "--claim", "plain < '[bold]x'").stdout,
        washout("analyze", data, "--compat", "ordersage").stdout,
        washout("plan", "--pilot", data, "--detect", "50%").stdout,
    ]
    for out in outputs:
        assert "[red]evil[/red]" in out and "[bold]x" in out, out
    assert "median plain" in outputs[0] and "vs [bold]x" in outputs[0]  # the claim sentence


def test_report_of_a_csv_without_positions_says_what_it_cannot_do(tmp_path: Path) -> None:
    """A hand-made long CSV with no position column still gets a report, which says why it
    has no carryover or drift analysis instead of leaving it out silently."""
    rows = ["run,order,test,metric,value,status"]
    for r in range(8):
        for t, v in (("a", 1), ("b", 2)):
            rows.append(f"{r},{'fixed' if r % 2 == 0 else 'random'},{t},wall,{v + r * 0.01},ok")
    data = tmp_path / "nopos.csv"
    data.write_text("\n".join(rows) + "\n")
    out = tmp_path / "r.html"
    washout("report", data, "-o", out, "--claim", "a < b")
    html = out.read_text()
    assert "No carryover analysis" in html and "position in its run" in html
    assert "Claim &#39;a &lt; b&#39;" in html


QUICKSTART = "examples/quickstart.toml"
# What the quickstart must say wherever it says why: the cost of the cold first read, how
# much, and for every test.
FIRST_AFTER_RESET = re.compile(
    r"The first trial after each reset is (\d+\.\d)% slower \(wall\) than the trend of the "
    r"later trials, on average over 4 tests \(p=[^)]*\); by test: ([^(]*) \("
)


def test_quickstart_says_the_first_trial_after_each_reset_pays_for_the_disk(
    tmp_path: Path,
) -> None:
    """The README's first command on the real quickstart: every test reads the whole file,
    so whichever runs first after the reset reads it from disk. The run's summary,
    ``analyze --carryover --drift`` and the report's Why section all say so, with how much
    and for which tests. That cost cannot fake a predecessor pair or a drift with position:
    both are computed from random-order trials at positions >= 1 only (their calibration in
    tests/test_calibration.py shows it). Whether the machine has real effects at later
    positions as well is the machine's own (a run here once found `copy` faster at later
    positions, rho -0.70), so this test does not assert there are none."""
    db = tmp_path / "quickstart.db"
    summary = washout("run", QUICKSTART, "--db", db, cwd=ROOT, timeout=280).stdout
    analysis = washout("analyze", db, "--carryover", "--drift").stdout
    report = tmp_path / "report.md"
    washout("report", db, "-o", report)
    tests = [t["name"] for t in tomllib.loads((ROOT / QUICKSTART).read_text())["test"]]
    for where, text in (("run", summary), ("analyze", analysis), ("report", report.read_text())):
        found = FIRST_AFTER_RESET.search(" ".join(text.split()))
        assert found, f"{where}: no first-after-reset sentence in\n{text}"
        assert float(found.group(1)) >= 10, f"{where}: {found.group(0)}"
        assert sorted(t.split(" ")[0] for t in found.group(2).split(", ")) == sorted(tests)
    trials, _ = load_trials(db)
    pairs = carryover(trials)
    [pooled] = pairs.first_after_reset
    assert pooled.significant and pooled.ci[0] > 0
    assert pairs.alpha_per_test is not None
    ok = trials[(trials["status"] == "ok") & (trials["metric"] == "wall")]
    later = ok[(ok["order"] == "random") & (ok["position"] >= 1)]
    for pair in pairs.pairs:
        if pair.predecessor != RESET:  # pairs see only the later positions of random runs
            assert pair.n_after + pair.n_other <= (later["test"] == pair.test).sum(), pair
    for row in drift(trials).rows:
        if row.against == "position":
            assert row.n <= (later["test"] == row.test).sum(), row
