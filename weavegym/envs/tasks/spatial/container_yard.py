"""Weave-Spatial-6: a container yard reshuffle, bay by bay, between a yard map, a crane console and the shell.

Three apps, the data flowing between them bay by bay. The Yard Map (a Tk app, the desktop account's) shows a bay's
stacks after a click on its button, every container labelled with its id in the dot-matrix font only (the yard
reaches the window from a root-only file setup deletes once drawn). The loading list is a SQLite database only
the workspace account can read: which containers tomorrow's ship loads and in what sequence. Which stack order is
right needs both, and the fewest moves that reach it need a search, a program in the shell. The Crane Console (a
second Tk app, the desktop account's) draws the same bay without ids; the agent drags each move there, and the
console records every move into a root-only file and, once the bay is in loading order, seals it with a random
code drawn as pixels only. The shell then adds the bay's line (moves and seal) to the stowage report in a folder
only the workspace account may write, and the console opens the next bay only once the report holds that line.

Scoring: the console's record replayed from the seed's yard (every move legal, every bay in loading order and
sealed), each bay in its fewest moves, and the report's lines equal to the console's counts and codes.
"""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from collections.abc import Generator, Iterator, Mapping, Sequence
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.games.sgt_common import python_command
from weavegym.envs.tasks.spatial import _yard as yd
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

APP_DIR = "/usr/local/share/craneyard"
MAP_IN, CONSOLE_IN = f"{PRIVATE_DIR}/yard-map.json", f"{PRIVATE_DIR}/crane-console.json"
RECORD = f"{PRIVATE_DIR}/crane-record.jsonl"
DB_DIR = "/srv/yard"
DB = f"{DB_DIR}/loading.db"
OUTBOX = f"{HOME}/outbox"
REPORT = f"{OUTBOX}/stowage.csv"
SCHEMA = ("CREATE TABLE loading_list (container TEXT PRIMARY KEY, ship TEXT NOT NULL, voyage TEXT NOT NULL, "
          "pod TEXT NOT NULL, seq INTEGER NOT NULL, weight_t REAL NOT NULL);")
REPORT_LINE = re.compile(r"^\s*(\d+)\s*,\s*(\d+)\s*,\s*([A-Za-z0-9]{6})\s*$")


# ---- setup ---------------------------------------------------------------------------------------------------

def setup(ctx: SetupContext) -> Prepared:
    w = yd.world(ctx.rng)
    # The loading list is the workspace account's alone: a terminal on the desktop cannot read a row of it.
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, DB_DIR])
    ctx.write_file(DB, database_bytes(SCHEMA, {"loading_list": w["rows"]}), owner=WORKSPACE_USER, mode=0o600)
    # The outbox: only the workspace account may write in it (the console, the desktop's, reads the report).
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, OUTBOX])
    for name in ("yard_map.py", "crane_console.py"):
        ctx.write_file(f"{APP_DIR}/{name}", ctx.fixture(__package__, f"fixtures/{name}"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    lay = yd.layout()
    shown = {"bays": w["bays"], "layout": lay, "at": list(yd.MAP_AT)}
    map_at = _open(ctx, MAP_IN, shown, f"{APP_DIR}/yard_map.py < {MAP_IN}", "Yard Map", yd.MAP_HEADING, yd.MAP_AT)
    console = {"bays": w["bays"], "seq": w["seq"], "height": yd.HEIGHT, "report": REPORT, "layout": lay,
               "at": list(yd.CONSOLE_AT)}
    console_at = _open(ctx, CONSOLE_IN, console, f"{APP_DIR}/crane_console.py < {CONSOLE_IN} > {RECORD}",
                       "Crane Console", yd.CONSOLE_HEADING, yd.CONSOLE_AT)
    return Prepared(params={"ship": w["ship"], "db": DB, "report": REPORT.replace(HOME, "~")},
                    truth={"ship": w["ship"], "bays": w["bays"], "seq": w["seq"], "minimum": w["minimum"],
                           "map_at": list(map_at), "console_at": list(console_at)})


def _open(ctx: SetupContext, path: str, content: Mapping[str, Any], command: str, title: str, heading: str,
          at: Sequence[int]) -> tuple[int, int]:
    """Start one window with ``content`` on stdin, put it at ``at`` (the window manager may not), wait until its
    heading reads back, then delete the stdin file; return the window's top-left on screen."""
    ctx.write_file(path, json.dumps(content), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {command}", name=title.lower().replace(" ", "-"))
    window = ctx.wait_window(f"^{title}$")
    if abs(window.x - at[0]) > 16 or abs(window.y - at[1]) > 40:
        ctx.run(["env", "DISPLAY=:0", "xdotool", "windowmove", str(window.id), str(at[0]), str(at[1])], user=ctx.user)
    try:
        found = wait_for(lambda: yd.origin(ctx.client.screenshot(hide_cursor=True).image, at, heading), 120,
                         what=f"the {title} drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", path])  # the window has read it: what it held now lives only on screen
    return found


# ---- the checker ---------------------------------------------------------------------------------------------

def console_records(probe: Probe) -> list[dict[str, Any]]:
    """Every line the console printed into its root-only record, in order."""
    found = []
    for line in (probe.read_bytes(RECORD) or b"").decode("utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("bay"), int):
            found.append(entry)
    return found


def replay_bays(records: Sequence[Mapping[str, Any]], truth: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per bay: the recorded moves replayed from the seed's yard ({moves, problem, seal})."""
    out = []
    for number, (start, seq) in enumerate(zip(truth["bays"], truth["seq"], strict=True), 1):
        stacks, moves, problem, seal = [list(s) for s in start], 0, "", None
        for entry in (r for r in records if r["bay"] == number):
            if "move" in entry and not problem and seal is None:
                move = entry["move"]
                valid = isinstance(move, list) and len(move) == 2 and all(isinstance(m, int) for m in move)
                problem = yd.apply_move(stacks, (move[0], move[1]), yd.HEIGHT) if valid else f"bad move {move!r}"
                moves += 1
            elif "sealed" in entry and seal is None:
                seal = {"code": str(entry["sealed"]), "moves": entry.get("moves")}
        if not problem and seal is None:
            problem = f"bay {number} was not sealed"
        elif not problem and not all(yd.in_order(s, seq) for s in stacks):
            problem = f"bay {number}'s stacks are not in loading order after its {moves} moves"
        elif not problem and seal and seal["moves"] != moves:
            problem = f"bay {number}: the seal counts {seal['moves']} moves, the record {moves}"
        out.append({"moves": moves, "problem": problem, "seal": seal})
    return out


def _bays_verdict(problems: list[str], what: str) -> Verdict:
    wrong = [p for p in problems if p]
    if not wrong:
        return Verdict.satisfied(f"all {len(problems)} bays: {what}")
    evidence = "; ".join(wrong)
    return Verdict.partial(evidence) if len(wrong) < len(problems) else Verdict.failed(evidence)


def check_sealed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    bays = replay_bays(console_records(probe), truth)
    return _bays_verdict([b["problem"] for b in bays], "legal moves leave every stack in loading order, sealed")


def check_fewest(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    problems = []
    for number, (bay, least) in enumerate(zip(replay_bays(console_records(probe), truth), truth["minimum"],
                                              strict=True), 1):
        if bay["problem"]:
            problems.append(f"bay {number}: not reshuffled ({bay['problem']})")
        else:
            problems.append("" if bay["moves"] == least else f"bay {number}: {bay['moves']} moves, fewest {least}")
    return _bays_verdict(problems, "reshuffled in the fewest moves")


def parse_report(text: str | None) -> tuple[dict[int, tuple[int, str]], str]:
    """({bay: (moves, code)}, problem) of the report's 'bay,moves,seal' lines (a header line is skipped)."""
    if text is None:
        return {}, f"{REPORT} does not exist"
    rows: dict[int, tuple[int, str]] = {}
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip() or (number == 1 and line.replace(" ", "").lower() == "bay,moves,seal"):
            continue
        found = REPORT_LINE.match(line)
        if found is None:
            return {}, f"{REPORT} line {number} is not 'bay,moves,seal': {line[:60]!r}"
        rows[int(found.group(1))] = (int(found.group(2)), found.group(3).upper())
    return rows, "" if rows else f"{REPORT} has no bay line"


def check_report(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = parse_report(probe.read_text(REPORT))
    if problem:
        return Verdict.failed(problem)
    bays, count = replay_bays(console_records(probe), truth), len(truth["bays"])
    problems = [] if set(rows) == set(range(1, count + 1)) else [f"lists bays {sorted(rows)}, not 1..{count}"]
    for number, bay in enumerate(bays, 1):
        moves, code = rows.get(number, (-1, ""))
        seal = bay["seal"]
        if seal is None:
            problems.append(f"bay {number}: the console sealed no bay {number}")
        elif (moves, code) != (seal["moves"], seal["code"]):
            problems.append(f"bay {number}: reported {moves} moves, seal {code!r}; the console's: {seal['moves']}, "
                            f"{seal['code']!r}")
    return Verdict.check(not problems, "; ".join(problems[:4]) if problems else
                         f"every bay's moves and the console's seal code ({count} lines)")


# ---- the oracle ----------------------------------------------------------------------------------------------

def planner_command(ship: str, stacks: Sequence[Sequence[str]]) -> str:
    """The oracle's CLI step: the guest's python3 looks the bay's containers up in the loading list and runs
    plan_moves' own source on the stacks read off the Yard Map (typed as an argument)."""
    main = ("import sqlite3, sys\n"
            "stacks = [s.split(',') if s else [] for s in sys.argv[1].split('/')]\n"
            "ids = [c for s in stacks for c in s]\n"
            f"con = sqlite3.connect('file:{DB}?mode=ro', uri=True)\n"
            "marks = ','.join('?' * len(ids))\n"
            "seq = dict(con.execute(f'SELECT container, seq FROM loading_list WHERE ship = ? AND container IN "
            "({marks})', [sys.argv[2], *ids]))\n"
            f"print('PLAN', ' '.join(plan_moves(stacks, seq, {yd.HEIGHT})) or '-')")
    source = textwrap.dedent(inspect.getsource(yd.plan_moves))
    return python_command(f"from __future__ import annotations\n{source}\n{main}", yd.stacks_text(stacks), ship)


def host_plan(stacks: list[list[str]], seq: Mapping[str, int]) -> list[str]:
    """The same search on the host (the gui-only ablation's shell shows nothing: its terminal cannot read the
    loading list), from the stacks the oracle read off the screen."""
    return yd.plan_moves(stacks, dict(seq), yd.HEIGHT)


TRIES, WAITS = 4, 10


def _click(at: Sequence[int], box: Sequence[int]) -> dict[str, Any]:
    x, y = yd.centre(at, box)
    return {"kind": "click", "x": x, "y": y}


def _show_bay(ctx: OracleContext, number: int) -> Generator[ActionLike, Any, list[list[str]] | None]:
    """Press the bay's button on the Yard Map until the bay reads back; its stacks (None when it never shows,
    as for the cli-only ablation, whose clicks cannot reach the desktop)."""
    at = ctx.truth["map_at"]
    for _try in range(TRIES):
        yield _click(at, yd.BAY_BUTTONS[number - 1])
        for _ in range(WAITS):
            screen = (ctx.obs or {})["screen"]
            stacks = yd.read_bay(screen, at) if yd.shown_bay(screen, at) == number else None
            if stacks is not None and any(stacks):
                return stacks
            yield {"kind": "wait", "seconds": 1}
    return None


def _await(ctx: OracleContext, done: Any) -> Generator[ActionLike, Any, Any]:
    """The first truthy ``done(screen)`` within WAITS observations (a click's effect can trail it under TCG)."""
    for _ in range(WAITS):
        found = done((ctx.obs or {})["screen"])
        if found:
            return found
        yield {"kind": "wait", "seconds": 1}
    return done((ctx.obs or {})["screen"])


def _drag(ctx: OracleContext, stacks: list[list[str]], move: str) -> Generator[ActionLike, Any, bool]:
    """Drag the top container of stack a onto stack b; wait until the console shows the new heights."""
    at = ctx.truth["console_at"]
    a, b = (int(n) for n in move.split(">"))
    from_box, to_box = yd.box_at(a - 1, len(stacks[a - 1]) - 1), yd.box_at(b - 1, len(stacks[b - 1]))
    if yd.apply_move(stacks, (a, b), yd.HEIGHT):
        return False
    want = [len(s) for s in stacks]
    for _try in range(2):  # a drag lost under load is dragged again once the console has shown the old heights
        fx, fy = yd.centre(at, (*from_box, yd.BOX_W, yd.BOX_H))
        tx, ty = yd.centre(at, (*to_box, yd.BOX_W, yd.BOX_H))
        yield {"kind": "drag", "x": fx, "y": fy, "to_x": tx, "to_y": ty}
        if (yield from _await(ctx, lambda s: yd.console_heights(s, at) == want)):
            return True
    return False


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per bay: open it on the Yard Map and read it (GUI), plan it from the loading list (CLI), drag the moves in
    the Crane Console and read the seal (GUI), add the report line (CLI), open the next bay (GUI)."""
    ship, console = ctx.truth["ship"], ctx.truth["console_at"]
    for number in range(1, len(ctx.truth["seq"]) + 1):
        stacks = yield from _show_bay(ctx, number)
        if stacks is None:
            break
        yield {"kind": "shell", "command": planner_command(ship, stacks), "timeout": 300}
        found = re.search(r"^PLAN (.+)$", (ctx.obs or {}).get("terminal", ""), re.M)
        plan = [m for m in found.group(1).split() if m != "-"] if found else host_plan(stacks, ctx.truth["seq"][
            number - 1])
        for move in plan:
            if not (yield from _drag(ctx, stacks, move)):
                break
        code = yield from _await(ctx, lambda s, n=number: yd.read_seal(s, console, n))
        if not code:
            break
        line = f"{number},{len(plan)},{code}"
        write = f"printf 'bay,moves,seal\\n{line}\\n' >" if number == 1 else f"printf '{line}\\n' >>"
        yield {"kind": "shell", "command": f"{write} {REPORT.replace(HOME, '~')} && cat {REPORT.replace(HOME, '~')}"}
        if number < len(ctx.truth["seq"]):
            for _try in range(TRIES):
                yield _click(console, yd.NEXT_BUTTON)
                if (yield from _await(ctx, lambda s, n=number: yd.shown_bay(s, console) == n + 1)):
                    break
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Spatial-6",
    title="Reshuffle a container yard's three bays into loading order in the fewest crane moves, sealing and "
          "reporting each bay",
    instruction=(
        "Tomorrow the ship {ship} loads from yard block A, and its three bays must be reshuffled so that the crane "
        "never has to lift a container out of the way. The 'Yard Map' window shows one bay at a time (press the "
        "bay's button): four stacks, numbered from the left, each container drawn with its id, from the bottom up. "
        "The loading list is the SQLite database {db}, table loading_list (container, ship, voyage, pod, seq, "
        "weight_t): for a container of {ship}, seq is its place in the loading order (lower seq is loaded "
        "earlier); every other ship's container stays in the yard. A stack is in loading order when, read from "
        "its top down, it holds first its containers for {ship} in increasing seq, then only containers that "
        "stay (in any order): no container stands on one of {ship}'s that is loaded before it, and no container "
        "that stays stands on one of {ship}'s. Containers stay in their bay and no stack may hold more than 4. "
        "Reshuffle each bay in the 'Crane Console' window with the fewest moves possible for that bay: the "
        "console shows the bays in turn, bay 1 first, with their containers but without ids; drag a stack's top "
        "container onto another stack to move it (a drop on a full stack is refused, and every move counts). "
        "When all of a bay's stacks are in loading order, the console seals the bay and shows its seal code. "
        "Then, from the shell, add the bay's line to the stowage report {report} (first line the header "
        "bay,moves,seal; then one line per bay: the bay number, the moves the console counted, the seal code, "
        "e.g. 1,6,K7PQ2M) and press 'Next bay' in the console, which opens the next bay only once the report "
        "lists the sealed one. When all three bays are sealed and reported, finish."),
    channels=Channels(
        gui="open each bay on the Yard Map and read its containers' ids, drag the moves in the Crane Console and "
            "read each bay's seal code, then open the next bay",
        cli="look the bays' containers up in the loading list, search each bay's fewest moves, and write the "
            "stowage report line by line",
        why_both="the containers' ids and places exist only as the Yard Map's pixels and the seal codes only as the "
                 "console's, and the moves only count when dragged in the console, while the loading order is in a "
                 "database only the shell's account can read, the fewest moves need a search program, and the "
                 "report belongs in a folder only the shell's account can write"),
    setup=setup,
    clauses=(
        Clause("bays_in_order", "the console's record replays as legal moves that leave every bay in loading order "
                                "and sealed", check_sealed, weight=3.0, critical=True),
        Clause("fewest_moves", "every bay took its fewest possible moves", check_fewest, weight=2.0, critical=True,
               cap=0.5),
        Clause("stowage_report", "~/outbox/stowage.csv lists every bay's moves and the console's seal code",
               check_report, weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the Crane Console's record (captured by setup)"),
        Deliverable(REPORT, "cli", description="~/outbox/stowage.csv"),
    ),
    withheld=("bays", "minimum"),
    oracle=oracle,
    profile="base",
    apps=("Yard Map (python3-tk)", "Crane Console (python3-tk)", "sqlite3", "python3"),
    max_steps=200,
    time_budget_s=2400.0,
)

