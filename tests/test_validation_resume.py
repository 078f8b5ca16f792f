"""`weavegym validate --resume`: a suite run cut short goes on where it stopped, never mixing in other code's runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import weavegym
from weavegym.core.errors import WeaveGymError
from weavegym.ops.validation_resume import carry_over, code_digest, in_job_order, stamp

pytestmark = pytest.mark.unit

CODE = code_digest()


def _report(task_id: str, repeat: int = 0, *, error: str | None = None) -> dict:
    def run(score: float, steps: int) -> dict:
        return {"run": "x", "score": score, "steps": steps, "seconds": 10.0, "end_reason": "done", "reset_s": 2.0,
                "action_errors": [], "evaluation": {"zeroed_by": [], "clauses": []}, "switches": 3}

    results = {} if error else {"oracle": run(1.0, 9), "noop": run(0.0, 1), "cli-only": run(0.0, 4),
                                "gui-only": run(0.0, 5), "forger": run(0.0, 3)}
    return {"task_id": task_id, "pass_threshold": 1.0, "results": results, "error": error, "repeat": repeat,
            "violations": [f"error: {error}"] if error else []}


def test_the_digest_follows_the_source_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    first = code_digest(tmp_path / "pkg")
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"compiled")
    assert code_digest(tmp_path / "pkg") == first
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    assert code_digest(tmp_path / "pkg") != first
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "b.py").write_text("")  # a new empty file is a change too
    assert code_digest(tmp_path / "pkg") != first
    assert code_digest() == code_digest(Path(weavegym.__file__).parent) and len(CODE) == 12


def test_carry_over_keeps_only_finished_runs_of_this_code_seed_and_job_list(tmp_path: Path) -> None:
    jobs = [(0, "Weave-Data-1"), (0, "Weave-Web-1"), (0, "Weave-Docs-1"), (1, "Weave-Data-1")]
    saved = [stamp(_report("Weave-Data-1"), 0, CODE),
             stamp(_report("Weave-Web-1"), 0, "0123456789ab"),  # other code
             stamp(_report("Weave-Docs-1", error="worker failed: BrokenProcessPool"), 0, CODE),
             stamp(_report("Weave-Data-1", 1), 3, CODE),  # another seed
             stamp(_report("Weave-Games-1"), 0, CODE),  # not in this run
             _report("Weave-Design-1")]  # made before reports were stamped (and not in this run)
    path = tmp_path / "v.json"
    path.write_text(json.dumps(saved))
    carried = carry_over(path, jobs, seed=0, code=CODE)
    assert list(carried.kept) == [(0, "Weave-Data-1")]
    assert (carried.other_code, carried.failed, carried.unknown) == (2, 1, 2)
    assert "kept 1 task run(s)" in carried.summary(path) and "2 made by other code" in carried.summary(path)
    assert carry_over(tmp_path / "absent.json", jobs, seed=0, code=CODE).kept == {}
    path.write_text('{"not": "a list"}')
    with pytest.raises(WeaveGymError, match="not a list of validation reports"):
        carry_over(path, jobs, seed=0, code=CODE)
    path.write_text("[{")
    with pytest.raises(WeaveGymError, match="cannot resume"):
        carry_over(path, jobs, seed=0, code=CODE)


def test_reports_come_out_in_job_order_whenever_they_finished() -> None:
    jobs = [(0, "A"), (0, "B"), (1, "A"), (1, "B")]
    reports = {(1, "B"): {"n": 4}, (0, "A"): {"n": 1}, (1, "A"): {"n": 3}}
    assert [r["n"] for r in in_job_order(jobs, reports)] == [1, 3, 4]


@pytest.mark.timeout(120)
def test_a_resumed_run_with_nothing_left_boots_nothing_and_writes_the_table(tmp_path: Path) -> None:
    """Every job is in the file, so no VM is needed (this tier has none): the table comes from the kept runs,
    and the file keeps this run's jobs only."""
    ids = ["Weave-Web-1", "Weave-Data-1"]  # in suite order, as the file and the table list them
    path, table = tmp_path / "v.json", tmp_path / "TASKS.md"
    saved = [stamp(_report(i), 0, CODE) for i in ids]
    path.write_text(json.dumps([*saved, stamp(_report("Weave-Docs-1"), 0, "0123456789ab")]))
    cmd = [sys.executable, "-c", "from weavegym.cli import main; main()", "validate", ",".join(ids), "--json",
           str(path), "--resume", "--workers", "2", "--tasks-md", str(table)]
    env = dict(os.environ, WEAVEGYM_CACHE_DIR=str(tmp_path / "no-cache"), COLUMNS="300")  # rich: no wrapping
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=100, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "kept 2 task run(s)" in done.stderr and "1 outside this run's tasks" in done.stderr
    main_table = table.read_text().partition("## Adversaries")[0]
    rows = [line for line in main_table.splitlines() if line.startswith("| Weave-")]
    assert [row.split(" | ")[0][2:] for row in rows] == ids
    assert all("| 1/1 |" in row for row in rows)
    assert json.loads(path.read_text()) == saved
    refused = subprocess.run([*cmd[:5], "--resume"], capture_output=True, text=True, timeout=100, env=env)
    assert refused.returncode == 2 and "--resume needs --json" in refused.stderr
