"""washout bisect on real repositories: git, a C compiler and the real CLI (no mock).

Each test generates a repository with examples/bisect/make_repo.py (a small C program, one
commit that slows it, one that does not compile), then bisects it with the example's spec:
the planted commit is found, also after washout is SIGKILLed mid-step and resumed; a
history whose metric is not monotone ends with a range, not a wrong commit; a worker
whose copy of a build differs (a stale binary) is refused, naming it and the file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, ok_trials, trial_workers, wait_for, washout
from sshd import SshdFarm, sshd_farm  # noqa: F401 (fixture)
from test_slurm import node  # noqa: F401 (fixture)

import washout as api
from washout.bisection.result import BisectResult

MAKE_REPO = ROOT / "examples" / "bisect" / "make_repo.py"
SPEC = ROOT / "examples" / "bisect" / "spec.toml"
BUILD = "cc -O2 -o prog prog.c -lm"

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None or shutil.which("git") is None,
    reason="needs git and a C compiler: bash scripts/services/examples.sh",
)


def make_repo(base: Path, *options: str) -> Path:
    """A generated demo directory (its repository in ``repo``)."""
    demo = base / "demo"
    subprocess.run(
        [sys.executable, MAKE_REPO, demo, *options], check=True, capture_output=True, timeout=120
    )
    return demo


def revision(demo: Path, number: int) -> str:
    """The commit id of ``revision N`` in the generated repository."""
    out = subprocess.run(
        ["git", "-C", demo / "repo", "log", "--format=%H", f"--grep=^revision {number}$"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def bisect_args(demo: Path, *extra: str | Path) -> list[str | Path]:
    return [
        "bisect",
        SPEC,
        "--repo",
        demo / "repo",
        "--good",
        "good",
        "--bad",
        "bad",
        "--build",
        BUILD,
        "--dir",
        demo / "bis",
        "--seed",
        "1",
        *extra,
    ]


def env_for(demo: Path) -> dict[str, str]:
    return {**os.environ, "BISECT_DEMO": str(demo)}


def result_of(demo: Path) -> BisectResult:
    proc = washout("bisect", demo / "bis", "--format", "json", env=env_for(demo))
    return BisectResult.from_dict(json.loads(proc.stdout), "stdout")


def test_finds_the_planted_commit_after_a_sigkill_and_resume(tmp_path: Path) -> None:
    """16 commits, a 10% slowdown at revision 11, revision 8 (the first candidate) does not
    compile. washout is SIGKILLed while the first candidate step runs; ``washout resume``
    continues it (the interrupted run re-run whole) and names revision 11."""
    demo = make_repo(
        tmp_path, "--commits", "16", "--culprit", "11", "--broken", "8", "--slowdown", "0.1"
    )
    env = env_for(demo)
    # Runs slow (0.2 s resets) until the kill, so it lands mid-look: a look of fast runs
    # could end between the poll that saw its trials and the kill.
    slow = demo / "slow"
    slow.touch()
    with (demo / "machine.sh").open("a") as reset:
        reset.write('[ ! -e "$here/slow" ] || sleep 0.2\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "washout", *map(str, bisect_args(demo, "-q"))],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    look = demo / "bis" / "steps" / "step-01" / "look-1.db"
    try:
        wait_for(lambda: ok_trials(look) >= 4, 240, "the first candidate step did not start")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        slow.unlink()
    state = json.loads((demo / "bis" / "bisect.json").read_text())
    assert [s["kind"] for s in state["steps"]] == ["check", "candidate"]
    assert state["steps"][1]["looks"] == []  # killed mid-look
    washout("resume", demo / "bis", "-q", env=env, timeout=600)
    result = result_of(demo)
    culprit, broken = revision(demo, 11), revision(demo, 8)
    assert (result.ending, result.culprit) == ("first-bad", culprit)
    assert result.first == result.last == culprit
    assert result.monotone
    assert result.effect is not None and result.effect.low is not None
    assert result.effect.low > 1.05  # the culprit's own effect, against its parent
    # The check's reason gives the interval it decided by, at its share of alpha, and says
    # so: wider than the 95% interval shown beside it, not a second figure for the same.
    check = result.steps[0]
    found = re.fullmatch(
        r"bad / good = ([0-9.]+) \[([0-9.]+), ([0-9.]+)\] \(([0-9.]+)% CI\)", check.reason
    )
    assert found is not None, check.reason
    ratio, low, high, confidence = map(float, found.groups())
    assert check.change is not None and check.change.low is not None
    assert ratio == round(check.change.ratio, 4) and confidence > 99
    assert low <= check.change.low and check.change.high <= high
    rows = {row.commit: row for row in result.commits}
    assert rows[broken].state == "skipped" and rows[broken].build == "failed"
    (failed,) = [b for b in result.builds if b.commit == broken]
    assert "error" in failed.log_tail
    ok = [b for b in result.builds if b.ok]
    assert all(b.artifacts.get("prog") and "prog" in b.binaries for b in ok)
    assert result.cost.builds == len(result.builds) and result.cost.builds_failed == 1
    assert result.cost.trials >= result.cost.runs * 2
    # each look is an ordinary washout store: status and export read it
    assert "complete" in washout("status", look).stdout
    export = washout("export", look).stdout
    assert f"{culprit[:10]}:units" in export or "units" in export
    assert (demo / "bis" / "result.json").is_file()


def test_a_history_that_is_not_monotone_ends_with_a_range(tmp_path: Path) -> None:
    """Revision 5 makes the program 20% slower, revision 9 takes back half of it: the
    commits between differ from both good and bad. The bisect ends with a range that holds
    both changes, says the metric is not monotone, and names no single commit."""
    demo = make_repo(
        tmp_path,
        "--commits",
        "16",
        "--culprit",
        "5",
        "--broken",
        "0",
        "--slowdown",
        "0.1",
        "--shape",
        "overshoot",
    )
    report = tmp_path / "bisect.html"
    washout(*bisect_args(demo, "-q", "--report", report), env=env_for(demo), timeout=600)
    result = result_of(demo)
    assert result.ending == "range" and result.culprit is None
    assert not result.monotone
    shas = [row.commit for row in result.commits]
    first, last = shas.index(result.first), shas.index(result.last)
    assert first <= 5 and last >= 9  # both changes inside, no wrong commit named
    assert any("not monotone" in note for note in result.notes)
    page = report.read_text()
    assert "<svg" in page and "unknown" in page


def test_a_worker_with_a_stale_build_is_refused(
    sshd_farm: SshdFarm,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Two SSH workers; the second already holds a copy of good's build whose program
    differs but has the size and modification time of the real one, so rsync's quick
    check keeps it (the field report's stale binary). The bisect refuses that worker,
    naming it and the file, and stops with the worker-failed exit status."""
    a, b = sshd_farm.start(2)
    demo = make_repo(tmp_path, "--commits", "4", "--culprit", "2", "--broken", "0")
    good = revision(demo, 0)
    build = BUILD + " && touch -d @1600000000 prog"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    subprocess.run(
        f"git -C {demo / 'repo'} show {good}:prog.c > prog.c && {build}",
        shell=True,
        cwd=scratch,
        check=True,
    )
    wa, wb = tmp_path / "wa", tmp_path / "wb"
    stale = wb / good / "prog"
    stale.parent.mkdir(parents=True)
    data = bytearray((scratch / "prog").read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    stale.write_bytes(bytes(data))
    stale.chmod(0o755)
    os.utime(stale, (1600000000, 1600000000))
    wa.mkdir()
    spec = tmp_path / "spec.toml"
    spec.write_text(
        SPEC.read_text()
        + a.worker_toml("wa", sshd_farm.known_hosts, wa)
        + b.worker_toml("wb", sshd_farm.known_hosts, wb)
    )
    args = bisect_args(demo, "-q", "--runs", "2", "--max-runs", "2")
    args[1], args[args.index("--build") + 1] = spec, build
    proc = washout(*args, env=env_for(demo), check=False, timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert "wb: its copy of the build of " + good[:10] in proc.stderr
    assert "differs from the build: prog" in proc.stderr
    assert "wa:" not in proc.stderr
    assert (wa / good / "prog").read_bytes() == (scratch / "prog").read_bytes()


def test_bad_requests_are_one_line_errors(tmp_path: Path) -> None:
    demo = make_repo(tmp_path, "--commits", "3", "--culprit", "2", "--broken", "0")
    env = env_for(demo)
    cases = [
        (["--good", "bad", "--bad", "good"], "is not on the first-parent history of --bad"),
        (["--good", "no-such-tag"], "--good = 'no-such-tag': no such commit"),
        (["--threshold", "two"], "--threshold = 'two': expected a percentage"),
        (["--max-runs", "3"], "--max-runs = 3: at least --runs (10)"),
        (["--test", "nope"], "--test = 'nope': not a test of"),
    ]
    for extra, message in cases:
        proc = washout(*bisect_args(demo), *extra, env=env, check=False)
        assert proc.returncode == 2, (extra, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], (extra, proc.stderr)
    synced = tmp_path / "synced.toml"
    synced.write_text(SPEC.read_text().replace("[experiment]", '[experiment]\nsync = "."'))
    args = bisect_args(demo)
    args[1] = synced
    proc = washout(*args, env=env, check=False)
    assert "experiment.sync = '.': a bisect copies each build" in proc.stderr
    assert not (demo / "bis").exists()  # nothing was created for a refused request


@pytest.mark.slurm
def test_the_steps_run_on_slurm_nodes(tmp_path: Path, node: str) -> None:  # noqa: F811
    """With ``[cluster]`` every look allocates its node through Slurm and its trials run
    there as job steps, reading the builds in place (a file system the node shares)."""
    demo = make_repo(
        tmp_path, "--commits", "4", "--culprit", "3", "--broken", "0", "--slowdown", "0.1"
    )
    spec = tmp_path / "spec.toml"
    spec.write_text(
        SPEC.read_text() + '\n[cluster]\nkind = "slurm"\nnodes = 1\ntime_limit = "10m"\n'
    )
    args = bisect_args(demo, "-q")
    args[1] = spec
    washout(*args, env=env_for(demo), timeout=600)
    result = result_of(demo)
    assert (result.ending, result.culprit) == ("first-bad", revision(demo, 3))
    for step in result.steps:
        for store in step.stores:
            assert trial_workers(demo / "bis" / store) == {node}


def test_a_change_within_the_threshold_ends_with_no_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the Python API: a 0.2% slowdown judged with ``threshold=0.05`` is no change
    (the check shows bad within 5% of good), nothing more is built; the result reads back
    from its JSON unchanged, and calling again on the directory returns it."""
    demo = make_repo(
        tmp_path, "--commits", "8", "--culprit", "4", "--broken", "0", "--slowdown", "0.002"
    )
    monkeypatch.setenv("BISECT_DEMO", str(demo))
    result = api.bisect(
        SPEC,
        good="good",
        bad="bad",
        repo=demo / "repo",
        build=BUILD,
        directory=demo / "bis",
        threshold=0.05,
        seed=2,
    )
    assert result.ending == "no-change" and result.culprit is None
    assert [s.kind for s in result.steps] == ["check"]
    assert result.steps[0].decision == "same"
    assert result.cost.builds == 2  # good and bad only
    assert "beyond --threshold 5%" in result.summary
    assert BisectResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    assert api.bisect(demo / "bis") == result
    steps = result.to_frame()  # a table, as every result type (issue 30, point 7)
    assert steps[["kind", "decision"]].values.tolist() == [["check", "same"]]
    assert "change.ratio" in steps.columns and "<table" in result._repr_html_()
