"""Weave-Docs-1: put a shuffled, partly upside-down scan of a contract back in order and register it.

The scans are pictures: the page numbers, the contract number and the signing
date exist only as pixels (no OCR in the image), so they must be read off the
screen, in the scan viewer that setup opens on the desktop (ImageMagick's
``display``; the shell has no display to open one). The register is a GUI
dialog whose answer lands in a root-only file; the multi-page TIFF (pages
reordered and turned upright) is built with ImageMagick on the command line.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from PIL import Image, ImageSequence

from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.dialogs import await_dialog_exit, form_fields
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.probes_media import MAX_IMAGE_FRAMES, check_image_size

SCANS = f"{HOME}/scans"
TIFF = f"{HOME}/contract.tif"
ANSWER = f"{PRIVATE_DIR}/register.out"
RENDER_DIR = f"{PRIVATE_DIR}/pages"
DIALOG_TITLE = "Document register"
VIEWER_TITLE = "Scans"
PAGE_SIZE = (480, 640)
THUMB = (48, 64)
PAPER = "#f5f2ea"
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
CITIES = ("Lyon", "Ghent", "Porto", "Turin", "Leeds", "Graz", "Malmo", "Brno")
SECTIONS = ("Scope of services", "Fees and payment", "Service levels", "Liability", "Confidentiality",
            "Term and termination", "Data protection", "Subcontracting", "Insurance", "Disputes")
CLAUSES = (
    "The provider maintains the premises and the technical installations.",
    "Invoices are payable within thirty days of receipt.",
    "Either party may terminate this agreement with three months notice.",
    "Response time for urgent requests is four working hours.",
    "The client grants access to the site during business hours.",
    "Prices are revised once a year in line with the index.",
    "All information exchanged remains confidential.",
    "Personal data is processed only on documented instructions.",
    "The provider holds liability insurance for the full term.",
    "No subcontractor is engaged without written consent.",
    "Disputes are first referred to a joint committee.",
    "Spare parts are invoiced at cost plus ten percent.",
)


def _page_lines(ctx: SetupContext, number: int, total: int, contract: str, signed: str) -> list[tuple[int, str]]:
    """(point size, text) lines of one page; every page gets its own sections so the layouts differ."""
    lines: list[tuple[int, str]] = []
    if number == 1:
        lines += [(20, "Service Agreement"), (14, f"Contract no. {contract}"), (11, ""),
                  (11, "between Northwind Facilities Ltd and the Client"), (11, "")]
    for i, s in enumerate(ctx.rng.choice(len(SECTIONS), size=int(ctx.rng.integers(1, 3)), replace=False)):
        lines.append((14, f"{number}.{i + 1} {SECTIONS[int(s)]}"))
        for c in ctx.rng.choice(len(CLAUSES), size=int(ctx.rng.integers(2, 6)), replace=False):
            lines.append((11, CLAUSES[int(c)]))
        lines.append((11, ""))
    if number == total:
        lines += [(12, f"Signed in {CITIES[int(ctx.rng.integers(len(CITIES)))]} on {signed}"), (11, ""),
                  (11, "For the provider: ____________"), (11, ""), (11, "For the client: ____________")]
    return lines


def _render(ctx: SetupContext, path: str, lines: list[tuple[int, str]], footer: str) -> None:
    cmd = ["convert", "-size", "x".join(map(str, PAGE_SIZE)), f"xc:{PAPER}", "-font", "DejaVu-Sans", "-fill", "#222"]
    y = 50
    for size, text in lines:
        if text:
            cmd += ["-pointsize", str(size), "-annotate", f"+36+{y}", text]
        y += size + 9
    cmd += ["-pointsize", "15", "-annotate", f"+190+{PAGE_SIZE[1] - 28}", footer, path]
    ctx.run(cmd)


def _thumb(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("L").resize(THUMB, Image.BILINEAR), dtype=np.float32)


def setup(ctx: SetupContext) -> Prepared:
    total = int(ctx.rng.integers(4, 6))
    contract = f"K-{int(ctx.rng.integers(10000, 100000))}"
    year, month, day = 2026, int(ctx.rng.integers(1, 13)), int(ctx.rng.integers(1, 29))
    ctx.make_private_dir()
    ctx.run(["install", "-d", "-m", "0700", RENDER_DIR])
    thumbs = []
    for number in range(1, total + 1):
        path = f"{RENDER_DIR}/page{number}.png"
        _render(ctx, path, _page_lines(ctx, number, total, contract, f"{day} {MONTHS[month - 1]} {year}"),
                f"Page {number} of {total}")
        with Image.open(io.BytesIO(ctx.client.download(path))) as img:
            thumbs.append(_thumb(img).astype(np.uint8).tobytes().hex())
    names = sorted({f"IMG_{int(n):04d}.png" for n in ctx.rng.choice(9000, size=total, replace=False) + 1000})
    order = [int(i) for i in ctx.rng.permutation(total)]  # scan names[k] shows page order[k] + 1
    flipped = {int(i) for i in ctx.rng.choice(total, size=int(ctx.rng.integers(1, 3)), replace=False)}
    ctx.run(["install", "-d", "-o", ctx.user, "-g", ctx.user, SCANS])
    for k, name in enumerate(names):
        turn = ["-rotate", "180"] if k in flipped else []
        ctx.run(["convert", f"{RENDER_DIR}/page{order[k] + 1}.png", *turn, "-background", PAPER,
                 "-rotate", f"{ctx.rng.uniform(-0.8, 0.8):.2f}", "-gravity", "center",
                 "-extent", "x".join(map(str, PAGE_SIZE)), f"{SCANS}/{name}"])
    ctx.run(["bash", "-c", f"chown {ctx.user}: {SCANS}/* && rm -rf {RENDER_DIR}"])
    # The scans as the GUI shows them: a viewer on the desktop (space shows the next one).
    ctx.launch_gui(f"cd {SCANS} && {{as_user}} display -title '{VIEWER_TITLE}' -resize 75% {' '.join(names)}",
                   name="viewer")
    ctx.wait_window(f"^{VIEWER_TITLE}")
    ctx.launch_gui(
        f"{{as_user}} zenity --forms --title='{DIALOG_TITLE}' --text='Register the scanned contract' "
        f"--add-entry='Contract number' --add-entry='Signed on (YYYY-MM-DD)' > {ANSWER}", name="register")
    window = ctx.wait_window(f"^{DIALOG_TITLE}$")
    by_page = sorted(range(total), key=lambda k: order[k])
    return Prepared(params={"pages": total},
                    truth={"contract": contract, "signed": f"{year}-{month:02d}-{day:02d}", "thumbs": thumbs,
                           "scans_in_order": [names[k] for k in by_page],
                           "flipped": sorted(names[k] for k in flipped),
                           "window": window.geometry})


def check_contract_number(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    fields = form_fields(probe, ANSWER)
    if fields is None:
        return Verdict.failed("the register dialog was not confirmed (no answer recorded)")
    return Verdict.check(fields[0].strip().upper() == truth["contract"],
                         f"registered contract number {fields[0][:30]!r}, expected {truth['contract']!r}")


def check_signed_on(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    fields = form_fields(probe, ANSWER)
    if fields is None or len(fields) < 2:
        return Verdict.failed("the register dialog was not confirmed")
    return Verdict.check(fields[1].strip() == truth["signed"],
                         f"registered signing date {fields[1][:30]!r}, expected {truth['signed']!r}")


def _tiff_pages(probe: Probe) -> list[np.ndarray] | None:
    data = probe.read_bytes(TIFF)
    if data is None:
        return None
    try:
        with Image.open(io.BytesIO(data)) as img:
            if img.format != "TIFF" or getattr(img, "n_frames", 1) > MAX_IMAGE_FRAMES:
                return None
            pages = []
            for frame in ImageSequence.Iterator(img):
                check_image_size(frame)
                pages.append(_thumb(frame))
            return pages
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None


def _identify(page: np.ndarray, truth: Mapping[str, Any]) -> tuple[int, bool]:
    """(page number, upright?) of the reference page (upright or turned 180 degrees) closest to ``page``."""
    best = (float("inf"), 0, True)
    for number, hexed in enumerate(truth["thumbs"], start=1):
        ref = np.frombuffer(bytes.fromhex(hexed), dtype=np.uint8).reshape(THUMB[1], THUMB[0]).astype(np.float32)
        for upright, candidate in ((True, ref), (False, ref[::-1, ::-1])):
            best = min(best, (float(np.abs(candidate - page).mean()), number, upright))
    return best[1], best[2]


def check_tiff_pages(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    pages = _tiff_pages(probe)
    if pages is None:
        return Verdict.failed(f"{TIFF} is missing or not a TIFF image")
    expected = len(truth["thumbs"])
    return Verdict.check(len(pages) == expected, f"{TIFF} has {len(pages)} page(s), expected {expected}")


def check_tiff_order(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    pages = _tiff_pages(probe)
    if not pages:
        return Verdict.failed(f"{TIFF} is missing or has no pages")
    found = [_identify(page, truth)[0] for page in pages]
    expected = list(range(1, len(truth["thumbs"]) + 1))
    return Verdict.check(found == expected, f"pages in the TIFF read as {found}, expected {expected}")


def check_tiff_upright(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    pages = _tiff_pages(probe)
    if not pages:
        return Verdict.failed(f"{TIFF} is missing or has no pages")
    upside_down = [i + 1 for i, page in enumerate(pages) if not _identify(page, truth)[1]]
    return Verdict.check(not upside_down, f"upside-down TIFF pages: {upside_down or 'none'}")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    flipped = set(ctx.truth["flipped"])
    parts = [f"\\( {name} -rotate 180 \\)" if name in flipped else name for name in ctx.truth["scans_in_order"]]
    yield {"kind": "shell", "command": f"cd ~/scans && convert {' '.join(parts)} ~/contract.tif && identify "
                                       "~/contract.tif"}
    x, y, w, _h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w - 90, "y": y + 33}  # the "Contract number" entry
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "type", "text": ctx.truth["contract"]}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": ctx.truth["signed"]}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "key", "keys": "Return"}  # focus is on OK now
    yield await_dialog_exit()
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Docs-1",
    title="Reassemble a scanned contract and register it",
    instruction=(
        "The {pages} PNG files in ~/scans are the scanned pages of one contract, in no particular order, and "
        "some were fed into the scanner upside down (the open 'Scans' viewer shows them: space for the next "
        "one, backspace for the previous). "
        "1) Build ~/contract.tif, a multi-page TIFF with the {pages} pages in reading order (Page 1 first) and "
        "every page upright. 2) In the open 'Document register' dialog, enter the contract number printed on "
        "the first page and the date the contract was signed (last page) as YYYY-MM-DD, and confirm with OK. "
        "Then finish."),
    channels=Channels(
        gui="read the page numbers, contract number and signing date off the scans; fill in the register dialog",
        cli="reorder and rotate the scans and combine them into a multi-page TIFF with ImageMagick",
        why_both="the facts exist only as pixels and the register only as a GUI dialog, while the TIFF needs "
                 "ImageMagick on the command line"),
    setup=setup,
    clauses=(
        Clause("contract_number", "the register dialog got the contract number", check_contract_number,
               weight=2.0, critical=True, cap=0.5),
        Clause("signed_on", "the register dialog got the signing date", check_signed_on),
        Clause("tiff_pages", "~/contract.tif is a TIFF with one page per scan", check_tiff_pages),
        Clause("tiff_order", "the TIFF pages are in reading order", check_tiff_order, weight=2.0),
        Clause("tiff_upright", "every TIFF page is upright", check_tiff_upright),
    ),
    deliverables=(
        Deliverable(ANSWER, "gui", owner="root", description="the register dialog's answer (captured by setup)"),
        Deliverable(TIFF, "cli", description="~/contract.tif"),
    ),
    oracle=oracle,
    apps=("imagemagick", "zenity"),
    max_steps=40,
    time_budget_s=900.0,
)
