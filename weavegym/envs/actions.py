"""The agent's action vocabulary and the one gate every action passes through.

Agents send actions as dicts (hand-written or sampled from the Gym space), as text like ``click(100, 200)``
or as OpenAI-style tool calls. :func:`parse_action` turns each into one validated, normalised :class:`Action`
or raises :class:`InvalidActionError` with a message the agent can act on; it never raises anything else,
because the env reports the error in ``info["action_error"]`` instead of crashing the episode.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from weavegym.core.errors import InvalidActionError
from weavegym.envs import pyautogui_text
from weavegym.envs.action_text import (
    check_text_size,
    decode_arguments,
    describe,
    describe_field,
    format_call,
    format_literal,
    parse_call,
    read_mapping,
    tool_call_parts,
)
from weavegym.envs.pyautogui_text import is_pyautogui_text
from weavegym.envs.vocabulary import (
    CLI_KINDS,
    CONTROL_KINDS,
    ENDING_KINDS,
    GUI_KINDS,
    KINDS,
    REQUIRED,
    VOCABULARY,
    Channel,
)

__all__ = ["CLI_KINDS", "CONTROL_KINDS", "ENDING_KINDS", "GUI_KINDS", "KINDS", "Action", "ActionLimits",
           "channel_of", "kind_fields", "parse_action", "tool_schema"]

BUTTONS: tuple[str, ...] = ("left", "middle", "right")

# Keys of the default Gym action space (space_layout.action_space). Kept here so space_layout imports us, not
# the reverse; a sample carries all of them, so they are tolerated in any dict even when the kind ignores them.
ACTION_SPACE_FIELDS: frozenset[str] = frozenset(
    {"kind", "x", "y", "to_x", "to_y", "button", "dx", "dy", "text", "seconds", "key"}
)

# Canonical fields of each kind in positional order, with their defaults, and the other names they accept.
_FIELDS: dict[str, tuple[tuple[str, Any], ...]] = {kind: spec.fields for kind, spec in VOCABULARY.items()}
_ALIASES: dict[str, Mapping[str, str]] = {kind: spec.aliases for kind, spec in VOCABULARY.items() if spec.aliases}

_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")
_EXPECTED = "expected a dict like {'kind': 'click', 'x': 100, 'y': 200}, text like 'click(100, 200)', or a tool call"


@dataclass(frozen=True)
class ActionLimits:
    """Bounds that keep one action from stalling or flooding the guest."""

    max_type_chars: int = 10_000
    max_code_chars: int = 100_000
    max_key_chars: int = 64
    max_wait_s: float = 60.0
    default_timeout_s: float = 30.0
    max_timeout_s: float = 600.0
    max_scroll: int = 50


@dataclass(frozen=True)
class Action:
    """One validated action; fields a kind does not use keep their defaults, so equal actions compare equal."""

    kind: str
    x: int | None = None
    y: int | None = None
    to_x: int | None = None
    to_y: int | None = None
    button: str = "left"
    dx: int = 0
    dy: int = 0
    text: str = ""
    keys: str = ""
    command: str = ""
    code: str = ""
    seconds: float = 1.0
    timeout: float | None = None  # None: the env's ActionLimits.default_timeout_s
    reason: str = ""
    answer: str = ""  # done(answer=...): what a question-asking task is scored on

    @property
    def channel(self) -> Channel:
        """Which executor runs it: the GUI input path, a CLI call, or the env itself."""
        return channel_of(self.kind)

    def to_dict(self) -> dict[str, Any]:
        """This kind's fields under their canonical names; unset optional fields (None) are left out."""
        out: dict[str, Any] = {"kind": self.kind}
        for name, _default in _FIELDS.get(self.kind, ()):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def to_text(self) -> str:
        """The call syntax :func:`parse_action` reads back: required fields positional, changed defaults by name."""
        fields = _FIELDS.get(self.kind, ())
        positional: list[object] = []
        keywords: dict[str, object] = {}
        for name, default in fields:
            value = getattr(self, name)
            if default is REQUIRED or (len(fields) == 1 and value != default):
                positional.append(value)
            elif value != default:
                keywords[name] = value
        return format_call(self.kind, positional, keywords)


def kind_fields(kind: str) -> tuple[str, ...]:
    """Canonical field names of ``kind`` in positional order (the order text arguments map onto)."""
    return tuple(name for name, _default in _FIELDS[kind])


def channel_of(kind: str) -> Channel:
    """The executor family of ``kind``; the env routes on this."""
    if kind in VOCABULARY:
        return VOCABULARY[kind].channel
    raise InvalidActionError(f"unknown action kind {describe(kind)}; expected one of: {', '.join(KINDS)}")


def parse_action(raw: object, screen: tuple[int, int], limits: ActionLimits = ActionLimits()) -> Action:
    """Turn any accepted action form into a validated :class:`Action` for a ``screen`` of (width, height)."""
    width, height = _check_screen(screen)
    check = _Checker(width, height, limits)
    if isinstance(raw, Action):
        kind = _kind(raw.kind, allow_index=False)
        return check.build(kind, {name: getattr(raw, name) for name in kind_fields(kind)})
    if isinstance(raw, str):
        if is_pyautogui_text(raw):  # OSWorld's form: pyautogui.click(640, 360), WAIT, DONE, FAIL
            kind, values = pyautogui_text.translate(check_text_size(raw, _max_text_chars(limits)))
            return check.build(kind, values)
        name, positional, keywords = parse_call(raw, _max_text_chars(limits), KINDS)
        return check.build(name, _bind(name, positional, keywords))
    if isinstance(raw, Mapping):
        items = read_mapping(raw, "action")
        if "kind" in items:
            kind = _kind(items["kind"], allow_index=True)
            return check.build(kind, _resolve(kind, items, tolerated=ACTION_SPACE_FIELDS), button_index=True)
        call = tool_call_parts(items)
        if call is None:
            raise InvalidActionError(f"action dict has no 'kind' key (keys: {describe(list(items)[:10])}); {_EXPECTED}")
    else:
        call = tool_call_parts(raw)
        if call is None:
            raise InvalidActionError(f"{_EXPECTED}; got {type(raw).__name__}")
    name, arguments = call
    if not isinstance(name, str):
        raise InvalidActionError(f"tool call name must be a string naming an action, got {type(name).__name__}")
    if name not in KINDS:
        raise InvalidActionError(f"unknown tool {describe(name)}; expected one of: {', '.join(KINDS)}")
    # ensure_ascii JSON spends 12 characters on one emoji (a surrogate pair of \\u escapes)
    args = decode_arguments(name, arguments, 12 * max(limits.max_code_chars, limits.max_type_chars) + 1000)
    return check.build(name, _resolve(name, args, tolerated=frozenset()))


class _Checker:
    """Validates field values against one screen and one set of limits."""

    def __init__(self, width: int, height: int, limits: ActionLimits) -> None:
        self.width, self.height, self.limits = width, height, limits

    def build(self, kind: str, values: dict[str, object], *, button_index: bool = False) -> Action:
        """Validate ``values`` (canonical names of ``kind``'s fields) and fill in defaults."""
        missing = [name for name, default in _FIELDS[kind] if default is REQUIRED and name not in values]
        if missing:
            raise InvalidActionError(f"{kind} is missing required field(s) {', '.join(missing)}; "
                                     f"usage: {_signature(kind)}")
        out = {name: self._field(kind, name, values.get(name, default), default, button_index)
               for name, default in _FIELDS[kind]}
        if ("x" in out) and (out["x"] is None) != (out.get("y") is None):
            raise InvalidActionError(f"{kind} needs both x and y, or neither (x={out['x']}, y={out.get('y')})")
        if kind == "scroll" and out["dx"] == 0 and out["dy"] == 0:
            raise InvalidActionError("scroll needs dx or dy (nonzero); e.g. scroll(dy=-3) scrolls up 3 notches")
        return Action(kind=kind, **out)

    def _field(self, kind: str, name: str, value: object, default: object, button_index: bool) -> object:
        lim = self.limits
        label = f"{kind}: {name}"
        if name in ("x", "y", "to_x", "to_y"):
            if value is None and default is None:  # optional position: act where the pointer is
                return None
            size = self.width if name in ("x", "to_x") else self.height
            number = _int(label, value)
            if not 0 <= number < size:
                raise InvalidActionError(f"{label}={describe(number)} is off the {self.width}x{self.height} screen "
                                         f"(need 0 <= {name} < {size})")
            return number
        if name == "button":
            return _button(label, value, button_index)
        if name in ("dx", "dy"):
            number = _int(label, value)
            if abs(number) > lim.max_scroll:
                raise InvalidActionError(f"{label}={describe(number)} is out of range (need -{lim.max_scroll} to "
                                         f"{lim.max_scroll} notches)")
            return number
        if name == "seconds":
            return _positive(label, value, lim.max_wait_s)
        if name == "timeout":
            return None if value is None else _positive(label, value, lim.max_timeout_s)
        if name == "text":
            return _text(label, value, lim.max_type_chars, allow_empty=False)
        if name in ("reason", "answer"):
            return _text(label, value, lim.max_type_chars, allow_empty=True)
        if name == "keys":
            keys = _text(label, value, lim.max_key_chars, allow_empty=False)
            if any(ch.isspace() for ch in keys):
                raise InvalidActionError(f"{label} must be one combo without whitespace, like 'ctrl+s' or 'Return'; "
                                         f"got {describe(keys)} (send one key action per combo)")
            return keys
        code = _text(label, value, lim.max_code_chars, allow_empty=False)  # command or code
        if not code.strip():
            raise InvalidActionError(f"{label} is blank; give the {name} to run")
        return code


def _max_text_chars(limits: ActionLimits) -> int:
    """Longest text form of a valid action: repr escapes such as \\U000e0001 spend 10 characters on one character.

    Longer text is refused before parsing. Parsing cost comes from syntax, which parse_call caps separately by
    counting tokens, so this cap can be generous enough to keep ``to_text()`` round-tripping for every action.
    """
    return 10 * max(limits.max_code_chars, limits.max_type_chars) + 1000


def _check_screen(screen: tuple[int, int]) -> tuple[int, int]:
    """The screen comes from the env, not the agent, so a bad one is a programming error (plain ValueError)."""
    try:
        width, height = (int(v) for v in screen)
    except (TypeError, ValueError):
        raise ValueError(f"screen must be (width, height), got {screen!r}") from None
    if width <= 0 or height <= 0:
        raise ValueError(f"screen must have positive width and height, got {screen!r}")
    return width, height


def _kind(value: object, *, allow_index: bool) -> str:
    value = _unwrap("kind", value)
    if isinstance(value, str):
        if value in KINDS:
            return value
        raise InvalidActionError(f"unknown action kind {describe(value)}; expected one of: {', '.join(KINDS)}")
    if allow_index and isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < len(KINDS):
            return KINDS[value]
        raise InvalidActionError(f"kind index {describe(value)} is out of range; expected 0..{len(KINDS) - 1} "
                                 f"(an index into {', '.join(KINDS)}) or a kind name")
    raise InvalidActionError(f"kind must be an action name (one of: {', '.join(KINDS)}), got {_type_and_value(value)}")


def _resolve(kind: str, items: Mapping[object, object], tolerated: frozenset[str]) -> dict[str, object]:
    """Map a dict's keys onto ``kind``'s canonical fields; unknown keys are errors unless ``tolerated``."""
    fields = kind_fields(kind)
    aliases = _ALIASES.get(kind, {})
    for key in items:
        if key != "kind" and key not in fields and key not in aliases and key not in tolerated:
            raise InvalidActionError(f"unknown field {describe(key)} for {kind}; accepted fields: "
                                     f"{', '.join(fields) or 'none'} (usage: {_signature(kind)})")
    values = {name: items[name] for name in fields if name in items}
    for alias, name in aliases.items():
        if alias in items and name not in values:
            values[name] = items[alias]
    return values


def _bind(kind: str, positional: list[object], keywords: dict[str, object]) -> dict[str, object]:
    """Map text-call arguments onto ``kind``'s fields like Python would bind them."""
    fields = kind_fields(kind)
    if len(positional) > len(fields):
        raise InvalidActionError(f"{kind} takes at most {len(fields)} positional argument(s), got {len(positional)}; "
                                 f"usage: {_signature(kind)}")
    values: dict[str, object] = dict(zip(fields, positional, strict=False))
    aliases = _ALIASES.get(kind, {})
    for key, value in keywords.items():
        name = aliases.get(key, key)
        if name not in fields:
            raise InvalidActionError(f"{kind} got an unknown argument {key!r}; usage: {_signature(kind)}")
        if name in values:
            raise InvalidActionError(f"{kind} got multiple values for {name!r}; usage: {_signature(kind)}")
        values[name] = value
    return values


def _unwrap(label: str, value: object) -> object:
    """Numpy scalars and 0-d arrays (what Gym spaces sample) become plain Python values."""
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            raise InvalidActionError(f"{label} must be a single value, got an array of shape {value.shape}")
        value = value.item()
    elif isinstance(value, np.generic):
        value = value.item()
    return value


def _int(label: str, value: object) -> int:
    value = _unwrap(label, value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidActionError(f"{label} must be a finite integer, got {value}")
        return round(value)  # agents often send 100.0 or sub-pixel positions
    raise InvalidActionError(f"{label} must be an integer, got {_type_and_value(value)}")


def _positive(label: str, value: object, maximum: float) -> float:
    value = _unwrap(label, value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidActionError(f"{label} must be a number of seconds, got {_type_and_value(value)}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or not 0 < number <= maximum:
        raise InvalidActionError(f"{label}={describe(value)} is out of range (need more than 0 and at most "
                                 f"{maximum:g} seconds)")
    return number


def _button(label: str, value: object, allow_index: bool) -> str:
    value = _unwrap(label, value)
    if isinstance(value, str) and value in BUTTONS:
        return value
    if allow_index and isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(BUTTONS):
        return BUTTONS[value]  # the Gym space's Discrete(3) button index
    raise InvalidActionError(f"{label} must be one of {', '.join(map(repr, BUTTONS))}, got {_type_and_value(value)}")


def _text(label: str, value: object, max_chars: int, *, allow_empty: bool) -> str:
    value = _unwrap(label, value)
    if not isinstance(value, str):
        raise InvalidActionError(f"{label} must be a string, got {_type_and_value(value)}")
    text = str(value)  # drop str subclasses such as numpy.str_
    if len(text) > max_chars:
        raise InvalidActionError(f"{label} is {len(text)} characters long; the limit is {max_chars}")
    if not text and not allow_empty:
        raise InvalidActionError(f"{label} is empty; it needs at least one character")
    bad = _BAD_CHARS.search(text)
    if bad is not None:
        what = "a NUL character" if bad.group() == "\x00" else f"a lone surrogate (U+{ord(bad.group()):04X})"
        raise InvalidActionError(f"{label} contains {what} at index {bad.start()}; "
                                 "text must be valid Unicode without NUL")
    return text


def _signature(kind: str) -> str:
    parts = [name if default is REQUIRED else f"{name}={format_literal(default)}" for name, default in _FIELDS[kind]]
    return f"{kind}({', '.join(parts)})"


def _type_and_value(value: object) -> str:
    return "None" if value is None else f"{type(value).__name__} {describe(value)}"


def tool_schema(screen: tuple[int, int] = (1280, 720), limits: ActionLimits = ActionLimits()) -> list[dict[str, Any]]:
    """OpenAI ``tools`` list with one function per kind; bounds mirror what :func:`parse_action` enforces."""
    width, height = _check_screen(screen)
    tools = []
    for kind in KINDS:
        properties = {
            name: _param_schema(kind, name, default, width, height, limits) for name, default in _FIELDS[kind]
        }
        required = [name for name, default in _FIELDS[kind] if default is REQUIRED]
        parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
        description = VOCABULARY[kind].describe(width, height)
        tools.append({"type": "function",
                      "function": {"name": kind, "description": description, "parameters": parameters}})
    return tools


def _param_schema(kind: str, name: str, default: Any, width: int, height: int, lim: ActionLimits) -> dict[str, Any]:
    pixels_x = {"type": "integer", "minimum": 0, "maximum": width - 1}
    pixels_y = {"type": "integer", "minimum": 0, "maximum": height - 1}
    notches = {"type": "integer", "minimum": -lim.max_scroll, "maximum": lim.max_scroll}
    code = {"type": "string", "minLength": 1, "maxLength": lim.max_code_chars}
    out: dict[str, Any] = {
        "x": pixels_x, "to_x": pixels_x, "y": pixels_y, "to_y": pixels_y, "dx": notches, "dy": notches,
        "button": {"type": "string", "enum": list(BUTTONS)},
        "text": {"type": "string", "minLength": 1, "maxLength": lim.max_type_chars},
        "keys": {"type": "string", "minLength": 1, "maxLength": lim.max_key_chars, "pattern": "^\\S+$"},
        "command": code, "code": code,
        "seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": lim.max_wait_s},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": lim.max_timeout_s},
        "reason": {"type": "string", "maxLength": lim.max_type_chars},
        "answer": {"type": "string", "maxLength": lim.max_type_chars},
    }[name].copy()  # fmt: skip
    out["description"] = describe_field(name, width, height, lim.default_timeout_s, optional_xy=default is None)
    if default is not REQUIRED and default is not None:
        out["default"] = default
    return out
