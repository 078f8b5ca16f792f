"""Weave-Games-5: a puzzle league night, three rounds of peg solitaire between a scoreboard, Pegs and the shell.

Three apps, the data flowing round by round between the channels. The League Scoreboard (a Tk app, the desktop
account's) starts each round: it opens the round's board in a real sgt-pegs window from a start file in a folder
only the desktop account can enter, deleted once the window shows, so the board exists only as the window's
pixels. The agent reads the board off the screen and hands it to a search program in the shell, which writes the
round's plan to ~/league (a folder only the workspace account may write); it plays the plan in the Pegs window and
saves the game through its Save dialog into ~/saves (a folder only the desktop account may write); then it records
the round at the scoreboard, which hashes the save into its root-only record and shows a random confirmation code
as dot-matrix pixels only. The next round starts only after that. At the end the shell writes the league table,
~/league/table.txt, with every round's jumps and code.

Scoring: every round's save is a Pegs save of that round's board, played to one peg; every plan leaves one peg and
is what the save played; the scoreboard recorded every round, the save then being the save now; the table's codes
are the scoreboard's. The seeds vary the three boards; the codes are drawn in the VM at each recording.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Generator, Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.games.peg_solitaire import PEGS, SIZE, board_text, plan_jumps, replay
from weavegym.envs.tasks.games.peg_solitaire import read_board as read_pegs_board
from weavegym.envs.tasks.games.sgt_common import save_via_dialog, saved_game, solver_command
from weavegym.envs.tasks.item_records import numbered_records, per_item_verdict
from weavegym.evaluators import Clause, GuiArtifactViaCli, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

ROUNDS = 3
MIN_PEGS = 10  # a board worth a search, short enough to play three of under TCG
SAVES, LEAGUE = f"{HOME}/saves", f"{HOME}/league"
TABLE = f"{LEAGUE}/table.txt"
APP_DIR = "/usr/local/share/league"
APP = f"{APP_DIR}/league_scoreboard.py"
CONF, RECORD = f"{PRIVATE_DIR}/league.json", f"{PRIVATE_DIR}/league-record.jsonl"
TITLE, HEADING = "League Scoreboard", "PUZZLE LEAGUE NIGHT"
SCALE, HEADING_AT = 2, (16, 12)
BOARD_AT, BOARD_SIZE = (820, 0), (450, 270)
START, RECORD_BOX = (16, 48, 200, 36), (232, 48, 200, 36)
STATUS, STATUS_TEXT = (16, 100, 418, 40), (24, 113)
RESULTS_AT, RESULT_STEP, RESULT_CHARS = (24, 160), 30, 20
PEGS_AT = (40, 40)  # where the scoreboard moves each round's Pegs window
PEGS_FIRST_CELL = (33, 77)  # from that corner (the frame's) to the first cell's centre, measured in the VM
PEGS_REGION = (0, 0, 800, 720)  # the screen left of the scoreboard, where the oracle looks for the board
MOVE = re.compile(r"^(\d+),(\d+)-(\d+),(\d+)$")
TABLE_LINE = re.compile(r"^\s*(\d+)\s*\|\s*(\d+)\s*\|\s*([A-Z0-9]{6})\s*$", re.I)


def save_path(number: int) -> str:
    return f"{SAVES}/round{number}.sav"


def plan_path(number: int) -> str:
    return f"{LEAGUE}/round{number}.txt"


def layout() -> dict[str, Any]:
    """Where the scoreboard draws everything; boxes are [x, y, width, height] in the window."""
    return {"title": TITLE, "heading": HEADING, "heading_at": list(HEADING_AT), "scale": SCALE,
            "size": list(BOARD_SIZE), "at": list(BOARD_AT), "start": list(START), "record": list(RECORD_BOX),
            "status": list(STATUS), "status_text": list(STATUS_TEXT), "results_at": list(RESULTS_AT),
            "result_step": RESULT_STEP}


# ---- setup -------------------------------------------------------------------------------------------------

def pick_board(boards: list[str]) -> str:
    """The first generated board with enough pegs that a program finds a one-peg finish for."""
    fitting = [b for b in boards if b.count("P") >= MIN_PEGS]
    for board in fitting or sorted(boards, key=lambda b: -b.count("P")):
        if plan_jumps(board_text(board)):
            return board
    raise TaskError("Weave-Games-5: no solvable Pegs board among the generated ones")


def setup(ctx: SetupContext) -> Prepared:
    descs = []
    for _round in range(ROUNDS):
        seed = int(ctx.rng.integers(1, 2**31))
        out = ctx.run(f"{PEGS} --generate 6 '{SIZE}x{SIZE}random#{seed}' 2>/dev/null").stdout
        descs.append(pick_board([line.split(":", 1)[1] for line in out.split() if line.startswith(f"{SIZE}x{SIZE}:")]))
    # Saves: the desktop account's alone (0755), so the shell cannot put one there; the league folder: the workspace
    # account's alone (2755), so a terminal on the desktop cannot write the plans or the table.
    ctx.run(["install", "-d", "-m", "0755", "-o", DESKTOP_USER, "-g", SHARED_GROUP, SAVES])
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, LEAGUE])
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/league_scoreboard.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    conf = {"rounds": [{"game": "Pegs", "params": f"{SIZE}x{SIZE}random", "desc": d} for d in descs], "pegs": PEGS,
            "window": "^Pegs$", "saves": SAVES, "pegs_at": list(PEGS_AT), "layout": layout()}
    ctx.write_file(CONF, json.dumps(conf), owner="root", mode=0o600)
    # From the home: the puzzle's Save dialog opens in its working folder (root's own is unreadable: an error box).
    ctx.launch_gui(f"cd {HOME} && {{as_user}} python3 {APP} < {CONF} > {RECORD}", name="league")
    window = ctx.wait_window(f"^{TITLE}$")
    if abs(window.x - BOARD_AT[0]) > 16 or abs(window.y - BOARD_AT[1]) > 40:
        ctx.run(["env", "DISPLAY=:0", "xdotool", "windowmove", str(window.id), *map(str, BOARD_AT)], user=ctx.user)
    try:
        at = wait_for(lambda: origin(ctx.client.screenshot(hide_cursor=True).image), 120, what="scoreboard drawn",
                      max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", CONF])  # the boards now live only in the scoreboard's memory
    return Prepared(params={}, truth={"descs": descs, "at": list(at)})


def origin(image: np.ndarray, reach: int = 40) -> tuple[int, int] | None:
    """The scoreboard's top-left, found where its heading reads back near where it was put; None until drawn."""
    return pixel_font.find_drawn(image, HEADING, BOARD_AT, HEADING_AT, SCALE, reach=reach)


# ---- the checker -------------------------------------------------------------------------------------------

def scoreboard_records(probe: Probe) -> dict[int, dict[str, Any]]:
    """{round: its record} of the scoreboard's root-only record (a round recorded twice keeps its last)."""
    return numbered_records(probe, RECORD, "round")


def _saved(probe: Probe, number: int) -> tuple[str, list[str]] | None:
    return saved_game(probe.read_text(save_path(number)), "Pegs")


def _plan(probe: Probe, number: int) -> list[str] | None:
    text = probe.read_text(plan_path(number))
    return None if text is None else [line.strip() for line in text.splitlines() if line.strip()]


def judge_save(saved: tuple[str, list[str]] | None, desc: str, number: int) -> str:
    """'' when a round's save is a Pegs save of its board played to one peg, else what is wrong."""
    if saved is None:
        return f"round {number}: {save_path(number)} is missing or not a Pegs save"
    if saved[0] != desc:
        return f"round {number}: the save holds board {saved[0]!r}, the round's board was {desc!r}"
    left, error = replay(desc, saved[1])
    return "" if error is None and left == 1 else f"round {number}: the save leaves {left} pegs" + \
        (f" ({error})" if error else "")


def check_saves(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return per_item_verdict([judge_save(_saved(probe, n), d, n) for n, d in enumerate(truth["descs"], 1)],
                            "the save is the round's board played to one peg", noun="rounds")


def judge_plan(plan: list[str] | None, desc: str, number: int) -> str:
    if not plan:
        return f"round {number}: {plan_path(number)} is missing or empty"
    left, error = replay(desc, plan)
    return "" if error is None and left == 1 else f"round {number}: the plan leaves {left} pegs" + \
        (f" ({error})" if error else "")


def check_plans(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return per_item_verdict([judge_plan(_plan(probe, n), d, n) for n, d in enumerate(truth["descs"], 1)],
                            "the plan leaves one peg", noun="rounds")


def check_played(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    problems = []
    for number in range(1, len(truth["descs"]) + 1):
        saved, plan = _saved(probe, number), _plan(probe, number)
        if saved is None or not plan:
            problems.append(f"round {number}: the save or the plan is missing")
        elif saved[1] != plan:
            problems.append(f"round {number}: saved jumps {saved[1][:3]}... vs plan {plan[:3]}... "
                            f"({len(saved[1])} vs {len(plan)})")
        else:
            problems.append("")
    return per_item_verdict(problems, "the save plays exactly the plan", noun="rounds")


def check_recorded(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records = scoreboard_records(probe)
    if not records:
        return Verdict.failed("the scoreboard recorded no round")
    problems = []
    for number in range(1, len(truth["descs"]) + 1):
        data = probe.read_bytes(save_path(number))
        if number not in records:
            problems.append(f"round {number} was not recorded at the scoreboard")
        elif data is None or hashlib.sha256(data).hexdigest() != records[number].get("sha256"):
            problems.append(f"round {number}: the save is not the one the scoreboard recorded")
        else:
            problems.append("")
    return per_item_verdict(problems, "recorded at the scoreboard with the save as it is now", noun="rounds")


def parse_table(text: str | None) -> tuple[dict[int, tuple[int, str]], str]:
    """({round: (jumps, code)}, problem) of the table's 'round | jumps | code' lines."""
    if text is None:
        return {}, f"{TABLE} does not exist"
    rows: dict[int, tuple[int, str]] = {}
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        found = TABLE_LINE.match(line)
        if found is None:
            return {}, f"{TABLE} line {number} is not 'round | jumps | code': {line[:60]!r}"
        rows[int(found.group(1))] = (int(found.group(2)), found.group(3).upper())
    return rows, "" if rows else f"{TABLE} has no line"


def check_table(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = parse_table(probe.read_text(TABLE))
    if problem:
        return Verdict.failed(problem)
    records, count = scoreboard_records(probe), len(truth["descs"])
    problems = [] if set(rows) == set(range(1, count + 1)) else [f"lists rounds {sorted(rows)}, not 1..{count}"]
    for number in range(1, count + 1):
        jumps, code = rows.get(number, (-1, ""))
        saved = _saved(probe, number)
        want_code = str(records.get(number, {}).get("code", ""))
        if not want_code or code != want_code:
            problems.append(f"round {number}: code {code!r}, the scoreboard's is {want_code or '(none)'!r}")
        elif saved is None or jumps != len(saved[1]):
            problems.append(f"round {number}: {jumps} jumps, the save plays {len(saved[1]) if saved else '?'}")
    return Verdict.check(not problems, "; ".join(problems[:4]) if problems else
                         f"every round's jumps and the scoreboard's code ({count} lines)")


# ---- the oracle --------------------------------------------------------------------------------------------

def read_board(screen: np.ndarray) -> tuple[str, list[float], list[float]] | None:
    """The round's board read off the Pegs window (peg_solitaire.read_board), only once the window sits where the
    scoreboard moves it: openbox first maps it elsewhere, and drags sent there land on the desktop once it moves."""
    board = read_pegs_board(screen, PEGS_REGION)
    if board is None or abs(board[1][0] - PEGS_AT[0] - PEGS_FIRST_CELL[0]) > 16 \
            or abs(board[2][0] - PEGS_AT[1] - PEGS_FIRST_CELL[1]) > 16:
        return None
    return board


def read_result(screen: np.ndarray, at: list[int], number: int) -> str:
    return pixel_font.read_text(screen, at[0] + RESULTS_AT[0], at[1] + RESULTS_AT[1] + (number - 1) * RESULT_STEP,
                                SCALE, RESULT_CHARS)


def _button(at: list[int], box: tuple[int, int, int, int]) -> dict[str, Any]:
    return {"kind": "click", "x": at[0] + box[0] + box[2] // 2, "y": at[1] + box[1] + box[3] // 2}


# Under TCG on a loaded host a click can trail its observation by many seconds or be lost: the oracle waits on the
# screen and clicks again after a while (a second Start while a round is in play, or a second Record, is refused
# or harmless: a second Record records the same save with a new code, the last one counts).
TRIES, WAITS = 4, 10
SAVE_TRIES, DIALOG_WAITS = 3, 30
TITLE_ABOVE = 68  # px from the board's top row of holes up to the Pegs window's title bar (openbox's frame)


def _start_round(ctx: OracleContext) -> Generator[ActionLike, Any, tuple[str, list[float], list[float]] | None]:
    """Press Start until the round's board shows in the Pegs window; the board read off the screen, with its grid
    (None when it never showed, as for the cli-only ablation, whose clicks cannot reach the desktop)."""
    for _try in range(TRIES):
        yield _button(ctx.truth["at"], START)
        before = None
        for _ in range(WAITS):
            board = read_board((ctx.obs or {})["screen"])
            if board is not None and board == before:
                return board
            before = board
            yield {"kind": "wait", "seconds": 2}
    return None


def _record_round(ctx: OracleContext, number: int) -> Generator[ActionLike, Any, str]:
    """Press Record until the round's code shows on the scoreboard; the code ("" when it never showed)."""
    for _try in range(TRIES):
        yield _button(ctx.truth["at"], RECORD_BOX)
        for _ in range(WAITS):
            found = re.fullmatch(rf"ROUND {number}  CODE ([A-Z2-9]{{6}})",
                                 read_result((ctx.obs or {})["screen"], ctx.truth["at"], number))
            if found:
                return found.group(1)
            yield {"kind": "wait", "seconds": 2}
    return ""


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per round: start it at the scoreboard (GUI), solve the board read off the Pegs window (CLI), play and save
    it (GUI), wait for the save (CLI), record it and read the code back (GUI); then the table from the shell."""
    table = []
    for number in range(1, ROUNDS + 1):
        board = yield from _start_round(ctx)
        if board is None:
            break
        desc, xs, ys = board  # read off the Pegs window, as an agent would: the truth's boards are withheld
        yield {"kind": "shell", "timeout": 300, "command": solver_command(
            plan_jumps, board_text(desc), answer_file=plan_path(number), label="PLAN")}
        found = re.search(r"^PLAN (.+)$", (ctx.obs or {}).get("terminal", ""), re.M)
        plan = found.group(1).split() if found else plan_jumps(board_text(desc))  # gui-only: no terminal text
        for move in plan:
            x1, y1, x2, y2 = map(int, MOVE.match(move).groups())  # type: ignore[union-attr]
            yield {"kind": "drag", "x": round(xs[x1]), "y": round(ys[y1]), "to_x": round(xs[x2]),
                   "to_y": round(ys[y2])}
        title_bar = (round(xs[2]), round(ys[0]) - TITLE_ABOVE)  # where a click gives the Pegs window the focus back
        yield from save_via_dialog(ctx, save_path(number), ups=5,  # Game > Save... is the fifth item from the bottom
                                   refocus=title_bar, attempts=SAVE_TRIES, tries=DIALOG_WAITS, seconds=1)
        code = yield from _record_round(ctx, number)
        table.append(f"{number} | {len(plan)} | {code}")
    yield {"kind": "shell", "command": table_command(table)}
    yield {"kind": "done"}


def table_command(lines: list[str]) -> str:
    """The shell line that writes the league table (the lines hold digits, '|', spaces and codes only)."""
    text = "".join(line + "\n" for line in lines)
    return f"printf %s '{text}' > {TABLE.replace(HOME, '~')} && cat {TABLE.replace(HOME, '~')}"


TASK = Task(
    id="Weave-Games-5",
    title="Play a three-round peg-solitaire league night: start, solve, play, save and record each round, then "
          "write the league table",
    instruction=(
        "Tonight's puzzle league has three rounds of peg solitaire, run by the 'League Scoreboard' window. For each "
        "round in turn: 1) press 'Start next round'; a Pegs window opens with the round's board (a jump moves a peg "
        "over an orthogonally adjacent peg into an empty hole two cells away and removes the jumped peg). 2) Find a "
        "sequence of jumps that leaves exactly one peg and write it to ~/league/roundN.txt (N = the round number), "
        "one jump per line as x1,y1-x2,y2 (0-based column,row of the board's 5x5 grid from its top-left cell, e.g. "
        "3,3-3,1). 3) Play exactly that sequence in the Pegs window and save the game with its Game > Save... dialog "
        "as ~/saves/roundN.sav. 4) Press 'Record result' on the scoreboard: it records the save and shows the "
        "round's confirmation code; the next round can start only after that. When all three rounds are recorded, "
        "write the league table to ~/league/table.txt from your shell: one line per round, 'N | jumps | code' (the "
        "round number, the number of jumps played, the round's confirmation code). Then finish. Do not start a "
        "new game inside a Pegs window."),
    channels=Channels(
        gui="start each round at the scoreboard, read the board off the Pegs window, play and save it through the "
            "Save dialog, record it and read the confirmation code back",
        cli="search each board for a one-peg finish, write the plans, and write the league table with the codes",
        why_both="the boards exist only as the Pegs windows' pixels and the codes only as the scoreboard's, and the "
                 "saves must come from the Pegs window into a folder only the desktop account can write, while "
                 "finding a one-peg finish is a search for a program and the plans and table belong in a folder "
                 "only the shell's account can write"),
    setup=setup,
    clauses=(
        Clause("saves_solved", "every round's ~/saves/roundN.sav is a Pegs save of that round's board, played to "
                               "one peg", check_saves, weight=3.0, critical=True, cap=0.5),
        Clause("plans", "every round's ~/league/roundN.txt lists jumps that leave one peg", check_plans, weight=2.0),
        Clause("played_plans", "every round's save plays exactly its plan", check_played),
        Clause("recorded", "the scoreboard recorded every round, with the save as it is now", check_recorded,
               weight=2.0, critical=True, cap=0.5),
        Clause("league_table", "~/league/table.txt lists every round's jumps and the scoreboard's code",
               check_table, weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        *(Deliverable(save_path(n), "gui", description=f"~/saves/round{n}.sav (saved by the Pegs window)")
          for n in range(1, ROUNDS + 1)),
        *(Deliverable(plan_path(n), "cli", description=f"~/league/round{n}.txt") for n in range(1, ROUNDS + 1)),
        Deliverable(RECORD, "gui", owner="root", description="the scoreboard's record (captured by setup)"),
        Deliverable(TABLE, "cli", description="~/league/table.txt"),
    ),
    rules=(GuiArtifactViaCli([save_path(n) for n in range(1, ROUNDS + 1)],
                             "the saves must come from the Pegs window's Save dialog"),),
    withheld=("descs",),
    oracle=oracle,
    profile="base",
    apps=("League Scoreboard (python3-tk)", "sgt-pegs", "python3"),
    max_steps=260,
    time_budget_s=2400.0,
)
