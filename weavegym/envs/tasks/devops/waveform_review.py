"""Weave-DevOps-6: find where a traffic-light controller departs from its spec in GTKWave, mark it, fix the RTL.

A seeded Verilog design (a junction's light controller: five phases with seeded durations and a pedestrian walk)
and its testbench live in a git repository that only the workspace account can write. One line is wrong: a
phase's duration, or the walk condition that drops a request made in EW_SLOW's last cycle. Both read as
deliberate RTL; only the spec says which is wrong, and the spec exists only as dot-matrix pixels under the Timing
tab of a Tk "Spec sheet" (fed from a root-only file deleted once it is up): the expected ns_light, ew_light and
walk for every cycle of the testbench's run.

The shell simulates (iverilog/vvp) and writes the VCDs; GTKWave (the real app, the desktop account's) loads
them, and its save files, with the primary marker in the first cycle where the design departs from the spec,
must land in ~/waves, which only the desktop account can write. The shell fixes the line, commits it with a
report, re-runs the simulation; GTKWave reviews the fixed run; the Spec sheet's Sign-off tab records the fix's
commit (a root-only record). The checker runs its own longer testbench (kept on the host, sent only at check time,
run as `nobody` in a scratch folder) against the agent's RTL, so a fix that only makes the visible run look right
fails, and any of the other plausible edits (another phase's constant) fails as well.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.devops import junction_rtl as rtl
from weavegym.envs.tasks.devops import waveform_oracle as eyes
from weavegym.envs.tasks.devops.git_objects import read_commit, ref_sha
from weavegym.envs.tasks.dialogs import json_record
from weavegym.evaluators import Clause, Probe, Verdict

APP_DIR = "/usr/local/share/specsheet"
APP = f"{APP_DIR}/spec_sheet.py"
SHOWN_IN = f"{PRIVATE_DIR}/spec-sheet.json"
RECORD = f"{PRIVATE_DIR}/spec-signoff.json"
WAVES = f"{HOME}/waves"
BEFORE, AFTER = f"{WAVES}/before.gtkw", f"{WAVES}/after.gtkw"
RTL, REPORT = "{repo}/{module}.v", "{repo}/REVIEW.txt"
GTKWAVE_TITLE = r"^GTKWave - "
HIDDEN_TIMEOUT_S = 90


# -- setup ------------------------------------------------------------------------------------------------------


def setup(ctx: SetupContext) -> Prepared:
    design = rtl.plan(ctx.rng)
    repo = f"{HOME}/rtl/{design.name}"
    tip = _build_repo(ctx, design, repo)
    ctx.run(["install", "-d", "-m", "0755", "-o", ctx.user, "-g", SHARED_GROUP, WAVES])
    ctx.launch_gui("{as_user} gtkwave --rcvar 'splash_disable 1' --rcvar 'initial_window_x 1280' "
                   "--rcvar 'initial_window_y 440' --rcvar 'initial_window_xpos 0' --rcvar 'initial_window_ypos 0'",
                   name="gtkwave")
    ctx.wait_window(GTKWAVE_TITLE, timeout=240)
    spec = _open_spec_sheet(ctx, design)
    expected = rtl.run(design.good, design.visible)
    cycle, signals = rtl.first_difference(expected, rtl.run(design.bad, design.visible)) or (-1, [])
    return Prepared(
        params={"repo": repo, "module": design.module, "junction": design.name, "cycles": len(design.visible),
                "last_cycle": len(design.visible) - 1},
        truth={"repo": repo, "module": design.module, "tip": tip, "spec_window": spec,
               "spec_targets": eyes.spec_targets(spec), "cycle": cycle, "signals": signals, "bug": design.bug,
               "fixed_line": design.fixed_line, "hidden_tb": rtl.hidden_testbench(design),
               "hidden_cycles": len(design.hidden)})


def _build_repo(ctx: SetupContext, design: rtl.Design, repo: str) -> str:
    """The repository as the workspace account's: 2755 folders and 0644 files the desktop account cannot change."""
    files = {f"{design.module}.v": rtl.verilog(design.name, design.bad),
             f"tb_{design.module}.v": rtl.testbench(design, "waves.vcd"),
             ".gitignore": "*.vcd\n*.vvp\n"}
    for name, text in files.items():
        ctx.write_file(f"{repo}/{name}", text, owner=WORKSPACE_USER, mode=0o644)
    script = (f"cd {shlex.quote(repo)} && git init -q -b main && git config user.name 'Workspace' && "
              "git config user.email workspace@localhost && git add -A && "
              "GIT_AUTHOR_DATE='2026-11-02T09:00:00Z' GIT_COMMITTER_DATE='2026-11-02T09:00:00Z' "
              f"git commit -q -m 'Add the {design.name} junction light controller and its testbench' && "
              "git rev-parse HEAD")
    tip = ctx.run(["sh", "-c", script], user=WORKSPACE_USER).stdout.strip().splitlines()[-1]
    ctx.run(["chmod", "-R", "g-w,o-w", repo])
    ctx.run(["chmod", "2755", repo, f"{HOME}/rtl"])
    return tip


def _open_spec_sheet(ctx: SetupContext, design: rtl.Design) -> list[int]:
    """Start the Spec sheet with the expected rows on its stdin; once its tabs are drawn, delete the input."""
    rows = rtl.rows(rtl.run(design.good, design.visible))
    rows["req"] = "".join(str(r) for r in design.visible)
    shown = {"module": design.module, "rows": rows, "layout": eyes.spec_layout()}
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/spec_sheet.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    ctx.write_file(SHOWN_IN, json.dumps(shown), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {SHOWN_IN} > {RECORD}", name="specsheet")
    window = ctx.wait_window("^Spec sheet$").geometry
    try:  # mapped is not drawn (TCG): wait for the last tab's label before the task snapshot
        wait_for(lambda: eyes.tabs_drawn(ctx.client.screenshot().image, window), 120, what="the Spec sheet drawn",
                 max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", SHOWN_IN])  # the sheet has read it: the expected outputs now exist only in its window
    return list(window)


# -- the checker ------------------------------------------------------------------------------------------------


def _review(probe: Probe, truth: Mapping[str, Any], path: str, vcd: str) -> Verdict:
    text = probe.read_text(path)
    if text is None:
        return Verdict.failed(f"{path} does not exist")
    found = rtl.parse_gtkw(text)
    start, end = rtl.cycle_span(truth["cycle"])
    names = {rtl.trace_signal(t) for t in found["traces"]}
    marker, want = found["marker"], f"{truth['repo']}/{vcd}"
    problems = []
    if not found["gtkwave"]:
        problems.append("it is no save file GTKWave wrote")
    if found["dumpfile"] != want:
        problems.append(f"it shows {found['dumpfile']!r}, not {want}")
    if "clk" not in names or not names & set(truth["signals"]):
        problems.append(f"its traces {sorted(names)} lack clk or the failing output ({'/'.join(truth['signals'])})")
    if marker is None or not start <= marker < end:
        problems.append(f"its primary marker is at {marker} ns, not in cycle {truth['cycle']} ({start}-{end} ns)")
    return Verdict.check(not problems, f"{path}: " + ("; ".join(problems) if problems else
                                                      f"{want}, marker at {marker} ns in cycle {truth['cycle']}"))


def check_before(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return _review(probe, truth, BEFORE, "before.vcd")


def check_after(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return _review(probe, truth, AFTER, "after.vcd")


def check_hidden_testbench(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    """The checker's own testbench against the agent's RTL, compiled and run as `nobody` in a scratch folder."""
    path = RTL.format(**truth)
    source = probe.read_bytes(path, max_bytes=200_000)
    if source is None:
        return Verdict.failed(f"{path} does not exist")
    foreign = rtl.foreign_constructs(source.decode("utf-8", "replace"))
    if foreign:
        return Verdict.failed(f"{path} is not plain RTL, so it is not simulated: " + "; ".join(foreign))
    nonce = secrets.token_hex(8)  # the RTL cannot print the verdict line itself: it does not know this
    bench = truth["hidden_tb"].replace("WEAVEGYM-ERRORS", f"WEAVEGYM-{nonce}")
    script = ('d=$(mktemp -d) && cat > "$d/all.v" && chown -R nobody "$d" && cd "$d" && '
              f"runuser -u nobody -- timeout {HIDDEN_TIMEOUT_S - 30} sh -c 'iverilog -o sim all.v 2>&1 | tail -5 && "
              "vvp -n sim 2>&1 | tail -20'; cd / && rm -rf \"$d\"")
    result = probe.client.exec(["bash", "-c", script], stdin=bench.encode() + b"\n" + source,
                               timeout=HIDDEN_TIMEOUT_S)
    lines = re.findall(rf"^WEAVEGYM-{nonce} (\d+) OF (\d+)\s*$", result.stdout, re.M)
    if not lines:
        return Verdict.failed(f"the hidden testbench did not finish on {path}: {result.stdout.strip()[-300:]!r}")
    errors, total = (int(v) for v in lines[-1])
    first = re.search(r"^WEAVEGYM-FIRST-FAIL (\d+)", result.stdout, re.M)
    return Verdict.check(errors == 0 and total == truth["hidden_cycles"],
                         f"the hidden testbench ({total} cycles) found {errors} wrong cycle(s)"
                         + (f", the first at cycle {first[1]}" if first else ""))


def check_committed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    head = ref_sha(probe, truth["repo"], "refs/heads/main")
    commit = read_commit(probe, truth["repo"], head) if head else None
    if commit is None:
        return Verdict.failed("main points at no readable commit")
    on_tip = truth["tip"] in commit.parents
    return Verdict.check(on_tip and head != truth["tip"],
                         f"main is at {head[:10]}, a commit on the original tip {truth['tip'][:10]}: {on_tip}")


def check_report(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    path = REPORT.format(**truth)
    text = probe.read_text(path)
    if text is None:
        return Verdict.failed(f"{path} does not exist")
    cycle = re.search(r"^\s*cycle\s*[:=]\s*(\d+)\s*$", text, re.M | re.I)
    signal = re.search(r"^\s*signal\s*[:=]\s*([A-Za-z_.\[\]0-9:]+)\s*$", text, re.M | re.I)
    named = rtl.trace_signal(signal[1]) if signal else None
    ok = cycle is not None and int(cycle[1]) == truth["cycle"] and named in truth["signals"]
    return Verdict.check(ok, f"{path} names cycle {cycle[1] if cycle else None} and signal {named}; expected cycle "
                             f"{truth['cycle']} and one of {truth['signals']}")


def check_signed_off(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = json_record(probe, RECORD)
    if found is None:
        return Verdict.failed("nothing was recorded in the Spec sheet's Sign-off tab")
    head = ref_sha(probe, truth["repo"], "refs/heads/main") or ""
    sha = str(found.get("commit", ""))
    ok = len(sha) >= 7 and head.startswith(sha) and head != truth["tip"] and found.get("cycle") == truth["cycle"]
    return Verdict.check(ok, f"the Sign-off recorded commit {sha[:12]!r}, cycle {found.get('cycle')!r}; expected "
                             f"main's new head {head[:12]} and cycle {truth['cycle']}")


# -- the oracle -------------------------------------------------------------------------------------------------


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    yield from eyes.oracle(ctx, BEFORE, AFTER)


TASK = Task(
    id="Weave-DevOps-6",
    title="Find where a light controller departs from its spec in GTKWave, mark that cycle, fix the RTL",
    instruction=(
        "The traffic-light controller of the {junction} junction, {module}.v in the git repository {repo} (your "
        "shell's), departs from its specification in exactly one line. The specification is the open 'Spec sheet' "
        "window: its Timing tab shows, for each cycle 0 to {last_cycle} of the repository testbench's run, the "
        "expected ns_light and ew_light (R red = 2'b00, Y yellow = 2'b01, G green = 2'b10) and walk (1/0), with the "
        "testbench's req input above them. Cycle N is the clock period that starts at the rising edge of clk at "
        "10*N+5 ns. (1) In the repository, simulate: `iverilog -o sim.vvp tb_{module}.v {module}.v && vvp sim.vvp "
        "+vcd=before.vcd`. (2) In the open GTKWave window, open {repo}/before.vcd (File > Open New Tab), add the tb "
        "signals (at least clk, ns_light, ew_light and walk), compare them with the spec cycle by cycle, put the "
        "primary marker (a left click in the waves) inside the first cycle where an output differs from the spec, "
        "and write the save file with File > Write Save File As to ~/waves/before.gtkw. (3) Fix the wrong line of "
        "{module}.v (leave the testbench alone), write {repo}/REVIEW.txt with the two lines `cycle: N` and "
        "`signal: NAME` (that first failing cycle and an output that differs in it), commit both on main, then "
        "simulate again with +vcd=after.vcd: it must now match the spec in every cycle (the design will also be "
        "run against a longer testbench of the checker's own, and only if it stays plain RTL: no system tasks "
        "($...), strings, compiler directives (`...) or hierarchical names (a.b)). (4) In GTKWave open "
        "{repo}/after.vcd the same way, add the same signals, put the primary marker in the same cycle and write "
        "~/waves/after.gtkw. (5) In the "
        "Spec sheet's Sign-off tab, enter the fix commit's hash and the first failing cycle, press Record, then "
        "finish."),
    channels=Channels(
        gui="read the expected timing off the Spec sheet, review both VCDs in GTKWave (signals, primary marker, "
            "save files in the desktop's ~/waves), sign off the fix commit in the Spec sheet",
        cli="simulate with iverilog/vvp, find the wrong line, fix and commit it with the report, re-simulate",
        why_both="the spec exists only as pixels of the Spec sheet and the save files only GTKWave (the desktop "
                 "account) can write into ~/waves, while the repository, the simulation and the fix belong to the "
                 "shell's account"),
    setup=setup,
    clauses=(
        Clause("before_review", "before.gtkw: GTKWave's save of before.vcd, marker in the first failing cycle",
               check_before, weight=2.0, critical=True, cap=0.3),
        Clause("hidden_testbench", "the fixed RTL passes the checker's own longer testbench", check_hidden_testbench,
               weight=2.0, critical=True, cap=0.3),
        Clause("fix_committed", "main has a new commit on the original tip", check_committed),
        Clause("report", "REVIEW.txt names the first failing cycle and an output that differs there", check_report),
        Clause("after_review", "after.gtkw: GTKWave's save of after.vcd, marker in the same cycle", check_after),
        Clause("signed_off", "the Spec sheet's Sign-off records main's new commit and the cycle", check_signed_off),
    ),
    deliverables=(
        Deliverable(BEFORE, "gui", description="~/waves/before.gtkw (GTKWave's save file)"),
        Deliverable(AFTER, "gui", description="~/waves/after.gtkw (GTKWave's save file)"),
        Deliverable(RECORD, "gui", owner="root", description="the Spec sheet's Sign-off record (captured by setup)"),
        Deliverable(RTL, "cli", description="the fixed RTL"),
        Deliverable(REPORT, "cli", description="the report REVIEW.txt"),
    ),
    withheld=("cycle", "signals", "bug", "fixed_line", "hidden_tb"),
    oracle=oracle,
    profile="full",
    apps=("gtkwave", "Spec sheet (python3-tk)", "iverilog", "git"),
    max_steps=400,  # the oracle's screen waits are steps too (100-240 on a loaded host)
    time_budget_s=1800.0,
)
