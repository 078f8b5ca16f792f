"""Weave-Web-1: find the worst endpoint in a rotated access log, fix the portal's broken form, file the report.

The figures come from a gzipped access log (CLI: zcat/awk). The portal's incident
form (served in the guest, open in Firefox) silently does nothing on submit: a
JavaScript TypeError that only the browser shows, because the page's markup
(~/portal/index.html, the workspace account's) names one field differently from
what the portal's script (root's, /static/report.js) looks up. The fix is a
markup edit (CLI); the report must then be filed from the browser (GUI): the
portal records each submission in a root-only file with the account that owns the
client's socket and its Origin, so only the desktop account's browser on the
portal's page counts, and the page cannot be scripted from the site dir (see
_portal). Seeds draw the log's endpoints and figures, the date, the reporter, the
field ids and which field is broken.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import date, timedelta
from typing import Any

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.web._portal import (
    RECORDS,
    SITE,
    STATIC,
    field_is,
    fill_form,
    launch_firefox,
    record_deliverable,
    sent_check,
    start_server,
    submitted_check,
    write_site,
    write_static,
)
from weavegym.evaluators import Clause, Probe, Verdict

PAGE = f"{SITE}/index.html"
LOGS = f"{HOME}/logs"
SERVER_LOG = "/var/log/portal.log"
FIXTURES = "fixtures/incident"
FORM = "incidents"
PATH_POOL = ("/api/orders", "/api/stock", "/api/users", "/api/invoices", "/api/search", "/api/cart", "/api/payments",
             "/api/shipping", "/api/reviews", "/api/products", "/api/coupons", "/login", "/logout", "/health",
             "/static/app.js", "/metrics")
TRAFFIC = (0.25, 0.2, 0.12, 0.12, 0.11, 0.08, 0.07, 0.05)  # the share of each of the day's 8 paths
AGENTS = ("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "curl/7.88.1",
          "python-requests/2.28.1", "Go-http-client/1.1")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
SURNAMES = ("garcia", "nakamura", "okafor", "jensen", "rossi", "haddad", "petrov", "santos", "weber", "quinn",
            "moreau", "kowalski", "tanaka", "varga", "lopez", "fischer", "chen", "diaz", "evans", "ivanova")
# The ids the portal's script may use for each field; the page's markup names one field by another of its list.
FIELD_IDS = {
    "endpoint": ("endpoint", "endpoint-path", "request-path", "path"),
    "errors": ("error-count", "errors", "count-5xx", "server-errors", "num-errors"),
    "reporter": ("reporter", "reported-by", "filed-by", "reporter-name"),
}


def _log_day(ctx: SetupContext, paths: list[str], day: date, worst: str) -> tuple[bytes, Counter[str]]:
    """One day of access log in combined format, where ``worst`` gets clearly the most 5xx."""
    rng, lines, errors = ctx.rng, [], Counter()
    stamp = f"{day.day:02d}/{MONTHS[day.month - 1]}/{day.year}"
    n = int(rng.integers(900, 1400))
    seconds = sorted(int(s) for s in rng.integers(0, 86400, size=n))
    fail_rate = {p: float(rng.uniform(0.002, 0.02)) for p in paths}
    fail_rate[worst] = float(rng.uniform(0.18, 0.3))
    for sec in seconds:
        path = paths[int(rng.choice(len(paths), p=TRAFFIC))]
        if rng.random() < fail_rate[path]:
            status = int(rng.choice((500, 502, 503, 504)))
            errors[path] += 1
        else:
            status = int(rng.choice((200, 200, 200, 200, 201, 304, 404, 401)))
        query = f"?page={int(rng.integers(1, 9))}" if path in paths[:2] and rng.random() < 0.4 else ""
        ip = f"10.0.{int(rng.integers(0, 4))}.{int(rng.integers(2, 250))}"
        size = int(rng.integers(120, 9000))
        agent = AGENTS[int(rng.integers(len(AGENTS)))]
        method = "POST" if path in ("/login", "/logout", "/api/payments") else "GET"
        lines.append(f'{ip} - - [{stamp}:{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d} +0000] '
                     f'"{method} {path}{query} HTTP/1.1" {status} {size} "-" "{agent}"')
    return ("\n".join(lines) + "\n").encode(), errors


def _fill(text: str, ids: Mapping[str, str], day: date) -> str:
    for field, value in ids.items():
        text = text.replace("{{ID_" + field.upper() + "}}", value)
    return text.replace("{{DATE}}", day.isoformat())


def setup(ctx: SetupContext) -> Prepared:
    rng = ctx.rng
    port = 8100 + int(rng.integers(0, 800))
    day = date(2026, 9, 1) + timedelta(days=int(rng.integers(0, 90)))
    paths = [PATH_POOL[int(i)] for i in rng.choice(len(PATH_POOL), size=len(TRAFFIC), replace=False)]
    worst, decoy = (paths[int(i)] for i in rng.choice(5, size=2, replace=False))
    for age in (2, 1, 0):  # access.log.2.gz (two days before), access.log.1.gz (the day), access.log (the day after)
        text, errors = _log_day(ctx, paths, day + timedelta(days=1 - age), worst if age == 1 else decoy)
        if age == 1:
            top = errors.most_common(2)
            assert top[0][0] == worst and top[0][1] > top[1][1], "the worst endpoint must be unique"
            count = top[0][1]
        name = f"{LOGS}/access.log" + (f".{age}.gz" if age else "")
        ctx.write_file(name, gzip.compress(text, mtime=0) if age else text, mode=0o644)
    # The script's ids, and the markup's: one field is named differently (a rename the script never followed).
    ids = {field: choices[int(rng.integers(len(choices)))] for field, choices in FIELD_IDS.items()}
    broken = tuple(FIELD_IDS)[int(rng.integers(len(FIELD_IDS)))]
    others = [i for i in FIELD_IDS[broken] if i != ids[broken]]
    markup = {**ids, broken: others[int(rng.integers(len(others)))]}
    # The page is the shell's to fix: the workspace account's, read-only to the desktop account.
    write_site(ctx, FIXTURES, banner="#1f3a5f", fill=lambda text: _fill(text, markup, day))
    write_static(ctx, "report.js", _fill(ctx.fixture(__package__, f"{FIXTURES}/report.js").decode(), ids, day))
    start_server(ctx, port, SERVER_LOG, f"--site {SITE} --static {STATIC} "
                                        f"--records {RECORDS} --form {FORM}")
    window = launch_firefox(ctx, f"http://127.0.0.1:{port}/", r"^Incident report — Ops portal — Mozilla Firefox$")
    reporter = f"{'abcdefghijklmnoprstvw'[int(rng.integers(21))]}.{SURNAMES[int(rng.integers(len(SURNAMES)))]}"
    return Prepared(params={"port": port, "date": day.isoformat(), "reporter": reporter},
                    truth={"date": day.isoformat(), "endpoint": worst, "errors": count, "reporter": reporter,
                           "origin": f"http://127.0.0.1:{port}", "ids": sorted(ids.values()),
                           "wrong_id": markup[broken], "right_id": ids[broken],
                           "window": window.geometry})


def check_source_fixed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    html = probe.read_text(PAGE)
    if html is None:
        return Verdict.failed("~/portal/index.html is missing")
    found = set(re.findall(r"""\bid\s*=\s*["']?([^"'\s>]+)""", html))
    missing = sorted(set(truth["ids"]) - found)
    return Verdict.check(not missing, f"the portal's script looks up ids {truth['ids']}; missing from index.html: "
                                      f"{missing or 'none'}")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    yield {"kind": "shell", "command": "ls -l ~/logs ~/portal && zcat ~/logs/access.log.1.gz | head -n 3"}
    yield {"kind": "shell", "command": "zcat ~/logs/access.log.1.gz | awk '$9 ~ /^5[0-9][0-9]$/ "
                                       "{ split($7, p, \"?\"); n[p[1]]++ } END { for (k in n) print n[k], k }' "
                                       "| sort -rn | head -n 3"}
    # In the browser, "File report" does nothing; its console shows a TypeError from /static/report.js.
    yield {"kind": "shell", "command": f"grep -n 'FIELDS\\|getElementById' {STATIC}/report.js; "
                                       "grep -n ' id=' ~/portal/index.html"}
    wrong, right = ctx.truth["wrong_id"], ctx.truth["right_id"]
    yield {"kind": "shell", "command": f"sed -i 's/\"{wrong}\"/\"{right}\"/g' ~/portal/index.html && "
                                       "N=$(wc -l < /var/log/portal.log)"}
    x, y, w, h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w // 2, "y": y + h - 40}  # an empty part of the page
    yield {"kind": "key", "keys": "F5"}
    yield {"kind": "shell", "command": "timeout 60 sh -c \"until tail -n +$((N + 1)) /var/log/portal.log "
                                       "| grep -q 'GET /static/report.js'; do sleep 0.2; done\"", "timeout": 90}
    yield {"kind": "wait", "seconds": 2}  # the script clears the fields as it starts
    yield from fill_form(ctx.truth["window"], [ctx.truth["endpoint"], str(ctx.truth["errors"]), ctx.truth["reporter"]],
                         SERVER_LOG, FORM)
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Web-1",
    title="Fix the portal's incident form and file the report from the browser",
    instruction=(
        "The API gateway had trouble on {date}. Its access logs are in ~/logs (access.log.1.gz holds {date}). "
        "Find the endpoint (the request path without its query string) with the most 5xx responses that day, and "
        "count them. Then file an incident report with the ops portal open in Firefox "
        "(http://127.0.0.1:{port}/; its page is ~/portal/index.html, its script the portal's own /static/report.js): "
        "endpoint, number of 5xx responses, and '{reporter}' as reporter. The portal's 'File report' button is "
        "known to be broken: find the bug, fix it in ~/portal, reload the page and file the report from the "
        "browser (the desktop's Firefox), then finish."),
    channels=Channels(
        gui="see the JavaScript error in Firefox, reload the fixed page and file the report in the browser",
        cli="aggregate the gzipped access log and fix the page's markup so the portal's script finds its fields",
        why_both="the figures need log crunching and the fix a source edit, while the report counts only when "
                 "the browser (the desktop account) files it from the portal's page"),
    setup=setup,
    clauses=(
        Clause("report_filed", "a report was filed from the browser (the desktop account) on the portal's page",
               sent_check(FORM, "report"), weight=2.0, critical=True),
        Clause("endpoint", "the report names the endpoint with the most 5xx",
               submitted_check(FORM, "report", field_is("endpoint")), weight=2.0),
        Clause("error_count", "the report gives that endpoint's 5xx count",
               submitted_check(FORM, "report", field_is("errors")), weight=2.0),
        Clause("reporter", "the report names the requested reporter",
               submitted_check(FORM, "report", field_is("reporter"))),
        Clause("source_fixed", "index.html has every field id the portal's script looks up", check_source_fixed),
    ),
    deliverables=(
        record_deliverable("the portal's record of the report"),
        Deliverable(PAGE, "cli", description="the fixed ~/portal/index.html"),
    ),
    oracle=oracle,
    profile="full",
    apps=("firefox-esr", "python3", "zcat", "awk"),
    max_steps=50,
    time_budget_s=1200.0,
)
