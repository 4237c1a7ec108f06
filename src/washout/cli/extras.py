"""The optional parts of washout: which extra a command needs, and the one-line error when
it is not installed.

``pip install washout`` brings what running, analysing and exporting experiments need;
reports and parameter-space sweeps have heavier dependencies, installed as extras
(``washout[report]``, ``washout[sweep]``, ``washout[all]``; pyproject.toml lists them).
"""

from __future__ import annotations

from importlib.util import find_spec

from washout.errors import WashoutError

EXTRAS: dict[str, tuple[str, ...]] = {
    "report": ("matplotlib", "jinja2"),
    "sweep": ("sklearn", "kneed", "threadpoolctl"),
}
"""Each extra and the modules it provides (as imported, not as named on PyPI)."""


def require_extra(extra: str, command: str) -> None:
    """Fail in one line, naming what to install, unless every module of ``extra`` is
    importable. Looks the modules up without importing them, so it costs microseconds."""
    missing = [module for module in EXTRAS[extra] if find_spec(module) is None]
    if missing:
        raise WashoutError(
            f"{command} needs the {extra} extra ({', '.join(missing)} missing): "
            f"pip install 'washout[{extra}]'"
        )
