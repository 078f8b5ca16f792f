"""InputController against a real Xvfb and real X clients (zenity, our own event window).

Events are read on a separate connection. Because every controller call ends with
XSync, a round trip on the reading connection afterwards (``_drain``) has every
event the call produced already queued, so "nothing else arrived" is checked
exactly, without sleeping.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from Xlib import XK, X, Xatom
from Xlib import display as xdisplay

from weavegym.guest_agent import input as input_mod
from weavegym.guest_agent.display import DisplayConnection
from weavegym.guest_agent.errors import InvalidArgument
from weavegym.guest_agent.input import InputController
from weavegym.guest_agent.keys import char_to_keysym, parse_combo
from weavegym.testing.xvfb import XvfbDisplay

pytestmark = pytest.mark.xvfb

WIDTH, HEIGHT = 1280, 720
EVENT_MASK = (X.KeyPressMask | X.KeyReleaseMask | X.ButtonPressMask | X.ButtonReleaseMask
              | X.PointerMotionMask | X.StructureNotifyMask)


# --- fixtures and helpers ---------------------------------------------------------------
@pytest.fixture(scope="module")
def xvfb() -> Iterator[XvfbDisplay]:
    with XvfbDisplay() as x:
        yield x


@pytest.fixture(scope="module")
def ic(xvfb: XvfbDisplay) -> Iterator[InputController]:
    conn = DisplayConnection(xvfb.display)
    controller = InputController(conn)
    yield controller
    controller.close()
    conn.close()


@pytest.fixture()
def td(xvfb: XvfbDisplay) -> Iterator[xdisplay.Display]:
    """A test-side connection, separate from the controller's."""
    d = xdisplay.Display(xvfb.display)
    yield d
    d.close()


def _wait(d: xdisplay.Display, pred: Callable[[Any], bool], timeout: float = 5.0) -> list[Any]:
    """Events up to and including the first one matching ``pred``; fails at the deadline."""
    deadline = time.monotonic() + timeout
    seen: list[Any] = []
    while True:
        while d.pending_events():
            ev = d.next_event()
            seen.append(ev)
            if pred(ev):
                return seen
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"no matching event within {timeout}s; saw {[type(e).__name__ for e in seen]}")
        select.select([d], [], [], remaining)


def _drain(d: xdisplay.Display) -> list[Any]:
    """Every event already sent to ``d`` (the round trip orders them before its reply)."""
    d.sync()
    out = []
    while d.pending_events():
        out.append(d.next_event())
    return out


def _input_events(events: list[Any]) -> list[tuple]:
    """(kind, x, y, detail) for pointer/key events, to compare whole sequences exactly."""
    names = {X.MotionNotify: "motion", X.ButtonPress: "press", X.ButtonRelease: "release",
             X.KeyPress: "keydown", X.KeyRelease: "keyup"}
    return [(names[e.type], e.root_x, e.root_y, e.detail) for e in events if e.type in names]


@pytest.fixture()
def win(td: xdisplay.Display, ic: InputController) -> Iterator[Any]:
    """A full-screen window on top, with keyboard focus, selecting pointer and key events."""
    root = td.screen().root
    w = root.create_window(0, 0, WIDTH, HEIGHT, 0, X.CopyFromParent, X.InputOutput, X.CopyFromParent,
                           override_redirect=1, event_mask=EVENT_MASK)
    w.map()
    _wait(td, lambda e: e.type == X.MapNotify and e.window.id == w.id)
    w.set_input_focus(X.RevertToParent, X.CurrentTime)
    ic.move(5, 5)  # a known start that no test clicks at
    _drain(td)
    yield w
    w.destroy()
    td.sync()


def _modifiers_down(d: xdisplay.Display) -> list[int]:
    keys = d.query_keymap()
    return [kc for mod in d.get_modifier_mapping() for kc in mod if kc and keys[kc // 8] >> (kc % 8) & 1]


def _keysym_of(d: xdisplay.Display, keycode: int) -> int:
    return d.get_keyboard_mapping(keycode, 1)[0][0]  # asked fresh: our remaps change it


# --- parsing (no X needed) ---------------------------------------------------------------
@pytest.mark.parametrize(("combo", "names"), [
    ("ctrl+s", ["Control_L", "s"]),
    ("ctrl+shift+T", ["Control_L", "Shift_L", "T"]),
    ("alt+F4", ["Alt_L", "F4"]),
    ("Return", ["Return"]), ("enter", ["Return"]), ("ESC", ["Escape"]), ("super", ["Super_L"]),
    ("pageup", ["Prior"]), ("PgDn", ["Next"]), ("ctrl+plus", ["Control_L", "plus"]),
    ("ctrl++", ["Control_L", "plus"]), ("ctrl++x", ["Control_L", "plus", "x"]),
    ("a", ["a"]), ("A", ["A"]), ("é", ["eacute"]), ("KP_Enter", ["KP_Enter"]), ("F12", ["F12"]),
    ("f24", ["F24"]), ("win+del", ["Super_L", "Delete"]), ("XF86AudioMute", ["XF86_AudioMute"]),
])
def test_parse_combo(combo: str, names: list[str]) -> None:
    assert parse_combo(combo) == [XK.string_to_keysym(n) for n in names]


@pytest.mark.parametrize(("combo", "needle"), [
    ("ctrl+foo", "'foo'"), ("", "empty"), ("+", "empty"), ("ctrl+", "empty"), ("ctrl+ +x", "empty"),
    ("Ctrl+Kp_enter", "'Kp_enter'"),
])
def test_parse_combo_rejects(combo: str, needle: str) -> None:
    with pytest.raises(InvalidArgument) as exc:
        parse_combo(combo)
    assert needle in str(exc.value) and repr(combo) in str(exc.value)


def test_char_to_keysym() -> None:
    assert [char_to_keysym(c) for c in "a\n\té😀你"] == [
        0x61, XK.XK_Return, XK.XK_Tab, 0xE9, 0x0101F600, 0x01004F60]
    with pytest.raises(InvalidArgument):
        char_to_keysym("\x07")


# --- typing into a real GTK entry -------------------------------------------------------------
def _zenity_window(td: xdisplay.Display, title: str, timeout: float = 20.0) -> Any:
    """The viewable toplevel named ``title``; wakes on root substructure events, not a timer."""
    root = td.screen().root
    deadline = time.monotonic() + timeout
    net_wm_name, utf8 = td.get_atom("_NET_WM_NAME"), td.get_atom("UTF8_STRING")
    while True:
        for child in root.query_tree().children:
            try:
                prop = child.get_full_property(net_wm_name, utf8)
                if prop is not None and prop.value.decode() == title \
                        and child.get_attributes().map_state == X.IsViewable:
                    return child
            except Exception:  # windows come and go while we look
                continue
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"no zenity window {title!r} within {timeout}s")
        select.select([td], [], [], min(remaining, 0.5))  # root SubstructureNotify wakes us
        while td.pending_events():
            td.next_event()


def _type_into_zenity(ic: InputController, td: xdisplay.Display, xvfb: XvfbDisplay, text: str) -> str:
    title = f"wg-{uuid.uuid4().hex[:8]}"
    td.screen().root.change_attributes(event_mask=X.SubstructureNotifyMask)
    env = dict(os.environ, DISPLAY=xvfb.display, NO_AT_BRIDGE="1", GDK_BACKEND="x11")
    env.pop("WAYLAND_DISPLAY", None)
    proc = subprocess.Popen(["zenity", "--entry", "--title", title, "--text", "type here"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        window = _zenity_window(td, title)
        window.set_input_focus(X.RevertToParent, X.CurrentTime)  # no window manager does it for us
        td.sync()
        ic.type_text(text)
        ic.key("Return")
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    assert out.endswith(b"\n")
    return out[:-1].decode()


@pytest.mark.parametrize("text", [
    "héllo wörld 你好 😀",
    "Hello, World! #42 ~`@$%^&*()_+{}|:\"<>?",
    "dash – ½ ß ÆØÅ Ω ж ع 𝄞 👍🏽 ﬁ",
])
def test_type_text_round_trips_through_gtk_entry(ic, td, xvfb, text: str) -> None:
    assert _type_into_zenity(ic, td, xvfb, text) == text
    assert _modifiers_down(td) == []


def test_type_text_with_more_new_characters_than_spare_keycodes(td, xvfb) -> None:
    """Forces keycode rebinding inside one call; every character must still be exact.

    The fallback pause is set to 30 s, so finishing quickly shows the rebinding waited on
    zenity's _NET_WM_PING reply (the deterministic path), not on the timer.
    """
    conn = DisplayConnection(xvfb.display)
    ic = InputController(conn, remap_settle_s=30.0)
    cjk = "".join(chr(0x4E00 + 7 * i) for i in range(60))
    text = cjk + " mid " + cjk[::-1] + " ĀāĂăĄą😀😁😂🤣 Ωαβγ"
    assert len(set(text)) > 60
    started = time.monotonic()
    try:
        assert _type_into_zenity(ic, td, xvfb, text) == text
    finally:
        ic.close()
        conn.close()
    assert time.monotonic() - started < 20


def test_spare_keycodes_survive_another_tool_rebinding_them(ic, td, xvfb) -> None:
    """A second controller (say, a restarted agent) rebinds every spare key; ours must adopt, not lose, them.

    The newcomer only finds keys bound before it started through the root window record.
    """
    ic.type_text("ŵŷ")
    conn = DisplayConnection(xvfb.display)
    other = InputController(conn)
    try:
        other.type_text("".join(chr(0x3041 + i) for i in range(40)))  # hiragana, more than the pool
    finally:
        other.close()
        conn.close()
    assert _type_into_zenity(ic, td, xvfb, "ŵŷ ぁあ 你好 😀") == "ŵŷ ぁあ 你好 😀"


@pytest.mark.parametrize(("action", "fresh"), [("type_text", "ⓐⓑⓒ"), ("key", "ⓓ")])
def test_a_new_binding_reaches_the_client_before_the_key_it_bound(ic, td, win, action: str, fresh: str) -> None:
    """A client that reads a MappingNotify and the press after it in one batch translates the press with the
    keymap it still caches (Tk does: the keycode's previous character, or none). So the controller settles
    between them: the focused window is pinged (here never answered, so the fallback pause follows) after the
    last remap and before the first press of the keys it bound.

    ``fresh``: characters no other test of this module types, so each needs a new binding.
    """
    ping = td.get_atom("_NET_WM_PING")
    win.change_property(td.get_atom("WM_PROTOCOLS"), Xatom.ATOM, 32, [ping])
    _drain(td)
    getattr(ic, action)(fresh)
    order: list[tuple[str, int]] = []
    for e in _drain(td):
        # count 1: our binding; the server's whole-keymap notice as the XTest keyboard takes over is not one
        if e.type == X.MappingNotify and e.request == X.MappingKeyboard and e.count == 1:
            order.append(("remap", e.first_keycode))
        elif e.type == X.ClientMessage and e.data[1][0] == ping:
            order.append(("ping", 0))
        elif e.type == X.KeyPress:
            order.append(("press", e.detail))
    remaps = [i for i, (kind, _) in enumerate(order) if kind == "remap"]
    presses = [i for i, (kind, _) in enumerate(order) if kind == "press"]
    assert len(remaps) == len(fresh) and presses, order
    assert ("ping", 0) in order[remaps[-1]:presses[0]], order
    assert [chr(_keysym_of(td, kc) & 0xFFFFFF) for kind, kc in order if kind == "press"] == list(fresh)


def test_repeated_characters_need_no_remap(ic, td) -> None:
    ic.type_text("ÿ你")  # binds (or reuses) spare keycodes
    _drain(td)
    ic.type_text("你ÿ你")
    assert [e for e in _drain(td) if e.type == X.MappingNotify] == []


# --- pointer -------------------------------------------------------------------------------
def test_click_lands_at_coordinates(ic, td, win) -> None:
    ic.click(123, 456)
    ic.click(1000, 50, button=3)
    assert _input_events(_drain(td)) == [
        ("motion", 123, 456, 0), ("press", 123, 456, 1), ("release", 123, 456, 1),
        ("motion", 1000, 50, 0), ("press", 1000, 50, 3), ("release", 1000, 50, 3),
    ]
    assert ic.cursor_position() == (1000, 50)
    assert ic.screen_size() == (WIDTH, HEIGHT)


def test_double_click_and_click_in_place(ic, td, win) -> None:
    ic.click(640, 360, count=2)
    ic.click(None, None, button=2)
    assert _input_events(_drain(td)) == [
        ("motion", 640, 360, 0), ("press", 640, 360, 1), ("release", 640, 360, 1),
        ("press", 640, 360, 1), ("release", 640, 360, 1), ("press", 640, 360, 2), ("release", 640, 360, 2),
    ]


def test_button_down_and_up(ic, td, win) -> None:
    ic.button_down(50, 60, button=1)
    ic.button_up(70, 80, button=1)
    assert _input_events(_drain(td)) == [
        ("motion", 50, 60, 0), ("press", 50, 60, 1), ("motion", 70, 80, 0), ("release", 70, 80, 1),
    ]


def test_drag(ic, td, win) -> None:
    ic.drag(100, 100, 300, 200, steps=10)
    got = _input_events(_drain(td))
    path = [("motion", 100 + 20 * i, 100 + 10 * i, 0) for i in range(1, 11)]
    assert got == [("motion", 100, 100, 0), ("press", 100, 100, 1), *path, ("release", 300, 200, 1)]


def test_scroll(ic, td, win) -> None:
    ic.scroll(400, 300, dy=2)
    ic.scroll(None, None, dx=-1, dy=-1)
    assert _input_events(_drain(td)) == [
        ("motion", 400, 300, 0),
        ("press", 400, 300, 5), ("release", 400, 300, 5), ("press", 400, 300, 5), ("release", 400, 300, 5),
        ("press", 400, 300, 4), ("release", 400, 300, 4), ("press", 400, 300, 6), ("release", 400, 300, 6),
    ]


# --- keyboard ------------------------------------------------------------------------------
@pytest.mark.parametrize("combo", ["ctrl+shift+a", "ctrl+shift+A", "Control+A"])
def test_key_combo_arrives_with_modifier_state(ic, td, win, combo: str) -> None:
    """Shift is pressed once whether written or implied by "A"; no spare keycode is involved."""
    ic.key(combo)
    events = _drain(td)
    assert [e for e in events if e.type == X.MappingNotify] == []
    keys = [e for e in events if e.type in (X.KeyPress, X.KeyRelease)]
    ctrl, shift = td.keysym_to_keycode(XK.XK_Control_L), td.keysym_to_keycode(XK.XK_Shift_L)
    a = td.keysym_to_keycode(XK.XK_a)
    assert [(e.type, e.detail) for e in keys] == [
        (X.KeyPress, ctrl), (X.KeyPress, shift), (X.KeyPress, a),
        (X.KeyRelease, a), (X.KeyRelease, shift), (X.KeyRelease, ctrl),
    ]
    press_a = keys[2]
    assert press_a.state & (X.ShiftMask | X.ControlMask) == X.ShiftMask | X.ControlMask
    assert td.keycode_to_keysym(press_a.detail, 0) == XK.XK_a
    assert _modifiers_down(td) == []


def test_type_text_key_events(ic, td, win) -> None:
    """Upper case gets Shift; "\\t" and "\\r\\n" arrive as Tab and one Return (GTK entries eat Tab)."""
    ic.type_text("aB\t\r\n")
    events = [e for e in _drain(td) if e.type == X.KeyPress]
    shift = td.keysym_to_keycode(XK.XK_Shift_L)
    assert [(_keysym_of(td, e.detail), e.state & X.ShiftMask) for e in events] == [
        (XK.XK_a, 0), (XK.XK_Shift_L, 0), (XK.XK_b, X.ShiftMask), (XK.XK_Tab, 0), (XK.XK_Return, 0)]
    assert events[1].detail == shift
    assert _modifiers_down(td) == []


def test_key_outside_layout_and_repeat(ic, td, win) -> None:
    ic.key("é", repeat=3)
    presses = [e for e in _drain(td) if e.type == X.KeyPress]
    assert len(presses) == 3 and len({e.detail for e in presses}) == 1
    assert _keysym_of(td, presses[0].detail) == 0xE9


def test_key_down_holds_until_up(ic, td, win) -> None:
    ctrl, shift = td.keysym_to_keycode(XK.XK_Control_L), td.keysym_to_keycode(XK.XK_Shift_L)
    ic.key("ctrl+shift", mode="down")
    assert sorted(_modifiers_down(td)) == sorted([ctrl, shift])  # the check below can see a held key
    ic.key("ctrl+shift", mode="up")
    assert _modifiers_down(td) == []


def test_no_modifier_held_when_a_call_fails_midway(ic, td, win, monkeypatch) -> None:
    a = td.keysym_to_keycode(XK.XK_a)
    real = input_mod.xtest.fake_input

    def failing(d: Any, event_type: int, detail: int = 0, **kw: Any) -> None:
        if event_type == X.KeyPress and detail == a:
            raise RuntimeError("simulated failure after the modifiers went down")
        real(d, event_type, detail, **kw)

    monkeypatch.setattr(input_mod.xtest, "fake_input", failing)
    with pytest.raises(RuntimeError, match="simulated failure"):
        ic.key("ctrl+shift+a")
    monkeypatch.setattr(input_mod.xtest, "fake_input", real)
    ic.cursor_position()  # a round trip: anything still buffered on the controller's side is sent
    assert _modifiers_down(td) == []
    ic.click(10, 20)
    presses = [e for e in _drain(td) if e.type == X.ButtonPress]
    assert [(e.root_x, e.root_y, e.detail, e.state) for e in presses] == [(10, 20, 1, 0)]


# --- bad requests change nothing --------------------------------------------------------------
@pytest.mark.parametrize(("call", "needle"), [
    (lambda ic: ic.key("ctrl+foo"), "'foo'"),
    (lambda ic: ic.key("a", mode="hold"), "mode"),
    (lambda ic: ic.key("a", repeat=101), "repeat"),
    (lambda ic: ic.click(-1, 5), "1280x720"),
    (lambda ic: ic.click(99999, 5), "1280x720"),
    (lambda ic: ic.click(5, 720), "1280x720"),
    (lambda ic: ic.click(5, None), "(5, None)"),
    (lambda ic: ic.click(5, 5, button=0), "button"),
    (lambda ic: ic.click(5, 5, count=6), "count"),
    (lambda ic: ic.drag(10, 10, 2000, 10), "drag end"),
    (lambda ic: ic.scroll(10, 10, 0, 0), "non-zero"),
    (lambda ic: ic.move(True, 5), "integer"),
    (lambda ic: ic.type_text(""), "empty"),
    (lambda ic: ic.type_text("x" * 10_001), "10000"),
    (lambda ic: ic.type_text("ok\x07"), "U+0007 at index 2"),
    (lambda ic: ic.type_text("a\rb"), "U+000D at index 1"),
])
def test_bad_request_is_rejected_and_sends_nothing(ic, td, win, call, needle: str) -> None:
    with pytest.raises(InvalidArgument) as exc:
        call(ic)
    assert needle in str(exc.value)
    assert ic.cursor_position() == (5, 5)
    ic.click(200, 300)  # the controller still works, and nothing came before this click
    assert _input_events(_drain(td)) == [
        ("motion", 200, 300, 0), ("press", 200, 300, 1), ("release", 200, 300, 1)]
