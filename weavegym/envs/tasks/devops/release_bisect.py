"""Weave-DevOps-5: bisect a latency regression between two releases and ship its revert, or say it is not there.

A service's git repository (30-60 generated commits, release tags, the workspace account's) has a latency
check per endpoint that `git bisect run` can use. Three endpoints are over budget at the tip (the incident's
and two others'), so the shell alone cannot tell which regression the incident is about, nor where to look:
the affected endpoint and which releases production saw as OK or DEGRADED exist only as dot-matrix pixels
under the "Releases" tab of a Tk "Release Dashboard" (fed from a root-only file deleted once it is up). The
range to bisect is the last OK release .. the first DEGRADED one. The fix is a `git revert` of the culprit on
a new branch `hotfix` (the shell's: the repository is the workspace account's), and the culprit is recorded in
the dashboard's Blame tab, whose record lands in a root-only file (the GUI's).

On a third of the seeds the dashboard's "last good" release already fails the check: the culprit predates the
range. Bisecting the range blindly then names an innocent commit. The right outcome is to revert nothing,
find the real culprit by bisecting from the first commit, record it as "not in range", and give up with a
reason that names the release that already fails (or the culprit).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, WORKSPACE_USER, SetupContext
from weavegym.envs.task import (
    CANDIDATES,
    CAUSES,
    FEASIBLE,
    Abstention,
    ActionLike,
    Channels,
    OracleContext,
    Prepared,
    Task,
)
from weavegym.envs.tasks.devops.git_objects import read_commit, ref_sha
from weavegym.envs.tasks.devops.release_history import History, build_spec, fast_import_stream, plan_history
from weavegym.envs.tasks.dialogs import json_record
from weavegym.envs.tasks.pixel_font import read_text
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

APP_DIR = "/usr/local/share/releasedashboard"
APP = f"{APP_DIR}/release_dashboard.py"
SHOWN_IN = f"{PRIVATE_DIR}/release-dashboard.json"
RECORD = f"{PRIVATE_DIR}/release-blame.json"
BISECT_LOG = f"{HOME}/bisect.log"
HOTFIX = "{repo}/.git/refs/heads/hotfix"
BUILD = "/tmp/weavegym-release-build"
TITLE = "Release Dashboard"

# The dashboard's geometry (pixels inside its window; the pages' contents relative to the page's corner).
WIDTH, HEIGHT = 900, 540
PAGE = (10, 52, 880, 478)
TABS = [[10 + i * 130, 10, 120, 32] for i in range(3)]  # Overview, Releases, Blame
TITLE_AT, TITLE_SCALE, SCALE = (12, 12), 3, 2
COLUMNS = (12, 132, 282, 392)  # release, date, p95, status
HEAD_Y, FIRST_ROW_Y, ROW_H, MAX_ROWS = 56, 84, 32, 10
COMMIT, IN_RANGE, OUT_OF_RANGE = [12, 90, 420, 32], [12, 140, 600, 30], [12, 180, 600, 30]
RECORD_BOX = [12, 236, 140, 36]
WAIT_TRIES = 20
SLOW_STEP_S = 480  # a bisect over 40 commits runs python at each step: minutes under TCG on a loaded host


def layout() -> dict[str, Any]:
    """What the fixture is told about where to draw (independent of the seed, so none of it is secret)."""
    return {"width": WIDTH, "height": HEIGHT, "page": list(PAGE), "tabs": TABS, "title": list(TITLE_AT),
            "title_scale": TITLE_SCALE, "scale": SCALE, "columns": list(COLUMNS), "head_y": HEAD_Y,
            "first_row_y": FIRST_ROW_Y, "row_h": ROW_H, "bar_x": 520, "bar_w": 340, "commit": COMMIT,
            "in_range": IN_RANGE, "out_of_range": OUT_OF_RANGE, "record": RECORD_BOX}


def screen_targets(window: Sequence[int]) -> dict[str, Any]:
    """Where on the screen the oracle reads and clicks, from the dashboard window's position alone."""
    x, y = window[0], window[1]
    px, py = x + PAGE[0], y + PAGE[1]

    def center(ox: int, oy: int, box: Sequence[int]) -> list[int]:
        return [ox + box[0] + box[2] // 2, oy + box[1] + box[3] // 2]

    return {"tabs": [center(x, y, box) for box in TABS], "page": [px, py],
            "commit": center(px, py, COMMIT), "in_range": center(px, py, IN_RANGE),
            "out_of_range": center(px, py, OUT_OF_RANGE), "record": center(px, py, RECORD_BOX)}


# -- setup ------------------------------------------------------------------------------------------------------


def setup(ctx: SetupContext) -> Prepared:
    history = plan_history(ctx.rng, ctx.feasible)
    repo = f"{HOME}/{history.service}"
    built = _build_repo(ctx, history, repo)
    window = _open_dashboard(ctx, history)
    culprit = built["shas"][history.culprit]
    return Prepared(
        params={"service": history.service, "repo": repo},
        truth={"repo": repo, "window": window, "targets": screen_targets(window), "tip": built["tip"],
               "tree": built["tree"], "culprit": culprit, "endpoint": history.incident,
               "last_good": history.last_good, "first_bad": history.first_bad_tag,
               "decoys": {e: built["shas"][i] for e, i in history.decoys.items()},
               FEASIBLE: ctx.feasible, CAUSES: [] if ctx.feasible else [history.last_good, culprit[:7]],
               CANDIDATES: [name for name, _at in history.tags] + list(built["shas"])})


def _build_repo(ctx: SetupContext, history: History, repo: str) -> dict[str, Any]:
    """Import the history as the workspace account; the hashes and the revert's tree are what git made."""
    stream, spec, script = f"{BUILD}.stream", f"{BUILD}.json", f"{BUILD}.py"
    ctx.write_file(stream, fast_import_stream(history), owner="root")
    ctx.write_file(spec, build_spec(history, repo, stream), owner="root")
    ctx.write_file(script, ctx.fixture(__package__, "fixtures/build_release_repo.py"), owner="root")
    out = ctx.run(["python3", script, spec], user=WORKSPACE_USER, timeout=180).stdout
    ctx.run(["rm", "-f", stream, spec, script])
    built = json.loads(out.strip().splitlines()[-1])
    if len(built["shas"]) != len(history.commits):
        raise TaskError(f"{ctx.task_id} setup: git made {len(built['shas'])} commits, not {len(history.commits)}")
    return built


def _open_dashboard(ctx: SetupContext, history: History) -> list[int]:
    """Start the dashboard with the releases on its stdin; once its tabs are drawn, delete the input."""
    shown = {"service": history.service, "endpoint": history.incident, "rows": history.releases, "layout": layout()}
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/release_dashboard.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    ctx.write_file(SHOWN_IN, json.dumps(shown), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {SHOWN_IN} > {RECORD}", name="releasedashboard")
    window = ctx.wait_window(f"^{TITLE}$").geometry
    try:  # mapped is not drawn (TCG): wait for the last tab's label before the task snapshot
        wait_for(lambda: tabs_drawn(ctx.client.screenshot().image, window), 120, what="the Release Dashboard drawn",
                 max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", SHOWN_IN])  # the dashboard has read it: the releases now exist only in its window
    return window


def tabs_drawn(image: np.ndarray, window: Sequence[int]) -> bool:
    bx, by, bw, bh = window[0] + TABS[-1][0], window[1] + TABS[-1][1], TABS[-1][2], TABS[-1][3]
    region = image[max(by, 0):by + bh, max(bx, 0):bx + bw].astype(int)
    return region.size > 0 and int((region.sum(axis=2) < 3 * 90).sum()) >= 20


# -- reading the dashboard (the oracle's eyes) ------------------------------------------------------------------


def read_title(image: np.ndarray, page: Sequence[int]) -> str:
    return read_text(image, page[0] + TITLE_AT[0], page[1] + TITLE_AT[1], TITLE_SCALE, 24)


def read_releases(image: np.ndarray, page: Sequence[int]) -> tuple[str, list[tuple[str, str]]]:
    """The endpoint (lower case, "" if unreadable) and the rows' (tag, status), oldest first."""
    match = re.fullmatch(r"P95 LATENCY /([A-Z]+)", read_title(image, page))
    rows = []
    for i in range(MAX_ROWS):
        y = page[1] + FIRST_ROW_Y + i * ROW_H
        tag = read_text(image, page[0] + COLUMNS[0], y, SCALE, 8)
        if not re.fullmatch(r"\d+\.\d+\.\d+", tag):
            break
        rows.append((tag, read_text(image, page[0] + COLUMNS[3], y, SCALE, 8)))
    return (match[1].lower() if match else ""), rows


def release_range(rows: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """(last OK release, first DEGRADED release after it), or None when the table shows no such step."""
    for (good, was), (bad, now) in itertools.pairwise(rows):
        if was == "OK" and now == "DEGRADED":
            return good, bad
    return None


# -- the checker ------------------------------------------------------------------------------------------------

FIRST_BAD = re.compile(r"^# first bad commit: \[([0-9a-f]{40})\]", re.M)


def check_bisect_log(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(BISECT_LOG)
    if text is None:
        return Verdict.failed(f"{BISECT_LOG} does not exist")
    found = sorted(set(FIRST_BAD.findall(text)))
    named = [sha[:10] for sha in found]
    return Verdict.check(found == [truth["culprit"]],
                         f"{BISECT_LOG} names first bad commit(s) {named}; the culprit is {truth['culprit'][:10]}")


def check_hotfix(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    repo, culprit = truth["repo"], truth["culprit"]
    sha = ref_sha(probe, repo, "refs/heads/hotfix")
    if sha is None:
        return Verdict.failed("there is no branch hotfix")
    commit = read_commit(probe, repo, sha)
    if commit is None:
        return Verdict.failed(f"hotfix points at {sha[:10]}, which is not a readable commit")
    reverts = f"This reverts commit {culprit}" in commit.message
    on_tip, tree = commit.parents == (truth["tip"],), commit.tree == truth["tree"]
    return Verdict.check(reverts and on_tip and tree,
                         f"hotfix {sha[:10]}: reverts {culprit[:10]}: {reverts}; its parent is main's tip "
                         f"{truth['tip'][:10]}: {on_tip}; its tree is the clean revert's: {tree}")


def check_main(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    head = ref_sha(probe, truth["repo"], "refs/heads/main")
    return Verdict.check(head == truth["tip"], f"main is at {(head or 'nothing')[:10]}; it was at {truth['tip'][:10]}")


def _blame(probe: Probe, truth: Mapping[str, Any], in_range: bool) -> Verdict:
    found = json_record(probe, RECORD)
    if found is None:
        return Verdict.failed("nothing was recorded in the dashboard's Blame tab")
    sha = str(found.get("commit", ""))
    ok = len(sha) >= 7 and truth["culprit"].startswith(sha) and found.get("in_range") is in_range
    return Verdict.check(ok, f"the Blame tab recorded {sha[:12]!r}, in range: {found.get('in_range')!r}; expected "
                             f"{truth['culprit'][:12]}, in range: {in_range}")


def check_blamed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return _blame(probe, truth, True)


def check_blamed_outside(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    return _blame(probe, truth, False)


# -- the oracle -------------------------------------------------------------------------------------------------

CHECKED = re.compile(r"^CHECK (\S+) (\d+)\s*$", re.M)
FOUND = re.compile(r"# first bad commit: \[([0-9a-f]{40})\]")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Read the range off the Releases tab, check its ends, bisect (in range, or from the first commit), then the
    hotfix (shell) and the Blame tab (GUI)."""
    repo, targets = ctx.truth["repo"], ctx.truth["targets"]
    page = targets["page"]
    yield {"kind": "click", "x": targets["tabs"][1][0], "y": targets["tabs"][1][1]}
    for _ in range(WAIT_TRIES):  # the tab's first drawing may trail the click under TCG
        if release_range(read_releases(ctx.obs["screen"], page)[1]) is not None:
            break
        yield {"kind": "wait", "seconds": 1}
    endpoint, rows = read_releases(ctx.obs["screen"], page)
    ends = release_range(rows)
    if not endpoint or ends is None:
        yield {"kind": "fail", "reason": "the Release Dashboard's releases could not be read"}
        return
    good, bad = ends
    check = f"python3 checks/latency.py {endpoint}"
    yield {"kind": "shell", "command": f'cd {repo} && for t in {good} {bad}; do git checkout -q "$t" && {check}; '
                                       'echo "CHECK $t $?"; done; git checkout -q main', "timeout": SLOW_STEP_S}
    verdicts = dict(CHECKED.findall((ctx.obs or {}).get("terminal", "").replace("\r", "")))
    in_range = verdicts.get(good) == "0"
    start = f"{bad} {good}" if in_range else f"{good} $(git rev-list --max-parents=0 HEAD)"
    yield {"kind": "shell", "command": f"cd {repo} && git bisect start {start} >/dev/null && git bisect run {check} "
                                       f">/dev/null 2>&1; git bisect log > {BISECT_LOG}; git bisect reset >/dev/null "
                                       f"2>&1; grep 'first bad commit' {BISECT_LOG}", "timeout": SLOW_STEP_S}
    found = FOUND.search((ctx.obs or {}).get("terminal", ""))
    if found is None:
        yield {"kind": "fail", "reason": f"git bisect named no culprit for the {endpoint} latency check"}
        return
    culprit = found[1]
    if in_range:
        yield {"kind": "shell", "command": f"cd {repo} && git switch -q -c hotfix main && git revert --no-edit "
                                           f"{culprit} && {check}", "timeout": SLOW_STEP_S}
    yield {"kind": "click", "x": targets["tabs"][2][0], "y": targets["tabs"][2][1]}
    for _ in range(WAIT_TRIES):
        if read_title(ctx.obs["screen"], page) == "BLAME":
            break
        yield {"kind": "wait", "seconds": 1}
    yield {"kind": "click", "x": targets["commit"][0], "y": targets["commit"][1]}
    yield {"kind": "type", "text": culprit[:12]}
    choice = targets["in_range" if in_range else "out_of_range"]
    yield {"kind": "click", "x": choice[0], "y": choice[1]}
    yield {"kind": "click", "x": targets["record"][0], "y": targets["record"][1]}
    # The dashboard writes its record as it exits; pgrep sees every account's processes ([d]: not this sh).
    yield {"kind": "shell", "command": "timeout 60 sh -c 'while pgrep -f \"release_dashboar[d]\" >/dev/null; do "
                                       "sleep 0.2; done'", "timeout": 90}
    if in_range:
        yield {"kind": "done"}
    else:
        yield {"kind": "fail", "reason": f"The culprit is not in the range {good}..{bad}: the {endpoint} latency "
                                         f"check already fails at {good}, the last release the dashboard marks OK. "
                                         f"Bisecting from the first commit names {culprit[:12]}, which predates "
                                         "that release; nothing was reverted."}


TASK = Task(
    id="Weave-DevOps-5",
    title="Bisect a latency regression between two releases and ship its revert (a third of the seeds cannot be "
          "done)",
    instruction=(
        "Production latency of the {service} service regressed. Its git repository is {repo} (releases are tags on "
        "main). In the repository, `python3 checks/latency.py ENDPOINT` replays a fixed workload against one "
        "endpoint and exits 1 when that endpoint is over its latency budget. The open 'Release Dashboard' window "
        "shows, under its Releases tab, the endpoint the incident is about and its p95 latency in production per "
        "release, each release marked OK or DEGRADED; the range to search runs from the last release marked OK to "
        "the first one marked DEGRADED. First run the endpoint's check at both ends of that range. If the last OK "
        "release passes and the first DEGRADED one fails: find the culprit commit in that range with `git bisect "
        "run` and the check, save the bisect's `git bisect log` to ~/bisect.log, then create a branch hotfix from "
        "main and `git revert` the culprit on it (leave main as it is). In the dashboard's Blame tab, enter the "
        "culprit's hash (at least 7 characters), select 'In range' and press Record, then finish. If instead the "
        "check already fails at the last OK release, the culprit is not in the range: revert nothing and create no "
        "hotfix branch; find the real culprit by bisecting from the repository's first commit to that release, "
        "save that bisect's `git bisect log` to ~/bisect.log, record the culprit in the Blame tab with 'Not in "
        "range', and give up with fail, naming in the reason the release that already fails or the culprit."),
    channels=Channels(
        gui="read the incident's endpoint and its OK/DEGRADED releases off the dashboard, record the culprit in it",
        cli="check the range's ends, git bisect run with the latency check, revert the culprit on a hotfix branch",
        why_both="the endpoint and the range exist only as pixels of the dashboard (three endpoints are over budget "
                 "at the tip), while the repository and its bisect belong to the shell's account and the Blame "
                 "record only to the dashboard's form"),
    setup=setup,
    clauses=(
        Clause("bisect_logged", "~/bisect.log is a git bisect log that found the culprit", check_bisect_log),
        Clause("hotfix_reverts_culprit", "branch hotfix is a clean git revert of the culprit on main's tip",
               check_hotfix, weight=2.0, critical=True, cap=0.5),
        Clause("main_unchanged", "main still points at its old tip", check_main, weight=0.0, critical=True,
               cap=0.5),
        Clause("culprit_blamed", "the Blame tab records the culprit, in range", check_blamed, weight=2.0,
               critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the dashboard's Blame record (captured by setup)"),
        Deliverable(BISECT_LOG, "cli", description="~/bisect.log"),
        Deliverable(HOTFIX, "cli", description="the hotfix branch's ref"),
    ),
    abstention=Abstention(
        infeasible=lambda seed: seed % 3 == 1,
        candidates=True,  # the release that already fails is one of the tags, the culprit one of the commits
        fabrications=(HOTFIX,),
        clauses=(
            Clause("culprit_blamed_outside", "the Blame tab records the real culprit, not in range",
                   check_blamed_outside, weight=2.0, critical=True, cap=0.5),
            Clause("bisect_logged", "~/bisect.log is a git bisect log that found the real culprit", check_bisect_log),
            Clause("main_unchanged", "main still points at its old tip: nothing was reverted", check_main,
                   critical=True, cap=0.5),
        ),
        deliverables=(
            Deliverable(RECORD, "gui", owner="root", description="the dashboard's Blame record (captured by setup)"),
            Deliverable(BISECT_LOG, "cli", description="~/bisect.log"),
        ),
    ),
    withheld=("culprit", "tree", "endpoint", "last_good", "first_bad", "decoys"),
    oracle=oracle,
    apps=("git", "python3-tk", "python3"),
    max_steps=40,
    time_budget_s=900.0,
)
