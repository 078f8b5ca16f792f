"""Weave-Data-8 (sensor calibration) without a VM: the seeds' benches (a clear bad pair, verdicts with margins),
the oracle's fit and plot commands run by the real python3 on a real database, the clauses on right and wrong
finals (unit), and both real windows on Xvfb through the real agent (xvfb): a run read back off the scope, the
LIMS's refusals, a certificate, and the scope's gate on it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data import _calibration as cb
from weavegym.envs.tasks.data import sensor_calibration as sc
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(sc.__file__).parent / "fixtures"


def _bench(seed: int) -> dict[str, Any]:
    return cb.bench(np.random.default_rng(seed))


def _truth(seed: int) -> dict[str, Any]:
    return {"sensors": _bench(seed)["sensors"], "scope_at": list(cb.SCOPE_AT), "lims_at": list(cb.LIMS_AT)}


def _plot_bytes(tmp_path: Path, drifts: list[tuple[str, float]]) -> bytes:
    command = sc.plot_command(drifts).replace(sc.PLOT, str(tmp_path / "drift.png"))
    subprocess.run(["bash", "-c", command], check=True, capture_output=True, timeout=60)
    return (tmp_path / "drift.png").read_bytes()


def _final(truth: Mapping[str, Any], plot: bytes, certs: tuple[str, ...] = ("ABC234", "DEF567", "GHJ892"),
           fits: list[tuple[float, float]] | None = None, verdicts: list[str] | None = None) -> dict[str, bytes]:
    """The files of a bench done right (or with the given fits and verdicts): the LIMS's record, report and plot."""
    records, lines = [{"sensor": 1, "refused": "GAIN", "gain": 1.0, "offset": 0.0}], [sc.HEADER]
    for number, (sensor, cert) in enumerate(zip(truth["sensors"], certs, strict=True), 1):
        gain, offset = fits[number - 1] if fits else (sensor["gain"], sensor["offset"])
        verdict = verdicts[number - 1] if verdicts else sensor["verdict"]
        records.append({"sensor": number, "gain": gain, "offset": offset, "verdict": verdict, "certificate": cert})
        lines.append(f"{sensor['tag']},{gain:.8g},{offset:.8g},{verdict},{cert}")
    return {sc.RECORD: "".join(json.dumps(r) + "\n" for r in records).encode(),
            sc.REPORT: ("\n".join(lines) + "\n").encode(), sc.PLOT: plot}


def _outcomes(files: Mapping[str, bytes], truth: Mapping[str, Any]) -> dict[str, Outcome]:
    probe = FilesProbe(files)
    return {c.name: c.check(probe, truth).outcome for c in sc.TASK.clauses}  # type: ignore[arg-type]


ALL_SATISFIED = {c.name: Outcome.SATISFIED for c in sc.TASK.clauses}


@pytest.fixture(scope="module")
def plot(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return _plot_bytes(tmp_path_factory.mktemp("plot"), [("PT-101", 0.4), ("TT-202", -1.7), ("FT-303", 5.2)])


# ---- the bench -----------------------------------------------------------------------------------------------

@pytest.mark.unit
def test_seeds_vary_the_sensors_the_runs_and_the_verdicts() -> None:
    benches = [_bench(seed) for seed in range(10)]
    assert len({tuple(s["tag"] for s in b["sensors"]) for b in benches}) == 10
    assert len({tuple(s["kind"] for s in b["sensors"]) for b in benches}) >= 5
    assert len({tuple(s["verdict"] for s in b["sensors"]) for b in benches}) >= 4
    for b in benches:
        assert sorted(s["verdict"] for s in b["sensors"]) == sorted(cb.VERDICTS)
        for s in b["sensors"]:
            assert cb.PAIRS[0] <= len(s["pairs"]) <= cb.PAIRS[1]
            assert cb.TAG.match(s["tag"]) and not pixel_font.unsupported(s["kind"] + s["bench_unit"])
            ratio = cb.drift_ratio(s)
            assert min(abs(ratio - 1), abs(ratio - 3)) >= 0.2  # no verdict on a knife's edge
        assert len(b["rows"]["instruments"]) == 40 and len(b["rows"]["calibrations"]) > 80


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(6))
def test_the_bad_pair_is_the_one_off_the_line_and_keeping_it_is_refused(seed: int) -> None:
    for s in _bench(seed)["sensors"]:
        pairs = [(float(r), float(w)) for r, w in s["pairs"]]
        gain, offset, bad = cb.fit_run(pairs, s["factor"])
        assert bad == s["bad"] and (gain, offset) == (s["gain"], s["offset"])
        kept = [p for i, p in enumerate(pairs) if i != bad]
        residuals = [abs(s["factor"] * r - (gain * w + offset)) for r, w in kept]
        assert max(residuals) < 0.01 * s["span"]  # the others sit on the line
        # a fit with the bad pair, or without the unit factor, is not the run's
        full = np.polyfit([w for _r, w in pairs], [s["factor"] * r for r, _w in pairs], 1)
        assert not all(cb.coefficients_match(float(full[0]), float(full[1]), s))
        if s["factor"] != 1.0:
            raw_gain, raw_offset, _ = cb.fit_run(pairs, 1.0)
            assert not any(cb.coefficients_match(raw_gain, raw_offset, s))
        # six significant digits are enough
        assert all(cb.coefficients_match(float(f"{gain:.6g}"), float(f"{offset:.6g}"), s))


@pytest.mark.unit
def test_the_verdict_rule_reads_as_the_instruction_says() -> None:
    assert cb.calibration_verdict(1.01, 0.0, 1.0, 0.0, 1.5, 0.1) == "PASS"  # 1 % of 1.5 % allowed
    assert cb.calibration_verdict(1.0, 0.25, 1.0, 0.0, 1.5, 0.1) == "ADJUST"  # offset 2.5 tolerances
    assert cb.calibration_verdict(1.05, 0.0, 1.0, 0.0, 1.5, 0.1) == "FAIL"  # gain 3.3 tolerances
    assert cb.calibration_verdict(1.0, -0.31, 1.0, 0.0, 1.5, 0.1) == "FAIL"


@pytest.mark.unit
def test_the_shells_fit_reads_the_real_database_and_finds_the_truth(tmp_path: Path) -> None:
    from weavegym.envs.tasks.data.sqlite_bytes import database_bytes

    bench = _bench(3)
    db = tmp_path / "instruments.db"
    db.write_bytes(database_bytes(cb.SCHEMA, bench["rows"]))
    for s in bench["sensors"]:
        command = sc.fit_command(s).replace(sc.DB, str(db))
        out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, check=True).stdout
        found = re.search(rf"^RESULT {s['tag']} ({sc.NUMBER}) ({sc.NUMBER}) (\w+)$", out, re.M)
        assert found is not None, out
        assert all(cb.coefficients_match(float(found.group(1)), float(found.group(2)), s))
        assert found.group(3) == s["verdict"]
        assert f"BAD P{s['bad'] + 1};" in out
    # the history is noise the query must see through: the latest date is not the highest id
    assert len(bench["rows"]["calibrations"]) > len(bench["rows"]["instruments"])


# ---- the clauses ---------------------------------------------------------------------------------------------

@pytest.mark.unit
def test_a_bench_done_right_satisfies_every_clause(plot: bytes) -> None:
    truth = _truth(1)
    files = _final(truth, plot)
    assert _outcomes(files, truth) == ALL_SATISFIED
    headerless = files[sc.REPORT].decode().split("\n", 1)[1].encode()
    assert _outcomes({**files, sc.REPORT: headerless}, truth) == ALL_SATISFIED


@pytest.mark.unit
def test_a_fit_with_the_bad_pair_and_a_wrong_verdict_are_caught(plot: bytes) -> None:
    truth = _truth(2)
    s = truth["sensors"][0]
    pairs = [(float(r), float(w)) for r, w in s["pairs"]]
    full = np.polyfit([w for _r, w in pairs], [s["factor"] * r for r, _w in pairs], 1)
    fits = [(float(full[0]), float(full[1]))] + [(x["gain"], x["offset"]) for x in truth["sensors"][1:]]
    got = _outcomes(_final(truth, plot, fits=fits), truth)
    assert got["certified"] == Outcome.PARTIAL and got["report"] == Outcome.FAILED
    verdicts = [x["verdict"] for x in truth["sensors"]]
    verdicts[2] = next(v for v in cb.VERDICTS if v != verdicts[2])
    got = _outcomes(_final(truth, plot, verdicts=verdicts), truth)
    assert (got["certified"], got["verdicts"], got["report"]) == (Outcome.SATISFIED, Outcome.PARTIAL, Outcome.FAILED)


@pytest.mark.unit
def test_the_report_must_carry_the_lims_certificates_in_order(plot: bytes) -> None:
    truth = _truth(3)
    files = _final(truth, plot)
    report = files[sc.REPORT].decode()
    wrong_cert = report.replace("DEF567", "DEF568")
    assert _outcomes({**files, sc.REPORT: wrong_cert.encode()}, truth)["report"] == Outcome.FAILED
    lines = report.strip().split("\n")
    swapped = "\n".join([lines[0], lines[2], lines[1], lines[3]])
    assert _outcomes({**files, sc.REPORT: swapped.encode()}, truth)["report"] == Outcome.FAILED
    assert _outcomes({**files, sc.REPORT: b"sensor,gain\nnonsense\n"}, truth)["report"] == Outcome.FAILED
    missing = {k: v for k, v in files.items() if k != sc.REPORT}
    assert _outcomes(missing, truth)["report"] == Outcome.FAILED


@pytest.mark.unit
def test_without_the_lims_record_nothing_is_certified_and_the_report_fails(plot: bytes) -> None:
    truth = _truth(4)
    files = {k: v for k, v in _final(truth, plot).items() if k != sc.RECORD}
    got = _outcomes(files, truth)
    assert (got["certified"], got["verdicts"], got["report"]) == (Outcome.FAILED,) * 3
    refusals_only = {**files, sc.RECORD: b'{"sensor": 1, "refused": "GAIN"}\n{"sensor": 2, "torn'}
    assert _outcomes(refusals_only, truth)["certified"] == Outcome.FAILED


@pytest.mark.unit
def test_the_drift_plot_must_be_a_real_drawn_png(plot: bytes, tmp_path: Path) -> None:
    truth = _truth(0)
    files = _final(truth, plot)
    assert _outcomes(files, truth)["drift_plot"] == Outcome.SATISFIED
    from PIL import Image

    Image.new("RGB", (480, 320), "white").save(tmp_path / "b.png")
    Image.new("RGB", (100, 80), "white").save(tmp_path / "small.png")
    for bad in ((tmp_path / "b.png").read_bytes(), (tmp_path / "small.png").read_bytes(), b"GIF89a not a png",
                plot[:200]):
        assert _outcomes({**files, sc.PLOT: bad}, truth)["drift_plot"] == Outcome.FAILED
    assert _outcomes({k: v for k, v in files.items() if k != sc.PLOT}, truth)["drift_plot"] == Outcome.FAILED


@pytest.mark.unit
def test_the_oracle_is_denied_the_sensors() -> None:
    assert set(sc.TASK.oracle_truth(_truth(0))) == {"scope_at", "lims_at"}


@pytest.mark.unit
def test_the_lims_refuses_malformed_numbers() -> None:
    sys.path.insert(0, str(Path(pixel_font.__file__).parent))
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("lims_form", FIXTURES / "lims_form.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(Path(pixel_font.__file__).parent))
    assert module.number(" 0.0125034 ") == 0.0125034 and module.number("-1,5") == -1.5
    assert module.number("1.2e-3") == 0.0012
    for bad in ("", "abc", "1..2", "nan", "inf", "9" * 41, "１２", "0x1p3", "1_000", "1e999"):
        assert module.number(bad) is None, bad


# ---- the real windows on a real X server, read and typed into through the real guest agent -------------------

def _start(tmp_path: Path, name: str, content: Mapping[str, Any], display: str, out: Any = None) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(tmp_path / f"{name}.py")], stdin=subprocess.PIPE,
                            stdout=out or subprocess.DEVNULL, env={**os.environ, "DISPLAY": display})
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(content).encode())
    proc.stdin.close()
    return proc


@pytest.mark.xvfb
def test_the_windows_show_runs_refuse_wrong_entries_and_gate_the_next_run_on_the_certificate(
        xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> None:
    sensors = _bench(6)["sensors"]
    for name in ("bench_scope.py", "lims_form.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    issued = tmp_path / "issued.txt"
    record = (tmp_path / "record.jsonl").open("wb")
    scope_conf = {"runs": [{k: s[k] for k in ("tag", "kind", "bench_unit", "pairs")} for s in sensors],
                  "issued": str(issued), "layout": cb.scope_layout()}
    lims_conf = {"sensors": [{k: s[k] for k in ("gain", "offset", "span")} for s in sensors],
                 "tolerance": [cb.GAIN_REL_TOL, cb.OFFSET_SPAN_TOL], "issued": str(issued), "layout": cb.lims_layout()}
    procs = [_start(tmp_path, "bench_scope", scope_conf, xvfb.display),
             _start(tmp_path, "lims_form", lims_conf, xvfb.display, record)]
    shot = lambda: client.screenshot().image  # noqa: E731  (with the pointer, as the env's frames)
    try:
        scope = wait_for(lambda: cb.origin(shot(), cb.SCOPE_AT, cb.SCOPE_HEADING), 20, what="the Bench Scope")
        lims = wait_for(lambda: cb.origin(shot(), cb.LIMS_AT, cb.LIMS_HEADING), 20, what="the LIMS")
        assert cb.read_run(shot(), scope, 1) is None  # nothing before the button
        assert cb.lims_sensor(shot(), lims) == 1

        def fill(values: tuple[str, ...]) -> None:
            for index, value in enumerate(values):
                client.click(*cb.centre(lims, cb.field_box(index)))
                if index == 0:
                    client.key("Escape")
                client.type_text(value)
            client.key("Return")

        def lims_status(red: bool) -> str:
            return cb.read_status(shot(), lims, cb.LIMS_STATUS, red=red)

        certificate = ""
        for number, s in enumerate(sensors, 1):
            if number == 1:
                client.click(*cb.centre(scope, cb.SCOPE_SHOW))
            else:  # a wrong certificate is refused and the run stays; the right one opens the next run
                client.click(*cb.centre(scope, cb.SCOPE_ENTRY))
                client.type_text("ZZZZZZ")
                client.key("Return")
                wait_for(lambda n=number: cb.read_status(shot(), scope, cb.SCOPE_STATUS, red=True) ==
                         f"REFUSED: NOT SENSOR {n - 1}'S CERTIFICATE", 20, what="the wrong certificate refused")
                assert cb.read_run(shot(), scope, number - 1) is not None
                client.key("Escape")
                client.type_text(certificate.lower())
                client.key("Return")
            run = wait_for(lambda n=number: cb.read_run(shot(), scope, n), 20, what=f"run {number}")
            assert run == {k: s[k] for k in ("tag", "kind", "bench_unit", "pairs")}
            if number == 1:  # malformed and wrong entries are refused in red and the form stays usable
                fill(("0.0.1", "1", "PASS"))
                wait_for(lambda: lims_status(True) == "REFUSED: GAIN IS NOT A NUMBER", 20, what="a bad gain")
                fill(("1", "x" * 300, "PASS"))
                wait_for(lambda: lims_status(True) == "REFUSED: OFFSET IS NOT A NUMBER", 20, what="a bad offset")
                fill(("1", "2", "MAYBE ÄÖ"))
                wait_for(lambda: lims_status(True) == "REFUSED: VERDICT IS PASS, ADJUST OR FAIL", 20,
                         what="a bad verdict")
                fill((f"{s['gain'] * 1.01:.8g}", f"{s['offset']:.8g}", "PASS"))
                wait_for(lambda: lims_status(True) == "REFUSED: GAIN NOT THE RUN'S FIT", 20, what="a wrong gain")
            fill((f"{s['gain']:.7g}", f"{s['offset']:.7g}", s["verdict"].lower()))
            verdict, certificate = wait_for(lambda n=number: cb.read_certificate(shot(), lims, n), 20,
                                            what=f"sensor {number}'s certificate")
            assert verdict == s["verdict"]
        assert cb.read_status(shot(), lims, cb.LIMS_STATUS) == "ALL SENSORS CERTIFIED"
    finally:
        if os.environ.get("WEAVEGYM_DEBUG_SHOT"):
            from PIL import Image

            Image.fromarray(shot()).save(os.environ["WEAVEGYM_DEBUG_SHOT"])
        for proc in procs:
            proc.kill()
            proc.wait()
        record.close()
    entries = [json.loads(line) for line in (tmp_path / "record.jsonl").read_bytes().decode().splitlines()]
    assert [e["sensor"] for e in entries if "certificate" in e] == [1, 2, 3]
    assert [e["refused"] for e in entries if "refused" in e] == ["GAIN"]
    assert issued.read_text().split()[1::2] == [e["certificate"] for e in entries if "certificate" in e]
