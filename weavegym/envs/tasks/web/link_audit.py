"""Weave-Web-6: fix the site's broken links in its CMS after the migration, one audit finding at a time, then file
the audit report and a fresh sitemap.

Three apps, data flowing both ways between the channels. The SEO Audit board (a Tk app, the desktop account's)
shows one finding at a time after a click, in dot-matrix pixels (pixel_font, fed from a root-only file that setup
deletes once drawn): a page's title, a link box on it and which link in the box is dead or loops, never a URL.
The public site (the Riverside Arts Centre's, served by the CMS's own server from its memory, see
fixtures/linkcms/link_cms_server.py) can be crawled from the shell; ~/migration.db (SQLite, the workspace
account's alone) maps old paths to new ones: per seed some findings' entries are right, some wrong, some missing. The
right target is the live page whose title is the link's text. Only the CMS's link editor in Firefox (served to,
and accepting edits from, the desktop account alone) can change a page; the board's "Verify fix" then asks the
CMS, which checks the live page and issues a random ticket code (drawn on the board, recorded by the CMS) and the
board shows the next finding. The shell finally writes ~/outbox/audit.json (per finding its ticket, page, old and
new URL and the status the new URL serves) and ~/outbox/sitemap.txt (every page reachable from / on the fixed
site) into a folder only it can write.

Scoring: the four links point at their right pages on the live site; the CMS applied no other edit; the report
lists each finding with its right URLs and status 200 and the ticket the CMS issued for it; the sitemap is the
fixed site's. The plan and the board's geometry are in _links.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import DESKTOP_USER, HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.web import _links as links
from weavegym.envs.tasks.web._portal import (
    PORTAL_USER,
    PROFILE,
    RECORDS,
    RECORDS_DIR,
    WAIT_FOR_PORT,
    launch_firefox,
    record_deliverable,
)
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

DB = f"{HOME}/migration.db"
OUTBOX = f"{HOME}/outbox"
REPORT, SITEMAP = f"{OUTBOX}/audit.json", f"{OUTBOX}/sitemap.txt"
APP_DIR = "/usr/local/share/seoaudit"
BOARD_APP, BOARD_IN = f"{APP_DIR}/audit_board.py", f"{PRIVATE_DIR}/seo-audit.json"
CMS_DIR = "/usr/local/lib/linkcms"
CMS_SERVER, CMS_STATIC, CMS_IN = f"{CMS_DIR}/link_cms_server.py", f"{CMS_DIR}/static", f"{PRIVATE_DIR}/link-cms.json"
SERVER_LOG = "/var/log/link-cms.log"
BANNER = (22, 94, 78)  # the admin page banner's colour: where the oracle clicks before tabbing to the first field
MAX_REPORT = 64 << 10

# ---- setup ---------------------------------------------------------------------------------------------------


def setup(ctx: SetupContext) -> Prepared:
    p = links.plan(ctx.rng)
    port = 9100 + int(ctx.rng.integers(0, 800))
    # The workspace account's alone (0600): a terminal on the desktop runs as the desktop account and cannot read it.
    ctx.write_file(DB, database_bytes(links.SCHEMA, {"moves": p["moves"]}), owner=WORKSPACE_USER, mode=0o600)
    # Only the shell may write the report (a desktop terminal cannot: 2755), and it belongs to its account.
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, OUTBOX])
    ctx.run(["env", "DISPLAY=:0", "xset", "r", "off"], user=ctx.user)  # a stalled guest must not repeat a key
    ctx.make_private_dir()
    _start_cms(ctx, p, port)
    ctx.write_file(BOARD_APP, ctx.fixture(__package__, "fixtures/linkcms/audit_board.py"), owner="root")
    ctx.write_file(f"{APP_DIR}/pixel_font.py", ctx.fixture("weavegym.envs.tasks", "pixel_font.py"), owner="root")
    ctx.write_file(BOARD_IN, json.dumps({"port": port, "findings": links.board_findings(p),
                                         "layout": links.board_layout()}), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {BOARD_APP} < {BOARD_IN} > /dev/null", name="board")
    window = ctx.wait_window(f"^{re.escape(links.BOARD_TITLE)}$")
    try:  # mapped is not drawn (TCG); the window manager may have put it below a panel
        board = wait_for(lambda: links.origin(ctx.client.screenshot(hide_cursor=True).image, window.geometry[:2]),
                         120, what="the SEO Audit board drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", BOARD_IN])  # the window has read it: the findings now live only on screen
    # Where Firefox opens, beside the board: on a screen this small it would open maximized, which the window
    # manager keeps from being moved or sized.
    (bx, by), (bw, bh) = links.BROWSER_AT, links.BROWSER_SIZE
    ctx.write_file(f"{PROFILE}/xulstore.json", json.dumps({"chrome://browser/content/browser.xhtml": {"main-window": {
        "screenX": str(bx), "screenY": str(by + 30), "width": str(bw), "height": str(bh), "sizemode": "normal"}}}))
    browser = launch_firefox(ctx, f"http://127.0.0.1:{port}/admin/", r"^Site CMS — Mozilla Firefox$")
    placed = ctx.place_window(browser.id, links.BROWSER_AT, links.BROWSER_SIZE)
    findings = [{k: f[k] for k in ("page", "box", "index", "old", "target", "title", "kind", "symptom")}
                for f in p["findings"]]
    return Prepared(params={"port": port},
                    truth={"findings": findings, "decoys": p["decoys"], "origin": f"http://127.0.0.1:{port}",
                           "sitemap": links.reachable(links.fixed_pages(p), p["nav"]), "board_at": list(board),
                           "browser": placed, "count": len(findings)})


def _start_cms(ctx: SetupContext, p: Mapping[str, Any], port: int) -> None:
    """The site and its CMS as PORTAL_USER (its code and static files root's; its plan on stdin, then deleted)."""
    css = ctx.fixture(__package__, "fixtures/portal.css").decode()
    static = {"admin.html": ctx.fixture(__package__, "fixtures/linkcms/admin.html").decode(),
              "admin.css": css.replace("{{BANNER}}", "#" + bytes(BANNER).hex()),
              "portal-form.js": ctx.fixture(__package__, "fixtures/portal-form.js").decode(),
              "link-admin.js": ctx.fixture(__package__, "fixtures/linkcms/link-admin.js").decode()}
    for name, text in static.items():
        ctx.write_file(f"{CMS_STATIC}/{name}", text, owner="root", mode=0o644)
    ctx.write_file(CMS_SERVER, ctx.fixture(__package__, "fixtures/linkcms/link_cms_server.py"), owner="root",
                   mode=0o644)
    ctx.write_file(CMS_IN, json.dumps(links.server_plan(p, DESKTOP_USER)), owner="root", mode=0o600)
    ctx.run(["bash", "-c", f"""set -e
id -u {PORTAL_USER} >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin {PORTAL_USER}
install -d -m 700 -o {PORTAL_USER} -g {PORTAL_USER} {RECORDS_DIR}
install -m 644 -o {PORTAL_USER} -g {PORTAL_USER} /dev/null {SERVER_LOG}
install -m 600 -o {PORTAL_USER} -g {PORTAL_USER} /dev/null /var/log/link-cms-{port}.err
cd / && setsid -f setpriv --reuid={PORTAL_USER} --regid={PORTAL_USER} --clear-groups --inh-caps=-all \
    python3 -I {CMS_SERVER} --port {port} --log {SERVER_LOG} --static {CMS_STATIC} --records {RECORDS} \
    <{CMS_IN} >>/var/log/link-cms-{port}.err 2>&1
""" + WAIT_FOR_PORT.format(port=port)])
    ctx.run(["rm", "-f", CMS_IN])  # the server has read it (it answers only after): the plan lives in its memory


# ---- the checker -----------------------------------------------------------------------------------------------

def cms_records(probe: Probe) -> list[dict[str, Any]]:
    """Every record the CMS wrote: link edits (applied or refused) and issued tickets."""
    found = []
    for line in (probe.read_text(RECORDS) or "").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            found.append(record)
    return found


def issued_tickets(records: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """{finding number: ticket} the CMS issued (it issues them to the desktop account's board alone)."""
    return {int(r["finding"]): str(r["ticket"]) for r in records
            if r.get("form") == "verify" and not r.get("refused") and isinstance(r.get("finding"), int)
            and r.get("ticket")}


def url_path(value: Any, origin: str) -> str:
    """A URL on the site (full, or a path) as its path; '' for anything else."""
    text = str(value or "").strip()
    if text.startswith("/"):
        return text
    parts = urlsplit(text)
    if f"{parts.scheme}://{parts.netloc}" in (origin, origin.replace("127.0.0.1", "localhost")):
        return parts.path or "/"
    return ""


def check_links(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    wrong, right = [], 0
    for n, f in enumerate(truth["findings"], 1):
        got = probe.http_get(truth["origin"] + f["page"])
        if got is None or got[0] != 200:
            wrong.append(f"finding {n}: {f['page']} not served ({got[0] if got else 'no answer'})")
            continue
        page = links.parse_page(got[1])
        box = next((items for name, items in page["boxes"] if name == f["box"]), [])
        href = box[f["index"] - 1][0] if len(box) >= f["index"] else None
        if href == f["target"]:
            right += 1
        else:
            wrong.append(f"finding {n}: link {f['index']} in {f['box']!r} on {f['page']} points to {href!r}, "
                         f"expected {f['target']}")
    evidence = f"{right}/{len(truth['findings'])} found links point to their right page" + \
        (f"; {'; '.join(wrong)}" if wrong else "")
    return Verdict.satisfied(evidence) if not wrong else \
        Verdict.partial(evidence) if right else Verdict.failed(evidence)


def check_only_findings(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    applied = [r["applied"] for r in cms_records(probe) if isinstance(r.get("applied"), dict)]
    if not applied:
        return Verdict.failed("the CMS applied no edit")
    allowed = {(f["page"], f["old"]) for f in truth["findings"]}
    stray = []
    for edit in applied:  # re-pointing a link a previous edit set is still that link
        key = (edit.get("page"), edit.get("old"))
        if key in allowed:
            allowed.add((edit.get("page"), edit.get("new")))
        else:
            stray.append(f"{key[1]} on {key[0]}")
    return Verdict.check(not stray, f"edits of links the audit did not find: {stray[:4]}" if stray else
                         f"all {len(applied)} applied edits are of the audit's findings")


def _report(probe: Probe) -> tuple[list[dict[str, Any]], str]:
    data = probe.read_bytes(REPORT, max_bytes=MAX_REPORT)
    if data is None:
        return [], f"{REPORT} does not exist"
    try:
        items = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return [], f"{REPORT} is not JSON ({exc})"
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        return [], f"{REPORT} is not a non-empty JSON array of objects"
    return items, ""


def _by_finding(items: Sequence[Mapping[str, Any]], truth: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    """{finding number: the report entry whose old_url is that finding's link}."""
    found = {}
    for item in items:
        old = url_path(item.get("old_url"), truth["origin"])
        for n, f in enumerate(truth["findings"], 1):
            if old == f["old"]:
                found[n] = item
    return found


def check_report(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    items, problem = _report(probe)
    if problem:
        return Verdict.failed(problem)
    found, wrong = _by_finding(items, truth), []
    for n, f in enumerate(truth["findings"], 1):
        item = found.get(n)
        if item is None:
            wrong.append(f"finding {n} ({f['old']}) not listed")
            continue
        if url_path(item.get("page"), truth["origin"]) != f["page"]:
            wrong.append(f"finding {n}: page {item.get('page')!r}, expected {f['page']}")
        if url_path(item.get("new_url"), truth["origin"]) != f["target"]:
            wrong.append(f"finding {n}: new_url {item.get('new_url')!r}, expected {f['target']}")
        if str(item.get("status")).strip() != "200":
            wrong.append(f"finding {n}: status {item.get('status')!r}, expected 200")
    if len(items) != len(truth["findings"]):
        wrong.append(f"{len(items)} entries, expected {len(truth['findings'])}")
    return Verdict.check(not wrong, "; ".join(wrong[:5]) if wrong else
                         f"all {len(items)} findings listed with their page, URLs and status")


def check_tickets(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    items, problem = _report(probe)
    if problem:
        return Verdict.failed(problem)
    issued, found, wrong = issued_tickets(cms_records(probe)), _by_finding(items, truth), []
    for n in range(1, len(truth["findings"]) + 1):
        listed = str((found.get(n) or {}).get("ticket", "")).strip().upper()
        if n not in issued:
            wrong.append(f"finding {n}: the CMS issued no ticket")
        elif listed != issued[n]:
            wrong.append(f"finding {n}: ticket {listed or 'missing'!r}, the CMS issued another")
    return Verdict.check(not wrong, "; ".join(wrong) if wrong else
                         f"every finding carries the ticket the CMS issued ({len(issued)} tickets)")


def check_sitemap(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    data = probe.read_bytes(SITEMAP, max_bytes=MAX_REPORT)
    if data is None:
        return Verdict.failed(f"{SITEMAP} does not exist")
    text = data.decode("utf-8", errors="replace")
    listed = {url_path(line, truth["origin"]) or line.strip() for line in text.splitlines() if line.strip()}
    want = set(truth["sitemap"])
    missing, extra = sorted(want - listed), sorted(listed - want)
    return Verdict.check(not missing and not extra, f"{len(listed)} pages listed, {len(want)} expected"
                         + (f"; missing {missing[:4]}" if missing else "")
                         + (f"; not pages {extra[:4]}" if extra else ""))


# ---- the oracle ------------------------------------------------------------------------------------------------

CRAWL = r"""import html, os, re, sqlite3, urllib.error, urllib.request
BASE = "http://127.0.0.1:{port}"
class Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None
OPENER = urllib.request.build_opener(Stay)
def get(path):
    try:
        with OPENER.open(BASE + path, timeout=20) as reply:
            return reply.status, reply.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, ""
def parse(text):
    title = re.search(r"<title>(.*?)</title>", text, re.S)
    boxes = [(html.unescape(name), [(html.unescape(h), html.unescape(t))
                                    for h, t in re.findall(r'<a href="([^"]*)">(.*?)</a>', body)])
             for name, body in re.findall(r'<section class="box"><h2>(.*?)</h2>(.*?)</section>', text, re.S)]
    hrefs = [html.unescape(h) for h in re.findall(r'<a href="([^"]*)"', text)]
    return html.unescape(title.group(1)) if title else "", boxes, hrefs
def crawl():
    pages, todo, seen = {{}}, ["/"], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        status, text = get(path)
        if status == 200:
            pages[path] = parse(text)
            todo += [h for h in pages[path][2] if h.startswith("/") and h not in seen]
    return pages
"""
LOOKUP = "python3 - <<'PY'\n" + CRAWL + r"""
page_title, box_name, index = {page!r}, {box!r}, {index}
pages = crawl()
path = next(p for p, v in pages.items() if v[0].upper() == page_title)
links = next(items for name, items in pages[path][1] if name.upper() == box_name)
old, text = links[index - 1]
db = sqlite3.connect(os.path.expanduser("~/migration.db"))
mapped = [row[0] for row in db.execute("SELECT new_path FROM moves WHERE old_path = ?", (old,))]
new = next((m for m in mapped if get(m)[0] == 200 and parse(get(m)[1])[0] == text), None)
new = new or next(p for p, v in pages.items() if v[0] == text)
print(f"FIX|{{path}}|{{old}}|{{new}}")
PY"""
FIX = re.compile(r"^FIX\|(/\S*)\|(/\S*)\|(/\S*)$")
RECORD = "python3 - <<'PY'\n" + CRAWL + r"""
import json
path = os.path.expanduser("~/outbox/audit.json")
report = json.load(open(path)) if os.path.exists(path) else []
fix = {fix!r}
report = [item for item in report if item["finding"] != fix["finding"]] + [dict(fix, status=get(fix["new_url"])[0])]
with open(path, "w") as out:
    json.dump(report, out, indent=1)
print("RECORDED", fix["finding"], fix["ticket"], report[-1]["status"])
PY"""
SITEMAP_SCRIPT = "python3 - <<'PY'\n" + CRAWL + r"""
pages = crawl()
with open(os.path.expanduser("~/outbox/sitemap.txt"), "w") as out:
    out.write("".join(path + "\n" for path in sorted(pages)))
print("SITEMAP", len(pages), "pages")
PY"""
CONFIRM = "python3 - <<'PY'\n" + CRAWL + r"""
import time
for _ in range(60):
    status, text = get({page!r})
    if status == 200 and '<h1>' in text and 'href="{old}"' not in text:
        print("LIVE")
        break
    time.sleep(1)
PY"""
# Under TCG on a loaded host a click can trail its observation by many seconds: the oracle reads until the effect
# shows and clicks again after a while (a second Start, or a second Verify of a finding not fixed yet, is harmless;
# publishing an edit again finds no old link and is refused, changing nothing).
CLICK_TRIES, CLICK_WAITS, PUBLISH_TRIES = 5, 5, 3


def _box(image: np.ndarray, browser: Sequence[int], colour: Sequence[int]) -> tuple[int, int, int, int] | None:
    """(left, top, right, bottom) on screen of the pixels of ``colour`` inside the browser window (None: few)."""
    x, y, w, h = (max(0, int(v)) for v in browser)
    region = np.asarray(image)[y:y + h, x:x + w, :3]
    ys, xs = np.nonzero(np.all(region == np.array(colour, dtype=region.dtype), axis=-1))
    if len(xs) < 400:
        return None
    return x + int(xs.min()), y + int(ys.min()), x + int(xs.max()), y + int(ys.max())


def banner_point(image: np.ndarray, browser: Sequence[int]) -> tuple[int, int] | None:
    """A point of the admin page's banner, right of its text (clicking there focuses nothing: the next Tab is the
    first field), or None while the page is not shown."""
    box = _box(image, browser, BANNER)
    return ((box[0] + 3 * box[2]) // 4, (box[1] + box[3]) // 2) if box else None


def _screen_lines(ctx: OracleContext) -> list[str]:
    return links.read_board((ctx.obs or {})["screen"], ctx.truth["board_at"]) if ctx.obs else []


def _click_until(ctx: OracleContext, button: Sequence[int], done: Any) -> Generator[ActionLike, Any, list[str]]:
    """Click a board button until ``done(lines)`` holds for the board's lines: those lines ([] if never)."""
    x, y = links.button_centre(ctx.truth["board_at"], button)
    for _try in range(CLICK_TRIES):
        yield {"kind": "click", "x": x, "y": y}
        for _ in range(CLICK_WAITS):
            lines = _screen_lines(ctx)
            if done(lines):
                return lines
            yield {"kind": "wait", "seconds": 2}
    return []


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Start the audit (GUI); per finding: read it off the board (GUI), find the link and its right target by
    crawling the site and reading the migration map (CLI), publish the fix in the CMS (GUI), see it live (CLI),
    verify it on the board and read the ticket (GUI), record it in the report (CLI); then write the sitemap (CLI)."""
    port = ctx.params["port"]
    lines = yield from _click_until(ctx, links.START_BUTTON,
                                    lambda ls: (links.current_finding(ls) or {}).get("number") == 1)
    for number in range(1, ctx.truth["count"] + 1):
        finding = links.current_finding(lines)
        if finding is None or finding["number"] != number:
            break
        yield {"kind": "shell", "timeout": 120, "command": LOOKUP.format(
            port=port, page=finding["page"], box=finding["box"], index=finding["index"])}
        terminal = (ctx.obs or {}).get("terminal", "").replace("\r", "")
        found = [m for m in (FIX.match(line.strip()) for line in terminal.split("\n")) if m]
        if not found:
            break
        page, old, new = found[-1].groups()
        for _attempt in range(PUBLISH_TRIES):
            yield from _publish(ctx, page, old, new)
            yield {"kind": "shell", "timeout": 90, "command": CONFIRM.format(port=port, page=page, old=old)}
            if re.search(r"^LIVE\r?$", (ctx.obs or {}).get("terminal", ""), re.M):
                break
        lines = yield from _click_until(ctx, links.VERIFY_BUTTON,
                                        lambda ls, n=number: n in links.tickets(ls))
        fix = {"finding": number, "ticket": links.tickets(lines).get(number, ""), "page": page, "old_url": old,
               "new_url": new}
        yield {"kind": "shell", "timeout": 120, "command": RECORD.format(port=port, fix=fix)}
    yield {"kind": "shell", "timeout": 120, "command": SITEMAP_SCRIPT.format(port=port)}
    yield {"kind": "done"}


def _publish(ctx: OracleContext, page: str, old: str, new: str) -> Iterator[ActionLike]:
    """Type one edit into the CMS's link editor and publish it."""
    x, y, w, _h = ctx.truth["browser"]
    bx, by = banner_point((ctx.obs or {})["screen"], ctx.truth["browser"]) or (x + w - 60, y + 140)
    yield {"kind": "click", "x": bx, "y": by}  # the page's banner: the next Tab is the first field
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": f"{page}\t{old}\t{new}\n"}


TASK = Task(
    id="Weave-Web-6",
    title="Fix the broken links an SEO audit found after the site's migration in its CMS, then file the audit "
          "report and a fresh sitemap",
    instruction=(
        "Our arts centre's site (http://127.0.0.1:{port}/) was migrated to new paths and an SEO audit found broken "
        "links. The 'SEO Audit' window shows its findings one at a time (press 'Start audit'): a page's title, a "
        "link box on that page (a section with its heading) and which link in the box (counting from 1) is dead "
        "or stuck in a redirect loop. The right target of a link is the live page (answering 200 without a "
        "redirect) whose title is the link's text. ~/migration.db (SQLite, table moves: old_path, new_path, "
        "moved_on) maps old paths to new ones, but some of its entries are wrong or missing. 1) For each finding, "
        "fix the link in the Site CMS open in Firefox (http://127.0.0.1:{port}/admin/): type the page's path, "
        "the link's old href exactly as on the page and the new path, then press Publish. Then press 'Verify fix' "
        "on the audit board: once the fix is live it shows a ticket code for the finding and the next finding. "
        "Change no other link. 2) From your shell, write ~/outbox/audit.json: a JSON array with one object per "
        "finding, with the keys finding (its number), ticket (the board's code), page (the page's path), old_url, "
        "new_url (paths) and status (the HTTP status new_url serves now, as a number); and ~/outbox/sitemap.txt: "
        "the path of every page reachable from / by following the site's links that answers 200, one per line. "
        "Then finish."),
    channels=Channels(
        gui="read each finding off the SEO Audit board, publish its fix in the Site CMS in Firefox and read the "
            "ticket code the board shows once the fix is verified",
        cli="crawl the site to find each finding's link and its right target, check the migration map in "
            "~/migration.db, and write ~/outbox/audit.json and ~/outbox/sitemap.txt",
        why_both="the findings and the ticket codes exist only as pixels on the audit board and only the desktop's "
                 "browser may edit the site in the CMS, while the migration map is readable only by the shell's "
                 "account and the report and sitemap must be written by it into a folder only it can write"),
    setup=setup,
    clauses=(
        Clause("links_fixed", "each finding's link on the live site points to the page whose title is the link's "
                              "text", check_links, weight=3.0, critical=True, cap=0.5),
        Clause("only_findings", "the CMS applied no edit to a link the audit did not find", check_only_findings),
        Clause("report_links", "~/outbox/audit.json lists every finding with its page, old and new URL and status "
                               "200", check_report, weight=2.0, critical=True, cap=0.5),
        Clause("report_tickets", "every report entry carries the ticket the CMS issued for that finding",
               check_tickets, weight=2.0, critical=True, cap=0.5),
        Clause("sitemap", "~/outbox/sitemap.txt lists exactly the pages reachable on the fixed site",
               check_sitemap, weight=1.0, critical=True, cap=0.5),
    ),
    deliverables=(
        record_deliverable("the CMS's record of the link edits and the tickets it issued"),
        Deliverable(REPORT, "cli", description="~/outbox/audit.json"),
        Deliverable(SITEMAP, "cli", description="~/outbox/sitemap.txt"),
    ),
    withheld=("findings", "decoys", "sitemap"),
    oracle=oracle,
    profile="full",
    apps=("SEO Audit (python3-tk)", "firefox-esr", "sqlite3", "python3"),
    max_steps=160,
    time_budget_s=2400.0,
)
