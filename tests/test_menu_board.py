"""Weave-Design-5 without a VM: seeds, the database's answers through the oracle's SQL, the board's SVG, the
clauses on good and broken boards and print files, the page finder, and the real Menu proof read back off Xvfb."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from PIL import Image

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes, opened
from weavegym.envs.tasks.design import menu_board as task
from weavegym.envs.tasks.design import menu_books as mb
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay


def _world(seed: int) -> dict[str, Any]:
    return mb.world(np.random.default_rng(seed))


def _truth(w: Mapping[str, Any]) -> dict[str, Any]:
    return {"changes": w["changes"], "original": mb.board_texts(w)}


def _saved(w: Mapping[str, Any], texts: Mapping[str, str] | None = None, extra: str = "") -> bytes:
    """The board as Inkscape would save it: its texts (``texts`` override), a namedview, maybe an extra text."""
    svg = mb.board_svg({**w, "dishes": w["dishes"]})
    root = ET.fromstring(svg.encode())
    for element in root.iter():
        if element.tag.endswith("}text") and texts and element.get("id") in texts:
            element.text = texts[element.get("id")]
    root.set("{http://www.inkscape.org/namespaces/inkscape}version", "1.2.2 (b0a8486541, 2022-12-01)")
    body = ET.tostring(root, encoding="unicode")
    return re.sub(r"</(\w+:)?svg>$", lambda m: f"{extra}{m[0]}", body).encode()


class FakeProbe:
    """The probe calls the clauses make, over in-memory files (owner and mtime per path)."""

    def __init__(self, files: Mapping[str, bytes], owners: Mapping[str, str] | None = None,
                 mtimes: Mapping[str, float] | None = None) -> None:
        self.files, self.owners, self.mtimes = dict(files), dict(owners or {}), dict(mtimes or {})

    def xml(self, path: str) -> ET.Element | None:
        try:
            return ET.fromstring(self.files[path]) if path in self.files else None
        except ET.ParseError:
            return None

    def stat(self, path: str) -> Any:
        if path not in self.files:
            return None
        return SimpleNamespace(owner=self.owners.get(path, "user"), mtime=self.mtimes.get(path, 1.0))

    def image(self, path: str) -> np.ndarray | None:
        return np.asarray(Image.open(io.BytesIO(self.files[path])).convert("RGB")) if path in self.files else None

    def json(self, path: str) -> Any:
        return json.loads(self.files[path]) if path in self.files else None

    def sha256(self, path: str) -> str | None:
        return hashlib.sha256(self.files[path]).hexdigest() if path in self.files else None


def _png(color: tuple[int, int, int] = mb.BG, size: tuple[int, int] = (mb.WIDTH, mb.HEIGHT)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


def _good(w: Mapping[str, Any]) -> FakeProbe:
    board = _saved(w, mb.expected_texts(w))
    png = _png()
    order = {"board_sha256": hashlib.sha256(board).hexdigest(), "png_sha256": hashlib.sha256(png).hexdigest(),
             "changes": [{"slot": s, "field": f, "text": t} for s, f, t in w["changes"]]}
    return FakeProbe({task.BOARD: board, task.PNG: png, task.ORDER: json.dumps(order, ensure_ascii=False).encode()},
                     mtimes={task.BOARD: 10.0, task.PNG: 20.0})


def _outcomes(probe: FakeProbe, truth: Mapping[str, Any]) -> list[str]:
    return [clause.check(probe, truth).outcome.value for clause in task.TASK.clauses]


@pytest.mark.unit
def test_seeds_vary_and_every_proof_marks_each_section_and_both_sold_out_cases() -> None:
    worlds = [_world(seed) for seed in range(20)]
    assert len({tuple(w["changes"]) for w in worlds}) == 20
    for w in worlds:
        assert all(w["marks"][i] for i in range(3))
        kinds = [k for marks in w["marks"] for _, k in marks]
        assert sorted(kinds) == ["NEW NAME", "NEW NAME", "PRICE", "PRICE", "PRICE", "SOLD OUT", "SOLD OUT"]
        texts = [t for _, _, t in w["changes"]]
        assert mb.SOLD_OUT_WORD in texts and len(w["changes"]) == 8  # one stand-in (two texts), one sold-out word
        assert any(any(ord(c) > 0x3000 for c in t) or any(0x370 <= ord(c) < 0x400 for c in t) for t in texts) or \
            any(any(ord(c) > 0x7F for c in t) for t in texts)
        original = mb.board_texts(w)
        assert all(original[f"{f}-{s}"] != t for s, f, t in w["changes"])  # every mark changes its text
        for line in [mb.proof_lines(m) for m in w["marks"]]:
            assert all(not pixel_font.unsupported(text) and len(text) <= mb.LINE_CHARS for text in line)


@pytest.mark.unit
def test_the_oracles_query_gives_each_marks_figures_from_the_database() -> None:
    for seed in range(10):
        w = _world(seed)
        with opened(database_bytes(mb.SCHEMA, mb.db_rows(w))) as con:
            for marks in w["marks"]:
                for slot, kind in marks:
                    (_tag, found, _code, price, rename, stand_in, stand_price), = con.execute(task.slot_sql(slot))
                    assert found == slot
                    mine = {(s, f): t for s, f, t in w["changes"] if s == slot}
                    if kind == "PRICE":
                        assert mine == {(slot, "price"): mb.euros(price)}
                    elif kind == "NEW NAME":
                        assert mine == {(slot, "name"): rename}
                    elif stand_in:
                        assert mine == {(slot, "name"): stand_in, (slot, "price"): mb.euros(int(stand_price))}
                    else:
                        assert mine == {(slot, "price"): mb.SOLD_OUT_WORD} and not rename


@pytest.mark.unit
def test_price_rule_rounds_up_to_the_step() -> None:
    assert mb.price_cents(100, 150, 10) == 250 and mb.price_cents(101, 150, 10) == 260
    assert mb.price_cents(333, 100, 50) == 700 and mb.euros(705) == "7.05"


@pytest.mark.unit
def test_the_clauses_pass_the_right_files_and_fail_broken_ones() -> None:
    w = _world(3)
    truth = _truth(w)
    good = _good(w)
    assert _outcomes(good, truth) == ["satisfied"] * 4
    spaced = {k: v.replace(" ", "\u00a0") for k, v in mb.expected_texts(w).items()}  # Ctrl+Space's no-break space
    assert task.check_marks(FakeProbe({task.BOARD: _saved(w, spaced)}), truth).outcome.value == "satisfied"
    squeezed = {k: v.replace(" ", "") for k, v in mb.expected_texts(w).items()}
    assert any(" " in t for _, _, t in w["changes"])
    assert task.check_marks(FakeProbe({task.BOARD: _saved(w, squeezed)}), truth).outcome.value != "satisfied"
    untouched = FakeProbe({**good.files, task.BOARD: _saved(w)}, mtimes=good.mtimes)
    assert task.check_marks(untouched, truth).outcome.value == "failed"
    # one mark typed without its accents: partial, never satisfied
    slot, field, _text = next(c for c in w["changes"] if c[2] == mb.SOLD_OUT_WORD)
    wrong = {**mb.expected_texts(w), f"{field}-{slot}": "EPUISE"}
    assert task.check_marks(FakeProbe({task.BOARD: _saved(w, wrong)}), truth).outcome.value == "partial"
    # an unmarked price changed too, or a stray text added
    other = next(k for k in truth["original"] if k.startswith("price-") and
                 k not in {f"{f}-{s}" for s, f, _ in w["changes"]})
    assert task.check_rest_intact(FakeProbe({task.BOARD: _saved(w, {**mb.expected_texts(w), other: "0.00"})}),
                                  truth).outcome.value == "failed"
    stray = '<text xmlns="http://www.w3.org/2000/svg" id="text99">oops</text>'
    assert task.check_rest_intact(FakeProbe({task.BOARD: _saved(w, mb.expected_texts(w), stray)}),
                                  truth).outcome.value == "failed"
    # the board written by the workspace account, or never saved by Inkscape
    assert task.check_rest_intact(FakeProbe(good.files, owners={task.BOARD: "workspace"}),
                                  truth).outcome.value == "failed"
    plain = mb.board_svg({**w, "dishes": w["dishes"]}).encode()
    assert task.check_rest_intact(FakeProbe({task.BOARD: plain}), truth).outcome.value == "failed"
    # a PNG rendered before the save, of the wrong size, or not of the board
    assert task.check_png(FakeProbe(good.files, mtimes={task.BOARD: 30.0, task.PNG: 20.0}),
                          truth).outcome.value == "failed"
    assert task.check_png(FakeProbe({**good.files, task.PNG: _png(size=(510, 320))}, mtimes=good.mtimes),
                          truth).outcome.value == "failed"
    assert task.check_png(FakeProbe({**good.files, task.PNG: _png((255, 255, 255))}, mtimes=good.mtimes),
                          truth).outcome.value == "failed"
    # an order whose checksum names another board, or that misses a change
    order = json.loads(good.files[task.ORDER])
    stale = {**order, "board_sha256": hashlib.sha256(_saved(w)).hexdigest()}
    assert task.check_order(FakeProbe({**good.files, task.ORDER: json.dumps(stale).encode()}),
                            truth).outcome.value == "failed"
    short = {**order, "changes": order["changes"][1:]}
    assert task.check_order(FakeProbe({**good.files, task.ORDER: json.dumps(short).encode()}),
                            truth).outcome.value == "failed"


@pytest.mark.unit
def test_the_page_and_its_texts_are_found_on_a_drawn_screen() -> None:
    w = _world(5)
    screen = np.full((720, 1280, 3), 230, dtype=np.uint8)
    page = (420, 150, 816, 512)  # the board at 0.8
    screen[page[1]:page[1] + page[3], page[0]:page[0] + page[2]] = mb.BG
    for slot, field, _text in w["changes"]:  # a cream blot where each text's glyphs are
        x, y, anchor = mb.element_at(slot, field)
        sx, sy = mb.to_screen(page, x - 30 if anchor == "end" else x, y - 14)
        screen[sy:sy + 10, sx:sx + 24] = mb.INK_RGB
    assert mb.find_page(screen) == page
    for slot, field, _text in w["changes"]:
        point = mb.ink_point(screen, page, slot, field)
        assert point is not None and tuple(screen[point[1], point[0]]) == mb.INK_RGB
    assert mb.find_page(screen[:, :900]) is None  # cut off by the window: not the board's aspect


@pytest.mark.unit
def test_the_task_withholds_the_changes_and_declares_both_channels() -> None:
    assert "changes" in task.TASK.withheld
    assert {d.channel for d in task.TASK.deliverables} == {"gui", "cli"}
    assert task.TASK.profile == "full" and "inkscape" in task.TASK.apps and "sqlite3" in task.TASK.apps


@pytest.mark.xvfb
def test_the_menu_proof_shows_marks_only_after_a_tab_click(xvfb: XvfbDisplay, client: GuestClient,
                                                           tmp_path: Path) -> None:
    w = _world(2)
    fixture = Path(task.__file__).parent / "fixtures" / "menu_proof.py"
    shutil.copy(fixture, tmp_path / "menu_proof.py")
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "menu_proof.py")], stdin=subprocess.PIPE,
                            env={**os.environ, "DISPLAY": xvfb.display})
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"sections": list(mb.SECTIONS), "layout": mb.proof_layout(),
                                     "lines": [mb.proof_lines(m) for m in w["marks"]]}).encode())
        proc.stdin.close()
        window = wait_for(lambda: next((x for x in client.list_windows()[0] if x.title == "Menu proof"), None), 20,
                          what="the Menu proof mapped")
        targets = mb.proof_targets(window.geometry)
        wait_for(lambda: mb.shown_title(client.screenshot().image, targets) == "MENU PROOF", 20, what="the cover")
        assert mb.read_marks(client.screenshot().image, targets) == []
        for index, section in enumerate(mb.SECTIONS):
            client.click(*targets["tabs"][index])
            wait_for(lambda s=section: mb.shown_title(client.screenshot().image, targets) == s, 20,
                     what=f"the {section} marks")
            assert mb.read_marks(client.screenshot().image, targets) == w["marks"][index]
    finally:
        proc.kill()
        proc.wait()
