"""The field types every table of a spec is built from: a strict, frozen model, a text that
is not blank, and a duration as people write it. The spec (``spec.py``) and the metric
sources, whose keys each source declares itself (``metrics/``), share them."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict

from washout.harness.durations import parse_duration


class StrictModel(BaseModel):
    """A table of the spec: unknown keys refused, frozen once read, and strict, because
    TOML has real booleans and numbers (``runs = true`` is an error, not 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or blank")
    return value


NonBlank = Annotated[str, AfterValidator(_not_blank)]
Duration = Annotated[float, BeforeValidator(parse_duration)]
