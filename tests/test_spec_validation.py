"""A spec is checked whole before anything runs, and no parameter value or env key ever
reaches a shell as code: real experiments through the CLI, and the shell lexer that decides
where a ``{param}`` may stand."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import exported, washout
from sshd import SshdFarm, sshd_farm  # noqa: F401 (fixture)

from washout.harness.executors.local import argv_for
from washout.harness.spec import expand_tests, parse_spec_text, unsafe_placeholder

HOSTILE = [
    "$(touch {marker})",
    "`touch {marker}`",
    "x; touch {marker}",
    "a'b\"c",
    "two words",
    "\\$HOME",
    "*",
    "-n",
]


@pytest.mark.parametrize(
    "command",
    [
        "echo {v}",
        "fio --rw={v} --bs=4k",
        "echo 'fixed' {v} \"$HOME\"",
        "echo a\\ b {v}",
        "echo $(date) {v}",
        "x=$(( 1 + 2 )) {v}",
        "echo \"$(echo ')')\" {v}",
        "f() { echo {v}; }",
        "echo {v} # it's bare",
        "echo '\\' {v}",
        'echo "\\"" {v}',
        "echo {{v}} {v}",
    ],
)
def test_bare_placeholders_are_accepted(command: str) -> None:
    assert unsafe_placeholder(command) is None


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ('echo "{v}"', "inside quotes"),
        ("echo '{v}'", "inside quotes"),
        ('echo "a $(b) {v}"', "inside quotes"),
        ("echo $(cat {v})", "inside $(...)"),
        ('echo "$(cat {v})"', "inside $(...)"),
        ("echo `cat {v}`", "inside $(...)"),
        ("echo ${x:-a{v}b}", "inside $(...), ${...}"),
        ("echo ${v}", "right after $"),
        ("echo \\{v}", "right after \\"),
        ("cat <<EOF\n{v}\nEOF", "in a here-document"),
        ("cat <<E\n# {v}", "in a here-document"),  # no comment there: hypothesis found it
        ("#{v}' {v}", "in a comment"),  # a value's newline ends it: hypothesis found it
        ("echo # it's\necho '{v}'", "inside quotes"),
    ],
)
def test_placeholders_where_a_quoted_value_could_run_are_found(command: str, why: str) -> None:
    found = unsafe_placeholder(command)
    assert found is not None and found[0] == "{v}" and found[1].startswith(why), found


def test_hostile_values_reach_the_command_as_one_literal_word(tmp_path: Path) -> None:
    """Each value is one argument, byte for byte; nothing in it runs; the test names show
    the values; a plain value keeps the command plain (exec'd without a shell)."""
    marker = tmp_path / "pwned"
    values = [v.format(marker=marker) for v in HOSTILE] + ["plain"]
    spec = tmp_path / "hostile.toml"
    quoted = ", ".join(json.dumps(v) for v in values)  # JSON strings are TOML strings
    spec.write_text(
        "[experiment]\nruns = 1\norders = ['fixed']\n[[test]]\nname = 't {v}'\n"
        "command = \"printf '[%s]' {v}\"\n"
        f"params = {{ v = [{quoted}] }}\n"
    )
    tests = expand_tests(parse_spec_text(spec.read_text(), str(spec)))
    assert [t.name for t in tests] == [f"t {v}" for v in values]
    db = tmp_path / "h.db"
    washout("run", spec, "--db", db, "--quiet", cwd=tmp_path)
    assert not marker.exists()
    with sqlite3.connect(db) as conn:
        out = dict(conn.execute("SELECT test, stdout_tail FROM trial WHERE status = 'ok'"))
    assert out == {f"t {v}": f"[{v}]" for v in values}


def test_a_plain_grid_command_is_still_exec_directly() -> None:
    spec = parse_spec_text(
        "[[test]]\nname = 's{n}'\ncommand = 'sleep {n}'\nparams = { n = [0.1, '2 3'] }\n",
        "grid.toml",
    )
    plain, spaced = expand_tests(spec)
    assert argv_for(plain.command) == ["sleep", "0.1"]
    assert argv_for(spaced.command)[:2] == ["/bin/sh", "-c"]  # quotes need the shell


@pytest.mark.ssh
def test_values_and_env_reach_an_ssh_worker_as_data(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    """On a worker every command goes through a remote shell: parameter values (quoted into
    the command) and env values (exported quoted) arrive literally, and the [experiment] env
    reaches setup there too."""
    (server,) = sshd_farm.start(1)
    workdir = tmp_path / "work"
    spec = tmp_path / "ssh.toml"
    spec.write_text(
        """[experiment]
runs = 1
orders = ["fixed"]
env = { HOSTILE_VALUE = "$(touch MARK1)';touch MARK2'" }
[setup]
command = 'printf %s "$HOSTILE_VALUE" > setup.txt'
[[test]]
name = "t {v}"
command = "printf '[%s]' {v} \\"$HOSTILE_VALUE\\""
params = { v = ["$(touch MARK3)", "`touch MARK4`", "a'b"] }
"""
        + server.worker_toml("w", sshd_farm.known_hosts, workdir)
    )
    db = tmp_path / "ssh.db"
    washout("run", spec, "--db", db, "--quiet")
    hostile = "$(touch MARK1)';touch MARK2'"
    assert not list(workdir.glob("MARK*"))
    assert (workdir / "setup.txt").read_text() == hostile
    with sqlite3.connect(db) as conn:
        out = dict(conn.execute("SELECT test, stdout_tail FROM trial WHERE status = 'ok'"))
    assert out == {
        f"t {v}": f"[{v}][{hostile}]" for v in ("$(touch MARK3)", "`touch MARK4`", "a'b")
    }


def test_a_placeholder_inside_quotes_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """Before, `echo "{v}"` became `echo "'$(touch ...)'"` and the value ran."""
    marker = tmp_path / "pwned"
    spec = tmp_path / "q.toml"
    spec.write_text(
        "[experiment]\nruns = 1\n[[test]]\nname = 't{v}'\n"
        "command = 'echo \"{v}\"'\n"
        f"params = {{ v = ['$(touch {marker})'] }}\n"
    )
    proc = washout("run", spec, "--db", tmp_path / "q.db", check=False, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "placeholder {v} inside quotes" in proc.stderr and str(spec) in proc.stderr
    assert not marker.exists() and not (tmp_path / "q.db").exists()


def test_experiment_env_reaches_setup_reset_and_teardown(tmp_path: Path) -> None:
    log = tmp_path / "log"
    spec = tmp_path / "env.toml"
    spec.write_text(f"""[experiment]
runs = 1
orders = ["fixed"]
env = {{ STAGE_MARK = "m-1" }}
[setup]
command = 'echo "setup $STAGE_MARK" >> {log}'
[reset]
command = 'echo "reset $STAGE_MARK" >> {log}'
[teardown]
command = 'echo "teardown $STAGE_MARK" >> {log}'
[[test]]
name = "t"
command = 'echo "test $STAGE_MARK" >> {log}'
""")
    washout("run", spec, "--db", tmp_path / "e.db", "--quiet")
    assert log.read_text().splitlines() == ["setup m-1", "reset m-1", "test m-1", "teardown m-1"]


def test_a_spec_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    spec = tmp_path / "bom.toml"
    spec.write_bytes("\ufeff[[test]]\nname = 'a'\ncommand = 'true'\n".encode())
    assert "valid" in washout("validate", spec).stdout


def test_a_spec_file_in_upper_case_is_a_spec_not_a_command(tmp_path: Path) -> None:
    """Before, `washout run SPEC.TOML` ran the file name as a command (every trial failed,
    exit 0); a missing one said so only for a lower-case name."""
    spec = tmp_path / "Spec.TOML"
    spec.write_text(
        "[experiment]\nname = 'upper'\nruns = 1\n[[test]]\nname = 'a'\ncommand = 'true'\n"
    )
    db = tmp_path / "u.db"
    washout("run", spec, "--db", db, "--quiet")
    frame = exported(db)
    assert set(frame["test"]) == {"a"} and set(frame["status"]) == {"ok"}
    proc = washout("run", tmp_path / "missing.Toml", "--db", tmp_path / "m.db", check=False)
    assert proc.returncode == 2 and "missing.Toml: no such spec file" in proc.stderr


def test_runs_from_the_command_line_are_bounded_too(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text("[[test]]\nname = 'a'\ncommand = 'true'\n")
    proc = washout(
        "run", spec, "--runs", "100000000000", "--db", tmp_path / "r.db", check=False, timeout=60
    )
    assert (
        proc.returncode == 2 and "experiment.runs = 100000000000: at most 1,000,000" in proc.stderr
    ), proc.stderr
    assert not (tmp_path / "r.db").exists()


def test_a_huge_grid_is_refused_without_expanding_it() -> None:
    levels = "[" + ", ".join(str(i) for i in range(100)) + "]"
    text = (
        "[[test]]\nname = 't{a}-{b}-{c}-{d}'\ncommand = 'echo {a} {b} {c} {d}'\n"
        f"params = {{ a = {levels}, b = {levels}, c = {levels}, d = {levels} }}\n"
    )
    with pytest.raises(Exception, match=r"test = '100,000,000 tests .*at most 100,000 tests"):
        parse_spec_text(text, "grid.toml")
