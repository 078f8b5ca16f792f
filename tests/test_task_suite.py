"""The task suite's shape (VM-free): every task meets the format's rules, and TASKS.md covers them all."""

from __future__ import annotations

import dataclasses
import importlib
import re
import string
import subprocess
import sys
from pathlib import Path

import gymnasium
import pytest
from validation_reports import validation_report as _report

import weavegym.envs.tasks as registry
from weavegym.envs.registration import register_draft
from weavegym.envs.tasks import DOMAINS, all_tasks, draft_tasks, get_task, match_tasks
from weavegym.ops.suite_report import adversary_rows, flake_rate, stats_from_markdown, task_stats, tasks_markdown
from weavegym.ops.validation import channel_switches
from weavegym.vm_images.recipe import PROFILES

REPO = Path(__file__).resolve().parents[1]
TASKS = all_tasks() + draft_tasks()  # the format's rules hold for drafts too


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_task_follows_the_suite_rules(task) -> None:
    assert 3 <= len(task.clauses) <= 8, f"{task.id} has {len(task.clauses)} clauses; the suite asks for 3-8"
    assert len({c.name for c in task.clauses}) == len(task.clauses), "clause names must be unique"
    assert all(c.description for c in task.clauses)
    assert task.channels.gui and task.channels.cli and task.channels.why_both
    assert task.apps, "apps lists the programs the task drives"
    assert task.profile in PROFILES
    assert task.max_steps >= 5 and task.time_budget_s >= 60
    module = importlib.import_module(task.setup.__module__)
    assert module.__doc__ and task.id in module.__doc__, "the module docstring names the task and says why"
    fields = {name for _, name, _, _ in string.Formatter().parse(task.instruction) if name}
    assert all(re.fullmatch(r"[a-z_][a-z0-9_]*", name) for name in fields), fields


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_task_declares_what_each_channel_must_write(task) -> None:
    """Provenance needs declared deliverables: at least one for the GUI side and one for the CLI side."""
    channels = {d.channel for d in task.deliverables}
    assert channels == {"gui", "cli"}, f"{task.id} declares deliverables for {sorted(channels)} only"
    assert all(d.description for d in task.deliverables)


def test_task_numbers_are_contiguous_per_domain() -> None:
    for domain in DOMAINS:
        numbers = sorted(t.number for t in TASKS if t.domain == domain)
        assert numbers == list(range(1, len(numbers) + 1)), f"{domain}: {numbers}"


def test_match_tasks_takes_comma_separated_patterns_in_suite_order() -> None:
    ids = [t.id for t in all_tasks()]
    picked = [t.id for t in match_tasks(" Weave-Games-*, Weave-Productivity-1,Weave-Games-2 ,")]
    assert picked == [i for i in ids if i.startswith("Weave-Games-") or i == "Weave-Productivity-1"]
    assert len(picked) == len(set(picked)) >= 4
    assert match_tasks("Weave-Nope-*,") == []


def test_drafts_are_reached_only_by_their_exact_id(monkeypatch: pytest.MonkeyPatch) -> None:
    real = registry._registry()
    draft = dataclasses.replace(next(iter(real.values())), id="Weave-Games-99", draft="not validated yet")
    monkeypatch.setattr(registry, "_registry", lambda: {**real, draft.id: draft})
    assert draft.id not in [t.id for t in all_tasks()]
    assert draft in draft_tasks()
    assert get_task(draft.id) is draft  # validate and WeaveEnv(task_id=...) reach it by id
    assert draft.id not in gymnasium.registry
    register_draft(draft.id)  # what the runner's worker does before gym.make, for `weavegym run --tasks <id>`
    try:
        assert gymnasium.spec(draft.id).kwargs == {"task_id": draft.id}
    finally:
        gymnasium.registry.pop(draft.id, None)
    register_draft("Weave-Games-1")  # a suite task: already registered, left as it is
    assert match_tasks("Weave-Games-99") == [draft]
    assert match_tasks("Weave-Games-1,Weave-Games-99") == [get_task("Weave-Games-1"), draft]
    assert draft not in match_tasks("Weave-*") + match_tasks("Weave-Games-9?") + match_tasks("Weave-Games-*")


def test_drafts_are_not_registered_with_gymnasium() -> None:
    import weavegym  # noqa: F401  (registers the suite)

    assert all(t.id in gymnasium.registry for t in all_tasks())
    assert not any(t.id in gymnasium.registry for t in draft_tasks())
    assert all(t.draft.strip() for t in draft_tasks()), "a draft says why it is one"


def test_tasks_md_lists_every_registered_task() -> None:
    tasks_table, _, adversary_table = (REPO / "TASKS.md").read_text().partition("## Adversaries")
    rows = re.findall(r"^\| (Weave-[A-Za-z]+-\d+) \|", tasks_table, flags=re.M)
    assert rows == [t.id for t in all_tasks()], "regenerate TASKS.md with `make validate-full` (drafts stay out)"
    pairs = re.findall(r"^\| (Weave-[A-Za-z]+-\d+) \| ([a-z/-]+) \|", adversary_table, flags=re.M)
    # Every task meets the three; a task with infeasible variants also meets the quitter and, on its infeasible
    # seed, every adversary again (runs named "<adversary>/infeasible") and the fabricator.
    assert pairs == [(t.id, a) for t in all_tasks() for a in adversary_rows(t)]
    assert ("Weave-DevOps-4", "fabricator/infeasible") in pairs


def test_task_stats_take_medians_and_count_flakes() -> None:
    reports = [_report("Weave-Data-1", 0, oracle_s=10, reset_s=40, cached=1.0, seed=6),
               _report("Weave-Data-1", 0, oracle_s=12, reset_s=44, cached=2.0, violations=["oracle scored 0.5"]),
               _report("Weave-Data-1", 0, oracle_s=30, reset_s=42, cached=1.5, seed=3),
               _report("Weave-Web-1", 0, oracle_s=5, reset_s=60, cached=1.2)]
    stats = task_stats(reports)
    data = stats["Weave-Data-1"]
    assert (data.runs, data.clean, data.oracle_steps) == (3, 2, 9)
    assert data.oracle_s == pytest.approx(12) and data.first_reset_s == pytest.approx(42)
    assert data.cached_reset_s == pytest.approx(1.5) and data.flaky and data.seeds == (0, 3, 6)
    assert not stats["Weave-Web-1"].flaky
    assert flake_rate(stats) == (1, 4)


def test_tasks_markdown_has_one_row_per_task_with_measurements() -> None:
    tasks = TASKS[:2]
    reports = [_report(tasks[0].id, 0, oracle_s=10, reset_s=40, cached=1.0)]
    text = tasks_markdown(tasks, reports, command="weavegym validate 'Weave-*'")
    main, _, adversaries = text.partition("## Adversaries")
    rows = [line for line in main.splitlines() if line.startswith("| Weave-")]
    assert [row.split(" | ")[0][2:] for row in rows] == [t.id for t in tasks]
    assert "| 9 | 4 | 10.0 | 40.0 | 1.0 | 1/1 | 0 |" in rows[0]
    assert rows[1].count("| – ") == 7  # not measured: dashes, not zeros
    assert "0 of 1 task runs" in text
    adversary_rows = [line for line in adversaries.splitlines() if line.startswith("| Weave-")]
    assert len(adversary_rows) == 6 * len(tasks)  # three one-channel adversaries, three hybrids
    assert f"| {tasks[0].id} | backdoor | 0 | – | 1 | not run |" in adversary_rows
    assert f"| {tasks[0].id} | cli-only | 1 | 0.25 | 1 | provenance_gui_1 |" in adversary_rows
    assert f"| {tasks[0].id} | gui-only | 1 | 0.00 | 1 | NoDesktopTerminalWork |" in adversary_rows
    assert f"| {tasks[1].id} | forger | 0 | – | 1 | not run |" in adversary_rows


def test_tasks_md_reads_back_into_the_figures_it_was_written_from() -> None:
    """Regenerating TASKS.md for a few re-validated tasks keeps every other task's row exactly as it was."""
    tasks = [t for t in TASKS if t.abstention is not None][:1] + TASKS[:2]
    reports = [_report(tasks[1].id, 0, oracle_s=10.04, reset_s=40.26, cached=1.0),
               _report(tasks[1].id, 0, oracle_s=11, reset_s=41, cached=2.0, violations=["noop scored 1"], seed=3)]
    reports[0]["results"]["cli-only"]["evaluation"] = {"zeroed_by": ["GuiArtifactViaCli"], "clauses": []}
    first = tasks_markdown(tasks, reports, command="x")
    kept = stats_from_markdown(first)
    assert set(kept) == {tasks[1].id}, "an unmeasured task is not read back as zeros"
    assert (kept[tasks[1].id].runs, kept[tasks[1].id].clean, kept[tasks[1].id].seeds) == (2, 1, (0, 3))
    assert tasks_markdown(tasks, [], command="x", kept=kept) == first
    # New reports win over the kept figures of the same task.
    newer = tasks_markdown(tasks, [_report(tasks[1].id, 0, oracle_s=3, reset_s=5, cached=1)], command="x", kept=kept)
    assert "| 9 | 4 | 3.0 | 5.0 | 1.0 | 1/1 | 0 |" in newer and "0 of 1 task runs" in newer


def test_a_run_retried_after_an_env_error_is_counted_in_its_row() -> None:
    reports = [_report(TASKS[0].id, 0, oracle_s=10, reset_s=40, cached=1.0, seed=seed) for seed in (0, 3)]
    reports[1]["earlier_errors"] = ["AgentUnavailableError: Shell: Stream removed (Socket closed)"]
    text = tasks_markdown(TASKS[:1], reports, command="x")
    assert "| 2/2, 1 retried | 0, 3 |" in text
    kept = stats_from_markdown(text)
    assert kept[TASKS[0].id].retried == 1 and tasks_markdown(TASKS[:1], [], command="x", kept=kept) == text


def test_tasks_md_names_the_images_its_runs_were_made_on() -> None:
    reports = [_report(TASKS[0].id, 0, oracle_s=10, reset_s=40, cached=1.0, seed=seed) for seed in (0, 3, 6)]
    assert "**images**" not in tasks_markdown(TASKS[:1], reports, command="x"), "older reports name none"
    reports[0]["image"] = reports[1]["image"] = "base-debian-12-ea30eda5aceb"
    text = tasks_markdown(TASKS[:1], reports, command="x")
    assert ("- **images**: the VM images these runs booted or restored, by name: `base-debian-12-ea30eda5aceb` "
            "(2 task runs), 1 task run made before reports named their image.") in text
    reports[2]["image"] = "full-debian-12-4b3587da5f12"
    assert "`base-debian-12-ea30eda5aceb` (2 task runs), `full-debian-12-4b3587da5f12` (1 task run)." in \
        tasks_markdown(TASKS[:1], reports, command="x")


def test_reports_saved_before_the_switch_count_show_it_unknown() -> None:
    report = _report(TASKS[0].id, 0, oracle_s=10, reset_s=40, cached=1.0)
    del report["results"]["oracle"]["switches"]
    assert task_stats([report])[TASKS[0].id].oracle_switches is None
    row = next(ln for ln in tasks_markdown(TASKS[:1], [report], command="x").splitlines() if ln.startswith("| Weave-"))
    assert "| 9 | – | 10.0 |" in row


def test_switches_count_changes_between_gui_and_cli_only() -> None:
    assert channel_switches([]) == 0
    assert channel_switches(["cli", "cli", "gui", "gui", "cli"]) == 2
    # wait/done (control) and malformed steps ("") sit between two GUI actions without making a switch.
    assert channel_switches(["gui", "control", "", "gui", "cli", "control", "gui", "control"]) == 2


def test_committed_tasks_md_reads_back_unchanged() -> None:
    """The committed table round-trips, so `weavegym tasks --keep TASKS.md` loses nothing of it."""
    text = (REPO / "TASKS.md").read_text()
    kept = stats_from_markdown(text)
    assert kept, "TASKS.md has measured rows"
    listed = [t for t in TASKS if f"| {t.id} |" in text]
    regenerated = tasks_markdown(listed, [], command="x", kept=kept)
    table = lambda t: [ln for ln in t.splitlines() if ln.startswith("| Weave-")]  # noqa: E731
    assert table(regenerated) == table(text)


def test_committed_tasks_md_rows_are_those_the_record_makes() -> None:
    """record/ holds the validation reports TASKS.md is made from, a file per task (`make validate-full`, `make
    validate-base`, `validate --json record` for one task); every task they cover has the row they make.

    The table cannot drift from its data: a row edited by hand, or a record committed without the table made from
    it, fails here. Tasks the record does not cover yet (a run still going on) keep their earlier rows."""
    from weavegym.ops.record_store import read_folder

    path = REPO / "record"
    if not path.is_dir():
        pytest.skip("no record/ (deleted to start the record over): nothing to hold TASKS.md to")
    reports = read_folder(path)
    assert reports and all(r["task_id"] in {t.id for t in TASKS} for r in reports)
    text = (REPO / "TASKS.md").read_text()
    covered = [t for t in all_tasks() if t.id in {r["task_id"] for r in reports}]
    made = tasks_markdown(covered, reports, command="x")
    row = lambda t, task_id: next(ln for ln in t.splitlines() if ln.startswith(f"| {task_id} |"))  # noqa: E731
    for task in covered:
        assert row(text, task.id) == row(made, task.id), f"{task.id}: regenerate TASKS.md from record/"


def test_weavegym_tasks_lists_the_suite_and_names_the_drafts_apart() -> None:
    out = subprocess.run([sys.executable, "-c", "from weavegym.cli import main; main()", "tasks"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    table, _, drafts = out.partition("draft(s), not in the suite")
    assert all(t.id in table for t in all_tasks())
    assert not any(t.id in table for t in draft_tasks())
    assert all(f"{t.id}: {t.title}" in drafts for t in draft_tasks())
