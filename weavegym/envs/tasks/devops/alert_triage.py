"""Weave-DevOps-7: triage the night's three intrusion alerts between an Alert Board, Wireshark and tshark.

Three apps, the data flowing alert by alert between the channels. The night's packet capture (built per seed in
Python: DNS, HTTP, SSH and TLS-ish background traffic of many hosts, three incidents and a decoy of each) is open
in Wireshark on the desktop and readable by the shell. The Alert Board (a Tk app, the desktop account's) shows one
alert at a time, after a click, as dot-matrix pixels only: its sensor, its time window and its signature (a port
scan, an SSH brute force, DNS tunnelling, an HTTP POST of a passwd file), never the attacker. Per alert the agent
reads the alert off the board (GUI), finds the attacker and counts its packets with tshark (CLI), applies the
display filter in Wireshark and exports the displayed packets with File > Export Specified Packets into
~/evidence (a folder only the desktop account may write; GUI), checks the export from the shell (CLI), and closes
the alert at the board with the attacker's address and packet count (GUI): the board hashes the export into its
root-only record and shows a random case code as pixels only, then offers the next alert. At the end the shell
writes the incident report into ~/reports (only the workspace account may write there): per alert the attacker,
the packet count, the board's case code and the SHA-256 of the export.

Scoring: every export holds exactly the incident's packets (every packet to or from the attacker, nothing else;
the checker parses pcap and pcapng itself); the board closed every alert with the export as it is now; the report
has the right attacker, count, case code and hash per alert. The seeds vary the incident kinds, addresses, times,
ports and the volume of background traffic; the case codes are drawn in the VM at each close.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from calendar import timegm
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.devops import _alert_capture as cap
from weavegym.envs.tasks.dialogs import FOCUS_RING, focus_ring_shown, ring_colour_hex
from weavegym.envs.tasks.games.sgt_common import SETTLED_PIXELS, changed_box, changed_pixels
from weavegym.envs.tasks.item_records import numbered_records, per_item_verdict
from weavegym.evaluators import Clause, GuiArtifactViaCli, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

COUNT = 3
CAPTURES, EVIDENCE, REPORTS = f"{HOME}/captures", f"{HOME}/evidence", f"{HOME}/reports"
CAPTURE = f"{CAPTURES}/night-2026-12-04.pcap"
REPORT = f"{REPORTS}/incidents.txt"
APP_DIR = "/usr/local/share/alertboard"
APP = f"{APP_DIR}/alert_board.py"
CONF, RECORD = f"{PRIVATE_DIR}/alertboard.json", f"{PRIVATE_DIR}/alertboard-record.jsonl"
TITLE, HEADING, PROMPT = "Alert Board", "NIGHT SHIFT ALERT BOARD", "ATTACKER ADDRESS AND PACKET COUNT:"
SCALE, HEADING_AT, PAD, LINE_STEP = 2, (16, 12), 8, 22
BOARD_AT, BOARD_SIZE = (776, 40), (500, 420)
SHOW, ALERT, PROMPT_AT = (16, 40, 200, 32), (16, 84, 468, 124), (16, 220)
ENTRY, CLOSE = (16, 240, 330, 30), (356, 240, 128, 30)
STATUS, RESULTS = (16, 282, 468, 30), (16, 322, 468, 80)
SHARK_AT, SHARK_SIZE = (0, 40), (766, 640)
SHARK_TITLE = r"^night-2026-12-04\.pcap"
REPORT_LINE = re.compile(r"^\s*(\d+)\s*\|\s*([0-9.]+)\s*\|\s*(\d+)\s*\|\s*([A-Z0-9]{6})\s*\|\s*([0-9a-f]{64})\s*$",
                         re.I)
PREFERENCES = ("# Weave-DevOps-7: no filter completion popups, no questions about unsaved files, file dialogs open in "
               f"the evidence folder\ngui.autocomplete_filter: FALSE\ngui.ask_unsaved: FALSE\n"
               f"gui.fileopen.style: SPECIFIED\ngui.fileopen.dir: {EVIDENCE}\n")


def evidence_path(number: int) -> str:
    return f"{EVIDENCE}/alert-{number}.pcap"


def layout() -> dict[str, Any]:
    """Where the board draws everything; boxes are [x, y, width, height] in the window."""
    return {"title": TITLE, "heading": HEADING, "heading_at": list(HEADING_AT), "prompt": PROMPT,
            "prompt_at": list(PROMPT_AT), "scale": SCALE, "pad": PAD, "line_step": LINE_STEP,
            "size": list(BOARD_SIZE), "at": list(BOARD_AT), "show": list(SHOW), "alert": list(ALERT),
            "entry": list(ENTRY), "close": list(CLOSE), "status": list(STATUS), "results": list(RESULTS),
            "ring": FOCUS_RING, "ring_colour": ring_colour_hex()}


def entry_focused(image: np.ndarray, at: Sequence[int]) -> bool:
    """Whether the board's entry shows its focus ring: the board has the keyboard."""
    x, y, w, h = ENTRY
    return focus_ring_shown(image, (at[0] + x, at[1] + y, w, h))


def board_on_top(image: np.ndarray, at: Sequence[int]) -> bool:
    """Whether the board's heading reads at its place: Wireshark, grown past its place, no longer covers the
    board's left part (where its buttons and entry are)."""
    x, y = at[0] + HEADING_AT[0], at[1] + HEADING_AT[1]
    return pixel_font.read_text(image, x, y, SCALE, len(HEADING)) == HEADING


def alert_lines(alert: Mapping[str, Any]) -> list[str]:
    """The lines the board draws under 'ALERT N OF 3'."""
    return [f"SENSOR: {alert['sensor']}", f"FROM {alert['from']} TO {alert['to']} UTC", "SIGNATURE:",
            alert["signature"]]


def origin(image: np.ndarray, near: tuple[int, int] = BOARD_AT, reach: int = 40) -> tuple[int, int] | None:
    """The board's top-left, found where its heading reads back; None until drawn."""
    return pixel_font.find_drawn(image, HEADING, near, HEADING_AT, SCALE, reach=reach)


# ---- setup -------------------------------------------------------------------------------------------------

def setup(ctx: SetupContext) -> Prepared:
    night = cap.night(ctx.rng)
    ctx.run(["install", "-d", "-m", "0755", "-o", "root", "-g", "root", CAPTURES])
    ctx.write_file(CAPTURE, cap.pcap_bytes(night["frames"]), owner="root")
    # Evidence: the desktop account's alone (0755), so the shell cannot put an export there; reports: the
    # workspace account's alone (2755), so a terminal on the desktop cannot write the report.
    ctx.run(["install", "-d", "-m", "0755", "-o", DESKTOP_USER, "-g", SHARED_GROUP, EVIDENCE])
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, REPORTS])
    ctx.write_file(f"{HOME}/.config/wireshark/preferences", PREFERENCES)
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/alert_board.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    conf = {"alerts": [{"lines": alert_lines(a), "attacker": a["attacker"], "packets": a["packets"]}
                       for a in night["alerts"]],
            "evidence": f"{EVIDENCE}/alert-{{}}.pcap", "layout": layout()}
    ctx.write_file(CONF, json.dumps(conf), owner="root", mode=0o600)
    ctx.launch_gui(f"cd {HOME} && {{as_user}} wireshark -r {CAPTURE}", name="wireshark")
    shark = ctx.place_window(ctx.wait_window(SHARK_TITLE, timeout=400).id, SHARK_AT, SHARK_SIZE)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {CONF} > {RECORD}", name="alertboard")
    board = ctx.place_window(ctx.wait_window(f"^{TITLE}$").id, BOARD_AT)
    if shark[0] + shark[2] > board[0]:
        raise TaskError(f"{ctx.task_id} setup: Wireshark {shark} and the Alert Board {board} overlap")
    try:
        at = wait_for(lambda: origin(ctx.client.screenshot(hide_cursor=True).image, (board[0], board[1])), 120,
                      what="the Alert Board drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", CONF])  # the alerts now live only in the board's memory
    return Prepared(params={},
                    truth={"alerts": night["alerts"], "at": list(at), "shark": list(shark)})


# ---- the checker -------------------------------------------------------------------------------------------

def board_records(probe: Probe) -> dict[int, dict[str, Any]]:
    """{alert: its close record} of the board's root-only record."""
    return numbered_records(probe, RECORD, "alert")


def judge_export(data: bytes | None, alert: Mapping[str, Any], number: int) -> str:
    """'' when the export holds exactly the incident's packets, else what is wrong."""
    if data is None:
        return f"alert {number}: {evidence_path(number)} does not exist"
    try:
        packets = cap.read_packets(data)
    except (ValueError, IndexError) as exc:
        return f"alert {number}: {evidence_path(number)} is no capture file ({exc})"
    got = sorted(cap.frame_key(t, d) for t, d in packets)
    want = alert["keys"]
    if got == want:
        return ""
    extra, missing = len(set(got) - set(want)), len(set(want) - set(got))
    return (f"alert {number}: the export has {len(got)} packets, the incident {len(want)} ({missing} of them "
            f"missing, {extra} not the incident's)")


def check_exports(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return per_item_verdict([judge_export(probe.read_bytes(evidence_path(n)), a, n)
                     for n, a in enumerate(truth["alerts"], 1)],
                    "the export holds exactly the incident's packets")


def check_closed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records, problems = board_records(probe), []
    for number, alert in enumerate(truth["alerts"], 1):
        record = records.get(number)
        data = probe.read_bytes(evidence_path(number))
        if record is None:
            problems.append(f"alert {number} was not closed at the board")
        elif (record.get("attacker"), record.get("packets")) != (alert["attacker"], alert["packets"]):
            problems.append(f"alert {number} was closed with {record.get('attacker')} / {record.get('packets')}")
        elif data is None or hashlib.sha256(data).hexdigest() != record.get("sha256"):
            problems.append(f"alert {number}: the export is not the one the board recorded at the close")
        else:
            problems.append("")
    return per_item_verdict(problems, "closed at the board with the attacker, the count and the export as it is now")


def parse_report(text: str | None) -> tuple[dict[int, tuple[str, int, str, str]], str]:
    """({alert: (attacker, packets, case, sha256)}, problem) of the report's lines."""
    if text is None:
        return {}, f"{REPORT} does not exist"
    rows: dict[int, tuple[str, int, str, str]] = {}
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        found = REPORT_LINE.match(line)
        if found is None:
            return {}, f"{REPORT} line {number} is not 'N | attacker | packets | case | sha256': {line[:80]!r}"
        rows[int(found.group(1))] = (found.group(2), int(found.group(3)), found.group(4).upper(),
                                     found.group(5).lower())
    return rows, "" if rows else f"{REPORT} has no line"


def check_report(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = parse_report(probe.read_text(REPORT))
    if problem:
        return Verdict.failed(problem)
    records, alerts = board_records(probe), truth["alerts"]
    want = list(range(1, len(alerts) + 1))
    problems = [] if sorted(rows) == want else [f"lists alerts {sorted(rows)}, the night has {want}"]
    for number, alert in enumerate(alerts, 1):
        attacker, packets, case, sha = rows.get(number, ("", -1, "", ""))
        data = probe.read_bytes(evidence_path(number))
        want_case = str(records.get(number, {}).get("case") or "")
        if (attacker, packets) != (alert["attacker"], alert["packets"]):
            problems.append(f"alert {number}: {attacker or '(none)'} with {packets} packets is not the incident")
        elif not want_case or case != want_case:
            problems.append(f"alert {number}: case {case!r}, the board's is {want_case or '(none)'!r}")
        elif data is None or sha != hashlib.sha256(data).hexdigest():
            problems.append(f"alert {number}: the SHA-256 is not the export's")
    return Verdict.check(not problems, "; ".join(problems[:4]) if problems else
                         f"every alert with its attacker, count, the board's case code and the export's hash "
                         f"({len(alerts)} lines)")


# ---- the oracle --------------------------------------------------------------------------------------------

TRIES, WAITS, EXPORT_TRIES = 4, 10, 3
# A blank spot at the board's right edge: a click there raises the board over Wireshark, whose window grows past its
# place in the guest once a filter applies (to about 880 px wide) and then hides the board's left part.
RAISE = (BOARD_SIZE[0] - 40, 4, 30, 24)
EXPORT_DOWNS = 7  # File menu items from Open down to Export Specified Packets... (Save is greyed out)
MENU_MIN = (200, 150)  # Wireshark's open File menu (360 x 435; its white over the white packet list is no change)
BLINK_PIXELS = 100  # a text cursor blinking in the filter bar is no redraw
DIALOG_MIN = (400, 200)  # the Export Specified Packets dialog (670 x 610 in the guest, of which 672 x 248 change
# enough over Wireshark's own grey for changed_box)
CONFIRM_MIN = (200, 60)  # the "already exists, replace it?" question
WHITE, DARK = 248, 110  # a text field's white; its text's dark
FIELD_WIDTH = 240  # the dialog's file list and File name field are white runs at least this wide
FILE_LIST_ROWS, FIELD_ROWS, FIELD_GAP = 60, (12, 40), 90  # the list's least height; the field's; at most between
TYPED_PIXELS = 6  # at least this many more dark pixels per typed character (about 15 on screen)


def _frame(ctx: OracleContext) -> np.ndarray:
    assert ctx.obs is not None
    return ctx.obs["screen"]


def _terminal(ctx: OracleContext) -> str:
    return str((ctx.obs or {}).get("terminal", ""))


def _at(ctx: OracleContext, box: tuple[int, int, int, int]) -> dict[str, Any]:
    at = ctx.truth["at"]
    return {"kind": "click", "x": at[0] + box[0] + box[2] // 2, "y": at[1] + box[1] + box[3] // 2}


def read_alert(screen: np.ndarray, at: list[int], number: int) -> dict[str, str] | None:
    """Alert ``number`` read off the board's alert panel; None until it shows whole."""
    x0, y0 = at[0] + ALERT[0] + PAD, at[1] + ALERT[1] + PAD
    lines = [pixel_font.read_text(screen, x0, y0 + i * LINE_STEP, SCALE, 38) for i in range(5)]
    if lines[0] != f"ALERT {number} OF {COUNT}" or lines[3] != "SIGNATURE:":
        return None
    sensor = re.fullmatch(r"SENSOR: (\S+)", lines[1])
    window = re.fullmatch(r"FROM (\d\d:\d\d:\d\d) TO (\d\d:\d\d:\d\d) UTC", lines[2])
    kind = next((k for k, s in cap.SIGNATURES.items() if s == lines[4]), None)
    if sensor is None or window is None or kind is None:
        return None
    return {"sensor": sensor.group(1), "from": window.group(1), "to": window.group(2), "kind": kind}


def read_result(screen: np.ndarray, at: list[int], number: int) -> str:
    return pixel_font.read_text(screen, at[0] + RESULTS[0] + PAD, at[1] + RESULTS[1] + PAD + (number - 1) * LINE_STEP,
                                SCALE, 30)


def _epoch(clock: str) -> int:
    hours, minutes, seconds = (int(p) for p in clock.split(":"))
    return timegm((*cap.DAY, hours, minutes, seconds, 0, 0, 0))


def hunt_command(alert: Mapping[str, str]) -> str:
    """The shell line that names the alert's attacker (the busiest source of the signature in the window) and
    counts every packet to or from it."""
    window = f"frame.time_epoch >= {_epoch(alert['from'])} && frame.time_epoch <= {_epoch(alert['to'])}"
    tail = "sort | uniq -c | sort -rn | head -3"
    per_kind = {
        "scan": (f"{window} && tcp.flags.syn == 1 && tcp.flags.ack == 0", "-e ip.src -e tcp.dstport",
                 f"sort -u | cut -f1 | {tail}"),
        "brute": (f"{window} && tcp.dstport == 22 && tcp.flags.syn == 1 && tcp.flags.ack == 0", "-e ip.src", tail),
        "tunnel": (f"{window} && dns.flags.response == 0", "-e ip.src -e dns.qry.name",
                   f"awk 'length($2) > 40 {{print $1}}' | {tail}"),
        "exfil": (f'{window} && http.request.method == "POST" && frame contains "root:x:0:0"', "-e ip.src", tail),
    }
    where, fields, post = per_kind[alert["kind"]]
    cap_file = CAPTURE.replace(HOME, "~")
    return (f"H=$(tshark -r {cap_file} -Y {shlex.quote(where)} -T fields {fields} 2>/dev/null | {post}); "
            f"echo \"$H\"; A=$(echo \"$H\" | awk 'NR==1 {{print $2}}'); echo \"ATTACKER $A\"; "
            f"echo \"PACKETS $(tshark -r {cap_file} -Y \"ip.addr == $A\" 2>/dev/null | wc -l)\"")


def check_command(number: int) -> str:
    """The shell line that waits for the export and prints its packet count and SHA-256."""
    path = evidence_path(number).replace(HOME, "~")
    return (f"for i in $(seq 60); do [ -s {path} ] && break; sleep 1; done; sleep 2; "
            f"echo \"EXPORTED $(tshark -r {path} 2>/dev/null | wc -l)\"; sha256sum {path}")


def _click_until(ctx: OracleContext, click: ActionLike, shown: Callable[[], bool]) -> Generator[ActionLike, Any, bool]:
    """Click, then wait (bounded) for ``shown`` to hold, clicking again each round; whether it held."""
    for _try in range(TRIES):
        yield click
        for _ in range(WAITS):
            if shown():
                return True
            yield {"kind": "wait", "seconds": 1}
    return False


def _raise(ctx: OracleContext) -> Generator[ActionLike, Any, bool]:
    """Click the board's free right edge until its heading shows whole (bounded); whether it did. Clicks on its
    left part while Wireshark still covers it would land in Wireshark."""
    return (yield from _click_until(ctx, _at(ctx, RAISE), lambda: board_on_top(_frame(ctx), ctx.truth["at"])))


def _focus_entry(ctx: OracleContext) -> Generator[ActionLike, Any, bool]:
    """Click the board's entry until its focus ring shows (bounded); whether it did. Keys sent before the board has
    the keyboard go to Wireshark."""
    return (yield from _click_until(ctx, _at(ctx, ENTRY), lambda: entry_focused(_frame(ctx), ctx.truth["at"])))


def _focus_wireshark(ctx: OracleContext, shark: Sequence[int]) -> Generator[ActionLike, Any, None]:
    """Click Wireshark's packet list and wait (bounded) until the board's focus ring has gone: keys sent before
    would go to the board's entry."""
    click = {"kind": "click", "x": shark[0] + shark[2] // 2, "y": shark[1] + shark[3] // 3}
    yield from _click_until(ctx, click, lambda: not entry_focused(_frame(ctx), ctx.truth["at"]))


def _show(ctx: OracleContext, number: int) -> Generator[ActionLike, Any, dict[str, str] | None]:
    for _try in range(TRIES):
        yield from _raise(ctx)
        yield _at(ctx, SHOW)
        for _ in range(WAITS):
            alert = read_alert(_frame(ctx), ctx.truth["at"], number)
            if alert:
                return alert
            yield {"kind": "wait", "seconds": 2}
    return None


def _settle(ctx: OracleContext, before: np.ndarray, status: list[int], window: list[int]) -> Iterator[ActionLike]:
    """Wait until the ``status`` region changed from ``before`` (the filter applied) and then the whole ``window``
    holds still over two polls (Wireshark done redrawing: a menu opened while it redraws may close again)."""
    x, y, w, h = status
    wx, wy, ww, wh = window
    previous, still = None, 0
    for _ in range(WAITS * 2):
        frame = _frame(ctx)
        moved = previous is None or int(changed_pixels(frame[wy:wy + wh, wx:wx + ww],
                                                       previous[wy:wy + wh, wx:wx + ww]).sum()) > BLINK_PIXELS
        still = 0 if moved else still + 1
        if changed_pixels(frame[y:y + h, x:x + w], before[y:y + h, x:x + w]).any() and still >= 2:
            return
        previous = frame
        yield {"kind": "wait", "seconds": 1}


def _wait_box(ctx: OracleContext, before: np.ndarray, least: tuple[int, int], tries: int = 30
              ) -> Generator[ActionLike, Any, bool]:
    """Wait until a new box at least ``least`` px shows (``changed_box``: Wireshark's grey dialogs over its grey
    window change too few of their pixels for ``dialog_shown``) and holds still; whether it did."""
    previous = None
    for _ in range(tries):
        frame = _frame(ctx)
        box = changed_box(frame, before)
        if (box is not None and previous is not None and box[2] - box[0] >= least[0] and box[3] - box[1] >= least[1]
                and int(changed_pixels(frame, previous).sum()) <= SETTLED_PIXELS):
            return True
        previous = frame
        yield {"kind": "wait", "seconds": 1}
    return False


def _white_runs(frame: np.ndarray, box: tuple[int, int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``box`` (x0, y0, x1, y1): the length and start x of its longest run of white pixels."""
    x0, y0, x1, y1 = box
    white = (frame[y0:y1, x0:x1] >= WHITE).all(axis=2).astype(np.int8)
    edges = np.diff(np.pad(white, ((0, 0), (1, 1))), axis=1)
    lengths, starts = np.zeros(y1 - y0, int), np.zeros(y1 - y0, int)
    for row in range(y1 - y0):
        begin, end = np.nonzero(edges[row] == 1)[0], np.nonzero(edges[row] == -1)[0]
        if len(begin):
            k = int(np.argmax(end - begin))
            lengths[row], starts[row] = end[k] - begin[k], begin[k] + x0
    return lengths, starts


def file_name_field(frame: np.ndarray, before: np.ndarray, right: int) -> tuple[int, int, int, int] | None:
    """The Export Specified Packets dialog's 'File name' field (x, y, width, height) on screen, left of ``right``:
    of the white bands (rows whose longest white run is at least FIELD_WIDTH) in the region that changed since
    ``before``, the short one right below the tallest (the file list). None while no such dialog shows."""
    changed = changed_pixels(frame[:, :right], before[:, :right])
    rows, cols = np.nonzero(changed.any(axis=1))[0], np.nonzero(changed.any(axis=0))[0]
    if len(rows) == 0:
        return None
    box = (int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1)
    lengths, starts = _white_runs(frame, box)
    bands, row = [], 0
    while row < len(lengths):
        if lengths[row] >= FIELD_WIDTH:
            top = row
            while row < len(lengths) and lengths[row] >= FIELD_WIDTH:
                row += 1
            bands.append((top, row))
        row += 1
    if not bands:
        return None
    tallest = max(range(len(bands)), key=lambda i: bands[i][1] - bands[i][0])
    if bands[tallest][1] - bands[tallest][0] < FILE_LIST_ROWS:
        return None
    for top, bottom in bands[tallest + 1:]:
        if top - bands[tallest][1] > FIELD_GAP:
            return None
        if FIELD_ROWS[0] <= bottom - top <= FIELD_ROWS[1]:
            x = int(np.median(starts[top:bottom]))
            return x, box[1] + top, int(np.median(lengths[top:bottom])), bottom - top
    return None


def typed_in(frame: np.ndarray, field: tuple[int, int, int, int]) -> int:
    """How many dark (text) pixels the field holds."""
    x, y, w, h = field
    return int((frame[y + 2:y + h - 2, x + 2:x + w - 2] < DARK).all(axis=2).sum())


def _export(ctx: OracleContext, number: int, attacker: str, replace: bool, retry: bool) -> Iterator[ActionLike]:
    """Wireshark: the display filter, then File > Export Specified Packets (displayed, all) to the evidence path."""
    shark, right = ctx.truth["shark"], ctx.truth["at"][0]
    if retry:  # close whatever a lost key left open (the dialog, a menu) first
        for _ in range(2):
            yield {"kind": "key", "keys": "Escape"}
    yield from _focus_wireshark(ctx, shark)
    yield {"kind": "key", "keys": "ctrl+slash"}
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "type", "text": f"ip.addr == {attacker}"}
    before = _frame(ctx).copy()
    yield {"kind": "key", "keys": "Return"}
    # the status bar's 'Displayed: N' changes once the filter is applied
    yield from _settle(ctx, before, [shark[0] + shark[2] // 3, shark[1] + shark[3] - 40, shark[2] * 2 // 3, 40], shark)
    before = _frame(ctx).copy()
    yield {"kind": "key", "keys": "alt+f"}
    if not (yield from _wait_box(ctx, before, MENU_MIN, tries=WAITS)):
        yield {"kind": "key", "keys": "Escape"}
        return
    for _ in range(EXPORT_DOWNS):
        yield {"kind": "key", "keys": "Down"}
    yield {"kind": "key", "keys": "Return"}
    shown = yield from _wait_box(ctx, before, DIALOG_MIN)
    field = file_name_field(_frame(ctx), before, right) if shown else None
    if field is None:
        for _ in range(2):
            yield {"kind": "key", "keys": "Escape"}
        return
    # The dialog opens in ~/evidence (the preferences) and adds '.pcap': a short name, no path for its completer to
    # trip over under TCG. A click puts the keyboard into the field (under XFCE the dialog may open without it);
    # the name is typed again until the field shows it.
    name, empty = f"alert-{number}", None
    for _try in range(TRIES):
        yield {"kind": "click", "x": field[0] + field[2] // 2, "y": field[1] + field[3] // 2}
        yield {"kind": "key", "keys": "ctrl+a"}
        yield {"kind": "key", "keys": "BackSpace"}
        empty = typed_in(_frame(ctx), field)
        yield {"kind": "type", "text": name}
        for _ in range(WAITS // 2):
            yield {"kind": "wait", "seconds": 1}
            if typed_in(_frame(ctx), field) >= empty + TYPED_PIXELS * len(name):
                break
        else:
            continue
        break
    else:
        for _ in range(2):
            yield {"kind": "key", "keys": "Escape"}
        return
    dialog = _frame(ctx).copy()
    yield {"kind": "key", "keys": "Return"}
    if replace and (yield from _wait_box(ctx, dialog, CONFIRM_MIN, tries=WAITS)):
        yield {"kind": "key", "keys": "alt+y"}


def _close(ctx: OracleContext, number: int, attacker: str, packets: int) -> Generator[ActionLike, Any, str]:
    """Type the attacker and count at the board until it shows the case code ('' if never)."""
    want = re.compile(rf"ALERT {number} CLOSED: CASE ([A-Z2-9]{{6}})")
    for _try in range(TRIES):
        if not (yield from _raise(ctx)) or not (yield from _focus_entry(ctx)):
            continue
        yield {"kind": "key", "keys": "Escape"}
        yield {"kind": "type", "text": f"{attacker} {packets}"}
        yield {"kind": "key", "keys": "Return"}
        for _ in range(WAITS):
            found = want.fullmatch(read_result(_frame(ctx), ctx.truth["at"], number))
            if found:
                return found.group(1)
            yield {"kind": "wait", "seconds": 2}
    return ""


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    lines = []
    for number in range(1, COUNT + 1):
        alert = yield from _show(ctx, number)
        if alert is None:
            break
        yield {"kind": "shell", "timeout": 300, "command": hunt_command(alert)}
        found = re.findall(r"^ATTACKER (\d+\.\d+\.\d+\.\d+)\s*\nPACKETS (\d+)\s*$", _terminal(ctx), re.M)
        if not found:
            break  # gui-only: the terminal is on the desktop
        attacker, packets = found[-1][0], int(found[-1][1])
        sha, exported = "", False
        for attempt in range(EXPORT_TRIES):
            yield from _export(ctx, number, attacker, exported, attempt > 0)
            yield {"kind": "shell", "timeout": 180, "command": check_command(number)}
            count = re.findall(r"^EXPORTED (\d+)\s*$", _terminal(ctx), re.M)
            hashed = re.findall(rf"^([0-9a-f]{{64}})\s+\S*alert-{number}\.pcap\s*$", _terminal(ctx), re.M)
            exported = bool(count) and count[-1] != "0"
            if count and int(count[-1]) == packets and hashed:
                sha = hashed[-1]
                break
        case = yield from _close(ctx, number, attacker, packets)
        lines.append(f"{number} | {attacker} | {packets} | {case} | {sha}")
    yield {"kind": "shell", "command": report_command(lines)}
    yield {"kind": "done"}


def report_command(lines: list[str]) -> str:
    """The shell line that writes the report (the lines hold digits, dots, '|', spaces, codes and hex)."""
    text = "".join(line + "\n" for line in lines)
    target = REPORT.replace(HOME, "~")
    return f"printf %s '{text}' > {target} && cat {target}"


TASK = Task(
    id="Weave-DevOps-7",
    title="Triage the night's three intrusion alerts: find each attacker with tshark, export its packets from "
          "Wireshark, close the alert at the board, then write the incident report",
    instruction=(
        "You are on the security night shift. Last night's packet capture (the night of 4 December 2026, times in "
        "UTC) is ~/captures/night-2026-12-04.pcap; it is open in the Wireshark window. The 'Alert Board' window "
        "holds three alerts: press 'Show next alert' to see the next open one (its sensor, its time window and its "
        "signature). For each alert, find the attacker: the address that sent the offending traffic of the "
        "alert's signature within its time window (tshark in your shell can read the capture). The incident is "
        "every packet to or from the attacker's address in the whole capture. In the Wireshark window, apply the "
        "display filter that shows exactly those packets and export them with File > Export Specified Packets "
        "(all displayed packets, pcap format) as ~/evidence/alert-N.pcap, N the alert's number. Then close the "
        "alert at the board: type the attacker's address, a space and the incident's packet count into its entry "
        "and press Enter (or 'Close alert'); the export must exist by then. The board shows the alert's case code "
        "and lets you show the next alert. Finally, from your shell, write the incident report "
        "~/reports/incidents.txt: one line per alert, 'N | attacker | packets | case | sha256', with the case "
        "code from the board and the SHA-256 of ~/evidence/alert-N.pcap (e.g. 1 | 10.0.0.9 | 42 | ABC234 | "
        "followed by 64 hex digits). Then finish."),
    channels=Channels(
        gui="read each alert off the board, apply the display filter in Wireshark and export the incident's "
            "packets, close the alert at the board and read its case code back",
        cli="find each alert's attacker and packet count in the capture with tshark, check each export and write "
            "the incident report with the case codes and the exports' hashes",
        why_both="the alerts and the case codes exist only as the board's pixels and the evidence must be exported "
                 "by the Wireshark window into a folder only the desktop account can write, while picking the "
                 "attacker out of thousands of packets is a job for tshark and the report belongs in a folder "
                 "only the shell's account can write"),
    setup=setup,
    clauses=(
        Clause("evidence_exported", "every ~/evidence/alert-N.pcap holds exactly the packets to or from alert N's "
                                    "attacker", check_exports, weight=3.0, critical=True, cap=0.5),
        Clause("alerts_closed", "the board closed every alert with its attacker and packet count and recorded the "
                                "export as it is now", check_closed, weight=2.0, critical=True, cap=0.25),
        Clause("incident_report", "~/reports/incidents.txt has every alert's attacker, packet count, the board's "
                                  "case code and the export's SHA-256", check_report, weight=2.0, critical=True,
               cap=0.5),
    ),
    deliverables=(
        *(Deliverable(evidence_path(n), "gui", description=f"~/evidence/alert-{n}.pcap (exported by Wireshark)")
          for n in range(1, COUNT + 1)),
        Deliverable(RECORD, "gui", owner="root", description="the board's record (captured by setup)"),
        Deliverable(REPORT, "cli", description="~/reports/incidents.txt"),
    ),
    rules=(GuiArtifactViaCli([evidence_path(n) for n in range(1, COUNT + 1)],
                             "the evidence must come from Wireshark's Export Specified Packets"),),
    oracle=oracle,
    withheld=("alerts",),
    profile="full",
    apps=("Alert Board (python3-tk)", "wireshark-qt", "tshark"),
    max_steps=400,
    time_budget_s=3600.0,
)
