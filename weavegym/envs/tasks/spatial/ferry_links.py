"""Weave-Spatial-8: license the archipelagos' ferry links, three charts between a Tk office, Bridges and the shell.

Three apps, the data flowing chart by chart between the channels. The Harbour Office (a Tk app, the desktop
account's) shows the current archipelago's chart after a click, as dot-matrix pixels only: its islands and how many
bridges each takes. The agent writes the chart as Bridges' game id and has a program find the one network in the
shell (straight links between islands in sight, at most two per pair, none crossing, every island its number, all
connected). The chart goes into the real sgt-bridges window through Game > Specific..., the links are built there by
dragging between islands and the game is saved into ~/ferries (a folder only the desktop account may write). The
ferry register (an SQLite file only the workspace account may read) holds each archipelago's island names and its
berth rate per square a bridge spans; the total berth cost needs the network and the rate. At the office the agent
types that cost; the right one with the chart's save, built to the network, takes the save's hash into the office's
root-only record, shows a random licence code as pixels only and opens the next chart (shown only after another
click). The shell keeps the network plan in ~/harbour (only the workspace account may write there): each chart, its
licence code, its cost and its links by island names.

Scoring: every chart's save is a Bridges game of that chart played (not solved by the menu) to its network; the
office licensed every chart with the save as it is now; the plan lists every chart with the office's licence code,
the cost and the links by name. The seeds vary the charts (islands, numbers, the order of their sizes 7x7, 8x8,
9x9), the names and the rates; the licence codes are drawn in the VM at each confirmation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import Channels, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.games.sgt_common import saved_game
from weavegym.envs.tasks.item_records import numbered_records, per_item_verdict
from weavegym.envs.tasks.spatial._harbour_common import (
    APP,
    APP_DIR,
    BRIDGES,
    BRIDGES_AT,
    CONF,
    COUNT,
    FERRIES,
    HARBOUR,
    LINK_ITEM,
    NAMES,
    NETWORK,
    OFFICE_AT,
    PLAN_LINE,
    RECORD,
    REGISTER,
    REGISTER_DIR,
    SIZES,
    TILE,
    TITLE,
    chart_lines,
    find_board,
    layout,
    origin,
    save_path,
)
from weavegym.envs.tasks.spatial._harbour_oracle import oracle
from weavegym.envs.tasks.spatial.bridges import berth_cost, chart_links, decode, draw_chart, ref, replay_bridges
from weavegym.evaluators import Clause, GuiArtifactViaCli, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

START = (6, 6)  # Bridges opens on a 6x6 chart of six islands, none of the archipelagos

# ---- setup -------------------------------------------------------------------------------------------------

SCHEMA = """
CREATE TABLE charts (chart INTEGER PRIMARY KEY, rate INTEGER NOT NULL);  -- berth cost per bridge per square spanned
CREATE TABLE islands (chart INTEGER NOT NULL, ref TEXT NOT NULL, name TEXT NOT NULL);  -- ref: column letter, row
"""


def draw_charts(rng: Any) -> list[dict[str, Any]]:
    """One chart of each size in a random order, each with one network, its island names, its rate and its cost."""
    charts = []
    for index in rng.permutation(COUNT):
        side, count = SIZES[int(index)]
        chart = draw_chart(rng, side, side, count)
        names = [str(n) for n in rng.choice(NAMES, size=len(chart["islands"]), replace=False)]
        chart["names"] = {ref((x, y)): name for (x, y, _n), name in zip(chart["islands"], names, strict=True)}
        chart["rate"] = int(rng.integers(3, 20))
        chart["cost"] = berth_cost(chart_links(chart), chart["rate"])
        charts.append(chart)
    return charts


def register_bytes(charts: list[Mapping[str, Any]]) -> bytes:
    isles = [(n, r, name) for n, c in enumerate(charts, 1) for r, name in sorted(c["names"].items())]
    return database_bytes(SCHEMA, {"charts": [(n, c["rate"]) for n, c in enumerate(charts, 1)], "islands": isles})


def setup(ctx: SetupContext) -> Prepared:
    charts = draw_charts(ctx.rng)
    start = draw_chart(ctx.rng, *START, 6)
    # The ferries folder: the desktop account's alone (0755), so the shell cannot put a save there; the harbour
    # folder: the workspace account's alone (2755), so a terminal on the desktop cannot write the plan; the register:
    # the workspace account's alone (0700), so the desktop side cannot read the names and rates.
    ctx.run(["install", "-d", "-m", "0755", "-o", DESKTOP_USER, "-g", SHARED_GROUP, FERRIES])
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, HARBOUR])
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, REGISTER_DIR])
    ctx.write_file(REGISTER, register_bytes(charts), owner=WORKSPACE_USER, mode=0o600)
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/harbour_office.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    conf = {"charts": [{"lines": chart_lines(n, c), "desc": c["id"].split(":", 1)[1], "links": c["links"],
                        "cost": c["cost"]} for n, c in enumerate(charts, 1)],
            "ferries": FERRIES, "layout": layout()}
    ctx.write_file(CONF, json.dumps(conf), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {CONF} > {RECORD}", name="harbour")
    ctx.place_window(ctx.wait_window(f"^{TITLE}$").id, OFFICE_AT)
    # A chart of its own, from the home, where its Save dialog opens; squares of TILE px.
    ctx.launch_gui(f"cd {HOME} && {{as_user}} BRIDGES_TILESIZE={TILE} {BRIDGES} '{start['id']}'", name="bridges")
    ctx.place_window(ctx.wait_window("^Bridges$").id, BRIDGES_AT)
    islands = decode(start["id"])[2]
    try:
        at = wait_for(lambda: origin(ctx.client.screenshot(hide_cursor=True).image), 120, what="office drawn",
                      max_poll=1.0)
        board = wait_for(lambda: find_board(ctx.client.screenshot(hide_cursor=True).image, islands), 120,
                         what="Bridges' board at its place", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", CONF])  # the charts now live only in the office's memory
    corner = [board[0] - TILE + 6, board[1] - TILE + 6]  # in the canvas border, up and left of square (0, 0)
    return Prepared(params={}, truth={"charts": charts, "at": list(at), "corner": corner})


# ---- the checker -------------------------------------------------------------------------------------------

def office_records(probe: Probe) -> dict[int, dict[str, Any]]:
    """{chart: its licence record} of the office's root-only record."""
    return numbered_records(probe, RECORD, "chart")


def judge_save(text: str | None, chart: Mapping[str, Any], number: int) -> str:
    """'' when the save is a Bridges game of the chart played to its network, else what is wrong."""
    saved = saved_game(text, "Bridges")
    if saved is None:
        return f"chart {number}: {save_path(number)} is missing or not a Bridges save"
    size = chart["id"].split(":", 1)[0]
    try:
        same = decode(f"{size}:{saved[0]}") == decode(chart["id"])
    except ValueError:
        same = False
    if not same:
        return f"chart {number}: the save holds the chart {saved[0][:60]!r}, the office's is {chart['id']!r}"
    built, problem = replay_bridges(chart["id"], saved[1])
    if problem or built is None:
        return f"chart {number}: {problem}"
    want = chart_links(chart)
    if built != want:
        right = sum(1 for link, n in built.items() if want.get(link) == n)
        return f"chart {number}: the save ends with {len(built)} links, {right} of the network's {len(want)} right"
    return ""


def check_saves(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return per_item_verdict([judge_save(probe.read_text(save_path(n)), c, n) for n, c in enumerate(truth["charts"], 1)],
                            "the chart's save is its network built in Bridges")


def check_licensed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records, problems = office_records(probe), []
    if not records:
        return Verdict.failed("the office licensed no chart")
    for number, _chart in enumerate(truth["charts"], 1):
        data = probe.read_bytes(save_path(number))
        if number not in records:
            problems.append(f"chart {number} was not licensed at the office")
        elif data is None or hashlib.sha256(data).hexdigest() != records[number].get("sha256"):
            problems.append(f"chart {number}: the save is not the one the office took")
        else:
            problems.append("")
    return per_item_verdict(problems, "licensed at the office with the chart's save as it is now")


def parse_plan(text: str | None) -> tuple[dict[int, tuple[str, int, str]], str]:
    """({chart: (licence, cost, links)}, problem) of the plan's 'N | licence | cost | links' lines."""
    if text is None:
        return {}, f"{NETWORK} does not exist"
    rows: dict[int, tuple[str, int, str]] = {}
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        found = PLAN_LINE.match(line)
        if found is None:
            return {}, f"{NETWORK} line {number} is not 'N | licence | cost | links': {line[:60]!r}"
        rows[int(found.group(1))] = (found.group(2).upper(), int(found.group(3)), found.group(4))
    return rows, "" if rows else f"{NETWORK} has no line"


def parse_named_links(text: str) -> dict[frozenset[str], int] | None:
    """{frozenset of the two island names (lower case): bridges} of 'Arran-Bute 2, Coll-Iona 1'; None if unreadable
    or a pair is listed twice."""
    links: dict[frozenset[str], int] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        found = LINK_ITEM.match(item)
        if found is None:
            return None
        pair = frozenset((found.group(1).lower(), found.group(2).lower()))
        if len(pair) != 2 or pair in links:
            return None
        links[pair] = int(found.group(3))
    return links


def named_network(chart: Mapping[str, Any]) -> dict[frozenset[str], int]:
    names = chart["names"]
    return {frozenset((names[ref(a)].lower(), names[ref(b)].lower())): n for (a, b), n in chart_links(chart).items()}


def check_plan(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = parse_plan(probe.read_text(NETWORK))
    if problem:
        return Verdict.failed(problem)
    records, charts = office_records(probe), truth["charts"]
    want = list(range(1, len(charts) + 1))
    problems = [] if sorted(rows) == want else [f"lists charts {sorted(rows)}, the harbour's are {want}"]
    for number, chart in enumerate(charts, 1):
        licence, cost, links = rows.get(number, ("", -1, ""))
        want_licence = str(records.get(number, {}).get("licence") or "")
        if not want_licence or licence != want_licence:
            problems.append(f"chart {number}: licence {licence!r}, the office's is {want_licence or '(none)'!r}")
        elif cost != chart["cost"]:
            problems.append(f"chart {number}: cost {cost}, the register's rate makes it {chart['cost']}")
        elif parse_named_links(links) != named_network(chart):
            problems.append(f"chart {number}: links {links[:60]!r} are not the chart's network by island names")
    return Verdict.check(not problems, "; ".join(problems[:4]) if problems else
                         f"every chart with the office's licence code, its cost and its links ({len(charts)} lines)")


TASK = Task(
    id="Weave-Spatial-8",
    title="License the archipelagos' ferry links: solve each chart's network, build it in Bridges, confirm its berth "
          "cost at the harbour office and keep the network plan",
    instruction=(
        "You are the harbour master of three archipelagos, licensed one after another. The 'Harbour Office' window "
        "shows the current archipelago's chart after you press 'Show chart': one line per row (rows 1, 2, ... from "
        "the top; columns A, B, ... from the left), '.' open water and a digit an island, the digit being how many "
        "ferry bridges the island takes. Bridges run straight across the water, horizontally or vertically, "
        "between two islands with no island between them; two islands share at most two bridges, no two bridges "
        "cross, every island takes exactly its number and all the islands end connected. Each chart has one such "
        "network, which a program in your shell can find. This is Simon Tatham's Bridges puzzle: in the open "
        "Bridges window enter the chart with Game > Specific... as its game id, 'WxHm2:' (e.g. 7x7m2:) then the "
        "squares in reading order, an island as its digit and each run of open water as one letter for its length "
        "(a=1, b=2, ... z=26), e.g. 7x7m2:4a5a1e2b4b2d5e5b2k2a3c3. Build its bridges there (drag from an island to "
        "its neighbour: each drag adds a bridge, a third drag removes both; do not use Game > Solve) and save the "
        "game with Game > Save... as ~/ferries/chart-N.sav (N the chart's number). The ferry register "
        "~/register/ferries.db (SQLite) names every island by its grid reference (table islands: chart, ref such "
        "as C4, name) and gives each chart's berth rate (table charts: chart, rate): every bridge costs the rate "
        "times the squares it spans (from island to island, e.g. A1 to D1 spans 3), a double link twice. Type the "
        "chart's total berth cost into the office's entry and press 'Confirm': with the right cost and the saved "
        "game the office shows the chart's licence code and moves on to the next chart. From your shell keep the "
        "network plan ~/harbour/network.txt: one line per chart, 'N | licence | cost | links', the links as "
        "'Name-Name bridges' separated by commas (e.g. 1 | ABC234 | 84 | Arran-Bute 2, Bute-Coll 1). Then finish."),
    channels=Channels(
        gui="read each chart off the office, enter it into Bridges, build its bridges there and save the game, "
            "confirm the berth cost at the office and read the licence codes back",
        cli="find each chart's network with a search program, look up the island names and rates in the register, "
            "compute the berth costs and write the network plan with the licence codes",
        why_both="the charts and licence codes exist only as the office's pixels and the saves must come from the "
                 "Bridges window into a folder only the desktop account can write, while finding a network is a "
                 "search for a program, the names and rates are in a register only the shell's account can read, "
                 "and the plan belongs in a folder only the shell's account can write"),
    setup=setup,
    clauses=(
        Clause("networks_built", "every ~/ferries/chart-N.sav is a Bridges game of chart N with its network built by "
                                 "hand", check_saves, weight=3.0, critical=True, cap=0.5),
        Clause("licensed", "the office licensed every chart with its save as it is now", check_licensed,
               weight=2.0, critical=True, cap=0.5),
        Clause("network_plan", "~/harbour/network.txt lists every chart with the office's licence code, its berth "
                               "cost and its links by island names", check_plan, weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        *(Deliverable(save_path(n), "gui", description=f"~/ferries/chart-{n}.sav (saved by the Bridges window)")
          for n in range(1, COUNT + 1)),
        Deliverable(RECORD, "gui", owner="root", description="the office's record (captured by setup)"),
        Deliverable(NETWORK, "cli", description="~/harbour/network.txt"),
    ),
    rules=(GuiArtifactViaCli([save_path(n) for n in range(1, COUNT + 1)],
                             "the saves must come from the Bridges window's Save dialog"),),
    oracle=oracle,
    withheld=("charts",),
    profile="base",
    apps=("Harbour Office (python3-tk)", "sgt-bridges", "sqlite3", "python3"),
    max_steps=600,
    time_budget_s=3600.0,
)
