"""Weave-Design-6 (office network) without a VM: the seed's network and survey, the diagram Dia opens and how a
saved one is read, every clause on right and wrong finals (with a diagram the real Dia 0.97 saved and the SVG its
command line exported), the oracle's read-back run by the real bash and python3, Dia's view and toolbox found in a
screenshot (unit), and the real Site Survey on Xvfb through the real agent (xvfb): the stops read back off the
screen, the refusals of a wrong code and of a confirm before Begin, and the change number at the end."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from pixel_apps import pixel_app

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.design import netmap as nm
from weavegym.envs.tasks.design import office_network as on
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

DATA = Path(__file__).parent / "data"
FIXTURES = Path(on.__file__).parent / "fixtures"
# tests/data/office_network_saved.dia: the seed-0 diagram after Dia 0.97.3 on Xvfb applied the oracle's edits and
# saved it (Ctrl+S); office_network_saved.svg: `dia -n -e` of that file.
SAVED = (DATA / "office_network_saved.dia").read_bytes()
SAVED_SVG = (DATA / "office_network_saved.svg").read_bytes()
W0 = nm.world(np.random.default_rng(0))


def _truth(w: dict[str, Any]) -> dict[str, Any]:
    return {"world": w, "expected": nm.expected(w), "change": w["change"]}


def _record(dia: bytes, svg: bytes, change: str) -> bytes:
    return json.dumps({"change": change, "diagram_sha256": hashlib.sha256(dia).hexdigest(),
                       "export_sha256": hashlib.sha256(svg).hexdigest()}).encode()


def _files(dia: bytes = SAVED, svg: bytes = SAVED_SVG, change: str = W0["change"]) -> dict[str, bytes]:
    return {on.DIAGRAM: dia, on.SVG: svg, on.RECORD: _record(dia, svg, change)}


def _outcomes(files: dict[str, bytes], w: dict[str, Any] = W0) -> dict[str, Outcome]:
    probe, truth = FilesProbe(files), _truth(w)
    return {c.name: c.check(probe, truth).outcome for c in on.TASK.clauses}


def _saved_like(w: dict[str, Any], labels: list[str], pairs: list[tuple[str, str]], saved: bool = True) -> bytes:
    """A diagram as Dia saves it (ids renumbered, diagramdata first) with these labels and lines."""
    ids: dict[str, str] = {}
    for i, label in enumerate(labels):
        ids.setdefault(label, f"O{i}")
    objects = [f'<dia:object type="Flowchart - Box" version="0" id="O{i}"><dia:attribute name="text">'
               f'<dia:composite type="text"><dia:attribute name="string"><dia:string>#{label}#</dia:string>'
               '</dia:attribute></dia:composite></dia:attribute></dia:object>' for i, label in enumerate(labels)]
    objects += [f'<dia:object type="Standard - Line" version="0" id="L{i}"><dia:connections>'
                f'<dia:connection handle="0" to="{ids.get(a, "X")}" connection="16"/>'
                f'<dia:connection handle="1" to="{ids.get(b, "X")}" connection="16"/></dia:connections></dia:object>'
                for i, (a, b) in enumerate(pairs)]
    data = "<dia:diagramdata/>" if saved else ""
    return (f'<?xml version="1.0"?><dia:diagram xmlns:dia="{nm.DIA_NS}">{data}<dia:layer name="Background">'
            + "".join(objects) + "</dia:layer></dia:diagram>").encode()


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(8))
def test_every_seed_has_three_stops_the_font_can_draw_and_a_consistent_inventory(seed: int) -> None:
    w = nm.world(np.random.default_rng(seed))
    assert sorted(s["kind"] for s in w["stops"]) == sorted(nm.STOP_KINDS)
    notes = nm.survey_input(w)
    for stop in notes["stops"]:
        assert len(stop["lines"]) == 3 and all(len(line) <= nm.LINE_CHARS for line in stop["lines"])
        assert not pixel_font.unsupported("".join(stop["lines"]))
    by_tag = {a["tag"]: a for a in w["assets"]}
    assert len(by_tag) == len(w["assets"]) and len({a["hostname"] for a in w["assets"]}) == len(w["assets"])
    labels = [label for label, _, _ in nm.boxes(w)]
    assert w["relabel"]["old"] in labels and w["remove"]["name"] in labels
    assert w["relabel"]["old"] != w["remove"]["name"]
    assert w["install"]["name"] not in labels and w["relabel"]["new"] not in labels
    assert w["install"]["switch"] in w["switches"] and by_tag[next(
        s["tag"] for s in w["stops"] if s["kind"] == "INSTALLED")]["status"] == "staged"
    exp = nm.expected(w)
    assert len(exp["labels"]) == len(labels) and len(exp["edges"]) == len(nm.edges(w))


@pytest.mark.unit
def test_seeds_differ_and_the_outdated_diagram_reads_back_as_generated() -> None:
    assert nm.world(np.random.default_rng(1))["stops"] != W0["stops"]
    d = nm.parse_dia(nm.dia_xml(W0).encode())
    assert sorted(d["labels"].values()) == sorted(label for label, _, _ in nm.boxes(W0))
    assert sorted(d["edges"]) == sorted(tuple(sorted(e)) for e in nm.edges(W0))
    assert d["loose"] == 0 and d["others"] == [] and d["saved"] is False
    gz = nm.parse_dia(gzip.compress(SAVED))  # Dia may save compressed
    assert gz == nm.parse_dia(SAVED) and gz["saved"] is True
    with pytest.raises(ValueError):
        nm.parse_dia(b"<svg/>")
    with pytest.raises(ValueError):
        nm.parse_dia(gzip.compress(b"x" * (nm.MAX_DIA_BYTES + 10)))


@pytest.mark.unit
def test_the_real_dias_save_and_export_satisfy_every_clause() -> None:
    assert set(_outcomes(_files()).values()) == {Outcome.SATISFIED}


@pytest.mark.unit
def test_an_untouched_diagram_or_a_wrong_record_fails() -> None:
    untouched = nm.dia_xml(W0).encode()
    got = _outcomes(_files(dia=untouched))
    assert got["relabeled"] == got["removed"] == got["installed"] == got["rest_intact"] == Outcome.FAILED
    assert got["svg_export"] == Outcome.FAILED  # the SVG no longer matches the diagram
    got = _outcomes(_files(change="CHG-00000"))
    assert got["change_record"] == Outcome.FAILED and got["svg_export"] == Outcome.SATISFIED
    files = _files()
    files[on.RECORD] = b"not json"
    assert _outcomes(files)["change_record"] == Outcome.FAILED
    files = _files()
    del files[on.SVG]
    got = _outcomes(files)
    assert got["svg_export"] == got["change_record"] == Outcome.FAILED
    assert _outcomes({})["relabeled"] == Outcome.FAILED


@pytest.mark.unit
def test_each_stop_and_the_rest_are_checked_on_their_own() -> None:
    exp = nm.expected(W0)
    labels, pairs = list(exp["labels"]), [tuple(e) for e in exp["edges"]]
    r, rm, ins = W0["relabel"], W0["remove"], W0["install"]

    def outcomes(labels: list[str], pairs: list[tuple[str, str]], saved: bool = True) -> dict[str, Outcome]:
        dia = _saved_like(W0, labels, pairs, saved)
        return _outcomes({on.DIAGRAM: dia})

    assert outcomes(labels, pairs)["rest_intact"] == Outcome.SATISFIED
    assert outcomes(labels, pairs, saved=False)["rest_intact"] == Outcome.FAILED  # not Dia's save
    old = [r["old"] if x == r["new"] else x for x in labels]
    got = outcomes(old, [tuple(r["old"] if v == r["new"] else v for v in p) for p in pairs])
    assert got["relabeled"] == Outcome.FAILED and got["removed"] == got["installed"] == Outcome.SATISFIED
    got = outcomes([*labels, rm["name"]], [*pairs, (rm["switch"], rm["name"])])
    assert got["removed"] == Outcome.FAILED and got["relabeled"] == Outcome.SATISFIED
    got = outcomes(labels, [*pairs, (rm["switch"], "gone")])  # a line left loose
    assert got["removed"] == Outcome.FAILED
    got = outcomes(labels, [p for p in pairs if ins["name"] not in p])
    assert got["installed"] == Outcome.FAILED and got["rest_intact"] == Outcome.FAILED
    got = outcomes([*labels, ins["name"]], pairs)  # the new box twice
    assert got["installed"] == Outcome.FAILED
    other = next(x for x in labels if x not in (r["new"], ins["name"]) and x not in W0["switches"] + [W0["core"]])
    got = outcomes([x + "X" if x == other else x for x in labels], pairs)
    assert got["rest_intact"] == Outcome.FAILED and got["relabeled"] == Outcome.SATISFIED


@pytest.mark.unit
def test_the_oracles_read_back_runs_in_the_real_bash_and_python(tmp_path: Path) -> None:
    if shutil.which("zcat") is None:
        pytest.skip("zcat is missing")
    path = tmp_path / "office.dia"
    path.write_bytes(gzip.compress(SAVED))
    out = subprocess.run(["bash", "-c", on.READ_BACK.format(dia=str(path), before="")], capture_output=True,
                         text=True, timeout=60).stdout
    d = nm.parse_dia(SAVED)

    ctx = SimpleNamespace(obs={"terminal": out})
    digest, labels, pairs, loose = on._shown(ctx)  # type: ignore[arg-type]
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert sorted(labels) == sorted(d["labels"].values()) and sorted(pairs) == sorted(d["edges"]) and loose == 0
    for stop in W0["stops"]:
        kind = stop["kind"]
        name = {"RELABEL": W0["relabel"]["old"], "REMOVED": W0["remove"]["name"]}.get(kind, W0["install"]["name"])
        other = {"RELABEL": W0["relabel"]["new"], "INSTALLED": W0["install"]["switch"]}.get(kind, "")
        switch = W0["install"]["switch"] if kind == "INSTALLED" else W0["remove"]["switch"]
        assert on._took(kind, name, other, switch, labels, pairs)
        assert not on._took(kind, name, other, switch, [*labels, name] if kind != "INSTALLED" else [], [])


@pytest.mark.unit
def test_dias_view_and_toolbox_are_found_in_a_drawn_screen() -> None:
    image = np.full((720, 1280, 3), 235, np.uint8)
    image[184:690, 627:1253] = 255
    view = [626.5, 184.0, 20.0]

    def rect(x0: int, y0: int, x1: int, y1: int) -> None:  # 2 px edges centred on the box's outline, as Dia draws
        image[y0 - 1:y0 + 1, x0 - 1:x1 + 1] = 0
        image[y1 - 1:y1 + 1, x0 - 1:x1 + 1] = 0
        image[y0 - 1:y1 + 1, x0 - 1:x0 + 1] = 0
        image[y0 - 1:y1 + 1, x1 - 1:x1 + 1] = 0

    for _label, x, y in nm.boxes(W0):
        (x0, y0), (x1, y1) = nm.to_screen(view, x, y), nm.to_screen(view, x + nm.BOX_W, y + nm.BOX_H)
        rect(x0, y0, x1, y1)
        image[y0 - 2:y0 + 3, x0 + 10:x0 + 15] = (40, 40, 200)  # a connection mark over the edge
    rect(459, 318, 477, 336)
    assert nm.find_view(image, [598, 140, 648, 516]) == pytest.approx(view, abs=1.0)
    assert nm.find_box_tool(image, [448, 220, 160, 376]) == (468, 327)
    assert nm.find_view(np.full((720, 1280, 3), 255, np.uint8), [598, 140, 648, 516]) is None



VIEW = [630.5, 193.0, 20.0]  # Dia's view at 100 % in the placed window (as setup finds it)


def _canvas() -> np.ndarray:
    return np.full((720, 1280, 3), 255, np.uint8)


@pytest.mark.unit
def test_dias_text_editing_and_selection_are_told_from_the_screen() -> None:
    corner = nm.box_of(W0, W0["relabel"]["old"])
    area = nm.box_area(VIEW, corner)
    plain = _canvas()
    x, y = nm.text_point(VIEW, corner)
    plain[y - 5:y + 4, x - 30:x + 30] = 0  # the label's glyphs, black
    assert not nm.editing(plain, area, VIEW[2]) and nm.selected(plain, area) == 0
    edited = plain.copy()
    edited[y - 8:y + 7, x - 34:x - 30] = nm.HIGHLIGHT  # the highlight behind the text being edited
    assert nm.editing(edited, area, VIEW[2]) and not nm.editing(edited, nm.box_area(VIEW, (0.4, 1.0)), VIEW[2])
    at = nm.NEW_AT[0]
    fresh, where = _canvas(), nm.new_box_area(VIEW, at)
    bx, by = nm.new_box_point(VIEW, at)
    fresh[by - 7:by + 8, bx:bx + 2] = 128  # an empty new box's grey cursor
    assert nm.editing(fresh, where, VIEW[2])
    short = _canvas()
    short[by - 4:by + 4, bx:bx + 2] = 128  # a capital letter's stroke is shorter than the cursor
    assert not nm.editing(short, where, VIEW[2])
    chosen = plain.copy()
    chosen[y - 3:y + 3, x + 40:x + 46] = (0, 255, 0)
    chosen[y + 10:y + 16, x:x + 6] = (255, 0, 0)  # a line's end connected to a box: red
    assert nm.selected(chosen, area) == 72
    assert nm.tool_point((471, 335), nm.TEXT_TOOL) == (510, 154)


def _ctx(screen: np.ndarray) -> Any:
    truth = {"view": VIEW, "box_tool": [471, 335], "canvas": [598, 140, 648, 516],
             "boxes": [[label, x, y] for label, x, y in nm.boxes(W0)]}
    return SimpleNamespace(obs={"screen": screen, "terminal": ""}, truth=truth)


@pytest.mark.unit
def test_the_oracle_types_a_label_only_while_dia_shows_the_text_edited() -> None:
    r = W0["relabel"]
    corner = nm.box_of(W0, r["old"])
    idle = _ctx(_canvas())
    acts = list(on._relabel(idle, corner, 12, r["new"]))
    assert not [a for a in acts if a["kind"] == "type" or a.get("keys") in ("BackSpace", "End")]
    assert sum(a == on._click(nm.tool_point([471, 335], nm.TEXT_TOOL)) for a in acts) == 2  # tried three times:
    assert sum(a.get("keys") == "F2" for a in acts) == 1  # with the tool's button, its shortcut, the button
    editing = _canvas()
    x, y = nm.text_point(VIEW, corner)
    editing[y - 8:y + 7, x - 30:x + 30] = nm.HIGHLIGHT
    acts = list(on._relabel(_ctx(editing), corner, 12, r["new"]))
    kinds = [a.get("keys", a["kind"]) for a in acts]
    start = kinds.index("End")
    assert kinds[start + 1:start + 13] == ["BackSpace"] * 12 and acts[start + 13] == {"kind": "type", "text": r["new"]}
    chosen = _canvas()
    deleting = list(on._delete(_ctx(chosen), (700, 400)))
    assert all(a.get("keys") != "Delete" for a in deleting)  # nothing shows selected: no Delete


@pytest.mark.unit
def test_a_retry_mends_what_a_lost_step_left() -> None:
    r, ins = W0["relabel"], W0["install"]
    known = {label for label, _, _ in nm.boxes(W0)}
    editing = _canvas()
    editing[:, :, 2][200:650, 630:1250] = 179  # everywhere looks edited: follow the actions the oracle picks

    def first_texts(kind: str, name: str, other: str, switch: str, back: Any, known: set[str]) -> list[Any]:
        return [a for a in on._apply(_ctx(editing), kind, name, other, switch, back, known)
                if a["kind"] in ("type", "drag") or a.get("keys") == "BackSpace"]

    half = [x if x != r["old"] else r["old"][:3] + r["new"] for x in known]  # the old label half erased
    acts = first_texts("RELABEL", r["old"], r["new"], r["switch"], (half, [], 0), (known - {r["old"]}) | {r["new"]})
    assert acts[-1] == {"kind": "type", "text": r["new"]}
    assert len(acts) - 1 >= len(r["old"][:3] + r["new"])  # enough BackSpaces for the whole mangled label
    assert first_texts("RELABEL", r["old"], r["new"], r["switch"], ([*known - {r["old"]}, r["new"]], [], 0),
                       known | {r["new"]}) == []  # it took: nothing again
    done = known | {ins["name"]}
    unlabelled = [*known, ""]  # the new box is there without its label: it is labelled, not added twice
    acts = first_texts("INSTALLED", ins["name"], ins["switch"], ins["switch"], (unlabelled, [], 0), done)
    assert acts[-2:-1] == [{"kind": "type", "text": ins["name"]}] and acts[-1]["kind"] == "drag"
    pair = tuple(sorted((ins["switch"], ins["name"])))
    acts = list(on._apply(_ctx(editing), "INSTALLED", ins["name"], ins["switch"], ins["switch"],
                          ([*known, ins["name"]], [pair], 1), done))
    assert not [a for a in acts if a["kind"] in ("type", "drag")]  # a loose line is only deleted...
    assert on._took("INSTALLED", ins["name"], ins["switch"], ins["switch"], [*known, ins["name"]], [pair], 0)
    assert not on._took("INSTALLED", ins["name"], ins["switch"], ins["switch"], [*known, ins["name"]], [pair], 1)

# ---- the real survey on a real X server, through the real guest agent -----------------------------------------

@pytest.mark.xvfb
def test_the_survey_shows_stops_as_pixels_one_after_another(xvfb: XvfbDisplay, client: GuestClient,
                                                            tmp_path: Path) -> None:
    notes = nm.survey_input(W0)

    def lines() -> list[str]:
        return nm.survey_lines(client.screenshot().image, at)

    def status() -> str:
        return nm.survey_status(client.screenshot().image, at)

    def press(box: list[int] | tuple[int, ...]) -> None:
        client.click(*nm.survey_point(at, box))

    with pixel_app(FIXTURES / "site_survey.py", notes, tmp_path, xvfb.display, stdout=False):
        at = wait_for(lambda: pixel_font.find_drawn(client.screenshot().image, "SITE SURVEY", (0, 0), nm.TITLE_AT,
                                                    nm.TITLE_SCALE), 20, what="the survey drawn")
        assert not lines()[0].startswith("STOP")  # nothing before Begin
        press(nm.CONFIRM)
        wait_for(lambda: status() == "PRESS BEGIN FIRST", 20, what="the refusal before Begin")
        press(nm.BEGIN)
        wait_for(lambda: lines() == notes["stops"][0]["lines"], 20, what="stop 1")
        press(nm.ENTRY)
        client.type_text("WRONG" + "x" * 300 + "\n")
        wait_for(lambda: status() == "WRONG CODE, TRY AGAIN", 20, what="the refusal of a wrong code")
        assert lines() == notes["stops"][0]["lines"]
        press(nm.BEGIN)  # a second Begin changes nothing
        for number, stop in enumerate(notes["stops"]):
            wait_for(lambda s=stop: lines() == s["lines"], 20, what=f"stop {number + 1}")
            press(nm.ENTRY)
            client.type_text(stop["code"].lower() + "\n")
        wait_for(lambda: lines()[:2] == ["SURVEY COMPLETE", f"CHANGE {W0['change']}"], 20, what="the change number")
