"""Weave-Docs-8: apply a legal review's redlines to the staff handbook in Mousepad, one approval at a time.

Three apps and both channels, interleaved per redline. The Legal Review window (Tk, the desktop account's) shows
one redline at a time, only as dot-matrix pixels (pixel_font, fed from a root-only file setup deletes once drawn):
the section and paragraph it applies to and what to do (replace the notice period, the meal allowance or the
health insurer with the one in force, insert the data-protection officer's name and e-mail, delete the sentence
that mentions a word). The values are not on screen: they are in the policy register (SQLite, the workspace
account's alone), with expired and future rows beside the ones in force. The handbook (UTF-8 Markdown with €
amounts, « » quotes and accented names) is open in Mousepad, in a folder only the desktop account can write: the
edits are GUI work, several typed with non-ASCII characters. After saving, the shell computes the revision tag (the
first 8 hex digits of the saved file's SHA-256), the agent types it into the Legal Review, which reads the file as
it is now and approves only when the tag is that file's and the text carries redlines 1..k exactly; it then shows
an approval code (pixels) and opens the next redline on request. The shell keeps the change record in a folder only
it can write: the codes, and a unified diff of the original handbook (a root-owned copy) against the final one.

Scoring: the handbook is exactly the original with the redlines applied (whitespace within lines and trailing
blank lines aside); the Legal Review approved every redline; the change record carries its codes; the diff applies
to the original and gives the final handbook.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator, Mapping
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.docs import _handbook as hb
from weavegym.envs.tasks.item_records import numbered_records, per_item_verdict
from weavegym.evaluators import Clause, Probe, Verdict

HANDBOOK_DIR = f"{HOME}/handbook"
HANDBOOK = f"{HANDBOOK_DIR}/staff-handbook.md"
ORIGINAL = f"{HOME}/reference/staff-handbook.orig.md"
POLICY_DIR = f"{HOME}/policy"
REGISTER = f"{POLICY_DIR}/register.db"
CHANGES = f"{HOME}/changes"
DIFF, APPROVALS = f"{CHANGES}/handbook.diff", f"{CHANGES}/approvals.txt"
APP_DIR = "/usr/local/share/legalreview"
APP = f"{APP_DIR}/legal_review.py"
CONF, RECORD = f"{PRIVATE_DIR}/legal-review.json", f"{PRIVATE_DIR}/legal-review-record.jsonl"
SCHEMA = "CREATE TABLE policy (topic TEXT NOT NULL, value TEXT NOT NULL, valid_from TEXT NOT NULL, valid_to TEXT);"
MAX_TEXT = 256 << 10

# ---- setup -------------------------------------------------------------------------------------------------


def setup(ctx: SetupContext) -> Prepared:
    p = hb.plan(ctx.rng)
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)  # a stalled guest must not repeat keys
    # The handbook's folder is the desktop's (only Mousepad can save there; the shell reads), the register the
    # shell's alone, the change record's folder only the shell may write; the original copy is root's.
    ctx.run(f"install -d -m 2755 -o {ctx.user} -g {SHARED_GROUP} {HANDBOOK_DIR} && "
            f"install -d -m 0700 -o {WORKSPACE_USER} -g {SHARED_GROUP} {POLICY_DIR} && "
            f"install -d -m 2755 -o {WORKSPACE_USER} -g {SHARED_GROUP} {CHANGES}")
    ctx.write_file(HANDBOOK, p["original"], mode=0o644)
    ctx.write_file(ORIGINAL, p["original"], owner="root")
    ctx.write_file(REGISTER, database_bytes(SCHEMA, {"policy": p["register"]}), owner=WORKSPACE_USER, mode=0o600)
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/legal_review.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()

    ctx.launch_gui(f"{{as_user}} mousepad {HANDBOOK}", name="mousepad")
    editor = ctx.wait_window(r"staff-handbook\.md - Mousepad$", timeout=240)
    placed = ctx.place_window(editor.id, hb.MOUSEPAD_AT, hb.MOUSEPAD_SIZE)

    conf = {"handbook": HANDBOOK, "redlines": [r["lines"] for r in p["redlines"]],
            "stages": [hb.digest(s) for s in p["stages"]], "layout": hb.layout()}
    ctx.write_file(CONF, json.dumps(conf, ensure_ascii=False), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {CONF} > {RECORD}", name="legal-review")
    review = ctx.wait_window(f"^{re.escape(hb.TITLE)}$")
    ctx.place_window(review.id, hb.REVIEW_AT)
    try:  # mapped is not drawn (TCG): the snapshot must hold the drawn window
        at = wait_for(lambda: hb.origin(ctx.client.screenshot(hide_cursor=True).image), 120,
                      what="the Legal Review drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", CONF])
    mx, my = hb.MOUSEPAD_AT
    targets = {"open": hb.centre(at, hb.OPEN_BOX), "tag": hb.centre(at, hb.TAG_BOX),
               "text": [mx + hb.TEXT_AT[0], my + hb.TEXT_AT[1]], "editor": list(placed)}
    return Prepared(
        params={"today": hb.TODAY, "count": len(p["redlines"])},
        truth={"count": len(p["redlines"]), "review_at": list(at), "targets": targets, "original": p["original"],
               "expected": p["expected"], "stages": p["stages"],
               "redlines": [{k: r[k] for k in ("kind", "section", "paragraph", "line", "before", "after")}
                            for r in p["redlines"]]})


# ---- the checker -------------------------------------------------------------------------------------------

def _text(probe: Probe, path: str) -> str | None:
    data = probe.read_bytes(path, max_bytes=MAX_TEXT)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check_handbook(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = _text(probe, HANDBOOK)
    if text is None:
        return Verdict.failed(f"{HANDBOOK} is missing or not UTF-8")
    got, want = hb.norm(text).split("\n"), hb.norm(truth["expected"]).split("\n")
    if got == want:
        return Verdict.satisfied(f"the handbook is the original with all {truth['count']} redlines applied and "
                                 "nothing else changed")
    if len(got) != len(want):
        return Verdict.failed(f"the handbook has {len(got)} lines, expected {len(want)} (lines added or removed)")
    wrong = [i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
    redline_lines = {r["line"] for r in truth["redlines"]}
    other = [i for i in wrong if i not in redline_lines]
    if other:
        return Verdict.failed(f"text outside the redlines changed: line {other[0] + 1} reads {got[other[0]][:70]!r}")
    applied = len(redline_lines) - len(wrong)
    evidence = (f"{applied}/{len(redline_lines)} redlines applied; line {wrong[0] + 1} reads {got[wrong[0]][:70]!r}, "
                f"expected {want[wrong[0]][:70]!r}")
    return Verdict.partial(evidence) if applied else Verdict.failed(evidence)


def _records(probe: Probe) -> dict[int, dict[str, Any]]:
    return numbered_records(probe, RECORD, "redline", accept=lambda r: isinstance(r.get("code"), str))


def check_review(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records = _records(probe)
    return per_item_verdict([("" if k in records else f"redline {k} not approved")
                             for k in range(1, truth["count"] + 1)], "approved by the Legal Review", "redlines")


APPROVAL_LINE = re.compile(r"^\s*R?(\d+)\s+([A-Za-z2-9]{6})\s*$")


def parse_approvals(text: str) -> dict[int, str]:
    found = {}
    for line in text.replace("\r", "").split("\n"):
        match = APPROVAL_LINE.match(line)
        if match:
            found[int(match.group(1))] = match.group(2).upper()
    return found


def check_approvals(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = _text(probe, APPROVALS)
    if text is None:
        return Verdict.failed(f"{APPROVALS} is missing or not UTF-8")
    listed, records = parse_approvals(text), _records(probe)
    problems = []
    for k in range(1, truth["count"] + 1):
        want = records.get(k, {}).get("code")
        if want is None:
            problems.append(f"R{k}: the Legal Review approved no such redline")
        elif listed.get(k) != want:
            problems.append(f"R{k}: {listed.get(k)!r}, the Legal Review showed {want!r}")
        else:
            problems.append("")
    return per_item_verdict(problems, "the change record carries the Legal Review's code", "redlines")


HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_unified(original: str, diff: str) -> str | None:
    """``original`` with the unified diff applied strictly (every context and removed line where the hunk says);
    None when the diff has no hunk or does not apply."""
    src = original.splitlines(keepends=True)
    lines = diff.splitlines(keepends=True)
    out: list[str] = []
    pos, i, hunks = 0, 0, 0
    while i < len(lines):
        match = HUNK.match(lines[i])
        i += 1
        if match is None:
            continue
        hunks += 1
        old_start, old_len = int(match.group(1)), int(match.group(2) or 1)
        new_len = int(match.group(4) or 1)
        start = old_start - 1 if old_len else old_start
        if start < pos or start > len(src):
            return None
        out += src[pos:start]
        pos = start
        while (old_len or new_len) and i < len(lines):
            line = lines[i]
            tag, body = (line[:1], line[1:]) if line not in ("\n", "") else (" ", line)
            i += 1
            if tag == "\\":
                continue
            if tag in (" ", "-"):
                if pos >= len(src) or src[pos].rstrip("\n") != body.rstrip("\n"):
                    return None
                if tag == " ":
                    out.append(src[pos])
                    new_len -= 1
                pos += 1
                old_len -= 1
            elif tag == "+":
                no_newline = i < len(lines) and lines[i].startswith("\\")
                out.append(body.rstrip("\n") if no_newline else body)
                new_len -= 1
            else:
                return None
        if old_len or new_len:
            return None
    if not hunks:
        return None
    return "".join(out + src[pos:])


def check_diff(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    diff, final = _text(probe, DIFF), _text(probe, HANDBOOK)
    if diff is None:
        return Verdict.failed(f"{DIFF} is missing or not UTF-8")
    if final is None:
        return Verdict.failed(f"{HANDBOOK} is missing or not UTF-8")
    if hb.norm(final) == hb.norm(truth["original"]):
        return Verdict.failed("the handbook is unchanged: there is nothing for a change record to record")
    result = apply_unified(truth["original"], diff)
    if result is None:
        return Verdict.failed(f"{DIFF} is not a unified diff that applies to the original handbook")
    return Verdict.check(hb.norm(result) == hb.norm(final), "the diff applied to the original gives the final "
                         f"handbook: {hb.norm(result) == hb.norm(final)}")


# ---- the oracle --------------------------------------------------------------------------------------------

OPEN_TRIES, OPEN_WAITS, TAG_TRIES, TAG_WAITS, EDIT_TRIES = 5, 5, 3, 8, 2


def _screen(ctx: OracleContext) -> Any:
    return (ctx.obs or {})["screen"]


def _terminal(ctx: OracleContext) -> str:
    return str((ctx.obs or {}).get("terminal", ""))


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per redline: open it (GUI) and read it off the screen, look the paragraph and value up (CLI), edit and save in
    Mousepad (GUI), compute the tag (CLI), enter it and read the code (GUI), record the code (CLI); then the diff."""
    yield {"kind": "shell", "command": f"sqlite3 {REGISTER} .schema; echo TAG 00000000 $(sha256sum < {HANDBOOK})"}
    before = re.findall(r"TAG 00000000 ([0-9a-f]{64})", _terminal(ctx))
    digest = before[-1] if before else ""
    for number in range(1, ctx.truth["count"] + 1):
        lines = yield from _open(ctx, number)
        redline = hb.parse_redline(lines)
        if redline is None:
            continue
        yield {"kind": "python", "code": hb.plan_program(redline, HANDBOOK, REGISTER), "timeout": 60}
        plans = hb.PLAN_LINE.findall(_terminal(ctx))
        if not plans:
            continue
        plan = json.loads(plans[-1])
        tag = ""
        for _try in range(EDIT_TRIES):
            yield from _edit(ctx, plan)
            yield {"kind": "shell", "command": hb.tag_command(HANDBOOK, digest), "timeout": 60}
            tags = re.findall(r"TAG ([0-9a-f]{8}) ([0-9a-f]{64})", _terminal(ctx))
            if tags and tags[-1][1] != digest:
                tag, digest = tags[-1]
                break
        if not tag:
            continue
        code = yield from _approve(ctx, number, tag)
        if code:
            yield {"kind": "shell", "command": f"echo 'R{number} {code}' >> {APPROVALS}; cat {APPROVALS}"}
    yield {"kind": "shell", "command": f"diff -u {ORIGINAL} {HANDBOOK} > {DIFF}; wc -l {DIFF}"}
    yield {"kind": "done"}


def _open(ctx: OracleContext, number: int) -> Generator[ActionLike, Any, list[str]]:
    """Press 'Open next redline' until redline ``number`` shows; its lines ([] when it never did)."""
    x, y = ctx.truth["targets"]["open"]
    for _try in range(OPEN_TRIES):
        yield {"kind": "click", "x": x, "y": y}
        for _ in range(OPEN_WAITS):
            lines = hb.read_redline(_screen(ctx), ctx.truth["review_at"])
            head = hb.READ.search(lines[0]) if lines else None
            if head and int(head.group(1)) == number and len(lines) > 3:
                return lines
            yield {"kind": "wait", "seconds": 2}
    return []


def _bar_corner(ctx: OracleContext) -> Any:
    """The bottom-left corner of Mousepad's text area, where its search bar draws its close button when open."""
    x, y, _w, h = ctx.truth["targets"]["editor"]
    return _screen(ctx)[y + h - BAR_STRIP[0]:y + h - BAR_STRIP[1], x + 4:x + 36].astype(int)


BAR_STRIP, BAR_WAITS = (60, 8), 20


def _await_corner(ctx: OracleContext, differs_from: Any) -> Generator[ActionLike, Any, Any]:
    """Wait steps until the corner differs from ``differs_from`` (the bar opened or closed); the corner then, or
    None when it never changed."""
    for _ in range(BAR_WAITS):
        corner = _bar_corner(ctx)
        if np.abs(corner - differs_from).max(initial=0) > 40:
            return corner
        yield {"kind": "wait", "seconds": 0.5}
    return None


def _edit(ctx: OracleContext, plan: Mapping[str, str]) -> Iterator[ActionLike]:
    """In Mousepad: find the text (search bar, Return selects the match), put the replacement in its place, save.

    Under TCG a stalled Mousepad handles queued keys before the search bar has the focus, and the search text lands
    in the handbook (seen on a host Xvfb with Mousepad stopped): type only once the bar shows, and the replacement
    only once it has closed again.
    """
    x, y = ctx.truth["targets"]["text"]
    yield {"kind": "click", "x": x, "y": y}
    yield {"kind": "key", "keys": "ctrl+Home"}
    closed = _bar_corner(ctx)
    yield {"kind": "key", "keys": "ctrl+f"}
    opened = yield from _await_corner(ctx, closed)
    if opened is None:
        return
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "type", "text": plan["find"]}
    yield {"kind": "key", "keys": "Return"}
    yield {"kind": "key", "keys": "Escape"}
    if (yield from _await_corner(ctx, opened)) is None:
        return
    if plan["replace"]:
        yield {"kind": "type", "text": plan["replace"]}
    else:
        yield {"kind": "key", "keys": "BackSpace"}
    yield {"kind": "key", "keys": "ctrl+s"}


def _approve(ctx: OracleContext, number: int, tag: str) -> Generator[ActionLike, Any, str]:
    """Type the tag into the Legal Review until its status line shows redline ``number``'s code ('' if never)."""
    x, y = ctx.truth["targets"]["tag"]
    for _try in range(TAG_TRIES):
        yield {"kind": "click", "x": x, "y": y}
        for _ in range(TAG_WAITS):  # keys sent before the Review has the keyboard go to Mousepad
            if hb.tag_focused(_screen(ctx), ctx.truth["review_at"]):
                break
            yield {"kind": "wait", "seconds": 1}
        else:
            continue
        yield {"kind": "key", "keys": "ctrl+slash"}  # Tk's select all: a refused tag is still there
        yield {"kind": "type", "text": f"{tag}\n"}
        for _ in range(TAG_WAITS):
            status = hb.read_status(_screen(ctx), ctx.truth["review_at"])
            found = hb.APPROVED.search(status)
            if found and int(found.group(1)) == number:
                return found.group(2)
            if status.startswith("REFUSED"):
                break
            yield {"kind": "wait", "seconds": 1}
    return ""


TASK = Task(
    id="Weave-Docs-8",
    title="Apply a legal review's redlines to the staff handbook in Mousepad and keep the change record",
    instruction=(
        "The staff handbook ~/handbook/staff-handbook.md is open in Mousepad (only Mousepad, not your shell, can "
        "write that folder). The 'Legal Review' window holds the legal review's {count} redlines: press 'Open next "
        "redline' to see one; the next opens only after the current one is approved. A redline names a section "
        "(the number of its '## N.' heading) and a paragraph (counted within the section; a paragraph is one line) "
        "and says what to change there. Values 'in force' are in the policy register ~/policy/register.db (SQLite, "
        "table policy: topic, value, valid_from, valid_to; readable only by your shell): the row of the topic in "
        "force on {today} (valid_from on or before it, valid_to empty or on or after it); put its value in exactly "
        "as written there. Change nothing else. For each redline: 1) edit the handbook in Mousepad and save it "
        "(Ctrl+S); 2) compute its revision tag in your shell: the first 8 hex digits of the saved file's SHA-256; "
        "3) type the tag into the Legal Review and press Return: it checks the saved file and shows an approval "
        "code; 4) append a line 'R<number> <code>' (e.g. 'R1 ABC234') to ~/changes/approvals.txt from your shell. "
        "When all are approved, write ~/changes/handbook.diff from your shell: the unified diff (diff -u) of the "
        "original handbook ~/reference/staff-handbook.orig.md against the final one. Then finish."),
    channels=Channels(
        gui="read each redline off the Legal Review, edit and save the handbook in Mousepad (some values typed with "
            "non-ASCII characters), enter each revision tag and read the approval code back",
        cli="look the paragraphs and the values in force up in the handbook and the policy register, compute the "
            "revision tags, write the approval codes and the diff into the change record",
        why_both="the redlines and the approval codes exist only as pixels in the Legal Review and only Mousepad "
                 "can write the handbook, while the values are readable only by the shell's account and the change "
                 "record can be written only by it"),
    setup=setup,
    clauses=(
        Clause("handbook_text", "the handbook is the original with exactly the redlines applied", check_handbook,
               weight=3.0, critical=True, cap=0.3),
        Clause("review_approved", "the Legal Review approved every redline", check_review, weight=2.0,
               critical=True, cap=0.5),
        Clause("approval_codes", "~/changes/approvals.txt carries every redline's approval code", check_approvals,
               weight=2.0),
        Clause("change_diff", "~/changes/handbook.diff applies to the original handbook and gives the final one",
               check_diff, weight=2.0),
    ),
    deliverables=(
        Deliverable(HANDBOOK, "gui", description="the handbook as Mousepad saved it"),
        Deliverable(RECORD, "gui", owner="root", description="the Legal Review's approvals (captured by setup)"),
        Deliverable(APPROVALS, "cli", description="~/changes/approvals.txt"),
        Deliverable(DIFF, "cli", description="~/changes/handbook.diff"),
    ),
    withheld=("original", "expected", "stages", "redlines"),
    oracle=oracle,
    profile="full",
    apps=("Legal Review (python3-tk)", "mousepad", "sqlite3", "python3", "sha256sum", "diff"),
    max_steps=320,  # the oracle takes ~75 steps on a quick display; its screen waits are steps too
    time_budget_s=2400.0,
)
