"""Clipboard and window handling of the guest agent against a real Xvfb and real X clients.

Independent clients check the agent from outside: xclip reads and owns
selections, xwininfo/xprop report geometry and EWMH state, zenity is a real GTK
window, openbox a real EWMH window manager. Waits are conditions with deadlines.
"""

from __future__ import annotations

import os
import random
import re
import select
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from Xlib import X, Xatom, Xutil
from Xlib import display as xdisplay
from Xlib.protocol import event as xevent

from weavegym.core.deadline import wait_for
from weavegym.guest_agent.clipboard import MAX_TEXT_BYTES, Clipboard
from weavegym.guest_agent.display import DisplayConnection
from weavegym.guest_agent.errors import DisplayUnavailable, FailedPrecondition, InvalidArgument, NotFound
from weavegym.guest_agent.windows import activate_window, list_windows
from weavegym.testing.xvfb import XvfbDisplay

pytestmark = pytest.mark.xvfb
needs_xclip = pytest.mark.skipif(shutil.which("xclip") is None, reason="needs xclip (apt-get install xclip)")

UNI = "héllo 你好 😀 clipboard"
X_ERROR_MARKERS = ("X protocol error", "BadWindow", "Xlib.error")


@pytest.fixture
def xvfb() -> Iterator[XvfbDisplay]:
    with XvfbDisplay() as x:
        yield x


@pytest.fixture
def conn(xvfb: XvfbDisplay) -> Iterator[DisplayConnection]:
    c = DisplayConnection(xvfb.display)
    yield c
    c.close()


@pytest.fixture
def probe(xvfb: XvfbDisplay) -> Iterator[xdisplay.Display]:
    """An independent python-xlib connection, as another client would have."""
    d = xdisplay.Display(xvfb.display)
    yield d
    d.close()


@pytest.fixture
def clip(conn: DisplayConnection) -> Iterator[Clipboard]:
    c = Clipboard(conn)
    yield c
    c.close()


def _env(x: XvfbDisplay, **extra: str) -> dict[str, str]:
    return dict(os.environ, DISPLAY=x.display, NO_AT_BRIDGE="1", **extra)


def xclip_out(x: XvfbDisplay, selection: str = "clipboard", target: str | None = None) -> bytes:
    cmd = ["xclip", "-o", "-selection", selection] + (["-t", target] if target else [])
    return subprocess.run(cmd, env=_env(x), capture_output=True, timeout=15, check=True).stdout


def owner_of(probe: xdisplay.Display, selection: str) -> int:
    owner = probe.get_selection_owner(probe.intern_atom(selection))
    return int(getattr(owner, "id", owner))


@contextmanager
def xclip_owner(x: XvfbDisplay, probe: xdisplay.Display, text: str, selection: str = "clipboard"
                ) -> Iterator[subprocess.Popen[bytes]]:
    """xclip in the foreground owning ``selection``; yields once the server says it owns it."""
    before = owner_of(probe, selection.upper())
    proc = subprocess.Popen(["xclip", "-quiet", "-selection", selection, "-i"], env=_env(x),
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdin is not None
        proc.stdin.write(text.encode())
        proc.stdin.close()
        wait_for(lambda: owner_of(probe, selection.upper()) not in (0, before), 10, what="xclip ownership")
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def big_text(n: int = 200_000) -> str:
    pool = ["a", "Z", " ", "\n", "\t", "é", "ß", "Ж", "你", "好", "😀", "🎉", "\u00a0", "€"]
    return "".join(random.Random(1234).choice(pool) for _ in range(n))


# ----------------------------------------------------------------------------- clipboard


@needs_xclip
def test_set_text_is_served_to_xclip_in_every_text_target(xvfb: XvfbDisplay, clip: Clipboard) -> None:
    start = time.monotonic()
    clip.set_text(UNI)
    # A lost wake-up in the owner thread shows up as its 1 s select() timeout.
    assert time.monotonic() - start < 0.5
    assert xclip_out(xvfb) == UNI.encode()
    assert xclip_out(xvfb, target="UTF8_STRING") == UNI.encode()
    assert xclip_out(xvfb, target="TEXT") == UNI.encode()
    assert xclip_out(xvfb, target="text/plain;charset=utf-8") == UNI.encode()
    assert xclip_out(xvfb, target="STRING") == "héllo ?? ? clipboard".encode("latin-1")
    assert xclip_out(xvfb, target="TARGETS").split() == [
        b"TARGETS", b"TIMESTAMP", b"UTF8_STRING", b"text/plain;charset=utf-8", b"TEXT", b"STRING"]
    assert clip.get_text() == UNI


@needs_xclip
def test_get_text_from_xclip_and_losing_ownership(
    xvfb: XvfbDisplay, clip: Clipboard, probe: xdisplay.Display
) -> None:
    clip.set_text("ours first")
    other = "from xclip: ünïcödé 日本 🐍\nsecond line\n"
    with xclip_owner(xvfb, probe, other):
        assert clip.get_text() == other
        # SelectionClear reached the owner thread: it no longer claims the text.
        atom = probe.intern_atom("CLIPBOARD")
        wait_for(lambda: clip._owner is not None and clip._owner.text_for(atom) is None, 5,
                 what="SelectionClear handled")
        assert xclip_out(xvfb) == other.encode()
    wait_for(lambda: owner_of(probe, "CLIPBOARD") == 0, 5, what="xclip gone")
    assert clip.get_text() is None
    clip.set_text("ours again")
    assert xclip_out(xvfb) == b"ours again"


@needs_xclip
def test_primary_is_independent_of_clipboard(xvfb: XvfbDisplay, clip: Clipboard, probe: xdisplay.Display) -> None:
    clip.set_text("in clipboard ✓")
    clip.set_text("in primary ✓", selection="PRIMARY")
    assert xclip_out(xvfb, "primary") == "in primary ✓".encode()
    assert xclip_out(xvfb, "clipboard") == "in clipboard ✓".encode()
    with xclip_owner(xvfb, probe, "primary from xclip ❄", selection="primary"):
        assert clip.get_text("PRIMARY") == "primary from xclip ❄"
        assert clip.get_text("CLIPBOARD") == "in clipboard ✓"


def test_no_owner_returns_none_promptly(clip: Clipboard) -> None:
    for selection in ("CLIPBOARD", "PRIMARY"):
        start = time.monotonic()
        assert clip.get_text(selection, timeout=2.0) is None
        assert time.monotonic() - start < 0.5


@needs_xclip
def test_big_text_round_trips_with_incr(
    xvfb: XvfbDisplay, conn: DisplayConnection, clip: Clipboard, probe: xdisplay.Display
) -> None:
    text = big_text()
    # Over the server's maximum request: a single property write could not carry it.
    assert len(text.encode()) > probe.display.info.max_request_length * 4
    clip.set_text(text)
    assert xclip_out(xvfb) == text.encode()
    reader = Clipboard(conn)  # a second instance reads through ConvertSelection, not the cache
    try:
        assert reader.get_text(timeout=10) == text
        with xclip_owner(xvfb, probe, text[::-1]):
            assert reader.get_text(timeout=10) == text[::-1]
    finally:
        reader.close()


def test_text_over_limit_and_bad_arguments_are_invalid(clip: Clipboard) -> None:
    clip.set_text("kept")
    with pytest.raises(InvalidArgument, match="larger than"):
        clip.set_text("x" * (MAX_TEXT_BYTES + 1))
    for selection in ("SECONDARY", "clipboard", "", "CLIPBOARD\0"):
        with pytest.raises(InvalidArgument):
            clip.get_text(selection)
        with pytest.raises(InvalidArgument):
            clip.set_text("x", selection=selection)
    for timeout in (0, -1.0, float("nan"), 1e9, "2", True):
        with pytest.raises(InvalidArgument):
            clip.get_text(timeout=timeout)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        clip.set_text(b"bytes")  # type: ignore[arg-type]
    assert clip.get_text() == "kept"


def _start_incr_and_vanish(display: str, selection_atom_name: str) -> int:
    """A requestor that begins an INCR transfer, reads one chunk and disconnects. Returns its chunk size."""
    d = xdisplay.Display(display)
    win = d.screen().root.create_window(0, 0, 1, 1, 0, 0, window_class=X.InputOnly,
                                        visual=X.CopyFromParent, event_mask=X.PropertyChangeMask)
    prop = d.intern_atom("PROBE_PROP")
    win.convert_selection(d.intern_atom(selection_atom_name), d.intern_atom("UTF8_STRING"), prop, X.CurrentTime)
    d.flush()
    ev = next_event(d, lambda e: isinstance(e, xevent.SelectionNotify))
    reply = win.get_full_property(prop, X.AnyPropertyType)
    assert ev.property == prop and reply.property_type == d.intern_atom("INCR")
    win.delete_property(prop)
    d.flush()
    next_event(d, lambda e: isinstance(e, xevent.PropertyNotify) and e.state == X.PropertyNewValue)
    size = len(win.get_full_property(prop, X.AnyPropertyType).value)
    d.close()  # vanish mid-transfer
    return size


def next_event(d: xdisplay.Display, match: Any, timeout: float = 10) -> Any:
    def probe() -> Any:
        while d.pending_events():
            ev = d.next_event()
            if match(ev):
                return ev
        return None
    return wait_for(probe, timeout, what="X event", poll=0.005, max_poll=0.02)


@needs_xclip
def test_owner_survives_vanished_requestor_and_x_errors(
    xvfb: XvfbDisplay, clip: Clipboard, probe: xdisplay.Display, capfd: pytest.CaptureFixture[str]
) -> None:
    text = big_text()
    clip.set_text(text)
    assert clip._owner is not None
    assert 0 < _start_incr_and_vanish(xvfb.display, "CLIPBOARD") < len(text.encode())
    wait_for(lambda: not clip._owner.transfers, 5, what="abandoned INCR transfer dropped")  # type: ignore[union-attr]
    # A request naming a window that does not exist: every reply the owner makes fails with BadWindow.
    owner = probe.create_resource_object("window", owner_of(probe, "CLIPBOARD"))
    bogus = xevent.SelectionRequest(
        time=X.CurrentTime, owner=owner, requestor=0x7FFFFFF, selection=probe.intern_atom("CLIPBOARD"),
        target=probe.intern_atom("UTF8_STRING"), property=probe.intern_atom("P"))
    owner.send_event(bogus)
    probe.sync()
    assert xclip_out(xvfb) == text.encode()
    assert clip._owner.thread.is_alive()
    clip.set_text("still serving")
    assert xclip_out(xvfb) == b"still serving"
    err = capfd.readouterr().err
    assert not any(m in err for m in X_ERROR_MARKERS), err


def test_close_gives_up_ownership_and_set_works_again(clip: Clipboard, probe: xdisplay.Display) -> None:
    clip.set_text("before close")
    assert owner_of(probe, "CLIPBOARD") != 0
    clip.close()
    wait_for(lambda: owner_of(probe, "CLIPBOARD") == 0, 5, what="ownership released")
    clip.set_text("after close")
    assert clip.get_text() == "after close"


class RawOwner:
    """A minimal selection owner: answers only ``answers`` (target -> (type, bytes)), or never if mute."""

    def __init__(self, display: str, selection: str, answers: dict[str, tuple[str, bytes]], mute: bool = False):
        self.d = xdisplay.Display(display)
        self.answers, self.mute = answers, mute
        self.win = self.d.screen().root.create_window(0, 0, 1, 1, 0, X.CopyFromParent,
                                                      window_class=X.InputOnly, visual=X.CopyFromParent)
        self.win.set_selection_owner(self.d.intern_atom(selection), X.CurrentTime)
        self.d.sync()
        self.requests: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            while self.d.pending_events():
                ev = self.d.next_event()
                if isinstance(ev, xevent.SelectionRequest):
                    self._answer(ev)
            select.select([self.d], [], [], 0.05)  # wake up now and then to notice `stopping`

    def _answer(self, ev: Any) -> None:
        target = self.d.get_atom_name(ev.target)
        self.requests.append(target)
        if self.mute:
            return
        prop = X.NONE
        if target in self.answers:
            ptype, data = self.answers[target]
            ev.requestor.change_property(ev.property, self.d.intern_atom(ptype), 8, data)
            prop = ev.property
        ev.requestor.send_event(xevent.SelectionNotify(
            time=ev.time, requestor=ev.requestor, selection=ev.selection, target=ev.target, property=prop))
        self.d.flush()

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        self.d.close()


def test_string_fallback_no_text_target_and_silent_owner(xvfb: XvfbDisplay, clip: Clipboard) -> None:
    latin = RawOwner(xvfb.display, "CLIPBOARD", {"STRING": ("STRING", "café naïve ±".encode("latin-1"))})
    try:
        assert clip.get_text() == "café naïve ±"
        assert latin.requests == ["UTF8_STRING", "STRING"]
    finally:
        latin.close()
    images_only = RawOwner(xvfb.display, "CLIPBOARD", {"image/png": ("image/png", b"\x89PNG")})
    try:
        start = time.monotonic()
        assert clip.get_text(timeout=2.0) is None
        assert time.monotonic() - start < 0.5
    finally:
        images_only.close()
    mute = RawOwner(xvfb.display, "PRIMARY", {}, mute=True)
    try:
        start = time.monotonic()
        with pytest.raises(FailedPrecondition, match="did not answer"):
            clip.get_text("PRIMARY", timeout=0.3)
        assert 0.3 <= time.monotonic() - start < 1.5
    finally:
        mute.close()


def test_concurrent_readers_and_writers(conn: DisplayConnection, clip: Clipboard) -> None:
    readers = [Clipboard(conn) for _ in range(3)]
    clip.set_text(UNI)
    try:
        with ThreadPoolExecutor(8) as pool:
            # 30 reads queue on one owner: the point is that each gets the right text, not how fast, so a
            # loaded host (two test workers beside VMs) gets a deadline well past the 2 s default.
            got = list(pool.map(lambda i: readers[i % 3].get_text(timeout=20), range(30)))
            assert got == [UNI] * 30
            list(pool.map(lambda i: readers[i].set_text(f"writer {i}", "PRIMARY"), range(3)))
        assert clip.get_text("PRIMARY") in {"writer 0", "writer 1", "writer 2"}
        assert clip.get_text() == UNI
    finally:
        for r in readers:
            r.close()


def test_owner_connection_killed_then_set_text_recovers(
    clip: Clipboard, probe: xdisplay.Display, conn: DisplayConnection
) -> None:
    clip.set_text("doomed")
    owner = clip._owner
    assert owner is not None
    # XKillClient: the server closes the owner's connection, as if the server had restarted under it.
    probe.create_resource_object("window", owner.win.id).kill_client()
    probe.sync()
    wait_for(lambda: not owner.alive, 10, what="owner thread noticed its connection is gone")
    owner.thread.join(5)
    assert not owner.thread.is_alive()
    assert clip.get_text() is None  # the selection went with the connection
    clip.set_text("reborn")
    assert clip._owner is not owner
    reader = Clipboard(conn)
    try:
        assert reader.get_text() == "reborn"
    finally:
        reader.close()


def test_no_x_server_is_display_unavailable() -> None:
    clip = Clipboard(DisplayConnection(":59000"))  # no socket there; TCP port 65000 refused
    with pytest.raises(DisplayUnavailable):
        clip.get_text()
    with pytest.raises(DisplayUnavailable):
        clip.set_text("x")
    clip.close()


# ----------------------------------------------------------------------------- windows


@dataclass
class Desktop:
    x: XvfbDisplay
    conn: DisplayConnection
    client: xdisplay.Display
    wm: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def window(self, title: str | None, wm_name: bytes, wm_class: tuple[str, str], pid: int,
               geometry: tuple[int, int, int, int], mapped: bool = True) -> Any:
        x, y, w, h = geometry
        win = self.client.screen().root.create_window(
            x, y, w, h, 0, X.CopyFromParent, background_pixel=self.client.screen().white_pixel)
        win.set_wm_name(wm_name)
        if title is not None:
            win.change_property(self.client.intern_atom("_NET_WM_NAME"),
                                self.client.intern_atom("UTF8_STRING"), 8, title.encode())
        win.set_wm_class(*wm_class)
        win.change_property(self.client.intern_atom("_NET_WM_PID"), Xatom.CARDINAL, 32, [pid])
        win.set_wm_hints(flags=Xutil.InputHint, input=1)
        win.set_wm_normal_hints(flags=Xutil.USPosition | Xutil.USSize)  # the WM keeps our position
        if mapped:
            win.map()
        self.client.flush()
        if mapped:
            self.wait_managed(win.id)
        return win

    def wait_managed(self, wid: int) -> None:
        def ready() -> bool:
            w = self.client.create_resource_object("window", wid)
            if w.get_attributes().map_state != X.IsViewable:
                return False
            return not self.wm or wid in net_client_list(self.client)
        wait_for(ready, 10, what=f"window 0x{wid:x} mapped and managed")


def net_client_list(d: xdisplay.Display) -> list[int]:
    prop = d.screen().root.get_full_property(d.intern_atom("_NET_CLIENT_LIST"), Xatom.WINDOW)
    return [int(w) for w in prop.value] if prop else []


def xwininfo_abs(x: XvfbDisplay, wid: int) -> tuple[int, int, int, int]:
    out = subprocess.run(["xwininfo", "-id", str(wid)], env=_env(x), capture_output=True, text=True,
                         timeout=10, check=True).stdout
    get = lambda key: int(re.search(rf"{key}:\s+(-?\d+)", out).group(1))  # type: ignore[union-attr]  # noqa: E731
    return get("Absolute upper-left X"), get("Absolute upper-left Y"), get("Width"), get("Height")


def wm_name_on_root(d: xdisplay.Display) -> str:
    check = d.screen().root.get_full_property(d.intern_atom("_NET_SUPPORTING_WM_CHECK"), Xatom.WINDOW)
    if not check:
        return ""
    win = d.create_resource_object("window", int(check.value[0]))
    return win.get_full_text_property(d.intern_atom("_NET_WM_NAME")) or ""


def wm_ready_probe(d: xdisplay.Display) -> Any:
    """A probe true once the WM answered _NET_REQUEST_FRAME_EXTENTS, i.e. runs its event loop.

    Openbox sets its check window before it is ready and drops MapRequests that arrive meanwhile.
    """
    root = d.screen().root
    sentinel = root.create_window(0, 0, 1, 1, 0, X.CopyFromParent)
    request = xevent.ClientMessage(window=sentinel, client_type=d.intern_atom("_NET_REQUEST_FRAME_EXTENTS"),
                                   data=(32, [0, 0, 0, 0, 0]))

    def probe() -> bool:
        if sentinel.get_full_property(d.intern_atom("_NET_FRAME_EXTENTS"), Xatom.CARDINAL) is not None:
            sentinel.destroy()
            d.sync()
            return True
        root.send_event(request, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
        d.flush()
        return False
    return probe


@pytest.fixture(params=["bare", "openbox"])
def desktop(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Desktop]:
    if request.param == "openbox" and shutil.which("openbox") is None:
        pytest.skip("needs openbox (apt-get install openbox)")
    with XvfbDisplay() as x:
        conn = DisplayConnection(x.display)
        client = xdisplay.Display(x.display)
        desk = Desktop(x, conn, client, "Openbox" if request.param == "openbox" else "")
        try:
            if desk.wm:
                desk.procs.append(subprocess.Popen(
                    ["openbox", "--sm-disable"], env=_env(x, XDG_CONFIG_HOME=str(tmp_path), HOME=str(tmp_path)),
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                wait_for(lambda: wm_name_on_root(client) == "Openbox", 15, what="openbox running")
                wait_for(wm_ready_probe(client), 15, what="openbox event loop", poll=0.01, max_poll=0.1)
            yield desk
        finally:
            for p in desk.procs:
                p.kill()
                p.wait(timeout=10)
            client.close()
            conn.close()


def open_test_windows(desk: Desktop) -> tuple[Any, Any, int, subprocess.Popen[bytes]]:
    a = desk.window("Alpha ✓ 窗口", b"alpha-fallback", ("alphainst", "AlphaClass"), 424242, (40, 60, 320, 200))
    b = desk.window(None, b"Beta window", ("betainst", "BetaClass"), 5151, (500, 300, 240, 150))
    z = subprocess.Popen(["zenity", "--info", "--title", "weavegym zenity dialog", "--text", "hello"],
                         env=_env(desk.x), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    desk.procs.append(z)

    def zenity_id() -> int | None:
        out = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "^weavegym zenity dialog$"],
                             env=_env(desk.x), capture_output=True, text=True, timeout=10).stdout.split()
        return int(out[0]) if len(out) == 1 else None
    zid = wait_for(zenity_id, 20, what="zenity window")
    desk.wait_managed(zid)
    return a, b, zid, z


def test_list_windows_reports_real_clients(desktop: Desktop) -> None:
    a, b, zid, z = open_test_windows(desktop)
    records, wm = list_windows(desktop.conn)
    assert wm == desktop.wm
    by_id = {r.id: r for r in records}
    assert set(by_id) == {a.id, b.id, zid}
    ra, rb, rz = by_id[a.id], by_id[b.id], by_id[zid]
    assert (ra.title, ra.wm_class, ra.wm_instance, ra.pid) == ("Alpha ✓ 窗口", "AlphaClass", "alphainst", 424242)
    assert (rb.title, rb.wm_class, rb.wm_instance, rb.pid) == ("Beta window", "BetaClass", "betainst", 5151)
    assert (rz.title, rz.wm_class, rz.pid) == ("weavegym zenity dialog", "Zenity", z.pid)
    for r in (ra, rb, rz):
        assert r.mapped
        assert (r.x, r.y, r.width, r.height) == xwininfo_abs(desktop.x, r.id)
    assert (ra.width, ra.height, rb.width, rb.height) == (320, 200, 240, 150)
    root = desktop.client.screen().root
    if desktop.wm:
        # Reparented into frames: only _NET_CLIENT_LIST can have found them.
        assert [r.id for r in records] == net_client_list(desktop.client)
        assert not {a.id, b.id, zid} & {c.id for c in root.query_tree().children}
    else:
        assert (ra.x, ra.y, rb.x, rb.y) == (40, 60, 500, 300)


def test_unmapped_windows_only_on_request(desktop: Desktop) -> None:
    a = desktop.window("Mapped one", b"m", ("m", "M"), 1, (0, 0, 50, 50))
    if desktop.wm:  # a WM lists only windows it manages: iconify one (ICCCM WM_CHANGE_STATE)
        u = desktop.window("Hidden one", b"h", ("h", "H"), 2, (0, 0, 60, 60))
        d = desktop.client
        iconify = xevent.ClientMessage(window=u, client_type=d.intern_atom("WM_CHANGE_STATE"),
                                       data=(32, [Xutil.IconicState, 0, 0, 0, 0]))
        d.screen().root.send_event(iconify, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
        wait_for(lambda: u.get_attributes().map_state == X.IsUnmapped, 10, what="window iconified")
        assert u.id in net_client_list(d)
    else:
        u = desktop.window("Hidden one", b"h", ("h", "H"), 2, (0, 0, 60, 60), mapped=False)
    assert [r.id for r in list_windows(desktop.conn)[0]] == [a.id]
    records = {r.id: r for r in list_windows(desktop.conn, include_unmapped=True)[0]}
    assert set(records) == {a.id, u.id}
    assert (records[u.id].title, records[u.id].mapped, records[a.id].mapped) == ("Hidden one", False, True)


def active_window(d: xdisplay.Display) -> int:
    prop = d.screen().root.get_full_property(d.intern_atom("_NET_ACTIVE_WINDOW"), Xatom.WINDOW)
    return int(prop.value[0]) if prop else 0


def focused_ids(desk: Desktop) -> set[int]:
    return {r.id for r in list_windows(desk.conn)[0] if r.focused}


def test_activate_moves_focus(desktop: Desktop) -> None:
    a, b, zid, _ = open_test_windows(desktop)
    for wid in (a.id, b.id, zid, a.id):
        rec = activate_window(desktop.conn, wid)
        assert (rec.id, rec.focused) == (wid, True)
        assert focused_ids(desktop) == {wid}
        if wid != zid:  # our own windows have no children: the focus is exactly them
            assert desktop.client.get_input_focus().focus.id == wid
        if desktop.wm:
            # Openbox publishes _NET_ACTIVE_WINDOW once it processed the FocusIn: a little later.
            wait_for(lambda w=wid: active_window(desktop.client) == w, 5, what="_NET_ACTIVE_WINDOW", poll=0.005)
            # _NET_CLIENT_LIST is in mapping order; raising made the stacking (query_tree) order differ.
            assert [r.id for r in list_windows(desktop.conn)[0]] == net_client_list(desktop.client)


def test_activate_unknown_or_destroyed_window_is_not_found(
    desktop: Desktop, capfd: pytest.CaptureFixture[str]
) -> None:
    a = desktop.window("Survivor", b"s", ("s", "S"), 7, (10, 10, 100, 100))
    gone = desktop.window("Doomed", b"d", ("d", "D"), 8, (200, 10, 100, 100))
    gone.destroy()
    desktop.client.sync()
    for wid in (0x7FFFFFFF, gone.id, desktop.client.screen().root.id):
        with pytest.raises(NotFound):
            activate_window(desktop.conn, wid)
    for bad in (0, -1, 2**32, "12", True, None):
        with pytest.raises(InvalidArgument):
            activate_window(desktop.conn, bad)  # type: ignore[arg-type]
    assert activate_window(desktop.conn, a.id).focused
    assert [r.id for r in list_windows(desktop.conn)[0]] == [a.id]
    err = capfd.readouterr().err
    assert not any(m in err for m in X_ERROR_MARKERS), err


def test_stale_ewmh_properties_are_tolerated(
    xvfb: XvfbDisplay, conn: DisplayConnection, probe: xdisplay.Display, capfd: pytest.CaptureFixture[str]
) -> None:
    """A 'WM' that is only root properties: a destroyed client in _NET_CLIENT_LIST, then a dead check window.

    Activating the destroyed client gets past the list check, so its BadWindow comes back
    asynchronously from map/configure: it must become NotFound and print nothing.
    """
    desk = Desktop(xvfb, conn, probe, "")
    live = desk.window("Live one", b"l", ("l", "L"), 3, (5, 5, 80, 80))
    dead = desk.window("Dead one", b"d", ("d", "D"), 4, (100, 5, 80, 80))
    root = probe.screen().root
    atom = probe.intern_atom
    check = root.create_window(0, 0, 1, 1, 0, X.CopyFromParent, window_class=X.InputOnly,
                               visual=X.CopyFromParent)
    dead.destroy()  # after creating `check`: python-xlib would hand the freed id out again
    check.change_property(atom("_NET_SUPPORTING_WM_CHECK"), Xatom.WINDOW, 32, [check.id])
    check.change_property(atom("_NET_WM_NAME"), atom("UTF8_STRING"), 8, b"FakeWM")
    root.change_property(atom("_NET_SUPPORTING_WM_CHECK"), Xatom.WINDOW, 32, [check.id])
    root.change_property(atom("_NET_CLIENT_LIST"), Xatom.WINDOW, 32, [dead.id, live.id])
    probe.sync()
    records, wm = list_windows(conn)
    assert (wm, [r.id for r in records]) == ("FakeWM", [live.id])
    with pytest.raises(NotFound):
        activate_window(conn, dead.id)
    check.destroy()  # the "WM" died; its root properties stay behind
    probe.sync()
    records, wm = list_windows(conn)
    assert (wm, [r.id for r in records]) == ("", [live.id])
    root.change_property(atom("_NET_SUPPORTING_WM_CHECK"), Xatom.WINDOW, 32, [live.id])  # id reused
    probe.sync()
    assert list_windows(conn)[1] == ""
    assert activate_window(conn, live.id).focused
    err = capfd.readouterr().err
    assert not any(m in err for m in X_ERROR_MARKERS), err


def test_the_clients_window_record_has_exactly_the_protocols_fields() -> None:
    """guest_client.WindowInfo is filled field by field from the message: neither may gain one alone."""
    from weavegym.agent.v1 import agent_pb2 as pb
    from weavegym.machine.guest_client import WINDOW_FIELDS

    assert tuple(field.name for field in pb.WindowInfo.DESCRIPTOR.fields) == WINDOW_FIELDS


TWO_ENTRIES = r"""
import json, os, sys, tkinter as tk
root = tk.Tk(); root.title("two entries"); root.geometry("400x200+60+60")
a, b = tk.Entry(root), tk.Entry(root)
a.place(x=10, y=10, width=300); b.place(x=10, y=100, width=300)
a.focus_set()
def dump():
    with open(sys.argv[1] + ".tmp", "w") as f:
        json.dump([a.winfo_rootx() + 100, a.winfo_rooty() + 8, b.winfo_rooty() + 8, a.get(), b.get()], f)
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    root.after(50, dump)
root.after(50, dump)
root.mainloop()
"""


def test_keys_typed_right_after_a_click_reach_the_widget_that_was_clicked(desktop: Desktop, tmp_path: Any) -> None:
    """openbox holds a button press in its grab and replays it to the client after handling it; keys are not
    held. Without the agent's wait for the window manager, about 4 in 10 keys typed right after a click went to
    the entry that had the focus before it (measured on this Xvfb). Bare X has no WM to wait for."""
    from weavegym.guest_agent.input import InputController

    state = tmp_path / "entries.json"
    desktop.procs.append(subprocess.Popen([shutil.which("python3") or "python3", "-c", TWO_ENTRIES, str(state)],
                                          env=_env(desktop.x), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wid = wait_for(lambda: int(out[0]) if (out := subprocess.run(
        ["xdotool", "search", "--onlyvisible", "--name", "^two entries$"], env=_env(desktop.x),
        capture_output=True, text=True, timeout=10).stdout.split()) else None, 20, what="the Tk window")
    desktop.wait_managed(wid)
    read = lambda: __import__("json").loads(state.read_text()) if state.exists() else None  # noqa: E731
    x, a_y, b_y, _a, _b = wait_for(read, 20, what="the entries' positions")
    ic = InputController(desktop.conn)
    try:
        for i in range(20):
            ic.click(x, b_y if i % 2 == 0 else a_y)
            ic.type_text("x" if i % 2 == 0 else "y")
        final = wait_for(lambda: (s := read()) and len(s[3]) + len(s[4]) == 20 and s, 20, what="all 20 keys typed")
    finally:
        ic.close()
    assert (final[3], final[4]) == ("y" * 10, "x" * 10), f"entry a {final[3]!r}, entry b {final[4]!r}"
