"""Weave-DevOps-1: bring a crashed service back from its log, then confirm its build in a deploy console.

The crash cause is only in the service's log and the fix is a config edit and
a restart (CLI). The deployment is confirmed in a GUI dialog with the build id
the *running* service reports; the dialog's answer lands in a root-only file.
The service's files belong to the workspace account (the shell's), and the build
id gets a random run suffix at every start, so it can only come from the repaired,
running service; the checker compares the answer with what that service reports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.envs.setup_context import HOME, PRIVATE_DIR, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.dialogs import await_dialog_exit
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


DATA_NAMES = ("stock", "inventory", "warehouse", "catalog", "items", "parts", "store", "goods")
DATA_SUFFIXES = (".json", "-data.json", "_v2.json", ".db.json")


def _misspelt(rng, name: str) -> str:
    """A plausible typo of ``name``: a dropped, doubled or swapped letter, or a wrong folder."""
    i = int(rng.integers(1, len(name) - 1))
    how = int(rng.integers(0, 4))
    if how == 0:
        return name[:i] + name[i + 1:]
    if how == 1:
        return name[:i] + name[i] + name[i:]
    if how == 2 and name[i] != name[i + 1]:
        return name[:i] + name[i + 1] + name[i] + name[i + 2:]
    return f"{('data', 'var', 'db', 'old')[int(rng.integers(0, 4))]}/{name}"


def setup(ctx: SetupContext) -> Prepared:
    port = 8000 + int(ctx.rng.integers(0, 1000))
    build = f"build-{int(ctx.rng.integers(1000, 10000))}"
    name = f"{DATA_NAMES[int(ctx.rng.integers(len(DATA_NAMES)))]}{DATA_SUFFIXES[int(ctx.rng.integers(4))]}"
    data_file = f"{APP}/{name}"
    broken = f"{APP}/{_misspelt(ctx.rng, name)}"
    # The service is the shell's to repair: its files belong to the workspace account, read-only to the
    # desktop account (so a terminal on the desktop could only replace them, which provenance shows).
    owner = WORKSPACE_USER
    ctx.write_file(f"{APP}/server.py", ctx.fixture(__package__, "fixtures/inventory_server.py"), owner=owner,
                   mode=0o644)
    ctx.write_file(f"{APP}/run.sh", RUN_SH, owner=owner, mode=0o755)
    ctx.write_file(f"{APP}/BUILD", build + "\n", owner=owner, mode=0o644)
    ctx.write_file(data_file, json.dumps({"widgets": int(ctx.rng.integers(1, 99)),
                                          "gears": int(ctx.rng.integers(1, 99))}) + "\n", owner=owner, mode=0o644)
    ctx.write_file(CONFIG, f"[server]\nhost = 127.0.0.1\nport = {port}\n\n[data]\nfile = {broken}\n", owner=owner,
                   mode=0o644)
    ctx.write_file(LOG, "", owner=owner, mode=0o644)
    ctx.run([f"{APP}/run.sh"], user=owner)  # it crashes and says why in the log
    ctx.run(["bash", "-c", f"for i in $(seq 100); do grep -q FATAL {LOG} && exit 0; sleep 0.1; done; exit 1"])
    ctx.make_private_dir()
    ctx.launch_gui(f"{{as_user}} zenity --entry --title='{DIALOG_TITLE}' "
                   "--text='Build id reported by the running inventory service:' "
                   f"> {ANSWER}", name="deploy")
    window = ctx.wait_window(f"^{DIALOG_TITLE}$")
    return Prepared(params={"port": port},
                    truth={"port": port, "build": build, "data_file": data_file,
                           "window": window.geometry})


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
    reply = probe.http_get(f"http://127.0.0.1:{truth['port']}/version")
    running = reply[1].strip() if reply is not None and reply[0] == 200 else None
    if running is None:
        return Verdict.failed(f"deploy console got {answer.strip()[:40]!r}, but no service reports a build")
    ok = answer.strip() == running and running.startswith(truth["build"] + ".")
    return Verdict.check(ok, f"deploy console got {answer.strip()[:40]!r}, the running service reports {running!r}")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """The log names the path it could not open; the one data file beside the service is the right one, and the
    build id is what the restarted service reports. The truth gives only the port (the instruction's) and the
    dialog's place."""
    port = ctx.truth["port"]
    yield {"kind": "shell", "command": f"tail -n 5 {LOG}; echo DATA FILES; ls -1 {APP}/*.json"}
    listed = (ctx.obs or {}).get("terminal", "").partition("DATA FILES")[2]
    files = re.findall(rf"^({re.escape(APP)}/[^/\s]+\.json)$", listed, re.M)
    if len(files) != 1:
        yield {"kind": "fail", "reason": f"expected one data file in {APP}, found {files}"}
        return
    fix = f"sed -i 's|^file = .*|file = {files[0]}|' {CONFIG}"
    yield {"kind": "shell", "command": f"{fix} && ~/inventory/run.sh && {WAIT_FOR_VERSION.format(port=port)}"}
    reported = re.search(r"^(build-\d+\.[0-9a-f]+)$", (ctx.obs or {}).get("terminal", ""), re.M)
    if reported is None:  # e.g. a desktop terminal, which cannot write the service's config
        yield {"kind": "fail", "reason": "the restarted service reported no build"}
        return
    x, y, w, h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w // 2, "y": y + h // 2}  # focus the deploy console
    yield {"kind": "type", "text": reported.group(1)}
    yield {"kind": "key", "keys": "Return"}
    yield await_dialog_exit()
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
        # live: the service runs as the workspace account, which the evaluation stops after these two.
        Clause("service_healthy", "GET /health answers 200 ok", check_health, live=True),
        Clause("config_fixed", "inventory.ini points at the real data file", check_config),
        Clause("deploy_confirmed", "the deploy console was confirmed with the running build id", check_deploy,
               weight=2.0, live=True),
    ),
    deliverables=(
        Deliverable(ANSWER, "gui", owner="root", description="the deploy console's answer (captured by setup)"),
        Deliverable(CONFIG, "cli", description="the repaired inventory.ini"),
    ),
    oracle=oracle,
    withheld=("build", "data_file"),
    apps=("zenity", "python3"),
    max_steps=30,
    time_budget_s=600.0,
)
