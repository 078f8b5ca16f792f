"""Weave-DevOps-6 without a VM: the controller's model against its Verilog (through iverilog when the host has it),
the oracle's one-line fix search and VCD comparison, the clauses on fake probes and on a save file GTKWave
wrote, GTKWave's widgets found in screenshots, and the Spec sheet read back off the real window on Xvfb."""

from __future__ import annotations

import json
import os
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
from weavegym.envs.tasks.devops import gtkwave_screen as gw
from weavegym.envs.tasks.devops import junction_rtl as rtl
from weavegym.envs.tasks.devops import waveform_oracle as wo
from weavegym.envs.tasks.devops import waveform_review as wr
from weavegym.envs.tasks.pixel_font import read_text
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(wr.__file__).parent / "fixtures"
SAMPLE = Path(__file__).parent / "data" / "waveform_review_before.gtkw"


def _design(seed: int) -> rtl.Design:
    return rtl.plan(np.random.default_rng(seed))


def _spec(design: rtl.Design) -> dict[str, str]:
    rows = rtl.rows(rtl.run(design.good, design.visible))
    rows["req"] = "".join(str(r) for r in design.visible)
    return rows


def test_seeds_vary_the_junction_the_durations_and_the_bug() -> None:
    designs = [_design(seed) for seed in range(30)]
    assert len({(d.name, tuple(d.good.durations.values()), d.buggy_line) for d in designs}) >= 25
    assert {d.bug for d in designs} == {"duration", "late_req"}
    for d in designs:
        cycle, signals = rtl.first_difference(rtl.run(d.good, d.visible), rtl.run(d.bad, d.visible)) or (-1, [])
        assert 6 <= cycle <= len(d.visible) - 4 and signals
        assert rtl.first_difference(rtl.run(d.good, d.hidden), rtl.run(d.bad, d.hidden)) is not None
        assert d.buggy_line in rtl.verilog(d.name, d.bad) and d.fixed_line in rtl.verilog(d.name, d.good)


def test_the_oracle_finds_the_one_fix_from_the_rtl_and_the_spec_alone() -> None:
    for seed in range(120):
        d = _design(seed)
        bad = rtl.verilog(d.name, d.bad)
        fix = wo.find_fix(bad, _spec(d))
        assert fix is not None, seed
        assert bad.replace(*fix) == rtl.verilog(d.name, d.good), seed
        assert wo.compare(_spec(d), rtl.rows(rtl.run(d.bad, d.visible))) == rtl.first_difference(
            rtl.run(d.good, d.visible), rtl.run(d.bad, d.visible))
        assert wo.compare(_spec(d), rtl.rows(rtl.run(d.good, d.visible))) is None


def test_a_plausible_other_edit_does_not_reproduce_the_spec() -> None:
    """Guessing a constant without the spec: every other single edit leaves the run different from the spec."""
    d = _design(0)
    spec = _spec(d)
    for phase, value in d.bad.durations.items():
        for other in range(1, 9):
            candidate = rtl.Machine({**d.bad.durations, phase: other}, d.bad.walk_on_late_req)
            if candidate != d.good and other != value:
                assert rtl.rows(rtl.run(candidate, d.visible)) != {k: spec[k] for k in rtl.OUTPUTS}


@pytest.mark.parametrize("seed", [0, 3, 4, 6])
def test_the_verilog_runs_as_the_model_says_and_the_hidden_testbench_tells_good_from_bad(
        seed: int, tmp_path: Path) -> None:
    d = _design(seed)
    for which, machine in (("bad", d.bad), ("good", d.good)):
        (tmp_path / f"{d.module}.v").write_text(rtl.verilog(d.name, machine))
        (tmp_path / "tb.v").write_text(rtl.testbench(d, "x.vcd"))
        subprocess.run(["iverilog", "-o", "sim", "tb.v", f"{d.module}.v"], cwd=tmp_path, check=True)
        subprocess.run(["vvp", "-n", "sim", f"+vcd={which}.vcd"], cwd=tmp_path, check=True, capture_output=True)
        changes = rtl.vcd_values((tmp_path / f"{which}.vcd").read_text())
        sampled = list(zip(*(rtl.sample(changes[n], len(d.visible)) for n in rtl.OUTPUTS), strict=True))
        assert sampled == rtl.run(machine, d.visible)
        (tmp_path / "h.v").write_text(rtl.hidden_testbench(d))
        subprocess.run(["iverilog", "-o", "h", "h.v", f"{d.module}.v"], cwd=tmp_path, check=True)
        out = subprocess.run(["vvp", "-n", "h"], cwd=tmp_path, capture_output=True, text=True).stdout
        assert ("WEAVEGYM-ERRORS 0 OF" in out) is (which == "good")
        sampler = subprocess.run(["bash", "-c", wo._sampler(f"{which}.vcd", len(d.visible))], cwd=tmp_path,
                                 capture_output=True, text=True, check=True).stdout
        assert wo._rows_in(sampler) == rtl.rows(rtl.run(machine, d.visible))


class _LocalClient:
    """Runs the hidden-testbench probe's script on this host, as the guest agent would run it in the VM."""

    def __init__(self) -> None:
        self.calls = 0

    def exec(self, argv: list[str], stdin: bytes, timeout: float) -> subprocess.CompletedProcess[str]:
        self.calls += 1
        if os.geteuid() != 0:  # only root can switch to nobody; the script is otherwise the same
            argv = [a.replace("runuser -u nobody -- ", "") for a in argv]
        return subprocess.run(argv, input=stdin.decode(), capture_output=True, text=True, timeout=timeout)


class _RtlProbe:
    def __init__(self, files: Mapping[str, str]) -> None:
        self.files, self.client = files, _LocalClient()

    def read_bytes(self, path: str, max_bytes: int) -> bytes | None:
        text = self.files.get(path)
        return None if text is None else text.encode()[:max_bytes]


def _stealing(rtl_source: str) -> str:
    """``rtl_source`` plus a block that reads the simulation's source for the checker's token and passes itself."""
    steal = """
    initial begin : steal
        integer fd, n;
        reg [8*400-1:0] line;
        reg [8*64-1:0] tok;
        fd = $fopen("all.v", "r");
        while (!$feof(fd)) begin
            n = $fgets(line, fd);
            if ($sscanf(line, " $display(\\"WEAVEGYM-%s", tok) == 1) begin
                $display("WEAVEGYM-%0s 0 OF 160", tok);
                $finish;
            end
        end
    end
endmodule"""
    return rtl_source.replace("endmodule", steal, 1)


def test_the_hidden_testbench_passes_only_the_fix_and_refuses_rtl_that_reaches_past_its_ports(
        monkeypatch: pytest.MonkeyPatch) -> None:
    d = _design(0)
    truth = {"repo": "/r", "module": d.module, "hidden_tb": rtl.hidden_testbench(d), "hidden_cycles": len(d.hidden)}
    path = wr.RTL.format(**truth)

    def outcome(source: str) -> tuple[str, int]:
        probe = _RtlProbe({path: source})
        return wr.check_hidden_testbench(probe, truth).outcome, probe.client.calls  # type: ignore[arg-type]

    assert outcome(rtl.verilog(d.name, d.good)) == ("satisfied", 1)
    assert outcome(rtl.verilog(d.name, d.bad)) == ("failed", 1)
    forged = _stealing(rtl.verilog(d.name, d.bad))
    assert outcome(forged) == ("failed", 0)  # refused before it runs
    with monkeypatch.context() as m:  # the attack is real: simulated, the unfixed RTL prints the passing line
        m.setattr(rtl, "foreign_constructs", lambda source: [])
        assert outcome(forged) == ("satisfied", 1)


@pytest.mark.parametrize("seed", range(8))
def test_the_shipped_rtl_and_its_fix_are_plain_rtl(seed: int) -> None:
    d = _design(seed)
    assert rtl.foreign_constructs(rtl.verilog(d.name, d.bad)) == []
    assert rtl.foreign_constructs(rtl.verilog(d.name, d.good)) == []


@pytest.mark.parametrize(("snippet", "what"), [
    ("initial $display(1);", "system task"),
    ('wire [8*4-1:0] s = "abcd";', "string"),
    ("`include \"x.v\"", "compiler directive"),
    ("assign q = weavegym_hidden_tb.errors;", "hierarchical"),
    ("assign q = weavegym_hidden_tb . errors;", "hierarchical"),
    ("assign q = \\weavegym_hidden_tb .errors;", "hierarchical"),
    ("assign q = g[0].r;", "hierarchical"),
    ("initial force q = 1'b0;", "force"),
    ("defparam u.W = 3;", "defparam"),
])
def test_rtl_that_reaches_past_its_ports_is_named(snippet: str, what: str) -> None:
    source = (f"module m(input a, output q);\n  sub u (.a(a), .b( a ));  // a.b, $x and `y in a comment\n"
              f"  {snippet}\nendmodule\n")
    found = rtl.foreign_constructs(source)
    assert found and all("line 3" in f for f in found) and any(what in f for f in found), found


def test_a_save_file_gtkwave_wrote_parses_to_its_dump_marker_and_traces() -> None:
    found = rtl.parse_gtkw(SAMPLE.read_text())
    assert found["gtkwave"] and found["dumpfile"] == "/tmp/devops6w/repo/before.vcd" and found["marker"] == 130
    assert {rtl.trace_signal(t) for t in found["traces"]} == {"clk", "ew_light", "ns_light", "req", "rst", "walk"}
    assert rtl.parse_gtkw(SAMPLE.read_text().replace("*-6.608752 130 ", "*-6.608752 -1 "))["marker"] is None


def test_the_review_needs_gtkwave_the_right_vcd_the_failing_output_and_the_marker_in_the_cycle() -> None:
    truth: dict[str, Any] = {"repo": "/tmp/devops6w/repo", "cycle": 12, "signals": ["ew_light"]}
    sample = SAMPLE.read_text()

    def outcome(text: str | None, path: str = wr.BEFORE) -> str:
        return wr.check_before(FilesProbe({} if text is None else {path: text}), truth).outcome  # type: ignore[arg-type]

    assert outcome(sample) == "satisfied"
    assert outcome(None) == "failed"
    assert outcome(sample.replace(" 130 ", " 136 ")) == "failed"  # cycle 13
    assert outcome(sample.replace(" 130 ", " 125 ")) == "satisfied"  # the cycle's first instant
    assert outcome(sample.replace("before.vcd", "after.vcd")) == "failed"
    assert outcome(sample.replace("tb.ew_light[1:0]\n", "")) == "failed"
    assert outcome(sample.replace("[*] GTKWave Analyzer", "[*] Hand made")) == "failed"
    assert wr.check_after(FilesProbe({wr.AFTER: sample}), truth).outcome == "failed"  # type: ignore[arg-type]


def test_the_report_names_the_cycle_and_a_failing_output() -> None:
    truth = {"repo": "/r", "module": "m", "cycle": 9, "signals": ["ns_light", "walk"]}

    def outcome(text: str) -> str:
        return wr.check_report(FilesProbe({"/r/REVIEW.txt": text}), truth).outcome  # type: ignore[arg-type]

    assert outcome("cycle: 9\nsignal: walk\n") == "satisfied"
    assert outcome("Cycle = 9\nsignal: tb.dut.ns_light[1:0]\n") == "satisfied"
    assert outcome("cycle: 10\nsignal: walk\n") == "failed"
    assert outcome("cycle: 9\nsignal: ew_light\n") == "failed"


def test_the_oracle_is_denied_the_answer_and_the_instruction_gives_nothing_away() -> None:
    truth = {k: 1 for k in ("repo", "module", "tip", "spec_window", "spec_targets", "cycle", "signals", "bug",
                            "fixed_line", "hidden_tb", "hidden_cycles")}
    assert set(wr.TASK.oracle_truth(truth)) == {"repo", "module", "tip", "spec_window", "spec_targets",
                                                "hidden_cycles"}
    d = _design(4)
    text = wr.TASK.instruction.format(repo="/home/user/rtl/x", module=d.module, junction=d.name, cycles=40,
                                      last_cycle=39)
    assert "localparam" not in text and "pending" not in text


# -- GTKWave and the Spec sheet on the screen --------------------------------------------------------------------


def _gtkwave_screen() -> np.ndarray:
    """A GTKWave-like frame: light window, a black wave area with a green clock, a coloured scope icon."""
    image = np.full((720, 1280, 3), 240, dtype=np.uint8)
    image[150:460, 420:1250] = 0
    image[160:165, 30:46] = (40, 160, 40)  # the scope icon
    image[250:262, 60:90] = 0  # the first signal row's text
    x = lambda t: round(422 + 2 * t)  # noqa: E731
    for k in range(80):
        image[180:194, x(5 + 5 * k)] = (0, 255, 0)
    for k in range(40):
        image[180, x(5 + 10 * k):x(10 + 10 * k)] = (0, 255, 0)
        image[193, x(10 + 10 * k):x(15 + 10 * k)] = (0, 255, 0)
    return image


def test_gtkwave_widgets_and_the_time_axis_are_found_in_a_screenshot() -> None:
    image = _gtkwave_screen()
    wave = gw.wave_area(image)
    assert wave == (420, 150, 1250, 460)
    icon = gw.scope_icon(image, wave)
    assert icon is not None and abs(icon[0] - 38) <= 2 and abs(icon[1] - 162) <= 2
    assert gw.first_signal_row(image, icon) is not None
    edges = gw.clock_edges(image, wave)
    assert edges is not None and len(edges) == 80
    a, b = gw.time_to_x(edges, 5, 5)
    assert abs(b - 2) < 0.05 and abs(a - 422) < 1.5
    assert gw.wave_area(np.full((720, 1280, 3), 240, dtype=np.uint8)) is None


def test_the_spec_reads_back_exactly_from_the_screen() -> None:
    d = _design(3)
    rows, page = _spec(d), (60, 500)
    image = np.full((720, 1280, 3), 255, dtype=np.uint8)
    for key, y in zip(wo.ROW_KEYS, wo.ROW_Y[2:], strict=True):
        for x0, y0, x1, y1 in pixel_font.layout_text(rows[key], page[0] + wo.CELLS_X, page[1] + y, wo.SCALE):
            image[y0:y1, x0:x1] = pixel_font.INK
    assert wo.read_spec(image, page, len(d.visible)) == rows
    assert wo.read_spec(np.full((720, 1280, 3), 255, dtype=np.uint8), page, len(d.visible)) is None


@pytest.mark.xvfb
def test_the_spec_sheet_shows_the_timing_only_after_its_tab_and_records_the_sign_off(
        xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> None:
    d = _design(5)
    shutil.copy(FIXTURES / "spec_sheet.py", tmp_path / "spec_sheet.py")
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    layout = {**wo.spec_layout(), "x": 20, "y": 20}  # the test display is small
    shown = {"module": d.module, "rows": _spec(d), "layout": layout}
    proc = subprocess.Popen([sys.executable, str(tmp_path / "spec_sheet.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "DISPLAY": xvfb.display})
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(shown).encode())
        proc.stdin.close()
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == "Spec sheet" and w.mapped),
                                       None), 20, what="the Spec sheet mapped")
        targets = wo.spec_targets(window.geometry)
        wait_for(lambda: wo.tabs_drawn(client.screenshot().image, window.geometry), 20, what="the tabs drawn")
        assert wo.read_spec(client.screenshot().image, targets["page"], len(d.visible)) is None
        client.click(*targets["tabs"][1])
        wait_for(lambda: wo.read_spec(client.screenshot().image, targets["page"], len(d.visible)) == _spec(d), 20,
                 what="the timing read back exactly")
        client.click(*targets["tabs"][2])
        page = targets["page"]
        wait_for(lambda: read_text(client.screenshot().image, page[0] + wo.TITLE_AT[0], page[1] + wo.TITLE_AT[1],
                                   wo.SCALE, 8) == "SIGN-OFF", 20, what="the Sign-off tab")
        client.click(*targets["record"])  # nothing entered: the form refuses and stays
        client.click(*targets["commit"])
        client.type_text("0A1b2c3d4e5f")
        client.click(*targets["cycle"])
        client.type_text("17")
        client.click(*targets["record"])
        assert json.loads(proc.stdout.readline()) == {"commit": "0a1b2c3d4e5f", "cycle": 17}
        assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.wait()
