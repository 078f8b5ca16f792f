"""Weave-Design-6: the office network diagram brought up to date in Dia from a site survey and the inventory.

What changed in the office is split between the channels. The surveyor's notes exist only as pixels: a Tk "Site
Survey" window (the desktop account's, fed from a root-only file that setup deletes once it is up) shows one stop
at a time in dot-matrix text, each naming an asset only by its tag (relabelled as a new name, removed from the
rack, or installed and cabled to another tag). What a tag is exists only for the shell: the inventory database
(in a folder only the workspace account may open) maps tags to the hostnames the diagram shows and holds each
asset's audit code, and the survey shows the next stop only after the current one is confirmed with that code.
So per stop: read it (GUI) -> look the tags up (CLI) -> edit the diagram in Dia and confirm the stop (GUI). The
diagram lives in ~/diagrams, which only the desktop account can write (2755): only Dia's save changes it. The
records are the shell's: an SVG that Dia's command line exports from the saved diagram and a change record with
the change number the survey shows at the end and both files' SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.design import netmap as nm
from weavegym.evaluators import Clause, Probe, Verdict

APP_DIR = "/usr/local/share/sitesurvey"
SURVEY_IN = f"{PRIVATE_DIR}/sitesurvey.json"
DB_DIR = "/srv/netdb"
DB = f"{DB_DIR}/inventory.db"
DIAGRAMS = f"{HOME}/diagrams"
DIAGRAM = f"{DIAGRAMS}/office.dia"
RECORDS = f"{HOME}/records"
SVG = f"{RECORDS}/office.svg"
RECORD = f"{RECORDS}/change.json"
SURVEY_AT = (0, 40)
DIA_AT, DIA_SIZE = (448, 40), (828, 676)
WAIT_TRIES = 15
EDIT_TRIES = 8  # waits (1 s) for Dia to show a click's effect (text editing, a selection) before a retry


def setup(ctx: SetupContext) -> Prepared:
    w = nm.world(ctx.rng)
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, DB_DIR])
    ctx.write_file(DB, database_bytes(nm.SCHEMA, nm.db_rows(w)), owner=WORKSPACE_USER, mode=0o600)
    # ~/diagrams: the desktop account's alone to write (its Dia saves there); the shell reads via the group.
    ctx.run(["install", "-d", "-m", "2755", "-o", DESKTOP_USER, "-g", SHARED_GROUP, DIAGRAMS])
    ctx.write_file(DIAGRAM, nm.dia_xml(w), mode=0o644)
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, RECORDS])
    # Labels are typed key by key: a stalled guest X server must not autorepeat a key.
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)
    survey = _open_survey(ctx, w)
    ctx.launch_gui(f"cd {DIAGRAMS} && {{as_user}} dia {DIAGRAM}", name="dia")
    dia = ctx.wait_window(r"^\*?office\.dia .*Dia", timeout=400)
    dia_box = ctx.place_window(dia.id, DIA_AT, size=DIA_SIZE)
    survey_box = ctx.place_window(survey, SURVEY_AT)
    if survey_box[0] + survey_box[2] > dia_box[0]:
        raise TaskError(f"{ctx.task_id} setup: the Site Survey {survey_box} and Dia {dia_box} overlap")
    try:
        origin = wait_for(lambda: pixel_font.find_drawn(ctx.client.screenshot().image, "SITE SURVEY", survey_box[:2],
                                                        nm.TITLE_AT, nm.TITLE_SCALE), 60,
                          what="the Site Survey's title in place", max_poll=1.0)
        canvas = [dia_box[0] + 150, dia_box[1] + 100, dia_box[2] - 180, dia_box[3] - 160]
        view = wait_for(lambda: _settled_view(ctx, canvas), 300, what="the diagram drawn in Dia", max_poll=2.0)
        tools = [dia_box[0], dia_box[1] + 180, 160, dia_box[3] - 300]
        tool = wait_for(lambda: nm.find_box_tool(ctx.client.screenshot().image, tools), 60,
                        what="the Flowchart sheet's box in Dia's toolbox", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    return Prepared(params={},
                    truth={"survey": list(origin), "view": view, "box_tool": list(tool), "canvas": canvas,
                           "boxes": [[label, x, y] for label, x, y in nm.boxes(w)],
                           "world": w, "expected": nm.expected(w),
                           "change": w["change"]})


_last_view: list[Any] = [None]


def _settled_view(ctx: SetupContext, canvas: list[int]) -> list[float] | None:
    """Dia's view once two screenshots in a row agree on it (drawn, and the window settled)."""
    now = nm.find_view(ctx.client.screenshot().image, canvas)
    same = now is not None and now == _last_view[0]
    _last_view[0] = now
    return now if same else None


def _open_survey(ctx: SetupContext, w: Mapping[str, Any]) -> int:
    """Start the Site Survey with the notes on its stdin, wait until its cover is drawn, delete the input."""
    ctx.write_file(f"{APP_DIR}/site_survey.py", ctx.fixture(__package__, "fixtures/site_survey.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    ctx.write_file(SURVEY_IN, json.dumps(nm.survey_input(w)), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP_DIR}/site_survey.py < {SURVEY_IN}", name="sitesurvey")
    window = ctx.wait_window("^Site Survey$")
    try:  # mapped is not drawn (TCG); the cover is drawn after the notes were read from stdin
        wait_for(lambda: pixel_font.find_drawn(ctx.client.screenshot().image, "SITE SURVEY", window.geometry[:2],
                                               nm.TITLE_AT, nm.TITLE_SCALE) is not None, 120,
                 what="the Site Survey drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", SURVEY_IN])  # the window has read it: the notes now live only on screen
    return window.id


# -- the checker --------------------------------------------------------------------------------------------


def saved_diagram(probe: Probe) -> tuple[dict[str, Any] | None, str]:
    data = probe.read_bytes(DIAGRAM)
    if data is None:
        return None, f"{DIAGRAM} is missing"
    try:
        return nm.parse_dia(data), ""
    except ValueError as exc:
        return None, f"{DIAGRAM}: {exc}"


def _labels(diagram: Mapping[str, Any]) -> list[str]:
    return list(diagram["labels"].values())


def check_relabel(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    diagram, why = saved_diagram(probe)
    if diagram is None:
        return Verdict.failed(why)
    r = truth["world"]["relabel"]
    labels = _labels(diagram)
    edge = tuple(sorted((r["new"], r["switch"]))) in diagram["edges"]
    ok = labels.count(r["new"]) == 1 and r["old"] not in labels and edge
    return Verdict.check(ok, f"box {r['new']!r}: {labels.count(r['new'])} (expected 1); old label {r['old']!r} "
                             f"still there: {r['old'] in labels}; linked to {r['switch']}: {edge}")


def check_removed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    diagram, why = saved_diagram(probe)
    if diagram is None:
        return Verdict.failed(why)
    name = truth["world"]["remove"]["name"]
    lines = [e for e in diagram["edges"] if name in e]
    ok = name not in _labels(diagram) and not lines and diagram["loose"] == 0
    return Verdict.check(ok, f"box {name!r} still there: {name in _labels(diagram)}; lines to it: {len(lines)}; "
                             f"lines with a loose end: {diagram['loose']} (expected none)")


def check_installed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    diagram, why = saved_diagram(probe)
    if diagram is None:
        return Verdict.failed(why)
    i = truth["world"]["install"]
    count = _labels(diagram).count(i["name"])
    edge = diagram["edges"].count(tuple(sorted((i["name"], i["switch"]))))
    return Verdict.check(count == 1 and edge == 1,
                         f"box {i['name']!r}: {count} (expected 1); lines to {i['switch']}: {edge} (expected 1)")


def check_rest_intact(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    """Exactly the expected boxes and lines (nothing else changed, added or lost), and the file is Dia's save."""
    diagram, why = saved_diagram(probe)
    if diagram is None:
        return Verdict.failed(why)
    want = truth["expected"]
    lost, extra = nm.counter_diff(_labels(diagram), want["labels"])
    lost_edges, extra_edges = nm.counter_diff([" - ".join(e) for e in diagram["edges"]],
                                              [" - ".join(e) for e in want["edges"]])
    ok = not (lost or extra or lost_edges or extra_edges or diagram["others"]) and diagram["saved"]
    return Verdict.check(ok, f"boxes missing {lost[:3] or 'none'}, unexpected {extra[:3] or 'none'}; lines missing "
                             f"{lost_edges[:3] or 'none'}, unexpected {extra_edges[:3] or 'none'}; other objects "
                             f"{diagram['others'][:3] or 'none'}; saved by Dia: {diagram['saved']}")


def check_export(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    diagram, why = saved_diagram(probe)
    data = probe.read_bytes(SVG)
    if diagram is None or data is None:
        return Verdict.failed(why or f"{SVG} is missing")
    try:
        texts = nm.svg_labels(data)
    except ValueError as exc:
        return Verdict.failed(f"{SVG}: {exc}")
    lost, extra = nm.counter_diff(texts, _labels(diagram))
    return Verdict.check(bool(texts) and not lost and not extra,
                         f"the SVG's texts against the saved diagram's labels: missing {lost[:3] or 'none'}, "
                         f"unexpected {extra[:3] or 'none'} ({len(texts)} texts)")


def check_record(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    data = probe.read_bytes(RECORD)
    try:
        record = json.loads(data.decode("utf-8")) if data is not None else None
    except (UnicodeDecodeError, ValueError):
        record = None
    if not isinstance(record, dict):
        return Verdict.failed(f"{RECORD} is missing or not a JSON object")
    dia, svg = probe.read_bytes(DIAGRAM), probe.read_bytes(SVG)
    change = str(record.get("change", "")).strip().upper() == truth["change"]
    dia_ok = dia is not None and str(record.get("diagram_sha256", "")).lower() == hashlib.sha256(dia).hexdigest()
    svg_ok = svg is not None and str(record.get("export_sha256", "")).lower() == hashlib.sha256(svg).hexdigest()
    return Verdict.check(change and dia_ok and svg_ok,
                         f"change {record.get('change')!r} is the survey's: {change}; diagram_sha256 matches the saved "
                         f"diagram: {dia_ok}; export_sha256 matches the SVG: {svg_ok}")


# -- the oracle ---------------------------------------------------------------------------------------------


def _screen(ctx: OracleContext) -> np.ndarray:
    assert ctx.obs is not None
    return ctx.obs["screen"]


def _terminal(ctx: OracleContext) -> str:
    return ctx.obs.get("terminal", "").replace("\r", "") if ctx.obs else ""


def _wait_lines(ctx: OracleContext, ready: Any) -> Iterator[ActionLike]:
    """Wait steps until ``ready(lines)`` holds for the survey's lines: a redraw may trail under TCG."""
    for _ in range(WAIT_TRIES):
        if ready(nm.survey_lines(_screen(ctx), ctx.truth["survey"])):
            return
        yield {"kind": "wait", "seconds": 1}


def _settled(ctx: OracleContext) -> Iterator[ActionLike]:
    """Wait steps until two observations in a row show the same canvas: Dia has caught up with the input."""
    x, y, width, height = ctx.truth["canvas"]
    previous = None
    for _ in range(WAIT_TRIES):
        now = _screen(ctx)[y:y + height, x:x + width]
        if previous is not None and np.array_equal(now, previous):
            return
        previous = now.copy()
        yield {"kind": "wait", "seconds": 1}


def _click(point: tuple[int, int]) -> dict[str, Any]:
    return {"kind": "click", "x": point[0], "y": point[1]}


def _tool(ctx: OracleContext, offset: tuple[int, int]) -> dict[str, Any]:
    """A click on one of Dia's toolbox buttons: a tool picked by the mouse, whatever has the keyboard focus."""
    return _click(nm.tool_point(ctx.truth["box_tool"], offset))


def _until(ctx: OracleContext, test: Any, tries: int = EDIT_TRIES) -> Iterator[ActionLike]:
    """Wait steps until ``test(screen)`` holds; returns whether it did."""
    for _ in range(tries):
        if test(_screen(ctx)):
            return True
        yield {"kind": "wait", "seconds": 1}
    return bool(test(_screen(ctx)))


def _selection_area(ctx: OracleContext) -> list[int]:
    x, y, width, height = ctx.truth["canvas"]
    return [x + 32, y + 50, width - 32, height - 50]  # the diagram's canvas without the rulers and the toolbox


def _focus(ctx: OracleContext) -> Iterator[ActionLike]:
    """Escape (out of any text being edited), the Modify tool, a click on a blank part of the diagram (Dia gets the
    keyboard, nothing is selected) and Escape again; then wait until no selection handle shows."""
    yield {"kind": "key", "keys": "Escape"}
    yield _tool(ctx, nm.MODIFY_TOOL)
    yield _click(nm.to_screen(ctx.truth["view"], *nm.BLANK_AT))
    yield {"kind": "key", "keys": "Escape"}
    yield from _until(ctx, lambda screen: nm.selected(screen, _selection_area(ctx)) == 0, 4)


def _edit_text(ctx: OracleContext, point: tuple[int, int], area: list[int], erase: int,
               text: str) -> Iterator[ActionLike]:
    """The Edit Text tool, a click on a text, and only once the screen shows Dia editing it (its highlight or
    cursor in ``area``): the cursor to the end, ``erase`` characters erased, ``text`` typed. A click that did not
    start the editing is retried; no key is typed while Dia is not editing (it would take the keys as shortcuts).
    Returns whether the text was typed."""
    scale = ctx.truth["view"][2]
    for attempt in range(3):
        yield from _settled(ctx)
        yield from _focus(ctx)
        # the tool's button; on the second try its shortcut (F2) instead, after the click that gave Dia the keyboard
        yield {"kind": "key", "keys": "F2"} if attempt == 1 else _tool(ctx, nm.TEXT_TOOL)
        yield _click(point)
        if (yield from _until(ctx, lambda screen: nm.editing(screen, area, scale))):
            yield {"kind": "key", "keys": "End"}
            for _ in range(erase):
                yield {"kind": "key", "keys": "BackSpace"}
            yield {"kind": "type", "text": text}
            yield {"kind": "key", "keys": "Escape"}
            return True
    return False


def _relabel(ctx: OracleContext, corner: tuple[float, float], erase: int, new: str) -> Iterator[ActionLike]:
    view = ctx.truth["view"]
    yield from _edit_text(ctx, nm.text_point(view, corner), nm.box_area(view, corner), erase, new)


def _delete(ctx: OracleContext, point: tuple[int, int]) -> Iterator[ActionLike]:
    """The Modify tool, a click that selects the object under ``point`` and, once its handles show, Delete."""
    area = _selection_area(ctx)
    for _ in range(3):
        yield from _settled(ctx)
        yield from _focus(ctx)
        yield _click(point)
        if (yield from _until(ctx, lambda screen: nm.selected(screen, area) > 0)):
            yield {"kind": "key", "keys": "Delete"}
            yield from _until(ctx, lambda screen: nm.selected(screen, area) == 0)
            return


def _add_box(ctx: OracleContext, at: tuple[float, float], label: str) -> Iterator[ActionLike]:
    """The Flowchart sheet's box and a click on the free area: Dia creates the box and edits its (empty) text; the
    label is typed once the screen shows that. If it does not, the new box's text is edited with the Edit Text tool
    (or, with no box made, the box is left for the read-back to show missing)."""
    view = ctx.truth["view"]
    area = nm.new_box_area(view, at)
    yield from _settled(ctx)
    yield from _focus(ctx)
    yield _click(tuple(ctx.truth["box_tool"]))
    yield _click(nm.to_screen(view, *at))
    if (yield from _until(ctx, lambda screen: nm.editing(screen, area, view[2]))):
        yield {"kind": "type", "text": label}
        yield {"kind": "key", "keys": "Escape"}
        return
    yield {"kind": "key", "keys": "Escape"}
    yield from _settled(ctx)
    if nm.selected(_screen(ctx), area) > 0 or _drawn(_screen(ctx), area):
        yield from _edit_text(ctx, nm.new_box_point(view, at), area, len(label) + 4, label)


def _drawn(screen: np.ndarray, area: list[int]) -> bool:
    """Whether something dark (a box's outline) is drawn in ``area`` of the canvas (empty there before)."""
    x, y, width, height = area
    return bool((screen[y:y + height, x:x + width, :3].max(axis=2) < 70).sum() > 40)


def _add_line(ctx: OracleContext, start: tuple[float, float], end: tuple[float, float]) -> Iterator[ActionLike]:
    """The Line tool, dragged from one box's centre to the other's: Dia connects both ends to the boxes."""
    yield from _settled(ctx)
    yield from _focus(ctx)
    yield _tool(ctx, nm.LINE_TOOL)
    a, b = nm.to_screen(ctx.truth["view"], *start), nm.to_screen(ctx.truth["view"], *end)
    yield {"kind": "drag", "x": a[0], "y": a[1], "to_x": b[0], "to_y": b[1]}
    yield from _settled(ctx)


def _shown(ctx: OracleContext) -> tuple[str, list[str], list[tuple[str, str]], int]:
    """The read-back as the terminal shows it: the saved file's checksum, its box labels, the label pairs its lines
    connect and how many lines have an end not connected to a box."""
    terminal = _terminal(ctx)
    digest = re.findall(r"^SAVED ([0-9a-f]{64})$", terminal, re.M)
    labels = re.findall(r"^BOX\|(.*)$", terminal, re.M)
    pairs = [tuple(sorted(p)) for p in re.findall(r"^EDGE\|(.*?)\|(.*)$", terminal, re.M)]
    loose = re.findall(r"^LOOSE\|(\d+)$", terminal, re.M)
    return (digest[-1] if digest else ""), labels, pairs, int(loose[-1]) if loose else 0  # type: ignore[return-value]


def _stop(lines: list[str], tags: list[int], assets: Mapping[int, tuple[str, str]]) -> tuple[str, str, str]:
    """What a stop asks, from its lines and the inventory's rows: (kind, hostname, the new label or the switch)."""
    name = assets[tags[0]][0]
    relabel = re.search(r"RELABELED AS (\S+)", lines[2])
    if relabel:
        return "RELABEL", name, relabel[1]
    if "REMOVED" in lines[2]:
        return "REMOVED", name, ""
    return "INSTALLED", name, assets[tags[1]][0] if len(tags) > 1 and tags[1] in assets else ""


def _took(kind: str, name: str, other: str, switch: str, labels: list[str], pairs: list[tuple[str, str]],
          loose: int = 0) -> bool:
    """Whether the saved diagram (its labels, line pairs and loose lines as read back) shows the stop's change."""
    if kind == "RELABEL":
        return labels.count(other) == 1 and name not in labels
    if kind == "REMOVED":
        return name not in labels and not any(name in p for p in pairs) and loose == 0
    return labels.count(name) == 1 and pairs.count(tuple(sorted((switch, name)))) == 1 and loose == 0


def _apply(ctx: OracleContext, kind: str, name: str, other: str, switch: str, back: tuple[list[str], list[Any],
           int] | None, known: set[str]) -> Iterator[ActionLike]:
    """The stop's edits in Dia; on a retry (``back``: the labels, pairs and loose lines read back) only what did not
    take, mending what a lost step left: a label half typed is typed again, a box added without its label gets it,
    a line left loose is deleted and drawn again. ``known``: every label the diagram should have so far."""
    view, corners = ctx.truth["view"], {label: (x, y) for label, x, y in ctx.truth["boxes"]}
    labels, pairs, loose = back if back is not None else (None, [], 0)
    stray = [label for label in labels or [] if label not in known]
    if kind == "RELABEL" and (labels is None or other not in labels):
        longest = max([len(name), *(len(label) for label in stray)])
        yield from _relabel(ctx, corners[name], longest + len(other) + 4, other)
    elif kind == "REMOVED":
        if labels is None or tuple(sorted((switch, name))) in pairs or loose:
            yield from _delete(ctx, nm.line_point(view, corners[switch], corners[name]))
        if labels is None or name in labels:
            yield from _delete(ctx, nm.body_point(view, corners[name]))
    elif kind == "INSTALLED":
        switches = [label for label, _x, y in ctx.truth["boxes"] if y == nm.SWITCH_AT[0][1]]
        at = nm.NEW_AT[switches.index(switch)]
        start = nm.centre(*corners[switch])
        if labels is None:
            yield from _add_box(ctx, at, name)
        elif name not in labels and stray:  # the box is there with a wrong or empty label
            yield from _edit_text(ctx, nm.new_box_point(view, at), nm.new_box_area(view, at),
                                  max(len(label) for label in stray) + 4, name)
        elif name not in labels:
            yield from _add_box(ctx, at, name)
        if labels is not None and loose:  # a line not connected at both ends: delete it, near its new box's end
            yield from _delete(ctx, nm.to_screen(view, start[0] + 0.8 * (at[0] - start[0]),
                                                 start[1] + 0.8 * (at[1] - start[1])))
        if labels is None or tuple(sorted((switch, name))) not in pairs:
            yield from _add_line(ctx, start, at)


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per stop: read it on the survey (GUI); look its tags up in the inventory (CLI); edit the diagram in Dia and
    save (GUI); read the saved diagram back in the shell and redo what did not take (CLI/GUI); confirm the stop with
    the audit code (GUI). Then the SVG export and the change record from the saved diagram (CLI)."""
    survey, truth = ctx.truth["survey"], ctx.truth
    corners = {label: (x, y) for label, x, y in truth["boxes"]}
    switches = [label for label, _x, y in truth["boxes"] if y == nm.SWITCH_AT[0][1]]
    switch_of = {label: min(switches, key=lambda s, x=x: abs(corners[s][0] - x))
                 for label, x, y in truth["boxes"] if y == nm.DEVICE_Y}
    known = set(corners)
    yield _click(nm.survey_point(survey, nm.BEGIN))
    saved = ""
    total = 3
    for number in range(1, total + 1):
        yield from _wait_lines(ctx, lambda lines, n=number: lines[0] == f"STOP {n} OF {total}")
        lines = nm.survey_lines(_screen(ctx), survey)
        tags = [int(t) for t in re.findall(r"TAG (\d+)", " ".join(lines[1:]))]
        yield {"kind": "shell", "command": f"sqlite3 -separator '|' {DB} "
               + shlex.quote("SELECT 'ASSET', tag, hostname, audit_code FROM assets WHERE tag IN "
                             f"({', '.join(str(t) for t in tags) or '0'});")}
        assets = {int(t): (name, code) for t, name, code in
                  re.findall(r"^ASSET\|(\d+)\|(.*?)\|(\w+)\s*$", _terminal(ctx), re.M)}
        if not tags or tags[0] not in assets:
            continue
        kind, name, other = _stop(lines, tags, assets)
        switch = other if kind == "INSTALLED" else switch_of.get(name, "")
        if kind == "RELABEL":
            known = (known - {name}) | {other}
        elif kind == "REMOVED":
            known = known - {name}
        else:
            known = known | {name}
        back: tuple[list[str], list[Any], int] | None = None
        for _attempt in range(3):
            yield from _apply(ctx, kind, name, other, switch, back, known)
            yield from _focus(ctx)
            yield {"kind": "key", "keys": "ctrl+s"}
            yield {"kind": "shell", "timeout": 200, "command": READ_BACK.format(dia=shlex.quote(DIAGRAM), before=saved)}
            saved, labels, pairs, loose = _shown(ctx)
            back = labels, pairs, loose
            if _took(kind, name, other, switch, labels, pairs, loose):
                break
        yield _click(nm.survey_point(survey, nm.ENTRY))
        yield {"kind": "type", "text": assets[tags[0]][1]}
        yield {"kind": "key", "keys": "Return"}
        yield from _wait_lines(ctx, lambda lines, n=number: not lines[0].startswith(f"STOP {n} "))
    yield from _wait_lines(ctx, lambda lines: lines[0] == "SURVEY COMPLETE")
    found = re.search(r"CHANGE (CHG-\d+)", " ".join(nm.survey_lines(_screen(ctx), survey)))
    change = found[1] if found else ""
    yield {"kind": "shell", "timeout": 200,
           "command": f"HOME=/tmp/dia-cli dia -n -e {SVG} {shlex.quote(DIAGRAM)} >/dev/null 2>&1; ls -l {SVG}; "
                      f"sha256sum {shlex.quote(DIAGRAM)} {SVG}"}
    yield {"kind": "python", "code": RECORD_PY.format(dia=DIAGRAM, svg=SVG, record=RECORD, change=change)}
    yield {"kind": "done"}


# Waits until Dia's save is on disk (its diagramdata, and a checksum other than the last save's), then prints the
# checksum, every box's label and every connected line's pair of labels as the saved file has them.
READ_BACK = ("timeout 150 sh -c 'until zcat -f {dia} | grep -q diagramdata && "
             "[ \"$(sha256sum < {dia} | cut -c1-64)\" != \"{before}\" ]; do sleep 0.5; done'; "
             "echo SAVED $(sha256sum < {dia} | cut -c1-64); "
             "zcat -f {dia} | python3 -c 'import sys, xml.etree.ElementTree as E\n"
             "D = \"{{http://www.lysator.liu.se/~alla/dia/}}\"\n"
             "names, ends = {{}}, []\n"
             "for o in E.parse(sys.stdin).getroot().iter(D + \"object\"):\n"
             " c = o.find(D + \"connections\")\n"
             " s = o.find(\".//\" + D + \"string\")\n"
             " if c is not None or \"Line\" in o.get(\"type\", \"\"):\n"
             "  ends.append([x.get(\"to\") for x in (list(c) if c is not None else [])])\n"
             " elif s is not None: names[o.get(\"id\")] = (s.text or \"\").strip(\"#\")\n"
             "for n in names.values(): print(\"BOX|\" + n)\n"
             "for e in ends:\n"
             " if len(e) == 2 and all(x in names for x in e): print(\"EDGE|\" + names[e[0]] + \"|\" + names[e[1]])\n"
             "print(\"LOOSE|%d\" % sum(1 for e in ends if len(e) != 2 or not all(x in names for x in e)))'")


RECORD_PY = """import hashlib, json
digest = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
record = {{"change": {change!r}, "diagram_sha256": digest({dia!r}), "export_sha256": digest({svg!r})}}
with open({record!r}, "w", encoding="utf-8") as f:
    json.dump(record, f, indent=1)
print(open({record!r}, encoding="utf-8").read())
"""

TASK = Task(
    id="Weave-Design-6",
    title="Bring the office network diagram up to date in Dia from the site survey and the inventory",
    instruction=(
        "The office network diagram " + DIAGRAM + " is open in Dia (only Dia can save in ~/diagrams): boxes labelled "
        "with hostnames, joined by lines. The 'Site Survey' window holds the surveyor's notes: press Begin to see the "
        "first stop. A stop names assets only by their inventory tag: 'TAG <t> RELABELED AS <name>' (that asset's box "
        "must now read <name>), 'TAG <t> REMOVED FROM THE RACK' (delete that asset's box and its line), or 'TAG <t> "
        "INSTALLED, CABLED TO TAG <u>' (add a Flowchart box labelled with t's hostname and a line connecting it to "
        "u's box). The inventory " + DB + " (SQLite, for your shell) has the table assets (tag, hostname, kind, "
        "status, audit_code). Confirm each stop by typing the asset's audit_code (tag t's) into the survey and "
        "pressing Confirm: only then the next stop shows, and after the last one the change number. Change nothing "
        "else in the diagram; every line must connect two boxes. Save it with Ctrl+S (same file). Then, from your "
        "shell, export the saved diagram with Dia's command line as SVG to " + SVG + " and write " + RECORD + ": a "
        "JSON object with change (the change number, e.g. CHG-12345), diagram_sha256 (the SHA-256 of the saved "
        ".dia file) and export_sha256 (the SVG's). Then finish with done."),
    channels=Channels(
        gui="read the survey's stops, edit the diagram in Dia (rename a box, delete a box and its line, add a box and "
            "a connected line) and save it; confirm each stop in the survey with its audit code",
        cli="look up each stop's tags (hostnames, audit codes) in the inventory; export the saved diagram with Dia's "
            "command line and write the change record with the change number and both checksums",
        why_both="the survey's notes exist only as pixels and the diagram can only be saved by Dia, while the tags' "
                 "hostnames and audit codes are in a database only the shell can open and the records belong in the "
                 "shell's own folder, made from the saved diagram"),
    setup=setup,
    clauses=(
        Clause("relabeled", "the relabelled asset's box reads its new name and keeps its line", check_relabel,
               critical=True),
        Clause("removed", "the removed asset's box and line are gone, no line is left loose", check_removed,
               critical=True),
        Clause("installed", "the new asset's box is there, connected to its switch's box", check_installed,
               critical=True),
        Clause("rest_intact", "every other box and line is unchanged and the file is Dia's save", check_rest_intact,
               critical=True, cap=0.5),
        Clause("svg_export", "the SVG export carries exactly the saved diagram's labels", check_export,
               critical=True),
        Clause("change_record", "the change record names the survey's change number and both files' SHA-256",
               check_record, critical=True),
    ),
    deliverables=(
        Deliverable(DIAGRAM, "gui", description="~/diagrams/office.dia (saved by Dia)"),
        Deliverable(SVG, "cli", description="~/records/office.svg (exported by the shell)"),
        Deliverable(RECORD, "cli", description="~/records/change.json"),
    ),
    withheld=("world", "expected", "change"),
    oracle=oracle,
    profile="full",
    apps=("dia", "Site Survey (python3-tk)", "sqlite3", "dia CLI"),
    max_steps=360,  # the oracle takes about 100 steps; more with waits for redraws and retries of lost steps
    time_budget_s=3000.0,
)
