"""A commit built once, in its own worktree, with what identifies the build.

``DIR/worktrees/SHA`` is the commit's worktree; ``--build`` runs there on the controller
(``WASHOUT_COMMIT`` set to the commit id) with its output in ``DIR/logs/SHA.log``. A build
is cached by commit id: the bisect's state keeps its record, and a commit is never built
twice. The record is its provenance: the status, the log's SHA-256 and tail, and the
SHA-256 of every file of the worktree (``DIR/worktrees/SHA.sha256``, in ``sha256sum``'s
format, so a worker checks its copy with ``sha256sum -c``), among them the files the build
wrote (``artifacts``: new, ignored or changed files, from ``git status``) and of those the
executables (``binaries``), which every step also names as ``[provenance] files``. A build
that fails is recorded with its log's tail and the commit is skipped, as ``git bisect
skip`` would.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shlex
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from washout.bisection.git import add_worktree, tracked_changes
from washout.errors import WashoutError
from washout.harness.executors.base import CommandOptions, CommandResult
from washout.harness.executors.local import LocalExecutor

LOG_TAIL = 2000
"""Characters of the end of a build's log kept in its record."""


@dataclass(frozen=True)
class Build:
    """One commit's build: ``status`` ok, failed or timeout (with ``reason``), how long it
    took, its log's hash and tail, and the hashes that identify what it made."""

    commit: str
    status: str
    reason: str
    seconds: float
    log_sha256: str
    log_tail: str
    manifest_sha256: str = ""
    files: int = 0
    artifacts: dict[str, str] = field(default_factory=dict)
    binaries: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["binaries"] = list(self.binaries)
        return d


def tree_path(root: Path, sha: str) -> Path:
    """Where a commit's worktree (and build) is."""
    return root / "worktrees" / sha


def manifest_path(root: Path, sha: str) -> Path:
    """The hashes of every file of a commit's build, beside its worktree."""
    return root / "worktrees" / f"{sha}.sha256"


def log_path(root: Path, sha: str) -> Path:
    return root / "logs" / f"{sha}.log"


def run_local(command: str, options: CommandOptions) -> CommandResult:
    """A command on this machine through washout's local executor (its own process group,
    killed at its timeout and if washout dies), from synchronous code: in a thread when an
    event loop already runs in this one (a notebook)."""
    job = LocalExecutor().run(command, options)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(job)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, job).result()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_line(digest: str, relative: str) -> str:
    """One line of ``sha256sum``'s output: a name holding a backslash or a newline is
    escaped and the line starts with a backslash, as GNU coreutils writes it."""
    if "\\" in relative or "\n" in relative:
        escaped = relative.replace("\\", "\\\\").replace("\n", "\\n")
        return f"\\{digest}  ./{escaped}\n"
    return f"{digest}  ./{relative}\n"


def tree_hashes(tree: Path) -> dict[str, str]:
    """SHA-256 of every regular file of a worktree (not its ``.git``), by relative path."""
    hashes = {}
    for dirpath, dirnames, filenames in os.walk(tree):
        here = Path(dirpath)
        if here == tree and ".git" in dirnames:
            dirnames.remove(".git")
        dirnames.sort()
        for name in sorted(filenames):
            path = here / name
            if here == tree and name == ".git":
                continue
            if stat.S_ISREG(path.lstat().st_mode):
                hashes[path.relative_to(tree).as_posix()] = file_sha256(path)
    return hashes


def build_commit(repo: Path, root: Path, sha: str, command: str, timeout: float | None) -> Build:
    """Check ``sha`` out into its worktree, run the build there, and record it."""
    tree = tree_path(root, sha)
    add_worktree(repo, tree, sha)
    log = log_path(root, sha)
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    result = run_local(
        f"( {command}\n) >{shlex.quote(str(log))} 2>&1",
        CommandOptions(timeout=timeout, cwd=str(tree), env={"WASHOUT_COMMIT": sha}, output_tail=0),
    )
    seconds = time.monotonic() - started
    text = log.read_bytes() if log.exists() else b""
    tail = text[-LOG_TAIL:].decode("utf-8", errors="replace")
    log_sha256 = hashlib.sha256(text).hexdigest()
    if result.status == "failed" and result.exit_code is None:  # it never ran
        raise WashoutError(f"--build: cannot run the build of {sha[:10]}: {result.reason}")
    if result.status != "ok":
        return Build(sha, result.status, result.reason, seconds, log_sha256, tail)
    hashes = tree_hashes(tree)
    manifest = "".join(manifest_line(digest, path) for path, digest in hashes.items())
    data = manifest.encode("utf-8", errors="surrogateescape")
    manifest_path(root, sha).write_bytes(data)
    artifacts = {p: hashes[p] for p in tracked_changes(tree) if p in hashes}
    return Build(
        sha,
        "ok",
        "",
        seconds,
        log_sha256,
        tail,
        manifest_sha256=hashlib.sha256(data).hexdigest(),
        files=len(hashes),
        artifacts=artifacts,
        binaries=tuple(p for p in artifacts if os.access(tree / p, os.X_OK)),
    )
