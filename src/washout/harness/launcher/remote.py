"""The launcher on an SSH worker: ``launch.c`` shipped over the connection and compiled
there with the worker's ``cc``, once per worker and source (the worker's
``$XDG_CACHE_HOME/washout``, by default ``~/.cache/washout``, under the name the local
build uses: :func:`~washout.harness.launcher.build.program_name` of ``uname -m``), then
run by the worker's runner in its one-shot mode (``launch --once``) for each command, so
the command's wall and rusage are taken in C around it alone (docs/design.md, "The
launcher").

Without a compiler on the worker (``cc``, or the worker's ``$CC``), or with
``WASHOUT_LAUNCHER=off`` on the controller, the worker's commands run as before the
launcher (under GNU time, timed by the runner's shell), and the run says so.
"""

from __future__ import annotations

import shlex

from washout.harness.launcher.build import COMPILE_SECONDS, FLAGS, LINKING, SOURCE, program_name

BUILT, MISSING = "launcher ", "no launcher: "
"""How the build script's one line of answer starts: the program's path, or why none."""


def build_script() -> str:
    """A POSIX shell script for the worker that prints ``launcher PATH`` when the launcher
    is built there, building it first from the source on its stdin when it is not (every
    way of linking in turn, as locally, the compiler under ``timeout``), else
    ``no launcher: WHY``. Concurrent builds each write their own file and rename it into
    place whole."""
    flags = " ".join(map(shlex.quote, FLAGS))
    attempts = " || ".join(
        f'timeout {COMPILE_SECONDS} "$c" {flags} {" ".join(map(shlex.quote, linking))}'
        ' -o "$p.$$" "$s" 2>"$s.err"'
        for linking in LINKING
    )
    return f"""d="${{XDG_CACHE_HOME:-$HOME/.cache}}/washout"
p="$d/{program_name("")}$(uname -m)"
if [ ! -x "$p" ]; then
  c=$(command -v "${{CC:-cc}}") ||
    {{ echo "{MISSING}no C compiler (${{CC:-cc}}) to build it"; exit 0; }}
  mkdir -p "$d" 2>/dev/null || {{ echo "{MISSING}cannot create $d"; exit 0; }}
  s="$p.$$.c"
  cat > "$s" && {{ {attempts}; }} && mv -f "$p.$$" "$p"
  [ -x "$p" ] || echo "{MISSING}$c could not build it: $(head -n 1 "$s.err" 2>/dev/null)"
  rm -f "$s" "$s.err" "$p.$$"
  [ -x "$p" ] || exit 0
fi
echo "{BUILT}$p"
"""


def build_step() -> tuple[str, bytes]:
    """The build as a step of the connection's first command (one shell word, so it joins
    the other steps with ``;``) and the source to send on that command's stdin."""
    return f"/bin/sh -c {shlex.quote(build_script())}", SOURCE.read_bytes()


def no_launcher_note(where: str, why: str) -> str:
    """What a run says when a worker's commands run without a launcher."""
    return (
        f"{where}: no launcher ({why}): its commands run under GNU time and their wall, "
        "timed by the runner's shell, holds the start of sh, timeout and GNU time "
        "(docs/design.md, 'The launcher')"
    )
