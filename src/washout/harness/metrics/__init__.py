"""Metric sources: how a trial's metric is taken, one module each, and their registry.

A metric is one ``[test.metrics.NAME]`` table. Its keys choose a *reader*, where the value
comes from: ``wall`` (washout's clock), ``file`` (a file the trial writes), ``sample`` (a
command or file read while it runs), ``powercap`` (energy), ``perf`` (a counter), or, when
none of them is given, the measured command's stdout (:class:`~.stdout.Stdout`). A reader
of text (stdout, ``file``, ``sample``) reads it with a *parser*: ``stdout =
"last-number"`` (the default), ``json`` or ``regex``. Every trial also carries its
resource metrics (:mod:`.resources`).

Adding a source: a module here with its keys (a ``StrictModel`` of the keys a table gives
it, the one that chooses it first) and its reader (a :class:`~.base.KeyedSource`) or
parser (a :class:`~.base.KeyedParser`); then, here, its keys among :class:`MetricKeys`'
bases and its class in :data:`READERS` or :data:`PARSERS`. The spec, the engine and the
trial's work on roles take every source through the protocol, unchanged.
"""

from __future__ import annotations

from washout.harness.metrics.base import KeyedParser, KeyedSource, MetricSource, Parser
from washout.harness.metrics.file import File, FileKeys
from washout.harness.metrics.json import JsonKeys, JsonPath
from washout.harness.metrics.perf import Perf, PerfKeys
from washout.harness.metrics.powercap import Powercap, PowercapKeys
from washout.harness.metrics.regex import Regex, RegexKeys
from washout.harness.metrics.sample import Sample, SampleKeys
from washout.harness.metrics.stdout import LastNumber, Stdout, StdoutKeys
from washout.harness.metrics.wall import Wall, WallKeys


class MetricKeys(
    PerfKeys, PowercapKeys, SampleKeys, FileKeys, RegexKeys, JsonKeys, StdoutKeys, WallKeys
):
    """Every source's keys, as one ``[test.metrics.NAME]`` table has them, in the order
    they are listed to users (the last base first); the spec's ``MetricSpec`` adds
    ``better`` and ``role``."""


READERS: tuple[type[KeyedSource], ...] = (Powercap, Perf, Sample, Wall, File)
"""The readers a key chooses, in the order a metric that gives two is told of it."""
PARSERS: tuple[type[KeyedParser], ...] = (LastNumber, JsonPath, Regex)
"""The parsers a key chooses (the first is the default)."""

_ATTRIBUTE = {(f.alias or name): name for name, f in MetricKeys.model_fields.items()}
KEYS = [key for key in _ATTRIBUTE if key in {c.key for c in READERS + PARSERS}]
"""The keys that choose a source, in the order they are listed to users."""


def source_of(m: MetricKeys) -> MetricSource:
    """The source a metric's keys choose; ValueError (the spec's one-line error) when
    they choose none, or two that do not go together."""
    given = {key for key in KEYS if getattr(m, _ATTRIBUTE[key]) not in (None, False)}
    parsers = [p for p in PARSERS if p.key in given]
    readers = [r for r in READERS if r.key in given]
    for reader in readers:
        if given - {reader.key} - reader.takes:
            raise ValueError(reader.conflict)
    if len(parsers) > 1:
        raise ValueError(
            f"give one of {', '.join(p.key for p in PARSERS)} (with file to read a file)"
        )
    parser: Parser = (parsers[0] if parsers else PARSERS[0]).of(m)
    if readers:
        return readers[0].of(m, parser)
    if not parsers:
        raise ValueError(f"give a source: {', '.join(KEYS[:-1])} or {KEYS[-1]}")
    return Stdout(parser)
