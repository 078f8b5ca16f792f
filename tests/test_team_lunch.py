"""Weave-Productivity-4 (team lunch): seeds, the requester's script, the order's judge, the oracle's parsers and
pixel reading (unit), and the caterer's window on a real Xvfb read and filled through the real agent (xvfb)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs import sim_user_program as program
from weavegym.envs.simulated_user import Turn
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.productivity import team_lunch as lunch_task
from weavegym.envs.tasks.productivity.team_lunch import (
    DIETS,
    GLUTEN_FREE,
    MARK,
    NONE,
    QUESTIONS,
    VEGAN,
    VEGETARIAN,
    asked_first,
    cheapest_order,
    dearest_cost,
    diet_shortfall,
    judge_order,
    menu_layout,
    order_cost,
    order_lines,
    parse_diets,
    parse_order_file,
    parse_replies,
    plan,
    read_menu,
    suits,
    user_script,
)
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay


def _lunch(seed: int) -> dict:
    return plan(np.random.default_rng(seed))


def _chat(seed: int, messages: list[str]) -> list[Turn]:
    """The transcript the requester's script gives for these agent messages, one second per record."""
    clock = iter(float(1000 + i) for i in range(1000))
    records: list[dict] = []
    chat = program.Conversation(user_script(_lunch(seed)).to_dict(), records.append, clock=lambda: next(clock))
    chat.open()
    for message in messages:
        chat.send(message)
    return [Turn.from_record(r) for r in records]


# ---- seeds -------------------------------------------------------------------------------------------------

def test_every_seed_varies_menu_roster_guests_budget_and_time() -> None:
    lunches = [_lunch(seed) for seed in range(8)]
    assert len({tuple(lunch["menu"]) for lunch in lunches}) == 8
    assert len({tuple(lunch["roster"]) for lunch in lunches}) == 8
    assert len({lunch["budget"] for lunch in lunches}) >= 3 and len({lunch["delivery"] for lunch in lunches}) >= 3
    assert len({(lunch["guests"], lunch["extra"]) for lunch in lunches}) >= 3
    assert _lunch(3) == _lunch(3)


@pytest.mark.parametrize("seed", range(30))
def test_each_seed_is_feasible_and_ignoring_prices_breaks_the_budget(seed: int) -> None:
    lunch = _lunch(seed)
    menu, diets, heads = lunch["menu"], lunch["diets"], lunch["heads"]
    assert 7 <= len(menu) <= 8 and len({d[0] for d in menu}) == len(menu)
    assert all(pixel_font.unsupported(name + price + tags) == "" and len(name) <= 16 for name, price, tags in menu)
    assert all(any(suits(tags, diet) for _n, _p, tags in menu) for diet in DIETS)
    assert heads == len(lunch["roster"]) + lunch["guests"] + lunch["extra"] == sum(diets.values())
    roster = Counter(diet for _name, diet in lunch["roster"])
    assert diets[lunch["special"]] == roster[lunch["special"]] + 1
    cheapest = cheapest_order(menu, diets)
    assert judge_order(cheapest, lunch["delivery"], lunch)[0]
    assert order_cost(menu, cheapest) <= lunch["budget"] * heads < dearest_cost(menu, diets) - 0.5


def test_the_requester_is_on_the_roster_and_every_diet_is_a_known_one() -> None:
    lunch = _lunch(0)
    assert lunch["roster"][0][0] == lunch["requester"]
    assert {diet for _name, diet in lunch["roster"]} <= set(DIETS)


# ---- the requester's script --------------------------------------------------------------------------------

def test_the_oracles_questions_get_each_hidden_answer_and_the_change_of_mind_once() -> None:
    lunch = _lunch(0)
    turns = _chat(0, list(QUESTIONS))
    said = [(t.event, t.topics) for t in turns]
    assert said == [("opening", ()), ("question", ("budget",)), ("answer", ("budget",)),
                    ("question", ("guests",)), ("answer", ("guests",)),
                    ("question", ("delivery",)), ("change_of_mind", ("guests",)), ("answer", ("delivery",)),
                    ("question", ("guests",)), ("answer", ("guests",))]
    replies = {t.topics[0]: t.text for t in turns if t.event == "answer"}  # the last answer per topic wins
    change = next(t.text for t in turns if t.event == "change_of_mind")
    assert change == f"Oh, actually {lunch['extra']} more guests are coming, and one of them is {lunch['special']}."
    budget, delivery, guests = parse_replies({**replies, "guests_after": replies["guests"]})
    assert (budget, delivery) == (lunch["budget"], lunch["delivery"])
    assert guests == {NONE: lunch["guests"] + lunch["extra"] - 1, lunch["special"]: 1}


def test_the_opening_gives_nothing_away_and_an_unrelated_message_gets_the_fallback() -> None:
    turns = _chat(1, ["Sure, I'm on it!"])
    assert turns[0].text == "Hi! Can you order lunch for the team meeting?"
    assert [(t.event, t.text) for t in turns[1:]] == [("question", "Sure, I'm on it!"),
                                                      ("fallback", program.FALLBACK)]
    script = user_script(_lunch(1))
    assert {t.name for t in script.topics if t.hidden} == {"budget", "guests", "delivery"}


@pytest.mark.parametrize(("message", "topics"), [
    ("How much can we spend?", ("budget",)),
    ("Is there a price limit per person?", ("budget",)),
    ("Who else is coming besides the team?", ("guests",)),
    ("When should it arrive?", ("delivery",)),
    ("Any allergies I should know about?", ("diet",)),
    ("Which caterer should I use?", ("menu",)),
    ("Thanks!", ()),
])
def test_natural_questions_match_the_intended_topic(message: str, topics: tuple[str, ...]) -> None:
    assert _chat(2, [message])[1].topics == topics


def test_asked_first_needs_the_question_before_the_order() -> None:
    turns = _chat(0, list(QUESTIONS))  # the budget question is record 2, at t=1001
    assert asked_first("budget", turns, 1050.0).outcome == Outcome.SATISFIED
    late = asked_first("budget", turns, 1000.5)
    assert late.outcome == Outcome.FAILED and "0.5 s after" in late.evidence
    nothing = asked_first("budget", turns, None)
    assert nothing.evidence == "nothing was ordered, so 'budget' was not asked before it"
    never = asked_first("delivery", _chat(0, QUESTIONS[:2]), 1e12)
    assert never.outcome == Outcome.FAILED and "none of the agent's 2 message(s)" in never.evidence


def test_the_change_of_mind_needs_a_message_after_the_guests_answer() -> None:
    assert "change_of_mind" not in [t.event for t in _chat(0, QUESTIONS[:2])]
    assert [t.event for t in _chat(0, QUESTIONS[1:3])].count("change_of_mind") == 1


# ---- judging an order --------------------------------------------------------------------------------------

def test_the_cheapest_order_passes_and_each_kind_of_mistake_is_named() -> None:
    lunch = _lunch(0)
    menu, delivery = lunch["menu"], lunch["delivery"]
    good = cheapest_order(menu, lunch["diets"])
    assert judge_order(good, delivery, lunch) == (True, judge_order(good, delivery, lunch)[1])
    before = dict(lunch["diets"])
    before[NONE] -= lunch["extra"] - 1
    before[lunch["special"]] -= 1
    ok, why = judge_order(cheapest_order(menu, before), delivery, lunch)
    assert not ok and why.endswith("(the guests before the change of mind)")
    assert judge_order(good, "12:05", lunch) == (False, f"delivery at '12:05', expected {delivery}")
    assert judge_order({**good, "PIZZA": 1}, delivery, lunch) == (False, "dishes not on the menu: ['PIZZA']")
    plain = next(d[0] for d in menu if not d[2])
    ok, why = judge_order({plain: lunch["heads"]}, delivery, lunch)
    assert not ok and "portions that suit them" in why
    dear_order: Counter[str] = Counter()
    for diet, n in lunch["diets"].items():
        if n:
            dear_order[max((d for d in menu if suits(d[2], diet)), key=lambda d: float(d[1]))[0]] += n
    ok, why = judge_order(dict(dear_order), delivery, lunch)
    assert not ok and "over the budget" in why


def test_hall_condition_sees_a_shortage_spread_over_two_diets() -> None:
    menu = [("A", "10.00", ""), ("B", "11.00", "V VG"), ("C", "12.00", "GF")]
    diets = {NONE: 1, VEGAN: 2, GLUTEN_FREE: 1, VEGETARIAN: 0}
    assert diet_shortfall(menu, {"A": 1, "B": 2, "C": 1}, diets) == ""
    assert diet_shortfall(menu, {"A": 2, "B": 1, "C": 1}, diets) == "2 people who are vegan but only 1 portions that " \
                                                                    "suit them"
    both = [("A", "10.00", ""), ("D", "13.00", "V VG GF")]
    assert diet_shortfall(both, {"A": 2, "D": 2}, {NONE: 1, VEGAN: 2, GLUTEN_FREE: 1}) == \
        "3 people who are vegan/gluten-free but only 2 portions that suit them"


def test_parse_order_file_reads_the_csv_as_the_instruction_asks() -> None:
    text = "dish,quantity\r\nLentil Curry, 3\nBEEF LASAGNE,5\n\nlentil curry,1\nGREEK SALAD,0\ndelivery,12:30\n"
    assert parse_order_file(text) == ({"LENTIL CURRY": 4, "BEEF LASAGNE": 5}, "12:30", [])
    items, delivery, problems = parse_order_file("BEEF LASAGNE,five\nTOFU NOODLES,2")
    assert (items, delivery) == ({"TOFU NOODLES": 2}, "")
    assert problems == ["line 1 is not dish,quantity: 'BEEF LASAGNE,five'"]
    order = {"LENTIL CURRY": 4, "BEEF LASAGNE": 5}
    assert parse_order_file(order_lines(order, "11:45")) == (order, "11:45", [])


# ---- the oracle's eyes and parsers -------------------------------------------------------------------------

def _screen(menu: list, window: tuple[int, int], shift: tuple[int, int] = (0, 0)) -> np.ndarray:
    """A 1280x720 screenshot of the caterer's canvas as the fixture draws it, the window at ``window``+``shift``."""
    image = np.full((720, 1280, 3), 200, dtype=np.uint8)  # a grey desktop
    layout = menu_layout(len(menu), *window)
    x, y = window[0] + shift[0], window[1] + shift[1]
    image[y:y + layout["height"], x:x + layout["width"]] = 255
    ink = pixel_font.INK

    def fill(x0: int, y0: int, x1: int, y1: int) -> None:
        image[y + y0:y + y1, x + x0:x + x1] = ink

    fill(MARK[0], MARK[1], MARK[0] + MARK[2], MARK[1] + MARK[2])
    texts = [(layout["heading"], layout["heading_x"], layout["heading_y"])]
    texts += [(head, column, layout["head_y"]) for head, column in (("DISH", 16), ("EUR", 220), ("DIET", 292))]
    for (name, price, tags), row_y in zip(menu, layout["row_y"], strict=True):
        texts += [(name, layout["name_x"], row_y), (price, layout["price_x"], row_y), (tags, layout["tags_x"], row_y)]
    for text, tx, ty in texts:
        for box in pixel_font.layout_text(text, tx, ty, layout["scale"]):
            fill(*box)
    return image


@pytest.mark.parametrize("shift", [(0, 0), (3, -2), (-7, 11)])
def test_read_menu_decodes_every_row_even_when_the_window_sits_a_little_off(shift: tuple[int, int]) -> None:
    menu = _lunch(4)["menu"]
    image = _screen(menu, (760, 40), shift)
    assert read_menu(image, [760, 40, 480, 600], len(menu)) == [tuple(d) for d in menu]
    assert read_menu(np.full((720, 1280, 3), 255, dtype=np.uint8), [760, 40, 480, 600], len(menu)) is None


def test_a_pointer_over_a_price_shows_as_unknown_not_as_another_price() -> None:
    menu = _lunch(5)["menu"]
    image = _screen(menu, (700, 40))
    row_y = 40 + menu_layout(len(menu), 0, 0)["row_y"][2]
    image[row_y:row_y + 14, 700 + 220 + 12:700 + 220 + 24] = pixel_font.INK  # a dark blot over a digit
    price = read_menu(image, [700, 40, 480, 600], len(menu))[2][1]
    assert pixel_font.UNKNOWN in price


def test_parse_diets_reads_uniq_counts_off_the_terminal() -> None:
    terminal = "DIETS\r\n      2 gluten-free\r\n      5 none\n      1 vegan\n      2 vegetarian\n"
    assert parse_diets(terminal) == {GLUTEN_FREE: 2, NONE: 5, VEGAN: 1, VEGETARIAN: 2}
    assert parse_diets("cat: /home/user/team-roster.csv: Permission denied") == {}


def test_the_oracle_is_blind_to_the_withheld_menu_and_roster() -> None:
    truth = {**_lunch(0), "window": [0, 0, 1, 1]}
    hidden = lunch_task.TASK.oracle_truth(truth)
    assert not {"menu", "roster", "diets", "heads"} & set(hidden)


# ---- the caterer's window on a real X server, read and filled through the real agent -------------------------

def test_the_caterers_window_reads_back_and_records_the_order_typed_into_it(xvfb: XvfbDisplay, client: GuestClient,
                                                                            tmp_path: Path) -> None:
    lunch = _lunch(2)
    menu = lunch["menu"]
    layout = menu_layout(len(menu), 700, 30)
    folder = Path(lunch_task.__file__).parent
    shutil.copy(folder / "fixtures" / "caterer_order.py", tmp_path)
    shutil.copy(Path(pixel_font.__file__), tmp_path)
    record = tmp_path / "record.json"
    with record.open("wb") as out:
        proc = subprocess.Popen([sys.executable, str(tmp_path / "caterer_order.py")], stdin=subprocess.PIPE,
                                stdout=out, env={**os.environ, "DISPLAY": xvfb.display})
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"dishes": menu, "layout": layout}).encode())
        proc.stdin.close()
    try:
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == layout["title"]), None),
                          20, what="the caterer's window mapped")
        x, y = window.x, window.y
        read = wait_for(lambda: read_menu(client.screenshot(hide_cursor=True).image, window.geometry, len(menu))
                        == [tuple(d) for d in menu], 20, what="the menu read back")
        assert read
        order = cheapest_order(menu, lunch["diets"])
        names = [d[0] for d in menu]
        for name, qty in order.items():
            box = layout["qty"][names.index(name)]
            client.click(x + box[0] + box[2] // 2, y + box[1] + box[3] // 2)
            client.type_text(str(qty))
        box = layout["delivery"]
        client.click(x + box[0] + 45, y + box[1] + 15)
        client.type_text(lunch["delivery"])
        box = layout["submit"]
        client.click(x + box[0] + 75, y + box[1] + 17)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    found = json.loads(record.read_text().strip().splitlines()[-1])
    assert found["items"] == order and found["delivery"] == lunch["delivery"]
    assert judge_order(found["items"], found["delivery"], lunch)[0]
