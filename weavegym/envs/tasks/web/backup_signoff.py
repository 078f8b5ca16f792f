"""Weave-Web-3: verify the nightly backups, fix the sign-off API's CORS setting, sign off from the browser.

Which archive to sign off (the newest one that passes an integrity check) and its
SHA-256 and size need the CLI. The portal page, open in Firefox, posts to a
separate sign-off API whose allowed origin is misconfigured: the browser blocks
the call (a CORS error only its console explains). The fix is a line in the
API's config (~/portal/api.ini, the workspace account's; CLI); the sign-off must
then be recorded from the browser (GUI): the API records each sign-off in a
root-only file with the account that owns the client's socket and its Origin, so
only the desktop account's browser on the portal's page counts (a page the shell
serves elsewhere and allows in api.ini does not), and the page cannot be scripted
from the site dir (see _portal). Seeds draw the archives (name, count, which are
broken and how), the misconfigured origin and the reviewer.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from collections.abc import Iterator, Mapping
from datetime import date, timedelta
from typing import Any

from weavegym.envs.setup_context import HOME, WORKSPACE_USER, SetupContext
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

CONFIG = f"{SITE}/api.ini"
BACKUPS = f"{HOME}/backups"
FIXTURES = "fixtures/signoff"
FORM = "backup-signoffs"
API_LOG = "/var/log/signoff-api.log"
SURNAMES = ("garcia", "nakamura", "okafor", "jensen", "rossi", "haddad", "petrov", "santos", "weber", "quinn",
            "moreau", "kowalski", "tanaka", "varga", "lopez", "fischer", "chen", "diaz", "evans", "ivanova")
PREFIXES = ("backup", "pgdump", "nightly", "db-backup", "shopdb", "erp-backup")
TABLES = ("customers", "orders", "invoices", "stock", "audit_log")

VERIFY = r"""cd ~/backups && for f in $(ls -r *.tar.gz); do
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


def _damage(ctx: SetupContext, data: bytes) -> bytes:
    """An archive that a failed night left behind: cut short, or with a stretch of bytes garbled."""
    if ctx.rng.random() < 0.5:
        return data[: len(data) * int(ctx.rng.integers(40, 80)) // 100]  # the upload was interrupted
    start = len(data) * int(ctx.rng.integers(30, 70)) // 100
    garbled = bytes(int(b) for b in ctx.rng.integers(0, 256, size=64))
    return data[:start] + garbled + data[start + 64:]  # the disk returned bad blocks


def setup(ctx: SetupContext) -> Prepared:
    rng = ctx.rng
    page_port = 8100 + int(rng.integers(0, 400))
    api_port = 8600 + int(rng.integers(0, 300))
    newest = date(2026, 9, 1) + timedelta(days=int(rng.integers(0, 90)))
    prefix = PREFIXES[int(rng.integers(len(PREFIXES)))]
    broken = 1 + int(rng.integers(0, 3))  # the newest 1 to 3 archives are damaged
    good: dict[str, Any] = {}
    for age in range(broken + 2 + int(rng.integers(0, 4))):
        day = newest - timedelta(days=age)
        name = f"{prefix}-{day.isoformat()}.tar.gz"
        data = _archive(ctx, day)
        if age < broken:
            data = _damage(ctx, data)
        elif not good:
            good = {"archive": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        ctx.write_file(f"{BACKUPS}/{name}", data, mode=0o644)
        ctx.run(["touch", "-d", f"{(day + timedelta(days=1)).isoformat()} 02:{10 + age:02d}", f"{BACKUPS}/{name}"])
    origin = f"http://127.0.0.1:{page_port}"
    wrongs = (f"http://localhost:{page_port}", f"http://127.0.0.1:{page_port + 1}", f"http://127.0.0.1:{page_port - 1}",
              f"https://127.0.0.1:{page_port}", f"http://127.0.0.1:{api_port}", "http://127.0.0.1",
              f"http://0.0.0.0:{page_port}", f"http://127.0.1.1:{page_port}")
    wrong = wrongs[int(rng.integers(len(wrongs)))]
    # The API's config is the shell's to fix: the workspace account's. The page's script is root's.
    ctx.write_file(CONFIG, f"[api]\n# The portal page that may call this API from a browser (scheme://host:port)\n"
                           f"allowed_origin = {wrong}\n", owner=WORKSPACE_USER, mode=0o644)
    api = f"http://127.0.0.1:{api_port}"
    write_site(ctx, FIXTURES, banner="#2f5f3a", fill=lambda text: text.replace("{{PREFIX}}", prefix))
    write_static(ctx, "signoff.js", ctx.fixture(__package__, f"{FIXTURES}/signoff.js").decode().replace("{{API}}", api))
    start_server(ctx, page_port, "/var/log/portal.log", f"--site {SITE} --static {STATIC} --connect {api}")
    start_server(ctx, api_port, API_LOG, f"--records {RECORDS} --form {FORM} --cors {CONFIG}")
    window = launch_firefox(ctx, f"{origin}/", r"^Backup sign-off — Ops portal — Mozilla Firefox$")
    reviewer = f"{'abcdefghijklmnoprstvw'[int(rng.integers(21))]}.{SURNAMES[int(rng.integers(len(SURNAMES)))]}"
    return Prepared(params={"page_port": page_port, "api_port": api_port, "reviewer": reviewer},
                    truth={**good, "reviewer": reviewer, "origin": origin, "wrong_origin": wrong,
                           "window": window.geometry})


def _checksum(data: dict[str, Any], truth: Mapping[str, Any]) -> tuple[bool, str]:
    ok = data.get("sha256") == truth["sha256"] and data.get("size") == truth["size"]
    return ok, (f"sha256 {str(data.get('sha256'))[:16]}…, size {data.get('size')}; expected "
                f"{truth['sha256'][:16]}…, {truth['size']}")


def check_config(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    value = probe.ini_value(CONFIG, "api", "allowed_origin")
    found = (value or "").strip().rstrip("/")
    return Verdict.check(found == truth["origin"], f"allowed_origin = {value!r}, expected {truth['origin']!r}")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    yield {"kind": "shell", "command": "ls -l --time-style=long-iso ~/backups ~/portal"}
    yield {"kind": "shell", "command": VERIFY}
    # "Record sign-off" fails with a NetworkError; Firefox's console reports a CORS origin mismatch.
    yield {"kind": "shell", "command": f"cat ~/portal/api.ini; grep -n 'API\\|fetch' {STATIC}/signoff.js"}
    yield {"kind": "shell", "command": f"sed -i 's|^allowed_origin = .*|allowed_origin = {ctx.truth['origin']}|' "
                                       "~/portal/api.ini && cat ~/portal/api.ini"}
    t = ctx.truth
    yield from fill_form(t["window"], [t["archive"], t["sha256"], str(t["size"]), t["reviewer"]], API_LOG, FORM)
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Web-3",
    title="Verify the nightly backups and record the sign-off through a misconfigured API",
    instruction=(
        "~/backups holds the database's nightly backup archives. Find the newest archive that is intact (a "
        "complete, readable .tar.gz) and sign it off in the ops portal open in Firefox "
        "(http://127.0.0.1:{page_port}/; its page is in ~/portal, its script is the portal's own "
        "/static/signoff.js): its file name, SHA-256, size in bytes, and '{reviewer}' as the person who verified "
        "it. The page sends sign-offs to a separate API (http://127.0.0.1:{api_port}, configured by "
        "~/portal/api.ini, which it re-reads on every request), and recording a sign-off from the page currently "
        "fails. Find out why, fix the configuration, and record the sign-off from the browser (the desktop's "
        "Firefox), then finish."),
    channels=Channels(
        gui="see the CORS error in Firefox and record the sign-off from the page",
        cli="test the archives, checksum the intact one and fix the API's allowed origin",
        why_both="the archive checks and the config fix need the shell, while the sign-off counts only when "
                 "the browser (the desktop account) records it from the portal's page"),
    setup=setup,
    clauses=(
        Clause("signoff_recorded", "a sign-off was recorded from the browser (the desktop account) on the portal's "
               "page", sent_check(FORM, "sign-off"), weight=2.0, critical=True),
        Clause("archive", "it names the newest intact archive",
               submitted_check(FORM, "sign-off", field_is("archive", label="signed off")), weight=2.0),
        Clause("checksum", "it gives that archive's SHA-256 and size",
               submitted_check(FORM, "sign-off", _checksum), weight=2.0),
        Clause("reviewer", "it names the requested reviewer",
               submitted_check(FORM, "sign-off", field_is("reviewer", label="verified by"))),
        Clause("config_fixed", "api.ini allows exactly the portal page's origin", check_config),
    ),
    deliverables=(
        record_deliverable("the API's record of the sign-off"),
        Deliverable(CONFIG, "cli", description="the fixed ~/portal/api.ini"),
    ),
    oracle=oracle,
    profile="full",
    apps=("firefox-esr", "python3", "gzip", "sha256sum"),
    max_steps=50,
    time_budget_s=1200.0,
)
