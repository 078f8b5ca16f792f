"""Weave-Games-7 (mate book) without a VM: the chess core (legal moves, en passant, promotion, mate, SAN), the pool
of problems proven sound, the seeds' picks, the book's piece lists, the clauses on right and wrong finals with games
the real XBoard saved, the oracle's engine and bulletin commands run by the real python3, gnuchess and bash (unit),
and the real Problem Book on Xvfb through the real agent (xvfb): the diagram read back off the screen, the refusals,
the recorded key and its solution code."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from pixel_apps import pixel_app

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks.games import mate_book as mb
from weavegym.envs.tasks.games._mate_chess import (
    Position,
    coordinate,
    flip_colours,
    key_move,
    mirror_files,
    parse_coordinate,
    problem_problem,
    replay,
)
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(mb.__file__).parent / "fixtures"
DATA = Path(__file__).parent / "data"
# XBoard 4.9.1 saved these on Xvfb after Edit Position with the FEN typed, Edit Game and the moves typed.
WHITE_GAME = (DATA / "mate_book_white.pgn").read_bytes()  # POOL[4]: Qc5 h6 Qb4#
BLACK_GAME = (DATA / "mate_book_black.pgn").read_bytes()  # POOL[4] colour-swapped: Qc4 h3 Qb5#
WHITE = {"fen": "5B2/7p/8/5Q2/k7/8/8/1K6 w - - 0 1", "key": "f5c5", "side": "white"}
BLACK = {"fen": "1k6/8/8/K7/5q2/8/7P/5b2 b - - 0 1", "key": "f4c4", "side": "black"}
THIRD = {"fen": "7k/1B2N1b1/p7/K7/5p2/Q7/8/7n w - - 0 1", "key": "a3h3", "side": "white"}
THIRD_GAME = (WHITE_GAME.decode().replace("5B2/7p/8/5Q2/k7/8/8/1K6", "7k/1B2N1b1/p7/K7/5p2/Q7/8/7n")
              .replace("1. Qc5 h6 2. Qb4#", "1. Qh3 Bh6 2. Qxh6#")).encode()
TRUTH = {"problems": [WHITE, BLACK, THIRD], "at": list(mb.BOOK_AT), "xboard": [40, 60, 424, 490]}


def _final(codes: tuple[str, ...] = ("ABC234", "XYZ789", "KLM456")) -> dict[str, bytes]:
    games = (WHITE_GAME, BLACK_GAME, THIRD_GAME)
    records = [{"problem": 2, "refused": "f4f1"}]
    records += [{"problem": n, "key": p["key"], "sha256": hashlib.sha256(g).hexdigest(), "code": c}
                for n, (p, g, c) in enumerate(zip(TRUTH["problems"], games, codes, strict=True), 1)]
    files = {mb.game_path(n): g for n, g in enumerate(games, 1)}
    files[mb.RECORD] = "".join(json.dumps(r) + "\n" for r in records).encode()
    files[mb.BULLETIN] = "".join(f"{n} | {p['key']} | {c}\n" for n, (p, c) in
                                 enumerate(zip(TRUTH["problems"], codes, strict=True), 1)).encode()
    return files


def _outcomes(files: Mapping[str, bytes]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, TRUTH).outcome for c in mb.TASK.clauses}  # type: ignore[arg-type]


ALL_SATISFIED = {c.name: Outcome.SATISFIED for c in mb.TASK.clauses}


# ---- the chess core ----------------------------------------------------------------------------------------

def test_moves_checks_mates_en_passant_and_promotion() -> None:
    start = Position.from_fen("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1")
    assert len(start.legal_moves()) == 20 and not start.in_check()
    fools = replay(start.fen(), ["f3", "e5", "g4", "Qh4#"])[0]
    assert fools is not None and fools.is_mate()
    assert Position.from_fen("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1").san_move("Ra8") is not None
    # en passant: the double step gives the square, the capture takes the pawn beside
    pos, _ = replay("4k3/3p4/8/4P3/8/8/8/4K3 b - - 0 1", ["d5", "exd6"])
    assert pos is not None and pos.board.get((3, 4)) is None and pos.board[(3, 5)] == "P"
    # promotion, and a pinned piece cannot move
    pos = Position.from_fen("8/P6k/8/8/8/8/8/K7 w - - 0 1")
    assert {coordinate(m) for m in pos.legal_moves() if m[0] == (0, 6)} == {"a7a8q", "a7a8r", "a7a8b", "a7a8n"}
    assert pos.san_move("a8=Q") == ((0, 6), (0, 7), "Q")
    pinned = Position.from_fen("4r2k/8/8/8/8/8/4N3/4K3 w - - 0 1")
    assert not [m for m in pinned.legal_moves() if m[0] == (4, 1)]
    assert replay("6k1/8/8/8/8/8/8/R5K1 w - - 0 1", ["Rb1", "Kh7", "Rb9"])[1] == "move 3 ('Rb9') is not a legal move"
    assert parse_coordinate("E2-E4") == ((4, 1), (4, 3), "") and parse_coordinate("e9e4") is None


def test_every_problem_of_the_pool_is_a_sound_mate_in_two_and_symmetry_keeps_it_sound() -> None:
    for fen in mb.POOL:
        assert problem_problem(fen) == "", fen
    fen = mb.POOL[4]
    assert key_move(fen) == "f5c5" and key_move(mirror_files(fen)) == "c5f5"
    assert flip_colours(fen) == BLACK["fen"] and key_move(BLACK["fen"]) == "f4c4"
    assert problem_problem("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1") == "it has a mate in one"
    assert "keys" in problem_problem("k7/8/2K5/8/8/8/8/1R5R w - - 0 1")  # many ways to mate in two
    assert problem_problem("R6k/8/8/8/8/8/8/7K w - - 0 1") == "the side not to move is in check"


@pytest.mark.parametrize("seed", range(4))
def test_every_seed_picks_three_different_problems_and_the_book_lists_them_back(seed: int) -> None:
    fens = mb.pick_problems(np.random.default_rng(seed))
    assert len(set(fens)) == mb.COUNT and fens == mb.pick_problems(np.random.default_rng(seed))
    for fen in fens:
        lists = mb.piece_lists(fen)
        assert lists["white"][0][0] == "K" and lists["black"][0][0] == "K"
        side = "white" if fen.split()[1] == "w" else "black"
        assert mb.fen_from_lists(lists["white"], lists["black"], side) == fen
        assert max(len(v) for v in lists.values()) <= 16


def test_gui_only_fallback_plays_a_mating_line() -> None:
    for problem in (WHITE, BLACK, THIRD):
        line = mb.solve_on_host(problem["fen"])
        pos = Position.from_fen(problem["fen"])
        for move in line:
            parsed = parse_coordinate(move)
            assert parsed is not None
            pos = pos.play(parsed)
        assert line[0] == problem["key"] and pos.is_mate()


# ---- the clauses -------------------------------------------------------------------------------------------

def test_a_week_solved_right_satisfies_every_clause_with_the_real_xboard_games() -> None:
    assert mb.last_game(WHITE_GAME.decode()) == ("5B2/7p/8/5Q2/k7/8/8/1K6 w - - 0 1", ["Qc5", "h6", "Qb4#"])
    assert mb.last_game(BLACK_GAME.decode())[1] == ["Qc4", "h3", "Qb5#"]
    assert _outcomes(_final()) == ALL_SATISFIED
    files = _final()  # XBoard appends a game saved again: the last one counts
    files[mb.game_path(1)] = BLACK_GAME + b"\n" + WHITE_GAME
    files[mb.RECORD] = files[mb.RECORD].replace(hashlib.sha256(WHITE_GAME).hexdigest().encode(),
                                                hashlib.sha256(files[mb.game_path(1)]).hexdigest().encode())
    assert _outcomes(files) == ALL_SATISFIED


def test_wrong_short_or_unmated_games_fail() -> None:
    white = WHITE_GAME.decode()
    for text in (white.replace("1. Qc5 h6 2. Qb4#", "1. Qc5 h6"),  # no mate
                 white.replace("1. Qc5 h6 2. Qb4#", "1. Qf4 h6 2. Qb4+"),  # not the key, no mate
                 white.replace("2. Qb4#", "2. Qb5+ Ka3 3. Qb3#"),  # mate in three
                 white.replace("5B2/7p/8/5Q2/k7/8/8/1K6 w", "5B2/7p/8/5Q2/k7/8/8/1K6 b"),  # another side
                 white.replace("1. Qc5 h6 2. Qb4#", "1. Qc5 h5 2. Qa8#"),  # not legal: no mate from c5 to a8
                 ""):
        files = _final()
        files[mb.game_path(1)] = text.encode()
        files[mb.RECORD] = files[mb.RECORD].replace(hashlib.sha256(WHITE_GAME).hexdigest().encode(),
                                                    hashlib.sha256(text.encode()).hexdigest().encode())
        got = _outcomes(files)
        assert got["games_mate"] == Outcome.PARTIAL and got["keys_recorded"] == Outcome.SATISFIED, text[-80:]
    files = _final()
    del files[mb.game_path(2)], files[mb.game_path(3)], files[mb.game_path(1)]
    assert _outcomes(files)["games_mate"] == Outcome.FAILED


def test_a_changed_game_a_missing_record_and_a_wrong_bulletin_fail() -> None:
    files = _final()
    files[mb.game_path(3)] += b"\n"
    assert _outcomes(files)["keys_recorded"] == Outcome.PARTIAL
    files = _final()
    del files[mb.RECORD]
    got = _outcomes(files)
    assert got["keys_recorded"] == got["bulletin"] == Outcome.FAILED and got["games_mate"] == Outcome.SATISFIED
    for text in (b"1 | f5c5 | ABC235\n2 | f4c4 | XYZ789\n3 | a3h3 | KLM456",  # another code
                 b"1 | f5c4 | ABC234\n2 | f4c4 | XYZ789\n3 | a3h3 | KLM456",  # another key
                 b"1 | f5c5 | ABC234\n2 | f4c4 | XYZ789",  # a problem missing
                 b"N | key | code\n1 | f5c5 | ABC234\n2 | f4c4 | XYZ789\n3 | a3h3 | KLM456"):  # a header line
        files = _final()
        files[mb.BULLETIN] = text
        assert _outcomes(files)["bulletin"] == Outcome.FAILED, text
    files = _final()
    files[mb.BULLETIN] = b"1 | F5-C5 | abc234\n\n2 | f4c4 | XYZ789\n3 | a3h3 | KLM456\n"  # case and a dash: fine
    assert _outcomes(files)["bulletin"] == Outcome.SATISFIED


def test_the_oracles_engine_and_bulletin_commands_run_in_the_real_python_gnuchess_and_bash(tmp_path: Path) -> None:
    (tmp_path / "club").mkdir()
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    for number, code in ((1, "ABC234"), (2, "XYZ789")):
        subprocess.run(["bash", "-c", mb.bulletin_command(number, "f5c5", code)], check=True, capture_output=True,
                       env=env)
    rows, problem = mb.parse_bulletin((tmp_path / "club" / "bulletin.txt").read_text())
    assert problem == "" and rows == {1: ("f5c5", "ABC234"), 2: ("f5c5", "XYZ789")}
    (tmp_path / "white.pgn").write_bytes(WHITE_GAME)
    (tmp_path / "short.pgn").write_bytes(WHITE_GAME.replace(b"2. Qb4#", b"").replace(b"Checkmate", b""))
    for path, fen, said in (("white.pgn", WHITE["fen"], "PGN OK 1.0.0"),
                            ("white.pgn", BLACK["fen"], "PGN MISSING 1.0.0"),
                            ("short.pgn", WHITE["fen"], "PGN MISSING 1.0.0")):
        command = mb.save_check(str(tmp_path / path), fen, "1.0.0").replace("timeout 15", "timeout 1")
        assert subprocess.run(["bash", "-c", command], capture_output=True, text=True).stdout.strip() == said
    out = subprocess.run(["bash", "-c", mb.python_command(mb.ENGINE, BLACK["fen"], "2")], check=True,
                         capture_output=True, text=True, env=env, timeout=60).stdout.split()
    assert out[:3] == ["LINE", "2", "f4c4"]
    pos = Position.from_fen(BLACK["fen"])
    for move in out[2:5]:
        parsed = parse_coordinate(move)
        assert parsed is not None
        pos = pos.play(parsed)
    assert pos.is_mate()


# ---- the real book on a real X server, through the real guest agent ------------------------------------------

@pytest.mark.xvfb
def test_the_book_shows_positions_as_pixels_refuses_wrong_keys_and_records_the_right_one(
        xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> None:
    saves = tmp_path / "problems"
    saves.mkdir()
    problems = [WHITE, BLACK]
    conf = {"problems": [{**mb.piece_lists(p["fen"]), "side": p["side"], "key": p["key"]} for p in problems],
            "saves": str(saves), "layout": mb.layout()}

    def status() -> str:
        return mb._line(client.screenshot().image, at, mb.STATUS, 0)

    def press(action: Mapping[str, int]) -> None:
        client.click(action["x"], action["y"])

    def submit(text: str) -> None:
        press(mb._click(at, mb.ENTRY))
        client.type_text(text)
        press(mb._click(at, mb.SUBMIT))

    with pixel_app(FIXTURES / "problem_book.py", conf, tmp_path, xvfb.display) as proc:
        at = list(wait_for(lambda: mb.origin(client.screenshot().image), 20, what="the book drawn"))
        assert mb.read_diagram(client.screenshot().image, at, 1) is None  # nothing shown before a click
        submit("f5c5")
        wait_for(lambda: status() == "SHOW PROBLEM 1 FIRST", 20, what="the refusal before a problem")
        press(mb._click(at, mb.SHOW))
        got = wait_for(lambda: mb.read_diagram(client.screenshot().image, at, 1), 20, what="problem 1 read back")
        assert got == WHITE["fen"]
        submit("Qc5 please" + "x" * 300)
        wait_for(lambda: status() == "TYPE THE KEY LIKE E2E4", 20, what="the refusal of a key in another form")
        submit("f5f4")
        wait_for(lambda: status() == "F5F4 IS NOT THE KEY  4 TRIES LEFT", 20, what="the refusal of a wrong key")
        assert json.loads(proc.stdout.readline())["refused"] == "f5f4"
        submit("F5-C5")
        wait_for(lambda: status() == "SAVE PROBLEM-1.PGN FIRST", 20, what="the refusal without a saved game")
        (saves / "problem-1.pgn").write_bytes(WHITE_GAME)
        submit("f5c5")
        line = json.loads(proc.stdout.readline())
        assert line["problem"] == 1 and line["key"] == "f5c5" and len(line["code"]) == 6
        assert line["sha256"] == hashlib.sha256(WHITE_GAME).hexdigest()
        want = f"PROBLEM 1: KEY F5C5  CODE {line['code']}"
        wait_for(lambda: mb.read_result(client.screenshot().image, at, 1) == want, 20,
                 what="the solution code read back off the screen")
        assert mb.read_diagram(client.screenshot().image, at, 1) is None  # the solved problem is gone
        press(mb._click(at, mb.SHOW))
        got = wait_for(lambda: mb.read_diagram(client.screenshot().image, at, 2), 20, what="problem 2 read back")
        assert got == BLACK["fen"]
