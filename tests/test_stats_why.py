"""explain() and render_words(): the entry point analyze uses, and its sentences."""

from __future__ import annotations

import json

from simulate_longformat import simulate

from washout.stats.carryover import carryover
from washout.stats.why import explain, render_words


def test_only_what_was_asked_and_plain_json() -> None:
    df = simulate(runs=30, seed=1)
    assert explain(df).to_dict() == {}
    assert set(explain(df, drift=True).to_dict()) == {"drift"}
    d = explain(df, carryover=True, drift=True, claims=["a < b"]).to_dict()
    assert set(d) == {"carryover", "first_after_reset", "drift", "claims"}
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    result = carryover(df)
    assert d["carryover"] == [p.to_dict() for p in result.pairs]
    assert d["first_after_reset"] == [r.to_dict() for r in result.first_after_reset]
    # a metric that never varies has no correlation: None, not NaN
    flat = explain(simulate(runs=4, seed=5).assign(value=1.0), drift=True).to_dict()
    json.dumps(flat, allow_nan=False)
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
