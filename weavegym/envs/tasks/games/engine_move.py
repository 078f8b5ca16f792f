"""Weave-Games-2: ask GNU Chess for the best move of the position on the xboard board, play it, save the PGN.

The position exists only in the running xboard (it was loaded from a file that
setup deleted), and the shell (workspace account) cannot reach the desktop: no
clipboard, no windows. The agent reads the position off the board and types it
(as FEN) into its engine command. The engine's choice at a fixed depth comes
from running gnuchess from the command line (CLI), written to a file that must
belong to the workspace account; the move must then be played on the xboard
board and the game saved as PGN from xboard's File > Save Game dialog (GUI),
a file that must belong to the desktop account. The checker compares the saved
PGN with the engine's move, which setup computed in the guest with the same
engine and depth.

Positions: one of 12 middlegames, colour-reversed or not, then 2-7 random quiet
plies (legal, no capture, castling or promotion) chosen by the seed, so the
positions (and their best moves) do not repeat across seeds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.games.sgt_common import python_command, wait_box, wait_file_action
from weavegym.evaluators import Clause, GuiArtifactViaCli, Probe, Verdict

PGN = f"{HOME}/analysis.pgn"
BEST = f"{HOME}/best_move.txt"
START = "/tmp/.position.fen"
DEPTH = 5
MIN_PLIES, MAX_PLIES = 2, 7
# Middlegame positions (White to move) reached by well-known opening lines.
POSITIONS = (
    "r1bq1rk1/2p1bppp/p2p1n2/np2p3/4P3/1BP2N1P/PP1P1PP1/RNBQR1K1 w - -",
    "rn1q1rk1/1p2bppp/p2pbn2/4p3/4P3/1NN1BP2/PPPQ2PP/R3KB1R w KQ -",
    "r1bq1rk1/pp3ppp/2n1pn2/2p5/2pP4/P1PBPN2/5PPP/R1BQ1RK1 w - -",
    "rnb2rk1/p1p1qpp1/1p2p2p/3n4/3P4/2N1PN2/PP3PPP/R2QKB1R w KQ -",
    "r1b2rk1/pp1nqppp/2n1p3/2ppP3/3P1P2/2N2N2/PPPQ2PP/R3KB1R w KQ -",
    "r2qkbnr/pp1nppp1/2p4p/7P/3P4/3b1NN1/PPP2PP1/R1BQK2R w KQkq -",
    "r2q1rk1/ppp1bppp/1nn1b3/4p3/8/P1NP1NP1/1P2PPBP/R1BQ1RK1 w - -",
    "r1bqk2r/ppp2ppp/2n5/3n4/2BP4/5N2/PP1N1PPP/R2QK2R w KQkq -",
    "r1bq1rk1/pppnnpbp/3p2p1/3Pp3/2P1P3/2N5/PP2BPPP/R1BQNRK1 w - -",
    "r1b1kb1r/p1pp1ppp/1np1q3/4P3/2P5/8/PP1NQPPP/R1B1KB1R w KQkq -",
    "rn1qkb1r/pp3p1p/2p1pp2/5b2/2BP4/5N2/PPPB1PPP/R2QK2R w KQkq -",
    "r3qrk1/pppbp1bp/n2p1np1/3P1p2/2P5/2N2NP1/PP2PPBP/1RBQ1RK1 w - -",
)

# Asks gnuchess (UCI mode) for its move: argv = FEN, depth; prints "bestmove <move>".
ENGINE = r"""
import subprocess, sys
fen, depth = sys.argv[1], sys.argv[2]
p = subprocess.Popen(["/usr/games/gnuchess", "-u"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def ask(command, answer):
    p.stdin.write(command + "\n"); p.stdin.flush()
    for line in p.stdout:
        if line.startswith(answer):
            return line.split()
ask("uci", "uciok")
ask(f"position fen {fen}\nisready", "readyok")
print("bestmove", ask(f"go depth {depth}", "bestmove")[1])
p.stdin.write("quit\n"); p.stdin.flush(); p.wait()
"""

# The oracle's CLI step: the engine on the FEN the agent read off the board, its move into ~/best_move.txt.
ORACLE_CLI = ENGINE.strip().replace('print("bestmove", ask(f"go depth {depth}", "bestmove")[1])',
                                    'move = ask(f"go depth {depth}", "bestmove")[1]\n'
                                    'open("best_move.txt", "w").write(move + "\\n")\nprint("BEST", move)')

KNIGHT = ((1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2))
KING = ((1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1))
ROOK, BISHOP = ((1, 0), (0, 1), (-1, 0), (0, -1)), ((1, 1), (-1, 1), (-1, -1), (1, -1))
Board = dict[tuple[int, int], str]  # (file 0-7, rank 0-7) -> FEN letter; empty squares absent


def parse_board(fen: str) -> Board:
    board: Board = {}
    for row, text in enumerate(fen.split()[0].split("/")):
        col = 0
        for ch in text:
            if ch.isdigit():
                col += int(ch)
            else:
                board[(col, 7 - row)] = ch
                col += 1
    return board


def board_fen(board: Board) -> str:
    rows = []
    for rank in range(7, -1, -1):
        row, empty = "", 0
        for file in range(8):
            ch = board.get((file, rank))
            if ch is None:
                empty += 1
                continue
            row += (str(empty) if empty else "") + ch
            empty = 0
        rows.append(row + (str(empty) if empty else ""))
    return "/".join(rows)


def attacked(board: Board, square: tuple[int, int], by_white: bool) -> bool:
    """Whether the side ``by_white`` attacks ``square``."""
    x, y = square

    def has(at: tuple[int, int], letters: str) -> bool:
        ch = board.get(at)
        return ch is not None and ch.isupper() == by_white and ch.upper() in letters

    pawn_rank = y - 1 if by_white else y + 1
    if any(has((x + dx, pawn_rank), "P") for dx in (-1, 1)):
        return True
    if any(has((x + dx, y + dy), "N") for dx, dy in KNIGHT) or any(has((x + dx, y + dy), "K") for dx, dy in KING):
        return True
    for directions, letters in ((ROOK, "RQ"), (BISHOP, "BQ")):
        for dx, dy in directions:
            cx, cy = x + dx, y + dy
            while 0 <= cx < 8 and 0 <= cy < 8:
                if (cx, cy) in board:
                    if has((cx, cy), letters):
                        return True
                    break
                cx, cy = cx + dx, cy + dy
    return False


def quiet_moves(board: Board, white: bool) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Legal moves of ``white``'s side that capture nothing, castle not, promote not (no en passant either)."""
    found = []
    for (x, y), ch in board.items():
        if ch.isupper() != white:
            continue
        piece, targets = ch.upper(), []
        if piece == "P":
            step, home = (1, 1) if white else (-1, 6)
            if (x, y + step) not in board and 0 < y + step < 7:
                targets.append((x, y + step))
                if y == home and (x, y + 2 * step) not in board:
                    targets.append((x, y + 2 * step))
        elif piece in "NK":
            targets = [(x + dx, y + dy) for dx, dy in (KNIGHT if piece == "N" else KING)]
        else:
            for dx, dy in {"R": ROOK, "B": BISHOP, "Q": ROOK + BISHOP}[piece]:
                cx, cy = x + dx, y + dy
                while 0 <= cx < 8 and 0 <= cy < 8 and (cx, cy) not in board:
                    targets.append((cx, cy))
                    cx, cy = cx + dx, cy + dy
        for to in targets:
            if not (0 <= to[0] < 8 and 0 <= to[1] < 8) or to in board:
                continue
            after = dict(board)
            del after[(x, y)]
            after[to] = ch
            king = next(sq for sq, c in after.items() if c == ("K" if white else "k"))
            if not attacked(after, king, not white):
                found.append(((x, y), to))
    return sorted(found)


def random_quiet_plies(fen: str, plies: int, rng: np.random.Generator) -> str | None:
    """``fen`` after ``plies`` random quiet legal moves (castling rights kept up to date), or None if stuck."""
    board = parse_board(fen)
    _board, side, castling = fen.split()[:3]
    white = side == "w"
    rights = set(castling) - {"-"}
    corners = {(0, 0): "Q", (7, 0): "K", (0, 7): "q", (7, 7): "k"}
    for _ply in range(plies):
        moves = quiet_moves(board, white)
        if not moves:
            return None
        src, dst = moves[int(rng.integers(len(moves)))]
        piece = board.pop(src)
        board[dst] = piece
        if piece.upper() == "K":
            rights -= {"K", "Q"} if white else {"k", "q"}
        rights.discard(corners.get(src, ""))
        white = not white
    king = next(sq for sq, c in board.items() if c == ("K" if white else "k"))
    if attacked(board, king, not white) or len(quiet_moves(board, white)) < 8:
        return None  # no position in check, none with hardly a move
    order = "".join(r for r in "KQkq" if r in rights) or "-"
    return f"{board_fen(board)} {'w' if white else 'b'} {order} -"


def mirror(fen: str) -> str:
    """The colour-reversed position (ranks flipped, colours swapped): Black to move, same play."""
    board, _side, castling, _ep = fen.split()[:4]
    flipped = "/".join(reversed(board.split("/"))).swapcase()
    rights = "".join(sorted(castling.swapcase(), key="KQkq".index)) if castling != "-" else "-"
    return f"{flipped} b {rights} -"


def setup(ctx: SetupContext) -> Prepared:
    fen = None
    while fen is None:
        base = POSITIONS[int(ctx.rng.integers(len(POSITIONS)))]
        base = mirror(base) if ctx.rng.integers(2) else base
        fen = random_quiet_plies(base, int(ctx.rng.integers(MIN_PLIES, MAX_PLIES + 1)), ctx.rng)
    fen += " 0 20"
    best = ctx.run(["python3", "-c", ENGINE, fen, str(DEPTH)], timeout=300).stdout.split()[-1]
    ctx.write_file(START, fen + "\n")
    ctx.launch_gui(f"cd {HOME} && {{as_user}} /usr/games/xboard -ncp -lpf {START} -startupMessage ''", name="xboard")
    window = ctx.wait_window(re.escape(START))
    ctx.run(["rm", "-f", START])  # the position now lives only in xboard
    side = "White" if fen.split()[1] == "w" else "Black"
    rights = fen.split()[2]
    return Prepared(params={"side": side, "depth": DEPTH, "castling": "none" if rights == "-" else rights},
                    truth={"fen": fen, "best": best, "window": window.geometry})


def piece_at(fen: str, square: str) -> str:
    """The FEN letter on ``square`` ("" when empty)."""
    rows = [re.sub(r"\d", lambda m: "." * int(m.group()), r) for r in fen.split()[0].split("/")]
    return rows[8 - int(square[1])][ord(square[0]) - ord("a")].replace(".", "")


def san_matches(san: str, move: str, fen: str) -> bool:
    """Whether the SAN move ``san`` is the coordinate move ``move`` (e.g. d1b3) in the position ``fen``."""
    san = re.sub(r"[+#!?]+$", "", san.strip()).replace("0", "O")
    src, dst, promo = move[:2], move[2:4], move[4:].upper()
    piece = piece_at(fen, src).upper()
    if piece == "K" and abs(ord(src[0]) - ord(dst[0])) == 2:
        return san == ("O-O" if dst[0] == "g" else "O-O-O")
    m = re.fullmatch(r"([KQRBN])?([a-h])?([1-8])?x?([a-h][1-8])(?:=?([QRBN]))?", san)
    if m is None:
        return False
    letter, file_, rank, target, promotion = m.groups()
    return (target == dst and (letter or "P") == piece and file_ in (None, src[0]) and rank in (None, src[1])
            and (promotion or "") == promo)


def _pgn(probe: Probe) -> tuple[str | None, list[str]] | None:
    """(the FEN tag, the SAN moves) of ~/analysis.pgn, or None when it is missing."""
    text = probe.read_text(PGN)
    if text is None:
        return None
    fen = re.search(r'^\[FEN "([^"]*)"\]', text, re.M)
    body = re.sub(r"\{[^}]*\}|\([^)]*\)|^\[.*\]$|\$\d+", " ", text, flags=re.M)
    moves = [t for t in body.split() if not re.fullmatch(r"\d+\.+|\d+\.+\S*|1-0|0-1|1/2-1/2|\*", t)]
    return (fen.group(1) if fen else None), moves


def _same_position(a: str, b: str) -> bool:
    return a.split()[:3] == b.split()[:3]


def check_pgn_position(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    game = _pgn(probe)
    if game is None:
        return Verdict.failed(f"{PGN} does not exist")
    fen = game[0] or ""
    return Verdict.check(_same_position(fen, truth["fen"]), f"PGN starts from {fen!r}, the board showed "
                         f"{truth['fen']!r}")


def check_pgn_move(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    game = _pgn(probe)
    if game is None or not game[1]:
        return Verdict.failed("no move in the saved PGN")
    return Verdict.check(san_matches(game[1][0], truth["best"], truth["fen"]),
                         f"PGN move {game[1][0]!r}, the engine's move at depth {DEPTH} is {truth['best']}")


def check_pgn_only_move(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    game = _pgn(probe)
    if game is None:
        return Verdict.failed("no saved PGN")
    return Verdict.check(len(game[1]) == 1, f"the PGN holds {len(game[1])} move(s): {game[1][:4]}, expected one")


def check_best_file(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(BEST)
    if text is None:
        return Verdict.failed(f"{BEST} does not exist")
    answer = text.strip().split()[0] if text.strip() else ""
    ok = answer.lower() == truth["best"] or san_matches(answer, truth["best"], truth["fen"])
    return Verdict.check(ok, f"{BEST} says {answer!r}, the engine's move is {truth['best']}")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    x, y, w, _h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w // 2, "y": max(y - 10, 1)}  # the title bar: focus without touching the board
    # An agent reads the position off the board in its screenshot and types it as FEN; the oracle knows it.
    yield {"kind": "shell", "timeout": 300,
           "command": "cd ~ && " + python_command(ORACLE_CLI, ctx.truth["fen"], str(DEPTH))}
    assert ctx.obs is not None
    found = re.search(r"^BEST (\S+)$", ctx.obs["terminal"], re.M)
    move = found.group(1) if found else ctx.truth["best"]  # gui-only adversary: play it anyway
    before = ctx.obs["screen"].copy()
    yield {"kind": "type", "text": move[0]}  # the first key opens xboard's "Type a move" box
    yield from wait_box(ctx, before, min_size=(100, 40), tries=30)  # the box opens
    yield {"kind": "type", "text": move[1:]}
    assert ctx.obs is not None
    before = ctx.obs["screen"].copy()
    yield {"kind": "key", "keys": "Return"}
    yield from wait_box(ctx, before, min_size=(100, 40), tries=30)  # the box closes
    assert ctx.obs is not None
    before = ctx.obs["screen"].copy()
    yield {"kind": "key", "keys": "ctrl+s"}  # File > Save Game
    yield from wait_box(ctx, before, tries=40)
    yield {"kind": "type", "text": PGN}
    for _attempt in range(3):  # a file chooser may swallow the first Return to finish its completion
        yield {"kind": "key", "keys": "Return"}
        yield wait_file_action(PGN, seconds=15)
        assert ctx.obs is not None
        if "SAVED" in ctx.obs["terminal"]:
            break
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Games-2",
    title="Play GNU Chess's best move in xboard and save the game",
    instruction=(
        "xboard shows a chess position with {side} to move. 1) Find GNU Chess's best move for it at a fixed "
        "search depth of {depth} plies (e.g. `gnuchess -u` speaks UCI: `position fen <FEN>`, then "
        "`go depth {depth}`; your shell cannot see the screen or the desktop's clipboard, so read the position "
        "off the board and give it as FEN: castling rights {castling} (in FEN letters), no en passant square), "
        "and write that move in coordinate notation (like e2e4) to ~/best_move.txt from your shell. "
        "2) Play exactly that move on the xboard board. 3) Save the game from xboard (File > Save Game) as "
        "~/analysis.pgn, then finish. Do not play any other move."),
    channels=Channels(
        gui="read the position off xboard, play the move on its board, save the game from its Save dialog",
        cli="run gnuchess on the position (as FEN, read off the board) at the given depth and write its move "
            "to a file",
        why_both="the position lives only in xboard and the PGN must come from it (the desktop account's file), "
                 "while the engine's choice at a fixed depth comes only from running gnuchess in the shell"),
    setup=setup,
    clauses=(
        Clause("pgn_position", "~/analysis.pgn starts from the position on the board", check_pgn_position,
               critical=True, cap=0.25),
        Clause("pgn_move", "the saved game's move is the engine's best move", check_pgn_move, weight=2.0,
               critical=True, cap=0.5),
        Clause("pgn_one_move", "exactly one move was played before saving", check_pgn_only_move),
        Clause("best_move_file", "~/best_move.txt names the engine's move", check_best_file, weight=2.0),
    ),
    rules=(GuiArtifactViaCli([PGN], "the PGN must be saved by xboard"),),
    deliverables=(
        Deliverable(PGN, "gui", description="~/analysis.pgn (saved by xboard)"),
        Deliverable(BEST, "cli", description="~/best_move.txt (the engine's move, from the shell)"),
    ),
    oracle=oracle,
    profile="full",
    apps=("xboard", "gnuchess", "python3"),
    max_steps=130,  # the oracle's screen waits are steps too
    time_budget_s=1200.0,
)
