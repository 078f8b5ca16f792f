"""Weave-DevOps-2: find the commit that broke the nightly payroll job, revert it, rerun, and file the incident.

The job's log shows since which night it fails and the traceback; the repository's
history (git log / bisect, or gitk) holds the culprit. Reverting and rerunning
the job are shell work. The incident is filed by picking the culprit in an
"Incident report" list dialog whose answer lands in a root-only file, so only
the GUI can file it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.envs.setup_context import HOME, PRIVATE_DIR, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.devops.git_objects import head_sha, read_commit
from weavegym.envs.tasks.dialogs import await_dialog_exit
from weavegym.evaluators import Clause, Probe, Verdict

REPO = f"{HOME}/payroll"
LOG = f"{REPO}/logs/nightly.log"
REPORT = f"{REPO}/out/payroll.csv"
ANSWER = f"{PRIVATE_DIR}/incident.out"
DIALOG_TITLE = "Incident report"
BUILDER = "/tmp/weavegym-build-payroll.py"

RUN_NIGHTLY = """#!/bin/sh
# Nightly payroll job (cron: 0 2 * * *). Everything it prints is appended to logs/nightly.log.
cd "$(dirname "$0")" || exit 1
mkdir -p logs
echo "=== nightly run $(date '+%Y-%m-%d %H:%M') ===" >> logs/nightly.log
python3 payroll.py >> logs/nightly.log 2>&1
"""
SETTINGS = """[input]
timesheet = timesheet.csv
delimiter = ;

[rates]
overtime_after = 40
overtime_factor = 1.5
"""
# (file, good text, broken text, commit subject): the three ways the culprit commit breaks the job.
CULPRITS = (
    ("settings.ini", "delimiter = ;", "delimiter = ,", "Use standard CSV settings"),
    ("payroll.py", 'config.getfloat("rates", "overtime_after")', 'config.getfloat("rates", "overtime_threshold")',
     "Rename overtime setting for clarity"),
    ("payroll.py", 'float(row["hours"])', 'float(row["Hours"])', "Tidy up row parsing"),
)
AUTHORS = ("Dana Ortiz <dana@payroll.example>", "Sam Keller <sam@payroll.example>",
           "Priya Natarajan <priya@payroll.example>", "Lee Huang <lee@payroll.example>")
NAMES = ("Abbott", "Baker", "Chen", "Diaz", "Evans", "Fischer", "Garcia", "Haddad", "Ivanova", "Jensen", "Kowalski",
         "Lopez", "Moreau", "Nakamura", "Okafor", "Petrov", "Quinn", "Rossi", "Santos", "Tanaka", "Ueda", "Varga",
         "Weber", "Xu", "Young", "Zimmer")

# Runs in the guest as the workspace account: builds the repository from a JSON spec, prints the commit ids.
BUILD_SCRIPT = r"""
import json, os, subprocess, sys
spec = json.load(open(sys.argv[1]))
repo = spec["repo"]
os.makedirs(repo, exist_ok=True)
git = lambda *args, env=None: subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                                             env={**os.environ, **(env or {})}).stdout.strip()
git("init", "-q", "-b", "main")
git("config", "user.name", "Weave User")  # the repository's own identity: ~/.gitconfig is the desktop's
git("config", "user.email", "user@payroll.example")
shas = []
for commit in spec["commits"]:
    for path, text in commit["files"].items():
        full = os.path.join(repo, path)
        with open(full, "w") as handle:
            handle.write(text)
        if path.endswith(".sh"):
            os.chmod(full, 0o755)
    git("add", "-A")
    name, email = commit["author"].rsplit(" <", 1)
    env = {"GIT_AUTHOR_DATE": commit["date"], "GIT_COMMITTER_DATE": commit["date"], "GIT_AUTHOR_NAME": name,
           "GIT_AUTHOR_EMAIL": email[:-1], "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email[:-1]}
    git("commit", "-q", "-m", commit["subject"], env=env)
    shas.append(git("rev-parse", "HEAD"))
print(json.dumps(shas))
"""


def _timesheet_rows(ctx: SetupContext, names: list[str]) -> list[tuple[str, float, float]]:
    return [(name, int(ctx.rng.integers(120, 560)) / 10, int(ctx.rng.integers(72, 257)) / 4) for name in names]


def _gross(rows: list[tuple[str, float, float]]) -> dict[str, float]:
    """The job's own arithmetic (same float operations), per employee."""
    out = {}
    for name, hours, rate in rows:
        regular = min(hours, 40.0)
        out[name] = round(regular * rate + (hours - regular) * rate * 1.5, 2)
    return out


def _timesheet(rows: list[tuple[str, float, float]]) -> str:
    return "employee;hours;rate\n" + "".join(f"{n};{h:.1f};{r:.2f}\n" for n, h, r in rows)


def setup(ctx: SetupContext) -> Prepared:
    names = [str(n) for n in ctx.rng.permutation(NAMES)]
    batches = [_timesheet_rows(ctx, names[:8]), _timesheet_rows(ctx, names[8:11]),
               _timesheet_rows(ctx, names[11:13]), _timesheet_rows(ctx, names[13:16])]
    program = ctx.fixture(__package__, "fixtures/payroll_app.py").decode()
    culprit_file, good, bad, culprit_subject = CULPRITS[int(ctx.rng.integers(len(CULPRITS)))]
    readme = "# payroll\n\nComputes gross pay from timesheet.csv.\n"
    plan: list[tuple[str, dict[str, str]]] = [
        ("Initial payroll script", {"payroll.py": program, "settings.ini": SETTINGS, "run_nightly.sh": RUN_NIGHTLY,
                                    "timesheet.csv": _timesheet(batches[0]), ".gitignore": "logs/\nout/\n"}),
        ("Add README", {"README.md": readme}),
        ("Add October hires to timesheet", {"timesheet.csv": _timesheet(batches[0] + batches[1])}),
        ("Document the nightly job", {"README.md": readme + "\nRun ./run_nightly.sh (cron, 02:00).\n"}),
        ("Add CHANGELOG", {"CHANGELOG.md": "# Changelog\n\n- 1.0: first release\n"}),
        ("Add November hires to timesheet", {"timesheet.csv": _timesheet(batches[0] + batches[1] + batches[2])}),
        ("Release 1.1", {"CHANGELOG.md": "# Changelog\n\n- 1.1: November hires\n- 1.0: first release\n"}),
        ("Add contractor hours", {"timesheet.csv": _timesheet(batches[0] + batches[1] + batches[2] + batches[3])}),
        ("Fix typo in README", {"README.md": readme.replace("Computes", "Computes the") +
                                "\nRun ./run_nightly.sh (cron, 02:00).\n"}),
    ]
    position = int(ctx.rng.integers(2, len(plan) - 1))  # at least two commits before and one after it
    current = {"payroll.py": program, "settings.ini": SETTINGS}[culprit_file]
    plan.insert(position, (culprit_subject, {culprit_file: current.replace(good, bad)}))
    commits = [{"subject": subject, "files": files, "author": AUTHORS[int(ctx.rng.integers(len(AUTHORS)))],
                "date": f"2026-11-{3 + i:02d}T{10 + int(ctx.rng.integers(0, 8)):02d}:{int(ctx.rng.integers(60)):02d}"
                        ":00+0000"} for i, (subject, files) in enumerate(plan)]
    ctx.write_file(BUILDER, BUILD_SCRIPT)
    ctx.write_file("/tmp/weavegym-payroll-spec.json", json.dumps({"repo": REPO, "commits": commits}))
    # The repository is the shell's to repair: it belongs to the workspace account (read-only to the desktop).
    owner = WORKSPACE_USER
    shas = json.loads(ctx.run(["python3", BUILDER, "/tmp/weavegym-payroll-spec.json"], user=owner).stdout)
    ctx.run(["rm", "-f", BUILDER, "/tmp/weavegym-payroll-spec.json"])
    traceback = ctx.run(["bash", "-c", f"cd {REPO} && python3 payroll.py 2>&1"], user=owner, check=False).stdout
    ctx.write_file(LOG, _history_log(plan, position, traceback), owner=owner, mode=0o644)

    rows = batches[0] + batches[1] + batches[2] + batches[3]
    ctx.make_private_dir()
    listing = " ".join(f"{sha[:7]} {c['date'][:10]} '{c['author'].split(' <')[0]}' '{c['subject']}'"
                       for sha, c in reversed(list(zip(shas, commits, strict=True))))
    ctx.launch_gui(f"{{as_user}} zenity --list --title='{DIALOG_TITLE}' --width=760 --height=480 "
                   "--text='Select the commit that broke the nightly payroll job, then press OK.' "
                   f"--column=Commit --column=Date --column=Author --column=Subject {listing} > {ANSWER}",
                   name="incident")
    window = ctx.wait_window(f"^{DIALOG_TITLE}$")
    culprit = shas[position]
    return Prepared(params={},
                    truth={"culprit": culprit, "tip": shas[-1], "row": len(shas) - 1 - position,
                           "file": culprit_file, "good": good, "bad": bad, "gross": _gross(rows),
                           "window": window.geometry})


def _history_log(plan: list[tuple[str, dict[str, str]]], position: int, traceback: str) -> str:
    """One entry per night after each commit day: totals while it worked, the real traceback once broken."""
    lines, sheet = [], ""
    for day, (_subject, files) in enumerate(plan):
        sheet = files.get("timesheet.csv", sheet)
        lines.append(f"=== nightly run 2026-11-{4 + day:02d} 02:00 ===")
        if day >= position:
            lines.append(traceback.rstrip("\n"))
            continue
        rows = [(n, float(h), float(r)) for n, h, r in (line.split(";") for line in sheet.splitlines()[1:])]
        gross = _gross(rows)
        lines.append(f"nightly payroll: {len(gross)} employees, total {sum(gross.values()):.2f}")
    return "\n".join(lines) + "\n"


def check_incident(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    answer = (probe.read_text(ANSWER) or "").strip()
    if not answer:
        return Verdict.failed("the incident report dialog was not confirmed with a commit")
    return Verdict.check(truth["culprit"].startswith(answer) and len(answer) >= 7,
                         f"incident names {answer[:40]!r}, the culprit is {truth['culprit'][:7]}")


def check_revert(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    head = head_sha(probe, REPO)
    if head is None or head == truth["tip"]:
        return Verdict.failed("no new commit on main")
    commit = read_commit(probe, REPO, head)
    if commit is None:
        return Verdict.failed(f"HEAD {head[:7]} is not a readable commit")
    reverts = f"This reverts commit {truth['culprit']}" in commit.message
    on_tip = commit.parents == (truth["tip"],)
    if reverts and on_tip:
        return Verdict.satisfied(f"HEAD {head[:7]} reverts {truth['culprit'][:7]} on top of the old tip")
    return Verdict.failed(f"HEAD {head[:7]}: reverts culprit={reverts}, parent is old tip {truth['tip'][:7]}={on_tip}")


def check_code(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(f"{REPO}/{truth['file']}") or ""
    fixed = truth["good"] in text and truth["bad"] not in text
    return Verdict.check(fixed, f"{truth['file']} has {truth['good']!r}: {truth['good'] in text}, still has "
                                f"{truth['bad']!r}: {truth['bad'] in text}")


def check_report(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(REPORT)
    if text is None:
        return Verdict.failed(f"{REPORT} was not produced")
    found: dict[str, float] = {}
    for line in text.splitlines()[1:]:
        name, _, value = line.partition(",")
        try:
            found[name.strip()] = float(value)
        except ValueError:
            continue
    expected: dict[str, float] = dict(truth["gross"])
    total = round(sum(expected.values()), 2)
    wrong = [n for n, g in expected.items() if abs(found.get(n, -1.0) - g) > 0.005]
    total_ok = abs(found.get("TOTAL", -1.0) - total) <= 0.005
    return Verdict.check(not wrong and total_ok,
                         f"{len(expected) - len(wrong)}/{len(expected)} employees right, TOTAL {found.get('TOTAL')} "
                         f"(expected {total:.2f})")


# The job's own program is the bisect test: it exits non-zero once a commit breaks it.
FIND_CULPRIT = ("cd ~/payroll && git bisect start HEAD $(git rev-list --max-parents=0 HEAD) >/dev/null && "
                "git bisect run sh -c 'python3 payroll.py >/dev/null 2>&1' | grep 'is the first bad commit'; "
                "git bisect reset >/dev/null 2>&1; echo NEWEST-FIRST; git log --format=%H")
FIRST_BAD = re.compile(r"\b([0-9a-f]{40}) is the first bad commit")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Bisect the history with the job itself as the test; the dialog lists the commits newest first, as git log
    does, so the culprit's row is its place in that list. Nothing about the culprit comes from the truth."""
    yield {"kind": "shell", "command": "cd ~/payroll && tail -n 12 logs/nightly.log && git log --oneline | head -20"}
    yield {"kind": "shell", "command": FIND_CULPRIT, "timeout": 180}
    terminal = (ctx.obs or {}).get("terminal", "")
    found = FIRST_BAD.search(terminal)
    history = re.findall(r"^[0-9a-f]{40}$", terminal.partition("NEWEST-FIRST")[2], flags=re.M)
    if found is None or found[1] not in history:  # e.g. a desktop terminal, which cannot write the repository
        yield {"kind": "fail", "reason": "git bisect named no culprit"}
        return
    culprit = found[1]
    yield {"kind": "shell", "command": f"git revert --no-edit {culprit[:7]} && ./run_nightly.sh && tail -n 2 "
                                       "logs/nightly.log && cat out/payroll.csv"}
    x, y, w, h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w // 2, "y": y + h - 90}  # blank space under the rows: focuses the list
    yield {"kind": "key", "keys": "Home"}
    for _ in range(history.index(culprit)):
        yield {"kind": "key", "keys": "Down"}
    yield {"kind": "key", "keys": "Return"}
    yield await_dialog_exit()
    yield {"kind": "done"}


TASK = Task(
    id="Weave-DevOps-2",
    title="Revert the commit that broke the nightly payroll job",
    instruction=(
        "The nightly payroll job in ~/payroll (a git repository; the job is ./run_nightly.sh, its log is "
        "logs/nightly.log) has been failing for a few nights. Find the commit that broke it and undo it with "
        "`git revert` (a new commit on main; do not rewrite history). Then run ./run_nightly.sh so that "
        "out/payroll.csv is produced again. Finally, in the open 'Incident report' dialog, select the commit that "
        "broke the job and press OK, then finish."),
    channels=Channels(
        gui="pick the culprit commit in the Incident report dialog",
        cli="read the log, search the history, git revert, rerun the job",
        why_both="the repair is git and shell work, while the incident can only be filed in the GUI dialog"),
    setup=setup,
    clauses=(
        Clause("incident_filed", "the Incident report dialog names the culprit commit", check_incident, weight=2.0,
               critical=True, cap=0.5),
        Clause("reverted", "HEAD is a git revert of the culprit on top of the old tip", check_revert),
        Clause("code_restored", "the broken line is back to its working form", check_code),
        Clause("report", "out/payroll.csv has every employee's gross pay and the right total", check_report),
    ),
    deliverables=(
        Deliverable(ANSWER, "gui", owner="root", description="the Incident report dialog's answer"),
        Deliverable(REPORT, "cli", description="out/payroll.csv from the rerun job"),
    ),
    oracle=oracle,
    withheld=("culprit", "tip", "row", "file", "good", "bad", "gross"),
    apps=("git", "gitk", "zenity", "python3"),
    max_steps=40,
    time_budget_s=900.0,
)
