"""Weave-Productivity-7 (travel claim) without a VM: the trip's plan and money rules, the receipts' accented font
read back, the oracle's conversion and claim-total programs run by the real python3, every clause on right and
wrong finals (unit), and the real Travel Desk on Xvfb through the real agent (xvfb): receipts read back off the
screen, refusals, the next receipt only after a right log, the portal's refusal and its reference."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from pixel_apps import pixel_app

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.docs.office import ods
from weavegym.envs.tasks.productivity import _travel_claim as tc
from weavegym.envs.tasks.productivity import travel_claim as tcl
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(tcl.__file__).parent / "fixtures"


def _plan(seed: int = 0) -> dict[str, Any]:
    return tc.plan(np.random.default_rng(seed))


def _truth(p: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("number", "merchant", "city", "date", "category", "amount", "currency", "rate", "eur", "reimbursed")
    return {"receipts": [{k: r[k] for k in keys} for r in p["receipts"]], "total": p["total"],
            "flagged": p["flagged"], "count": len(p["receipts"])}


def _claim(receipts: list[Mapping[str, Any]]) -> bytes:
    rows: list[list[str | float]] = [list(tcl.HEADER)]
    for r in receipts:
        rows.append([r["merchant"], r["date"], float(r["amount"]), r["currency"], float(r["rate"]), float(r["eur"]),
                     float(r["reimbursed"])])
    return ods(rows, sheet="Claim")


def _final(p: Mapping[str, Any], reference: str = "CLM-ACD347") -> dict[str, bytes]:
    logs = [{"event": "log", "receipt": r["number"], "eur": r["reimbursed"]} for r in p["receipts"]]
    claim = {"event": "claim", "total": p["total"], "reference": reference, "flagged": p["flagged"]}
    by_number = {r["number"]: r for r in p["receipts"]}
    justify = "".join(f"{reference} | {n} | {by_number[n]['merchant']} | {by_number[n]['reimbursed']}\n"
                      for n in p["flagged"])
    return {tcl.RECORD: "".join(json.dumps(x) + "\n" for x in [*logs, claim]).encode(),
            tcl.CLAIM: _claim(p["receipts"]), tcl.JUSTIFY: justify.encode()}


def _outcomes(files: Mapping[str, bytes], truth: Mapping[str, Any]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, truth).outcome for c in tcl.TASK.clauses}  # type: ignore[arg-type]


ALL = {c.name: Outcome.SATISFIED for c in tcl.TASK.clauses}

# ---- the plan -------------------------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(8))
def test_every_seed_has_gaps_a_cap_a_refusal_and_accents(seed: int) -> None:
    p = _plan(seed)
    receipts = p["receipts"]
    assert 6 <= len(receipts) <= 8 and len(p["flagged"]) == 2
    assert any(r["category"] == tc.BAR and r["reimbursed"] == "0.00" for r in receipts)
    assert any(Decimal(r["reimbursed"]) < Decimal(r["eur"]) and r["category"] != tc.BAR for r in receipts)
    days = {c: {d for d, _r in rows} for c, rows in p["rates"].items()}
    assert any(r["currency"] != "EUR" and r["date"] not in days[r["currency"]] for r in receipts)
    assert any(not r["merchant"].isascii() for r in receipts)
    names = [r["merchant"] for r in receipts]
    assert not any(a != b and b.startswith(a) for a in names for b in names)  # Calc's AutoInput
    assert p["total"] == tc.money(sum(Decimal(r["reimbursed"]) for r in receipts))
    for r in receipts:
        assert r["rate"] == tc.rate_on(p["rates"], r["currency"], r["date"])
        assert all(len(line) <= tc.RECEIPT_CHARS for line in r["lines"])


@pytest.mark.unit
def test_the_rate_is_the_last_on_or_before_and_the_policy_caps_and_refuses() -> None:
    rates = {"PLN": [("2026-03-02", "0.23"), ("2026-03-04", "0.25")]}
    assert tc.rate_on(rates, "PLN", "2026-03-03") == "0.23"
    assert tc.rate_on(rates, "PLN", "2026-03-04") == "0.25"
    assert tc.rate_on(rates, "PLN", "2026-03-01") is None and tc.rate_on(rates, "EUR", "2026-03-01") == "1"
    assert tc.converted("100.10", "0.23125") == "23.15"  # 23.148125
    rules, caps = {"MEALS": 1, "BAR": 0}, {("WIEN", "MEALS"): "40"}
    assert tc.reimbursed("52.10", "MEALS", "WIEN", rules, caps) == "40.00"
    assert tc.reimbursed("32.10", "MEALS", "WIEN", rules, caps) == "32.10"
    assert tc.reimbursed("32.10", "MEALS", "PARIS", rules, caps) == "32.10"
    assert tc.reimbursed("32.10", "BAR", "WIEN", rules, caps) == "0.00"


@pytest.mark.unit
def test_accented_receipt_lines_read_back_exactly() -> None:
    image = np.full((80, 900, 3), 255, dtype=np.uint8)
    text = "ŁÓDŹ GŁÓWNA CAFÉ MÜLLER KØBENHAVN ČŘŠŽ ÅÂÀ"
    for x0, y0, x1, y1 in tc.cells(text, 10, 20, 2):
        image[y0:y1, x0:x1] = pixel_font.INK
    assert tc.read_line(image, 10, 20, 2, 50) == text
    assert len(tc._BY_ROWS) == len(tc.GLYPHS)  # no two glyphs alike


# ---- the oracle's programs in the real python3 ------------------------------------------------------------------


@pytest.mark.unit
def test_the_conversion_program_applies_gaps_caps_and_refusals(tmp_path: Path) -> None:
    p = _plan(3)
    p["other_caps"] = []
    home = tmp_path / "home"
    home.mkdir()
    (home / "travel.db").write_bytes(tcl.database(p))
    for r in p["receipts"]:
        receipt = {k: r[k] for k in ("number", "merchant", "city", "date", "category", "amount", "currency")}
        receipt["number"] = str(receipt["number"])
        out = subprocess.run([sys.executable, "-c", tcl.convert_program(receipt)], capture_output=True, text=True,
                             env={**os.environ, "HOME": str(home)}, check=True).stdout
        _tag, number, rate, eur, paid = out.strip().split("|")
        assert (number, eur, paid) == (str(r["number"]), r["eur"], r["reimbursed"])
        assert Decimal(rate) == Decimal(r["rate"])
    with sqlite3.connect(home / "travel.db") as db:
        assert db.execute("SELECT count(*) FROM rates").fetchone()[0] > 20


@pytest.mark.unit
def test_the_claim_rows_program_reads_back_what_the_checker_reads(tmp_path: Path) -> None:
    p = _plan(1)
    (tmp_path / "claim.ods").write_bytes(_claim(p["receipts"]))
    out = subprocess.run([sys.executable, "-c", tcl.CLAIM_ROWS_PY], capture_output=True, text=True, cwd=tmp_path,
                         check=True).stdout
    rows = tcl.saved_rows("saved\n" + out)
    assert rows == tcl.claim_rows(_claim(p["receipts"]))[0] and len(rows) == len(p["receipts"])
    assert tcl.judge_claim(rows, p["receipts"]) == (len(p["receipts"]), [], [])
    assert tcl.saved_rows("saved\n") is None and tcl.saved_rows("CLAIMROWS [oops\n") is None


# ---- the clauses ------------------------------------------------------------------------------------------------


@pytest.mark.unit
def test_a_claim_filed_right_satisfies_every_clause() -> None:
    p = _plan(2)
    assert _outcomes(_final(p), _truth(p)) == ALL


@pytest.mark.unit
def test_nothing_done_fails_every_clause() -> None:
    p = _plan(2)
    assert set(_outcomes({}, _truth(p)).values()) == {Outcome.FAILED}


@pytest.mark.unit
def test_missing_logs_no_claim_and_a_wrong_line_fail_or_half() -> None:
    p = _plan(4)
    truth, files = _truth(p), _final(p)
    lines = files[tcl.RECORD].decode().splitlines()
    assert _outcomes({**files, tcl.RECORD: "\n".join(lines[:2]).encode()}, truth)["receipts_logged"] == \
        Outcome.PARTIAL
    no_claim = "\n".join(line for line in lines if '"claim"' not in line).encode()
    outcome = _outcomes({**files, tcl.RECORD: no_claim}, truth)
    assert outcome["claim_submitted"] == Outcome.FAILED and outcome["justification"] == Outcome.FAILED
    for key, value in (("rate", "9.9"), ("merchant", "CAFE MULLER"), ("date", "2026-01-01"), ("reimbursed", "1.00"),
                       ("eur", "0.01"), ("currency", "USD"), ("amount", "1")):
        receipts = [dict(r) for r in p["receipts"]]
        receipts[1][key] = value
        assert _outcomes({**files, tcl.CLAIM: _claim(receipts)}, truth)["claim_form"] == Outcome.PARTIAL, key
    extra = [*p["receipts"], {**p["receipts"][0], "merchant": "TOTAL"}]
    assert _outcomes({**files, tcl.CLAIM: _claim(extra)}, truth)["claim_form"] == Outcome.PARTIAL
    assert _outcomes({**files, tcl.CLAIM: b"not a zip"}, truth)["claim_form"] == Outcome.FAILED


@pytest.mark.unit
def test_a_justification_with_a_wrong_reference_receipt_or_amount_fails() -> None:
    p = _plan(5)
    truth, files = _truth(p), _final(p)
    good = files[tcl.JUSTIFY].decode()
    first = good.splitlines()[0].split(" | ")
    not_flagged = next(r["number"] for r in p["receipts"] if r["number"] not in p["flagged"])
    bad = {"reference": good.replace("CLM-ACD347", "CLM-XXXXXX"),
           "one missing": good.splitlines()[0] + "\n",
           "an unflagged receipt": good.replace(f" | {first[1]} | ", f" | {not_flagged} | ", 1),
           "an amount": good.replace(f" | {first[3]}\n", " | 999.99\n", 1),
           "a merchant": good.replace(first[2], first[2].encode("ascii", "ignore").decode() + "X", 1),
           "three fields": re.sub(r" \| [0-9.]+\n", "\n", good),
           "latin-1": good.encode("latin-1", "replace").decode("latin-1")}
    for why, text in bad.items():
        data = text.encode("latin-1") if why == "latin-1" else text.encode()
        if why == "latin-1" and data.isascii():
            continue
        assert _outcomes({**files, tcl.JUSTIFY: data}, truth)["justification"] == Outcome.FAILED, why


# ---- the real desk on a real X server, through the real guest agent ------------------------------------------


@pytest.mark.xvfb
def test_the_desk_shows_receipts_as_pixels_logs_them_in_order_and_issues_a_reference(xvfb: XvfbDisplay,
                                                                                     client: GuestClient,
                                                                                     tmp_path: Path) -> None:
    p = _plan(0)
    receipts = p["receipts"][:2]
    total = tc.money(sum(Decimal(r["reimbursed"]) for r in receipts))
    conf = {"receipts": [{"lines": r["lines"], "reimbursed": r["reimbursed"]} for r in receipts], "total": total,
            "flagged": [1, 2], "glyphs": tc.GLYPHS, "layout": tc.layout()}

    def shot() -> Any:
        return client.screenshot().image

    def press(box: tuple[int, int, int, int]) -> None:
        client.click(*tc.centre(at, box))

    def log(text: str) -> None:
        press(tc.LOG_ENTRY)
        client.key("ctrl+slash")
        client.type_text(text)

    with pixel_app(FIXTURES / "travel_desk.py", conf, tmp_path, xvfb.display) as proc:
        at = list(wait_for(lambda: tc.origin(shot(), (0, 0)), 20, what="the desk drawn"))
        assert tc.read_receipt(shot(), at)[0] == ""  # nothing before a click
        log("1.00\n")
        wait_for(lambda: tc.read_log_status(shot(), at).startswith("PRESS SHOW RECEIPT"), 20, what="show first")
        press(tc.SHOW_BUTTON)
        wait_for(lambda: tc.read_receipt(shot(), at) == receipts[0]["lines"], 20, what="receipt 1 read back")
        press(tc.SUBMIT_BUTTON)
        wait_for(lambda: tc.read_portal(shot(), at)[0] == "REFUSED: LOG EVERY RECEIPT FIRST", 20, what="early claim")
        log("9" * 120 + "é€\n")
        wait_for(lambda: tc.read_log_status(shot(), at) == "REFUSED: TYPE AN AMOUNT LIKE 12.34", 20, what="junk")
        log(tc.money(Decimal(receipts[0]["reimbursed"]) + 1) + "\n")
        wait_for(lambda: tc.read_log_status(shot(), at) == "REFUSED: WRONG AMOUNT FOR RECEIPT 1", 20, what="wrong")
        assert tc.read_receipt(shot(), at) == receipts[0]["lines"]
        log(receipts[0]["reimbursed"] + "\n")
        wait_for(lambda: tc.read_receipt(shot(), at) == receipts[1]["lines"], 20, what="receipt 2 after the log")
        assert json.loads(proc.stdout.readline())["receipt"] == 1
        log(receipts[1]["reimbursed"] + "\n")
        wait_for(lambda: tc.read_log_status(shot(), at) == "LOGGED 2 OF 2", 20, what="all logged")
        press(tc.TOTAL_ENTRY)
        client.type_text("1.23\n")
        wait_for(lambda: tc.read_portal(shot(), at)[0] == "REFUSED: THE TOTAL DOES NOT MATCH", 20, what="bad total")
        press(tc.TOTAL_ENTRY)
        client.key("ctrl+slash")
        client.type_text(total + "\n")
        assert json.loads(proc.stdout.readline())["receipt"] == 2
        claim = json.loads(proc.stdout.readline())
        assert claim["event"] == "claim" and claim["flagged"] == [1, 2]
        wait_for(lambda: tc.read_portal(shot(), at)[:2] == [f"ACCEPTED: REFERENCE {claim['reference']}",
                                                             "AUDIT: JUSTIFY RECEIPTS 1 AND 2"], 20,
                 what="the reference read back")


def _drive_fill(saved: list[int | None]) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """Run the oracle's claim typing against a fake shell whose n-th read-back of the saved form shows saved[n]
    lines (None: the save never showed): (what it returned, its actions, the plan)."""
    p = _plan(0)
    receipts = [{k: str(r[k]) for k in ("number", "merchant", "date", "amount", "currency", "rate", "eur",
                                         "reimbursed")} for r in p["receipts"]]
    ctx = SimpleNamespace(truth={"calc": [0, 28, 1280, 690]}, obs={"terminal": ""})
    steps = tcl._fill_claim(ctx, receipts)  # type: ignore[arg-type]
    actions: list[dict[str, Any]] = []
    rows = [[r[k] for k in ("merchant", "date", "amount", "currency", "rate", "eur", "reimbursed")] for r in receipts]
    action = next(steps)
    try:
        while True:
            actions.append(action)
            if action.get("kind") == "shell" and "CLAIMROWS" in action.get("command", ""):
                lines = saved.pop(0)
                ctx.obs = {"terminal": "" if lines is None else f"saved\nCLAIMROWS {json.dumps(rows[:lines])}\n"}
            elif action.get("kind") == "shell":
                ctx.obs = {"terminal": "saved\n"}
            action = steps.send(None)
    except StopIteration as stop:
        return stop.value, actions, p


@pytest.mark.unit
def test_the_oracle_saves_the_claim_again_until_the_save_shows() -> None:
    result, actions, p = _drive_fill([None, 8])
    assert result == p["total"]
    typed = [a["text"] for a in actions if a.get("kind") == "type"]
    assert len(typed) == len(p["receipts"]) and typed[0].count("\t") == 6 and typed[0].endswith("\n")
    assert not any(a.get("keys") == "Delete" for a in actions)


@pytest.mark.unit
def test_the_oracle_clears_and_retypes_a_claim_saved_without_its_lines() -> None:
    result, actions, p = _drive_fill([0, 8])
    assert result == p["total"]
    typed = [a["text"] for a in actions if a.get("kind") == "type"]
    count = len(p["receipts"])
    assert len(typed) == 2 * count + 1 and typed[count] == "\t".join(tcl.HEADER) + "\n"  # from A1, header too
    assert typed[count + 1:] == typed[:count]
    keys = [a["keys"] for a in actions if a.get("kind") == "key"]
    assert keys[keys.index("Delete") - 1] == "ctrl+a" and keys[-1] == "ctrl+s"


@pytest.mark.unit
def test_the_oracle_gives_up_on_a_claim_that_never_saves_right() -> None:
    result, _actions, _p = _drive_fill([3] * tcl.FILL_TRIES)
    assert result == ""
