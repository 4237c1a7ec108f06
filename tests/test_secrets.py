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
