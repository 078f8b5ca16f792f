"""Weave-Data-6 without a VM: seeds, the ledger's truth through the oracle's SQL, Gnumeric files Gnumeric wrote,
the clauses on good and broken workbooks and memos, and the real Board pack read back off Xvfb."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs.task import OracleContext
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data import budget_books as bb
from weavegym.envs.tasks.data import budget_variance as bv
from weavegym.envs.tasks.data.gnumeric import evaluate, read_workbook, references, shift
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes, opened
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay

DATA = Path(__file__).parent / "data"
TEMPLATE = (Path(bv.__file__).parent / "fixtures" / "variance_template.gnumeric").read_bytes()


def _world(seed: int) -> dict[str, Any]:
    return bb.books(np.random.default_rng(seed))


def _truth(seed: int) -> dict[str, Any]:
    world = _world(seed)
    return {"quarter": world["quarter"], "rows": world["rows"]}


@pytest.mark.unit
def test_seeds_vary_and_every_chart_holds_a_closed_centre_and_a_cjk_or_rtl_name() -> None:
    worlds = [_world(seed) for seed in range(20)]
    assert len({w["quarter"] for w in worlds}) == 4
    assert len({tuple(r["name"] for r in w["rows"]) for w in worlds}) == 20
    for world in worlds:
        shown = [c for c in world["centres"] if c["on_chart"]]
        assert [c["status"] for c in shown].count("closed") == 1 and 6 <= len(world["rows"]) <= 8
        assert any(c["status"] == "open" and not c["on_chart"] for c in world["centres"])  # ledger-only centres
        assert any(r["name"] in bb.CJK_RTL for r in world["rows"])
        assert all(not a.startswith(b) for a in bb.LATIN + bb.CJK_RTL for b in bb.LATIN + bb.CJK_RTL if a != b)
        over = [r for r in world["rows"] if r["variance_cents"] > 0]
        assert over and len(over) < len(world["rows"]) and all(r["variance_cents"] != 0 for r in world["rows"])
        assert all(10_000 <= b <= 99_900 for c in shown for b in c["budgets"])
        kinds = {p[3] for p in world["postings"]}
        assert kinds == set(bb.KINDS) and len(world["postings"]) >= 300
        assert all(pixel_font.unsupported(c["code"]) == "" for c in shown)


@pytest.mark.unit
def test_the_oracles_sql_on_the_real_ledger_gives_each_centres_actual_and_status() -> None:
    for seed in range(6):
        world = _world(seed)
        first, last = bb.quarter_bounds(world["quarter"])
        with opened(database_bytes(bb.SCHEMA, bb.ledger_rows(world))) as con:
            for centre in (c for c in world["centres"] if c["on_chart"]):
                (row,) = con.execute(bv.centre_sql(centre["code"], first, last)).fetchall()
                assert row[:3] == ("CENTRE", centre["code"], centre["status"]) and row[4] == centre["name"]
                expected = next((r for r in world["rows"] if r["code"] == centre["code"]), None)
                if expected is not None:
                    assert row[3] == expected["actual_cents"]
            # reversals cross quarters: a date filter and the signed sum both matter
            assert con.execute("SELECT COUNT(*) FROM postings WHERE kind = 'reversal'").fetchone()[0] >= 6


@pytest.mark.unit
def test_workbooks_gnumeric_wrote_read_back_with_their_formulas_shared_or_not() -> None:
    typed = next(iter(read_workbook((DATA / "budget_variance_typed.gnumeric").read_bytes()).values()))
    assert typed[(4, 0)].value == "東京支社" and typed[(8, 0)].value == "مكتب دبي"
    assert typed[(9, 0)].value == "משרד חיפה" and typed[(3, 0)].value == "Łódź Magazyn"
    assert typed[(1, 3)].formula and typed[(1, 3)].value == "=C2-B2"
    assert evaluate(typed[(9, 3)].value, typed) == pytest.approx(12353.67 - 18888)
    # Gnumeric shares a pasted formula (and identical relative ones): one text, the others by ExprID alone.
    shared = next(iter(read_workbook((DATA / "budget_variance_shared.gnumeric").read_bytes()).values()))
    assert shared[(3, 3)].value == "=C4-B4+0" and shared[(7, 3)].value == "=C8-B8"
    assert evaluate(shared[(3, 3)].value, shared) == pytest.approx(12347.67 - 12222)
    assert references("=$C$4-b4") == {"C4", "B4"} and shift("=C2-$B$2+B$2", 3, 1) == "=D5-$B$2+C$2"
    with pytest.raises(ValueError):
        evaluate("=SUM(C2)-B2", typed)
    with pytest.raises(ValueError):
        evaluate("=A2-B2", typed)  # a text cell
    with pytest.raises(ValueError):
        read_workbook(b"\x1f\x8bnot gzip")
    with pytest.raises(ValueError, match="over"):
        read_workbook(gzip.compress(b" " * (9 << 20)))  # a bomb stops at the cap
    plain = gzip.decompress((DATA / "budget_variance_typed.gnumeric").read_bytes())  # saved uncompressed
    assert next(iter(read_workbook(plain).values()))[(4, 0)].value == "東京支社"


def workbook(rows: list[tuple[str, Any, Any, Any]]) -> bytes:
    """The template with data rows (name, budget, actual, variance: a number or "=..." text) from row 2."""
    xml = gzip.decompress(TEMPLATE).decode()
    cells = []
    for index, row in enumerate(rows, start=1):
        for col, value in enumerate(row):
            if isinstance(value, str) and value.startswith("="):
                cells.append(f'<gnm:Cell Row="{index}" Col="{col}" ExprID="{index}">{escape(value)}</gnm:Cell>')
            elif isinstance(value, str):
                cells.append(f'<gnm:Cell Row="{index}" Col="{col}" ValueType="60">{escape(value)}</gnm:Cell>')
            elif value is not None:
                cells.append(f'<gnm:Cell Row="{index}" Col="{col}" ValueType="40">{value}</gnm:Cell>')
    return gzip.compress(xml.replace("</gnm:Cells>", "".join(cells) + "</gnm:Cells>", 1).encode(), mtime=0)


class FakeProbe:
    """The reads the clauses make, over a dict of files."""

    def __init__(self, files: Mapping[str, bytes]) -> None:
        self.files = dict(files)

    def read_bytes(self, path: str, max_bytes: int = 0) -> bytes | None:
        return self.files.get(path)

    def read_text(self, path: str) -> str | None:
        data = self.files.get(path)
        return None if data is None else data.decode()

    def sha256(self, path: str) -> str | None:
        data = self.files.get(path)
        return None if data is None else hashlib.sha256(data).hexdigest()


def _good_rows(truth: Mapping[str, Any]) -> list[tuple[str, Any, Any, Any]]:
    return [(r["name"], r["budget"], r["actual_cents"] / 100, f"=C{i}-B{i}") for i, r in enumerate(truth["rows"], 2)]


def _memo(book: bytes, truth: Mapping[str, Any]) -> bytes:
    lines = [f"workbook sha256 {hashlib.sha256(book).hexdigest()}"]
    lines += [f"{name}: {cents / 100:.2f}" for name, cents in bv.over_budget(truth)]
    return ("\n".join(lines) + "\n").encode()


def _scores(files: Mapping[str, bytes], truth: Mapping[str, Any]) -> dict[str, str]:
    probe = FakeProbe(files)
    return {clause.name: clause.check(probe, truth).outcome.value for clause in bv.TASK.clauses}


@pytest.mark.unit
def test_the_clauses_pass_the_right_workbook_and_memo_and_fail_each_shortcut() -> None:
    truth = _truth(3)
    book = workbook(_good_rows(truth))
    good = _scores({bv.WORKBOOK: book, bv.MEMO: _memo(book, truth)}, truth)
    assert set(good.values()) == {"satisfied"}, good
    # the untouched template (a do-nothing agent), and no memo
    nothing = _scores({bv.WORKBOOK: TEMPLATE}, truth)
    assert nothing["workbook_saved"] == "failed" and nothing["memo"] == "failed"
    # constants instead of formulas, and a formula over another row
    rows = _good_rows(truth)
    constants = [(n, b, a, round(a - b, 2)) for n, b, a, _f in rows]
    assert _scores({bv.WORKBOOK: workbook(constants)}, truth)["variance_formulas"] == "failed"
    shifted = [(n, b, a, "=C2-B2") for n, b, a, _f in rows]
    assert _scores({bv.WORKBOOK: workbook(shifted)}, truth)["variance_formulas"] != "satisfied"
    # the closed centre added, a name without its accents, budgets off the wrong tab
    closed = next(c for c in _world(3)["centres"] if c["status"] == "closed")
    assert _scores({bv.WORKBOOK: workbook([*rows, (closed["name"], 1, 2, "=C99-B99")])}, truth)[
        "centre_names"] != "satisfied"
    stripped = [(rows[0][0].encode("ascii", "ignore").decode() or "x", *rows[0][1:]), *rows[1:]]
    assert _scores({bv.WORKBOOK: workbook(stripped)}, truth)["centre_names"] != "satisfied"
    wrong = [(n, b + 100, a, f) for n, b, a, f in rows]
    assert _scores({bv.WORKBOOK: workbook(wrong)}, truth)["budgets"] == "failed"
    cents_off = [(n, b, round(a + 0.01, 2), f) for n, b, a, f in rows]
    assert _scores({bv.WORKBOOK: workbook(cents_off)}, truth)["actuals"] == "failed"
    # a memo of another workbook's bytes, a memo in the wrong order, a memo listing every centre
    other = workbook([*rows[1:], rows[0]])
    assert _scores({bv.WORKBOOK: book, bv.MEMO: _memo(other, truth)}, truth)["memo"] == "failed"
    memo = _memo(book, truth).decode().splitlines()
    if len(memo) > 2:
        flipped = "\n".join([memo[0], *reversed(memo[1:])]).encode()
        assert _scores({bv.WORKBOOK: book, bv.MEMO: flipped}, truth)["memo"] == "failed"
    everyone = "\n".join([memo[0], *(f"{r['name']}: {r['variance_cents'] / 100:.2f}" for r in truth["rows"])])
    assert _scores({bv.WORKBOOK: book, bv.MEMO: everyone.encode()}, truth)["memo"] == "failed"


@pytest.mark.unit
def test_the_oracles_memo_program_writes_what_the_memo_clause_expects(tmp_path: Path) -> None:
    truth = _truth(5)
    book = workbook(_good_rows(truth))
    digest = hashlib.sha256(book).hexdigest()
    csv_rows = ["Cost centre,Budget (EUR),Actual (EUR),Variance (EUR)"]
    csv_rows += [f'"{r["name"]}",{r["budget"]},{r["actual_cents"] / 100},{r["variance_cents"] / 100}'
                 for r in truth["rows"]]
    source = bv.MEMO_PY.format(csv=str(tmp_path / "variance.csv"), memo=str(tmp_path / "memo.txt"), digest=digest)
    (tmp_path / "variance.csv").write_text("\n".join(csv_rows) + "\n", encoding="utf-8")
    subprocess.run([sys.executable, "-c", source], check=True, capture_output=True)
    files = {bv.WORKBOOK: book, bv.MEMO: (tmp_path / "memo.txt").read_bytes()}
    assert bv.check_memo(FakeProbe(files), truth).outcome.value == "satisfied"


@pytest.mark.unit
def test_the_task_withholds_what_only_the_screen_and_the_ledger_show() -> None:
    assert "rows" in bv.TASK.withheld
    assert {d.channel for d in bv.TASK.deliverables} == {"gui", "cli"}
    assert "sqlite3" in bv.TASK.apps and "gnumeric" in bv.TASK.apps and bv.TASK.profile == "full"
    assert bv.MEMO_PY.count(os.path.basename(bv.WORKBOOK)) == 0  # the python step never names the workbook


@pytest.mark.xvfb
def test_the_board_pack_shows_budgets_only_after_a_tab_and_a_bar_click(
        xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> None:
    world = _world(4)
    chart = bb.chart(world)
    bars = len(chart["codes"])
    shutil.copy(Path(bv.__file__).parent / "fixtures" / "board_pack.py", tmp_path / "board_pack.py")
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "board_pack.py")], stdin=subprocess.PIPE,
                            env={**os.environ, "DISPLAY": xvfb.display})
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({**chart, "layout": bb.layout(bars)}).encode())
        proc.stdin.close()
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == bv.TITLE), None), 20,
                          what="the Board pack mapped")
        targets = bb.screen_targets(window.geometry, bars)
        wait_for(lambda: bb.shown_title(client.screenshot().image, targets) == "BOARD PACK", 20, what="the cover")
        cover = client.screenshot().image
        assert bb.read_code(cover, targets, 0) == "" and bb.read_value(cover, targets, 0) is None
        quarter = world["quarter"]
        client.click(*targets["tabs"][quarter - 1])
        wait_for(lambda: bb.shown_title(client.screenshot().image, targets) == bb.title_text(quarter), 20,
                 what="the quarter's chart")
        shown = client.screenshot().image
        assert [bb.read_code(shown, targets, i) for i in range(bars)] == chart["codes"]
        assert all(bb.read_value(shown, targets, i) is None for i in range(bars))  # budgets need a bar click
        for bar in range(bars):
            client.click(*targets["bars"][bar])
            found = wait_for(lambda b=bar: bb.read_value(client.screenshot().image, targets, b), 20,
                             what=f"bar {bar}'s budget")
            assert found == chart["budgets"][quarter - 1][bar]
        other = quarter % 4  # another tab: its chart, without the labels clicked on this one
        client.click(*targets["tabs"][other])
        wait_for(lambda: bb.shown_title(client.screenshot().image, targets) == bb.title_text(other + 1), 20,
                 what="another quarter")
        assert bb.read_value(client.screenshot().image, targets, 0) is None
    finally:
        proc.kill()
        proc.wait()



class Simulation:
    """The oracle's world without a VM: the Board pack's screen drawn from its layout (lit cells on white), the
    ledger's answers from SQLite, and the rows the oracle types collected as Gnumeric would store them."""

    def __init__(self, world: Mapping[str, Any], board: list[int]) -> None:
        self.world, self.chart = world, bb.chart(world)
        self.targets = bb.screen_targets(board, len(self.chart["codes"]))
        self.db = database_bytes(bb.SCHEMA, bb.ledger_rows(world))
        self.quarter: int | None = None
        self.clicked: set[int] = set()
        self.typed: list[str] = []
        self.terminal = ""

    def screen(self) -> np.ndarray:
        image = np.full((720, 1280, 3), 255, np.uint8)
        title = bb.title_text(self.quarter) if self.quarter else "BOARD PACK"
        labels = [(title, self.targets["title"], bb.TITLE_SCALE)]
        if self.quarter:
            budgets = self.chart["budgets"][self.quarter - 1]
            labels += [(code, self.targets["codes"][i], bb.LABEL_SCALE) for i, code in enumerate(self.chart["codes"])]
            labels += [(f"{budgets[i]:05d}", self.targets["values"][i], bb.LABEL_SCALE) for i in self.clicked]
        for text, (x, y), scale in labels:
            for x0, y0, x1, y1 in pixel_font.layout_text(text, x, y, scale):
                image[y0:y1, x0:x1] = pixel_font.INK
        return image

    def act(self, action: Mapping[str, Any]) -> None:
        if action["kind"] == "click":
            point = [action["x"], action["y"]]
            if point in self.targets["tabs"]:
                self.quarter, self.clicked = self.targets["tabs"].index(point) + 1, set()
            elif point in self.targets["bars"]:
                self.clicked.add(self.targets["bars"].index(point))
        elif action["kind"] == "shell" and "sqlite3" in action["command"]:
            sql = shlex.split(action["command"])[-1]
            with opened(self.db) as con:
                self.terminal = "\n".join("|".join(str(v) for v in row) for row in con.execute(sql))
        elif action["kind"] == "type":
            self.typed.append(action["text"])


@pytest.mark.unit
def test_the_oracle_reads_the_chart_asks_the_ledger_and_types_every_open_centres_row() -> None:
    world = _world(6)
    board, sheet = [0, 64, 700, 560], [722, 64, 552, 640]
    sim = Simulation(world, board)
    truth = {"quarter": world["quarter"], "bars": len(sim.chart["codes"]), "sheet": sheet,
             "targets": sim.targets, "first": bb.quarter_bounds(world["quarter"])[0],
             "last": bb.quarter_bounds(world["quarter"])[1]}
    ctx = OracleContext(params={}, truth=truth, screen=(1280, 720))
    ctx.obs = {"screen": sim.screen(), "terminal": ""}
    actions = []
    for action in bv.oracle(ctx):
        assert isinstance(action, dict)
        actions.append(action)
        if action["kind"] in ("python", "done"):
            break
        sim.act(action)
        ctx.obs = {"screen": sim.screen(), "terminal": sim.terminal}
    rows = [text.split("\t") for text in sim.typed]
    want = [[r["name"], str(r["budget"]), f"{r['actual_cents'] / 100:.2f}", f"=C{i}-B{i}\n"]
            for i, r in enumerate(world["rows"], 2)]
    assert rows == want
    kinds = ["gui" if a["kind"] in ("click", "type", "key") else "cli" for a in actions if a["kind"] != "wait"]
    switches = sum(1 for a, b in itertools.pairwise(kinds) if a != b)
    assert len(actions) + 1 >= 30 and switches >= 8
