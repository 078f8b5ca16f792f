"""Weave-Data-7 (field survey) without a VM: the survey generator, the recording, the oracle's measurement run by the
real python3 and sox, the Selection-toolbar locator, every clause on right and wrong finals (unit),
and the real Field Notebook on Xvfb through the real agent (xvfb): pages as pixels, refusals, the survey number."""

from __future__ import annotations

import hashlib
import itertools
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pixel_apps import pixel_app

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data import field_survey as fs
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(fs.__file__).parent / "fixtures"


def _world(seed: int = 0) -> tuple[dict[str, Any], np.ndarray]:
    world = fs.survey(np.random.default_rng(seed))
    return world, fs.samples(world)


def _truth(world: dict[str, Any], data: np.ndarray) -> dict[str, Any]:
    return {"pages": world["pages"], "survey": world["survey"], "summary": fs.summary_rows(world, data)}


def _labels(world: dict[str, Any], names: dict[int, str] | None = None, shift: float = 0.01) -> bytes:
    lines = [f"{p['start'] + shift:.6f}\t{p['end'] - shift:.6f}\t{(names or {}).get(i, p['name'])}\n"
             for i, p in enumerate(world["pages"])]
    return "".join(lines).encode()


def _summary(truth: dict[str, Any], labels: bytes, survey: str | None = None, rows: list[str] | None = None) -> bytes:
    head = f"survey {survey or truth['survey']}\nlabels sha256 {hashlib.sha256(labels).hexdigest()}\n"
    body = rows if rows is not None else [f"{r['name']};{r['count']};{r['first']:.3f};{r['peak']:.4f}"
                                          for r in truth["summary"]]
    return (head + "".join(f"{row}\n" for row in body)).encode()


def _outcomes(files: dict[str, bytes], truth: dict[str, Any]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {clause.name: clause.check(probe, truth).outcome for clause in fs.TASK.clauses}


@pytest.mark.parametrize("seed", range(8))
def test_every_seed_notes_four_calls_of_three_accented_species_among_distractors(seed: int) -> None:
    world, _data = _world(seed)
    pages, calls = world["pages"], world["calls"]
    assert len(pages) == fs.PAGES and len(calls) == fs.PAGES + fs.DISTRACTORS
    names = [p["name"] for p in pages]
    assert len(set(names)) == 3 and all(not name.isascii() for name in names)
    starts = [c["start"] for c in calls]
    assert all(b - a >= fs.MIN_GAP_S for a, b in itertools.pairwise(starts))
    for page in pages:  # the time heard points at this call and no other
        minutes, seconds = page["heard"].split(":")
        heard = int(minutes) * 60 + int(seconds)
        assert min(calls, key=lambda c, h=heard: abs(c["start"] - h))["start"] == page["start"]
        assert abs(page["start"] - heard) <= 2.0
        assert not pixel_font.unsupported(f"CODE {page['code']} HEARD {page['heard']}")
    assert re.fullmatch(r"[A-Z0-9]{5}", world["survey"]) and not pixel_font.unsupported(world["survey"])
    assert world == fs.survey(np.random.default_rng(seed))  # the seed alone decides


def test_the_recording_is_a_mono_16_bit_wav_with_loud_calls_in_quiet_noise() -> None:
    world, data = _world(1)
    assert fs.wav_bytes(data)[:4] == b"RIFF" and len(data) == int(fs.LENGTH_S * fs.RATE)
    call = world["calls"][0]
    inside = np.abs(data[int(call["start"] * fs.RATE) + 400:int(call["end"] * fs.RATE) - 400]).max() / 32768
    outside = np.abs(data[:int(call["start"] * fs.RATE) - 400]).max() / 32768
    assert inside > 0.25 > 0.08 > outside


def test_hms_gives_the_digits_of_audacitys_time_field() -> None:
    assert fs.hms(41.25) == "000041250"
    assert fs.hms(3725.0405) == "010205040"
    assert fs.clock(61.4) == "1:01" and fs.clock(9.6) == "0:10"


def test_the_oracles_measurement_runs_in_the_real_python_with_sox(tmp_path: Path) -> None:
    world, data = _world(3)
    wav, db = tmp_path / "rec.wav", tmp_path / "register.db"
    wav.write_bytes(fs.wav_bytes(data))
    db.write_bytes(database_bytes(fs.SCHEMA, fs.register_rows(world)))
    for page in world["pages"]:
        code = fs.MEASURE_PY.format(code=page["code"], heard=page["heard"], db=db, wav=wav)
        out = subprocess.run(["python3", "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
        found = re.fullmatch(r"CALL\|([A-Z]+)\|(.+)\|([0-9.]+)\|([0-9.]+)\|(\d+)\|([0-9.]+)", out.strip())
        assert found is not None, out
        assert found[2] == page["name"]
        assert abs(float(found[3]) - page["start"]) < 0.03 and abs(float(found[4]) - page["end"]) < 0.03
        assert abs(int(found[5]) - page["start"] * 1000) < fs.START_TOL_MS / 2
        row = next(r for r in fs.summary_rows(world, data) if r["name"] == page["name"])
        assert float(found[6]) <= row["peak"] + 1e-4


def test_the_selection_fields_are_the_two_leftmost_runs_of_blue_digits() -> None:
    image = np.full((720, 1280, 3), 230, dtype=np.uint8)
    window = [410, 60, 866, 640]
    for left in (676, 834, 1005):  # start field, end field, the big Time display
        for x in range(left, left + 140, 11):
            image[650:658, x:x + 6] = (0, 0, 180)
    assert fs.selection_fields(image, window) == ((679, 653), (837, 653))
    assert fs.selection_fields(np.full((720, 1280, 3), 230, dtype=np.uint8), window) is None
    # the oracle types the labels' path only once the export dialog is up, and waits for it to go: in the guest its
    # frame mapped long before it drew, only its title bar showing across Audacity's (the toolbar still visible)
    image[36:58, 400:1280] = (60, 60, 60)  # Audacity's title bar, active
    image[44:52, 800:880] = 250
    idle = fs.title_strip(image, window)
    assert not fs.dialog_over(image, window, idle)
    mapped = image.copy()
    mapped[30:50, 170:1280] = (235, 235, 235)  # the dialog's frame: its title bar over Audacity's
    mapped[36:44, 640:760] = 20
    assert fs.dialog_over(mapped, window, idle) and fs.selection_fields(mapped, window) is not None
    drawn = image.copy()
    drawn[300:720, 300:1280] = 240  # once drawn it covers the toolbar too
    assert fs.dialog_over(drawn, window, idle)


def _editor_image(selected: tuple[int, int] | None, focused: int | None = None) -> np.ndarray:
    """A synthetic Audacity: grey track with three loud calls, a pale selection, the two fields' first digits."""
    image = np.full((720, 1280, 3), 192, dtype=np.uint8)
    if selected is not None:
        image[230:370, selected[0]:selected[1] + 1] = (235, 242, 255)
    image[295:299, 545:1260] = (100, 100, 220)  # the noise at the centre line
    for left, right in ((600, 615), (700, 714), (900, 920)):
        image[260:335, left:right + 1] = (73, 74, 207)
    for x in (679, 837):
        image[626:641, x - 2:x + 7] = (208, 208, 208)
        image[628:639, x:x + 5] = (0, 0, 180)
    if focused is not None:
        x = (679, 837)[focused]
        image[625:642, x - 4] = (0, 0, 0)  # the frame
        image[626:641, x - 2:x + 7] = (242, 242, 255)
        image[628:639, x:x + 5] = (0, 0, 0)
    return image


def test_the_oracle_sees_which_field_has_the_focus() -> None:
    for focused in (0, 1):
        image = _editor_image(None, focused)
        assert fs.field_focused(image, (679, 633)) == (focused == 0)
        assert fs.field_focused(image, (837, 633)) == (focused == 1)
    assert not fs.field_focused(_editor_image(None), (679, 633))


def test_the_oracle_checks_the_selection_spans_a_call_before_labelling() -> None:
    window = [411, 60, 866, 640]
    assert len(fs.call_spans(_editor_image(None), window)) == 3
    assert fs.selection_on_call(_editor_image((700, 714)), window)
    assert fs.selection_on_call(_editor_image((699, 716)), window)  # within two pixels of each edge
    assert not fs.selection_on_call(_editor_image(None), window)
    assert not fs.selection_on_call(_editor_image((714, 722)), window)  # the start clamped to the end (seeds 0, 3)
    assert not fs.selection_on_call(_editor_image((545, 1259)), window)  # the whole track
    assert not fs.selection_on_call(_editor_image((700, 760)), window)


def test_a_survey_done_right_satisfies_every_clause() -> None:
    world, data = _world(0)
    truth = _truth(world, data)
    labels = _labels(world)
    files = {fs.LABELS: labels, fs.SUMMARY: _summary(truth, labels)}
    assert set(_outcomes(files, truth).values()) == {Outcome.SATISFIED}
    # Audacity writes NFC; a decomposed name is the same name
    import unicodedata
    nfd = {i: unicodedata.normalize("NFD", p["name"]) for i, p in enumerate(world["pages"])}
    labels = _labels(world, nfd)
    assert _outcomes({fs.LABELS: labels, fs.SUMMARY: _summary(truth, labels)}, truth)["label_names"] \
        == Outcome.SATISFIED


def test_wrong_labels_fail_their_clauses() -> None:
    world, data = _world(0)
    truth = _truth(world, data)
    ascii_names = {i: p["name"].encode("ascii", "ignore").decode() for i, p in enumerate(world["pages"])}
    labels = _labels(world, ascii_names)
    got = _outcomes({fs.LABELS: labels, fs.SUMMARY: _summary(truth, labels)}, truth)
    assert got["label_names"] == Outcome.FAILED and got["label_times"] == Outcome.SATISFIED
    labels = _labels(world, shift=0.4)  # selected loosely
    got = _outcomes({fs.LABELS: labels, fs.SUMMARY: _summary(truth, labels)}, truth)
    assert got["label_times"] == Outcome.FAILED
    distractor = next(c for c in world["calls"] if not c["noted"])
    labels = _labels(world) + f"{distractor['start']}\t{distractor['end']}\t{distractor['name']}\n".encode()
    assert _outcomes({fs.LABELS: labels, fs.SUMMARY: _summary(truth, labels)}, truth)["label_times"] \
        == Outcome.FAILED
    got = _outcomes({fs.SUMMARY: _summary(truth, b"")}, truth)
    assert got["labels_exported"] == got["label_times"] == got["labels_digest"] == Outcome.FAILED
    assert _outcomes({fs.LABELS: b"not a label file\n"}, truth)["labels_exported"] == Outcome.FAILED


def test_a_wrong_summary_fails_its_clauses() -> None:
    world, data = _world(6)
    truth = _truth(world, data)
    labels = _labels(world)
    got = _outcomes({fs.LABELS: labels, fs.SUMMARY: _summary(truth, labels, survey="AAAAA")}, truth)
    assert got["survey_number"] == Outcome.FAILED and got["species_rows"] == Outcome.SATISFIED
    got = _outcomes({fs.LABELS: labels, fs.SUMMARY: _summary(truth, labels + b"x")}, truth)
    assert got["labels_digest"] == Outcome.FAILED
    rows = truth["summary"]
    wrong = [f"{r['name']};{r['count'] + 1};{r['first']:.3f};{r['peak']:.4f}" for r in rows]
    assert _outcomes({fs.LABELS: labels, fs.SUMMARY: _summary(truth, labels, rows=wrong)}, truth)["species_rows"] \
        == Outcome.FAILED
    wrong = [f"{r['name']};{r['count']};{r['first']:.3f};{r['peak'] + 0.05:.4f}" for r in rows]
    assert _outcomes({fs.LABELS: labels, fs.SUMMARY: _summary(truth, labels, rows=wrong)}, truth)["species_rows"] \
        == Outcome.FAILED
    reordered = [f"{r['name']};{r['count']};{r['first']:.3f};{r['peak']:.4f}" for r in reversed(rows)]
    assert _outcomes({fs.LABELS: labels, fs.SUMMARY: _summary(truth, labels, rows=reordered)}, truth)[
        "species_rows"] == Outcome.FAILED
    assert _outcomes({fs.LABELS: labels}, truth)["survey_number"] == Outcome.FAILED


# ---- the real notebook on a real X server, through the real agent ----------------------------------------------

@pytest.mark.xvfb
def test_the_notebook_shows_pages_as_pixels_refuses_bad_starts_and_ends_with_the_survey(
        xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> None:
    world, _data = _world(3)
    pages = [{"code": p["code"], "heard": p["heard"], "start_ms": round(p["start"] * 1000)} for p in world["pages"]]
    conf = {"pages": pages, "survey": world["survey"], "layout": fs.layout()}
    with pixel_app(FIXTURES / "field_notebook.py", conf, tmp_path, xvfb.display, stdout=False) as proc:
        origin = wait_for(lambda: fs.notebook_origin(client.screenshot().image, (0, 0)), 20, what="the cover")
        assert fs.read_page(client.screenshot().image, origin) is None  # nothing before the button
        button = (origin[0] + fs.BUTTON[0] + fs.BUTTON[2] // 2, origin[1] + fs.BUTTON[1] + fs.BUTTON[3] // 2)
        entry = (origin[0] + fs.ENTRY[0] + fs.ENTRY[2] // 2, origin[1] + fs.ENTRY[1] + fs.ENTRY[3] // 2)
        client.click(*button)
        shown = wait_for(lambda: fs.read_page(client.screenshot().image, origin), 20, what="page 1")
        assert shown == (1, pages[0]["code"], pages[0]["heard"])
        client.click(*button)  # a second press with nothing typed is refused and changes nothing
        client.click(*entry)
        for bad in ("abc", "9" * 3000, str(pages[0]["start_ms"] + 400), "12 34"):
            client.type_text(bad + "\n")  # refused, and the field cleared for the next try
        assert fs.read_page(client.screenshot().image, origin) == shown
        for number, page in enumerate(pages, 1):
            client.type_text(f"{page['start_ms'] + 40}\n")
            if number < len(pages):
                wait_for(lambda n=number: (fs.read_page(client.screenshot().image, origin) or (0,))[0] == n + 1
                         or None, 20, what=f"page {number + 1}")
        got = wait_for(lambda: fs.read_survey(client.screenshot().image, origin), 20, what="the survey number")
        assert got == world["survey"]
        assert proc.poll() is None
