"""explain() and render_words(): the entry point analyze uses, and its sentences."""

from __future__ import annotations

import json

from simulate_longformat import simulate
from washout.stats.carryover import carryover
from washout.stats.why import explain, render_words


def test_only_what_was_asked_and_plain_json() -> None:
    df = simulate(runs=6, seed=1)
    assert explain(df) == {}
    assert set(explain(df, drift=True)) == {"drift"}
    d = explain(df, carryover=True, drift=True, claims=["a < b"])
    assert set(d) == {"carryover", "drift", "claims"}
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert d["carryover"] == [p.to_dict() for p in carryover(df).pairs]
    # a test always at one position in fixed-only data has no correlation: None, not NaN
    fixed = explain(simulate(runs=4, orders=("fixed",), seed=5), drift=True)
    json.dumps(fixed, allow_nan=False)
    assert any(r["spearman"] is None for r in fixed["drift"])


def test_words_name_the_carryover_drift_and_flipped_claim() -> None:
    df = simulate(tests=("cmd_set", "cmd_get", "get_hits"), runs=40, orders=("fixed", "random"),
                  means={"cmd_set": 100.0, "cmd_get": 90.0, "get_hits": 120.0},
                  carryover={("cmd_get", "cmd_set"): 1.071},
                  drift_per_position={"get_hits": 0.03},
                  random_factor={"cmd_get": 1.2}, seed=2)
    d = explain(df, carryover=True, drift=True, claims=["cmd_get < cmd_set", "get_hits > cmd_set"],
                correction="holm")
    words = "\n".join(render_words(d))
    assert "cmd_get (wall) after cmd_set is " in words
    assert "% higher than after other tests" in words
    assert "get_hits (wall) drifts with its position in the run" in words
    assert ("Claim 'cmd_get < cmd_set' (wall) holds in fixed order but not in random order"
            in words)
    assert "Claim 'get_hits > cmd_set' (wall) holds in both fixed and random order" in words


def test_words_when_nothing_is_found_or_nothing_can_be() -> None:
    quiet = explain(simulate(runs=10, seed=3), carryover=True, drift=True)
    words = render_words(quiet)
    assert any(w.startswith("No evidence of carryover: none of the") for w in words)
    assert any(w.startswith("No evidence of drift: none of the") for w in words)
    fixed_only = explain(simulate(runs=5, orders=("fixed",), seed=4), carryover=True,
                         claims=["a < b"])
    words = render_words(fixed_only)
    assert words[0].startswith("Carryover: nothing to compare")
    assert "no random-order trials to tell whether order changes it" in words[1]
