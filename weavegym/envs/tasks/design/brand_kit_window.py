"""Weave-Design-4's "Brand Kit" window, seen from the host: its layout, its start, and reading it off the screen.

No TASK here. The window itself is ``fixtures/brand_kit.py`` (Tk, run by the desktop account). Setup hands it
the palette on stdin from a root-only file, waits until it is drawn, then deletes the file, so the palette
lives only in the window, and only after its Palette tab was clicked. The layout is shared: the fixture draws
where it says, and the oracle reads the dot-matrix cells (pixel_font) and clicks where it says.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import PRIVATE_DIR, SetupContext
from weavegym.envs.tasks import pixel_font

APP_DIR = "/usr/local/share/brandkit"
APP = f"{APP_DIR}/brand_kit.py"
KIT_IN = f"{PRIVATE_DIR}/brand-kit.json"
RECORD = f"{PRIVATE_DIR}/brand-approval.json"
KIT_TITLE = "Brand Kit"

GUIDELINES = ("HOUSE STYLE FOR BANNERS", "", "1. FILL THE WHOLE BANNER WITH THE", "   BACKGROUND COLOUR.",
              "2. ACCENT STRIPE ALONG THE BOTTOM, FULL", "   WIDTH, 1/5 OF THE HEIGHT, ROUND DOWN.",
              "3. HEADLINE IN WHITE, CENTRED ABOVE", "   THE STRIPE.", "4. COLOURS EXACTLY AS IN THE PALETTE.")

# The window's geometry (pixels inside it): the fixture draws here, the oracle reads and clicks here.
SCALE, WIDTH, MARK, TEXT_X = 2, 520, (12, 12, 12), 16
ROW_Y = tuple(90 + i * 38 for i in range(6))
NAME_X, HEX_X, NAME_CHARS, FIRST_Y, STATUS_Y = 96, 300, 8, 86, 468


def kit_layout(x: int = 0, y: int = 0) -> dict[str, Any]:
    """Where the Brand Kit puts everything; boxes are [x, y, width, height] inside the window."""
    return {"title": KIT_TITLE, "width": WIDTH, "height": 506, "x": x, "y": y, "scale": SCALE, "mark": list(MARK),
            "heading": "BRAND KIT", "heading_x": 34, "tabs": [[16, 40, 120, 30], [144, 40, 120, 30]],
            "text_x": TEXT_X, "first_y": FIRST_Y, "line_h": 22, "row_y": list(ROW_Y), "swatch_x": 16, "swatch_w": 64,
            "swatch_h": 26, "swatch_dy": -6, "name_x": NAME_X, "hex_x": HEX_X, "form_y": 322,
            "file": [110, 350, 394, 28], "sha256": [110, 384, 394, 28], "headline": [110, 418, 394, 28],
            "submit": [314, 458, 190, 34], "status_y": STATUS_Y}


# ---- on the desktop (setup) ---------------------------------------------------------------------------------

def open_kit(ctx: SetupContext, palette: list[list[str]]) -> tuple[list[int], dict[str, Any]]:
    """Start the Brand Kit at the screen's left with the palette on stdin; once it is drawn, drop the file."""
    layout = kit_layout()
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/brand_kit.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    kit = {"palette": palette, "guidelines": list(GUIDELINES), "layout": layout}
    ctx.write_file(KIT_IN, json.dumps(kit), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {KIT_IN} > {RECORD}", name="brandkit")
    window = ctx.wait_window(f"^{re.escape(KIT_TITLE)}$").geometry
    wait_kit(ctx, window)
    ctx.run(["rm", "-f", KIT_IN])  # the app has read it: the palette now lives only in the window
    return window, layout


def wait_kit(ctx: SetupContext, window: list[int]) -> None:
    """Mapped is not drawn (TCG): wait until the heading and the guidelines read back."""
    try:
        wait_for(lambda: kit_drawn(ctx.client.screenshot(hide_cursor=True).image, window), 120,
                 what="the Brand Kit drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None


# ---- reading the window off the screen (the oracle's eyes; setup's readiness check) ------------------------

def find_origin(image: np.ndarray, window: Sequence[int], reach: int = 40) -> tuple[int, int] | None:
    """The window's canvas origin, from its registration square near where the geometry says it is: the window
    manager may put the client a few pixels off."""
    size = MARK[2]
    ink = image[..., :3].astype(int).sum(axis=2) < 3 * 128
    x0, y0 = window[0] + MARK[0], window[1] + MARK[1]
    for y in range(max(1, y0 - reach), min(image.shape[0] - size - 1, y0 + reach)):
        for x in range(max(1, x0 - reach), min(image.shape[1] - size - 1, x0 + reach)):
            if ink[y, x] and not ink[y - 1, x] and not ink[y, x - 1] and ink[y:y + size, x:x + size].all() \
                    and not ink[y + size, x:x + size].any() and not ink[y:y + size, x + size].any():
                return x - MARK[0], y - MARK[1]
    return None


def kit_drawn(image: np.ndarray, window: Sequence[int]) -> bool:
    """The heading and the guidelines' first line read back: the window is drawn, not just mapped."""
    origin = find_origin(image, window)
    if origin is None:
        return False
    x, y = origin
    return pixel_font.read_text(image, x + 34, y + MARK[1], SCALE, 9) == "BRAND KIT" and \
        pixel_font.read_text(image, x + TEXT_X, y + FIRST_Y, SCALE, len(GUIDELINES[0])) == GUIDELINES[0]


def read_palette(image: np.ndarray, window: Sequence[int]) -> list[tuple[str, str]]:
    """[(name, "#RRGGBB")] as the Palette tab shows it; [] until every row reads as a name and a hex code."""
    origin = find_origin(image, window)
    if origin is None:
        return []
    x, y = origin
    rows = [(pixel_font.read_text(image, x + NAME_X, y + row_y, SCALE, NAME_CHARS),
             pixel_font.read_text(image, x + HEX_X, y + row_y, SCALE, 7)) for row_y in ROW_Y]
    ok = all(re.fullmatch(r"[A-Z]+", name) and re.fullmatch(r"#[0-9A-F]{6}", code) for name, code in rows)
    return rows if ok else []


def read_status(image: np.ndarray, window: Sequence[int]) -> str:
    """The form's dot-matrix status ("SUBMITTED n", "FILL IN ALL THREE"; "" when blank or not found)."""
    origin = find_origin(image, window)
    if origin is None:
        return ""
    return pixel_font.read_text(image, origin[0] + TEXT_X, origin[1] + STATUS_Y, SCALE, 17)


