"""Shared test helpers: the real CLI in a subprocess, the published data in tests/data, and
which tests are slow."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "data"  # published data; data/README.md says whose
ARTIFACT = FIXTURES / "ordersage-artifact"  # the ordering-trap paper's memcached, npbench trials
MEMCACHED = ARTIFACT / "memcached" / "all_exp_results.csv"
NPBENCH = ARTIFACT / "npbench" / "all_test_results.csv"
CONFIGSPACES = FIXTURES / "configspaces"  # fully measured parameter spaces


def washout(
    *args: str | Path, cwd: Path | None = None, check: bool = True, timeout: float = 120, **kwargs
) -> subprocess.CompletedProcess[str]:
    """Run the real ``washout`` CLI (this interpreter's package) and capture its output."""
    proc = subprocess.run(
        [sys.executable, "-m", "washout", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"washout {' '.join(map(str, args))} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (its state in /proc)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(
    predicate: Callable[[], object], seconds: float, what: str = "condition not reached in time"
) -> None:
    """Poll ``predicate`` every 50 ms until it is true; AssertionError(what) after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(what)
        time.sleep(0.05)


def trial_workers(db: Path) -> set[str]:
    """The names of the workers a store's trials ran on."""
    with sqlite3.connect(db) as c:
        rows = c.execute(
            "SELECT DISTINCT w.name FROM trial t JOIN run r ON t.run_id = r.id "
            "JOIN worker w ON r.worker_id = w.id"
        )
        return {name for (name,) in rows}


def ok_trials(db: Path) -> int:
    """Successful trials in a store another process is writing (0 before it exists)."""
    if not db.exists():  # connecting would create it, and washout never overwrites a file
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return c.execute("SELECT count(*) FROM trial WHERE status = 'ok'").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.fixture
def run_washout():
    return washout


SLOW = {
    "test_analyze_cli.py": {
        "test_json_is_the_python_api_result",
        "test_compat_ordersage_csv_reproduces_memcached_node_stats",
        "test_compat_ordersage_csv_reproduces_npbench_node_stats",
        "test_compat_table_is_readable",
        "test_bad_input_is_one_line_naming_file_line_field_value",
    },
    "test_allocate.py": {"test_ctrl_c_releases_and_resume_allocates_the_same_workers_again"},
    "test_extras.py": {"test_the_core_install_runs_the_main_job"},
    "test_fuzz_inputs.py": {"test_cli_never_shows_a_traceback_for_bad_specs"},
    "test_slurm.py": {
        "test_ctrl_c_releases_the_allocation_and_resume_allocates_again",
        "test_the_example_runs_on_the_node_and_leaves_no_job",
    },
    "test_importers.py": {"test_a_real_store_and_its_export_give_the_same_trials"},
    "test_store_integrity.py": {
        "test_damage_a_read_command_meets_in_a_large_store_is_one_line",
        "test_a_truncated_large_store_is_damaged_by_its_header",
    },
    "test_report_markdown.py": {
        "test_cli_writes_html_and_markdown",
        "test_cli_report_of_a_store_shows_what_ran",
        "test_progress_hears_every_figure",
    },
    "test_report_sweep.py": {"test_sweep_section_html"},
    "test_roles.py": {
        "test_two_client_server_pairs_metrics_from_both_roles_analysis_per_group",
        "test_a_server_lost_mid_trial_makes_the_run_rerun_whole",
        "test_provenance_is_per_role_and_groups_are_compared_role_by_role",
    },
    "test_roles_example.py": {"test_client_server_example"},
    "test_robustness.py": {
        "test_sigkill_at_random_moments_then_resume",
        "test_databases_of_another_kind_get_a_clear_message",
    },
    "test_run_cli.py": {
        "test_same_seed_same_schedule_in_two_databases_different_seed_differs",
        "test_schedule_from_exported_data_and_log",
    },
    "test_ssh_workers.py": {
        "test_unreachable_and_untrusted_workers_fail_alone",
        "test_two_workers_concurrent_synced_pinned_with_per_worker_results",
    },
    "test_hyperfine_cli.py": {
        "test_two_commands_table_ranking_and_exports",
        "test_every_trial_failing_stops_scripts_unless_ignored",
    },
    "test_stats_carryover.py": {"test_family_wise_false_positives_stay_within_alpha"},
    "test_stats_compare.py": {"test_disagreement_note_is_calibrated"},
    "test_stats_claims.py": {"test_a_false_claim_holds_at_most_at_rate_alpha"},
    "test_stats_drift.py": {"test_family_wise_false_positives_stay_within_alpha"},
    "test_stats_power.py": {
        "test_cli_plan_from_a_real_pilot_store",
        "test_cli_plan_json_and_table",
        "test_the_plans_interval_covers_the_true_runs_needed_at_about_its_confidence",
    },
    "test_sampled_metrics.py": {"test_sampled_file_and_command_mean_max_delta"},
    "test_sweep_cli.py": {
        "test_explore_json_on_herd",
        "test_method_paper_is_the_papers_components",
    },
    "test_sweep_incremental.py": {"test_holdout_rule_is_never_looser_and_stops_at_the_threshold"},
    "test_sweep_report_cli.py": {
        "test_report_reads_a_sweep_directory",
        "test_explore_writes_a_sweep_report",
    },
    "test_why_cli.py": {
        "test_test_names_are_never_terminal_markup",
        "test_memcached_carryover_points_at_get_hits_after_the_reset",
        "test_report_of_a_csv_without_positions_says_what_it_cannot_do",
        "test_analyze_json_has_carryover_drift_and_claims",
        "test_bad_claim_is_one_line",
        "test_quickstart_says_the_first_trial_after_each_reset_pays_for_the_disk",
    },
}
"""Tests that took 10 s or more (``pytest --durations``, 2 cores shared with other jobs), by
file. Together with every Chromium test (browser start-up) and tests/test_examples.py (real
experiments, marked there), they are ``slow``: ``pytest -m "not slow"`` is the fast inner
loop, CI runs everything. Kept here, in one place, so the list is re-measured as a whole."""


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`SLOW` and the Chromium tests ``slow``; a name in SLOW that
    its module does not define is an error, so the list cannot silently go stale."""
    stale = set()
    for item in items:
        module = getattr(item, "module", None)
        names = SLOW.get(item.path.name, set())
        stale |= {f"{item.path.name}::{n}" for n in names if not hasattr(module, n)}
        if getattr(item, "originalname", None) in names or item.get_closest_marker("chromium"):
            item.add_marker(pytest.mark.slow)
    if stale:
        raise pytest.UsageError(
            f"tests/conftest.py SLOW names tests that do not exist: {', '.join(sorted(stale))}"
        )
