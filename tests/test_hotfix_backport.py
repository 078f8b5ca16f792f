"""Weave-DevOps-8 (hotfix backport) without a VM: the seeded history built by the real git (every fix cherry-picks
cleanly, the tests stay green, the oracle's shell lines find each fix and check the release head), the clauses on
right and wrong final repositories, records and notes (unit), and the real Release Board on Xvfb through the real
agent (xvfb): the ticket read back off the screen, the refusals, a sign-off after a real cherry-pick."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pixel_apps import pixel_app

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.devops import backport_history as bh
from weavegym.envs.tasks.devops import hotfix_backport as hb
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(hb.__file__).parent / "fixtures"
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=Release Desk", "-c", "user.email=desk@x", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def build(tmp: Path, seed: int) -> tuple[bh.History, dict[str, Any], Path]:
    """The seed's repository under tmp/shop, built by the task's own build script with the host's git."""
    history = bh.plan_history(np.random.default_rng(seed))
    (tmp / "stream").write_bytes(bh.fast_import_stream(history))
    (tmp / "spec.json").write_text(bh.build_spec(history, str(tmp / "shop"), str(tmp / "stream")))
    out = subprocess.run([sys.executable, str(FIXTURES / "build_backport_repo.py"), str(tmp / "spec.json")],
                         check=True, capture_output=True, text=True).stdout
    return history, json.loads(out.strip().splitlines()[-1]), tmp / "shop"


def truth_of(history: bh.History, built: Mapping[str, Any]) -> dict[str, Any]:
    return {"repo": hb.REPO, "release": history.release, "release_tip": built["release_tip"],
            "main_tip": built["main_tip"], "tickets": hb.ticket_truth(history, built)}


def repo_files(repo: Path) -> dict[str, bytes]:
    """The repository's .git as the probe sees it, at the guest's path."""
    return {f"{hb.REPO}/.git/{p.relative_to(repo / '.git')}": p.read_bytes()
            for p in (repo / ".git").rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def seed0(tmp_path_factory: pytest.TempPathFactory) -> tuple[bh.History, dict[str, Any], Path]:
    return build(tmp_path_factory.mktemp("seed0"), 0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_seed_builds_a_history_whose_fixes_pick_cleanly(tmp_path: Path, seed: int) -> None:
    history, built, repo = build(tmp_path, seed)
    assert built["tests_ok"] and built["values"] == [t["wants"] for t in history.tickets]
    assert len(built["shas"]) == len(history.commits) and 30 <= len(history.commits) <= 46
    assert git(repo, "symbolic-ref", "HEAD") == f"refs/heads/{history.release}"
    assert git(repo, "config", "user.name") == bh.DESK_NAME
    for ticket in history.tickets:
        assert ticket["gives"] != ticket["wants"]
        subject = history.commits[ticket["fix"]].subject
        assert ticket["id"] not in subject and ticket["function"] not in subject  # the subject does not tell
    assert len({t["module"] for t in history.tickets} | set(history.decoys)) == 5


def test_the_oracles_shell_lines_find_each_fix_and_check_the_release_head(
        seed0: tuple[bh.History, dict[str, Any], Path], tmp_path: Path) -> None:
    history, built, repo = seed0
    shutil.copytree(repo, tmp_path / "desk")
    (tmp_path / "work").mkdir()
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(tmp_path / "desk"), str(tmp_path / "work" / "shop")],
                   check=True)
    head = built["release_tip"]
    for number, ticket in enumerate(history.tickets):
        shown = {"function": ticket["function"], "args": ",".join(map(str, ticket["args"])), "wants": ticket["wants"]}
        line = hb.find_fix_command(shown, history.release).replace(hb.WORK, str(tmp_path / "work"))
        out = subprocess.run(["bash", "-c", line], check=True, capture_output=True, text=True).stdout
        assert out.split() == ["FIX", built["shas"][ticket["fix"]]]
        git(tmp_path / "desk", "cherry-pick", built["shas"][ticket["fix"]])  # what gitk does
        line = hb.check_command(shown, history.release, head).replace(hb.WORK, str(tmp_path / "work")).replace(
            hb.REPO, str(tmp_path / "desk"))
        out = subprocess.run(["bash", "-c", line], check=True, capture_output=True, text=True).stdout
        assert f"VALUE {ticket['wants']}" in out and "OK" in out
        head = git(tmp_path / "desk", "rev-parse", "HEAD")
        assert git(tmp_path / "desk", "rev-parse", "HEAD^{tree}") == built["trees"][number]
        assert f"HEAD {head} {history.commits[ticket['fix']].subject}" in out


# ---- the clauses on final states ------------------------------------------------------------------------------

def final(seed0: tuple[bh.History, dict[str, Any], Path], tmp_path: Path, picks: list[str] | None = None,
          move_main: bool = False) -> tuple[dict[str, bytes], dict[str, Any], list[str]]:
    """A finished episode's files: the desk repository after the picks, the board's record and the notes."""
    history, built, repo = seed0
    desk = tmp_path / "desk"
    shutil.copytree(repo, desk)
    truth = truth_of(history, built)
    fixes = [t["fix"] for t in truth["tickets"]]
    heads = []
    for sha in fixes if picks is None else picks:
        git(desk, "cherry-pick", sha)
        heads.append(git(desk, "rev-parse", "HEAD"))
    if move_main:
        git(desk, "branch", "-f", "main", "main~1")
    codes = ["ABC234", "XYZ789", "QRS456"]
    records = [{"ticket": n + 1, "id": t["id"], "fix": t["fix"], "head": heads[n] if n < len(heads) else "",
                "code": codes[n]} for n, t in enumerate(truth["tickets"])]
    notes = "".join(f"{t['id']} | {codes[n]} | {heads[n][:9] if n < len(heads) else '0000000'} | {t['wants']}\n"
                    for n, t in enumerate(truth["tickets"]))
    files = {**repo_files(desk), hb.RECORD: "".join(json.dumps(r) + "\n" for r in records).encode(),
             hb.NOTES: notes.encode()}
    return files, truth, heads


def outcomes(files: Mapping[str, bytes], truth: Mapping[str, Any]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, truth).outcome for c in hb.TASK.clauses}  # type: ignore[arg-type]


ALL = {c.name: Outcome.SATISFIED for c in hb.TASK.clauses}


def test_a_release_backported_right_satisfies_every_clause(seed0: tuple[bh.History, dict[str, Any], Path],
                                                           tmp_path: Path) -> None:
    files, truth, _heads = final(seed0, tmp_path)
    assert outcomes(files, truth) == ALL


def test_wrong_order_a_decoy_a_missing_pick_or_a_moved_main_fail(seed0: tuple[bh.History, dict[str, Any], Path],
                                                                 tmp_path: Path) -> None:
    history, built, _repo = seed0
    fixes = [built["shas"][t["fix"]] for t in history.tickets]
    decoy = built["shas"][next(iter(history.decoys.values()))]
    files, truth, _ = final(seed0, tmp_path / "a", picks=[fixes[1], fixes[0], fixes[2]])
    assert outcomes(files, truth)["backported"] != Outcome.SATISFIED
    files, truth, _ = final(seed0, tmp_path / "b", picks=[*fixes, decoy])
    got = outcomes(files, truth)
    assert got["backported"] == Outcome.FAILED
    files, truth, _ = final(seed0, tmp_path / "c", picks=fixes[:2])
    got = outcomes(files, truth)
    assert got["backported"] == Outcome.PARTIAL and got["signed_off"] == Outcome.PARTIAL
    assert got["release_notes"] == Outcome.PARTIAL
    files, truth, _ = final(seed0, tmp_path / "d", move_main=True)
    assert outcomes(files, truth)["main_unchanged"] == Outcome.FAILED
    files, truth, _ = final(seed0, tmp_path / "e", picks=[])
    got = outcomes(files, truth)
    assert got["backported"] == got["signed_off"] == got["release_notes"] == Outcome.FAILED


def test_wrong_records_and_notes_fail(seed0: tuple[bh.History, dict[str, Any], Path], tmp_path: Path) -> None:
    files, truth, heads = final(seed0, tmp_path)
    ids = [t["id"] for t in truth["tickets"]]
    bad = dict(files)
    del bad[hb.RECORD]
    got = outcomes(bad, truth)
    assert got["signed_off"] == got["release_notes"] == Outcome.FAILED
    bad = dict(files)
    bad[hb.RECORD] = files[hb.RECORD].replace(heads[0].encode(), heads[1].encode(), 1)
    assert outcomes(bad, truth)["signed_off"] == Outcome.PARTIAL
    wants = truth["tickets"][0]["wants"]
    for old, new in ((b"ABC234", b"ABC235"), (heads[0][:9].encode(), heads[1][:9].encode()),
                     (f"| {wants}\n".encode(), f"| {wants + 1}\n".encode())):
        bad = dict(files)
        bad[hb.NOTES] = files[hb.NOTES].replace(old, new, 1)
        assert outcomes(bad, truth)["release_notes"] == Outcome.PARTIAL, new
    for text in (b"ticket | code | backport | value\n" + files[hb.NOTES],  # a header line
                 files[hb.NOTES].split(b"\n", 1)[1],  # a ticket left out
                 b""):
        bad = dict(files)
        bad[hb.NOTES] = text
        assert outcomes(bad, truth)["release_notes"] == Outcome.FAILED, text
    del bad[hb.NOTES]
    assert outcomes(bad, truth)["release_notes"] == Outcome.FAILED
    rows, problem = hb.parse_notes(files[hb.NOTES].decode())
    assert problem == "" and sorted(rows) == sorted(ids)


# ---- the real board on a real X server, through the real guest agent ------------------------------------------

@pytest.mark.xvfb
def test_the_board_shows_a_ticket_as_pixels_refuses_and_signs_off_a_real_backport(
        seed0: tuple[bh.History, dict[str, Any], Path], xvfb: XvfbDisplay, client: GuestClient,
        tmp_path: Path) -> None:
    history, built, repo = seed0
    desk = tmp_path / "desk"
    shutil.copytree(repo, desk)
    tickets = hb.ticket_truth(history, built)
    layout = {**hb.layout(), "at": [0, 0]}
    conf = {"repo": str(desk), "branch": history.release, "layout": layout,
            "tickets": [{k: t[k] for k in ("id", "call", "gives", "wants", "fix", "tree")} for t in tickets]}
    at = (0, 0)

    def status() -> str:
        return pixel_font.read_text(client.screenshot().image, hb.STATUS[0] + hb.PAD, hb.STATUS[1] + hb.PAD,
                                    hb.SCALE, 34)

    def enter(text: str) -> None:
        client.click(hb.ENTRY[0] + hb.ENTRY[2] // 2, hb.ENTRY[1] + hb.ENTRY[3] // 2, count=2)
        client.type_text(text)
        client.click(hb.BUTTON[0] + hb.BUTTON[2] // 2, hb.BUTTON[1] + hb.BUTTON[3] // 2)

    with pixel_app(FIXTURES / "release_board.py", conf, tmp_path, xvfb.display) as proc:
        wait_for(lambda: pixel_font.read_text(client.screenshot().image, hb.TICKET[0] + hb.PAD, hb.TICKET[1] + hb.PAD,
                                              hb.SCALE, 20) == "PRESS OPEN QUEUE", 20, what="the closed queue")
        enter(tickets[0]["fix"][:10])
        wait_for(lambda: status() == "OPEN THE QUEUE FIRST", 20, what="the refusal before the queue is open")
        client.click(hb.OPEN[0] + hb.OPEN[2] // 2, hb.OPEN[1] + hb.OPEN[3] // 2)
        shown = wait_for(lambda: hb.read_ticket(client.screenshot().image, at, 1), 20, what="ticket 1 read back")
        first = history.tickets[0]
        assert shown == {"id": first["id"], "function": first["function"], "gives": first["gives"],
                         "wants": first["wants"], "args": ",".join(map(str, first["args"]))}
        assert pixel_font.find_drawn(client.screenshot().image, hb.HEADING, at, hb.HEADING_AT, hb.HEADING_SCALE,
                                     reach=4) == at
        enter("not a hash " * 20)  # odd and long text: refused, the board stays usable
        wait_for(lambda: status() == "TYPE 7 TO 40 HEX DIGITS", 20, what="the refusal of text")
        enter(tickets[1]["fix"][:10])
        wait_for(lambda: status() == f"NOT THE FIX FOR {first['id']}", 20, what="the refusal of another fix")
        enter(tickets[0]["fix"][:10])
        wait_for(lambda: status() == f"NOT ON {history.release.upper()} YET", 20, what="the refusal before the pick")
        git(desk, "cherry-pick", tickets[0]["fix"])
        enter(tickets[0]["fix"][:10])
        line = json.loads(proc.stdout.readline())
        assert line["ticket"] == 1 and line["fix"] == tickets[0]["fix"] and line["head"] == git(desk, "rev-parse",
                                                                                                  "HEAD")
        wait_for(lambda: hb.read_result(client.screenshot().image, at, 1) == f"{first['id']} SIGNED OFF "
                 f"{line['code']}", 20, what="the sign-off code read back")
        wait_for(lambda: hb.read_ticket(client.screenshot().image, at, 2), 20, what="ticket 2 shown next")


def test_the_oracle_finds_gitks_selected_row_and_its_menu_on_a_drawn_screen() -> None:
    gitk = [0, 24, 800, 690]
    screen = np.full((720, 1280, 3), 255, dtype=np.uint8)
    assert hb.selected_row(screen, gitk) is None
    top = gitk[1] + 100
    screen[top:top + 13, 40:200] = hb.SELECTED  # the subject's highlight, right of the graph
    screen[top:top + 13, 280:400] = hb.SELECTED  # the author's
    screen[top + 4:top + 9, 10:16] = (0, 0, 0)  # a graph dot
    row = hb.selected_row(screen, gitk)
    assert row == top + 6 and hb.subject_x(screen, gitk, row) == 52
    labelled = screen.copy()
    labelled[top + 1:top + 12, 20:38] = (0, 255, 0)  # a branch label: a branch's tip, never a fix to pick
    assert hb.subject_x(labelled, gitk, row) is None
    screen[gitk[1] + 150:gitk[1] + 160, 280:400] = hb.SELECTED  # a second band: no single selected row
    assert hb.selected_row(screen, gitk) is None
    menu = screen.copy()
    menu[row + 2:row + 320, 52:300] = (217, 217, 217)
    menu[row + 20:row + 300:20, 60:200] = (0, 0, 0)
    assert hb.menu_shown(screen, menu, 52, row) and not hb.menu_shown(screen, screen, 52, row)
