"""Weave-Games-4 without a VM: the tiebreak maths, the seeds' tournaments, the board's pixels read back, the
oracle's own program on the arbiter's files, and the clauses on right and wrong answers and standings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.games import tournament_tiebreak as t
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(t.__file__).parent / "fixtures"

RATINGS = {"Ann": 2000, "Bob": 1900, "Cid": 1800, "Dee": 1700}
# Two rounds: Ann beats Bob, Cid draws Dee; Ann draws Cid, Dee beats Bob.
GAMES = [("Ann", "Bob", "1-0"), ("Cid", "Dee", "1/2-1/2"), ("Cid", "Ann", "1/2-1/2"), ("Bob", "Dee", "0-1")]


def _row(rows: list[list[Any]], name: str) -> list[Any]:
    return next(r for r in rows if r[1] == name)


def test_standings_points_and_tiebreaks_by_hand() -> None:
    rows = t.standings(GAMES, RATINGS, ["buchholz", "sonneborn_berger", "wins"])
    # Points: Ann 1.5, Dee 1.5, Cid 1, Bob 0. Ann and Dee are level on every tiebreak: the rating decides.
    assert rows == [[1, "Ann", 1.5, 1.0, 1.0, 0.5, 1], [2, "Dee", 1.5, 1.0, 1.0, 0.5, 1],
                    [3, "Cid", 1.0, 3.0, 1.5, 1.5, 0], [4, "Bob", 0.0, 3.0, 1.5, 0.0, 0]]


def test_the_order_of_tiebreaks_decides() -> None:
    games = [*GAMES, ("Ann", "Dee", "0-1"), ("Bob", "Cid", "1-0")]
    # Bob and Cid: 1 point each, Buchholz 5 and Cut-1 4 each; Sonneborn-Berger Cid 2 (halves of 2.5 and
    # 1.5), Bob 1 (beat Cid); wins Bob 1, Cid 0; ratings Bob 1900, Cid 1800.
    bob, cid = (_row(t.standings(games, RATINGS, []), n) for n in ("Bob", "Cid"))
    assert bob[2:] == [1.0, 5.0, 4.0, 1.0, 1] and cid[2:] == [1.0, 5.0, 4.0, 2.0, 0]

    def third(order: list[str]) -> str:
        return t.standings(games, RATINGS, order)[2][1]

    assert third(["buchholz", "sonneborn_berger"]) == "Cid"
    assert third(["buchholz_cut1", "wins"]) == "Bob"
    assert third([]) == "Bob"


@pytest.mark.parametrize("seed", range(6))
def test_every_seed_makes_the_tiebreak_and_the_board_round_matter(seed: int) -> None:
    kind = t.KINDS[seed % 3]
    tour = t.make_tournament(np.random.default_rng(seed), kind)
    rows, order, board = tour["rows"], tour["order"], tour["board_round"]
    every = [g for rnd in tour["games"] for g in rnd]
    filed = [g for i, rnd in enumerate(tour["games"], 1) if i != board for g in rnd]
    assert rows == t.standings(every, tour["ratings"], order)
    assert rows[0][2] == rows[1][2]  # the leaders tie on points
    assert rows[0][1] != t.standings(every, tour["ratings"], [])[0][1]  # points and rating alone: wrong winner
    assert any(t.standings(every, tour["ratings"], list(other))[0][1] != rows[0][1] for other in t.ORDERS)
    without = t.standings(filed, tour["ratings"], order)
    assert t._answer(without, kind, tour["subject"]) != tour["answer"]  # the shell alone: wrong answer
    assert 2 <= board <= tour["rounds"]
    met = [frozenset((w, b)) for w, b, _r in every]
    assert len(met) == len(set(met)) == tour["rounds"] * len(tour["players"]) // 2  # nobody meets twice


def test_seeds_vary_players_questions_and_orders() -> None:
    tours = [t.make_tournament(np.random.default_rng(seed), t.KINDS[seed % 3]) for seed in range(9)]
    assert len({tuple(sorted(x["players"])) for x in tours}) == 9
    assert len({x["board_round"] for x in tours}) >= 3 and len({tuple(x["order"]) for x in tours}) >= 3
    assert {t.question(t.KINDS[s % 3], x["subject"]).split()[0] for s, x in enumerate(tours)} == {"who", "what"}


def _screen(window: list[int], rows: list[list[str]], title: str) -> np.ndarray:
    """A screenshot of the board's canvas as Tk fills it: white paper, pixel_font's lit cells in its ink."""
    image = np.full((720, 1280, 3), 214, dtype=np.uint8)
    x, y = window[0] + t.CANVAS[0], window[1] + t.CANVAS[1]
    image[y:y + t.CANVAS[3], x:x + t.CANVAS[2]] = 255
    texts = [(title, t.COL_X[0], t.TITLE_Y)]
    for i, row in enumerate(rows):
        texts += [(text, cx, t.FIRST_ROW_Y + i * t.ROW_H) for text, cx in zip(row, t.COL_X, strict=True)]
    for text, cx, cy in texts:
        for x0, y0, x1, y1 in pixel_font.layout_text(text, x + cx, y + cy, t.SCALE):
            image[y0:y1, x0:x1] = pixel_font.INK
    return image


def test_the_board_round_reads_back_off_the_screen() -> None:
    tour = t.make_tournament(np.random.default_rng(4), "winner")
    games = tour["games"][tour["board_round"] - 1]
    window = [37, 61, t.WIDTH, 590]
    image = _screen(window, t.board_rows(games), f"ROUND {tour['board_round']}")
    assert t.canvas_title(image, window) == f"ROUND {tour['board_round']}"
    assert t.read_round(image, window, len(games)) == [(w.upper(), b.upper(), r) for w, b, r in games]
    cover = _screen(window, [], t.COVER)
    assert t.board_drawn(cover, window) and not t.board_drawn(image, window)
    assert t.read_round(cover, window, len(games)) == []  # what a shell-only replay sees: no games


def test_board_fits_the_screen_and_the_font_draws_every_name() -> None:
    for count in (8, 10):
        layout = t.board_layout(6, count)
        assert layout["height"] < 680 and layout["certify"][1] + layout["certify"][3] < layout["height"]
        last = layout["first_row_y"] + (count // 2) * layout["row_h"]
        assert last <= t.CANVAS[3]
    longest = max(t.SURNAMES, key=len)
    assert len(longest) <= t.NAME_CHARS and not pixel_font.unsupported("".join(t.SURNAMES).upper() + "1/2-0 ROUND")
    right = t.COL_X[3] + pixel_font.text_size("1/2", t.SCALE)[0]
    assert t.COL_X[2] + pixel_font.text_size(longest.upper(), t.SCALE)[0] < t.COL_X[3] and right < t.CANVAS[2]


def _arbiter(folder: Path, tour: dict[str, Any]) -> None:
    (folder / "players.csv").write_text("player,rating\n" + "".join(f"{p},{r}\n" for p, r in tour["ratings"].items()))
    (folder / "rules.txt").write_text(t.rules_text(tour["order"]))
    for number, games in enumerate(tour["games"], 1):
        if number != tour["board_round"]:
            (folder / f"round-{number}.pgn").write_text(t.pgn_text("Autumn Open", "Harbour", number, games))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_oracle_program_on_the_arbiters_files(tmp_path: Path, seed: int) -> None:
    kind = t.KINDS[seed % 3]
    tour = t.make_tournament(np.random.default_rng(seed), kind)
    _arbiter(tmp_path, tour)
    assert t.read_records(str(tmp_path))[2] == tour["order"]
    shown = [(w.upper(), b.upper(), r) for w, b, r in tour["games"][tour["board_round"] - 1]]
    out = tmp_path / "standings.csv"
    done = subprocess.run([sys.executable, "-c", t.compute_program(shown, str(tmp_path), str(out))],
                          capture_output=True, text=True, check=True)
    rows = t.parse_rows(done.stdout)
    assert rows == tour["rows"]
    truth = {"kind": kind, "answer": tour["answer"], "standings": tour["rows"], "winner": tour["rows"][0][1]}
    said = t.spoken(kind, rows, tour["subject"])
    assert t.check_answer(FilesProbe.answered(said, {}), truth).outcome == "satisfied"
    assert t.check_standings(FilesProbe.answered("", {t.STANDINGS: out.read_text()}), truth).outcome == "satisfied"
    # Without the board's round (a shell-only agent), the answer is wrong.
    alone = subprocess.run([sys.executable, "-c", t.compute_program([], str(tmp_path), str(out))],
                           capture_output=True, text=True, check=True)
    wrong = t.spoken(kind, t.parse_rows(alone.stdout), tour["subject"])
    # top3: maybe the right names, reordered
    assert t.check_answer(FilesProbe.answered(wrong, {}), truth).outcome != "satisfied"
    assert t.check_standings(FilesProbe.answered("", {t.STANDINGS: out.read_text()}), truth).outcome != "satisfied"


TRUTHS = {"winner": ("Lindqvist", ["Lindqvist", "<answer>lindqvist</answer>"], ["Novak", ""]),
          "top3": (["Park", "Varga", "Berger"], ["Park, Varga, Berger", "1. Park\n2. Varga\n3. Berger"],
                   ["Varga, Park, Berger", "Park, Varga"]),
          "sb": (10.25, ["10.25", "Sonneborn-Berger: 10.25"], ["10.5", "none"])}


@pytest.mark.parametrize("kind", t.KINDS)
def test_answers_are_normalised_and_wrong_ones_fail(kind: str) -> None:
    expected, right, wrong = TRUTHS[kind]
    truth = {"kind": kind, "answer": expected}
    assert all(t.check_answer(FilesProbe.answered(a, {}), truth).outcome == "satisfied" for a in right)
    assert all(t.check_answer(FilesProbe.answered(a, {}), truth).outcome != "satisfied" for a in wrong)


def test_certificate_and_standings_header() -> None:
    truth = {"winner": "Park", "standings": [[1, "Park", 4.0, 17.5, 16.5, 10.25, 3]]}
    record = '{"winner": "Park", "note": "first on tiebreak"}\n'
    assert t.check_certified(FilesProbe.answered("", {t.RECORD: record}), truth).outcome == "satisfied"
    other = record.replace("Park", "Varga")
    assert t.check_certified(FilesProbe.answered("", {t.RECORD: other}), truth).outcome == "failed"
    assert t.check_certified(FilesProbe.answered("", {}), truth).outcome == "failed"
    good = ",".join(t.HEADER) + "\n1,Park,4,17.5,16.5,10.25,3\n"
    assert t.check_standings(FilesProbe.answered("", {t.STANDINGS: good}), truth).outcome == "satisfied"
    with pytest.raises(ValueError):
        t.parse_standings("player,points\nPark,4\n")


def test_withheld_truth_holds_every_pixel_only_fact() -> None:
    """What the oracle gets names no result: the board's round, the standings and the answer are withheld."""
    truth = {"kind": "winner", "subject": "", "players": ["A"], "board_round": 3, "boards": 4, "window": [0, 0, 1, 1],
             "targets": {}, "board_games": [["A", "B", "1-0"]], "standings": [], "answer": "A", "winner": "A"}
    assert set(t.TASK.oracle_truth(truth)) == {"kind", "subject", "players", "board_round", "boards", "window",
                                               "targets"}


# -- the real board on a real X server, screenshotted and clicked through the real guest agent ------------------


def test_the_real_board_shows_a_round_only_on_its_tab_and_certifies(xvfb: XvfbDisplay, client: GuestClient,
                                                                    tmp_path: Path) -> None:
    tour = t.make_tournament(np.random.default_rng(7), "winner")
    for name, data in (("tournament_board.py", (FIXTURES / "tournament_board.py").read_bytes()),
                       ("pixel_font.py", Path(pixel_font.__file__).read_bytes())):
        (tmp_path / name).write_bytes(data)
    board = t.board_input(tour, "Harbour Chess Club Autumn Open")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "tournament_board.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "DISPLAY": xvfb.display})
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(board))
    proc.stdin.close()
    try:
        window = wait_for(lambda: next((w.geometry for w in client.list_windows()[0] if w.title == t.TITLE), None),
                          20, what="the board mapped")
        wait_for(lambda: t.board_drawn(client.screenshot().image, window), 20, what="the board's cover drawn")
        targets = t.click_targets(window, board["layout"], sorted(tour["players"]))
        number, boards = tour["board_round"], len(tour["players"]) // 2
        filed = 1 if number != 1 else 2
        for shown in (filed, number):
            client.click(*targets["tabs"][shown - 1])
            wait_for(lambda n=shown: t.canvas_title(client.screenshot().image, window) == f"ROUND {n}", 20,
                     what=f"round {shown}'s tab drawn")
            games = t.read_round(client.screenshot().image, window, boards)
            expected = [(w.upper(), b.upper(), r) for w, b, r in tour["games"][shown - 1]]
            assert games == (expected if shown == number else [])  # a filed round shows no results
        winner = tour["rows"][0][1]
        client.click(*targets["radios"][winner])
        client.click(*targets["certify"])
        assert proc.wait(timeout=20) == 0 and proc.stdout is not None
        assert json.loads(proc.stdout.read().strip().splitlines()[-1]) == {"winner": winner, "note": ""}
    finally:
        proc.kill()
        proc.wait()
