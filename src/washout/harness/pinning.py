"""CPU pinning: the ``cpus = "2-3,6"`` list syntax (as taskset -c and cpusets write it)."""

from __future__ import annotations


def parse_cpus(text: str) -> set[int]:
    """Parse a Linux CPU list (``"0-3,6"``) into a set of CPU numbers.

    Raises ValueError with the offending piece; the spec loader turns that into a one-line
    error naming the field.
    """
    cpus: set[int] = set()
    for piece in text.replace(" ", "").split(","):
        if not piece:
            raise ValueError(f"empty item in CPU list {text!r}")
        lo, sep, hi = piece.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"{piece!r} is not a CPU number or range")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ValueError(f"range {piece!r} runs backwards")
        cpus.update(range(first, last + 1))
    return cpus


def format_cpus(cpus: set[int]) -> str:
    """A set of CPU numbers as the kernel writes a list (``"0-3,6"``): the inverse of
    :func:`parse_cpus`; ``""`` for no CPU."""
    pieces: list[str] = []
    ordered = sorted(cpus)
    start = 0
    for i, cpu in enumerate(ordered):
        if i + 1 == len(ordered) or ordered[i + 1] != cpu + 1:
            first = ordered[start]
            pieces.append(str(cpu) if first == cpu else f"{first}-{cpu}")
            start = i + 1
    return ",".join(pieces)
