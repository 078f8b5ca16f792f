"""What each seed of Weave-Productivity-8 varies, and where its Mailroom Scanner draws (no TASK).

Kept apart from the task module so that setup, the oracle and the tests share one plan of the morning's post
(the scans with their bytes, the letters as the scanner prints them, the CRM's customers and accounts with their
traps, the post room's folders) and one geometry of the scanner: the fixture draws at these positions and the
oracle reads and clicks there.

The traps, every seed: one letter's reference is printed with a letter O for a zero (or I for a one), which the
CRM's rules table says to read as the digit; one letter comes from a closed customer whose successor takes the
post; every sender has a near namesake in the CRM with another account, so a look-up by name goes wrong; and the
client folders of some letters do not exist yet.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.errors import TaskError
from weavegym.envs.tasks import pixel_font

DEPARTMENTS = ("billing", "claims", "legal", "sales", "support")
# (the sender, its near namesake): both are customers, with different accounts.
COMPANIES = (
    ("Northwind Trading Ltd", "Northwind Traders Ltd"), ("Harbour View Hotels", "Harbourview Hotel Group"),
    ("Bright Star Logistics", "Brightstar Logistik GmbH"), ("Kestrel Foods", "Kestrel Food Services"),
    ("Oakridge Dental", "Oak Ridge Dental Care"), ("Meridian Insurance Brokers", "Meridian Insure Ltd"),
    ("Silverline Plumbing", "Silver Line Plumbers"), ("Blue Harbor Marine", "Blue Harbour Marine Ltd"),
    ("Granite Peak Builders", "Granite Peaks Building"), ("Willow Finch Bakery", "Willow and Finch Bakeries"),
    ("Redwood Analytics", "Red Wood Analytica"), ("Copperfield Printing", "Copperfields Print Shop"),
)
# Companies that took over a closed customer's business (the successor of a closed account).
SUCCESSORS = ("Atlas Holdings", "Vantage Group", "Pinecrest Partners", "Lumen Ventures")
MANAGERS = ("Priya Raman", "Jonas Berg", "Maria Costa", "Tom Okafor", "Elena Ruiz", "Sam Whitfield",
            "Aiko Tanaka", "Lena Vogel", "Omar Haddad", "Grace Lindqvist", "Ravi Menon", "Chloe Martin")
SUBJECTS = ("WATER DAMAGE CLAIM", "INVOICE QUERY", "CHANGE OF ADDRESS", "CONTRACT RENEWAL", "LATE DELIVERY",
            "PAYMENT REMINDER", "COURT SUMMONS", "PRICE REQUEST", "CANCELLATION NOTICE", "WARRANTY CLAIM",
            "CREDIT NOTE REQUEST", "SERVICE COMPLAINT", "DATA ACCESS REQUEST", "QUOTE FOR REPAIRS")
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
PREFIX_LETTERS = "ABCDEFGHJKLMNPRSTUVWXYZ"  # no I, O or Q: only the digits can be misprinted
N_LETTERS = 6
RULES = ("A customer reference is two capital letters and five digits. Scans misprint the digit 0 as the letter O "
         "and the digit 1 as the letter I: in the five digits, read O as 0 and I as 1.",
         "Post for a closed customer (status 'closed') goes to its successor (customers.successor): file it under "
         "the successor's reference, account, department, client folder and account manager.",
         "Identify the customer by reference, never by name: several customers have similar names.")


# ---- the scanner window's geometry (pixels inside the window) -------------------------------------------------

TITLE, HEADING = "Mailroom Scanner", "MAILROOM SCANNER"
SCALE, HEADING_AT = 2, (16, 10)
SCANNER_AT, SCANNER_SIZE = (716, 40), (556, 470)
THUNAR_AT, THUNAR_SIZE = (0, 40), (700, 640)
SCAN_BUTTON = (16, 36, 220, 32)
PAPER = (16, 80, 524, 200)
LETTER_TEXT, LINE_H, LETTER_LINES, LINE_CHARS = (28, 92), 30, 6, 40
ENTRY_LABEL, ENTRY, CONFIRM = (16, 290), (16, 316, 524, 32), (16, 358, 220, 32)
STATUS, STATUS_TEXT, STATUS_CHARS = (16, 404, 524, 44), (24, 419), 40


def layout() -> dict[str, Any]:
    """Where the scanner puts everything; boxes are [x, y, width, height] in the window."""
    return {"title": TITLE, "heading": HEADING, "heading_at": list(HEADING_AT), "scale": SCALE,
            "at": list(SCANNER_AT), "size": list(SCANNER_SIZE), "scan": list(SCAN_BUTTON), "paper": list(PAPER),
            "letter_text": list(LETTER_TEXT), "line_h": LINE_H, "entry_label": list(ENTRY_LABEL),
            "entry": list(ENTRY), "confirm": list(CONFIRM), "status": list(STATUS), "status_text": list(STATUS_TEXT)}


def centre(origin: Sequence[int], box: Sequence[int]) -> list[int]:
    return [origin[0] + box[0] + box[2] // 2, origin[1] + box[1] + box[3] // 2]


def origin(image: Any, near: Sequence[int], reach: int = 40) -> tuple[int, int] | None:
    """The scanner's top-left on screen, where its heading reads back near ``near``; None while not drawn."""
    return pixel_font.find_drawn(image, HEADING, near, HEADING_AT, SCALE, reach=reach)


def read_letter(image: Any, at: Sequence[int]) -> list[str]:
    """The letter pane's lines as drawn (trailing blank lines cut)."""
    lines = [pixel_font.read_text(image, at[0] + LETTER_TEXT[0], at[1] + LETTER_TEXT[1] + i * LINE_H, SCALE,
                                  LINE_CHARS) for i in range(LETTER_LINES)]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def read_status(image: Any, at: Sequence[int]) -> str:
    return pixel_font.read_text(image, at[0] + STATUS_TEXT[0], at[1] + STATUS_TEXT[1], SCALE, STATUS_CHARS)


# ---- what each seed varies ---------------------------------------------------------------------------------------

def slug(text: str) -> str:
    """A folder or subject slug: lower case, words joined by '-'."""
    return "-".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def filing_name(date: str, ref: str, subject: str) -> str:
    return f"{date}_{ref}_{slug(subject)}.pdf"


def _ref(rng: np.random.Generator, taken: set[str], misprintable: bool = False) -> str:
    while True:
        digits = [str(int(d)) for d in rng.integers(0, 10, size=5)]
        if misprintable and not ({"0", "1"} & set(digits[1:])):
            digits[int(rng.integers(1, 5))] = str(int(rng.integers(0, 2)))
        ref = "".join(str(rng.choice(list(PREFIX_LETTERS))) for _ in range(2)) + "".join(digits)
        if ref not in taken:
            taken.add(ref)
            return ref


def misprint(ref: str, rng: np.random.Generator) -> str:
    """The reference as the scan prints it: one 0 or 1 among the last four digits as O or I."""
    spots = [i for i in range(3, 7) if ref[i] in "01"]
    i = int(rng.choice(spots))
    return ref[:i] + ("O" if ref[i] == "0" else "I") + ref[i + 1:]


def _scan_bytes(rng: np.random.Generator) -> bytes:
    body = rng.integers(0, 256, size=int(rng.integers(1500, 4000)), dtype=np.uint8).tobytes()
    return b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + body + b"\n%%EOF\n"


def plan(rng: np.random.Generator) -> dict[str, Any]:
    """One seed's morning post: scans, letters, the CRM (customers, accounts) and the post room's folders."""
    refs: set[str] = set()
    managers = [str(m) for m in rng.permutation(MANAGERS)]
    pairs = [COMPANIES[int(i)] for i in rng.choice(len(COMPANIES), N_LETTERS + 2, replace=False)]
    accounts: list[dict[str, Any]] = []

    def account(name: str) -> int:
        number = 4100 + len(accounts) * 7 + int(rng.integers(0, 7))
        folder = slug(name.removesuffix(" Ltd").removesuffix(" GmbH"))
        accounts.append({"account_id": number, "client_folder": folder, "department": str(rng.choice(DEPARTMENTS)),
                         "manager": managers[len(accounts) % len(managers)]})
        return number

    customers: list[dict[str, Any]] = []
    misprinted_at, closed_at = (int(i) for i in rng.choice(N_LETTERS, 2, replace=False))
    letters = []
    for index, (sender, namesake) in enumerate(pairs):
        ref = _ref(rng, refs, misprintable=index == misprinted_at)
        customer = {"ref": ref, "name": sender, "status": "active", "successor": None, "account_id": account(sender)}
        customers.append(customer)
        twin = {"ref": _ref(rng, refs), "name": namesake, "status": "active", "successor": None,
                "account_id": account(namesake)}
        customers.append(twin)
        if index >= N_LETTERS:
            continue  # two more pairs: customers who sent nothing today
        resolved = customer
        if index == closed_at:
            heir = str(SUCCESSORS[int(rng.integers(len(SUCCESSORS)))])
            resolved = {"ref": _ref(rng, refs), "name": heir, "status": "active", "successor": None,
                        "account_id": account(heir)}
            customers.append(resolved)
            customer.update(status="closed", successor=resolved["ref"])
        letters.append({"sender": sender.upper(), "printed_ref": misprint(ref, rng) if index == misprinted_at else ref,
                        "customer_ref": ref, "ref": resolved["ref"], "account_id": resolved["account_id"]})
    by_id = {a["account_id"]: a for a in accounts}
    subjects = [str(s) for s in rng.choice(SUBJECTS, N_LETTERS, replace=False)]
    scan_numbers = sorted(int(n) for n in rng.choice(np.arange(1, 400), N_LETTERS, replace=False))
    order = [int(i) for i in rng.permutation(N_LETTERS)]
    existing: set[tuple[str, str]] = set()
    hashes: set[str] = set()
    for index, letter in enumerate(letters):
        acc = by_id[letter["account_id"]]
        month, day = int(rng.integers(1, 13)), int(rng.integers(1, 29))
        data = _scan_bytes(rng)
        while hashlib.sha256(data).hexdigest()[:8] in hashes:
            data = _scan_bytes(rng)
        sha = hashlib.sha256(data).hexdigest()
        hashes.add(sha[:8])
        letter.update(number=index + 1, subject=subjects[index], date=f"2026-{month:02d}-{day:02d}",
                      printed_date=f"{day} {MONTHS[month - 1]} 2026", department=acc["department"],
                      client_folder=acc["client_folder"], manager=acc["manager"], sha256=sha, data=data,
                      scan=f"scan-{scan_numbers[order[index]]:04d}.pdf")
        letter["name"] = filing_name(letter["date"], letter["ref"], letter["subject"])
        letter["path"] = f"{acc['department']}/{acc['client_folder']}/{letter['name']}"
        letter["lines"] = [f"LETTER {index + 1} OF {N_LETTERS}", f"SCAN {sha[:8].upper()}", f"FROM {letter['sender']}",
                           f"REF {letter['printed_ref']}", f"DATED {letter['printed_date']}",
                           f"RE {letter['subject']}"]
    # Some client folders exist already (with older post), some must be made; namesakes' folders exist too.
    needed = sorted({(x["department"], x["client_folder"]) for x in letters})
    missing = {needed[int(i)] for i in rng.choice(len(needed), max(2, len(needed) // 2), replace=False)}
    for c in customers:
        acc = by_id[c["account_id"]]
        key = (acc["department"], acc["client_folder"])
        if key not in missing:
            existing.add(key)
    old_post = []
    for department, folder in sorted(existing):
        owner = next(c for c in customers if by_id[c["account_id"]]["client_folder"] == folder)
        month, day = int(rng.integers(1, 13)), int(rng.integers(1, 29))
        name = filing_name(f"2025-{month:02d}-{day:02d}", owner["ref"], str(rng.choice(SUBJECTS)))
        old_post.append({"path": f"{department}/{folder}/{name}", "data": _scan_bytes(rng)})
    for letter in letters:
        if any(not pixel_font.GLYPHS.get(ch) and ch != " " for line in letter["lines"] for ch in line) or \
                any(len(line) > LINE_CHARS for line in letter["lines"]):
            raise TaskError(f"Weave-Productivity-8: letter {letter['number']} does not fit the scanner")
    return {"letters": letters, "customers": customers, "accounts": accounts, "folders": sorted(existing),
            "missing": sorted(missing), "old_post": old_post}


# ---- the oracle's reading of a letter and its shell programs ---------------------------------------------------------

def parse_letter(lines: Sequence[str]) -> dict[str, str] | None:
    """{"number", "count", "hash", "sender", "ref", "date", "subject"} of a letter's drawn lines, None if unreadable."""
    if len(lines) < 6 or "?" in "".join(lines):
        return None
    head = lines[0].split()
    if len(head) != 4 or head[0] != "LETTER" or not lines[1].startswith("SCAN ") or not lines[3].startswith("REF "):
        return None
    try:
        day, month, year = lines[4].removeprefix("DATED ").split()
        date = f"{int(year):04d}-{MONTHS.index(month) + 1:02d}-{int(day):02d}"
    except ValueError:
        return None
    return {"number": head[1], "count": head[3], "hash": lines[1].removeprefix("SCAN ").lower(),
            "sender": lines[2].removeprefix("FROM "), "ref": lines[3].removeprefix("REF "), "date": date,
            "subject": lines[5].removeprefix("RE ")}


def lookup_program(letter: Mapping[str, str]) -> str:
    """Python for the shell: the scan in the inbox by its hash, the customer by its reference (misprints read as
    digits, closed customers followed to their successor), the account; one ROUTE line and the scan's place."""
    return f"""import glob, hashlib, os, sqlite3
home = os.path.expanduser("~")
printed = {letter['ref']!r}
ref = printed[:2] + printed[2:].replace("O", "0").replace("I", "1")
db = sqlite3.connect(home + "/crm.db")
row = db.execute("SELECT ref, status, successor, account_id FROM customers WHERE ref = ?", (ref,)).fetchone()
while row is not None and row[1] == "closed":
    row = db.execute("SELECT ref, status, successor, account_id FROM customers WHERE ref = ?", (row[2],)).fetchone()
folder, dept, manager = db.execute("SELECT client_folder, department, manager FROM accounts WHERE account_id = ?",
                                   (row[3],)).fetchone()
scans = [p for p in sorted(glob.glob(home + "/postroom/inbox/*"))
         if hashlib.sha256(open(p, "rb").read()).hexdigest().startswith({letter['hash']!r})]
sha = hashlib.sha256(open(scans[0], "rb").read()).hexdigest()
print("ROUTE|" + "|".join([sha, row[0], dept, folder, manager]))
print("AT|" + os.path.relpath(scans[0], home + "/postroom"))
print("DIR|" + ("yes" if os.path.isdir(f"{{home}}/postroom/{{dept}}/{{folder}}") else "no"))
"""


def locate_command(sha: str, department: str, folder: str) -> str:
    """Shell: where the scan with hash ``sha`` is now under ~/postroom, whether its client folder exists, and any
    folder of that name made elsewhere (a new folder made before Thunar had shown the department)."""
    return (f"cd ~/postroom && find . -type f -exec sha256sum {{}} + | awk '$1 == \"{sha}\" "
            "{sub(/^\\.\\//, \"\", $2); print \"AT|\" $2}'; "
            f"if [ -d {department}/{folder} ]; then echo DIR\\|yes; else echo DIR\\|no; fi; "
            f"find . -mindepth 2 -type d -name {folder} ! -path ./{department}/{folder} | sed 's,^\\./,STRAY|,'")


def parse_tagged(terminal: str) -> dict[str, list[str]]:
    """{tag: fields} of the tagged lines (ROUTE, AT, DIR, STRAY) a lookup or locate printed; the last of each."""
    rows: dict[str, list[str]] = {}
    for line in terminal.replace("\r", "").split("\n"):
        tag, _sep, rest = line.strip().partition("|")
        if tag in ("ROUTE", "AT", "DIR", "STRAY") and _sep:
            rows[tag] = rest.split("|")
    return rows
