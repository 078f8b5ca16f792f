"""Media probes: images, PDF text and OpenDocument text, decoded on the host.

Decoders see bytes the agent under test produced, so anything they reject
(a truncated PNG, a PDF that fails to parse, a zip without content.xml) means
"no usable deliverable" and the probe returns None instead of raising.
"""

from __future__ import annotations

import io
import time
import xml.etree.ElementTree as ET
import zipfile

import numpy as np
from PIL import Image

from weavegym.core.image_hash import HASH_BITS, hamming, perceptual_hash, to_rgb_array
from weavegym.evaluators.probes_files import FileProbe

ODF_TEXT_NS = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
ODF_OFFICE_NS = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
ODF_MAX_CONTENT_BYTES = 256 << 20  # content.xml bigger than this is treated as a zip bomb
# Files the episode leaves are decoded on the host: bounds that keep a hostile one from eating the
# env process's memory or time. A file past them counts as "no image/document".
MAX_IMAGE_PIXELS = 40_000_000  # per frame; 8000 x 5000
MAX_IMAGE_FRAMES = 64
PDF_MAX_PAGES = 200
PDF_SECONDS = 20.0  # checked between pages
_PARAGRAPHS = {f"{{{ODF_TEXT_NS}}}p", f"{{{ODF_TEXT_NS}}}h"}
_SPACE, _TAB, _BREAK = (f"{{{ODF_TEXT_NS}}}{name}" for name in ("s", "tab", "line-break"))


def check_image_size(img: Image.Image) -> None:
    """Refuse (ValueError) a frame over ``MAX_IMAGE_PIXELS`` before its pixels are decoded."""
    if img.width * img.height > MAX_IMAGE_PIXELS:
        raise ValueError(f"a {img.width}x{img.height} image is over the checker's {MAX_IMAGE_PIXELS} pixels")


def decode_image(data: bytes) -> np.ndarray | None:
    """H x W x 3 uint8 pixels, or None when PIL cannot fully decode the bytes (or they are too big)."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            check_image_size(img)
            img.load()
            return to_rgb_array(img)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None


def _odf_collect(element: ET.Element, out: list[str]) -> None:
    if element.tag == _SPACE:
        out.append(" " * int(element.get(f"{{{ODF_TEXT_NS}}}c", "1") or 1))
        return
    if element.tag == _TAB:
        out.append("\t")
        return
    if element.tag == _BREAK:
        out.append("\n")
        return
    if element.text:
        out.append(element.text)
    for child in element:
        _odf_collect(child, out)
        if child.tail:
            out.append(child.tail)
    if element.tag in _PARAGRAPHS:
        out.append("\n")


def odf_content_text(content_xml: bytes) -> str:
    """Text of an ODF content.xml: one line per paragraph/heading, ``text:s``/``tab``/``line-break`` expanded."""
    root = ET.fromstring(content_xml)
    body = root.find(f"{{{ODF_OFFICE_NS}}}body")
    out: list[str] = []
    _odf_collect(body if body is not None else root, out)
    return "".join(out).rstrip("\n")


class MediaProbe(FileProbe):
    """Images, PDF and ODF documents."""

    def image(self, path: str) -> np.ndarray | None:
        data = self.read_bytes(path)
        return None if data is None else decode_image(data)

    def image_similarity(self, path: str, reference: np.ndarray) -> float:
        """1 - hamming(phash)/256 against ``reference``; 0.0 when the image is missing or undecodable."""
        image = self.image(path)
        if image is None:
            return 0.0
        return 1.0 - hamming(perceptual_hash(image), perceptual_hash(reference)) / HASH_BITS

    def pdf_text(self, path: str) -> str | None:
        """Text of every page (pypdf on the host), pages joined by newlines; None if missing or unreadable."""
        import pypdf  # imported here: only tasks with PDF deliverables need it

        data = self.read_bytes(path)
        if data is None:
            return None
        try:
            reader = pypdf.PdfReader(io.BytesIO(data))
            if len(reader.pages) > PDF_MAX_PAGES:
                return None
            deadline, texts = time.monotonic() + PDF_SECONDS, []
            for page in reader.pages:
                if time.monotonic() > deadline:
                    return None
                texts.append(page.extract_text() or "")
            return "\n".join(texts)
        except Exception:  # a hostile or broken PDF can fail anywhere inside pypdf; it is "no document"
            return None

    def odf_text(self, path: str) -> str | None:
        """Text of an .odt/.ods/.odp (a zip holding content.xml); None if missing or not ODF."""
        data = self.read_bytes(path)
        if data is None:
            return None
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                if archive.getinfo("content.xml").file_size > ODF_MAX_CONTENT_BYTES:
                    return None
                content = archive.read("content.xml")
            return odf_content_text(content)
        except (zipfile.BadZipFile, KeyError, ET.ParseError, RecursionError, ValueError, OSError):
            return None
