"""The trial journal's raw statements: what a launcher's batch records (docs/design.md, "The
batch launcher"), and how a fold turns them into the statements washout's own records hold.

In a batch the launcher, a small C process, writes each trial's record itself from a
template washout made, its holes filled with integers it measured and with the lines of the
counter files it read around the trial (``launch.c``, ``batch``). So the record holds them
raw: nanoseconds rather than seconds and ISO times, ``/proc/stat`` lines rather than busy
ticks. Here, and only here, they become the rows a trial run one at a time gets: the same
values by the same code (:mod:`washout.data.health` parses the counters for both), so that
nothing downstream can tell a batch's trial from another.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii

from washout.data.health import (
    INVOLUNTARY_SWITCHES,
    MIGRATIONS,
    Reading,
    health_values,
    line_busy,
    pair,
    swap_pages,
)
from washout.data.store.journal import BATCH_FINISH, FINISH, Scalar, Statement

BEGIN = "batch_begin"
"""A trial's start: ``(trial, run, position, test, attempt, started_ns)``."""
RESET = "batch_reset"
"""A run's reset (none: the batch runs only runs without one): ``(at_ns, info, run)``."""
ENVIRONMENT = "batch_environment"
"""The environment before a run: ``(worker, run_index, captured_ns, fingerprint, facts,
key, words, line, ...)``: the facts as JSON, then for each fact of the moment its key, how
many words of its file's first line it keeps, and that line (null: unreadable)."""
END = BATCH_FINISH
"""A trial that ended ok: ``(trial, cpus, wall_names, health, tick, wall_ns, user_ns,
system_ns, max_rss_kib, switches, migrations, started_ns, ended_ns, layout, readings...)``:
``wall_names`` the names of its wall metrics, comma-separated; with ``health`` its health
metrics from ``readings``, each probe's line before and after the trial, in the order
``layout`` counts them (``stat,throttle,freq,msr,swap,kmsg``: lines of ``/proc/stat`` per
CPU, throttle counters, ``scaling_cur_freq`` per CPU, APERF and MPERF per CPU, the swap
lines of ``/proc/vmstat``, the kernel log's new records)."""
RAW = frozenset({BEGIN, RESET, ENVIRONMENT, END})
LAYOUT = ("stat", "throttle", "freq", "msr", "swap", "kmsg")

encode_facts = json.JSONEncoder(sort_keys=True, check_circular=False).encode
_STRING = encode_basestring_ascii
"""A string as JSON (what :data:`encode_facts` makes of one)."""
"""An environment's facts as the store keeps them (``json.dumps(facts, sort_keys=True)``),
with one encoder made once rather than one per run."""


def iso_ns(ns: int) -> str:
    """A real-time clock reading (ns since the epoch) as the store writes a time: ISO 8601
    in UTC to the microsecond, as ``datetime.isoformat(timespec="microseconds")`` (the
    minute made once: most of a fold's times fall in a few)."""
    minutes, rest = divmod(ns, 60_000_000_000)
    return f"{_minute(minutes)}{rest // 1_000_000_000:02d}.{rest // 1000 % 1_000_000:06d}+00:00"


@functools.lru_cache(maxsize=8)
def _minute(minutes: int) -> str:
    return datetime.fromtimestamp(minutes * 60, UTC).isoformat(timespec="minutes")[:-6] + ":"


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
    if name == BEGIN:
        *trial, started = params
        yield "begin_trial", (*trial, iso_ns(_int(started)))
    elif name == RESET:
        at, info, run = params
        yield "reset", (iso_ns(_int(at)), iso_ns(_int(at)), info, run)
    elif name == ENVIRONMENT:
        worker, run_index, captured, fingerprint, facts, *moment = params
        keys = tuple(map(str, moment[0::3]))
        chunks, order = _facts_around(str(facts), keys)
        lines, words = moment[2::3], moment[1::3]
        text = chunks[0] + "".join(
            _STRING(" ".join(str(lines[i] or "").split()[: _int(words[i])])) + chunk
            for i, chunk in zip(order, chunks[1:], strict=True)
        )
        yield "environment", (worker, run_index, iso_ns(_int(captured)), text, fingerprint)
    elif name == END:
        yield from _end(params)
    else:
        raise KeyError(name)


def _end(params: tuple[Scalar, ...]) -> Iterator[Statement]:
    trial, cpus, wall_names, health, tick, *measured = params[:14]
    wall, user, system, rss, switches, moved, started, ended = map(_int, measured[:8])
    layout, readings = str(params[13]), params[14:]
    duration = wall / 1e9
    yield (
        FINISH,
        (
            "ok",
            "",
            0,
            iso_ns(started),
            iso_ns(ended),
            duration,
            "",
            "",
            cpus,
            None,
            None,
            None,
            trial,
        ),
    )
    named = set(str(wall_names).split(",")) if wall_names else set()
    metrics: dict[str, float] = {
        "user": user / 1e9,
        "system": system / 1e9,
        "max_rss": rss * 1024.0,
    }
    if health:
        metrics[INVOLUNTARY_SWITCHES] = float(switches)
        if moved >= 0:
            metrics[MIGRATIONS] = float(moved)
        before, after = _readings(layout, readings)
        metrics |= health_values(
            before, after, own_cpu=metrics["user"] + metrics["system"], tick=float(tick or 0)
        )
    for key, value in metrics.items():
        if key not in named:
            yield "metric", (trial, key, value)
    for key in sorted(named):
        yield "metric", (trial, key, duration)


def _readings(layout: str, values: tuple[Scalar, ...]) -> tuple[Reading, Reading]:
    """The readings before and after a trial from its probes' lines (each probe's before
    then after, in :data:`LAYOUT`'s order, as many of each as ``layout`` says)."""
    slices, total = _slices(layout)
    if len(values) != total:
        raise ValueError(f"{len(values)} readings for the layout {layout}")
    return _reading(values, slices, 0), _reading(values, slices, 1)


@functools.lru_cache(maxsize=16)
def _slices(layout: str) -> tuple[tuple[slice, ...], int]:
    """Where each kind's readings of one side are among a trial's (a slice from its
    first before-reading, step 2; add 1 for the after-readings), and how many there are."""
    counts = [int(count) for count in layout.split(",")]
    if len(counts) != len(LAYOUT) or min(counts) < 0:
        raise ValueError(f"not a layout of readings: {layout}")
    slices, at = [], 0
    for n in counts:
        slices.append(slice(at, at + 2 * n, 2))
        at += 2 * n
    return tuple(slices), at


def _reading(values: tuple[Scalar, ...], slices: tuple[slice, ...], side: int) -> Reading:
    return _reading_of(
        *(values[s.start + side : s.stop : 2] if side else values[s] for s in slices)
    )


@functools.lru_cache(maxsize=64)
def _reading_of(
    stat: tuple[Scalar, ...],
    throttle: tuple[Scalar, ...],
    freq: tuple[Scalar, ...],
    msr: tuple[Scalar, ...],
    swap: tuple[Scalar, ...],
    kmsg: tuple[Scalar, ...],
) -> Reading:
    """A reading from its probes' values. Cached: a CPU's line of ``/proc/stat`` moves once
    per clock tick, so the readings around many short trials in a row are the same."""
    busy = [line_busy(x.encode()) if isinstance(x, str) else None for x in stat]
    throttles = [n for n in map(_number, throttle) if n is not None]
    freqs = list(map(_number, freq))
    msrs = [x if isinstance(x, int) else None for x in msr]
    return Reading(
        busy=_total(busy),
        throttles=sum(throttles) if throttles else None,
        swap=swap_pages(swap[0].encode()) if swap and isinstance(swap[0], str) else None,
        cpufreq_khz=None if (f := _total(freqs)) is None else f / len(freqs),
        msr=pair(_total(msrs[0::2]), _total(msrs[1::2])),
        kernel_log=kmsg[0] if kmsg and isinstance(kmsg[0], int) else None,
    )


def _number(line: Scalar) -> int | None:
    """The number a small counter file's line holds (None: unreadable, or not a number)."""
    text = line.strip() if isinstance(line, str) else ""
    return int(text) if text.isdigit() else None


def _total(values: list[int | None]) -> int | None:
    """The sum of every value; None when one is missing (or there is none)."""
    if not values or None in values:
        return None
    return sum(v for v in values if v is not None)


def _int(value: Scalar) -> int:
    if type(value) is not int:
        raise TypeError(f"not an integer: {value!r}")
    return value
