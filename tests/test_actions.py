"""parse_action: every accepted form maps onto one Action, and every bad input fails with InvalidActionError only."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weavegym.core.errors import InvalidActionError
from weavegym.envs.actions import (
    ACTION_SPACE_FIELDS,
    BUTTONS,
    CLI_KINDS,
    CONTROL_KINDS,
    ENDING_KINDS,
    GUI_KINDS,
    KINDS,
    Action,
    ActionLimits,
    channel_of,
    kind_fields,
    parse_action,
    tool_schema,
)
from weavegym.envs.space_layout import action_space
from weavegym.envs.vocabulary import REQUIRED, VOCABULARY

SCREEN = (1280, 720)


def _tool(name: str, arguments: object) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


VALID: list[tuple[object, Action]] = [
    ("click(100, 200)", Action("click", x=100, y=200)),
    ('click(x=100, y=200, button="right")', Action("click", x=100, y=200, button="right")),
    ('  shell("ls -la")\n', Action("shell", command="ls -la")),
    ("type('a \"quoted\" text')", Action("type", text='a "quoted" text')),
    ('type("héllo\\n")', Action("type", text="héllo\n")),
    ('key("ctrl+s")', Action("key", keys="ctrl+s")),
    ("done()", Action("done")),
    ("done", Action("done")),
    ("drag(1, 2, 30, 40)", Action("drag", x=1, y=2, to_x=30, to_y=40)),
    ("scroll(dy=-3)", Action("scroll", dy=-3)),
    ("scroll(2, 1, 5, 6)", Action("scroll", dy=2, dx=1, x=5, y=6)),
    ("wait(0.5)", Action("wait", seconds=0.5)),
    ("wait", Action("wait", seconds=1.0)),
    ('python("print(1)", timeout=5)', Action("python", code="print(1)", timeout=5.0)),
    ('fail("no such file")', Action("fail", reason="no such file")),
    ("mouse_down()", Action("mouse_down")),
    ('mouse_up(3, 4, "middle")', Action("mouse_up", x=3, y=4, button="middle")),
    ("right_click(1279, 719)", Action("right_click", x=1279, y=719)),
    ("click(100.0, 200.4)", Action("click", x=100, y=200)),
    ('shell(text="ls")', Action("shell", command="ls")),
    ({"kind": "click", "x": 1, "y": 2}, Action("click", x=1, y=2)),
    ({"kind": "double_click", "x": 1.0, "y": 2, "button": "middle"}, Action("double_click", x=1, y=2, button="middle")),
    ({"kind": "shell", "text": "ls"}, Action("shell", command="ls")),
    ({"kind": "python", "text": "print(1)"}, Action("python", code="print(1)")),
    ({"kind": "key", "text": "Return"}, Action("key", keys="Return")),
    ({"kind": "shell", "command": "ls", "text": "ignored"}, Action("shell", command="ls")),
    ({"kind": "wait", "seconds": 2}, Action("wait", seconds=2.0)),
    ({"kind": "click", "x": 1, "y": 2, "text": "tolerated", "dx": 3}, Action("click", x=1, y=2)),
    ({"kind": "click", "x": 1, "y": 2, "button": 2}, Action("click", x=1, y=2, button="right")),
    ({"kind": np.int64(KINDS.index("move")), "x": np.int64(5), "y": np.array(6)}, Action("move", x=5, y=6)),
    ({"kind": "fail"}, Action("fail")),
    (_tool("click", '{"x": 1, "y": 2}'), Action("click", x=1, y=2)),
    (_tool("shell", {"command": "ls", "timeout": 10}), Action("shell", command="ls", timeout=10.0)),
    (_tool("done", ""), Action("done")),
    (_tool("done", None), Action("done")),
    ({"name": "key", "arguments": '{"keys": "alt+F4"}', "id": "call_1"}, Action("key", keys="alt+F4")),
    (
        SimpleNamespace(id="c1", function=SimpleNamespace(name="type", arguments='{"text": "hi"}')),
        Action("type", text="hi"),
    ),
    (SimpleNamespace(name="scroll", arguments={"dx": 2}), Action("scroll", dx=2)),
    (Action("move", x=1, y=2, text="irrelevant", dx=4), Action("move", x=1, y=2)),
]


@pytest.mark.parametrize(("raw", "expected"), VALID, ids=[f"valid{i}" for i in range(len(VALID))])
def test_valid_forms_map_to_the_expected_action(raw: object, expected: Action) -> None:
    assert parse_action(raw, SCREEN) == expected


class _BrokenMapping(Mapping[str, object]):
    def __getitem__(self, key: str) -> object:
        raise RuntimeError("boom")

    def __iter__(self) -> Iterator[str]:
        return iter(["kind"])

    def __len__(self) -> int:
        return 1


class _Exploding:
    def __getattr__(self, name: str) -> object:
        raise RuntimeError(name)

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


INVALID: list[tuple[object, str]] = [
    ("jump(1, 2)", "unknown action 'jump'"),
    ({"kind": "jump"}, "unknown action kind 'jump'"),
    ({"kind": 99}, "kind index 99 is out of range"),
    ({"kind": True}, "kind must be an action name"),
    ({"x": 1}, "no 'kind' key"),
    (_tool("jump", "{}"), "unknown tool 'jump'"),
    ("click(1500, 3)", "x=1500 is off the 1280x720 screen"),
    ("click(3, 720)", "y=720 is off the 1280x720 screen"),
    ("click(-1, 3)", "x=-1 is off the 1280x720 screen"),
    ({"kind": "click", "x": 10**5000, "y": 1}, "is off the 1280x720 screen"),
    ("click(1e300, 3)", "is off the 1280x720 screen"),
    ("drag(1, 2, 3, 900)", "to_y=900 is off"),
    ("click(True, 2)", "x must be an integer, got bool"),
    ('click("1", 2)', "x must be an integer, got str"),
    ("click(None, 2)", "x must be an integer, got None"),
    ("click([1], 2)", "x must be an integer, got list"),
    ({"kind": "click", "x": math.nan, "y": 2}, "x must be a finite integer"),
    ({"kind": "click", "x": np.array([1, 2]), "y": 2}, "must be a single value"),
    ({"kind": "click", "x": _Exploding(), "y": 2}, "x must be an integer, got _Exploding"),
    ("click(1, 2, button=2)", "button must be one of 'left', 'middle', 'right'"),
    ('click(1, 2, button="top")', "button must be one of"),
    ("click(1)", "missing required field(s) y"),
    ("drag(1, 2)", "missing required field(s) to_x, to_y"),
    ("click(1, 2, 'left', 4)", "at most 3 positional"),
    ("click(1, 2, z=3)", "unknown argument 'z'"),
    ("click(1, x=1)", "multiple values for 'x'"),
    ("click(1, 2", "could not parse action text"),
    ("click(1, 2); done()", "could not parse action text"),
    ("1 + 1", "single call"),
    ("", "action text is empty"),
    ('__import__("os").system("x")', "bare name"),
    ('os.system("x")', "bare name"),
    ('shell(__import__("os").getcwd())', "must be a literal"),
    ('shell(f"{1}")', "f-strings are not literals"),
    ("click(*a)", "*args is not allowed"),
    ("click(**a)", "**kwargs is not allowed"),
    ("click(" + "(" * 10_000 + ")" * 10_000 + ")", "action text"),
    ('type("a\\x00b")', "NUL character"),
    ({"kind": "type", "text": "a\x00b"}, "NUL character"),
    ({"kind": "type", "text": "\ud800"}, "lone surrogate (U+D800)"),
    ('shell("\\udfff")', "lone surrogate"),
    ('type("")', "text is empty"),
    ({"kind": "type", "text": "x" * 10_001}, "the limit is 10000"),
    ('shell("   ")', "command is blank"),
    ('key("ctrl s")', "without whitespace"),
    ({"kind": "key", "keys": "a" * 65}, "the limit is 64"),
    ("wait(0)", "out of range"),
    ("wait(61)", "out of range"),
    ({"kind": "wait", "seconds": float("inf")}, "out of range"),
    ({"kind": "wait", "seconds": 10**400}, "out of range"),
    ('wait("1")', "must be a number of seconds, got str"),
    ('shell("ls", timeout=601)', "timeout=601 is out of range"),
    ("scroll()", "scroll needs dx or dy"),
    ("scroll(dy=51)", "dy=51 is out of range"),
    ("mouse_down(x=3)", "both x and y, or neither"),
    ({"kind": "click", "x": 1, "y": 2, "colour": "red"}, "unknown field 'colour' for click; accepted fields: x, y"),
    ({"kind": "click", "x": 1, "y": 2, 7: "x"}, "unknown field 7"),
    (_tool("click", '{"x": 1, "y": 2, "text": "no"}'), "unknown field 'text' for click"),
    (_tool("click", "{x: 1}"), "not valid JSON"),
    (_tool("click", "[1, 2]"), "must be a JSON object, got list"),
    (_tool("click", "[" * 100_000), "not valid JSON"),
    (_tool("click", 42), "arguments must be a JSON object string or a dict"),
    (_tool(None, "{}"), "tool call name must be a string"),  # type: ignore[arg-type]
    ({"function": "click"}, "'function' must be an object"),
    (SimpleNamespace(function=SimpleNamespace(name="click", arguments="{oops")), "not valid JSON"),
    (_BrokenMapping(), "could not read the action mapping"),
    (Action("teleport"), "unknown action kind 'teleport'"),
    (Action("click", x=5000, y=1), "x=5000 is off"),
    (42, "expected a dict"),
    (b"click(1, 2)", "got bytes"),
    (["click", 1, 2], "got list"),
    (None, "got NoneType"),
    (_Exploding(), "got _Exploding"),
]


@pytest.mark.parametrize(("raw", "message"), INVALID, ids=[f"invalid{i}" for i in range(len(INVALID))])
def test_bad_inputs_raise_invalid_action_error_with_a_specific_message(raw: object, message: str) -> None:
    with pytest.raises(InvalidActionError) as info:
        parse_action(raw, SCREEN)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "x" * 2**20,  # 1 MB of anything is refused on its length
        'shell("' + "a" * 2**20 + '")',
        "click([" + "1," * 450_000 + "])",  # under the length cap, but far too much syntax for an action
        "click(" + "-" * 900_000 + "1, 2)",
    ],
    ids=["1MB-junk", "1MB-string", "900k-list", "900k-unary"],
)
def test_huge_text_is_rejected_fast(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(InvalidActionError, match=r"characters long|tokens"):
        parse_action(text, SCREEN)
    assert time.perf_counter() - start < 0.5


def test_long_but_valid_code_round_trips_through_text() -> None:
    """The text cap must leave room for escapes: a max-size command full of newlines doubles in length."""
    limits = ActionLimits()
    action = Action("python", code="\n" * (limits.max_code_chars - 1) + "x")
    assert len(action.to_text()) > limits.max_code_chars + 1000
    assert parse_action(action.to_text(), SCREEN) == action
    with pytest.raises(InvalidActionError, match="the limit is 100000"):
        parse_action(Action("python", code="x" * (limits.max_code_chars + 1)), SCREEN)


def test_a_smaller_screen_moves_the_bounds() -> None:
    assert parse_action("click(639, 479)", (640, 480)) == Action("click", x=639, y=479)
    with pytest.raises(InvalidActionError, match="x=640 is off the 640x480 screen"):
        parse_action("click(640, 0)", (640, 480))


def test_text_form_examples() -> None:
    assert Action("click", x=100, y=200).to_text() == "click(100, 200)"
    assert Action("click", x=100, y=200, button="right").to_text() == 'click(100, 200, button="right")'
    assert Action("shell", command="ls -la").to_text() == 'shell("ls -la")'
    assert Action("type", text="héllo\n").to_text() == 'type("héllo\\n")'
    assert Action("scroll", dy=-3).to_text() == "scroll(dy=-3)"
    assert Action("wait", seconds=0.5).to_text() == "wait(0.5)"
    assert Action("done").to_text() == "done()"
    assert Action("shell", command="make", timeout=5.0).to_text() == 'shell("make", timeout=5.0)'


def test_kind_groups_and_channels() -> None:
    # The Discrete index of the action space: kinds are appended, never reordered.
    assert KINDS[:15] == ("move", "click", "double_click", "right_click", "drag", "scroll", "type", "key",
                          "mouse_down", "mouse_up", "wait", "shell", "python", "done", "fail")
    assert KINDS[:10] == GUI_KINDS and CLI_KINDS == ("shell", "python") and ENDING_KINDS == ("done", "fail")
    assert set(GUI_KINDS) | set(CLI_KINDS) | set(CONTROL_KINDS) == set(KINDS)
    assert [channel_of(k) for k in ("drag", "python", "wait")] == ["gui", "cli", "control"]
    assert Action("shell", command="ls").channel == "cli"
    assert kind_fields("drag") == ("x", "y", "to_x", "to_y", "button")
    with pytest.raises(InvalidActionError, match="unknown action kind"):
        channel_of("teleport")


def test_to_dict_is_plain_json_and_holds_only_the_kinds_fields() -> None:
    action = parse_action({"kind": "wait", "seconds": np.array(0.25, dtype=np.float32)}, SCREEN)
    assert action.to_dict() == {"kind": "wait", "seconds": 0.25} and type(action.seconds) is float
    assert json.loads(json.dumps(Action("scroll", dy=1).to_dict())) == {"kind": "scroll", "dy": 1, "dx": 0}


# ---- properties ---------------------------------------------------------------------------------------------------

_chars = st.characters(codec="utf-8", exclude_characters="\x00")
_texts = st.text(_chars, max_size=40)
_xs, _ys = st.integers(0, SCREEN[0] - 1), st.integers(0, SCREEN[1] - 1)
_buttons = st.sampled_from(BUTTONS)
_opt_xy = st.one_of(st.tuples(st.none(), st.none()), st.tuples(_xs, _ys))
_timeouts = st.none() | st.floats(0, 600, exclude_min=True)
_keys = st.text(_chars, min_size=1, max_size=64).filter(lambda s: not any(c.isspace() for c in s))


def _with_xy(kind: str, **kw: Any) -> st.SearchStrategy[Action]:
    return st.builds(lambda xy, **rest: Action(kind, x=xy[0], y=xy[1], **rest), _opt_xy, **kw)


ACTIONS: st.SearchStrategy[Action] = st.one_of(
    st.builds(Action, st.just("move"), _xs, _ys),
    st.builds(Action, st.sampled_from(["click", "double_click"]), _xs, _ys, button=_buttons),
    st.builds(Action, st.just("right_click"), _xs, _ys),
    st.builds(Action, st.just("drag"), _xs, _ys, _xs, _ys, button=_buttons),
    _with_xy("scroll", dx=st.integers(-50, 50), dy=st.integers(-50, 50)).filter(lambda a: a.dx or a.dy),
    st.builds(Action, st.just("type"), text=st.text(_chars, min_size=1, max_size=40)),
    st.builds(Action, st.just("key"), keys=_keys),
    _with_xy("mouse_down", button=_buttons),
    _with_xy("mouse_up", button=_buttons),
    st.builds(Action, st.just("wait"), seconds=st.floats(0, 60, exclude_min=True)),
    st.builds(Action, st.just("shell"), command=_texts.filter(str.strip), timeout=_timeouts),
    st.builds(Action, st.just("python"), code=_texts.filter(str.strip), timeout=_timeouts),
    st.just(Action("done")),
    st.builds(Action, st.just("fail"), reason=_texts),
)


@given(ACTIONS)
@settings(max_examples=400, deadline=None, database=None)
def test_every_valid_action_round_trips_through_every_form(action: Action) -> None:
    assert parse_action(action, SCREEN) == action
    assert parse_action(action.to_text(), SCREEN) == action
    data = action.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert parse_action(data, SCREEN) == action
    args = {k: v for k, v in data.items() if k != "kind"}
    assert parse_action(_tool(action.kind, json.dumps(args)), SCREEN) == action
    assert parse_action({"name": action.kind, "arguments": args}, SCREEN) == action
    call = SimpleNamespace(function=SimpleNamespace(name=action.kind, arguments=json.dumps(args, ensure_ascii=False)))
    assert parse_action(call, SCREEN) == action


def _parse_or_reject(raw: object) -> None:
    try:
        result = parse_action(raw, SCREEN)
    except InvalidActionError as exc:
        assert str(exc)
    else:
        assert isinstance(result, Action) and result.kind in KINDS


_call_like = st.builds(lambda name, body: f"{name}({body})", st.sampled_from([*KINDS, "foo"]), st.text(max_size=30))


@given(st.one_of(st.text(), _call_like, st.from_regex(r"\A[a-z_]+\((-?\d+(\.\d*)?|\"[^\"]*\"|, ?|\w+=)*\)\Z")))
@settings(max_examples=400, deadline=None, database=None)
def test_arbitrary_text_parses_or_raises_invalid_action_error(text: str) -> None:
    _parse_or_reject(text)


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8), st.integers(-10, 2000),
    st.builds(np.int64, st.integers(-(2**63), 2**63 - 1)), st.builds(np.float32, st.floats(width=32)),
    st.builds(np.array, st.integers(-5, 2000)), st.just(np.zeros(3)),
)  # fmt: skip
_json_values = st.recursive(
    _scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3), max_leaves=8
)
_field_names = st.sampled_from(sorted({f for k in KINDS for f in kind_fields(k)} | ACTION_SPACE_FIELDS | {"foo"}))
_action_dicts = st.builds(
    lambda kind, rest: {"kind": kind, **rest},
    st.sampled_from(KINDS) | st.integers(-2, 20) | _json_values,
    st.dictionaries(_field_names | st.text(max_size=5), _json_values, max_size=6),
)
def _json_or_repr(data: dict[str, object]) -> str:
    return json.dumps(data, default=repr)


_tool_calls = st.builds(
    lambda name, args: _tool(name, args),
    st.sampled_from(KINDS) | _json_values,
    st.text() | _json_values | st.dictionaries(_field_names, _json_values, max_size=5).map(_json_or_repr),
)


@given(st.one_of(_action_dicts, _tool_calls, st.dictionaries(st.text(max_size=8), _json_values, max_size=4), _scalars))
@settings(max_examples=500, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
def test_arbitrary_json_ish_input_parses_or_raises_invalid_action_error(raw: object) -> None:
    _parse_or_reject(raw)


def test_sampled_space_actions_parse_or_raise_invalid_action_error() -> None:
    space = action_space(SCREEN)
    space.seed(1234)
    kinds = set()
    for _ in range(500):
        sample = space.sample()
        try:
            action = parse_action(sample, SCREEN)
        except InvalidActionError as exc:
            assert "key" in str(exc) or "scroll" in str(exc)  # whitespace in sampled keys, or a 0/0 scroll
            continue
        kinds.add(action.kind)
        if action.kind in ("click", "drag", "mouse_down"):
            assert action.button == BUTTONS[int(sample["button"])]
        if action.kind in ("shell", "python", "key", "type"):
            assert sample["text"] in (action.command, action.code, action.keys, action.text)
        if action.kind == "wait":
            assert type(action.seconds) is float and 0.05 <= action.seconds <= 5.0
        assert json.dumps(action.to_dict())
    assert kinds == set(KINDS)


# ---- tool schema --------------------------------------------------------------------------------------------------


def _conforms(value: object, schema: dict[str, Any]) -> bool:
    """Just enough JSON Schema for our own tool schema: types, bounds, lengths, enums, objects."""
    kind = schema.get("type")
    if kind == "object":
        assert isinstance(value, dict)
        props = schema["properties"]
        return (
            set(schema.get("required", [])) <= set(value)
            and (schema.get("additionalProperties", True) or set(value) <= set(props))
            and all(_conforms(v, props[k]) for k, v in value.items())
        )
    if kind == "integer" and (not isinstance(value, int) or isinstance(value, bool)):
        return False
    if kind == "number" and (not isinstance(value, int | float) or isinstance(value, bool)):
        return False
    if kind == "string" and not isinstance(value, str):
        return False
    if isinstance(value, str):
        ok_len = schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", math.inf)
        return ok_len and value in schema.get("enum", [value])
    assert isinstance(value, int | float)
    return (
        schema.get("minimum", -math.inf) <= value <= schema.get("maximum", math.inf)
        and value > schema.get("exclusiveMinimum", -math.inf)
    )


def test_tool_schema_is_json_and_matches_the_kinds() -> None:
    tools = tool_schema(SCREEN)
    json.loads(json.dumps(tools))
    assert [t["function"]["name"] for t in tools] == list(KINDS)
    for tool in tools:
        assert tool["type"] == "function" and tool["function"]["description"]
        params = tool["function"]["parameters"]
        assert params["additionalProperties"] is False
        assert set(params["properties"]) == set(kind_fields(tool["function"]["name"]))
        assert all(p.get("description") for p in params["properties"].values())
    by_name = {t["function"]["name"]: t["function"] for t in tools}
    assert by_name["click"]["parameters"]["properties"]["x"]["maximum"] == 1279
    assert by_name["click"]["parameters"]["properties"]["button"]["enum"] == list(BUTTONS)
    assert "1280x720" in by_name["click"]["description"]
    assert "persist" in by_name["shell"]["description"] and "scoring" in by_name["done"]["description"]


@given(ACTIONS)
@settings(max_examples=200, deadline=None, database=None)
def test_every_valid_action_conforms_to_the_tool_schema(action: Action) -> None:
    schema = {t["function"]["name"]: t["function"]["parameters"] for t in tool_schema(SCREEN)}[action.kind]
    args = {k: v for k, v in action.to_dict().items() if k != "kind"}
    assert set(schema["required"]) <= set(args) <= set(schema["properties"])
    assert _conforms(args, schema)


def test_tool_schema_rejects_what_parse_action_rejects() -> None:
    schema = {t["function"]["name"]: t["function"]["parameters"] for t in tool_schema((640, 480))}
    assert not _conforms({"x": 640, "y": 0}, schema["click"])
    assert not _conforms({"x": 1}, schema["click"])
    assert not _conforms({"keys": "k" * 65}, schema["key"])
    assert not _conforms({"seconds": 0}, schema["wait"])


def test_every_kind_is_declared_once_and_everything_derives_from_it() -> None:
    """The vocabulary table is the one source: fields, descriptions and the tool schema agree with it."""
    tools = {tool["function"]["name"]: tool["function"] for tool in tool_schema(SCREEN)}
    assert list(tools) == list(KINDS) == list(VOCABULARY)
    for kind, spec in VOCABULARY.items():
        assert kind_fields(kind) == tuple(name for name, _ in spec.fields)
        assert tools[kind]["description"] == spec.describe(*SCREEN) and "{" not in tools[kind]["description"]
        assert tools[kind]["parameters"]["required"] == [n for n, d in spec.fields if d is REQUIRED]
    assert "1280x720 screen" in tools["click"]["description"] and "screen" not in tools["done"]["description"]
    # Aliases come from the declaration: the Gym space's shared `text` field stands in for these.
    assert parse_action({"kind": "key", "text": "ctrl+s"}, SCREEN) == Action("key", keys="ctrl+s")
    assert parse_action('python(text="print(1)")', SCREEN) == Action("python", code="print(1)")


@pytest.mark.parametrize(("text", "expected"), [
    ("pyautogui.click(x=640, y=360)", "click(640, 360)"),
    ("pyautogui.click(640, 360, button='right')", 'click(640, 360, button="right")'),
    ("pyautogui.click((10, 20), clicks=2)", "double_click(10, 20)"),
    ("pyautogui.rightClick(x=1, y=2)", "right_click(1, 2)"),
    ("pyautogui.hotkey('ctrl', 's')", 'key("ctrl+s")'),
    ("pyautogui.hotkey('command', 'shiftleft', 't')", 'key("super+shift+t")'),
    ("pyautogui.press('enter')", 'key("enter")'),
    ("pyautogui.typewrite('héllo 你好')", 'type("héllo 你好")'),
    ("pyautogui.write(['esc'])", 'key("esc")'),
    ("pyautogui.scroll(3)", "scroll(dy=-3)"),  # pyautogui: positive is up; ours: positive is down
    ("pyautogui.scroll(-5, x=10, y=20)", "scroll(dy=5, x=10, y=20)"),
    ("pyautogui.hscroll(2)", "scroll(dx=2)"),
    ("pyautogui.moveTo(3, 4, 0.5)", "move(3, 4)"),
    ("pyautogui.mouseDown(1, 2)", "mouse_down(x=1, y=2)"),
    ("time.sleep(2)", "wait(2.0)"),
    ("WAIT", "wait()"), ("DONE", "done()"), ("FAIL", "fail()"),
])
def test_osworld_pyautogui_calls_map_onto_our_kinds(text: str, expected: str) -> None:
    assert parse_action(text, (1280, 720)).to_text() == expected


@pytest.mark.parametrize(("text", "error"), [
    ("pyautogui.dragTo(100, 200)", "use drag(x, y, to_x, to_y)"),
    ("pyautogui.keyDown('shift')", "held keys are not an action"),
    ("pyautogui.click()", "needs x and y"),
    ("pyautogui.click(x=__import__('os'))", "arguments must be literals"),
    ("pyautogui.click(1, y=2, x=3)", "got 'x' twice"),
    ("pyautogui.click(5000, 5000)", "off the 1280x720 screen"),
    ("pyautogui.press('enter', presses=3)", "several steps"),
    ("pyautogui.typewrite(['a', 'b'])", "one key per step"),
    ("pyautogui.locateOnScreen('x.png')", "is not supported; supported: pyautogui.click"),
    ("pyautogui.click(1, 2); pyautogui.click(3, 4)", "must be one call"),
    ("pyautogui.click(1, 2)" + ".click(1, 2)" * 60, "more than 200 tokens"),
    ("pyautogui.typewrite('" + "x" * 10_000 + "')", "characters long"),
])
def test_unsupported_or_unsafe_pyautogui_text_is_a_clear_error(text: str, error: str) -> None:
    with pytest.raises(InvalidActionError, match=re.escape(error)):
        parse_action(text, (1280, 720), ActionLimits(max_code_chars=2000, max_type_chars=2000))
