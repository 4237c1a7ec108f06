"""Typed results to plain JSON data and back.

:func:`finite_or_none` makes a result's ``to_dict()`` strict JSON (NaN and infinities, which
JSON cannot hold, become null); :func:`typed` reads such data back into the frozen
dataclasses it came from, by their type hints, so a field a result type gains is read
without code of its own. A null where the type wants a float is read as NaN (the value it
stood for), a list where it wants a tuple as a tuple; anything else that does not fit is a
one-line :class:`~washout.errors.WashoutError` naming where it is.
"""

from __future__ import annotations

import math
import types
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, Union, get_args, get_origin, get_type_hints

from washout.errors import WashoutError


def finite_or_none(value: Any) -> Any:
    """``value`` with every float NaN or infinity replaced by None, recursively through
    dicts, lists and tuples (tuples become lists, as JSON has them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


def typed(hint: Any, value: Any, where: str = "") -> Any:
    """``value`` (plain JSON data) as the type ``hint``: a dataclass from a dict of its
    fields (keys it does not have are ignored, fields left out take their defaults), tuples
    and lists from lists, dicts from objects, checked at every level."""
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(hint) if a is not type(None)]
        if value is None and len(options) < len(get_args(hint)):
            return None
        if len(options) > 1:  # e.g. str | int: the value as it is, if it is one of them
            if any(isinstance(value, get_origin(a) or a) for a in options):
                return value
            raise _wrong(where, value, " or ".join(_name(a) for a in options))
        return typed(options[0], value, where)
    if is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, dict):
            raise _wrong(where, value, "an object")
        hints = get_type_hints(hint)
        given = {}
        for f in fields(hint):
            at = f"{where}.{f.name}" if where else f.name
            if f.name in value:
                given[f.name] = typed(hints[f.name], value[f.name], at)
            elif f.default is MISSING and f.default_factory is MISSING:
                raise WashoutError(f"{at}: missing")
        return hint(**given)
    if origin in (tuple, list):
        if not isinstance(value, list):
            raise _wrong(where, value, "a list")
        args = get_args(hint)
        if origin is tuple and args and args[-1] is not Ellipsis:  # a fixed-length tuple
            if len(value) != len(args):
                raise _wrong(where, value, f"a list of {len(args)}")
            return tuple(typed(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
        item = args[0] if args else Any
        items = [typed(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise _wrong(where, value, "an object")
        item = get_args(hint)[1] if get_args(hint) else Any
        return {k: typed(item, v, f"{where}.{k}") for k, v in value.items()}
    if hint is float:
        if value is None:
            return math.nan  # what a NaN or an infinity became in JSON
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _wrong(where, value, "a number")
    if hint in (int, str, bool):
        if type(value) is hint:
            return value
        raise _wrong(where, value, f"a {hint.__name__}")
    return value  # Any, object


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", str(hint))


def _wrong(where: str, value: Any, expected: str) -> WashoutError:
    return WashoutError(f"{where or 'the result'} = {value!r:.60}: expected {expected}")
