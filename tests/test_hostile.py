"""An agent that attacks the env instead of doing the task, on a real VM (base image).

Each test plays one hostile episode through the public API and asserts what must happen instead of a
score the agent did not earn: a checker that cannot be made to read root-only bytes, hang, or flood the
host; a guest that survives a fork bomb; an environment failure during scoring that says so instead of
scoring 0. (VMs that die with their owner, a suspended VM, a server grab and the wait/xrandr cases are in
test_libvirt_vm.py, test_agent_grpc.py and test_env_episode.py.)
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from weavegym.core.errors import EvaluationError
from weavegym.core.guest_layout import HOME
from weavegym.envs.setup_context import SetupContext
from weavegym.envs.task import Channels, OracleContext, Prepared, Task
from weavegym.envs.weave_env import WeaveEnv
from weavegym.evaluators import Clause, Probe, Verdict

pytestmark = [pytest.mark.vm, pytest.mark.timeout(900)]

ANSWER = f"{HOME}/answer.txt"
DB = f"{HOME}/stock.db"
TOKEN_SOURCE = "/sys/firmware/dmi/entries/11-0/raw"  # the agent token's SMBIOS entry, root-only
KILL_QEMU_DURING_EVALUATION: dict = {"armed": False, "vm": ""}  # set by the last test


def _setup(ctx: SetupContext) -> Prepared:
    ctx.run(["python3", "-c", "import sqlite3; c = sqlite3.connect('/tmp/stock.db'); "
             "c.execute('CREATE TABLE stock (sku TEXT, qty INTEGER)'); "
             "c.execute(\"INSERT INTO stock VALUES ('A-1', 5)\"); c.commit()"])
    ctx.run(["install", "-o", "workspace", "-g", "weave", "-m", "0664", "/tmp/stock.db", DB])
    return Prepared(params={}, truth={"answer": "forty-two", "qty": 7})


def _answer(probe: Probe, truth: dict) -> Verdict:
    text = probe.read_text(ANSWER)
    return Verdict.check(text is not None and text.strip() == truth["answer"], f"answer.txt: {str(text)[:80]!r}")


def _stock(probe: Probe, truth: dict) -> Verdict:
    if KILL_QEMU_DURING_EVALUATION["armed"]:
        KILL_QEMU_DURING_EVALUATION["armed"] = False
        pid = int(Path(f"/run/libvirt/qemu/{KILL_QEMU_DURING_EVALUATION['vm']}.pid").read_text())
        os.kill(pid, signal.SIGKILL)
    rows = probe.sqlite(DB, "SELECT sku, qty FROM stock")
    return Verdict.check(rows == [("A-1", truth["qty"])], f"stock rows {rows!r}")


def _oracle(ctx: OracleContext) -> Iterator[str]:
    yield f'shell("echo forty-two > {ANSWER}; sqlite3 {DB} \\"UPDATE stock SET qty = 7\\"")'
    yield "done()"


TASK = Task(
    id="Weave-DevOps-98", title="Hostile-episode target (test task)",
    instruction="Write forty-two to ~/answer.txt and set A-1's qty to 7 in ~/stock.db.",
    channels=Channels(gui="nothing", cli="two writes", why_both="a test task for attacks on the checker"),
    setup=_setup, clauses=(Clause("answer", "the answer file", _answer), Clause("stock", "the stock row", _stock)),
    oracle=_oracle, max_steps=10, time_budget_s=600.0,
)


@pytest.fixture(scope="module")
def env() -> Iterator[WeaveEnv]:
    env = WeaveEnv(TASK)
    yield env
    env.close()


def _episode(env: WeaveEnv, *commands: str, timeout: float = 60.0) -> tuple[float, dict]:
    env.reset(seed=0)
    for command in commands:
        _, _, _, _, info = env.step({"kind": "shell", "command": command, "timeout": timeout})
    start = time.monotonic()
    _, reward, terminated, _, info = env.step("done()")
    assert terminated
    info["evaluate_wall_s"] = time.monotonic() - start
    return float(reward), info


def _clause(info: dict, name: str) -> dict:
    return next(c for c in info["evaluation"]["clauses"] if c["name"] == name)


def test_the_oracle_passes(env: WeaveEnv) -> None:
    reward, info = _episode(env, f"echo forty-two > {ANSWER}; sqlite3 {DB} 'UPDATE stock SET qty = 7'")
    assert reward == 1.0, info["evaluation"]


def test_a_symlink_to_a_root_only_file_does_not_leak_it(env: WeaveEnv) -> None:
    reward, info = _episode(env, f"ln -sf {TOKEN_SOURCE} {ANSWER} && ls -l {ANSWER}")
    answer = _clause(info, "answer")
    assert reward < 1.0 and answer["outcome"] == "failed" and "symlink" in answer["evidence"]
    assert "weavegym-token" not in repr(info)


def test_a_deliverable_that_keeps_growing_is_refused_quickly(env: WeaveEnv) -> None:
    # Just under the checker's 64 MiB cap when the episode ends, and still growing while it is read.
    grow = (f"head -c 60000000 /dev/zero > {ANSWER}; (while true; do head -c 1000000 /dev/zero >> {ANSWER}; "
            f"sleep 0.05; done) > /dev/null 2>&1 & sleep 1; ls -l {ANSWER}")
    reward, info = _episode(env, grow)
    assert reward < 1.0
    answer = _clause(info, "answer")
    assert answer["outcome"] == "failed" and "max_bytes" in answer["evidence"], answer
    assert info["evaluate_wall_s"] < 120


def test_a_fifo_in_place_of_the_deliverable_does_not_hang_the_checker(env: WeaveEnv) -> None:
    reward, info = _episode(env, f"rm -f {ANSWER}; mkfifo {ANSWER}")
    answer = _clause(info, "answer")
    assert reward < 1.0 and answer["outcome"] == "failed" and info["evaluate_wall_s"] < 60, answer


def test_a_recursive_view_in_place_of_the_table_fails_the_clause_fast(env: WeaveEnv) -> None:
    view = (f"sqlite3 {DB} 'ALTER TABLE stock RENAME TO old; CREATE VIEW stock AS WITH RECURSIVE "
            "r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT 'A-1' AS sku, n AS qty FROM r'")
    reward, info = _episode(env, f"echo forty-two > {ANSWER}", view)
    stock = _clause(info, "stock")
    assert stock["outcome"] == "failed" and "is a view" in stock["evidence"] and reward < 1.0
    assert info["evaluate_wall_s"] < 60


def test_a_fork_bomb_does_not_take_the_guest_or_the_score(env: WeaveEnv) -> None:
    bomb = "python3 -c 'import os\nwhile True:\n    os.fork()' ; echo after"
    reward, info = _episode(env, bomb, f"echo forty-two > {ANSWER}; sqlite3 {DB} 'UPDATE stock SET qty = 7'",
                            timeout=20)
    assert reward == 1.0, info["evaluation"]  # the checker (root) and the shell's later work still ran


def test_qemu_killed_during_evaluation_is_an_environment_error_not_a_zero(env: WeaveEnv) -> None:
    env.reset(seed=0)
    env.step({"kind": "shell", "command": f"echo forty-two > {ANSWER}"})
    KILL_QEMU_DURING_EVALUATION.update(armed=True, vm=env.backend.name)
    with pytest.raises(EvaluationError, match="stock"):
        env.step("done()")
    obs, _ = env.reset(seed=0)  # the next reset recovers the VM
    assert obs["screen"].shape == (720, 1280, 3)
