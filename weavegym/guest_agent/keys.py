"""Key names and characters to X keysyms, for key combos and for typing.

Agents write combos the way people do ("ctrl+shift+T", "enter", "pgdn"), so
friendly aliases are matched case-insensitively; anything else must be an exact
X keysym name ("KP_Enter", "XF86AudioMute") or a single character. Parsing is
pure (no X connection), so a bad combo is rejected before any event is sent.
"""

from __future__ import annotations

import re
import unicodedata

from Xlib import XK

from weavegym.guest_agent.errors import InvalidArgument

# python-xlib only loads the miscellany and latin1 names by default.
for _group in (
    "latin2", "latin3", "latin4", "greek", "cyrillic", "hebrew", "arabic", "thai", "katakana",
    "korean", "technical", "special", "publishing", "apl", "xkb", "xf86", "xk3270",
):
    XK.load_keysym_group(_group)

MAX_COMBO_CHARS = 256
MAX_TEXT_CHARS = 10_000

_ALIASES: dict[str, str] = {
    "ctrl": "Control_L", "control": "Control_L",
    "shift": "Shift_L",
    "alt": "Alt_L",
    "super": "Super_L", "win": "Super_L", "meta": "Super_L", "cmd": "Super_L",
    "enter": "Return", "return": "Return",
    "esc": "Escape", "escape": "Escape",
    "backspace": "BackSpace",
    "tab": "Tab",
    "space": "space",
    "delete": "Delete", "del": "Delete",
    "insert": "Insert",
    "home": "Home",
    "end": "End",
    "pageup": "Prior", "pgup": "Prior",
    "pagedown": "Next", "pgdn": "Next",
    "up": "Up", "down": "Down", "left": "Left", "right": "Right",
    "capslock": "Caps_Lock",
    "printscreen": "Print", "print": "Print",
    "menu": "Menu",
}
_FKEY = re.compile(r"[fF]([1-9]|1[0-9]|2[0-4])")

SHIFT_KEYSYMS = frozenset((XK.XK_Shift_L, XK.XK_Shift_R))


def char_to_keysym(ch: str) -> int:
    """The keysym that types ``ch``: Latin-1 keysyms equal the codepoint, the rest use Unicode keysyms."""
    if not isinstance(ch, str) or len(ch) != 1:
        raise InvalidArgument(f"expected a single character, got {ch!r}")
    if ch == "\n":
        return XK.XK_Return
    if ch == "\t":
        return XK.XK_Tab
    cp = ord(ch)
    category = unicodedata.category(ch)
    if category == "Cc":
        raise InvalidArgument(f"control character U+{cp:04X} cannot be typed")
    if category == "Cs":
        raise InvalidArgument(f"lone surrogate U+{cp:04X} cannot be typed")
    if cp <= 0xFF:
        return cp  # Latin-1 keysyms are the codepoints (the inverse of XK.keysym_to_string)
    return 0x01000000 + cp


def _split(combo: str) -> list[str]:
    """Split on '+'; a '+' right after a separator is the plus key ("ctrl++", "ctrl++x")."""
    raw = combo.split("+")
    parts: list[str] = []
    k = 0
    while k < len(raw):
        part = raw[k].strip()
        if part:
            parts.append(part)
            k += 1
            continue
        if raw[k] == "" and 0 < k < len(raw) - 1:
            parts.append("+")
            # The plus character sits between raw[k] and raw[k+1]; an empty raw[k+1] belongs to it.
            k += 2 if raw[k + 1] == "" else 1
            continue
        if len(raw) == 1:
            raise InvalidArgument(f"empty key combo {combo!r}")
        raise InvalidArgument(f"empty key name (part {len(parts) + 1}) in combo {combo!r}")
    return parts


def name_to_keysym(name: str) -> int | None:
    """One combo part to a keysym, or None if it names nothing."""
    alias = _ALIASES.get(name.lower())
    if alias is not None:
        return XK.string_to_keysym(alias)
    if _FKEY.fullmatch(name):
        return XK.string_to_keysym(name.upper())
    keysym = XK.string_to_keysym(name)
    if keysym == 0 and name.startswith("XF86") and not name.startswith("XF86_"):
        keysym = XK.string_to_keysym("XF86_" + name[4:])  # python-xlib spells XF86AudioMute XF86_AudioMute
    if keysym:
        return keysym
    if len(name) == 1:
        try:
            return char_to_keysym(name)
        except InvalidArgument:
            return None
    return None


def parse_combo(combo: str) -> list[int]:
    """Keysyms for ``combo`` in press order (modifiers first, as written)."""
    if not isinstance(combo, str):
        raise InvalidArgument(f"key combo must be a string, got {type(combo).__name__}")
    if len(combo) > MAX_COMBO_CHARS:
        raise InvalidArgument(f"key combo is {len(combo)} characters; the limit is {MAX_COMBO_CHARS}")
    keysyms: list[int] = []
    for part in _split(combo):
        keysym = name_to_keysym(part)
        if keysym is None:
            raise InvalidArgument(f"unknown key {part!r} in combo {combo!r}")
        keysyms.append(keysym)
    return keysyms


def text_to_keysyms(text: object) -> list[int]:
    """Validate ``text`` (position of any bad character included) and map it to keysyms."""
    if not isinstance(text, str):
        raise InvalidArgument(f"text must be a string, got {type(text).__name__}")
    if not text:
        raise InvalidArgument("text is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidArgument(f"text is {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
    for i, ch in enumerate(text):
        cat = unicodedata.category(ch)
        if ch == "\r" and text[i + 1 : i + 2] == "\n":
            continue
        if (cat == "Cc" and ch not in "\n\t") or cat == "Cs":
            what = "control character" if cat == "Cc" else "lone surrogate"
            raise InvalidArgument(f"text has {what} U+{ord(ch):04X} at index {i}; only \\n and \\t are allowed")
    return [char_to_keysym(ch) for ch in text.replace("\r\n", "\n")]
