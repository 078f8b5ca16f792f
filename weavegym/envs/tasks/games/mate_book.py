"""Weave-Games-7: the chess club's three mate-in-two problems, between a Tk problem book, XBoard and GNU Chess.

Four apps, the data flowing problem by problem between the channels. The Problem Book (a Tk app, the desktop
account's) shows the current problem's position after a click, as dot-matrix pixels only (each side's pieces as
letter + square, the side to move). The agent turns it into FEN and has GNU Chess (`gnuchess -u`, in the shell)
find the key move and a mating line. In the running XBoard it sets the position up (Edit Position, then the FEN
typed into the board), plays the full line (key, a defence, mate) in Edit Game mode and saves the game as
~/problems/problem-N.pgn (a folder only the desktop account may write). Back in the book it enters the key: a wrong
key is refused; the right one, once the game is saved, is recorded (with the save's hash) in the book's root-only
record, shows a random solution code as pixels only and opens the next problem. The shell writes the club
bulletin ~/club/bulletin.txt (a folder only the workspace account may write): each problem, its key and its code.

Scoring: every problem's PGN starts from the problem's position and plays a legal mate in two (the key, a reply,
mate); the book recorded every key with the save as it is now; the bulletin lists the three keys with the book's
codes. The seeds choose three of a pool of problems proven sound (one key, no mate in one) by the search in
``_mate_chess`` and reflect each left to right and/or swap its colours; the codes are drawn in the VM.
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
from weavegym.envs.tasks.games._mate_chess import (
    Position,
    coordinate,
    flip_colours,
    mate_in_two_keys,
    mates_in_one,
    mirror_files,
    problem_problem,
    replay,
    square,
)
from weavegym.envs.tasks.games.sgt_common import python_command, wait_box
from weavegym.envs.tasks.item_records import numbered_records, per_item_verdict
from weavegym.evaluators import Clause, GuiArtifactViaCli, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

COUNT = 3
SAVES, CLUB = f"{HOME}/problems", f"{HOME}/club"
BULLETIN = f"{CLUB}/bulletin.txt"
APP_DIR = "/usr/local/share/problembook"
APP = f"{APP_DIR}/problem_book.py"
CONF, RECORD = f"{PRIVATE_DIR}/problembook.json", f"{PRIVATE_DIR}/problembook-record.jsonl"
TITLE, HEADING = "Problem Book", "CLUB PROBLEM BOOK"
SCALE, HEADING_AT, PAD, LINE_STEP = 2, (16, 12), 8, 22
BOOK_AT, BOOK_SIZE = (700, 40), (560, 440)
SHOW, ENTRY, SUBMIT = (16, 40, 170, 34), (16, 256, 220, 34), (250, 256, 150, 34)
DIAGRAM, STATUS, RESULTS = (16, 84, 528, 160), (16, 304, 528, 32), (16, 346, 528, 82)
XBOARD_AT = (40, 40)
BULLETIN_LINE = re.compile(r"^\s*(\d+)\s*\|\s*([a-h][1-8]-?[a-h][1-8][qrbn]?)\s*\|\s*([A-Z0-9]{6})\s*$", re.I)

# Mate-in-two problems (White to move) found by a random search over sparse positions and proven sound by
# ``problem_problem`` (tests/test_mate_book.py proves every one, reflected and colour-swapped, again).
POOL = (
    "5K2/8/p7/2pPB2Q/1B6/8/8/1k6 w - - 0 1",
    "8/5RK1/8/1P1B4/8/8/3R1r2/2k5 w - - 0 1",
    "2R5/4N3/5P2/1K6/8/1k4n1/8/6Q1 w - - 0 1",
    "7R/2p5/1R6/1B4p1/4K3/8/k7/3N4 w - - 0 1",
    "5B2/7p/8/5Q2/k7/8/8/1K6 w - - 0 1",
    "3R4/8/P7/7n/1p4k1/8/6NK/5Q2 w - - 0 1",
    "3k4/8/Q2P4/4K3/3p2pn/P7/7B/8 w - - 0 1",
    "7k/1B2N1b1/p7/K7/5p2/Q7/8/7n w - - 0 1",
    "8/3PQ3/b1P5/8/5R1p/2K4k/8/8 w - - 0 1",
)
PIECE_ORDER = "KQRBNP"


def game_path(number: int) -> str:
    return f"{SAVES}/problem-{number}.pgn"


def layout() -> dict[str, Any]:
    """Where the book draws everything; boxes are [x, y, width, height] in the window."""
    return {"title": TITLE, "heading": HEADING, "heading_at": list(HEADING_AT), "scale": SCALE, "pad": PAD,
            "line_step": LINE_STEP, "size": list(BOOK_SIZE), "at": list(BOOK_AT), "show": list(SHOW),
            "entry": list(ENTRY), "submit": list(SUBMIT), "diagram": list(DIAGRAM), "status": list(STATUS),
            "results": list(RESULTS)}


def piece_lists(fen: str) -> dict[str, list[str]]:
    """{'white': ['KG1', 'RA1', ...], 'black': [...]}: each side's pieces as letter + square, kings first."""
    board = Position.from_fen(fen).board
    lists: dict[str, list[str]] = {"white": [], "black": []}
    for (x, y), ch in sorted(board.items(), key=lambda item: (PIECE_ORDER.index(item[1].upper()), item[0])):
        lists["white" if ch.isupper() else "black"].append(f"{ch.upper()}{chr(65 + x)}{y + 1}")
    return lists


def fen_from_lists(white: list[str], black: list[str], side: str) -> str:
    """The FEN of the book's piece lists (the inverse of ``piece_lists``)."""
    board = {}
    for pieces, upper in ((white, True), (black, False)):
        for piece in pieces:
            letter = piece[0] if upper else piece[0].lower()
            board[square(piece[1:].lower())] = letter
    return Position(board, side == "white").fen()


def pick_problems(rng: np.random.Generator) -> list[str]:
    """Three problems of the pool, each maybe reflected left to right and maybe colour-swapped (Black to move)."""
    chosen = []
    for index in rng.permutation(len(POOL))[:COUNT]:
        fen = POOL[int(index)]
        if rng.integers(2):
            fen = mirror_files(fen)
        if rng.integers(2):
            fen = flip_colours(fen)
        chosen.append(Position.from_fen(fen).fen())
    return chosen


def origin(image: np.ndarray, reach: int = 40) -> tuple[int, int] | None:
    """The book's top-left, found where its heading reads back near where it was put; None until drawn."""
    return pixel_font.find_drawn(image, HEADING, BOOK_AT, HEADING_AT, SCALE, reach=reach)


# ---- setup -------------------------------------------------------------------------------------------------

def setup(ctx: SetupContext) -> Prepared:
    fens = pick_problems(ctx.rng)
    problems = []
    for fen in fens:
        problem = problem_problem(fen)
        if problem:
            raise TaskError(f"{ctx.task_id} setup: problem {fen!r} is not sound: {problem}")
        key = coordinate(mate_in_two_keys(Position.from_fen(fen))[0])
        problems.append({"fen": fen, "key": key, "side": "white" if fen.split()[1] == "w" else "black"})
    # The saves: the desktop account's alone (0755), so the shell cannot put a game there; the club folder: the
    # workspace account's alone (2755), so a terminal on the desktop cannot write the bulletin.
    ctx.run(["install", "-d", "-m", "0755", "-o", DESKTOP_USER, "-g", SHARED_GROUP, SAVES])
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, CLUB])
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/problem_book.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    conf = {"problems": [{**piece_lists(p["fen"]), "side": p["side"], "key": p["key"]} for p in problems],
            "saves": SAVES, "layout": layout()}
    ctx.write_file(CONF, json.dumps(conf), owner="root", mode=0o600)
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)  # a stalled guest must not repeat a key
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {CONF} > {RECORD}", name="problembook")
    book = ctx.wait_window(f"^{TITLE}$")
    ctx.place_window(book.id, BOOK_AT)
    ctx.launch_gui(f"cd {HOME} && {{as_user}} /usr/games/xboard -ncp -startupMessage ''", name="xboard")
    board = ctx.place_window(ctx.wait_window("^xboard$").id, XBOARD_AT)
    try:
        at = wait_for(lambda: origin(ctx.client.screenshot(hide_cursor=True).image), 120, what="book drawn",
                      max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", CONF])  # the positions now live only in the book's memory
    return Prepared(params={}, truth={"problems": problems, "at": list(at), "xboard": board})


# ---- the checker -------------------------------------------------------------------------------------------

def book_records(probe: Probe) -> dict[int, dict[str, Any]]:
    """{problem: its accepted-key record} of the book's root-only record (refusals are skipped)."""
    return numbered_records(probe, RECORD, "problem", accept=lambda record: bool(record.get("key")))


def last_game(text: str) -> tuple[str | None, list[str]]:
    """(the FEN tag, the SAN moves) of the last game in a PGN file (XBoard appends a re-saved game)."""
    games = re.split(r"(?m)^(?=\[Event )", text)
    game = next((g for g in reversed(games) if g.strip()), "")
    fen = re.search(r'^\[FEN "([^"]*)"\]', game, re.M)
    body = re.sub(r"\{[^}]*\}|\([^)]*\)|^\[.*\]$|\$\d+|;[^\n]*", " ", game, flags=re.M)
    moves = [t for t in body.split() if not re.fullmatch(r"\d+\.+|1-0|0-1|1/2-1/2|\*", t)]
    moves = [re.sub(r"^\d+\.+", "", t) for t in moves]
    return (fen.group(1) if fen else None), [m for m in moves if m]


def judge_game(text: str | None, problem: Mapping[str, Any], number: int) -> str:
    """'' when the PGN's last game starts from the problem and plays its key, a reply and mate; else what is wrong."""
    if text is None:
        return f"problem {number}: {game_path(number)} is missing"
    fen, moves = last_game(text)
    want = problem["fen"].split()[:2]
    if fen is None or fen.split()[:2] != want:
        return f"problem {number}: the game starts from {fen!r}, the problem is {' '.join(want)!r}"
    if len(moves) != 3:
        return f"problem {number}: the game has {len(moves)} moves {moves[:6]}, a mate in two has 3 (key, reply, mate)"
    start = Position.from_fen(problem["fen"])
    first = start.san_move(moves[0])
    if first is None or coordinate(first) != problem["key"]:
        return f"problem {number}: the first move {moves[0]!r} is not the key"
    final, wrong = replay(problem["fen"], moves)
    if final is None:
        return f"problem {number}: {wrong}"
    return "" if final.is_mate() else f"problem {number}: {' '.join(moves)} does not end in checkmate"


def check_games(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    games = [judge_game(probe.read_text(game_path(n)), p, n) for n, p in enumerate(truth["problems"], 1)]
    return per_item_verdict(games, "the saved game plays the key, a reply and mate from the problem's position")


def check_recorded(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records, problems = book_records(probe), []
    for number, problem in enumerate(truth["problems"], 1):
        record = records.get(number)
        data = probe.read_bytes(game_path(number))
        if record is None or record.get("key") != problem["key"]:
            problems.append(f"problem {number}: the book recorded no key")
        elif data is None or hashlib.sha256(data).hexdigest() != record.get("sha256"):
            problems.append(f"problem {number}: the saved game is not the one the book recorded with the key")
        else:
            problems.append("")
    return per_item_verdict(problems, "the key was entered in the book with the saved game as it is now")


def parse_bulletin(text: str | None) -> tuple[dict[int, tuple[str, str]], str]:
    """({problem: (key, code)}, problem) of the bulletin's 'N | key | code' lines (the last line of a problem
    counts)."""
    if text is None:
        return {}, f"{BULLETIN} does not exist"
    rows: dict[int, tuple[str, str]] = {}
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        found = BULLETIN_LINE.match(line)
        if found is None:
            return {}, f"{BULLETIN} line {number} is not 'N | key | code': {line[:60]!r}"
        rows[int(found.group(1))] = (found.group(2).lower().replace("-", ""), found.group(3).upper())
    return rows, "" if rows else f"{BULLETIN} has no line"


def check_bulletin(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = parse_bulletin(probe.read_text(BULLETIN))
    if problem:
        return Verdict.failed(problem)
    records, want = book_records(probe), list(range(1, len(truth["problems"]) + 1))
    problems = [] if sorted(rows) == want else [f"lists problems {sorted(rows)}, expected {want}"]
    for number, item in enumerate(truth["problems"], 1):
        key, code = rows.get(number, ("", ""))
        want_code = str(records.get(number, {}).get("code") or "")
        if key != item["key"]:
            problems.append(f"problem {number}: key {key or '(none)'!r} is not the key")
        elif not want_code or code != want_code:
            problems.append(f"problem {number}: code {code!r}, the book's is {want_code or '(none)'!r}")
    return Verdict.check(not problems, "; ".join(problems[:4]) if problems else
                         f"every problem with its key and the book's code ({len(rows)} lines)")


# ---- the oracle --------------------------------------------------------------------------------------------

TRIES, WAITS, XBOARD_TRIES = 4, 10, 3
TYPEIN_BOX = (100, 40)  # XBoard's "Type a move" box
HEADER = re.compile(r"PROBLEM (\d) {2}(WHITE|BLACK) TO MOVE {2}MATE IN 2")
PIECE = re.compile(r"[KQRBNP][A-H][1-8]")

# The oracle's CLI step: GNU Chess (UCI) on the FEN read off the book: the key at depth 4, Black's (or White's)
# reply at depth 2, the mate at depth 2; printed as LINE N key reply mate.
ENGINE = r"""
import subprocess, sys
fen, number = sys.argv[1], sys.argv[2]
p = subprocess.Popen(["/usr/games/gnuchess", "-u"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def ask(command, answer):
    p.stdin.write(command + "\n"); p.stdin.flush()
    for line in p.stdout:
        if line.startswith(answer):
            return line.split()
ask("uci", "uciok")
moves = []
for depth in (4, 2, 2):
    ask("position fen " + fen + (" moves " + " ".join(moves) if moves else "") + "\nisready", "readyok")
    moves.append(ask("go depth %d" % depth, "bestmove")[1])
p.stdin.write("quit\n"); p.stdin.flush(); p.wait()
print("LINE", number, *moves)
"""


def _frame(ctx: OracleContext) -> np.ndarray:
    assert ctx.obs is not None
    return ctx.obs["screen"]


def _click(at: list[int], box: tuple[int, int, int, int]) -> dict[str, Any]:
    return {"kind": "click", "x": at[0] + box[0] + box[2] // 2, "y": at[1] + box[1] + box[3] // 2}


def _line(screen: np.ndarray, at: list[int], box: tuple[int, int, int, int], index: int, count: int = 40) -> str:
    return pixel_font.read_text(screen, at[0] + box[0] + PAD, at[1] + box[1] + PAD + index * LINE_STEP, SCALE, count)


def read_diagram(screen: np.ndarray, at: list[int], number: int) -> str | None:
    """Problem ``number``'s FEN read off the book's diagram; None until it shows whole."""
    header = HEADER.fullmatch(_line(screen, at, DIAGRAM, 0))
    if header is None or int(header.group(1)) != number:
        return None
    lists: dict[str, list[str]] = {"WHITE": [], "BLACK": []}
    side = ""
    for index in range(2, 7):
        text = _line(screen, at, DIAGRAM, index)
        if not text.strip():
            break
        label = re.match(r"(WHITE|BLACK):", text)
        side = label.group(1) if label else side
        body = text[7:] if len(text) > 7 else ""
        tokens = body.split()
        if not side or "?" in text or not all(PIECE.fullmatch(t) for t in tokens):
            return None
        lists[side].extend(tokens)
    if not lists["WHITE"] or not lists["BLACK"]:
        return None
    try:
        return fen_from_lists(lists["WHITE"], lists["BLACK"], header.group(2).lower())
    except ValueError:
        return None


def read_result(screen: np.ndarray, at: list[int], number: int) -> str:
    return _line(screen, at, RESULTS, number - 1)


def solve_on_host(fen: str) -> list[str]:
    """The line the gui-only ablation plays (its shell steps go nowhere): the key, the first reply, a mate."""
    pos = Position.from_fen(fen)
    key = mate_in_two_keys(pos)[0]
    after = pos.play(key)
    reply = after.legal_moves()[0]
    return [coordinate(key), coordinate(reply), coordinate(mates_in_one(after.play(reply))[0])]


def _show(ctx: OracleContext, number: int) -> Generator[ActionLike, Any, str | None]:
    for _try in range(TRIES):
        yield _click(ctx.truth["at"], SHOW)
        for _ in range(WAITS):
            fen = read_diagram(_frame(ctx), ctx.truth["at"], number)
            if fen:
                return fen
            yield {"kind": "wait", "seconds": 2}
    return None


def _type_in(ctx: OracleContext, text: str) -> Iterator[ActionLike]:
    """Text typed on XBoard's board: the first key opens its "Type a move" box, Return enters it."""
    before = _frame(ctx).copy()
    yield {"kind": "type", "text": text[0]}
    yield from wait_box(ctx, before, min_size=TYPEIN_BOX, tries=30)
    yield {"kind": "type", "text": text[1:]}
    before = _frame(ctx).copy()
    yield {"kind": "key", "keys": "Return"}
    yield from wait_box(ctx, before, min_size=TYPEIN_BOX, tries=30)  # the box closes


def _xboard(ctx: OracleContext, fen: str, line: list[str], number: int) -> Iterator[ActionLike]:
    """New game, Edit Position with the FEN typed, Edit Game with the line typed, Save Game as the problem's PGN;
    the shell checks the save's last game, and the whole is done again when it is not there or not right."""
    x, y, w, _h = ctx.truth["xboard"]
    path = game_path(number)
    for attempt in range(XBOARD_TRIES):
        yield {"kind": "click", "x": x + w // 2, "y": max(y - 10, 1)}  # the title bar: focus, the board untouched
        for keys in (("Escape",) if attempt else ()) + ("ctrl+n", "ctrl+shift+e"):
            yield {"kind": "key", "keys": keys}
            yield {"kind": "wait", "seconds": 1}
        yield from _type_in(ctx, fen)
        yield {"kind": "key", "keys": "ctrl+e"}
        yield {"kind": "wait", "seconds": 1}
        for move in line:
            yield from _type_in(ctx, move)
        before = _frame(ctx).copy()
        yield {"kind": "key", "keys": "ctrl+s"}  # File > Save Game
        yield from wait_box(ctx, before, tries=40)
        yield {"kind": "type", "text": path}
        for again in range(3):  # a file chooser may swallow the first Return to finish its completion
            token = f"{number}.{attempt}.{again}"
            yield {"kind": "key", "keys": "Return"}
            yield {"kind": "shell", "timeout": 60, "command": save_check(path, fen, token)}
            found = re.search(rf"^PGN (OK|MISSING) {re.escape(token)}$", (ctx.obs or {}).get("terminal", ""), re.M)
            if found is None or found.group(1) == "OK":
                return  # saved, or no shell to tell (the gui-only ablation): on to the book


def save_check(path: str, fen: str, token: str) -> str:
    """The shell line that waits (15 s at most) until ``path`` holds a game from ``fen`` ending in mate, and says
    PGN OK or PGN MISSING with ``token``."""
    placement = " ".join(fen.split()[:2])
    return (f"timeout 15 sh -c 'until grep -qF \"[FEN \\\"{placement}\" {path} 2>/dev/null && "
            f"tail -n 3 {path} | grep -q \"#\"; do sleep 0.5; done' && echo PGN OK {token} || "
            f"echo PGN MISSING {token}")


def _enter_key(ctx: OracleContext, number: int, key: str) -> Generator[ActionLike, Any, str]:
    """The key typed into the book and submitted until its solution code shows ('' when it never does)."""
    want = re.compile(rf"PROBLEM {number}: KEY {key.upper()} {{2}}CODE ([A-Z2-9]{{6}})")
    for _try in range(TRIES):
        yield _click(ctx.truth["at"], ENTRY)
        for keys in ("End", "shift+Home"):
            yield {"kind": "key", "keys": keys}
        yield {"kind": "type", "text": key}
        yield _click(ctx.truth["at"], SUBMIT)
        for _ in range(WAITS):
            found = want.fullmatch(read_result(_frame(ctx), ctx.truth["at"], number))
            if found:
                return found.group(1)
            yield {"kind": "wait", "seconds": 2}
    return ""


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    for number in range(1, COUNT + 1):
        fen = yield from _show(ctx, number)
        if fen is None:
            break
        yield {"kind": "shell", "timeout": 300, "command": python_command(ENGINE, fen, str(number))}
        found = re.search(rf"^LINE {number} (\S+) (\S+) (\S+)$", (ctx.obs or {}).get("terminal", ""), re.M)
        line = list(found.groups()) if found else solve_on_host(fen)  # gui-only: the terminal is on the desktop
        yield from _xboard(ctx, fen, line, number)
        code = yield from _enter_key(ctx, number, line[0])
        yield {"kind": "shell", "command": bulletin_command(number, line[0], code)}
    yield {"kind": "done"}


def bulletin_command(number: int, key: str, code: str) -> str:
    """The shell line that adds a problem's line to the bulletin (the first one starts it afresh)."""
    target = BULLETIN.replace(HOME, "~")
    return f"printf '%s\\n' '{number} | {key} | {code}' {'>' if number == 1 else '>>'} {target} && cat {target}"


TASK = Task(
    id="Weave-Games-7",
    title="Solve the chess club's three mate-in-two problems: the book, GNU Chess and XBoard, then the bulletin",
    instruction=(
        "You keep the chess club's problem book. This week's three mate-in-two problems are in the 'Problem Book' "
        "window: press 'Show problem' to see the current problem: the side to move and each side's pieces, written "
        "as piece letter (K king, Q queen, R rook, B bishop, N knight, P pawn) and square (e.g. KG1 is a king on "
        "g1). No side may castle and there is no en passant square. For each problem, in order: find its key (the "
        "one first move that mates in two against every defence) and a mating line (the key, a reply, mate); GNU "
        "Chess in your shell can do this (`gnuchess -u` speaks UCI: `position fen <FEN> [moves ...]`, "
        "`go depth 4`). Play the line in the open XBoard window: set the position up (Mode > Edit Position, then "
        "type the FEN on the board and press Return; File > New Game first clears a finished game), switch to Mode "
        "> Edit Game, play the three moves and save the game with File > Save Game as ~/problems/problem-N.pgn (N "
        "the problem number). Then type the key in the book as a coordinate move (like e2e4, with the promotion "
        "piece for a promotion, like b7b8q) and press 'Submit key': wrong keys are refused (five lock the problem);"
        " the right key, once the game is saved, shows the problem's solution code and the book moves on to the "
        "next problem. From your shell, write the club bulletin ~/club/bulletin.txt: one line per problem, "
        "'N | key | code' (e.g. 2 | d1h5 | ABC234). Then finish."),
    channels=Channels(
        gui="read each problem off the book, set it up in XBoard, play the mating line there and save the game, "
            "enter the key in the book and read its solution code back",
        cli="turn each position into FEN, have GNU Chess find the key and the mating line, and write the bulletin "
            "with the keys and the book's codes",
        why_both="the positions and the solution codes exist only as the book's pixels and the games must be saved "
                 "from XBoard into a folder only the desktop account can write, while the key and the mating line "
                 "come from a chess engine in the shell and the bulletin belongs in a folder only the shell's "
                 "account can write"),
    setup=setup,
    clauses=(
        Clause("games_mate", "every problem's ~/problems/problem-N.pgn plays its key, a reply and mate from the "
                             "problem's position", check_games, weight=3.0, critical=True, cap=0.5),
        Clause("keys_recorded", "the book recorded every problem's key with its saved game as it is now",
               check_recorded, weight=2.0, critical=True, cap=0.5),
        Clause("bulletin", "~/club/bulletin.txt lists every problem with its key and the book's solution code",
               check_bulletin, weight=2.0, critical=True, cap=0.25),
    ),
    deliverables=(
        *(Deliverable(game_path(n), "gui", description=f"~/problems/problem-{n}.pgn (saved by XBoard)")
          for n in range(1, COUNT + 1)),
        Deliverable(RECORD, "gui", owner="root", description="the book's record (captured by setup)"),
        Deliverable(BULLETIN, "cli", description="~/club/bulletin.txt"),
    ),
    rules=(GuiArtifactViaCli([game_path(n) for n in range(1, COUNT + 1)],
                             "the games must come from XBoard's Save Game dialog"),),
    oracle=oracle,
    withheld=("problems",),
    profile="full",
    apps=("Problem Book (python3-tk)", "xboard", "gnuchess", "python3"),
    max_steps=500,
    time_budget_s=3600.0,
)
