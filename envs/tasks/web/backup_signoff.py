"""Weave-Web-3: verify the nightly backups, fix the sign-off API's CORS setting, sign off from the browser.

Which archive to sign off (the newest one that passes an integrity check) and its
SHA-256 and size need the CLI. The portal page, open in Firefox, posts to a
separate sign-off API whose allowed origin is misconfigured: curl works, but the
browser blocks the call (a CORS error only its console explains). The fix is a
line in the API's config (CLI); the sign-off must then be recorded from the
browser: the API records who sent each sign-off in a root-only file.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from collections.abc import Iterator, Mapping
from datetime import date, timedelta
from typing import Any

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.web._portal import RECORDS, clients, from_browser, launch_firefox, start_server, submissions
from weavegym.evaluators import Clause, Probe, Verdict

SITE = f"{HOME}/portal"
CONFIG = f"{SITE}/api.ini"
BACKUPS = f"{HOME}/backups"
FIXTURES = "fixtures/signoff"
FORM = "backup-signoffs"
REVIEWERS = ("ops-lead", "j.doe", "oncall-2", "m.garcia")
TABLES = ("customers", "orders", "invoices", "stock", "audit_log")

VERIFY = r"""cd ~/backups && for f in $(ls -r backup-*.tar.gz); do
  if gzip -t "$f" 2>/dev/null && tar -tzf "$f" >/dev/null 2>&1; then echo "OK $f $(stat -c %s "$f") $(sha256sum "$f")"
  else echo "BROKEN $f"; fi
done"""


def _archive(ctx: SetupContext, day: date) -> bytes:
    """A small pg_dump-like backup archive of one night."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for table in TABLES:
            rows = [f"{i}\t{table}-{int(ctx.rng.integers(10**6, 10**7))}\t{int(ctx.rng.integers(0, 10**5))}"
                    for i in range(int(ctx.rng.integers(40, 120)))]
            data = (f"-- dump of {table}, {day.isoformat()}\nCOPY {table} FROM stdin;\n" + "\n".join(rows)
                    + "\n\\.\n").encode()
            info = tarfile.TarInfo(f"db-{day.isoformat()}/{table}.sql")
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buffer.getvalue(), mtime=0)


def setup(ctx: SetupContext) -> Prepared:
    page_port = 8100 + int(ctx.rng.integers(0, 400))
    api_port = 8600 + int(ctx.rng.integers(0, 300))
    newest = date(2026, 11, 10) + timedelta(days=int(ctx.rng.integers(0, 18)))
    broken = 1 + int(ctx.rng.integers(0, 2))  # the newest 1 or 2 archives were cut short
    good: dict[str, Any] = {}
    for age in range(6):
        day = newest - timedelta(days=age)
        name = f"backup-{day.isoformat()}.tar.gz"
        data = _archive(ctx, day)
        if age < broken:
            data = data[: len(data) * int(ctx.rng.integers(40, 80)) // 100]  # the upload was interrupted
        elif not good:
            good = {"archive": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        ctx.write_file(f"{BACKUPS}/{name}", data)
        ctx.run(["touch", "-d", f"{(day + timedelta(days=1)).isoformat()} 02:{10 + age:02d}", f"{BACKUPS}/{name}"])
    origin = f"http://127.0.0.1:{page_port}"
    wrong = (f"http://localhost:{page_port}", f"http://127.0.0.1:{page_port + 1}",
             f"https://127.0.0.1:{page_port}")[ctx.seed % 3]
    ctx.write_file(CONFIG, f"[api]\n# The portal page that may call this API from a browser (scheme://host:port)\n"
                           f"allowed_origin = {wrong}\n")
    api = f"http://127.0.0.1:{api_port}"
    for name in ("index.html", "signoff.js", "style.css"):
        text = ctx.fixture(__package__, f"{FIXTURES}/{name}").decode()
        ctx.write_file(f"{SITE}/{name}", text.replace("{{API}}", api))
    start_server(ctx, page_port, "/var/log/portal.log", f"--site {SITE}")
    start_server(ctx, api_port, "/var/log/signoff-api.log", f"--records {RECORDS} --form {FORM} --cors {CONFIG}")
    window = launch_firefox(ctx, f"{origin}/", r"^Backup sign-off — Ops portal — Mozilla Firefox$")
    reviewer = REVIEWERS[ctx.seed % len(REVIEWERS)]
    return Prepared(params={"page_port": page_port, "api_port": api_port, "reviewer": reviewer},
                    truth={**good, "reviewer": reviewer, "origin": origin,
                           "window": [window.x, window.y, window.width, window.height]})


def _signoff(probe: Probe) -> dict[str, Any] | None:
    return from_browser(submissions(probe, FORM))


def check_recorded(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    records = submissions(probe, FORM)
    return Verdict.check(from_browser(records) is not None,
                         f"{len(records)} sign-off(s) received, sent by {clients(records) or 'nobody'}; expected one "
                         "from Firefox")


def check_archive(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    data = _signoff(probe)
    if data is None:
        return Verdict.failed("no sign-off was recorded from the browser")
    return Verdict.check(data.get("archive") == truth["archive"],
                         f"signed off {data.get('archive')!r}, expected {truth['archive']!r} (the newest intact one)")


def check_checksum(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    data = _signoff(probe)
    if data is None:
        return Verdict.failed("no sign-off was recorded from the browser")
    ok = data.get("sha256") == truth["sha256"] and data.get("size") == truth["size"]
    return Verdict.check(ok, f"sha256 {str(data.get('sha256'))[:16]}…, size {data.get('size')}; expected "
                             f"{truth['sha256'][:16]}…, {truth['size']}")


def check_reviewer(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    data = _signoff(probe)
    if data is None:
        return Verdict.failed("no sign-off was recorded from the browser")
    return Verdict.check(data.get("reviewer") == truth["reviewer"],
                         f"verified by {data.get('reviewer')!r}, expected {truth['reviewer']!r}")


def check_config(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    value = probe.ini_value(CONFIG, "api", "allowed_origin")
    found = (value or "").strip().rstrip("/")
    return Verdict.check(found == truth["origin"], f"allowed_origin = {value!r}, expected {truth['origin']!r}")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    yield {"kind": "shell", "command": "ls -l --time-style=long-iso ~/backups ~/portal"}
    yield {"kind": "shell", "command": VERIFY}
    # "Record sign-off" fails with a NetworkError; Firefox's console reports a CORS origin mismatch.
    yield {"kind": "shell", "command": "cat ~/portal/api.ini; grep -n fetch ~/portal/signoff.js"}
    yield {"kind": "shell", "command": f"sed -i 's|^allowed_origin = .*|allowed_origin = {ctx.truth['origin']}|' "
                                       "~/portal/api.ini && cat ~/portal/api.ini"}
    x, _y, w, _h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w // 2, "y": ctx.truth["window"][1] + 150}  # the page banner, above the form
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": ctx.truth["archive"]}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": ctx.truth["sha256"]}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": str(ctx.truth["size"])}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": ctx.truth["reviewer"]}
    yield {"kind": "key", "keys": "Return"}
    yield {"kind": "shell", "command": "timeout 60 sh -c 'until xdotool search --name \"^Sign-off #[0-9]+ recorded\" "
                                       ">/dev/null; do sleep 0.3; done'", "timeout": 90}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Web-3",
    title="Verify the nightly backups and record the sign-off through a misconfigured API",
    instruction=(
        "~/backups holds the database's nightly backup archives. Find the newest archive that is intact (a "
        "complete, readable .tar.gz) and sign it off in the ops portal open in Firefox "
        "(http://127.0.0.1:{page_port}/, served from ~/portal): its file name, SHA-256, size in bytes, and "
        "'{reviewer}' as the person who verified it. The page sends sign-offs to a separate API "
        "(http://127.0.0.1:{api_port}, configured by ~/portal/api.ini, which it re-reads on every request), and "
        "recording a sign-off from the page currently fails. Find out why, fix the configuration, and record the "
        "sign-off from the browser, then finish."),
    channels=Channels(
        gui="see the CORS error in Firefox and record the sign-off from the page",
        cli="test the archives, checksum the intact one and fix the API's allowed origin",
        why_both="the archive checks and the config fix need the shell, while the sign-off counts only when "
                 "recorded from the browser"),
    setup=setup,
    clauses=(
        Clause("signoff_recorded", "a sign-off was recorded from Firefox", check_recorded, weight=2.0,
               critical=True),
        Clause("archive", "it names the newest intact archive", check_archive, weight=2.0),
        Clause("checksum", "it gives that archive's SHA-256 and size", check_checksum, weight=2.0),
        Clause("reviewer", "it names the requested reviewer", check_reviewer),
        Clause("config_fixed", "api.ini allows exactly the portal page's origin", check_config),
    ),
    oracle=oracle,
    profile="full",
    apps=("firefox-esr", "python3", "gzip", "sha256sum"),
    max_steps=50,
    time_budget_s=1200.0,
)
