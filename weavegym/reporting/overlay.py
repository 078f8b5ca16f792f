"""Draw an agent's action onto the frame it acted on, so a reviewer sees *where* it clicked or what it typed.

Coordinates in an action are screen pixels; the frame we draw on may be a scaled copy (the report shrinks frames),
so every point is mapped through ``screen``. Marks are drawn with a dark halo under a saturated colour so they stay
visible on light and dark desktops alike, and text goes into caption boxes rather than onto the screenshot itself.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from weavegym.envs.actions import CLI_KINDS

RGB = tuple[int, int, int]
Font = ImageFont.FreeTypeFont | ImageFont.ImageFont

# One colour per kind/button, so a right click is never mistaken for a left one in a screenshot.
COLORS: dict[str, RGB] = {
    "click": (255, 40, 40),
    "click:middle": (255, 150, 0),
    "click:right": (30, 110, 255),
    "right_click": (30, 110, 255),
    "double_click": (210, 0, 255),
    "mouse_down": (255, 215, 0),
    "mouse_up": (255, 215, 0),
    "move": (0, 225, 255),
    "drag": (0, 210, 90),
    "scroll": (255, 120, 0),
    "done": (20, 160, 60),
    "fail": (200, 20, 20),
}
HALO: RGB = (0, 0, 0)
CAPTION_BG = (20, 20, 20, 215)
CAPTION_FG: RGB = (255, 255, 255)

# Checked in order; a CJK-capable font first (when installed) so typed CJK text is legible, DejaVu otherwise.
FONT_CANDIDATES: tuple[str, ...] = (
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",  # fonts-noto-cjk
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",  # fonts-wqy-microhei
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",  # fonts-dejavu-core
)
_CAPTION_CHARS = 200  # longest caption before measuring; the box truncates further to fit the width
_CONTROL_GLYPHS = {"\n": "↵", "\r": "", "\t": "⇥"}


@functools.lru_cache(maxsize=16)
def font(size: int) -> Font:
    """The first installed candidate font at ``size`` px, else PIL's built-in font (never raises)."""
    for candidate in FONT_CANDIDATES:
        if Path(candidate).is_file():
            try:
                return ImageFont.truetype(candidate, size)
            except OSError:
                continue
    return ImageFont.load_default(size)


def clean_text(text: object) -> str:
    """``text`` as a drawable, encodable string: lone surrogates and control characters become visible marks."""
    value = str(text).encode("utf-8", "replace").decode("utf-8")
    out = []
    for ch in value:
        if ch in _CONTROL_GLYPHS:
            out.append(_CONTROL_GLYPHS[ch])
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append("�")
        else:
            out.append(ch)
    return "".join(out)


def draw_action(frame: Image.Image, action: Mapping[str, Any] | None, screen: tuple[int, int]) -> Image.Image:
    """A copy of ``frame`` with ``action`` drawn on it; ``screen`` is (width, height) of the action's coordinates.

    Unknown kinds and malformed fields draw a caption with the raw kind instead of raising: a report of a broken
    episode is exactly when the drawing must not crash.
    """
    mode = frame.mode if frame.mode in ("RGB", "RGBA") else "RGB"
    base = frame.convert("RGBA")
    if not action:
        return base.convert(mode)
    layer = Image.new("RGBA", base.size, (0, 0, 0, 0))
    _Painter(layer, screen).paint(action)
    return Image.alpha_composite(base, layer).convert(mode)


class _Painter:
    """Maps screen coordinates onto the layer and draws each kind's mark."""

    def __init__(self, layer: Image.Image, screen: tuple[int, int]) -> None:
        self.layer = layer
        self.draw = ImageDraw.Draw(layer)
        width, height = layer.size
        sw, sh = (max(1, int(v)) for v in screen) if screen and all(screen) else (width, height)
        self.sx, self.sy = width / sw, height / sh
        self.radius = max(8, round(min(width, height) * 0.03))
        self.line = max(2, self.radius // 4)
        self.font = font(max(11, round(min(width, height) * 0.03)))

    def point(self, action: Mapping[str, Any], xkey: str = "x", ykey: str = "y") -> tuple[float, float] | None:
        x, y = action.get(xkey), action.get(ykey)
        if not isinstance(x, int | float) or not isinstance(y, int | float):
            return None
        width, height = self.layer.size
        return (min(max(x * self.sx, 0), width - 1), min(max(y * self.sy, 0), height - 1))

    def centre(self) -> tuple[float, float]:
        return (self.layer.width / 2, self.layer.height / 2)

    def paint(self, action: Mapping[str, Any]) -> None:
        kind = str(action.get("kind", "?"))
        button = str(action.get("button") or "left")
        at = self.point(action)
        if kind in ("click", "double_click", "right_click", "mouse_down", "mouse_up") and at is not None:
            key = f"click:{button}" if kind == "click" and button != "left" else kind
            self.ring(at, COLORS[key], double=kind == "double_click", filled=kind == "mouse_down")
            if kind in ("mouse_down", "mouse_up"):
                self.caption(f"{kind} ({button})")
        elif kind == "move" and at is not None:
            self.dot(at, COLORS["move"])
        elif kind == "drag" and at is not None and (end := self.point(action, "to_x", "to_y")) is not None:
            self.dot(at, COLORS["drag"])
            self.arrow(at, end, COLORS["drag"])
        elif kind == "scroll":
            self.scroll(action, at or self.centre())
        elif kind == "type":
            self.caption(f"type: {clean_text(action.get('text', ''))}")
        elif kind == "key":
            self.caption(f"key: {clean_text(action.get('keys', ''))}")
        elif kind in CLI_KINDS:
            source = str(action.get("command") or action.get("code") or "")
            first, _, rest = source.strip("\n").partition("\n")
            more = " …" if rest.strip() else ""
            self.caption(("$ " if kind == "shell" else ">>> ") + clean_text(first) + more)
        elif kind == "wait":
            self.caption(f"wait {clean_text(action.get('seconds', ''))} s")
        elif kind == "done":
            answer = clean_text(action.get("answer") or "")
            self.banner(f"DONE: {answer}" if answer else "DONE", COLORS["done"])
        elif kind == "fail":
            reason = clean_text(action.get("reason") or "")
            self.banner(f"FAIL: {reason}" if reason else "FAIL", COLORS["fail"])
        else:
            self.caption(f"{clean_text(kind)} (cannot draw)")

    def ring(self, at: tuple[float, float], color: RGB, *, double: bool, filled: bool) -> None:
        x, y = at
        radii = (self.radius, self.radius * 0.6) if double else (self.radius,)
        for r in radii:
            box = (x - r, y - r, x + r, y + r)
            self.draw.ellipse(box, outline=HALO, width=self.line + 2)
            self.draw.ellipse(box, outline=color, fill=(*color, 90) if filled else None, width=self.line)
        arm, gap = self.radius * 1.7, self.radius * 0.35
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            segment = [(x + dx * gap, y + dy * gap), (x + dx * arm, y + dy * arm)]
            self.draw.line(segment, fill=HALO, width=max(1, self.line // 2) + 2)
            self.draw.line(segment, fill=color, width=max(1, self.line // 2))

    def dot(self, at: tuple[float, float], color: RGB) -> None:
        x, y = at
        r = max(3, self.radius // 3)
        self.draw.ellipse((x - r, y - r, x + r, y + r), fill=color, outline=HALO, width=1)

    def arrow(self, start: tuple[float, float], end: tuple[float, float], color: RGB) -> None:
        (x0, y0), (x1, y1) = start, end
        angle = math.atan2(y1 - y0, x1 - x0)
        head = self.radius * 1.2
        wing = math.radians(28)
        tip = [(x1, y1),
               (x1 - head * math.cos(angle - wing), y1 - head * math.sin(angle - wing)),
               (x1 - head * math.cos(angle + wing), y1 - head * math.sin(angle + wing))]
        base = (x1 - head * 0.8 * math.cos(angle), y1 - head * 0.8 * math.sin(angle))  # the shaft stops inside the head
        self.draw.line([start, base], fill=HALO, width=self.line + 2)
        self.draw.polygon(tip, fill=HALO)
        self.draw.line([start, base], fill=color, width=self.line)
        inner = [(x1 - math.cos(angle) * 2, y1 - math.sin(angle) * 2), *tip[1:]]
        self.draw.polygon(inner, fill=color)

    def scroll(self, action: Mapping[str, Any], at: tuple[float, float]) -> None:
        dx = action.get("dx") if isinstance(action.get("dx"), int | float) else 0
        dy = action.get("dy") if isinstance(action.get("dy"), int | float) else 0
        if dx == 0 and dy == 0:
            self.caption("scroll (no direction)")
            return
        norm = math.hypot(dx, dy)
        length = self.radius * min(6.0, 2.0 + norm * 0.5)
        x, y = at
        self.dot(at, COLORS["scroll"])
        self.arrow(at, (x + dx / norm * length, y + dy / norm * length), COLORS["scroll"])
        self.caption(f"scroll dx={dx} dy={dy}")

    def caption(self, text: str) -> None:
        """Text in a box along the bottom edge, cut with an ellipsis to fit the frame's width."""
        pad = max(3, self.font.size // 3) if isinstance(self.font, ImageFont.FreeTypeFont) else 3
        text = _fit(text[:_CAPTION_CHARS], self.font, self.layer.width - 2 * pad - 4)
        left, top, right, bottom = self.draw.textbbox((0, 0), text, font=self.font)
        height = bottom - top + 2 * pad
        y0 = self.layer.height - height - 2
        box_right = min(self.layer.width - 2, right - left + 2 * pad + 2)
        self.draw.rectangle((2, y0, box_right, y0 + height), fill=CAPTION_BG)
        self.draw.text((2 + pad - left, y0 + pad - top), text, font=self.font, fill=CAPTION_FG)

    def banner(self, text: str, color: RGB) -> None:
        """A full-width bar at the top: the end of an episode should be impossible to miss."""
        pad = 6
        text = _fit(text[:_CAPTION_CHARS], self.font, self.layer.width - 2 * pad)
        left, top, right, bottom = self.draw.textbbox((0, 0), text, font=self.font)
        height = bottom - top + 2 * pad
        self.draw.rectangle((0, 0, self.layer.width, height), fill=(*color, 230))
        x = max(pad, (self.layer.width - (right - left)) / 2)
        self.draw.text((x - left, pad - top), text, font=self.font, fill=CAPTION_FG)


def _fit(text: str, font_: Font, width: float) -> str:
    """The longest prefix of ``text`` (plus '…') that renders within ``width`` pixels."""
    if font_.getlength(text) <= width:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # binary search on the prefix length
        mid = (lo + hi + 1) // 2
        if font_.getlength(text[:mid] + "…") <= width:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + "…"


@dataclass(frozen=True)
class AnnotatedFrame:
    """One step's annotated image: the frame the action was applied to, with the action drawn on it."""

    index: int
    path: Path  # <episode>/annotated/<index>.jpg
    size: tuple[int, int]  # (width, height) as written
    source: Path | None  # the raw frame drawn on; None when it was missing and a placeholder stands in


def annotate_steps(
    episode_dir: Path, steps: Sequence[Mapping[str, Any]], *, max_width: int = 960, quality: int = 85
) -> list[AnnotatedFrame]:
    """Write ``annotated/<index>.jpg`` for every step and return them in step order.

    Step k's action acted on the screen the agent saw, i.e. the frame recorded with step k-1, so that is the frame
    drawn on (the reset, step 0, shows its own frame). A missing frame file gets a placeholder, so every step still
    has exactly one image and exports keep one video frame per step.
    """
    out_dir = episode_dir / "annotated"
    out_dir.mkdir(exist_ok=True)
    cache: dict[str, Image.Image] = {}
    annotated = []
    for position, step in enumerate(steps):
        shown = steps[position - 1] if position > 0 else step
        frame_meta = shown.get("frame") if isinstance(shown.get("frame"), Mapping) else {}
        screen = (int(frame_meta.get("width") or 0), int(frame_meta.get("height") or 0))
        source = _frame_path(episode_dir, shown.get("frame_file"))
        base = _scaled(source, max_width, cache) if source is not None else None
        if base is None:
            base, source = _placeholder(screen, max_width, str(shown.get("frame_file") or "no frame recorded")), None
        action = step.get("action") if isinstance(step.get("action"), Mapping) else None
        image = draw_action(base, action, screen if all(screen) else base.size).convert("RGB")
        path = out_dir / f"{int(step.get('index', position))}.jpg"
        image.save(path, "JPEG", quality=quality)
        annotated.append(AnnotatedFrame(int(step.get("index", position)), path, image.size, source))
    return annotated


def _frame_path(episode_dir: Path, frame_file: object) -> Path | None:
    """The frame file inside ``episode_dir``, or None when it is unset, outside the episode or missing."""
    if not isinstance(frame_file, str) or not frame_file:
        return None
    path = (episode_dir / frame_file).resolve()
    if not path.is_relative_to(episode_dir.resolve()) or not path.is_file():
        return None
    return path


def _scaled(path: Path, max_width: int, cache: dict[str, Image.Image]) -> Image.Image | None:
    """``path`` decoded and shrunk to ``max_width``; frames are shared between steps, so keep the last few."""
    key = str(path)
    if key not in cache:
        try:
            with Image.open(path) as raw:
                image = raw.convert("RGB")
        except (OSError, SyntaxError, ValueError):  # a truncated or corrupt PNG from a crashed episode
            return None
        if image.width > max_width:
            image = image.resize((max_width, max(1, round(image.height * max_width / image.width))), Image.LANCZOS)
        if len(cache) >= 4:
            cache.pop(next(iter(cache)))
        cache[key] = image
    return cache[key]


def _placeholder(screen: tuple[int, int], max_width: int, label: str) -> Image.Image:
    width, height = screen if all(screen) else (640, 400)
    if width > max_width:
        width, height = max_width, max(1, round(height * max_width / width))
    image = Image.new("RGB", (width, height), (60, 60, 60))
    draw = ImageDraw.Draw(image)
    text = _fit(f"frame missing: {clean_text(label)}", font(14), width - 20)
    draw.text((10, height / 2), text, font=font(14), fill=(230, 230, 230))
    return image
