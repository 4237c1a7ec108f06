"""Independent jobs (a report's figures: drawing one and writing it out is pure CPU, most of
a report's time) spread over the cores this process may use, by forking; and one job run
:func:`beside` other work of the caller's.

Each forked child inherits the jobs as they are (no data or figure is pickled), takes the
next job's index from a pipe the parent filled before forking (a read of one index is
atomic, so every job is taken once, and a slow job does not hold the others back), and
sends back only its result, bytes. The parent takes jobs too. Whatever a child did not
deliver (it failed, or was killed) the parent then runs itself, so a job's exception is
raised where the caller sees it. Results come back in the jobs' order whichever process
ran them, so the output is the same as serially.

Serial where forking is not safe or not worth it: one usable core, a single job and nothing
else to do, or other threads running (a child inherits every lock, also those another
thread holds).
"""

from __future__ import annotations

import os
import pickle
import struct
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

Job = Callable[[], bytes]
T = TypeVar("T")
Progress = Callable[[int, int], None]
"""Called with (jobs done, jobs in all) as jobs finish: figures take a report's time."""

INDEX = struct.Struct("<I")  # a job's index in the job pipe
HEADER = struct.Struct("<IQ")  # a result: its job's index and length, then the bytes
MAX_JOBS = 4096 // INDEX.size  # the job pipe is filled before forking: one page always fits


def usable_cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0))


def run_jobs(
    jobs: Sequence[Job],
    progress: Progress | None = None,
    workers: int | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> list[bytes]:
    """Every job's result, in the jobs' order, from ``workers`` processes (the caller and
    forked children; default :func:`usable_cores`). ``meanwhile`` is work of the caller's
    that needs no result: it runs in the caller once the children have started, so it
    overlaps their jobs."""
    n = len(jobs)
    results: dict[int, bytes] = {}  # filled by this process and the children's readers
    told = 0

    def tell() -> None:  # every count once, in order, as serially
        nonlocal told
        while progress and told < len(results):
            told += 1
            progress(told, n)

    forks = min(workers or usable_cores(), n + (meanwhile is not None)) - 1
    if forks > 0 and n <= MAX_JOBS and threading.active_count() == 1:
        _share(jobs, forks, results, tell, meanwhile)
    elif meanwhile:
        meanwhile()
    for i in range(n):  # serially: all of them, or what no child delivered
        if i not in results:
            results[i] = jobs[i]()
            tell()
    return [results[i] for i in range(n)]


def beside(job: Callable[[], T], meanwhile: Callable[[], object], workers: int | None = None) -> T:
    """``job``'s result, from a forked child while this process does ``meanwhile`` (both
    here, one after the other, where :func:`run_jobs` would not fork). The result comes
    back pickled from washout's own child."""
    [result] = run_jobs([partial(_pickled, job)], workers=workers, meanwhile=meanwhile)
    loaded: T = pickle.loads(result)
    return loaded


def _pickled(job: Callable[[], T]) -> bytes:
    return pickle.dumps(job(), protocol=pickle.HIGHEST_PROTOCOL)


def _share(
    jobs: Sequence[Job],
    forks: int,
    results: dict[int, bytes],
    tell: Callable[[], None],
    meanwhile: Callable[[], object] | None,
) -> None:
    """Run ``jobs`` on this process and ``forks`` children until the job pipe is empty,
    their results in ``results``; ``tell`` after each of this process's jobs, whose first
    waits for ``meanwhile``."""
    queue_r, queue_w = os.pipe()
    os.write(queue_w, b"".join(INDEX.pack(i) for i in range(len(jobs))))
    os.close(queue_w)
    children: list[int] = []
    readers: list[threading.Thread] = []
    try:
        pipes = []
        for _ in range(forks):  # every fork before the first thread starts
            result_r, result_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: never returns
                os.close(result_r)
                _child(jobs, queue_r, result_w)
            os.close(result_w)
            children.append(pid)
            pipes.append(result_r)
        for result_r in pipes:
            readers.append(threading.Thread(target=_collect, args=(result_r, results)))
            readers[-1].start()
        if meanwhile:
            meanwhile()
        while (i := _take(queue_r)) is not None:
            results[i] = jobs[i]()
            tell()
    finally:
        os.close(queue_r)
        for reader in readers:
            reader.join()
        for pid in children:
            os.waitpid(pid, 0)
    tell()


def _take(queue: int) -> int | None:
    """The next job's index from the job pipe, or None when it is empty."""
    data = os.read(queue, INDEX.size)
    return INDEX.unpack(data)[0] if data else None


def _child(jobs: Sequence[Job], queue: int, result_w: int) -> None:
    """Run jobs from the pipe until it is empty, each result written as it is done; exit
    without running the parent's cleanup (atexit, buffered output) whatever happens: a
    failed job is run again by the parent, which then raises its error."""
    code = 1
    try:
        with os.fdopen(result_w, "wb") as out:
            while (i := _take(queue)) is not None:
                result = jobs[i]()
                out.write(HEADER.pack(i, len(result)) + result)
                out.flush()
        code = 0
    finally:
        os._exit(code)


def _collect(result_r: int, into: dict[int, bytes]) -> None:
    """Read a child's results into ``into`` until it exits; an incomplete last result (the
    child died writing it) is left out."""
    with os.fdopen(result_r, "rb") as stream:
        while len(header := stream.read(HEADER.size)) == HEADER.size:
            i, size = HEADER.unpack(header)
            data = stream.read(size)
            if len(data) < size:
                return
            into[i] = data
