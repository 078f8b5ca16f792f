"""Weave-DevOps-1: bring a crashed service back from its log, then confirm its build in a deploy console.

The crash cause is only in the service's log and the fix is a config edit and
a restart (CLI). The deployment is confirmed in a GUI dialog with the build id
the *running* service reports; the dialog's answer lands in a root-only file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.evaluators import Clause, Probe, Verdict

APP = f"{HOME}/inventory"
CONFIG = f"{APP}/inventory.ini"
LOG = f"{APP}/server.log"
ANSWER = f"{PRIVATE_DIR}/deploy.out"
DIALOG_TITLE = "Deploy console"

RUN_SH = f"""#!/bin/sh
# Starts the inventory service in the background; its output goes to {LOG}.
cd {APP} && setsid python3 server.py >> {LOG} 2>&1 < /dev/null &
"""


# Polls /version until the restarted service answers (at most 20 s) and prints it.
WAIT_FOR_VERSION = """python3 - <<'PY'
import time, urllib.request
for _ in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:{port}/version", timeout=2).read().decode().strip())
        break
    except OSError:
        time.sleep(0.2)
PY"""


def setup(ctx: SetupContext) -> Prepared:
    port = 8000 + int(ctx.rng.integers(0, 1000))
    build = f"build-{int(ctx.rng.integers(1000, 10000))}"
    data_file = f"{APP}/stock.json"
    broken = f"{APP}/{('stock.jsn', 'stok.json', 'data/stock.json')[ctx.seed % 3]}"
    ctx.write_file(f"{APP}/server.py", ctx.fixture(__package__, "fixtures/inventory_server.py"))
    ctx.write_file(f"{APP}/run.sh", RUN_SH, mode=0o755)
    ctx.write_file(f"{APP}/BUILD", build + "\n")
    ctx.write_file(data_file, '{"widgets": 12, "gears": 7}\n')
    ctx.write_file(CONFIG, f"[server]\nhost = 127.0.0.1\nport = {port}\n\n[data]\nfile = {broken}\n")
    ctx.run([f"{APP}/run.sh"], user=ctx.user)  # it crashes and says why in the log
    ctx.run(["bash", "-c", f"for i in $(seq 100); do grep -q FATAL {LOG} && exit 0; sleep 0.1; done; exit 1"])
    ctx.make_private_dir()
    ctx.launch_gui(f"{{as_user}} zenity --entry --title='{DIALOG_TITLE}' "
                   "--text='Build id reported by the running inventory service:' "
                   f"> {ANSWER}", name="deploy")
    window = ctx.wait_window(f"^{DIALOG_TITLE}$")
    return Prepared(params={"port": port},
                    truth={"port": port, "build": build, "data_file": data_file,
                           "window": [window.x, window.y, window.width, window.height]})


def check_listening(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    ports = probe.listening_ports()
    return Verdict.check(truth["port"] in ports, f"port {truth['port']} listening: {truth['port'] in ports}")


def check_health(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    reply = probe.http_get(f"http://127.0.0.1:{truth['port']}/health")
    if reply is None:
        return Verdict.failed("nothing answers HTTP on the service's port")
    status, body = reply
    return Verdict.check(status == 200 and body.strip() == "ok", f"/health -> {status} {body.strip()[:60]!r}")


def check_config(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    value = probe.ini_value(CONFIG, "data", "file")
    return Verdict.check(value is not None and value.strip() == truth["data_file"],
                         f"[data] file = {value!r}, expected {truth['data_file']!r}")


def check_deploy(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    answer = probe.read_text(ANSWER)
    if not answer:
        return Verdict.failed("the deploy console was not confirmed")
    return Verdict.check(answer.strip() == truth["build"],
                         f"deploy console got {answer.strip()[:40]!r}, the service reports {truth['build']!r}")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    port = ctx.truth["port"]
    yield {"kind": "shell", "command": f"tail -n 5 {LOG}"}
    fix = f"sed -i 's|^file = .*|file = {ctx.truth['data_file']}|' {CONFIG}"
    yield {"kind": "shell", "command": f"{fix} && ~/inventory/run.sh && {WAIT_FOR_VERSION.format(port=port)}"}
    x, y, w, h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w // 2, "y": y + h // 2}  # focus the deploy console
    yield {"kind": "type", "text": ctx.truth["build"]}
    yield {"kind": "key", "keys": "Return"}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-DevOps-1",
    title="Revive the inventory service and confirm its build",
    instruction=(
        "The inventory service in ~/inventory (started with ~/inventory/run.sh, meant to listen on "
        "127.0.0.1:{port}) has crashed. Find out why from its log, fix its configuration, and start it again. "
        "Then enter the build id that the running service reports at /version into the open 'Deploy console' "
        "dialog and confirm it, then finish."),
    channels=Channels(
        gui="confirm the deployment in the Deploy console dialog",
        cli="read the log, fix the config, restart the service and query it",
        why_both="the service can only be repaired from the shell, and the deployment only confirmed in the GUI"),
    setup=setup,
    clauses=(
        Clause("service_listening", "the service listens on its port", check_listening, weight=2.0, critical=True,
               cap=0.5),
        Clause("service_healthy", "GET /health answers 200 ok", check_health),
        Clause("config_fixed", "inventory.ini points at the real data file", check_config),
        Clause("deploy_confirmed", "the deploy console was confirmed with the running build id", check_deploy,
               weight=2.0),
    ),
    oracle=oracle,
    apps=("zenity", "python3"),
    max_steps=30,
    time_budget_s=600.0,
)
