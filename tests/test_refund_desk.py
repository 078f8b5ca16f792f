"""Weave-Web-4 (the refund desk) without a VM: seeds and the policy, the oracle's decision program and batch run by
the real python3 on the seed's database, the receipts read back off a screen-sized picture, the clauses on fake
final states (unit), and the Card Terminal on a real Xvfb, typed into and read through the real agent (xvfb).
(The portal page itself runs in Firefox, which the test hosts lack: validation runs it.)"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from weavegym.core.deadline import wait_for
from weavegym.envs.setup_context import DESKTOP_USER, WORKSPACE_USER
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.web import _refund_desk as rd
from weavegym.envs.tasks.web import refund_desk as task
from weavegym.envs.tasks.web._portal import RECORDS
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

ORIGIN = "http://127.0.0.1:8123"


def _plan(seed: int) -> dict[str, Any]:
    return rd.plan(np.random.default_rng(seed))


def _truth(seed: int) -> dict[str, Any]:
    requests = [{k: r[k] for k in ("request", "decision", "amount", "reason") if k in r}
                for r in _plan(seed)["requests"]]
    return {"count": len(requests), "origin": ORIGIN, "requests": requests}


# ---- seeds and the policy ----------------------------------------------------------------------------------

def test_seeds_vary_the_day_and_its_decisions() -> None:
    plans = [_plan(seed) for seed in range(9)]
    assert len({json.dumps(p["requests"], sort_keys=True) for p in plans}) == 9
    assert len({tuple(r["decision"] for r in p["requests"]) for p in plans}) > 2
    assert len({tuple(sorted(r.get("reason", "") for r in p["requests"])) for p in plans}) >= 3
    assert _plan(4) == _plan(4)


@pytest.mark.parametrize("seed", range(12))
def test_approvals_a_partial_one_and_denials_for_different_reasons(seed: int) -> None:
    p = _plan(seed)
    orders = {o["order_no"]: o for o in p["orders"]}
    approvals = [r for r in p["requests"] if r["decision"] == rd.APPROVE]
    denials = [r for r in p["requests"] if r["decision"] == rd.DENY]
    assert len(approvals) in (2, 3) and len({r["reason"] for r in denials}) == len(denials) == 5 - len(approvals)
    # an approval is less than its returned items' prices: read without the database, the amount is wrong
    naive = [sum(i["price"] for i in orders[r["receipt"]]["items"] if i["sku"] in r["skus"]) for r in approvals]
    assert sum(rd.cents(r["amount"]) != n for r, n in zip(approvals, naive, strict=True)) >= 1
    for r in p["requests"]:
        assert len(rd.receipt_lines(r)) <= rd.RECEIPT_LINES
        assert all(len(line) <= rd.RECEIPT_CHARS and not pixel_font.unsupported(line) for line in rd.receipt_lines(r))


def _home(seed: int, tmp_path: Path) -> Path:
    home = tmp_path / f"home-{seed}"
    (home / "outbox").mkdir(parents=True)
    (home / "orders.db").write_bytes(database_bytes(rd.SCHEMA, rd.database_rows(_plan(seed))))
    return home


def _run(home: Path, code: str) -> str:
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "LC_ALL": "C"}
    return subprocess.run([sys.executable, "-"], input=code, check=True, capture_output=True, text=True,
                          env=env).stdout


@pytest.mark.parametrize("seed", range(12))
def test_the_decision_program_applies_the_policy_to_the_receipt_as_read(seed: int, tmp_path: Path) -> None:
    p, home = _plan(seed), _home(seed, tmp_path)
    for r in p["requests"]:
        receipt = rd.parse_receipt(rd.receipt_lines(r))
        assert receipt is not None
        verdict = rd.parse_decision(_run(home, rd.decide_program(receipt, p["today"])), r["request"])
        assert verdict == (r["decision"], r.get("amount") or r.get("reason")), r


def test_receipts_read_back_exactly_off_a_screen_sized_picture() -> None:
    for r in _plan(2)["requests"]:
        screen = np.full((720, 1280, 3), 244, dtype=np.uint8)
        picture = np.asarray(Image.open(io.BytesIO(rd.receipt_png(r))).convert("RGB"))
        screen[205:205 + picture.shape[0], 24:24 + picture.shape[1]] = picture
        assert rd.read_receipt(screen) == rd.receipt_lines(r)
        assert rd.find_frame(screen, rd.RECEIPT_FRAME) == (24, 205)
    assert rd.read_receipt(np.full((720, 1280, 3), 244, dtype=np.uint8)) == []


# ---- the clauses on fake final states ----------------------------------------------------------------------

def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _state(seed: int, tmp_path: Path, client: str = DESKTOP_USER) -> dict[str, bytes]:
    """The oracle's work done offline: decisions from the screen's receipts, the terminal simulated, the batch."""
    p, home = _plan(seed), _home(seed, tmp_path)
    portal, terminal, rows = [], [], []
    for n, r in enumerate(p["requests"]):
        receipt = rd.parse_receipt(rd.receipt_lines(r))
        assert receipt is not None
        verdict = rd.parse_decision(_run(home, rd.decide_program(receipt, p["today"])), r["request"])
        assert verdict is not None
        code = f"AB{n}CDE"
        portal.append({"form": task.FORM, "data": {"request": r["request"], "decision": verdict[0],
                                                   "detail": verdict[1]},
                       "client": client, "origin": ORIGIN, "code": code})
        if verdict[0] == rd.APPROVE:
            terminal.append({"auth": code, "amount": verdict[1], "ref": f"REF{n}WXYZ", "n": len(terminal) + 1})
            rows.append([r["request"], rd.APPROVE, verdict[1], "", f"REF{n}WXYZ"])
        else:
            rows.append([r["request"], rd.DENY, "", verdict[1], ""])
    assert _run(home, rd.batch_program(rows)).startswith("BATCH 5")
    return {RECORDS: _jsonl(portal), task.TERMINAL_RECORD: _jsonl(terminal),
            task.BATCH: (home / "outbox" / "refunds.csv").read_bytes()}


def _outcomes(files: Mapping[str, bytes], truth: Mapping[str, Any]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, truth).outcome for c in task.TASK.clauses}  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [0, 3, 6])
def test_the_oracles_work_satisfies_every_clause(seed: int, tmp_path: Path) -> None:
    assert _outcomes(_state(seed, tmp_path), _truth(seed)) == {c.name: Outcome.SATISFIED for c in task.TASK.clauses}


def test_decisions_from_the_shell_or_another_page_count_for_nothing(tmp_path: Path) -> None:
    truth = _truth(0)
    shell = _outcomes(_state(0, tmp_path, client=WORKSPACE_USER), truth)
    assert shell["decisions_sent"] is shell["decisions_right"] is shell["refunds_settled"] is Outcome.FAILED
    files = _state(0, tmp_path / "b")
    elsewhere = dict(files, **{RECORDS: files[RECORDS].replace(ORIGIN.encode(), b"http://127.0.0.1:9999")})
    assert _outcomes(elsewhere, truth)["decisions_sent"] is Outcome.FAILED


def test_a_wrong_amount_a_stray_refund_and_a_made_up_reference_fail(tmp_path: Path) -> None:
    truth = _truth(3)
    files = _state(3, tmp_path)
    approved = next(r for r in truth["requests"] if r["decision"] == rd.APPROVE)
    portal = [json.loads(line) for line in files[RECORDS].decode().splitlines()]
    wrong = [dict(r, data={**r["data"], "detail": "1.00"}) if r["data"]["request"] == approved["request"] else r
             for r in portal]
    assert _outcomes(dict(files, **{RECORDS: _jsonl(wrong)}), truth)["decisions_right"] is Outcome.PARTIAL
    denied_code = next(r["code"] for r in portal if r["data"]["decision"] == rd.DENY)
    stray = files[task.TERMINAL_RECORD] + _jsonl([{"auth": denied_code, "amount": "5.00", "ref": "STRAYREF"}])
    assert _outcomes(dict(files, **{task.TERMINAL_RECORD: stray}), truth)["refunds_only_approved"] is Outcome.FAILED
    made_up = dict(files, **{task.BATCH: files[task.BATCH].replace(b"REF", b"FER")})
    outcomes = _outcomes(made_up, truth)
    assert outcomes["batch_settlements"] is Outcome.FAILED and outcomes["batch_rows"] is Outcome.SATISFIED
    no_terminal = {k: v for k, v in files.items() if k != task.TERMINAL_RECORD}
    outcomes = _outcomes(no_terminal, truth)
    assert outcomes["refunds_settled"] is outcomes["batch_settlements"] is Outcome.FAILED


def test_the_oracle_is_denied_the_requests() -> None:
    assert set(task.TASK.oracle_truth(_truth(0))) == {"count", "origin"}


# ---- the Card Terminal on a real X server, through the real guest agent -----------------------------------

@pytest.mark.xvfb
def test_the_terminal_records_a_keyed_refund_and_shows_its_reference(xvfb: XvfbDisplay, client: GuestClient,
                                                                      tmp_path: Path) -> None:
    folder = Path(task.__file__).parent / "fixtures" / "refunds"
    shutil.copy(folder / "card_terminal.py", tmp_path / "card_terminal.py")
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "card_terminal.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "DISPLAY": xvfb.display, "LANG": "C.UTF-8"})
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(rd.terminal_layout()).encode())
    proc.stdin.close()
    try:
        wait_for(lambda: rd.read_terminal(client.screenshot().image) == "READY", 20, what="the terminal drawn")
        at = rd.find_frame(client.screenshot().image, rd.TERMINAL_FRAME)
        assert at is not None
        client.click(*rd.terminal_target(at))
        client.type_text("AB1CD\t12.50\n")
        wait_for(lambda: rd.read_terminal(client.screenshot().image) == "REFUSED: BAD AUTH CODE", 20,
                 what="the refusal")
        for n, (auth, amount) in enumerate((("k7qm2x", "41.25"), ("ZZ9ABC", "7.05")), 1):
            client.click(*rd.terminal_target(at))
            client.key("ctrl+slash")  # Tk's select all: the refused entry is still there the first time
            client.type_text(f"{auth}\t{amount}\n")
            record = json.loads(proc.stdout.readline())
            assert {k: record[k] for k in ("auth", "amount", "n")} == {"auth": auth.upper(), "amount": amount, "n": n}
            def settled(n: int = n) -> re.Match[str] | None:  # this entry's line, not the last one's still shown
                found = task.SETTLED.match(rd.read_terminal(client.screenshot().image))
                return found if found and int(found.group(1)) == n else None

            found = wait_for(settled, 20, what="the reference on the status line")
            assert (int(found.group(1)), found.group(2)) == (n, record["ref"])
    finally:
        proc.kill()
        proc.wait()
