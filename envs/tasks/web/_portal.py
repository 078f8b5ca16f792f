"""Shared pieces of the Weave-Web tasks: the local portal server, a quiet Firefox profile, the records.

The portal server (fixtures/portal_server.py) runs as root, so the submissions it
records land in a root-only file, each with the executable of the client process
that sent it: a report posted with curl or python is told apart from one filed
in Firefox.
"""

from __future__ import annotations

import json
from typing import Any

from weavegym.envs.guest_client import WindowInfo
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SetupContext
from weavegym.evaluators import Probe

SERVER = "/usr/local/lib/portal/portal_server.py"
RECORDS = f"{PRIVATE_DIR}/portal-records.jsonl"
PROFILE = f"{HOME}/.portal-firefox"

USER_JS = """\
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("browser.startup.homepage_override.mstone", "ignore");
user_pref("browser.aboutwelcome.enabled", false);
user_pref("browser.startup.page", 0);
user_pref("browser.sessionstore.resume_from_crash", false);
user_pref("browser.tabs.warnOnClose", false);
user_pref("browser.warnOnQuit", false);
user_pref("browser.translations.enable", false);
user_pref("browser.cache.disk.enable", false);
user_pref("browser.cache.memory.enable", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("datareporting.healthreport.uploadEnabled", false);
user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
user_pref("app.update.enabled", false);
user_pref("extensions.pocket.enabled", false);
user_pref("startup.homepage_welcome_url", "");
user_pref("startup.homepage_welcome_url.additional", "");
"""

WAIT_FOR_PORT = """python3 - <<'PY'
import time, urllib.request, urllib.error
for _ in range(200):
    try:
        urllib.request.urlopen("http://127.0.0.1:{port}/", timeout=2)
        break
    except urllib.error.HTTPError:
        break
    except OSError:
        time.sleep(0.2)
else:
    raise SystemExit("the portal server on port {port} did not start")
PY"""


def start_server(ctx: SetupContext, port: int, log: str, args: str) -> None:
    """Start one portal server as root (``args``: --site/--records/--form/--cors) and wait for its port."""
    ctx.write_file(SERVER, ctx.fixture(__package__, "fixtures/portal_server.py"), owner="root")
    ctx.make_private_dir()
    ctx.run(["bash", "-c", f"install -m 644 /dev/null {log} && "
                           f"setsid -f python3 {SERVER} --port {port} --log {log} {args} "
                           f">/tmp/portal-server-{port}.err 2>&1 </dev/null && " + WAIT_FOR_PORT.format(port=port)])


def launch_firefox(ctx: SetupContext, url: str, title_regex: str) -> WindowInfo:
    """Firefox on ``url`` with a fresh profile that shows no first-run pages; waits for the page's title."""
    ctx.write_file(f"{PROFILE}/user.js", USER_JS)
    ctx.launch_gui(f"{{as_user}} firefox-esr --no-remote --profile {PROFILE} {url}", name="firefox")
    return ctx.wait_window(title_regex, timeout=400)


def submissions(probe: Probe, form: str) -> list[dict[str, Any]]:
    """Every recorded submission of ``form``: {"form", "data", "client", "time"}."""
    found = []
    for line in (probe.read_text(RECORDS) or "").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("form") == form and isinstance(record.get("data"), dict):
            found.append(record)
    return found


def from_browser(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The data of the last submission sent by Firefox."""
    browser = [r for r in records if str(r.get("client", "")).startswith("firefox")]
    return browser[-1]["data"] if browser else None


def clients(records: list[dict[str, Any]]) -> list[str]:
    return sorted({str(r.get("client") or "unknown") for r in records})
