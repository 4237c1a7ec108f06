"""Secrets kept out of the store: which values are secret, and their redaction from text.

A value is secret when the variable that holds it has a secret-looking name (``API_TOKEN``,
``AWS_SECRET_ACCESS_KEY``, ``PGPASSWORD``...), whether the spec passes it to a trial (``env``)
or washout merely inherits it (a trial inherits washout's environment, so it can print
it). Credentials inside URLs (``postgres://user:password@host``) are secret wherever they
appear, whatever the variable is called. Redaction runs on whole text before it is cut to
what the store keeps, so a secret is never stored in part.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from washout.harness.executors.base import TAIL_BYTES

SECRET_NAME = re.compile(r"PASS|SECRET|TOKEN|KEY|CREDENTIAL|AUTH", re.IGNORECASE)
"""A variable name that suggests its value is a secret."""
MIN_SPEC_SECRET = 4
"""Shorter values of secret-looking variables named by the spec are not redacted (they
would mask ordinary words and digits everywhere)."""
MIN_INHERITED_SECRET = 8
"""The same for variables washout inherits: many are flags (``..._AUTH=true``), not secrets."""
MASK = "***"
URL_ROOM = 1024
"""Characters of output kept beyond what is stored so a URL ending in the stored part is
seen whole by redaction."""
URL_CREDENTIALS = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*):([^\s/@]+)@")
"""``scheme://user:password@``: the password is group 2."""


def secrets_of(env: Mapping[str, str], min_length: int = MIN_SPEC_SECRET) -> list[str]:
    """Values of variables whose names look secret, at least ``min_length`` long."""
    return [v for k, v in env.items() if SECRET_NAME.search(k) and len(v) >= min_length]


def secret_values(
    envs: Iterable[Mapping[str, str]], inherited: Mapping[str, str] | None = None
) -> list[str]:
    """Every secret a trial may print: those in the spec's ``envs`` and those in washout's
    own environment (``inherited``, default ``os.environ``), longest first so a secret that
    contains another is masked whole."""
    found = {s for env in envs for s in secrets_of(env)}
    found.update(secrets_of(os.environ if inherited is None else inherited, MIN_INHERITED_SECRET))
    return sorted(found, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value and every password in a URL replaced by ``***``."""
    for value in secrets:
        text = text.replace(value, MASK)
    return URL_CREDENTIALS.sub(rf"\1:{MASK}@", text)


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
