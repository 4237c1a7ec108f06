"""The trial journal's raw statements: what a launcher's batch records raw (docs/design.md,
"The batch launcher"), and how a fold turns them into the statements washout's own records
hold.

In a batch the launcher, a small C process, writes each trial's record itself from a
template washout made, its holes filled with what it measured (as the store's own times,
seconds and bytes: ``launch.c``, ``fill``) and with the lines of the files it read around
the trial. Those lines are not parsed in C: a record holds them raw, in two statements of
its own, and here, and only here, they become the rows a trial run one at a time gets, by
the same code (:mod:`washout.data.health` parses the counters for both), so that nothing
downstream can tell a batch's trial from another.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii

from washout.data.health import (
    INVOLUNTARY_SWITCHES,
    MIGRATIONS,
    Reading,
    counter,
    health_values,
    line_busy,
    reading_of,
    swap_pages,
    total_of,
)
from washout.data.store.journal import Scalar, Statement

ENVIRONMENT = "batch_environment"
"""The environment before a run: ``(worker, run_index, captured, fingerprint, facts, key,
words, line, ...)``: the facts as JSON, then for each fact of the moment its key, how many
words of its file's first line it keeps, and that line (null: unreadable)."""
HEALTH = "batch_health"
"""A trial's health: ``(trial, tick, user, system, switches, migrations, layout,
readings...)``: its CPU seconds, involuntary switches and migrations (-1: not read), then
each probe's line before and after the trial, in the order ``layout`` counts them
(``stat,throttle,freq,msr,swap,kmsg``: lines of ``/proc/stat`` per CPU, throttle
counters, ``scaling_cur_freq`` per CPU, APERF and MPERF per CPU, the swap lines of
``/proc/vmstat``, the kernel log's new records)."""
RAW = frozenset({ENVIRONMENT, HEALTH})
LAYOUT = ("stat", "throttle", "freq", "msr", "swap", "kmsg")

encode_facts = json.JSONEncoder(sort_keys=True, check_circular=False).encode
"""An environment's facts as the store keeps them (``json.dumps(facts, sort_keys=True)``),
with one encoder made once rather than one per run."""
_STRING = encode_basestring_ascii
"""A string as JSON (what :data:`encode_facts` makes of one)."""


@functools.lru_cache(maxsize=8)
def _facts_around(text: str, keys: tuple[str, ...]) -> tuple[list[str], list[int]]:
    """The facts ``text`` as the store keeps them (:data:`encode_facts`) with ``keys``
    given new values: the text around those values, and which of ``keys`` each is, in its
    order, so that a run's facts are its moment's values put between (the rest is the same
    before every run of a batch: worked out once, not a whole encoding per run)."""
    facts = json.loads(text)
    if not isinstance(facts, dict):
        raise ValueError("an environment's facts are not an object")
    marks = {key: f"\0{i}\0" for i, key in enumerate(keys)}
    marked = encode_facts({**facts, **marks})
    chunks, order, at = [], [], 0
    for key in sorted(keys):
        mark = _STRING(marks[key])
        cut = marked.index(mark, at)
        chunks.append(marked[at:cut])
        order.append(keys.index(key))
        at = cut + len(mark)
    chunks.append(marked[at:])
    return chunks, order


def expand(name: str, params: tuple[Scalar, ...]) -> Iterator[Statement]:
    """The statements a raw statement stands for (KeyError: not one; ValueError or
    TypeError: not in its form, which the fold reports as a damaged journal)."""
    if name == HEALTH:
        trial, tick, user, system, switches, moved, layout, *readings = params
        own = float(user or 0) + float(system or 0)
        values = {INVOLUNTARY_SWITCHES: float(_int(switches))}
        if _int(moved) >= 0:
            values[MIGRATIONS] = float(_int(moved))
        before, after = _readings(str(layout), tuple(readings))
        values |= health_values(before, after, own_cpu=own, tick=float(tick or 0))
        for key, value in values.items():
            yield "metric", (trial, key, value)
    elif name == ENVIRONMENT:
        worker, run_index, captured, fingerprint, facts, *moment = params
        chunks, order = _facts_around(str(facts), tuple(map(str, moment[0::3])))
        lines, words = moment[2::3], moment[1::3]
        parts = [chunks[0]]
        for i, chunk in zip(order, chunks[1:], strict=True):
            parts += (_words(lines[i], _int(words[i])), chunk)
        yield "environment", (worker, run_index, captured, "".join(parts), fingerprint)
    else:
        raise KeyError(name)


@functools.lru_cache(maxsize=64)
def _words(line: Scalar, words: int) -> str:
    """A fact of the moment as its facts' text holds it: the first ``words`` words of its
    file's line, as a JSON string (empty: the line unreadable). Cached: most such lines
    (the boot id, an absent sensor) are the same before every run of a batch."""
    return _STRING(" ".join(str(line or "").split()[:words]))


def _readings(layout: str, values: tuple[Scalar, ...]) -> tuple[Reading, Reading]:
    """The readings before and after a trial from its probes' lines (each probe's before
    then after, in :data:`LAYOUT`'s order, as many of each as ``layout`` says)."""
    slices, total = _slices(layout)
    if len(values) != total:
        raise ValueError(f"{len(values)} readings for the layout {layout}")
    return _reading(slices, values[0::2]), _reading(slices, values[1::2])


@functools.lru_cache(maxsize=16)
def _slices(layout: str) -> tuple[tuple[tuple[int, int], ...], int]:
    """Where each kind's readings are among one side's (before or after), and how many
    readings a trial has (both sides)."""
    counts = [int(count) for count in layout.split(",")]
    if len(counts) != len(LAYOUT) or min(counts) < 0:
        raise ValueError(f"not a layout of readings: {layout}")
    slices, at = [], 0
    for n in counts:
        slices.append((at, at + n))
        at += n
    return tuple(slices), 2 * at


@functools.lru_cache(maxsize=64)
def _reading(slices: tuple[tuple[int, int], ...], side: tuple[Scalar, ...]) -> Reading:
    """One side's reading. Cached: a CPU's line of ``/proc/stat`` moves once per clock
    tick, so the readings around many short trials in a row are the same (one lookup of
    the side's lines, not one per kind)."""
    return _reading_of(*(side[start:stop] for start, stop in slices))


def _reading_of(
    stat: tuple[Scalar, ...],
    throttle: tuple[Scalar, ...],
    freq: tuple[Scalar, ...],
    msr: tuple[Scalar, ...],
    swap: tuple[Scalar, ...],
    kmsg: tuple[Scalar, ...],
) -> Reading:
    """A reading from its probes' values."""
    busy = [line_busy(x.encode()) if isinstance(x, str) else None for x in stat]
    msrs = [x if isinstance(x, int) else None for x in msr]
    return reading_of(
        total_of(busy),
        list(map(_number, throttle)),
        list(map(_number, freq)),
        msrs[0::2],
        msrs[1::2],
        swap_pages(swap[0].encode()) if swap and isinstance(swap[0], str) else None,
        kmsg[0] if kmsg and isinstance(kmsg[0], int) else None,
    )


def _number(line: Scalar) -> int | None:
    """The number a small counter file's line holds (None: unreadable, or not a number)."""
    return counter(line.encode()) if isinstance(line, str) else None


def _int(value: Scalar) -> int:
    if type(value) is not int:
        raise TypeError(f"not an integer: {value!r}")
    return value
