"""Weave-Web-1: find the worst endpoint in a rotated access log, fix the portal's broken form, file the report.

The figures come from a gzipped access log (CLI: zcat/awk). The portal's incident
form (served in the guest, open in Firefox) silently does nothing on submit: a
JavaScript TypeError only the browser shows. The fix is in the page's source
(CLI); the report must then be filed from the browser: the portal records each
submission, with the client process that sent it, in a root-only file, so a
curl POST is told apart from the browser.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import date, timedelta
from typing import Any

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.web._portal import RECORDS, clients, from_browser, launch_firefox, start_server, submissions
from weavegym.evaluators import Clause, Probe, Verdict

SITE = f"{HOME}/portal"
LOGS = f"{HOME}/logs"
SERVER_LOG = "/var/log/portal.log"
FIXTURES = "fixtures/incident"
PATHS = ("/api/orders", "/api/stock", "/api/users", "/api/invoices", "/api/search", "/login", "/health",
         "/static/app.js")
AGENTS = ("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "curl/7.88.1",
          "python-requests/2.28.1", "Go-http-client/1.1")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
REPORTERS = ("ops-lead", "j.doe", "oncall-2", "m.garcia")


def _log_day(ctx: SetupContext, day: date, worst: str) -> tuple[bytes, Counter[str]]:
    """One day of access log in combined format, where ``worst`` gets clearly the most 5xx."""
    rng, lines, errors = ctx.rng, [], Counter()
    stamp = f"{day.day:02d}/{MONTHS[day.month - 1]}/{day.year}"
    n = int(rng.integers(900, 1400))
    seconds = sorted(int(s) for s in rng.integers(0, 86400, size=n))
    fail_rate = {p: float(rng.uniform(0.002, 0.02)) for p in PATHS}
    fail_rate[worst] = float(rng.uniform(0.18, 0.3))
    for sec in seconds:
        path = PATHS[int(rng.choice(len(PATHS), p=(0.25, 0.2, 0.12, 0.12, 0.11, 0.08, 0.07, 0.05)))]
        if rng.random() < fail_rate[path]:
            status = int(rng.choice((500, 502, 503, 504)))
            errors[path] += 1
        else:
            status = int(rng.choice((200, 200, 200, 200, 201, 304, 404, 401)))
        query = f"?page={int(rng.integers(1, 9))}" if path in ("/api/orders", "/api/search") and rng.random() < 0.4 \
            else ""
        ip = f"10.0.{int(rng.integers(0, 4))}.{int(rng.integers(2, 250))}"
        size = int(rng.integers(120, 9000))
        agent = AGENTS[int(rng.integers(len(AGENTS)))]
        lines.append(f'{ip} - - [{stamp}:{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d} +0000] '
                     f'"{"POST" if path == "/login" else "GET"} {path}{query} HTTP/1.1" {status} {size} "-" "{agent}"')
    return ("\n".join(lines) + "\n").encode(), errors


def setup(ctx: SetupContext) -> Prepared:
    port = 8100 + int(ctx.rng.integers(0, 800))
    day = date(2026, 11, 1) + timedelta(days=int(ctx.rng.integers(0, 25)))
    worst, decoy = (PATHS[int(i)] for i in ctx.rng.choice(5, size=2, replace=False))
    for age in (2, 1, 0):  # access.log.2.gz (two days before), access.log.1.gz (the day), access.log (the day after)
        text, errors = _log_day(ctx, day + timedelta(days=1 - age), worst if age == 1 else decoy)
        if age == 1:
            top = errors.most_common(2)
            assert top[0][0] == worst and top[0][1] > top[1][1], "the worst endpoint must be unique"
            count = top[0][1]
        name = f"{LOGS}/access.log" + (f".{age}.gz" if age else "")
        ctx.write_file(name, gzip.compress(text, mtime=0) if age else text)
    for name in ("index.html", "report.js", "style.css"):
        ctx.write_file(f"{SITE}/{name}",
                       ctx.fixture(__package__, f"{FIXTURES}/{name}").decode().replace("{{DATE}}", day.isoformat()))
    start_server(ctx, port, SERVER_LOG, f"--site {SITE} --records {RECORDS} --form incidents")
    window = launch_firefox(ctx, f"http://127.0.0.1:{port}/", r"^Incident report — Ops portal — Mozilla Firefox$")
    reporter = REPORTERS[ctx.seed % len(REPORTERS)]
    return Prepared(params={"port": port, "date": day.isoformat(), "reporter": reporter},
                    truth={"date": day.isoformat(), "endpoint": worst, "errors": count, "reporter": reporter,
                           "window": [window.x, window.y, window.width, window.height]})


def check_filed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records = submissions(probe, "incidents")
    return Verdict.check(from_browser(records) is not None,
                         f"{len(records)} report(s) received, sent by {clients(records) or 'nobody'}; expected one "
                         "from Firefox")


def _field_check(name: str, expected_key: str) -> Any:
    def check(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
        data = from_browser(submissions(probe, "incidents"))
        if data is None:
            return Verdict.failed("no report was filed from the browser")
        found = data.get(name)
        return Verdict.check(found == truth[expected_key], f"{name} {found!r}, expected {truth[expected_key]!r}")
    return check


def check_source_fixed(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    html, script = probe.read_text(f"{SITE}/index.html"), probe.read_text(f"{SITE}/report.js")
    if html is None or script is None:
        return Verdict.failed("~/portal/index.html or ~/portal/report.js is missing")
    ids = set(re.findall(r"""\bid\s*=\s*["']([^"']+)["']""", html))
    used = set(re.findall(r"""getElementById\(\s*["'`]([^"'`]+)["'`]\s*\)""", script))
    dangling = sorted(used - ids)
    return Verdict.check(bool(used) and not dangling,
                         f"report.js looks up ids {sorted(used)}; missing from index.html: {dangling or 'none'}")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    yield {"kind": "shell", "command": "ls -l ~/logs ~/portal && zcat ~/logs/access.log.1.gz | head -n 3"}
    yield {"kind": "shell", "command": "zcat ~/logs/access.log.1.gz | awk '$9 ~ /^5[0-9][0-9]$/ "
                                       "{ split($7, p, \"?\"); n[p[1]]++ } END { for (k in n) print n[k], k }' "
                                       "| sort -rn | head -n 3"}
    # In the browser, "File report" does nothing; its console shows a TypeError from report.js.
    yield {"kind": "shell", "command": "grep -n getElementById ~/portal/report.js; grep -n ' id=' ~/portal/index.html"}
    yield {"kind": "shell", "command": "sed -i \"s/getElementById('error-count')/getElementById('errors')/\" "
                                       "~/portal/report.js && N=$(wc -l < /var/log/portal.log)"}
    x, y, w, h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w // 2, "y": y + h - 40}  # an empty part of the page
    yield {"kind": "key", "keys": "F5"}
    yield {"kind": "shell", "command": "timeout 60 sh -c \"until tail -n +$((N + 1)) /var/log/portal.log "
                                       "| grep -q 'GET /report.js'; do sleep 0.2; done\"", "timeout": 90}
    yield {"kind": "click", "x": x + w // 2, "y": y + 150}  # the page banner, above the form
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": ctx.truth["endpoint"]}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": str(ctx.truth["errors"])}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": ctx.truth["reporter"]}
    yield {"kind": "key", "keys": "Return"}
    yield {"kind": "shell", "command": "timeout 60 sh -c 'until xdotool search --name \"^Incident #[0-9]+ filed\" "
                                       ">/dev/null; do sleep 0.3; done'", "timeout": 90}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Web-1",
    title="Fix the portal's incident form and file the report from the browser",
    instruction=(
        "The API gateway had trouble on {date}. Its access logs are in ~/logs (access.log.1.gz holds {date}). "
        "Find the endpoint (the request path without its query string) with the most 5xx responses that day, and "
        "count them. Then file an incident report with the ops portal open in Firefox "
        "(http://127.0.0.1:{port}/, served from the files in ~/portal): endpoint, number of 5xx responses, and "
        "'{reporter}' as reporter. The portal's 'File report' button is known to be broken: find the bug, fix it "
        "in ~/portal, reload the page and file the report from the browser, then finish."),
    channels=Channels(
        gui="see the JavaScript error in Firefox, reload the fixed page and file the report in the browser",
        cli="aggregate the gzipped access log and fix the page's JavaScript",
        why_both="the figures need log crunching and the fix a source edit, while the report counts only when "
                 "filed from the browser"),
    setup=setup,
    clauses=(
        Clause("report_filed", "a report was filed from Firefox", check_filed, weight=2.0, critical=True),
        Clause("endpoint", "the report names the endpoint with the most 5xx", _field_check("endpoint", "endpoint"),
               weight=2.0),
        Clause("error_count", "the report gives that endpoint's 5xx count", _field_check("errors", "errors"),
               weight=2.0),
        Clause("reporter", "the report names the requested reporter", _field_check("reporter", "reporter")),
        Clause("source_fixed", "report.js only looks up element ids the page has", check_source_fixed),
    ),
    oracle=oracle,
    profile="full",
    apps=("firefox-esr", "python3", "zcat", "awk"),
    max_steps=50,
    time_budget_s=1200.0,
)
