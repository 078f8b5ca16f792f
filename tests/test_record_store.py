"""The validation record as a folder, a file per task (``validate --json record``): what it keeps, what it trims,
and that a run writes only its own tasks' files, never over something that is not a record."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from weavegym.core.errors import WeaveGymError
from weavegym.envs.tasks import all_tasks
from weavegym.ops.record_store import (
    CLAUSE_DETAIL,
    FLAG_DETAIL,
    TRIMMED,
    is_clean,
    is_folder,
    migrate,
    read_reports,
    task_file,
    task_text,
    trimmed,
    write_folder,
    write_reports,
)
from weavegym.ops.suite_report import task_stats
from weavegym.ops.validation_resume import code_digest, stamp, task_module

pytestmark = pytest.mark.unit

IDS = ["Weave-Docs-1", "Weave-Web-1", "Weave-Data-1", "Weave-Data-2"]  # in the suite's order
TASK = {t.id: t for t in all_tasks() if t.id in IDS}
CLI = [sys.executable, "-c", "from weavegym.cli import main; main()"]


def _evaluation(score: float) -> dict:
    """An evaluation as the evaluators write it: clauses with their evidence, a flag with its own."""
    clause = {"name": "total_file", "description": "~/total.txt holds the total", "weight": 1.0, "critical": True,
              "cap": 0.0, "outcome": "satisfied" if score else "failed", "evidence": "holds '12.5', expected 12.5",
              "credit": score, "seconds": 0.02}
    flag = {"rule": "NoDesktopTerminalWork", "confidence": "high", "message": "2 program(s) ran on a terminal",
            "evidence": {"ended": [{"pid": 9, "comm": "bash"}]}}
    return {"score": score, "raw_score": score, "passed": score >= 1.0, "pass_threshold": 1.0, "clauses": [clause],
            "caps_applied": [] if score else ["critical clause 'total_file' failed: score capped at 0"],
            "flags": [] if score else [flag], "zeroed_by": [] if score else ["NoDesktopTerminalWork"], "seconds": 0.5}


def _report(task_id: str, seed: int = 0, *, oracle: float = 1.0, error: str | None = None) -> dict:
    def run(name: str, score: float) -> dict:
        return {"run": name, "score": score, "steps": 4, "seconds": 30.0, "end_reason": "done", "action_errors": [],
                "evaluation": _evaluation(score), "seed": seed, "reset_s": 2.0, "switches": 1}

    results = {} if error else {"oracle": run("oracle", oracle), "noop": run("noop", 0.0),
                                "cli-only": run("cli-only", 0.0), "gui-only": run("gui-only", 0.0),
                                "forger": run("forger", 0.0)}
    violations = [f"error: {error}"] if error else [] if oracle == 1.0 else [f"oracle scored {oracle:.3f}, not 1.0"]
    report = {"task_id": task_id, "pass_threshold": 1.0, "results": results, "error": error,
              "violations": violations, "repeat": 0, "wall_s": 120.0}
    # The digest of the code on disk now, not at import: a checkout being edited must not make the runs other code's.
    return stamp(report, seed, code_digest(task_module(TASK[task_id]))) | {"image": "base-debian-12-abc"}


def _bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _without_detail(report: dict) -> dict:
    """The report as a clean run's trimmed copy must still equal it: every field but the dropped detail."""
    report = copy.deepcopy(report)
    for result in report["results"].values():
        evaluation = result["evaluation"]
        evaluation["clauses"] = [{k: v for k, v in c.items() if k not in CLAUSE_DETAIL} for c in evaluation["clauses"]]
        evaluation["flags"] = [{k: v for k, v in f.items() if k not in FLAG_DETAIL} for f in evaluation["flags"]]
    return report | {TRIMMED: True}


def test_a_folder_reads_back_what_was_written_a_clean_runs_detail_aside(tmp_path: Path) -> None:
    clean = [_report(IDS[0], seed) for seed in (0, 3)]
    unclean = _report(IDS[1], 0, oracle=0.5)
    folder = tmp_path / "record"
    written = write_folder(folder, [*clean, unclean])
    assert written == [folder / f"{IDS[0]}.json", folder / f"{IDS[1]}.json"]
    back = read_reports(folder)
    assert back == [_without_detail(r) for r in clean] + [unclean]
    # Whatever TASKS.md and TASKS.svg are made from is the same, and so is what --resume and --plan read.
    assert task_stats(back) == task_stats([*clean, unclean])
    for before, after in zip([*clean, unclean], back, strict=True):
        assert {k: before[k] for k in ("seed", "code", "error", "wall_s", "image", "violations", "repeat")} == \
            {k: after[k] for k in ("seed", "code", "error", "wall_s", "image", "violations", "repeat")}
    # One compact report per line: a re-run's diff is the lines it changed.
    lines = (folder / f"{IDS[0]}.json").read_text().splitlines()
    assert lines[0] == "[" and lines[-1] == "]" and len(lines) == 4
    # Written again, nothing changes: a trimmed report trims to itself, and an unchanged file is not rewritten.
    assert write_folder(folder, back) == [] and trimmed(trimmed(clean[0])) == trimmed(clean[0])
    # A single file keeps every report whole, as --json always wrote it.
    single = tmp_path / "mine.json"
    write_reports(single, [*clean, unclean])
    assert read_reports(single) == [*clean, unclean]


def test_runs_that_are_not_clean_keep_their_whole_evaluation() -> None:
    unclean = _report(IDS[1], oracle=0.5)
    failed = _report(IDS[1], error="AgentTimeoutError: lost")
    unknown = {k: v for k, v in _report(IDS[1]).items() if k != "violations"}  # says nothing of its violations
    for report in (unclean, failed, unknown):
        assert not is_clean(report) and trimmed(report) == report and TRIMMED not in trimmed(report)
    kept = json.loads(task_text([unclean]))[0]["results"]["gui-only"]["evaluation"]
    assert kept["flags"][0]["evidence"] == {"ended": [{"pid": 9, "comm": "bash"}]}
    assert kept["clauses"][0]["evidence"] == "holds '12.5', expected 12.5"
    slim = trimmed(_report(IDS[0]))["results"]["gui-only"]["evaluation"]
    assert is_clean(_report(IDS[0])) and slim["clauses"] == [{"name": "total_file", "critical": True,
                                                               "outcome": "failed", "credit": 0.0}]
    assert slim["flags"] == [{"rule": "NoDesktopTerminalWork", "confidence": "high"}]
    assert slim["zeroed_by"] == ["NoDesktopTerminalWork"] and slim["caps_applied"]


def test_where_the_record_goes_and_what_it_refuses(tmp_path: Path) -> None:
    assert is_folder(tmp_path / "record") and not is_folder(tmp_path / "v.json")
    (tmp_path / "record-file").write_text("[]")
    assert not is_folder(tmp_path / "record-file"), "an existing file stays a file"
    for bad in ("../Weave-X", "a/b", ".hidden", ""):
        with pytest.raises(WeaveGymError, match="not a task id"):
            task_file(tmp_path, bad)
    source = tmp_path / "TASKS.json"
    source.write_text(json.dumps([_report(i, seed) for i in IDS[:2] for seed in (0, 3)], indent=1))
    assert len(migrate(source, tmp_path / "record")) == 2
    assert read_reports(tmp_path / "record") == [trimmed(_report(i, s)) for i in IDS[:2] for s in (0, 3)]
    with pytest.raises(WeaveGymError, match="not empty"):
        migrate(source, tmp_path / "record")
    (tmp_path / "record" / f"{IDS[2]}.json").write_text(task_text([_report(IDS[3])]))
    with pytest.raises(WeaveGymError, match=re.escape(f"{IDS[2]}.json holds runs of {IDS[3]}")):
        read_reports(tmp_path / "record")
    (tmp_path / "record" / f"{IDS[2]}.json").unlink()
    (tmp_path / "record" / "notes.txt").write_text("mine")
    with pytest.raises(WeaveGymError, match=re.escape("it holds notes.txt")):
        read_reports(tmp_path / "record")


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, WEAVEGYM_CACHE_DIR=str(tmp_path / "no-cache"), COLUMNS="300")  # rich: no wrapping
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=100, env=env)


@pytest.mark.timeout(120)
def test_a_resumed_run_rewrites_only_its_own_tasks_files(tmp_path: Path) -> None:
    """Every job is in the record, so nothing boots: the run's tasks keep this run's jobs (a seed it does not
    take is dropped), and the other tasks' files stay byte for byte, even one written by hand."""
    folder = tmp_path / "record"
    ours = [_report(i, seed) for i in IDS[1:3] for seed in (0, 3)]
    write_folder(folder, [*ours, _report(IDS[1], 6), _report(IDS[3], 0)])
    (folder / f"{IDS[0]}.json").write_text(json.dumps([_report(IDS[0])], indent=2))  # not as the store writes
    others = {name: data for name, data in _bytes(folder).items() if name[:-5] not in IDS[1:3]}
    stamps = {name: (folder / name).stat().st_mtime_ns for name in others}
    done = _run(["validate", ",".join(IDS[1:3]), "--json", str(folder), "--resume", "--workers", "2", "--seed", "0",
                 "--seed", "3", "--tasks-md", str(tmp_path / "TASKS.md")], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "kept 4 task run(s)" in done.stderr and "the 2 run(s) of 2 other task(s) it holds stay" in done.stderr
    after = _bytes(folder)
    assert {name: after[name] for name in others} == others, "other tasks' files are byte-identical"
    assert {name: (folder / name).stat().st_mtime_ns for name in others} == stamps, "and never rewritten"
    assert read_reports(folder / f"{IDS[1]}.json") == [trimmed(r) for r in ours[:2]], "seed 6 dropped"
    assert sorted(after) == sorted(f"{i}.json" for i in IDS), "no partial file left"
    assert "| 2/2 | 0, 3 |" in (tmp_path / "TASKS.md").read_text()
    # The table is made from the folder as from a file.
    made = _run(["tasks", IDS[1], "--tasks-md", str(tmp_path / "again.md"), "--from-json", str(folder)], tmp_path)
    assert made.returncode == 0 and "| 2/2 | 0, 3 |" in (tmp_path / "again.md").read_text()


@pytest.mark.timeout(120)
def test_plan_works_from_the_folder_and_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "record"
    saved = [_report(IDS[0], seed) | {"wall_s": 60.0} for seed in (0, 3)]
    saved += [stamp(_report(IDS[1], seed), seed, "0123456789ab") | {"wall_s": 600.0} for seed in (0, 3)]
    saved += [_report(IDS[2], 0) | {"wall_s": 120.0}, _report(IDS[2], 3, error="AgentTimeoutError: lost")]
    write_folder(folder, saved)
    before = _bytes(folder)
    done = _run(["validate", ",".join(IDS[:3]), "--json", str(folder), "--seed", "0", "--seed", "3", "--workers",
                 "2", "--resume", "--plan"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in done.stdout.splitlines() if line.startswith("│ Weave-")}
    assert rows == {IDS[1]: ["0, 3", "2", "made by other code", "10.0"],
                    IDS[2]: ["3", "1", "ended in an env error", "2.0"]}
    assert "3 task run(s) to run, 3 kept: about 11 min with 2 worker(s)" in done.stdout
    assert _bytes(folder) == before, "a plan writes nothing"
    fresh = _run(["validate", IDS[3], "--json", str(tmp_path / "none"), "--plan"], tmp_path)
    assert fresh.returncode == 0 and not (tmp_path / "none").exists(), fresh.stderr


@pytest.mark.timeout(120)
def test_a_corrupt_task_file_is_named_and_nothing_is_overwritten(tmp_path: Path) -> None:
    folder = tmp_path / "record"
    write_folder(folder, [_report(i, seed) for i in IDS for seed in (0, 3)])
    corrupt = folder / f"{IDS[2]}.json"
    corrupt.write_text(corrupt.read_text()[:-40])  # cut short, as by a full disk or a bad merge
    before = _bytes(folder)
    for args in (["validate", ",".join(IDS[1:3]), "--json", str(folder), "--resume", "--seed", "0", "--seed", "3"],
                 ["validate", IDS[0], "--json", str(folder)],  # another task's run: refused before it starts
                 ["tasks", "--tasks-md", str(tmp_path / "TASKS.md"), "--from-json", str(folder)]):
        done = _run(args, tmp_path)
        assert done.returncode == 1, (args, done.stderr[-3000:])
        assert f"cannot read the validation reports in {corrupt}" in done.stderr.replace("\n", "")
        assert _bytes(folder) == before and not (tmp_path / "TASKS.md").exists()
    missing = _run(["tasks", "--tasks-md", str(tmp_path / "TASKS.md"), "--from-json", str(tmp_path / "nope")],
                   tmp_path)
    assert missing.returncode == 2 and "no such --from-json record" in missing.stderr
