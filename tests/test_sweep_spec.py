"""The [sweep] spec section: parameters, constraints, errors, and the batch experiments."""

from __future__ import annotations

from pathlib import Path

import pytest

from washout.errors import WashoutError
from washout.harness.spec import expand_tests, spec_from_data
from washout.sweep.spec import batch_spec_data, load_sweep, sweep_space

SPEC = """
[experiment]
name = "s"
seed = 4
[reset]
command = "true"
[sweep]
command = "run --n {n} --kind {kind}"
metric = "t"
repeats = 4
constraints = ["not (kind == 'heap' and n > 100)", "n * 2 >= 20"]
sampler = "coverage"
[sweep.params]
n = [1, 10, 100, 1000]
kind = ["quick", "heap", "it's"]
[sweep.metrics.t]
stdout = "last-number"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def test_constraints_and_levels(tmp_path: Path) -> None:
    section, rest, _ = load_sweep(_write(tmp_path, SPEC))
    space = sweep_space(section, "sweep.toml")
    settings = {(space.level(0, a), space.level(1, b)) for a, b in space.codes}
    assert len(settings) == 3 * 3 - 1  # n = 1 goes; heap with n = 1000 goes
    assert (1000, "heap") not in settings and (100, "heap") in settings
    assert space.levels[1] == ["quick", "heap", "it's"]  # the written order is the level order
    assert section.repeats == 4 and rest["reset"]["command"] == "true"


def test_batch_experiment_quotes_values_and_runs_random_orders(tmp_path: Path) -> None:
    section, rest, _ = load_sweep(_write(tmp_path, SPEC))
    space = sweep_space(section, "sweep.toml")
    rows = [i for i, (a, b) in enumerate(space.codes) if space.level(1, b) == "it's"]
    spec = spec_from_data(batch_spec_data(section, rest, space, rows, 2, 4), "batch")
    tests = expand_tests(spec)
    assert spec.experiment.runs == 4 and spec.experiment.orders == ["random"]
    assert spec.experiment.seed == 6 and spec.experiment.name == "s-batch002"
    assert [t.command for t in tests] == [
        f"run --n {n} --kind 'it'\"'\"'s'" for n in (10, 100, 1000)
    ]
    assert len({t.name for t in tests}) == 3
    assert all(list(t.metrics) == ["t"] for t in tests)


@pytest.mark.parametrize(
    "change,message",
    [
        (
            ('sampler = "coverage"', 'sampler = "lhs"'),
            "sweep.toml: sweep.sampler = 'lhs': unknown sampler",
        ),
        (
            ('sampler = "coverage"', 'validation = "loo"'),
            "sweep.validation = 'loo': unknown (choose from random, folds)",
        ),
        (
            ('sampler = "coverage"', 'method = "fast"'),
            "sweep.toml: sweep.method = 'fast': unknown method (choose from ours, paper)",
        ),
        (('metric = "t"', 'metric = "p99"'), "sweep.metric = 'p99': not among sweep.metrics (t)"),
        (("n * 2 >= 20", "m > 3"), "sweep.constraints[1] = 'm > 3': unknown name 'm'"),
        (("n * 2 >= 20", "__import__('os').system('true')"), "Call is not allowed in a constraint"),
        (("n * 2 >= 20", "n > 5000"), "sweep.constraints = "),
        (("repeats = 4", "repeats = 0"), "sweep.repeats = 0: Input should be greater than 0"),
        (
            ("repeats = 4", "repeat = 4"),
            "unknown key 'repeat' in [sweep] (did you mean 'repeats'?)",
        ),
        (
            ("repeats = 4", "repeats = true"),
            "sweep.repeats = True: Input should be a valid integer",
        ),
        (
            (
                "n = [1, 10, 100, 1000]",
                "n = [1, 10, 100, 1000]\n"
                + "\n".join(f"p{i} = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]" for i in range(6)),
            ),
            "sweep.params = '12,000,000 settings': at most 1,000,000 settings",
        ),
        (
            ("--kind {kind}", "--kind '{kind}'"),
            "sweep.command = \"run --n {n} --kind '{kind}'\": placeholder {kind} inside quotes",
        ),
        (("[sweep]", "[[test]]\nname='x'\ncommand='y'\n[sweep]"), "a sweep spec has no [[test]]"),
    ],
)
def test_bad_sweep_specs_are_one_line_errors(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    path = _write(tmp_path, SPEC.replace(*change))
    with pytest.raises(WashoutError) as err:
        section, _, _ = load_sweep(path)
        sweep_space(section, str(path))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_missing_sweep_table(tmp_path: Path) -> None:
    with pytest.raises(WashoutError, match=r"sweep: required but missing"):
        load_sweep(_write(tmp_path, "[experiment]\nname = 'x'\n"))


def test_a_sweep_spec_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + SPEC.encode())
    section, _, _ = load_sweep(path)
    assert section.metric == "t"


def test_a_sweep_spec_uses_ours_unless_it_names_the_papers_method(tmp_path: Path) -> None:
    from washout.sweep.spec import load_sweep, loop_options

    base = '[sweep]\ncommand = "echo {a}"\n[sweep.params]\na = [1, 2]\n'
    for extra, method, sampler in (
        ("", "ours", "coverage"),
        ('method = "paper"\n', "paper", "random"),
        ('method = "paper"\nmodel = "smooth"\n', "custom", "random"),
        ('validation = "random"\n', "custom", "coverage"),
    ):
        path = tmp_path / "s.toml"
        path.write_text(base.replace("[sweep.params]", extra + "[sweep.params]"))
        options = loop_options(load_sweep(path)[0], 0)
        assert (options.method, options.sampler) == (method, sampler)
