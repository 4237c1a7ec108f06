"""The shell an SSH worker runs: the wrapper around each command, the small scripts for
metric files, and the parsing of what the wrapper reports (pure: text in, text out).

The wrapper is a POSIX shell script, the channel's command itself when the worker's login
shell is bash (no second shell to start), else fed on stdin to ``bash -s`` (else
``/bin/sh -s``):

- the user's command runs under coreutils ``timeout``, which puts itself and so the command
  in a process group of its own (the connection checks that it does), stdin from
  /dev/null, pinned with ``taskset -c`` when ``cpus`` is set; no ``setsid``: sshd already
  starts every channel's shell in a session of its own, and a second session cost several
  ms per trial on a loaded worker (``setsid timeout 5 true`` took 5 ms longer than
  ``timeout 5 true`` on 2 cores at load 6);
- the timeout is enforced *on the worker* by ``timeout``, which SIGTERMs the whole
  group, then SIGKILLs it after a grace period, so no network delay stretches it (exit 124
  or 137 after at least the timeout counts as timed out); every command runs under it,
  with or without a timeout, so all trials pay the same; after every command whatever the
  trial left in its group is killed, so a stray child cannot perturb the next trial;
- ``wall`` is the worker's own clock around the command (bash's ``$EPOCHREALTIME``, a
  builtin, or ``date +%s.%N`` where there is no bash; the fork/exec of the command is
  included, as locally), not the controller's, so it contains no network round trip;
- the CPU time of the command's process tree is the shell builtin ``times`` after the
  command was waited for (its children's user and system time), read as a difference
  from before the command; its peak memory (``max_rss``) comes from GNU time's ``%M``
  when the worker has ``/usr/bin/time`` (it waits for the command as the shell would),
  and is absent otherwise;
- the wrapper reports the group id, the resource use and the exit code with its
  timestamps as marker lines on stderr carrying a per-executor random token; they are
  picked out as stderr streams in and stripped before the output is stored;
- the channel's stdin stays open for the whole command and a watcher in the wrapper blocks
  reading it: when it closes (washout died, or the connection dropped) the watcher kills
  the command's group, so a trial never outlives its controller on the worker.
"""

from __future__ import annotations

import asyncio
import re
import shlex

from washout.harness.executors.base import (
    METRIC_FILE_LIMIT,
    SESSION_VARIABLE,
    TAIL_BYTES,
    OutputTail,
)

KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL for a timed-out process group (as locally)."""
SHELL = "command -v bash >/dev/null 2>&1 && exec bash -s || exec /bin/sh -s"
"""What a login shell other than bash starts to read the wrapper from stdin: bash when the
worker has it (its $EPOCHREALTIME reads the clock without a fork), else POSIX sh
(``date``)."""
INLINE_LIMIT = 64 << 10
"""The longest wrapper sent as the channel's command to a bash login shell (sshd passes it
as one argument, which Linux bounds at 128 KiB); a longer one (large ``env`` values) goes
on stdin."""
GNU_TIME = "/usr/bin/time"
"""GNU time, used for ``max_rss`` when the worker has it (Debian package ``time``)."""
MARKER_ROOM = 160
"""Bytes of stderr kept from one chunk to the next so a marker line split between two
chunks is still seen (a marker line is under 130 bytes)."""


def remote_path(path: str) -> str:
    """``path`` quoted for the worker's shell, with a leading ``~/`` meaning ``$HOME``."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def wrapper_script(
    command: str,
    *,
    token: str,
    timeout: float | None,
    cwd: str | None,
    env: dict[str, str] | None,
    cpus: str | None,
    keep_stdout: bool = True,
    gnu_time: bool = False,
) -> str:
    """The ``sh`` script that runs one command on the worker (see the module docstring).

    Nothing but the command runs between the two clock readings: ``taskset`` execs in
    place and ``timeout`` (and GNU ``time``, when there) fork the command and then
    only wait, so no helper competes with the trial for CPU. The watcher that has the
    command's group killed when the channel closes (washout died or lost the connection)
    is started before the first reading and only blocks on a read; at the end of the
    channel it signals the wrapper, whose trap kills the group (and ends the wrapper).
    The script is one ``{ ... }`` block, so a shell reading it from stdin has read all of
    it before it runs and what follows (nothing, then the end of the channel) is the
    watcher's. Until ``timeout`` has made its group (its first step), the group is only
    its own process, so every kill names that process too.
    Without ``keep_stdout`` the command's stdout is /dev/null (``output_tail = 0``);
    with ``gnu_time`` (the worker has GNU time 1.8 or later, whose ``-q`` keeps it from
    adding lines of its own to stderr) the command runs under it for ``max_rss``.
    """
    mark = f"@@washout:{token}:"
    lines = ["{"]
    if cwd:
        lines.append(f"cd -- {remote_path(cwd)} || exit 1")
    for key, value in (env or {}).items():
        lines.append(f"export {key}={shlex.quote(value)}")
    launch = ""
    needs = []
    if cpus:
        needs.append(("taskset", f"for cpus = {cpus!r}"))
        launch += f"taskset -c {shlex.quote(cpus)} "
    # Always under timeout(1) (0 disables it), so a test with a timeout and one without
    # carry the same process structure, and the same fork, in their wall.
    needs.append(("timeout", "needed to run trials"))
    launch += f"timeout -k {KILL_GRACE:g} {0 if timeout is None else timeout:.3f}"
    for tool, why in needs:
        message = shlex.quote(f"washout: needs {tool} ({why}), which is missing on the worker")
        lines.append(f"command -v {tool} >/dev/null 2>&1 || {{ echo {message} >&2; exit 127; }}")
    if gnu_time:  # the peak RSS of the tree it waited for, one marker line on stderr
        launch += f" {GNU_TIME} -q -f '{mark}rss %M'"
    lines += [
        "exec 3<&0",
        """trap 'kill -s KILL -- "-$g" "$g" 2>/dev/null; exit 129' USR1""",
        "(while read -r _; do :; done <&3; kill -s USR1 $$) >/dev/null 2>&1 &",
        "w=$!",
        f"printf '{mark}cpu0 ' >&2; times >&2",
        "t0=${EPOCHREALTIME:-$(date +%s.%N)}",
        f"{launch} /bin/sh -c {shlex.quote(command)} </dev/null"
        f"{'' if keep_stdout else ' >/dev/null'} 3<&- &",
        "g=$!",
        f"printf '{mark}pgid %s\\n' \"$g\" >&2",
        'wait "$g"; rc=$?',
        "t1=${EPOCHREALTIME:-$(date +%s.%N)}",
        f"printf '{mark}cpu1 ' >&2; times >&2",
        'kill -s KILL -- -"$g" "$w" 2>/dev/null',
        f'printf \'{mark}end %s %s %s\\n\' "$rc" "$t0" "$t1" >&2',
        'exit "$rc"',
        "}",
    ]
    return "\n".join(lines) + "\n"


def markers(token: str) -> re.Pattern[bytes]:
    """The wrapper's marker lines for one executor's token. ``times`` prints two lines
    (the shell's own times, then its children's), so a ``cpu`` marker spans both."""
    return re.compile(
        rb"@@washout:"
        + token.encode()
        + rb":(?:(?P<cpu>cpu[01]) (?P<times>[^\n]*\n[^\n]*)"
        + rb"|(?P<kind>pgid|end|rss)(?P<rest>[^\n]*))\n"
    )


MISSING_TOOL = re.compile(rb"washout: needs ([a-z]+) \(([^)\n]*)\), which is missing")
_TIMES = re.compile(rb"(\d+)m([\d.,]+)s")


def children_cpu(times_output: bytes) -> tuple[float, float] | None:
    """The children's user and system seconds from the shell builtin ``times`` (its second
    line, ``0m0.012s 0m0.004s``; POSIX, "times", Shell Command Language); None if not
    in that form."""
    lines = times_output.strip().split(b"\n")
    if len(lines) != 2:
        return None
    found = _TIMES.findall(lines[1])
    if len(found) != 2:
        return None
    return tuple(int(m) * 60 + float(s.replace(b",", b".")) for m, s in found)  # type: ignore[return-value]


def nanoseconds(stamp: bytes) -> int | None:
    """``SECONDS.FRACTION`` (bash's $EPOCHREALTIME, whose radix follows the locale, or
    ``date +%s.%N``) as integer nanoseconds; None when the worker's date has no %N."""
    whole, _, fraction = stamp.replace(b",", b".").partition(b".")
    if not whole.isdigit() or not fraction.isdigit():
        return None
    return int(whole) * 10**9 + int(fraction[:9].ljust(9, b"0"))


class Capture:
    """What a command's channel gave: the ends of stdout and stderr, and the wrapper's
    markers, picked out of stderr as it streams (so a long stderr cannot push the group
    id out of the kept tail)."""

    def __init__(self, pattern: re.Pattern[bytes], keep: int) -> None:
        self.pattern = pattern
        self.keep = keep
        self.out = OutputTail(keep)
        self.err = OutputTail(max(keep, TAIL_BYTES) + 2 * MARKER_ROOM)
        self.group: int | None = None
        self.end: tuple[int, float | None] | None = None
        self.resources: dict[str, float] = {}
        self._cpu: dict[bytes, tuple[float, float]] = {}
        self.ended = asyncio.Event()
        self._recent = b""

    def add_err(self, chunk: bytes) -> None:
        self.err.add(chunk)
        recent = self._recent + chunk
        for m in self.pattern.finditer(recent):
            if m.group("cpu"):
                if (cpu := children_cpu(m.group("times"))) is not None:
                    self._cpu[m.group("cpu")] = cpu
                continue
            kind, fields = m.group("kind"), m.group("rest").split()
            if kind == b"pgid" and len(fields) == 1 and fields[0].isdigit():
                self.group = self.group or int(fields[0])
            elif kind == b"rss" and len(fields) == 1 and fields[0].isdigit():
                self.resources["max_rss"] = int(fields[0]) * 1024.0  # GNU time: KiB
            elif kind == b"end" and len(fields) == 3 and fields[0].lstrip(b"-").isdigit():
                t0, t1 = nanoseconds(fields[1]), nanoseconds(fields[2])
                wall = (t1 - t0) / 1e9 if t0 is not None and t1 is not None else None
                self.end = int(fields[0]), wall
                if len(self._cpu) == 2:
                    (u0, s0), (u1, s1) = self._cpu[b"cpu0"], self._cpu[b"cpu1"]
                    self.resources["user"] = max(0.0, u1 - u0)
                    self.resources["system"] = max(0.0, s1 - s0)
                self.ended.set()
        self._recent = recent[-MARKER_ROOM:]

    def stderr(self) -> bytes:
        """Stderr without the markers, at most ``keep`` bytes (TAIL_BYTES at least)."""
        data = self.pattern.sub(b"", self.err.value())
        keep = max(self.keep, TAIL_BYTES)
        return data[len(data) - keep :] if len(data) > keep else data


def file_kind_script(path: str, cwd: str | None) -> str:
    """Shell lines that ``cd`` to ``cwd`` and set ``k`` to what ``path`` is: empty for a
    regular file, else "no such file", "a symbolic link" (for a link to no regular file),
    "a FIFO", "a directory"... ."""
    q = remote_path(path)
    kinds = "".join(
        f'elif [ -{flag} {q} ]; then k="{kind}"\n'
        for flag, kind in (
            ("f", ""),
            ("d", "a directory"),
            ("p", "a FIFO"),
            ("c", "a character device"),
            ("b", "a block device"),
            ("S", "a socket"),
            ("L", "a symbolic link"),
        )
    )
    return (
        (f"cd -- {remote_path(cwd)} || exit 1\n" if cwd else "")
        + f'if [ ! -e {q} ] && [ ! -L {q} ]; then k="no such file"\n'
        + f"{kinds}else k='not a regular file'\nfi\n"
    )


def read_file_script(path: str, cwd: str | None) -> str:
    """``cat`` a metric file after checking that it is a regular file of at most
    METRIC_FILE_LIMIT bytes (else exit 1 saying why on stderr)."""
    q = remote_path(path)
    return (
        file_kind_script(path, cwd)
        + 'case "$k" in "") ;; "no such file") echo "No such file or directory" >&2;'
        + ' exit 1 ;;\n*) echo "$k, not a regular file" >&2; exit 1 ;; esac\n'
        + f"n=$(wc -c < {q}) || exit 1\n"
        + f'[ "$n" -le {METRIC_FILE_LIMIT} ] || {{ echo "$n bytes, more than the '
        + f'{METRIC_FILE_LIMIT >> 20} MiB washout reads for a metric" >&2; exit 1; }}\n'
        + f"exec cat -- {q}\n"
    )


def remove_file_script(path: str, cwd: str | None) -> str:
    """As locally: remove a regular file or a symbolic link, nothing there is fine,
    anything else is left alone (exit 1 saying why)."""
    return (
        file_kind_script(path, cwd)
        + 'case "$k" in "" | "a symbolic link") ;; "no such file") exit 0 ;;\n'
        + '*) echo "$k, not a regular file" >&2; exit 1 ;; esac\n'
        + f"rm -f -- {remote_path(path)}\n"
    )


def kill_group_script(group: int) -> str:
    """SIGTERM a process group, wait up to KILL_GRACE for it to go, then SIGKILL it."""
    polls = int(KILL_GRACE / 0.1)
    return (
        f"kill -s TERM -- -{group} 2>/dev/null || exit 0\n"
        f"i=0; while [ $i -lt {polls} ] && kill -s 0 -- -{group} 2>/dev/null; "
        "do sleep 0.1; i=$((i + 1)); done\n"
        f"kill -s KILL -- -{group} 2>/dev/null; exit 0\n"
    )


def kill_sessions_script(tokens: list[str]) -> str:
    """SIGKILL every process of this user whose environment carries one of ``tokens`` as
    SESSION_VARIABLE (what trials of those sessions left running), printing how many.
    GNU grep reads the environments; a worker without it kills nothing."""
    patterns = " ".join(f"-e {shlex.quote(f'{SESSION_VARIABLE}={t}')}" for t in tokens)
    return (
        f"p=$(grep -l -s -z -x -F {patterns} /proc/[0-9]*/environ 2>/dev/null"
        " | sed -n 's|^/proc/\\([0-9]*\\)/environ$|\\1|p')\n"
        '[ -n "$p" ] && kill -s KILL $p 2>/dev/null\n'
        "echo $p | wc -w\n"
    )
