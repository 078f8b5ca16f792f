"""Weave-Productivity-4: order the team lunch for a requester who says too little and changes their mind.

A simulated user (envs/simulated_user.py) opens with "Can you order lunch for the team meeting?" and gives
the budget per head, the guests and the delivery time only when asked; once the guests were answered, the
next message brings "actually, N more guests are coming, one of them vegan". The team's dietary needs are
in ~/team-roster.csv, readable only by the workspace account (shell work: the counts). The caterer's menu
(dish names, prices, diet tags; different every seed) exists only as dot-matrix pixels in a Tk window on the
desktop (pixel_font, fed from a root-only file that setup deletes once drawn), next to the order form, whose
record lands in a root-only file. The order goes both to ~/lunch-order.csv from the shell and into the form.

Scoring: the file's order and the form's order each must feed everyone (roster plus final guests), suit
every diet (a transport problem over diet types and dishes: Hall's condition) and stay within the budget,
with the asked-for delivery time; the two must agree; every hidden preference must have been asked before
the order was made; and the change of mind must have been heard.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, WORKSPACE_USER, SetupContext
from weavegym.envs.simulated_user import (
    ChangeOfMind,
    Topic,
    Turn,
    UserScript,
    asked_before_delivery,
    asked_in_time,
    entry_point,
    first_handover,
    heard_change,
    move_chat_beside,
    start_simulated_user,
)
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.dialogs import json_record
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

ROSTER = f"{HOME}/team-roster.csv"
ORDER = f"{HOME}/lunch-order.csv"
APP_DIR = "/usr/local/share/caterer"
APP = f"{APP_DIR}/caterer_order.py"
MENU_IN = f"{PRIVATE_DIR}/caterer-menu.json"
RECORD = f"{PRIVATE_DIR}/caterer-order.json"
MENU_TITLE = "Caterer: menu and order form"
CHAT_TITLE = "Chat: lunch request"
OPENING = "Hi! Can you order lunch for the team meeting?"

# Diet tags as the menu prints them, and which tag each diet of the roster needs ("none": any dish).
VEGETARIAN, VEGAN, GLUTEN_FREE, NONE = "vegetarian", "vegan", "gluten-free", "none"
DIETS = (NONE, VEGETARIAN, VEGAN, GLUTEN_FREE)
NEEDS = {NONE: "", VEGETARIAN: "V", VEGAN: "VG", GLUTEN_FREE: "GF"}
KINDS: dict[str, tuple[str, ...]] = {  # menu tags -> the caterer's dishes of that kind (16 characters at most)
    "": ("CHICKEN WRAP", "BEEF LASAGNE", "TUNA SANDWICH", "HAM BAGUETTE", "PORK BAO BUNS"),
    "GF": ("SALMON POKE", "STEAK SALAD", "CHICKEN TIKKA"),
    "V": ("CAPRESE PANINI", "PESTO PASTA", "SPINACH QUICHE", "CHEESE RAVIOLI"),
    "V GF": ("MUSHROOM RISOTTO", "GREEK SALAD", "HALLOUMI BOWL"),
    "V VG": ("FALAFEL WRAP", "BEAN BURRITO", "TOFU NOODLES"),
    "V VG GF": ("LENTIL CURRY", "QUINOA SALAD", "VEGGIE CHILI"),
}
MENU_KINDS = ("", "", "GF", "V", "V GF", "V VG", "V VG GF")  # every diet has a dish, and more than one kind
PEOPLE = ("Ana", "Ben", "Chloe", "Dev", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kaya", "Lars", "Mei",
          "Nils", "Olga", "Pavel", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera", "Wim", "Yusuf", "Zoe")
REQUESTERS = ("Alex", "Robin", "Sam", "Kim", "Jordan", "Charlie")
TIMES = ("11:45", "12:00", "12:15", "12:30", "12:45", "13:00")

# The window's geometry (pixels inside it): the fixture draws here, the oracle reads and clicks here.
SCALE = 2
CHAR = pixel_font.ADVANCE * SCALE
WIDTH, MARK, NAME_X, PRICE_X, TAGS_X, QTY_X, QTY_W = 480, (12, 12, 12), 16, 220, 292, 400, 60
HEADING, HEADING_X = "LUNCH MENU - EUR PER PORTION", 40
HEAD_Y, FIRST_ROW_Y, ROW_H = 52, 84, 36
NAME_CHARS, PRICE_CHARS, TAGS_CHARS = 16, 5, 7
LEGEND = "Diet tags: V vegetarian, VG vegan, GF gluten-free"

Dish = tuple[str, str, str]  # (name, price as printed "12.50", tags as printed "V VG")


def menu_layout(rows: int, x: int, y: int) -> dict[str, Any]:
    """Where the window puts everything for ``rows`` dishes; boxes are [x, y, width, height] in the window."""
    row_y = [FIRST_ROW_Y + i * ROW_H for i in range(rows)]
    below = FIRST_ROW_Y + rows * ROW_H + 8
    legend_y = below + 46
    submit = [WIDTH - NAME_X - 150, legend_y + 52, 150, 34]
    return {"title": MENU_TITLE, "width": WIDTH, "height": submit[1] + submit[3] + 14, "x": x, "y": y,
            "scale": SCALE, "mark": list(MARK), "heading": HEADING, "heading_x": HEADING_X, "heading_y": MARK[1],
            "head_y": HEAD_Y, "name_x": NAME_X, "price_x": PRICE_X, "tags_x": TAGS_X, "qty_x": QTY_X,
            "row_y": row_y, "qty": [[QTY_X, ry - 7, QTY_W, 28] for ry in row_y], "delivery": [PRICE_X, below, 90, 30],
            "legend": LEGEND, "legend_y": legend_y, "status_y": legend_y + 26, "submit": submit}


# ---- what each seed varies ---------------------------------------------------------------------------------

def suits(tags: str, diet: str) -> bool:
    """A dish suits a diet when it carries the diet's tag (a vegan dish is tagged vegetarian too)."""
    need = NEEDS[diet]
    return not need or need in tags.split()


def cheapest_order(menu: Sequence[Dish], diets: Mapping[str, int]) -> dict[str, int]:
    """Everyone gets the cheapest dish that suits them: the cheapest order there is (no dish runs out)."""
    order: Counter[str] = Counter()
    for diet, count in diets.items():
        fits = [d for d in menu if suits(d[2], diet)]
        if count and fits:  # none fits only on a menu misread (an adversary's blind replay)
            order[min(fits, key=lambda d: (float(d[1]), d[0]))[0]] += count
    return dict(order)


def dearest_cost(menu: Sequence[Dish], diets: Mapping[str, int]) -> float:
    """What the order costs when everyone gets the dearest dish that suits them (an order that ignores prices)."""
    return sum(count * max(float(d[1]) for d in menu if suits(d[2], diet)) for diet, count in diets.items())


def order_cost(menu: Sequence[Dish], order: Mapping[str, int]) -> float:
    prices = {d[0]: float(d[1]) for d in menu}
    return sum(prices[name] * qty for name, qty in order.items())


def _menu(rng: np.random.Generator) -> list[Dish]:
    kinds = list(MENU_KINDS)
    if rng.random() < 0.5:
        kinds.append(str(rng.choice(sorted(KINDS))))
    names: list[tuple[str, str]] = []
    for tags in kinds:
        free = [n for n in KINDS[tags] if n not in {name for name, _ in names}]
        names.append((str(rng.choice(free)), tags))
    order = rng.permutation(len(names))
    return [(names[i][0], f"{int(rng.integers(17, 33)) / 2:.2f}", names[i][1]) for i in order]


def _roster(rng: np.random.Generator, requester: str) -> list[tuple[str, str]]:
    size = int(rng.integers(6, 12))
    special = [VEGETARIAN] * int(rng.integers(1, 3)) + [VEGAN] * int(rng.integers(0, 3)) + \
              [GLUTEN_FREE] * int(rng.integers(1, 3))
    diets = special + [NONE] * (size - len(special))
    names = [requester] + [str(n) for n in rng.choice(PEOPLE, size=size - 1, replace=False)]
    return [(name, str(diet)) for name, diet in zip(names, rng.permutation(diets), strict=True)]


def plan(rng: np.random.Generator) -> dict[str, Any]:
    """One seed's lunch: the menu, the roster, the guests before and after the change of mind, the budget."""
    requester = REQUESTERS[int(rng.integers(len(REQUESTERS)))]
    roster = _roster(rng, requester)
    guests, extra = int(rng.integers(1, 4)), int(rng.integers(2, 4))
    special = VEGAN if rng.random() < 2 / 3 else GLUTEN_FREE
    diets = Counter(diet for _name, diet in roster)
    diets[NONE] += guests + extra - 1
    diets[special] += 1
    final = {diet: int(diets[diet]) for diet in DIETS}
    heads = sum(final.values())
    for _attempt in range(200):  # prices such that ignoring them breaks the budget
        menu = _menu(rng)
        cheapest = order_cost(menu, cheapest_order(menu, final))
        budget = math.ceil(cheapest / heads * 2) / 2 + 0.5 * int(rng.integers(0, 2))
        if dearest_cost(menu, final) > budget * heads + 0.5:
            break
    else:
        raise TaskError("Weave-Productivity-4: no menu whose prices make the budget bind")
    return {"requester": requester, "roster": roster, "menu": menu, "guests": guests, "extra": extra,
            "special": special, "diets": final, "heads": heads, "budget": budget,
            "delivery": TIMES[int(rng.integers(len(TIMES)))]}


def _guests(count: int) -> str:
    return f"{count} guest{'s' if count != 1 else ''}"


def user_script(lunch: Mapping[str, Any]) -> UserScript:
    """What the requester says. Budget, guests and delivery time are hidden: answered only when asked."""
    guests, extra, special = lunch["guests"], lunch["extra"], lunch["special"]
    total = guests + extra
    topics = (
        Topic("budget", (("budget", "spend", "cost", "price", "how much", "per head", "per person", "afford",
                          "limit", "money", "euro"),),
              f"Please keep it within {lunch['budget']:.2f} euros per head.", hidden=True),
        Topic("guests", (("guest", "visitor", "attendee", "attending", "attend", "anyone else", "who else",
                          "headcount", "how many people", "joining", "join", "coming", "extra people", "external",
                          "client"),),
              f"Yes, {_guests(guests)} from our client will join us, with no special diet.", hidden=True),
        Topic("delivery", (("deliver", "delivered", "delivery", "what time", "when", "arrive", "arrival", "timing",
                            "time", "schedule"),),
              f"Please have it delivered at {lunch['delivery']}.", hidden=True),
        Topic("diet", (("diet", "dietary", "allergy", "allergic", "vegan", "vegetarian", "gluten", "restriction",
                        "intolerance"),),
              "Everyone's dietary needs are in the team roster; please go by that."),
        Topic("menu", (("menu", "caterer", "restaurant", "which dish", "what food", "dish"),),
              "Order from the caterer whose menu is open on your desktop: one main dish per person."),
    )
    change = ChangeOfMind(
        after_topic="guests", topic="guests",
        message=f"Oh, actually {extra} more guests are coming, and one of them is {special}.",
        new_reply=f"{_guests(total)} in all: {total - 1} with no special diet and 1 {special}.")
    return UserScript(opening=OPENING, topics=topics, change_of_mind=change, name=lunch["requester"])


# ---- setup -------------------------------------------------------------------------------------------------

def setup(ctx: SetupContext) -> Prepared:
    lunch = plan(ctx.rng)
    script = user_script(lunch)
    rows = "".join(f"{name},{diet}\n" for name, diet in lunch["roster"])
    # The workspace account's alone (0600): a terminal on the desktop runs as the desktop account and cannot read it.
    ctx.write_file(ROSTER, "name,diet\n" + rows, owner=WORKSPACE_USER, mode=0o600)
    window, layout = _open_menu(ctx, lunch["menu"])
    chat = move_chat_beside(ctx, start_simulated_user(ctx, script, title=CHAT_TITLE), window)
    _wait_menu(ctx, window, lunch["menu"])  # uncovered again once the chat moved
    x, y = window[0], window[1]
    qty = [[x + b[0] + b[2] // 2, y + b[1] + b[3] // 2] for b in layout["qty"]]
    targets = {"chat": list(entry_point(chat)), "qty": qty,
               "delivery": [x + layout["delivery"][0] + 45, y + layout["delivery"][1] + 15],
               "submit": [x + layout["submit"][0] + 75, y + layout["submit"][1] + 17],
               "blank": [x + WIDTH - 30, y + HEAD_Y + 6]}  # right of the column heads: raises the window
    replies = {t.name: t.reply for t in script.topics}
    assert script.change_of_mind is not None
    replies.update(change=script.change_of_mind.message, guests_after=script.change_of_mind.new_reply)
    return Prepared(params={"requester": lunch["requester"]}, truth={
        **lunch, "window": window, "layout": layout, "targets": targets, "chat_window": chat.geometry,
        "replies": replies, "opening": OPENING})


def _open_menu(ctx: SetupContext, menu: list[Dish]) -> tuple[list[int], dict[str, Any]]:
    """Start the caterer's window at the screen's left with the menu on stdin; wait until it is drawn, then
    drop the menu file: from then on the menu lives only on screen."""
    layout = menu_layout(len(menu), 0, 0)
    folder_font = f"{APP_DIR}/pixel_font.py"
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/caterer_order.py"), owner="root")
    ctx.write_file(folder_font, ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    ctx.write_file(MENU_IN, json.dumps({"dishes": menu, "layout": layout}), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {MENU_IN} > {RECORD}", name="caterer")
    window = ctx.wait_window(f"^{re.escape(MENU_TITLE)}$").geometry
    _wait_menu(ctx, window, menu)
    ctx.run(["rm", "-f", MENU_IN])
    return window, layout


def _wait_menu(ctx: SetupContext, window: list[int], menu: list[Dish]) -> None:
    """Mapped is not drawn (TCG), nor redrawn at once when uncovered: wait until the whole menu reads back."""
    try:
        wait_for(lambda: read_menu(ctx.client.screenshot(hide_cursor=True).image, window, len(menu)) == menu, 120,
                 what="the caterer's menu drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None


# ---- reading the menu off the screen (the oracle's eyes; setup's readiness check) -------------------------

def find_mark(image: np.ndarray, near: tuple[int, int], reach: int = 40) -> tuple[int, int] | None:
    """The top-left pixel of the window's registration square near ``near``: where the canvas really is, even
    when the window manager placed the window a few pixels off what the geometry said."""
    size = MARK[2]
    ink = image[..., :3].astype(int).sum(axis=2) < 3 * 128
    x0, y0 = near
    for y in range(max(1, y0 - reach), min(image.shape[0] - size, y0 + reach)):
        for x in range(max(1, x0 - reach), min(image.shape[1] - size, x0 + reach)):
            if ink[y, x] and not ink[y - 1, x] and not ink[y, x - 1] and ink[y:y + size, x:x + size].all() \
                    and not ink[y + size, x:x + size].any() and not ink[y:y + size, x + size].any():
                return x, y
    return None


def read_menu(image: np.ndarray, window: Sequence[int], rows: int) -> list[Dish] | None:
    """The menu as the window shows it: [(name, price, tags)] per row, or None when the window is not found."""
    expected = (window[0] + MARK[0], window[1] + MARK[1])
    mark = find_mark(image, expected)
    if mark is None:
        return None
    x, y = mark[0] - MARK[0], mark[1] - MARK[1]
    menu = []
    for i in range(rows):
        row_y = y + FIRST_ROW_Y + i * ROW_H
        menu.append((pixel_font.read_text(image, x + NAME_X, row_y, SCALE, NAME_CHARS),
                     pixel_font.read_text(image, x + PRICE_X, row_y, SCALE, PRICE_CHARS),
                     pixel_font.read_text(image, x + TAGS_X, row_y, SCALE, TAGS_CHARS)))
    return menu


# ---- the checker -------------------------------------------------------------------------------------------

def parse_order_file(text: str) -> tuple[dict[str, int], str, list[str]]:
    """(items, delivery time, problems) of ~/lunch-order.csv: `dish,quantity` lines and `delivery,HH:MM`."""
    items: dict[str, int] = {}
    delivery, problems = "", []
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        name, _sep, value = (part.strip() for part in line.partition(","))
        if name.casefold() == "dish" and value.casefold() == "quantity":
            continue
        if name.casefold() == "delivery":
            delivery = value
        elif value.isdigit():
            items[name.upper()] = items.get(name.upper(), 0) + int(value)
        else:
            problems.append(f"line {number} is not dish,quantity: {line[:60]!r}")
    return {k: v for k, v in items.items() if v}, delivery, problems


def diet_shortfall(menu: Sequence[Dish], order: Mapping[str, int], diets: Mapping[str, int]) -> str:
    """'' when the order can give everyone a dish that suits them, else which diets it cannot serve.

    Hall's condition for the transport problem: every set of diets must find at least as many portions
    suiting one of them as it has people (16 subsets of 4 diets).
    """
    tags = {d[0]: d[2] for d in menu}
    present = [diet for diet in DIETS if diets.get(diet, 0)]
    for size in range(1, len(present) + 1):
        for group in itertools.combinations(present, size):
            people = sum(diets[diet] for diet in group)
            portions = sum(qty for name, qty in order.items() if any(suits(tags[name], d) for d in group))
            if portions < people:
                return f"{people} people who are {'/'.join(group)} but only {portions} portions that suit them"
    return ""


def judge_order(items: Mapping[str, int], delivery: str, truth: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether an order feeds everyone (roster + final guests), suits every diet, fits the budget and comes on time."""
    menu = [tuple(d) for d in truth["menu"]]
    known = {d[0] for d in menu}
    unknown = sorted(set(items) - known)
    if unknown:
        return False, f"dishes not on the menu: {unknown}"
    heads, portions = truth["heads"], sum(items.values())
    early = heads - truth["extra"]
    if portions != heads:
        why = " (the guests before the change of mind)" if portions == early else ""
        return False, f"{portions} portions for {heads} people{why}"
    short = diet_shortfall(menu, items, truth["diets"])
    if short:
        return False, short
    cost, limit = order_cost(menu, items), truth["budget"] * heads
    if cost > limit + 1e-6:
        return False, f"costs {cost:.2f} EUR, over the budget of {truth['budget']:.2f} x {heads} = {limit:.2f}"
    if delivery != truth["delivery"]:
        return False, f"delivery at {delivery!r}, expected {truth['delivery']}"
    return True, f"{portions} portions for {heads} people, every diet served, {cost:.2f} <= {limit:.2f} EUR, " \
                 f"delivery at {delivery}"


def form_record(probe: Probe) -> dict[str, Any] | None:
    """The order form's record (the JSON line it printed as it exited), or None when it was not submitted."""
    found = json_record(probe, RECORD)
    return found if found is not None and isinstance(found.get("items"), dict) else None


def _record_order(record: Mapping[str, Any]) -> tuple[dict[str, int], str]:
    items = {str(k).upper(): int(v) for k, v in record["items"].items() if isinstance(v, int) and v}
    return items, str(record.get("delivery", "")).strip()


def _file_order(probe: Probe) -> tuple[dict[str, int], str, list[str]] | None:
    text = probe.read_text(ORDER)
    return None if text is None else parse_order_file(text)


def check_file_order(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = _file_order(probe)
    if found is None:
        return Verdict.failed(f"{ORDER} does not exist")
    items, delivery, problems = found
    if problems:
        return Verdict.failed(f"{ORDER}: {'; '.join(problems[:3])}")
    ok, why = judge_order(items, delivery, truth)
    return Verdict.check(ok, f"{ORDER}: {why}")


def check_form_order(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    record = form_record(probe)
    if record is None:
        return Verdict.failed("the caterer's order form was not submitted")
    ok, why = judge_order(*_record_order(record), truth)
    return Verdict.check(ok, f"the submitted form: {why}")


def check_same_order(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    record, found = form_record(probe), _file_order(probe)
    if record is None or found is None:
        return Verdict.failed(f"needs both the submitted form ({'present' if record else 'absent'}) and {ORDER} "
                              f"({'present' if found else 'absent'})")
    form, file_ = _record_order(record), found[:2]
    return Verdict.check(form == file_, f"the form ordered {form[0]} for {form[1]!r}; {ORDER} says {file_[0]} for "
                                        f"{file_[1]!r}")


def ordered_at(probe: Probe, _truth: Mapping[str, Any] | None = None) -> float | None:
    """When the order was made (guest clock): the earlier of the file's last write and the form's submission."""
    return first_handover(probe, [ORDER], form_record(probe))


def asked_first(topic: str, turns: Sequence[Turn], when: float | None) -> Verdict:
    """The topic was asked before the order was made; without any order there is nothing to have asked for."""
    return asked_in_time(turns, topic, when, "nothing was ordered")


def _asked(topic: str):
    return asked_before_delivery(topic, ordered_at, "nothing was ordered")


# ---- the oracle --------------------------------------------------------------------------------------------

DIET_LINE = re.compile(rf"^\s*(\d+)\s+({'|'.join(map(re.escape, DIETS))})\s*$", re.M)
QUESTIONS = ("What is the budget per head for the lunch?",
             "Will any guests join the team at the meeting?",  # answered; the next message brings the change
             "What time should the food be delivered?",
             "Understood. How many guests in total now?")


def parse_diets(terminal: str) -> dict[str, int]:
    """{diet: people} from `sort | uniq -c` as the terminal shows it."""
    return {diet: int(count) for count, diet in DIET_LINE.findall(terminal.replace("\r", ""))}


def parse_replies(replies: Mapping[str, str]) -> tuple[float, str, dict[str, int]]:
    """(budget per head, delivery time, guests by diet) from the requester's answers as the chat shows them."""
    budget = float(re.search(r"(\d+\.\d\d) euros", replies["budget"]).group(1))  # type: ignore[union-attr]
    delivery = re.search(r"\b(\d\d:\d\d)\b", replies["delivery"]).group(1)  # type: ignore[union-attr]
    match = re.search(r"(\d+) with no special diet and 1 ([a-z-]+)", replies["guests_after"])
    assert match is not None
    return budget, delivery, {NONE: int(match.group(1)), match.group(2): 1}


def order_lines(order: Mapping[str, int], delivery: str) -> str:
    return "dish,quantity\n" + "".join(f"{name},{qty}\n" for name, qty in order.items()) + f"delivery,{delivery}\n"


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Ask, count in the shell, read the menu off the screen, write the file, fill the form.

    The requester's answers come from ``truth["replies"]``, the texts the chat window shows: the chat is
    anti-aliased Tk text, which cannot be read back off ``obs["screen"]`` exactly (see the report).
    """
    t = ctx.truth["targets"]
    yield {"kind": "click", "x": t["chat"][0], "y": t["chat"][1]}
    for question in QUESTIONS:
        yield {"kind": "type", "text": question}
        yield {"kind": "key", "keys": "Return"}
    yield {"kind": "shell", "command": f"echo DIETS; tail -n +2 {ROSTER} | cut -d, -f2 | sort | uniq -c"}
    diets = Counter(parse_diets((ctx.obs or {}).get("terminal", "")))
    _budget, delivery, guests = parse_replies(ctx.truth["replies"])
    diets.update(guests)
    yield {"kind": "click", "x": t["blank"][0], "y": t["blank"][1]}  # raise the caterer's window, pointer off its text
    menu: list[Dish] = []
    for _try in range(5):  # the raised window may still be redrawing: read until every cell is a glyph
        menu = read_menu((ctx.obs or {})["screen"], ctx.truth["window"], len(ctx.truth["layout"]["row_y"])) or []
        if menu and pixel_font.UNKNOWN not in "".join("".join(d) for d in menu):
            break
        yield {"kind": "wait", "seconds": 1}
    # The cheapest order there is; setup makes the requester's budget (``budget``) one it fits, and an order that
    # ignores prices one it does not.
    order = cheapest_order([d for d in menu if re.fullmatch(r"\d+\.\d\d", d[1])], diets) if menu else {}
    lines = order_lines(order, delivery)
    yield {"kind": "shell", "command": f"printf %s '{lines}' > {ORDER} && cat {ORDER}"}
    names = [d[0] for d in menu]
    for name, qty in order.items():
        x, y = t["qty"][names.index(name)]
        yield {"kind": "click", "x": x, "y": y}
        yield {"kind": "type", "text": str(qty)}
    yield {"kind": "click", "x": t["delivery"][0], "y": t["delivery"][1]}
    yield {"kind": "type", "text": delivery}
    yield {"kind": "click", "x": t["submit"][0], "y": t["submit"][1]}
    # The form writes its record as it exits; pgrep sees every account's processes ([r]: not this sh itself).
    yield {"kind": "shell", "command": "timeout 60 sh -c 'while pgrep -f \"caterer_orde[r]\" >/dev/null; do "
                                       "sleep 0.2; done'", "timeout": 90}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Productivity-4",
    title="Order the team lunch for a requester in the chat",
    instruction=(
        "{requester} has a request for you in the chat window on the desktop; ask them there about anything you "
        "need to know. The team roster with everyone's dietary needs is ~/team-roster.csv (name,diet). The "
        "caterer's menu and order form is the open 'Caterer' window: every dish with its price per portion in "
        "euros and its diet tags (V vegetarian, VG vegan, GF gluten-free; a dish suits a diet when it carries "
        "its tag). Order one main dish per person. 1) From your shell, write the order to ~/lunch-order.csv: the "
        "line dish,quantity, then one line per dish ordered (its name as the menu shows it, and how many), and "
        "last delivery,HH:MM with the delivery time. 2) Enter the same quantities and delivery time in the order "
        "form and press 'Submit order', then finish."),
    channels=Channels(
        gui="chat with the requester, read the menu off the caterer's window and submit its order form",
        cli="count the roster's diets and write ~/lunch-order.csv",
        why_both="the requester's preferences exist only in the desktop chat and the menu only as pixels, the "
                 "order form's record only through the GUI, while the roster is readable only by the shell's "
                 "account and the order file must come from the shell"),
    setup=setup,
    clauses=(
        Clause("file_order", "~/lunch-order.csv feeds everyone, suits every diet, fits the budget, on time",
               check_file_order, weight=2.0, critical=True, cap=0.5),
        Clause("form_order", "the submitted order form feeds everyone, suits every diet, fits the budget, on time",
               check_form_order, weight=2.0, critical=True, cap=0.5),
        Clause("same_order", "the form and ~/lunch-order.csv order the same", check_same_order),
        Clause("asked_budget", "the budget per head was asked before ordering", _asked("budget")),
        Clause("asked_guests", "the guests were asked about before ordering", _asked("guests")),
        Clause("asked_delivery", "the delivery time was asked before ordering", _asked("delivery")),
        Clause("heard_change", "the agent checked back after the guests' answer and heard the change of mind",
               heard_change),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the order form's record (captured by setup)"),
        Deliverable(ORDER, "cli", description="~/lunch-order.csv"),
    ),
    withheld=("menu", "roster", "diets", "heads"),
    oracle=oracle,
    apps=("python3-tk", "sort", "uniq"),
    max_steps=60,
    time_budget_s=900.0,
    simulated_user=True,
)
