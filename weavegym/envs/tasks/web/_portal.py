"""Shared pieces of the Weave-Web tasks: the local portal server, a quiet Firefox profile, the records.

The portal server (fixtures/portal_server.py) runs as its own unprivileged system
account (PORTAL_USER: no shell, no sudo, no home), so neither episode account can
signal it or write its records, and a path trick in the site dir it serves reaches
nothing that account cannot read anyway (it never ran as root: a root server serving
a user's folder is one symlink swap away from serving /etc/shadow). The submissions
it records land in its own 0700 folder, each with the account that owns the
client's socket and the request's Origin. Firefox runs as the desktop account and the
shell as the workspace account, so a report posted with curl or python from the
shell is told apart from one filed in the browser, whatever the client program is
called (a desktop terminal running curl is caught by the channel rules instead).

The site dir (the pages and data the shell fixes) belongs to the workspace
account; the pages' scripts are root's, served from /static/, and the server's
Content-Security-Policy runs no other script. So nothing the shell writes can make
the browser fill in or send a form by itself: the browser's submission is always
the portal's own script acting on a trusted submit, with values typed into the
page (the scripts clear the fields on load and count only typed input). Only the
desktop account can write Firefox's profile.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from weavegym.envs.setup_context import DESKTOP_USER, HOME, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike
from weavegym.evaluators import Probe, Verdict
from weavegym.evaluators.provenance import Deliverable
from weavegym.machine.guest_client import WindowInfo

SERVER = "/usr/local/lib/portal/portal_server.py"
STATIC = "/usr/local/lib/portal/static"
PORTAL_USER = "weaveportal"
RECORDS_DIR = "/var/lib/weave-portal"  # the portal account's, 0700: neither episode account can list or read it
RECORDS = f"{RECORDS_DIR}/records.jsonl"
PROFILE = f"{HOME}/.portal-firefox"
SITE = f"{HOME}/portal"  # the site dir the server serves: the workspace account's, the shell's to fix

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


def write_static(ctx: SetupContext, name: str, text: str) -> None:
    """A script of the portal's own (root's, read-only to both accounts), served at /static/``name``."""
    ctx.write_file(f"{STATIC}/{name}", text, owner="root", mode=0o644)


def write_site(ctx: SetupContext, fixtures: str, *, banner: str,
               fill: Callable[[str], str] = lambda text: text) -> None:
    """A portal's page and stylesheet in the site dir, and the form helpers every page's script uses.

    The page (``fixtures``/index.html through ``fill``) and the shared stylesheet (in the ``banner`` colour that
    tells the portals apart) are the workspace account's, the shell's to fix. The form helpers
    (fixtures/portal-form.js, served at /static/portal-form.js) are root's, like the page's own script, which
    the task writes with ``write_static``.
    """
    for name, text in (("index.html", ctx.fixture(__package__, f"{fixtures}/index.html").decode()),
                       ("style.css", ctx.fixture(__package__, "fixtures/portal.css").decode())):
        ctx.write_file(f"{SITE}/{name}", fill(text.replace("{{BANNER}}", banner)), owner=WORKSPACE_USER, mode=0o644)
    write_static(ctx, "portal-form.js", ctx.fixture(__package__, "fixtures/portal-form.js").decode())


def start_server(ctx: SetupContext, port: int, log: str, args: str) -> None:
    """Start one portal server as PORTAL_USER (``args``: --site/--static/--connect/--records/--form/--cors).

    The server's code is root's; its log (under /var/log, which no episode account can write, so no
    symlink can be planted there) and its records folder are the portal account's. Waits until it answers.
    """
    ctx.write_file(SERVER, ctx.fixture(__package__, "fixtures/portal_server.py"), owner="root", mode=0o644)
    ctx.run(["bash", "-c", f"""set -e
id -u {PORTAL_USER} >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin {PORTAL_USER}
install -d -m 700 -o {PORTAL_USER} -g {PORTAL_USER} {RECORDS_DIR}
install -m 644 -o {PORTAL_USER} -g {PORTAL_USER} /dev/null {log}
install -m 600 -o {PORTAL_USER} -g {PORTAL_USER} /dev/null /var/log/portal-server-{port}.err
cd / && setsid -f setpriv --reuid={PORTAL_USER} --regid={PORTAL_USER} --clear-groups --inh-caps=-all \
    python3 -I {SERVER} --port {port} --log {log} {args} >>/var/log/portal-server-{port}.err 2>&1 </dev/null
""" + WAIT_FOR_PORT.format(port=port)])


def launch_firefox(ctx: SetupContext, url: str, title_regex: str) -> WindowInfo:
    """Firefox on ``url`` with a fresh profile that shows no first-run pages; waits for the page's title."""
    ctx.write_file(f"{PROFILE}/user.js", USER_JS)
    ctx.launch_gui(f"{{as_user}} firefox-esr --no-remote --profile {PROFILE} {url}", name="firefox")
    return ctx.wait_window(title_regex, timeout=400)


def record_deliverable(what: str) -> Deliverable:
    """The GUI deliverable of a portal task: the server's record of ``what`` the browser sent."""
    return Deliverable(RECORDS, "gui", owner=PORTAL_USER,
                       description=f"{what} (written by the portal server, which notes the sending account)")


def submissions(probe: Probe, form: str) -> list[dict[str, Any]]:
    """Every recorded submission of ``form``: {"form", "data", "client" (account), "client_uid", "time", …}."""
    found = []
    for line in (probe.read_text(RECORDS) or "").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("form") == form and isinstance(record.get("data"), dict):
            found.append(record)
    return found


def from_browser(records: list[dict[str, Any]], origin: str) -> dict[str, Any] | None:
    """The data of the last accepted submission that the browser (a process of the desktop account) sent
    from the portal's page at ``origin`` (a page served from elsewhere, say by the shell, does not count)."""
    browser = [r for r in records
               if r.get("client") == DESKTOP_USER and r.get("origin") == origin and not r.get("refused")]
    return browser[-1]["data"] if browser else None


def describe(records: list[dict[str, Any]]) -> str:
    """Who sent what, for the evidence: e.g. "workspace (origin none, refused), user (origin http://…)"."""
    seen = []
    for r in records:
        what = f"{r.get('client') or 'unknown'} (origin {r.get('origin') or 'none'}" \
               + (f", refused: {r['refused']})" if r.get("refused") else ")")
        if what not in seen:
            seen.append(what)
    return ", ".join(seen) or "nobody"


def check_sent(probe: Probe, form: str, origin: str, what: str) -> tuple[bool, str]:
    """(a submission came from the browser on the portal's page, evidence)."""
    records = submissions(probe, form)
    return (from_browser(records, origin) is not None,
            f"{len(records)} {what}(s) received, from {describe(records)}; expected one from the browser "
            f"(the desktop account, {DESKTOP_USER!r}) on {origin}")



Judge = Callable[[dict[str, Any], Mapping[str, Any]], tuple[bool, str]]


def sent_check(form: str, what: str) -> Callable[[Probe, Mapping[str, Any]], Verdict]:
    """The critical clause of every Web task: a submission of ``form`` came from the browser on the portal."""
    def check(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
        return Verdict.check(*check_sent(probe, form, truth["origin"], what))
    return check


def submitted_check(form: str, what: str, judge: Judge) -> Callable[[Probe, Mapping[str, Any]], Verdict]:
    """A clause over the browser's last accepted submission of ``form``; with none, it fails plainly."""
    def check(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
        data = from_browser(submissions(probe, form), truth["origin"])
        if data is None:
            return Verdict.failed(f"no {what} was sent from the browser")
        return Verdict.check(*judge(data, truth))
    return check


def field_is(field: str, truth_key: str = "", label: str = "") -> Judge:
    """Judge: the submitted ``field`` equals ``truth[truth_key or field]``."""
    def judge(data: dict[str, Any], truth: Mapping[str, Any]) -> tuple[bool, str]:
        found, expected = data.get(field), truth[truth_key or field]
        return found == expected, f"{label or field} {found!r}, expected {expected!r}"
    return judge


def fill_form(window: Sequence[int], fields: Sequence[str | Sequence[ActionLike]], log: str,
              form: str) -> Iterator[ActionLike]:
    """Fill the portal's form by keyboard and send it, then wait until the server logs the POST.

    The click lands on the page banner, above the form, so the first Tab reaches the first field. A field
    is text to type, or the keys that choose it (a select list).
    """
    x, y, width, _height = window
    yield {"kind": "click", "x": x + width // 2, "y": y + 150}
    for value in fields:
        yield {"kind": "key", "keys": "Tab"}
        if isinstance(value, str):
            yield {"kind": "type", "text": value}
        else:
            yield from value
    yield {"kind": "key", "keys": "Return"}
    yield {"kind": "shell", "command": f"timeout 60 sh -c 'until grep -q \"POST /api/{form} \" {log}; "
                                       "do sleep 0.3; done'", "timeout": 90}
