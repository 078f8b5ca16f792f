"""Weave-Docs-6 without a VM: the batch per seed, the scan PDF (pictures only), the notes read back off a screen
at Evince's zooms, the annotations of a PDF Evince really saved, and the clauses on fake probes."""

from __future__ import annotations

import hashlib
import io
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pypdf
import pytest
from PIL import Image

from weavegym.envs.tasks.docs import _delivery_scan as scan
from weavegym.envs.tasks.docs import delivery_notes as dn
from weavegym.testing.files_probe import FilesProbe

SAMPLE = Path(__file__).parent / "data" / "evince_notes.pdf"  # two pages, two notes, saved by Evince 43.1


def _world(seed: int) -> dict[str, Any]:
    return dn.plan(np.random.default_rng(seed))


def _pages(world: Mapping[str, Any]) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    pages = [scan.render_sheet(scan.cover_lines(world["batch"], len(world["notes"])), rng)]
    return pages + [scan.render_sheet(scan.note_lines(n["dn"], n["po"], n["shipped"], n["rows"]), rng)
                    for n in world["notes"]]


@pytest.mark.parametrize("seed", range(8))
def test_every_batch_has_a_few_discrepancies_of_each_kind_that_the_rules_find(seed: int) -> None:
    world = _world(seed)
    notes, want = world["notes"], dn.expected(world)
    assert 6 <= len(notes) <= 7 and 3 <= len(want["disputed"]) <= 4 and len(want["accepted"]) >= 2
    assert len({n["dn"] for n in notes}) == len(notes) and len({n["po"] for n in notes}) == len(notes)
    for note in notes:
        order = world["order_of"][note["po"]]
        lines = {line: (item, qty) for line, item, qty in order["lines"]}
        found = dn.discrepancy(note, lines)
        assert (found is None) == (note["issue"] is None)
        if found is not None:
            assert found == (note["issue"]["line"], note["issue"]["kind"])
            assert any(ord(c) > 127 for c in want["texts"][note["page"]])  # the supplier's name is typed
        for _line, item, qty in note["rows"]:
            assert not scan.pixel_font.unsupported(scan.row_text(1, item, qty)) and qty > 0
    assert len({w["batch"] for w in map(_world, range(8))}) > 1


def test_the_scan_is_pictures_only_and_its_pages_are_recognised() -> None:
    world = _world(0)
    pages = _pages(world)
    data = scan.pdf_bytes(pages)
    reader = pypdf.PdfReader(io.BytesIO(data))
    assert len(reader.pages) == len(pages)
    assert all(not (page.extract_text() or "").strip() for page in reader.pages)  # no text layer
    assert world["notes"][0]["dn"].encode() not in data and len(data) < 2_000_000
    found = scan.read_saved(data)
    assert found is not None and found["notes"] == []
    assert found["digests"] == [scan.page_digest(p) for p in pages]


def _screen(page: np.ndarray, scale: float, at: tuple[int, int], crop_top: int = 0) -> np.ndarray:
    """A 1280x720 frame: grey viewer background, the page scaled as Evince draws it (smooth filter)."""
    frame = np.full((720, 1280, 3), 244, dtype=np.uint8)
    frame[:50] = 220  # a header bar
    size = (round(page.shape[1] * scale), round(page.shape[0] * scale))
    shown = np.asarray(Image.fromarray(page).resize(size, Image.BILINEAR))
    shown = shown[crop_top:]
    x, y = at
    h, w = min(shown.shape[0], 720 - y), min(shown.shape[1], 1280 - x)
    frame[y:y + h, x:x + w] = shown[:h, :w, None]
    return frame


@pytest.mark.parametrize(("scale", "at"), [(0.64, (42, 59)), (0.55, (120, 80)), (0.8, (10, 60)), (1.0, (0, 52))])
def test_a_note_reads_back_off_the_screen_at_evinces_zooms(scale: float, at: tuple[int, int]) -> None:
    world = _world(3)
    pages = _pages(world)
    for note, page in zip(world["notes"], pages[1:], strict=True):
        read = scan.read_note(_screen(page, scale, at), (0, 0, 1280, 720))
        assert read is not None
        assert (read["dn"], read["po"], read["rows"]) == (note["dn"], note["po"], [tuple(r) for r in note["rows"]])
        ox, oy, s = read["mapping"]
        assert abs(s - scale) < 0.01 and abs(ox - at[0]) < 2 and abs(oy - at[1]) < 2
    assert scan.read_note(_screen(pages[0], 0.64, (42, 59)), (0, 0, 1280, 720)) is None  # the cover sheet
    assert scan.read_note(np.full((720, 1280, 3), 244, np.uint8), (0, 0, 1280, 720)) is None


def test_the_popup_is_found_by_its_title_bar_not_by_the_note_icons() -> None:
    frame = np.full((720, 1280, 3), 244, dtype=np.uint8)
    frame[300:324, 700:724] = (255, 255, 0)  # a note icon
    assert scan.find_popup(frame) is None
    frame[400:420, 620:885] = (255, 255, 0)  # the popup's title bar
    assert scan.find_popup(frame) == (620, 400, 884)


def test_the_annotations_evince_saved_are_read_with_their_unicode_text_and_time() -> None:
    data = SAMPLE.read_bytes()
    found = scan.read_saved(data)
    assert found is not None
    assert [(page, text) for page, text, _when in found["notes"]] == [
        (1, "plain ascii note"), (2, "PO-12345/2 40 ñandú & Søn 山田")]
    assert b"<feff" in data  # Evince wrote the non-ASCII note as UTF-16BE with a byte order mark
    assert all(when is not None and when > 1.7e9 for _p, _t, when in found["notes"])
    small = [np.full((160, 120), v, np.uint8) for v in (230, 200)]
    small[1][20:40, 20:40] = 20
    assert found["digests"] == [scan.page_digest(p) for p in small]  # Evince appended; the scans are unchanged
    assert scan.read_saved(b"%PDF-1.4 garbage") is None


def test_pdf_dates_with_zones() -> None:
    assert scan.pdf_date("D:20261204184131Z") == scan.pdf_date("D:20261204194131+01'00'")
    assert scan.pdf_date("D:20261204184131Z") == scan.pdf_date("D:20261204134131-05'00")
    assert scan.pdf_date("yesterday") is None


def _annotated(pages: list[np.ndarray], notes: Mapping[int, str], when: str = "D:20261204184131Z") -> bytes:
    """The scan with text notes appended by pypdf the way Evince stores them (UTF-16BE /Contents, /M)."""
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(scan.pdf_bytes(pages))))
    for page, text in notes.items():
        annot = pypdf.generic.DictionaryObject({
            pypdf.generic.NameObject("/Type"): pypdf.generic.NameObject("/Annot"),
            pypdf.generic.NameObject("/Subtype"): pypdf.generic.NameObject("/Text"),
            pypdf.generic.NameObject("/Rect"): pypdf.generic.ArrayObject(
                [pypdf.generic.FloatObject(v) for v in (400, 400, 424, 424)]),
            pypdf.generic.NameObject("/Contents"): pypdf.generic.TextStringObject(text),
            pypdf.generic.NameObject("/M"): pypdf.generic.TextStringObject(when)})
        writer.add_annotation(page - 1, annot)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _truth(world: Mapping[str, Any], pages: list[np.ndarray]) -> dict[str, Any]:
    want = dn.expected(world)
    return {"batch": world["batch"], "pages": len(pages), "digests": [scan.page_digest(p) for p in pages],
            "texts": {str(k): v for k, v in want["texts"].items()}, "claims": want["claims"],
            "accepted": want["accepted"], "disputed": want["disputed"],
            "prepared_at": scan.pdf_date("D:20261204180000Z")}


def _claims(rows: list[list[str]], digest: str) -> str:
    return ",".join(dn.HEADER) + "\n" + "".join(",".join([*row, digest]) + "\n" for row in rows)


def test_the_clauses_pass_the_right_work_and_fail_wrong_or_stale_work() -> None:
    world = _world(0)
    pages = _pages(world)
    truth = _truth(world, pages)
    saved_path = f"{dn.CHECKED}/{world['batch']}-checked.pdf"
    texts = {int(k): unicodedata.normalize("NFD", f" {v} ") if i == 0 else v  # composition and edge space are free
             for i, (k, v) in enumerate(truth["texts"].items())}
    saved = _annotated(pages, texts)
    digest = hashlib.sha256(saved).hexdigest()
    register = ", ".join(truth["accepted"]) + "|" + ",".join(truth["disputed"]).lower() + "\n"
    good = FilesProbe({saved_path: saved, dn.CLAIMS: _claims(truth["claims"], digest), dn.ANSWER: register})
    for check in (dn.check_copy, dn.check_noted_pages, dn.check_note_texts, dn.check_claims, dn.check_checksum,
                  dn.check_register):
        assert check(good, truth).outcome == "satisfied", (check.__name__, check(good, truth).evidence)

    first = next(iter(texts))
    wrong_text = _annotated(pages, {**texts, first: texts[first].replace("/", "-")})
    assert dn.check_note_texts(FilesProbe({saved_path: wrong_text}), truth).outcome == "partial"
    shouted = _annotated(pages, {**texts, first: texts[first].upper()})  # not as the database spells the name
    assert dn.check_note_texts(FilesProbe({saved_path: shouted}), truth).outcome == "partial"
    extra_page = _annotated(pages, {**texts, 1: "cover"})
    assert dn.check_noted_pages(FilesProbe({saved_path: extra_page}), truth).outcome == "failed"
    stale = _annotated(pages, texts, when="D:20261101000000Z")  # made before this episode's setup
    assert dn.check_noted_pages(FilesProbe({saved_path: stale}), truth).outcome == "failed"
    other = _pages(_world(1))
    other_scan = _annotated(other, {p: t for p, t in texts.items() if p <= len(other)})
    assert dn.check_copy(FilesProbe({saved_path: other_scan}), truth).outcome == "failed"
    assert dn.check_copy(FilesProbe({}), truth).outcome == "failed"

    stale_sum = FilesProbe({saved_path: saved, dn.CLAIMS: _claims(truth["claims"], "0" * 64)})
    assert dn.check_checksum(stale_sum, truth).outcome == "failed"
    short = FilesProbe({dn.CLAIMS: _claims(truth["claims"][1:], digest)})
    assert dn.check_claims(short, truth).outcome == "partial"
    wrong_kind = [[*row[:6], "short" if row[6] != "short" else "over"] for row in truth["claims"]]
    assert dn.check_claims(FilesProbe({dn.CLAIMS: _claims(wrong_kind, digest)}), truth).outcome == "failed"
    swapped = ",".join(truth["disputed"]) + "|" + ",".join(truth["accepted"]) + "\n"
    assert dn.check_register(FilesProbe({dn.ANSWER: swapped}), truth).outcome == "failed"
    assert dn.check_register(FilesProbe({}), truth).outcome == "failed"


def test_the_order_query_output_is_parsed_with_names_that_hold_separators_of_their_own() -> None:
    out = "Müller & Söhne GmbH|1|BX-1234|40\nMüller & Söhne GmbH|2|CR-5678|105\n"
    assert dn.parse_order(out) == ("Müller & Söhne GmbH", {1: ("BX-1234", 40), 2: ("CR-5678", 105)})
    note = {"rows": [(1, "BX-1234", 40), (2, "CR-5678", 100)]}
    assert dn.discrepancy(note, dn.parse_order(out)[1]) == (2, "short")
    assert dn.discrepancy({"rows": [(1, "BX-9999", 40)]}, dn.parse_order(out)[1]) == (1, "wrong_item")


def test_the_marks_are_told_from_a_dark_wallpaper_and_dark_icons_around_the_viewer() -> None:
    world = _world(0)
    page = _pages(world)[1]
    frame = _screen(page, 0.64, (42, 82))
    frame[:, 860:] = (29, 39, 58)  # XFCE's dark wallpaper beside the viewer
    frame[670:, :] = (29, 39, 58)
    frame[675:715, 540:580] = (40, 40, 40)  # a dark dock icon, square but alone and of another size
    frame[300:330, 870:900] = (30, 30, 30)
    read = scan.read_note(frame, (0, 0, 900, 720))
    assert read is not None and read["dn"] == world["notes"][0]["dn"]
    assert abs(read["mapping"][2] - 0.64) < 0.01
