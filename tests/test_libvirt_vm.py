"""The libvirt backend with real VMs (TCG here), the real guest agent inside them, and a real VNC client.

Needs the `base` image in the cache: `make test` builds it (or reuses it) before pytest runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import libvirt
import numpy as np
import pytest
from PIL import Image

from weavegym.core.deadline import wait_for
from weavegym.core.errors import AgentError, AgentUnavailableError, HostSetupError
from weavegym.envs.setup_context import LAUNCH_MARKER, SetupContext
from weavegym.machine.agent_identity import new_agent_identity
from weavegym.machine.backends.libvirt_vm import IDENTITY_FILE_BYTES, LibvirtConfig, LibvirtVM, connect
from weavegym.machine.guest_client import GuestClient
from weavegym.ops.gc import collect

pytestmark = pytest.mark.vm

URI = "qemu:///system" if os.geteuid() == 0 else "qemu:///session"
CACHE = LibvirtConfig().cache_dir


@pytest.fixture(scope="module")
def vm():
    with LibvirtVM(LibvirtConfig(accel="tcg")) as machine:
        yield machine


def _window_titles(vm: LibvirtVM) -> list[str]:
    assert vm.client is not None
    return [w.title for w in vm.client.list_windows()[0]]


def _domain_names() -> set[str]:
    conn = connect(URI)
    try:
        return {d.name() for d in conn.listAllDomains()}
    finally:
        conn.close()


def test_vm_desktop_and_agent(vm: LibvirtVM) -> None:
    assert vm.client is not None
    info = vm.client.info()
    assert (info.screen_width, info.screen_height) == (1280, 720)
    assert info.os_release.startswith("Debian GNU/Linux 12")
    assert info.agent_user == "root"
    assert vm.client.list_windows()[1] == "Openbox"
    who = vm.client.exec("id -un; echo $DISPLAY", user="user")
    assert who.stdout.split() == ["user", ":0"]
    # The guest network is offline: user-mode networking with restrict=on.
    offline = vm.client.exec("timeout 5 bash -c 'exec 3<>/dev/tcp/10.0.2.2/80' 2>&1; echo rc=$?", timeout=15)
    assert "rc=0" not in offline.stdout
    # The token reached the guest (root reads it) and is readable by root only; no host command line has it.
    fw_cfg = "/sys/firmware/qemu_fw_cfg/by_name/opt/weavegym/token/raw"
    assert vm.client.exec(f"cat {fw_cfg}").stdout.strip() == vm.token
    token = vm.client.exec(f"cat {fw_cfg}", user="user")
    assert token.exit_code != 0 and vm.token not in token.stdout
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            assert vm.token.encode() not in cmdline.read_bytes(), cmdline
    # The agent listens on 760, below 1024, where no guest account can bind (so none can take its port
    # while it restarts); shown on the free port next to it.
    assert vm._spec is not None and vm._spec.agent_guest_port == 760
    bind = vm.client.exec("python3 -c 'import socket; socket.socket().bind((\"0.0.0.0\", 761))' 2>&1",
                          user="user")
    assert bind.exit_code != 0 and "ermission denied" in bind.stdout, bind.stdout


def test_the_agent_proves_its_identity_with_the_key_the_host_made(vm: LibvirtVM) -> None:
    """TLS with a per-VM key that only root in the guest can read: what else answers on the forwarded port
    cannot finish the handshake, so it never receives the token."""
    assert vm.identity is not None and vm.client is not None
    fw_cfg = "/sys/firmware/qemu_fw_cfg/by_name/opt/weavegym/identity/raw"
    padded = vm.identity.bundle().ljust(IDENTITY_FILE_BYTES, b"\n")  # one size for every VM (see _allocate)
    assert vm.client.exec(["sha256sum", fw_cfg]).stdout.split()[0] == hashlib.sha256(padded).hexdigest()
    as_user = vm.client.exec(["cat", fw_cfg], user="user")
    assert as_user.exit_code != 0 and b"PRIVATE KEY" not in as_user.stdout_raw
    key_line = vm.identity.key_pem.splitlines()[1]
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            assert key_line not in cmdline.read_bytes(), cmdline
    # A plain client, and a client that pins another certificate, get nothing through.
    with GuestClient(vm.agent_target, vm.token) as plain, pytest.raises(AgentUnavailableError):
        plain.health(timeout=10)
    with (GuestClient(vm.agent_target, vm.token, tls_cert=new_agent_identity().cert_pem) as wrong,
          pytest.raises(AgentUnavailableError)):
        wrong.health(timeout=10)
    # The TLS stream stays sound across snapshot loads and big transfers (an earlier attempt under TCG
    # saw record-MAC failures after a few calls).
    for _ in range(3):
        vm.reset()
        assert vm.client.exec("head -c 3000000 /dev/zero | wc -c", timeout=30).stdout.strip() == "3000000"
        assert vm.client.screenshot().image.shape == (720, 1280, 3)


def test_setup_context_creates_user_owned_parents_and_launches_as_the_user(vm: LibvirtVM) -> None:
    assert vm.client is not None
    ctx = SetupContext(vm.client, "Weave-Test-1", seed=0, screen=(1280, 720))
    ctx.write_file("/home/user/.config/weavegym-t/deep/er/notes.txt", "ünïcode\n")
    for rel in (".config", ".config/weavegym-t", ".config/weavegym-t/deep", ".config/weavegym-t/deep/er",
                ".config/weavegym-t/deep/er/notes.txt"):
        st = vm.client.stat(f"/home/user/{rel}")
        assert (st.owner, st.group) == ("user", "weave"), rel  # the shared group: both channels may read
    assert vm.client.exec("cat /home/user/.config/weavegym-t/deep/er/notes.txt").stdout == "ünïcode\n"
    ctx.write_file("/srv/weavegym-t/root.txt", "x", owner="root")
    assert vm.client.stat("/srv/weavegym-t").owner == "root"
    # Root's material is neither channel's: not in the shared group, not writable, in a folder they cannot
    # add to (the shell could otherwise rewrite a task's root-owned app or config).
    ctx.write_file("/home/user/weavegym-t-root/app.py", "print(1)\n", owner="root")
    for path in ("/srv/weavegym-t/root.txt", "/home/user/weavegym-t-root/app.py"):
        st = vm.client.stat(path)
        assert (st.owner, st.group, st.mode & 0o777) == ("root", "root", 0o644), path
    denied = vm.client.exec("echo x >> /home/user/weavegym-t-root/app.py || echo refused; "
                            "touch /home/user/weavegym-t-root/new || echo refused", user="workspace")
    assert denied.stdout.split() == ["refused", "refused"], denied
    # openbox has no session bus; whatever launch_gui starts runs as the user, marked, on :0.
    assert ctx.session_bus_address() == ""
    ctx.launch_gui("{as_user} sh -c 'id -un; echo $DISPLAY; env; echo END' > /tmp/weavegym-t-launch.txt", name="t")

    def finished() -> str | None:
        out = vm.client.exec("cat /tmp/weavegym-t-launch.txt").stdout
        return out if out.endswith("END\n") else None
    out = wait_for(finished, 30, what="the launched command's output")
    assert out.split()[:2] == ["user", ":0"] and LAUNCH_MARKER in out


TK_ENTRY = """
import sys, tkinter as tk
out = open(sys.argv[1], "a", encoding="utf-8")
root = tk.Tk(); root.title("weavegym-t-entry"); root.geometry("760x60+40+40")
entry = tk.Entry(root, width=80); entry.pack(); entry.focus_set()
def send(_event):
    out.write(entry.get() + "\\n"); out.flush(); entry.delete(0, "end")
entry.bind("<Return>", send)
root.mainloop()
"""


def test_characters_outside_the_layout_reach_a_tk_entry_exactly(vm: LibvirtVM) -> None:
    """Every line ends with characters bound to spare keycodes just before they are pressed. Tk answers no
    _NET_WM_PING, so only the controller's settle pause keeps it from reading a press with its stale keymap: on
    a host Xvfb 3 lines in 60 came out wrong without it, and in the guest the agent without it typed a stale
    character at line 7 (two runs of two).

    Every binding also makes openbox re-read the keymap and re-grab its keys (about 0.7 s of guest CPU each
    under TCG: 123 bindings kept it busy for over 80 s, and windows opened meanwhile stayed unmapped), so the
    test ends by waiting until openbox manages a new window again.
    """
    assert vm.client is not None
    ctx = SetupContext(vm.client, "Weave-Test-1", seed=0, screen=(1280, 720))
    ctx.write_file("/tmp/weavegym-t-entry.py", TK_ENTRY)
    ctx.launch_gui("{as_user} python3 /tmp/weavegym-t-entry.py /tmp/weavegym-t-entry.txt", name="entry")
    window = ctx.wait_window("^weavegym-t-entry$", timeout=90)
    vm.client.activate_window(window.id)
    vm.client.click(window.x + window.width // 2, window.y + 10)
    lines = [f"line {i}: café, 東京 {chr(0x2600 + 3 * i)}{chr(0x2601 + 3 * i)}{chr(0x2602 + 3 * i)}" for i in range(12)]
    for line in lines:
        vm.client.type_text(line)
        vm.client.key("Return")

    def typed() -> list[str] | None:
        got = vm.client.exec("cat /tmp/weavegym-t-entry.txt").stdout.splitlines()
        return got if len(got) >= len(lines) else None
    assert wait_for(typed, 60, what="the typed lines") == lines
    ctx.launch_gui("{as_user} xterm -T weavegym-t-settled -e sleep 600", name="settled")
    ctx.wait_window("^weavegym-t-settled$", timeout=300)


def test_reset_removes_files_and_windows(vm: LibvirtVM) -> None:
    assert vm.client is not None
    vm.client.exec("echo before > /home/user/before-reset.txt", user="user")
    # -e: no interactive bash inside, whose prompt would retitle the window.
    started = vm.client.exec("xterm -T weavegym-before-reset -e sleep 600 >/dev/null 2>&1 &", user="user")
    assert started.exit_code == 0, started
    wait_for(lambda: "weavegym-before-reset" in _window_titles(vm), 60, what="the xterm window")
    assert vm.client.stat("/home/user/before-reset.txt").exists

    seconds = vm.reset()

    assert not vm.client.stat("/home/user/before-reset.txt").exists
    assert "weavegym-before-reset" not in _window_titles(vm)
    assert seconds < vm.config.reset_timeout_s
    # The clock was resynced: the guest agrees with the host within a few seconds.
    import time

    guest_now = float(vm.client.exec("date +%s.%N").stdout)
    assert abs(guest_now - time.time()) < 5


def test_agent_screenshot_matches_a_real_vnc_client(vm: LibvirtVM, tmp_path: Path) -> None:
    from vncdotool import api

    assert vm.client is not None
    started = vm.client.exec("xterm -T weavegym-vnc -geometry 60x15+100+100 -e 'echo vnc check; sleep 600' "
                             ">/dev/null 2>&1 &", user="user")
    assert started.exit_code == 0, started
    wait_for(lambda: "weavegym-vnc" in _window_titles(vm), 60, what="the xterm window")
    vm.client.move(1270, 710)
    agent_frame = vm.client.screenshot(hide_cursor=True).image
    png = tmp_path / "vnc.png"
    vnc = api.connect(f"127.0.0.1::{vm.vnc.port}", password=vm.vnc.password, timeout=30)
    try:
        vnc.captureScreen(str(png))
    finally:
        vnc.disconnect()
    vnc_frame = np.asarray(Image.open(png).convert("RGB"))
    assert vnc_frame.shape == agent_frame.shape == (720, 1280, 3)
    diff = np.abs(vnc_frame.astype(int) - agent_frame.astype(int)).max(axis=2)
    # Only the pointer (bottom-right corner) may differ.
    assert (diff > 24).mean() < 0.002, f"{(diff > 24).sum()} pixels differ"
    assert agent_frame.std() > 5, "the frame is blank; the comparison would prove nothing"


def test_vnc_port_is_stable_across_resets(vm: LibvirtVM) -> None:
    before = vm.vnc.port
    vm.reset()
    assert f"<graphics type='vnc' port='{before}'" in vm.domain.XMLDesc()


def test_a_vm_paused_from_outside_is_resumed(vm: LibvirtVM) -> None:
    vm.domain.suspend()  # as `virsh suspend` would
    assert vm.domain.state()[0] == libvirt.VIR_DOMAIN_PAUSED
    assert vm.is_running()
    assert vm.domain.state()[0] == libvirt.VIR_DOMAIN_RUNNING and vm.timings["resumed"] >= 1
    assert vm.client.exec("echo awake", timeout=30).stdout.strip() == "awake"


def test_the_shell_runs_in_its_own_capped_cgroup_and_apps_outlive_an_agent_restart(vm: LibvirtVM) -> None:
    assert vm.client is not None
    where = vm.client.exec("cat /proc/self/cgroup; id -un", user="workspace", timeout=30).stdout.split()
    assert where == ["0::/system.slice/weavegym-episode.service", "workspace"], where
    group = "/sys/fs/cgroup/system.slice/weavegym-episode.service"
    tasks_max = vm.client.exec(f"cat {group}/pids.max").stdout
    assert tasks_max.strip() == "256"
    # A memory hog past the group's cap (60% of the guest's RAM) is killed; the agent, the group and the
    # episode's later commands carry on.
    total = int(vm.client.exec("awk '/MemTotal/ {print $2 * 1024}' /proc/meminfo").stdout)
    memory_max = int(vm.client.exec(f"cat {group}/memory.max").stdout)
    assert 0.5 * total < memory_max <= 0.6 * total + 4096, (memory_max, total)
    hog = vm.client.exec(["python3", "-c", f"b = b'x' * {int(0.75 * total)}; print('survived')"],
                         user="workspace", cwd="/", timeout=180)
    assert hog.exit_code in (-9, 137) and "survived" not in hog.stdout, hog
    assert vm.client.health(timeout=30).display_ok
    assert vm.client.exec("systemctl is-active weavegym-episode").stdout.strip() == "active"
    assert vm.client.exec("cat /proc/self/cgroup", user="workspace").stdout.strip().endswith("weavegym-episode.service")
    assert vm.client.exec("cat /proc/self/cgroup", user="user").stdout.strip().endswith("weavegym-agent.service")
    # An app a command started (as setup's launch_gui does) keeps running when the agent dies and restarts.
    vm.client.exec("setsid -f sleep 4242 >/dev/null 2>&1 </dev/null", user="user", timeout=30)
    agent_pid = vm.client.exec("systemctl show -p MainPID --value weavegym-agent").stdout.strip()
    vm.client.exec(f"setsid -f sh -c 'sleep 1; kill -9 {agent_pid}' >/dev/null 2>&1 </dev/null", timeout=30)

    def restarted() -> bool:
        try:
            now = vm.client.exec("systemctl show -p MainPID --value weavegym-agent", timeout=10).stdout.strip()
        except AgentError:  # down between the kill and the restart
            return False
        return now not in ("", "0", agent_pid)

    wait_for(restarted, 90, what="the agent to be restarted")
    assert vm.client.exec("pgrep -x -u user sleep -a", timeout=30).stdout.split()[1:] == ["sleep", "4242"]


@pytest.mark.serial  # every other VM on the host would see libvirtd go away too
def test_a_libvirtd_restart_mid_episode_is_survived(vm: LibvirtVM) -> None:
    vm.client.exec("echo kept > /tmp/through-restart", timeout=30)
    subprocess.run(["pkill", "-x", "libvirtd"], check=True)
    wait_for(lambda: subprocess.run(["pgrep", "-x", "libvirtd"], capture_output=True).returncode != 0, 30,
             what="libvirtd to exit")
    # As `make services` starts it: under tini, so QEMU processes are reaped at once.
    subprocess.Popen(["tini", "-s", "--", "libvirtd"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for(lambda: subprocess.run(["virsh", "-c", URI, "version"], capture_output=True).returncode == 0, 60,
             what="libvirtd to come back")
    assert vm.is_running() and vm.timings["libvirt_reconnects"] >= 1
    assert vm.grab_frame().shape[:2] == (720, 1280)
    assert vm.client.exec("cat /tmp/through-restart", timeout=30).stdout == "kept\n"
    vm.reset()  # the snapshot load goes through the new connection
    assert not vm.client.stat("/tmp/through-restart").exists


def test_reset_recovers_after_qemu_is_killed(vm: LibvirtVM) -> None:
    assert vm.client is not None
    vm.client.exec("echo doomed > /home/user/crash.txt", user="user")
    pid = int(Path(f"/run/libvirt/qemu/{vm.name}.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not vm.is_running(), 30, what="libvirt to notice QEMU died")

    vm.reset()

    assert vm.is_running()
    assert vm.client.exec("echo alive").stdout == "alive\n"
    assert not vm.client.stat("/home/user/crash.txt").exists
    assert f"port='{vm.vnc.port}'" in vm.domain.XMLDesc()


def test_two_envs_run_side_by_side_without_collisions(vm: LibvirtVM) -> None:
    assert vm.client is not None
    # A restore of the host's booted desktop (`make test-vm` prepares it): a second VM's names, ports and
    # folders are the subject here, and the module's VM already covers the cold boot.
    with LibvirtVM(LibvirtConfig(accel="tcg", prepared_states=True)) as other:
        assert other.client is not None
        assert other.name != vm.name
        assert other.vnc.port != vm.vnc.port and other.agent_target != vm.agent_target
        assert other.token != vm.token
        vm.client.exec("echo first > /tmp/which", timeout=10)
        other.client.exec("echo second > /tmp/which", timeout=10)
        assert vm.client.exec("cat /tmp/which").stdout == "first\n"
        assert other.client.exec("cat /tmp/which").stdout == "second\n"
        other.reset()
        assert vm.client.exec("cat /tmp/which").stdout == "first\n"
        run_dir = Path(other.config.cache_dir) / "run" / other.name
        assert run_dir.is_dir()
    assert not run_dir.exists()
    assert other.name not in _domain_names()


@pytest.mark.serial  # gc sweeps the whole host: other tests' VMs would change what it reports
def test_a_process_killed_mid_episode_leaves_no_vm_and_gc_the_rest(vm: LibvirtVM, tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import json, sys, time
        from weavegym.machine.backends.libvirt_vm import LibvirtConfig, LibvirtVM
        vm = LibvirtVM(LibvirtConfig(accel="tcg", prepared_states=True)).start()  # a restore: cleanup is the subject
        vm.client.exec("echo mid-episode > /tmp/state")
        print(json.dumps({"name": vm.name, "run_dir": str(vm.config.cache_dir / "run" / vm.name)}), flush=True)
        time.sleep(3600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line, "the child did not start its VM"
        child = json.loads(line)
        assert child["name"] in _domain_names() and Path(child["run_dir"]).is_dir()
    finally:
        proc.kill()  # SIGKILL: no atexit, no finalizers
        proc.wait()
    # The domain's lease outlives its owner only to destroy the VM and remove its overlay.
    wait_for(lambda: child["name"] not in _domain_names() and not Path(child["run_dir"]).exists(), 60,
             what="the killed process's VM to be destroyed by its lease")

    report = collect(CACHE, [URI])  # what is left: the dead owner's record and port locks
    assert child["name"] in report.records_removed and report.domains_destroyed == []
    assert vm.name in report.live and vm.name in _domain_names(), "gc must not touch a live env"
    again = collect(CACHE, [URI])
    assert again.domains_destroyed == [] and again.run_dirs_removed == [] and again.records_removed == []
    # Seen from another cache folder, this live VM has no record; its owner (this process) is alive.
    elsewhere = collect(tmp_path / "other-cache", [URI])
    assert vm.name in elsewhere.others and vm.name not in elsewhere.domains_destroyed
    assert vm.name in _domain_names()


def test_a_process_that_exits_without_close_leaves_nothing() -> None:
    script = textwrap.dedent("""
        import json
        from weavegym.machine.backends.libvirt_vm import LibvirtConfig, LibvirtVM
        vm = LibvirtVM(LibvirtConfig(accel="tcg", prepared_states=True)).start()  # a restore: cleanup is the subject
        print(json.dumps({"name": vm.name, "run_dir": str(vm.config.cache_dir / "run" / vm.name)}))
        # no close(): the interpreter exits with the VM object still alive
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=True)
    child = json.loads(out.stdout.strip().splitlines()[-1])
    assert child["name"] not in _domain_names()
    assert not Path(child["run_dir"]).exists()


def test_sigterm_to_the_cli_closes_its_vm() -> None:
    """`kill`/`timeout` send SIGTERM; the CLI must unwind and close its env instead of leaking the VM."""
    cli = Path(sys.executable).with_name("weavegym")
    proc = subprocess.Popen([str(cli), "validate", "Weave-Productivity-1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        mine = f"weavegym-{proc.pid}-"
        name = wait_for(lambda: next((n for n in _domain_names() if n.startswith(mine)), None), 300,
                        what="the CLI's VM")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert name not in _domain_names()
    assert not (CACHE / "run" / name).exists()


def _children(pid: int) -> set[int]:
    return {int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()}


def test_sigterm_to_a_parallel_validate_stops_its_workers_and_their_vms() -> None:
    """`validate --workers 2` once waited for both running tasks (minutes each) before it exited on SIGTERM.

    Three tasks on two workers, so a job is queued: a worker interrupted mid-task once went on with it (a new
    VM), and a second SIGTERM, as a double Ctrl-C sends, once cut the parent's stop short and left both
    workers running."""
    cli = Path(sys.executable).with_name("weavegym")
    proc = subprocess.Popen([str(cli), "validate", "Weave-DevOps-1,Weave-Productivity-1,Weave-Design-1",
                             "--workers", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    workers: set[int] = set()
    try:
        def workers_vms() -> list[str] | None:
            workers.update(_children(proc.pid))
            prefixes = tuple(f"weavegym-{c}-" for c in workers)
            names = [n for n in _domain_names() if prefixes and n.startswith(prefixes)]
            return names if len(names) == 2 else None

        names = wait_for(workers_vms, 300, what="a VM of each validate worker")
        prefixes = tuple(f"weavegym-{c}-" for c in workers)
        proc.send_signal(signal.SIGTERM)
        seen: set[str] = set()
        polls = itertools.count()

        def stopped() -> bool:
            seen.update(n for n in _domain_names() if n.startswith(prefixes))
            if next(polls) == 5 and proc.poll() is None:  # about 0.6 s on: the parent is stopping its workers
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
            return proc.poll() is not None

        wait_for(stopped, 120, what="the CLI to exit", max_poll=0.5)
        assert proc.returncode == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert seen <= set(names), f"a worker started another task's VM after the SIGTERM: {seen - set(names)}"
    left = set(names) & set(_domain_names())
    assert not left, f"the workers' VMs outlived the CLI: {left}"
    assert not [n for n in names if (CACHE / "run" / n).exists()]
    owners = {int(n.split("-")[1]) for n in names}  # the workers (the CLI's other child is a resource tracker)
    assert not [pid for pid in owners if Path(f"/proc/{pid}").exists()], "a worker outlived the CLI"


# ------------------------------------------------------------------------------------------ bad input


def _nothing_left(cache: Path) -> None:
    run = cache / "run"
    assert not run.exists() or not any(run.iterdir()), f"left behind: {list(run.iterdir())}"
    locks = cache / "locks"
    assert not locks.exists() or not any(locks.iterdir())


def test_missing_image_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(HostSetupError, match="weavegym image build --profile base"):
        LibvirtVM(LibvirtConfig(accel="tcg", cache_dir=tmp_path)).start()
    _nothing_left(tmp_path)


def test_libvirt_not_running_says_how_to_start_it() -> None:
    config = LibvirtConfig(accel="tcg", uri="qemu+unix:///system?socket=/nonexistent/libvirt-sock")
    with pytest.raises(HostSetupError, match="libvirtd -d"):
        LibvirtVM(config).start()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_full_disk_is_reported_and_nothing_is_left(tmp_path: Path) -> None:
    cache = tmp_path / "small"
    cache.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(cache)], check=True)
    try:
        (cache / "images").symlink_to(CACHE / "images")
        with pytest.raises(HostSetupError, match="GiB free"):
            LibvirtVM(LibvirtConfig(accel="tcg", cache_dir=cache)).start()
        _nothing_left(cache)
    finally:
        subprocess.run(["umount", str(cache)], check=True)
