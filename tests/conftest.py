"""Shared test helpers: the real CLI in a subprocess, the published data in tests/data, and
which tests are slow."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import pandas as pd

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


def exported(db: Path) -> pd.DataFrame:
    """``washout export DB`` read back, without the resource and health metrics every trial
    has: the rows of the spec's own metrics."""
    import io

    import pandas as pd

    from washout.data.health import HEALTH_METRICS
    from washout.data.longformat import RESOURCE_METRICS

    frame = pd.read_csv(io.StringIO(washout("export", db).stdout))
    return frame[~frame["metric"].isin((*RESOURCE_METRICS, *HEALTH_METRICS))].reset_index(drop=True)


def is_health(metric: str) -> bool:
    """A per-trial health measure (``health.*``): exported with every trial, but which of
    them a trial has depends on what the machine gives."""
    from washout.data.health import HEALTH_PREFIX

    return metric.startswith(HEALTH_PREFIX)


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


def gone(pid: int, within: float = 5.0) -> bool:
    """The process stops running (absent, or a zombie) within a few seconds: a SIGKILL is
    delivered asynchronously, so it may still be dying just after ``killpg`` returned."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.01)
    return False


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
    "test_allocate.py": {
        "test_a_failed_allocation_is_one_line_and_still_released",
        "test_allocated_workers_run_the_experiment_and_are_released",
        "test_ctrl_c_releases_and_resume_allocates_the_same_workers_again",
        "test_resume_refuses_workers_of_other_names",
    },
    "test_analyze_cli.py": {
        "test_a_store_written_by_washout_run_is_analyzed",
        "test_bad_input_is_one_line_naming_file_line_field_value",
        "test_bad_options_are_one_line_errors",
        "test_ci_confidence_defaults_to_the_verdicts_level_and_the_option_sets_it",
        "test_claims_json_and_words_judge_per_run_ratios",
        "test_compat_ordersage_csv_reproduces_memcached_node_stats",
        "test_compat_ordersage_csv_reproduces_npbench_node_stats",
        "test_compat_table_is_readable",
        "test_json_is_the_python_api_result",
    },
    "test_analysis.py": {
        "test_every_renderer_agrees_on_a_sweep",
        "test_every_renderer_agrees_on_the_papers_data",
        "test_every_renderer_agrees_on_the_quickstart",
        "test_json_of_the_analysis_is_versioned_and_complete",
        "test_the_summary_of_2000_tests_takes_seconds",
        "test_values_near_the_float_limit_give_valid_json",
    },
    "test_api.py": {
        "test_an_unknown_option_is_one_line_and_mypy_sees_it",
        "test_explore_matches_the_cli",
        "test_run_from_a_spec_file_matches_the_cli",
        "test_the_docs_example_runs_as_written",
    },
    "test_bisect.py": {
        "test_a_history_that_is_not_monotone_ends_with_a_range",
        "test_a_worker_with_a_stale_build_is_refused",
        "test_bad_requests_are_one_line_errors",
        "test_finds_the_planted_commit_after_a_sigkill_and_resume",
        "test_the_steps_run_on_slurm_nodes",
    },
    "test_calibration.py": {
        "test_a_real_lag_two_pair_is_not_handed_to_another_predecessor_at_50_runs",
        "test_claims_analyses_calibrated_at_20_runs_per_order",
        "test_every_analysis_keeps_alpha_where_its_null_holds_and_finds_what_is_there",
    },
    "test_context_run.py": {
        "test_analyze_says_which_metric_depends_on_its_context_in_every_output",
        "test_each_trial_sees_its_context_over_ssh",
        "test_each_trial_sees_its_padding_directory_and_aslr_locally",
        "test_resume_repeats_each_slots_context_after_a_session_is_killed",
        "test_run_context_overrides_the_spec_and_resume_plans_it_again",
        "test_the_export_and_load_carry_the_context_columns",
    },
    "test_counters.py": {"test_counters_of_a_real_trial"},
    "test_extras.py": {"test_the_core_install_runs_the_main_job"},
    "test_fuzz_inputs.py": {
        "test_cli_never_shows_a_traceback_for_bad_specs",
        "test_mutated_csvs_load_or_fail_cleanly",
        "test_mutated_specs_fail_cleanly",
        "test_random_spec_tables_fail_cleanly",
        "test_stores_with_damaged_values_give_one_line_or_a_result",
        "test_whatever_export_writes_reads_back_as_the_store_holds_it",
    },
    "test_harness_invisible.py": {
        "test_identical_no_op_tests_show_no_order_effect",
        "test_the_controller_does_the_same_work_before_every_position",
        "test_whole_capture_once_per_session_and_again_when_a_file_changes",
    },
    "test_hyperfine_cli.py": {
        "test_analyze_shows_resource_metrics_without_analysing_them",
        "test_every_trial_failing_stops_scripts_unless_ignored",
        "test_live_medians_refresh_end_at_the_final_counts_and_give_way",
        "test_parameter_scans_and_names",
        "test_run_count_from_hyperfines_time_budget",
        "test_spec_keys_warmup_and_prepare",
        "test_two_commands_table_ranking_and_exports",
        "test_warmup_and_prepare",
    },
    "test_idle_arm.py": {
        "test_net_energy_of_a_real_run",
        "test_net_energy_of_a_real_run_over_ssh",
        "test_short_energy_trials_are_said",
    },
    "test_importers.py": {"test_a_real_store_and_its_export_give_the_same_trials"},
    "test_launcher.py": {"test_max_rss_is_the_commands_own_as_gnu_time_says"},
    "test_ssh_launcher.py": {"test_max_rss_over_ssh_is_the_commands_own_as_gnu_time_says"},
    "test_local_executor.py": {"test_timeout_kills_the_whole_group"},
    "test_logging.py": {"test_the_log_is_silent_by_default_and_grows_with_v"},
    "test_metric_sources.py": {
        "test_output_streams_through_a_bounded_tail",
        "test_the_wall_of_a_command_with_much_output_is_the_command",
        "test_a_catastrophic_regex_fails_its_trial_within_its_budget",
        "test_signals_are_honoured_while_a_regex_runs",
        "test_any_output_is_a_recorded_trial",
    },
    "test_report_markdown.py": {
        "test_cli_report_of_a_store_shows_what_ran",
        "test_cli_writes_html_and_markdown",
        "test_markdown_report_of_npbench",
        "test_progress_hears_every_figure",
    },
    "test_report_sweep.py": {
        "test_sweep_section_html",
        "test_sweep_report_gives_each_share_its_interval",
    },
    "test_resource_metrics.py": {"test_every_trial_stores_its_resource_metrics"},
    "test_robustness.py": {
        "test_abort_policy_stops_and_resume_reruns_the_failed_slot",
        "test_ctrl_c_stops_at_the_next_trial_boundary_and_says_how_to_resume",
        "test_databases_of_another_kind_get_a_clear_message",
        "test_hung_test_is_killed_with_its_whole_process_group",
        "test_provenance_change_during_the_experiment_is_refused",
        "test_secrets_from_the_environment_never_reach_the_store",
        "test_sigkill_at_random_moments_then_resume",
        "test_status_while_running_then_complete",
    },
    "test_roles.py": {
        "test_a_server_lost_mid_trial_makes_the_run_rerun_whole",
        "test_background_that_never_gets_ready_or_dies_fails_the_trial_with_its_reason",
        "test_provenance_is_per_role_and_groups_are_compared_role_by_role",
        "test_two_client_server_pairs_metrics_from_both_roles_analysis_per_group",
    },
    "test_roles_example.py": {"test_client_server_example"},
    "test_run_cli.py": {
        "test_default_database_path_is_named_after_the_experiment",
        "test_every_metric_source_and_an_unparsable_trial",
        "test_export_json_and_parquet",
        "test_grid_values_are_shell_quoted_when_run",
        "test_never_overwrites_a_database",
        "test_other_designs_through_the_cli",
        "test_pinning_applies_to_the_trial_and_is_recorded",
        "test_plain_commands_run_without_a_shell_and_shell_syntax_keeps_it",
        "test_quick_form_like_hyperfine",
        "test_same_seed_same_schedule_in_two_databases_different_seed_differs",
        "test_schedule_from_exported_data_and_log",
        "test_seed_is_drawn_printed_and_stored_when_absent",
    },
    "test_sampled_metrics.py": {
        "test_a_failing_sample_fails_the_trial_with_its_reason",
        "test_no_powercap_is_not_available_and_the_trial_stays_ok",
        "test_powercap_joules_and_watts_over_a_wrapping_counter",
        "test_sampled_file_and_command_mean_max_delta",
    },
    "test_outputs.py": {
        "test_a_fifo_is_written_as_a_stream",
        "test_a_runs_exports_never_write_over_its_own_store",
        "test_an_export_onto_a_live_stores_shared_memory_is_refused_and_the_writer_goes_on",
        "test_dev_stdout_and_a_process_substitution_are_streams",
        "test_no_file_of_a_store_is_an_output_whatever_names_it",
        "test_outputs_are_whole_or_absent_on_a_full_disk",
    },
    "test_round_trip.py": {
        "test_a_warmup_stopped_by_sigterm_is_superseded_on_resume",
        "test_every_export_is_read_back_as_the_store_holds_it",
    },
    "test_secrets.py": {
        "test_a_literal_secret_in_the_spec_is_masked_in_the_store_and_report_and_resume_restores_it",
        "test_secrets_straddling_the_stored_tail_inherited_or_in_urls_never_reach_the_store",
        "test_short_inherited_secrets_and_url_passwords_with_slashes_and_ats",
        "test_terminal_escapes_a_trial_writes_are_shown_escaped",
    },
    "test_slurm.py": {
        "test_a_bad_cluster_table_is_one_line_naming_the_field",
        "test_an_experiment_runs_on_the_node_slurm_allocates_and_gives_it_back",
        "test_ctrl_c_releases_the_allocation_and_resume_allocates_again",
        "test_sigterm_and_sigkill_of_washout_leave_no_job",
        "test_steps_keep_the_nodes_status_wall_and_timeout",
        "test_the_example_runs_on_the_node_and_leaves_no_job",
    },
    "test_spec_validation.py": {
        "test_a_spec_file_in_upper_case_is_a_spec_not_a_command",
        "test_values_and_env_reach_an_ssh_worker_as_data",
    },
    "test_ssh_failures.py": {
        "test_a_worker_lost_for_good_keeps_its_trial_interrupted_and_nothing_it_never_ran",
        "test_a_worker_that_stays_down_is_given_up_after_bounded_retries",
        "test_cancelled_trial_kills_its_remote_group",
        "test_connection_dropped_mid_trial_reruns_the_run_whole_and_kills_the_orphan",
        "test_provenance_mismatch_between_workers",
        "test_reboot_reset_waits_reconnects_and_checks_the_boot_id",
        "test_reboot_without_a_new_boot_id_is_an_error",
    },
    "test_ssh_workers.py": {
        "test_two_workers_concurrent_synced_pinned_with_per_worker_results",
        "test_unreachable_and_untrusted_workers_fail_alone",
    },
    "test_stats_carryover.py": {"test_family_wise_false_positives_stay_within_alpha"},
    "test_stats_claims.py": {"test_a_false_claim_holds_at_most_at_rate_alpha"},
    "test_stats_compare.py": {"test_disagreement_note_is_calibrated"},
    "test_stats_context.py": {
        "test_a_five_percent_layout_effect_in_one_class_is_found",
        "test_no_context_effect_keeps_false_positives_at_alpha_with_other_effects",
    },
    "test_stats_drift.py": {
        "test_no_drift_is_reported_where_there_is_none",
        "test_real_drift_is_found",
    },
    "test_stats_order.py": {"test_ci_case_uses_the_family_wise_confidence_unless_told_otherwise"},
    "test_stats_power.py": {
        "test_cli_plan_from_a_real_pilot_store",
        "test_cli_plan_json_and_table",
        "test_the_plans_interval_covers_the_true_runs_needed_at_about_its_confidence",
        "test_the_printed_runs_reach_the_target_power_on_average",
    },
    "test_store_frame.py": {"test_rows_this_version_did_not_write_are_kept_as_they_are"},
    "test_store_integrity.py": {
        "test_a_large_intact_store_is_read",
        "test_a_truncated_large_store_is_damaged_by_its_header",
        "test_damage_a_read_command_meets_in_a_large_store_is_one_line",
        "test_damage_readers_never_meet_is_found_before_any_write",
    },
    "test_stats_equivalence.py": {"test_a_wrong_decision_stays_within_alpha_at_the_margin"},
    "test_store_journal.py": {
        "test_sigkill_while_appending_and_folding_loses_nothing_and_doubles_nothing",
    },
    "test_store_lifecycle.py": {
        "test_a_full_disk_stops_in_one_line_with_the_data_intact_and_resumable",
        "test_a_store_appears_only_whole",
        "test_damaged_values_are_one_line_never_a_traceback",
        "test_odd_store_targets_each_have_their_own_message",
        "test_one_writer_whatever_name_reaches_the_store",
        "test_a_second_writer_is_refused_naming_the_holder_and_status_tells_alive_from_dead",
        "test_a_store_on_a_read_only_file_system_is_read",
        "test_a_truncated_store_is_damaged_not_another_kind_of_file",
        "test_an_interrupted_run_is_rerun_whole_and_its_partial_attempt_kept_superseded",
        "test_every_failed_trial_of_a_test_and_abort_have_their_own_exit_codes",
        "test_export_onto_a_full_disk_is_one_line",
        "test_outputs_never_clobber_inputs",
        "test_two_runs_started_at_the_same_instant",
    },
    "test_sweep_cli.py": {
        "test_explore_json_on_herd",
        "test_method_paper_is_the_papers_components",
        "test_non_numeric_metric_names_row_and_value",
    },
    "test_sweep_incremental.py": {
        "test_holdout_rule_is_never_looser_and_stops_at_the_threshold",
        "test_tiny_samples_with_unseen_levels_do_not_crash",
    },
    "test_sweep_report_cli.py": {
        "test_explore_writes_a_sweep_report",
        "test_report_reads_a_sweep_directory",
    },
    "test_sweep_uncertainty.py": {
        "test_intervals_cover_the_full_spaces_shares",
        "test_intervals_cover_where_the_draws_alone_did_not",
        "test_importance_is_never_wrong_only_open",
        "test_no_posterior_no_intervals",
        "test_share_interval_is_the_draws_and_the_half_samples_variance",
    },
    "test_trials_die_with_controller.py": {
        "test_resume_kills_what_a_dead_session_left_on_an_ssh_worker",
        "test_resume_kills_what_a_dead_session_left_running_locally",
    },
    "test_why_cli.py": {
        "test_analyze_json_has_carryover_drift_and_claims",
        "test_bad_claim_is_one_line",
        "test_memcached_carryover_points_at_get_hits_after_the_reset",
        "test_quickstart_says_the_first_trial_after_each_reset_pays_for_the_disk",
        "test_report_of_a_csv_without_positions_says_what_it_cannot_do",
        "test_run_summary_evaluates_the_specs_claims",
        "test_test_names_are_never_terminal_markup",
        "test_the_quick_form_says_it_cannot_judge_drift_rather_than_finding_it",
    },
}
"""Tests that took 10 s or more (``pytest --durations``, 2 cores shared with other jobs), by
file. Together with every Chromium test (browser start-up) and tests/test_examples.py (real
experiments, marked there), they are ``slow``: ``pytest -m "not slow"`` is the fast inner
loop, CI runs everything. Kept here, in one place, so the list is re-measured as a whole."""


MACHINE_WIDE = frozenset({"test_machine_check.py", "test_context_run.py"})
"""Files whose tests change or depend on this machine's kernel settings: test_machine_check
tunes this machine (ASLR and perf's sample rate in /proc/sys, for a moment) and reads ASLR,
test_context_run's trials see ASLR on or off. They share one group: never at the same time."""


def worker_group(item: pytest.Item) -> str:
    """The pytest-xdist group ``item`` runs in (``scripts/test`` runs the suite on two
    workers with ``--dist loadgroup``: a group's tests run one after another on one worker).
    Every Slurm test is in one ("slurm": the single-host Slurm has one node, and a test
    that waits for its allocation or counts its jobs must not meet another's); the files of
    MACHINE_WIDE in another; otherwise the test's file, so a module's fixtures (an sshd,
    Chromium, a built virtualenv) are set up once and its tests keep their order."""
    if item.get_closest_marker("slurm"):
        return "slurm"
    if item.path.name in MACHINE_WIDE:
        return "machine"
    return item.path.name


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker and xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`SLOW` and the Chromium tests ``slow``; a name in SLOW that
    its module does not define is an error, so the list cannot silently go stale. Each test
    gets its :func:`worker_group`."""
    stale = set()
    for item in items:
        module = getattr(item, "module", None)
        names = SLOW.get(item.path.name, set())
        stale |= {f"{item.path.name}::{n}" for n in names if not hasattr(module, n)}
        if getattr(item, "originalname", None) in names or item.get_closest_marker("chromium"):
            item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.xdist_group(worker_group(item)))
    if stale:
        raise pytest.UsageError(
            f"tests/conftest.py SLOW names tests that do not exist: {', '.join(sorted(stale))}"
        )
