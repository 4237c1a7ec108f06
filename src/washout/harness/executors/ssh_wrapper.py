"""The shell an SSH worker runs: the runner that runs each command, the small scripts for
metric files, and the parsing of what the runner reports (pure: text in, text out).

Every command runs in a **runner**: one long-lived channel per command in flight (the
executor keeps the idle ones for the next command) running :data:`RUNNER`, a small
POSIX shell loop, in bash when the worker has it (the channel's command itself when the
login shell is bash) else in ``/bin/sh``. A channel per trial cost a round trip to open
it, a login shell's start and its exit status and close every trial, about as much as
the trial's own fork/exec chain; the runner pays them once per channel. It reads one
request per command from its stdin, framed as a line holding the number of lines that
follow (a shell text built with every value quoted by :func:`shlex.quote`, so a value
reaches the shell as data: quotes, newlines and any byte but NUL round-trip), and runs it
the same way whatever came before:

- the user's command runs under coreutils ``timeout``, which puts itself and so the command
  in a process group of its own (the connection checks that it does), stdin from
  /dev/null, pinned with ``taskset -c`` when ``cpus`` is set, in ``cwd`` with ``env``
  (set in the command's own forked shell, so nothing of one command reaches the next);
  no ``setsid``: sshd already starts every channel's shell in a session of its own, and
  a second session cost several ms per trial on a loaded worker;
- ``timeout``'s child is the **launcher** in its one-shot mode (``launch --once``: the
  local launcher's ``launch.c``, built on the worker when it first connects,
  :mod:`washout.harness.launcher.remote`), which starts the command in the same group
  (its plain words directly, as locally, anything else in ``/bin/sh -c``), waits for it
  with ``wait4`` and writes one marker line on stderr: its wall, CPU times, peak RSS and
  involuntary switches; a worker without a launcher (no ``cc``, or
  ``WASHOUT_LAUNCHER=off``) runs the command under GNU time instead, as before it;
- the timeout is enforced *on the worker* by ``timeout``, which SIGTERMs the whole
  group, then SIGKILLs it after a grace period, so no network delay stretches it (exit 124
  or 137 after at least the timeout counts as timed out); every command runs under it,
  with or without a timeout, so all trials pay the same; after every command whatever the
  trial left in its group is killed, so a stray child cannot perturb the next trial;
- ``wall`` is the launcher's clock around the command alone (``CLOCK_MONOTONIC`` from
  just before its vfork to just after ``waitid`` sees the exit, as locally), so the
  runner's forked shell, ``taskset``, ``timeout`` and the launcher's own start are
  outside it; without a launcher, or when the timeout killed it with the command, it is
  the runner's clock around the whole chain (bash's ``$EPOCHREALTIME``, a builtin, or
  ``date +%s.%N`` where there is no bash), with the start of sh, ``timeout`` and GNU
  time inside it. Either is the worker's clock, not the controller's, so it contains no
  network round trip;
- the CPU time and peak memory (``max_rss``) of the command's process tree are the
  launcher's ``wait4``; without it the CPU time is the shell builtin ``times`` after the
  command was waited for (its children's user and system time), read as a difference
  from before the command (also what a timed-out command keeps), and ``max_rss`` GNU
  time's ``%M`` when the worker has ``/usr/bin/time`` (it waits for the command as the
  shell would), absent otherwise;
- the runner reports the group id, the resource use and the exit code with its
  timestamps as marker lines on stderr carrying a per-executor random token; they are
  picked out as stderr streams in and stripped before the output is stored; a last
  marker on stdout, written after the command and its group are gone, ends the
  command's stdout (the two streams travel apart, so each needs its own end); output
  after it (a daemon that left the trial's group) is dropped until the next command
  starts, and would be mixed into that command's output;
- while a command runs, a watcher blocks reading the runner's stdin: when it closes
  (washout died, or the connection dropped) the watcher has the runner kill the
  command's group and exit, so a trial never outlives its controller on the worker; the
  controller sends nothing while a command runs, and the runner reaps the watcher before
  it reports the end, so the watcher never takes a byte of the next request;
- after the command, outside its timing, the runner reads the first line of each file
  the executor asked it to (``a``, sent once per runner; shell builtins, no fork) and
  appends them to its end marker: the facts of the moment that the environment check
  before each run would otherwise read with a command of its own
  (:func:`washout.harness.environment.moment`), so that check costs no round trip,
  and the first trial of a run follows a trial, as every other trial does; bash's
  clock around the read goes with them, so a worker whose sensor is slow to read can
  be read before each run instead;
- for a trial (``H`` set by its request), the runner reads the machine's health counters
  just before the first clock reading and just after the command's group is gone
  (:data:`washout.harness.metrics.health.RUNNER_READING`, defined when the runner is
  bash), each as a marker line on stderr, and the launcher's marker (or GNU time's
  ``rss`` marker) carries the tree's involuntary context switches.
"""

from __future__ import annotations

import re
import shlex

from washout.data.health import INVOLUNTARY_SWITCHES, Reading, health_values
from washout.harness.executors.base import (
    METRIC_FILE_LIMIT,
    SESSION_VARIABLE,
    TAIL_BYTES,
    OutputTail,
)
from washout.harness.executors.local import plain_words
from washout.harness.metrics.health import USER_HZ, marker_reading, runner_reading
from washout.harness.pinning import parse_cpus

KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL for a timed-out process group (as locally)."""
GNU_TIME = "/usr/bin/time"
"""GNU time, used for ``max_rss`` on a worker without a launcher when it has GNU time
(Debian package ``time``)."""
MARKER_ROOM = 1024
"""Bytes of stderr kept from one chunk to the next so a marker line split between two
chunks is still seen (a marker line is under 130 bytes, plus the short first lines of
the files read after the command: about 130 more for the moment's facts)."""

RUNNER = (
    """exec 3<&0
need() { command -v "$1" >/dev/null 2>&1 && return
printf 'washout: needs %s (%s), which is missing on the worker\\n' "$1" "$2" >&2; exit 127; }
trap 'kill -s KILL -- "-$g" "$g" 2>/dev/null; exit 129' USR1
g= a= hh=
[ -n "${BASH_VERSION-}" ] && eval """
    + shlex.quote(runner_reading())
    + """ && hh=1
while IFS= read -r n; do
case $n in '' | *[!0-9]*) exit 2 ;; esac
s=
while [ "$n" -gt 0 ] && IFS= read -r l; do s="$s$l
"; n=$((n - 1)); done
[ "$n" -eq 0 ] || exit 2
eval "$s"
(while read -r _; do :; done <&3; kill -s USR1 $$) >/dev/null 2>&1 &
w=$!
[ -n "$H" ] && [ -n "$hh" ] && hl h0
printf '%scpu0 ' "$m" >&2; times >&2
t0=${EPOCHREALTIME:-$(date +%s.%N)}
x </dev/null 3<&- 4<&- &
g=$!
printf '%spgid %s\\n' "$m" "$g" >&2
wait "$g"; rc=$?
t1=${EPOCHREALTIME:-$(date +%s.%N)}
printf '%scpu1 ' "$m" >&2; times >&2
kill -s KILL -- -"$g" "$w" 2>/dev/null; wait "$w" 2>/dev/null
[ -n "$H" ] && [ -n "$hh" ] && hl h1
f= r0=${EPOCHREALTIME:--}
for p in $a; do v=; read -r v <"$p"; f="$f\t$v"; done 2>/dev/null
printf '%send %s %s %s %s %s%s\\n' "$m" "$rc" "$t0" "$t1" "$r0" "${EPOCHREALTIME:--}" "$f" >&2
printf '%seot\\n' "$m"
g=
done
"""
)
"""The runner's loop (see the module docstring): per request, ``eval`` of its text sets
``m`` (the marker prefix) and defines ``x`` (the command, run in a forked shell, where
``need`` exits 127 naming a tool it lacks), then
the command runs between the two clock readings with nothing else: the watcher is
started before the first, and ``x`` only changes directory, exports and execs
``taskset``/``timeout`` (and the launcher or GNU ``time``, which start the command and
then only wait; the launcher's own clock, around the command alone, is the one kept).
Until ``timeout`` has made its group (its first step), the group is only its own
process, so every kill names that process too. ``a`` (set by a request, kept by the
runner) lists the files whose first lines follow the end marker's fields, each after a
tab. An unframed or cut request ends it."""


def remote_path(path: str) -> str:
    """``path`` quoted for the worker's shell, with a leading ``~/`` meaning ``$HOME``."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def runner_command(login_bash: bool) -> str:
    """The runner channel's command: the loop itself for a bash login shell, else bash
    (its $EPOCHREALTIME reads the clock without a fork) or POSIX sh given the loop as an
    argument (its stdin carries the requests)."""
    if login_bash:
        return RUNNER
    loop = shlex.quote(RUNNER)
    return f"command -v bash >/dev/null 2>&1 && exec bash -c {loop} || exec /bin/sh -c {loop}"


def request(
    command: str,
    *,
    token: str,
    timeout: float | None,
    cwd: str | None,
    env: dict[str, str] | None,
    cpus: str | None,
    keep_stdout: bool = True,
    gnu_time: bool = False,
    read_after: tuple[str, ...] | None = None,
    health: str | None = None,
    launcher: str | None = None,
) -> bytes:
    """One command for the runner, framed: the number of lines, then a shell text that
    sets ``m`` and defines ``x`` (see :data:`RUNNER`).

    ``x`` changes to ``cwd``, exports ``env``, checks the tools it needs (exit 127 naming
    the one missing), and execs the command under ``timeout``. Without ``keep_stdout``
    the command's stdout is /dev/null (``output_tail = 0``); with ``gnu_time`` (the worker
    has GNU time 1.8 or later, whose ``-q`` keeps it from adding lines of its own to
    stderr) and no ``launcher`` the command runs under it for ``max_rss``. ``read_after``
    (paths without blanks or glob characters) sets the files the runner reads after this
    command and every later one (:data:`RUNNER`); None leaves the runner's list as it is.
    ``health`` (a root, ``/`` on a real machine) has the runner read the health counters
    around the command, for its ``cpus`` (else every CPU). With ``launcher`` (its path on
    the worker) the command runs under ``timeout`` through the launcher's one-shot mode
    instead of GNU time: its plain words directly, as locally, anything else in
    ``/bin/sh -c``.
    """
    mark = f"@@washout:{token}:"
    lines = [f"m={shlex.quote(mark)}", health_variables(health, cpus), "x() {"]
    if read_after is not None:
        assert not any(set(path) & set(" \t\n*?[") for path in read_after), read_after
        lines.insert(0, f"a={shlex.quote(' '.join(read_after))}")
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
    lines += [f"need {tool} {shlex.quote(why)}" for tool, why in needs]
    argv = ["/bin/sh", "-c", command]
    if launcher is not None:  # wall, rusage, one marker line on stderr
        launch += f" {shlex.quote(launcher)} --once {shlex.quote(mark)}"
        argv = plain_words(command) or argv
    elif gnu_time:  # the tree's peak RSS and involuntary switches, one marker line on stderr
        launch += f" {GNU_TIME} -q -f '{mark}rss %M %c'"
    if not keep_stdout:
        lines.append("exec >/dev/null")
    lines += [f"exec {launch} {shlex.join(argv)}", "}"]
    text = "\n".join(lines) + "\n"
    return f"{text.count(chr(10))}\n{text}".encode()


def health_variables(root: str | None, cpus: str | None) -> str:
    """The request's line setting what :data:`RUNNER` reads around the command: ``H``
    (empty: no health reading), the root ``hr`` (``/`` as empty: paths are appended) and
    the CPUs ``hc`` (blank: every CPU)."""
    if root is None:
        return "H="
    chosen = " ".join(map(str, sorted(parse_cpus(cpus)))) if cpus else ""
    return f"H=1 hr={shlex.quote(root.rstrip('/'))} hc={shlex.quote(chosen)}"


def markers(token: str) -> re.Pattern[bytes]:
    """The runner's marker lines for one executor's token. ``times`` prints two lines
    (the shell's own times, then its children's), so a ``cpu`` marker spans both."""
    return re.compile(
        rb"@@washout:"
        + token.encode()
        + rb":(?:(?P<cpu>cpu[01]) (?P<times>[^\n]*\n[^\n]*)"
        + rb"|(?P<kind>pgid|end|rss|run|h0|h1)(?P<rest>[^\n]*))\n"
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
    """What one command gave on its runner's channel: the ends of stdout and stderr, and
    the runner's markers, picked out of stderr as it streams (so a long stderr cannot
    push the group id out of the kept tail); stdout up to its end marker ``eot``."""

    def __init__(self, pattern: re.Pattern[bytes], eot: bytes, keep: int) -> None:
        self.pattern = pattern
        self.eot = eot
        self.keep = keep
        self.out = OutputTail(keep)
        self.err = OutputTail(max(keep, TAIL_BYTES) + 2 * MARKER_ROOM)
        self.group: int | None = None
        self.end: tuple[int, float | None] | None = None
        self.resources: dict[str, float] = {}
        self.switches: float | None = None
        """The tree's involuntary context switches (the launcher's, or GNU time's ``%c``)."""
        self.wall: float | None = None
        """The command's wall as the launcher took it (None: it ran without one, or the
        launcher was killed, as at a timeout)."""
        self.after: list[str] = []
        """The first lines of the files the runner read after the command (``a``)."""
        self.read_seconds: float | None = None
        """How long reading them took on the worker's clock (None: nothing was read, or
        the runner is not bash and has no clock without a process)."""
        self.health: dict[bytes, Reading] = {}
        """The health readings before (``h0``) and after (``h1``) the command."""
        self._cpu: dict[bytes, tuple[float, float]] = {}
        self._own: dict[str, float] = {}
        self._recent = b""
        self._held = b""
        self.out_ended = False

    @property
    def complete(self) -> bool:
        """Whether both streams have reached the command's end markers."""
        return self.out_ended and self.end is not None

    def add_out(self, chunk: bytes) -> None:
        """Stdout up to ``eot``; the bytes that could be the start of a split ``eot`` are
        held back until the next chunk shows what they are."""
        if self.out_ended:
            return
        data = self._held + chunk if self._held else chunk
        at = data.find(self.eot)
        if at >= 0:
            self.out.add(data[:at])
            self._held, self.out_ended = b"", True
            return
        cut = max(0, len(data) - len(self.eot) + 1)
        if cut:
            self.out.add(data[:cut])
        self._held = data[cut:]

    def add_err(self, chunk: bytes) -> None:
        if self.end is not None:
            return
        self.err.add(chunk)
        recent = self._recent + chunk
        for m in self.pattern.finditer(recent):
            if m.group("cpu"):
                if (cpu := children_cpu(m.group("times"))) is not None:
                    self._cpu[m.group("cpu")] = cpu
                continue
            kind, (head, *after) = m.group("kind"), m.group("rest").split(b"\t")
            fields = head.split()
            if kind == b"pgid" and len(fields) == 1 and fields[0].isdigit():
                self.group = self.group or int(fields[0])
            elif kind == b"rss" and len(fields) == 2 and all(f.isdigit() for f in fields):
                self.resources["max_rss"] = int(fields[0]) * 1024.0  # GNU time: KiB
                self.switches = float(fields[1])
            elif kind == b"run" and len(fields) == 6 and all(f.isdigit() for f in fields):
                _, *ns, rss, switches = map(int, fields)  # launch.c's --once: ns, KiB
                self.wall, user, system = (n / 1e9 for n in ns)
                self._own = {"user": user, "system": system, "max_rss": rss * 1024.0}
                self.switches = float(switches)
            elif kind in (b"h0", b"h1") and (reading := marker_reading(fields)) is not None:
                self.health[kind] = reading
            elif kind == b"end" and len(fields) == 5 and fields[0].lstrip(b"-").isdigit():
                self.after = [v.decode("utf-8", errors="replace") for v in after]
                r0, r1 = nanoseconds(fields[3]), nanoseconds(fields[4])
                if after and r0 is not None and r1 is not None:
                    self.read_seconds = (r1 - r0) / 1e9
                t0, t1 = nanoseconds(fields[1]), nanoseconds(fields[2])
                wall = self.wall
                if wall is None and t0 is not None and t1 is not None:
                    wall = (t1 - t0) / 1e9  # the runner's clock: no launcher, or killed
                self.end = int(fields[0]), wall
                if len(self._cpu) == 2:
                    (u0, s0), (u1, s1) = self._cpu[b"cpu0"], self._cpu[b"cpu1"]
                    self.resources["user"] = max(0.0, u1 - u0)
                    self.resources["system"] = max(0.0, s1 - s0)
                self.resources.update(self._own)
                break
        self._recent = recent[-MARKER_ROOM:]

    def health_values(self) -> dict[str, float]:
        """The command's health metrics from the runner's readings around it and GNU
        time's count of involuntary switches (each absent where it was not read)."""
        values: dict[str, float] = {}
        if self.switches is not None:
            values[INVOLUNTARY_SWITCHES] = self.switches
        before, after = self.health.get(b"h0"), self.health.get(b"h1")
        if before is not None and after is not None:
            used = self.resources
            own = used["user"] + used["system"] if "user" in used else None
            values.update(health_values(before, after, own_cpu=own, tick=1.0 / USER_HZ))
        return values

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
