"""Two accounts, two channels, in a real VM: the shell cannot reach the desktop, and what each side wrote shows.

Needs the `base` image (`make test` builds or reuses it). Every check here is one an agent that wants
the reward through a single channel would try: X tools from the shell, the clipboard, the root cookie,
the desktop's processes, the task code in the guest, deleting the other side's files; and, from the
desktop side, opening X to the shell or doing command-line work in a terminal window.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from weavegym.baselines.adversaries import X_PROBES, DesktopTerminal, TerminalCommand
from weavegym.core.errors import TaskError
from weavegym.core.trajectory import Trajectory
from weavegym.envs.setup_context import SetupContext
from weavegym.envs.shell_session import ShellSession
from weavegym.evaluators.channel_rules import DesktopAccessUnchanged, NoDesktopTerminalWork
from weavegym.evaluators.probes import Probe
from weavegym.evaluators.trajectory_rules import RuleContext
from weavegym.machine.backends.libvirt_vm import LibvirtConfig, LibvirtVM

pytestmark = pytest.mark.vm


@pytest.fixture(scope="module")
def vm():
    # Restores the host's booted desktop (`make test-vm` prepares it): the channels are the subject, not the boot.
    with LibvirtVM(LibvirtConfig(accel="tcg", prepared_states=True)) as machine:
        yield machine


@pytest.fixture(params=[False, True], ids=["stateless-shell", "persistent-shell"])
def shell(vm: LibvirtVM, request: pytest.FixtureRequest) -> Iterator[ShellSession]:
    """Both shells the env offers; the agent's long-lived one must keep the channels apart just as well."""
    assert vm.client is not None
    session = ShellSession(vm.client, persistent=request.param)
    yield session
    session.restart()


def test_the_persistent_shell_keeps_its_state_and_outlives_a_timeout_as_the_workspace(vm: LibvirtVM) -> None:
    assert vm.client is not None
    session = ShellSession(vm.client, persistent=True)
    try:
        session.shell("cd /tmp && mkdir -p wg-ps && cd wg-ps && export WG_A=1 && wg_f() { echo f$1; }", 30)
        killed = session.shell("cd /; WG_A=2; sleep 60 & echo $! > /tmp/wg-ps/job; sleep 120", 3)
        assert killed.timed_out and killed.exit_code == 124
        job = vm.client.exec("cat /tmp/wg-ps/job").stdout.strip()
        out = session.shell("pwd; echo $WG_A; wg_f 9; id -un; echo ${DISPLAY:-none}", 30)
        assert out.text.split("\n")[:5] == ["/tmp/wg-ps", "1", "f9", "workspace", "none"], out.text
        gone = vm.client.exec(f"ps -o stat= -p {job} | grep -qv Z && echo alive || echo gone").stdout.strip()
        assert gone == "gone", "the killed command's job must die with it"
        assert session.python("import os; print(os.getcwd(), os.environ['WG_A'], os.getuid() != 0)", 60).text \
            == "/tmp/wg-ps 1 True\n"
    finally:
        session.restart()


def test_python_in_the_persistent_shell_runs_warm_as_the_workspace_in_its_cage(vm: LibvirtVM) -> None:
    """The warm interpreter's children are the workspace account in the episode's cgroup, like the shell, and a
    python call killed at its deadline takes what it started while the shell and the interpreter carry on."""
    assert vm.client is not None
    session = ShellSession(vm.client, persistent=True)
    try:
        shell_pid, shell_cgroup = session.shell("cd /tmp; wg_kept=1; echo $$; cat /proc/$$/cgroup", 30).text.split()
        probe = "import os; print(os.getppid(), open('/proc/self/cgroup').read().strip(), os.getuid(), os.getcwd())"
        warm, cgroup, uid, cwd = session.python(probe, 60).text.split()
        assert warm != shell_pid, "python must run in a child of the warm interpreter"
        assert (cgroup, cwd) == (shell_cgroup, "/tmp") and "episode" in cgroup, cgroup
        assert uid == vm.client.exec("id -u workspace").stdout.strip()
        killed = session.python("import subprocess, time; p = subprocess.Popen(['sleep', '77']); "
                                "open('/tmp/wg-py-job', 'w').write(str(p.pid)); time.sleep(120)", 3)
        assert killed.timed_out and killed.exit_code == 124
        job = vm.client.exec("cat /tmp/wg-py-job").stdout.strip()
        gone = vm.client.exec(f"ps -o stat= -p {job} | grep -qv Z && echo alive || echo gone").stdout.strip()
        assert gone == "gone", "what the killed python call started must die with it"
        assert session.shell("echo $$ $wg_kept", 30).text == f"{shell_pid} 1\n"
        assert session.python(probe, 60).text.split()[0] == warm
    finally:
        session.restart()


def _rule_context(vm: LibvirtVM, started: float) -> RuleContext:
    assert vm.client is not None
    return RuleContext(probe=Probe(vm.client), trajectory=Trajectory("Weave-Test-1", 0, "", started_wall=started),
                       truth={})


def test_the_shell_is_the_workspace_account_without_a_display(shell: ShellSession) -> None:
    out = shell.shell('id -un; id -Gn; echo "display=${DISPLAY:-none} xauth=${XAUTHORITY:-none}"; echo ~', 30)
    lines = out.text.split("\n")
    assert lines[0] == "workspace"
    assert "weave" in lines[1].split() and "user" not in lines[1].split()
    assert lines[2] == "display=none xauth=none"
    assert lines[3] == "/home/user"  # one home for both channels: ~/x is the same file on both


def test_x_tools_and_the_clipboard_are_refused_to_the_shell(vm: LibvirtVM, shell: ShellSession) -> None:
    assert vm.client is not None
    vm.client.set_clipboard("clip-secret-4711")
    assert vm.client.get_clipboard() == "clip-secret-4711"  # the GUI channel (root agent) still has it
    out = shell.shell(X_PROBES, 60)
    assert "xdotool exit 1" in out.text, out.text
    assert "xclip exit 1" in out.text, out.text
    assert "X11 handshake: refused" in out.text, out.text
    assert "clip-secret-4711" not in out.text
    assert "Permission denied" in shell.shell("ls /opt/weavegym", 30).text  # not even the agent's code
    cookie = shell.shell("cat /run/weavegym/Xauthority | od -c | head -2", 30)
    assert "Permission denied" in cookie.text
    # The desktop account still reaches X, which is what GUI apps and setup's launches rely on.
    assert vm.client.exec("xset q >/dev/null; echo rc=$?", user="user").stdout.strip() == "rc=0"
    # The session turns key autorepeat off: under load a stalled guest would otherwise repeat a pressed key.
    assert re.search(r"auto repeat:\s+off", vm.client.exec("xset q", user="user").stdout)


def test_the_shell_cannot_touch_the_desktop_accounts_processes(vm: LibvirtVM, shell: ShellSession) -> None:
    assert vm.client is not None
    pid = vm.client.exec("pgrep -u user -o openbox").stdout.strip()
    assert pid.isdigit()
    out = shell.shell(f"kill -0 {pid}; echo kill=$?; cat /proc/{pid}/environ >/dev/null; echo environ=$?; "
                      "cat /proc/sys/kernel/yama/ptrace_scope", 30)
    assert "kill=1" in out.text and "environ=1" in out.text
    assert out.text.strip().endswith("1")  # ptrace only of one's own descendants


def test_the_shell_cannot_become_the_desktop_account_or_plant_its_settings(shell: ShellSession) -> None:
    out = shell.shell("su user -c 'DISPLAY=:0 xdotool getmouselocation' </dev/null; echo su=$?; "
                      "echo 'alias ls=x' >> ~/.bash_aliases; echo aliases=$?; mkdir ~/.ssh/x; echo ssh=$?; "
                      "mv ~/.gitconfig ~/g; echo mv=$?", 60)
    assert "su=1" in out.text and "x:" not in out.text  # every password is locked: no `su` to the desktop
    assert "aliases=1" in out.text and "ssh=1" in out.text and "mv=1" in out.text
    assert "DenyUsers user workspace" in shell.shell("cat /etc/ssh/sshd_config.d/60-weavegym.conf", 30).text


def test_the_guest_holds_only_the_agent(vm: LibvirtVM) -> None:
    assert vm.client is not None
    site = "/opt/weavegym/venv/lib/python3.11/site-packages/weavegym"
    names = set(vm.client.exec(f"ls {site}").stdout.split()) - {"__pycache__"}
    assert names == {"__init__.py", "agent", "guest_agent"}
    found = vm.client.exec("find / -xdev \\( -name 'validation.py' -o -name 'inventory_service.py' "
                           "-o -name 'scoring.py' \\) -path '*weavegym*' 2>/dev/null | head")
    assert found.stdout.strip() == ""
    imports = vm.client.exec("/opt/weavegym/venv/bin/python -c 'import weavegym.envs' 2>&1; echo rc=$?")
    assert "rc=1" in imports.stdout and "No module named 'weavegym.envs'" in imports.stdout


def test_owner_says_which_channel_wrote_a_file(vm: LibvirtVM, shell: ShellSession) -> None:
    assert vm.client is not None
    probe = Probe(vm.client)
    vm.client.exec("umask 022; mkdir -p ~/chan && echo gui > ~/chan/gui.txt && echo gui > ~/gui-top.txt",
                   user="user")
    out = shell.shell("echo cli > ~/cli.txt; stat -c '%U:%G %a' ~/cli.txt; "
                      "echo forged > ~/chan/gui.txt; echo in-place=$?; rm -f ~/gui-top.txt; echo rm=$?; "
                      "touch ~/.config/x; echo config=$?; ln -s ~/chan/gui.txt ~/link.txt", 30)
    assert "workspace:weave 664" in out.text  # group-writable: the GUI may save over the shell's files
    assert "in-place=1" in out.text  # a GUI-made file cannot be rewritten in place by the shell
    assert "rm=1" in out.text  # the home is sticky: neither side deletes the other's files there
    assert "config=1" in out.text  # the desktop account's settings are its own
    assert probe.provenance("/home/user/cli.txt") == ("file", "workspace")
    assert probe.provenance("/home/user/chan/gui.txt") == ("file", "user")
    assert probe.provenance("/home/user/link.txt") == ("symlink", "workspace")
    assert probe.provenance("/home/user/absent.txt") is None


def test_opening_x_to_the_shell_from_the_desktop_is_caught(vm: LibvirtVM, shell: ShellSession) -> None:
    assert vm.client is not None
    rule = DesktopAccessUnchanged()
    assert rule.check(_rule_context(vm, time.time())) == []
    vm.client.set_clipboard("clip-secret-4711")
    vm.client.exec("xhost +si:localuser:workspace", user="user")
    try:
        # The bridge is real (the shell now drives X), which is why the rule zeroes such an episode.
        bridged = shell.shell(X_PROBES, 60).text
        assert "X11 handshake: accepted" in bridged and "clip-secret-4711" in bridged, bridged
        flags = rule.check(_rule_context(vm, time.time()))
        assert [f.confidence for f in flags] == ["high"] and "SI:localuser:workspace" in flags[0].message
    finally:
        vm.client.exec("xhost -si:localuser:workspace", user="user")
    assert rule.check(_rule_context(vm, time.time())) == []


def test_command_lines_in_a_desktop_terminal_are_caught(vm: LibvirtVM) -> None:
    # Not run once per shell: the accounting records of one run's terminal would still be inside the next
    # run's window (they have one-second start times). Both shells run the same command here instead.
    assert vm.client is not None
    rule = NoDesktopTerminalWork()
    started = time.time()
    for persistent in (False, True):  # the shell channel is the right place for this
        session = ShellSession(vm.client, persistent=persistent)
        session.shell("ls ~ >/dev/null", 30)
        session.restart()
    vm.client.exec("xmessage -timeout 1 plain-gui-app", user="user")  # GUI apps have no controlling tty
    assert rule.check(_rule_context(vm, started)) == []
    result = DesktopTerminal(vm.client).run(TerminalCommand("cp /etc/hostname ~/typed.txt && id -un"))
    assert result.stdout.strip().endswith("user"), result.stdout
    flags = rule.check(_rule_context(vm, started))
    assert [f.confidence for f in flags] == ["high"], flags
    assert "cp" in flags[0].message
    assert Probe(vm.client).provenance("/home/user/typed.txt") == ("file", "user")


def test_a_task_can_let_its_own_third_account_onto_the_desktop(vm: LibvirtVM) -> None:
    """Design tasks run their app as 'designer': setup grants exactly that account, never the workspace."""
    assert vm.client is not None
    ctx = SetupContext(vm.client, "Weave-Test-1", 0, (1280, 800))
    ctx.run("id -u designer >/dev/null 2>&1 || useradd --create-home designer")
    probe = "DISPLAY=:0 xdotool getdisplaygeometry; echo exit=$?"
    assert "exit=1" in vm.client.exec(probe, user="designer").stdout
    with pytest.raises(TaskError, match="workspace"):
        ctx.grant_desktop_access("workspace")
    ctx.grant_desktop_access("designer")
    try:
        assert "exit=0" in vm.client.exec(probe, user="designer").stdout
        # Allowed when the task declares a deliverable of designer's; an extra entry for anyone else.
        assert DesktopAccessUnchanged(["designer"]).check(_rule_context(vm, time.time())) == []
        flags = DesktopAccessUnchanged().check(_rule_context(vm, time.time()))
        assert len(flags) == 1 and "SI:localuser:designer" in flags[0].message
    finally:
        vm.client.exec("xhost -si:localuser:designer", user="user")
