"""`weavegym validate --resume`: a suite run cut short goes on where it stopped, never mixing in other code's runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import weavegym
from weavegym.core.errors import WeaveGymError
from weavegym.envs.tasks import all_tasks
from weavegym.ops.record_store import read_reports
from weavegym.ops.validation_resume import (
    CHANGED_DURING_RUN,
    carry_over,
    code_digest,
    in_job_order,
    in_suite_order,
    of_other_tasks,
    stamp,
    stamp_unless_changed,
    task_files,
    task_module,
)

pytestmark = pytest.mark.unit

TASK = {t.id: t for t in all_tasks()}
CODES = {task_id: code_digest(task_module(task)) for task_id, task in TASK.items()}


def _report(task_id: str, repeat: int = 0, *, error: str | None = None) -> dict:
    def run(score: float, steps: int) -> dict:
        return {"run": "x", "score": score, "steps": steps, "seconds": 10.0, "end_reason": "done", "reset_s": 2.0,
                "action_errors": [], "evaluation": {"zeroed_by": [], "clauses": []}, "switches": 3}

    results = {} if error else {"oracle": run(1.0, 9), "noop": run(0.0, 1), "cli-only": run(0.0, 4),
                                "gui-only": run(0.0, 5), "forger": run(0.0, 3)}
    return {"task_id": task_id, "pass_threshold": 1.0, "results": results, "error": error, "repeat": repeat,
            "violations": [f"error: {error}"] if error else []}


def _package(tmp_path: Path) -> Path:
    """A copy of the package's source (no caches) to change files in."""
    root = tmp_path / "weavegym"
    shutil.copytree(Path(weavegym.__file__).parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _touch(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"\n# changed\n")


def test_a_tasks_digest_follows_its_own_code_and_everything_outside_the_suite(tmp_path: Path) -> None:
    web5, web1, data1 = (task_module(TASK[i]) for i in ("Weave-Web-5", "Weave-Web-1", "Weave-Data-1"))
    assert web5 == "weavegym.envs.tasks.web.shop_localise"
    with pytest.raises(WeaveGymError, match="defines"):
        task_module(object())
    assert code_digest(web5) == CODES["Weave-Web-5"] and len(CODES["Weave-Web-5"]) == 12
    assert len(set(CODES.values())) > len(CODES) // 2, "tasks in different modules have different digests"
    root = _package(tmp_path)
    before = {m: code_digest(m, root) for m in (web5, web1, data1)}
    assert before == {m: code_digest(m) for m in (web5, web1, data1)}, "a checkout's digest is the same code's"
    # The task's own module: only it (and whatever imports it) changes.
    _touch(root / "envs/tasks/web/shop_localise.py")
    after = {m: code_digest(m, root) for m in before}
    assert after[web5] != before[web5] and after[data1] == before[data1]
    # A module it imports from another domain's package (the SQLite writer), and a fixture of its own package.
    _touch(root / "envs/tasks/data/sqlite_bytes.py")
    assert code_digest(web5, root) != after[web5] and code_digest(web1, root) == after[web1]
    fixture = next(p for p in (root / "envs/tasks/web/fixtures").rglob("*") if p.is_file())
    again = code_digest(web5, root)
    _touch(fixture)
    assert code_digest(web5, root) != again
    # Outside the suite: the env changes every task, the command line and the reports none.
    settled = {m: code_digest(m, root) for m in before}
    for neutral in ("cli.py", "ops/suite_report.py", "ops/validation_resume.py", "ops/record_store.py",
                    "reporting/report.py"):
        _touch(root / neutral)
    (root / "envs" / "__pycache__").mkdir(exist_ok=True)
    (root / "envs" / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    assert {m: code_digest(m, root) for m in before} == settled
    _touch(root / "ops/validation.py")
    moved = {m: code_digest(m, root) for m in before}
    assert all(moved[m] != settled[m] for m in before)
    _touch(root / "envs/weave_env.py")
    assert all(code_digest(m, root) != moved[m] for m in before)


def test_a_report_whose_task_changed_while_it_ran_is_not_kept(tmp_path: Path) -> None:
    root = _package(tmp_path)
    module = task_module(TASK["Weave-Web-5"])
    code = code_digest(module, root)
    kept, changed = stamp_unless_changed(_report("Weave-Web-5"), 3, module, code, root)
    assert (kept["seed"], kept["code"], changed) == (3, code, False)
    _touch(root / "envs/tasks/web/_shop.py")  # edited in the checkout while the job ran
    stale, changed = stamp_unless_changed(_report("Weave-Web-5"), 3, module, code, root)
    assert changed and stale["code"] == CHANGED_DURING_RUN
    path = tmp_path / "v.json"
    path.write_text(json.dumps([stale]))
    assert carry_over(read_reports(path), [(3, 0, "Weave-Web-5")], {"Weave-Web-5": code}).other_code == 1


def test_a_task_depends_on_its_imports_fixtures_and_the_shared_modules() -> None:
    files = {p.relative_to(Path(weavegym.__file__).parent).as_posix()
             for p in task_files(task_module(TASK["Weave-Web-5"]))}
    assert {"envs/tasks/web/shop_localise.py", "envs/tasks/web/_shop.py", "envs/tasks/web/_portal.py",
            "envs/tasks/web/__init__.py", "envs/tasks/__init__.py", "envs/tasks/pixel_font.py",
            "envs/tasks/data/sqlite_bytes.py", "envs/tasks/data/__init__.py"} <= files
    assert "envs/tasks/web/fixtures/shopcms/shop-cms.js" in files
    assert "envs/tasks/data/budget_books.py" not in files and not any(f.startswith("envs/tasks/games/") for f in files)


def test_carry_over_keeps_only_finished_runs_of_this_code_and_job_list(tmp_path: Path) -> None:
    jobs = [(0, 0, "Weave-Data-1"), (0, 0, "Weave-Web-1"), (0, 0, "Weave-Docs-1"), (3, 0, "Weave-Data-1")]
    saved = [stamp(_report("Weave-Data-1"), 0, CODES["Weave-Data-1"]),
             stamp(_report("Weave-Web-1"), 0, "0123456789ab"),  # other code
             stamp(_report("Weave-Docs-1", error="worker failed: BrokenProcessPool"), 0, CODES["Weave-Docs-1"]),
             stamp(_report("Weave-Data-1"), 3, CODES["Weave-Data-1"]),  # the second seed: kept too
             stamp(_report("Weave-Data-1"), 6, CODES["Weave-Data-1"]),  # a seed this run does not take
             stamp(_report("Weave-Games-1"), 0, CODES["Weave-Games-1"]),  # not in this run
             _report("Weave-Design-1")]  # made before reports were stamped (and not in this run)
    path = tmp_path / "v.json"
    path.write_text(json.dumps(saved))
    carried = carry_over(read_reports(path), jobs, CODES)
    assert list(carried.kept) == [(0, 0, "Weave-Data-1"), (3, 0, "Weave-Data-1")]
    # Seed 6 of a task of this run's is dropped; the other tasks' runs are not this run's to keep or drop.
    assert (carried.other_code, carried.failed, carried.unknown) == (1, 1, 1)
    others = of_other_tasks(read_reports(path), {task_id for _seed, _k, task_id in jobs})
    assert [r["task_id"] for r in others] == ["Weave-Games-1", "Weave-Design-1"]
    # The run that ended in an env error runs again, and its new report will say what it replaced.
    assert carried.errors == {(0, 0, "Weave-Docs-1"): ["worker failed: BrokenProcessPool"]}
    assert "kept 2 task run(s)" in carried.summary(path) and "1 made by other code" in carried.summary(path)
    assert read_reports(tmp_path / "absent.json") == []
    path.write_text('{"not": "a list"}')
    with pytest.raises(WeaveGymError, match="not a list of validation reports"):
        read_reports(path)
    path.write_text("[{")
    with pytest.raises(WeaveGymError, match="cannot read the validation reports"):
        read_reports(path)


def test_reports_go_task_by_task_in_the_suites_order_unknown_tasks_last() -> None:
    reports = [{"task_id": t, "n": n} for n, t in enumerate(["C", "Gone", "A", "C", "B", "A"])]
    assert [(r["task_id"], r["n"]) for r in in_suite_order(reports, ["A", "B", "C"])] == \
        [("A", 2), ("A", 5), ("B", 4), ("C", 0), ("C", 3), ("Gone", 1)]


def test_reports_come_out_in_job_order_whenever_they_finished() -> None:
    jobs = [(0, 0, "A"), (3, 0, "A"), (0, 0, "B"), (3, 0, "B")]
    reports = {(3, 0, "B"): {"n": 4}, (0, 0, "A"): {"n": 1}, (0, 0, "B"): {"n": 3}}
    assert [r["n"] for r in in_job_order(jobs, reports)] == [1, 3, 4]


@pytest.mark.timeout(120)
def test_a_resumed_run_with_nothing_left_boots_nothing_and_writes_the_table(tmp_path: Path) -> None:
    """Every job is in the file, so no VM is needed (this tier has none): the table comes from the kept runs,
    and the file keeps this run's jobs of its tasks, task by task and on each seed, and the other tasks' runs
    as they were, in the suite's order (a single file, as users keep their own runs; the suite's record is a
    folder: test_record_store)."""
    ids = ["Weave-Web-1", "Weave-Data-1"]  # in suite order, as the file and the table list them
    path, table = tmp_path / "v.json", tmp_path / "TASKS.md"
    saved = [stamp(_report(i), seed, CODES[i]) for i in ids for seed in (0, 3)]
    other = stamp(_report("Weave-Docs-1"), 0, CODES["Weave-Docs-1"])
    dropped = stamp(_report("Weave-Web-1"), 6, CODES["Weave-Web-1"])  # a seed this run does not take
    path.write_text(json.dumps([*reversed(saved), other, dropped]))
    cmd = [sys.executable, "-c", "from weavegym.cli import main; main()", "validate", ",".join(ids), "--json",
           str(path), "--resume", "--workers", "2", "--seed", "0", "--seed", "3", "--tasks-md", str(table)]
    env = dict(os.environ, WEAVEGYM_CACHE_DIR=str(tmp_path / "no-cache"), COLUMNS="300")  # rich: no wrapping
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=100, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "kept 4 task run(s)" in done.stderr and "1 of these tasks on other seeds or repeats" in done.stderr
    assert "the 1 run(s) of 1 other task(s) it holds stay as they are" in done.stderr
    main_table = table.read_text().partition("## Adversaries")[0]
    rows = [line for line in main_table.splitlines() if line.startswith("| Weave-")]
    assert [row.split(" | ")[0][2:] for row in rows] == ids
    assert all("| 2/2 | 0, 3 |" in row for row in rows)
    assert "--seed 0 --seed 3 --repeat 1" in main_table
    assert json.loads(path.read_text()) == [other, *saved]  # Docs before Web and Data, as the suite lists them
    refused = subprocess.run([*cmd[:5], "--resume"], capture_output=True, text=True, timeout=100, env=env)
    assert refused.returncode == 2 and "--resume needs --json" in refused.stderr
    negative = subprocess.run([*cmd[:5], "--seed", "-1"], capture_output=True, text=True, timeout=100, env=env)
    assert negative.returncode == 2 and "greater than or equal to 0" in negative.stderr  # before any VM boots


@pytest.mark.timeout(120)
def test_a_run_that_ended_in_an_env_error_runs_again_and_keeps_the_error(tmp_path: Path) -> None:
    """No image in the cache: every task run ends in an env error (this tier has no VM), the kind a lost VM gives.

    It runs again once by default, and the report says what it replaced; the exit says the violations are env
    errors. With --retry-errors 0 it runs once."""
    ids = ["Weave-Web-1", "Weave-Data-1"]
    path = tmp_path / "v.json"
    cmd = [sys.executable, "-c", "from weavegym.cli import main; main()", "validate", ",".join(ids), "--json",
           str(path), "--workers", "2"]
    env = dict(os.environ, WEAVEGYM_CACHE_DIR=str(tmp_path / "no-cache"), COLUMNS="300")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=100, env=env)
    assert done.returncode == 1
    assert "2 task run(s) ended in an env error; running them again (1 of 1)" in done.stderr
    assert "2 of them ended in an env error, not with scores" in done.stderr
    # A line per finished task run, for logs where no bar is drawn (and the file is replaced whole, never torn).
    # (two workers: either task may finish first)
    assert re.search(r"\d\d:\d\d:\d\d \[[12]/2\] Weave-Web-1 seed 0 #1: env error: HostSetupError: no 'full' image",
                     done.stderr), done.stderr
    assert not (tmp_path / ".v.json.partial").exists()
    reports = json.loads(path.read_text())
    assert [r["task_id"] for r in reports] == ids
    for report in reports:
        assert "no 'base' image" in report["error"] or "no 'full' image" in report["error"]
        assert report["earlier_errors"] == [report["error"]]
        assert 0 <= report["wall_s"] < 100  # the job's wall time, VM start or restore included
        # It names the image its task's VMs would have come from (the one it did not find).
        assert report["image"].split("-debian-12-")[0] == TASK[report["task_id"]].profile
        assert f"no '{TASK[report['task_id']].profile}' image" in report["error"]
    # Resumed, they run again (each once more, with no retry); each report lists every error it replaced.
    resumed = subprocess.run([*cmd, "--resume", "--retry-errors", "0"], capture_output=True, text=True, timeout=100,
                             env=env)
    assert resumed.returncode == 1 and "running them again" not in resumed.stderr
    assert "2 that ended in an env error will run again" in resumed.stderr
    assert all(len(r["earlier_errors"]) == 2 for r in json.loads(path.read_text()))
    path.unlink()
    once = subprocess.run([*cmd[:-2], "--retry-errors", "0"], capture_output=True, text=True, timeout=100, env=env)
    assert once.returncode == 1 and "running them again" not in once.stderr
    serial = json.loads(path.read_text())  # one worker: the jobs ran in this process
    assert all("earlier_errors" not in r and r["wall_s"] >= 0 for r in serial)


def test_plan_lists_what_would_run_and_why_and_boots_nothing(tmp_path: Path) -> None:
    """`validate --plan`: what a change costs the record before it is spent. One task's runs are this code's, one
    ran by other code, one ended in an env error, one has a seed the file lacks; the estimate comes from the
    file's earlier runs of each task."""
    ids = ["Weave-Docs-1", "Weave-Web-1", "Weave-Data-1", "Weave-Data-2"]
    path = tmp_path / "v.json"

    def timed(report: dict, seconds: float) -> dict:
        return report | {"wall_s": seconds}

    saved = [timed(stamp(_report(ids[0]), seed, CODES[ids[0]]), 60) for seed in (0, 3)]
    saved += [timed(stamp(_report(ids[1]), seed, "0123456789ab"), 600) for seed in (0, 3)]
    saved += [timed(stamp(_report(ids[2]), 0, CODES[ids[2]]), 120),
              timed(stamp(_report(ids[2], error="AgentTimeoutError: lost"), 3, CODES[ids[2]]), 5)]
    saved += [timed(stamp(_report(ids[3]), 0, CODES[ids[3]]), 240)]
    path.write_text(json.dumps(saved))
    before = path.read_bytes()
    cmd = [sys.executable, "-c", "from weavegym.cli import main; main()", "validate", ",".join(ids), "--json",
           str(path), "--seed", "0", "--seed", "3", "--workers", "2", "--plan"]
    env = dict(os.environ, WEAVEGYM_CACHE_DIR=str(tmp_path / "no-cache"), COLUMNS="300")
    done = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=100, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in done.stdout.splitlines() if line.startswith("│ Weave-")}
    assert rows == {ids[1]: ["0, 3", "2", "made by other code", "10.0"],
                    ids[2]: ["3", "1", "ended in an env error", "2.0"],
                    ids[3]: ["3", "1", "no earlier run", "4.0"]}
    # 2 x 10 + 2 (the finished seed's time) + 4 minutes of runs, on two workers.
    assert "4 task run(s) to run, 4 kept: about 13 min with 2 worker(s)" in done.stdout
    assert path.read_bytes() == before and not list(tmp_path.glob(".v.json*")), "a plan writes nothing"
    fresh = subprocess.run(cmd, capture_output=True, text=True, timeout=100, env=env)
    assert fresh.returncode == 0 and "8 task run(s) to run, 0 kept" in fresh.stdout
    assert fresh.stdout.count("--resume not given") == 4, fresh.stdout
    # A new seed: every task runs, each timed by its runs on the other seeds (1 + 10 + 2 + 4 minutes, one worker).
    other_seed = subprocess.run([*cmd[:7], "--seed", "6", "--resume", "--plan"], capture_output=True, text=True,
                                timeout=100, env=env)
    assert other_seed.returncode == 0 and other_seed.stdout.count("no earlier run") == 4, other_seed.stdout
    assert "4 task run(s) to run, 0 kept: about 17 min with 1 worker(s)" in other_seed.stdout
    no_file = subprocess.run([*cmd[:5], "--plan"], capture_output=True, text=True, timeout=100, env=env)
    assert no_file.returncode == 0, no_file.stderr
    assert "4 task run(s) to run, 0 kept: no earlier run of these tasks to time them by" in no_file.stdout
