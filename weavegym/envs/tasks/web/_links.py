"""What each seed of Weave-Web-6 varies, the site's pages as the checker reads them, and where the SEO Audit board
draws (no TASK).

Kept apart from the task module so that setup, the server's plan, the oracle and the tests share one plan of the
site and one geometry of the board: the fixture draws at these positions and the oracle reads there.

The site is the Riverside Arts Centre's after a migration: a home page, four section indexes and sixteen content
pages, each content page with two link boxes. Four links the audit found point at pre-migration paths
(/pages/p123.php) that now answer 404 or bounce in a redirect loop; two more dead links elsewhere are not the
audit's findings (left alone). ~/migration.db maps old paths to new ones, but for each seed at least one finding's entry
is right (its target is then reachable only through that link: an orphan until it is fixed), one points at the
wrong page (a sibling with another title, or a path that does not exist) and one is missing. The right target of
a link is always the live page (200, no redirect) whose title is the link's text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from html.parser import HTMLParser
from typing import Any

import numpy as np

from weavegym.envs.tasks import pixel_font

SITE_NAME = "Riverside Arts Centre"
SECTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "visit": ("Visit", ("Opening Hours", "Getting Here", "Parking", "Accessibility", "Group Visits", "Gift Shop",
                        "Cafe Menu")),
    "events": ("Events", ("Summer Concerts", "Film Nights", "Poetry Evenings", "Family Workshops", "Jazz Brunch",
                          "Open Studios", "Winter Fair")),
    "learn": ("Learn", ("Pottery Classes", "Life Drawing", "Printmaking", "Photography Course", "Kids Art Club",
                        "Weaving Circle", "Glass Blowing")),
    "about": ("About", ("Our History", "The Team", "Volunteering", "Press Room", "Contact Us", "Annual Report",
                        "Job Openings")),
}
BOX_NAMES = ("See Also", "Plan Your Visit", "Coming Up", "More To Explore", "Get Involved", "Related Pages",
             "Popular Now", "Also On Site", "Before You Go", "Quick Links")
PER_SECTION, N_FINDINGS, N_DECOYS = 4, 4, 2
DEAD, LOOP = "dead", "loop"
RIGHT, WRONG, MISSING = "map", "wrong", "missing"  # what ~/migration.db says about a finding's old path
SCHEMA = "CREATE TABLE moves (old_path TEXT NOT NULL, new_path TEXT NOT NULL, moved_on TEXT NOT NULL);"

# ---- the SEO Audit board's geometry (pixels inside its window) -------------------------------------------------

SCALE, HEADING_AT = 2, (16, 12)
BOARD_TITLE, BOARD_HEADING = "SEO Audit", "SEO AUDIT - LINKS"
BOARD_SIZE, BOARD_AT = (480, 560), (0, 0)
START_BUTTON, VERIFY_BUTTON = (16, 48, 150, 34), (180, 48, 150, 34)  # x, y, width, height in the window
PAGE_TEXT, LINE_H, LINE_CHARS, MAX_LINES = (24, 104), 26, 36, 16
BROWSER_AT, BROWSER_SIZE = (492, 0), (780, 620)  # beside the board


def board_layout() -> dict[str, Any]:
    """Where the board puts everything; boxes are [x, y, width, height] in the window."""
    return {"title": BOARD_TITLE, "heading": BOARD_HEADING, "heading_at": list(HEADING_AT), "scale": SCALE,
            "size": list(BOARD_SIZE), "at": list(BOARD_AT), "start": list(START_BUTTON),
            "verify": list(VERIFY_BUTTON), "page_text": list(PAGE_TEXT), "line_h": LINE_H,
            "max_lines": MAX_LINES}


def button_centre(origin: Sequence[int], button: Sequence[int]) -> list[int]:
    return [origin[0] + button[0] + button[2] // 2, origin[1] + button[1] + button[3] // 2]


# ---- what each seed varies --------------------------------------------------------------------------------------

def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def plan(rng: np.random.Generator) -> dict[str, Any]:
    """One seed's site: pages (path -> title, boxes), redirect loops, the migration map, findings and decoys."""
    content: list[dict[str, Any]] = []
    unused: list[str] = []
    for section, (_name, titles) in SECTIONS.items():
        order = [titles[int(i)] for i in rng.permutation(len(titles))]
        for title in order[:PER_SECTION]:
            content.append({"section": section, "title": title, "path": f"/{section}/{slug(title)}/"})
        unused.extend(order[PER_SECTION:])
    numbers = [int(n) for n in rng.choice(np.arange(100, 1000), len(content) + N_DECOYS, replace=False)]
    for page, number in zip(content, numbers, strict=False):
        page["old"] = f"/pages/p{number}.php"
    order = [int(i) for i in rng.permutation(len(content))]
    targets = [content[i] for i in order[:N_FINDINGS]]
    hosts = [content[i] for i in order[N_FINDINGS:2 * N_FINDINGS]]  # the pages that carry a finding's bad link
    decoy_hosts = [content[i] for i in order[2 * N_FINDINGS:2 * N_FINDINGS + N_DECOYS]]
    kinds = [RIGHT, WRONG, MISSING, [RIGHT, WRONG, MISSING][int(rng.integers(3))]]  # every kind, one twice
    kinds = [kinds[int(i)] for i in rng.permutation(N_FINDINGS)]
    orphans = {t["path"] for t, kind in zip(targets, kinds, strict=True) if kind == RIGHT}
    linkable = [p for p in content if p["path"] not in orphans]

    pages: dict[str, dict[str, Any]] = {}
    for page in content:
        names = [BOX_NAMES[int(i)] for i in rng.choice(len(BOX_NAMES), 2, replace=False)]
        others = [p for p in linkable if p["path"] != page["path"]]
        boxes = []
        for name in names:
            picks = rng.choice(len(others), int(rng.integers(3, 5)), replace=False)
            boxes.append([name, [[others[int(i)]["path"], others[int(i)]["title"]] for i in picks]])
        pages[page["path"]] = {"title": page["title"], "boxes": boxes}
    findings = []
    for target, host, kind in zip(targets, hosts, kinds, strict=True):
        box = int(rng.integers(2))
        links = [link for link in pages[host["path"]]["boxes"][box][1] if link[1] != target["title"]]
        index = int(rng.integers(len(links) + 1))
        links.insert(index, [target["old"], target["title"]])
        pages[host["path"]]["boxes"][box][1] = links
        findings.append({"page": host["path"], "page_title": host["title"],
                         "box": pages[host["path"]]["boxes"][box][0], "index": index + 1, "old": target["old"],
                         "target": target["path"], "title": target["title"], "kind": kind,
                         "symptom": DEAD if rng.random() < 0.5 else LOOP})
    decoys = []
    for host, number, title in zip(decoy_hosts, numbers[len(content):], rng.permutation(unused)[:N_DECOYS],
                                   strict=True):
        box = int(rng.integers(2))
        old = f"/pages/p{number}.php"
        pages[host["path"]]["boxes"][box][1].append([old, str(title)])
        decoys.append({"page": host["path"], "old": old})
    for section, (name, _titles) in SECTIONS.items():
        listed = [[p["path"], p["title"]] for p in linkable if p["section"] == section]
        pages[f"/{section}/"] = {"title": name, "boxes": [["In This Section", listed]]}
    pages["/"] = {"title": SITE_NAME, "boxes": [["Sections", [[f"/{s}/", n] for s, (n, _t) in SECTIONS.items()]]]}
    loops = {}
    for f in findings:
        if f["symptom"] == LOOP:
            middle = f["target"].rstrip("/")  # the migration's bad rule: /x/y -> the old page -> /x/y ...
            loops[f["old"]], loops[middle] = middle, f["old"]
    moves = []
    by_old = {f["old"]: f for f in findings}
    for page in content:
        finding = by_old.get(page["old"])
        new = page["path"]
        if finding is not None and finding["kind"] == MISSING:
            continue
        if finding is not None and finding["kind"] == WRONG:
            siblings = [p for p in linkable if p["section"] == page["section"] and p["path"] != page["path"]]
            new = (siblings[int(rng.integers(len(siblings)))]["path"] if rng.random() < 0.6 and siblings
                   else page["path"].rstrip("/") + "-2025/")
        moves.append((page["old"], new, f"2026-{int(rng.integers(9, 12)):02d}-{int(rng.integers(1, 29)):02d}"))
    moves = [moves[int(i)] for i in rng.permutation(len(moves))]
    return {"pages": pages, "loops": loops, "findings": findings, "decoys": decoys, "moves": moves,
            "nav": [["/", "Home"]] + [[f"/{s}/", n] for s, (n, _t) in SECTIONS.items()]}


def fixed_pages(p: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The pages as they are once every finding is fixed (and nothing else changed)."""
    pages = {path: {"title": page["title"], "boxes": [[name, [list(link) for link in links]]
                                                     for name, links in page["boxes"]]}
             for path, page in p["pages"].items()}
    for f in p["findings"]:
        box = next(links for name, links in pages[f["page"]]["boxes"] if name == f["box"])
        box[f["index"] - 1][0] = f["target"]
    return pages


def reachable(pages: Mapping[str, Mapping[str, Any]], nav: Sequence[Sequence[str]]) -> list[str]:
    """Every page path reached from / by following the pages' links (nav and boxes) that lead to a page (200)."""
    seen, todo = {"/"}, ["/"]
    while todo:
        page = pages[todo.pop()]
        for href, _text in [*nav, *(link for _name, links in page["boxes"] for link in links)]:
            if href in pages and href not in seen:
                seen.add(href)
                todo.append(href)
    return sorted(seen)


def symptom_line(finding: Mapping[str, Any]) -> str:
    if finding["symptom"] == DEAD:
        return f"LINK {finding['index']} IS DEAD (404)"
    return f"LINK {finding['index']} IS IN A REDIRECT LOOP"


def board_findings(p: Mapping[str, Any]) -> list[list[str]]:
    """What the board draws per finding (the fixture adds the count and the status lines)."""
    return [[f"PAGE: {f['page_title'].upper()}", f"BOX: {f['box'].upper()}", symptom_line(f)]
            for f in p["findings"]]


def server_plan(p: Mapping[str, Any], desktop: str) -> dict[str, Any]:
    """What the CMS server gets on stdin: the pages, loops, nav, and per finding where its link must point."""
    return {"pages": p["pages"], "loops": p["loops"], "nav": p["nav"], "desktop": desktop,
            "findings": [{"page": f["page"], "box": f["box"], "index": f["index"], "target": f["target"]}
                         for f in p["findings"]]}


# ---- the served pages, as the checker reads them ---------------------------------------------------------------

class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.title, self.boxes = "", []  # boxes: [name, [[href, text], ...]]
        self._in: str = ""
        self._href: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("title", "h2"):
            self._in, self._text = tag, ""
        elif tag == "section":
            self.boxes.append(["", []])
        elif tag == "a" and self.boxes:
            self._href, self._text = dict(attrs).get("href") or "", ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._in == "title":
            self.title, self._in = self._text.strip(), ""
        elif tag == "h2" and self._in == "h2" and self.boxes:
            self.boxes[-1][0], self._in = self._text.strip(), ""
        elif tag == "a" and self._href is not None and self.boxes:
            self.boxes[-1][1].append([self._href, self._text.strip()])
            self._href = None

    def handle_data(self, data: str) -> None:
        self._text += data


def parse_page(html: str) -> dict[str, Any]:
    """{"title", "boxes": [[name, [[href, text], ...]], ...]} of a served page (links outside boxes left out)."""
    parser = _PageParser()
    parser.feed(html)
    return {"title": parser.title, "boxes": parser.boxes}


# ---- reading the board off the screen (the oracle's eyes; setup's readiness check) ----------------------------

def origin(image: np.ndarray, window: Sequence[int], reach: int = 40) -> tuple[int, int] | None:
    """The board's top-left on screen where its heading reads back near ``window`` (None while it is not drawn)."""
    return pixel_font.find_drawn(image, BOARD_HEADING, window[:2], HEADING_AT, SCALE, reach=reach)


def read_board(image: np.ndarray, at: Sequence[int]) -> list[str]:
    """The board's text lines as drawn (trailing blank lines cut) on the board at ``at``."""
    lines = [pixel_font.read_text(image, at[0] + PAGE_TEXT[0], at[1] + PAGE_TEXT[1] + i * LINE_H, SCALE, LINE_CHARS)
             for i in range(MAX_LINES)]
    while lines and not lines[-1]:
        lines.pop()
    return lines


FINDING_HEAD = re.compile(r"^FINDING (\d+) OF (\d+)$")
TICKET_LINE = re.compile(r"^TICKET (\d+): ([A-Z2-9]{6})$")


def current_finding(lines: Sequence[str]) -> dict[str, Any] | None:
    """{"number", "of", "page", "box", "index", "symptom"} of the finding the board shows, None if none."""
    if len(lines) < 4:
        return None
    head = FINDING_HEAD.match(lines[0])
    link = re.match(r"^LINK (\d+) IS (DEAD \(404\)|IN A REDIRECT LOOP)$", lines[3])
    if not head or not lines[1].startswith("PAGE: ") or not lines[2].startswith("BOX: ") or not link:
        return None
    return {"number": int(head.group(1)), "of": int(head.group(2)), "page": lines[1][6:], "box": lines[2][5:],
            "index": int(link.group(1)), "symptom": DEAD if link.group(2).startswith("DEAD") else LOOP}


def tickets(lines: Sequence[str]) -> dict[int, str]:
    """{finding number: ticket code} of the ticket lines the board shows."""
    return {int(m.group(1)): m.group(2) for m in (TICKET_LINE.match(line) for line in lines) if m}
