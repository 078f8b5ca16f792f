"""The service repository of Weave-DevOps-5, generated from a seed (no TASK here).

``plan_history`` decides everything on the host: the service and its four endpoints, a history of 30-60
commits with release tags, the one commit that made the incident's endpoint slow (the culprit), two
other endpoints' regressions (decoys: the shell alone sees three endpoints over budget at the tip and
cannot tell which one the incident is about), and what the Release Dashboard shows per release.
``fast_import_stream`` turns the plan into a `git fast-import` stream with fixed author and committer
dates, so the commit hashes are a function of the seed alone; setup imports it in the guest and takes the
hashes from what git made. Every file is rendered whole from a small state, so a commit's diff is exactly
the lines it means to change, and the culprit's line stays clear of later edits: ``git revert`` of it
applies cleanly on the tip.

The latency check is exact, not timed: the service's database client adds each call's cost to a
simulated clock, so `python3 checks/latency.py ENDPOINT` gives the same verdict on every machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

SERVICES = ("storefront", "fulfil", "ledger", "marketplace", "dispatch", "bookings")
ENDPOINTS = ("orders", "search", "billing", "users", "catalog", "invoices", "shipping", "reviews")
AUTHORS = ("Dana Ortiz <dana@dev.example>", "Sam Keller <sam@dev.example>", "Priya Natarajan <priya@dev.example>",
           "Lee Huang <lee@dev.example>", "Mina Sato <mina@dev.example>", "Tom Becker <tom@dev.example>")
FAST = '    rows = db.batch("{e}", keys)'
# How a commit makes an endpoint slow, and subjects that do not say so.
SLOW = {
    "loop": ('    rows = [db.query("{e}", key) for key in keys]',
             ("{e}: load rows one at a time", "{e}: simplify row loading", "{e}: fetch rows through query()")),
    "scan": ('    rows = db.scan("{e}", keys)',
             ("{e}: look rows up with scan()", "{e}: read rows by filter", "{e}: use the scan helper")),
}
DOC_LINES = ("Run the latency check before every release.", "Budgets live in checks/budgets.ini.",
             "Each endpoint is one module under app/.", "Releases are tagged on main.",
             "The database client is app/db.py.", "Page sizes are per endpoint.",
             "Ask in #platform before raising a budget.", "Timeouts are in app/settings.py.")
RUNBOOK_LINES = ("Roll back by deploying the previous tag.", "Page the on-call engineer for p95 alerts.",
                 "Check the dashboard after each deploy.", "Keep one release per week at most.",
                 "Drain traffic before a schema change.", "Warm the cache after a restart.")
WORDS = ("label", "summary", "line", "caption", "title", "badge", "tooltip", "preview", "digest", "note")


@dataclass
class Commit:
    subject: str
    author: str
    when: int  # seconds since the epoch, UTC: author and committer date
    files: dict[str, str] = field(default_factory=dict)  # path -> whole new content
    tag: str = ""


DB_PY = '''"""The database client, as the latency check sees it: each call adds its cost to a simulated clock (ms)."""

QUERY_MS = 4.0
BATCH_MS = 6.0
PER_KEY_MS = 0.25
SCAN_MS = 35.0


class Database:
    def __init__(self, tables: dict) -> None:
        self.tables = tables
        self.elapsed_ms = 0.0

    def query(self, table: str, key: int) -> dict | None:
        self.elapsed_ms += QUERY_MS
        return self.tables[table].get(key)

    def batch(self, table: str, keys: list) -> list:
        self.elapsed_ms += BATCH_MS + PER_KEY_MS * len(keys)
        return [self.tables[table].get(key) for key in keys]

    def scan(self, table: str, keys: list) -> list:
        self.elapsed_ms += SCAN_MS + PER_KEY_MS * len(self.tables[table])
        wanted = set(keys)
        return [row for key, row in self.tables[table].items() if key in wanted]
'''
CHECK_PY = '''"""Replay a fixed workload against one endpoint and compare its p95 latency with the endpoint's budget.

Usage (in the repository): python3 checks/latency.py ENDPOINT   (orders, /orders and ORDERS are one endpoint)
Exit status 0: within budget; 1: over budget (git bisect run counts that as bad); 128: no such endpoint.
"""

import configparser
import importlib
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.dont_write_bytecode = True

from app.db import Database  # noqa: E402


class Tables(dict):
    """Every table the handlers ask for: 400 rows with ids 0-399."""

    def __missing__(self, name: str) -> dict:
        rng = random.Random(name)
        self[name] = {key: {"id": key, "amount": rng.randint(1, 500)} for key in range(400)}
        return self[name]


def main() -> int:
    budgets = configparser.ConfigParser()
    budgets.read(ROOT / "checks" / "budgets.ini")
    endpoint = sys.argv[1].strip("/").lower() if len(sys.argv) == 2 else ""
    if not budgets.has_option("p95_ms", endpoint):
        known = ", ".join(budgets.options("p95_ms"))
        print(f"usage: python3 checks/latency.py ENDPOINT (one of: {known})", file=sys.stderr)
        return 128  # no verdict: git bisect run stops here instead of calling the commit bad
    budget = budgets.getfloat("p95_ms", endpoint)
    handler = importlib.import_module(f"app.{endpoint}")
    rng, tables, times = random.Random(2026), Tables(), []
    for _ in range(60):
        db = Database(tables)
        handler.handle(db, {"keys": rng.sample(range(400), rng.randint(1, 30))})
        times.append(db.elapsed_ms)
    p95 = sorted(times)[int(0.95 * len(times)) - 1]
    verdict = "OK" if p95 <= budget else "OVER BUDGET"
    print(f"{endpoint}: p95 {p95:.1f} ms, budget {budget:.0f} ms: {verdict}")
    return 0 if p95 <= budget else 1


if __name__ == "__main__":
    sys.exit(main())
'''
SETTINGS_KEYS = ("TIMEOUT_S", "RETRIES", "POOL_SIZE")


def module_text(endpoint: str, state: dict[str, Any]) -> str:
    """An endpoint's module: the handler (its row-loading line fast or slow), then appended helpers."""
    line = FAST if state["slow"] is None else SLOW[state["slow"]][0]
    text = (f'"""The /{endpoint} endpoint."""\n\nfrom app.db import Database\n\nPAGE_SIZE = {state["page"]}\n\n\n'
            "def handle(db: Database, request: dict) -> dict:\n"
            f'    """Answer one /{endpoint} request: its rows, summed up."""\n'
            '    keys = request["keys"][:PAGE_SIZE]\n'
            f"{line.format(e=endpoint)}\n"
            '    total = sum(row["amount"] for row in rows if row)\n'
            '    return {"count": len(rows), "amount": total}\n')
    for name in state["helpers"]:
        text += (f"\n\ndef {name}(row: dict) -> str:\n"
                 f'    """The row as a short {name.split("_")[0]} for the logs."""\n'
                 '    return f"{row[\'id\']}: {row[\'amount\']}"\n')
    return text


def _settings_text(values: dict[str, int]) -> str:
    return '"""Service settings."""\n\n' + "".join(f"{k} = {v}\n" for k, v in values.items())


def _readme(service: str, lines: list[str]) -> str:
    return f"# {service}\n\nThe {service} API service.\n\n" + "".join(f"- {line}\n" for line in lines)


def _date(when: int) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d")


@dataclass
class History:
    service: str
    endpoints: list[str]
    incident: str
    commits: list[Commit]
    tags: list[tuple[str, int]]  # (name, commit index), oldest first
    first_bad: int  # index into tags: the first release the dashboard marks DEGRADED
    culprit: int  # commit index
    decoys: dict[str, int]  # other endpoints' regressions: endpoint -> commit index
    budgets: dict[str, int]
    releases: list[list[Any]]  # what the dashboard shows: [tag, date, p95 ms, status]

    @property
    def last_good(self) -> str:
        return self.tags[self.first_bad - 1][0]

    @property
    def first_bad_tag(self) -> str:
        return self.tags[self.first_bad][0]


def plan_history(rng: np.random.Generator, feasible: bool) -> History:
    """The seed's history. Feasible: the culprit lies between the last good and the first bad release.
    Infeasible: it lies before an earlier release, so the "last good" release already fails the check."""
    service = SERVICES[int(rng.integers(len(SERVICES)))]
    endpoints = [str(e) for e in rng.choice(ENDPOINTS, size=4, replace=False)]
    incident, decoy_names = endpoints[0], endpoints[1:3]
    releases = int(rng.integers(6, 10))
    blocks = [int(rng.integers(4, 7)) for _ in range(releases)]  # ordinary commits before each release
    trailing = int(rng.integers(1, 4))
    first_bad = int(rng.integers(2, releases))
    # Commit indices: 0 is the initial commit; block r's commits come just before release r's commit.
    starts, index = [], 1
    for size in blocks:
        starts.append(index)
        index += size + 1
    block_of = {r: list(range(starts[r], starts[r] + blocks[r])) for r in range(releases)}
    tail = list(range(index, index + trailing))
    total = index + trailing
    where = first_bad if feasible else int(rng.integers(1, first_bad))
    culprit = int(rng.choice(block_of[where]))
    ordinary = [i for r in range(releases) for i in block_of[r]] + tail
    free = [i for i in ordinary if i != culprit]
    decoys = {name: int(i) for name, i in zip(decoy_names, rng.choice(free, size=2, replace=False), strict=True)}
    budgets = {e: int(rng.integers(20, 31)) for e in endpoints}
    minor = int(rng.integers(3, 30))
    tag_names = [f"2.{minor + r}.0" for r in range(releases)]
    release_at = {starts[r] + blocks[r]: r for r in range(releases)}
    commits = _commits(rng, service, endpoints, budgets, total, culprit, decoys, release_at, tag_names)
    tags = [(tag_names[r], starts[r] + blocks[r]) for r in range(releases)]
    rows = []
    for r, (name, at) in enumerate(tags):
        budget = budgets[incident]
        p95 = (budget * rng.uniform(0.45, 0.85)) if r < first_bad else (budget * rng.uniform(2.5, 6.0))
        rows.append([name, _date(commits[at].when), round(p95), "OK" if r < first_bad else "DEGRADED"])
    return History(service, endpoints, incident, commits, tags, first_bad, culprit, decoys, budgets, rows)


def _commits(rng: np.random.Generator, service: str, endpoints: list[str], budgets: dict[str, int], total: int,
             culprit: int, decoys: dict[str, int], release_at: dict[int, int], tag_names: list[str]
             ) -> list[Commit]:
    """Render the history: every commit's subject, author, date and the whole new text of what it changes."""
    states = {e: {"page": int(rng.integers(5, 13)) * 10, "slow": None, "helpers": []} for e in endpoints}
    settings = {"TIMEOUT_S": int(rng.integers(5, 31)), "RETRIES": int(rng.integers(1, 4)),
                "POOL_SIZE": int(rng.integers(4, 17))}
    docs, runbook, changes = [], [], []
    when = int(datetime(2026, int(rng.integers(3, 7)), int(rng.integers(1, 28)), 9, tzinfo=UTC).timestamp())
    slow_by_commit = {culprit: endpoints[0], **{i: e for e, i in decoys.items()}}
    initial = {"README.md": _readme(service, docs), "VERSION": "2.0.0\n", ".gitignore": "__pycache__/\n",
               "CHANGELOG.md": "# Changelog\n", "app/__init__.py": "", "app/db.py": DB_PY,
               "app/settings.py": _settings_text(settings), "checks/latency.py": CHECK_PY,
               "checks/budgets.ini": "[p95_ms]\n" + "".join(f"{e} = {b}\n" for e, b in sorted(budgets.items())),
               **{f"app/{e}.py": module_text(e, states[e]) for e in endpoints}}
    commits = [Commit(f"Initial {service} service", AUTHORS[0], when, initial)]
    for i in range(1, total):
        when += int(rng.integers(2, 30)) * 3600 + int(rng.integers(0, 3600))
        author = AUTHORS[int(rng.integers(len(AUTHORS)))]
        if i in release_at:
            tag = tag_names[release_at[i]]
            log = "".join(f"- {c}\n" for c in changes[-4:]) or "- maintenance\n"
            changes.clear()
            body = f"# Changelog\n\n## {tag} ({_date(when)})\n{log}"
            previous = next(c.files["CHANGELOG.md"] for c in reversed(commits) if "CHANGELOG.md" in c.files)
            body += previous.removeprefix("# Changelog\n")
            commits.append(Commit(f"Release {tag}", author, when, {"VERSION": f"{tag}\n", "CHANGELOG.md": body},
                                  tag))
            continue
        if i in slow_by_commit:
            endpoint = slow_by_commit[i]
            style = str(rng.choice(sorted(SLOW)))
            states[endpoint]["slow"] = style
            subjects = SLOW[style][1]
            subject = subjects[int(rng.integers(len(subjects)))].format(e=endpoint)
            files = {f"app/{endpoint}.py": module_text(endpoint, states[endpoint])}
        else:
            subject, files = _noise(rng, endpoints, states, settings, docs, runbook, service)
        changes.append(subject)
        commits.append(Commit(subject, author, when, files))
    return commits


def _noise(rng: np.random.Generator, endpoints: list[str], states: dict[str, dict[str, Any]],
           settings: dict[str, int], docs: list[str], runbook: list[str], service: str) -> tuple[str, dict[str, str]]:
    """An ordinary commit: a helper, a page size, a setting or a line of documentation."""
    kind = ("helper", "page", "settings", "docs", "runbook")[int(rng.choice(5, p=[0.35, 0.2, 0.15, 0.15, 0.15]))]
    endpoint = endpoints[int(rng.integers(len(endpoints)))]
    state = states[endpoint]
    if kind == "helper":
        name = f"{WORDS[int(rng.integers(len(WORDS)))]}_{len(state['helpers']) + 1}"
        state["helpers"].append(name)
        return f"{endpoint}: add {name}()", {f"app/{endpoint}.py": module_text(endpoint, state)}
    if kind == "page":
        state["page"] = int(rng.choice([p for p in range(50, 130, 10) if p != state["page"]]))
        return f"{endpoint}: page size {state['page']}", {f"app/{endpoint}.py": module_text(endpoint, state)}
    if kind == "settings":
        key = SETTINGS_KEYS[int(rng.integers(len(SETTINGS_KEYS)))]
        settings[key] += int(rng.integers(1, 4))
        return f"settings: {key.lower()} {settings[key]}", {"app/settings.py": _settings_text(settings)}
    if kind == "docs":
        docs.append(DOC_LINES[int(rng.integers(len(DOC_LINES)))])
        return "docs: README notes", {"README.md": _readme(service, docs)}
    runbook.append(RUNBOOK_LINES[int(rng.integers(len(RUNBOOK_LINES)))])
    return "runbook: on-call notes", {"docs/runbook.md": "# Runbook\n\n" + "".join(f"- {x}\n" for x in runbook)}


def fast_import_stream(history: History) -> bytes:
    """The history as `git fast-import` input: commit i is mark i+1, tags are lightweight refs."""
    out = bytearray()

    def data(text: str) -> None:
        raw = text.encode()
        out.extend(f"data {len(raw)}\n".encode() + raw + b"\n")

    for i, commit in enumerate(history.commits):
        who = f"{commit.author} {commit.when} +0000"
        out.extend(f"commit refs/heads/main\nmark :{i + 1}\nauthor {who}\ncommitter {who}\n".encode())
        data(commit.subject + "\n")
        for path, text in sorted(commit.files.items()):
            out.extend(f"M 100644 inline {path}\n".encode())
            data(text)
    for name, at in history.tags:
        out.extend(f"reset refs/tags/{name}\nfrom :{at + 1}\n\n".encode())
    return bytes(out)


def build_spec(history: History, repo: str, stream: str) -> str:
    """The JSON the guest's build script reads (fixtures/build_release_repo.py)."""
    return json.dumps({"repo": repo, "stream": stream, "culprit_mark": history.culprit + 1,
                       "name": "Weave User", "email": f"user@{history.service}.example"})
