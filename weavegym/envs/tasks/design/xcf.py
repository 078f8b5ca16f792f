"""A small reader for GIMP's XCF files (checker side): canvas, resolution and 8-bit layer pixels.

Enough of the format for what GIMP 2.10 writes for an 8-bit RGB(A) image: the
header, image properties, layer list (32- or 64-bit pointers, by version) and
tiles stored raw, RLE (GIMP's default) or zlib. ImageMagick 6 cannot read the
XCF v011 files GIMP 2.10 writes, so checkers decode them here, on the host.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np

PROP_END, PROP_OFFSETS, PROP_COMPRESSION, PROP_RESOLUTION = 0, 15, 17, 19
PRECISION_U8_GAMMA = 150
TILE = 64


class _Reader:
    def __init__(self, data: bytes, version: int) -> None:
        self.data = data
        self.ptr, self.ptr_size = (">Q", 8) if version >= 11 else (">I", 4)

    def props(self, pos: int) -> tuple[dict[int, bytes], int]:
        found: dict[int, bytes] = {}
        while True:
            kind, length = struct.unpack_from(">II", self.data, pos)
            pos += 8
            found[kind] = self.data[pos:pos + length]
            pos += length
            if kind == PROP_END:
                return found, pos

    def pointer(self, pos: int) -> int:
        return int(struct.unpack_from(self.ptr, self.data, pos)[0])

    def pointers(self, pos: int) -> tuple[list[int], int]:
        found = []
        while (value := self.pointer(pos)) != 0:
            found.append(value)
            pos += self.ptr_size
        return found, pos + self.ptr_size


def read_xcf(data: bytes) -> dict[str, Any] | None:
    """{version, size, base, precision, resolution, layers: [{name, size, offsets, pixels}]}, or None if not XCF.

    ``pixels`` is H x W x bpp uint8 for 8-bit gamma images, None for other precisions. Truncated or
    corrupt files raise ``struct.error``/``ValueError``/``IndexError``; callers treat that as "not an XCF".
    """
    if not data.startswith(b"gimp xcf ") or len(data) < 26:
        return None
    version = 0 if data[9:13] == b"file" else int(data[10:13])
    width, height, base = struct.unpack_from(">III", data, 14)
    pos = 26
    precision = PRECISION_U8_GAMMA
    if version >= 4:
        (precision,) = struct.unpack_from(">I", data, pos)
        pos += 4
    reader = _Reader(data, version)
    image_props, pos = reader.props(pos)
    resolution = struct.unpack(">ff", image_props[PROP_RESOLUTION]) if PROP_RESOLUTION in image_props else None
    compression = image_props.get(PROP_COMPRESSION, b"\x00")[0]
    layer_pointers, _pos = reader.pointers(pos)
    layers = []
    for start in layer_pointers:
        layer_w, layer_h, _type, name_len = struct.unpack_from(">IIII", data, start)
        name = data[start + 16:start + 16 + name_len].rstrip(b"\0").decode("utf-8", "replace")
        layer_props, pos = reader.props(start + 16 + name_len)
        offsets = struct.unpack(">ii", layer_props[PROP_OFFSETS]) if PROP_OFFSETS in layer_props else (0, 0)
        hierarchy = reader.pointer(pos)
        _w, _h, bpp = struct.unpack_from(">III", data, hierarchy)
        level = reader.pointer(hierarchy + 12)
        pixels = _level(reader, level, bpp, compression) if precision == PRECISION_U8_GAMMA else None
        layers.append({"name": name, "size": (layer_w, layer_h), "offsets": offsets, "pixels": pixels})
    return {"version": version, "size": (width, height), "base": base, "precision": precision,
            "resolution": resolution, "layers": layers}


def _rle_tile(data: bytes, pos: int, bpp: int, count: int) -> np.ndarray:
    """GIMP's RLE: per channel, runs of literal bytes (op >= 128) or one repeated byte (op < 128)."""
    tile = np.empty((bpp, count), np.uint8)
    for channel in range(bpp):
        row, filled = tile[channel], 0
        while filled < count:
            op = data[pos]
            pos += 1
            long_run = op in (127, 128)
            if long_run:
                length = data[pos] * 256 + data[pos + 1]
                pos += 2
            else:
                length = 256 - op if op > 128 else op + 1
            if filled + length > count:
                raise ValueError("XCF tile run overflows its tile")
            if op >= 128:
                row[filled:filled + length] = np.frombuffer(data, np.uint8, length, pos)
                pos += length
            else:
                row[filled:filled + length] = data[pos]
                pos += 1
            filled += length
    return tile.T


def _level(reader: _Reader, pos: int, bpp: int, compression: int) -> np.ndarray:
    data = reader.data
    width, height = struct.unpack_from(">II", data, pos)
    tiles, _pos = reader.pointers(pos + 8)
    out = np.zeros((height, width, bpp), np.uint8)
    across = (width + TILE - 1) // TILE
    for index, start in enumerate(tiles):
        ty, tx = divmod(index, across)
        x0, y0 = tx * TILE, ty * TILE
        tw, th = min(TILE, width - x0), min(TILE, height - y0)
        if tw <= 0 or th <= 0:
            raise ValueError("XCF has more tiles than its level holds")
        count = tw * th
        if compression == 1:
            tile = _rle_tile(data, start, bpp, count)
        elif compression == 2:
            tile = np.frombuffer(zlib.decompressobj().decompress(data[start:], count * bpp), np.uint8)
        else:
            tile = np.frombuffer(data, np.uint8, count * bpp, start)
        out[y0:y0 + th, x0:x0 + tw] = tile.reshape(th, tw, bpp)
    return out
