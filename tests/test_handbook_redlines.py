"""Weave-Docs-8 (handbook redlines) without a VM: seeds and redlines, the oracle's shell programs run by the real
python3, sqlite3, sha256sum and diff on the seed's handbook and register, the clauses on right and wrong finals
(unit), and the real Legal Review window on Xvfb through the real agent (xvfb): the redline read back off the
screen, the refusals, the approval code and the next redline opening only after it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.docs import _handbook as hb
from weavegym.envs.tasks.docs import handbook_redlines as hr
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(hr.__file__).parent / "fixtures"


def _plan(seed: int) -> dict[str, Any]:
    return hb.plan(np.random.default_rng(seed))


def _truth(seed: int) -> dict[str, Any]:
    p = _plan(seed)
    return {"count": len(p["redlines"]), "original": p["original"], "expected": p["expected"],
            "stages": p["stages"], "redlines": [{k: r[k] for k in ("kind", "section", "paragraph", "line", "before",
                                                                    "after")} for r in p["redlines"]]}


# ---- seeds and redlines ------------------------------------------------------------------------------------

def test_seeds_vary_the_handbook_the_register_and_the_redlines() -> None:
    plans = [_plan(seed) for seed in range(8)]
    assert len({p["expected"] for p in plans}) == 8
    assert len({tuple((r["kind"], r["section"], r["paragraph"]) for r in p["redlines"]) for p in plans}) >= 6
    assert _plan(5) == _plan(5)


@pytest.mark.parametrize("seed", range(10))
def test_every_redline_is_drawable_reads_back_and_changes_one_paragraph(seed: int) -> None:
    p = _plan(seed)
    assert len(p["redlines"]) == 4 and hb.DPO in {r["kind"] for r in p["redlines"]}
    previous = p["original"]
    for number, (r, stage) in enumerate(zip(p["redlines"], p["stages"], strict=True), 1):
        assert len(r["lines"]) <= hb.MAX_LINES
        assert all(len(line) <= hb.LINE_CHARS and not pixel_font.unsupported(line) for line in r["lines"])
        parsed = hb.parse_redline(r["lines"])
        assert parsed is not None and parsed["kind"] == r["kind"] and parsed["number"] == number
        assert (parsed["section"], parsed["paragraph"]) == (r["section"], r["paragraph"])
        changed = [i for i, (a, b) in enumerate(zip(previous.split("\n"), stage.split("\n"), strict=True)) if a != b]
        assert changed == [r["line"]]
        previous = stage
    # at least one redline is typed with non-ASCII characters (the DPO's name always is not ASCII)
    assert any(ord(c) > 127 for c in p["values"][hb.DPO])
    assert any(ord(c) > 127 for c in p["original"])  # names, €, « », accents


# ---- the oracle's shell programs on the real files ----------------------------------------------------------

def _home(seed: int, tmp_path: Path) -> Path:
    home = tmp_path / f"home-{seed}"
    for folder in ("handbook", "reference", "policy", "changes"):
        (home / folder).mkdir(parents=True)
    p = _plan(seed)
    (home / "handbook" / "staff-handbook.md").write_text(p["original"], encoding="utf-8")
    (home / "reference" / "staff-handbook.orig.md").write_text(p["original"], encoding="utf-8")
    (home / "policy" / "register.db").write_bytes(database_bytes(hr.SCHEMA, {"policy": p["register"]}))
    return home


def _run(argv: list[str], stdin: str = "") -> str:
    env = {"PATH": os.environ["PATH"], "LC_ALL": "C.UTF-8"}
    return subprocess.run(argv, input=stdin, check=True, capture_output=True, text=True, encoding="utf-8",
                          env=env).stdout


def _mousepad(path: Path, plan: Mapping[str, str]) -> None:
    """What Mousepad's search bar and typing do: the first match (case-insensitive) replaced, the file saved."""
    text = path.read_text(encoding="utf-8")
    at = text.lower().index(plan["find"].lower())
    path.write_text(text[:at] + plan["replace"] + text[at + len(plan["find"]):], encoding="utf-8")


def _oracle_offline(seed: int, home: Path, skip: int | None = None) -> list[dict[str, Any]]:
    """The oracle's steps with each redline read from its drawn lines, Mousepad and the Legal Review simulated."""
    p = _plan(seed)
    handbook = home / "handbook" / "staff-handbook.md"
    records: list[dict[str, Any]] = []
    approvals = home / "changes" / "approvals.txt"
    for number, r in enumerate(p["redlines"], 1):
        if number == skip:
            continue
        redline = hb.parse_redline(r["lines"])
        assert redline is not None
        out = _run([sys.executable, "-"], hb.plan_program(redline, str(handbook), str(home / "policy" / "register.db")))
        plan = json.loads(hb.PLAN_LINE.findall(out)[-1])
        assert handbook.read_text(encoding="utf-8").lower().count(plan["find"].lower()) == 1
        _mousepad(handbook, plan)
        tag = _run(["bash", "-c", hb.tag_command(str(handbook), "0" * 64)]).split()
        assert tag[0] == "TAG" and tag[1] == hashlib.sha256(handbook.read_bytes()).hexdigest()[:8]
        stage = p["stages"][number - 1]
        if hb.digest(handbook.read_text(encoding="utf-8")) != hb.digest(stage):
            continue  # the Legal Review would refuse
        records.append({"redline": number, "tag": tag[1], "code": f"C{number}AAAA"[:6].replace("1", "J")})
        with approvals.open("a") as out_file:
            out_file.write(f"R{number} {records[-1]['code']}\n")
    subprocess.run(["bash", "-c", f"diff -u {home}/reference/staff-handbook.orig.md {handbook} > "
                                  f"{home}/changes/handbook.diff; true"], check=True)
    return records


def _files(home: Path, records: list[dict[str, Any]]) -> dict[str, bytes]:
    files = {hr.HANDBOOK: (home / "handbook" / "staff-handbook.md").read_bytes(),
             hr.RECORD: "".join(json.dumps(r) + "\n" for r in records).encode(),
             hr.DIFF: (home / "changes" / "handbook.diff").read_bytes()}
    if (home / "changes" / "approvals.txt").exists():
        files[hr.APPROVALS] = (home / "changes" / "approvals.txt").read_bytes()
    return files


def _outcomes(files: Mapping[str, bytes], truth: Mapping[str, Any]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, truth).outcome for c in hr.TASK.clauses}  # type: ignore[arg-type]


ALL = {c.name: Outcome.SATISFIED for c in hr.TASK.clauses}


@pytest.mark.parametrize("seed", [0, 3, 6, 7])
def test_the_oracles_programs_satisfy_every_clause(seed: int, tmp_path: Path) -> None:
    home = _home(seed, tmp_path)
    records = _oracle_offline(seed, home)
    assert len(records) == 4
    files = _files(home, records)
    assert _outcomes(files, _truth(seed)) == ALL
    assert hb.norm(files[hr.HANDBOOK].decode()) == hb.norm(_truth(seed)["expected"])


def test_a_skipped_redline_fails_the_handbook_review_and_codes(tmp_path: Path) -> None:
    seed = 1
    home = _home(seed, tmp_path)
    files = _files(home, _oracle_offline(seed, home, skip=3))
    outcomes = _outcomes(files, _truth(seed))
    # redline 4 is refused once 3 is missing (stages are cumulative): two redlines approved of four
    assert outcomes["handbook_text"] is Outcome.PARTIAL
    assert outcomes["review_approved"] is Outcome.PARTIAL and outcomes["approval_codes"] is Outcome.PARTIAL
    assert outcomes["change_diff"] is Outcome.SATISFIED  # the diff still records what was done


def test_wrong_values_other_edits_and_an_untouched_handbook_fail(tmp_path: Path) -> None:
    seed = 2
    truth = _truth(seed)
    home = _home(seed, tmp_path)
    files = _files(home, _oracle_offline(seed, home))
    final = files[hr.HANDBOOK].decode()
    dpo = next(r for r in truth["redlines"] if r["kind"] == hb.DPO)
    ascii_name = dpo["after"].encode("ascii", "ignore").decode()
    wrong = final.replace(dpo["after"], ascii_name).encode()
    assert _outcomes({**files, hr.HANDBOOK: wrong}, truth)["handbook_text"] is Outcome.PARTIAL
    other = final.replace("## 1. Welcome", "## 1. Hello").encode()
    assert _outcomes({**files, hr.HANDBOOK: other}, truth)["handbook_text"] is Outcome.FAILED
    untouched = {**files, hr.HANDBOOK: truth["original"].encode()}
    outcomes = _outcomes(untouched, truth)
    assert outcomes["handbook_text"] is Outcome.FAILED and outcomes["change_diff"] is Outcome.FAILED
    # whitespace within lines, CRLF and the trailing newline are no difference
    loose = final.replace(". ", ".  ").replace("\n", "\r\n").rstrip() .encode()
    assert _outcomes({**files, hr.HANDBOOK: loose}, truth)["handbook_text"] is Outcome.SATISFIED
    added = (final + "\nExtra line.\n").encode()
    assert _outcomes({**files, hr.HANDBOOK: added}, truth)["handbook_text"] is Outcome.FAILED


def test_forged_codes_a_lost_record_and_a_bad_diff_fail(tmp_path: Path) -> None:
    seed = 4
    truth = _truth(seed)
    home = _home(seed, tmp_path)
    records = _oracle_offline(seed, home)
    files = _files(home, records)
    forged = {**files, hr.APPROVALS: b"R1 ZZZZZZ\nR2 ZZZZZZ\nR3 ZZZZZZ\nR4 ZZZZZZ\n"}
    assert _outcomes(forged, truth)["approval_codes"] is Outcome.FAILED
    no_record = {k: v for k, v in files.items() if k != hr.RECORD}
    outcomes = _outcomes(no_record, truth)
    assert outcomes["review_approved"] is outcomes["approval_codes"] is Outcome.FAILED
    no_approvals = {k: v for k, v in files.items() if k != hr.APPROVALS}
    assert _outcomes(no_approvals, truth)["approval_codes"] is Outcome.FAILED
    reversed_diff = subprocess.run(["diff", "-u", str(home / "handbook" / "staff-handbook.md"),
                                    str(home / "reference" / "staff-handbook.orig.md")], capture_output=True).stdout
    for bad in (b"", b"not a diff\n", reversed_diff):
        assert _outcomes({**files, hr.DIFF: bad}, truth)["change_diff"] is Outcome.FAILED
    truncated = b"".join(files[hr.DIFF].splitlines(keepends=True)[:-1])
    assert _outcomes({**files, hr.DIFF: truncated}, truth)["change_diff"] is Outcome.FAILED


def test_apply_unified_handles_a_missing_final_newline() -> None:
    original = "a\nb\nc\n"
    diff = "--- x\n+++ y\n@@ -2,2 +2,2 @@\n b\n-c\n+C\n\\ No newline at end of file\n"
    assert hr.apply_unified(original, diff) == "a\nb\nC"
    assert hr.apply_unified(original, diff.replace(" b\n", " B\n")) is None


def test_the_oracle_is_denied_the_redlines_and_the_expected_text() -> None:
    truth = {**_truth(0), "review_at": [830, 0], "targets": {}}
    assert set(hr.TASK.oracle_truth(truth)) == {"count", "review_at", "targets"}


# ---- the real Legal Review on a real X server, through the real guest agent ---------------------------------

def _origin(client: GuestClient) -> tuple[int, int]:
    wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == hb.TITLE), None), 20,
             what="the Legal Review mapped")
    return wait_for(lambda: hb.origin(client.screenshot().image), 20, what="its heading drawn")


def _status(client: GuestClient, at: tuple[int, int], want: str) -> None:
    wait_for(lambda: hb.read_status(client.screenshot().image, at) == want, 20, what=f"status {want!r}")


@pytest.mark.xvfb
def test_the_legal_review_opens_redlines_in_turn_refuses_and_approves(xvfb: XvfbDisplay, client: GuestClient,
                                                                      tmp_path: Path) -> None:
    p = _plan(3)
    handbook = tmp_path / "staff-handbook.md"
    handbook.write_text(p["original"], encoding="utf-8")
    shutil.copy(FIXTURES / "legal_review.py", tmp_path / "legal_review.py")
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    conf = {"handbook": str(handbook), "redlines": [r["lines"] for r in p["redlines"]],
            "stages": [hb.digest(s) for s in p["stages"]], "layout": hb.layout()}
    proc = subprocess.Popen([sys.executable, str(tmp_path / "legal_review.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "DISPLAY": xvfb.display, "LANG": "C.UTF-8"})
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(conf, ensure_ascii=False).encode())
    proc.stdin.close()
    try:
        at = _origin(client)
        assert hb.read_redline(client.screenshot().image, at) == []  # nothing before a click
        open_at, tag_at = hb.centre(at, hb.OPEN_BOX), hb.centre(at, hb.TAG_BOX)
        client.click(*open_at)
        wait_for(lambda: hb.read_redline(client.screenshot().image, at) == p["redlines"][0]["lines"], 20,
                 what="redline 1 read back exactly")
        client.click(*open_at)  # a second click does not skip ahead
        assert not hb.tag_focused(client.screenshot().image, at)  # a click on the button leaves the entry unfocused
        client.click(*tag_at)
        wait_for(lambda: hb.tag_focused(client.screenshot().image, at), 20, what="the tag entry's focus ring")
        client.type_text("x" * 400 + "é€«»\n")  # huge and odd input: refused, the window stays usable
        _status(client, at, "REFUSED: TAG MUST BE 8 HEX DIGITS")
        tag = hashlib.sha256(handbook.read_bytes()).hexdigest()[:8]
        for typed, why in ((tag, "REFUSED: REDLINE NOT APPLIED"), ("0badc0de", "REFUSED: NOT THE SAVED FILE'S TAG")):
            client.click(*tag_at)
            client.key("ctrl+slash")
            client.type_text(f"{typed}\n")
            _status(client, at, why)
        assert hb.read_redline(client.screenshot().image, at)[0] == "REDLINE 1 OF 4"
        handbook.write_text(p["stages"][0].replace(". ", ".  "), encoding="utf-8")  # saved with a double space
        tag = hashlib.sha256(handbook.read_bytes()).hexdigest()[:8]
        client.click(*tag_at)
        client.key("ctrl+slash")
        client.type_text(tag.upper() + "\n")
        record = json.loads(proc.stdout.readline())
        assert record["redline"] == 1 and record["tag"] == tag
        _status(client, at, f"REDLINE 1 APPROVED CODE {record['code']}")
        client.click(*open_at)
        wait_for(lambda: hb.read_redline(client.screenshot().image, at) == p["redlines"][1]["lines"], 20,
                 what="redline 2 after the approval")
    finally:
        proc.kill()
        proc.wait()


def test_the_oracle_replayed_without_one_channel_still_finishes_within_the_step_limit() -> None:
    """What the one-channel adversaries see: a screen where no redline ever shows, or a shell that answers nothing."""
    ctx = SimpleNamespace(params={}, truth={"count": 1, "review_at": [830, 0], "targets": {
        "open": [900, 60], "tag": [900, 325], "text": [400, 400], "editor": [0, 0, 820, 690]}},
        obs={"screen": np.full((720, 1280, 3), 255, dtype=np.uint8), "terminal": ""})

    actions = list(hr.oracle(ctx))  # type: ignore[arg-type]
    # one redline's worth of waiting: four redlines stay well inside the limit
    assert actions[-1] == {"kind": "done"} and 4 * len(actions) < hr.TASK.max_steps
