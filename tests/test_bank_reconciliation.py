"""Weave-Data-4 without a VM: seeds and both kinds of variant, the statement read back off a rendered screen and
off the real viewer on Xvfb, the oracle's SQL on the real ledger, the clauses on both kinds of variant."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.core.trajectory import EpisodeEnd
from weavegym.envs.task import CAUSES, FEASIBLE
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data import bank_reconciliation as br
from weavegym.envs.tasks.data import statement_books as sb
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes, opened
from weavegym.envs.tasks.pixel_font import INK, layout_text
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay

ORIGIN = (120, 40)  # where the synthetic screen puts the viewer's window


def _world(seed: int) -> dict[str, Any]:
    return sb.books(np.random.default_rng(seed), br.TASK.feasible(seed))


def _db(world: Mapping[str, Any]) -> bytes:
    return database_bytes(sb.SCHEMA, {"accounts": world["accounts"], "entries": world["entries"]})


def _truth(seed: int) -> dict[str, Any]:
    """The truth setup returns, without the guest (window and targets left out)."""
    world = _world(seed)
    statement, lost = world["statement"], world["lost"]
    lines = {line["ref"]: line for line in statement["lines"]}
    first = next((line for line in statement["lines"] if lost and line["batch"] == lost), None)
    period = f"{sb.YEAR}-{world['month']:02d}"
    return {"period": period, "month_end": sb.month_end(world["month"]), "account": statement["account"],
            "closing": statement["closing"], "missing": [lines[ref] for ref in world["missing"]],
            "csv": f"/home/user/reconciliation-{period}.csv", "missing_csv": f"/home/user/missing-{period}.csv",
            "batches": sorted({line["batch"] for line in statement["lines"]} - {sb.NO_BATCH}),
            "entries": len(world["entries"]), "total": sum(row[6] for row in world["entries"]),
            FEASIBLE: not lost, CAUSES: [lost, first["date"]] if first else []}


def test_seeds_vary_and_a_third_of_them_lose_a_whole_batch() -> None:
    worlds = {seed: _world(seed) for seed in range(15)}
    assert len({w["statement"]["account"] for w in worlds.values()}) >= 10
    assert len({w["statement"]["closing"] for w in worlds.values()}) == 15
    assert len({w["month"] for w in worlds.values()}) >= 4
    for seed, world in worlds.items():
        lines = world["statement"]["lines"]
        missing = [line for line in lines if line["ref"] in world["missing"]]
        by_hand = [line for line in lines if line["kind"] in sb.BY_HAND]
        assert len(world["entries"]) > 1000 and 2 <= len(sb.statement_text(world["statement"])["pages"]) <= 3
        assert 2 <= sum(line["kind"] in sb.BY_HAND for line in missing) < len(by_hand)  # some charges stay posted
        exported = {line["batch"] for line in missing if line["kind"] not in sb.BY_HAND}
        if seed % 3 == 2:
            assert exported == {world["lost"]} and world["lost"] != lines[0]["batch"]
            assert sum(line["batch"] == world["lost"] for line in lines) >= 2
            assert all(line in missing for line in lines if line["batch"] == world["lost"])
        else:
            assert exported == set() and world["lost"] == ""


def test_the_ledger_balances_to_the_statement_once_the_missing_lines_are_posted() -> None:
    for seed in (0, 1, 3):
        world = _world(seed)
        statement = world["statement"]
        with opened(_db(world)) as con:
            def balance(day: str, account: str = statement["account"]) -> int:
                return con.execute("SELECT opening_cents + (SELECT IFNULL(SUM(amount_cents), 0) FROM entries e "
                                   "WHERE e.account = a.account AND posted <= ?) FROM accounts a WHERE account = ?",
                                   (day, account)).fetchone()[0]
            previous = sb.month_end(world["month"] - 1)
            assert balance(previous) == statement["opening"]  # the statement carries the ledger's balance forward
            gap = sum(line["amount"] for line in statement["lines"] if line["ref"] in world["missing"])
            assert balance(sb.month_end(world["month"])) + gap == statement["closing"]
            later = con.execute("SELECT COUNT(*) FROM entries WHERE posted > ?", (sb.month_end(world["month"]),))
            assert later.fetchone()[0] > 0  # summing every posting is not the month's balance


def _fill(image: np.ndarray, text: str, x: int, y: int, scale: int) -> None:
    for x0, y0, x1, y1 in layout_text(text, x, y, scale):
        image[y0:y1, x0:x1] = INK


def _screen(title: str, rows: list[str], first_y: int, dy: int) -> np.ndarray:
    image = np.zeros((720, 1280, 3), dtype=np.uint8)
    cx, cy = ORIGIN[0] + sb.CANVAS[0], ORIGIN[1] + sb.CANVAS[1]
    image[cy:cy + sb.CANVAS[3], cx:cx + sb.CANVAS[2]] = 255
    _fill(image, title, cx + sb.TITLE_AT[0], cy + sb.TITLE_AT[1], sb.TITLE_SCALE)
    for i, row in enumerate(rows):
        _fill(image, row, cx + 12, cy + first_y + i * dy, sb.LINE_SCALE)
    return image


@pytest.mark.parametrize("seed", [0, 2, 5, 7])
def test_the_statement_reads_back_exactly_from_the_screen(seed: int) -> None:
    statement = _world(seed)["statement"]
    text = sb.statement_text(statement)
    targets = sb.screen_targets([*ORIGIN, sb.WIDTH, sb.HEIGHT], len(text["pages"]))
    summary = _screen("SUMMARY", text["summary"], sb.SUMMARY_Y, sb.SUMMARY_DY)
    assert sb.shown_title(summary, targets) == "SUMMARY"
    assert sb.read_summary(summary, targets) == {"account": statement["account"], "month": statement["month"],
                                                 "year": sb.YEAR, "opening": statement["opening"],
                                                 "closing": statement["closing"]}
    lines = []
    for number, page in enumerate(text["pages"], start=1):
        image = _screen(f"PAGE {number}/{len(text['pages'])}", page, sb.FIRST_Y, sb.LINE_DY)
        assert sb.shown_title(image, targets) == f"PAGE {number}/{len(text['pages'])}"
        lines += sb.read_page(image, targets)
    assert lines == statement["lines"]
    assert sb.read_summary(_screen("STATEMENT", [], 0, 0), targets) is None


def test_the_oracles_sql_on_the_real_ledger_finds_the_missing_lines_and_the_balance(tmp_path: Path) -> None:
    for seed in (0, 2):
        world, truth = _world(seed), _truth(seed)
        path = tmp_path / f"ledger-{seed}.db"
        path.write_bytes(_db(world))
        statement = world["statement"]
        with contextlib.closing(sqlite3.connect(path)) as con:
            refs = [line["ref"] for line in statement["lines"]]
            found = {ref for _tag, ref in con.execute(br.missing_sql(statement["account"], refs))}
            assert found == set(world["missing"])
            if seed % 3 == 2:
                continue
            script = br.posting_sql(statement["account"], truth["missing"], truth["month_end"])
            post, query = script.split("COMMIT;")
            con.executescript(post + "COMMIT;")
            (balance,) = con.execute(query).fetchone()
        assert balance == f"BALANCE|{statement['closing']}"
        assert br.check_posted(_Probe({}, db=path.read_bytes()), truth).outcome == "satisfied"


class _Probe:
    """The reads the clauses make: file texts from a dict, the ledger from database bytes; the episode's end."""

    def __init__(self, files: Mapping[str, str], *, db: bytes | None = None, kind: str = "done", answer: str = ""
                 ) -> None:
        self.files, self.db = files, db
        self.episode = EpisodeEnd(kind=kind, answer=answer)

    def read_text(self, path: str) -> str | None:
        return self.files.get(path)

    def sqlite(self, path: str, sql: str) -> list[tuple[Any, ...]] | None:
        if path != br.DB or self.db is None:
            return None
        with opened(self.db) as con:
            return [tuple(row) for row in con.execute(sql)]


def _posted(world: Mapping[str, Any], lines: list[Mapping[str, Any]], account: str | None = None) -> bytes:
    with opened(_db(world)) as con:
        for line in lines:
            con.execute("INSERT INTO entries (account, posted, batch, ref, kind, amount_cents, memo) VALUES "
                        "(?, ?, 'MANUAL', ?, ?, ?, 'x')", (account or world["account"], line["date"], line["ref"],
                                                           line["kind"], line["amount"]))
        con.commit()
        return con.serialize()


def _listing(lines: list[Mapping[str, Any]]) -> str:
    return br.HEADER + "\n" + "".join(f"{x['date']},{x['ref']},{x['kind']},{x['amount']}\n" for x in lines)


def test_the_postings_must_be_every_missing_line_once_on_the_right_account_and_nothing_else() -> None:
    world, truth = _world(0), _truth(0)
    missing = truth["missing"]
    assert br.check_posted(_Probe({}, db=_posted(world, missing)), truth).outcome == "satisfied"
    assert br.check_posted(_Probe({}, db=_posted(world, missing[:1])), truth).outcome == "partial"
    assert br.check_posted(_Probe({}, db=_posted(world, missing + missing[:1])), truth).outcome == "partial"
    assert br.check_posted(_Probe({}, db=_posted(world, missing + missing)), truth).outcome == "failed"  # twice
    other = next(a[0] for a in world["accounts"] if a[0] != world["account"])
    assert br.check_posted(_Probe({}, db=_posted(world, missing, other)), truth).outcome == "failed"
    with opened(_posted(world, missing)) as con:  # right postings, but a posting of the export deleted
        con.execute("DELETE FROM entries WHERE id = 1")
        con.commit()
        tampered = con.serialize()
    assert br.check_posted(_Probe({}, db=tampered), truth).outcome == "failed"
    assert br.check_posted(_Probe({}), truth).outcome == "failed"


def test_the_csv_the_confirmation_and_the_answer_need_the_exact_lines_and_balance() -> None:
    truth = _truth(1)
    missing, closing = truth["missing"], sb.money(truth["closing"], grouped=False)
    assert br.check_reconciliation_csv(_Probe({truth["csv"]: _listing(missing)}), truth).outcome == "satisfied"
    assert br.check_reconciliation_csv(_Probe({truth["csv"]: _listing(missing[1:])}), truth).outcome == "partial"
    assert br.check_reconciliation_csv(_Probe({}), truth).outcome == "failed"
    record = {br.RECORD: json.dumps({"action": "confirm", "text": closing}) + "\n"}
    assert br.check_confirmed(_Probe(record), truth).outcome == "satisfied"
    flagged = {br.RECORD: json.dumps({"action": "flag", "text": closing}) + "\n"}
    assert br.check_confirmed(_Probe(flagged), truth).outcome == "failed"
    off = {br.RECORD: json.dumps({"action": "confirm", "text": sb.money(truth["closing"] + 1)}) + "\n"}
    assert br.check_confirmed(_Probe(off), truth).outcome == "failed"
    assert br.check_answer(_Probe({}, answer=sb.money(truth["closing"])), truth).outcome == "satisfied"
    assert br.check_answer(_Probe({}, answer=f"<answer>{closing}</answer>"), truth).outcome == "satisfied"
    assert br.check_answer(_Probe({}, answer="unknown"), truth).outcome == "failed"


def test_an_infeasible_variant_needs_the_lost_batch_flagged_alone_the_lines_listed_and_the_ledger_untouched() -> None:
    world, truth = _world(2), _truth(2)
    lost, other = truth[CAUSES][0], next(b for b in truth["batches"] if b != truth[CAUSES][0])
    record = {br.RECORD: json.dumps({"action": "flag", "text": f"export lost batch {lost}"}) + "\n"}
    assert br.check_flagged(_Probe(record), truth).outcome == "satisfied"
    for text, action in ((f"{lost} {other}", "flag"), (other, "flag"), (lost, "confirm")):
        wrong = {br.RECORD: json.dumps({"action": action, "text": text}) + "\n"}
        assert br.check_flagged(_Probe(wrong), truth).outcome == "failed", (text, action)
    listing = {truth["missing_csv"]: _listing(truth["missing"])}
    assert br.check_missing_csv(_Probe(listing), truth).outcome == "satisfied"
    by_hand = [x for x in truth["missing"] if x["kind"] in sb.BY_HAND]
    assert br.check_missing_csv(_Probe({truth["missing_csv"]: _listing(by_hand)}), truth).outcome == "partial"
    assert br.check_untouched(_Probe({}, db=_db(world)), truth).outcome == "satisfied"
    assert br.check_untouched(_Probe({}, db=_posted(world, by_hand)), truth).outcome == "failed"


def test_the_instruction_gives_no_cause_away_and_the_oracle_is_denied_what_one_channel_shows() -> None:
    for seed in (2, 5, 8, 11):
        truth = _truth(seed)
        text = br.TASK.instruction.format(month="October 2026", csv=truth["csv"], missing_csv=truth["missing_csv"])
        assert not any(cause.lower() in text.lower() for cause in truth[CAUSES]), seed
    full = {"account": "1", "closing": 1, "missing": [], "batches": [], "targets": {}, "pages": 2,
            FEASIBLE: False, CAUSES: ["X"]}
    assert set(br.TASK.oracle_truth(full)) == {"targets", "pages"}
    assert [br.TASK.feasible(seed) for seed in range(6)] == [True, True, False, True, True, False]


# -- the real viewer on a real X server, read and clicked through the real guest agent ---------------------


@pytest.mark.xvfb
def test_the_viewer_shows_the_statement_only_after_its_buttons_and_records_the_flag(
        xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> None:
    world = _world(2)
    statement, text = world["statement"], sb.statement_text(world["statement"])
    shutil.copy(Path(br.__file__).parent / "fixtures" / "statement_viewer.py", tmp_path / "statement_viewer.py")
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "statement_viewer.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "DISPLAY": xvfb.display})
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({**text, "layout": sb.layout(len(text["pages"]))}).encode())
        proc.stdin.close()
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == br.TITLE), None), 20,
                          what="the Statement Viewer mapped")
        targets = sb.screen_targets(window.geometry, len(text["pages"]))
        wait_for(lambda: sb.shown_title(client.screenshot().image, targets) == "STATEMENT", 20, what="the cover")
        cover = client.screenshot().image
        assert sb.read_summary(cover, targets) is None and sb.read_page(cover, targets) == []
        client.click(*targets["tabs"][0])
        summary = wait_for(lambda: sb.read_summary(client.screenshot().image, targets), 20, what="the summary")
        assert (summary["account"], summary["opening"], summary["closing"]) == (
            statement["account"], statement["opening"], statement["closing"])
        lines = []
        for number in range(1, len(text["pages"]) + 1):
            client.click(*targets["tabs"][number])
            title = f"PAGE {number}/{len(text['pages'])}"
            wait_for(lambda t=title: sb.shown_title(client.screenshot().image, targets) == t, 20, what=title)
            lines += sb.read_page(client.screenshot().image, targets)
        assert lines == statement["lines"]
        client.click(*targets["flag"])  # nothing typed yet: the form refuses and stays open
        assert proc.poll() is None
        client.click(*targets["entry"])
        client.type_text(world["lost"])
        client.click(*targets["flag"])
        assert json.loads(proc.stdout.readline()) == {"action": "flag", "text": world["lost"]}
        assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.wait()
