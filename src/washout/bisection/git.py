"""The git side of a bisect: revisions resolved to commit ids, the first-parent history
between good and bad, and one worktree per commit. Every failure is a one-line error
naming the repository, the revision and git's own words."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from washout.errors import WashoutError

GIT_TIMEOUT = 600.0
"""Seconds a git command may take (a worktree of a large repository is a checkout)."""


@dataclass(frozen=True)
class Commit:
    """A commit of the bisected history: its id and the first line of its message."""

    sha: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:10]


def git(repo: Path, *args: str, what: str) -> str:
    """``git -C repo args...``'s stdout, or a one-line error saying ``what`` failed."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        raise WashoutError("git: not found on PATH (washout bisect needs git)") from None
    except subprocess.TimeoutExpired:
        raise WashoutError(f"{repo}: {what}: git did not finish in {GIT_TIMEOUT:g} s") from None
    if proc.returncode != 0:
        why = " ".join(proc.stderr.split())[-300:] or f"exit {proc.returncode}"
        raise WashoutError(f"{repo}: {what}: {why}")
    return proc.stdout


def toplevel(repo: Path) -> Path:
    """The repository's top directory (``--repo`` may name any directory inside it)."""
    if not repo.is_dir():
        raise WashoutError(f"--repo = {str(repo)!r}: not a directory")
    out = git(repo, "rev-parse", "--show-toplevel", what="not a git repository (--repo)")
    return Path(out.strip()).resolve()


def resolve(repo: Path, rev: str, option: str) -> str:
    """The full commit id ``rev`` names, or a one-line error naming the option."""
    if not rev.strip() or rev.startswith("-"):
        raise WashoutError(f"{option} = {rev!r}: not a revision")
    out = git(
        repo,
        "rev-parse",
        "--verify",
        "--quiet",
        f"{rev}^{{commit}}",
        what=f"{option} = {rev!r}: no such commit",
    )
    return out.strip()


def history(repo: Path, good: str, bad: str) -> list[Commit]:
    """The first-parent history from ``good`` to ``bad``, both included, oldest first.

    ``good`` must be an ancestor of ``bad`` on its first-parent line: a bisect walks one
    line of history (a merge named as the culprit brought the change in with its branch).
    """
    if good == bad:
        raise WashoutError(f"--good and --bad are the same commit {good[:10]}: nothing to bisect")
    out = git(
        repo,
        "log",
        "--first-parent",
        "--reverse",
        "--format=%H %s",
        f"{good}..{bad}",
        what=f"listing the commits from {good[:10]} to {bad[:10]}",
    )
    commits = [Commit(*(line.split(" ", 1) + [""])[:2]) for line in out.splitlines() if line]
    parent = git(repo, "rev-parse", f"{commits[0].sha}^1", what="first parent") if commits else ""
    if not commits or parent.strip() != good:
        raise WashoutError(
            f"--good = {good[:10]} is not on the first-parent history of --bad = {bad[:10]} "
            "(give a good commit that bad descends from)"
        )
    subject = git(repo, "log", "-1", "--format=%s", good, what="reading --good").strip()
    return [Commit(good, subject), *commits]


def add_worktree(repo: Path, path: Path, sha: str) -> None:
    """Check ``sha`` out into a fresh detached worktree at ``path`` (one left there by a
    build that did not finish is removed first)."""
    if path.exists():
        try:
            remove_worktree(repo, path)
        except WashoutError:  # not registered any more: a plain directory
            shutil.rmtree(path)
            git(repo, "worktree", "prune", what="pruning worktrees")
    path.parent.mkdir(parents=True, exist_ok=True)
    git(
        repo,
        "worktree",
        "add",
        "--detach",
        "--force",
        str(path),
        sha,
        what=f"checking out {sha[:10]}",
    )


def remove_worktree(repo: Path, path: Path) -> None:
    """Remove a worktree and its registration in the repository."""
    git(repo, "worktree", "remove", "--force", "--force", str(path), what=f"removing {path}")


def tracked_changes(tree: Path) -> list[str]:
    """Paths in a worktree that are not as the commit has them: new, ignored or changed
    files (after a build: what the build wrote)."""
    out = git(
        tree,
        "status",
        "--porcelain=v1",
        "-z",
        "--ignored",
        "--untracked-files=all",
        what="listing what the build wrote",
    )
    paths = []
    entries = out.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        if entry[0] in "RC":  # a rename carries its source in the next entry
            i += 1
        paths.append(entry[3:])
    return sorted(paths)
