"""Top-level windows: list them and give one the input focus.

With an EWMH window manager the WM's _NET_CLIENT_LIST is the truth (the root's
children are its frames) and focus must be asked of the WM, which would undo a
focus we set behind its back. On a bare X server the root's children are the
clients and the agent sets the focus itself. python-xlib reports errors of
requests without replies asynchronously, so every such request here carries a
CatchError and is followed by ``sync()``: a BadWindow for a vanished window
becomes NotFound now instead of a stray error printed during a later call.
"""

from __future__ import annotations

import time
from typing import Any

from Xlib import X, Xatom
from Xlib import display as xdisplay
from Xlib import error as xerror
from Xlib.protocol import event as xevent

from weavegym.agent.v1 import agent_pb2 as pb
from weavegym.guest_agent.display import DisplayConnection
from weavegym.guest_agent.errors import FailedPrecondition, InvalidArgument, NotFound

ACTIVATE_TIMEOUT_S = 3.0
_SOURCE_PAGER = 2  # _NET_ACTIVE_WINDOW source indication: a pager/tool, so the WM obeys


def _window(d: xdisplay.Display, wid: int) -> Any:
    return d.create_resource_object("window", wid)


def _text(win: Any, d: xdisplay.Display, name: str) -> str:
    value = win.get_full_text_property(d.intern_atom(name))
    if isinstance(value, bytes):  # e.g. COMPOUND_TEXT: good enough for ASCII titles
        value = value.decode("utf-8", errors="replace")
    return value or ""


def _cardinals(win: Any, d: xdisplay.Display, name: str, ptype: int) -> list[int]:
    prop = win.get_full_property(d.intern_atom(name), ptype)
    return [int(v) for v in prop.value] if prop is not None and prop.format == 32 else []


def window_manager(d: xdisplay.Display) -> tuple[bool, str]:
    """(an EWMH WM is running, its name). A stale check window left by a dead WM means no WM."""
    root = d.screen().root
    try:
        check = _cardinals(root, d, "_NET_SUPPORTING_WM_CHECK", Xatom.WINDOW)
        if not check:
            return False, ""
        win = _window(d, check[0])
        if _cardinals(win, d, "_NET_SUPPORTING_WM_CHECK", Xatom.WINDOW)[:1] != check[:1]:
            return False, ""
        return True, _text(win, d, "_NET_WM_NAME")
    except xerror.XError:
        return False, ""


def _is_client(win: Any, d: xdisplay.Display) -> bool:
    return bool(win.get_wm_class() or _text(win, d, "_NET_WM_NAME") or _text(win, d, "WM_NAME"))


def _client_ids(d: xdisplay.Display, ewmh: bool) -> list[int]:
    root = d.screen().root
    if ewmh:
        clients = root.get_full_property(d.intern_atom("_NET_CLIENT_LIST"), Xatom.WINDOW)
        if clients is not None:
            return [int(w) for w in clients.value]
    ids = []
    for child in root.query_tree().children:
        try:
            attrs = child.get_attributes()
            if attrs.override_redirect or attrs.win_class == X.InputOnly:
                continue
            if _is_client(child, d):
                ids.append(child.id)
            else:  # a non-EWMH WM's frame: the client is the child carrying WM_STATE
                wm_state = d.intern_atom("WM_STATE")
                ids.extend(c.id for c in child.query_tree().children
                           if c.get_full_property(wm_state, X.AnyPropertyType) is not None)
        except xerror.XError:  # destroyed while we looked
            continue
    return ids


def _focus_chain(d: xdisplay.Display) -> set[int]:
    """The focus window and its ancestors below the root."""
    root_id = d.screen().root.id
    win = d.get_input_focus().focus
    chain: set[int] = set()
    try:
        while not isinstance(win, int) and win.id not in (root_id, X.NONE) and win.id not in chain:
            chain.add(win.id)
            win = win.query_tree().parent
    except xerror.XError:
        pass
    return chain


def _record(d: xdisplay.Display, wid: int, focus: set[int]) -> pb.WindowInfo | None:
    """The window's record (the protocol's own message: nothing to convert), or None if it is gone."""
    win = _window(d, wid)
    try:
        attrs = win.get_attributes()
        geom = win.get_geometry()
        pos = d.screen().root.translate_coords(win, 0, 0)
        title = _text(win, d, "_NET_WM_NAME") or _text(win, d, "WM_NAME")
        instance, klass = win.get_wm_class() or ("", "")
        pid = _cardinals(win, d, "_NET_WM_PID", Xatom.CARDINAL)
    except xerror.XError:
        return None
    return pb.WindowInfo(
        id=wid, title=title, wm_class=klass, wm_instance=instance, pid=pid[0] if pid else 0,
        x=pos.x, y=pos.y, width=geom.width, height=geom.height,
        focused=wid in focus, mapped=attrs.map_state != X.IsUnmapped,
    )


def list_windows(conn: DisplayConnection, include_unmapped: bool = False) -> tuple[list[pb.WindowInfo], str]:
    """Top-level client windows (EWMH stacking order when available) and the WM's name ("" if none)."""
    with conn.session() as d:
        ewmh, wm_name = window_manager(d)
        focus = _focus_chain(d)
        records = [_record(d, wid, focus) for wid in _client_ids(d, ewmh)]
    return [r for r in records if r is not None and (include_unmapped or r.mapped)], wm_name


def _check_id(window_id: int) -> int:
    if isinstance(window_id, bool) or not isinstance(window_id, int) or not 0 < window_id <= 0xFFFFFFFF:
        raise InvalidArgument(f"window id must be a positive 32-bit integer, got {window_id!r}")
    return window_id


def activate_window(conn: DisplayConnection, window_id: int,
                    timeout: float = ACTIVATE_TIMEOUT_S) -> pb.WindowInfo:
    """Raise and focus a top-level window; returns its record once it holds the input focus."""
    wid = _check_id(window_id)
    with conn.session() as d:
        ewmh, _ = window_manager(d)
        if wid not in _client_ids(d, ewmh):
            raise NotFound(f"no top-level window 0x{wid:x}")
        root, win = d.screen().root, _window(d, wid)
        catch = xerror.CatchError()
        if ewmh:
            active = _cardinals(root, d, "_NET_ACTIVE_WINDOW", Xatom.WINDOW)
            msg = xevent.ClientMessage(
                window=win, client_type=d.intern_atom("_NET_ACTIVE_WINDOW"),
                data=(32, [_SOURCE_PAGER, X.CurrentTime, active[0] if active else 0, 0, 0]))
            root.send_event(msg, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask,
                            onerror=catch)
        win.map(onerror=catch)
        win.configure(stack_mode=X.Above, onerror=catch)
        if not ewmh:
            win.set_input_focus(X.RevertToParent, X.CurrentTime, onerror=catch)
        d.sync()
        err = catch.get_error()
        if isinstance(err, xerror.BadWindow):
            raise NotFound(f"window 0x{wid:x} was destroyed")
        if err is not None:
            raise FailedPrecondition(f"cannot activate window 0x{wid:x}: {err}")
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        with conn.session() as d:
            record = _record(d, wid, _focus_chain(d))
        if record is None:
            raise NotFound(f"window 0x{wid:x} was destroyed")
        if record.focused:
            return record
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise FailedPrecondition(f"window 0x{wid:x} did not get the input focus within {timeout}s")
        time.sleep(min(delay, remaining))  # polling: X sends no FocusIn to a connection not selecting it
        delay = min(delay * 2, 0.05)
