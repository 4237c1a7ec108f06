"""The one error type a user sees: a single line naming the file, field and value."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


class WashoutError(Exception):
    """A user-facing error; the CLI prints ``str(err)`` on one line and exits with 2.

    Build messages as ``file: field = value: what is wrong`` so the user can find the spot.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()) if "\n" in message else message)


def choose(choices: dict[str, T], name: str, option: str, what: str) -> T:
    """``choices[name]``, or a one-line error naming the option, the value and the choices."""
    try:
        return choices[name]
    except KeyError:
        raise WashoutError(f"{option} = {name!r}: unknown {what} "
                           f"(choose from {', '.join(choices)})") from None


def located(source: str, field: str | None, value: object, problem: str) -> WashoutError:
    """An error naming where (file and field), what (value) and why (problem)."""
    where = source if field is None else f"{source}: {field}"
    shown = repr(value) if isinstance(value, str) else str(value)
    if len(shown) > 120:
        shown = shown[:117] + "..."
    return WashoutError(f"{where} = {shown}: {problem}")
