"""The serialised forms of an action, and the words that describe actions to agents.

Agents (and people) write actions as one Python-looking call, ``click(100, 200, button="right")``. We parse it
with :mod:`ast` and evaluate only literal arguments, so the text can never run code, and we format it back in
the same syntax so that ``parse_call(format_call(...))`` round-trips exactly. LLM agents send OpenAI-style tool
calls instead, whose name and JSON arguments are unpacked here too. Validating the values is actions.py's job.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from collections.abc import Mapping, Sequence
from typing import Any

from weavegym.core.errors import InvalidActionError

# Errors the parser and literal_eval raise on hostile input (deep nesting, huge numbers, NUL bytes, …);
# each one is the agent's fault, so each becomes an InvalidActionError.
_PARSE_ERRORS = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, OverflowError)

_EXAMPLE = "click(100, 200)"
_PREFIX = re.compile("[A-Za-z]*")
_FSTRING_START = getattr(tokenize, "FSTRING_START", -1)  # Python 3.12+ tokenizes f-strings piecewise


def parse_call(
    text: str, max_chars: int, names: Sequence[str] | None = None, max_tokens: int = 200
) -> tuple[str, list[object], dict[str, object]]:
    """Split ``name(arg, ..., key=value)`` into its name, positional and keyword literals.

    Parsing cost grows with the number of syntax nodes, not with the length of a string literal, so besides the
    plain ``max_chars`` cap (checked first, so a megabyte of text fails at once) the number of tokens (a string
    literal is one) is capped at ``max_tokens`` before :func:`ast.parse` sees the text. That lets a long but
    valid ``shell("...")`` through while ``click([1, 1, 1, ...])`` fails fast. ``names`` are the accepted names.
    """
    source = check_text_size(text, max_chars, max_tokens)
    if source.isidentifier():  # a bare name like `done` means a call without arguments
        _check_name(source, names)
        return source, [], {}
    try:
        tree = ast.parse(source, mode="eval")
    except _PARSE_ERRORS as exc:
        raise InvalidActionError(
            f"could not parse action text ({_reason(exc)}); expected one call such as {_EXAMPLE}"
        ) from None
    call = tree.body
    if not isinstance(call, ast.Call):
        raise InvalidActionError(f"action text must be a single call such as {_EXAMPLE}, got a {type(call).__name__}")
    if not isinstance(call.func, ast.Name):
        raise InvalidActionError(
            f"the action must be called by its bare name, as in {_EXAMPLE}; got {_snippet(call.func)}"
        )
    name = call.func.id
    _check_name(name, names)
    positional: list[object] = []
    for index, node in enumerate(call.args, start=1):
        if isinstance(node, ast.Starred):
            raise InvalidActionError(f"{name}(): *args is not allowed; write each argument out")
        positional.append(_literal(node, f"argument {index} of {name}()"))
    keywords: dict[str, object] = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise InvalidActionError(f"{name}(): **kwargs is not allowed; write each keyword argument out")
        if kw.arg in keywords:  # the parser already refuses this; kept so the contract doesn't depend on it
            raise InvalidActionError(f"{name}(): keyword argument {kw.arg!r} is given twice")
        keywords[kw.arg] = _literal(kw.value, f"argument {kw.arg!r} of {name}()")
    return name, positional, keywords


def tool_call_parts(raw: object) -> tuple[object, object] | None:
    """(name, arguments) of an OpenAI-style tool call, or None if ``raw`` is not shaped like one.

    Accepts ``{"type": "function", "function": {"name", "arguments"}}``, ``{"name", "arguments"}`` and, duck-typed
    so that the openai package is not needed, SDK objects with ``.function.name`` or ``.name``.
    """
    if isinstance(raw, Mapping):
        if "function" in raw:
            function = raw["function"]
            if not isinstance(function, Mapping):
                raise InvalidActionError(f"tool call 'function' must be an object with name and arguments, "
                                         f"got {type(function).__name__}")
            function = read_mapping(function, "tool call function")
            return function.get("name"), function.get("arguments")
        return (raw["name"], raw["arguments"]) if "name" in raw and "arguments" in raw else None
    try:
        target = getattr(raw, "function", None)
        target = raw if target is None else target
        if hasattr(target, "name") and hasattr(target, "arguments"):
            return target.name, target.arguments
    except Exception:  # a property that raises makes this just "not a tool call"
        return None
    return None


def decode_arguments(name: str, arguments: object, max_chars: int) -> dict[object, object]:
    """Tool-call arguments as a dict: a JSON object string, a mapping, or nothing at all (no arguments)."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if isinstance(arguments, Mapping):
        return read_mapping(arguments, "tool call arguments")
    if not isinstance(arguments, str):
        raise InvalidActionError(f"{name}: tool call arguments must be a JSON object string or a dict, "
                                 f"got {type(arguments).__name__}")
    if len(arguments) > max_chars:
        raise InvalidActionError(f"{name}: tool call arguments are {len(arguments)} characters long; "
                                 f"the limit is {max_chars}")
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError) as exc:
        raise InvalidActionError(f"{name}: tool call arguments are not valid JSON ({_reason(exc)})") from None
    if not isinstance(parsed, dict):
        raise InvalidActionError(f"{name}: tool call arguments must be a JSON object, got {type(parsed).__name__}")
    return parsed


def read_mapping(raw: Mapping[Any, Any], what: str) -> dict[object, object]:
    """Copy a mapping into a plain dict, so a misbehaving Mapping cannot raise from deep inside validation."""
    try:
        return dict(raw.items())
    except Exception as exc:  # any failure of a foreign object is a bad action
        raise InvalidActionError(f"could not read the {what} mapping ({type(exc).__name__})") from None


def format_call(name: str, positional: Sequence[object] = (), keywords: Mapping[str, object] | None = None) -> str:
    """Write a call whose every argument is a literal that :func:`ast.literal_eval` reads back unchanged."""
    parts = [format_literal(value) for value in positional]
    parts += [f"{key}={format_literal(value)}" for key, value in (keywords or {}).items()]
    return f"{name}({', '.join(parts)})"


def format_literal(value: object) -> str:
    """Python literal for ``value``; strings use double quotes because that is what agents usually write."""
    if isinstance(value, str):
        return _quote(value)
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    raise TypeError(f"cannot format {type(value).__name__} as an action argument")


def _quote(text: str) -> str:
    """Double-quoted Python string literal; non-printable characters use the same escapes as ``repr``."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1])  # e.g. \n, \x0b, \u2028: repr never quotes with " for these
    return '"' + "".join(out) + '"'


def check_text_size(text: str, max_chars: int, max_tokens: int = 200) -> str:
    """``text`` stripped, once it is within ``max_chars`` and (unless a bare name) ``max_tokens``.

    Every text form of an action (ours, OSWorld's pyautogui calls) passes here before :mod:`ast` sees it.
    """
    if len(text) > max_chars:
        raise InvalidActionError(f"action text is {len(text)} characters long; the limit is {max_chars}")
    source = text.strip()
    if not source:
        raise InvalidActionError(f"action text is empty; expected one call such as {_EXAMPLE}")
    if not source.isidentifier():
        _check_tokens(source, max_tokens)
    return source


def _check_tokens(source: str, max_tokens: int) -> None:
    """Refuse texts with more syntax than any action needs, and f-strings (their braces hide expressions)."""
    count = 0
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    while True:
        try:
            token = next(tokens, None)
        except (tokenize.TokenError, *_PARSE_ERRORS):
            return  # leave the verdict (and its better message) to ast.parse
        if token is None:
            return
        if token.type == _FSTRING_START or (token.type == tokenize.STRING and "f" in _prefix(token.string)):
            raise InvalidActionError("f-strings are not literals; write a plain string, as in shell(\"ls -la\")")
        count += 1
        if count > max_tokens:
            raise InvalidActionError(f"action text has more than {max_tokens} tokens; expected one call "
                                     f"with literal arguments, such as {_EXAMPLE}")


def _prefix(literal: str) -> str:
    """String prefix letters such as ``rb`` or ``F``, lower-cased."""
    match = _PREFIX.match(literal)
    return match.group().lower() if match else ""


def _literal(node: ast.expr, what: str) -> object:
    try:
        return ast.literal_eval(node)
    except _PARSE_ERRORS:  # literal_eval's own message names an AST class, which helps nobody
        raise InvalidActionError(
            f"{what} must be a literal (number, string, True, False or None), got {_snippet(node)}"
        ) from None


def describe(value: object, limit: int = 60) -> str:
    """Bounded repr for messages; never raises (huge ints and hostile __repr__ included)."""
    try:
        text = repr(value)
    except Exception:  # only decorates an error message
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_field(name: str, width: int, height: int, default_timeout: float, *, optional_xy: bool = False) -> str:
    """What an LLM reads about one tool parameter."""
    text = {
        "x": "Pixels from the left edge of the {w}x{h} screen.",
        "to_x": "Pixels from the left edge of the {w}x{h} screen where the drag ends.",
        "y": "Pixels from the top edge of the {w}x{h} screen.",
        "to_y": "Pixels from the top edge of the {w}x{h} screen where the drag ends.",
        "button": "Mouse button.",
        "dx": "Wheel notches to scroll right (negative: left).",
        "dy": "Wheel notches to scroll down (negative: up).",
        "text": "Text to type as keystrokes; a newline presses Enter.",
        "keys": "One key combination joined with '+', e.g. 'ctrl+s', 'Return' or 'alt+F4'.",
        "command": "Bash command line.",
        "code": "Python source code.",
        "seconds": "Seconds to wait.",
        "timeout": "Seconds before the call is killed (default {t:g}).",
        "reason": "Why the task cannot be done: name what is missing or broken.",
        "answer": "The answer, if the task asks for one (plain text; <answer>...</answer> tags are honoured).",
    }[name].format(w=width, h=height, t=default_timeout)
    if optional_xy and name == "x":
        text += " Omit x and y to use the current pointer position."
    return text


def _check_name(name: str, names: Sequence[str] | None) -> None:
    if names is not None and name not in names:
        raise InvalidActionError(f"unknown action {name[:40]!r}; expected one of: {', '.join(names)}")


def _snippet(node: ast.AST) -> str:
    """A short source excerpt for messages; never raises, because it only decorates an error."""
    try:
        text = ast.unparse(node)
    except Exception:
        text = type(node).__name__
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError | MemoryError):
        return "too deeply nested"
    if isinstance(exc, SyntaxError) and exc.msg:
        text = f"{exc.msg} at line {exc.lineno}, column {exc.offset}"
    else:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 100 else text[:97] + "..."
