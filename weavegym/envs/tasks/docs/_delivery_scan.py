"""Scanned delivery notes as a PDF of pictures, read back off Evince's screen, and the notes Evince saves (no TASK).

Why by hand: the scan must be pixels only (no text layer, so ``pdftotext`` finds nothing), and Debian's
ImageMagick policy refuses to write PDF. A page is one greyscale image XObject (FlateDecode) drawn over the
whole MediaBox; the text on it is the dot-matrix font of ``pixel_font``, so the oracle can read it exactly.

Why registration marks: Evince shows the page at whatever zoom its window gets, and scrolled so the page's
top is near the viewport's. Two solid squares at known places on the page (as scanned forms carry) give the
oracle the page-to-screen mapping from the screenshot itself, whatever the zoom, window or theme.

The annotations parser reads what Evince (poppler) appends on "Save a Copy": an incremental update whose
``/Text`` annotations hold the note in ``/Contents`` (UTF-16BE with a BOM when it is not ASCII) and the
modification time in ``/M``.
"""

from __future__ import annotations

import hashlib
import io
import time
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from weavegym.envs.tasks import pixel_font

PAGE_PX = (1275, 1650)  # US letter at 150 dpi
DPI = 150
MARK = 64  # side of a registration mark, in page pixels; larger than any solid block a glyph has
MARKS = ((60, 60), (1151, 60))  # top-left corners of the two marks
INK, PAPER = 28, 242  # grey levels of the print and the paper
LEFT = 150  # where every text line starts
HEADER = (60, 7)  # y and scale of "DELIVERY NOTE DN-xxxxx"
ORDER_LINE = (150, 6)  # "YOUR ORDER PO-xxxxx"
DATE_LINE = (210, 6)  # "SHIPPED 2026-mm-dd"
TABLE_HEAD = (290, 6)  # "LN ITEM QTY"
ROWS = (350, 56, 6)  # first row's y, row pitch, scale
ROW_CHARS = 20
NOTE_AT = (1000, 700)  # where the oracle clicks to place a note: empty paper below the rows


def row_text(line: int, item: str, qty: int) -> str:
    """One delivery line as printed: line number, item code, quantity in fixed columns."""
    return f"{line:<3d} {item:<9s} {qty:>5d}"


def render_sheet(lines: Sequence[tuple[str, int, int]], rng: np.random.Generator) -> np.ndarray:
    """One scanned sheet: greyscale paper with the scanner's faint shading, the marks, ``(text, y, scale)`` lines.

    No per-pixel noise: it would make each page a megabyte that Flate cannot shrink.
    """
    width, height = PAGE_PX
    tilt = rng.uniform(3, 8)
    shade = np.linspace(0, tilt, width)[None, :] + np.linspace(0, 4, height)[:, None]
    page = PAPER - shade
    for x, y in MARKS:
        page[y:y + MARK, x:x + MARK] = INK
    for text, y, scale in lines:
        for x0, y0, x1, y1 in pixel_font.layout_text(text, LEFT, y, scale):
            page[y0:y1, x0:x1] = INK
    return np.clip(np.rint(page), 0, 255).astype(np.uint8)


def note_lines(dn: str, po: str, shipped: str, rows: Sequence[tuple[int, str, int]]) -> list[tuple[str, int, int]]:
    """The printed lines of one delivery note: number, order, ship date, then one row per delivered line."""
    lines = [(f"DELIVERY NOTE {dn}", *HEADER), (f"YOUR ORDER {po}", *ORDER_LINE), (f"SHIPPED {shipped}", *DATE_LINE),
             ("LN  ITEM        QTY", *TABLE_HEAD)]
    return lines + [(row_text(*row), ROWS[0] + i * ROWS[1], ROWS[2]) for i, row in enumerate(rows)]


def cover_lines(batch: str, supplier_notes: int) -> list[tuple[str, int, int]]:
    """The scanner's batch cover sheet: no delivery facts, so the first screen shows none."""
    return [(f"SCAN BATCH {batch}", *HEADER), (f"{supplier_notes} DELIVERY NOTES FOLLOW", *ORDER_LINE),
            ("RECEIVING DOCK 2", *DATE_LINE)]


def pdf_bytes(pages: Sequence[np.ndarray]) -> bytes:
    """A PDF whose every page is one greyscale picture (FlateDecode), nothing else: no fonts, no text."""
    objects: list[bytes] = [b"", b""]  # 1: catalog, 2: page tree, filled in last
    kids = []
    for image in pages:
        height, width = image.shape
        data = zlib.compress(image.tobytes(), 6)
        objects.append(b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
                       b"/BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream"
                       % (width, height, len(data), data))
        image_id = len(objects)
        w_pt, h_pt = width * 72 / DPI, height * 72 / DPI
        content = b"q %.2f 0 0 %.2f 0 0 cm /Scan Do Q" % (w_pt, h_pt)
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %.2f %.2f] /Resources << /XObject << /Scan "
                       b"%d 0 R >> >> /Contents %d 0 R >>" % (w_pt, h_pt, image_id, image_id + 1))
        kids.append(len(objects))
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    out, offsets = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def page_digest(image: np.ndarray) -> str:
    """SHA-256 of a page's raw pixels: how the checker recognises the scan inside whatever Evince saved."""
    return hashlib.sha256(image.tobytes()).hexdigest()


# --- reading the screen (the oracle's side) ---------------------------------------------------------------

Mapping2D = tuple[float, float, float]  # page-to-screen: screen = origin + scale * page  (ox, oy, scale)


def _squares(full: np.ndarray, k: int) -> list[tuple[float, float, int]]:
    """Solid dark squares from the points where a ``k`` x ``k`` dark block fits: (centre x, centre y, side).

    A solid square of side S leaves a solid (S - k + 1)² block of such points; anything else (a dark
    wallpaper's blobs, an icon) leaves blocks of other shapes, which are skipped.
    """
    found, seen = [], np.zeros_like(full)
    for y, x in zip(*np.nonzero(full), strict=True):
        if seen[y, x]:
            continue
        stack, points = [(y, x)], []
        seen[y, x] = True
        while stack:
            cy, cx = stack.pop()
            points.append((cy, cx))
            for ny, nx in ((cy + 1, cx), (cy - 1, cx), (cy, cx + 1), (cy, cx - 1)):
                if 0 <= ny < full.shape[0] and 0 <= nx < full.shape[1] and full[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    stack.append((ny, nx))
            if len(points) > 40_000:  # a dark area, not a mark
                break
        ys, xs = np.array(points).T
        width, height = xs.max() - xs.min() + 1, ys.max() - ys.min() + 1
        if abs(int(width) - int(height)) <= 2 and len(points) == width * height:
            found.append(((xs.min() + xs.max() + k) / 2, (ys.min() + ys.max() + k) / 2, int(width) + k - 1))
    return found


def find_page(screen: np.ndarray, box: tuple[int, int, int, int]) -> Mapping2D | None:
    """The page-to-screen mapping from the two registration marks inside ``box`` (x, y, w, h), or None.

    A mark is a solid near-black grey square; no glyph has a solid block of ``k`` x ``k`` pixels (two cells
    at most) at any zoom Evince offers a window of this size, while a mark does down to 40 %. The two marks
    are the pair of such squares of one size, on one row, as far apart as the page puts them for that size.
    """
    x, y, w, h = box
    x0, y0 = max(0, x), max(0, y)
    region = screen[y0:y + h, x0:x + w, :3].astype(np.int16)
    dark = ((region.max(axis=2) < 90) & (region.max(axis=2) - region.min(axis=2) <= 12)).astype(np.int32)
    k = 22
    if dark.shape[0] <= k or dark.shape[1] <= k:
        return None
    table = np.pad(dark.cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    full = (table[k:, k:] - table[:-k, k:] - table[k:, :-k] + table[:-k, :-k]) == k * k
    squares = _squares(full, k)
    span = (MARKS[1][0] - MARKS[0][0]) / MARK  # the marks' distance in mark sides
    for lx, ly, lsize in squares:
        for rx, ry, rsize in squares:
            scale = (rx - lx) / (MARKS[1][0] - MARKS[0][0])
            if (rx > lx and abs(ly - ry) <= 3 and abs(lsize - rsize) <= 3
                    and abs((rx - lx) - span * lsize) <= 0.04 * (rx - lx) and abs(lsize - MARK * scale) <= 3):
                centre = MARKS[0][0] + MARK / 2, MARKS[0][1] + MARK / 2
                return lx + x0 - scale * centre[0], ly + y0 - scale * centre[1], scale
    return None


def page_view(screen: np.ndarray, mapping: Mapping2D, rows: int = 700) -> np.ndarray:
    """The top ``rows`` page pixels as the screen shows them, resampled back to page coordinates (nearest)."""
    ox, oy, scale = mapping
    height, width = screen.shape[:2]
    ys = np.clip(np.floor(oy + scale * (np.arange(rows) + 0.5)).astype(int), 0, height - 1)
    xs = np.clip(np.floor(ox + scale * (np.arange(PAGE_PX[0]) + 0.5)).astype(int), 0, width - 1)
    return screen[ys][:, xs]


def read_note(screen: np.ndarray, box: tuple[int, int, int, int]) -> dict[str, Any] | None:
    """What the delivery note on screen says: number, order, rows [(line, item, qty)]; None if unreadable."""
    mapping = find_page(screen, box)
    if mapping is None:
        return None
    view = page_view(screen, mapping)
    shade = (INK, INK, INK), (PAPER, PAPER, PAPER)

    def text(y: int, scale: int, count: int) -> str:
        return pixel_font.read_text(view, LEFT, y, scale, count, ink=shade[0], paper=shade[1])

    header, order = text(HEADER[0], HEADER[1], 22), text(ORDER_LINE[0], ORDER_LINE[1], 20)
    if not header.startswith("DELIVERY NOTE DN-") or not order.startswith("YOUR ORDER PO-"):
        return None
    rows = []
    for i in range(8):
        line = text(ROWS[0] + i * ROWS[1], ROWS[2], ROW_CHARS).split()
        if not line:
            break
        if len(line) != 3 or not line[0].isdigit() or not line[2].isdigit() or pixel_font.UNKNOWN in line[1]:
            return None
        rows.append((int(line[0]), line[1], int(line[2])))
    dn, po = header.split()[-1], order.split()[-1]
    if pixel_font.UNKNOWN in dn + po or not rows:
        return None
    return {"dn": dn, "po": po, "rows": rows, "mapping": mapping}


def find_popup(screen: np.ndarray) -> tuple[int, int, int] | None:
    """Evince's open note window (its yellow title bar): (left, top, right) on screen, or None."""
    rgb = screen[..., :3].astype(np.int16)
    yellow = (rgb[..., 0] > 220) & (rgb[..., 1] > 220) & (rgb[..., 2] < 60)
    wide = np.nonzero(yellow.sum(axis=1) > 150)[0]  # the note icons are 24 px: only the popup is this wide
    if len(wide) == 0:
        return None
    top = int(wide[0])
    xs = np.nonzero(yellow[top + 2])[0]
    return (int(xs.min()), top, int(xs.max())) if len(xs) else None


# --- what Evince saved (the checker's side) ------------------------------------------------------------------

def pdf_date(value: str) -> float | None:
    """Seconds since the epoch of a PDF date ``D:YYYYMMDDHHmmSS`` with ``Z`` or ``+HH'mm'`` (None if malformed)."""
    text = value[2:] if value.startswith("D:") else value
    try:
        stamp = datetime.strptime(text[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return None
    zone = text[14:].replace("'", "")
    if zone[:1] in "+-" and len(zone) >= 5 and zone[1:5].isdigit():
        offset = (int(zone[1:3]) * 60 + int(zone[3:5])) * 60
        return stamp.timestamp() - offset if zone[0] == "+" else stamp.timestamp() + offset
    return stamp.timestamp()


def read_saved(data: bytes, max_pages: int = 50, seconds: float = 20.0) -> dict[str, Any] | None:
    """The pages (pixel digests) and text notes of a saved PDF: {"digests": [...], "notes": [(page, text, when)]}.

    None when it is no PDF pypdf can read within the limits (the episode owns the file: it may be hostile).
    """
    import pypdf  # only this task's checker needs it

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if len(reader.pages) > max_pages:
            return None
        deadline, digests, notes = time.monotonic() + seconds, [], []
        for number, page in enumerate(reader.pages, start=1):
            if time.monotonic() > deadline:
                return None
            digest = ""
            xobjects = page.get("/Resources", {}).get_object().get("/XObject", {})
            for ref in xobjects.get_object().values() if xobjects else ():
                image = ref.get_object()
                if image.get("/Subtype") == "/Image" and image.get("/Width", 0) * image.get("/Height", 0) <= 4e6:
                    digest = hashlib.sha256(image.get_data()).hexdigest()
                    break
            digests.append(digest)
            for ref in page.get("/Annots") or []:
                annot = ref.get_object()
                if annot.get("/Subtype") == "/Text":
                    when = pdf_date(str(annot.get("/M", "")))
                    notes.append((number, str(annot.get("/Contents", "")), when))
        return {"digests": digests, "notes": notes}
    except Exception:  # a broken or hostile PDF can fail anywhere inside pypdf: it is "no document"
        return None
