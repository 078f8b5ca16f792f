"""Weave-Web-5: localise a shop's product pages for four new markets, from a reviewer's marks through the
translation memory and price list to the CMS in Firefox, then publish a release manifest.

Three apps, data flowing both ways between the channels. The Review Board (a Tk app, the desktop account's) shows
one page per market after a click, in dot-matrix pixels (pixel_font, fed from a root-only file that setup deletes
once drawn): every product marked OK or with what is wrong with its title or price there. ~/catalog.db (SQLite,
the workspace account's alone) holds the approved titles per product and locale in UTF-8 (CJK, accented European,
Arabic or Hebrew) beside older approved ones they superseded and newer drafts, the base prices, the markets'
price steps and endings, and dated exchange rates. The product editor of the shop's CMS (the local portal in
Firefox, see _portal) takes each marked product's title (typed: non-ASCII through the agent's `type`) and price
for that market; the portal records every save with the account that owns the client's socket, and the page
draws the CMS revision number on its receipt, again as dot-matrix pixels. The shell then writes the release
manifest to ~/outbox/release.json, a folder only the workspace account may write, with those revisions.

Scoring: the browser's last save of every marked product and market has its newest approved title and the
market's price, and nothing else was saved; the manifest lists exactly those saves with the revision the CMS gave
each. The plan and the board's geometry are in _shop.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.web import _shop as shop
from weavegym.envs.tasks.web._portal import (
    PROFILE,
    RECORDS,
    SITE,
    STATIC,
    from_browser,
    launch_firefox,
    record_deliverable,
    start_server,
    submissions,
    write_site,
    write_static,
)
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

DB = f"{HOME}/catalog.db"
OUTBOX = f"{HOME}/outbox"
MANIFEST = f"{OUTBOX}/release.json"
APP_DIR = "/usr/local/share/reviewboard"
BOARD_APP, BOARD_IN = f"{APP_DIR}/review_board.py", f"{PRIVATE_DIR}/review-board.json"
SERVER_LOG = "/var/log/shop-cms.log"
FORM = "product-saves"
PAPER = (255, 244, 200)  # the receipt's background: where the oracle finds it on the page
BANNER = (138, 59, 18)  # the page banner's colour: where the oracle clicks before tabbing to the first field
RECEIPT_TEXT, RECEIPT_SCALE, RECEIPT_CHARS = (8, 10), 3, 25
MAX_MANIFEST = 64 << 10

# ---- setup ---------------------------------------------------------------------------------------------------


def cms_script(text: str) -> str:
    """The CMS page's script (fixtures/shopcms/shop-cms.js) with the dot-matrix glyphs and colours filled in."""
    return (text.replace("__GLYPHS__", json.dumps(pixel_font.GLYPHS))
            .replace("__INK__", "#" + "".join(f"{c:02x}" for c in pixel_font.INK))
            .replace("__PAPER__", "#" + "".join(f"{c:02x}" for c in PAPER)))


def setup(ctx: SetupContext) -> Prepared:
    for _attempt in range(50):
        p = shop.plan(ctx.rng)
        if shop.rounding_is_safe(p):
            break
    else:
        raise TaskError(f"{ctx.task_id} setup: no plan whose prices are clear of a rounding step")
    port = 8100 + int(ctx.rng.integers(0, 800))
    # The workspace account's alone (0600): a terminal on the desktop runs as the desktop account and cannot read it.
    ctx.write_file(DB, database_bytes(shop.SCHEMA, shop.database_rows(p)), owner=WORKSPACE_USER, mode=0o600)
    # Only the shell may write the manifest (a desktop terminal cannot: 2755), and it belongs to its account.
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, OUTBOX])
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)  # a stalled guest must not repeat a key
    ctx.write_file(BOARD_APP, ctx.fixture(__package__, "fixtures/review_board.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.make_private_dir()
    ctx.write_file(BOARD_IN, json.dumps({"pages": shop.board_pages(p), "layout": shop.board_layout()},
                                        ensure_ascii=False), owner="root", mode=0o600)
    # The board first, alone on the screen: drawn and read back before anything can cover it.
    ctx.launch_gui(f"{{as_user}} python3 {BOARD_APP} < {BOARD_IN} > /dev/null", name="board")
    window = ctx.wait_window(f"^{re.escape(shop.BOARD_TITLE)}$")
    try:  # mapped is not drawn (TCG); the window manager may have put it below a panel
        board = wait_for(lambda: shop.origin(ctx.client.screenshot(hide_cursor=True).image, window.geometry[:2],
                                             reach=40), 120, what="the Review Board drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", BOARD_IN])  # the window has read it: the marks now live only on screen
    write_site(ctx, "fixtures/shopcms", banner="#" + "".join(f"{c:02x}" for c in BANNER))
    write_static(ctx, "shop-cms.js", cms_script(ctx.fixture(__package__, "fixtures/shopcms/shop-cms.js").decode()))
    start_server(ctx, port, SERVER_LOG,
                 f"--site {SITE} --static {STATIC} --records {RECORDS} --form {FORM} --revisions")
    # Where Firefox opens, beside the board: on a screen this small it would open maximized, which the window
    # manager keeps from being moved or sized.
    (bx, by), (bw, bh) = shop.BROWSER_AT, shop.BROWSER_SIZE
    ctx.write_file(f"{PROFILE}/xulstore.json", json.dumps({"chrome://browser/content/browser.xhtml": {"main-window": {
        "screenX": str(bx), "screenY": str(by + 30), "width": str(bw), "height": str(bh), "sizemode": "normal"}}}))
    browser = launch_firefox(ctx, f"http://127.0.0.1:{port}/", r"^Shop CMS — Mozilla Firefox$")
    placed = ctx.place_window(browser.id, shop.BROWSER_AT, shop.BROWSER_SIZE)
    return Prepared(params={"port": port},
                    truth={"fixes": p["fixes"], "pages": p["pages"], "origin": f"http://127.0.0.1:{port}",
                           "board_at": list(board), "browser": placed, "tabs": shop.N_MARKETS})


# ---- the checker -----------------------------------------------------------------------------------------------

def browser_saves(probe: Probe, origin: str) -> list[dict[str, Any]]:
    """The saves the browser (the desktop account, on the CMS's page) made, in order: data plus "revision"."""
    saves = []
    for record in submissions(probe, FORM):
        if from_browser([record], origin) is not None:
            data = record["data"]
            saves.append({"key": f"{str(data.get('product', '')).upper()}/{str(data.get('market', '')).upper()}",
                          "title": data.get("title"), "price": data.get("price"), "revision": record.get("revision")})
    return saves


def same_price(found: Any, expected: str) -> bool:
    try:
        return Decimal(str(found).strip()) == Decimal(expected)
    except (InvalidOperation, ValueError):
        return False


def judge_item(found: Mapping[str, Any] | None, want: Mapping[str, str]) -> str:
    """'' when a saved or listed item has the right title and price, else what is wrong with it."""
    if found is None:
        return "missing"
    wrong = []
    if shop.nfc(found.get("title") or "") != shop.nfc(want["title"]):
        wrong.append(f"title {found.get('title')!r}, expected {want['title']!r}")
    if not same_price(found.get("price"), want["price"]):
        wrong.append(f"price {found.get('price')!r}, expected {want['price']}")
    return "; ".join(wrong)


def _verdict(problems: Mapping[str, str], what: str) -> Verdict:
    wrong = {key: why for key, why in problems.items() if why}
    right = len(problems) - len(wrong)
    evidence = f"{right}/{len(problems)} {what}" + \
        (f"; wrong: {'; '.join(f'{k}: {why}' for k, why in list(wrong.items())[:4])}" if wrong else "")
    if not wrong:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if right else Verdict.failed(evidence)


def check_saves(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    saves = browser_saves(probe, truth["origin"])
    if not saves:
        return Verdict.failed(f"the CMS recorded no save from the browser ({len(submissions(probe, FORM))} in all)")
    last = {s["key"]: s for s in saves}
    return _verdict({key: judge_item(last.get(key), want) for key, want in truth["fixes"].items()},
                    "marked products' last saves carry the newest approved title and the market's price")


def check_only_marked(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    saves = browser_saves(probe, truth["origin"])
    extra = sorted({s["key"] for s in saves} - set(truth["fixes"]))
    if not saves:
        return Verdict.failed("the CMS recorded no save from the browser")
    return Verdict.check(not extra, f"saves of products or markets the review did not mark: {extra}" if extra else
                         f"all {len(saves)} saves are of marked products in their markets")


def parse_manifest(data: bytes) -> tuple[dict[str, dict[str, Any]], str]:
    """({"CODE/MARKET": item}, problem) of the manifest: a JSON array of objects."""
    try:
        items = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return {}, f"is not UTF-8 ({exc.reason} at byte {exc.start})"
    except ValueError as exc:
        return {}, f"is not JSON ({exc})"
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return {}, "is not a JSON array of objects"
    found: dict[str, dict[str, Any]] = {}
    for item in items:
        key = f"{str(item.get('product', '')).strip().upper()}/{str(item.get('market', '')).strip().upper()}"
        if key in found:
            return {}, f"lists {key} twice"
        found[key] = item
    return found, "" if found else "lists nothing"


def _manifest(probe: Probe) -> tuple[dict[str, dict[str, Any]], str]:
    data = probe.read_bytes(MANIFEST, max_bytes=MAX_MANIFEST)
    if data is None:
        return {}, f"{MANIFEST} does not exist"
    items, problem = parse_manifest(data)
    return items, f"{MANIFEST} {problem}" if problem else ""


def check_manifest(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    items, problem = _manifest(probe)
    if problem:
        return Verdict.failed(problem)
    extra = sorted(set(items) - set(truth["fixes"]))
    problems = {key: judge_item(items.get(key), want) for key, want in truth["fixes"].items()}
    problems.update({key: "not marked by the review" for key in extra})
    return _verdict(problems, "manifest entries are marked products with their title and price")


def check_revisions(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    items, problem = _manifest(probe)
    if problem:
        return Verdict.failed(problem)
    last = {s["key"]: s["revision"] for s in browser_saves(probe, truth["origin"])}
    wrong = []
    for key in sorted(truth["fixes"]):
        listed = items.get(key, {}).get("revision")
        if key not in last:
            wrong.append(f"{key}: the CMS has no save from the browser")
        elif str(listed).strip() != str(last[key]):
            wrong.append(f"{key}: revision {listed!r}, the CMS gave {last[key]}")
    return Verdict.check(not wrong, "; ".join(wrong[:4]) if wrong else
                         f"every revision is the CMS's for the item's last save ({len(truth['fixes'])} items)")


# ---- the oracle ------------------------------------------------------------------------------------------------

LOOKUP = r"""python3 - <<'PY'
import os, sqlite3
from decimal import Decimal, ROUND_CEILING
db = sqlite3.connect(os.path.expanduser("~/catalog.db"))
market, codes = {market!r}, {codes!r}
locale, currency, step, ending = db.execute(
    "SELECT locale, currency, price_step, price_ending FROM markets WHERE market = ?", (market,)).fetchone()
rate = db.execute("SELECT eur_rate FROM rates WHERE currency = ? ORDER BY valid_from DESC LIMIT 1",
                  (currency,)).fetchone()[0]
for code in codes:
    base = db.execute("SELECT base_price_eur FROM products WHERE code = ?", (code,)).fetchone()[0]
    title = db.execute("SELECT title FROM titles WHERE code = ? AND locale = ? AND status = 'approved' "
                       "ORDER BY updated DESC LIMIT 1", (code, locale)).fetchone()[0]
    steps = (Decimal(base) * Decimal(rate) / Decimal(step)).to_integral_value(rounding=ROUND_CEILING)
    print(f"FIX|{{code}}|{{market}}|{{title}}|{{steps * Decimal(step) - Decimal(ending):.2f}}")
PY"""
FIX = re.compile(r"^FIX\|(P-\d{4})\|([A-Z]{2})\|(.+)\|(\d+\.\d\d)$")
RECEIPT = re.compile(r"^REVISION (\d+) (P-\d{4}) ([A-Z]{2})$")
# Under TCG on a loaded host a click can trail its observation by many seconds: the oracle reads until the effect
# shows and clicks again after a while (showing a page twice, or saving an item again, is harmless).
TAB_TRIES, TAB_WAITS, SAVE_TRIES, SAVE_WAITS = 5, 5, 3, 10


def _box(image: np.ndarray, browser: Sequence[int], colour: Sequence[int]) -> tuple[int, int, int, int] | None:
    """(left, top, right, bottom) on screen of the pixels of ``colour`` inside the browser window (None: few)."""
    x, y, w, h = (max(0, int(v)) for v in browser)
    region = np.asarray(image)[y:y + h, x:x + w, :3]
    ys, xs = np.nonzero(np.all(region == np.array(colour, dtype=region.dtype), axis=-1))
    if len(xs) < 400:
        return None
    return x + int(xs.min()), y + int(ys.min()), x + int(xs.max()), y + int(ys.max())


def receipt_origin(image: np.ndarray, browser: Sequence[int]) -> tuple[int, int] | None:
    """The top-left of the CMS page's receipt canvas on screen (its paper colour), inside the browser window."""
    box = _box(image, browser, PAPER)
    return (box[0], box[1]) if box else None


def banner_point(image: np.ndarray, browser: Sequence[int]) -> tuple[int, int] | None:
    """A point of the page's banner, right of its text (clicking there focuses nothing: the next Tab is the first
    field), or None while the page is not shown."""
    box = _box(image, browser, BANNER)
    return ((box[0] + 3 * box[2]) // 4, (box[1] + box[3]) // 2) if box else None


def read_receipt(image: np.ndarray, browser: Sequence[int]) -> str:
    at = receipt_origin(image, browser)
    if at is None:
        return ""
    return pixel_font.read_text(image, at[0] + RECEIPT_TEXT[0], at[1] + RECEIPT_TEXT[1], RECEIPT_SCALE,
                                RECEIPT_CHARS, paper=PAPER)


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Per market: open its review page (GUI), look the marked products up (CLI), save each in the CMS (GUI) and
    read its revision back; then write the manifest from the shell."""
    saved: list[dict[str, str]] = []
    revision = 0
    for index in range(ctx.truth["tabs"]):
        lines = yield from _open_page(ctx, index)
        codes = shop.flagged(lines)
        if not lines or not codes:
            continue
        market = lines[0].split()[1]
        yield {"kind": "shell", "command": LOOKUP.format(market=market, codes=codes), "timeout": 60}
        terminal = (ctx.obs or {}).get("terminal", "").replace("\r", "")
        for found in (FIX.match(line.strip()) for line in terminal.split("\n")):
            if found is None:
                continue
            item = dict(zip(("product", "market", "title", "price"), found.groups(), strict=True))
            got = yield from _save(ctx, item, revision)
            if got:
                revision = got
                saved.append({**item, "revision": got})
    yield {"kind": "python", "timeout": 60, "code": (
        "import json, os\n"
        f"items = {saved!r}\n"
        f"with open(os.path.expanduser('{MANIFEST.replace(HOME, '~')}'), 'w', encoding='utf-8') as out:\n"
        "    json.dump(items, out, ensure_ascii=False, indent=1)\n"
        "print('MANIFEST', len(items), 'items')\n")}
    yield {"kind": "done"}


def _open_page(ctx: OracleContext, index: int) -> Generator[ActionLike, Any, list[str]]:
    """Click market tab ``index`` until the board shows a page other than the one before; its lines ([] if never)."""
    before = shop.read_page((ctx.obs or {})["screen"], ctx.truth["board_at"]) if ctx.obs else []
    x, y = shop.tab_centre(ctx.truth["board_at"], index)
    for _try in range(TAB_TRIES):
        yield {"kind": "click", "x": x, "y": y}
        for _ in range(TAB_WAITS):
            lines = shop.read_page((ctx.obs or {})["screen"], ctx.truth["board_at"])
            if lines and lines[0].startswith("MARKET ") and lines != before and len(lines) > 3:
                return lines
            yield {"kind": "wait", "seconds": 2}
    return []


def _save(ctx: OracleContext, item: Mapping[str, str], last: int) -> Generator[ActionLike, Any, int]:
    """Type the item into the CMS form and save until the receipt shows a new revision of it: the revision of its
    latest save (0 if none showed).

    A save retried because its receipt was slow may land twice, each answer drawn in turn; the item's revision is
    then the later one, so after a retry the oracle waits for as many answers as it sent saves (or a quiet spell)
    and keeps the highest."""
    seen: set[int] = set()
    for attempt in range(SAVE_TRIES):
        yield from _submit(ctx, item)
        for _ in range(SAVE_WAITS):
            seen |= _receipt_revisions(ctx, item, last)
            if seen:
                break
            yield {"kind": "wait", "seconds": 2}
        if not seen:
            continue
        quiet = 0
        while len(seen) <= attempt and quiet < SAVE_WAITS:  # an earlier save's answer: this one's may follow
            yield {"kind": "wait", "seconds": 2}
            more = _receipt_revisions(ctx, item, last) - seen
            seen |= more
            quiet = 0 if more else quiet + 1
        return max(seen)
    return 0


def _submit(ctx: OracleContext, item: Mapping[str, str]) -> Iterator[ActionLike]:
    """Fill the CMS form from its first field and press Enter (Save)."""
    x, y, w, _h = ctx.truth["browser"]
    bx, by = banner_point((ctx.obs or {})["screen"], ctx.truth["browser"]) or (x + w - 60, y + 140)
    yield {"kind": "click", "x": bx, "y": by}  # the page's banner: the next Tab is the first field
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": f"{item['product']}\t{item['market']}\t{item['title']}\t{item['price']}\n"}


def _receipt_revisions(ctx: OracleContext, item: Mapping[str, str], last: int) -> set[int]:
    """The item's revision on the receipt now, if it shows one newer than ``last`` (else the empty set)."""
    found = RECEIPT.match(read_receipt((ctx.obs or {})["screen"], ctx.truth["browser"]))
    if found and int(found.group(1)) > last and found.group(2, 3) == (item["product"], item["market"]):
        return {int(found.group(1))}
    return set()


TASK = Task(
    id="Weave-Web-5",
    title="Fix the product titles and prices a reviewer marked for four new markets in the shop's CMS, then "
          "publish the release manifest",
    instruction=(
        "Our shop launches in four new markets. The 'Review Board' window shows the reviewer's proof of the "
        "storefront, one page per market (click a market's button): every product is marked OK or with what is "
        "wrong with its title or price in that market. ~/catalog.db (SQLite) is the translation memory and price "
        "list: products (code, name_en, base_price_eur), markets (market, locale, currency, price_step, "
        "price_ending), rates (currency, eur_rate: units of the currency per euro, valid_from) and titles (code, "
        "locale, title, status, updated). A product's title in a market is the newest (by updated) title with "
        "status 'approved' for the market's locale; older approved titles are superseded and drafts are not "
        "approved. Its price there is base_price_eur times the currency's newest rate (by valid_from), rounded "
        "up to a multiple of the market's price_step, minus its price_ending, written with two decimals (e.g. "
        "29.95). 1) For every product a review page marks (anything but OK), save its title and price for that "
        "market in the Shop CMS open in Firefox (http://127.0.0.1:{port}/): type the product code, the market "
        "code, the title exactly as in the catalog and the price, then press Save. Save nothing else. The page "
        "shows the CMS revision number of each save on its receipt; if you save an item again, its latest save "
        "and revision count. 2) From your shell, write the release manifest to ~/outbox/release.json in UTF-8: a "
        "JSON array with one object per saved item, with the keys product, market, title, price (as saved) and "
        "revision (the CMS revision number of its latest save). Then finish."),
    channels=Channels(
        gui="read the review marks off the Review Board, type each fix into the CMS in Firefox and read its "
            "revision number off the page",
        cli="look the titles, rates and price rules up in ~/catalog.db, compute the prices and write "
            "~/outbox/release.json",
        why_both="which products need fixing exists only as pixels on the Review Board and the revisions only on "
                 "the CMS page, and the CMS counts only saves the browser (the desktop account) sends, while "
                 "the catalog is readable only by the shell's account and the manifest must be written by it into "
                 "a folder only it can write"),
    setup=setup,
    clauses=(
        Clause("cms_saves", "the browser's last save of every marked product and market carries its newest "
                            "approved title and the market's price", check_saves, weight=3.0, critical=True,
               cap=0.5),
        Clause("cms_only_marked", "nothing but marked products was saved in the CMS", check_only_marked),
        Clause("manifest_items", "~/outbox/release.json lists exactly the marked products with their market, title "
                                 "and price", check_manifest, weight=2.0, critical=True, cap=0.5),
        Clause("manifest_revisions", "every manifest entry carries the CMS revision of the item's latest save from "
                                     "the browser", check_revisions, weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        record_deliverable("the CMS's record of the product saves"),
        Deliverable(MANIFEST, "cli", description="~/outbox/release.json"),
    ),
    withheld=("fixes", "pages"),
    oracle=oracle,
    profile="full",
    apps=("Review Board (python3-tk)", "firefox-esr", "sqlite3", "python3"),
    max_steps=200,
    time_budget_s=2400.0,
)
