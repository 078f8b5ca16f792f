"""OSWorld-style text actions: one ``pyautogui.<call>(...)`` (or ``time.sleep``), mapped onto our kinds.

Agents written for OSWorld's pyautogui action space emit calls such as ``pyautogui.click(x=640, y=360)``
or ``pyautogui.hotkey('ctrl', 's')``, plus the bare words WAIT, DONE and FAIL. We accept one such call per
step. It is parsed with :mod:`ast` and only its literal arguments are read, so nothing is ever executed
(OSWorld runs the text as Python; here an import, a loop or a variable is an error that says so). Each
supported function is bound to its pyautogui signature, so positional and keyword forms both work. Calls
that have no faithful single-step equivalent (``dragTo`` from wherever the pointer is, ``keyDown``) are
refused with a hint naming the action to use instead.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from weavegym.core.errors import InvalidActionError

# OSWorld's special answers, written bare.
SPECIAL_WORDS = {"WAIT": ("wait", {}), "DONE": ("done", {}), "FAIL": ("fail", {})}
# pyautogui's key names that differ from ours (the rest, like 'ctrl', 'enter' or 'f5', are the same).
_KEY_NAMES = {"command": "super", "option": "alt", "winleft": "super", "winright": "super",
              "ctrlleft": "ctrl", "ctrlright": "ctrl", "shiftleft": "shift", "shiftright": "shift",
              "altleft": "alt", "altright": "alt", "pgup": "pageup", "pgdn": "pagedown", "\n": "enter",
              "\t": "tab", " ": "space"}
_UNSUPPORTED = {
    "dragTo": "it drags from wherever the pointer is; use drag(x, y, to_x, to_y)",
    "dragRel": "it drags from wherever the pointer is; use drag(x, y, to_x, to_y)",
    "moveRel": "relative moves need the pointer's position; use move(x, y)",
    "keyDown": "held keys are not an action here; use key('ctrl+s') for a combo",
    "keyUp": "held keys are not an action here; use key('ctrl+s') for a combo",
    "tripleClick": "use click(...) three times, or key('ctrl+a') to select a line's text",
    "screenshot": "every step already returns the screen",
}

Handler = Callable[[dict[str, Any]], tuple[str, dict[str, Any]]]


def is_pyautogui_text(text: str) -> bool:
    """Whether ``text`` is written in OSWorld's pyautogui style rather than as one of our calls."""
    source = text.strip()
    return source in SPECIAL_WORDS or source.startswith(("pyautogui.", "time.sleep("))


def translate(text: str) -> tuple[str, dict[str, Any]]:
    """``(kind, fields)`` for one pyautogui-style call; InvalidActionError for anything else.

    The caller has capped the text's length and token count already (action_text.parse_call's limits).
    """
    source = text.strip()
    if source in SPECIAL_WORDS:
        kind, values = SPECIAL_WORDS[source]
        return kind, dict(values)
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise InvalidActionError("a pyautogui action must be one call such as pyautogui.click(640, 360) "
                                 "(statements, imports and several calls are not run)") from None
    call = tree.body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name) and call.func.value.id in ("pyautogui", "time")):
        raise InvalidActionError("a pyautogui action must be one call such as pyautogui.click(640, 360)")
    module, name = call.func.value.id, call.func.attr
    function = "sleep" if module == "time" and name == "sleep" else name if module == "pyautogui" else ""
    if function in _UNSUPPORTED:
        raise InvalidActionError(f"pyautogui.{function} is not supported: {_UNSUPPORTED[function]}")
    if function not in _SIGNATURES:
        raise InvalidActionError(f"{module}.{name} is not supported; supported: "
                                 f"{', '.join('pyautogui.' + f for f in _SIGNATURES if f != 'sleep')}, time.sleep, "
                                 f"and the words {', '.join(SPECIAL_WORDS)}")
    params, handler = _SIGNATURES[function]
    return handler(_bind(function, params, call))


def _literal(node: ast.expr, function: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise InvalidActionError(f"pyautogui.{function}: arguments must be literals (numbers, strings, lists); "
                                 f"got {ast.unparse(node)[:60]!r}") from None


def _bind(function: str, params: Sequence[str], call: ast.Call) -> dict[str, Any]:
    """pyautogui's parameters by name, from positional and keyword literals (``*keys`` for hotkey)."""
    if params and params[0].startswith("*"):
        if call.keywords:
            raise InvalidActionError(f"pyautogui.{function} takes key names only, as in "
                                     "pyautogui.hotkey('ctrl', 's')")
        return {params[0][1:]: [_literal(arg, function) for arg in call.args]}
    if len(call.args) > len(params):
        raise InvalidActionError(f"pyautogui.{function} takes at most {len(params)} positional arguments "
                                 f"({', '.join(params)}); got {len(call.args)}")
    bound = {param: _literal(arg, function) for param, arg in zip(params, call.args, strict=False)}
    for keyword in call.keywords:
        if keyword.arg is None or keyword.arg not in params:
            raise InvalidActionError(f"pyautogui.{function} has no argument {keyword.arg!r}; it takes "
                                     f"{', '.join(params)}")
        if keyword.arg in bound:
            raise InvalidActionError(f"pyautogui.{function} got {keyword.arg!r} twice")
        bound[keyword.arg] = _literal(keyword.value, function)
    return bound


def _point(function: str, args: Mapping[str, Any], *, required: bool = True) -> dict[str, Any]:
    x, y = args.get("x"), args.get("y")
    if isinstance(x, (tuple, list)) and y is None and len(x) == 2:  # pyautogui.click((640, 360))
        x, y = x
    if x is None and y is None:
        if required:
            raise InvalidActionError(f"pyautogui.{function} needs x and y here (there is no 'current position' "
                                     "an action can rely on)")
        return {}
    if x is None or y is None:
        raise InvalidActionError(f"pyautogui.{function} needs both x and y")
    return {"x": x, "y": y}


def _key_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidActionError(f"a key name must be a non-empty string, got {name!r}")
    return _KEY_NAMES.get(name, _KEY_NAMES.get(name.lower(), name))


def _click(args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    clicks = args.get("clicks", 1)
    if clicks not in (1, 2):
        raise InvalidActionError(f"pyautogui.click: clicks={clicks!r} is not supported (1, or 2 for a double click)")
    return ("click" if clicks == 1 else "double_click"), {**_point("click", args),
                                                          "button": args.get("button", "left")}


def _keys(function: str, keys: object) -> tuple[str, dict[str, Any]]:
    names = [keys] if isinstance(keys, str) else keys
    if not isinstance(names, list) or len(names) != 1:
        raise InvalidActionError(f"pyautogui.{function}: one key per step here (a list of several is several "
                                 "steps); for a combo use pyautogui.hotkey('ctrl', 's')")
    return "key", {"keys": _key_name(names[0])}


def _press(args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if args.get("presses", 1) != 1:
        raise InvalidActionError("pyautogui.press: presses > 1 is several steps here; send one press per step")
    return _keys("press", args.get("keys"))


def _write(function: str) -> Handler:
    def handler(args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        message = args.get("message")
        if isinstance(message, list):
            return _keys(function, message)
        return "type", {"text": message}
    return handler


def _scroll(vertical: bool) -> Handler:
    def handler(args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        clicks = args.get("clicks")
        if not isinstance(clicks, int) or isinstance(clicks, bool):
            raise InvalidActionError(f"pyautogui scroll: clicks must be an integer, got {clicks!r}")
        # pyautogui: positive scrolls up (and right); ours: dy > 0 scrolls down.
        amount = {"dy": -clicks} if vertical else {"dx": clicks}
        return "scroll", {**amount, **_point("scroll", args, required=False)}
    return handler


def _mouse(kind: str) -> Handler:
    def handler(args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return kind, {**_point(kind, args, required=False), "button": args.get("button", "left")}
    return handler


_SIGNATURES: dict[str, tuple[tuple[str, ...], Handler]] = {
    "click": (("x", "y", "clicks", "interval", "button", "duration"), _click),
    "leftClick": (("x", "y", "interval", "duration"), lambda a: ("click", _point("leftClick", a))),
    "doubleClick": (("x", "y", "interval", "button", "duration"),
                    lambda a: ("double_click", {**_point("doubleClick", a), "button": a.get("button", "left")})),
    "rightClick": (("x", "y", "interval", "duration"), lambda a: ("right_click", _point("rightClick", a))),
    "moveTo": (("x", "y", "duration"), lambda a: ("move", _point("moveTo", a))),
    "mouseDown": (("x", "y", "button", "duration"), _mouse("mouse_down")),
    "mouseUp": (("x", "y", "button", "duration"), _mouse("mouse_up")),
    "scroll": (("clicks", "x", "y"), _scroll(vertical=True)),
    "vscroll": (("clicks", "x", "y"), _scroll(vertical=True)),
    "hscroll": (("clicks", "x", "y"), _scroll(vertical=False)),
    "write": (("message", "interval"), _write("write")),
    "typewrite": (("message", "interval"), _write("typewrite")),
    "press": (("keys", "presses", "interval"), _press),
    "hotkey": (("*keys",), lambda a: ("key", {"keys": "+".join(_key_name(k) for k in a["keys"])})),
    "sleep": (("seconds",), lambda a: ("wait", {"seconds": a.get("seconds", 1.0)})),
}
