"""Weave-Web-2: size a VM from a week of usage metrics and request it in a portal whose flavor list is broken.

The peak usage comes from a CSV of 5-minute samples and the right flavor from the
catalog (CLI). In Firefox the portal's flavor list stays on "Loading flavors…":
the catalog file (~/portal/flavors.json, the workspace account's) has a syntax
error that only the browser's console reports. The catalog is fixed in the source
(CLI), and the request is sent from the reloaded page (GUI): the portal records
each request in a root-only file with the account that owns the client's socket
and its Origin, so a curl POST from the shell does not count, and the page cannot
be scripted from the site dir (see _portal). Seeds draw the services, the
catalog's families and prices, the kind and place of the syntax error, the
project and the peaks.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from weavegym.envs.setup_context import HOME, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.web._portal import (
    RECORDS,
    SITE,
    STATIC,
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

CATALOG = f"{SITE}/flavors.json"
METRICS = f"{HOME}/metrics/usage-week.csv"
SERVER_LOG = "/var/log/portal.log"
FIXTURES = "fixtures/vmrequest"
FORM = "vm-requests"
SERVICE_POOL = ("billing", "search", "checkout", "reports", "auth", "inventory", "mailer", "ledger", "pricing",
                "recommender", "gateway", "analytics")
PROJECT_POOL = ("atlas", "hermes", "orion", "vega", "lyra", "nova", "pegasus", "draco", "carina", "altair", "rigel",
                "sirius", "tucana", "volans", "cygnus", "polaris")
# (letters the family may be called by, GiB per vCPU, EUR per vCPU-ish): compute, general, memory-optimised
FAMILIES = ((("c", "h", "cx"), 2, 5.0), (("g", "s", "t"), 4, 6.0), (("m", "r", "mx"), 8, 7.5))
BUGS = ("a trailing comma", "a missing comma", "a comment", "single quotes", "an unquoted key")
SIZES = (("small", 1), ("medium", 2), ("large", 4), ("xlarge", 8), ("2xlarge", 16))

FIX_CATALOG = r"""python3 - <<'PY'
import json, pathlib, re
path = pathlib.Path.home() / "portal/flavors.json"
text = path.read_text()
text = re.sub(r"^\s*//.*\n", "", text, flags=re.M)   # comments are not JSON
text = re.sub(r"'([^'\n]*)'", r'"\1"', text)         # nor are single quotes
text = re.sub(r'([{,]\s*)([A-Za-z_]\w*)\s*:', r'\1"\2":', text)  # nor unquoted keys
text = re.sub(r",(\s*[\]}])", r"\1", text)           # nor are trailing commas
text = re.sub(r"}(\s*\n\s*{)", r"},\1", text)        # objects in an array need commas
json.loads(text)
path.write_text(text)
print("flavors.json is valid JSON again")
PY"""

SIZE_VM = r"""python3 - <<'PY'
import csv, json, pathlib
home = pathlib.Path.home()
rows = [r for r in csv.DictReader(open(home / "metrics/usage-week.csv")) if r["service"] == "{service}"]
cpu = max(float(r["cpu_cores"]) for r in rows)
mem = max(float(r["mem_gib"]) for r in rows)
flavors = json.loads((home / "portal/flavors.json").read_text())["flavors"]
fits = sorted((f["eur_month"], f["name"]) for f in flavors if f["vcpus"] >= cpu and f["ram_gb"] >= mem)
print(f"peak cpu {cpu:.2f} mem {mem:.2f}; cheapest fit {fits[0]}")
PY"""


def _catalog(ctx: SetupContext) -> list[dict[str, Any]]:
    flavors, prices = [], set()
    for letters, ratio, per_cpu in FAMILIES:
        family = f"{letters[int(ctx.rng.integers(len(letters)))]}{int(ctx.rng.integers(1, 5))}"
        for size, vcpus in SIZES:
            price = round(vcpus * per_cpu * float(ctx.rng.uniform(0.9, 1.1)) + vcpus * ratio * 1.2)
            while price in prices:
                price += 1
            prices.add(price)
            flavors.append({"name": f"{family}.{size}", "vcpus": vcpus, "ram_gb": vcpus * ratio, "eur_month": price})
    return flavors


def _catalog_text(flavors: list[dict[str, Any]], bug: int, at: int) -> str:
    """The catalog with one syntax error (``BUGS[bug]``) at flavor ``at`` (1..len-2)."""
    lines = [f'    {{"name": "{f["name"]}", "vcpus": {f["vcpus"]}, "ram_gb": {f["ram_gb"]}, '
             f'"eur_month": {f["eur_month"]}}}' for f in flavors]
    body = [line + ("," if i < len(lines) - 1 else "") for i, line in enumerate(lines)]
    if bug == 0:
        body[-1] += ","  # a trailing comma
    elif bug == 1:
        body[at] = body[at].rstrip(",")  # a missing comma between two flavors
    elif bug == 2:
        family = flavors[at]["name"].split(".")[0]
        body.insert(at, f"    // {family} flavors added for the {('analytics', 'search', 'ml', 'batch')[at % 4]} pilot")
    elif bug == 3:
        body[at] = body[at].replace(f'"{flavors[at]["name"]}"', f"'{flavors[at]['name']}'")
    else:
        body[at] = body[at].replace('"eur_month"', "eur_month")
    return '{\n  "currency": "EUR",\n  "flavors": [\n' + "\n".join(body) + "\n  ]\n}\n"


def _metrics(ctx: SetupContext, services: list[str], service: str, peak_cpu: float, peak_mem: float) -> str:
    rng, start = ctx.rng, datetime(2026, 11, 23)
    rows = ["timestamp,service,cpu_cores,mem_gib"]
    levels = {s: (float(rng.uniform(0.5, 6)), float(rng.uniform(2, 40))) for s in services}
    levels[service] = (peak_cpu * 0.55, peak_mem * 0.6)
    samples = 7 * 288
    peak_at = int(rng.integers(samples // 4, samples - 10)), int(rng.integers(10, samples - 10))
    for i in range(samples):
        stamp = (start + timedelta(minutes=5 * i)).isoformat()
        for name in services:
            cpu, mem = levels[name]
            daily = 1 + 0.25 * math.sin(2 * math.pi * (i % 288) / 288)
            c, m = cpu * daily * float(rng.uniform(0.85, 1.15)), mem * daily * float(rng.uniform(0.9, 1.1))
            if name == service:
                c, m = min(c, peak_cpu - 0.05), min(m, peak_mem - 0.05)
                c = peak_cpu if i == peak_at[0] else c
                m = peak_mem if i == peak_at[1] else m
            rows.append(f"{stamp},{name},{c:.2f},{m:.2f}")
    return "\n".join(rows) + "\n"


def setup(ctx: SetupContext) -> Prepared:
    port = 8100 + int(ctx.rng.integers(0, 800))
    flavors = _catalog(ctx)
    services = [SERVICE_POOL[int(i)] for i in ctx.rng.choice(len(SERVICE_POOL), size=5, replace=False)]
    service = services[int(ctx.rng.integers(len(services)))]
    for _attempt in range(100):
        peak_cpu = round(float(ctx.rng.uniform(1.3, 7.6)), 2)
        peak_mem = round(float(ctx.rng.uniform(3.2, 30.0)), 2)
        fitting = [f for f in flavors if f["vcpus"] >= peak_cpu and f["ram_gb"] >= peak_mem]
        fits = sorted((f["eur_month"], f["name"]) for f in fitting)
        if fitting[0]["name"] != fits[0][1]:
            break  # the cheapest fit is not simply the first one listed
    flavor = fits[0][1]
    ctx.write_file(METRICS, _metrics(ctx, services, service, peak_cpu, peak_mem), mode=0o644)
    bug = int(ctx.rng.integers(len(BUGS)))
    # The site (page and catalog) is the shell's to fix: the workspace account's; the script is root's.
    ctx.write_file(CATALOG, _catalog_text(flavors, bug, int(ctx.rng.integers(1, len(flavors) - 1))),
                   owner=WORKSPACE_USER, mode=0o644)
    write_site(ctx, FIXTURES, banner="#3b2f63")
    write_static(ctx, "request.js", ctx.fixture(__package__, f"{FIXTURES}/request.js").decode())
    start_server(ctx, port, SERVER_LOG, f"--site {SITE} --static {STATIC} --records {RECORDS} --form {FORM}")
    window = launch_firefox(ctx, f"http://127.0.0.1:{port}/", r"^Cloud portal — Mozilla Firefox$")
    project = f"{PROJECT_POOL[int(ctx.rng.integers(len(PROJECT_POOL)))]}-{int(ctx.rng.integers(10, 100))}"
    return Prepared(params={"port": port, "service": service, "project": project},
                    truth={"service": service, "project": project, "flavor": flavor, "peak_cpu": peak_cpu,
                           "origin": f"http://127.0.0.1:{port}", "bug": BUGS[bug],
                           "peak_mem": peak_mem, "flavor_index": [f["name"] for f in flavors].index(flavor),
                           "window": window.geometry})


def _flavor(data: dict[str, Any], truth: Mapping[str, Any]) -> tuple[bool, str]:
    return (data.get("flavor") == truth["flavor"] and data.get("project") == truth["project"],
            f"requested {data.get('flavor')!r} for {data.get('project')!r}, expected "
            f"{truth['flavor']!r} (the cheapest that fits) for {truth['project']!r}")


def _peaks(data: dict[str, Any], truth: Mapping[str, Any]) -> tuple[bool, str]:
    try:
        ok = (abs(float(data.get("peak_cpu")) - truth["peak_cpu"]) < 0.005
              and abs(float(data.get("peak_mem")) - truth["peak_mem"]) < 0.005)
    except (TypeError, ValueError):
        ok = False
    return ok, (f"peaks cpu {data.get('peak_cpu')} / mem {data.get('peak_mem')}, expected "
                f"{truth['peak_cpu']} / {truth['peak_mem']}")


def check_catalog(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    catalog = probe.json(CATALOG)
    names = [f.get("name") for f in catalog.get("flavors", []) if isinstance(f, dict)] \
        if isinstance(catalog, dict) else []
    return Verdict.check(len(names) == 15 and truth["flavor"] in names,
                         f"flavors.json {'parses' if catalog is not None else 'does not parse'} with {len(names)} "
                         "flavors; expected valid JSON with all 15")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    yield {"kind": "shell", "command": "ls -l ~/portal ~/metrics && head -n 3 ~/metrics/usage-week.csv"}
    # The page's flavor list never loads; Firefox's console blames flavors.json.
    yield {"kind": "shell", "command": "python3 -m json.tool ~/portal/flavors.json > /dev/null"}
    yield {"kind": "shell", "command": FIX_CATALOG + "\nN=$(wc -l < /var/log/portal.log)"}
    yield {"kind": "shell", "command": SIZE_VM.replace("{service}", ctx.truth["service"])}
    x, y, w, h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w // 2, "y": y + h - 40}  # an empty part of the page
    yield {"kind": "key", "keys": "F5"}
    yield {"kind": "shell", "command": "timeout 60 sh -c \"until tail -n +$((N + 1)) /var/log/portal.log "
                                       "| grep -q 'GET /flavors.json'; do sleep 0.2; done\"", "timeout": 90}
    yield {"kind": "wait", "seconds": 2}  # the script fills the flavor list
    flavor = [{"kind": "key", "keys": "Down"}] * (ctx.truth["flavor_index"] + 1)  # past "Choose a flavor…"
    yield from fill_form(ctx.truth["window"], [ctx.truth["project"], flavor, f"{ctx.truth['peak_cpu']:.2f}",
                                               f"{ctx.truth['peak_mem']:.2f}"], SERVER_LOG, FORM)
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Web-2",
    title="Size a VM from last week's metrics and request it through the broken cloud portal",
    instruction=(
        "The '{service}' service needs its own VM. ~/metrics/usage-week.csv holds last week's 5-minute usage "
        "samples of all services (cpu_cores, mem_gib). Find the service's peak CPU and peak memory, and pick the "
        "cheapest flavor of the portal's catalog that fits both peaks (vcpus >= peak CPU and ram_gb >= peak "
        "memory). Then request it for project '{project}' in the cloud portal open in Firefox "
        "(http://127.0.0.1:{port}/; its page and catalog are in ~/portal, its script is the portal's own "
        "/static/request.js), giving the two peaks with two decimals. The portal's flavor list does not load: find "
        "out why, fix it in ~/portal, reload the page and send the request from the browser (the desktop's "
        "Firefox), then finish."),
    channels=Channels(
        gui="see the console error in Firefox, reload the fixed page and send the request from the browser",
        cli="find the peaks in the metrics CSV, fix the catalog's JSON and pick the cheapest fitting flavor",
        why_both="the sizing needs data crunching and the fix a source edit, while the request counts only when "
                 "the browser (the desktop account) sends it from the portal's page"),
    setup=setup,
    clauses=(
        Clause("request_sent", "a VM request was sent from the browser (the desktop account) on the portal's page",
               sent_check(FORM, "request"), weight=2.0, critical=True),
        Clause("flavor", "it asks for the cheapest fitting flavor for the right project",
               submitted_check(FORM, "request", _flavor), weight=2.0),
        Clause("peaks", "it states the service's peak CPU and memory",
               submitted_check(FORM, "request", _peaks), weight=2.0),
        Clause("catalog_fixed", "flavors.json is valid JSON with the full catalog", check_catalog),
    ),
    deliverables=(
        record_deliverable("the portal's record of the VM request"),
        Deliverable(CATALOG, "cli", description="the fixed ~/portal/flavors.json"),
    ),
    oracle=oracle,
    profile="full",
    apps=("firefox-esr", "python3"),
    max_steps=60,
    time_budget_s=1200.0,
)
