"""What a task's ``setup`` hook gets: a seeded RNG and checked helpers that act inside the VM as root.

Every helper raises ``TaskError`` with the guest's own error text when it
fails, so a broken setup is reported as such and never silently produces a
half-prepared episode. GUI programs are started detached, as the desktop user,
and ``wait_window`` waits on the window actually being mapped (no sleeps).
"""

from __future__ import annotations

import re
import shlex
from importlib import resources
from pathlib import PurePosixPath

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError

# Re-exported: a task module needs only this one import for its setup.
from weavegym.core.guest_layout import DESKTOP_USER as DESKTOP_USER
from weavegym.core.guest_layout import HOME as HOME
from weavegym.core.guest_layout import LAUNCH_MARKER as LAUNCH_MARKER
from weavegym.core.guest_layout import PRIVATE_DIR as PRIVATE_DIR
from weavegym.core.guest_layout import SHARED_GROUP as SHARED_GROUP
from weavegym.core.guest_layout import WORKSPACE_USER as WORKSPACE_USER
from weavegym.machine.guest_client import ExecResult, GuestClient, WindowInfo
from weavegym.machine.window_manager import nudge_window_manager


class SetupContext:
    def __init__(self, client: GuestClient, task_id: str, seed: int, screen: tuple[int, int], *,
                 feasible: bool = True, separate_accounts: bool = True) -> None:
        self.client = client
        self.task_id = task_id
        self.seed = seed
        self.feasible = feasible  # False on the variants an Abstention task declares infeasible
        # False where both channels are one account on a machine that is not weavegym's guest (the local
        # backend runs the agent on the host itself): setup must not create accounts there.
        self.separate_accounts = separate_accounts
        self.screen = screen
        self.rng = np.random.default_rng(seed)
        self.home = HOME
        self.user = DESKTOP_USER
        self.workspace_user = WORKSPACE_USER
        self.private_dir = PRIVATE_DIR
        self._launch_logs: list[str] = []
        self._bus_address: str | None = None

    def run(self, command: str | list[str], *, user: str = "", timeout: float = 60.0, check: bool = True,
            stdin: bytes | str = b"") -> ExecResult:
        """Run a command in the guest (root by default); with ``check`` a non-zero exit raises TaskError."""
        result = self.client.exec(command, user=user, timeout=timeout, stdin=stdin, merge_stderr=True)
        if check and not result.ok:
            shown = command if isinstance(command, str) else shlex.join(command)
            why = "timed out" if result.timed_out else f"exit {result.exit_code}"
            raise TaskError(f"{self.task_id} setup: `{shown[:200]}` {why}: {result.stdout.strip()[-1500:]}")
        return result

    def write_file(self, path: str, content: bytes | str, *, owner: str = DESKTOP_USER, mode: int | None = None
                   ) -> None:
        """Create a file with exact contents, in the shared group; parents under the home are made alike.

        The default (group-writable 0o664, parents setgid 0o2775) lets both channels work on the task's
        material. Under the home's dot folders (``~/.config``…, the desktop account's settings) the
        default is 0o644 and parents 0o755: the shell must not reconfigure the desktop's apps. A file that
        a GUI app changes in place and the checker then reads as a GUI deliverable needs ``mode=0o644``;
        material only the shell may change belongs to the workspace account (CONTRIBUTING.md, "Who owns
        the task's material"). A file of ``owner="root"`` is neither account's: group root, 0o644, and
        the folders made for it 0o755, so neither channel can change or replace it.
        """
        data = content.encode() if isinstance(content, str) else content
        parent = PurePosixPath(path).parent
        inside = PurePosixPath(path).relative_to(HOME).parts if PurePosixPath(path).is_relative_to(HOME) else ()
        private = bool(inside) and inside[0].startswith(".")
        rootish = owner == "root"
        group = "root" if rootish else SHARED_GROUP
        if parent.is_relative_to(HOME):
            # Every directory created under the home belongs to the owner, not just the last one:
            # apps refuse to start when e.g. ~/.config was left owned by root.
            chain = [str(d) for d in reversed((parent, *parent.parents)) if d.is_relative_to(HOME)]
            script = ('for d in "$@"; do [ -d "$d" ] || install -d -m "$MODE" -o "$OWNER" -g "$GROUP" "$d" || exit 1; '
                      'done')
            self.run(["env", f"OWNER={owner}", f"GROUP={group}", f"MODE={'0755' if private or rootish else '2775'}",
                      "sh", "-c", script, "sh", *chain])
        else:
            self.run(["mkdir", "-p", str(parent)])
        if mode is None:
            mode = 0o644 if private or rootish else 0o664
        self.client.upload(data, path, mode=mode, owner=f"{owner}:{group}")

    def make_private_dir(self) -> str:
        self.run(["install", "-d", "-m", "0700", "-o", "root", "-g", "root", PRIVATE_DIR])
        return PRIVATE_DIR

    def fixture(self, package: str, name: str) -> bytes:
        """A file shipped beside the task module, e.g. ``fixture(__package__, "fixtures/app.py")``."""
        try:
            return resources.files(package).joinpath(name).read_bytes()
        except (FileNotFoundError, ModuleNotFoundError) as exc:
            raise TaskError(f"{self.task_id}: fixture {name!r} not found in {package}: {exc}") from None

    def launch_gui(self, shell_line: str, *, name: str) -> str:
        """Start a GUI program detached, as the desktop user on the desktop's display.

        ``shell_line`` runs under ``sh -c`` as *root*, which lets it redirect the program's
        output into ``PRIVATE_DIR`` (where the user cannot tamper with it); use ``{as_user}``
        as the prefix that drops to the desktop user, e.g.
        ``"{as_user} zenity --entry > /var/lib/weavegym/task/answer"``.
        """
        bus = self.session_bus_address()
        bus_env = f" DBUS_SESSION_BUS_ADDRESS={shlex.quote(bus)}" if bus else ""
        as_user = f"runuser -u {DESKTOP_USER} -- env DISPLAY=:0 HOME={HOME}{bus_env} {LAUNCH_MARKER}"
        line = f"export {LAUNCH_MARKER}; " + shell_line.format(as_user=as_user)
        log = f"/tmp/weavegym-launch-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.log"
        self.run(["bash", "-c", f"setsid -f sh -c {shlex.quote(line)} >{log} 2>&1 </dev/null"])
        self._launch_logs.append(log)
        return log

    def grant_desktop_access(self, account: str) -> None:
        """Let another account (a task's 'designer', say) open windows on the desktop's X server.

        The server admits only the desktop account; a task whose GUI part runs under a third account puts
        it on the access list here. The evaluation accepts the list's extra entries only for accounts that
        own one of the task's deliverables (``DesktopAccessUnchanged``), so declare that deliverable. The
        workspace account is never let in: that would hand the GUI to the shell.
        """
        if account in (WORKSPACE_USER, "", "root") or not re.fullmatch(r"[a-z_][a-z0-9_-]*", account):
            raise TaskError(f"{self.task_id} setup: cannot grant X access to {account!r}")
        self.run(["env", "DISPLAY=:0", "xhost", f"+si:localuser:{account}"])

    def session_bus_address(self) -> str:
        """The desktop session's D-Bus address ('' if it has none, as under openbox).

        Apps that keep settings in xfconf or talk to the session (Thunar, xfce4-settings) fail or
        silently fork a private bus without it; the address is random per boot, so it is read
        from the session leader's environment.
        """
        if self._bus_address is None:
            script = (f"for p in $(pgrep -u {DESKTOP_USER} -o xfce4-session) $(pgrep -u {DESKTOP_USER}); do "
                      "tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | sed -n 's/^DBUS_SESSION_BUS_ADDRESS=//p' "
                      "| grep . && break; done; true")
            lines = self.run(["bash", "-c", script]).stdout.strip().splitlines()
            self._bus_address = lines[0] if lines else ""
        return self._bus_address

    def wait_window(self, title_pattern: str, timeout: float = 120.0) -> WindowInfo:
        """Wait until a mapped window whose title matches the regex exists; return it."""
        regex = re.compile(title_pattern)

        def probe() -> WindowInfo | None:
            windows, _wm = self.client.list_windows(timeout=10)
            found = next((w for w in windows if w.mapped and regex.search(w.title)), None)
            if found is None:
                nudge_window_manager(self.client)  # a stalled WM event loop must not hide the window
            return found

        try:
            return wait_for(probe, timeout, what=f"a window titled /{title_pattern}/")
        except TimeoutError:
            logs = self.run(["bash", "-c", "tail -n 20 " + " ".join(self._launch_logs) + " </dev/null; "
                             "ps -eo pid,stat,etime,args | grep -E 'zenity|runuser|setsid' | grep -v grep"],
                            check=False).stdout
            titles = [w.title for w in self.client.list_windows(timeout=10)[0] if w.mapped]
            raise TaskError(f"{self.task_id} setup: no window titled /{title_pattern}/ appeared within "
                            f"{timeout:.0f} s; mapped windows: {titles}; launch logs: {logs.strip()[-1500:]}"
                            ) from None

    def place_window(self, window_id: int, at: tuple[int, int] | list[int], size: tuple[int, int] | None = None,
                     timeout: float = 60.0) -> list[int]:
        """Move (and size) a window to ``at`` and return its geometry once the window manager has done so.

        Tasks with two windows side by side need it: a click meant for one must never land on the other, and the
        window manager places a new window where it likes (and may take a while to honour the move under TCG).
        The frame may sit a little right of or below ``at`` (its decorations), never above it.
        """
        command = ["env", "DISPLAY=:0", "xdotool"]
        if size is not None:
            command += ["windowsize", str(window_id), str(size[0]), str(size[1])]
        self.run([*command, "windowmove", str(window_id), str(at[0]), str(at[1])], user=self.user)

        def placed() -> list[int] | None:
            found = next((w for w in self.client.list_windows(timeout=10)[0] if w.id == window_id), None)
            if found is None or abs(found.x - at[0]) > 16 or found.y < at[1] - 4:
                return None
            return None if size is not None and found.width > size[0] + 16 else list(found.geometry)

        try:
            return wait_for(placed, timeout, what=f"window {window_id} moved to {tuple(at)}", max_poll=0.5)
        except TimeoutError as exc:
            raise TaskError(f"{self.task_id} setup: {exc}") from None
