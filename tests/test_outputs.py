"""Where washout writes its outputs (``export -o``, ``report -o``, ``run --export-*``): never
over any file of a store, whatever name reaches it (its ``-wal``, ``-shm``, ``-lock`` and
journal, a symlink, a hard link); whole or not at all (a temporary file renamed into place);
and into pipes, FIFOs and ``/dev/stdout`` as streams, never opened for reading. Real
processes, real SQLite, real FIFOs and a small tmpfs (root only)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest
from conftest import washout
from test_store_lifecycle import built_store, one_line_error, tmpfs, waiting_run

SIBLINGS = ("-wal", "-shm", "-lock", "-journal")


def crashed_store(tmp_path: Path) -> tuple[Path, int]:
    """A store whose writer was SIGKILLed mid-run: its trials are in the write-ahead log
    (``X.db-wal``), not yet in ``X.db``; and how many finished trials it holds."""
    db, proc, _ = waiting_run(tmp_path, "c")
    proc.kill()
    proc.wait()
    assert Path(f"{db}-wal").stat().st_size > 0
    return db, len(trials_of(db))


def trials_of(db: Path) -> list[tuple[object, ...]]:
    """The finished trials, read-only."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return conn.execute("SELECT id, status FROM trial WHERE status = 'ok'").fetchall()


def test_no_file_of_a_store_is_an_output_whatever_names_it(tmp_path: Path) -> None:
    """After a crash every trial is in ``X.db-wal``: writing an export there emptied the
    store (it then said "not a washout store"). Each of its files, by its own name, through
    a symlink or a hard link, is refused in one line and left as it was."""
    db, trials = crashed_store(tmp_path)
    Path(f"{db}-journal").write_bytes(b"")  # a rollback journal's name, as SQLite gives it
    names = [Path(f"{db}{s}") for s in SIBLINGS]
    for i, target in enumerate([db, *names]):
        (tmp_path / f"sym{i}.csv").symlink_to(target)
        if target.stat().st_size:  # what only its content says is a store's
            os.link(target, tmp_path / f"hard{i}.csv")
    before = {p: p.read_bytes() for p in [db, *names]}
    outputs = [*names, *tmp_path.glob("sym*.csv"), *tmp_path.glob("hard*.csv")]
    for output in outputs:
        one_line_error(washout("export", db, "-o", output, check=False), 2, "-o = ", "store")
        one_line_error(washout("report", db, "-o", output, check=False), 2, "-o = ", "store")
    assert {p: p.read_bytes() for p in before} == before
    assert len(trials_of(db)) == trials
    export = pd.read_csv(io.StringIO(washout("export", db).stdout))
    assert set(export["status"]) >= {"ok"}


def test_a_runs_exports_never_write_over_its_own_store(tmp_path: Path) -> None:
    """``--export-json X.db-wal``: the summary was written over the live store's log."""
    db = tmp_path / "e.db"
    for option in ("--export-json", "--export-csv", "--export-markdown"):
        for sibling in ("-wal", "-shm", "-lock"):
            proc = washout(
                "run", "true", "--runs", "2", "--db", db, option, f"{db}{sibling}", check=False
            )
            one_line_error(proc, 2, f"{option} = ", "store")
            assert not db.exists()  # refused before anything ran
    washout("run", "true", "--runs", "2", "--db", db, "--export-json", tmp_path / "e.json")
    assert json.loads((tmp_path / "e.json").read_text())["results"]


def test_an_export_onto_a_live_stores_shared_memory_is_refused_and_the_writer_goes_on(
    tmp_path: Path,
) -> None:
    """``-o X.db-shm`` during a run truncated the file the writer maps: SIGBUS."""
    db, proc, go = waiting_run(tmp_path, "w")
    try:
        shm = Path(f"{db}-shm")
        size = shm.stat().st_size
        one_line_error(washout("export", db, "-o", shm, check=False), 2, "-o = ", "store")
        assert shm.stat().st_size == size
    finally:
        go.touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (proc.returncode, err)


def test_outputs_are_whole_or_absent_on_a_full_disk(tmp_path: Path) -> None:
    """A report or export that does not fit: one line, and no truncated or empty file
    (the output is written beside the target and renamed into place); a file that was
    there before keeps its content."""
    db = built_store(tmp_path)
    with tmpfs(tmp_path / "tiny", "64k") as mnt:
        kept = mnt / "kept.html"
        kept.write_text("the report before\n")
        with contextlib.suppress(OSError), (mnt / "filler").open("wb") as filler:
            while True:
                filler.write(b"x" * 4096)
                filler.flush()
        for command, target in (
            ("export", mnt / "out.csv"),
            ("report", mnt / "r.html"),
            ("report", kept),
        ):
            proc = washout(command, db, "-o", target, check=False)
            assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
            # (report's progress bar, cleared, may leave an empty line before it)
            assert proc.stderr.strip().count("\n") == 0, proc.stderr
            assert "cannot write: No space left on device" in proc.stderr
        assert sorted(p.name for p in mnt.iterdir()) == ["filler", "kept.html"]
        assert kept.read_text() == "the report before\n"


def reader_of(fifo: Path, into: list[bytes]) -> threading.Thread:
    """A thread that reads ``fifo`` to its end into ``into`` (as ``cat fifo`` would)."""

    def read() -> None:
        with fifo.open("rb") as f:
            into.append(f.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("command", ["export", "report"])
def test_a_fifo_is_written_as_a_stream(tmp_path: Path, command: str) -> None:
    """It was opened for reading (to see whether it is a store): every output hung."""
    db = built_store(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    thread = reader_of(fifo, got)
    washout(command, db, "-o", fifo, timeout=30)
    thread.join(timeout=30)
    text = got[0].decode()
    assert text.startswith("run,order") if command == "export" else "<html" in text
    assert fifo.exists() and not fifo.is_file()  # still the FIFO, not replaced by a file


def test_a_runs_export_into_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    thread = reader_of(fifo, got)
    washout("run", "true", "--runs", "2", "--db", tmp_path / "f.db", "--export-json", fifo)
    thread.join(timeout=30)
    assert json.loads(got[0])["results"][0]["command"] == "true"


def test_dev_stdout_and_a_process_substitution_are_streams(tmp_path: Path) -> None:
    db = built_store(tmp_path)
    rows = len(pd.read_csv(io.StringIO(washout("export", db).stdout)))
    out = washout("export", db, "-o", "/dev/stdout", timeout=30).stdout
    assert out.startswith("run,order") and len(pd.read_csv(io.StringIO(out))) == rows
    # As bash's >(cat) gives it: a pipe inherited as /dev/fd/N.
    read, write = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "washout", "export", str(db), "-o", f"/dev/fd/{write}"],
        pass_fds=(write,),
        stderr=subprocess.PIPE,
    )
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode()
    assert proc.wait(timeout=30) == 0, proc.stderr.read()  # type: ignore[union-attr]
    assert len(pd.read_csv(io.StringIO(text))) == rows
    # Redirected to a file: written at the end of what the shell opened, not over it.
    log = tmp_path / "log.txt"
    subprocess.run(
        f"echo before; {sys.executable} -m washout export {db} -o /dev/stdout",
        shell=True,
        stdout=log.open("w"),
        check=True,
        timeout=30,
    )
    assert log.read_text().startswith("before\nrun,order")


def test_an_output_through_a_symlink_writes_its_target_and_keeps_the_link(
    tmp_path: Path,
) -> None:
    db = built_store(tmp_path)
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.csv"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    washout("export", db, "-o", link)
    assert link.is_symlink() and target.read_text().startswith("run,order")
    assert target.stat().st_mode & 0o777 == 0o640  # the file's permissions kept
    assert [p.name for p in (tmp_path / "real").iterdir()] == ["out.csv"]  # no temporary left
