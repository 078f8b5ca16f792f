"""Image fingerprints: an exact pixel digest and a perceptual difference hash.

The env fingerprints every frame it captures, and the evaluators compare image
deliverables against those fingerprints. The exact digest proves a deliverable
is a captured frame byte for byte; the perceptual hash (a gradient "dHash")
still matches after PNG/JPEG round trips, a small resize or a moved cursor,
while a picture drawn with PIL differs in most of its bits.
"""

from __future__ import annotations

import hashlib

import numpy as np
from PIL import Image

HASH_SIZE = 16  # 16x16 gradient bits = 256-bit hash
HASH_BITS = HASH_SIZE * HASH_SIZE


def pixel_digest(image: np.ndarray) -> str:
    """SHA-256 of the RGB pixels and the shape, so the same picture in PNG or PPM gives the same digest."""
    rgb = np.ascontiguousarray(to_rgb_array(image))
    h = hashlib.sha256(f"{rgb.shape[0]}x{rgb.shape[1]}:".encode())
    h.update(rgb.tobytes())
    return h.hexdigest()


def perceptual_hash(image: np.ndarray) -> int:
    """256-bit difference hash of the grayscale image: each bit says "brighter than its right neighbour"."""
    gray = Image.fromarray(to_rgb_array(image)).convert("L").resize((HASH_SIZE + 1, HASH_SIZE),
                                                                     Image.Resampling.LANCZOS)
    pixels = np.asarray(gray, dtype=np.int16)
    bits = (pixels[:, 1:] > pixels[:, :-1]).flatten()
    return int("".join("1" if b else "0" for b in bits), 2)


THUMB_SIZE = (96, 54)  # width, height: 15.5 KB of RGB per frame, kept for every captured frame
THUMB_TOLERANCE = 32  # a thumbnail pixel "differs" when a channel is off by more than this


def thumbnail(image: np.ndarray) -> np.ndarray:
    """Area-averaged RGB thumbnail: small enough to keep per frame, detailed enough to compare content.

    A perceptual hash alone is weak on a flat desktop (most gradient bits are ties), so
    a drawn imitation of a mostly-empty screen can land within a few bits of the real one;
    the thumbnails still differ wherever the imitation's content does.
    """
    return np.asarray(Image.fromarray(to_rgb_array(image)).resize(THUMB_SIZE, Image.Resampling.BOX))


def thumb_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Fraction of thumbnail pixels that differ by more than ``THUMB_TOLERANCE`` in some channel."""
    delta = np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=2)
    return float((delta > THUMB_TOLERANCE).mean())


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def to_rgb_array(image: np.ndarray | Image.Image) -> np.ndarray:
    """H x W x 3 uint8 from a PIL image or an array with 1, 3 or 4 channels."""
    if isinstance(image, Image.Image):
        return np.asarray(image.convert("RGB"))
    arr = np.asarray(image)
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, axis=-1)
    if arr.shape[-1] == 4:
        arr = arr[..., :3]
    return arr.astype(np.uint8, copy=False)
