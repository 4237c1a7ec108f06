"""What a hyperfine user meets, end to end with real processes: the summary table and the
ranking line, hyperfine's exports, exit codes, --warmup, --prepare, -P/-L scans, -n, -q."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
from conftest import exported, washout

from washout.data.longformat import COLUMNS
from washout.data.store import Store


def test_two_commands_table_ranking_and_exports(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    proc = washout(
        "run",
        "sleep 0.01",
        "sleep 0.05",
        "--runs",
        "12",
        "--db",
        tmp_path / "q.db",
        "-q",
        "--export-json",
        out / "r.json",
        "--export-markdown",
        out / "r.md",
        "--export-csv",
        out / "r.csv",
        "--export-asciidoc",
        out / "r.adoc",
        "--export-orgmode",
        out / "r.org",
    )
    text = proc.stdout
    assert "mean ± σ" in text and "min … max" in text and "max RSS" in text
    assert " ms ± " in text  # hyperfine's automatic unit
    assert "'sleep 0.01' ran" in text
    assert "Summary (from the 6 random-order runs alone, per-run ratios paired by run" in text
    line = next(x for x in text.splitlines() if "times faster than 'sleep 0.05'" in x)
    ratio = float(line.split()[0])
    low, high = map(float, re.search(r"% CI ([0-9.]+)…([0-9.]+), 6 runs\)", line).groups())
    assert 1 < low <= ratio <= high and 1.5 < ratio < 8  # faster: the CI lies above 1
    assert "±" not in line  # hyperfine's ± is a standard deviation, not a CI
    assert proc.stderr.count("\n") <= 2  # -q: no progress bar, the results still printed

    results = json.loads((out / "r.json").read_text())["results"]
    assert [r["command"] for r in results] == ["sleep 0.01", "sleep 0.05"]
    first = results[0]
    keys = {"command", "mean", "stddev", "median", "user", "system", "min", "max", "times"}
    assert keys | {"exit_codes"} <= set(first)
    assert len(first["times"]) == 12 and first["exit_codes"] == [0] * 12
    with sqlite3.connect(tmp_path / "q.db") as conn:  # hyperfine 1.20's, trial by trial
        peaks = conn.execute(
            "SELECT m.value FROM trial t JOIN metric m ON m.trial_id = t.id WHERE t.test = "
            "'sleep 0.01' AND t.status = 'ok' AND m.name = 'max_rss' ORDER BY t.started"
        ).fetchall()
    assert first["memory_usage_byte"] == [round(p) for (p,) in peaks] and len(peaks) == 12
    assert first["min"] <= first["median"] <= first["max"] and 0.01 <= first["min"]
    md = (out / "r.md").read_text()
    assert md.startswith("| Command | Mean [ms] | Min [ms] | Max [ms] | Relative |")
    assert "| `sleep 0.01` |" in md and "| 1.00 |" in md
    # AsciiDoc and Org laid out as hyperfine 1.15 writes them, the same cells as Markdown
    adoc = (out / "r.adoc").read_text().split("\n")
    assert adoc[:7] == [
        '[cols="<,>,>,>,>"]',
        "|===",
        "| Command ",
        "| Mean [ms] ",
        "| Min [ms] ",
        "| Max [ms] ",
        "| Relative ",
    ]
    mean = md.split("\n")[2].split(" | ")[1]  # the first row's Mean ± σ in Markdown
    assert adoc[7:10] == ["", "| `sleep 0.01` ", f"| {mean} "]
    assert adoc[-2:] == ["|===", ""]
    org = (out / "r.org").read_text().split("\n")
    assert org[:2] == [
        "| Command  |  Mean [ms] |  Min [ms] |  Max [ms] |  Relative |",
        "|--+--+--+--+--|",
    ]
    assert org[2].startswith("| =sleep 0.01=  |  ") and org[2].endswith(" |  1.00 |")
    csv = pd.read_csv(out / "r.csv")
    assert list(csv.columns) == [
        "command",
        "mean",
        "stddev",
        "median",
        "user",
        "system",
        "min",
        "max",
    ]
    assert csv["mean"].tolist() == [r["mean"] for r in results]
    # Given to analyze, each export is named for what it is, in one line.
    kinds = {"json": "JSON", "csv": "CSV", "md": "Markdown", "adoc": "AsciiDoc", "org": "Org"}
    options = {"md": "markdown", "adoc": "asciidoc", "org": "orgmode"}
    for suffix, kind in kinds.items():
        name = f"r.{suffix}"
        refused = washout("analyze", out / name, check=False)
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr == (
            f"washout: error: {out / name}: hyperfine's {kind} export format (hyperfine's or "
            f"washout's --export-{options.get(suffix, suffix)}): each command's summary or "
            "times, not the order its runs ran in, so there is no order to analyse; analyse "
            "the washout store that holds the trials, or run the commands with `washout run "
            "COMMAND...`\n"
        )
    # --runs 12 is hyperfine's total: 6 per order kind
    assert exported(tmp_path / "q.db")["order"].value_counts().to_dict() == {
        "fixed": 12,
        "random": 12,
    }
    washout("report", tmp_path / "q.db", "-f", "md", "-o", out / "report.md")
    report = (out / "report.md").read_text()
    assert "## Comparison" in report and "times faster than 'sleep 0.05'" in report


def test_every_trial_failing_stops_scripts_unless_ignored(tmp_path: Path) -> None:
    proc = washout("run", "false", "true", "--runs", "4", "--db", tmp_path / "a.db", check=False)
    assert proc.returncode == 4
    assert "Test 'false': all 4 trial(s) failed; the first: exit code 1" in proc.stderr
    assert "stderr (tail)" in proc.stderr and "--ignore-failure" in proc.stderr
    proc = washout(
        "run",
        "sh -c 'echo boom >&2; exit 3'",
        "--runs",
        "2",
        "--db",
        tmp_path / "b.db",
        check=False,
    )
    assert proc.returncode == 4 and "exit code 3" in proc.stderr and "boom" in proc.stderr
    shown = washout("run", "echo out; echo err >&2", "--runs", "2", "--db", tmp_path / "o.db")
    assert "stdout: out" not in shown.stderr
    shown = washout(
        "run", "echo out; echo err >&2", "--runs", "2", "--db", tmp_path / "s.db", "--show-output"
    )
    assert "stdout: out" in shown.stderr and "stderr: err" in shown.stderr
    ignored = washout("run", "false", "true", "--runs", "4", "--db", tmp_path / "c.db", "-i")
    assert ignored.returncode == 0 and "all 4 trial(s) failed" in ignored.stderr


def test_warmup_and_prepare(tmp_path: Path) -> None:
    """Warmups run first, stored as warmup and out of the analysis; prepare runs before every
    trial (warmups too) and its 0.3 s stay outside the timing."""
    log = tmp_path / "log"
    db = tmp_path / "w.db"
    proc = washout(
        "run",
        f"echo a >> {log}",
        f"echo b >> {log}",
        "--runs",
        "4",
        "--warmup",
        "2",
        "--prepare",
        f"sleep 0.3; echo P >> {log}",
        "--db",
        db,
        "-q",
        "--export-json",
        tmp_path / "r.json",
    )
    words = log.read_text().split()
    assert words[:8] == ["P", "a", "P", "a", "P", "b", "P", "b"]  # the warmups, in test order
    assert words.count("P") == 2 * 2 + 2 * 4 and words.count("a") == 2 + 4
    assert all(words[i] == "P" for i in range(0, len(words), 2))  # before every trial
    frame = exported(db)
    warm = frame[frame["status"] == "warmup"]
    assert len(warm) == 4 and set(warm["order"]) == {"warmup"} and set(warm["run"]) == {-1}
    status = washout("status", db).stdout.split("\n", 1)[1]  # after the line naming the path
    assert "warmup" not in status and "8 of 8 trials" in status  # not failures, not planned
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert [len(r["times"]) for r in results] == [4, 4]  # the warmups are not counted
    assert max(t for r in results for t in r["times"]) < 0.25  # prepare is not timed
    assert "n fixed / random" in proc.stdout and "2 / 2" in proc.stdout
    assert "Not analysed: 4 values of warmup trials (warmups are never analysed)" in proc.stdout


def test_prepare_once_per_command(tmp_path: Path) -> None:
    """hyperfine's --prepare given once per command: each runs before its own command's
    trials (it was the last one before every command's); any other count is one line."""
    log = tmp_path / "log"
    commands = [f"echo a >> {log}", f"echo b >> {log}"]
    prepares = ["-p", f"echo A >> {log}", "-p", f"echo B >> {log}"]
    washout("run", *commands, *prepares, "--runs", "4", "--db", tmp_path / "p.db", "-q")
    words = log.read_text().split()
    pairs = list(zip(words[::2], words[1::2]))
    assert len(pairs) == 8 and set(pairs) == {("A", "a"), ("B", "b")}
    three = washout(
        "run", *commands, *prepares, "-p", "true", "--db", tmp_path / "x.db", check=False
    )
    assert three.returncode == 2 and three.stderr == (
        "washout: error: --prepare given 3 times for 2 commands: give it once (for every "
        "command) or once per command, in order (hyperfine's)\n"
    )
    assert not (tmp_path / "x.db").exists()


def test_a_prepare_takes_the_scans_parameters_as_hyperfine(tmp_path: Path) -> None:
    """-P with --prepare 'echo p{n}': each test's prepare filled with its own value (shell
    quoted, as the command, and with the command's rules: {{ for a literal brace); a
    prepare naming no parameter is run as written; --setup, --reset or --cleanup naming a
    parameter is one line (each runs once for every test)."""
    log = tmp_path / "log"
    washout(
        "run",
        "-P",
        "n",
        "1",
        "2",
        "--prepare",
        f"echo p{{n}} {{{{x}}}} >> {log}",
        f"echo {{n}} >> {log}",
        "--runs",
        "2",
        "--db",
        tmp_path / "p.db",
        "-q",
    )
    lines = log.read_text().splitlines()
    assert sorted(zip(lines[::2], lines[1::2])) == [("p1 {x}", "1")] * 2 + [("p2 {x}", "2")] * 2
    log.unlink()
    literal = ["-P", "n", "1", "2", "--prepare", f"echo '{{x}}' >> {log}", "echo {n}"]
    washout("run", *literal, "--runs", "2", "--db", tmp_path / "l.db", "-q")
    assert log.read_text() == "{x}\n" * 4
    for option in ("--setup", "--reset", "--cleanup"):
        refused = washout(
            "run",
            "-P",
            "n",
            "1",
            "2",
            option,
            "echo {n}",
            "echo {n}",
            "--db",
            tmp_path / "x.db",
            check=False,
        )
        assert refused.returncode == 2 and refused.stderr.startswith(
            f"washout: error: {option} uses {{n}}: it runs once for every test"
        )
    assert not (tmp_path / "x.db").exists()


def test_a_failing_prepare_stops_with_its_reason(tmp_path: Path) -> None:
    proc = washout(
        "run", "true", "--runs", "2", "--prepare", "exit 9", "--db", tmp_path / "f.db", check=False
    )
    assert proc.returncode == 3  # a worker error, as a failing reset
    assert "prepare command 'exit 9' failed" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_spec_keys_warmup_and_prepare(tmp_path: Path) -> None:
    log = tmp_path / "log"
    spec = tmp_path / "s.toml"
    spec.write_text(
        f'[experiment]\nruns = 2\nwarmup = 1\n[prepare]\ncommand = "echo P >> {log}"\n'
        f'[[test]]\nname = "t"\ncommand = "echo t >> {log}"\n'
    )
    washout("run", spec, "--db", tmp_path / "s.db", "-q")
    assert log.read_text().split() == ["P", "t"] * (1 + 2 * 2)
    bad = washout("run", spec, "--warmup", "2", check=False)
    assert bad.returncode == 2 and "--warmup go(es) with the quick form" in bad.stderr


def test_parameter_scans_and_names(tmp_path: Path) -> None:
    proc = washout(
        "run", "echo {n}", "-P", "n", "1", "5", "-D", "2", "--runs", "2", "--db", tmp_path / "p.db"
    )
    assert set(exported(tmp_path / "p.db")["test"]) == {"echo 1", "echo 3", "echo 5"}
    assert "'echo 1' ran" in proc.stdout or "ran" in proc.stdout
    washout(
        "run",
        "echo {x}",
        "printf {x}",
        "-L",
        "x",
        "a,b",
        "-n",
        "e-{x}",
        "-n",
        "p-{x}",
        "--runs",
        "2",
        "--db",
        tmp_path / "l.db",
        "--export-json",
        tmp_path / "l.json",
    )
    assert set(exported(tmp_path / "l.db")["test"]) == {"e-a", "e-b", "p-a", "p-b"}
    results = json.loads((tmp_path / "l.json").read_text())["results"]
    assert {(r["command"], r["parameters"]["x"]) for r in results} == {
        ("echo a", "a"),
        ("echo b", "b"),
        ("printf a", "a"),
        ("printf b", "b"),
    }
    bad = washout("run", "echo {n}", "-P", "n", "5", "1", check=False)
    assert bad.returncode == 2 and "MIN <= MAX" in bad.stderr and "Traceback" not in bad.stderr


def test_parameter_lists_repeat_into_every_combination(tmp_path: Path) -> None:
    """-L may be given several times, and with -P: one test per combination, as hyperfine."""
    db = tmp_path / "grid.db"
    washout(
        "run", "echo {x}{y}{n}", "-L", "x", "a,b", "-L", "y", "-1,-2", "-P", "n", "1", "2",
        "--runs", "2", "--db", db,
    )  # fmt: skip
    assert set(exported(db)["test"]) == {
        f"echo {x}{y}{n}" for x in "ab" for y in ("-1", "-2") for n in (1, 2)
    }
    twice = washout("run", "echo {x}", "-L", "x", "a", "-L", "x", "b", check=False)
    assert twice.returncode == 2 and "'x' is given twice" in twice.stderr
    assert "Traceback" not in twice.stderr
    short = washout("run", "echo {x}", "-L", "x", check=False)
    assert short.returncode == 2 and "Traceback" not in short.stderr


def test_single_command_gets_a_plain_summary(tmp_path: Path) -> None:
    proc = washout("run", "true", "--runs", "6", "--db", tmp_path / "one.db")
    assert "mean ± σ" in proc.stdout
    assert "order matters" not in proc.stdout.lower() and " ran" not in proc.stdout


def test_analyze_shows_resource_metrics_without_analysing_them(tmp_path: Path) -> None:
    """A long CSV with user, system and max_rss (as the executors store them): the table
    shows them; the order analysis' family is the spec's metric alone unless --metric."""
    rows = []
    for run in range(12):
        order = "fixed" if run % 2 == 0 else "random"
        for position, (test, wall) in enumerate((("a", 0.010), ("b", 0.020))):
            wall = wall * (1 + 0.01 * ((run * 7 + position) % 5))
            for metric, value in (
                ("wall", wall),
                ("user", wall / 2),
                ("system", wall / 4),
                ("max_rss", 3 * 2**20),
            ):
                rows.append(
                    dict(zip(COLUMNS, (run, order, position, test, metric, value, "ok", "local")))
                )
    path = tmp_path / "long.csv"
    pd.DataFrame(rows).reindex(columns=COLUMNS).to_csv(path, index=False)
    table = washout("analyze", path).stdout
    assert "3 MiB" in table and " ms" in table and "'a' ran" in table
    document = json.loads(washout("analyze", path, "--format", "json").stdout)
    assert document["order"]["family_size"] == 2  # wall of a and b: not user, system, max_rss
    a = document["comparison"]["summaries"][0]
    assert a["test"] == "a" and a["max_rss"] == 3 * 2**20
    assert a["user"] * 2 == a["mean"]
    named = json.loads(washout("analyze", path, "--format", "json", "--metric", "user").stdout)
    assert named["order"]["family_size"] == 8 and named["comparison"]["metric"] == "user"


class Screen:
    """Just enough of a terminal to follow rich's live display: text, carriage return, line
    feed, cursor up and erase line (colours ignored)."""

    TOKENS = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r|\n|[^\x1b\r\n]+")

    def __init__(self) -> None:
        self.lines = [""]
        self.row = self.col = 0

    def feed(self, data: str) -> None:
        for token in self.TOKENS.findall(data):
            if token == "\r":
                self.col = 0
            elif token == "\n":
                self.row, self.col = self.row + 1, 0
                self.lines += [""] * (self.row + 1 - len(self.lines))
            elif token.startswith("\x1b["):
                n = token[2:-1]
                if token.endswith("A"):
                    self.row = max(0, self.row - int(n or 1))
                elif token.endswith("K"):
                    self.lines[self.row] = "" if n == "2" else self.lines[self.row][: self.col]
            else:
                line = self.lines[self.row].ljust(self.col)
                self.lines[self.row] = line[: self.col] + token + line[self.col + len(token) :]
                self.col += len(token)

    def text(self) -> str:
        return "\n".join(self.lines)


def _on_a_terminal(args: list[str]) -> list[tuple[float, str]]:
    """What a 120 x 40 terminal shows as washout runs ``args`` with both streams on it:
    each output chunk with the time it arrived."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import subprocess
    import sys
    import termios
    import time

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "washout", *args],
        stdout=slave,
        stderr=slave,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    start, chunks = time.monotonic(), []
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the pty closed: washout exited
                break
            if not chunk:
                break
            chunks.append((time.monotonic() - start, chunk.decode(errors="replace")))
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.wait(timeout=60) == 0
    return chunks


def test_live_medians_refresh_end_at_the_final_counts_and_give_way(tmp_path: Path) -> None:
    """On a terminal, the live table under the progress bar follows the trials (never more
    than a second or so behind the bar), ends at the final counts, and is gone when the
    results are printed; piped, there is none (the summary has the tables either way)."""
    args = ["run", "sleep 0.2", "sleep 0.3", "--runs", "8", "--seed", "1"]
    screen = Screen()
    bar: list[tuple[float, int]] = []  # (time, trials done) as the bar shows them
    table: list[tuple[float, int, dict[str, str]]] = []  # (time, sum, per-test counts)
    results_at = None
    # Each redraw of rich's live display starts with a carriage return and a cursor move;
    # the screen is read before each one, so a chunk that holds the last frame, its
    # removal and the results (on a loaded machine) still shows that frame.
    frames = (
        (at, part)
        for at, chunk in _on_a_terminal([*args, "--db", str(tmp_path / "tty.db")])
        for part in re.split(r"(?=\r\x1b\[)", chunk)
    )
    for at, part in frames:
        screen.feed(part)
        shown = screen.text()
        if results_at is None and "Data: " in shown:
            results_at = at
            assert not re.search(r"trials\s*┃\s*median", shown)  # the table gave way
            break
        done = re.search(r"(\d+)/16 trials", shown)
        if done:
            bar.append((at, int(done.group(1))))
        counts = dict(re.findall(r"^ (sleep 0\.\d)\s+│\s+(\d+/\d+)\s+│", shown, re.M))
        if len(counts) == 2:  # a whole table (a read can end inside a frame)
            total = sum(int(c.split("/")[0]) for c in counts.values())
            if not table or table[-1][1] != total:
                table.append((at, total, counts))
    assert results_at is not None and bar and table
    assert table[-1][2] == {"sleep 0.2": "8/8", "sleep 0.3": "8/8"}  # the final counts
    totals = [total for _, total, _ in table]
    assert totals == sorted(totals) and len(totals) >= 4  # it moved as the trials did
    # A second after the bar shows a count, the table has it too, from the table's first
    # read on (that read imports pandas: 2.5 s on 2 cores under six busy loops).
    for at, done in bar:
        later = [total for when, total, _ in table if when <= at + 2.0]
        if at >= table[0][0] and at + 2.0 < results_at:
            assert later and later[-1] >= done, (at, done, table)
    piped = washout(*args, "--db", tmp_path / "piped.db")
    assert not re.search(r"trials\s*┃\s*median", piped.stderr) and "median" in piped.stdout


def test_run_count_from_hyperfines_time_budget(tmp_path: Path) -> None:
    from washout.harness.quick import runs_for_budget

    assert runs_for_budget([0.5, 0.25], 10, None) == 10  # 3 s / 0.5 s = 6, at least 10
    assert runs_for_budget([0.1, 0.2], 4, None) == 15  # the slowest command's 3 s
    assert runs_for_budget([0.001], 10, 50) == 50
    assert runs_for_budget([0.0], 7, None) == 7  # a failing pilot: the minimum
    assert runs_for_budget([0.4], 2, None) == 7  # hyperfine's: 7.5 cut, not raised
    assert runs_for_budget([0.7], 2, None) == 4
    washout("run", "sleep 0.5", "--min-runs", "2", "--db", tmp_path / "b.db", "-q")
    assert len(exported(tmp_path / "b.db")) in (4, 6)  # floor(3 / ~0.5 s) = 5 (or 4)
    # the prepare's time is a run's too (hyperfine's): not 3 s of `true`, thousands of runs
    washout("run", "true", "-p", "sleep 0.5", "-m", "2", "-M", "40", "--db", tmp_path / "p.db")
    assert len(exported(tmp_path / "p.db")) in (4, 6)
    bad = washout("run", "true", "--runs", "4", "--max-runs", "5", check=False)
    assert bad.returncode == 2 and "one or the other" in bad.stderr


def test_shell_none_and_cleanup_as_hyperfine_takes_them(tmp_path: Path) -> None:
    """-N/--shell=none: plain words run as they always do (no shell); a command that needs a
    shell is refused before anything runs, as is any other --shell but 'default'.
    -s/--setup and -c/--cleanup run once, before the first run and after the last (the
    spec's [setup] and [teardown]). One random-order run is "1 run". -V is --version."""
    log = tmp_path / "cleaned"
    proc = washout(
        "run",
        "-N",
        "true",
        "sleep 0.001",
        "--runs",
        "2",
        "-s",
        f"echo set >> {log}",
        "-c",
        f"echo done >> {log}",
        "--db",
        tmp_path / "n.db",
        "-q",
    )
    assert log.read_text() == "set\ndone\n"
    assert "Summary (from the 1 random-order run alone," in proc.stdout
    assert "(too few runs for a CI, which needs 6; 1 run)" in proc.stdout
    with Store.open(tmp_path / "n.db") as store:  # resume runs it too
        assert f'[teardown]\ncommand = "echo done >> {log}"' in store.experiment().spec_text
    ran = tmp_path / "ran"
    for options, error in (
        (
            ["-N", f"touch {ran}; true"],
            f"-N: command 'touch {ran}; true' needs a shell (quotes, variables, globs, "
            "redirections, operators or a shell builtin), which washout starts it with: drop "
            "-N, or give it as plain words",
        ),
        (["-N", "no-such-program-here"], "-N: command 'no-such-program-here': "),
        (
            ["--shell", "bash", "true"],
            "--shell = 'bash': washout starts a command with shell syntax with /bin/sh -c and "
            "any other without a shell; only 'none' (as -N) and 'default' are taken",
        ),
    ):
        refused = washout("run", *options, "--db", tmp_path / "x.db", check=False)
        assert refused.returncode == 2 and refused.stderr.startswith(f"washout: error: {error}")
        assert refused.stderr.count("\n") == 1
        assert not ran.exists() and not (tmp_path / "x.db").exists()
    spec = tmp_path / "s.toml"
    spec.write_text('[[test]]\nname = "t"\ncommand = "true"\n')
    refused = washout("run", spec, "-N", "--db", tmp_path / "x.db", check=False)
    assert "-N go(es) with the quick form" in refused.stderr
    # hyperfine's default shell: washout's own way, shell syntax through /bin/sh
    washout(
        "run", "--shell", "default", f"echo x >> {log}", "--runs", "2", "--db", tmp_path / "d.db"
    )
    assert log.read_text().count("x\n") == 2
    assert washout("-V").stdout == washout("--version").stdout != ""


def test_time_unit_as_hyperfine_takes_it(tmp_path: Path) -> None:
    """-u/--time-unit: every time of the summary's table (user and system too) and of the
    Markdown export in that unit, for `run` and `analyze`; an unknown unit is one line,
    before anything runs."""
    db, md = tmp_path / "u.db", tmp_path / "u.md"
    args = ["run", "true", "sleep 0.02", "--runs", "4", "--db", db, "--export-markdown", md]
    out = washout(*args, "-u", "millisecond", "-q").stdout.splitlines()
    rows = [line.split("│") for line in out if line.startswith((" true ", " sleep 0.02 "))]
    rows = rows[-2:]  # hyperfine's table, last (the order table's rows come first)
    assert [cells[0].strip() for cells in rows] == ["true", "sleep 0.02"]
    for cells in rows:  # mean ± σ, min … max, user, system in ms; max RSS in bytes
        times = [t for cell in cells[1:5] for t in re.split(r" ± | … ", cell.strip())]
        assert times and all(re.fullmatch(r"[0-9]+\.[0-9] ms", t) for t in times), cells
    assert md.read_text().startswith("| Command | Mean [ms] | Min [ms] | Max [ms] | Relative |")
    again = washout("analyze", db, "--time-unit", "second").stdout
    assert re.search(r" true +│ +0\.[0-9]{3} s ± 0\.[0-9]{3} s │", again)
    refused = washout("run", "true", "-u", "hours", "--db", tmp_path / "x.db", check=False)
    assert refused.returncode == 2 and refused.stderr == (
        "washout: error: --time-unit = 'hours': expected second, millisecond, microsecond "
        "(hyperfine's)\n"
    )
    assert not (tmp_path / "x.db").exists()


def test_style_as_hyperfine_takes_it(tmp_path: Path) -> None:
    """--style none: no output at all, the exports still written; color: the results in
    colour even through a pipe; basic: no colour; an unknown style is one line, before
    anything runs."""
    run = ["run", "true", "--runs", "2"]
    silent = washout(
        *run, "--db", tmp_path / "n.db", "--style", "none", "--export-json", tmp_path / "n.json"
    )
    assert silent.stdout == "" and silent.stderr == ""
    assert json.loads((tmp_path / "n.json").read_text())["results"][0]["command"] == "true"
    coloured = washout(*run, "--db", tmp_path / "c.db", "--style", "color").stdout
    plain = washout(*run, "--db", tmp_path / "b.db", "--style", "basic").stdout
    assert "\x1b[" in coloured and "\x1b[" not in plain and " true │ " in plain
    assert washout(*run, "--db", tmp_path / "x.db", "--style", "fancy", check=False).stderr == (
        "washout: error: --style = 'fancy': expected auto, full, basic, nocolor, color, none "
        "(hyperfine's)\n"
    )
    assert not (tmp_path / "x.db").exists()


WHERE_STDOUT_GOES = """import os, sys
print(os.readlink("/proc/self/fd/1"), file=sys.stderr)
print("out", os.getpid())
"""
"""A command that says on stderr what its stdout is, then prints its pid there."""


def _tails(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT stdout_tail, stderr_tail FROM trial ORDER BY id").fetchall()


def test_output_as_hyperfine_takes_it(tmp_path: Path) -> None:
    """hyperfine's --output: null by default (grep, for one, stops at its first match when
    its stdout is /dev/null: hyperfine and washout must time the same program), pipe (read,
    its tail kept), inherit (washout's own stdout) and a file made anew for each trial;
    once or once per command; a word that is no kind and no path, a missing directory,
    a wrong count and --show-output with it are one line each before anything runs."""
    script = tmp_path / "where.py"
    script.write_text(WHERE_STDOUT_GOES)
    command = f"python3 {script}"
    washout("run", command, "--runs", "2", "--db", tmp_path / "d.db", "-q")
    assert {err.strip() for _, err in _tails(tmp_path / "d.db")} == {"/dev/null"}
    assert {out for out, _ in _tails(tmp_path / "d.db")} == {""}
    washout("run", command, "--runs", "2", "--output", "pipe", "--db", tmp_path / "p.db", "-q")
    for out, err in _tails(tmp_path / "p.db"):
        assert err.startswith("pipe:[") and out.startswith("out ")
    shown = washout("run", command, "--runs", "2", "--show-output", "--db", tmp_path / "s.db")
    assert "stdout: out " in shown.stderr  # washout's --show-output: the kept tails, after
    with open(tmp_path / "terminal", "w") as terminal:  # washout's stdout: a file here
        args = ["run", command, "--runs", "2", "--output", "inherit", "--db", tmp_path / "i.db"]
        subprocess.run(
            [sys.executable, "-m", "washout", *map(str, args)], stdout=terminal, check=True
        )
    printed = (tmp_path / "terminal").read_text()
    assert printed.count("\nout ") + printed.startswith("out ") == 2  # the trials' own lines
    assert _tails(tmp_path / "i.db") == [("", "")] * 2  # nothing kept: it went to washout's
    (tmp_path / "sub").mkdir()
    washout(
        "run",
        command,
        "true",
        "--runs",
        "4",
        "--output",
        "sub/out.txt",
        "--output",
        "null",
        "--db",
        tmp_path / "f.db",
        "-q",
        cwd=tmp_path,
    )
    written = (tmp_path / "sub" / "out.txt").read_text()
    assert written.count("out ") == 1  # made anew for each trial: the last one's alone
    trials = _tails(tmp_path / "f.db")
    mine = [err.strip() for _, err in trials if err.strip()]
    assert mine == [str(tmp_path / "sub" / "out.txt")] * 4  # (true prints nothing)
    assert written.split()[1] in {str(p) for p in range(1 << 22)}

    for given, message in (
        (
            ["--output", "nope"],
            "--output 'nope': expected null, pipe, inherit or a file's "
            "path (write './nope' for a file named 'nope')",
        ),
        (
            ["--output", f"{tmp_path}/none/x"],
            f"--output '{tmp_path}/none/x': no directory '{tmp_path}/none'",
        ),
        (["--output", str(tmp_path)], f"--output '{tmp_path}': a directory, not a file"),
        (["--output", "sub/"], "--output 'sub/': a directory, not a file"),
        (["--output", " "], "--output ' ': empty"),
        (
            ["--output", "null"] * 3,
            "--output given 3 times for 2 commands: give it once (for "
            "every command) or once per command, in order (hyperfine's)",
        ),
        (
            ["--output", "null", "--show-output"],
            "--output and --show-output: give one "
            "(hyperfine's --show-output is --output inherit; washout's prints the kept tails "
            "after the run, from --output pipe)",
        ),
    ):
        bad = washout("run", command, "true", *given, "--db", tmp_path / "x.db", check=False)
        assert (bad.returncode, bad.stderr) == (2, f"washout: error: {message}\n")
    assert not (tmp_path / "x.db").exists()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nobody reads it: each trial fails at once, none waits at its open
    held = washout(
        "run", "true", "--output", fifo, "--runs", "2", "--db", tmp_path / "y.db", check=False
    )
    assert held.returncode == 4
    with sqlite3.connect(tmp_path / "y.db") as conn:
        reasons = {r for (r,) in conn.execute("SELECT reason FROM trial")}
    assert reasons == {f"could not start: output {fifo}: No such device or address"}


def test_a_spec_output_is_checked_against_its_metrics_and_workers(tmp_path: Path) -> None:
    """A test's ``output`` in a spec: null where a metric reads stdout, or a file with
    workers elsewhere, is one line naming the field."""
    for extra, message in (
        (
            'output = "null"\n[test.metrics.n]\nstdout = "last-number"\n',
            "test[0].output = 'null': keeps no stdout, which metric 'n' reads (use 'pipe')",
        ),
        (
            'output = "./x"\n[[worker]]\nhost = "127.0.0.1"\n',
            "test[0].output = './x': is washout's own terminal or a file here: for workers "
            "elsewhere, use 'null' or 'pipe'",
        ),
        (
            'output = "x"\n',
            "test[0].output = 'x': expected null, pipe, inherit or a file's path "
            "(write './x' for a file named 'x')",
        ),
    ):
        spec = tmp_path / "s.toml"
        spec.write_text(f'[[test]]\nname = "a"\ncommand = "echo 1"\n{extra}')
        bad = washout("run", spec, "--db", tmp_path / "x.db", check=False)
        assert bad.returncode == 2 and bad.stderr == f"washout: error: {spec}: {message}\n"


def test_conclude_as_hyperfine_takes_it(tmp_path: Path) -> None:
    """hyperfine's -C/--conclude: after every trial, warmups too, outside its timing; once
    for every command or once per command; with -P its {NAME} filled as --prepare's; in
    the budget's run time; a spec's [conclude]; one that fails stops the worker (exit 3)
    with its reason."""
    log = tmp_path / "log"
    washout(
        "run",
        *(f"echo {c} >> {log}" for c in "ab"),
        "-p",
        f"echo P >> {log}",
        "-C",
        f"sleep 0.3; echo C >> {log}",
        "--runs",
        "4",
        "-w",
        "1",
        "--db",
        tmp_path / "a.db",
        "-q",
        "--export-json",
        tmp_path / "a.json",
    )
    words = log.read_text().split()
    triples = {tuple(words[i : i + 3]) for i in range(0, len(words), 3)}
    assert len(words) == 3 * (2 + 2 * 4) and triples == {("P", "a", "C"), ("P", "b", "C")}
    results = json.loads((tmp_path / "a.json").read_text())["results"]
    assert max(t for r in results for t in r["times"]) < 0.25  # not timed
    log.unlink()
    washout(
        "run",
        *(f"echo {c} >> {log}" for c in "ab"),
        *("-C", f"echo A >> {log}", "-C", f"echo B >> {log}"),
        *("--runs", "4", "--db", tmp_path / "b.db", "-q"),
    )
    words = log.read_text().split()
    assert set(zip(words[::2], words[1::2])) == {("a", "A"), ("b", "B")}
    log.unlink()
    washout(
        "run",
        *("-P", "n", "1", "2", "-C", f"echo c{{n}} >> {log}", f"echo {{n}} >> {log}"),
        *("--runs", "2", "--db", tmp_path / "c.db", "-q"),
    )
    words = log.read_text().split()
    assert set(zip(words[::2], words[1::2])) == {("1", "c1"), ("2", "c2")}
    # its time is a run's (hyperfine's conclusion_overhead): a few runs, not thousands
    washout("run", "true", "-C", "sleep 0.5", "-m", "2", "-M", "40", "--db", tmp_path / "d.db")
    assert len(exported(tmp_path / "d.db")) in (4, 6)
    spec = tmp_path / "s.toml"
    spec.write_text(
        f'[experiment]\nruns = 1\n[conclude]\ncommand = "echo C >> {log}"\n'
        f'[[test]]\nname = "t"\ncommand = "echo t >> {log}"\n'
    )
    log.unlink()
    washout("run", spec, "--db", tmp_path / "s.db", "-q")
    assert log.read_text().split() == ["t", "C"] * 2
    failing = washout("run", "true", "-C", "exit 7", "--db", tmp_path / "f.db", check=False)
    assert failing.returncode == 3 and "Traceback" not in failing.stderr
    assert "conclude command 'exit 7' failed" in failing.stdout + failing.stderr


def test_input_as_hyperfine_takes_it(tmp_path: Path) -> None:
    """hyperfine's --input FILE: every trial reads the file from its start (through the
    launcher and without it); without it stdin is /dev/null; a missing file is one line
    before anything runs, and a spec's input with workers elsewhere too."""
    data = tmp_path / "in.txt"
    data.write_text("hello\n" * 1000)
    check = tmp_path / "check.py"
    check.write_text(
        f"import sys\nsys.exit(0 if sys.stdin.read() == {data.read_text()!r} else 5)\n"
    )
    reads = f"python3 {check}"
    for launcher in ("", "off"):
        env = {**os.environ, "WASHOUT_LAUNCHER": launcher}
        db = tmp_path / f"i{launcher}.db"
        washout("run", reads, "--input", data, "--runs", "4", "--db", db, "-q", env=env)
        assert _statuses(db) == ["ok"] * 4
    washout("run", reads, "--runs", "2", "--db", tmp_path / "n.db", "-q", "-i")
    assert _statuses(tmp_path / "n.db") == ["failed"] * 2  # /dev/null: nothing to read
    empty = washout("run", "true", "--input", "", check=False)
    assert empty.stderr == "washout: error: --input '': empty\n"
    folder = washout("run", "true", "--input", tmp_path, check=False)
    assert folder.stderr == f"washout: error: --input '{tmp_path}': a directory, not a file\n"
    missing = washout("run", "true", "--input", tmp_path / "none", check=False)
    assert (missing.returncode, missing.stderr) == (
        2,
        f"washout: error: --input '{tmp_path / 'none'}': no such file\n",
    )
    spec = tmp_path / "s.toml"
    spec.write_text(
        '[[test]]\nname = "a"\ncommand = "cat"\ninput = "in.txt"\n[[worker]]\nhost = "127.0.0.1"\n'
    )
    bad = washout("run", spec, check=False)
    assert bad.returncode == 2 and bad.stderr == (
        f"washout: error: {spec}: test[0].input = 'in.txt': is a file here: for workers "
        "elsewhere, give the command its input itself\n"
    )


def _statuses(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [s for (s,) in conn.execute("SELECT status FROM trial ORDER BY id")]


def test_reference_as_hyperfine_takes_it(tmp_path: Path) -> None:
    """hyperfine's --reference CMD (with --reference-name): run first, as a test of its
    own, and every ratio of the summary is to it, in either direction; one of the commands
    is used as it is; the store keeps it ([experiment] reference), analyze --reference
    names another; an unknown name, a name without a reference and a scan are one line."""
    db = tmp_path / "r.db"
    proc = washout(  # 20 ms apart: a 10 ms gap was once not significant under extra load
        "run",
        *("sleep 0.01", "sleep 0.05"),
        *("--reference", "sleep 0.03", "--reference-name", "base", "--runs", "20"),
        *("--db", db, "-q", "--export-json", tmp_path / "r.json"),
        *("--export-markdown", tmp_path / "r.md"),
    )
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert [r["command"] for r in results] == ["sleep 0.03", "sleep 0.01", "sleep 0.05"]
    lines = [line.strip() for line in proc.stdout.splitlines()]
    assert "'base' ran" in lines and "'sleep 0.01' ran" in lines, proc.stdout
    slower = lines.index("'base' ran")
    assert (
        lines[slower + 1].startswith("1.")
        and "times faster than 'sleep 0.05'" in (lines[slower + 1])
    )
    faster = lines.index("'sleep 0.01' ran")
    assert "times faster than 'base'" in lines[faster + 1]
    assert "| `sleep 0.03` |" in (tmp_path / "r.md").read_text().splitlines()[2]
    assert (tmp_path / "r.md").read_text().splitlines()[2].endswith("| 1.00 |")
    document = json.loads(washout("analyze", db, "-f", "json").stdout)["comparison"]
    assert document["reference"] == "base"
    assert {r["fastest"] for r in document["rankings"]} == {"base"}
    other = json.loads(washout("analyze", db, "-f", "json", "--reference", "sleep 0.05").stdout)
    assert {r["fastest"] for r in other["comparison"]["rankings"]} == {"sleep 0.05"}
    assert all(r["ratio"] < 1 for r in other["comparison"]["rankings"])  # it is the slowest
    two = ("run", "sleep 0.01", "true", "--reference", "true", "--runs", "2")
    washout(*two, "--db", tmp_path / "t.db", "-q")
    assert len(exported(tmp_path / "t.db")) == 4  # two tests: the reference is one of them
    scanned = tmp_path / "g.db"  # a reference of its own stays outside the scan
    scan = ("run", "-P", "n", "1", "2", "sleep 0.00{n}", "--reference", "true", "-r", "2")
    washout(*scan, "--db", scanned, "-q")
    assert set(exported(scanned)["test"]) == {"true", "sleep 0.001", "sleep 0.002"}
    failing = tmp_path / "f.db"  # a stored reference without a successful trial: a note
    washout(
        "run", "sleep 0.01", "true", "--reference", "false", "-r", "2", "--db", failing, "-q", "-i"
    )
    assert "No ratios: the reference 'false' has no successful random-order trial here" in (
        washout("analyze", failing).stdout
    )
    for args, message in (
        (
            ["analyze", db, "--reference", "nope"],
            "--reference 'nope': no such test (tests: 'base', 'sleep 0.01', 'sleep 0.05')",
        ),
        (["run", "true", "--reference-name", "x"], "--reference-name goes with --reference"),
        (
            ["run", "-P", "n", "1", "2", "sleep 0.0{n}", "--reference", "sleep 0.0{n}"],
            "--reference 'sleep 0.0{n}' with -P/-L: it is one of the commands, which a scan "
            "makes a grid of tests; give a command of its own, or name one of the grid's "
            "tests in 'washout analyze --reference'",
        ),
    ):
        bad = washout(*args, check=False)
        assert (bad.returncode, bad.stderr) == (2, f"washout: error: {message}\n")
    spec = tmp_path / "s.toml"
    spec.write_text('[experiment]\nreference = "c"\n[[test]]\nname = "a"\ncommand = "true"\n')
    bad = washout("run", spec, check=False)
    assert bad.stderr == (
        f"washout: error: {spec}: experiment.reference = 'c': no such test (tests: 'a')\n"
    )


def test_sort_as_hyperfine_takes_it(tmp_path: Path) -> None:
    """hyperfine's --sort: auto (the summary's ratios by size, the tables in the commands'
    order), command (both in the commands' order), mean-time (the tables by mean); JSON
    keeps the commands' order; analyze takes it too; an unknown method is one line."""
    commands = ["sleep 0.03", "sleep 0.001", "sleep 0.02"]
    db = tmp_path / "s.db"
    auto = washout("run", *commands, "--runs", "16", "--db", db, "-q").stdout
    lines = [line.strip() for line in auto.splitlines()]

    def compared(lines: list[str]) -> list[str]:  # the summary's lines' other command
        start = lines.index("'sleep 0.001' ran")
        return [re.findall(r"than '([^']+)'", line)[0] for line in lines[start + 1 : start + 3]]

    assert compared(lines) == ["sleep 0.02", "sleep 0.03"]  # by size
    by_command = washout("analyze", db, "--sort", "command").stdout
    assert compared([line.strip() for line in by_command.splitlines()]) == [
        "sleep 0.03",
        "sleep 0.02",
    ]
    washout(
        "run",
        *commands,
        "--runs",
        "2",
        "--sort",
        "mean-time",
        "--db",
        tmp_path / "m.db",
        "-q",
        "--export-markdown",
        tmp_path / "m.md",
        "--export-json",
        tmp_path / "m.json",
    )
    rows = (tmp_path / "m.md").read_text().splitlines()[2:]
    assert [re.findall(r"`([^`]+)`", row)[0] for row in rows] == [
        "sleep 0.001",
        "sleep 0.02",
        "sleep 0.03",
    ]
    results = json.loads((tmp_path / "m.json").read_text())["results"]
    assert [r["command"] for r in results] == commands
    bad = washout("run", "true", "--sort", "time", check=False)
    assert (bad.returncode, bad.stderr) == (
        2,
        "washout: error: --sort = 'time': expected auto, command, mean-time (hyperfine's)\n",
    )


def test_an_export_to_dash_goes_to_stdout_as_hyperfine(tmp_path: Path) -> None:
    """hyperfine's '--export-json -' writes to stdout (after the results), not to a file
    named '-'."""
    quiet = washout(
        "run",
        "true",
        "/bin/true",
        "-r",
        "2",
        "--export-json",
        "-",
        "--style",
        "none",
        "--db",
        tmp_path / "a.db",
        cwd=tmp_path,
    )
    assert [r["command"] for r in json.loads(quiet.stdout)["results"]] == ["true", "/bin/true"]
    shown = washout(
        "run",
        "true",
        "-r",
        "2",
        "--export-markdown",
        "-",
        "--db",
        tmp_path / "b.db",
        "-q",
        cwd=tmp_path,
    )
    assert shown.stdout.rstrip().endswith("|") and "| Command | Mean" in shown.stdout
    assert shown.stdout.index("mean ± σ") < shown.stdout.index("| Command | Mean")
    assert not (tmp_path / "-").exists()
