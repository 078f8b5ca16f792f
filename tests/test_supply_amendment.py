"""Weave-Docs-4 without a VM: the bill's maths by hand, the seeds' worlds, the scan read back off a rendered screen
and off the real viewer on Xvfb, the oracle's own program on the real files, and the clauses."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.docs import _metering as m
from weavegym.envs.tasks.docs import supply_amendment as sa
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURE = Path(sa.__file__).parent / "fixtures" / "document_viewer.py"
WINDOW = [120, 70, sa.WIDTH, sa.HEIGHT]

CONTRACT = """contract: ESA-1
sites: A B
period_start: 2026-07-03
period_end: 2026-07-04
peak_hours: 07:00-19:00 Mon-Fri
peak_eur_per_kwh: 0.2000
offpeak_eur_per_kwh: 0.1000
standing_eur_per_site_day: 1.0000
cap_eur: 3
review_eur_per_site: 2
"""
# 2026-07-03 is a Friday, 2026-07-04 a Saturday; C belongs to another agreement, 07-05 is outside the period.
READINGS = {"2026-07-03.csv": "meter,interval_start,kwh\nA,2026-07-03 07:00,2.000\nA,2026-07-03 06:30,1.000\n"
                              "B,2026-07-03 19:00,3.000\nC,2026-07-03 08:00,50.000\n",
            "2026-07-04.csv": "meter,interval_start,kwh\nA,2026-07-04 08:00,2.000\nB,2026-07-04 12:00,1.000\n",
            "2026-07-05.csv": "meter,interval_start,kwh\nA,2026-07-05 08:00,99.000\n"}


def test_the_bill_by_hand() -> None:
    result = m.bill(CONTRACT, READINGS, None)
    e7 = m.E7
    # Friday: A 2 kWh peak (0.40) + 1 off-peak (0.10), B 3 off-peak (19:00 is no longer peak: 0.30); Saturday:
    # all off-peak, A 0.20, B 0.10. Standing 1 EUR per site and day.
    assert result["sites"] == {"A": [2000, 3000, 2 * e7, 7 * e7 // 10], "B": [0, 4000, 2 * e7, 4 * e7 // 10]}
    assert result["days"] == [("2026-07-03", 28 * e7 // 10), ("2026-07-04", 23 * e7 // 10)]
    assert m.findings(result) == {"total": 51 * e7 // 10, "cap_date": "2026-07-04", "over": ["A", "B"]}
    amended = m.bill(CONTRACT, READINGS, {"effective": "2026-07-04", "peak": 4000, "offpeak": 500, "standing": 0})
    # Saturday at the amended rates: 3 kWh off-peak at 0.05, no standing charge; A 1.60, B 1.35 EUR in all.
    assert m.findings(amended) == {"total": 295 * e7 // 100, "cap_date": "", "over": []}


def _world(seed: int) -> dict[str, Any]:
    return m.make_world(np.random.default_rng(seed))


@pytest.mark.parametrize("seed", range(4))
def test_every_seed_makes_the_amendment_matter_to_every_question(seed: int) -> None:
    world = _world(seed)
    right, plain = m.expected(world, world["amendment"]), m.expected(world, None)
    assert abs(right["total"] - plain["total"]) > 5
    assert right["cap_date"] and right["cap_date"] != plain["cap_date"]
    assert right["cap_date"] > world["amendment"]["effective"]
    assert right["over"] and len(right["over"]) < len(world["sites"]) and right["over"] != plain["over"]
    assert world["start"] < world["amendment"]["effective"] <= world["end"]
    assert len(world["readings"]) > 200 and sorted(right["table"]) == world["sites"]
    meters = {row.split(",")[0] for row in world["readings"]["2026-07-01.csv"].splitlines()[1:]}
    assert set(world["sites"]) < meters  # other agreements' meters are in the files too


def test_seeds_vary_the_agreement_and_the_amendment() -> None:
    worlds = [_world(seed) for seed in range(6)]
    assert len({w["contract"] for w in worlds}) == 6
    assert len({w["amendment"]["effective"] for w in worlds}) == 6
    assert len({w["peak_hours"] for w in worlds}) >= 3
    assert {m.kind_of(s) for s in range(3)} == {m.kind_of(s) for s in (0, 3, 6)} == set(m.KINDS)


def _screen(pages: list[list[str]], number: int) -> np.ndarray:
    """The viewer's page as the fixture draws it: white paper, pixel_font's lit cells, on a grey window."""
    image = np.full((720, 1280, 3), 214, dtype=np.uint8)
    x, y = WINDOW[0] + sa.CANVAS[0], WINDOW[1] + sa.CANVAS[1]
    image[y:y + sa.CANVAS[3], x:x + sa.CANVAS[2]] = 255
    texts = [(f"PAGE {number} OF {len(pages)}", sa.HEADER_Y)]
    texts += [(line, sa.FIRST_LINE_Y + i * sa.LINE_H) for i, line in enumerate(pages[number - 1])]
    for text, top in texts:
        for x0, y0, x1, y1 in pixel_font.layout_text(text, x + sa.TEXT_X, y + top, sa.SCALE):
            image[y0:y1, x0:x1] = pixel_font.INK
    return image


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_scan_reads_back_and_only_its_schedule_page_gives_the_amendment(seed: int) -> None:
    rng = np.random.default_rng(seed)
    world = m.make_world(rng)
    pages, at = sa.document(world, rng)
    assert at in (2, 3) and len(pages) == sa.PAGES
    for number in range(1, sa.PAGES + 1):
        image = _screen(pages, number)
        assert sa.shown_page(image, WINDOW) == number
        lines = sa.read_page(image, WINDOW)
        assert lines[:len(pages[number - 1])] == pages[number - 1]
        assert sa.parse_amendment(lines) == (world["amendment"] if number == at else None)
    for page in pages:
        assert len(page) <= sa.LINES and all(len(line) <= sa.LINE_CHARS for line in page)
        assert not pixel_font.unsupported("".join(page))


def _folder(tmp_path: Path, world: Mapping[str, Any]) -> Path:
    folder = tmp_path / "metering"
    folder.mkdir()
    with tarfile.open(fileobj=io.BytesIO(sa.bundle(world)), mode="r:gz") as tar:
        tar.extractall(folder, filter="data")
    return folder


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_oracles_program_on_the_real_files_gives_the_truth(tmp_path: Path, seed: int) -> None:
    world = _world(seed)
    folder, out = _folder(tmp_path, world), tmp_path / "site-charges.csv"
    right = m.expected(world, world["amendment"])
    kind = m.kind_of(seed)
    answer = {"total": round(right["total"], 2), "cap": right["cap_date"], "sites": right["over"]}[kind]
    truth = {"kind": kind, "answer": answer, "table": right["table"], "total": right["total"]}

    def run(amendment: dict[str, Any] | None) -> dict[str, Any]:
        done = subprocess.run([sys.executable, "-c", m.program(amendment, str(folder), str(out))],
                              capture_output=True, text=True, check=True)
        return sa.parse_output(done.stdout.replace("\n", "\r\n"))

    output = run(world["amendment"])
    assert len(output["rows"]) == len(world["sites"])
    assert sa.check_answer(FilesProbe.answered(sa.spoken(kind, output)), truth).outcome == "satisfied"
    assert sa.check_table(FilesProbe.answered("", {sa.TABLE: out.read_text()}), truth).outcome == "satisfied"
    approval = json.dumps({"amount": output["total"], "pages_viewed": [1, 2]})
    assert sa.check_approval(FilesProbe.answered("", {sa.RECORD: approval}), truth).outcome == "satisfied"
    # Without the amendment (a shell-only agent): every part is wrong.
    alone = run(None)
    assert sa.check_answer(FilesProbe.answered(sa.spoken(kind, alone)), truth).outcome != "satisfied"
    assert sa.check_table(FilesProbe.answered("", {sa.TABLE: out.read_text()}), truth).outcome == "failed"


@pytest.mark.parametrize(("kind", "expected", "right", "wrong"), [
    ("total", 12345.674, ["12345.67 EUR", "<answer>EUR 12,345.67</answer>", "€12345.68"],
     ["12345.65", "12345.67 USD", "none"]),
    ("cap", "2026-09-14", ["2026-09-14", "14 September 2026", "on Sep 14, 2026"], ["2026-09-15", "09/14"]),
    ("sites", ["MTR-12345", "MTR-23456"], ["MTR-23456, MTR-12345", "mtr-12345 and mtr-23456"],
     ["MTR-12345", "MTR-12345, MTR-23456, MTR-99999"]),
])
def test_answers_are_normalised_and_wrong_ones_fail(kind: str, expected: Any, right: list[str],
                                                    wrong: list[str]) -> None:
    truth = {"kind": kind, "answer": expected}
    assert all(sa.check_answer(FilesProbe.answered(a), truth).outcome == "satisfied" for a in right)
    assert all(sa.check_answer(FilesProbe.answered(a), truth).outcome != "satisfied" for a in wrong)
    assert dt.date.fromisoformat("2026-09-14")  # the cap's truth is an ISO date the clause parses


def test_the_table_and_the_approval_need_every_site_and_the_amount() -> None:
    table = {"MTR-1": [10.0, 20.0, 3.0, 4.0, 7.0], "MTR-2": [1.5, 2.25, 3.0, 0.5, 3.5]}
    truth = {"table": table, "total": 10.5}
    good = ",".join(sa.COLUMNS) + "\nMTR-1,10.000,20.000,3.00,4.00,7.00\nMTR-2,1.500,2.250,3.00,0.50,3.50\n"
    assert sa.check_table(FilesProbe.answered("", {sa.TABLE: good}), truth).outcome == "satisfied"
    assert sa.check_table(FilesProbe.answered("", {sa.TABLE: good.replace("7.00", "7.10")}), truth).outcome == "partial"
    assert sa.check_table(FilesProbe.answered("", {sa.TABLE: good + "MTR-3,1,1,1,1,2\n"}), truth).outcome == "partial"
    with pytest.raises(ValueError):
        sa.check_table(FilesProbe.answered("", {sa.TABLE: "site,total\nMTR-1,7\n"}), truth)
    assert sa.check_table(FilesProbe.answered(""), truth).outcome == "failed"
    for amount, outcome in (("10.50", "satisfied"), ("EUR 10.5", "satisfied"), ("10.52", "failed"),
                            ("", "failed")):
        record = json.dumps({"amount": amount, "pages_viewed": [1]})
        assert sa.check_approval(FilesProbe.answered("", {sa.RECORD: record}), truth).outcome == outcome, amount
    assert sa.check_approval(FilesProbe.answered(""), truth).outcome == "failed"


def test_the_oracle_is_denied_everything_only_the_scan_shows() -> None:
    truth = {"kind": "total", "window": WINDOW, "targets": {}, "schedule_page": 2, "amendment": {}, "table": {},
             "total": 1.0, "answer": 1.0}
    assert set(sa.TASK.oracle_truth(truth)) == {"kind", "window", "targets", "schedule_page"}


# -- the real viewer on a real X server, screenshotted and clicked through the real guest agent ------------------


@pytest.mark.xvfb
def test_the_real_viewer_shows_the_schedule_only_on_its_page_and_approves(xvfb: XvfbDisplay, client: GuestClient,
                                                                          tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    world = m.make_world(rng)
    pages, at = sa.document(world, rng)
    for name, data in (("document_viewer.py", FIXTURE.read_bytes()), ("pixel_font.py",
                                                                     Path(pixel_font.__file__).read_bytes())):
        (tmp_path / name).write_bytes(data)
    proc = subprocess.Popen([sys.executable, str(tmp_path / "document_viewer.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "DISPLAY": xvfb.display})
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"pages": pages, "layout": sa.layout()}))
    proc.stdin.close()
    try:
        window = wait_for(lambda: next((w.geometry for w in client.list_windows()[0] if w.title == sa.TITLE), None),
                          20, what="the viewer mapped")
        wait_for(lambda: sa._drawn(client.screenshot().image, window, pages[0]), 20, what="the cover drawn")
        assert sa.parse_amendment(sa.read_page(client.screenshot().image, window)) is None
        lay = sa.layout()
        for number in (1 if at == 2 else 2, at):
            box = lay["buttons"][number - 1]
            client.click(window[0] + box[0] + box[2] // 2, window[1] + box[1] + box[3] // 2)
            wait_for(lambda n=number: sa.shown_page(client.screenshot().image, window) == n, 20,
                     what=f"page {number} drawn")
            lines = sa.read_page(client.screenshot().image, window)
            assert lines[:len(pages[number - 1])] == pages[number - 1]
            assert sa.parse_amendment(lines) == (world["amendment"] if number == at else None)
        entry, approve = lay["entry"], lay["approve"]
        client.click(window[0] + approve[0] + approve[2] // 2, window[1] + approve[1] + approve[3] // 2)
        assert proc.poll() is None  # nothing typed: the form refuses
        client.click(window[0] + entry[0] + entry[2] // 2, window[1] + entry[1] + entry[3] // 2)
        client.type_text("1234.56")
        client.click(window[0] + approve[0] + approve[2] // 2, window[1] + approve[1] + approve[3] // 2)
        assert proc.wait(timeout=20) == 0 and proc.stdout is not None
        record = json.loads(proc.stdout.read().strip().splitlines()[-1])
        assert record == {"amount": "1234.56", "pages_viewed": [1, 2] if at == 2 else [1, 2, 3]}
    finally:
        proc.kill()
        proc.wait()
