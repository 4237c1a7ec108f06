"""The sentences of why (render_words) over the analyses the one analysis makes."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd
from simulate_longformat import simulate

from washout.analysis.compute import analyze
from washout.analysis.result import Analysis, Options
from washout.report.words import render_words, why_parts
from washout.stats.carryover import carryover


def explain(
    df: pd.DataFrame,
    carryover: bool = False,
    drift: bool = False,
    claims: Sequence[str] = (),
    correction: str = "bonferroni",
) -> Analysis:
    """The analysis of ``df`` with only what is asked of why."""
    options = Options(
        carryover=carryover,
        drift=drift,
        claims=tuple(claims),
        correction=correction,
        compare=False,
    )
    return analyze(df, options)


def test_only_what_was_asked_and_plain_json() -> None:
    df = simulate(runs=30, seed=1)
    assert why_parts(explain(df)) == {}
    assert set(why_parts(explain(df, drift=True))) == {"drift"}
    d = json.loads(
        json.dumps(
            why_parts(explain(df, carryover=True, drift=True, claims=["a < b"])),
            default=dict,
            allow_nan=False,
        )
    )
    assert set(d) == {"carryover", "first_after_reset", "drift", "claims"}
    result = carryover(df)
    assert d["carryover"] == [p.to_dict() for p in result.pairs]
    assert d["first_after_reset"] == [r.to_dict() for r in result.first_after_reset]
    # a metric that never varies has no correlation: None, not NaN
    flat = why_parts(explain(simulate(runs=4, seed=5).assign(value=1.0), drift=True))
    json.dumps(flat, default=dict, allow_nan=False)
    assert flat["drift"] and all(r["spearman"] is None for r in flat["drift"])


def test_words_name_the_carryover_drift_and_flipped_claim() -> None:
    df = simulate(
        tests=("cmd_set", "cmd_get", "get_hits"),
        runs=40,
        orders=("fixed", "random"),
        means={"cmd_set": 100.0, "cmd_get": 90.0, "get_hits": 120.0},
        carryover={("cmd_get", "cmd_set"): 1.071},
        drift_per_position={"get_hits": 0.03},
        random_factor={"cmd_get": 1.2},
        seed=2,
    )
    d = explain(
        df,
        carryover=True,
        drift=True,
        claims=["cmd_get < cmd_set", "get_hits > cmd_set"],
        correction="holm",
    )
    words = "\n".join(render_words(d))
    assert "cmd_get (wall) right after cmd_set is " in words
    assert "% slower than after other tests (" in words
    assert " on ranks; family-wise CI of the mean +" in words
    assert "get_hits (wall) drifts with its position in the run" in words
    assert "Claim 'cmd_get < cmd_set' (wall) holds in fixed order but not in random order" in words
    assert "Claim 'get_hits > cmd_set' (wall) holds in both fixed and random order" in words


def test_words_when_nothing_is_found_or_nothing_can_be() -> None:
    quiet = explain(simulate(runs=10, seed=3), carryover=True, drift=True)
    words = render_words(quiet)
    assert any(w.startswith("No evidence of carryover: none of the") for w in words)
    assert any(w.startswith("No evidence of drift: none of the") for w in words)
    fixed_only = explain(
        simulate(runs=5, orders=("fixed",), seed=4), carryover=True, claims=["a < b"]
    )
    words = render_words(fixed_only)
    assert words[0].startswith("Carryover: nothing to compare")
    assert "no random-order trials to tell whether order changes it" in words[1]


def test_words_say_the_first_trial_after_the_reset_is_slower_and_by_how_much() -> None:
    df = simulate(first_after_reset=1.5, runs=30, cv=0.01, seed=9)
    words = render_words(explain(df, carryover=True, drift=True))
    assert words[0].startswith("The first trial after each reset is 5")
    assert "% slower (wall) than the trend of the later trials, on average over 5 tests" in words[0]
    assert "by test: " in words[0] and "(significant on its own for " in words[0]
    assert words[1].startswith("No test is shifted by the test before it: none of the 20")
    assert words[2].startswith("No evidence of drift")
    rps = simulate(first_after_reset=0.7, runs=30, cv=0.01, metrics=("rps",), seed=6)
    words = render_words(explain(rps, carryover=True))
    assert "% lower (rps) than the trend of the later trials" in words[0]


def test_lag_two_is_said_as_two_positions_after_in_the_words_and_the_flags() -> None:
    """A lag-2 pair is named as such in the sentences and in the report's flags, so no
    output says "right after b" of what b did two positions earlier."""
    from washout.report.document import flagged_tests

    df = simulate(carryover2={(t, "b"): 1.08 for t in "acde"}, cv=0.01, runs=100, seed=4)
    analysis = explain(df, carryover=True)
    assert analysis.carryover is not None and analysis.carryover.significant()
    words = " ".join(render_words(analysis))
    assert " two positions after b is " in words and " right after b " not in words
    assert " than two positions after other tests " in words
    reasons = {r for f in flagged_tests(analysis) for r in f.reasons}
    assert "carryover two positions after b" in reasons
    assert not any(r.startswith("carryover after") for r in reasons)


def test_two_tests_say_no_pair_can_be_compared() -> None:
    """With two tests each always follows the other: the joint model compares no pair, so
    the words say so rather than "none of the 0 predecessor pairs" or "none of the 2
    comparisons (each test right after the reset and after each other test)", which
    counted two untested first-trial rows (hyperfine's two commands, the quick form)."""
    unpaired = (
        "no test follows more than one other test, so a shift one test leaves on the next "
        "cannot be told apart from its position."
    )
    cold = simulate(tests=("a", "b"), first_after_reset=1.10, run_cv=0.05, cv=0.01, runs=10, seed=6)
    words = render_words(explain(cold, carryover=True))
    assert words[0].startswith("The first trial after each reset is ")
    assert words[1] == f"No pair of tests can be compared: {unpaired}"
    quiet = simulate(tests=("a", "b"), runs=10, seed=3)
    [words] = render_words(explain(quiet, carryover=True))
    assert words.startswith(
        "No evidence of carryover: the first trial after the reset, on average over the "
        "tests, is not significant after correction (p="
    )
    assert words.endswith(unpaired)
