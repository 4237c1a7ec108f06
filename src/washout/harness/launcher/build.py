"""The launcher's program: ``launch.c`` beside this module, compiled on first use with the
system's ``cc`` into washout's cache directory, under a name that holds the hash of its
source and build flags
(a changed source is compiled afresh; concurrent washouts each write their own file and
rename it into place whole). It is linked statically where the C library allows: a
dynamic launcher's own resident set (about 1.2 MB) is above ``true``'s, so a command as
small as that would report the launcher's peak, not its own.

Without a C compiler (or with ``WASHOUT_LAUNCHER=off``) there is no launcher: local
trials are then started from washout's own process, and their ``max_rss`` and timed window
are the harness's (docs/design.md, "The launcher").
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("launch.c")
FLAGS = ("-O2",)
LINKING = (("-static",), ())
"""How it is built: each way of linking in turn until one works (static where the C
library allows it). The cache key holds these with the source."""
COMPILE_SECONDS = 120
"""The longest a compile may take before washout does without the launcher."""


def cache_dir() -> Path:
    """Where washout keeps what it builds (``$XDG_CACHE_HOME/washout``, by default
    ``~/.cache/washout``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "washout"


def turned_off() -> bool:
    """Whether ``WASHOUT_LAUNCHER=off`` (or 0, no) asks for no launcher, here or on workers."""
    return os.environ.get("WASHOUT_LAUNCHER", "").lower() in ("off", "0", "no")


def program_name(machine: str) -> str:
    """The compiled launcher's file name for a machine (``uname -m``): the hash of its
    source and build flags, so a changed source is built afresh (here and on workers)."""
    recipe = SOURCE.read_bytes() + repr((FLAGS, LINKING)).encode()
    return f"launch-{hashlib.sha256(recipe).hexdigest()[:16]}-{machine}"


@functools.cache
def launcher_program() -> tuple[Path | None, str]:
    """The compiled launcher, or None and why there is none (one line, said once in a
    run's output)."""
    if turned_off():
        return None, "WASHOUT_LAUNCHER=off"
    program = cache_dir() / program_name(platform.machine())
    if os.access(program, os.X_OK):
        return program, ""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return None, "no C compiler (cc) to build it"
    try:
        program.parent.mkdir(parents=True, exist_ok=True)
        partial = program.with_name(f"{program.name}.{os.getpid()}")
        for linking in LINKING:
            done = subprocess.run(
                [compiler, *FLAGS, *linking, "-o", str(partial), str(SOURCE)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=COMPILE_SECONDS,
            )
            if done.returncode == 0:
                break
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            first = (done.stderr.decode(errors="replace").strip().splitlines() or ["?"])[0]
            return None, f"{compiler} could not build it: {first}"
        os.replace(partial, program)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"could not build it in {program.parent}: {err}"
    return program, ""


def no_launcher_note(why: str) -> str:
    """What a run says when its local commands start from washout itself."""
    return (
        f"no launcher ({why}): local commands start from washout's own process, so a "
        "max_rss below washout's own peak is not recorded and each wall holds washout's "
        "start of the command (docs/design.md, 'The launcher')"
    )
