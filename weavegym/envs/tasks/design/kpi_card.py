"""Weave-Design-2: put the quarter's revenue on a KPI card in Inkscape, then export it as a PNG.

The figure has to be computed from a sales ledger (CLI: filter by quarter,
region and status, sum). The card belongs to the studio's 'designer' account
(a third account, put on the X access list by setup), whose Inkscape window has
it open: the card is 0644 in the designer's 0755 folder, so the shell
(workspace account) and the desktop account can read it but neither can write,
replace or add to it; only that window can put the figure in and save it. The
400 px PNG export is an Inkscape command-line job for the shell, in ~/kpi
(shared group, setgid; the designer is not in the group and cannot write there),
checked by its pixels and owned by the workspace account.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, LAUNCH_MARKER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.evaluators import Clause, Probe, Verdict

STUDIO, DESIGNER = "/srv/studio", "designer"
SVG = f"{STUDIO}/kpi.svg"
PNG = f"{HOME}/kpi/kpi.png"
LEDGER = f"{HOME}/kpi/ledger.csv"
REGIONS = ("North", "South", "East", "West")
RED, BLUE = (0xC0, 0x39, 0x2B), (0x1F, 0x4E, 0x79)
INK = "{http://www.inkscape.org/namespaces/inkscape}"
CARD = """<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="800" height="450" viewBox="0 0 800 450">
  <rect id="card" x="0" y="0" width="800" height="450" fill="#f4f1ea"/>
  <rect id="band" x="0" y="0" width="800" height="90" fill="#1f4e79"/>
  <text id="title" x="40" y="60" font-family="DejaVu Sans" font-size="36" fill="#ffffff">{title}</text>
  <text id="total" x="40" y="260" font-family="DejaVu Sans" font-size="96" font-weight="bold" fill="#c0392b">?</text>
  <text id="note" x="40" y="400" font-family="DejaVu Sans" font-size="22" fill="#555555">{note}</text>
</svg>
"""
NOTE = "EUR, closed sales only (voided sales excluded)"


def figure_point(screen: np.ndarray) -> tuple[int, int] | None:
    """A pixel on the red figure's ink, or None while it is not drawn (runs of red rows under 30 px are swatches)."""
    mask = np.abs(screen[..., :3].astype(int) - RED).max(axis=2) < 16
    rows = [*mask.any(axis=1).tolist(), False]
    best, start = None, None
    for row, red in enumerate(rows):
        if red and start is None:
            start = row
        elif not red and start is not None:
            if row - start >= 30 and (best is None or row - start > best[1] - best[0]):
                best = (start, row)
            start = None
    if best is None:
        return None
    ys, xs = np.nonzero(mask[best[0]:best[1]])
    ys = ys + best[0]
    nearest = int(np.argmin((ys - ys.mean()) ** 2 + (xs - xs.mean()) ** 2))
    return int(xs[nearest]), int(ys[nearest])


def setup(ctx: SetupContext) -> Prepared:
    region = REGIONS[int(ctx.rng.integers(len(REGIONS)))]
    rows, total = [], 0
    for _ in range(int(ctx.rng.integers(140, 200))):
        month, day = int(ctx.rng.integers(6, 11)), int(ctx.rng.integers(1, 29))
        where = REGIONS[int(ctx.rng.integers(len(REGIONS)))]
        amount = int(ctx.rng.integers(100, 40000))
        status = "void" if ctx.rng.random() < 0.12 else "closed"
        rows.append(f"2026-{month:02d}-{day:02d},{where},{amount},{status}")
        total += amount if where == region and 7 <= month <= 9 and status == "closed" else 0
    rows.sort()
    title = f"Q3 2026 revenue - {region} region"
    ctx.write_file(LEDGER, "date,region,amount_eur,status\n" + "\n".join(rows) + "\n")
    ctx.run(f"id -u {DESIGNER} >/dev/null 2>&1 || useradd --create-home --shell /bin/bash {DESIGNER}; "
            f"install -d -m 0755 -o {DESIGNER} -g {DESIGNER} {STUDIO}")
    # 0644: the designer's Inkscape saves it; neither episode account may write it in place.
    ctx.write_file(SVG, CARD.format(title=title, note=NOTE), owner=DESIGNER, mode=0o644)
    ctx.grant_desktop_access(DESIGNER)  # the X server admits the desktop account only
    ctx.launch_gui(f"runuser -u {DESIGNER} -- env DISPLAY=:0 HOME=/home/{DESIGNER} {LAUNCH_MARKER} inkscape {SVG}",
                   name="inkscape")
    ctx.wait_window(r"^kpi\.svg - Inkscape$", timeout=300)
    # The window is mapped long before Inkscape draws the document under TCG: wait for the figure itself.
    try:
        point = wait_for(lambda: figure_point(ctx.client.screenshot().image), 300, what="the card drawn in Inkscape",
                         max_poll=2.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    return Prepared(params={"region": region}, truth={"total": f"{total:,}", "title": title, "figure": point})


def _by_id(probe: Probe) -> dict[str, Any] | None:
    root = probe.xml(SVG)
    if root is None:
        return None
    found: dict[str, Any] = {"__root__": root}
    for element in root.iter():
        if element.get("id"):
            found[element.get("id")] = element
    return found


def check_total(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    elements = _by_id(probe)
    if elements is None or "total" not in elements:
        return Verdict.failed(f"{SVG} is missing, not XML, or lost its 'total' text")
    text = "".join(elements["total"].itertext()).strip()
    return Verdict.check(text.replace(" ", "") == truth["total"], f"the total reads {text[:30]!r}, expected "
                                                                  f"{truth['total']}")


def check_saved_in_inkscape(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    stat, elements = probe.stat(SVG), _by_id(probe)
    if stat is None or elements is None:
        return Verdict.failed(f"{SVG} is missing or not XML")
    views = [e for e in elements["__root__"].iter() if e.tag.endswith("namedview")]
    from_gui = stat.owner == DESIGNER and any(v.get(f"{INK}window-width") for v in views)
    kept = {key: "".join(elements[key].itertext()).strip() if key in elements else None
            for key in ("title", "note")}
    intact = kept == {"title": truth["title"], "note": NOTE} and "band" in elements and "card" in elements
    return Verdict.check(from_gui and intact, f"owner {stat.owner} (expected {DESIGNER}), saved from the Inkscape "
                                              f"window: {from_gui}; other elements intact: {intact}")


def check_png(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    image = probe.image(PNG)
    if image is None:
        return Verdict.failed(f"{PNG} is missing or not an image")
    if image.shape[:2] != (225, 400):
        return Verdict.failed(f"{PNG} is {image.shape[1]}x{image.shape[0]}, expected 400x225")
    pixels = image.astype(int)
    band = bool(np.abs(pixels[5, 390] - BLUE).max() < 12)
    red = np.abs(pixels - RED).max(axis=2) < 24
    xs = np.nonzero(red.any(axis=0))[0]
    width = int(xs.max() - xs.min() + 1) if xs.size else 0
    expected = 0.5 * 0.5 * 0.55 * 96 * len(truth["total"])  # half the width the figure needs at 400 px
    return Verdict.check(band and width >= expected, f"400x225 PNG; header band colour: {band}; figure "
                                                     f"{width} px wide (needs >= {expected:.0f} for "
                                                     f"{truth['total']})")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    region, total = ctx.params["region"], ctx.truth["total"]
    yield {"kind": "shell", "command": "cd ~/kpi && python3 -c \"import csv; print(format(sum(int(r['amount_eur']) "
                                       "for r in csv.DictReader(open('ledger.csv')) if r['region'] == "
                                       f"'{region}' and r['status'] == 'closed' and r['date'][5:7] in "
                                       "('07', '08', '09')), ','))\""}
    x, y = ctx.truth["figure"]
    yield {"kind": "click", "x": x, "y": y}  # selects the figure and focuses the canvas
    yield {"kind": "key", "keys": "t"}  # the text tool puts its cursor into the selected text (no double-click timing)
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "type", "text": total}
    yield {"kind": "key", "keys": "Escape"}
    yield {"kind": "key", "keys": "ctrl+s"}
    yield {"kind": "shell", "timeout": 300,
           "command": f"timeout 120 sh -c 'until grep -q \">{total}<\" {SVG}; do sleep 0.5; done'; "
                      # The shell cannot write the desktop's ~/.config: Inkscape's preferences go to /tmp.
                      f"XDG_CONFIG_HOME=/tmp/ink-config XDG_CACHE_HOME=/tmp/ink-cache "
                      f"inkscape {SVG} --export-type=png --export-width=400 --export-filename=$HOME/kpi/kpi.png "
                      "2>/dev/null; ls -l ~/kpi/kpi.png"}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Design-2",
    title="Put Q3 revenue on the KPI card in Inkscape and export it",
    instruction=(
        f"The KPI card {SVG} is open in Inkscape. The card belongs to the studio's '{DESIGNER}' account, which runs "
        "that Inkscape window: your shell can read the file, but only that window can change it. The card's big red "
        "'?' must become the Q3 2026 (July to September) revenue of the {region} region: the sum of amount_eur in "
        "~/kpi/ledger.csv over that region's rows in Q3 whose status is 'closed', written as a whole number with "
        "comma thousands separators (e.g. 1,234,567). Edit the figure in that Inkscape window (leave the rest of "
        "the card as it is) and save it there with Ctrl+S. Then, from your shell, export the saved card as a "
        "400 px wide PNG to ~/kpi/kpi.png (e.g. Inkscape's command line), then finish."),
    channels=Channels(
        gui="edit the figure on the card in the designer's Inkscape window and save it there",
        cli="sum the ledger; export the 400 px PNG with Inkscape's command line",
        why_both="the figure needs a ledger aggregation in the shell, the card can only be changed by the designer's "
                 "Inkscape window (no episode account can write it), and the export is a command-line job whose "
                 "PNG must belong to the shell's account"),
    setup=setup,
    clauses=(
        Clause("figure", "the card's figure is the Q3 closed revenue of the region", check_total, weight=2.0,
               critical=True, cap=0.5),
        Clause("saved_in_inkscape", "kpi.svg was saved by the designer's Inkscape window, other elements intact",
               check_saved_in_inkscape),
        Clause("png_export", "kpi.png is a 400x225 render of the edited card", check_png),
    ),
    deliverables=(
        Deliverable(SVG, "gui", owner=DESIGNER, description="the card kpi.svg (saved by the designer's Inkscape)"),
        Deliverable(PNG, "cli", description="the 400 px export kpi.png"),
    ),
    oracle=oracle,
    profile="full",
    apps=("inkscape", "python3"),
    max_steps=30,
    time_budget_s=1200.0,
)
