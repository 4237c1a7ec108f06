"""Context randomization in real runs (``[experiment] context``, ``run --context``): each
trial's program sees the padding, the working directory and the ASLR its level says, locally
and over SSH, and the store, the export and ``resume``'s plan say the same.

The trials are a shell program printing what it saw: the padding variable's length, ``PWD``'s
length, its personality (``ADDR_NO_RANDOMIZE`` under ``setarch -R``), the top of its stack
(the same in every trial with ASLR off, random with it on), ``SSH_CLIENT``'s length, and a
file of its working directory.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import wait_for, washout
from sshd import SshdFarm, sshd_farm  # noqa: F401 (fixture)

from washout.data.store import Store
from washout.harness.context import NO_RANDOMIZE, PADDING_VARIABLE
from washout.harness.engine import Experiment

SAW = (
    "printf 'env=%s pwd=%s pers=%s top=%s ssh=%s marker=%s\\n'"
    f' "${{#{PADDING_VARIABLE}}}" "${{#PWD}}" "$((0x$(cat /proc/self/personality)))"'
    " \"$((0x$(sed -n 's/^[0-9a-f]*-\\([0-9a-f]*\\) .*\\[stack\\].*/\\1/p' /proc/self/maps)))\""
    ' "${#SSH_CLIENT}" "$(cat marker.txt)"'
)
"""What a trial saw, one line (the stack's top from its ``sed``'s own maps: a child of the
trial's shell, so of its personality)."""
FIGURES = ("env", "pwd", "pers", "top", "ssh", "marker")


def spec_text(context: str, levels: int, *, workers: str = "", runs: int = 4) -> str:
    metrics = "".join(
        f"[test.metrics.{name}]\nregex = '{name}=(?P<value>[0-9]+)'\n" for name in FIGURES
    )
    return (
        f"""
[experiment]
name = "ctx"
runs = {runs}
seed = 11
warmup = 1
{context}
context_levels = {levels}

[[test]]
name = "here"
command = '''{SAW}'''
{metrics}
[[test]]
name = "there"
cwd = "sub"
command = '''{SAW}'''
{metrics}"""
        + workers
    )


def trials(db: Path) -> pd.DataFrame:
    """Every analysed trial of ``washout export DB``: one row each, its figures as columns
    beside its context columns."""
    frame = pd.read_csv(io.StringIO(washout("export", db).stdout))
    frame = frame[frame["metric"].isin(FIGURES) & (frame["order"] != "warmup")]
    keys = ["worker", "run", "position", "test", "order", "status"]
    context = [c for c in frame.columns if c.startswith("context_")]
    return frame.set_index([*keys, *context, "metric"])["value"].unstack("metric").reset_index()


def check_trials_saw_their_context(db: Path, kinds: set[str], levels: int) -> pd.DataFrame:
    """The checks every context run passes: what each trial saw is what its row says, every
    level equally often per test, and resume's plan (re-planned from the store) gives each
    slot the context it ran in."""
    seen = trials(db)
    assert len(seen) == 2 * 2 * 4  # 2 tests x 2 order kinds x 4 runs, warmups left out
    assert set(seen["status"]) == {"ok"} and (seen["marker"] == 42).all()
    assert (seen["ssh"] == 0).all()  # SSH_CLIENT set empty
    columns = {c.removeprefix("context_").split("_")[0] for c in seen if c.startswith("context_")}
    assert columns == kinds
    if "env" in kinds:
        assert (seen["env"] == seen["context_env_bytes"]).all()
    else:
        assert (seen["env"] == 0).all()
    if "cwd" in kinds:
        assert (seen["pwd"] == seen["context_cwd_bytes"]).all()
    if "aslr" in kinds:
        off = ~seen["context_aslr"].astype(bool)
        assert ((seen["pers"].astype(int) & NO_RANDOMIZE) != 0).eq(off).all()
        for worker, rows in seen[off].groupby("worker"):
            assert rows["top"].nunique() == 1, worker  # ASLR off: the same stack every trial
        assert seen[~off]["top"].nunique() > len(seen[~off]) // 2  # on: random
    else:
        assert (seen["pers"].astype(int) & NO_RANDOMIZE == 0).all()
    context = [c for c in seen if c.startswith("context_")]
    for _, rows in seen.groupby(["worker", "test"]):
        counts = rows.groupby(context).size()
        assert len(counts) == levels and (counts == len(rows) // levels).all()
    with Store.open(db) as store:
        plan = Experiment.from_store(store).plan
    level_of = {
        (run.index, pos): plan.levels[level]
        for run in plan.runs
        for pos, level in enumerate(run.contexts)
    }
    for row in seen.itertuples():
        planned = level_of[(row.run, row.position)]
        if "env" in kinds:
            assert row.context_env_bytes == planned.env_bytes
        if "aslr" in kinds:
            assert bool(row.context_aslr) == planned.aslr
    return seen


def workdir_with_marker(tmp_path: Path) -> Path:
    (tmp_path / "sub").mkdir(parents=True)
    for where in (tmp_path, tmp_path / "sub"):
        (where / "marker.txt").write_text("42\n")
    return tmp_path


def test_each_trial_sees_its_padding_directory_and_aslr_locally(tmp_path: Path) -> None:
    work = workdir_with_marker(tmp_path)
    spec = work / "spec.toml"
    spec.write_text(spec_text('context = ["env", "cwd", "aslr"]', 4))
    db = work / "ctx.db"
    washout("run", spec, "--db", db, "--quiet", cwd=work)
    seen = check_trials_saw_their_context(db, {"env", "cwd", "aslr"}, 4)
    # the working directories' links: under .washout/context of where washout ran, to the
    # tests' own directories, each level's path its padding longer
    for test in ("here", "there"):
        rows = seen[seen["test"] == test]
        assert rows["context_cwd_bytes"].nunique() == 4
        assert rows["context_cwd_bytes"].min() > len(f"{work}/.washout/context/")
    links = list((work / ".washout" / "context").rglob("c*"))
    assert {Path(os.path.realpath(p)) for p in links if p.is_symlink()} == {work, work / "sub"}
    with sqlite3.connect(db) as conn:
        (note,) = conn.execute("SELECT message FROM event WHERE kind = 'context'").fetchone()
        (warmups,) = conn.execute(
            "SELECT count(DISTINCT context_env_bytes) FROM trial WHERE status = 'warmup'"
        ).fetchone()
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    assert "bytes of environment before the padding" in note and "washout's own" in note
    assert warmups == 1  # one warmup per test, at the first level
    assert json.loads(meta["context"]) == ["env", "cwd", "aslr"] and meta["context_levels"] == "4"
    status = washout("status", db).stdout
    assert "context randomized per trial: env, cwd, aslr (4 levels)" in status


def test_the_export_and_load_carry_the_context_columns(tmp_path: Path) -> None:
    """A run --context of the quick form (ASLR alone: 2 levels), exported as CSV, JSON and
    Parquet and read back by ``washout.load``: the context columns come back as written."""
    import washout as api

    db = tmp_path / "q.db"
    washout(
        "run",
        "true",
        "sleep 0",
        "--runs",
        "8",
        "--context",
        "env,aslr",
        "--context-levels",
        "2",
        "--seed",
        "3",
        "--db",
        db,
        "--quiet",
    )
    stored = api.load(db)
    assert stored["context_env_bytes"].dtype == "Int64"
    assert stored["context_aslr"].dtype == "boolean"
    wall = stored[stored["metric"] == "wall"]
    assert wall.groupby("test")["context_aslr"].sum().tolist() == [4, 4]
    for fmt in ("csv", "json", "parquet"):
        out = tmp_path / f"q.{fmt}"
        washout("export", db, "--format", fmt, "-o", out)
        back = api.load(out)
        for column in ("context_env_bytes", "context_aslr"):
            assert back[column].astype(str).tolist() == stored[column].astype(str).tolist(), fmt
        assert "context_cwd_bytes" not in back


def test_a_context_without_setarch_is_refused_in_one_line(tmp_path: Path) -> None:
    """A worker where ``setarch`` is missing (as where a container forbids personality(2)):
    ASLR cannot be a level there, said in one line naming the field; env and cwd run."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("sh", "uname", "cat", "wc", "pwd", "mkdir", "ln", "sed", "true"):
        found = shutil.which(tool)
        assert found is not None
        (tools / tool).symlink_to(found)
    env = {**os.environ, "PATH": str(tools)}
    proc = washout(
        "run",
        "true",
        "--runs",
        "2",
        "--context",
        "aslr",
        "--db",
        tmp_path / "a.db",
        "--quiet",
        check=False,
        env=env,
    )
    assert proc.returncode != 0
    lines = [line for line in proc.stdout.splitlines() if "experiment.context" in line]
    assert len(lines) == 1 and "aslr" in lines[0] and "Traceback" not in proc.stderr, proc
    washout(
        "run",
        "true",
        "--runs",
        "2",
        "--context",
        "env,cwd",
        "--db",
        tmp_path / "b.db",
        "--quiet",
        env=env,
        cwd=tmp_path,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--context", "env,ram"), "--context = 'env,ram'"),
        (("--context", "env", "--context-levels", "1"), "--context-levels = 1"),
        (("--context-levels", "4"), "--context-levels without --context"),
    ],
)
def test_bad_context_options_are_one_line_errors(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    proc = washout("run", "true", *args, "--db", tmp_path / "x.db", check=False)
    assert proc.returncode != 0 and message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.db").exists()


def test_run_context_overrides_the_spec_and_resume_plans_it_again(tmp_path: Path) -> None:
    work = workdir_with_marker(tmp_path)
    spec = work / "spec.toml"
    spec.write_text(spec_text("", 4).replace("context_levels = 4", ""))
    db = work / "o.db"
    washout(
        "run", spec, "--db", db, "--quiet", "--context", "env", "--context-levels", "2", cwd=work
    )
    check_trials_saw_their_context(db, {"env"}, 2)


@pytest.mark.ssh
def test_each_trial_sees_its_context_over_ssh(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    (server,) = sshd_farm.start(1)
    remote = workdir_with_marker(tmp_path / "remote")
    spec = tmp_path / "spec.toml"
    worker = server.worker_toml("w", sshd_farm.known_hosts, remote)
    spec.write_text(spec_text('context = ["env", "cwd", "aslr"]', 4, workers=worker))
    db = tmp_path / "ssh.db"
    washout("run", spec, "--db", db, "--quiet")
    seen = check_trials_saw_their_context(db, {"env", "cwd", "aslr"}, 4)
    assert set(seen["worker"]) == {"w"}
    assert seen["context_cwd_bytes"].min() > len(f"{remote}/.washout/context/")
    with sqlite3.connect(db) as conn:
        (note,) = conn.execute("SELECT message FROM event WHERE kind = 'context'").fetchone()
    assert "the SSH session's environment" in note


def test_validate_shows_the_seeded_levels(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text('context = ["env", "aslr"]', 4))
    shown = [line for line in washout("validate", spec).stdout.splitlines() if "context" in line]
    assert len(shown) == 1 and "context (env, aslr), 4 levels: env_bytes " in shown[0]
    assert shown[0].count("aslr False") == 2 and shown[0].count("aslr True") == 2
    assert washout("validate", spec).stdout.count(shown[0]) == 1  # the same seed, the same


def test_resume_repeats_each_slots_context_after_a_session_is_killed(tmp_path: Path) -> None:
    """SIGTERM mid-run (the trial in flight kept as interrupted, its run re-run whole), then
    ``washout resume``: every trial of both sessions, the superseded ones too, ran in the
    context the plan gives its slot; the resume, started from a larger environment, says by
    how much it moved every level (120 bytes: ``WASHOUT_TEST_EXTRA=`` + 100 + its NUL)."""
    work = workdir_with_marker(tmp_path)
    spec = work / "spec.toml"
    spec.write_text(
        spec_text('context = ["env", "aslr"]', 4).replace(
            "command = '''", "command = '''sleep 0.2; "
        )
    )
    db = work / "k.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "washout", "run", spec, "--db", db, "--quiet"],
        cwd=work,
        env=dict(os.environ),  # os.environ's variables, as the resume below gets them
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    query = "SELECT count(*) FROM trial WHERE status = 'ok' AND position = 1"

    def some_done() -> bool:
        try:  # read-only: a connection would create the file washout is to create
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                return conn.execute(query).fetchone()[0] >= 3
        except sqlite3.OperationalError:  # not created yet
            return False

    wait_for(some_done, 60, "no three runs done")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    extra = {"WASHOUT_TEST_EXTRA": "x" * 100}  # resumed from a larger environment
    washout("resume", db, "--quiet", cwd=work, env={**os.environ, **extra})
    with Store.open(db) as store:
        plan = Experiment.from_store(store).plan
        notes = [m for _, _, kind, m in store.events() if kind == "context"]
    assert len(notes) == 2 and "previous session" not in notes[0]
    assert "so each padding now puts the stack +120 bytes from where it did" in notes[1]
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT r.idx, t.position, t.status, t.superseded, t.context_env_bytes,"
            " t.context_aslr FROM trial t JOIN run r ON r.id = t.run_id WHERE r.idx >= 0"
        ).fetchall()
    assert any(superseded for *_, superseded, _, _ in rows)  # a run was cut and re-run
    for run, position, _status, _superseded, env, aslr in rows:
        level = plan.levels[plan.runs[run].contexts[position]]
        assert (env, bool(aslr)) == (level.env_bytes, level.aslr)
    check_trials_saw_their_context(db, {"env", "aslr"}, 4)


LAYOUT = (
    "p=${{#WASHOUT_CONTEXT_PADDING}}; c=$(cat count 2>/dev/null || echo 0);"
    " echo $((c + 1)) > count; echo v=$((1000 + {effect} * (p / 16 % 4 == 0) + c * 7 % 10))"
)
"""A program whose output depends on where its stack lands as a layout effect would: 10%
higher in one 64-byte alignment class of four (its padding's 16-byte step), plus noise:
0-9 in a fixed sequence over the experiment's trials (the plan is seeded), so that the
outcome of the analysis is the same at every run of the test (noise from /dev/urandom
made the program without an effect significant in about 1 run in 20, as alpha says)."""


def test_analyze_says_which_metric_depends_on_its_context_in_every_output(
    tmp_path: Path,
) -> None:
    """A real run whose first program is 10% higher in one alignment class: the analysis
    finds it (and not in the other program), bounds its spread around 10%, sets the ranking
    against it; the terminal, JSON (read back whole), HTML and Markdown outputs all say so;
    ``--no-context`` leaves it out, ``--context`` on trials without one is a one-line error."""
    import washout as api

    db = tmp_path / "c.db"
    spec = tmp_path / "spec.toml"
    tests = "".join(
        f"[[test]]\nname = '{name}'\ncommand = '''{LAYOUT.format(effect=effect)}'''\n"
        "[test.metrics.v]\nregex = 'v=(?P<value>[0-9]+)'\n"
        for name, effect in (("moved", 100), ("still", 0))
    )
    spec.write_text('[experiment]\nruns = 20\nseed = 4\ncontext = ["env"]\n' + tests)
    washout("run", spec, "--db", db, "--quiet", cwd=tmp_path)
    analysis = api.analyze(db, metric="v")
    assert analysis.context is not None
    moved, still = (
        analysis.context.row("moved", "v"),
        analysis.context.row("still", "v"),
    )
    assert moved is not None and moved.significant and moved.spread_ci is not None
    assert moved.spread_ci[0] <= 0.0995 <= moved.spread_ci[1] and moved.spread_ci[0] > 0.05
    assert still is not None and not still.significant
    (margin,) = analysis.context_margins  # the ranking's one ratio
    assert sorted(margin.tests) == ["moved", "still"] and margin.about == " vs ".join(margin.tests)
    assert api.Analysis.from_dict(json.loads(json.dumps(analysis.to_dict()))) == analysis

    table = washout("analyze", db, "--metric", "v").stdout
    assert "moved (v) depends on its context: Kruskal-Wallis across 4" in table
    assert f"{' and '.join(margin.tests)} differ by" in table and "spread" in table
    as_json = json.loads(washout("analyze", db, "--metric", "v", "--format", "json").stdout)
    assert as_json["context"]["rows"][0]["test"] == "moved" and as_json["context_margins"]
    for out in ("r.html", "r.md"):
        washout("report", db, "-o", tmp_path / out, "--format", out.split(".")[-1])
        written = (tmp_path / out).read_text()
        assert "Context: environment size, working directory, ASLR" in written
        assert "moved (v) depends on its context" in written
    plain = json.loads(washout("analyze", db, "--no-context", "--format", "json").stdout)
    assert plain["context"] is None and plain["context_margins"] == []
    bare = tmp_path / "bare.db"
    washout("run", "true", "--runs", "2", "--db", bare, "--quiet")
    proc = washout("analyze", bare, "--context", check=False)
    assert proc.returncode == 2 and "--context: the trials have no context" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
