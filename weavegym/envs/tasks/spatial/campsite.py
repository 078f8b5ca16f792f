"""Weave-Spatial-7: pitch the campsite's tents, three fields between a Tk office, Tents and the shell.

Three apps, the data flowing field by field between the channels. The Campsite Office (a Tk app, the desktop
account's) shows the current field's site plan after a click, as dot-matrix pixels only: the trees and how many
tents each column and row takes. The agent writes the field as Tents' game id and has a program find the one
placement in the shell (tents beside their own trees, none touching, the counts met). The field goes into the real
sgt-tents window through Game > Specific..., the tents are pitched there by clicking and the game is saved into
~/campsite (a folder only the desktop account may write). At the office the agent types the pitch list; the right
one with the field's save takes the save's hash into the office's root-only record, shows a random permit code as
pixels only and opens the next field (shown only after another click). The shell keeps the allocation sheet in
~/office (only the workspace account may write there): each field, its permit code and its pitches.

Scoring: every field's save is a Tents game of that field played (not solved by the menu) to its placement; the
office allocated every field with the save as it is now; the sheet lists every field with the office's permit
code and its pitches. The seeds vary the fields (trees, counts) and the order of their sizes (6x6, 7x7, 8x8); the
permit codes are drawn in the VM at each allocation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import Channels, Prepared, Task
from weavegym.envs.tasks.games.sgt_common import saved_game
from weavegym.envs.tasks.item_records import numbered_records, per_item_verdict
from weavegym.envs.tasks.spatial._campsite_common import (
    APP,
    APP_DIR,
    CAMPSITE,
    CONF,
    COUNT,
    OFFICE,
    OFFICE_AT,
    PERMIT_LINE,
    RECORD,
    SHEET,
    SIZES,
    TENTS,
    TENTS_AT,
    TITLE,
    find_board,
    layout,
    origin,
    plan_lines,
    save_path,
)
from weavegym.envs.tasks.spatial._campsite_oracle import oracle
from weavegym.envs.tasks.spatial.tents import decode, draw_field, parse_refs, replay_tents
from weavegym.evaluators import Clause, GuiArtifactViaCli, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

START_SIZE = 5  # Tents opens on a random 5x5 game of its own, none of the fields

# ---- setup -------------------------------------------------------------------------------------------------


def draw_fields(rng: Any) -> list[dict[str, Any]]:
    """One field of each size in a random order, each with exactly one placement."""
    return [draw_field(rng, SIZES[int(i)], SIZES[int(i)]) for i in rng.permutation(COUNT)]


def setup(ctx: SetupContext) -> Prepared:
    fields = draw_fields(ctx.rng)
    # The campsite: the desktop account's alone (0755), so the shell cannot put a save there; the office folder: the
    # workspace account's alone (2755), so a terminal on the desktop cannot write the sheet.
    ctx.run(["install", "-d", "-m", "0755", "-o", DESKTOP_USER, "-g", SHARED_GROUP, CAMPSITE])
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, OFFICE])
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/campsite_office.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    conf = {"fields": [{"lines": plan_lines(n, f), "desc": f["id"].split(":", 1)[1], "pitches": f["pitches"],
                        "w": f["w"], "h": f["h"]} for n, f in enumerate(fields, 1)],
            "campsite": CAMPSITE, "layout": layout()}
    ctx.write_file(CONF, json.dumps(conf), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {CONF} > {RECORD}", name="campsite")
    ctx.place_window(ctx.wait_window(f"^{TITLE}$").id, OFFICE_AT)
    # A random game of its own, from the home, where its Save dialog opens.
    seed = int(ctx.rng.integers(1, 2**31))
    ctx.launch_gui(f"cd {HOME} && {{as_user}} {TENTS} '{START_SIZE}x{START_SIZE}#{seed}'", name="tents")
    ctx.place_window(ctx.wait_window("^Tents$").id, TENTS_AT)
    try:
        at = wait_for(lambda: origin(ctx.client.screenshot(hide_cursor=True).image), 120, what="office drawn",
                      max_poll=1.0)
        board = wait_for(lambda: find_board(ctx.client.screenshot(hide_cursor=True).image, START_SIZE), 120,
                         what="Tents' board at its place", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", CONF])  # the fields now live only in the office's memory
    return Prepared(params={}, truth={"fields": fields, "at": list(at), "board": list(board)})


# ---- the checker -------------------------------------------------------------------------------------------

def office_records(probe: Probe) -> dict[int, dict[str, Any]]:
    """{field: its allocation record} of the office's root-only record."""
    return numbered_records(probe, RECORD, "field")


def _squares(field: Mapping[str, Any]) -> set[tuple[int, int]]:
    return parse_refs(" ".join(field["pitches"]), field["w"], field["h"]) or set()


def judge_save(text: str | None, field: Mapping[str, Any], number: int) -> str:
    """'' when the save is a Tents game of the field played to its placement, else what is wrong."""
    saved = saved_game(text, "Tents")
    if saved is None:
        return f"field {number}: {save_path(number)} is missing or not a Tents save"
    size = f"{field['w']}x{field['h']}"
    try:
        same = decode(f"{size}:{saved[0]}") == decode(field["id"])
    except ValueError:
        same = False
    if not same:
        return f"field {number}: the save holds the field {saved[0][:60]!r}, the plan's is {field['id']!r}"
    tents, problem = replay_tents(field["id"], saved[1])
    if problem or tents is None:
        return f"field {number}: {problem}"
    want = _squares(field)
    if tents != want:
        return (f"field {number}: the save ends with {len(tents)} tents, {len(tents & want)} of the "
                f"{len(want)} pitches")
    return ""


def check_saves(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return per_item_verdict([judge_save(probe.read_text(save_path(n)), f, n) for n, f in enumerate(truth["fields"], 1)],
                    "the field's save is its plan with the tents pitched in Tents")


def check_allocated(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records, problems = office_records(probe), []
    if not records:
        return Verdict.failed("the office allocated no field")
    for number, _field in enumerate(truth["fields"], 1):
        data = probe.read_bytes(save_path(number))
        if number not in records:
            problems.append(f"field {number} was not allocated at the office")
        elif data is None or hashlib.sha256(data).hexdigest() != records[number].get("sha256"):
            problems.append(f"field {number}: the save is not the one the office took")
        else:
            problems.append("")
    return per_item_verdict(problems, "allocated at the office with the field's save as it is now")


def parse_sheet(text: str | None) -> tuple[dict[int, tuple[str, str]], str]:
    """({field: (permit, pitches)}, problem) of the sheet's 'N | permit | pitches' lines."""
    if text is None:
        return {}, f"{SHEET} does not exist"
    rows: dict[int, tuple[str, str]] = {}
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        found = PERMIT_LINE.match(line)
        if found is None:
            return {}, f"{SHEET} line {number} is not 'N | permit | pitches': {line[:60]!r}"
        rows[int(found.group(1))] = (found.group(2).upper(), found.group(3))
    return rows, "" if rows else f"{SHEET} has no line"


def check_sheet(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = parse_sheet(probe.read_text(SHEET))
    if problem:
        return Verdict.failed(problem)
    records, fields = office_records(probe), truth["fields"]
    want = list(range(1, len(fields) + 1))
    problems = [] if sorted(rows) == want else [f"lists fields {sorted(rows)}, the campsite's are {want}"]
    for number, field in enumerate(fields, 1):
        permit, pitches = rows.get(number, ("", ""))
        want_permit = str(records.get(number, {}).get("permit") or "")
        if not want_permit or permit != want_permit:
            problems.append(f"field {number}: permit {permit!r}, the office's is {want_permit or '(none)'!r}")
        elif parse_refs(pitches, field["w"], field["h"]) != _squares(field):
            problems.append(f"field {number}: pitches {pitches[:60]!r} are not the field's placement")
    return Verdict.check(not problems, "; ".join(problems[:4]) if problems else
                         f"every field with the office's permit code and its pitches ({len(fields)} lines)")


TASK = Task(
    id="Weave-Spatial-7",
    title="Pitch the campsite's tents: solve each field's placement, pitch it in Tents, allocate it at the office "
          "and keep the allocation sheet",
    instruction=(
        "You are the warden of a campsite with three fields to fill, one after another. The 'Campsite Office' window"
        " shows the current field's site plan after you press 'Show field': one line per row (rows 1, 2, ... from the"
        " top; columns A, B, ... from the left), 'T' a tree and '.' open ground, the number after each row being how"
        " many tents that row takes, and the bottom line how many tents each column takes. Every tree gets exactly "
        "one tent on a square next to it (left, right, above or below), every tent belongs to its own tree, no two "
        "tents touch, not even diagonally, and every row and column takes exactly its number; each field has one "
        "such placement, which a program in your shell can find. This is Simon Tatham's Tents puzzle: in the open "
        "Tents window enter the field with Game > Specific... as its game id, 'WxH:' (e.g. 8x8:) then the trees in "
        "reading order, each written as one letter for the number of open squares before it ('_' for none, a=1, "
        "b=2, ... y=25), then one more letter (or '_') for the open squares after the last tree, then ',' and the "
        "column counts left to right and the row counts top to bottom, all separated by ',' (e.g. "
        "6x6:bk_g__ha,1,2,1,1,1,1,1,1,0,3,0,2). Pitch its tents there (a left click on a square puts a tent; do "
        "not use Game > Solve) and save the game with Game > Save... as ~/campsite/field-N.sav (N the field's "
        "number). Then type the field's pitches into the office's entry as grid references separated by spaces "
        "(e.g. A1 C2 F6) and press 'Allocate': with the right pitches and the saved game the office shows the "
        "field's permit code and moves on to the next field. From your shell keep the allocation sheet "
        "~/office/allocations.txt: one line per field, 'N | permit | pitches' (e.g. 1 | ABC234 | A1 C2 F6). "
        "Then finish."),
    channels=Channels(
        gui="read each field's plan off the office, enter it into Tents, pitch its tents there and save the game, "
            "allocate the pitches at the office and read the permit codes back",
        cli="find each field's placement with a search program and write the allocation sheet with the permit "
            "codes and pitches",
        why_both="the plans and permit codes exist only as the office's pixels and the saves must come from the "
                 "Tents window into a folder only the desktop account can write, while finding a placement is a "
                 "search for a program and the sheet belongs in a folder only the shell's account can write"),
    setup=setup,
    clauses=(
        Clause("fields_pitched", "every ~/campsite/field-N.sav is a Tents game of field N with its tents pitched "
                                 "by hand to the field's placement", check_saves, weight=3.0, critical=True, cap=0.5),
        Clause("allocated", "the office allocated every field with its save as it is now", check_allocated,
               weight=2.0, critical=True, cap=0.5),
        Clause("allocation_sheet", "~/office/allocations.txt lists every field with the office's permit code and its "
                                   "pitches", check_sheet, weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        *(Deliverable(save_path(n), "gui", description=f"~/campsite/field-{n}.sav (saved by the Tents window)")
          for n in range(1, COUNT + 1)),
        Deliverable(RECORD, "gui", owner="root", description="the office's record (captured by setup)"),
        Deliverable(SHEET, "cli", description="~/office/allocations.txt"),
    ),
    rules=(GuiArtifactViaCli([save_path(n) for n in range(1, COUNT + 1)],
                             "the saves must come from the Tents window's Save dialog"),),
    oracle=oracle,
    withheld=("fields",),
    profile="base",
    apps=("Campsite Office (python3-tk)", "sgt-tents", "python3"),
    max_steps=500,
    time_budget_s=3000.0,
)
