"""Secrets kept out of the store: which values are secret, and their redaction from text.

A value is secret when the variable that holds it has a secret-looking name (``API_TOKEN``,
``AWS_SECRET_ACCESS_KEY``, ``PGPASSWORD``...), whether the spec passes it to a trial (``env``)
or washout merely inherits it (a trial inherits washout's environment, so it can print
it). Credentials inside URLs (``postgres://user:password@host``) are secret wherever they
appear, whatever the variable is called. Redaction runs on whole text before it is cut to
what the store keeps, so a secret is never stored in part.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping

from washout.harness.executors.base import TAIL_BYTES

SECRET_NAME = re.compile(r"PASS|SECRET|TOKEN|KEY|CREDENTIAL|AUTH", re.IGNORECASE)
"""A variable name that suggests its value is a secret."""
SWITCHES = frozenset({"0", "1", "true", "false", "yes", "no", "on", "off", "none", "null"})
"""Values of secret-looking variables that are switches, not secrets (``GIT_AUTH_ENABLED=
true``), compared without case: never masked (they would mask ordinary words everywhere)."""
WORD_BELOW = 8
"""A secret shorter than this many characters is masked where it stands as a word of its
own (not inside a longer word or number: ``hunt3r7`` in ``pw=hunt3r7``, never the ``7`` of
``1789``); a longer one wherever it appears."""
MASK = "***"
URL_ROOM = 1024
"""Characters of output kept beyond what is stored so a URL ending in the stored part is
seen whole by redaction."""
URL = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*)://(\S+)")
"""A URL in text: its scheme, and the rest up to the next white space."""


def secrets_of(env: Mapping[str, str]) -> list[str]:
    """Values of variables whose names look secret, whatever their length, but
    :data:`SWITCHES` and empty ones."""
    return [
        v
        for k, v in env.items()
        if SECRET_NAME.search(k) and v.strip() and v.strip().lower() not in SWITCHES
    ]


def secret_values(
    envs: Iterable[Mapping[str, str]], inherited: Mapping[str, str] | None = None
) -> list[str]:
    """Every secret a trial may print: those in the spec's ``envs`` and those in washout's
    own environment (``inherited``, default ``os.environ``), longest first so a secret that
    contains another is masked whole."""
    found = {s for env in envs for s in secrets_of(env)}
    found.update(secrets_of(os.environ if inherited is None else inherited))
    return sorted(found, key=len, reverse=True)


@functools.lru_cache(maxsize=16)
def _secrets_pattern(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern for every secret, longest first; a short one only as a word of its own
    (:data:`WORD_BELOW`)."""
    parts = [
        re.escape(s) if len(s) >= WORD_BELOW else rf"(?<!\w){re.escape(s)}(?!\w)"
        for s in sorted(set(secrets), key=len, reverse=True)
        if s
    ]
    return re.compile("|".join(parts)) if parts else None


def _url_password(match: re.Match[str]) -> str:
    """A URL with the password of its user information masked.

    The authority is read as RFC 3986 (section 3.2.1) has it, ``user:password@host``, but
    leniently, as people write URLs: the user information runs to the URL's last ``@``
    (a password may hold ``@`` and ``/`` unescaped; a host never holds ``@``), the user up
    to its first ``:``. A ``/`` in the user part means the ``:`` and ``@`` were in a path
    (``https://host/a:b@c``), not credentials. A password spilling into the path is masked
    with it: more is hidden, never less."""
    scheme, rest = match.group(1), match.group(2)
    at = rest.rfind("@")
    user, colon, password = rest[: max(at, 0)].partition(":")
    if at < 0 or not colon or not password or "/" in user:
        return match.group(0)
    return f"{scheme}://{user}:{MASK}{rest[at:]}"


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value and every password in a URL replaced by ``***``."""
    pattern = _secrets_pattern(tuple(secrets))
    if pattern is not None:
        text = pattern.sub(MASK, text)
    return URL.sub(_url_password, text)


def literal_secrets(envs: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The values a spec writes out for its secret-looking ``env`` variables (``API_TOKEN =
    "..."``; a ``${NAME}`` reference is not a value), each as written and as a TOML basic
    string escapes it (quotes, backslashes), with the variable's name."""
    literal = {
        value: name
        for env in envs
        for name, value in env.items()
        if "${" not in value and secrets_of({name: value})
    }
    return {form: name for v, name in literal.items() for form in (v, _escaped(v))}


def redact_spec(text: str, envs: Iterable[Mapping[str, str]]) -> tuple[str, list[str]]:
    """A spec's text as the store keeps it: its :func:`literal_secrets` and the passwords of
    URLs masked, wherever they appear in it; and what was masked (``env API_TOKEN``, ``a
    password in a URL``; empty: the text is as written)."""
    written = literal_secrets(envs)
    masked = sorted({f"env {name}" for form, name in written.items() if form in text})
    if URL.sub(_url_password, text) != text:
        masked.append("a password in a URL")
    return redact(text, written), masked


def _escaped(value: str) -> str:
    """``value`` inside a TOML basic string, its escapes written out."""
    return json.dumps(value, ensure_ascii=False)[1:-1]


def redact_tail(data: bytes, secrets: Iterable[str], cut: bool, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` characters of output ``data``, redacted before they are cut.

    ``cut`` says ``data`` is itself the end of a longer output: a secret straddling its
    start is then present only in part (its last characters), which plain redaction cannot
    recognise, so such a partial secret at the start is masked too. Only the end of ``data``
    that can reach the result is decoded (the limit plus room for the longest secret).
    """
    secrets = list(secrets)
    room = limit + 4 * max(map(len, secrets), default=0) + URL_ROOM
    if len(data) > room:
        data, cut = data[-room:], True
    text = data.decode("utf-8", errors="replace")
    if cut:
        for value in secrets:
            for k in range(min(len(value), len(text)) - 1, 0, -1):
                if text.startswith(value[-k:]):
                    text = MASK + text[k:]
                    break
    return redact(text, secrets)[-limit:]
