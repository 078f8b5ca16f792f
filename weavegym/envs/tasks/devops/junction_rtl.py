"""The traffic-light controller of Weave-DevOps-6 (no TASK here): its cycle model, its Verilog, its seeded bug,
its testbenches, and readers for what the episode leaves (a VCD, a GTKWave save file).

The design is a Moore FSM: NS_GO, NS_SLOW, EW_GO, EW_SLOW and, when a pedestrian request is pending at the end of
EW_SLOW, WALK (both roads red, ``walk`` high). Each phase lasts a seeded number of cycles. The Python model below
and the Verilog template are two writings of one machine (a unit test runs both through iverilog and compares
them cycle by cycle), so the host knows, per seed, what the spec sheet must show, what the buggy RTL does, the
first cycle where they part, and which outputs differ there.

Timing (shared by both testbenches and the spec sheet): clk starts low and toggles every 5 ns, so cycle N runs
from the rising edge at 10*N+5 ns to the next one. rst is high at the first edge only; the testbench changes rst
and req at the falling edge inside a cycle (10*N+10 ns), and the design samples them at the next rising edge.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

PHASES = ("NS_GO", "NS_SLOW", "EW_GO", "EW_SLOW", "WALK")
LIGHT = {0: "R", 1: "Y", 2: "G"}  # 2'b00 red, 2'b01 yellow, 2'b10 green
OUTPUTS = ("ns_light", "ew_light", "walk")
PERIOD, FIRST_EDGE = 10, 5  # ns
JUNCTIONS = ("harbor", "mill", "station", "market", "quarry", "bridge", "depot", "chapel", "foundry", "orchard")
# What each phase drives: (ns_light, ew_light, walk).
DRIVES = {"NS_GO": (2, 0, 0), "NS_SLOW": (1, 0, 0), "EW_GO": (0, 2, 0), "EW_SLOW": (0, 1, 0), "WALK": (0, 0, 1)}


@dataclass(frozen=True)
class Machine:
    """One writing of the controller: the durations and the two things a bug can bend besides them."""

    durations: Mapping[str, int]  # phase -> cycles
    walk_on_late_req: bool = True  # a request in EW_SLOW's last cycle still gets its WALK


def run(machine: Machine, reqs: Sequence[int]) -> list[tuple[int, int, int]]:
    """(ns_light, ew_light, walk) per cycle; cycle 0 is the reset state, cycle n+1 follows req[n]."""
    phase, timer, pending = "NS_GO", 0, False
    out = []
    for req in reqs:
        out.append(DRIVES[phase])
        limit = machine.durations[phase]
        nxt, timer_next, pending_next = phase, (timer + 1) & 15, pending or bool(req)
        if timer == limit - 1:
            timer_next = 0
            if phase == "EW_SLOW":
                if pending or (req and machine.walk_on_late_req):
                    nxt, pending_next = "WALK", False
                else:
                    nxt = "NS_GO"
            else:
                nxt = {"NS_GO": "NS_SLOW", "NS_SLOW": "EW_GO", "EW_GO": "EW_SLOW", "WALK": "NS_GO"}[phase]
        phase, timer, pending = nxt, timer_next, pending_next
    return out


def rows(trace: Sequence[tuple[int, int, int]]) -> dict[str, str]:
    """The spec sheet's rows: one letter per cycle (R/Y/G for the lights, 1/0 for walk)."""
    return {"ns_light": "".join(LIGHT[t[0]] for t in trace), "ew_light": "".join(LIGHT[t[1]] for t in trace),
            "walk": "".join(str(t[2]) for t in trace)}


def first_difference(a: Sequence[tuple[int, int, int]], b: Sequence[tuple[int, int, int]]
                     ) -> tuple[int, list[str]] | None:
    """The first cycle where two traces differ and the outputs that differ there."""
    for cycle, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return cycle, [name for name, u, v in zip(OUTPUTS, x, y, strict=True) if u != v]
    return None


# -- the seed's design and bug --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Design:
    name: str  # the junction, e.g. "harbor": module harbor_lights in harbor_lights.v
    good: Machine
    bad: Machine
    bug: str  # "duration" or "late_req"
    buggy_line: str
    fixed_line: str
    visible: tuple[int, ...]  # req per cycle of the repository's testbench (the spec sheet's stimulus)
    hidden: tuple[int, ...]  # req per cycle of the checker's testbench

    @property
    def module(self) -> str:
        return f"{self.name}_lights"


# A wrong duration (which phase, by how much) or a request in EW_SLOW's last cycle that no longer gets its walk.
# Both read as deliberate RTL: only the spec sheet says which constant or condition is wrong.
BUGS = ("duration", "duration", "late_req")
VISIBLE_CYCLES, HIDDEN_CYCLES = 40, 160


def plan(rng: np.random.Generator) -> Design:
    """A design and one bug that the visible stimulus shows (its first difference inside the spec's cycles)."""
    name = JUNCTIONS[int(rng.integers(len(JUNCTIONS)))]
    bug = BUGS[int(rng.integers(len(BUGS)))]
    for _attempt in range(500):
        durations = {"NS_GO": int(rng.integers(3, 7)), "NS_SLOW": int(rng.integers(1, 3)),
                     "EW_GO": int(rng.integers(3, 6)), "EW_SLOW": int(rng.integers(1, 3)),
                     "WALK": int(rng.integers(2, 4))}
        good = Machine(durations)
        if bug == "duration":
            phase = PHASES[int(rng.integers(len(PHASES)))]
            wrong = durations[phase] + int(rng.choice([-1, 1, 2]))
            if wrong < 1 or wrong > 8:
                continue
            bad = replace(good, durations={**durations, phase: wrong})
        else:
            bad = replace(good, walk_on_late_req=False)
        visible = _stimulus(rng, VISIBLE_CYCLES, good, late=True)
        found = first_difference(run(good, visible), run(bad, visible))
        if found is None or not 6 <= found[0] <= VISIBLE_CYCLES - 4:
            continue
        hidden = _stimulus(rng, HIDDEN_CYCLES, good, late=True)
        if first_difference(run(good, hidden), run(bad, hidden)) is None:
            continue
        buggy_line, fixed_line = _changed_line(verilog(name, bad), verilog(name, good))
        return Design(name, good, bad, bug, buggy_line, fixed_line, visible, hidden)
    raise RuntimeError("no design whose bug the stimulus shows")


def _stimulus(rng: np.random.Generator, cycles: int, good: Machine, *, late: bool) -> tuple[int, ...]:
    """Sparse one-cycle pedestrian presses; with ``late``, one press lands in EW_SLOW's last cycle."""
    reqs = [0] * cycles
    for at in rng.choice(np.arange(3, cycles - 2), size=max(2, cycles // 14), replace=False):
        reqs[int(at)] = 1
    if late:  # the press the late_req bug mishandles: in the last cycle of an EW_SLOW with nothing pending
        phases = _phase_trace(good, reqs)
        ends = [n for n in range(4, cycles - 8) if phases[n] == "EW_SLOW" and phases[n + 1] != "EW_SLOW"]
        if ends:
            at = ends[int(rng.integers(len(ends)))]
            first = max(i for i in range(at + 1) if phases[i] == "NS_GO")
            for n in range(first, at):
                reqs[n] = 0
            reqs[at] = 1
    return tuple(reqs)


def _phase_trace(machine: Machine, reqs: Sequence[int]) -> list[str]:
    """The phase per cycle (the model again, keeping the phase names: only _stimulus needs them)."""
    names = {DRIVES[p]: p for p in PHASES}
    return [names[t] for t in run(machine, reqs)]


# -- Verilog ------------------------------------------------------------------------------------------------------

def verilog(name: str, machine: Machine) -> str:
    """The controller's RTL for ``machine`` (the good one is the spec; setup ships the bad one)."""
    d = machine.durations
    walk_if = "pending || req" if machine.walk_on_late_req else "pending"
    return f"""// {name} junction: traffic-light controller with a pedestrian walk phase.
// Lights: 2'b00 red, 2'b01 yellow, 2'b10 green. rst is synchronous and active high.
module {name}_lights (
    input  wire       clk,
    input  wire       rst,
    input  wire       req,       // pedestrian button
    output reg  [1:0] ns_light,
    output reg  [1:0] ew_light,
    output reg        walk
);
    localparam [2:0] NS_GO = 3'd0, NS_SLOW = 3'd1, EW_GO = 3'd2, EW_SLOW = 3'd3, WALK = 3'd4;
    localparam [1:0] RED = 2'b00, YELLOW = 2'b01, GREEN = 2'b10;
    localparam NS_GO_T = {d['NS_GO']};
    localparam NS_SLOW_T = {d['NS_SLOW']};
    localparam EW_GO_T = {d['EW_GO']};
    localparam EW_SLOW_T = {d['EW_SLOW']};
    localparam WALK_T = {d['WALK']};

    reg [2:0] phase;
    reg [3:0] timer;
    reg       pending;

    always @(posedge clk) begin
        if (rst) begin
            phase <= NS_GO;
            timer <= 4'd0;
            pending <= 1'b0;
        end else begin
            timer <= timer + 4'd1;
            if (req) pending <= 1'b1;
            case (phase)
                NS_GO:   if (timer == NS_GO_T - 1) begin phase <= NS_SLOW; timer <= 4'd0; end
                NS_SLOW: if (timer == NS_SLOW_T - 1) begin phase <= EW_GO; timer <= 4'd0; end
                EW_GO:   if (timer == EW_GO_T - 1) begin phase <= EW_SLOW; timer <= 4'd0; end
                EW_SLOW: if (timer == EW_SLOW_T - 1) begin
                    timer <= 4'd0;
                    if ({walk_if}) begin phase <= WALK; pending <= 1'b0; end
                    else phase <= NS_GO;
                end
                WALK:    if (timer == WALK_T - 1) begin phase <= NS_GO; timer <= 4'd0; end
                default: begin phase <= NS_GO; timer <= 4'd0; end
            endcase
        end
    end

    always @(*) begin
        case (phase)
            NS_GO:   begin ns_light = GREEN;  ew_light = RED;    walk = 1'b0; end
            NS_SLOW: begin ns_light = YELLOW; ew_light = RED;    walk = 1'b0; end
            EW_GO:   begin ns_light = RED;    ew_light = GREEN;  walk = 1'b0; end
            EW_SLOW: begin ns_light = RED;    ew_light = YELLOW; walk = 1'b0; end
            default: begin ns_light = RED;    ew_light = RED;    walk = 1'b1; end
        endcase
    end
endmodule
"""


def _changed_line(bad: str, good: str) -> tuple[str, str]:
    changed = [(b, g) for b, g in zip(bad.splitlines(), good.splitlines(), strict=True) if b != g]
    assert len(changed) == 1, changed
    return changed[0][0].strip(), changed[0][1].strip()


def _drive(reqs: Sequence[int]) -> str:
    """The stimulus as straight-line code from the first edge (5 ns): rst and req set at each falling edge."""
    return "\n".join(f"        #5 rst = 1'b0; req = 1'b{req}; #5;  // cycle {cycle}" for cycle, req in enumerate(reqs))


def testbench(design: Design, vcd_default: str) -> str:
    """The repository's testbench: the visible stimulus, a VCD (``+vcd=PATH`` or ``vcd_default``), no checks."""
    module, cycles = design.module, len(design.visible)
    return f"""`timescale 1ns/1ns
// Testbench of {module}: drives the spec sheet's stimulus for {cycles} cycles and dumps a VCD.
// Run:  iverilog -o sim.vvp tb_{module}.v {module}.v && vvp sim.vvp +vcd=OUT.vcd
module tb;
    reg clk = 1'b0, rst = 1'b1, req = 1'b0;
    wire [1:0] ns_light, ew_light;
    wire walk;

    {module} dut (.clk(clk), .rst(rst), .req(req), .ns_light(ns_light), .ew_light(ew_light), .walk(walk));

    always #5 clk = ~clk;  // rising edges at 5, 15, 25 ... ns: cycle N starts at 10*N+5 ns

    initial begin : run
        reg [8*200-1:0] vcd;  // in the named block, so tb's own signal list stays the design's
        if (!$value$plusargs("vcd=%s", vcd)) vcd = "{vcd_default}";
        $dumpfile(vcd);
        $dumpvars(0, tb);
        #5;
{_drive(design.visible)}
        $finish;
    end
endmodule
"""


def hidden_testbench(design: Design) -> str:
    """The checker's testbench: its own stimulus, and every output checked mid-cycle against the good model."""
    module, reqs = design.module, design.hidden
    expected = run(design.good, reqs)
    checks = []
    for cycle, (ns, ew, walk) in enumerate(expected):
        req = reqs[cycle]
        checks.append(f"        #3 check({cycle}, 2'd{ns}, 2'd{ew}, 1'b{walk}); #2 rst = 1'b0; req = 1'b{req}; #5;")
    return f"""`timescale 1ns/1ns
module weavegym_hidden_tb;
    reg clk = 1'b0, rst = 1'b1, req = 1'b0;
    wire [1:0] ns_light, ew_light;
    wire walk;
    integer errors = 0;

    {module} dut (.clk(clk), .rst(rst), .req(req), .ns_light(ns_light), .ew_light(ew_light), .walk(walk));

    always #5 clk = ~clk;

    task check(input integer cycle, input [1:0] ns, input [1:0] ew, input w);
        if (ns_light !== ns || ew_light !== ew || walk !== w) begin
            if (errors == 0) $display("WEAVEGYM-FIRST-FAIL %0d", cycle);
            errors = errors + 1;
        end
    endtask

    initial begin
        #5;
{chr(10).join(checks)}
        $display("WEAVEGYM-ERRORS %0d OF {len(reqs)}", errors);
        $finish;
    end
endmodule
"""


# -- what the checker lets near its testbench ----------------------------------------------------------------

# Constructs a controller's RTL never needs, each of which lets a design reach past its ports into whatever it is
# simulated with: system tasks and functions ($fopen reads the source holding the checker's token, $display
# prints a verdict line, $finish ends the run before the checker's own line), strings (file names), compiler
# directives (`include pulls in files), hierarchical names (weavegym_hidden_tb.errors; a.b, a[0].b, escaped
# \a .b) and the statements that write through them (force, release, defparam).
_FOREIGN = (
    (re.compile(r"\$"), "a system task or function ($...)"),
    (re.compile(r'"'), "a string"),
    (re.compile(r"`"), "a compiler directive (`...)"),
    (re.compile(r"[\w\]]\s*\.\s*[A-Za-z_\\]"), "a hierarchical name (a.b)"),
    (re.compile(r"\b(force|release|defparam|bind)\b"), "force, release, defparam or bind"),
)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def foreign_constructs(source: str) -> list[str]:
    """What in ``source`` (a controller's RTL) is not plain synthesizable Verilog of its own ports, comments aside.

    The checker refuses such RTL before simulating it against its hidden testbench: an RTL file that opens the
    simulation's source can read the per-check token and print a passing verdict itself (shown by a unit test with
    iverilog), and no honest fix of one line needs any of these.
    """
    code = _COMMENTS.sub(" ", source)
    found = []
    for pattern, what in _FOREIGN:
        hit = pattern.search(code)
        if hit:
            line = code.count("\n", 0, hit.start()) + 1
            found.append(f"{what} on line {line}")
    return found


# -- what the episode leaves ----------------------------------------------------------------------------------

def vcd_values(text: str, names: Sequence[str] = OUTPUTS, scope: str = "tb") -> dict[str, list[tuple[int, int]]]:
    """(time, value) changes of the named signals of ``scope`` in a VCD (x/z read as -1)."""
    ids: dict[str, str] = {}
    stack: list[str] = []
    changes: dict[str, list[tuple[int, int]]] = {n: [] for n in names}
    now = 0
    tokens = iter(text.split())
    for tok in tokens:
        if tok == "$scope":
            next(tokens)
            stack.append(next(tokens))
        elif tok == "$upscope":
            stack.pop()
        elif tok == "$var":
            _kind, _width, code, ref = next(tokens), next(tokens), next(tokens), next(tokens)
            if stack == [scope] and ref in changes:
                ids[code] = ref
        elif tok.startswith("#") and tok[1:].isdigit():
            now = int(tok[1:])
        elif tok[0] in "01xzXZ" and tok[1:] in ids:
            changes[ids[tok[1:]]].append((now, -1 if tok[0] in "xzXZ" else int(tok[0])))
        elif tok[0] in "bB":
            code = next(tokens)
            if code in ids:
                bits = tok[1:]
                changes[ids[code]].append((now, -1 if set(bits) - {"0", "1"} else int(bits, 2)))
    return changes


def sample(changes: Sequence[tuple[int, int]], cycles: int, offset: int = 3) -> list[int]:
    """The value of a signal ``offset`` ns after each cycle's rising edge."""
    out, i, value = [], 0, -1
    for cycle in range(cycles):
        t = cycle * PERIOD + FIRST_EDGE + offset
        while i < len(changes) and changes[i][0] <= t:
            value = changes[i][1]
            i += 1
        out.append(value)
    return out


GTKW_MARKER = re.compile(r"^\*(-?[0-9.]+) (-?\d+)", re.M)


def parse_gtkw(text: str) -> dict[str, Any]:
    """What a GTKWave save file says: its dump file, primary marker time (None when unset) and traces."""
    dump = re.search(r'^\[dumpfile\] "([^"\n]*)"', text, re.M)
    marker = GTKW_MARKER.search(text)
    traces = [line.strip() for line in text.splitlines()
              if line.strip() and not line.startswith(("[", "*", "@", "-")) and "." in line]
    time = int(marker[2]) if marker else -1
    return {"dumpfile": dump[1] if dump else None, "marker": time if time >= 0 else None, "traces": traces,
            "gtkwave": bool(re.search(r"^\[\*\] GTKWave Analyzer v", text, re.M))}


def trace_signal(trace: str) -> str:
    """A trace's bare signal name: "tb.dut.ns_light[1:0]" -> "ns_light"."""
    return re.sub(r"\[.*$", "", trace.rsplit(".", 1)[-1])


def cycle_span(cycle: int) -> tuple[int, int]:
    """[start, end) of a cycle in ns."""
    start = cycle * PERIOD + FIRST_EDGE
    return start, start + PERIOD
