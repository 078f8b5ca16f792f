"""Weave-DevOps-6's Spec sheet geometry and its oracle (no TASK here; the task module is waveform_review.py).

The oracle works as an agent would: it simulates in the shell, reads the expected timing off the Spec sheet's
pixels, opens the VCD in GTKWave and adds the signals (finding GTKWave's widgets in its screenshots, see
gtkwave_screen.py), samples the VCD in the shell and compares it with the spec, clicks the primary marker into
the first failing cycle and writes the save file, checks the saved marker from the shell (and clicks again if it
missed), then tries each single-line edit of the RTL it read (another duration for one phase, or the walk
condition) against the spec's run, applies the one that reproduces the spec, commits it with the report,
re-simulates, reviews the new VCD in GTKWave, and signs off the commit in the Spec sheet.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from weavegym.envs.task import ActionLike, OracleContext
from weavegym.envs.tasks.devops import gtkwave_screen as gw
from weavegym.envs.tasks.devops import junction_rtl as rtl
from weavegym.envs.tasks.games.sgt_common import wait_box
from weavegym.envs.tasks.pixel_font import read_text

# The Spec sheet's geometry (pixels inside its window; the pages' contents relative to the page's corner).
WIDTH, HEIGHT, X, Y = 730, 176, 546, 514
PAGE = (8, 34, 714, 138)
TABS = [[8 + i * 104, 4, 96, 26] for i in range(3)]  # About, Timing, Sign-off
TITLE_AT, SCALE = (10, 4), 2
LABEL_X, CELLS_X = 10, 130
ROW_Y = (22, 36, 58, 76, 94, 112)  # ruler tens, ruler units, req, ns_light, ew_light, walk
COMMIT, CYCLE, RECORD_BOX = [10, 52, 300, 26], [330, 52, 100, 26], [10, 92, 110, 30]
WAIT_TRIES = 30
ROW_KEYS = ("req", "ns_light", "ew_light", "walk")
ALLOWED = {"req": "01", "ns_light": "RYG", "ew_light": "RYG", "walk": "01"}


def spec_layout() -> dict[str, Any]:
    """What the fixture is told about where to draw (independent of the seed, so none of it is secret)."""
    return {"width": WIDTH, "height": HEIGHT, "x": X, "y": Y, "page": list(PAGE), "tabs": TABS,
            "title": list(TITLE_AT), "scale": SCALE, "label_x": LABEL_X, "cells_x": CELLS_X, "row_y": list(ROW_Y),
            "commit": COMMIT, "cycle": CYCLE, "record": RECORD_BOX}


def spec_targets(window: Sequence[int]) -> dict[str, Any]:
    """Where on the screen the oracle reads and clicks, from the Spec sheet window's position alone."""
    x, y = window[0], window[1]
    px, py = x + PAGE[0], y + PAGE[1]

    def center(ox: int, oy: int, box: Sequence[int]) -> list[int]:
        return [ox + box[0] + box[2] // 2, oy + box[1] + box[3] // 2]

    return {"tabs": [center(x, y, box) for box in TABS], "page": [px, py], "commit": center(px, py, COMMIT),
            "cycle": center(px, py, CYCLE), "record": center(px, py, RECORD_BOX)}


def tabs_drawn(image: np.ndarray, window: Sequence[int]) -> bool:
    bx, by, bw, bh = window[0] + TABS[-1][0], window[1] + TABS[-1][1], TABS[-1][2], TABS[-1][3]
    region = image[max(by, 0):by + bh, max(bx, 0):bx + bw].astype(int)
    return region.size > 0 and int((region.sum(axis=2) < 3 * 90).sum()) >= 20


def read_spec(image: np.ndarray, page: Sequence[int], cycles: int) -> dict[str, str] | None:
    """The Timing tab's rows (req, ns_light, ew_light, walk: one character per cycle), or None if unreadable."""
    rows = {key: read_text(image, page[0] + CELLS_X, page[1] + y, SCALE, cycles)
            for key, y in zip(ROW_KEYS, ROW_Y[2:], strict=True)}
    ok = all(len(text) == cycles and set(text) <= set(ALLOWED[key]) for key, text in rows.items())
    return rows if ok else None


# -- the shell's side ---------------------------------------------------------------------------------------------


def _sampler(vcd: str, cycles: int) -> str:
    """A shell step: print the outputs' value per cycle, sampled from a VCD by the very reader the checker's tests
    use (its source is sent along, so guest and host read VCDs alike)."""
    source = "\n".join([
        "import re", "from collections.abc import Sequence",
        f"OUTPUTS, PERIOD, FIRST_EDGE, LIGHT = {rtl.OUTPUTS!r}, {rtl.PERIOD}, {rtl.FIRST_EDGE}, {rtl.LIGHT!r}",
        inspect.getsource(rtl.vcd_values), inspect.getsource(rtl.sample),
        "import sys", "changes = vcd_values(open(sys.argv[1]).read())",
        "for name in OUTPUTS:",
        "    values = sample(changes[name], int(sys.argv[2]))",
        "    text = ''.join(str(v) if name == 'walk' and v >= 0 else LIGHT.get(v, '?') for v in values)",
        "    print('ROW', name, text)"])
    return f"python3 - {vcd} {cycles} <<'PYEOF'\n{source}\nPYEOF"


def _rows_in(terminal: str) -> dict[str, str]:
    return dict(re.findall(r"^ROW (\w+) (\S+)\s*$", terminal.replace("\r", ""), re.M))


def compare(spec: dict[str, str], actual: dict[str, str]) -> tuple[int, list[str]] | None:
    """The first cycle where the simulation differs from the spec, and the outputs that differ there."""
    for cycle in range(len(spec["ns_light"])):
        wrong = [n for n in rtl.OUTPUTS if actual.get(n, "")[cycle:cycle + 1] != spec[n][cycle]]
        if wrong:
            return cycle, wrong
    return None


def find_fix(source: str, spec: dict[str, str]) -> tuple[str, str] | None:
    """(old, new) text of the one-line edit that makes the RTL's machine reproduce the spec, or None (no fit, or
    more than one). Neither text has a character that sed's basic regular expressions or replacements treat
    specially."""
    durations = {p: int(v) for p, v in re.findall(r"localparam (\w+)_T = (\d+);", source)}
    if set(durations) != set(rtl.PHASES):
        return None
    late = "if (pending || req) begin" in source
    machine = rtl.Machine(durations, walk_on_late_req=late)
    reqs = [int(c) for c in spec["req"]]
    want = {k: spec[k] for k in rtl.OUTPUTS}
    edits: list[tuple[rtl.Machine, str, str]] = [
        (replace(machine, walk_on_late_req=not late), *(("if (pending || req) begin", "if (pending) begin") if late
                                                         else ("if (pending) begin", "if (pending || req) begin")))]
    for phase, value in durations.items():
        for other in range(1, 9):
            if other != value:
                edits.append((replace(machine, durations={**durations, phase: other}),
                              f"localparam {phase}_T = {value};", f"localparam {phase}_T = {other};"))
    fits = [(old, new) for candidate, old, new in edits if rtl.rows(rtl.run(candidate, reqs)) == want]
    return fits[0] if len(fits) == 1 else None


# -- the GUI's side -----------------------------------------------------------------------------------------------


def _screen(ctx: OracleContext) -> np.ndarray:
    assert ctx.obs is not None
    return ctx.obs["screen"]


def _open_vcd(ctx: OracleContext, path: str, below: int | None) -> Iterator[ActionLike]:
    """File > Open New Tab (ctrl+t) with the path typed into the chooser's location bar; wait for the new tab's
    scope (with a tab bar, the wave area starts lower than ``below``)."""
    wave = gw.wave_area(_screen(ctx))
    if wave is not None:  # focus GTKWave (a click in the waves only moves the marker, which is set later)
        yield {"kind": "click", "x": (wave[0] + wave[2]) // 2, "y": wave[3] - 12}
    before = _screen(ctx).copy()
    yield {"kind": "key", "keys": "ctrl+t"}
    yield from wait_box(ctx, before, tries=60)
    yield {"kind": "key", "keys": "ctrl+l"}  # the location bar first: a typed "/" opens it and eats what follows
    yield {"kind": "wait", "seconds": 1.0}
    yield {"kind": "type", "text": path}
    yield {"kind": "key", "keys": "Return"}
    for attempt in range(WAIT_TRIES * 2):
        wave = gw.wave_area(_screen(ctx))
        icon = gw.scope_icon(_screen(ctx), wave) if wave else None
        if icon is not None and wave is not None and (below is None or wave[1] > below + 15):
            return
        if attempt in (10, 25):  # the chooser may swallow a Return to finish its completion
            yield {"kind": "key", "keys": "Return"}
        yield {"kind": "wait", "seconds": 1.0}


def _add_signals(ctx: OracleContext, cycles: int) -> Iterator[ActionLike]:
    """The tb scope in the SST tree, every one of its signals (ctrl+a in the list), Append, then Zoom Full."""
    wave = gw.wave_area(_screen(ctx))
    icon = gw.scope_icon(_screen(ctx), wave) if wave else None
    if wave is None or icon is None:
        return
    yield {"kind": "click", "x": icon[0] + 18, "y": icon[1]}
    for _ in range(WAIT_TRIES):
        row = gw.first_signal_row(_screen(ctx), icon)
        if row is not None:
            break
        yield {"kind": "wait", "seconds": 1.0}
    else:
        return
    yield {"kind": "click", "x": row[0], "y": row[1]}
    yield {"kind": "key", "keys": "ctrl+a"}
    button = gw.append_button(_screen(ctx), wave, icon)
    yield {"kind": "click", "x": button[0], "y": button[1]}
    yield from _zoom_full(ctx, cycles)


def _zoom_full(ctx: OracleContext, cycles: int) -> Iterator[ActionLike]:
    """Time > Zoom > Zoom Full (ctrl+0) until every clock edge of the run is in view. A busy GTKWave can lose the
    key, and one whose focus sits in the signal list may not see it: every other try clicks the waves first (that
    only moves the marker, which is set afterwards)."""
    for attempt in range(WAIT_TRIES):
        wave = gw.wave_area(_screen(ctx))
        edges = gw.clock_edges(_screen(ctx), wave) if wave else None
        if edges is not None and len(edges) >= 2 * cycles - 4:
            return
        if attempt % 4 == 0:
            if wave is not None and attempt % 8 == 4:
                yield {"kind": "click", "x": (wave[0] + wave[2]) // 2, "y": wave[3] - 12}
            yield {"kind": "key", "keys": "ctrl+0"}
        yield {"kind": "wait", "seconds": 1.0}


def _marker_x(ctx: OracleContext, cycle: int) -> tuple[int, int] | None:
    wave = gw.wave_area(_screen(ctx))
    edges = gw.clock_edges(_screen(ctx), wave) if wave else None
    if wave is None or not edges:
        return None
    a, b = gw.time_to_x(edges, rtl.FIRST_EDGE, rtl.PERIOD / 2)
    return round(a + b * (cycle * rtl.PERIOD + rtl.FIRST_EDGE + rtl.PERIOD / 2)), wave[3] - 12


def _wait_saved(path: str, stamp: str) -> dict[str, Any]:
    """A shell step: wait until GTKWave has written the save file (newer than ``stamp``) and show its marker."""
    return {"kind": "shell", "timeout": 45,
            "command": f"timeout 25 sh -c 'until [ -s {path} ] && [ {path} -nt {stamp} ]; do sleep 0.3; done'; "
                       f"grep -m1 '^\\*' {path} | sed 's/^/MARKER /'"}


def _saved_marker(ctx: OracleContext) -> int | None:
    found = re.findall(r"^MARKER \*[-0-9.]+ (-?\d+)", (ctx.obs or {}).get("terminal", ""), re.M)
    return int(found[-1]) if found else None


def _settle(ctx: OracleContext, tries: int = 12) -> Iterator[ActionLike]:
    """Wait until two frames in a row agree: GTKWave has drawn the marker (and its title) before the next key, so
    the dialog that key opens is not confused with the marker's own redraw."""
    previous = None
    for _ in range(tries):
        frame = _screen(ctx)
        if previous is not None and frame.shape == previous.shape and int(
                (np.abs(frame.astype(np.int16) - previous.astype(np.int16)).max(axis=2) > 24).sum()) <= 50:
            return
        previous = frame.copy()
        yield {"kind": "wait", "seconds": 0.5}


def _save_as(ctx: OracleContext, path: str, stamp: str) -> Iterator[ActionLike]:
    """File > Write Save File As (ctrl+shift+s), the path typed into its name field, checked from the shell; the
    dialog is opened again when the file did not come (a key that reached GTKWave before its dialog did)."""
    for _attempt in range(3):
        yield from _settle(ctx)
        before = _screen(ctx).copy()
        yield {"kind": "key", "keys": "ctrl+shift+s"}
        yield from wait_box(ctx, before, tries=60)
        yield {"kind": "key", "keys": "ctrl+a"}
        yield {"kind": "type", "text": path}
        for _return in range(2):  # the chooser may swallow a Return to finish its completion
            yield {"kind": "key", "keys": "Return"}
            yield _wait_saved(path, stamp)
            if _saved_marker(ctx) is not None:
                return
        yield {"kind": "key", "keys": "Escape"}  # a dialog still open goes; GTKWave's window ignores it


def _mark_and_save(ctx: OracleContext, cycle: int, cycles: int, path: str) -> Iterator[ActionLike]:
    """Click the marker into the cycle, Write Save File As, then check the saved marker from the shell; a miss
    is clicked again (from the marker the file shows) and saved with Write Save File."""
    start, end = rtl.cycle_span(cycle)
    stamp = f"/tmp/weavegym-mark-{cycle}"
    target = _marker_x(ctx, cycle)
    if target is None:  # the whole run is not in view yet
        yield from _zoom_full(ctx, cycles)
        target = _marker_x(ctx, cycle)
    if target is None:
        return
    yield {"kind": "shell", "command": f"touch {stamp}"}
    yield {"kind": "click", "x": target[0], "y": target[1]}
    yield from _save_as(ctx, path, stamp)
    for _attempt in range(3):
        marker = _saved_marker(ctx)
        scale, origin = _marker_x(ctx, 1), _marker_x(ctx, 0)
        if marker is None or start <= marker < end or scale is None or origin is None:
            return
        per_ns = (scale[0] - origin[0]) / rtl.PERIOD
        target = (round(target[0] + per_ns * ((start + end) / 2 - marker)), target[1])
        yield {"kind": "shell", "command": f"touch {stamp}"}
        yield {"kind": "click", "x": target[0], "y": target[1]}
        yield from _settle(ctx)
        yield {"kind": "key", "keys": "ctrl+s"}  # Write Save File: the same file, no dialog
        yield _wait_saved(path, stamp)


# -- the whole run -------------------------------------------------------------------------------------------------


def oracle(ctx: OracleContext, before_gtkw: str, after_gtkw: str) -> Iterator[ActionLike]:
    repo, module, cycles = ctx.params["repo"], ctx.params["module"], int(ctx.params["cycles"])
    targets = ctx.truth["spec_targets"]
    sim = f"cd {repo} && iverilog -o sim.vvp tb_{module}.v {module}.v && vvp -n sim.vvp"
    yield {"kind": "shell", "command": f"{sim} +vcd=before.vcd >/dev/null && echo SIMULATED && cat {module}.v",
           "timeout": 300}
    source = (ctx.obs or {}).get("terminal", "").replace("\r", "")
    yield {"kind": "click", "x": targets["tabs"][1][0], "y": targets["tabs"][1][1]}
    spec = None
    for _ in range(WAIT_TRIES):  # the tab's first drawing may trail the click under TCG
        spec = read_spec(_screen(ctx), targets["page"], cycles)
        if spec is not None:
            break
        yield {"kind": "wait", "seconds": 1.0}
    if spec is None:
        yield {"kind": "fail", "reason": "the Spec sheet's Timing tab could not be read"}
        return
    yield from _open_vcd(ctx, f"{repo}/before.vcd", None)
    top = (gw.wave_area(_screen(ctx)) or (0, 0, 0, 0))[1]
    yield from _add_signals(ctx, cycles)
    yield {"kind": "shell", "command": f"cd {repo} && {_sampler('before.vcd', cycles)}", "timeout": 120}
    first = compare(spec, _rows_in((ctx.obs or {}).get("terminal", "")))
    fix = find_fix(source, spec)
    if first is None or fix is None:
        yield {"kind": "fail", "reason": "the simulation matches the spec, or no one-line fix reproduces it"}
        return
    cycle, signals = first
    yield from _mark_and_save(ctx, cycle, cycles, before_gtkw)
    old, new = fix
    yield {"kind": "shell", "timeout": 300, "command": (
        f"cd {repo} && sed -i 's/{old}/{new}/' {module}.v && git diff --stat && "
        f"printf 'cycle: {cycle}\\nsignal: {signals[0]}\\n' > REVIEW.txt && git add {module}.v REVIEW.txt && "
        f"git commit -q -m 'Fix {module}: {new}' && echo HEAD $(git rev-parse HEAD) && {sim} +vcd=after.vcd "
        f">/dev/null && {_sampler('after.vcd', cycles)}")}
    terminal = (ctx.obs or {}).get("terminal", "")
    head = re.findall(r"^HEAD ([0-9a-f]{40})", terminal.replace("\r", ""), re.M)
    if not head or compare(spec, _rows_in(terminal)) is not None:
        yield {"kind": "fail", "reason": f"the fix ({new}) did not make the simulation match the spec"}
        return
    yield from _open_vcd(ctx, f"{repo}/after.vcd", top)
    yield from _add_signals(ctx, cycles)
    yield from _mark_and_save(ctx, cycle, cycles, after_gtkw)
    yield {"kind": "click", "x": targets["tabs"][2][0], "y": targets["tabs"][2][1]}
    for _ in range(WAIT_TRIES):
        if read_text(_screen(ctx), targets["page"][0] + TITLE_AT[0], targets["page"][1] + TITLE_AT[1], SCALE,
                     8) == "SIGN-OFF":
            break
        yield {"kind": "wait", "seconds": 1.0}
    yield {"kind": "click", "x": targets["commit"][0], "y": targets["commit"][1]}
    yield {"kind": "type", "text": head[-1][:12]}
    yield {"kind": "click", "x": targets["cycle"][0], "y": targets["cycle"][1]}
    yield {"kind": "type", "text": str(cycle)}
    yield {"kind": "click", "x": targets["record"][0], "y": targets["record"][1]}
    # The sheet writes its record as it exits; pgrep sees every account's processes ([t]: not this sh).
    yield {"kind": "shell", "command": "timeout 60 sh -c 'while pgrep -f \"spec_shee[t]\" >/dev/null; do "
                                       "sleep 0.2; done'", "timeout": 90}
    yield {"kind": "done"}
