"""Weave-DevOps-7 (alert triage) without a VM: the night's capture (incidents, decoys, the pcap bytes and the pcapng
reader), the oracle's tshark hunt and report commands run by the real tshark and bash, the clauses on right and
wrong finals (unit), and the real Alert Board on Xvfb through the real agent (xvfb): an alert read back off the
screen, the refusals, a close with its case code and the next alert."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from pixel_apps import pixel_app

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.devops import _alert_capture as ac
from weavegym.envs.tasks.devops import alert_triage as at
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(at.__file__).parent / "fixtures"
NIGHT = ac.night(np.random.default_rng(0))
TRUTH = {"alerts": NIGHT["alerts"], "at": list(at.BOARD_AT), "shark": [0, 40, 766, 640]}
SHA = "0" * 64


def _ip_of(frame: bytes, offset: int) -> str:
    return ".".join(str(b) for b in frame[14 + offset:18 + offset])


def _export(alert: Mapping[str, object]) -> bytes:
    """What Wireshark's export of the incident holds: its packets, as classic pcap."""
    return ac.pcap_bytes([(t, d) for t, d in NIGHT["frames"] if alert["attacker"] in (_ip_of(d, 12), _ip_of(d, 16))])


def _final(cases: tuple[str, ...] = ("ABC234", "DEF567", "GHJ892")) -> dict[str, bytes]:
    """The files of a night triaged right: three exports, the board's record and the report."""
    files: dict[str, bytes] = {}
    records, lines = [], []
    for number, (alert, case) in enumerate(zip(NIGHT["alerts"], cases, strict=True), 1):
        data = _export(alert)
        files[at.evidence_path(number)] = data
        sha = hashlib.sha256(data).hexdigest()
        records.append({"alert": number, "attacker": alert["attacker"], "packets": alert["packets"], "sha256": sha,
                        "case": case})
        lines.append(f"{number} | {alert['attacker']} | {alert['packets']} | {case} | {sha}")
    files[at.RECORD] = "".join(json.dumps(r) + "\n" for r in records).encode()
    files[at.REPORT] = "".join(line + "\n" for line in lines).encode()
    return files


def _outcomes(files: Mapping[str, bytes]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, TRUTH).outcome for c in at.TASK.clauses}  # type: ignore[arg-type]


ALL_SATISFIED = {c.name: Outcome.SATISFIED for c in at.TASK.clauses}


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(4))
def test_each_incident_is_every_packet_of_its_attacker_and_its_decoy_lies_outside_the_window(seed: int) -> None:
    night = ac.night(np.random.default_rng(seed))
    alerts = night["alerts"]
    assert len({a["kind"] for a in alerts}) == 3 and len(night["frames"]) > 2000
    attackers = {a["attacker"] for a in alerts} | {a["decoy"] for a in alerts}
    assert len(attackers) == 6
    for alert in alerts:
        mine = [(t, d) for t, d in night["frames"] if alert["attacker"] in (_ip_of(d, 12), _ip_of(d, 16))]
        assert sorted(ac.frame_key(t, d) for t, d in mine) == alert["keys"] and len(mine) == alert["packets"]
        lo, hi = alert["window"]
        assert all(lo <= t <= hi for t, _d in mine)
        decoy = [t for t, d in night["frames"] if alert["decoy"] in (_ip_of(d, 12), _ip_of(d, 16))]
        assert decoy and all(t < lo or t > hi for t in decoy)
        for line in at.alert_lines(alert):
            assert not pixel_font.unsupported(line) and len(line) * pixel_font.ADVANCE * at.SCALE <= at.ALERT[2]
        assert alert["attacker"] not in " ".join(at.alert_lines(alert))
    assert night == ac.night(np.random.default_rng(seed))  # the seed alone decides


@pytest.mark.unit
def test_the_reader_takes_pcap_and_pcapng_and_refuses_anything_else() -> None:
    frames = NIGHT["frames"][:5]
    assert ac.read_packets(ac.pcap_bytes(frames)) == [(pytest.approx(t), d) for t, d in frames]

    def block(kind: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        return struct.pack("<II", kind, len(body) + 12) + body + struct.pack("<I", len(body) + 12)

    options = struct.pack("<HHB3x", 9, 1, 9) + struct.pack("<HH", 0, 0)  # if_tsresol: nanoseconds
    blocks = [block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
              block(1, struct.pack("<HHI", 1, 0, 0) + options), block(4, b"\0" * 4)]
    for t, d in frames:
        ns = round(t * 1e9)
        blocks.append(block(6, struct.pack("<IIIII", 0, ns >> 32, ns & 0xFFFFFFFF, len(d), len(d)) + d))
    got = ac.read_packets(b"".join(blocks))
    assert sorted(ac.frame_key(t, d) for t, d in got) == sorted(ac.frame_key(t, d) for t, d in frames)
    for bad in (b"", b"hello world, no capture at all", ac.pcap_bytes(frames)[:-3], b"".join(blocks)[:-8]):
        with pytest.raises(ValueError):
            ac.read_packets(bad)


@pytest.mark.unit
def test_a_night_triaged_right_satisfies_every_clause() -> None:
    assert _outcomes(_final()) == ALL_SATISFIED


@pytest.mark.unit
def test_a_wrong_export_fails_and_a_changed_one_no_longer_matches_the_board() -> None:
    alert = NIGHT["alerts"][0]
    packets = ac.read_packets(_export(alert))
    for data in (ac.pcap_bytes(packets[1:]),  # one packet short
                 ac.pcap_bytes(sorted([*packets, NIGHT["frames"][0]])),  # one not the incident's
                 ac.pcap_bytes(NIGHT["frames"]),  # the whole night
                 b"not a capture"):
        files = _final()
        files[at.evidence_path(1)] = data
        got = _outcomes(files)
        assert got["evidence_exported"] == Outcome.PARTIAL and got["alerts_closed"] == Outcome.PARTIAL
        assert got["incident_report"] == Outcome.FAILED
    files = _final()
    for number in (1, 2, 3):
        del files[at.evidence_path(number)]
    assert _outcomes(files)["evidence_exported"] == Outcome.FAILED


@pytest.mark.unit
def test_a_missing_record_and_a_wrong_report_fail() -> None:
    files = _final()
    del files[at.RECORD]
    got = _outcomes(files)
    assert got["alerts_closed"] == got["incident_report"] == Outcome.FAILED
    assert got["evidence_exported"] == Outcome.SATISFIED
    good = _final()[at.REPORT].decode()
    first = good.splitlines()[0]
    _number, attacker, packets, case, sha = (p.strip() for p in first.split("|"))
    for text in (good.replace(case, "ZZZ999"),  # another case code
                 good.replace(sha, SHA),  # another hash
                 good.replace(f"| {packets} |", f"| {int(packets) + 1} |", 1),  # another count
                 good.replace(attacker, "10.9.9.9"),  # another attacker
                 "\n".join(good.splitlines()[1:]),  # a line missing
                 "N | attacker | packets | case | sha256\n" + good,  # a header line
                 ""):
        files = _final()
        files[at.REPORT] = text.encode()
        assert _outcomes(files)["incident_report"] == Outcome.FAILED, text[:80]
    files = _final()
    files[at.REPORT] = good.replace(case, case.lower()).replace("|", " | ").encode()  # case and spacing are free
    assert _outcomes(files)["incident_report"] == Outcome.SATISFIED


@pytest.mark.unit
def test_the_alert_reads_back_off_a_drawn_panel() -> None:
    image = np.full((720, 1280, 3), 255, dtype=np.uint8)
    alert = NIGHT["alerts"][1]
    for index, line in enumerate(["ALERT 2 OF 3", *at.alert_lines(alert)]):
        for x0, y0, x1, y1 in pixel_font.layout_text(line, at.BOARD_AT[0] + at.ALERT[0] + at.PAD,
                                                     at.BOARD_AT[1] + at.ALERT[1] + at.PAD + index * at.LINE_STEP,
                                                     at.SCALE):
            image[y0:y1, x0:x1] = pixel_font.INK
    assert at.read_alert(image, list(at.BOARD_AT), 2) == {"sensor": alert["sensor"], "from": alert["from"],
                                                          "to": alert["to"], "kind": alert["kind"]}
    assert at.read_alert(image, list(at.BOARD_AT), 1) is None


def _export_dialog(before: np.ndarray) -> np.ndarray:
    """A sketch of the guest's Export Specified Packets dialog over ``before``: grey, with the white 'Look in' combo,
    the file list and, 20 px tall below it, the File name field (as on the guest's screen at 1280 x 720)."""
    frame = before.copy()
    frame[45:650, 101:768] = 239
    frame[88:106, 186:576] = 255  # 'Look in'
    frame[135:311, 212:752] = 255  # the file list
    frame[330:350, 186:666] = 255  # File name
    frame[376:394, 186:664] = 255  # 'Export as'
    return frame


@pytest.mark.unit
def test_the_oracle_finds_the_export_dialogs_file_name_field_and_sees_the_typed_name() -> None:
    before = np.full((720, 1280, 3), 200, dtype=np.uint8)
    before[160:400, 0:766] = 255  # Wireshark's white packet list, under the dialog
    assert at.file_name_field(before, before, at.BOARD_AT[0]) is None
    frame = _export_dialog(before)
    field = at.file_name_field(frame, before, at.BOARD_AT[0])
    assert field == (186, 330, 480, 20)
    assert at.typed_in(frame, field) == 0
    frame[336:344, 190:250] = 30  # 'alert-1' typed in
    assert at.typed_in(frame, field) >= at.TYPED_PIXELS * len("alert-1")
    assert at.file_name_field(frame, frame, at.BOARD_AT[0]) is None  # no dialog came
    frame[135:311, 212:752] = 239  # no file list: not the dialog
    assert at.file_name_field(frame, before, at.BOARD_AT[0]) is None


@pytest.mark.unit
@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed on this host")
def test_the_oracles_hunt_and_report_run_in_the_real_tshark_and_bash(tmp_path: Path) -> None:
    (tmp_path / "captures").mkdir()
    (tmp_path / "reports").mkdir()
    (tmp_path / "captures" / Path(at.CAPTURE).name).write_bytes(ac.pcap_bytes(NIGHT["frames"]))
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    for alert in NIGHT["alerts"]:
        shown = {"from": alert["from"], "to": alert["to"], "kind": alert["kind"]}
        out = subprocess.run(["bash", "-c", at.hunt_command(shown)], check=True, capture_output=True, text=True,
                             env=env).stdout
        assert f"ATTACKER {alert['attacker']}\nPACKETS {alert['packets']}\n" in out
    lines = [f"1 | 10.20.3.4 | 42 | ABC234 | {SHA}", f"2 | 198.51.100.7 | 7 | XYZ789 | {SHA}"]
    subprocess.run(["bash", "-c", at.report_command(lines)], check=True, capture_output=True, env=env)
    rows, problem = at.parse_report((tmp_path / "reports" / "incidents.txt").read_text())
    assert problem == "" and rows == {1: ("10.20.3.4", 42, "ABC234", SHA), 2: ("198.51.100.7", 7, "XYZ789", SHA)}


# ---- the real board on a real X server, through the real guest agent -----------------------------------------

@pytest.mark.xvfb
def test_the_board_shows_alerts_as_pixels_refuses_wrong_closes_and_gives_a_case_code(xvfb: XvfbDisplay,
                                                                                    client: GuestClient,
                                                                                    tmp_path: Path) -> None:
    alerts = NIGHT["alerts"]
    conf = {"alerts": [{"lines": at.alert_lines(a), "attacker": a["attacker"], "packets": a["packets"]}
                       for a in alerts], "evidence": str(tmp_path / "alert-{}.pcap"), "layout": at.layout()}
    truth = {"at": [0, 0]}

    def status() -> str:
        a = truth["at"]
        return pixel_font.read_text(client.screenshot().image, a[0] + at.STATUS[0] + at.PAD,
                                    a[1] + at.STATUS[1] + at.PAD, at.SCALE, 38)

    def press(box: tuple[int, int, int, int]) -> None:
        client.click(truth["at"][0] + box[0] + box[2] // 2, truth["at"][1] + box[1] + box[3] // 2)

    def enter(text: str) -> None:
        press(at.ENTRY)
        client.key("Escape")
        client.type_text(text)
        client.key("Return")

    with pixel_app(FIXTURES / "alert_board.py", conf, tmp_path, xvfb.display) as proc:
        truth["at"] = list(wait_for(lambda: at.origin(client.screenshot().image), 20,
                                    what="the board drawn"))
        assert at.read_alert(client.screenshot().image, truth["at"], 1) is None  # nothing before a click
        assert at.board_on_top(client.screenshot().image, truth["at"])
        assert not at.entry_focused(client.screenshot().image, truth["at"])
        press(at.ENTRY)  # the oracle types only once the entry's focus ring shows
        wait_for(lambda: at.entry_focused(client.screenshot().image, truth["at"]), 20, what="the entry's focus ring")
        enter(f"{alerts[0]['attacker']} {alerts[0]['packets']}")
        wait_for(lambda: status() == "SHOW THE NEXT ALERT FIRST", 20, what="the refusal before an alert")
        press(at.SHOW)
        got = wait_for(lambda: at.read_alert(client.screenshot().image, truth["at"], 1), 20, what="alert 1")
        assert got == {"sensor": alerts[0]["sensor"], "from": alerts[0]["from"], "to": alerts[0]["to"],
                       "kind": alerts[0]["kind"]}
        right = f"{alerts[0]['attacker']} {alerts[0]['packets']}"
        for text, refusal in (("10.1.2.3", "REFUSED: TYPE ADDRESS AND COUNT"),
                              ("999.1.2.3 4", "REFUSED: NOT AN IPV4 ADDRESS"),
                              ("x" * 3000, "REFUSED: TYPE ADDRESS AND COUNT"),
                              (f"{alerts[1]['attacker']} {alerts[0]['packets']}", "REFUSED: NOT ALERT 1'S ATTACKER"),
                              (f"{alerts[0]['attacker']} {alerts[0]['packets'] + 1}", "REFUSED: WRONG PACKET COUNT"),
                              (right, "REFUSED: EXPORT ALERT-1.PCAP FIRST")):
            enter(text)
            wait_for(lambda r=refusal: status() == r, 20, what=refusal)
        evidence = _export(alerts[0])
        (tmp_path / "alert-1.pcap").write_bytes(evidence)
        enter(f" {alerts[0]['attacker']}  {alerts[0]['packets']} ")
        line = json.loads(proc.stdout.readline())
        assert line == {**line, "alert": 1, "attacker": alerts[0]["attacker"], "packets": alerts[0]["packets"],
                        "sha256": hashlib.sha256(evidence).hexdigest()}
        wait_for(lambda: at.read_result(client.screenshot().image, truth["at"], 1) ==
                 f"ALERT 1 CLOSED: CASE {line['case']}", 20, what="the case code read back off the screen")
        press(at.SHOW)
        wait_for(lambda: at.read_alert(client.screenshot().image, truth["at"], 2), 20, what="alert 2")
