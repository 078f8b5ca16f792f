"""Weave-DevOps-4 without a VM: the seed's backups and checksums as setup makes them, and the oracle's fail on an
infeasible seed, read by the abstention rule (the cause named as a whole token; no candidates declared)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from weavegym.core.errors import TaskError
from weavegym.core.trajectory import EpisodeEnd
from weavegym.envs.episode_clauses import check_abstention_truth, episode_clauses
from weavegym.envs.task import CANDIDATES, CAUSES, FEASIBLE, OracleContext
from weavegym.envs.tasks.devops import backup_restore as br
from weavegym.evaluators.scoring import run_clause

SCREEN = (1280, 720)
INFEASIBLE_SEEDS = br.TASK.abstention.seeds(False, 4)


def _truth(seed: int) -> dict[str, Any]:
    """What setup returns but the window (placed at 0, 0), with the files' bytes as ``files``."""
    rng = np.random.default_rng(seed)
    feasible = not br.TASK.abstention.infeasible(seed)
    names, _nights, damage = br.plan_backups(rng, feasible)
    files, record, actual, contents = br.backup_files(rng, names, _nights, damage)
    layout = br.vault_layout(len(names))
    targets = {key: br._center(0, 0, layout[key]) for key in ("none", "note", "record")}
    targets["rows"] = [br._center(0, 0, box) for box in layout["rows"]]
    return {"backups": names, "record": record, "targets": targets, "files": files, "actual": actual,
            "contents": contents, "intact": next((n for i, n in enumerate(names) if i not in damage), ""),
            "damage": {names[i]: kind for i, kind in damage.items()},
            FEASIBLE: feasible, CAUSES: [] if feasible else list(names)}


def _oracle_ending(truth: dict[str, Any]) -> dict[str, Any]:
    """The oracle's last action, its shell's sha256sum output made from the files' real bytes."""
    seen = {k: v for k, v in br.TASK.oracle_truth(truth).items() if k != "files"}  # setup returns no bytes
    assert set(seen) == {"backups", "record", "targets"}
    ctx = OracleContext({}, seen, SCREEN)
    terminal = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in truth["files"].items())
    last: dict[str, Any] = {}
    for action in br.TASK.oracle(ctx):
        assert isinstance(action, dict)
        ctx.obs = {"terminal": terminal if action["kind"] == "shell" else ""}
        last = action
    return last


class _Probe:
    def __init__(self, episode: EpisodeEnd) -> None:
        self.episode = episode


def _named_the_cause(truth: dict[str, Any], reason: str) -> str:
    clauses, _deliverables = episode_clauses(br.TASK, truth)
    clause = next(c for c in clauses if c.name == "named_the_cause")
    return run_clause(clause, _Probe(EpisodeEnd("fail", reason=reason)), truth).outcome.value


def test_the_host_side_truth_is_what_setup_makes_every_backup_damaged_on_an_infeasible_seed() -> None:
    assert INFEASIBLE_SEEDS == [2, 5, 8, 11]
    for seed in INFEASIBLE_SEEDS:
        truth = _truth(seed)
        assert truth["intact"] == "" and set(truth["damage"]) == set(truth["backups"]) == set(truth[CAUSES])
        assert all(truth["actual"][n][:br.SHOWN] != truth["record"][n] for n in truth["backups"])
        check_abstention_truth(br.TASK, truth, feasible=False)
    feasible = _truth(0)
    assert feasible["intact"] and feasible["actual"][feasible["intact"]][:br.SHOWN] == feasible["record"][
        feasible["intact"]]


@pytest.mark.parametrize("seed", INFEASIBLE_SEEDS)
def test_the_oracles_fail_names_the_damaged_backups_as_whole_tokens(seed: int) -> None:
    truth = _truth(seed)
    ending = _oracle_ending(truth)
    assert ending["kind"] == "fail" and all(name in ending["reason"] for name in truth["backups"])
    assert _named_the_cause(truth, ending["reason"]) == "satisfied", ending["reason"]
    assert _oracle_ending(_truth(seed - 2))["kind"] == "done"  # the seed before it is feasible


@pytest.mark.parametrize("seed", INFEASIBLE_SEEDS[:2])
def test_a_reason_that_hides_the_names_in_one_token_names_no_backup(seed: int) -> None:
    truth = _truth(seed)
    names = truth["backups"]
    for joined in ("_".join(names), "-".join(names), "".join(names), "\u200b".join(names)):
        assert _named_the_cause(truth, f"no intact backup: {joined}") == "failed", joined
    assert _named_the_cause(truth, f"no intact backup: {names[0]}.bak fails its checksum") == "failed"
    assert _named_the_cause(truth, "no intact backup: every inventory backup fails its checksum") == "failed"
    assert _named_the_cause(truth, f"no intact backup: `{names[0]}` fails its checksum.") == "satisfied"
    assert _named_the_cause(truth, f"no intact backup: {br.BACKUPS}/{names[-1]}!") == "satisfied"


def test_devops_4_declares_no_candidates_because_every_backup_is_a_cause() -> None:
    """Issue 43 asked for the backups as candidates, so that a shotgun reason would fail: on an infeasible seed
    every backup is damaged, so the reason that lists them all is the right one, and the suite refuses
    candidates that a right reason may name in full."""
    assert not br.TASK.abstention.candidates
    truth = _truth(INFEASIBLE_SEEDS[0])
    with_candidates = replace(br.TASK, abstention=replace(br.TASK.abstention, candidates=True))
    with pytest.raises(TaskError, match="must list more than"):
        check_abstention_truth(with_candidates, {**truth, CANDIDATES: truth["backups"]}, feasible=False)
