"""Pointer and keyboard input through XTest on the shared X connection.

XTest events look like real hardware to every client, so no window manager,
accessibility stack or pyautogui is needed. Characters outside the keyboard
layout (accents, CJK, emoji) are typed by binding their keysym to a keycode the
keymap leaves empty, as xdotool does; the bindings stay in an LRU pool so
repeated characters cost no remapping.
"""

from __future__ import annotations

import select
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from Xlib import X, Xatom
from Xlib import display as xdisplay
from Xlib import error as xerror
from Xlib.ext import xtest
from Xlib.protocol import event as xevent
from Xlib.xobject.drawable import Window

from weavegym.guest_agent.display import DisplayConnection
from weavegym.guest_agent.errors import FailedPrecondition, InvalidArgument
from weavegym.guest_agent.keys import SHIFT_KEYSYMS, parse_combo, text_to_keysyms

MAX_REPEAT = 100
MAX_SCROLL = 100
MAX_DRAG_STEPS = 1000
KEY_MODES = ("press", "down", "up")
PING_TIMEOUT_S = 1.0
WM_BARRIER_TIMEOUT_S = 1.0  # a window manager that has not answered by then is left out for WM_BARRIER_COOLDOWN_S
WM_BARRIER_COOLDOWN_S = 30.0
SCRATCH_PROPERTY = "_WEAVEGYM_SCRATCH_KEYCODES"  # keycode, keysym pairs we bound

Point = tuple[int, int] | None


def _int(name: str, value: object, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise InvalidArgument(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
    return value


class _Pressed:
    """What one call has pressed, so an error half-way still releases all of it."""

    def __init__(self, d: xdisplay.Display) -> None:
        self._d = d
        self._down: list[tuple[int, int]] = []  # (release event type, keycode or button)

    def press(self, event_type: int, detail: int) -> None:
        xtest.fake_input(self._d, event_type, detail)
        self._down.append((X.KeyRelease if event_type == X.KeyPress else X.ButtonRelease, detail))

    def release(self, event_type: int, detail: int) -> None:
        xtest.fake_input(self._d, event_type, detail)
        with suppress(ValueError):
            self._down.remove((event_type, detail))

    def release_all(self) -> None:
        while self._down:
            xtest.fake_input(self._d, *self._down.pop())

    def keep(self) -> None:
        """Leave everything down: key/button "down" asked for exactly that."""
        self._down.clear()


class InputController:
    """Mouse and keyboard for one display; every method validates fully before sending anything."""

    def __init__(self, conn: DisplayConnection, remap_settle_s: float = 0.1) -> None:
        self._conn = conn
        self._remap_settle_s = remap_settle_s
        # Spare keycode -> keysym we bound to it (0: still empty), least recently used first.
        self._pool: OrderedDict[int, int] = OrderedDict()
        self._held: set[int] = set()  # keycodes left down by key(mode="down"): never rebound
        self._seq = 0  # counts presses of pool keycodes
        self._last_press: dict[int, int] = {}
        self._settled_seq = 0  # presses up to this one have been processed by their client
        self._private: xdisplay.Display | None = None  # only for _NET_WM_PING replies and the WM barrier
        self._ping_token = 0
        self._unresponsive: set[int] = set()  # windows whose ping timed out during this call
        self._barrier_window: Window | None = None  # on the private connection: where the WM's answer lands
        self._wm_silent_until = 0.0  # monotonic time until which the WM barrier is skipped (it did not answer)

    def close(self) -> None:
        """Close the private connection used for pings and the WM barrier; the shared one belongs to the caller."""
        if self._private is not None:
            with suppress(Exception):
                self._private.close()
            self._private = None
        self._barrier_window = None

    @contextmanager
    def _events(self, wm_barrier: bool = False) -> Iterator[tuple[xdisplay.Display, _Pressed]]:
        """The locked connection and a press tracker; releases leftovers and syncs on the way out.

        ``wm_barrier``: also wait until the window manager has handled the buttons sent (see _wm_barrier).
        """
        with self._conn.session() as d:
            if not d.has_extension("XTEST"):
                raise FailedPrecondition(f"X display {self._conn.name!r} has no XTEST extension")
            pressed = _Pressed(d)
            try:
                yield d, pressed
            except BaseException:
                with suppress(Exception):
                    pressed.release_all()
                    d.sync()
                raise
            pressed.release_all()
            d.sync()
            _drain_events(d)
            if wm_barrier:
                self._wm_barrier()

    # --- pointer --------------------------------------------------------------------
    @staticmethod
    def _size(d: xdisplay.Display) -> tuple[int, int]:
        geom = d.screen().root.get_geometry()  # asked every time: xrandr may resize the screen
        return geom.width, geom.height

    def _point(self, d: xdisplay.Display, x: object, y: object, what: str = "point") -> Point:
        """Validate (x, y) against the screen; None when both are None (the pointer stays)."""
        if x is None and y is None:
            return None
        width, height = self._size(d)
        for name, v, limit in (("x", x, width), ("y", y, height)):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < limit:
                raise InvalidArgument(f"{what} ({x!r}, {y!r}): {name} must be an integer in "
                                      f"0..{limit - 1} on the {width}x{height} screen")
        return x, y  # type: ignore[return-value]

    @staticmethod
    def _move(d: xdisplay.Display, p: Point) -> None:
        if p is not None:
            xtest.fake_input(d, X.MotionNotify, x=p[0], y=p[1], root=d.screen().root)

    def screen_size(self) -> tuple[int, int]:
        with self._conn.session() as d:
            return self._size(d)

    def cursor_position(self) -> tuple[int, int]:
        with self._conn.session() as d:
            ptr = d.screen().root.query_pointer()
            return ptr.root_x, ptr.root_y

    def move(self, x: int, y: int) -> None:
        with self._events() as (d, _):
            p = self._point(d, x, y)
            if p is None:
                raise InvalidArgument("move needs x and y")
            self._move(d, p)

    def click(self, x: int | None, y: int | None, button: int = 1, count: int = 1) -> None:
        _int("button", button, 1, 9)
        _int("count", count, 1, 5)
        with self._events(wm_barrier=True) as (d, pressed):
            self._move(d, self._point(d, x, y))
            for _ in range(count):
                pressed.press(X.ButtonPress, button)
                pressed.release(X.ButtonRelease, button)

    def button_down(self, x: int | None, y: int | None, button: int = 1) -> None:
        _int("button", button, 1, 9)
        with self._events(wm_barrier=True) as (d, pressed):
            self._move(d, self._point(d, x, y))
            pressed.press(X.ButtonPress, button)
            pressed.keep()

    def button_up(self, x: int | None, y: int | None, button: int = 1) -> None:
        _int("button", button, 1, 9)
        with self._events(wm_barrier=True) as (d, pressed):
            self._move(d, self._point(d, x, y))
            pressed.release(X.ButtonRelease, button)

    def drag(self, from_x: int, from_y: int, to_x: int, to_y: int, button: int = 1, steps: int = 10) -> None:
        """Press at the start, move through ``steps`` evenly spaced points to the end, release there."""
        _int("button", button, 1, 9)
        _int("steps", steps, 1, MAX_DRAG_STEPS)
        with self._events(wm_barrier=True) as (d, pressed):
            start = self._point(d, from_x, from_y, "drag start")
            end = self._point(d, to_x, to_y, "drag end")
            if start is None or end is None:
                raise InvalidArgument("drag needs start and end coordinates")
            self._move(d, start)
            pressed.press(X.ButtonPress, button)
            for i in range(1, steps + 1):
                self._move(d, (start[0] + round((end[0] - start[0]) * i / steps),
                               start[1] + round((end[1] - start[1]) * i / steps)))
            pressed.release(X.ButtonRelease, button)

    def scroll(self, x: int | None, y: int | None, dx: int = 0, dy: int = 0) -> None:
        """One wheel click per unit: buttons 4/5 (up/down), 6/7 (left/right); dy > 0 scrolls down."""
        _int("dx", dx, -MAX_SCROLL, MAX_SCROLL)
        _int("dy", dy, -MAX_SCROLL, MAX_SCROLL)
        if dx == 0 and dy == 0:
            raise InvalidArgument("scroll needs a non-zero dx or dy")
        with self._events() as (d, pressed):
            self._move(d, self._point(d, x, y))
            for amount, back, forward in ((dy, 4, 5), (dx, 6, 7)):
                button = forward if amount > 0 else back
                for _ in range(abs(amount)):
                    pressed.press(X.ButtonPress, button)
                    pressed.release(X.ButtonRelease, button)

    # --- keyboard -------------------------------------------------------------------
    def key(self, combo: str, mode: str = "press", repeat: int = 1) -> None:
        """Press a combo: keys go down in the order written and come up in reverse.

        A key that needs Shift on this layout ("A", "plus") gets Shift added, as xdotool does.
        """
        if mode not in KEY_MODES:
            raise InvalidArgument(f"key mode must be one of {KEY_MODES}, got {mode!r}")
        _int("repeat", repeat, 1, MAX_REPEAT)
        if mode != "press" and repeat != 1:
            raise InvalidArgument(f"repeat applies to mode 'press' only, got repeat={repeat} with {mode!r}")
        keysyms = parse_combo(combo)
        with self._events() as (d, pressed):
            km = _Keymap(d, self)
            shift_written = bool(SHIFT_KEYSYMS & set(keysyms))
            keycodes: list[int] = []
            for keysym in keysyms:
                kc, shift = km.resolve(keysym, use_shift=True)
                if shift and not shift_written and km.shift_keycode not in keycodes:
                    keycodes.append(km.shift_keycode)
                keycodes.append(kc)
            if km.rebound:
                self._settle(d)
            if mode == "up":
                for kc in reversed(keycodes):
                    pressed.release(X.KeyRelease, kc)
                    self._held.discard(kc)
                return
            for _ in range(repeat):
                for kc in keycodes:
                    self._note_press(kc)
                    pressed.press(X.KeyPress, kc)
                if mode == "down":
                    self._held.update(keycodes)
                    pressed.keep()
                    return
                for kc in reversed(keycodes):
                    pressed.release(X.KeyRelease, kc)

    def type_text(self, text: str) -> None:
        """Type ``text`` exactly, whatever the layout; "\\n" is Return, "\\t" is Tab."""
        keysyms = text_to_keysyms(text)
        with self._events() as (d, pressed):
            km = _Keymap(d, self)
            if not any(kc not in self._held for kc in self._pool) and not all(km.has(k) for k in keysyms):
                raise FailedPrecondition("the keymap has no spare keycode for characters outside the layout")
            start = 0
            while start < len(keysyms):
                end = km.bind_run(keysyms, start)
                if km.rebound:
                    self._settle(d)
                for keysym in keysyms[start:end]:
                    kc, shift = km.resolve(keysym, use_shift=True)
                    if shift:
                        pressed.press(X.KeyPress, km.shift_keycode)
                    self._note_press(kc)
                    pressed.press(X.KeyPress, kc)
                    pressed.release(X.KeyRelease, kc)
                    if shift:
                        pressed.release(X.KeyRelease, km.shift_keycode)
                start = end

    # --- spare keycode pool ---------------------------------------------------------
    def _note_press(self, kc: int) -> None:
        if kc in self._pool:
            self._seq += 1
            self._last_press[kc] = self._seq
            self._pool.move_to_end(kc)

    def _next_spare(self) -> int | None:
        """The spare keycode the next binding takes: the least recently used one not held down."""
        return next((k for k in self._pool if k not in self._held), None)

    def _bind(self, d: xdisplay.Display, keysym: int) -> tuple[int, int]:
        """Bind ``keysym`` to the least recently used spare keycode; return it and its old keysym.

        The caller must ``_settle`` before pressing it (see there).
        """
        kc = self._next_spare()
        if kc is None:
            raise FailedPrecondition(f"no spare keycode is free for keysym 0x{keysym:x}")
        if self._last_press.get(kc, 0) > self._settled_seq:
            # Clients translate a keycode with the keymap they hold when they *process* the
            # event, not when it was sent: rebinding a keycode whose press may still be queued
            # would turn that press into the new character. With LRU reuse this happens at most
            # once per pool-size new characters.
            self._settle(d)
        d.change_keyboard_mapping(kc, [(keysym, keysym)])  # both levels: Shift cannot change it
        previous, self._pool[kc] = self._pool[kc], keysym
        self._pool.move_to_end(kc)
        return kc, previous

    def _settle(self, d: xdisplay.Display) -> None:
        """Wait until the focused client has handled every event and keymap change sent so far.

        Needed on both sides of a binding. Before it: a queued press of the old binding must not be read with the
        new one. After it: a client that reads the new press in the same batch as the MappingNotify translates it
        with the keymap it still caches (Tk reads a whole batch before handling any of it) and types the keycode's
        previous character or nothing; measured on a host Xvfb with a Tk entry: 3 wrong strings in 60 without
        this wait, none in 150 with it. A client answers _NET_WM_PING only after the events queued before it; one
        without the protocol (Tk) gets a short fixed pause instead.
        """
        d.sync()
        if not self._ping_focus_client(d):
            time.sleep(self._remap_settle_s)
        self._settled_seq = self._seq

    def _wm_barrier(self) -> bool:
        """Wait until the window manager has handled every event sent so far; True once it has.

        A window manager that focuses or raises on click (openbox) holds each button press in a passive grab
        and replays it to the client only after handling it, while keys are not held: a key typed right after
        a click reached the window that had the focus before it (measured on Xvfb with openbox: 17 of 40
        alternating click-then-type pairs landed in the wrong entry). The WM handles its events in order, so
        once it answers a _NET_REQUEST_FRAME_EXTENTS sent after the click, the click has been replayed, and
        the client sees it before any key sent next. Without such a WM there is nothing to wait for.
        """
        if time.monotonic() < self._wm_silent_until:
            return False
        try:
            if self._private is None:
                self._private = self._conn.open_private()
            p = self._private
            root = p.screen().root
            request, extents = p.get_atom("_NET_REQUEST_FRAME_EXTENTS"), p.get_atom("_NET_FRAME_EXTENTS")
            supported = root.get_full_property(p.get_atom("_NET_SUPPORTED"), Xatom.ATOM)
            if supported is None or request not in supported.value:
                return False
            if self._barrier_window is None:
                self._barrier_window = root.create_window(-10, -10, 1, 1, 0, 0, X.InputOnly, X.CopyFromParent,
                                                          event_mask=X.PropertyChangeMask)
            window = self._barrier_window
            root.send_event(xevent.ClientMessage(window=window, client_type=request, data=(32, [0, 0, 0, 0, 0])),
                            event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
            p.flush()
            deadline = time.monotonic() + WM_BARRIER_TIMEOUT_S
            while True:
                while p.pending_events():
                    ev = p.next_event()
                    if ev.type == X.PropertyNotify and ev.window.id == window.id and ev.atom == extents:
                        return True
                if time.monotonic() >= deadline:
                    self._wm_silent_until = time.monotonic() + WM_BARRIER_COOLDOWN_S
                    return False
                select.select([p], [], [], max(0.0, deadline - time.monotonic()))
        except xerror.XError:
            return False
        except (xerror.ConnectionClosedError, OSError):
            self.close()  # reopened on the next barrier
            return False

    def _ping_focus_client(self, d: xdisplay.Display) -> bool:
        """_NET_WM_PING the focused toplevel; True once it answered (so it processed our events)."""
        try:
            if self._private is None:
                self._private = self._conn.open_private()
            p = self._private
            protocols, ping = p.get_atom("WM_PROTOCOLS"), p.get_atom("_NET_WM_PING")
            win, root = p.get_input_focus().focus, p.screen().root
            while isinstance(win, Window) and win.id not in (0, root.id):
                prop = win.get_full_property(protocols, Xatom.ATOM)
                if prop is not None and ping in prop.value:
                    break
                win = win.query_tree().parent
            else:
                return False
            if win.id in self._unresponsive:
                return False
            self._ping_token = (self._ping_token + 1) & 0xFFFFFFFF
            root.change_attributes(event_mask=X.SubstructureNotifyMask)  # replies go to the root
            win.send_event(xevent.ClientMessage(window=win, client_type=protocols,
                                                data=(32, [ping, self._ping_token, win.id, 0, 0])),
                           onerror=xerror.CatchError())
            p.flush()
            deadline = time.monotonic() + PING_TIMEOUT_S
            try:
                while True:
                    while p.pending_events():
                        ev = p.next_event()
                        if ev.type == X.ClientMessage and list(ev.data[1][:2]) == [ping, self._ping_token]:
                            return True
                    if time.monotonic() >= deadline:
                        self._unresponsive.add(win.id)
                        return False
                    select.select([p], [], [], max(0.0, deadline - time.monotonic()))
            finally:
                root.change_attributes(event_mask=0)
                p.sync()
                while p.pending_events():
                    p.next_event()
        except xerror.XError:  # the focus window vanished while we looked at it
            return False
        except (xerror.ConnectionClosedError, OSError):
            self.close()  # reopened on the next barrier
            return False


class _Keymap:
    """The server's keymap for one call: keysym -> (keycode, level), and the pool reconciled with it."""

    def __init__(self, d: xdisplay.Display, ctl: InputController) -> None:
        self._d, self._ctl = d, ctl
        ctl._unresponsive.clear()  # one _Keymap per call: a client slow last time gets another chance
        first = d.display.info.min_keycode
        rows = d.get_keyboard_mapping(first, d.display.info.max_keycode - first + 1)
        modmap = d.get_modifier_mapping()
        self.shift_keycode = next((kc for kc in modmap[X.ShiftMapIndex] if kc), 0)
        self.rebound = False  # a keycode was bound since the last settle: see InputController._settle
        in_modmap = {kc for mod in modmap for kc in mod if kc}
        levels = {first + i: (row[0], row[1]) if len(row) > 1 else (0, 0) for i, row in enumerate(rows)}
        self._index: dict[int, tuple[int, int]] = {}
        for level in (0, 1):
            for kc, syms in levels.items():
                if syms[level]:
                    self._index.setdefault(syms[level], (kc, level))
        # Spare keys are the empty ones plus those still holding a binding recorded in a root
        # window property by us, an earlier agent process or a second controller; so a restart
        # does not lose them. Re-derived every call: setxkbmap may have replaced the keymap.
        self._root, self._atom = d.screen().root, d.get_atom(SCRATCH_PROPERTY)
        prop = self._root.get_full_property(self._atom, Xatom.CARDINAL)
        pairs = list(prop.value) if prop is not None and prop.format == 32 else []
        self._scratch = {kc: ks for kc, ks in zip(pairs[::2], pairs[1::2], strict=False)
                         if ks and levels.get(kc) == (ks, ks)}
        spare = {first + i for i, row in enumerate(rows) if not any(row)} | self._scratch.keys()
        spare -= in_modmap
        pool = ctl._pool
        for kc in [kc for kc in pool if kc not in spare]:
            del pool[kc]
            ctl._last_press.pop(kc, None)
        for kc in sorted(spare - pool.keys(), reverse=True):
            pool[kc] = 0
            pool.move_to_end(kc, last=False)  # keys we have not used yet are handed out first
        for kc in pool:
            pool[kc] = self._scratch.get(kc, 0)

    def has(self, keysym: int) -> bool:
        return self._lookup(keysym, use_shift=True) is not None

    def _lookup(self, keysym: int, use_shift: bool) -> tuple[int, bool] | None:
        hit = self._index.get(keysym)
        if hit is None or (hit[1] == 1 and not (use_shift and self.shift_keycode)):
            return None
        return hit[0], hit[1] == 1

    def bind_run(self, keysyms: list[int], start: int) -> int:
        """Bind what ``keysyms[start:]`` lacks, as far as the pool lasts without rebinding a key of this run.

        Returns the end of the run. Binding a run at once lets one ``_settle`` cover all its new characters;
        a key the run reuses is moved to the pool's recent end so that a later binding in the run cannot take it.
        """
        pool, taken = self._ctl._pool, set()
        self.rebound = False
        end = start
        while end < len(keysyms):
            hit = self._lookup(keysyms[end], use_shift=True)
            if hit is None:
                if self._ctl._next_spare() in taken:
                    break  # every free spare key already holds a character of this run
                kc, _ = self.resolve(keysyms[end], use_shift=True)
            else:
                kc = hit[0]
            if kc in pool:
                taken.add(kc)
                pool.move_to_end(kc)
            end += 1
        return end

    def resolve(self, keysym: int, use_shift: bool) -> tuple[int, bool]:
        """The keycode for ``keysym`` (binding a spare one if the layout lacks it) and whether Shift is needed.

        A binding sets ``rebound``: the caller settles before pressing.
        """
        hit = self._lookup(keysym, use_shift)
        if hit is not None:
            return hit
        self.rebound = True
        kc, previous = self._ctl._bind(self._d, keysym)
        if self._index.get(previous) == (kc, 0):
            del self._index[previous]
        self._index[keysym] = (kc, 0)
        self._scratch[kc] = keysym
        flat = [v for pair in sorted(self._scratch.items()) for v in pair]
        self._root.change_property(self._atom, Xatom.CARDINAL, 32, flat)
        return kc, False


def _drain_events(d: xdisplay.Display) -> None:
    """Empty the shared connection's event queue; event loops use private connections.

    Each remap sends us a MappingNotify that would otherwise pile up forever; python-xlib's
    keysym cache is refreshed once per remapped range so other users of it stay right.
    """
    seen: set[tuple[int, int]] = set()
    while d.pending_events():
        ev = d.next_event()
        key = (ev.first_keycode, ev.count) if ev.type == X.MappingNotify else None
        if key and ev.request == X.MappingKeyboard and key not in seen:
            seen.add(key)
            d.refresh_keyboard_mapping(ev)
