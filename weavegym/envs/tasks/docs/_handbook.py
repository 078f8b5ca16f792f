"""Weave-Docs-8's world (no TASK): the staff handbook, the policy register, the legal review's redlines, the Legal
Review window's layout and the oracle's reading of it and shell programs. Setup, the checker and the oracle share
it; the tests use it without a VM.

A paragraph is one line of the handbook (Markdown: ``## N. Title`` headings, paragraphs separated by blank lines),
so "section S, paragraph P" names one line and the expected handbook after each redline is exact.
"""

from __future__ import annotations

import hashlib
import re
import textwrap
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.dialogs import FOCUS_RING, focus_ring_shown, ring_colour_hex

TODAY = "2026-12-01"  # the date the register's rows are "in force" on (stated in the instruction)
NOTICE, MEAL, INSURER, DPO, DELETE = "notice", "meal", "insurer", "dpo", "delete"
TOPICS = {NOTICE: "notice period", MEAL: "meal allowance", INSURER: "health insurer", DPO: "data-protection officer"}
PLACEHOLDER = "[name and e-mail to follow]"

# ---- the Legal Review window's layout (no secret) --------------------------------------------------------------

TITLE, HEADING = "Legal Review", "LEGAL REVIEW"
SCALE, HEADING_AT = 2, (16, 12)
# Below the full desktop's top panel (xfwm4 keeps windows out of its 40 px strip, as the other full tasks do).
REVIEW_AT, REVIEW_SIZE = (830, 40), (450, 600)
MOUSEPAD_AT, MOUSEPAD_SIZE = (0, 40), (820, 640)
LINE_CHARS, LINE_H, MAX_LINES = 34, 22, 9
REDLINE_TEXT = (16, 90)  # first line of the redline's text, in the window
OPEN_BOX = (16, 44, 200, 34)  # "Open next redline"
TAG_BOX, SUBMIT_BOX = (16, 310, 200, 30), (230, 310, 150, 30)
STATUS_TEXT, STATUS_CHARS = (16, 356), 34
APPROVED_TEXT = (16, 400)  # one line per approved redline below it
TEXT_AT = (400, 400)  # a point inside Mousepad's text area (its window at MOUSEPAD_AT)


def layout() -> dict[str, Any]:
    return {"title": TITLE, "heading": HEADING, "heading_at": list(HEADING_AT), "scale": SCALE,
            "at": list(REVIEW_AT), "size": list(REVIEW_SIZE), "line_h": LINE_H, "redline_text": list(REDLINE_TEXT),
            "open": list(OPEN_BOX), "tag": list(TAG_BOX), "submit": list(SUBMIT_BOX),
            "status_text": list(STATUS_TEXT), "approved_text": list(APPROVED_TEXT), "ring": FOCUS_RING,
            "ring_colour": ring_colour_hex()}


def tag_focused(image: Any, at: Sequence[int]) -> bool:
    """Whether the tag entry shows its focus ring: the Legal Review has the keyboard, so a typed tag lands there
    and not in Mousepad (which takes ctrl+slash as select-all: a tag typed into it replaced the whole handbook)."""
    x, y, w, h = TAG_BOX
    return focus_ring_shown(image, (at[0] + x, at[1] + y, w, h))


def centre(at: Sequence[int], box: Sequence[int]) -> list[int]:
    return [int(at[0] + box[0] + box[2] // 2), int(at[1] + box[1] + box[3] // 2)]


# ---- text ------------------------------------------------------------------------------------------------------

def norm(text: str) -> str:
    """How handbook texts compare: NFC, runs of blanks inside a line collapsed, trailing blank lines dropped (an
    editor's trailing newline and a double space left by a deletion are no difference)."""
    lines = [" ".join(line.split()) for line in unicodedata.normalize("NFC", text).replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def digest(text: str) -> str:
    """What the Legal Review compares the saved handbook against for a stage (its normalised text's SHA-256)."""
    return hashlib.sha256(norm(text).encode("utf-8")).hexdigest()


COMPANIES = ("Brühl & Søn GmbH", "Café Lumière SARL", "Łódź Textil Sp. z o.o.", "Ørsted Möbel ApS",
             "Niño Verde S.L.", "Žiža Dizajn d.o.o.")
HR_NAMES = ("Ana Muñoz", "Jürgen Weiß", "Chloé Dubois", "Søren Ødegård", "Zofia Wójcik", "Tomáš Dvořák")
DPO_NAMES = ("Zoë Lefèvre", "Łucja Wróbel", "Ñuria Peña", "Håkon Æsøy", "Ülkü Öztürk", "Mélanie Brétigny",
             "Dagný Þórsdóttir", "Jiří Čermák")
INSURERS = ("Mutuelle Générale", "Caisse Hélvetique", "Société Mutualiste Équité", "Krankenkasse Süd",
            "Assurance Cœur d'Azur", "Sjúkrasjóður Íslands", "Prévoyance Ouvrière")
COLOURS = ("blue", "green", "north", "south", "west")
DELETIONS = (  # (the redline's keyword, the sentence to delete, a sentence elsewhere with the same keyword)
    ("PARKING", "Staff parking in the {colour} car park is free after 18:00.",
     "Bicycle parking is in the courtyard behind the café."),
    ("FAX", "Signed forms may also be sent by fax to extension {ext}.",
     "The fax machine on the second floor is kept for the archive."),
    ("SMOKING", "Smoking breaks are limited to ten minutes each.",
     "Smoking is not allowed anywhere inside the building."),
    ("RAFFLE", "The annual company car raffle takes place every {month}.",
     "Tickets for the summer raffle are sold at reception."),
)
MONTHS = ("March", "June", "September", "November")


def _email(name: str, domain: str) -> str:
    plain = unicodedata.normalize("NFKD", name.replace("ø", "o").replace("Ø", "O").replace("æ", "ae")
                                  .replace("Æ", "Ae").replace("ł", "l").replace("Ł", "L").replace("þ", "th")
                                  .replace("Þ", "Th").replace("ð", "d"))
    plain = "".join(c for c in plain if c.isascii()).lower()
    first, last = plain.split()[0], plain.split()[-1]
    return f"{first}.{last}@{domain}"


def _eur(cents: int) -> str:
    return f"{cents // 100},{cents % 100:02d} €"


def plan(rng: np.random.Generator) -> dict[str, Any]:
    """The handbook (its lines), the register's rows and the redlines, with the expected text after each."""
    company = str(rng.choice(COMPANIES))
    domain = re.sub(r"[^a-z]", "", unicodedata.normalize("NFKD", company.split()[0]).encode("ascii", "ignore")
                    .decode().lower()) + ".example"
    hr = str(rng.choice(HR_NAMES))
    dpos = [str(n) for n in rng.choice(DPO_NAMES, size=3, replace=False)]
    insurers = [str(n) for n in rng.choice(INSURERS, size=3, replace=False)]
    weeks = [int(w) for w in rng.choice(np.arange(2, 13), size=3, replace=False)]
    meals = [int(c) * 10 for c in rng.choice(np.arange(80, 190), size=3, replace=False)]
    deletion = DELETIONS[int(rng.integers(len(DELETIONS)))]
    colour, ext, month = str(rng.choice(COLOURS)), int(rng.integers(200, 899)), str(rng.choice(MONTHS))
    doomed = deletion[1].format(colour=colour, ext=ext, month=month)
    # Register rows: (topic, value, valid_from, valid_to); index 0 is the one in force, 1 expired, 2 future.
    dpo_values = [f"{n} <{_email(n, domain)}>" for n in dpos]
    rows = []
    for topic, values in (("notice period", [f"{w} weeks" for w in weeks]),
                          ("meal allowance", [_eur(c) for c in meals]), ("health insurer", insurers),
                          ("data-protection officer", dpo_values)):
        rows += [(topic, values[0], "2025-07-01", None), (topic, values[1], "2022-01-01", "2025-06-30"),
                 (topic, values[2], "2027-01-01", None)]
    deputy = str(rng.choice([n for n in DPO_NAMES if n not in dpos]))
    rows.append(("deputy data-protection officer", f"{deputy} <{_email(deputy, domain)}>", "2024-03-01", None))
    rows.append(("travel allowance", _eur(int(rng.integers(20, 60)) * 10), "2025-01-01", None))
    order = rng.permutation(len(rows))
    register = [rows[int(i)] for i in order]

    old_weeks = int(rng.choice([w for w in range(2, 13) if w not in weeks]))
    old_meal = int(rng.choice([c for c in range(800, 1900, 10) if c not in meals]))
    old_insurer = str(rng.choice([n for n in INSURERS if n not in insurers]))
    target = {  # the paragraph each redline edits, as it is before the review
        NOTICE: f"Either party may end the employment with a notice period of {old_weeks} weeks, given in writing "
                f"to {hr} in Human Resources.",
        MEAL: f"On every working day of more than six hours, staff receive a meal allowance of {_eur(old_meal)} "
              "with their salary.",
        INSURER: f"Supplementary health cover is provided by « {old_insurer} »; the company pays half of the "
                 "premium.",
        DPO: f"Questions about personal data go to the data-protection officer, {PLACEHOLDER}, who answers "
             "within one month.",
        DELETE: f"Working documents are kept in the shared archive. {doomed} Questions go to {hr}.",
    }
    sections = {  # title: paragraphs (the redline paragraphs are put in at random places)
        "Welcome": [f"This handbook describes how we work together at {company}, and it replaces every "
                    "earlier version.", "Where the handbook and your contract differ, your contract prevails."],
        "Working time": [f"The regular working week is {int(rng.integers(35, 41))} hours, Monday to Friday.",
                         f"A probation period of {old_weeks} weeks applies to every new contract.",
                         "Overtime needs the prior approval of your team lead."],
        "Pay and allowances": ["Salaries are paid on the last working day of the month.",
                               f"Travel costs are reimbursed against receipts; meals on business trips up to "
                               f"{_eur(old_meal + 500)} a day."],
        "Health and welfare": ["Our crèche takes children from six months to three years.",
                               "The company doctor holds consultations every Tuesday."],
        "Personal data": ["We process staff data only as far as the employment requires.",
                          "Personnel files are kept for ten years after the employment ends."],
        "Ending employment": ["Resignations must be signed.", "Unused holidays are paid out with the last salary."],
        "Facilities": [deletion[2], "The café on the ground floor is open from 8:00 to 16:00."],
        "Conduct": ["We treat colleagues, customers and suppliers with respect.",
                    f"Gifts worth more than {_eur(int(rng.integers(3, 9)) * 1000)} must be declared."],
    }
    home_of = {NOTICE: "Ending employment", MEAL: "Pay and allowances", INSURER: "Health and welfare",
               DPO: "Personal data", DELETE: str(rng.choice(["Welcome", "Conduct", "Working time"]))}
    for kind, title in home_of.items():
        paragraphs = sections[title]
        paragraphs.insert(int(rng.integers(0, len(paragraphs) + 1)), target[kind])
    titles = list(sections)
    titles = [titles[0], *[titles[1:][int(i)] for i in rng.permutation(len(titles) - 1)]]
    lines = [f"# Staff handbook of {company}", "", f"Issued by {hr}, Human Resources. Status: draft for legal "
             "review.", ""]
    where: dict[str, tuple[int, int, int]] = {}  # kind: (section, paragraph, line index)
    for number, title in enumerate(titles, 1):
        lines += [f"## {number}. {title}", ""]
        for p, paragraph in enumerate(sections[title], 1):
            for kind, text in target.items():
                if text == paragraph and home_of[kind] == title:
                    where[kind] = (number, p, len(lines))
            lines += [paragraph, ""]
    kinds = [DPO, *[str(k) for k in rng.choice([NOTICE, MEAL, INSURER, DELETE], size=3, replace=False)]]
    kinds = [kinds[int(i)] for i in rng.permutation(4)]
    values = {NOTICE: f"{weeks[0]} weeks", MEAL: _eur(meals[0]), INSURER: insurers[0], DPO: dpo_values[0]}
    redlines, stages, text = [], [], list(lines)
    for number, kind in enumerate(kinds, 1):
        section, paragraph, index = where[kind]
        before = text[index]
        after = edit(kind, before, values.get(kind, ""), deletion[0])
        text[index] = after
        redlines.append({"kind": kind, "section": section, "paragraph": paragraph, "line": index,
                         "keyword": deletion[0] if kind == DELETE else "", "before": before, "after": after,
                         "lines": redline_lines(number, len(kinds), kind, section, paragraph, deletion[0])})
        stages.append("\n".join(text) + "\n")
    return {"company": company, "register": register, "original": "\n".join(lines) + "\n", "redlines": redlines,
            "stages": stages, "expected": stages[-1], "values": values}


def sentences(paragraph: str) -> list[str]:
    return re.findall(r"[^.!?]+(?:[.!?](?=\s|$))", paragraph) or [paragraph]


def edit(kind: str, paragraph: str, value: str, keyword: str = "") -> str:
    """The paragraph with the redline applied (what a right edit leaves)."""
    if kind == NOTICE:
        return re.sub(r"notice period of \d+ weeks", f"notice period of {value}", paragraph)
    if kind == MEAL:
        return re.sub(r"\d+,\d\d €", value, paragraph, count=1)
    if kind == INSURER:
        return re.sub(r"« [^»]+ »", f"« {value} »", paragraph)
    if kind == DPO:
        return paragraph.replace(PLACEHOLDER, value)
    kept = [s for s in sentences(paragraph) if keyword.lower() not in s.lower()]
    return " ".join(s.strip() for s in kept)


INSTRUCTIONS = {
    NOTICE: "REPLACE THE NOTICE PERIOD WITH THE ONE OF THE COLLECTIVE AGREEMENT IN FORCE.",
    MEAL: "REPLACE THE MEAL ALLOWANCE WITH THE RATE IN FORCE.",
    INSURER: "REPLACE THE HEALTH INSURER'S NAME WITH THE CONTRACT PARTNER IN FORCE (KEEP THE QUOTES).",
    DPO: "INSERT THE DATA-PROTECTION OFFICER IN FORCE AS NAME <E-MAIL> IN PLACE OF THE PLACEHOLDER IN BRACKETS.",
    DELETE: "DELETE THE SENTENCE THAT MENTIONS '{keyword}'.",
}


def redline_lines(number: int, count: int, kind: str, section: int, paragraph: int, keyword: str) -> list[str]:
    """The redline as the Legal Review draws it (dot matrix, at most MAX_LINES lines of LINE_CHARS)."""
    body = INSTRUCTIONS[kind].format(keyword=keyword)
    return [f"REDLINE {number} OF {count}", f"SECTION {section}, PARAGRAPH {paragraph}", "",
            *textwrap.wrap(body, LINE_CHARS, break_on_hyphens=False)]


# ---- the oracle: reading the window, the shell's programs ------------------------------------------------------

PHRASES = {"NOTICE PERIOD": NOTICE, "MEAL ALLOWANCE": MEAL, "HEALTH INSURER": INSURER,
           "DATA-PROTECTION OFFICER": DPO, "DELETE THE SENTENCE": DELETE}
READ = re.compile(r"REDLINE (\d+) OF (\d+)")
WHERE = re.compile(r"SECTION (\d+), PARAGRAPH (\d+)")
APPROVED = re.compile(r"REDLINE (\d+) APPROVED CODE ([A-Z2-9]{6})")


def origin(image: np.ndarray, reach: int = 40) -> tuple[int, int] | None:
    """The Legal Review's top-left, where its heading reads back near where it was put; None until drawn."""
    return pixel_font.find_drawn(image, HEADING, REVIEW_AT, HEADING_AT, SCALE, reach=reach)


def read_redline(image: np.ndarray, at: Sequence[int]) -> list[str]:
    """The redline's lines as drawn (trailing blank lines cut; [] at once when its first line is blank)."""
    first = pixel_font.read_text(image, at[0] + REDLINE_TEXT[0], at[1] + REDLINE_TEXT[1], SCALE, LINE_CHARS)
    if not first:
        return []
    lines = [pixel_font.read_text(image, at[0] + REDLINE_TEXT[0], at[1] + REDLINE_TEXT[1] + i * LINE_H, SCALE,
                                  LINE_CHARS) for i in range(MAX_LINES)]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def read_status(image: np.ndarray, at: Sequence[int]) -> str:
    return pixel_font.read_text(image, at[0] + STATUS_TEXT[0], at[1] + STATUS_TEXT[1], SCALE, STATUS_CHARS)


def parse_redline(lines: Sequence[str]) -> dict[str, Any] | None:
    """{"number", "section", "paragraph", "kind", "keyword"} of a redline as read, or None."""
    head = READ.search(lines[0]) if lines else None
    where = WHERE.search(lines[1]) if len(lines) > 1 else None
    if head is None or where is None:
        return None
    body = " ".join(lines[2:])
    kind = next((k for phrase, k in PHRASES.items() if phrase in body), "")
    found = re.search(r"DELETE THE SENTENCE THAT MENTIONS '([A-Z]+)'", body)
    if not kind or (kind == DELETE and not found):
        return None
    return {"number": int(head.group(1)), "count": int(head.group(2)), "section": int(where.group(1)),
            "paragraph": int(where.group(2)), "kind": kind, "keyword": found.group(1) if found else ""}


def plan_program(redline: Mapping[str, Any], handbook: str, register: str) -> str:
    """Python for the shell: finds the redline's paragraph in the handbook, looks the value up in the register and
    prints 'PLAN {json}' with the text to search for (unique in the handbook) and what to put in its place."""
    return f"""import json, re, sqlite3
r = {dict(redline)!r}
text = open({handbook!r}, encoding="utf-8").read()
lines = text.split("\\n")
section, para, line = 0, 0, None
for i, l in enumerate(lines):
    if l.startswith("## "):
        section, para = int(l[3:].split(".")[0]), 0
    elif l.strip() and section:
        para += 1
        if (section, para) == (r["section"], r["paragraph"]):
            line = l
            break
topic = {TOPICS!r}.get(r["kind"])
value = ""
if topic:
    db = sqlite3.connect({register!r})
    value = db.execute("SELECT value FROM policy WHERE topic = ? AND valid_from <= ? AND (valid_to IS NULL OR "
                       "valid_to >= ?)", (topic, {TODAY!r}, {TODAY!r})).fetchone()[0]
pats = {{"notice": r"(?<=notice period of )\\d+ weeks", "meal": r"\\d+,\\d\\d €", "insurer": r"(?<=« )[^»]+(?= »)",
        "dpo": re.escape({PLACEHOLDER!r})}}
if r["kind"] == "delete":
    s = next(s for s in re.findall(r"[^.!?]+(?:[.!?](?=\\s|$))", line) if r["keyword"].lower() in s.lower())
    start, end, new = line.index(s), line.index(s) + len(s), ""
else:
    m = re.search(pats[r["kind"]], line)
    start, end, new = m.start(), m.end(), value
old = line[start:end]
a, b = start, end
while text.lower().count(line[a:b].lower()) > 1 and (a > 0 or b < len(line)):
    a, b = max(0, a - 4), min(len(line), b + 4)
find = line[a:b]
print("PLAN " + json.dumps({{"find": find, "replace": line[a:start] + new + line[end:b], "old": old, "new": new}}))
"""


PLAN_LINE = re.compile(r"^PLAN (\{.*\})\s*$", re.M)


def tag_command(handbook: str, before: str) -> str:
    """Shell: wait (bounded) until the saved handbook's SHA-256 is no longer ``before``, print 'TAG <8 hex>'."""
    return (f"for i in $(seq 60); do s=$(sha256sum < {handbook} | cut -c1-64); [ \"$s\" != '{before}' ] && break; "
            f"sleep 0.5; done; echo TAG $(echo $s | cut -c1-8) $s")
