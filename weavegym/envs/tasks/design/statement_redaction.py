"""Weave-Design-1: redact the account numbers of customers who withdrew consent, then publish a web preview.

Who withdrew is only computable from a consent event log (the latest event per
customer; CLI). The redaction is drawn by hand in a small Tk redaction tool
whose record of the boxes goes to a root-only file, so only the GUI can make it.
The published half-size JPEG preview is an ImageMagick job for the shell, and
its pixels must show the redaction (it has to be made from the redacted file).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from datetime import date, timedelta
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.evaluators import Clause, Probe, Verdict

DIR = f"{HOME}/statement"
SOURCE = f"{DIR}/statement.png"
REDACTED = f"{DIR}/statement_redacted.png"
PREVIEW = f"{DIR}/publish/statement_web.jpg"
CONSENT = f"{DIR}/consent_log.csv"
TOOL = "/opt/redact/redact_tool.py"
BOXES = f"{PRIVATE_DIR}/redact.out"
ROWS, ROW_H, TOP, WIDTH = 12, 34, 92, 760
COLUMNS = (20, 110, 330, 600)  # x of: customer id, name, account number, balance
NAMES = ("Ada Lindqvist", "Bruno Costa", "Chiara Ferri", "Dmitri Orlov", "Elena Ruiz", "Farid Haddad", "Grete Blom",
         "Hugo Marchand", "Ines Duarte", "Jonas Weber", "Kaori Sato", "Lena Novak", "Marek Zielinski", "Nora Quist",
         "Omar Shaikh", "Paula Reyes")


def _render(rows: list[tuple[str, str, str, str]]) -> tuple[bytes, list[list[list[int]]]]:
    """The statement as PNG bytes, plus each row's four text boxes [x0, y0, x1, y1]."""
    height = TOP + ROWS * ROW_H + 24
    image = Image.new("RGB", (WIDTH, height), "white")
    draw = ImageDraw.Draw(image)
    font, bold = ImageFont.load_default(size=15), ImageFont.load_default(size=20)
    draw.text((20, 18), "Customer statement - November 2026", fill="black", font=bold)
    for x, head in zip(COLUMNS, ("ID", "Customer", "Account number", "Balance (EUR)"), strict=True):
        draw.text((x, 62), head, fill=(90, 90, 90), font=font)
    draw.line((14, TOP - 4, WIDTH - 14, TOP - 4), fill=(120, 120, 120))
    cells = []
    for i, row in enumerate(rows):
        y = TOP + i * ROW_H + 8
        if i % 2:
            draw.rectangle((14, y - 8, WIDTH - 14, y - 8 + ROW_H - 1), fill=(243, 246, 250))
        boxes = []
        for x, text in zip(COLUMNS, row, strict=True):
            draw.text((x, y), text, fill="black", font=font)
            boxes.append([int(v) for v in draw.textbbox((x, y), text, font=font)])
        cells.append(boxes)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue(), cells


def _consent_log(ctx: SetupContext, ids: list[str], withdrawn: set[str], regranted: set[str]) -> str:
    events = []
    for cid in ids:
        start = int(ctx.rng.integers(0, 200))
        events.append((start, cid, "grant"))
        if cid in withdrawn or cid in regranted:
            events.append((start + int(ctx.rng.integers(20, 120)), cid, "withdraw"))
        if cid in regranted:
            events.append((start + int(ctx.rng.integers(130, 200)), cid, "grant"))
        elif cid not in withdrawn and ctx.rng.random() < 0.4:
            events.append((start + int(ctx.rng.integers(20, 200)), cid, "grant"))
    events.sort()
    first = date(2025, 1, 6)
    lines = [f"{first + timedelta(days=day)}T{9 + (day * 7) % 9:02d}:{(day * 13) % 60:02d}:00,{cid},{kind}"
             for day, cid, kind in events]
    return "timestamp,customer_id,event\n" + "\n".join(lines) + "\n"


def setup(ctx: SetupContext) -> Prepared:
    names = [str(n) for n in ctx.rng.permutation(NAMES)[:ROWS]]
    ids = [f"C{int(v)}" for v in sorted(ctx.rng.choice(np.arange(1000, 9999), ROWS, replace=False))]
    rows = [(cid, name, "DE{:02d} {:04d} {:04d} {:04d} {:04d} {:02d}".format(*(int(ctx.rng.integers(0, m)) for m in
                                                                           (100, 10**4, 10**4, 10**4, 10**4, 100))),
             f"{int(ctx.rng.integers(100, 250000)) / 100:,.2f}") for cid, name in zip(ids, names, strict=True)]
    order = [int(i) for i in ctx.rng.permutation(ROWS)]
    targets = sorted(order[:int(ctx.rng.integers(3, 5))])
    regranted = {ids[i] for i in order[5:7]}
    log = _consent_log(ctx, ids, {ids[i] for i in targets}, regranted)
    png, cells = _render(rows)
    ctx.write_file(SOURCE, png)
    ctx.write_file(CONSENT, log)
    ctx.write_file(TOOL, ctx.fixture(__package__, "fixtures/redact_tool.py"), owner="root")
    ctx.make_private_dir()
    ctx.launch_gui(f"{{as_user}} python3 {TOOL} {SOURCE} {REDACTED} > {BOXES}", name="redact")
    window = ctx.wait_window(r"^Redact - statement\.png$")
    width, height = Image.open(io.BytesIO(png)).size
    return Prepared(params={},
                    truth={"targets": targets, "cells": cells, "size": [width, height],
                           "window": window.geometry})


def _inside(inner: list[int], outer: list[int]) -> bool:
    return outer[0] <= inner[0] and outer[1] <= inner[1] and inner[2] <= outer[2] and inner[3] <= outer[3]


def _overlaps(a: list[int], b: list[int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def check_boxes(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    lines = (probe.read_text(BOXES) or "").strip().splitlines()
    if not lines:
        return Verdict.failed("the redaction tool never saved")
    try:
        boxes = json.loads(lines[-1])["boxes"]
    except (ValueError, KeyError, TypeError):
        return Verdict.failed("the redaction tool's record is unreadable")
    targets, cells = truth["targets"], truth["cells"]
    covered = [i for i in targets if any(_inside(cells[i][2], b) for b in boxes)]
    protected = [c for i, row in enumerate(cells) for col, c in enumerate(row) if not (i in targets and col == 2)]
    over = sum(any(_overlaps(c, b) for b in boxes) for c in protected)
    found = f"{len(boxes)} box(es) cover {len(covered)}/{len(targets)} target account numbers, touch {over} other cells"
    if len(covered) == len(targets) and not over:
        return Verdict.satisfied(found)
    return Verdict.partial(found) if len(covered) == len(targets) else Verdict.failed(found)


def _luma(image: np.ndarray, box: list[int], scale: float = 1.0) -> float:
    x0, y0, x1, y1 = (round(v * scale) for v in box)
    region = image[y0:max(y1, y0 + 1), x0:max(x1, x0 + 1)].astype(float)
    return float(region.mean()) if region.size else 255.0


def _redaction_visible(image: np.ndarray, truth: Mapping[str, Any], scale: float, dark: float, light: float
                       ) -> tuple[bool, str]:
    accounts = [row[2] for row in truth["cells"]]
    black = [i for i in truth["targets"] if _luma(image, accounts[i], scale) < dark]
    kept = [i for i in range(len(accounts)) if i not in truth["targets"] and _luma(image, accounts[i], scale) > light]
    others = len(accounts) - len(truth["targets"])
    ok = len(black) == len(truth["targets"]) and len(kept) == others
    return ok, f"{len(black)}/{len(truth['targets'])} target numbers blacked out, {len(kept)}/{others} others readable"


def check_redacted_png(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    image = probe.image(REDACTED)
    if image is None:
        return Verdict.failed(f"{REDACTED} is missing or not an image")
    width, height = truth["size"]
    if image.shape[:2] != (height, width):
        return Verdict.failed(f"{REDACTED} is {image.shape[1]}x{image.shape[0]}, expected {width}x{height}")
    ok, found = _redaction_visible(image, truth, 1.0, 10.0, 150.0)
    return Verdict.check(ok, f"{REDACTED}: {found}")


def check_preview(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    data = probe.read_bytes(PREVIEW)
    if data is None:
        return Verdict.failed(f"{PREVIEW} does not exist")
    image = probe.image(PREVIEW)
    if not data.startswith(b"\xff\xd8") or image is None:
        return Verdict.failed(f"{PREVIEW} is not a JPEG")
    width, height = truth["size"]
    if abs(image.shape[1] - width / 2) > 1 or abs(image.shape[0] - height / 2) > 1:
        return Verdict.failed(f"preview is {image.shape[1]}x{image.shape[0]}, expected about "
                              f"{width // 2}x{height // 2}")
    ok, found = _redaction_visible(image, truth, image.shape[1] / width, 70.0, 140.0)
    return Verdict.check(ok, f"preview {image.shape[1]}x{image.shape[0]}: {found}")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    yield {"kind": "shell", "command": "cd ~/statement && awk -F, 'NR > 1 { last[$2] = $3 } END { for (c in last) "
                                       "if (last[c] == \"withdraw\") print c }' consent_log.csv"}
    x, y, _w, _h = ctx.truth["window"]
    for i in ctx.truth["targets"]:
        x0, y0, x1, y1 = ctx.truth["cells"][i][2]
        yield {"kind": "drag", "x": x + x0 - 5, "y": y + y0 - 6, "to_x": x + x1 + 5, "to_y": y + y1 + 6}
    yield {"kind": "key", "keys": "ctrl+s"}
    yield {"kind": "shell", "command": "timeout 60 sh -c 'until [ -s statement_redacted.png ]; do sleep 0.2; done'; "
                                       "mkdir -p publish && convert statement_redacted.png -resize 50% "
                                       "publish/statement_web.jpg && identify publish/statement_web.jpg"}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Design-1",
    title="Redact withdrawn customers' account numbers and publish a preview",
    instruction=(
        "~/statement/statement.png is a customer statement that will be published. Customers whose latest event in "
        "~/statement/consent_log.csv is 'withdraw' must not have their account number shown. In the open "
        "'Redact' tool, drag a box over the account number of each such customer (and over nothing else: "
        "names, ids, balances and other rows stay readable), then save with Ctrl+S; the tool writes "
        "~/statement/statement_redacted.png. Then publish a half-size (50% width and height) JPEG of the redacted "
        "statement as ~/statement/publish/statement_web.jpg, then finish."),
    channels=Channels(
        gui="draw the redaction boxes in the Redact tool and save",
        cli="find the customers whose consent is withdrawn; make the half-size JPEG preview with ImageMagick",
        why_both="who to redact comes from a log only the shell can aggregate, the redaction record only from the "
                 "GUI tool, and the preview from ImageMagick on the command line"),
    setup=setup,
    clauses=(
        Clause("redaction_boxes", "the tool's saved boxes cover exactly the withdrawn customers' account numbers",
               check_boxes, weight=2.0, critical=True, cap=0.5),
        Clause("redacted_png", "statement_redacted.png blacks out those numbers and keeps the others",
               check_redacted_png),
        Clause("web_preview", "publish/statement_web.jpg is a half-size JPEG of the redacted statement",
               check_preview),
    ),
    deliverables=(
        Deliverable(BOXES, "gui", owner="root", description="the Redact tool's record of its boxes"),
        Deliverable(REDACTED, "gui", description="statement_redacted.png (saved by the Redact tool)"),
        Deliverable(PREVIEW, "cli", description="publish/statement_web.jpg"),
    ),
    oracle=oracle,
    profile="base",
    apps=("python3-tk", "imagemagick", "awk"),
    max_steps=30,
    time_budget_s=900.0,
)
