"""Secrets never reach the store: redacted before output is cut, inherited secret-looking
variables and passwords in URLs included (real runs of the CLI, the real SQLite files)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from conftest import washout

from washout.harness.executors.base import TAIL_BYTES
from washout.harness.secrets import redact, redact_tail, secret_values


def store_bytes(tmp_path: Path) -> bytes:
    return b"".join(f.read_bytes() for f in sorted(tmp_path.glob("s.db*")))


def tails(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT test, stdout_tail, stderr_tail FROM trial").fetchall()


def test_redaction_masks_whole_secrets_and_url_passwords() -> None:
    secrets = secret_values(
        [{"API_TOKEN": "tok-123456"}],
        inherited={
            "AWS_SECRET_ACCESS_KEY": "aws-abcdefgh",
            "GIT_AUTH_ENABLED": "true",
            "HOME": "/root",
        },
    )
    assert secrets == ["aws-abcdefgh", "tok-123456"]  # flags and other variables are not secret
    assert redact("a tok-123456 b aws-abcdefgh true", secrets) == "a *** b *** true"
    assert (
        redact("postgres://u:pw@db:5432/x and https://host/a:b@c", [])
        == "postgres://u:***@db:5432/x and https://host/a:b@c"
    )
    # Cut output that starts inside a secret: the part of it that remains is masked too.
    assert redact_tail(b"123456 rest", ["tok-123456"], cut=True) == "*** rest"
    assert redact_tail(b"123456 rest", ["tok-123456"], cut=False) == "123456 rest"
    assert redact_tail(b"x" * 10_000 + b"tok-123456", ["tok-123456"], cut=False, limit=5) == "xx***"


def test_secrets_straddling_the_stored_tail_inherited_or_in_urls_never_reach_the_store(
    tmp_path: Path,
) -> None:
    token = "s3cr3t-t0ken-value-42"
    aws = "AKIAexample-inherited-secret"
    password = "pg-pass-9876"
    # The token ends 5 characters into the stored tail: cut first, the store kept its end.
    pad = TAIL_BYTES - 5
    spec = tmp_path / "s.toml"
    spec.write_text(f"""
[experiment]
runs = 1
orders = ["fixed"]
env = {{ API_TOKEN = "${{WASHOUT_TEST_TOKEN}}", DATABASE_URL = "${{WASHOUT_TEST_DB}}" }}
[[test]]
name = "straddle"
command = "printf %s \\"$API_TOKEN\\"; head -c {pad} /dev/zero | tr '\\\\0' x"
[[test]]
name = "inherited"
command = "echo $AWS_SECRET_ACCESS_KEY; echo $AWS_SECRET_ACCESS_KEY >&2"
[[test]]
name = "url"
command = "echo connecting to $DATABASE_URL; echo $DATABASE_URL >&2; exit 1"
""")
    db = tmp_path / "s.db"
    env = {
        **os.environ,
        "WASHOUT_TEST_TOKEN": token,
        "AWS_SECRET_ACCESS_KEY": aws,
        "WASHOUT_TEST_DB": f"postgres://bench:{password}@db.example:5432/bench",
    }
    washout("run", spec, "--db", db, "--quiet", env=env, check=False)
    found = {test: (out, err) for test, out, err in tails(db)}
    assert found["straddle"][0].endswith("x" * pad) and token[1:] not in found["straddle"][0]
    assert found["inherited"] == ("***\n", "***\n")
    assert found["url"][1] == "postgres://bench:***@db.example:5432/bench\n"
    raw = store_bytes(tmp_path)
    for secret in (token, token[1:], token[-6:], aws, password):
        assert secret.encode() not in raw
    dump = washout("export", db).stdout + washout("status", db).stdout
    assert all(secret not in dump for secret in (token, aws, password))


def test_provenance_command_output_is_redacted_before_it_is_stored(tmp_path: Path) -> None:
    secret = "inherited-provenance-secret-77"
    spec = tmp_path / "s.toml"
    spec.write_text("""
[experiment]
runs = 1
orders = ["fixed"]
[[test]]
name = "t"
command = "true"
[provenance]
commands = ["echo key=$WASHOUT_TEST_SECRET_KEY url=$WASHOUT_TEST_DB"]
""")
    washout(
        "run",
        spec,
        "--db",
        tmp_path / "s.db",
        "--quiet",
        env={
            **os.environ,
            "WASHOUT_TEST_SECRET_KEY": secret,
            "WASHOUT_TEST_DB": "postgres://u:pw-4321@db/x",
        },
    )
    stored = store_bytes(tmp_path)
    assert b"key=***" in stored and b"postgres://u:***@db/x" in stored
    assert secret.encode() not in stored and b"pw-4321" not in stored


def test_short_inherited_secrets_and_url_passwords_with_slashes_and_ats(tmp_path: Path) -> None:
    """``PGPASSWORD=hunt3r7`` was stored in clear (values under 8 characters were skipped),
    and URL passwords holding ``/`` or ``@`` were stored whole or in part. A short secret
    is masked where it stands as a word; a switch (``..._AUTH=true``) is no secret."""
    spec = tmp_path / "s.toml"
    spec.write_text("""
[experiment]
runs = 1
orders = ["fixed"]
[[test]]
name = "t"
command = "echo pw=$PGPASSWORD in 1789hunt3r7x; echo $DB_URL; echo $DB_URL >&2; echo true"
""")
    db = tmp_path / "s.db"
    url = "postgres://bench:p/ss@w0rd:x@db.example:5432/bench"
    env = {**os.environ, "PGPASSWORD": "hunt3r7", "DB_URL": url, "GIT_AUTH_ENABLED": "true"}
    washout("run", spec, "--db", db, "--quiet", env=env)
    ((_, out, err),) = tails(db)
    assert (
        out == ("pw=*** in 1789hunt3r7x\npostgres://bench:***@db.example:5432/bench\ntrue\n")
        and err == "postgres://bench:***@db.example:5432/bench\n"
    )
    raw = store_bytes(tmp_path)
    assert b"pw=hunt3r7" not in raw and b"w0rd" not in raw and b"p/ss" not in raw
    assert redact("https://host/a:b@c and redis://:s3@cr3t@cache/0", []) == (
        "https://host/a:b@c and redis://:***@cache/0"  # a path's ':' and '@' are no password
    )


LITERAL = """
[experiment]
runs = 2
orders = ["fixed"]
env = {{ API_TOKEN = "lit-s3cret-99", PLAIN = "visible" }}
[[test]]
name = "uses-it"
command = "test $API_TOKEN = lit-s3cret-99 || exit 9; : https://u:pa/ss@api.example/; {wait}"
"""


def test_a_literal_secret_in_the_spec_is_masked_in_the_store_and_report_and_resume_restores_it(
    tmp_path: Path,
) -> None:
    """``env = {API_TOKEN = "..."}`` was stored in the spec text and shown by the HTML
    report. It is masked there (and a URL's password in a command); resume takes the values
    back from the spec file, and refuses in one line when that file changed."""
    from test_robustness import start, wait_for_trials

    go = tmp_path / "go"
    spec = tmp_path / "lit.toml"
    spec.write_text(LITERAL.format(wait=f"while [ ! -e {go} ]; do sleep 0.05; done"))
    db = tmp_path / "s.db"
    proc = start("run", spec, "--db", db, "--quiet")
    wait_for_trials(db, "status = 'running'")
    proc.kill()
    proc.wait()
    go.touch()
    washout("resume", db, "--quiet")  # every trial ok: the command saw the real token
    assert "failed 0" in washout("status", db).stdout
    report = tmp_path / "r.html"
    washout("report", db, "-o", report)
    for where in (store_bytes(tmp_path), report.read_bytes()):
        assert b"lit-s3cret-99" not in where and b"pa/ss" not in where
        assert b"visible" in where
    with sqlite3.connect(db) as conn:
        (text,) = conn.execute("SELECT spec_text FROM experiment").fetchone()
    assert 'API_TOKEN = "***"' in text and "https://u:***@api.example/" in text
    spec.write_text(spec.read_text().replace("runs = 2", "runs = 3"))
    with sqlite3.connect(db) as conn:  # one more run left to do, as if cut short
        conn.execute("UPDATE run SET status = 'pending' WHERE idx = 1")
        cut = "(SELECT t.id FROM trial t JOIN run r ON r.id = t.run_id WHERE r.idx = 1)"
        conn.execute(f"DELETE FROM metric WHERE trial_id IN {cut}")
        conn.execute(f"DELETE FROM trial WHERE id IN {cut}")
    proc = washout("resume", db, "--quiet", check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "secrets masked (env API_TOKEN, a password in a URL)" in proc.stderr


def test_terminal_escapes_a_trial_writes_are_shown_escaped(tmp_path: Path) -> None:
    """The run's failure summary printed a trial's stderr raw: an OSC 52 sequence wrote the
    terminal's clipboard, ``\\033[8m`` hid what followed."""
    spec = tmp_path / "e.toml"
    spec.write_text(
        '[experiment]\nruns = 1\norders = ["fixed"]\n[[test]]\nname = "bad"\n'
        "command = \"printf '\\\\033]52;c;aGFjaw==\\\\007\\\\033[8mhidden\\\\r\\\\n' >&2; "
        "printf 'out\\\\033[2J'; exit 3\"\n"
    )
    db = tmp_path / "e.db"
    proc = washout("run", spec, "--db", db, "--quiet", "--show-output", check=False)
    assert proc.returncode == 4
    status = washout("status", db).stdout
    for shown in (proc.stdout + proc.stderr, status):
        assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown
    assert "\\x1b]52;c;aGFjaw==\\x07\\x1b[8mhidden\\r" in proc.stderr
    assert "out\\x1b[2J" in proc.stderr
