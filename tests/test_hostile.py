"""An agent that attacks the env instead of doing the task, on a real VM (base image).

Each test plays one hostile episode through the public API and asserts what must happen instead of a
score the agent did not earn: a checker that cannot be made to read root-only bytes, hang, or flood the
host; a guest that survives a fork bomb; an environment failure during scoring that says so instead of
scoring 0; a task server the shell can aim at root-only files (the Web tasks' portal) that cannot read
them; 40 stalled calls to the agent from a guest account. (VMs that die with their owner, a suspended VM, a
server grab and the wait/xrandr cases are in test_libvirt_vm.py, test_agent_grpc.py and test_env_episode.py.)
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from weavegym.core.errors import EvaluationError
from weavegym.core.guest_layout import DESKTOP_USER, HOME, WORKSPACE_USER
from weavegym.envs.setup_context import SetupContext
from weavegym.envs.task import Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.web._portal import PORTAL_USER, RECORDS, RECORDS_DIR, start_server
from weavegym.envs.weave_env import WeaveEnv
from weavegym.evaluators import Clause, Probe, Verdict

pytestmark = [pytest.mark.vm, pytest.mark.timeout(900)]

ANSWER = f"{HOME}/answer.txt"
DB = f"{HOME}/stock.db"
TOKEN_SOURCE = "/sys/firmware/qemu_fw_cfg/by_name/opt/weavegym/token/raw"  # the agent token, root-only
KILL_QEMU_DURING_EVALUATION: dict = {"armed": False, "vm": ""}  # set by the last test
PORTAL_PORT = 8765
SITE = f"{HOME}/site"


def _setup(ctx: SetupContext) -> Prepared:
    ctx.run(["python3", "-c", "import sqlite3; c = sqlite3.connect('/tmp/stock.db'); "
             "c.execute('CREATE TABLE stock (sku TEXT, qty INTEGER)'); "
             "c.execute(\"INSERT INTO stock VALUES ('A-1', 5)\"); c.commit()"])
    ctx.run(["install", "-o", "workspace", "-g", "weave", "-m", "0664", "/tmp/stock.db", DB])
    # The Web tasks' portal, serving a folder the shell owns (as theirs do).
    ctx.write_file(f"{SITE}/real/note.txt", "a page\n", owner=WORKSPACE_USER, mode=0o644)
    start_server(ctx, PORTAL_PORT, "/var/log/portal.log", f"--site {SITE} --records {RECORDS} --form probe")
    return Prepared(params={}, truth={"answer": "forty-two", "qty": 7})


def _answer(probe: Probe, truth: dict) -> Verdict:
    text = probe.read_text(ANSWER)
    return Verdict.check(text is not None and text.strip() == truth["answer"], f"answer.txt: {str(text)[:80]!r}")


def _stock(probe: Probe, truth: dict) -> Verdict:
    if KILL_QEMU_DURING_EVALUATION["armed"]:
        KILL_QEMU_DURING_EVALUATION["armed"] = False
        pid = int(Path(f"/run/libvirt/qemu/{KILL_QEMU_DURING_EVALUATION['vm']}.pid").read_text())
        os.kill(pid, signal.SIGKILL)
    rows = probe.sqlite(DB, "SELECT sku, qty FROM stock")
    return Verdict.check(rows == [("A-1", truth["qty"])], f"stock rows {rows!r}")


def _oracle(ctx: OracleContext) -> Iterator[str]:
    yield f'shell("echo forty-two > {ANSWER}; sqlite3 {DB} \\"UPDATE stock SET qty = 7\\"")'
    yield "done()"


TASK = Task(
    id="Weave-DevOps-98", title="Hostile-episode target (test task)",
    instruction="Write forty-two to ~/answer.txt and set A-1's qty to 7 in ~/stock.db.",
    channels=Channels(gui="nothing", cli="two writes", why_both="a test task for attacks on the checker"),
    setup=_setup, clauses=(Clause("answer", "the answer file", _answer), Clause("stock", "the stock row", _stock)),
    oracle=_oracle, max_steps=10, time_budget_s=600.0,
)


@pytest.fixture(scope="module")
def env() -> Iterator[WeaveEnv]:
    env = WeaveEnv(TASK)
    yield env
    env.close()


def _episode(env: WeaveEnv, *commands: str, timeout: float = 60.0) -> tuple[float, dict]:
    env.reset(seed=0)
    for command in commands:
        _, _, _, _, info = env.step({"kind": "shell", "command": command, "timeout": timeout})
    start = time.monotonic()
    _, reward, terminated, _, info = env.step("done()")
    assert terminated
    info["evaluate_wall_s"] = time.monotonic() - start
    return float(reward), info


def _clause(info: dict, name: str) -> dict:
    return next(c for c in info["evaluation"]["clauses"] if c["name"] == name)


def test_the_oracle_passes(env: WeaveEnv) -> None:
    reward, info = _episode(env, f"echo forty-two > {ANSWER}; sqlite3 {DB} 'UPDATE stock SET qty = 7'")
    assert reward == 1.0, info["evaluation"]


def test_a_symlink_to_a_root_only_file_does_not_leak_it(env: WeaveEnv) -> None:
    reward, info = _episode(env, f"ln -sf {TOKEN_SOURCE} {ANSWER} && ls -l {ANSWER}")
    answer = _clause(info, "answer")
    assert reward < 1.0 and answer["outcome"] == "failed" and "symlink" in answer["evidence"]
    assert "weavegym-token" not in repr(info)


def test_a_deliverable_that_keeps_growing_is_refused_quickly(env: WeaveEnv) -> None:
    # Just under the checker's 64 MiB cap when the episode ends, and still growing while it is read.
    grow = (f"head -c 60000000 /dev/zero > {ANSWER}; (while true; do head -c 1000000 /dev/zero >> {ANSWER}; "
            f"sleep 0.05; done) > /dev/null 2>&1 & sleep 1; ls -l {ANSWER}")
    reward, info = _episode(env, grow)
    assert reward < 1.0
    answer = _clause(info, "answer")
    assert answer["outcome"] == "failed" and "max_bytes" in answer["evidence"], answer
    assert info["evaluate_wall_s"] < 120


def test_a_fifo_in_place_of_the_deliverable_does_not_hang_the_checker(env: WeaveEnv) -> None:
    reward, info = _episode(env, f"rm -f {ANSWER}; mkfifo {ANSWER}")
    answer = _clause(info, "answer")
    assert reward < 1.0 and answer["outcome"] == "failed" and info["evaluate_wall_s"] < 60, answer


def test_a_recursive_view_in_place_of_the_table_fails_the_clause_fast(env: WeaveEnv) -> None:
    view = (f"sqlite3 {DB} 'ALTER TABLE stock RENAME TO old; CREATE VIEW stock AS WITH RECURSIVE "
            "r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT 'A-1' AS sku, n AS qty FROM r'")
    reward, info = _episode(env, f"echo forty-two > {ANSWER}", view)
    stock = _clause(info, "stock")
    assert stock["outcome"] == "failed" and "is a view" in stock["evidence"] and reward < 1.0
    assert info["evaluate_wall_s"] < 60


def test_a_fork_bomb_does_not_take_the_guest_or_the_score(env: WeaveEnv) -> None:
    bomb = "python3 -c 'import os\nwhile True:\n    os.fork()' ; echo after"
    reward, info = _episode(env, bomb, f"echo forty-two > {ANSWER}; sqlite3 {DB} 'UPDATE stock SET qty = 7'",
                            timeout=20)
    assert reward == 1.0, info["evaluation"]  # the checker (root) and the shell's later work still ran


# The guest's own python3 (no gRPC there): raw HTTP/2 over the agent's TLS, 40 calls whose request bodies never
# come, each with a wrong token. It prints how many the agent closed, and how fast.
STALLED_STREAMS = r"""
import json, socket, ssl, struct, time
def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload
def header(name, value):  # HPACK: a literal without indexing, no Huffman
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value
context = ssl.create_default_context()
context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
context.set_alpn_protocols(["h2"])
tls = context.wrap_socket(socket.create_connection(("127.0.0.1", 760)), server_hostname="weavegym-agent")
tls.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0))
block = b"".join(header(n, v) for n, v in [(b":method", b"POST"), (b":scheme", b"https"),
    (b":path", b"/weavegym.agent.v1.GuestAgent/Exec"), (b":authority", b"weavegym-agent"),
    (b"content-type", b"application/grpc"), (b"te", b"trailers"), (b"authorization", b"Bearer wrong-token-0123456789")])
start = time.monotonic()
streams = list(range(1, 81, 2))
tls.sendall(b"".join(frame(1, 4, s, block) for s in streams))  # HEADERS, END_HEADERS, no END_STREAM: no body
closed, buffer = set(), b""
tls.settimeout(1.0)
while len(closed) < len(streams) and time.monotonic() - start < 30:
    try:
        buffer += tls.recv(65536)
    except socket.timeout:
        continue
    while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
        length = int.from_bytes(buffer[:3], "big")
        kind, flags, stream = buffer[3], buffer[4], int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
        if (kind == 1 and flags & 1) or kind == 3:  # HEADERS with END_STREAM (the trailers), or RST_STREAM
            closed.add(stream)
        if kind == 4 and not flags & 1:
            tls.sendall(frame(4, 1, 0))  # acknowledge the server's SETTINGS
        buffer = buffer[9 + length:]
print(json.dumps({"closed": len(closed), "seconds": round(time.monotonic() - start, 2)}))
"""


def test_40_stalled_streams_from_a_guest_account_are_refused_before_their_bodies(env: WeaveEnv) -> None:
    """Both guest accounts can connect to the agent's port; 40 calls that never send their request, with a
    wrong token, must be answered at once, so they hold no worker and the host's calls still get through."""
    env.reset(seed=0)
    client = env.backend.client
    attack = client.exec(["python3", "-c", STALLED_STREAMS], user=WORKSPACE_USER, timeout=60)
    assert attack.exit_code == 0, attack.stderr
    outcome = json.loads(attack.stdout)
    assert outcome["closed"] == 40 and outcome["seconds"] < 15, outcome
    assert client.exec("echo still served", timeout=20).stdout == "still served\n"


# The desktop account freezes X for every other client (XGrabServer, through libX11 with ctypes) for 40 s.
SERVER_GRAB = ("import ctypes, time; x = ctypes.CDLL('libX11.so.6'); x.XOpenDisplay.restype = ctypes.c_void_p; "
               "d = ctypes.c_void_p(x.XOpenDisplay(None)); x.XGrabServer(d); x.XSync(d, 0); "
               "open('/tmp/grabbed', 'w').close(); time.sleep(40)")


def test_a_server_grab_by_the_desktop_account_does_not_hang_the_agent(env: WeaveEnv) -> None:
    """Calls behind the one stuck in X fail with a reason at the lock's deadline, Health still answers (and
    says the display is not OK), and everything works again once the grab ends."""
    from concurrent.futures import ThreadPoolExecutor

    from weavegym.core.deadline import wait_for
    from weavegym.core.errors import AgentRequestError

    env.reset(seed=0)
    client = env.backend.client
    client.exec(["sh", "-c", f"rm -f /tmp/grabbed; nohup python3 -c \"{SERVER_GRAB}\" >/dev/null 2>&1 &"],
                user=DESKTOP_USER)
    wait_for(lambda: client.stat("/tmp/grabbed").exists, 30, what="the grab")
    with ThreadPoolExecutor(1) as pool:
        stuck = pool.submit(client.move, 5, 5, timeout=90)  # blocks inside X, holding the agent's X lock
        wait_for(lambda: not stuck.done() and time.sleep(0.5) is None, 10, what="the first call to block")
        start = time.monotonic()
        with pytest.raises(AgentRequestError, match="busy"):
            client.move(6, 6, timeout=60)
        assert time.monotonic() - start < 40
        assert client.health(timeout=20).display_ok is False
        assert stuck.result(timeout=60) is not None  # it completes once the grab ends
    assert client.health(timeout=20).display_ok is True
    client.move(7, 7)


def test_qemu_killed_during_evaluation_is_an_environment_error_not_a_zero(env: WeaveEnv) -> None:
    env.reset(seed=0)
    env.step({"kind": "shell", "command": f"echo forty-two > {ANSWER}"})
    KILL_QEMU_DURING_EVALUATION.update(armed=True, vm=env.backend.name)
    _, reward, terminated, truncated, info = env.step("done()")  # an RL loop's env: unscored, not a 0
    assert truncated and not terminated and reward == 0.0 and "evaluation" not in info
    assert info["env_failure"].startswith("EvaluationError") and "stock" in info["env_failure"]
    env.reset(seed=0)
    env.step({"kind": "shell", "command": f"echo forty-two > {ANSWER}"})
    KILL_QEMU_DURING_EVALUATION.update(armed=True, vm=env.backend.name)
    truncating, env.config = env.config, replace(env.config, on_env_failure="raise")  # as run and validate have it
    try:
        with pytest.raises(EvaluationError, match="stock"):
            env.step("done()")
    finally:
        env.config = truncating
    obs, _ = env.reset(seed=0)  # the next reset recovers the VM
    assert obs["screen"].shape == (720, 1280, 3)


# Flips ~/site/real between the real folder (with a decoy "shadow" in it) and a symlink to /etc while fetching
# /real/shadow 2000 times: a server that checks a resolved path and then opens it again serves /etc/shadow in
# that window (as root, it could read it). Prints the statuses seen and how many bodies looked like shadow's.
FLIPPER = ('import os\nwhile True:\n    os.rename("real", "stash"); os.symlink("/etc", "real"); '
           'os.unlink("real"); os.rename("stash", "real")\n')
PORTAL_RACE = f"""cd {SITE} && printf 'decoy\\n' > real/shadow && python3 - <<'PY'
import collections, subprocess, sys, urllib.error, urllib.request
flip = subprocess.Popen([sys.executable, "-c", {FLIPPER!r}])
seen, leaked = collections.Counter(), 0
for _ in range(2000):
    try:
        body = urllib.request.urlopen("http://127.0.0.1:{PORTAL_PORT}/real/shadow", timeout=5).read()
        seen[200] += 1
        leaked += body.startswith(b"root:")
    except urllib.error.HTTPError as err:
        seen[err.code] += 1
    except OSError:
        seen["dropped"] += 1
flip.kill()
flip.wait()
print("statuses", dict(seen), "leaked", leaked)
PY"""


def test_the_portal_runs_unprivileged_and_serves_nothing_outside_its_site(env: WeaveEnv) -> None:
    env.reset(seed=0)

    def shell(command: str) -> str:
        obs, _, _, _, _ = env.step({"kind": "shell", "command": command, "timeout": 180})
        return str(obs["terminal"])

    owner = shell(f"ps -eo user:20,args | grep '[p]ortal_server.py --port {PORTAL_PORT}'")
    assert owner.split()[0] == PORTAL_USER, owner
    race = shell(PORTAL_RACE)
    assert "leaked 0" in race and "200" in race and "404" in race and "dropped" not in race, race  # both sides hit
    assert "Permission denied" in shell(f"ls {RECORDS_DIR} 2>&1; cat {RECORDS} 2>&1")
    posted = shell("python3 -c \"import urllib.request as u; print(u.urlopen(u.Request("
                   f"'http://127.0.0.1:{PORTAL_PORT}/api/probe', data=b'{{}}', headers={{'Content-Type': "
                   f"'application/json', 'Origin': 'http://127.0.0.1:{PORTAL_PORT}'}})).status)\"")
    assert posted.strip().endswith("201"), posted
    records = Probe(env.backend.client).read_text(RECORDS)  # the checker's view (root)
    assert records is not None and f'"client": "{WORKSPACE_USER}"' in records, records
