"""Weave-Data-7: label a dawn-chorus recording in Audacity from the surveyor's notebook, and summarise it in the shell.

Setup synthesises a WAV per seed (tone bursts of distinct pitches at seeded times, in noise) and opens it in a real
Audacity (the desktop account's). The species and roughly when each was heard exist only as pixels: a Tk "Field
Notebook" (fed from a root-only file that setup deletes once it is up) draws one page at a time in dot-matrix text,
a species CODE and a time to the second, and shows the next page only after the current page's call is confirmed
with its exact start in milliseconds, which only a measurement of the recording gives. The full names (French and
German, with accents) are in a species register only the workspace account may open. So per page: read the code
and time (GUI) -> look the name up and measure the call with sox/python (CLI) -> select the call in Audacity by
typing its start and end, add a label with the name, confirm the page in the notebook (GUI). Then Audacity exports
the labels into ~/survey (the desktop account's alone to write), and the shell writes the survey summary (its own
outbox): the survey number the notebook shows at the end, the exported labels' SHA-256, and per species its count,
first start and peak level.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import shlex
import unicodedata
import wave
from collections.abc import Iterator, Mapping, Sequence
from io import BytesIO
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.evaluators import Clause, GuiArtifactViaCli, Probe, Verdict

APP_DIR = "/usr/local/share/fieldnotebook"
BOOK_IN = f"{PRIVATE_DIR}/fieldnotebook.json"
REGISTER_DIR = "/srv/birdregister"
REGISTER = f"{REGISTER_DIR}/register.db"
SURVEY = f"{HOME}/survey"
WAV_NAME = "dawn-chorus"
WAV = f"{SURVEY}/{WAV_NAME}.wav"
LABELS = f"{SURVEY}/labels.txt"
REPORTS = f"{HOME}/reports"
SUMMARY = f"{REPORTS}/survey-summary.txt"
AUDACITY_CFG = f"{HOME}/.config/audacity/audacity.cfg"
NOTEBOOK_TITLE = "Field Notebook"

RATE = 16000
LENGTH_S = 60.0
PAGES = 4
DISTRACTORS = 2
MIN_GAP_S = 6.5
TIME_TOL_S = 0.15  # a label's start and end against the call's
START_TOL_MS = 100  # the notebook's confirmation
PEAK_TOL = 0.01
FIRST_TOL_S = 0.1
SURVEY_CHARS = "ACDEFHJKLMNPRTVWXY34679"

# (code, name, language, song pitch in Hz): the register. The names the notebook uses are the accented ones.
SPECIES = (
    ("MESCHA", "Mésange charbonnière", "fr", 4300), ("FAUTET", "Fauvette à tête noire", "fr", 3100),
    ("PICEPE", "Pic épeiche", "fr", 1500), ("GEACHE", "Geai des chênes", "fr", 1900),
    ("ZAUNKO", "Zaunkönig", "de", 5200), ("MONCHG", "Mönchsgrasmücke", "de", 2700),
    ("GRUNFI", "Grünfink", "de", 3600), ("EICHHA", "Eichelhäher", "de", 2300),
    ("ROTKEH", "Rotkehlchen", "de", 4700), ("KLEIBR", "Kleiber", "de", 3300),
    ("SITTOR", "Sittelle torchepot", "fr", 4000), ("TROMIG", "Troglodyte mignon", "fr", 5600),
)
SCHEMA = ("CREATE TABLE species (code TEXT PRIMARY KEY, name TEXT NOT NULL, lang TEXT NOT NULL, song_hz INTEGER);"
          "CREATE TABLE retired_codes (code TEXT PRIMARY KEY, replaced_by TEXT NOT NULL);")

# The notebook's geometry (pixels inside its window): the fixture draws here, the oracle reads and clicks here.
BOOK_W, BOOK_H, CANVAS_H, MARGIN, SCALE = 400, 620, 330, 16, 3
HEAD_Y, LINES = 16, (80, 140, 200)
ENTRY, BUTTON = (16, 372, 190, 32), (220, 370, 160, 36)
BOOK_AT, AUDACITY_AT, AUDACITY_SIZE = (0, 40), (410, 40), (866, 640)
WAIT_TRIES = 12
EXPORT_WAIT = 12  # 2-second waits for the Export Labels dialog to map, or to close, under TCG
DIALOG_PIXELS = 300  # title-bar pixels the dialog's frame changes (730 in the guest; 0 while menus open)


def layout() -> dict[str, Any]:
    return {"width": BOOK_W, "height": BOOK_H, "canvas_h": CANVAS_H, "margin": MARGIN, "scale": SCALE,
            "head_y": HEAD_Y, "lines": list(LINES), "entry": list(ENTRY), "button": list(BUTTON),
            "tolerance_ms": START_TOL_MS}


def clock(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def survey(rng: np.random.Generator) -> dict[str, Any]:
    """The seed's survey: the calls in the recording, the notebook's pages (a subset of them) and its number."""
    accented = [s for s in SPECIES if not s[1].isascii()]
    chosen = [accented[i] for i in rng.choice(len(accented), 3, replace=False)]
    others = [s for s in SPECIES if s not in chosen]
    while True:
        starts = np.sort(rng.uniform(2.0, LENGTH_S - 4.0, PAGES + DISTRACTORS))
        if np.all(np.diff(starts) >= MIN_GAP_S):
            break
    noted = sorted(int(i) for i in rng.choice(len(starts), PAGES, replace=False))
    twice = chosen[int(rng.integers(3))]
    order = [chosen[int(i)] for i in rng.permutation(3)]
    order.insert(int(rng.integers(PAGES)), twice)
    distract = iter(others[int(i)] for i in rng.choice(len(others), DISTRACTORS, replace=False))
    calls = []
    for index, start in enumerate(starts):
        species = order[noted.index(index)] if index in noted else next(distract)
        duration = float(rng.uniform(0.6, 1.4))
        calls.append({"code": species[0], "name": species[1], "hz": species[3], "noted": index in noted,
                      "start": round(float(start), 3), "end": round(float(start) + duration, 3),
                      "amp": round(float(rng.uniform(0.3, 0.7)), 3)})
    pages = []
    for call in (c for c in calls if c["noted"]):
        heard = clock(call["start"] + float(rng.uniform(-1.2, 1.2)))
        pages.append({"code": call["code"], "name": call["name"], "start": call["start"], "end": call["end"],
                      "heard": heard})
    number = "".join(SURVEY_CHARS[int(i)] for i in rng.integers(len(SURVEY_CHARS), size=5))
    return {"calls": calls, "pages": pages, "survey": number, "seed_noise": int(rng.integers(2**31))}


def samples(world: Mapping[str, Any]) -> np.ndarray:
    """The recording as int16 samples: every call a slightly rising tone with 20 ms ramps, in noise."""
    rng = np.random.default_rng(world["seed_noise"])
    signal = rng.normal(0.0, 0.01, int(LENGTH_S * RATE))
    ramp = int(0.02 * RATE)
    for call in world["calls"]:
        first, last = round(call["start"] * RATE), round(call["end"] * RATE)
        t = np.arange(last - first) / RATE
        envelope = np.ones(last - first)
        envelope[:ramp] = 0.5 - 0.5 * np.cos(np.linspace(0, np.pi, ramp))
        envelope[-ramp:] = envelope[:ramp][::-1]
        phase = 2 * np.pi * (call["hz"] * t + 0.15 * call["hz"] * t * t / (2 * t[-1]))
        signal[first:last] += call["amp"] * envelope * np.sin(phase)
    return np.round(np.clip(signal, -1.0, 32767 / 32768) * 32768).astype("<i2")


def wav_bytes(data: np.ndarray) -> bytes:
    out = BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(data.tobytes())
    return out.getvalue()


def summary_rows(world: Mapping[str, Any], data: np.ndarray) -> list[dict[str, Any]]:
    """Per species of the notebook, in order of its first call: name, count, first start, peak |sample|."""
    rows: dict[str, dict[str, Any]] = {}
    for page in world["pages"]:
        first, last = int((page["start"] - 0.05) * RATE), int((page["end"] + 0.05) * RATE)
        peak = float(np.max(np.abs(data[first:last].astype(np.int32)))) / 32768
        row = rows.setdefault(page["name"], {"name": page["name"], "count": 0, "first": page["start"], "peak": 0.0})
        row["count"] += 1
        row["peak"] = round(max(row["peak"], peak), 4)
    return list(rows.values())


def register_rows(world: Mapping[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    species = [(code, name, lang, hz) for code, name, lang, hz in SPECIES]
    retired = [("MESCHR", "MESCHA"), ("ZAUNKG", "ZAUNKO"), ("ROUGEG", "ROTKEH")]
    return {"species": species, "retired_codes": retired}


AUDACITY_CONFIG = """PrefsVersion=1.1.1r1
[GUI]
ShowSplashScreen=0
[Update]
DefaultUpdatesChecking=0
UpdatesCheckingFlag=0
[Version]
Major=3
Minor=2
Micro=4
[Module]
mod-script-pipe=0
"""


def setup(ctx: SetupContext) -> Prepared:
    world = survey(ctx.rng)
    data = samples(world)
    ctx.run(["install", "-d", "-m", "0700", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, REGISTER_DIR])
    ctx.write_file(REGISTER, database_bytes(SCHEMA, register_rows(world)), owner=WORKSPACE_USER, mode=0o600)
    # ~/survey: the desktop account's alone to write (Audacity exports there); the shell reads it through the group.
    ctx.run(["install", "-d", "-m", "2755", "-o", ctx.user, "-g", SHARED_GROUP, SURVEY])
    ctx.write_file(WAV, wav_bytes(data), mode=0o644)
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, REPORTS])
    ctx.write_file(AUDACITY_CFG, AUDACITY_CONFIG, mode=0o644)
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)
    book = _open_notebook(ctx, world)
    ctx.launch_gui(f"cd {SURVEY} && {{as_user}} audacity {WAV}", name="audacity")
    editor = ctx.place_window(ctx.wait_window(f"^{WAV_NAME}$", timeout=400).id, AUDACITY_AT, AUDACITY_SIZE)
    book = ctx.place_window(book, BOOK_AT)
    if book[0] + book[2] + 4 > editor[0]:
        raise TaskError(f"{ctx.task_id} setup: the notebook {book} and Audacity {editor} overlap")
    try:  # mapped is not drawn (TCG): wait for the Selection toolbar's digits the oracle clicks
        wait_for(lambda: selection_fields(ctx.client.screenshot().image, editor), 300,
                 what="Audacity's Selection toolbar drawn", max_poll=2.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    return Prepared(
        params={"pages": PAGES},
        truth={"notebook": book, "audacity": editor, "pages": world["pages"], "survey": world["survey"],
               "summary": summary_rows(world, data)})


def _open_notebook(ctx: SetupContext, world: Mapping[str, Any]) -> int:
    """Start the notebook with its pages on stdin, wait until its cover is drawn, delete the input."""
    ctx.write_file(f"{APP_DIR}/field_notebook.py", ctx.fixture(__package__, "fixtures/field_notebook.py"),
                   owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    pages = [{"code": p["code"], "heard": p["heard"], "start_ms": round(p["start"] * 1000)} for p in world["pages"]]
    ctx.write_file(BOOK_IN, json.dumps({"pages": pages, "survey": world["survey"], "layout": layout()}),
                   owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP_DIR}/field_notebook.py < {BOOK_IN}", name="fieldnotebook")
    window = ctx.wait_window(f"^{NOTEBOOK_TITLE}$")
    try:
        wait_for(lambda: notebook_origin(ctx.client.screenshot().image, window.geometry), 120,
                 what="the Field Notebook drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", BOOK_IN])  # the window has read it: the pages now live only on screen
    return window.id


# -- reading the screen -----------------------------------------------------------------------------------------


def notebook_origin(image: Any, near: Sequence[int]) -> tuple[int, int] | None:
    """The notebook canvas's top-left on the screen, found by its drawn heading."""
    return pixel_font.find_drawn(image, "FIELD NOTEBOOK", near[:2], (MARGIN, HEAD_Y), SCALE)


def read_line(image: Any, origin: Sequence[int], line: int, count: int = 20) -> str:
    return pixel_font.read_text(image, origin[0] + MARGIN, origin[1] + LINES[line], SCALE, count)


def read_page(image: Any, origin: Sequence[int]) -> tuple[int, str, str] | None:
    """(page number, code, heard) of the page on screen, or None while none is shown."""
    head = re.fullmatch(r"PAGE (\d) OF \d", read_line(image, origin, 0))
    code = re.fullmatch(r"CODE ([A-Z]{6})", read_line(image, origin, 1))
    heard = re.fullmatch(r"HEARD (\d+:\d\d)", read_line(image, origin, 2))
    if head is None or code is None or heard is None:
        return None
    return int(head[1]), code[1], heard[1]


def read_survey(image: Any, origin: Sequence[int]) -> str | None:
    found = re.fullmatch(r"SURVEY ([A-Z0-9]{5})", read_line(image, origin, 1))
    return found[1] if found else None


def selection_fields(image: Any, window: Sequence[int]) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Where to click the first digit of Audacity's selection start and end fields (its Selection toolbar, at the
    window's bottom left): the two leftmost runs of its blue digits in the window's bottom band."""
    x, y, w, h = (int(v) for v in window[:4])
    band = np.asarray(image)[max(y + h - 140, 0):y + h, x:x + w, :3].astype(int)
    blue = (band[:, :, 2] > 150) & (band[:, :, 0] < 70) & (band[:, :, 1] < 70)
    columns = np.nonzero(blue.sum(axis=0) >= 2)[0]
    if len(columns) < 20:
        return None
    runs, start = [], columns[0]
    for prev, col in itertools.pairwise(columns):
        if col - prev > 15:
            runs.append((start, prev))
            start = col
    runs.append((start, columns[-1]))
    runs = [r for r in runs if 100 <= r[1] - r[0] <= 200]
    if len(runs) < 2:
        return None
    points = []
    for first, _last in runs[:2]:
        rows = np.nonzero(blue[:, first:first + 5].any(axis=1))[0]
        points.append((x + int(first) + 3, max(y + h - 140, 0) + int(rows.mean())))
    return points[0], points[1]


def field_focused(image: Any, point: Sequence[int]) -> bool:
    """Whether the Selection toolbar field whose first digit is at ``point`` has the keyboard focus: Audacity then
    frames the field in black and draws its current digit black on white (its other digits are blue on grey)."""
    x, y = int(point[0]), int(point[1])
    box = np.asarray(image)[max(y - 7, 0):y + 8, max(x - 6, 0):x + 10, :3].astype(int)
    return int((box.max(axis=2) < 70).sum()) >= 8 and int((box.min(axis=2) > 235).sum()) >= 8


def _column_runs(columns: np.ndarray, gap: int = 2) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for col in (int(c) for c in columns):
        if runs and col - runs[-1][1] <= gap:
            runs[-1] = (runs[-1][0], col)
        else:
            runs.append((col, col))
    return runs


def _track_band(image: Any, window: Sequence[int]) -> tuple[np.ndarray, int]:
    """The editor between its top toolbars and its bottom ones (the tracks), and its left edge on the screen."""
    x, y, w, h = (int(v) for v in window[:4])
    return np.asarray(image)[max(y + 120, 0):y + h - 130, max(x, 0):x + w, :3].astype(int), max(x, 0)


def call_spans(image: Any, window: Sequence[int]) -> list[tuple[int, int]]:
    """The screen columns of each loud call the waveform shows: runs of columns with a tall stretch of wave blue."""
    band, left = _track_band(image, window)
    blue = (band[:, :, 2] >= 180) & (band[:, :, 0] <= 130) & (band[:, :, 1] <= 130)
    return [(a + left, b + left) for a, b in _column_runs(np.nonzero(blue.sum(axis=0) >= 15)[0]) if b - a >= 2]


def selected_spans(image: Any, window: Sequence[int]) -> list[tuple[int, int]]:
    """The screen columns Audacity paints as selected in its tracks (a pale blue background)."""
    band, left = _track_band(image, window)
    pale = (np.abs(band[:, :, 0] - 235) <= 6) & (np.abs(band[:, :, 1] - 242) <= 5) & (band[:, :, 2] >= 250)
    return [(a + left, b + left) for a, b in _column_runs(np.nonzero(pale.sum(axis=0) >= 10)[0])]


def selection_on_call(image: Any, window: Sequence[int], slack: int = 2) -> bool:
    """Whether the selection shown in the tracks is one call's span (each edge within ``slack`` pixels of it): what
    the oracle checks before it adds a label, as the fields it typed into may not have taken every digit."""
    calls = call_spans(image, window)
    return any(abs(a - c) <= slack and abs(b - d) <= slack for a, b in selected_spans(image, window)
               for c, d in calls)


# -- the checker ------------------------------------------------------------------------------------------------


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text.strip())


def parse_labels(text: str) -> list[tuple[float, float, str]]:
    """Audacity's label export: start TAB end TAB text per line (spectral lines start with a backslash)."""
    labels = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("\\"):
            continue
        parts = line.split("\t")
        if len(parts) < 3:
            raise ValueError(f"not a label line: {line[:60]!r}")
        labels.append((float(parts[0]), float(parts[1]), "\t".join(parts[2:])))
    return labels


def _labels(probe: Probe) -> tuple[list[tuple[float, float, str]] | None, str]:
    text = probe.read_text(LABELS)
    if text is None:
        return None, f"{LABELS} does not exist"
    try:
        return parse_labels(text), ""
    except ValueError as exc:
        return None, f"{LABELS}: {exc}"


def _matched(labels: Sequence[tuple[float, float, str]], page: Mapping[str, Any]) -> tuple[float, float, str] | None:
    return next((lab for lab in labels if abs(lab[0] - page["start"]) <= TIME_TOL_S
                 and abs(lab[1] - page["end"]) <= TIME_TOL_S), None)


def check_exported(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    labels, why = _labels(probe)
    if labels is None:
        return Verdict.failed(why)
    return Verdict.check(bool(labels), f"{LABELS} is an Audacity label export with {len(labels)} label(s)")


def check_times(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    labels, why = _labels(probe)
    if labels is None:
        return Verdict.failed(why)
    pages = truth["pages"]
    hit = [p for p in pages if _matched(labels, p) is not None]
    extra = [lab for lab in labels if not any(abs(lab[0] - p["start"]) <= TIME_TOL_S
                                              and abs(lab[1] - p["end"]) <= TIME_TOL_S for p in pages)]
    evidence = (f"{len(hit)}/{len(pages)} noted calls have a label spanning them (start and end within "
                f"{TIME_TOL_S} s); labels on no noted call: {[f'{a:.2f}-{b:.2f}' for a, b, _ in extra][:4] or 'none'}")
    if len(hit) == len(pages) and not extra:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if len(hit) * 2 >= len(pages) and not extra else Verdict.failed(evidence)


def check_names(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    labels, why = _labels(probe)
    if labels is None:
        return Verdict.failed(why)
    pages, good, bad = truth["pages"], 0, []
    for page in pages:
        label = _matched(labels, page)
        if label is not None and _nfc(label[2]) == _nfc(page["name"]):
            good += 1
        else:
            bad.append(f"{page['heard']}: {label[2] if label else 'no label'!r}")
    evidence = f"{good}/{len(pages)} noted calls labelled with the register's full name; wrong: {bad[:4] or 'none'}"
    if good == len(pages):
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if good * 2 >= len(pages) else Verdict.failed(evidence)


def _summary(probe: Probe) -> list[str] | None:
    text = probe.read_text(SUMMARY)
    return None if text is None else [line.strip() for line in text.splitlines() if line.strip()]


def check_survey(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    lines = _summary(probe)
    if lines is None:
        return Verdict.failed(f"{SUMMARY} does not exist")
    found = re.fullmatch(r"survey\s+(\S+)", lines[0], re.I) if lines else None
    shown = found[1] if found else (lines[0][:40] if lines else "nothing")
    return Verdict.check(found is not None and found[1].upper() == truth["survey"],
                         f"first line names survey {shown!r}; the notebook's last page shows another"
                         if not (found and found[1].upper() == truth["survey"]) else
                         "first line names the survey number the notebook shows once every page is confirmed")


def check_digest(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    lines = _summary(probe)
    if lines is None:
        return Verdict.failed(f"{SUMMARY} does not exist")
    exported = probe.read_bytes(LABELS)
    digest = None if exported is None else hashlib.sha256(exported).hexdigest()
    found = [m[1].lower() for line in lines if (m := re.fullmatch(r"labels sha256\s+([0-9a-fA-F]{64})", line))]
    same = digest is not None and found == [digest]
    return Verdict.check(same, f"the summary {'names' if same else 'does not name'} the exported labels' SHA-256 "
                               f"({'no labels file' if digest is None else digest[:12] + '...'})")


def check_rows(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    lines = _summary(probe)
    if lines is None:
        return Verdict.failed(f"{SUMMARY} does not exist")
    rows = [line.split(";") for line in lines if line.count(";") == 3]
    want = truth["summary"]
    good, bad = 0, []
    for index, expected in enumerate(want):
        row = rows[index] if index < len(rows) else None
        try:
            ok = (row is not None and _nfc(row[0]) == _nfc(expected["name"]) and int(row[1]) == expected["count"]
                  and abs(float(row[2]) - expected["first"]) <= FIRST_TOL_S
                  and abs(float(row[3]) - expected["peak"]) <= PEAK_TOL)
        except ValueError:
            ok = False
        good += ok
        if not ok:
            bad.append(";".join(row) if row else "missing")
    evidence = (f"{good}/{len(want)} species rows right (name;count;first start;peak, in order of first call), "
                f"{len(rows)} row(s) found; wrong: {bad[:3] or 'none'}")
    return Verdict.check(good == len(want) == len(rows), evidence)


# -- the oracle -------------------------------------------------------------------------------------------------

MEASURE_PY = r"""import array, re, sqlite3, subprocess, wave
code, heard = {code!r}, {heard!r}
con = sqlite3.connect("file:{db}?mode=ro", uri=True)
row = con.execute("SELECT name FROM species WHERE code = ?", (code,)).fetchone()
if row is None:
    new = con.execute("SELECT replaced_by FROM retired_codes WHERE code = ?", (code,)).fetchone()
    row = con.execute("SELECT name FROM species WHERE code = ?", (new[0],)).fetchone() if new else ("?",)
m, s = heard.split(":")
around = int(m) * 60 + int(s)
w = wave.open("{wav}")
rate = w.getframerate()
lo = max(0, around - 3) * rate
w.setpos(lo)
data = array.array("h", w.readframes(6 * rate))
hop = rate // 200
loud = [max(abs(v) for v in data[i:i + hop]) > 0.1 * 32768 for i in range(0, len(data) - hop, hop)]
runs, i = [], 0
while i < len(loud):
    if loud[i]:
        j = i
        while j + 1 < len(loud) and any(loud[j + 1:j + 6]):
            j += 1
        runs.append((i, j))
        i = j + 1
    else:
        i += 1
first, last = min(runs, key=lambda r: abs(lo / rate + r[0] * hop / rate - around))
start, end = (lo + first * hop) / rate, (lo + (last + 1) * hop) / rate
stat = subprocess.run(["sox", "{wav}", "-n", "trim", f"{{start:.3f}}", f"={{end:.3f}}", "stat"],
                      capture_output=True, text=True).stderr
amp = [abs(float(v)) for v in re.findall(r"(?:Maximum|Minimum) amplitude:\s*(-?[0-9.]+)", stat)]
print(f"CALL|{{code}}|{{row[0]}}|{{start:.3f}}|{{end:.3f}}|{{round(start * 1000)}}|{{max(amp):.4f}}")
"""

SUMMARY_PY = r"""rows = {rows!r}
with open({out!r}, "w", encoding="utf-8") as f:
    f.write("survey {survey}\nlabels sha256 {digest}\n")
    for name, count, first, peak in rows:
        f.write(f"{{name}};{{count}};{{first:.3f}};{{peak:.4f}}\n")
print(open({out!r}, encoding="utf-8").read())
"""


def hms(seconds: float) -> str:
    """The digits Audacity's hh:mm:ss + milliseconds field takes, typed from its first digit."""
    millis = max(0, round(seconds * 1000))
    return f"{millis // 3600000:02d}{millis // 60000 % 60:02d}{millis // 1000 % 60:02d}{millis % 1000:03d}"


def _screen(ctx: OracleContext) -> Any:
    assert ctx.obs is not None
    return ctx.obs["screen"]


def _until(ctx: OracleContext, read: Any, tries: int = WAIT_TRIES, seconds: float = 1) -> Iterator[ActionLike]:
    """Wait steps until ``read(screen)`` is not None (the redraw may trail under TCG)."""
    for _ in range(tries):
        if read(_screen(ctx)) is not None:
            return
        yield {"kind": "wait", "seconds": seconds}


def _click(point: Sequence[int]) -> dict[str, Any]:
    return {"kind": "click", "x": int(point[0]), "y": int(point[1])}


def _region(ctx: OracleContext, window: Sequence[int]) -> np.ndarray:
    x, y, w, h = (int(v) for v in window[:4])
    return np.asarray(_screen(ctx))[max(y, 0):y + h, max(x, 0):x + w, :3].copy()


def _changed(ctx: OracleContext, window: Sequence[int], before: np.ndarray) -> Iterator[ActionLike]:
    """Wait steps until the window's pixels differ from ``before`` (a menu or a dialog has opened)."""
    yield from _until(ctx, lambda _s: True if not np.array_equal(_region(ctx, window), before) else None)


def title_strip(image: Any, editor: Sequence[int]) -> np.ndarray:
    """The screen rows of Audacity's title bar (just above its menu bar), across the editor's width."""
    x, y, w, _h = (int(v) for v in editor[:4])
    return np.asarray(image)[max(y - 26, 0):max(y - 2, 0), max(x, 0):x + w, :3].astype(int)


def dialog_over(image: Any, editor: Sequence[int], idle: np.ndarray) -> bool:
    """Whether the Export Labels file dialog is up. Under TCG it maps long before it draws: in the guest its frame
    showed for many seconds with Audacity still visible through it, only its title bar ("Export Labels As:") drawn
    across Audacity's, so the title bar region differing from ``idle`` (taken with the File menu open, Audacity
    active) tells; once drawn (on a host at once) it also covers the Selection toolbar."""
    strip = title_strip(image, editor)
    moved = strip.shape != idle.shape or int((np.abs(strip - idle).max(axis=2) > 40).sum()) >= DIALOG_PIXELS
    return moved or selection_fields(image, editor) is None


def _export(ctx: OracleContext, editor: Sequence[int]) -> Iterator[ActionLike]:
    """File > Export > Export Labels... through the menus' mnemonics, each key once the previous one took effect;
    then, once the file dialog shows (under TCG it mapped seven seconds after the menu closed: an earlier oracle
    pressed Escape before that and lost two tries), its name field gets the full path, and the dialog must go."""
    idle = title_strip(_screen(ctx), editor)
    for attempt in range(3):
        yield _focus_audacity(editor)
        yield {"kind": "wait", "seconds": 1 + attempt}
        for key in ("alt+f", "e", "l"):
            before = _region(ctx, editor)
            yield {"kind": "key", "keys": key}
            if attempt:  # a redraw still under way may pass for the menu: let it settle first
                yield {"kind": "wait", "seconds": 2}
            yield from _changed(ctx, editor, before)
            if key == "e":  # the submenu is open: Audacity has the focus, its title bar is drawn active
                idle = title_strip(_screen(ctx), editor)
        yield from _until(ctx, lambda s, i=idle: True if dialog_over(s, editor, i) else None, EXPORT_WAIT, 2)
        if dialog_over(_screen(ctx), editor, idle) or attempt == 2:  # the last try types the path regardless
            break
        for _ in range(3):  # no dialog came: close whatever menu is open and start again
            yield {"kind": "key", "keys": "Escape"}
        yield {"kind": "wait", "seconds": 3}
    yield {"kind": "wait", "seconds": 3}  # mapped is not focused yet under TCG
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "type", "text": f"{LABELS}\n"}
    yield from _until(ctx, lambda s, i=idle: True if not dialog_over(s, editor, i) else None, EXPORT_WAIT, 2)


def _focus_audacity(editor: Sequence[int]) -> dict[str, Any]:
    return _click((editor[0] + 40, editor[1] + editor[3] - 8))  # Audacity's status bar: focus, nothing else


def _fit(ctx: OracleContext, editor: Sequence[int]) -> Iterator[ActionLike]:
    """View > Zoom > Fit to Width (Ctrl+F) until every call of the recording shows in the track (the window was
    resized after the file was loaded): the oracle checks each selection against the calls it shows."""
    calls = PAGES + DISTRACTORS
    for _ in range(3):
        if len(call_spans(_screen(ctx), editor)) >= calls:
            return
        yield _focus_audacity(editor)
        yield {"kind": "wait", "seconds": 1}
        yield {"kind": "key", "keys": "ctrl+f"}
        yield from _until(ctx, lambda s: True if len(call_spans(s, editor)) >= calls else None, 6)


def _type_field(ctx: OracleContext, point: Sequence[int], seconds: float, settle: bool) -> Iterator[ActionLike]:
    """Click a Selection toolbar field on its first digit and type the time once the field shows the focus (and a
    little later on a retry): under TCG the keys typed right after the click went to the field clicked before (the
    first label of seeds 0 and 3 got its start clamped to its end that way)."""
    for _ in range(2):
        yield _click(point)
        yield from _until(ctx, lambda s: True if field_focused(s, point) else None, 5)
        if field_focused(_screen(ctx), point):
            break
    if settle:
        yield {"kind": "wait", "seconds": 2}
    yield {"kind": "type", "text": hms(seconds)}


def _select(ctx: OracleContext, editor: Sequence[int], fields: Sequence[Sequence[int]], start: float,
            end: float) -> Iterator[ActionLike]:
    """Select [start, end] through the Selection toolbar and see it on screen before the label is added.

    Start, end, start, end: a start typed past the current end is clamped to it (and an end before the start to
    the start), so the second pass sets what the first could not. Then the selection painted in the track must be
    a call's span; if not, everything again."""
    for attempt in range(3):
        yield _focus_audacity(editor)
        for _ in range(2):
            yield from _type_field(ctx, fields[0], start, attempt > 0)
            yield from _type_field(ctx, fields[1], end, attempt > 0)
        yield from _until(ctx, lambda s: True if selection_on_call(s, editor) else None, 6)
        if selection_on_call(_screen(ctx), editor):
            return


def _confirm(ctx: OracleContext, entry: Sequence[int], millis: str, shown: Any) -> Iterator[ActionLike]:
    """Type the page's start into the notebook, again if the next page or the survey number does not show: the
    notebook clears a refused entry, and no shortcut is sent that would mean something to Audacity should the focus
    not have moved yet (its Ctrl+A and Ctrl+K select all and delete)."""
    for attempt in range(3):
        yield _click(entry)
        if attempt:
            yield {"kind": "wait", "seconds": 2}
        yield {"kind": "type", "text": f"{millis}\n"}
        yield from _until(ctx, shown)
        if shown(_screen(ctx)) is not None:
            return


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per page: its code and time off the notebook (GUI), the name and the call's bounds, start in ms and peak from
    the register and the recording (CLI), the label in Audacity and the page confirmed (GUI); then the labels
    exported (GUI) and the summary written from them (CLI)."""
    truth = ctx.truth
    book, editor = truth["notebook"], truth["audacity"]
    origin = notebook_origin(_screen(ctx), book) or (book[0], book[1])
    button = (origin[0] + BUTTON[0] + BUTTON[2] // 2, origin[1] + BUTTON[1] + BUTTON[3] // 2)
    entry = (origin[0] + ENTRY[0] + ENTRY[2] // 2, origin[1] + ENTRY[1] + ENTRY[3] // 2)
    for _ in range(3):  # a second press on page 1 with nothing typed is refused and changes nothing
        yield _click(button)
        yield from _until(ctx, lambda s: read_page(s, origin))
        if read_page(_screen(ctx), origin) is not None:
            break
    # The fields' first digits, read once while neither has the focus (a focused digit is drawn black, not blue).
    fields = selection_fields(_screen(ctx), editor)
    yield from _fit(ctx, editor)
    found: list[tuple[str, float, float]] = []
    peaks: dict[str, float] = {}
    for page in range(1, PAGES + 1):
        shown = read_page(_screen(ctx), origin)
        code, heard = (shown[1], shown[2]) if shown else ("XXXXXX", "0:00")
        yield {"kind": "python", "timeout": 120, "code": MEASURE_PY.format(code=code, heard=heard, db=REGISTER,
                                                                           wav=WAV)}
        assert ctx.obs is not None
        call = re.search(r"^CALL\|([A-Z]+)\|(.+?)\|([0-9.]+)\|([0-9.]+)\|(\d+)\|([0-9.]+)\s*$",
                         ctx.obs.get("terminal", "").replace("\r", ""), re.M)
        name, start, end, millis = (call[2], float(call[3]), float(call[4]), call[5]) if call else ("?", 0.0, 0.5, "0")
        if call:
            found.append((name, start, end))
            peaks[name] = max(peaks.get(name, 0.0), float(call[6]))
        fields = fields or selection_fields(_screen(ctx), editor)
        if fields is not None:
            yield from _select(ctx, editor, fields, start, end)
            yield {"kind": "key", "keys": "ctrl+b"}
            yield {"kind": "type", "text": f"{name}\n"}
        if page < PAGES:
            yield from _confirm(ctx, entry, millis, lambda s, p=page: ((r := read_page(s, origin)) and r[0] == p + 1)
                                or None)
        else:
            yield from _confirm(ctx, entry, millis, lambda s: read_survey(s, origin))
    number = read_survey(_screen(ctx), origin)
    labels = shlex.quote(LABELS)
    digest = None
    for attempt in range(2):  # the shell sees whether the file came; if not, close whatever is open and again
        if attempt:
            for _ in range(3):
                yield {"kind": "key", "keys": "Escape"}
            yield {"kind": "wait", "seconds": 2}
        yield from _export(ctx, editor)
        # The checksum comes from sha256sum in the shell: Python code that names the labels file and writes
        # anything counts as writing it (GuiArtifactViaCli), so the summary's code below never names it.
        yield {"kind": "shell", "timeout": 100,
               "command": f"timeout 90 sh -c 'until [ -s {labels} ]; do sleep 0.5; done'; sleep 1; sha256sum {labels}"}
        assert ctx.obs is not None
        digest = re.search(r"^([0-9a-f]{64})\s", ctx.obs.get("terminal", "").replace("\r", ""), re.M)
        if digest:
            break
    rows: dict[str, list[Any]] = {}
    for name, start, _end in found:
        rows.setdefault(name, [name, 0, start, peaks[name]])[1] += 1
    yield {"kind": "python", "code": SUMMARY_PY.format(rows=[tuple(r) for r in rows.values()], out=SUMMARY,
                                                       survey=number or "unknown",
                                                       digest=digest[1] if digest else "unknown")}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Data-7",
    title="Label a dawn-chorus recording in Audacity from the field notebook and the species register, then "
          "summarise the survey",
    instruction=(
        "A surveyor's dawn-chorus recording, " + WAV + ", is open in Audacity. The open 'Field Notebook' window "
        "holds the surveyor's {pages} pages: press 'Open notebook' for page 1. Each page gives a species CODE and "
        "the time the call was HEARD (minutes:seconds, rounded: the call itself starts within two seconds of it; "
        "other birds call in the recording too, leave them unlabelled). The species register is the SQLite "
        "database " + REGISTER + ": table species (code, name, lang, song_hz), and table retired_codes (code, "
        "replaced_by) for old codes. For every page: find that call's exact start and end in the recording "
        "(sox is installed; a call is a tone burst well above the background noise), select exactly that span in "
        "Audacity (for example by typing the start and end into the Selection toolbar's fields at the bottom) and "
        "add a label (Ctrl+B) whose text is the species' full name exactly as the register spells it. Then type "
        "the call's start in whole milliseconds into the notebook and confirm the page: the next page appears only "
        f"then (within {START_TOL_MS} ms is accepted), and after the last one the survey number. When all pages "
        "are labelled, export the labels from Audacity (File > Export > Export Labels...) to " + LABELS + " (only "
        "Audacity's account can write in ~/survey). Finally, from your shell, write " + SUMMARY + ": first line "
        "'survey <survey number>', second line 'labels sha256 <SHA-256 of the exported labels file>', then one "
        "line per species in the notebook, in order of its first labelled call, as "
        "'<full name>;<number of its labelled calls>;<start of its first call in seconds>;<peak>', where peak is "
        "the largest absolute sample value (0 to 1, as sox's stat prints Maximum and Minimum amplitude) over its "
        "labelled calls. Then finish with done."),
    channels=Channels(
        gui="read each notebook page, label each call in Audacity with its full name, confirm each page with the "
            "call's start, and export the labels",
        cli="resolve each code in the species register, measure each call's start, end and peak in the recording "
            "with sox or python, and write the survey summary with the labels' checksum",
        why_both="the codes, the times heard and the survey number exist only as pixels in the notebook and the "
                 "labels only Audacity can export into ~/survey, while the full names are in a register only the "
                 "shell can open and the exact times come from measuring the recording"),
    setup=setup,
    clauses=(
        Clause("labels_exported", "Audacity exported a label file with labels", check_exported, critical=True),
        Clause("label_times", "one label spans each noted call (start and end within 0.15 s), none elsewhere",
               check_times, weight=2.0, critical=True, cap=0.5),
        Clause("label_names", "each noted call's label is the register's full name, exactly", check_names,
               weight=2.0, critical=True, cap=0.3),
        Clause("survey_number", "the summary names the survey number shown after the last page", check_survey,
               critical=True, cap=0.5),
        Clause("labels_digest", "the summary names the exported labels file's SHA-256", check_digest,
               critical=True, cap=0.5),
        Clause("species_rows", "per species: count, first start and peak level, in order of first call",
               check_rows, weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(LABELS, "gui", description="~/survey/labels.txt (exported by Audacity)"),
        Deliverable(SUMMARY, "cli", description="~/reports/survey-summary.txt"),
    ),
    rules=(GuiArtifactViaCli([LABELS], "the labels must be made and exported in Audacity"),),
    withheld=("pages", "survey", "summary"),
    oracle=oracle,
    profile="full",
    apps=("audacity", "Field Notebook (python3-tk)", "sox", "python3", "sqlite3"),
    max_steps=300,  # the oracle takes 70 to 160 steps, plus waits per redraw and a retried selection
    time_budget_s=2400.0,
)
