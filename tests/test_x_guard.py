"""The agent's desktop guard on a host Xvfb with a cookie (access control on, as on the image's Xorg).

A real X server, real accounts and real X clients (xdotool run as a throwaway account): a grant to an account
the task did not allow is revoked and recorded, access control switched off is switched back on, and a client
of another account is killed with its connection, whichever way it got in; allowed accounts are left alone. The
same through the agent's GuardDesktop call. The VM end of it is in test_channel_crossings.py.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from Xlib import X
from Xlib import display as xdisplay
from Xlib.ext import res

from weavegym.core.deadline import wait_for
from weavegym.core.errors import AgentRequestError
from weavegym.guest_agent.x_guard import FAMILY_SERVER_INTERPRETED, XGuard
from weavegym.testing.local_agent import LocalAgent, LocalAgentConfig
from weavegym.testing.xvfb import XvfbConfig, XvfbDisplay

pytestmark = pytest.mark.xvfb


@pytest.fixture()
def guarded_display(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    cookie = tmp_path / "Xauthority"
    cookie.touch(0o600)
    with XvfbDisplay(XvfbConfig(auth_file=str(cookie))) as xvfb:
        subprocess.run(["xauth", "-f", str(cookie), "add", xvfb.display, ".", secrets.token_hex(16)], check=True)
        monkeypatch.setenv("XAUTHORITY", str(cookie))
        yield xvfb.display


def _entry(account: str) -> bytes:
    return b"localuser\0" + account.encode()


def _grant(d: xdisplay.Display, account: str) -> None:
    d.change_hosts(X.HostInsert, FAMILY_SERVER_INTERPRETED, _entry(account))
    d.sync()


def _client_pids(d: xdisplay.Display) -> set[int]:
    ids = d.res_query_client_ids([{"client": 0, "mask": res.LocalClientPIDMask}])
    return {int(c.value[0]) for c in ids.ids if c.spec.mask == res.LocalClientPIDMask and c.value}


def _x_client_as(account: str, display: str) -> subprocess.Popen[bytes]:
    """xdotool as ``account``, holding its connection for a minute (no cookie: only an access-list grant or a
    copied cookie lets it in)."""
    return subprocess.Popen(["runuser", "-u", account, "--", "env", f"DISPLAY={display}", "XAUTHORITY=/nonexistent",
                             "xdotool", "sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_a_grant_to_another_account_is_revoked_and_recorded(guarded_display: str, throwaway_account: str) -> None:
    guard = XGuard(guarded_display)
    guard.arm(["nobody"])
    d = xdisplay.Display(guarded_display)
    _grant(d, "nobody")  # allowed: stays
    _grant(d, throwaway_account)
    found = guard.check()
    assert [c.kind for c in found] == ["access-list"]
    assert throwaway_account in found[0].detail
    names = {bytes(h.name) for h in d.list_hosts().hosts}
    assert names == {_entry("nobody")}
    assert guard.report(wait_s=0).crossings_total == 1
    assert guard.check() == []  # undone: nothing new the next time


def test_access_control_switched_off_is_switched_back_on(guarded_display: str) -> None:
    guard = XGuard(guarded_display)
    guard.arm(["nobody"])
    d = xdisplay.Display(guarded_display)
    d.set_access_control(X.DisableAccess)
    d.sync()
    assert d.list_hosts().mode == X.DisableAccess
    assert [c.kind for c in guard.check()] == ["access-control-off"]
    assert d.list_hosts().mode == X.EnableAccess


def test_a_client_of_another_account_is_disconnected_and_killed(guarded_display: str, throwaway_account: str
                                                                ) -> None:
    d = xdisplay.Display(guarded_display)
    _grant(d, throwaway_account)
    guard = XGuard(guarded_display)
    guard.arm([throwaway_account])  # allowed while it connects, as during a grant the guard has not seen yet
    intruder = _x_client_as(throwaway_account, guarded_display)
    try:
        wait_for(lambda: intruder.pid in _client_pids(d) or _child_pids(intruder.pid) & _client_pids(d), 20,
                 what="xdotool's X connection")
        assert guard.check() == []  # an allowed account's client is left alone
        assert intruder.poll() is None
        guard.arm(["nobody"])  # now the account is not allowed (its grant is revoked, its client killed)
        assert [c.kind for c in guard.check()] == ["access-list"]  # a client seen once may be a refused attempt
        assert intruder.poll() is None
        found = guard.check()  # still there at the next look: it got in
        assert [c.kind for c in found] == ["x-client"], found
        assert "xdotool" in next(c.detail for c in found if c.kind == "x-client")
        wait_for(lambda: not (_client_pids(d) - {os.getpid()} - _server_pids()), 20, what="the client gone")
        intruder.wait(timeout=20)
    finally:
        intruder.kill()
        intruder.wait()


def _child_pids(pid: int) -> set[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def _server_pids() -> set[int]:
    out = subprocess.run(["pgrep", "-x", "Xvfb"], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def test_a_refused_attempt_is_no_crossing(guarded_display: str, throwaway_account: str) -> None:
    guard = XGuard(guarded_display, interval_s=0.01).start()
    try:
        guard.arm(["nobody"])
        for _ in range(20):  # the shell trying X again and again, never let in
            tried = subprocess.run(["runuser", "-u", throwaway_account, "--", "env", f"DISPLAY={guarded_display}",
                                    "XAUTHORITY=/nonexistent", "xdotool", "getmouselocation"], capture_output=True)
            assert tried.returncode != 0
        report = guard.report()
        assert report.checks >= 5 and report.crossings_total == 0, report
    finally:
        guard.close()


def test_disarmed_it_changes_nothing(guarded_display: str, throwaway_account: str) -> None:
    guard = XGuard(guarded_display)
    d = xdisplay.Display(guarded_display)
    _grant(d, throwaway_account)
    assert guard.check() == []
    assert _entry(throwaway_account) in {bytes(h.name) for h in d.list_hosts().hosts}


def test_the_state_file_survives_a_restarted_agent(guarded_display: str, throwaway_account: str,
                                                   tmp_path: Path) -> None:
    state = tmp_path / "guard.json"
    first = XGuard(guarded_display, state_file=state)
    first.arm(["nobody"])
    _grant(xdisplay.Display(guarded_display), throwaway_account)
    assert len(first.check()) == 1
    assert state.stat().st_mode & 0o777 == 0o600
    again = XGuard(guarded_display, state_file=state)  # a new agent process reads where the old one stopped
    assert again.state.armed and again.state.allowed_accounts == ("nobody",)
    assert [c.kind for c in again.state.crossings] == ["access-list"]
    state.write_text("{not json")
    assert not XGuard(guarded_display, state_file=state).state.armed  # unreadable: starts disarmed, says so in the log


def test_bad_guard_requests_are_refused_and_change_nothing(guarded_display: str) -> None:
    with LocalAgent(LocalAgentConfig(display=guarded_display)) as agent, agent.client() as client:
        client.wait_ready(20)
        client.guard_desktop(arm=["nobody"])
        for bad in ({"arm": [], "disarm": False}, {"arm": ["nobody"], "disarm": True}):
            with pytest.raises(AgentRequestError):
                client.guard_desktop(**bad)
        # Names that are no account (unicode, control characters, huge): allowed on paper, no uid, no harm.
        odd = ["ünï", "名前", "a\tb", "x" * 10_000, *[f"nosuch{i}" for i in range(500)]]
        report = client.guard_desktop(arm=odd)
        assert report.armed and report.crossings_total == 0
        assert client.guard_desktop(arm=["nobody"]).armed and client.health().display_ok


def test_guard_desktop_through_the_agent(guarded_display: str, throwaway_account: str) -> None:
    with LocalAgent(LocalAgentConfig(display=guarded_display)) as agent, agent.client() as client:
        client.wait_ready(20)
        assert not client.guard_desktop().armed
        report = client.guard_desktop(arm=["nobody"])
        assert report.armed and report.crossings == () and report.checks >= 1
        _grant(xdisplay.Display(guarded_display), throwaway_account)
        # The timer thread finds it without any call; the report shows it.
        wait_for(lambda: client.guard_desktop().crossings_total == 1, 20, what="the guard's timer to find the grant")
        crossing = client.guard_desktop().crossings[0]
        assert crossing.kind == "access-list" and throwaway_account in crossing.detail
        again = client.guard_desktop(arm=["nobody"])  # a new episode forgets the old one's crossings
        assert again.crossings_total == 0
        assert not client.guard_desktop(disarm=True).armed
