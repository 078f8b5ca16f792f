"""Weave-Productivity-1: total the travel expenses from a CSV, approve them in a dialog, file the receipt.

The CSV needs the CLI (or a calculator the base image lacks); the approval
exists only in the GUI dialog, whose answer lands in a root-only file the
agent cannot write. Once approved, the dialog is followed by a receipt whose
reference exists only as pixels on the screen (it travels to the receipt
window through a pipe the workspace account cannot read), and the shell must
file that reference: the work goes CLI -> GUI -> CLI.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.dialogs import form_fields
from weavegym.evaluators import Clause, Probe, Verdict

CSV = f"{HOME}/expenses.csv"
TOTAL_FILE = f"{HOME}/travel_total.txt"
RECEIPT_FILE = f"{HOME}/approval_ref.txt"
ANSWER = f"{PRIVATE_DIR}/approval.out"
REFERENCE = f"{PRIVATE_DIR}/receipt.txt"  # root-only: piped into the receipt window, never on disk for the agent
CATEGORIES = ("Travel", "Meals", "Office", "Software")
DIALOG_TITLE = "Expense approval"
RECEIPT_TITLE = "Approval receipt"
REF_ALPHABET = "ACDEFHJKMNPRTUVWXY3479"  # no look-alikes (0/O, 1/I/L, 5/S, 8/B): it is read from pixels


def setup(ctx: SetupContext) -> Prepared:
    rows, travel_cents = [], 0
    for i in range(int(ctx.rng.integers(18, 30))):
        category = CATEGORIES[0] if i % 5 == 0 else CATEGORIES[int(ctx.rng.integers(len(CATEGORIES)))]
        cents = int(ctx.rng.integers(500, 40000))
        travel_cents += cents if category == "Travel" else 0
        rows.append(f"2026-11-{1 + i % 28:02d},{category},{cents // 100}.{cents % 100:02d}")
    ctx.write_file(CSV, "date,category,amount\n" + "\n".join(rows) + "\n")
    ctx.make_private_dir()
    reference = "R-" + "".join(REF_ALPHABET[int(i)] for i in ctx.rng.integers(0, len(REF_ALPHABET), 6))
    ctx.write_file(REFERENCE, f"Approved. Receipt reference: {reference}\n", owner="root", mode=0o600)
    # The receipt opens only after OK; `cat` runs as root and hands the text over a pipe.
    ctx.launch_gui(
        f"{{as_user}} zenity --forms --title='{DIALOG_TITLE}' --text='Approve the travel expenses of this month' "
        f"--add-entry='Travel total' --add-entry='Approved by' > {ANSWER} && cat {REFERENCE} | "
        f"{{as_user}} zenity --text-info --title='{RECEIPT_TITLE}' --width=420 --height=160", name="approval")
    window = ctx.wait_window(f"^{DIALOG_TITLE}$")
    approver = ("weave", "ops-lead", "finance", "travel-desk", "cfo-office")[int(ctx.rng.integers(0, 5))]
    return Prepared(params={"approver": approver},
                    truth={"travel_total": f"{travel_cents // 100}.{travel_cents % 100:02d}", "approver": approver,
                           "reference": reference, "window": window.geometry})


def check_dialog_total(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    fields = form_fields(probe, ANSWER)
    if fields is None:
        return Verdict.failed("the approval dialog was not confirmed (no answer recorded)")
    return Verdict.check(_same_amount(fields[0], truth["travel_total"]),
                         f"dialog total {fields[0]!r}, expected {truth['travel_total']}")


def check_dialog_approver(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    fields = form_fields(probe, ANSWER)
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


def check_receipt(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = probe.read_text(RECEIPT_FILE)
    if text is None:
        return Verdict.failed(f"{RECEIPT_FILE} does not exist")
    return Verdict.check(text.strip() == truth["reference"],
                         f"{RECEIPT_FILE} holds {text.strip()[:40]!r}, the receipt showed {truth['reference']!r}")


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
    yield 'key("Tab")'
    yield 'key("Tab")'
    yield 'key("Return")'  # focus is on OK now; the receipt window follows
    yield {"kind": "wait", "seconds": 2}
    # An agent reads the reference off the receipt window in its screenshot; the oracle knows it.
    yield {"kind": "shell", "command": f"echo {ctx.truth['reference']} > {RECEIPT_FILE}"}
    yield "done()"


TASK = Task(
    id="Weave-Productivity-1",
    title="Approve the month's travel expenses",
    instruction=(
        "The file ~/expenses.csv lists this month's expenses (date,category,amount). "
        "1) Compute the sum of the Travel amounts and write it with two decimals (e.g. 123.45) to "
        "~/travel_total.txt. 2) In the open 'Expense approval' dialog, enter that sum as 'Travel total' and "
        "'{approver}' as 'Approved by', and confirm it with OK. 3) The approval receipt that appears shows a "
        "reference such as R-ABC123: write just that reference to ~/approval_ref.txt, then finish."),
    channels=Channels(
        gui="fill in and confirm the approval dialog, read the receipt's reference",
        cli="sum the CSV into travel_total.txt; file the receipt's reference in approval_ref.txt",
        why_both="the approval exists only as a GUI dialog and the reference only on its receipt, while the sum "
                 "and both files must come from the shell"),
    setup=setup,
    clauses=(
        Clause("dialog_total", "the dialog was confirmed with the correct travel total", check_dialog_total,
               weight=2.0, critical=True, cap=0.5),
        Clause("dialog_approver", "the dialog names the requested approver", check_dialog_approver),
        Clause("total_file", "~/travel_total.txt holds the travel total", check_total_file),
        Clause("receipt_filed", "~/approval_ref.txt holds the receipt's reference", check_receipt),
    ),
    deliverables=(
        Deliverable(ANSWER, "gui", owner="root", description="the dialog's answer (captured by setup)"),
        Deliverable(TOTAL_FILE, "cli", description="~/travel_total.txt"),
        Deliverable(RECEIPT_FILE, "cli", description="~/approval_ref.txt"),
    ),
    oracle=oracle,
    apps=("zenity", "awk"),
    max_steps=30,
    time_budget_s=600.0,
)
