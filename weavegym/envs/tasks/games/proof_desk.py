"""Weave-Games-6: a puzzle magazine's proof desk, three submitted nonograms between a Tk desk, Pattern and the shell.

Three apps, the data flowing puzzle by puzzle between the channels. The Proof Desk (a Tk app, the desktop
account's) shows each submission's clues after a click, as dot-matrix pixels only. The agent turns the clues into
Pattern's game id and has a program decide in the shell whether the puzzle has exactly one solution (sound), two
or more (ambiguous) or none (broken). Each sound puzzle goes into the real sgt-pattern window through Game >
Specific..., is played there to its solution and saved into ~/proofs (a folder only the desktop account may
write). At the desk the agent records each verdict; "Sound" takes the proof save, hashes it into the desk's
root-only record and shows a random print-slot code as pixels only. At the end the shell writes the issue's print
list into ~/issue (only the workspace account may write there): each sound puzzle, its slot code and solution.

Scoring: every sound puzzle's proof is a Pattern save of its clues played (not revealed) to the solution; the
desk holds the right verdict for every puzzle and, for the sound ones, the save as it is now; the print list holds
exactly the sound puzzles with the desk's slot codes and their solutions. The seeds vary the clues and which
submissions are sound, ambiguous or broken; the slot codes are drawn in the VM at each recording.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import Channels, Prepared, Task
from weavegym.envs.tasks.games._proof_common import (
    APP,
    APP_DIR,
    CONF,
    COUNT,
    DESK_AT,
    ISSUE,
    KINDS,
    PATTERN,
    PATTERN_AT,
    PRINT_LIST,
    PROOFS,
    RECORD,
    SLOT_LINE,
    TITLE,
    find_grid,
    layout,
    origin,
    proof_path,
)
from weavegym.envs.tasks.games._proof_oracle import oracle
from weavegym.envs.tasks.games.nonogram import SIZE, draw_puzzle, replay_pattern
from weavegym.envs.tasks.games.sgt_common import saved_game
from weavegym.envs.tasks.item_records import numbered_records, per_item_verdict
from weavegym.evaluators import Clause, GuiArtifactViaCli, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

# ---- setup -------------------------------------------------------------------------------------------------

def pick_kinds(rng: np.random.Generator) -> list[str]:
    """One or two sound submissions, the others ambiguous or broken, in a random order."""
    kinds = ["sound", str(rng.choice(KINDS[1:])), str(rng.choice(KINDS))]
    return [kinds[i] for i in rng.permutation(COUNT)]


def setup(ctx: SetupContext) -> Prepared:
    puzzles = [draw_puzzle(ctx.rng, kind) for kind in pick_kinds(ctx.rng)]
    # Proofs: the desktop account's alone (0755), so the shell cannot put a save there; the issue folder: the
    # workspace account's alone (2755), so a terminal on the desktop cannot write the print list.
    ctx.run(["install", "-d", "-m", "0755", "-o", DESKTOP_USER, "-g", SHARED_GROUP, PROOFS])
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, ISSUE])
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/proof_desk.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    conf = {"puzzles": [{"columns": p["columns"], "rows": p["rows"]} for p in puzzles], "proofs": PROOFS,
            "layout": layout()}
    ctx.write_file(CONF, json.dumps(conf), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {CONF} > {RECORD}", name="proofdesk")
    desk = ctx.wait_window(f"^{TITLE}$")
    if abs(desk.x - DESK_AT[0]) > 16 or abs(desk.y - DESK_AT[1]) > 40:
        ctx.run(["env", "DISPLAY=:0", "xdotool", "windowmove", str(desk.id), *map(str, DESK_AT)], user=ctx.user)
    # A random 6x6 game of its own, none of the submissions; from the home, where its Save dialog opens.
    ctx.launch_gui(f"cd {HOME} && {{as_user}} {PATTERN} {SIZE}x{SIZE}#{int(ctx.rng.integers(1, 2**31))}",
                   name="pattern")
    window = ctx.wait_window("^Pattern$")
    ctx.run(["env", "DISPLAY=:0", "xdotool", "windowmove", str(window.id), *map(str, PATTERN_AT)], user=ctx.user)
    try:
        at = wait_for(lambda: origin(ctx.client.screenshot(hide_cursor=True).image), 120, what="desk drawn",
                      max_poll=1.0)
        grid = wait_for(lambda: find_grid(ctx.client.screenshot(hide_cursor=True).image), 120,
                        what="Pattern's board at its place", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", CONF])  # the clues now live only in the desk's memory
    return Prepared(params={}, truth={"puzzles": puzzles, "at": list(at), "grid": list(grid)})


# ---- the checker -------------------------------------------------------------------------------------------

def desk_records(probe: Probe) -> dict[int, dict[str, Any]]:
    """{puzzle: its last verdict record} of the desk's root-only record."""
    return numbered_records(probe, RECORD, "puzzle")


def _sound(truth: Mapping[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [(n, p) for n, p in enumerate(truth["puzzles"], 1) if p["kind"] == "sound"]


def _clue_lists(desc: str) -> list[list[int]]:
    """A Pattern description's clues as numbers, so that the same clues written another way (07 for 7) match."""
    try:
        return [[int(n) for n in part.split(".") if n] for part in desc.split("/")]
    except ValueError:
        return []


def judge_proof(text: str | None, puzzle: Mapping[str, Any], number: int) -> str:
    """'' when the proof is a Pattern save of the puzzle's clues played to its solution, else what is wrong."""
    saved = saved_game(text, "Pattern")
    if saved is None:
        return f"puzzle {number}: {proof_path(number)} is missing or not a Pattern save"
    desc = puzzle["id"].split(":", 1)[1]
    if _clue_lists(saved[0]) != _clue_lists(desc):
        return f"puzzle {number}: the proof holds clues {saved[0]!r}, the submission's are {desc!r}"
    grid, problem = replay_pattern(puzzle["id"], saved[1])
    if problem or grid is None:
        return f"puzzle {number}: {problem}"
    got = "/".join(grid)
    return "" if got == puzzle["solution"] else f"puzzle {number}: the proof ends at {got}, not the solution"


def check_proofs(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return per_item_verdict([judge_proof(probe.read_text(proof_path(n)), p, n) for n, p in _sound(truth)],
                    "the sound puzzle's proof is its clues played to the solution in Pattern")


def check_verdicts(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records = desk_records(probe)
    if not records:
        return Verdict.failed("the desk recorded no verdict")
    problems = []
    for number, puzzle in enumerate(truth["puzzles"], 1):
        got = records.get(number, {}).get("verdict")
        problems.append("" if got == puzzle["kind"] else f"puzzle {number}: recorded {got or 'nothing'}, it is "
                        f"{puzzle['kind']}")
    return per_item_verdict(problems, "the desk holds the right verdict")


def check_recorded(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records, problems = desk_records(probe), []
    for number, _puzzle in _sound(truth):
        data = probe.read_bytes(proof_path(number))
        if records.get(number, {}).get("verdict") != "sound":
            problems.append(f"puzzle {number} was not recorded sound at the desk")
        elif data is None or hashlib.sha256(data).hexdigest() != records[number].get("sha256"):
            problems.append(f"puzzle {number}: the proof is not the one the desk recorded")
        else:
            problems.append("")
    return per_item_verdict(problems, "recorded sound at the desk with the proof as it is now")


def parse_print_list(text: str | None) -> tuple[dict[int, tuple[str, str]], str]:
    """({puzzle: (slot, solution)}, problem) of the print list's 'N | slot | rows' lines."""
    if text is None:
        return {}, f"{PRINT_LIST} does not exist"
    rows: dict[int, tuple[str, str]] = {}
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        found = SLOT_LINE.match(line)
        if found is None:
            return {}, f"{PRINT_LIST} line {number} is not 'N | slot | rows': {line[:60]!r}"
        rows[int(found.group(1))] = (found.group(2).upper(), found.group(3))
    return rows, "" if rows else f"{PRINT_LIST} has no line"


def check_print_list(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = parse_print_list(probe.read_text(PRINT_LIST))
    if problem:
        return Verdict.failed(problem)
    records, sound = desk_records(probe), _sound(truth)
    want = sorted(n for n, _p in sound)
    problems = [] if sorted(rows) == want else [f"lists puzzles {sorted(rows)}, the sound ones are {want}"]
    for number, puzzle in sound:
        slot, solution = rows.get(number, ("", ""))
        want_slot = str(records.get(number, {}).get("slot") or "")
        if not want_slot or slot != want_slot:
            problems.append(f"puzzle {number}: slot {slot!r}, the desk's is {want_slot or '(none)'!r}")
        elif solution != puzzle["solution"]:
            problems.append(f"puzzle {number}: solution {solution!r} is not the puzzle's")
    return Verdict.check(not problems, "; ".join(problems[:4]) if problems else
                         f"every sound puzzle with the desk's slot code and its solution ({len(sound)} lines)")


TASK = Task(
    id="Weave-Games-6",
    title="Proof this week's three submitted nonograms: judge each at the desk, prove the sound ones in Pattern, "
          "then write the print list",
    instruction=(
        "You are the puzzle editor of a magazine. This week's three submitted nonograms are in the 'Proof Desk' "
        "window: press 'Puzzle N' to see puzzle N's clues (6 columns by 6 rows; C1..C6 are the columns left to right,"
        " R1..R6 the rows top to bottom; each clue lists the lengths of that line's runs of filled cells, in order "
        "from the top or from the left). For each puzzle decide whether it is sound (exactly one solution), ambiguous"
        " (two or more) or broken (none); a program in your shell can decide this. In Pattern's notation a puzzle is "
        "written as its game id: '6x6:' followed by the twelve clues, first C1..C6 then R1..R6, separated by '/', the"
        " numbers of one clue separated by '.' (e.g. 6x6:2.1/3/1.1.1/4/1/2/3/1.2/2.2/1/4/1.1). Prove each sound "
        "puzzle in the open Pattern window: enter its id with Game > Specific..., fill in its solution there (left "
        "click or drag fills cells; do not use Game > Solve) and save the game with Game > Save... as "
        "~/proofs/puzzleN.sav. Then, with puzzle N shown at the desk, press its verdict button (Sound, Ambiguous or "
        "Broken; pressing again replaces it); for a sound puzzle save its proof first: the desk records it as saved "
        "and shows the puzzle's print-slot code. Finally, from your shell, write the print list "
        "~/issue/print_list.txt: one line per sound puzzle, 'N | slot | solution', with N the puzzle number, its slot"
        " code from the desk and its solution as the rows top to bottom, each row's six cells left to right as '#' "
        "(filled) or '.' (empty), rows separated by '/' (e.g. 2 | ABC123 | ##..#./.#.##./...). Then finish."),
    channels=Channels(
        gui="read each puzzle's clues off the desk, enter each sound one into Pattern, play it to its solution and "
            "save it, record every verdict at the desk and read the slot codes back",
        cli="decide each puzzle's number of solutions with a search program and write the print list with the "
            "slot codes and solutions",
        why_both="the clues exist only as the desk's pixels and the slot codes only as the desk's, and the proofs "
                 "must come from the Pattern window into a folder only the desktop account can write, while "
                 "telling a unique nonogram from an ambiguous or broken one is a search for a program and the "
                 "print list belongs in a folder only the shell's account can write"),
    setup=setup,
    clauses=(
        Clause("proofs_solved", "every sound puzzle's ~/proofs/puzzleN.sav is a Pattern save of its clues played "
                                "to its solution", check_proofs, weight=3.0, critical=True, cap=0.5),
        Clause("verdicts", "the desk holds the right verdict (sound, ambiguous, broken) for every puzzle",
               check_verdicts, weight=2.0, critical=True, cap=0.5),
        Clause("proofs_recorded", "every sound puzzle was recorded sound at the desk with its proof as it is now",
               check_recorded, critical=True, cap=0.5),
        Clause("print_list", "~/issue/print_list.txt lists exactly the sound puzzles, each with the desk's slot "
                             "code and its solution", check_print_list, weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        *(Deliverable(proof_path(n), "gui", description=f"~/proofs/puzzle{n}.sav (saved by the Pattern window)")
          for n in range(1, COUNT + 1)),
        Deliverable(RECORD, "gui", owner="root", description="the desk's record (captured by setup)"),
        Deliverable(PRINT_LIST, "cli", description="~/issue/print_list.txt"),
    ),
    rules=(GuiArtifactViaCli([proof_path(n) for n in range(1, COUNT + 1)],
                             "the proofs must come from the Pattern window's Save dialog"),),
    oracle=oracle,
    withheld=("puzzles",),
    profile="base",
    apps=("Proof Desk (python3-tk)", "sgt-pattern", "python3"),
    max_steps=300,
    time_budget_s=2700.0,
)
