"""Weave-Games-4: break the ties of a club's Swiss chess tournament and answer a question about the standings.

The arbiter's records (players.csv, rules.txt with the seed's tiebreak order, one PGN file per round) are
in /srv/arbiter, a folder only the workspace account can read: a desktop terminal cannot see them. One
round's pairings and results were entered only on a Tk "Tournament Board" (desktop account): a round's
table appears only when its tab is clicked, drawn as lit cells of a dot-matrix font on a canvas, from a
root-only stdin file that setup deletes once the board is up; so that round exists only as pixels. The
standings (points, Buchholz, Buchholz Cut-1, Sonneborn-Berger, wins) over all rounds need a program, and
the seeds are drawn so that the leaders tie on points, the tiebreak decides, and the answer without the
board's round differs. The question varies by seed (the winner, the top three in order, a player's
Sonneborn-Berger score); the answer is scored from ``done(answer=...)``, the standings the shell wrote
to ~/standings.csv, and the winner certified in the board's form (a root-only record).
"""

from __future__ import annotations

import csv
import inspect
import io
import json
import re
import textwrap
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.dialogs import json_record
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.answers import check_items, check_number, check_text
from weavegym.evaluators.provenance import Deliverable

ARBITER = "/srv/arbiter"
STANDINGS = f"{HOME}/standings.csv"
APP_DIR = "/usr/local/share/tournamentboard"
APP = f"{APP_DIR}/tournament_board.py"
BOARD_IN = f"{PRIVATE_DIR}/board.json"
RECORD = f"{PRIVATE_DIR}/certified.json"
TITLE = "Tournament Board"
HEADER = ("rank", "player", "points", "buchholz", "buchholz_cut1", "sonneborn_berger", "wins")
SURNAMES = ("Novak", "Okafor", "Berger", "Iyer", "Sato", "Moreno", "Kowalski", "Lindqvist", "Dubois", "Haider",
            "Petrov", "Rossi", "Tanaka", "Weber", "Yildiz", "Abara", "Chen", "Fischer", "Garcia", "Holm",
            "Jensen", "Khan", "Larsen", "Mendes", "Nagy", "Olsen", "Park", "Quinn", "Rahman", "Silva",
            "Urban", "Varga", "Walsh", "Zeller")
EVENTS = ("Autumn Open", "Winter Rapid Cup", "Championship", "Spring Swiss", "Members' Trophy")
CLUBS = ("Harbour", "Riverside", "Old Mill", "Northgate", "Castle Hill")
# Tiebreak orders a seed may use (rules.txt states it; the rating is always the last resort).
ORDERS = (("buchholz", "sonneborn_berger", "wins"), ("sonneborn_berger", "buchholz", "wins"),
          ("buchholz_cut1", "buchholz", "sonneborn_berger"), ("wins", "sonneborn_berger", "buchholz"))
TIEBREAK_NAMES = {"buchholz": "Buchholz", "buchholz_cut1": "Buchholz Cut-1", "sonneborn_berger": "Sonneborn-Berger",
                  "wins": "Number of wins"}
KINDS = ("winner", "top3", "sb")
PGN_RESULT = {"1-0": "1-0", "0-1": "0-1", "1/2": "1/2-1/2"}  # as the board shows it -> as PGN writes it
BOARD_RESULT = {pgn: shown for shown, pgn in PGN_RESULT.items()}

# The board's geometry (pixels inside its window): the fixture places its widgets here, the oracle reads here.
WIDTH, MARGIN, SCALE = 900, 20, 3
CANVAS = (MARGIN, 92, WIDTH - 2 * MARGIN, 292)
COL_X = (12, 90, 380, 670)  # board, white, black, result (canvas pixels)
NAME_CHARS, RESULT_CHARS = 9, 3
TITLE_Y, HEAD_Y, FIRST_ROW_Y, ROW_H = 10, 52, 88, 38
COVER = "SELECT A ROUND"

Game = tuple[str, str, str]  # (white, black, PGN result)


# -- the tournament's maths: self-contained, shipped to the guest as the oracle's program -------------------


def standings(games: list[Game], ratings: dict[str, int], order: list[str]) -> list[list[Any]]:
    """Final standings rows (HEADER's columns), best first.

    Points, then the tiebreaks in ``order`` (names of the row's columns), then the higher rating. Buchholz:
    the sum of the opponents' final points; Cut-1 drops the lowest of them; Sonneborn-Berger: the final
    points of each beaten opponent plus half those of each drawn one.
    """
    value = {"1-0": 1.0, "0-1": 0.0, "1/2-1/2": 0.5}
    score = {p: 0.0 for p in ratings}
    met: dict[str, list[tuple[str, float]]] = {p: [] for p in ratings}
    for white, black, result in games:
        won = value[result]
        score[white] += won
        score[black] += 1.0 - won
        met[white].append((black, won))
        met[black].append((white, 1.0 - won))
    table = {}
    for p in ratings:
        opponents = sorted(score[o] for o, _s in met[p])
        buchholz = sum(opponents)
        table[p] = {"points": score[p], "buchholz": buchholz,
                    "buchholz_cut1": buchholz - (opponents[0] if opponents else 0.0),
                    "sonneborn_berger": sum(s * score[o] for o, s in met[p]),
                    "wins": float(sum(1 for _o, s in met[p] if s == 1.0))}
    ranked = sorted(ratings, key=lambda p: (table[p]["points"], *[table[p][t] for t in order], ratings[p]),
                    reverse=True)
    return [[i + 1, p, table[p]["points"], table[p]["buchholz"], table[p]["buchholz_cut1"],
             table[p]["sonneborn_berger"], int(table[p]["wins"])] for i, p in enumerate(ranked)]


def read_records(folder: str) -> tuple[list[Game], dict[str, int], list[str]]:
    """The arbiter's files: every PGN game, the ratings and the tiebreak order of rules.txt."""
    import csv
    import glob
    import re
    names = {"buchholz": "buchholz", "buchholz cut-1": "buchholz_cut1", "sonneborn-berger": "sonneborn_berger",
             "number of wins": "wins"}
    games = []
    for path in sorted(glob.glob(f"{folder}/round-*.pgn")):
        with open(path) as pgn:
            text = pgn.read()
        for block in re.split(r"\n\s*\n(?=\[)", text.strip()):
            tags = dict(re.findall(r'^\[(\w+) "([^"]*)"\]', block, re.M))
            if "White" in tags:
                games.append((tags["White"], tags["Black"], tags["Result"]))
    with open(f"{folder}/players.csv") as players:
        ratings = {row["player"]: int(row["rating"]) for row in csv.DictReader(players)}
    with open(f"{folder}/rules.txt") as rules:
        listed = re.findall(r"^\s*\d+\.\s+(.+?)\s*$", rules.read(), re.M)
    order = [names[line.lower()] for line in listed if line.lower() in names]
    return games, ratings, order


def _format(number: float) -> str:
    return f"{number:g}"


# -- generation ---------------------------------------------------------------------------------------------


def _pairings(rng: np.random.Generator, players: list[str], rounds: int) -> list[list[tuple[str, str]]] | None:
    """Random pairings, no two players meeting twice, random colours (None when a round cannot be paired)."""
    met: set[frozenset[str]] = set()
    schedule = []
    for _round in range(rounds):
        for _try in range(200):
            pool = [players[int(i)] for i in rng.permutation(len(players))]
            pairs = []
            while pool:
                first = pool.pop(0)
                partner = next((o for o in pool if frozenset((first, o)) not in met), None)
                if partner is None:
                    break
                pool.remove(partner)
                pairs.append((first, partner) if rng.random() < 0.5 else (partner, first))
            if not pool and len(pairs) == len(players) // 2:
                break
        else:
            return None
        met.update(frozenset(p) for p in pairs)
        schedule.append(pairs)
    return schedule


def _result(rng: np.random.Generator, white: str, black: str, ratings: dict[str, int]) -> str:
    if rng.random() < 0.3:
        return "1/2-1/2"
    stronger_wins = rng.random() < 0.65
    white_stronger = ratings[white] > ratings[black]
    return "1-0" if stronger_wins == white_stronger else "0-1"


def _answer(rows: list[list[Any]], kind: str, subject: str) -> Any:
    if kind == "winner":
        return rows[0][1]
    if kind == "top3":
        return [row[1] for row in rows[:3]]
    return next(row[5] for row in rows if row[1] == subject)


def _decided(rows: list[list[Any]], order: list[str], upto: int) -> bool:
    """The first ``upto`` places differ before the rating (the last resort) is needed."""
    columns = [HEADER.index(name) for name in ("points", *order)]
    keys = [tuple(row[c] for c in columns) for row in rows[:upto + 1]]
    return len(set(keys)) == len(keys)


def draw_tournament(rng: np.random.Generator, kind: str) -> dict[str, Any] | None:
    """One candidate tournament, or None when it does not make the tiebreak matter for ``kind``.

    Kept only when: the leaders tie on points and the tiebreaks (not the rating) decide the places asked
    about; the answer and the winner differ without the board's round (a shell-only agent is wrong); the
    winner by points and rating alone, and under some other tiebreak order, differs (the tiebreak and
    rules.txt matter).
    """
    count = int(rng.choice([8, 10]))
    rounds = int(rng.integers(5, 7))
    players = [str(n) for n in rng.choice(SURNAMES, size=count, replace=False)]
    ratings = {p: int(r) for p, r in zip(players, rng.choice(np.arange(1400, 2300), size=count, replace=False),
                                         strict=True)}
    schedule = _pairings(rng, players, rounds)
    if schedule is None:
        return None
    order = list(ORDERS[int(rng.integers(len(ORDERS)))])
    board_round = int(rng.integers(2, rounds + 1))  # never round 1: its tab is not the first one clicked
    games = [[(w, b, _result(rng, w, b, ratings)) for w, b in pairs] for pairs in schedule]
    every = [g for rnd in games for g in rnd]
    filed = [g for i, rnd in enumerate(games, 1) if i != board_round for g in rnd]
    rows, without = standings(every, ratings, order), standings(filed, ratings, order)
    plain = standings(every, ratings, [])
    if rows[0][2] != rows[1][2] or not _decided(rows, order, 3) or rows[0][1] in (without[0][1], plain[0][1]):
        return None
    if all(standings(every, ratings, list(other))[0][1] == rows[0][1] for other in ORDERS if list(other) != order):
        return None  # rules.txt's order must matter too
    subject = ""
    if kind == "sb":
        fine = [r[1] for r in rows if r[5] != next(w[5] for w in without if w[1] == r[1]) and r[5] != r[3]]
        if not fine:
            return None
        subject = fine[int(rng.integers(len(fine)))]
    answer = _answer(rows, kind, subject)
    if kind == "top3" and (answer == _answer(without, kind, "") or answer == _answer(plain, kind, "")):
        return None
    return {"players": players, "ratings": ratings, "order": order, "board_round": board_round, "games": games,
            "rows": rows, "subject": subject, "answer": answer, "rounds": rounds}


def make_tournament(rng: np.random.Generator, kind: str) -> dict[str, Any]:
    for _attempt in range(5000):
        found = draw_tournament(rng, kind)
        if found is not None:
            return found
    raise TaskError(f"no tournament for a {kind!r} question in 5000 draws")


def question(kind: str, subject: str) -> str:
    if kind == "winner":
        return "who wins the tournament after the tiebreaks? Answer with the player's name."
    if kind == "top3":
        return "who finish first, second and third, in that order? Answer with the three names, comma-separated."
    return f"what is {subject}'s final Sonneborn-Berger score? Answer with the number."


# -- the arbiter's files --------------------------------------------------------------------------------------


def pgn_text(event: str, club: str, number: int, games: list[Game]) -> str:
    blocks = []
    for board, (white, black, result) in enumerate(games, 1):
        tags = (("Event", event), ("Site", club), ("Date", "2026.11.??"), ("Round", f"{number}.{board}"),
                ("White", white), ("Black", black), ("Result", result))
        blocks.append("".join(f'[{k} "{v}"]\n' for k, v in tags) + f"\n{{scoresheet filed}} {result}\n")
    return "\n".join(blocks)


def rules_text(order: list[str]) -> str:
    listed = "".join(f"  {i}. {TIEBREAK_NAMES[t]}\n" for i, t in enumerate(order, 1))
    return ("Scoring: a win is 1 point, a draw 1/2, a loss 0.\n\n"
            "Players level on points are ranked by these tiebreaks, in this order:\n" + listed +
            f"  {len(order) + 1}. Higher rating (players.csv)\n\n"
            "Definitions (final points of the opponents, over every round):\n"
            "  Buchholz: the sum of the final points of all of the player's opponents.\n"
            "  Buchholz Cut-1: the Buchholz less the final points of the player's lowest-scoring opponent.\n"
            "  Sonneborn-Berger: the final points of every opponent the player beat, plus half the final\n"
            "    points of every opponent the player drew with.\n"
            "  Number of wins: games won.\n")


def _write_records(ctx: SetupContext, tour: dict[str, Any], event: str, club: str) -> None:
    """The arbiter's folder: the workspace account's alone (0700), so a desktop terminal cannot read it."""
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, ARBITER])
    files = {"players.csv": "player,rating\n" + "".join(f"{p},{tour['ratings'][p]}\n" for p in sorted(tour["players"])),
             "rules.txt": rules_text(tour["order"])}
    for number, games in enumerate(tour["games"], 1):
        if number != tour["board_round"]:
            files[f"round-{number}.pgn"] = pgn_text(event, club, number, games)
    for name, text in files.items():
        ctx.write_file(f"{ARBITER}/{name}", text, owner=WORKSPACE_USER, mode=0o600)


# -- the board ------------------------------------------------------------------------------------------------


def board_layout(rounds: int, players: int) -> dict[str, Any]:
    """Where the board puts each widget: boxes are [x, y, width, height] of its window."""
    tab_w = (WIDTH - 2 * MARGIN) // rounds
    form_y = CANVAS[1] + CANVAS[3] + 14
    per_line = 5
    radios = [[MARGIN + (i % per_line) * 170, form_y + 28 + (i // per_line) * 30, 160, 26] for i in range(players)]
    note_y = form_y + 28 + ((players + per_line - 1) // per_line) * 30 + 8
    return {"width": WIDTH, "height": note_y + 96, "margin": MARGIN, "heading_y": 12, "scale": SCALE,
            "tabs": [[MARGIN + i * tab_w, 50, tab_w - 6, 34] for i in range(rounds)], "canvas": list(CANVAS),
            "col_x": list(COL_X), "title_y": TITLE_Y, "head_y": HEAD_Y, "first_row_y": FIRST_ROW_Y,
            "row_h": ROW_H, "cover": COVER, "form_y": form_y, "radios": radios,
            "note": [MARGIN + 60, note_y, 560, 30], "status_y": note_y + 60,
            "certify": [WIDTH - MARGIN - 180, note_y + 44, 180, 34]}


def board_rows(games: list[Game]) -> list[list[str]]:
    """A round as the board shows it: board number, names upper-cased, the short result."""
    return [[str(i), w.upper(), b.upper(), BOARD_RESULT[r]] for i, (w, b, r) in enumerate(games, 1)]


def board_input(tour: dict[str, Any], event: str) -> dict[str, Any]:
    """What the board reads on stdin: every round's pairings, results only for the board's round."""
    shown = [board_rows(games) if i == tour["board_round"] else
             [[str(b), w.upper(), k.upper(), "---"] for b, (w, k, _r) in enumerate(games, 1)]
             for i, games in enumerate(tour["games"], 1)]
    return {"event": event, "rounds": shown, "players": sorted(tour["players"]),
            "layout": board_layout(tour["rounds"], len(tour["players"]))}


def _open_board(ctx: SetupContext, tour: dict[str, Any], event: str) -> tuple[list[int], dict[str, Any]]:
    """Start the board with every round on its stdin, and wait until it has drawn its cover and form."""
    board = board_input(tour, event)
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/tournament_board.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    ctx.write_file(BOARD_IN, json.dumps(board), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {BOARD_IN} > {RECORD}", name="tournamentboard")
    window = ctx.wait_window(f"^{TITLE}$").geometry
    try:  # mapped is not drawn (TCG): wait for the cover's dot-matrix title
        wait_for(lambda: board_drawn(ctx.client.screenshot().image, window), 120,
                 what="the Tournament Board drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", BOARD_IN])  # the app has read it: the board's round now lives only on screen
    return window, board["layout"]


def board_drawn(image: np.ndarray, window: list[int]) -> bool:
    """True once the canvas shows the cover's dot-matrix title."""
    return canvas_title(image, window) == COVER


def _canvas_origin(window: list[int]) -> tuple[int, int]:
    return window[0] + CANVAS[0], window[1] + CANVAS[1]


def canvas_title(image: np.ndarray, window: list[int]) -> str:
    x, y = _canvas_origin(window)
    return pixel_font.read_text(image, x + COL_X[0], y + TITLE_Y, SCALE, len(COVER)).strip()


def read_round(image: np.ndarray, window: list[int], boards: int) -> list[Game]:
    """The games of the round the canvas shows, as read off the screen: (WHITE, BLACK, PGN result)."""
    x, y = _canvas_origin(window)
    games = []
    for i in range(boards):
        top = y + FIRST_ROW_Y + i * ROW_H
        white, black = (pixel_font.read_text(image, x + cx, top, SCALE, NAME_CHARS).strip() for cx in COL_X[1:3])
        shown = pixel_font.read_text(image, x + COL_X[3], top, SCALE, RESULT_CHARS).strip()
        if white and black and shown in PGN_RESULT:
            games.append((white, black, PGN_RESULT[shown]))
    return games


def _center(x: int, y: int, box: list[int]) -> list[int]:
    return [x + box[0] + box[2] // 2, y + box[1] + box[3] // 2]


def click_targets(window: list[int], layout: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Screen points of the tabs, the radio buttons (by name), the note and the Certify button."""
    x, y = window[0], window[1]
    return {"tabs": [_center(x, y, box) for box in layout["tabs"]],
            "radios": {name: _center(x, y, box) for name, box in zip(names, layout["radios"], strict=True)},
            "note": _center(x, y, layout["note"]), "certify": _center(x, y, layout["certify"])}


def setup(ctx: SetupContext) -> Prepared:
    kind = KINDS[ctx.seed % len(KINDS)]
    tour = make_tournament(ctx.rng, kind)
    club = f"{CLUBS[int(ctx.rng.integers(len(CLUBS)))]} Chess Club"
    event = f"{club} {EVENTS[int(ctx.rng.integers(len(EVENTS)))]}"
    _write_records(ctx, tour, event, club)
    window, layout = _open_board(ctx, tour, event)
    names = sorted(tour["players"])
    board_games = tour["games"][tour["board_round"] - 1]
    return Prepared(params={"event": event, "question": question(kind, tour["subject"])}, truth={
        "kind": kind, "subject": tour["subject"], "players": names, "board_round": tour["board_round"],
        "boards": len(board_games), "window": window, "targets": click_targets(window, layout, names),
        "board_games": [list(g) for g in board_games], "standings": tour["rows"], "answer": tour["answer"],
        "winner": tour["rows"][0][1]})


# -- the checker ------------------------------------------------------------------------------------------------


def check_answer(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    answer = probe.episode.answer
    if truth["kind"] == "winner":
        return check_text(answer, truth["answer"])
    if truth["kind"] == "top3":
        return check_items(answer, truth["answer"], ordered=True)
    return check_number(answer, truth["answer"], abs_tol=0.001)


def parse_standings(text: str) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or [f.strip().lower() for f in reader.fieldnames] != list(HEADER):
        raise ValueError(f"the header is {reader.fieldnames}, not {','.join(HEADER)}")
    return [{k.strip().lower(): (v or "").strip() for k, v in row.items() if k} for row in reader]


def _row_right(found: dict[str, str], want: list[Any]) -> bool:
    try:
        numbers = [float(found[h]) for h in HEADER[2:]]
    except (KeyError, ValueError):
        return False
    return (found.get("player", "").casefold() == str(want[1]).casefold() and found.get("rank") == str(want[0])
            and all(abs(a - float(b)) < 1e-6 for a, b in zip(numbers, want[2:], strict=True)))


def check_standings(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(STANDINGS)
    if text is None:
        return Verdict.failed(f"{STANDINGS} does not exist")
    rows = parse_standings(text)  # a wrong header raises: that fails the clause
    want = truth["standings"]
    right = sum(1 for found, row in zip(rows, want, strict=False) if _row_right(found, row))
    evidence = f"{right}/{len(want)} standings rows match (rank, player, points and tiebreaks); {len(rows)} rows read"
    if right == len(want) == len(rows):
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right >= len(want) // 2 else Verdict.failed(evidence)


def certified(probe: Probe) -> dict[str, Any] | None:
    return json_record(probe, RECORD)


def check_certified(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = certified(probe)
    if found is None:
        return Verdict.failed("no winner was certified on the Tournament Board")
    return Verdict.check(found.get("winner") == truth["winner"],
                         f"the board certified {found.get('winner')!r}; the winner is {truth['winner']!r}")


# -- the oracle -------------------------------------------------------------------------------------------------

ROW_LINE = re.compile(r"^ROW (\d+),([A-Za-z]+),([0-9.]+),([0-9.]+),([0-9.]+),([0-9.]+),(\d+)\s*$", re.M)


def compute_program(board_games: list[Game], folder: str = ARBITER, out: str = STANDINGS) -> str:
    """The oracle's python step: the arbiter's games plus the board's round (as read), the standings.

    It ships the very functions setup's truth came from (``standings``, ``read_records``), so the two
    cannot drift apart; the board's names are matched to players.csv's by upper case, as the board shows them.
    """
    source = "\n".join(textwrap.dedent(inspect.getsource(f)) for f in (standings, read_records, _format))
    main = f"""
games, ratings, order = read_records({folder!r})
names = {{p.upper(): p for p in ratings}}
games += [(names[w], names[b], r) for w, b, r in {board_games!r} if w in names and b in names]
rows = standings(games, ratings, order)
lines = [",".join(str(v) if isinstance(v, (int, str)) else _format(v) for v in row) for row in rows]
with open({out!r}, "w") as sheet:
    sheet.write({",".join(HEADER)!r} + "\\n" + "".join(line + "\\n" for line in lines))
print("".join("ROW " + line + "\\n" for line in lines), end="")
"""
    return f"from __future__ import annotations\n{source}\n{main}"


def parse_rows(terminal: str) -> list[list[Any]]:
    return [[int(m[1]), m[2], float(m[3]), float(m[4]), float(m[5]), float(m[6]), int(m[7])]
            for m in ROW_LINE.finditer(terminal.replace("\r", ""))]


def spoken(kind: str, rows: list[list[Any]], subject: str) -> str:
    """The oracle's answer from the standings it computed ("" when it has none)."""
    if not rows:
        return ""
    if kind == "sb":
        return next((_format(r[5]) for r in rows if r[1] == subject), "")
    found = _answer(rows, kind, subject)
    return found if isinstance(found, str) else ", ".join(found)


def _wait_round(ctx: OracleContext, number: int, tries: int = 30) -> Iterator[ActionLike]:
    """Wait steps until the canvas shows the round's title (the click is drawn under TCG with a delay)."""
    for _try in range(tries):
        assert ctx.obs is not None
        if canvas_title(ctx.obs["screen"], ctx.truth["window"]) == f"ROUND {number}":
            return
        yield {"kind": "wait", "seconds": 0.5}


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    truth, targets = ctx.truth, ctx.truth["targets"]
    number = truth["board_round"]
    tab = targets["tabs"][number - 1]
    yield {"kind": "click", "x": tab[0], "y": tab[1]}
    yield from _wait_round(ctx, number)
    assert ctx.obs is not None
    board_games = read_round(ctx.obs["screen"], truth["window"], truth["boards"])
    yield {"kind": "python", "code": compute_program(board_games), "timeout": 60}
    rows = parse_rows((ctx.obs or {}).get("terminal", ""))
    if rows:
        winner = targets["radios"][rows[0][1]]
        yield {"kind": "click", "x": winner[0], "y": winner[1]}
        yield {"kind": "click", "x": targets["note"][0], "y": targets["note"][1]}
        yield {"kind": "type", "text": f"{rows[0][2]:g} points, first on tiebreak"}
        yield {"kind": "click", "x": targets["certify"][0], "y": targets["certify"][1]}
        # The board writes its record as it exits; pgrep sees every account's processes ([t]: not this sh).
        yield {"kind": "shell", "command": "timeout 60 sh -c 'while pgrep -f \"tournament_boar[d]\" >/dev/null; "
                                           "do sleep 0.2; done'", "timeout": 90}
    yield {"kind": "done", "answer": spoken(truth["kind"], rows, truth["subject"])}


TASK = Task(
    id="Weave-Games-4",
    title="Break the ties of a club's Swiss chess tournament",
    instruction=(
        "The Swiss chess tournament '{event}' is over. The arbiter's records are in /srv/arbiter: players.csv "
        "(names and ratings), rules.txt (scoring and the tiebreak order) and one PGN file per round; one round's "
        "pairings and results were entered only on the open 'Tournament Board' window (click a round's tab to see "
        "its table). 1) Compute the final standings over all rounds, ties on points broken as rules.txt says, and "
        "write them to ~/standings.csv with the header rank,player,points,buchholz,buchholz_cut1,sonneborn_berger,"
        "wins: one row per player, best first, names as in players.csv, numbers as decimals (e.g. 3.5, 12.25). "
        "2) On the Tournament Board, select the tournament's winner under 'Certify winner', add a short note and "
        "press 'Certify winner'. 3) Finish with done, answering: {question}"),
    channels=Channels(
        gui="read the board-only round's pairings and results off the Tournament Board and certify the winner",
        cli="read the arbiter's PGN files and rules, compute points and tiebreaks over all rounds, write the "
            "standings",
        why_both="one round exists only as pixels on the board and the certificate only in its form, while the "
                 "other rounds, the tiebreak rules and the standings are in files only the shell's account can "
                 "read or write; the answer needs every round"),
    setup=setup,
    clauses=(
        Clause("answer", "the answer to the seed's question about the final standings is right", check_answer,
               weight=2.0, critical=True),
        Clause("standings_written", "~/standings.csv holds every player's rank, points and tiebreaks",
               check_standings),
        Clause("winner_certified", "the Tournament Board certified the tournament's winner", check_certified,
               critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the board's certificate (captured by setup)"),
        Deliverable(STANDINGS, "cli", description="~/standings.csv"),
    ),
    withheld=("board_games", "standings", "answer", "winner"),
    oracle=oracle,
    apps=("python3-tk",),
    max_steps=60,
    time_budget_s=600.0,
)
