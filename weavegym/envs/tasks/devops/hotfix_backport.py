"""Weave-DevOps-8: backport the release's three hotfix tickets with gitk, signed off on a Release Board, noted in
the shell.

Four apps, the data flowing ticket by ticket between the channels. The shop's git repository (``backport_history``:
a ``main`` of 30-45 commits and a ``release-3.N`` branch cut from it) belongs to the desktop account and has the
release branch checked out: only gitk, open on the desktop with ``--all``, can commit to it (its context menu's
"Cherry-pick this commit"); the workspace account can read it and clone it. The Release Board (a Tk app of the
desktop account) shows one ticket at a time as dot-matrix pixels only: an id, a call into the shop's code, what it
gives on the release and what it should give. Which of main's commits fixes it the subjects do not say (several
touch the same module, two other fixes are decoys), so the shell finds it by running the call at main's commits in
a clone. gitk cherry-picks it onto the release branch; the board takes the fix's hash only once the release branch
holds the backport, shows a sign-off code (pixels only, random in the VM) and the next ticket. The shell checks the
release head (tests, the ticket's call) and writes the release notes into ~/release, the workspace account's.

Scoring: the release branch is its old tip plus exactly the three fixes, cherry-picked in ticket order (each commit's
tree is the one the picks give, its message the fix's); main unchanged; the board signed off each ticket with its
fix on that very backport; the notes list each ticket with the board's code, its backport's hash and the value the
call returns on the release. The seeds vary the shop, the history, which bugs are ticketed and the calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.devops.backport_history import History, build_spec, call_text, fast_import_stream, plan_history
from weavegym.envs.tasks.devops.git_objects import CommitObject, read_commit, ref_sha
from weavegym.envs.tasks.item_records import numbered_records, per_item_verdict
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

REPO = f"{HOME}/shop"
WORK, NOTES_DIR = f"{HOME}/work", f"{HOME}/release"
NOTES = f"{NOTES_DIR}/notes.txt"
APP_DIR = "/usr/local/share/releaseboard"
APP = f"{APP_DIR}/release_board.py"
CONF, RECORD = f"{PRIVATE_DIR}/releaseboard.json", f"{PRIVATE_DIR}/releaseboard-record.jsonl"
BUILD = "/tmp/weavegym-backport-build"
TITLE, HEADING = "Release Board", "RELEASE BOARD"
COUNT = 3
NOTE_LINE = re.compile(r"^\s*(RB-\d{4})\s*\|\s*([A-Z2-9]{6})\s*\|\s*([0-9a-fA-F]{7,40})\s*\|\s*(-?\d+)\s*$")

# Where the windows go (1280x720 screen): gitk on the left, the board on the right, never overlapping.
GITK_AT, GITK_SIZE = (0, 0), (800, 690)
BOARD_AT, BOARD_SIZE = (812, 0), (460, 450)
# gitk's widgets relative to its client area at GITK_SIZE (measured with gitk 2.39 on Debian 12).
SHA1_ENTRY = (265, 213)
LIST_Y = (33, 196)  # the commit list's rows
SUBJECTS_X = (20, 262)  # the graph and subject column
DATES_X = (272, 785)  # the author and date columns, where a selected row's gray band shows
SELECTED = (217, 217, 217)  # gitk's selection background (gray85)
CHERRY_PICK = (60, 150)  # "Cherry-pick this commit" from the right-click point (the menu's 8th entry)
# The board's layout: boxes are [x, y, width, height] in its window.
SCALE, HEADING_SCALE, HEADING_AT, PAD, LINE_STEP = 2, 3, (16, 12), 8, 22
OPEN = (300, 6, 144, 34)
TICKET, LABEL, ENTRY, BUTTON = (16, 48, 428, 124), (16, 182, 300, 22), (16, 208, 262, 32), (292, 207, 150, 34)
STATUS, RESULTS = (16, 254, 428, 30), (16, 296, 428, 90)
TRIES, WAITS = 3, 15


def layout() -> dict[str, Any]:
    return {"title": TITLE, "heading": HEADING, "heading_at": list(HEADING_AT), "heading_scale": HEADING_SCALE,
            "scale": SCALE, "pad": PAD, "line_step": LINE_STEP, "size": list(BOARD_SIZE), "at": list(BOARD_AT),
            "open": list(OPEN), "ticket": list(TICKET), "label": list(LABEL), "entry": list(ENTRY),
            "button": list(BUTTON), "status": list(STATUS), "results": list(RESULTS)}


def board_origin(image: np.ndarray, reach: int = 48) -> tuple[int, int] | None:
    return pixel_font.find_drawn(image, HEADING, BOARD_AT, HEADING_AT, HEADING_SCALE, reach=reach)


def selected_row(image: np.ndarray, gitk: Sequence[int]) -> int | None:
    """The screen y of the middle of gitk's selected commit row (its gray band in the date columns), or None."""
    x, y = gitk[0], gitk[1]
    crop = image[y + LIST_Y[0]:y + LIST_Y[1], x + DATES_X[0]:x + DATES_X[1], :3].astype(int)
    band = (np.abs(crop - np.array(SELECTED)).max(axis=2) == 0).sum(axis=1) >= 60
    rows = np.flatnonzero(band)
    if len(rows) == 0 or rows[-1] - rows[0] > 20:
        return None
    return int(y + LIST_Y[0] + (rows[0] + rows[-1]) // 2)


def subject_x(image: np.ndarray, gitk: Sequence[int], row_y: int) -> int | None:
    """A point on the selected row's subject (where its gray highlight starts, right of the graph), or None when
    there is none or the row carries a branch label (a branch's tip, e.g. the release head: never a fix)."""
    x = gitk[0]
    strip = image[row_y - 2:row_y + 3, x + SUBJECTS_X[0]:x + SUBJECTS_X[1], :3].astype(int)
    label = (strip[..., 1] > 200) & (strip[..., 0] < 100) & (strip[..., 2] < 100)
    gray = np.flatnonzero((np.abs(strip - np.array(SELECTED)).max(axis=2) == 0).sum(axis=0) >= 3)
    if len(gray) < 20 or int(label.sum()) > 10:
        return None
    return int(x + SUBJECTS_X[0] + gray[0] + 12)


# -- setup ------------------------------------------------------------------------------------------------------


def setup(ctx: SetupContext) -> Prepared:
    history = plan_history(ctx.rng)
    built = _build_repo(ctx, history)
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, WORK])
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, NOTES_DIR])
    # The shell may read and clone the desk's repository: git otherwise refuses another account's repository.
    # (git upload-pack, which a clone runs, checks the .git folder itself.)
    for folder in (REPO, f"{REPO}/.git"):
        ctx.run(["git", "config", "--system", "--add", "safe.directory", folder])
    tickets = ticket_truth(history, built)
    gitk = _open_gitk(ctx)
    at = _open_board(ctx, history, tickets)
    return Prepared(
        params={"repo": REPO, "release": history.release, "shop": history.shop},
        truth={"repo": REPO, "release": history.release, "release_tip": built["release_tip"],
               "main_tip": built["main_tip"], "tickets": tickets, "gitk": gitk, "board": list(at)})


def ticket_truth(history: History, built: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each ticket as the board and the checker know it: its fix's hash, the release tree after its pick."""
    return [{"id": t["id"], "call": call_text(t), "gives": t["gives"], "wants": t["wants"],
             "fix": built["shas"][t["fix"]], "tree": built["trees"][number],
             "message": history.commits[t["fix"]].subject + "\n"} for number, t in enumerate(history.tickets)]


def _build_repo(ctx: SetupContext, history: History) -> dict[str, Any]:
    """Import the history as the desktop account; the hashes and the backports' trees are what git made."""
    stream, spec, script = f"{BUILD}.stream", f"{BUILD}.json", f"{BUILD}.py"
    ctx.write_file(stream, fast_import_stream(history), owner="root")
    ctx.write_file(spec, build_spec(history, REPO, stream), owner="root")
    ctx.write_file(script, ctx.fixture(__package__, "fixtures/build_backport_repo.py"), owner="root")
    out = ctx.run(["python3", script, spec], user=DESKTOP_USER, timeout=240).stdout
    ctx.run(["rm", "-f", stream, spec, script])
    built = json.loads(out.strip().splitlines()[-1])
    wants = [t["wants"] for t in history.tickets]
    if len(built["shas"]) != len(history.commits) or built["values"] != wants or not built["tests_ok"]:
        raise TaskError(f"{ctx.task_id} setup: the repository came out wrong: {len(built['shas'])} commits, values "
                        f"{built['values']} (want {wants}), tests ok: {built['tests_ok']}")
    return built


def _open_gitk(ctx: SetupContext) -> list[int]:
    ctx.launch_gui(f"cd {REPO} && {{as_user}} gitk --all", name="gitk")
    window = ctx.wait_window(r"gitk$")
    geometry = ctx.place_window(window.id, GITK_AT, GITK_SIZE)
    try:  # mapped is not drawn (TCG): wait for the selected head's row before the task snapshot
        wait_for(lambda: selected_row(ctx.client.screenshot(hide_cursor=True).image, geometry) is not None, 180,
                 what="gitk's commit list drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    return list(geometry)


def _open_board(ctx: SetupContext, history: History, tickets: list[dict[str, Any]]) -> tuple[int, int]:
    """Start the board with the queue on its stdin; once it is drawn, delete the input."""
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/release_board.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    conf = {"repo": REPO, "branch": history.release, "layout": layout(),
            "tickets": [{k: t[k] for k in ("id", "call", "gives", "wants", "fix", "tree")} for t in tickets]}
    ctx.write_file(CONF, json.dumps(conf), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {CONF} > {RECORD}", name="releaseboard")
    board = ctx.wait_window(f"^{TITLE}$")
    ctx.place_window(board.id, BOARD_AT)
    try:
        at = wait_for(lambda: board_origin(ctx.client.screenshot(hide_cursor=True).image), 120,
                      what="the Release Board drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", CONF])  # the tickets now live only in the board's memory
    return at


# -- the checker ------------------------------------------------------------------------------------------------


def backports(probe: Probe, truth: Mapping[str, Any]) -> tuple[list[tuple[str, CommitObject]], str]:
    """The commits the release branch gained over its old tip, oldest first, or ([], what is wrong)."""
    repo, branch, tip = truth["repo"], truth["release"], truth["release_tip"]
    sha = ref_sha(probe, repo, f"refs/heads/{branch}")
    chain: list[tuple[str, CommitObject]] = []
    for _ in range(12):
        if sha is None:
            return [], f"there is no branch {branch}"
        if sha == tip:
            return chain[::-1], ""
        commit = read_commit(probe, repo, sha)
        if commit is None or len(commit.parents) != 1:
            return [], f"{branch} holds {sha[:10]}, which is no readable commit with one parent"
        chain.append((sha, commit))
        sha = commit.parents[0]
    return [], f"{branch} no longer leads back to its old tip {tip[:10]} within 12 commits"


def check_backported(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    chain, problem = backports(probe, truth)
    if problem:
        return Verdict.failed(problem)
    tickets = truth["tickets"]
    if len(chain) > len(tickets):
        return Verdict.failed(f"{truth['release']} gained {len(chain)} commits; the tickets need {len(tickets)}")
    problems = []
    for number, ticket in enumerate(tickets):
        if number >= len(chain):
            problems.append(f"{ticket['id']}: not backported")
            continue
        sha, commit = chain[number]
        if commit.tree != ticket["tree"] or commit.message != ticket["message"]:
            problems.append(f"{ticket['id']}: commit {sha[:10]} ({commit.message.strip()[:40]!r}) is not a "
                            f"cherry-pick of its fix {ticket['fix'][:10]} in ticket order")
        else:
            problems.append("")
    return per_item_verdict(problems, "cherry-picked onto the release branch in ticket order", "tickets")


def check_main(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    head = ref_sha(probe, truth["repo"], "refs/heads/main")
    return Verdict.check(head == truth["main_tip"],
                         f"main is at {(head or 'nothing')[:10]}; it was at {truth['main_tip'][:10]}")


def board_records(probe: Probe) -> dict[int, dict[str, Any]]:
    return numbered_records(probe, RECORD, "ticket")


def check_signed_off(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records = board_records(probe)
    if not records:
        return Verdict.failed("the board recorded no sign-off")
    chain, _problem = backports(probe, truth)
    problems = []
    for number, ticket in enumerate(truth["tickets"]):
        got = records.get(number + 1, {})
        backport = chain[number][0] if number < len(chain) else None
        if got.get("fix") != ticket["fix"]:
            problems.append(f"{ticket['id']}: not signed off with its fix")
        elif got.get("head") != backport:
            problems.append(f"{ticket['id']}: signed off on {str(got.get('head'))[:10]}, which is not its backport "
                            f"on the release branch now")
        else:
            problems.append("")
    return per_item_verdict(problems, "signed off at the board with its fix, on its backport", "tickets")


def parse_notes(text: str | None) -> tuple[dict[str, tuple[str, str, int]], str]:
    """({ticket: (code, hash, value)}, problem) of the notes' 'ticket | code | hash | value' lines."""
    if text is None:
        return {}, f"{NOTES} does not exist"
    rows: dict[str, tuple[str, str, int]] = {}
    for number, line in enumerate(text.replace("\r", "").split("\n"), 1):
        if not line.strip():
            continue
        found = NOTE_LINE.match(line)
        if found is None:
            return {}, f"{NOTES} line {number} is not 'ticket | code | hash | value': {line[:60]!r}"
        rows[found.group(1)] = (found.group(2), found.group(3).lower(), int(found.group(4)))
    return rows, "" if rows else f"{NOTES} has no line"


def check_notes(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    rows, problem = parse_notes(probe.read_text(NOTES))
    if problem:
        return Verdict.failed(problem)
    records, (chain, _problem) = board_records(probe), backports(probe, truth)
    ids = [t["id"] for t in truth["tickets"]]
    if sorted(rows) != sorted(ids):
        return Verdict.failed(f"{NOTES} lists tickets {sorted(rows)}; the board's are {sorted(ids)}")
    problems = []
    for number, ticket in enumerate(truth["tickets"]):
        code, sha, value = rows[ticket["id"]]
        want_code = str(records.get(number + 1, {}).get("code") or "")
        backport = chain[number][0] if number < len(chain) else ""
        if not want_code or code != want_code:
            problems.append(f"{ticket['id']}: code {code}, the board's is {want_code or '(none)'}")
        elif not backport or not backport.startswith(sha):
            problems.append(f"{ticket['id']}: hash {sha} is not its backport's {backport[:10] or '(none)'}")
        elif value != ticket["wants"]:
            problems.append(f"{ticket['id']}: value {value}, the call returns {ticket['wants']} once fixed")
        else:
            problems.append("")
    return per_item_verdict(problems, "noted with the board's code, its backport's hash and the fixed value",
                            "tickets")


# -- the oracle -------------------------------------------------------------------------------------------------

TICKET_LINE = re.compile(r"TICKET (\d) OF \d: (RB-\d{4})")
CALL_LINE = re.compile(r"CALL  ([A-Z_]+)\(([-0-9, ]*)\)")


def _frame(ctx: OracleContext) -> np.ndarray:
    assert ctx.obs is not None
    return ctx.obs["screen"]


def _terminal(ctx: OracleContext) -> str:
    return str((ctx.obs or {}).get("terminal", "")).replace("\r", "")


def read_ticket(image: np.ndarray, at: Sequence[int], number: int) -> dict[str, Any] | None:
    """Ticket ``number`` as the board draws it: id, function, args, gives, wants; None until it shows whole."""
    x, y = at[0] + TICKET[0] + PAD, at[1] + TICKET[1] + PAD
    lines = [pixel_font.read_text(image, x, y + i * LINE_STEP, SCALE, 34) for i in range(5)]
    head, call = TICKET_LINE.fullmatch(lines[0]), CALL_LINE.fullmatch(lines[2])
    gives, wants = re.fullmatch(r"GIVES (-?\d+)", lines[3]), re.fullmatch(r"WANTS (-?\d+)", lines[4])
    if not (head and call and gives and wants) or int(head.group(1)) != number:
        return None
    return {"id": head.group(2), "function": call.group(1).lower(), "args": call.group(2).replace(" ", ""),
            "gives": int(gives.group(1)), "wants": int(wants.group(1))}


def read_result(image: np.ndarray, at: Sequence[int], number: int) -> str:
    return pixel_font.read_text(image, at[0] + RESULTS[0] + PAD, at[1] + RESULTS[1] + PAD + (number - 1) * LINE_STEP,
                                SCALE, 34)


def find_fix_command(ticket: Mapping[str, Any], release: str) -> str:
    """The shell line that finds the ticket's fix: the first of main's commits since the cut, among those touching
    the function's module, at which the ticket's call returns what it should."""
    fn, args, wants = ticket["function"], ticket["args"], ticket["wants"]
    run = f"python3 -c 'import sys; ns = {{}}; exec(sys.stdin.read(), ns); print(ns[\"{fn}\"]({args}))'"
    return (f"cd {WORK}/shop && git fetch -q origin && f=$(git grep -l 'def {fn}(' origin/main -- shop | head -n1 | "
            f"cut -d: -f2-) && for c in $(git rev-list --reverse origin/{release}..origin/main -- \"$f\"); do "
            f"v=$(git show \"$c:$f\" | {run}); if [ \"$v\" = \"{wants}\" ]; then echo \"FIX $c\"; break; fi; done")


def check_command(ticket: Mapping[str, Any], release: str, old: str) -> str:
    """Wait until gitk's pick moved the release branch, then test the release head in the clone."""
    fn, args = ticket["function"], ticket["args"]
    return (f"for i in $(seq 60); do [ \"$(git -C {REPO} rev-parse {release})\" != {old} ] && break; sleep 1; done; "
            f"cd {WORK}/shop && git fetch -q origin && git checkout -q --detach origin/{release} && "
            f"python3 -m unittest -q 2>&1 | tail -n1; m=$(git grep -l 'def {fn}(' HEAD -- shop | head -n1 | "
            f"cut -d: -f2- | sed 's,/,.,; s,[.]py$,,'); echo \"VALUE $(python3 -c \"from $m import {fn}; "
            f"print({fn}({args}))\")\"; echo \"HEAD $(git rev-parse HEAD) $(git log -1 --format=%s)\"")


def _read_ticket(ctx: OracleContext, at: Sequence[int], number: int) -> Generator[ActionLike, Any, Any]:
    """Ticket ``number`` off the board; the first one after pressing "Open queue" (again if the press was lost)."""
    for attempt in range(TRIES):
        if number == 1:
            yield {"kind": "click", "x": at[0] + OPEN[0] + OPEN[2] // 2, "y": at[1] + OPEN[1] + OPEN[3] // 2}
        for _ in range(WAITS if attempt or number == 1 else 2 * WAITS):
            ticket = read_ticket(_frame(ctx), at, number)
            if ticket:
                return ticket
            yield {"kind": "wait", "seconds": 2}
        if number != 1:
            break
    return None


def _pick(ctx: OracleContext, fix: str) -> Iterator[ActionLike]:
    """gitk: the fix's hash into the SHA1 ID field (Return selects it), then its row's "Cherry-pick this commit"."""
    gitk = ctx.truth["gitk"]
    row = x = None
    for _attempt in range(2):  # a lost key leaves the release head selected (a branch tip): type the hash again
        yield {"kind": "double_click", "x": gitk[0] + SHA1_ENTRY[0], "y": gitk[1] + SHA1_ENTRY[1]}
        yield {"kind": "type", "text": fix[:12]}
        yield {"kind": "key", "keys": "Return"}
        for _ in range(WAITS // 2):
            yield {"kind": "wait", "seconds": 1}
            row = selected_row(_frame(ctx), gitk)
            x = subject_x(_frame(ctx), gitk, row) if row is not None else None
            if x is not None:
                break
        if x is not None:
            break
    if row is None or x is None:
        return
    before = _frame(ctx).copy()
    yield {"kind": "right_click", "x": x, "y": row}
    for _ in range(WAITS):  # the menu may show seconds late under TCG: click its entry only once it is there
        if menu_shown(before, _frame(ctx), x, row):
            yield {"kind": "click", "x": x + CHERRY_PICK[0], "y": row + CHERRY_PICK[1]}
            return
        yield {"kind": "wait", "seconds": 1}
    yield {"kind": "key", "keys": "Escape"}


def menu_shown(before: np.ndarray, after: np.ndarray, x: int, row: int) -> bool:
    """Whether a menu now covers the area below the right-click point (its entries' text changed many pixels)."""
    box = (slice(row + 24, row + CHERRY_PICK[1] + 60), slice(x + 4, x + 3 * CHERRY_PICK[0]))
    changed = np.abs(before[box][..., :3].astype(int) - after[box][..., :3].astype(int)).max(axis=2) > 0
    return bool(changed.mean() > 0.08)


def _sign_off(ctx: OracleContext, at: Sequence[int], number: int, fix: str) -> Generator[ActionLike, Any, str]:
    """Type the fix's hash at the board and sign off until its result line shows; the code ('' if never)."""
    want = re.compile(r"RB-\d{4} SIGNED OFF ([A-Z2-9]{6})")
    for _try in range(TRIES):
        found = want.fullmatch(read_result(_frame(ctx), at, number))
        if found:
            return found.group(1)
        yield {"kind": "double_click", "x": at[0] + ENTRY[0] + ENTRY[2] // 2,
               "y": at[1] + ENTRY[1] + ENTRY[3] // 2}
        yield {"kind": "type", "text": fix[:12]}
        yield {"kind": "click", "x": at[0] + BUTTON[0] + BUTTON[2] // 2, "y": at[1] + BUTTON[1] + BUTTON[3] // 2}
        for _ in range(WAITS // 3):
            found = want.fullmatch(read_result(_frame(ctx), at, number))
            if found:
                return found.group(1)
            yield {"kind": "wait", "seconds": 2}
    return ""


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    release, at = ctx.truth["release"], ctx.truth["board"]
    yield {"kind": "shell", "timeout": 120, "command": f"git clone -q --no-hardlinks {REPO} {WORK}/shop && echo "
                                                      f"\"RELEASE $(git -C {REPO} rev-parse {release})\""}
    found = re.search(r"^RELEASE ([0-9a-f]{40})$", _terminal(ctx), re.M)
    head = found.group(1) if found else ""
    for number in range(1, COUNT + 1):
        ticket = yield from _read_ticket(ctx, at, number)
        if ticket is None:
            break
        yield {"kind": "shell", "timeout": 300, "command": find_fix_command(ticket, release)}
        fixes = re.findall(r"^FIX ([0-9a-f]{40})$", _terminal(ctx), re.M)
        if not fixes or not head:
            break  # the gui-only replay: the shell's answers never came
        fix = fixes[-1]
        picked = False
        for _try in range(TRIES):
            yield from _pick(ctx, fix)
            yield {"kind": "shell", "timeout": 180, "command": check_command(ticket, release, head)}
            heads = re.findall(r"^HEAD ([0-9a-f]{40}) ", _terminal(ctx), re.M)
            if heads and heads[-1] != head:
                picked = True
                head = heads[-1]
                break
        values = re.findall(r"^VALUE (-?\d+)$", _terminal(ctx), re.M)
        if not picked or not values:
            break
        code = yield from _sign_off(ctx, at, number, fix)
        if not code:
            break
        yield {"kind": "shell", "command": f"printf '%s\\n' '{ticket['id']} | {code} | {head[:12]} | {values[-1]}' "
                                           f">> {NOTES} && cat {NOTES}"}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-DevOps-8",
    title="Backport the release's three hotfix tickets with gitk: find each fix in the shell, cherry-pick it, sign it "
          "off on the Release Board, write the release notes",
    instruction=(
        "You manage the {release} release of the {shop} shop. Its git repository is {repo}, with the branch {release} "
        "checked out; only the open gitk window may change it (your shell can read it and clone it, e.g. to ~/work). "
        "The 'Release Board' window shows one hotfix ticket at a time: its id, a call into the shop's Python code "
        "(names drawn in upper case), what the call gives on {release} and what it should give. For each ticket: find "
        "the commit on main that fixes it (the subjects do not say; run the call at main's commits in a clone), "
        "cherry-pick exactly that commit onto {release} in gitk (type its hash into the SHA1 ID field and press "
        "Enter, then right-click its row and choose 'Cherry-pick this commit'), then type the fix's hash (at least 7 "
        "characters) at the board and press 'Sign off': the board shows a sign-off code and the next ticket. Backport "
        "nothing else and leave main as it is. Then, from your shell, add the ticket's line to the release notes "
        "~/release/notes.txt: 'ticket | code | backport | value', with the ticket id, the board's sign-off code, the "
        "hash (at least 7 characters) of the new commit on {release} and the value the ticket's call returns on "
        "{release} now (e.g. RB-1234 | ABC234 | 1a2b3c4d | 42). Finish when all three tickets are signed off and "
        "noted."),
    channels=Channels(
        gui="read each ticket off the board, cherry-pick its fix onto the release branch in gitk, sign it off at the "
            "board and read the code back",
        cli="find each ticket's fix among main's commits by running its call in a clone, check the release head and "
            "write the release notes",
        why_both="the tickets and the sign-off codes exist only as the board's pixels and the repository is writable "
                 "only by the desktop account (gitk), while finding which of main's commits fixes a ticket needs runs "
                 "of the code in a clone and the notes belong in a folder only the shell's account can write"),
    setup=setup,
    clauses=(
        Clause("backported", "the release branch gained exactly the three fixes, cherry-picked in ticket order",
               check_backported, weight=3.0, critical=True, cap=0.5),
        Clause("main_unchanged", "main still points at its old tip", check_main, weight=0.0, critical=True, cap=0.5),
        Clause("signed_off", "the board signed off every ticket with its fix, on its backport", check_signed_off,
               weight=2.0, critical=True, cap=0.5),
        Clause("release_notes", "~/release/notes.txt lists every ticket with the board's code, its backport's hash "
                                "and the fixed value", check_notes, weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the board's sign-off record (captured by setup)"),
        Deliverable("{repo}/.git/refs/heads/{release}", "gui", description="the release branch (gitk's cherry-picks)"),
        Deliverable(NOTES, "cli", description="~/release/notes.txt"),
    ),
    oracle=oracle,
    withheld=("tickets",),
    profile="base",
    apps=("Release Board (python3-tk)", "gitk", "git", "python3"),
    max_steps=160,
    time_budget_s=2700.0,
)
