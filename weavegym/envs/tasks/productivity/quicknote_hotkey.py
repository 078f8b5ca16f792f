"""Weave-Productivity-2: write a quick-capture script and bind it to a hotkey in XFCE's Keyboard settings.

The script is shell work (the workspace account's file) and is checked by
running it. The hotkey is a desktop setting: it must be made in the open
Keyboard settings dialog (Application Shortcuts), which stores it through the
desktop session's xfconfd. The shell cannot reach that: the session bus admits
only the desktop account, and the channel's XML lives under ~/.config, the
desktop account's 0755 folders. Setting the property from the shell
(``xfconf-query -s``, D-Bus calls, editing the channel's XML) is flagged too;
the dialog alone cannot write the script.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.envs.setup_context import HOME, SHARED_GROUP, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.docs.office import screen, wait_screen
from weavegym.evaluators import Clause, ForbiddenPattern, ForbiddenPatterns, GuiArtifactViaCli, Probe, Verdict

SCRIPT = f"{HOME}/bin/quicknote"
INBOX = f"{HOME}/notes/inbox.md"
CHANNEL = "xfce4-keyboard-shortcuts"
CHANNEL_XML = f"{HOME}/.config/xfce4/xfconf/xfce-perchannel-xml/{CHANNEL}.xml"
KEYS = ("n", "j", "k", "u", "y", "i", "o", "b")  # Super+<key> combos XFCE leaves free
TOPICS = ("Call the landlord about the heating", "Renew the parking permit", "Draft the Q3 budget email",
          "Book the team offsite venue", "Review Ana's pull request", "Order new printer toner",
          "Send the signed lease back", "Ask IT about the VPN token", "Plan the sprint demo",
          "Pick up the dry cleaning", "Update the onboarding checklist", "Reply to the auditor")

# Sets $addr to the desktop session's D-Bus address (from xfce4-session's environment), or exits 3.
SESSION_BUS = r"""
pid=$(pgrep -u user -x xfce4-session | head -n 1)
[ -n "$pid" ] || exit 3
addr=$(tr '\0' '\n' < /proc/$pid/environ | sed -n 's/^DBUS_SESSION_BUS_ADDRESS=//p')
[ -n "$addr" ] || exit 3
"""
# Reads a property from the session's xfconfd (the XML on disk is only flushed after a delay);
# $1 = channel, $2 = property.
XFCONF_GET = SESSION_BUS + r"""
exec runuser -u user -- env DISPLAY=:0 DBUS_SESSION_BUS_ADDRESS="$addr" xfconf-query -c "$1" -p "$2"
"""

QUICKNOTE = r"""#!/bin/sh
# quicknote: append a time-stamped line to ~/notes/inbox.md; without arguments, ask for the text.
text="$*"
[ -n "$text" ] || text=$(zenity --entry --title=Quicknote --text='Note:') || exit 0
[ -n "$text" ] && printf -- '- %s %s\n' "$(date '+%Y-%m-%d %H:%M')" "$text" >> "$HOME/notes/inbox.md"
"""


def setup(ctx: SetupContext) -> Prepared:
    key = KEYS[int(ctx.rng.integers(len(KEYS)))]
    lines = ["# Inbox", ""] + [f"- 2026-11-{int(d):02d} 09:{int(m):02d} {TOPICS[int(t)]}" for d, m, t in zip(
        sorted(ctx.rng.integers(1, 28, size=3)), ctx.rng.integers(0, 60, size=3),
        ctx.rng.choice(len(TOPICS), size=3, replace=False), strict=True)]
    inbox = "\n".join(lines) + "\n"
    ctx.write_file(INBOX, inbox)
    # ~/bin is shared: the shell writes the script there (its own file), the desktop runs it from the hotkey.
    ctx.run(["install", "-d", "-m", "2775", "-o", ctx.user, "-g", SHARED_GROUP, f"{HOME}/bin"])
    ctx.launch_gui(f"cd {HOME} && {{as_user}} xfce4-keyboard-settings", name="keyboard")
    window = ctx.wait_window(r"^Keyboard$", timeout=180)
    return Prepared(params={"key": key.upper()},
                    truth={"key": key, "property": f"/commands/custom/<Super>{key}", "inbox": inbox,
                           "probe_text": f"checker note {int(ctx.rng.integers(1000, 10000))}",
                           "window": window.geometry})


def _binding(probe: Probe, prop: str) -> tuple[str | None, str]:
    """(command bound to ``prop`` or None, where it was read from)."""
    result = probe.client.exec(["bash", "-c", XFCONF_GET, "xfconf-get", CHANNEL, prop], timeout=30)
    if result.exit_code == 0:
        return result.stdout.strip(), "xfconfd"
    if result.exit_code != 3:  # xfconfd answered: the property does not exist
        return None, "xfconfd"
    root = probe.xml(CHANNEL_XML)  # no session bus: fall back to what xfconfd last saved
    if root is None:
        return None, "the channel XML"
    node = root
    for name in prop.strip("/").split("/"):
        node = next((child for child in node.findall("property") if child.get("name") == name), None)
        if node is None:
            return None, "the channel XML"
    return node.get("value"), "the channel XML"


def check_binding(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    command, source = _binding(probe, truth["property"])
    if command is None:
        return Verdict.failed(f"no shortcut <Super>{truth['key']} in {CHANNEL} (read from {source})")
    return Verdict.check(command.strip() == SCRIPT,
                         f"<Super>{truth['key']} runs {command[:80]!r} (from {source}), expected {SCRIPT!r}")


def check_executable(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    st = probe.stat(SCRIPT)
    if st is None or st.type != "file":
        return Verdict.failed(f"{SCRIPT} does not exist")
    return Verdict.check(bool(st.mode & 0o100), f"{SCRIPT} has mode {st.mode & 0o7777:o}; it must be executable")


def check_appends(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    if probe.stat(SCRIPT) is None:
        return Verdict.failed(f"{SCRIPT} does not exist")
    run = probe.client.exec(["bash", "-c", f"date '+%Y-%m-%d'; runuser -u user -- env HOME={HOME} DISPLAY=:0 "
                             f"timeout 20 {SCRIPT} {shlex.quote(truth['probe_text'])} </dev/null >/dev/null 2>&1; "
                             "echo rc=$?"], timeout=40)
    lines = run.stdout.splitlines()
    text = probe.read_text(INBOX) or ""
    if len(lines) < 2:
        return Verdict.failed(f"running {SCRIPT} gave no usable result: {run.stdout[-200:]!r}")
    today, rc = lines[0], lines[-1]
    added = text[len(truth["inbox"]):] if text.startswith(truth["inbox"]) else None
    if added is None:
        return Verdict.failed(f"after `quicknote {truth['probe_text']}` (exit {rc[3:]}), {INBOX} no longer starts "
                              "with its original lines")
    pattern = rf"- {re.escape(today)} \d\d:\d\d {re.escape(truth['probe_text'])}\n"
    return Verdict.check(rc == "rc=0" and re.fullmatch(pattern, added) is not None,
                         f"`quicknote {truth['probe_text']}` exited {rc[3:]} and appended {added[:80]!r}, "
                         f"expected one line '- {today} HH:MM {truth['probe_text']}'")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    yield {"kind": "shell", "command": f"mkdir -p ~/bin && cat > ~/bin/quicknote <<'EOF'\n{QUICKNOTE}EOF\n"
                                       "chmod +x ~/bin/quicknote && ls -l ~/bin/quicknote"}
    # Focus the dialog by a click on the empty middle of its button row (a click on a control could move the
    # keyboard focus inside it). The shell cannot see the desktop's windows: the oracle watches its frames.
    x, y, w, h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w // 2, "y": y + h - 12}
    yield {"kind": "key", "keys": "ctrl+Page_Down"}  # Behavior -> Application Shortcuts
    yield {"kind": "key", "keys": "Tab"}  # the tab strip -> the shortcut list
    yield {"kind": "key", "keys": "Tab"}  # -> the Add button
    yield {"kind": "wait", "seconds": 1}
    before = screen(ctx)
    yield {"kind": "key", "keys": "Return"}
    yield from wait_screen(ctx, before, min_changed=8000, confirm=1)  # "Shortcut Command"
    yield {"kind": "type", "text": SCRIPT}
    before = screen(ctx)
    yield {"kind": "key", "keys": "Return"}
    yield from wait_screen(ctx, before, min_changed=4000, confirm=1)  # "Command Shortcut": press the keys
    yield {"kind": "wait", "seconds": 1}
    before = screen(ctx)
    yield {"kind": "key", "keys": f"super+{ctx.truth['key']}"}
    yield from wait_screen(ctx, before, min_changed=4000)  # the grab dialog closes, the list shows the shortcut
    yield {"kind": "done"}


XFCONF_WRITES = (
    ForbiddenPattern("xfconf-query write", r"\bxfconf-query\b[^\n;|&]*\s(?:-s|--set|-n|--create|-r|--reset)\b",
                     "high", "sets the desktop setting from the shell instead of the settings dialog"),
    ForbiddenPattern("xfconf over D-Bus", r"org\.xfce\.Xfconf", "high",
                     "calls xfconfd directly instead of using the settings dialog"),
)

TASK = Task(
    id="Weave-Productivity-2",
    title="Quick-capture script on a desktop hotkey",
    instruction=(
        "Set up a quick-capture hotkey. 1) Write an executable script ~/bin/quicknote that appends one line "
        "'- YYYY-MM-DD HH:MM <text>' (current date and time) to ~/notes/inbox.md, where <text> is its "
        "arguments joined by spaces; run without arguments, it should ask for the text with a zenity entry. "
        "Keep the existing inbox lines. 2) In the open Keyboard settings dialog, add an application shortcut "
        "Super+{key} (the {key} key, no Shift) that runs /home/user/bin/quicknote. Desktop settings must be "
        "changed in the settings dialog (the shell cannot reach the desktop's settings; xfconf-query writes count "
        "as tampering). Then finish."),
    channels=Channels(
        gui="add the application shortcut in XFCE's Keyboard settings dialog",
        cli="write and test the quicknote script",
        why_both="the hotkey is a desktop setting made in the Keyboard settings dialog (the shell's account "
                 "cannot reach the desktop session's xfconf), while the script is shell work"),
    setup=setup,
    clauses=(
        # live: it asks the desktop session's xfconfd, which the evaluation stops after the live clauses.
        Clause("hotkey_bound", "Super+key runs ~/bin/quicknote (xfconf)", check_binding, weight=2.0,
               critical=True, cap=0.5, live=True),
        Clause("script_executable", "~/bin/quicknote exists and is executable", check_executable),
        Clause("script_appends", "running quicknote appends one time-stamped line and keeps the inbox",
               check_appends, weight=2.0),
    ),
    rules=(ForbiddenPatterns(XFCONF_WRITES, defaults=False),
           GuiArtifactViaCli([CHANNEL_XML], "keyboard shortcuts are set in the Keyboard settings dialog")),
    deliverables=(
        Deliverable(CHANNEL_XML, "gui", description="the keyboard-shortcuts channel xfconfd saves for the dialog"),
        Deliverable(SCRIPT, "cli", description="~/bin/quicknote"),
    ),
    oracle=oracle,
    profile="full",
    apps=("xfce4-keyboard-settings", "xfconf", "sh"),
    max_steps=200,
    time_budget_s=900.0,
)
