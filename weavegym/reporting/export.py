"""Turn one episode's annotated frames into a GIF or MP4, for sharing a trajectory outside the report.

Every step becomes exactly one video frame, stamped with its step number: the stamp keeps consecutive frames
distinct, because GIF writers merge identical neighbours and the frame count would stop matching the step count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image, ImageDraw

from weavegym.core.extras import missing_extra
from weavegym.reporting.overlay import annotate_steps, font
from weavegym.reporting.report import read_steps

Format = Literal["gif", "mp4"]


def export_episode(episode_dir: Path, out: Path, *, fps: float = 2.0, fmt: Format | None = None,
                   max_frame_width: int = 960) -> Path:
    """Write the episode in ``episode_dir`` to ``out`` as a GIF or an H.264 MP4 (``fmt`` defaults to the suffix).

    Annotated frames from an earlier report are reused; missing ones are drawn first (``max_frame_width`` wide).
    """
    episode_dir, out = Path(episode_dir), Path(out)
    fmt = fmt or _format_of(out)
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    steps, _bad = read_steps(episode_dir)
    if not steps:
        raise ValueError(f"{episode_dir} has no readable steps.jsonl records to export")
    paths = [episode_dir / "annotated" / f"{int(s.get('index', i))}.jpg" for i, s in enumerate(steps)]
    if not all(p.is_file() for p in paths):
        paths = [a.path for a in annotate_steps(episode_dir, steps, max_width=max_frame_width)]
    images = [_stamp(_load(p), f"{n + 1}/{len(paths)} · step {s.get('index', n)}")
              for n, (p, s) in enumerate(zip(paths, steps, strict=True))]
    frames = _pad_all(images, even=fmt == "mp4")
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "gif":
        _write_gif(frames, out, fps)
    else:
        _write_mp4(frames, out, fps)
    return out


def _format_of(out: Path) -> Format:
    suffix = out.suffix.lower().lstrip(".")
    if suffix == "gif":
        return "gif"
    if suffix == "mp4":
        return "mp4"
    raise ValueError(f"cannot infer the format of {out.name!r}: use a .gif or .mp4 name, or pass fmt=")


def _load(path: Path) -> Image.Image:
    with Image.open(path) as image:
        return image.convert("RGB")


def _stamp(image: Image.Image, label: str) -> Image.Image:
    """``label`` in a small box at the top-right corner, away from the action captions at the bottom."""
    draw = ImageDraw.Draw(image)
    face = font(max(10, image.height // 40))
    left, top, right, bottom = draw.textbbox((0, 0), label, font=face)
    x0 = max(0, image.width - (right - left) - 10)
    draw.rectangle((x0, 0, image.width, bottom - top + 8), fill=(0, 0, 0))
    draw.text((x0 + 5 - left, 4 - top), label, font=face, fill=(255, 255, 255))
    return image


def _pad_all(images: list[Image.Image], *, even: bool) -> np.ndarray:
    """One (n, h, w, 3) array: frames of another size are padded (black) to the largest, never scaled.

    libx264 with yuv420p needs even dimensions, hence ``even``.
    """
    width = max(i.width for i in images)
    height = max(i.height for i in images)
    if even:
        width, height = width + width % 2, height + height % 2
    stack = np.zeros((len(images), height, width, 3), dtype=np.uint8)
    for n, image in enumerate(images):
        stack[n, : image.height, : image.width] = np.asarray(image)
    return stack


def _write_gif(frames: np.ndarray, out: Path, fps: float) -> None:
    try:
        import imageio.v3 as iio  # imported here so the report does not need imageio
    except ModuleNotFoundError as exc:
        raise missing_extra(exc) from None

    iio.imwrite(out, frames, extension=".gif", duration=round(1000 / fps), loop=0)


def _write_mp4(frames: np.ndarray, out: Path, fps: float) -> None:
    """H.264 through imageio-ffmpeg's bundled ffmpeg; frames are already even-sized, so no rescaling."""
    try:
        import imageio.v2 as imageio
    except ModuleNotFoundError as exc:
        raise missing_extra(exc) from None

    writer = imageio.get_writer(out, format="FFMPEG", mode="I", fps=fps, codec="libx264", pixelformat="yuv420p",
                                macro_block_size=1, ffmpeg_log_level="error")
    try:
        for frame in frames:
            writer.append_data(frame)
    finally:
        writer.close()
