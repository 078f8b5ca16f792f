"""Weave-Productivity-1: total the travel expenses from a CSV, approve them in a dialog, keep a screenshot.

The CSV needs the CLI (or a calculator the base image lacks); the approval
exists only in the GUI dialog, whose answer lands in a root-only file the
agent cannot write; the screenshot deliverable must be a frame the env really
captured, so a picture drawn with PIL scores 0.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.evaluators import Clause, ImageFromCapturedFrame, Probe, Verdict

CSV = f"{HOME}/expenses.csv"
TOTAL_FILE = f"{HOME}/travel_total.txt"
SCREENSHOT = f"{HOME}/approval.png"
ANSWER = f"{PRIVATE_DIR}/approval.out"
CATEGORIES = ("Travel", "Meals", "Office", "Software")
DIALOG_TITLE = "Expense approval"


def setup(ctx: SetupContext) -> Prepared:
    rows, travel_cents = [], 0
    for i in range(int(ctx.rng.integers(18, 30))):
        category = CATEGORIES[0] if i % 5 == 0 else CATEGORIES[int(ctx.rng.integers(len(CATEGORIES)))]
        cents = int(ctx.rng.integers(500, 40000))
        travel_cents += cents if category == "Travel" else 0
        rows.append(f"2026-11-{1 + i % 28:02d},{category},{cents // 100}.{cents % 100:02d}")
    ctx.write_file(CSV, "date,category,amount\n" + "\n".join(rows) + "\n")
    ctx.make_private_dir()
    ctx.launch_gui(
        f"{{as_user}} zenity --forms --title='{DIALOG_TITLE}' --text='Approve the travel expenses of this month' "
        f"--add-entry='Travel total' --add-entry='Approved by' > {ANSWER}", name="approval")
    window = ctx.wait_window(f"^{DIALOG_TITLE}$")
    approver = ("weave", "ops-lead", "finance")[ctx.seed % 3]
    return Prepared(params={"approver": approver},
                    truth={"travel_total": f"{travel_cents // 100}.{travel_cents % 100:02d}", "approver": approver,
                           "window": [window.x, window.y, window.width, window.height],
                           "screen": list(ctx.screen)})


def _answer(probe: Probe) -> list[str] | None:
    text = probe.read_text(ANSWER)
    return None if not text else text.rstrip("\n").split("|")


def check_dialog_total(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    fields = _answer(probe)
    if fields is None:
        return Verdict.failed("the approval dialog was not confirmed (no answer recorded)")
    return Verdict.check(_same_amount(fields[0], truth["travel_total"]),
                         f"dialog total {fields[0]!r}, expected {truth['travel_total']}")


def check_dialog_approver(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    fields = _answer(probe)
    if fields is None or len(fields) < 2:
        return Verdict.failed("the approval dialog was not confirmed")
    return Verdict.check(fields[1].strip() == truth["approver"],
                         f"approver {fields[1]!r}, expected {truth['approver']!r}")


def check_total_file(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(TOTAL_FILE)
    if text is None:
        return Verdict.failed(f"{TOTAL_FILE} does not exist")
    return Verdict.check(_same_amount(text.strip(), truth["travel_total"]),
                         f"{TOTAL_FILE} holds {text.strip()[:40]!r}, expected {truth['travel_total']}")


def check_screenshot(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    image = probe.image(SCREENSHOT)
    if image is None:
        return Verdict.failed(f"{SCREENSHOT} is missing or not an image")
    width, height = truth["screen"]
    if image.shape[:2] != (height, width):
        return Verdict.partial(f"{SCREENSHOT} is {image.shape[1]}x{image.shape[0]}, not the full {width}x{height} "
                               "screen")
    return Verdict.satisfied(f"{SCREENSHOT} is a {width}x{height} image")


def _same_amount(text: str, expected: str) -> bool:
    try:
        return abs(float(text.strip().replace(",", "")) - float(expected)) < 0.005
    except ValueError:
        return False


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    x, y, _w, _h = ctx.truth["window"]
    yield {"kind": "shell", "command": "awk -F, '$2 == \"Travel\" { s += $3 } END { printf \"%.2f\\n\", s }' "
                                       f"{CSV} | tee {TOTAL_FILE}"}
    total = ctx.truth["travel_total"]
    yield {"kind": "click", "x": x + 195, "y": y + 33}  # the "Travel total" entry
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "type", "text": total}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": ctx.params["approver"]}
    yield {"kind": "shell", "command": f"import -window root {SCREENSHOT}"}
    yield 'key("Tab")'
    yield 'key("Tab")'
    yield 'key("Return")'  # focus is on OK now
    yield "done()"


TASK = Task(
    id="Weave-Productivity-1",
    title="Approve the month's travel expenses",
    instruction=(
        "The file ~/expenses.csv lists this month's expenses (date,category,amount). "
        "1) Compute the sum of the Travel amounts and write it with two decimals (e.g. 123.45) to "
        "~/travel_total.txt. 2) In the open 'Expense approval' dialog, enter that sum as 'Travel total' and "
        "'{approver}' as 'Approved by'. 3) While the filled-in dialog is on screen, save a full-screen "
        "screenshot to ~/approval.png. 4) Confirm the dialog with OK, then finish."),
    channels=Channels(
        gui="fill in and confirm the approval dialog",
        cli="sum the CSV, write travel_total.txt, capture the screen to a PNG",
        why_both="the approval exists only as a GUI dialog, while the sum and the screenshot file need the shell"),
    setup=setup,
    clauses=(
        Clause("dialog_total", "the dialog was confirmed with the correct travel total", check_dialog_total,
               weight=2.0, critical=True, cap=0.5),
        Clause("dialog_approver", "the dialog names the requested approver", check_dialog_approver),
        Clause("total_file", "~/travel_total.txt holds the travel total", check_total_file),
        Clause("screenshot", "~/approval.png is a full-screen screenshot", check_screenshot),
    ),
    rules=(ImageFromCapturedFrame(SCREENSHOT),),
    oracle=oracle,
    apps=("zenity", "imagemagick", "awk"),
    max_steps=30,
    time_budget_s=600.0,
)
