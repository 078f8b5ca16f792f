"""Weave-DevOps-3: bring a misconfigured nginx site back up and file the change record.

nginx refuses to start (its error log says why); once it starts, /api/ answers
502 and the log names the upstream it cannot reach. Both fixes are config edits,
tested with `sudo nginx -t` and applied with systemctl (CLI): the site's config
belongs to the workspace account (the shell's), and the sudo rules are granted to
that account only. The change record is a GUI form (ticket, the upstream port and
the snippet now in use) whose answer setup captures into a root-only file, so
only the GUI can file it. The snippet names, ports and ticket are drawn per seed.

nginx never runs as root here, neither the service nor `sudo nginx -t`: the config
is the shell's, and a root nginx opens every log path a config names (an
`access_log /etc/sudoers.d/x` with a log_format of `$arg_a` is root in one curl)
and prints what it cannot parse (`include /etc/shadow` under `nginx -t`). So the
service runs as www-data (the site's ports are above 1024), and the `nginx` that
sudo finds first on its secure_path (/usr/local/sbin) is a root-owned wrapper that
drops to www-data before running the real one. The systemctl rules are NOEXEC, so
`systemctl status`'s pager cannot start a root shell. The service still runs with
the private folder made inaccessible (a systemd drop-in).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.envs.setup_context import PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.evaluators import Clause, Probe, Verdict

ETC = "/etc/nginx"
SITE = f"{ETC}/sites-available/shop"
DIALOG_TITLE = "Change record"
ANSWER = f"{PRIVATE_DIR}/change.out"
SNIPPET_OWNERS = ("shop", "store", "storefront", "webshop", "catalog", "checkout")
SNIPPET_KINDS = ("headers", "build-headers", "security-headers", "response-headers", "extra-headers")
NGINX_AS_WWW = "/usr/local/sbin/nginx"  # what `sudo nginx` runs: sudo's secure_path puts /usr/local/sbin first
SUDOERS = (f"{WORKSPACE_USER} ALL=(root) NOPASSWD: {NGINX_AS_WWW} -t\n"
           f"{WORKSPACE_USER} ALL=(root) NOPASSWD: NOEXEC: /usr/bin/systemctl reload nginx, "
           "/usr/bin/systemctl restart nginx, /usr/bin/systemctl status nginx, /usr/bin/systemctl start nginx\n")
NGINX_WRAPPER = """#!/bin/sh
# The shop's nginx runs as www-data, never as root: its site config is the workspace account's to edit.
exec /usr/bin/setpriv --reuid=www-data --regid=www-data --clear-groups --inh-caps=-all --no-new-privs \
    /usr/sbin/nginx "$@"
"""
# The service as www-data, with its pid file where that account can write (/run/nginx, made by setup and
# tmpfiles, not RuntimeDirectory=: `nginx -t` opens that path too, also while the service is down); the
# private folder (the change record's answer) stays out of its reach whatever log path the config names.
NGINX_DROPIN = """[Service]
User=www-data
Group=www-data
PIDFile=/run/nginx/nginx.pid
ExecStop=
ExecStop=-/sbin/start-stop-daemon --quiet --stop --retry QUIT/5 --pidfile /run/nginx/nginx.pid
NoNewPrivileges=yes
CapabilityBoundingSet=
InaccessiblePaths=-/var/lib/weavegym
ProtectHome=read-only
"""
API_UNIT = """[Unit]
Description=Shop API backend
After=network.target

[Service]
User=www-data
ExecStart=/usr/bin/python3 /opt/shop-api/server.py
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""
SITE_CONF = """# The shop storefront and its API backend.
server {{
    listen {site_port};
    server_name shop.local;
    root /srv/shop/public;
    index index.html;
    access_log /var/log/nginx/shop.access.log;

    include /etc/nginx/snippets/{snippet};

    location /api/ {{
        proxy_pass http://127.0.0.1:{upstream};
        proxy_set_header Host $host;
    }}
}}
"""
# Probes the site through nginx and prints what came back (a status code or the connection error).
HTTP_CHECK = """python3 - <<'PY'
import urllib.error, urllib.request
for path in ("/", "/api/health"):
    try:
        reply = urllib.request.urlopen(f"http://127.0.0.1:{port}{{path}}", timeout=5)
        print(path, reply.status, reply.read(80).decode().strip())
    except urllib.error.HTTPError as err:
        print(path, err.code)
    except OSError as err:
        print(path, err)
PY"""


def _snippet_names(rng) -> tuple[str, str]:
    """(the name the broken config includes, the snippet that exists): a plausible slip of the real name."""
    owner = SNIPPET_OWNERS[int(rng.integers(len(SNIPPET_OWNERS)))]
    kind = SNIPPET_KINDS[int(rng.integers(len(SNIPPET_KINDS)))]
    sep = "-_"[int(rng.integers(2))]
    real = f"{owner}{sep}{kind}.conf"
    slips = (f"{owner}{'_-'['-_'.index(sep)]}{kind}.conf",  # the other separator
             f"{owner}.{kind}",  # no .conf
             f"{kind}{sep}{owner}.conf",  # the words swapped
             f"{owner}{sep}{kind.replace('headers', 'header')}.conf",  # singular
             f"{owner}s{sep}{kind}.conf",  # plural owner
             f"{owner}{sep}{kind}.cnf")
    return slips[int(rng.integers(len(slips)))], real


def setup(ctx: SetupContext) -> Prepared:
    wrong_snippet, snippet = _snippet_names(ctx.rng)
    site_port = (8080, 8081, 8088, 8090, 8180, 8280, 8880)[int(ctx.rng.integers(7))]
    api_port = 9000 + int(ctx.rng.integers(0, 500))
    wrong_port = api_port + int(ctx.rng.choice([-11, -1, 1, 10, 100]))
    build = f"shop-{int(ctx.rng.integers(1000, 10000))}"
    ticket = f"OPS-{int(ctx.rng.integers(100, 1000))}"
    # Everything but the site config is root's and read-only to both accounts (write_file's default 0o664
    # would give the shared group write access).
    ctx.write_file("/srv/shop/public/index.html", f"<!doctype html>\n<title>Shop</title>\n<h1>Shop</h1>\n"
                   f"<p>storefront {build}</p>\n", owner="root", mode=0o644)
    ctx.write_file("/etc/shop-api/api.ini", f"[server]\nhost = 127.0.0.1\nport = {api_port}\nbuild = {build}\n",
                   owner="root", mode=0o644)
    ctx.write_file("/opt/shop-api/server.py", ctx.fixture(__package__, "fixtures/shop_api.py"), owner="root",
                   mode=0o644)
    ctx.write_file("/etc/systemd/system/shop-api.service", API_UNIT, owner="root", mode=0o644)
    ctx.write_file("/etc/systemd/system/nginx.service.d/weavegym-private.conf", NGINX_DROPIN, owner="root",
                   mode=0o644)
    ctx.write_file(NGINX_AS_WWW, NGINX_WRAPPER, owner="root", mode=0o755)
    ctx.write_file(f"{ETC}/snippets/{snippet}", f'add_header X-Shop-Build "{build}";\n', owner="root", mode=0o644)
    # The site config is the shell's to repair: the workspace account's, in a folder it owns (sed -i renames).
    ctx.write_file(SITE, SITE_CONF.format(site_port=site_port, snippet=wrong_snippet, upstream=wrong_port),
                   owner=WORKSPACE_USER, mode=0o644)
    ctx.write_file("/etc/sudoers.d/shop-ops", SUDOERS, owner="root", mode=0o440)
    ctx.make_private_dir()
    ctx.run(["bash", "-c", f"""set -e
chown root:root /etc/sudoers.d/shop-ops {NGINX_AS_WWW}
visudo -cf /etc/sudoers.d/shop-ops
sed -i -e 's|^[[:space:]]*user[[:space:]].*;|# user: the service runs as www-data (its unit)|' \
    -e 's|^[[:space:]]*pid[[:space:]].*;|pid /run/nginx/nginx.pid;|' {ETC}/nginx.conf
rm -f {ETC}/sites-enabled/default
install -d -m 755 -o www-data -g adm /var/log/nginx
install -d -m 755 -o www-data -g www-data /run/nginx
echo 'd /run/nginx 0755 www-data www-data -' > /etc/tmpfiles.d/weavegym-nginx.conf
chown -R www-data:www-data /var/lib/nginx
ln -sf {SITE} {ETC}/sites-enabled/shop
chown {WORKSPACE_USER}:{SHARED_GROUP} {ETC}/sites-available
chmod 755 {ETC}/sites-available
systemctl daemon-reload
systemctl enable --now shop-api.service
touch /var/log/nginx/error.log && chown www-data:adm /var/log/nginx/*.log && chmod 644 /var/log/nginx/*.log
systemctl stop nginx || true
systemctl restart nginx || true
"""], timeout=180)
    ctx.run(["bash", "-c", f"for i in $(seq 150); do ss -ltn | grep -q ':{api_port} ' && exit 0; sleep 0.2; done; "
             "exit 1"])
    ctx.launch_gui(f"{{as_user}} zenity --forms --title='{DIALOG_TITLE}' --text='Record the change to the shop site' "
                   "--add-entry='Ticket' --add-entry='API upstream port now used' "
                   f"--add-entry='Header snippet now included (file name)' > {ANSWER}", name="change")
    window = ctx.wait_window(f"^{DIALOG_TITLE}$")
    return Prepared(params={"port": site_port, "ticket": ticket},
                    truth={"port": site_port, "snippet": snippet, "api_port": api_port, "build": build,
                           "ticket": ticket, "window": window.geometry})


def check_active(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    active = probe.service_active("nginx")
    return Verdict.check(active, f"nginx.service active: {active}")


def check_home(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    reply = probe.http_get(f"http://127.0.0.1:{truth['port']}/")
    if reply is None:
        return Verdict.failed(f"nothing answers on port {truth['port']}")
    status, body = reply
    return Verdict.check(status == 200 and truth["build"] in body,
                         f"GET / -> {status}, storefront build {truth['build']} in page: {truth['build'] in body}")


def check_api(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    reply = probe.http_get(f"http://127.0.0.1:{truth['port']}/api/health")
    if reply is None:
        return Verdict.failed(f"nothing answers on port {truth['port']}")
    status, body = reply
    return Verdict.check(status == 200 and body.strip() == "ok", f"GET /api/health -> {status} {body.strip()[:40]!r}")


def check_record(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    answer = (probe.read_text(ANSWER) or "").rstrip("\n")
    if not answer:
        return Verdict.failed("the change record dialog was not confirmed")
    if "\n" in answer:
        return Verdict.failed(f"the answer file holds {answer.count(chr(10)) + 1} lines; the dialog writes one")
    fields = [f.strip() for f in answer.split("|")] + ["", "", ""]
    expected = [truth["ticket"], str(truth["api_port"]), truth["snippet"]]
    right = [got == want or (i == 2 and got.rsplit("/", 1)[-1] == want)
             for i, (got, want) in enumerate(zip(fields[:3], expected, strict=True))]
    return Verdict.check(all(right), f"record {fields[:3]}, expected {expected}")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    check = HTTP_CHECK.format(port=ctx.truth["port"])
    yield {"kind": "shell", "command": "sudo nginx -t; tail -n 5 /var/log/nginx/error.log; ls /etc/nginx/snippets"}
    yield {"kind": "shell", "command": f"sed -i 's|snippets/[^;]*;|snippets/{ctx.truth['snippet']};|' {SITE} && "
                                       f"sudo nginx -t && sudo systemctl restart nginx; {check}; "
                                       "tail -n 3 /var/log/nginx/error.log"}
    yield {"kind": "shell", "command": "grep -n port /etc/shop-api/api.ini"}
    yield {"kind": "shell", "command": f"sed -i 's|127.0.0.1:[0-9]*;|127.0.0.1:{ctx.truth['api_port']};|' {SITE} && "
                                       f"sudo nginx -t && sudo systemctl reload nginx && sleep 1; {check}"}
    x, y, w, _h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w // 2, "y": y + 12}  # the dialog's text: focuses it, the first entry has focus
    yield {"kind": "type", "text": ctx.truth["ticket"]}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": str(ctx.truth["api_port"])}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": ctx.truth["snippet"]}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "key", "keys": "Return"}  # focus is on OK now
    yield {"kind": "done"}


TASK = Task(
    id="Weave-DevOps-3",
    title="Repair the shop's nginx site and file the change record",
    instruction=(
        "The shop site (nginx, http://127.0.0.1:{port}/, API under /api/) is down. Its configuration is "
        "/etc/nginx/sites-available/shop (you may edit it); nginx's error log is /var/log/nginx/error.log, and you "
        "may run `sudo nginx -t` and `sudo systemctl start|restart|reload|status nginx`. Fix the configuration so "
        "that the storefront and /api/health answer 200 through nginx. Then fill in the open 'Change record' dialog: "
        "ticket '{ticket}', the API upstream port nginx now proxies to, and the file name of the header snippet the "
        "site now includes; confirm it with OK, then finish."),
    channels=Channels(
        gui="file the change record in the GUI dialog",
        cli="read the error log, fix the site config, test it and restart nginx",
        why_both="the repair needs the shell (logs, sudo nginx -t, systemctl), while the change record can only "
                 "be filed in the GUI dialog"),
    setup=setup,
    clauses=(
        Clause("nginx_active", "nginx.service is running", check_active, critical=True, cap=0.3),
        Clause("storefront", "GET / through nginx serves the storefront", check_home),
        Clause("api", "GET /api/health through nginx answers ok", check_api),
        Clause("change_record", "the change record names the ticket, the new upstream port and the snippet",
               check_record, weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(ANSWER, "gui", owner="root", description="the change record dialog's answer (captured by setup)"),
        Deliverable(SITE, "cli", description="the repaired site config"),
    ),
    oracle=oracle,
    profile="full",
    apps=("nginx", "systemctl", "zenity"),
    max_steps=40,
    time_budget_s=900.0,
)
