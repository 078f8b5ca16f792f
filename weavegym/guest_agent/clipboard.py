"""Read and write the X CLIPBOARD and PRIMARY selections with python-xlib only.

X has no clipboard storage: the owner of a selection must answer every other
client's SelectionRequest for as long as it claims it. So ``set_text`` hands the
text to a daemon thread with its own connection and a hidden InputOnly window,
and the shared connection is never held while another client is slow to read.

Large texts: INCR (ICCCM 2.7.2) rather than rejection. A single property write
is bounded by the server's maximum request size (256 KiB on Xvfb/Xorg without
BIG-REQUESTS, which python-xlib lacks), and 200 KB of non-ASCII text is already
past that in UTF-8; clipboards routinely carry logs and documents that large.
Texts over MAX_TEXT_BYTES (UTF-8) are refused with InvalidArgument so a single
request cannot pin unbounded memory in the agent. Reading follows INCR too, with
the same cap. Targets served: TARGETS, TIMESTAMP, UTF8_STRING, TEXT, STRING and
text/plain;charset=utf-8 (MULTIPLE is refused).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from Xlib import X, Xatom
from Xlib import display as xdisplay
from Xlib import error as xerror
from Xlib.protocol import event as xevent

from weavegym.guest_agent.display import DisplayConnection
from weavegym.guest_agent.errors import DisplayUnavailable, FailedPrecondition, InvalidArgument

log = logging.getLogger(__name__)

MAX_TEXT_BYTES = 16 * 1024 * 1024
SELECTIONS = ("CLIPBOARD", "PRIMARY")
_TEXT_TARGETS = ("UTF8_STRING", "text/plain;charset=utf-8", "TEXT", "STRING")
_INCR_IDLE_S = 10.0  # drop an INCR transfer whose requestor stopped reading
_SET_TIMEOUT_S = 5.0
_CLAIM_ATTEMPTS = 5


def _ignore_x_error(err: xerror.XError, request: object = None) -> None:
    """Errors on our connections (mostly a requestor that vanished) are expected; never print them."""
    log.debug("ignored X error: %s", err)


def _check_selection(selection: str) -> None:
    if selection not in SELECTIONS:
        raise InvalidArgument(f"selection must be one of {SELECTIONS}, got {selection!r}")


def _hidden_window(d: xdisplay.Display) -> Any:
    """Never mapped, InputOnly: invisible, and list_windows skips it."""
    return d.screen().root.create_window(-10, -10, 1, 1, 0, 0, window_class=X.InputOnly,
                                         visual=X.CopyFromParent, event_mask=X.PropertyChangeMask)


def _wid(w: object) -> int:
    return int(getattr(w, "id", w))  # type: ignore[call-overload]


@dataclass
class _Pending:
    selection: int
    text: str
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False
    attempts: int = 1


@dataclass
class _Transfer:
    requestor: object
    prop: int
    type: int
    data: bytes
    offset: int = 0
    last: float = field(default_factory=time.monotonic)


class _Owner:
    """The selection-owning thread: all X calls on its connection happen on that thread."""

    def __init__(self, d: xdisplay.Display) -> None:
        self.d = d
        d.set_error_handler(_ignore_x_error)
        self.atoms = {n: d.intern_atom(n) for n in (*_TEXT_TARGETS, *SELECTIONS, "TARGETS",
                                                   "TIMESTAMP", "INCR", "WEAVEGYM_STAMP")}
        self.win = _hidden_window(d)
        self.chunk = max(4096, d.display.info.max_request_length * 4 - 1024)
        self.owned: dict[int, tuple[str, int]] = {}  # selection atom -> (text, ownership time)
        self.lock = threading.Lock()
        self.commands: deque[_Pending] = deque()
        self.stamps: deque[_Pending] = deque()
        self.transfers: dict[tuple[int, int], _Transfer] = {}
        self.alive = True
        self.stopping = False
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)  # a full pipe already means "wake up"
        d.flush()
        self.thread = threading.Thread(target=self._run, name="clipboard-owner", daemon=True)
        self.thread.start()

    def set(self, selection: str, text: str) -> bool:
        p = _Pending(self.atoms[selection], text)
        with self.lock:
            if not self.alive:
                return False
            self.commands.append(p)
            self._wake()
        p.done.wait(_SET_TIMEOUT_S)
        return p.ok

    def _wake(self) -> None:  # with self.lock held: the thread closes the pipe under it
        if self.alive:
            with contextlib.suppress(OSError):
                os.write(self.wake_w, b"x")

    def text_for(self, selection_atom: int) -> str | None:
        with self.lock:
            entry = self.owned.get(selection_atom)
        return entry[0] if entry else None

    def stop(self) -> None:
        self.stopping = True
        with self.lock:
            self._wake()
        self.thread.join(timeout=5)

    def _run(self) -> None:
        d = self.d
        try:
            while not self.stopping:
                self._start_commands()
                self._expire_transfers()
                # flush() may read events into the queue, so the last call before select() must be
                # pending_events() returning 0 with nothing left to send.
                d.flush()
                if d.pending_events():
                    while d.pending_events():
                        self._dispatch_safely(d.next_event())
                    continue
                ready, _, _ = select.select([d, self.wake_r], [], [], 1.0)
                if self.wake_r in ready:
                    os.read(self.wake_r, 4096)
        except Exception as exc:  # connection lost: nothing left to serve
            if not self.stopping:
                log.warning("clipboard owner stopped: %s", exc)
        finally:
            with self.lock:
                self.alive = False
                self.owned.clear()
                pending = list(self.commands) + list(self.stamps)
                os.close(self.wake_r)
                os.close(self.wake_w)
            for p in pending:
                p.done.set()
            with contextlib.suppress(Exception):
                d.close()

    def _start_commands(self) -> None:
        """Get a server timestamp for each claim (ICCCM forbids CurrentTime) via a property write."""
        with self.lock:
            new, self.commands = list(self.commands), deque()
        for p in new:
            self.stamps.append(p)
            self.win.change_property(self.atoms["WEAVEGYM_STAMP"], Xatom.STRING, 8, b"",
                                     mode=X.PropModeAppend)

    def _dispatch_safely(self, ev: object) -> None:
        try:
            self._dispatch(ev)
        except (xerror.ConnectionClosedError, OSError):
            raise
        except Exception:  # one bad event must not kill the owner
            log.exception("clipboard owner: error handling %s", type(ev).__name__)

    def _dispatch(self, ev: object) -> None:
        if isinstance(ev, xevent.SelectionRequest):
            self._on_request(ev)
        elif isinstance(ev, xevent.SelectionClear):
            with self.lock:
                entry = self.owned.get(ev.atom)
                if entry and ev.time >= entry[1]:
                    del self.owned[ev.atom]
        elif isinstance(ev, xevent.PropertyNotify):
            if _wid(ev.window) == self.win.id and ev.atom == self.atoms["WEAVEGYM_STAMP"]:
                if self.stamps:
                    self._claim(self.stamps.popleft(), ev.time)
            elif ev.state == X.PropertyDelete:
                self._continue_transfer((_wid(ev.window), ev.atom))
        elif isinstance(ev, xevent.DestroyNotify):
            for key in [k for k in self.transfers if k[0] == _wid(ev.window)]:
                del self.transfers[key]

    def _claim(self, p: _Pending, stamp: int) -> None:
        """Claim, then confirm. Another client claiming at the same moment (with a later stamp, or
        between our two requests) makes us lose: retry with a fresh stamp, so the last writer wins."""
        self.win.set_selection_owner(p.selection, stamp)
        if _wid(self.d.get_selection_owner(p.selection)) == self.win.id:
            with self.lock:
                self.owned[p.selection] = (p.text, stamp)
            p.ok = True
        elif p.attempts < _CLAIM_ATTEMPTS:
            p.attempts += 1
            with self.lock:
                self.commands.append(p)
            return
        p.done.set()

    def _on_request(self, ev: xevent.SelectionRequest) -> None:
        prop = ev.property or ev.target  # obsolete clients send property None
        a = self.atoms
        with self.lock:
            entry = self.owned.get(ev.selection)
        refused = entry is None or (ev.time != X.CurrentTime and ev.time < entry[1])
        if not refused and entry is not None:
            text, stamp = entry
            if ev.target == a["TARGETS"]:
                targets = [a["TARGETS"], a["TIMESTAMP"], *(a[n] for n in _TEXT_TARGETS)]
                ev.requestor.change_property(prop, Xatom.ATOM, 32, targets)
            elif ev.target == a["TIMESTAMP"]:
                ev.requestor.change_property(prop, Xatom.INTEGER, 32, [stamp])
            elif ev.target in {a[n] for n in _TEXT_TARGETS}:
                if ev.target == a["STRING"]:
                    data, ptype = text.encode("latin-1", errors="replace"), Xatom.STRING
                else:
                    data = text.encode("utf-8", errors="replace")
                    ptype = a["UTF8_STRING"] if ev.target == a["TEXT"] else ev.target
                self._send_data(ev.requestor, prop, ptype, data)
            else:
                refused = True
        reply = xevent.SelectionNotify(time=ev.time, requestor=ev.requestor, selection=ev.selection,
                                       target=ev.target, property=X.NONE if refused else prop)
        ev.requestor.send_event(reply, event_mask=0)

    def _send_data(self, requestor: object, prop: int, ptype: int, data: bytes) -> None:
        if len(data) <= self.chunk:
            requestor.change_property(prop, ptype, 8, data)  # type: ignore[attr-defined]
            return
        # INCR: watch the requestor's property deletions (and its death) before announcing.
        requestor.change_attributes(  # type: ignore[attr-defined]
            event_mask=X.PropertyChangeMask | X.StructureNotifyMask)
        self.transfers[(_wid(requestor), prop)] = _Transfer(requestor, prop, ptype, data)
        requestor.change_property(prop, self.atoms["INCR"], 32, [len(data)])  # type: ignore[attr-defined]

    def _continue_transfer(self, key: tuple[int, int]) -> None:
        t = self.transfers.get(key)
        if t is None:
            return
        if t.offset > len(t.data):  # the final zero-length chunk was read: done
            self._end_transfer(key)
            return
        chunk = t.data[t.offset:t.offset + self.chunk]
        t.offset += len(chunk) if chunk else 1
        t.last = time.monotonic()
        t.requestor.change_property(t.prop, t.type, 8, chunk)  # type: ignore[attr-defined]

    def _end_transfer(self, key: tuple[int, int]) -> None:
        t = self.transfers.pop(key)
        if not any(k[0] == key[0] for k in self.transfers):
            t.requestor.change_attributes(event_mask=0)  # type: ignore[attr-defined]

    def _expire_transfers(self) -> None:
        now = time.monotonic()
        for key in [k for k, t in self.transfers.items() if now - t.last > _INCR_IDLE_S]:
            self._end_transfer(key)


class Clipboard:
    """The agent's clipboard: reads via a private connection per call, owns via one thread."""

    def __init__(self, conn: DisplayConnection) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._owner: _Owner | None = None

    def set_text(self, text: str, selection: str = "CLIPBOARD") -> None:
        """Become the owner of ``selection`` with ``text``; returns once the server confirmed it."""
        _check_selection(selection)
        if not isinstance(text, str):
            raise InvalidArgument("text must be a string")
        if len(text.encode("utf-8", errors="replace")) > MAX_TEXT_BYTES:
            raise InvalidArgument(f"text is larger than {MAX_TEXT_BYTES} bytes of UTF-8")
        with self._lock:
            if self._owner is None or not self._owner.alive:
                d = self._conn.open_private()
                try:
                    self._owner = _Owner(d)
                except (xerror.ConnectionClosedError, OSError) as exc:
                    with contextlib.suppress(Exception):
                        d.close()
                    raise DisplayUnavailable(f"lost the X display while taking {selection}: {exc}") from exc
            owner = self._owner
        if not owner.set(selection, text):
            raise FailedPrecondition(f"could not take ownership of the {selection} selection")

    def get_text(self, selection: str = "CLIPBOARD", timeout: float = 2.0) -> str | None:
        """The selection's text, or None if it has no owner or the owner offers no text."""
        _check_selection(selection)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 60:
            raise InvalidArgument("timeout must be a number of seconds in (0, 60]")
        deadline = time.monotonic() + timeout
        d = self._conn.open_private()
        try:
            d.set_error_handler(_ignore_x_error)
            sel = d.intern_atom(selection)
            owner_id = _wid(d.get_selection_owner(sel))
            if owner_id == X.NONE:
                return None
            owner = self._owner
            if owner is not None and owner.alive and owner_id == owner.win.id:
                text = owner.text_for(sel)
                if text is not None:
                    return text
            return _convert(d, sel, deadline, timeout)
        except (xerror.ConnectionClosedError, OSError) as exc:
            raise DisplayUnavailable(f"lost the X display while reading {selection}: {exc}") from exc
        finally:
            with contextlib.suppress(Exception):
                d.close()

    def close(self) -> None:
        """Stop serving; closing the owner's connection gives up the selections."""
        with self._lock:
            owner, self._owner = self._owner, None
        if owner is not None:
            owner.stop()


def _convert(d: xdisplay.Display, sel: int, deadline: float, timeout: float) -> str | None:
    win = _hidden_window(d)
    prop = d.intern_atom("WEAVEGYM_SELECTION")
    incr = d.intern_atom("INCR")
    for target in (d.intern_atom("UTF8_STRING"), Xatom.STRING):
        win.convert_selection(sel, target, prop, X.CurrentTime)
        d.flush()
        ev = _wait(d, deadline, lambda e, t=target: isinstance(e, xevent.SelectionNotify)
                   and _wid(e.requestor) == win.id and e.target == t)
        if ev is None:
            raise FailedPrecondition(f"the selection owner did not answer within {timeout}s")
        if ev.property == X.NONE:
            continue
        reply = _take_property(d, win, prop)
        if reply is not None and reply.property_type == incr:
            data = _read_incr(d, win, prop, deadline, timeout)
        elif reply is not None and reply.format == 8:
            data = bytes(reply.value)
        else:
            continue
        return data.decode("latin-1" if reply.property_type == Xatom.STRING else "utf-8", errors="replace")
    return None


def _read_incr(d: xdisplay.Display, win: Any, prop: int, deadline: float, timeout: float) -> bytes:
    parts: list[bytes] = []
    while True:
        ev = _wait(d, deadline, lambda e: isinstance(e, xevent.PropertyNotify) and _wid(e.window) == _wid(win)
                   and e.atom == prop and e.state == X.PropertyNewValue)
        if ev is None:
            raise FailedPrecondition(f"the selection owner's INCR transfer did not finish within {timeout}s")
        reply = _take_property(d, win, prop)
        chunk = bytes(reply.value) if reply is not None and reply.format == 8 else b""
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        if sum(map(len, parts)) > MAX_TEXT_BYTES:
            raise FailedPrecondition(f"the selection holds more than {MAX_TEXT_BYTES} bytes")


def _take_property(d: xdisplay.Display, win: Any, prop: int) -> Any:
    """Read and delete (deleting is what asks an INCR owner for the next chunk)."""
    reply = win.get_full_property(prop, X.AnyPropertyType)
    win.delete_property(prop)
    d.flush()
    return reply


def _wait(d: xdisplay.Display, deadline: float, match: Callable[[Any], bool]) -> Any:
    """Next event satisfying ``match``, dropping others; None at the deadline."""
    while True:
        while d.pending_events():
            ev = d.next_event()
            if match(ev):
                return ev
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        select.select([d], [], [], remaining)
