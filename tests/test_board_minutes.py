"""Weave-Docs-7 (board minutes) without a VM: the meeting's plan, the transcript read back and parsed, the oracle's
register lookup and read-back programs run by the real python3, every clause on right and wrong finals (unit), and
the real Minutes Desk on Xvfb through the real agent (xvfb): transcripts read back off the screen, refusals, the
next item only after a right reference, a repeated reference showing its code again."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from pixel_apps import pixel_app

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.docs import _board_minutes as bm
from weavegym.envs.tasks.docs import board_minutes as bmt
from weavegym.envs.tasks.docs.office import odt
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(bmt.__file__).parent / "fixtures"
CODES = ("FC-ACD347", "FC-HJKM9X", "FC-TUVW44", "FC-RRRR77")


def _plan(seed: int = 0) -> dict[str, Any]:
    return bm.plan(np.random.default_rng(seed))


def _truth(p: Mapping[str, Any]) -> dict[str, Any]:
    return {"items": [{k: v for k, v in i.items() if k != "lines"} for i in p["items"]], "meeting": p["meeting"],
            "held_on": p["held_on"], "count": len(p["items"])}


def _minutes(p: Mapping[str, Any], lines: Mapping[int, str] | None = None) -> bytes:
    """The template with each placeholder replaced by ``lines`` (default: the oracle's own line)."""
    paragraphs = [("h", "Minutes of the board meeting"), ("p", "Replace each item's placeholder line.")]
    for item in p["items"]:
        text = (lines or {}).get(item["number"], bm.minute_line(item))
        paragraphs += [("h", f"Item {item['number']}: {item['title']}"), ("p", text)]
    return odt(paragraphs)


def _final(p: Mapping[str, Any]) -> dict[str, bytes]:
    records = [{"event": "file", "item": i["number"], "reference": i["reference"], "code": CODES[n]}
               for n, i in enumerate(p["items"])]
    minutes = _minutes(p)
    filing = "".join(f"{i['number']} | {CODES[n]}\n" for n, i in enumerate(p["items"]))
    filing += f"minutes.odt | {hashlib.sha256(minutes).hexdigest()}\n"
    return {bmt.RECORD: "".join(json.dumps(r) + "\n" for r in records).encode(), bmt.MINUTES: minutes,
            bmt.FILING: filing.encode()}


def _outcomes(files: Mapping[str, bytes], truth: Mapping[str, Any]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, truth).outcome for c in bmt.TASK.clauses}  # type: ignore[arg-type]


ALL = {c.name: Outcome.SATISFIED for c in bmt.TASK.clauses}

# ---- the plan -------------------------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(10))
def test_every_seed_has_items_accents_former_members_and_consistent_votes(seed: int) -> None:
    p = _plan(seed)
    items = p["items"]
    assert 3 <= len(items) <= 4 and len(p["former"]) == 2
    assert any(not (i["mover"] + i["seconder"] + i["owner"]).isascii() for i in items)
    current = {m["initials"] for m in p["members"]}
    assert len(current) == bm.BOARD_SIZE and {f["initials"] for f in p["former"]} <= current
    held = next(m["held_on"] for m in p["meetings"] if m["code"] == p["meeting"])
    assert held == p["held_on"] and all(f["left"] < min(m["held_on"] for m in p["meetings"]) for f in p["former"])
    for i in items:
        assert (i["for"] < i["against"]) == i["decision"].startswith("REJECTED")
        assert 5 <= i["for"] + i["against"] + i["abstained"] <= bm.BOARD_SIZE
        assert i["reference"].startswith(f"{p['meeting']}-{i['number']}-{i['owner_no']}-")
        assert bm.parse_transcript(i["lines"])["owner_initials"] == i["owner_initials"]  # type: ignore[index]
        assert i["mover"] != i["seconder"]


@pytest.mark.unit
def test_a_transcript_reads_back_and_parses_to_its_facts() -> None:
    item = _plan(2)["items"][1]
    image = np.full((400, 600, 3), 255, dtype=np.uint8)
    at = (40, 10)
    for index, line in enumerate(item["lines"]):
        x, y = at[0] + bm.TEXT_AT[0], at[1] + bm.TEXT_AT[1] + index * bm.LINE_H
        for x0, y0, x1, y1 in pixel_font.layout_text(line, x, y, bm.SCALE):
            image[y0:y1, x0:x1] = pixel_font.INK
    lines = bm.read_transcript(image, at)
    assert lines == item["lines"]
    facts = bm.parse_transcript(lines)
    assert facts is not None and facts["number"] == 2 and facts["decision"] == item["decision"]
    assert (facts["for"], facts["against"], facts["abstained"]) == (item["for"], item["against"], item["abstained"])
    assert bm.parse_transcript(["?"] * bm.LINES) is None and bm.parse_transcript(lines[:3]) is None


@pytest.mark.unit
def test_norm_ignores_case_punctuation_and_dashes_but_not_accents() -> None:
    assert bm.norm("Moved by ZOË  Brontë,\u00a0seconded – by") == "moved by zoë brontë seconded - by"
    assert bm.norm("Zoe Bronte") != bm.norm("Zoë Brontë")
    assert bm.norm("due 2026\u201307\u201308.") == "due 2026-07-08"


# ---- the oracle's programs in the real python3 ------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("seed", [0, 3, 6])
def test_the_lookup_program_finds_current_members_due_dates_and_references(tmp_path: Path, seed: int) -> None:
    p = _plan(seed)
    home = tmp_path / "home"
    home.mkdir()
    (home / "board.db").write_bytes(bmt.database(p))
    for item in p["items"]:
        facts = bm.parse_transcript(item["lines"])
        assert facts is not None
        out = subprocess.run([sys.executable, "-c", bmt.lookup_program(facts)], capture_output=True, text=True,
                             env={**os.environ, "HOME": str(home)}, check=True).stdout
        found = json.loads(out.removeprefix("LOOKUP "))
        assert found == {k: item[k] for k in ("number", "mover", "seconder", "owner", "due", "reference")}


@pytest.mark.unit
def test_the_sections_program_reads_back_what_the_checker_reads(tmp_path: Path) -> None:
    p = _plan(1)
    (tmp_path / "minutes").mkdir()
    (tmp_path / "minutes" / "minutes.odt").write_bytes(_minutes(p))
    out = subprocess.run([sys.executable, "-c", bmt.SECTIONS_PY], capture_output=True, text=True, check=True,
                         env={**os.environ, "HOME": str(tmp_path)}).stdout
    found = bmt.saved_sections("saved\n" + out)
    assert found == bmt.sections(bmt.paragraphs(_minutes(p)) or [], len(p["items"]))
    assert all(not bmt.judge_item(found[i["number"]], i) for i in p["items"])
    assert bmt.saved_sections("saved\n") is None and bmt.saved_sections("SECTIONS {oops\n") is None


@pytest.mark.unit
def test_the_template_has_each_placeholder_two_paragraphs_per_item_down() -> None:
    p = _plan(4)
    paras = bmt.paragraphs(bmt.template(p))
    assert paras is not None
    for item in p["items"]:
        assert paras[2 * item["number"] + 1] == (False, f"[ITEM{item['number']}]")  # what ctrl+Down counts


# ---- the clauses ------------------------------------------------------------------------------------------------


@pytest.mark.unit
def test_minutes_written_right_satisfy_every_clause() -> None:
    p = _plan(2)
    assert _outcomes(_final(p), _truth(p)) == ALL


@pytest.mark.unit
def test_nothing_done_fails_every_clause() -> None:
    p = _plan(2)
    assert set(_outcomes({}, _truth(p)).values()) == {Outcome.FAILED}


@pytest.mark.unit
def test_missing_filings_and_wrong_minutes_fail_or_half() -> None:
    p = _plan(3)
    truth, files = _truth(p), _final(p)
    lines = files[bmt.RECORD].decode().splitlines()
    assert _outcomes({**files, bmt.RECORD: lines[0].encode()}, truth)["items_filed"] == Outcome.PARTIAL
    item = p["items"][1]
    other = next(m["full_name"] for m in p["members"] if m["full_name"] not in (item["mover"], item["seconder"]))
    former = {f["initials"]: f["full_name"] for f in p["former"]}
    bad = {"initials": bm.minute_line({**item, "mover": item["mover_initials"]}),
           "no accents": bm.minute_line({**item, "owner": item["owner"].encode("ascii", "ignore").decode()}),
           "relative due": bm.minute_line({**item, "due": item["due_words"]}),
           "wrong date": bm.minute_line({**item, "due": "2026-01-01"}),
           "swapped": bm.minute_line({**item, "mover": item["seconder"], "seconder": item["mover"]}),
           "wrong seconder": bm.minute_line({**item, "seconder": other}),
           "votes": bm.minute_line({**item, "against": item["against"] + 1}),
           "decision": bm.minute_line({**item, "decision": "APPROVED SOMETHING ELSE"}),
           "placeholder": "[ITEM2]"}
    if item["owner_initials"] in former:
        bad["former member"] = bm.minute_line({**item, "owner": former[item["owner_initials"]]})
    for why, line in bad.items():
        minutes = _minutes(p, {2: line})
        assert _outcomes({**files, bmt.MINUTES: minutes}, truth)["minutes"] == Outcome.PARTIAL, why
    relaxed = "".join(c.upper() if c.isascii() else c for c in bm.minute_line(item))  # (YILMAZ is not Yılmaz)
    relaxed = relaxed.replace(", ", " ; ").replace("-", "\u2013")
    assert _outcomes({**files, bmt.MINUTES: _minutes(p, {2: relaxed})}, truth)["minutes"] == Outcome.SATISFIED
    assert _outcomes({**files, bmt.MINUTES: b"not a zip"}, truth)["minutes"] == Outcome.FAILED
    everything = " ".join(bm.minute_line(i) for i in p["items"])  # one paragraph under every heading: still right
    assert _outcomes({**files, bmt.MINUTES: _minutes(p, {n + 1: everything for n in range(4)})},
                     truth)["minutes"] == Outcome.SATISFIED  # (each section has its own line; others do no harm)


@pytest.mark.unit
def test_a_filing_record_with_wrong_codes_or_checksum_fails() -> None:
    p = _plan(5)
    truth, files = _truth(p), _final(p)
    good = files[bmt.FILING].decode()
    bad = {"a code": good.replace(CODES[0], "FC-XXXXXX"), "a missing item": good.split("\n", 1)[1],
           "an extra item": good + "9 | FC-AAAAAA\n", "twice": good.splitlines()[0] + "\n" + good,
           "three fields": good.replace(" | ", " | x | ", 1)}
    for why, text in bad.items():
        assert _outcomes({**files, bmt.FILING: text.encode()}, truth)["filing_codes"] == Outcome.FAILED, why
    resaved = _minutes(p, {1: bm.minute_line(p["items"][0]) + " "})
    outcome = _outcomes({**files, bmt.MINUTES: resaved}, truth)
    assert outcome["minutes_checksum"] == Outcome.FAILED and outcome["minutes"] == Outcome.SATISFIED
    no_sum = "".join(line + "\n" for line in good.splitlines() if not line.startswith("minutes.odt"))
    assert _outcomes({**files, bmt.FILING: no_sum.encode()}, truth)["minutes_checksum"] == Outcome.FAILED
    template = bmt.template(p)
    unwritten = {**files, bmt.MINUTES: template,
                 bmt.FILING: f"minutes.odt | {hashlib.sha256(template).hexdigest()}\n".encode()}
    assert _outcomes(unwritten, truth)["minutes_checksum"] == Outcome.FAILED
    unfiled = {**files, bmt.RECORD: files[bmt.RECORD].decode().splitlines()[0].encode()}
    assert _outcomes(unfiled, truth)["filing_codes"] == Outcome.FAILED


# ---- the oracle's retries, against a fake shell ---------------------------------------------------------------


def _drive_write(saves: list[bool]) -> list[dict[str, Any]]:
    """Run the oracle's typing of item 2 against a fake shell whose n-th wait for a save sees it or not (the
    saved file has one stray paragraph above item 2's line) and a screen where the desk has no focus ring."""
    ctx = SimpleNamespace(truth={"writer": [0, 40, 700, 640], "desk_at": [716, 40]},
                          obs={"terminal": "", "screen": np.full((720, 1280, 3), 255, dtype=np.uint8)})
    steps = bmt._write(ctx, 2, "Decision: X.", marked=True)  # type: ignore[arg-type]
    actions: list[dict[str, Any]] = []
    try:
        action = next(steps)
        while True:
            actions.append(action)
            if action.get("kind") == "shell" and "saved" in action.get("command", ""):
                saved = saves.pop(0)
                places = 'PLACES {"1": 3, "2": 6, "3": 8}\n' if "PLACES" in action["command"] else ""
                ctx.obs = {**ctx.obs, "terminal": f"saved\n{places}" if saved else ""}
            action = steps.send(None)
    except StopIteration:
        return actions


@pytest.mark.unit
def test_the_oracle_types_only_after_a_save_shows_the_keys_have_run() -> None:
    actions = _drive_write([False, True, True])
    keys = [a["keys"] for a in actions if a.get("kind") == "key"]
    assert keys.count("ctrl+Down") == 6 and keys.count("ctrl+s") == 3  # where the saved file has the line
    assert actions[-1] == {"kind": "type", "text": "Decision: X."}
    assert sum(a.get("kind") == "type" for a in actions) == 1
    assert not any(a.get("kind") == "type" for a in _drive_write([False] * bmt.SAVE_TRIES))
    assert not any(a.get("kind") == "type" for a in _drive_write([True, False] * bmt.SAVE_TRIES))


@pytest.mark.unit
def test_the_places_program_counts_paragraphs_as_ctrl_down_does(tmp_path: Path) -> None:
    p = _plan(6)
    (tmp_path / "minutes").mkdir()
    target = tmp_path / "minutes" / "minutes.odt"

    def places(data: bytes) -> dict[int, int] | None:
        target.write_bytes(data)
        out = subprocess.run([sys.executable, "-c", bmt.PLACES_PY], capture_output=True, text=True, check=True,
                             env={**os.environ, "HOME": str(tmp_path)}).stdout
        return bmt.saved_places(out)

    assert places(bmt.template(p)) == {i["number"]: 2 * i["number"] + 1 for i in p["items"]}
    paragraphs = [("h", "Minutes"), ("p", "x"), ("h", "Item 1: A"), ("p", "line"), ("p", ""), ("h", "Item 2: B"),
                  ("p", "[ITEM2]")]
    assert places(odt(paragraphs)) == {1: 3, 2: 6}
    assert bmt.saved_places("PLACES {oops") is None


# ---- the real desk on a real X server, through the real agent ------------------------------------------


@pytest.mark.xvfb
def test_the_desk_shows_items_as_pixels_files_them_in_order_and_shows_codes(xvfb: XvfbDisplay, client: GuestClient,
                                                                            tmp_path: Path) -> None:
    items = _plan(0)["items"][:2]
    conf = {"items": [{"lines": i["lines"], "reference": i["reference"]} for i in items], "layout": bm.layout()}

    def shot() -> Any:
        return client.screenshot().image

    def enter(text: str) -> None:
        client.click(*bm.centre(at, bm.REF_ENTRY))
        client.key("ctrl+slash")
        client.type_text(text)

    def status(want: str) -> None:
        wait_for(lambda: bm.read_status(shot(), at) == want, 20, what=want)

    with pixel_app(FIXTURES / "minutes_desk.py", conf, tmp_path, xvfb.display) as proc:
        at = list(wait_for(lambda: bm.origin(shot(), (0, 0)), 20, what="the desk drawn"))
        client.click(*bm.centre(at, bm.REF_ENTRY))
        wait_for(lambda: bm.entry_focused(shot(), at), 20, what="the entry's focus ring")
        assert bm.read_transcript(shot(), at)[0] == ""  # nothing before a click
        enter(items[0]["reference"] + "\n")
        status("PRESS SHOW ITEM TO SEE ITEM 1")
        client.click(*bm.centre(at, bm.SHOW_BUTTON))
        wait_for(lambda: bm.read_transcript(shot(), at) == items[0]["lines"], 20, what="item 1 read back")
        enter("x" * 200 + "é€\n")
        status("REFUSED: TYPE THE ITEM'S MINUTE REFERENCE")
        enter(items[1]["reference"] + "\n")
        status("REFUSED: WRONG REFERENCE FOR ITEM 1")
        assert bm.read_transcript(shot(), at) == items[0]["lines"]
        enter(items[0]["reference"].lower() + "\n")
        wait_for(lambda: bm.read_transcript(shot(), at) == items[1]["lines"], 20, what="item 2 after filing")
        first = json.loads(proc.stdout.readline())
        assert first["item"] == 1 and first["reference"] == items[0]["reference"]
        status(f"ITEM 1 FILED AS {first['code']}")
        enter(items[0]["reference"] + "\n")  # again: the same code, item 2 still showing
        status(f"ITEM 1 FILED AS {first['code']}")
        assert bm.read_transcript(shot(), at) == items[1]["lines"]
        enter(items[1]["reference"] + "\n")
        second = json.loads(proc.stdout.readline())
        status(f"ITEM 2 FILED AS {second['code']}")
        assert second["item"] == 2 and second["code"] != first["code"]
        client.click(*bm.centre(at, bm.SHOW_BUTTON))
        wait_for(lambda: bm.read_transcript(shot(), at) == items[0]["lines"], 20, what="browsing after all filed")
