"""UnicodeText and the env's spaces work on every Gymnasium path a vector env or wrapper takes."""

from __future__ import annotations

import copy
import pickle
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import Box, Dict, Discrete, Text
from gymnasium.spaces.utils import flatdim, flatten, flatten_space, unflatten
from gymnasium.utils.env_checker import check_space_limit
from gymnasium.utils.passive_env_checker import check_action_space, check_observation_space
from gymnasium.vector.utils import (
    batch_space,
    concatenate,
    create_empty_array,
    create_shared_memory,
    iterate,
    read_from_shared_memory,
    write_to_shared_memory,
)
from gymnasium.wrappers.utils import create_zero_array

from weavegym.core.errors import InvalidActionError
from weavegym.envs.actions import ACTION_SPACE_FIELDS, BUTTONS, KINDS, ActionLimits, parse_action
from weavegym.envs.space_layout import DEFAULT_KEYS, ActionLayout, ObservationLayout, action_space, observation_space
from weavegym.envs.spaces import N_CODE_POINTS, UnicodeText, sanitize_text

SCREEN = (64, 48)
UNICODE = "héllo wörld\n中文 😀 \t\u2028\U0010fffd"


def _obs_space() -> Dict:
    return observation_space(SCREEN, terminal_max_chars=40, instruction_max_chars=20)


@pytest.mark.parametrize("text", ["", "abc", UNICODE, "\n\r\t", "😀" * 40, "\x01\x7f\ufffe"])
def test_unicode_text_contains_any_valid_text(text: str) -> None:
    assert text in UnicodeText(min_length=0, max_length=40)


@pytest.mark.parametrize("value", ["a\x00b", "\ud800", "ok\udfff", "x" * 41, b"abc", None, 3, ["a"], np.array("a")])
def test_unicode_text_rejects_invalid_values(value: object) -> None:
    assert value not in UnicodeText(min_length=0, max_length=40)


def test_min_length_and_constructor_checks() -> None:
    assert "" not in UnicodeText(5)
    with pytest.raises(ValueError):
        UnicodeText(3, min_length=4)
    with pytest.raises(ValueError):
        UnicodeText(3, sample_max_length=-1)


def test_the_lazy_character_tables_behave_like_the_base_class_ones() -> None:
    space = UnicodeText(10)
    assert len(space.character_set) == len(space.character_list) == N_CODE_POINTS
    assert "中" in space.character_set and "\x00" not in space.character_set and "\ud800" not in space.character_set
    assert "ab" not in space.character_set and 5 not in space.character_set
    assert space.character_list[0x1F600] == "😀" and space.character_list[np.int32(65)] == "A"
    assert space.character_index("😀") == 0x1F600 and isinstance(space.character_index("a"), np.int32)
    with pytest.raises(KeyError):
        space.character_index("\x00")
    assert space.characters[0] in space.character_set and space.characters[0xD7FE] == "\ud7ff"
    assert space.characters[0xD7FF] == "\ue000" and space.characters[-1] == "\U0010ffff"


def test_sample_is_short_fast_and_in_the_space() -> None:
    space = UnicodeText(100_000, min_length=2, sample_max_length=24, seed=0)
    samples = [space.sample() for _ in range(300)]
    assert all(s in space and 2 <= len(s) <= 24 for s in samples)
    assert len(set(samples)) > 250
    assert UnicodeText(3, min_length=0, sample_max_length=50, seed=1).sample() in UnicodeText(3, min_length=0)
    assert len(UnicodeText(10, min_length=8, sample_max_length=2, seed=1).sample()) == 8


def test_sample_with_a_mask_uses_only_allowed_valid_code_points() -> None:
    space = UnicodeText(10, seed=3)
    mask = np.zeros(N_CODE_POINTS, dtype=np.int8)
    mask[[0, 0xD800, ord("中"), ord("😀")]] = 1  # NUL and surrogates are never drawn even when allowed
    text = space.sample(mask=(6, mask))
    assert len(text) == 6 and set(text) <= {"中", "😀"}
    assert UnicodeText(5, min_length=0).sample(mask=(None, np.zeros(N_CODE_POINTS, dtype=np.int8))) == ""


def test_equality_repr_and_pickle() -> None:
    space = UnicodeText(50, min_length=1)
    assert space == UnicodeText(50) and space != UnicodeText(51) and space != UnicodeText(50, min_length=0)
    assert space != Text(50)
    assert repr(space) == "UnicodeText(1, 50)"
    data = pickle.dumps(space)
    assert len(data) < 2_000  # no million-character tables travel to vector-env workers
    clone = pickle.loads(data)
    assert clone == space and UNICODE in clone and "\x00" not in clone and clone.sample() in clone
    assert copy.deepcopy(space) == space and space.is_np_flattenable


def test_constructing_many_spaces_is_cheap() -> None:
    start = time.perf_counter()
    spaces = [UnicodeText(1_000_000, min_length=0) for _ in range(100)]
    assert time.perf_counter() - start < 1.0
    assert all(UNICODE in s for s in spaces)


def test_flatten_unflatten_round_trip() -> None:
    space = _obs_space()
    value = space.sample()
    value["terminal"] = UNICODE
    flat = flatten(space, value)
    assert flat.shape == (flatdim(space),) and flat in flatten_space(space)
    back = unflatten(space, flat)
    assert back["terminal"] == UNICODE and back["instruction"] == value["instruction"]
    assert np.array_equal(back["screen"], value["screen"]) and back["exit_code"] == value["exit_code"]


def test_shared_memory_round_trip_for_two_envs() -> None:
    space = _obs_space()
    space.seed(7)
    values = [space.sample(), space.sample()]
    values[0]["terminal"] = UNICODE
    values[1]["terminal"] = ""
    values[1]["instruction"] = "Öffne die Datei 文件 📄"
    memory = create_shared_memory(space, n=2)
    for index, value in enumerate(values):
        write_to_shared_memory(space, index, value, memory)
    read = read_from_shared_memory(space, memory, n=2)
    assert read["terminal"] == (UNICODE, "")
    assert read["instruction"] == (values[0]["instruction"], "Öffne die Datei 文件 📄")
    for index, value in enumerate(values):
        assert np.array_equal(read["screen"][index], value["screen"])
        assert read["exit_code"][index] == value["exit_code"]


def test_batch_concatenate_iterate_and_empty_arrays() -> None:
    space = _obs_space()
    batched = batch_space(space, 2)
    samples = [space.sample(), space.sample()]
    samples[0]["terminal"] = UNICODE
    out = create_empty_array(space, n=2)
    assert out["terminal"] == ("", "")
    joined = concatenate(space, samples, out)
    assert joined in batched and joined["terminal"][0] == UNICODE
    assert [item["terminal"] for item in iterate(batched, joined)] == [s["terminal"] for s in samples]
    text = UnicodeText(10, min_length=3)
    assert all(s in text for s in create_empty_array(text, n=2)) and create_zero_array(text) in text


def test_observation_space_layout_and_samples() -> None:
    space = observation_space((1280, 720))
    assert space["screen"] == Box(0, 255, (720, 1280, 3), np.uint8)
    assert space["terminal"] == UnicodeText(16384, min_length=0)
    assert space["instruction"] == UnicodeText(8192, min_length=0)
    assert space["exit_code"].dtype == np.int64 and space["exit_code"].shape == ()
    assert np.array(-1) in space["exit_code"] and np.array(255) in space["exit_code"]
    small = _obs_space()
    small.seed(0)
    with warnings.catch_warnings():
        # Box(shape=()).sample() returns a numpy scalar, and Box.contains warns before casting it to an array
        warnings.filterwarnings("ignore", message=".*Casting input x to numpy array")
        assert all(small.sample() in small for _ in range(20))


def test_action_space_layout() -> None:
    space = action_space((1280, 720), ActionLimits(max_code_chars=500))
    assert set(space.keys()) == ACTION_SPACE_FIELDS
    assert space["kind"] == Discrete(len(KINDS)) and space["button"] == Discrete(len(BUTTONS))
    assert space["x"] == Discrete(1280) and space["to_y"] == Discrete(720)
    assert space["dx"] == Discrete(21, start=-10)
    assert space["text"] == UnicodeText(500, min_length=1)
    space.seed(0)
    assert all(space.sample() in space for _ in range(50))


def test_gymnasium_checkers_accept_the_spaces() -> None:
    obs, act = _obs_space(), action_space(SCREEN)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_observation_space(obs)
        check_action_space(act)
        check_space_limit(obs, "observation")
        check_space_limit(act, "action")


def test_sanitize_text_makes_any_output_a_member() -> None:
    space = UnicodeText(8, min_length=0)
    cleaned = sanitize_text("a\x00b\ud800c-long-tail", space.max_length)
    assert cleaned == "a\ufffdb\ufffdc-lo" and cleaned in space


class _TextEnv(gym.Env):
    """A VM-free env with the real observation space, whose text changes every step."""

    def __init__(self) -> None:
        self.observation_space = observation_space((64, 48))
        self.action_space = action_space((64, 48))
        self.t = 0

    def _obs(self) -> dict:
        return {"screen": np.full((48, 64, 3), self.t, np.uint8), "terminal": "中😀" * self.t,
                "exit_code": np.array(self.t, dtype=np.int64), "instruction": "Do the thing"}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, self.t >= 3, False, {}


def test_async_vector_env_shared_memory_carries_live_text() -> None:
    """gymnasium reads Text shared memory once (a stale tuple of NULs); UnicodeText must track the workers."""
    envs = gym.vector.AsyncVectorEnv([_TextEnv, _TextEnv], shared_memory=True)
    try:
        obs, _ = envs.reset(seed=[0, 1])
        assert obs["instruction"] == ("Do the thing", "Do the thing") and obs in envs.observation_space
        seen = []
        for _ in range(4):
            obs, *_ = envs.step(envs.action_space.sample())
            assert obs in envs.observation_space
            seen.append(obs["terminal"])
        # t = 1, 2, 3 (terminated), then the autoreset observation
        assert seen == [("中😀",) * 2, ("中😀" * 2,) * 2, ("中😀" * 3,) * 2, ("",) * 2]
    finally:
        envs.close()


# ---- configurable spaces (gym.make's action_kinds=, key_vocabulary=, coordinates=, observation_*=) -------------

GUI_KINDS_NO_TEXT = ("move", "click", "double_click", "right_click", "drag", "scroll", "key", "mouse_down", "mouse_up")


@pytest.mark.parametrize("layout", [
    ActionLayout(SCREEN),
    ActionLayout(SCREEN, kinds=GUI_KINDS_NO_TEXT, coordinates="box"),
    ActionLayout(SCREEN, kinds=("key", "click", "type"), keys=("Return", "ctrl+s", "a")),
    ActionLayout(SCREEN, kinds=("scroll",), coordinates="box"),
], ids=["default", "gui-box", "three-kinds", "scroll-only"])
def test_every_sample_decodes_to_an_accepted_action_of_a_chosen_kind(layout: ActionLayout) -> None:
    """What RL code relies on: ``step(space.sample())`` is never refused for the sample's own values."""
    space = layout.space()
    space.seed(11)
    seen = set()
    for _ in range(3000):
        sample = space.sample()
        assert sample in space
        action = parse_action(layout.decode(sample), SCREEN)  # raises InvalidActionError on a refusal
        assert action.kind == layout.kinds[int(sample["kind"])] and layout.allows(action.kind)
        seen.add(action.kind)
        if action.kind == "key":
            assert action.keys == layout.keys[int(sample["key"])]
        if action.x is not None and layout.coordinates == "box":
            assert action.x == min(SCREEN[0] - 1, int(float(sample["x"]) * SCREEN[0]))
    assert seen == set(layout.kinds)


def test_the_default_layout_is_the_default_space_and_keeps_the_kind_order() -> None:
    assert set(ActionLayout(SCREEN).fields) == ACTION_SPACE_FIELDS
    assert ActionLayout(SCREEN).kinds == KINDS
    shuffled = ActionLayout(SCREEN, kinds=("scroll", "click", "done"))
    assert shuffled.kinds == ("click", "scroll", "done")  # KINDS order, whatever order they were given in
    assert shuffled.decode({"kind": 1, "dy": 3, "dx": 0}) == {"kind": "scroll", "dy": 3, "dx": 0}
    # Only the fields a chosen kind needs are in the space: no text, seconds or key for pointer kinds.
    assert ActionLayout(SCREEN, kinds=("click", "drag")).fields == ("kind", "x", "y", "to_x", "to_y", "button")
    assert "text" not in ActionLayout(SCREEN, kinds=("fail",)).fields  # fail's reason is optional


def test_hand_written_dicts_and_text_are_not_decoded() -> None:
    layout = ActionLayout(SCREEN, coordinates="box")
    by_name = {"kind": "click", "x": 10, "y": 20}
    assert layout.decode(by_name) is by_name and layout.decode("click(10, 20)") == "click(10, 20)"
    assert layout.decode({"kind": 1, "x": 0.0, "y": 1.0}) == {"kind": "click", "x": 0, "y": SCREEN[1] - 1}
    with pytest.raises(InvalidActionError, match="from 0 to 1"):
        layout.decode({"kind": 1, "x": 10, "y": 20})
    with pytest.raises(InvalidActionError, match="out of range"):
        layout.decode({"kind": len(KINDS), "x": 0.5, "y": 0.5})
    with pytest.raises(InvalidActionError, match="key vocabulary"):
        ActionLayout(SCREEN).decode({"kind": KINDS.index("key"), "key": len(DEFAULT_KEYS)})
    # A sample that spells the combo out in `text` (as the space did before it had `key`) still works.
    assert ActionLayout(SCREEN).decode({"kind": KINDS.index("key"), "text": "ctrl+s"}) == {"kind": "key",
                                                                                         "keys": "ctrl+s"}


def test_the_default_key_vocabulary_is_accepted_by_the_guest_agent() -> None:
    from weavegym.guest_agent.keys import parse_combo

    for combo in DEFAULT_KEYS:
        assert parse_combo(combo), combo
        assert parse_action(f"key({combo!r})", SCREEN).keys == combo


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kinds": ("click", "teleport")}, "action_kinds"),
    ({"kinds": ()}, "action_kinds"),
    ({"kinds": ("click", "click")}, "action_kinds"),
    ({"coordinates": "polar"}, "coordinates"),
    ({"keys": ("ctrl s",)}, "key_vocabulary"),
    ({"keys": ()}, "key_vocabulary"),
])
def test_bad_action_layouts_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ActionLayout(SCREEN, **kwargs)


def test_observation_layout_resizes_and_grays_the_screen_only_in_the_observation() -> None:
    frame = np.zeros((48, 64, 3), np.uint8)
    frame[:, :32] = (255, 0, 0)  # left half red, right half black
    layout = ObservationLayout(SCREEN, keys=("screen", "exit_code"), size=(16, 12), grayscale=True)
    space = layout.space()
    assert list(space.keys()) == ["exit_code", "screen"] and space["screen"].shape == (12, 16, 1)
    obs = layout.observe(frame, "ignored", 3, "ignored")
    assert set(obs) == {"screen", "exit_code"} and obs in space
    assert abs(int(obs["screen"][6, 2, 0]) - round(0.299 * 255)) <= 1 and obs["screen"][6, 13, 0] == 0
    assert frame[0, 0, 0] == 255  # the env's own frame (render, trajectory) is untouched
    full = ObservationLayout(SCREEN).observe(frame, "out", 0, "do it")
    assert full["screen"] is not frame and np.array_equal(full["screen"], frame)
    with pytest.raises(ValueError, match="observation_size"):
        ObservationLayout(SCREEN, size=(128, 96))
    with pytest.raises(ValueError, match="observation_keys"):
        ObservationLayout(SCREEN, keys=("screen", "mouse"))


def test_wrappers_give_array_spaces_that_flatten_small() -> None:
    from gymnasium.spaces import MultiDiscrete

    from weavegym.wrappers import MultiDiscreteActions, ScreenObservation

    class _Stub(gym.Env):
        def __init__(self, action: ActionLayout, obs: ObservationLayout) -> None:
            self.action_space, self.observation_space, self.last = action.space(), obs.space(), None

        def step(self, action):
            self.last = action
            return self.observation_space.sample(), 0.0, False, False, {}

    action = ActionLayout((1280, 720), kinds=GUI_KINDS_NO_TEXT)
    obs = ObservationLayout((1280, 720), keys=("screen",), size=(84, 84), grayscale=True)
    env = MultiDiscreteActions(ScreenObservation(_Stub(action, obs)))
    assert env.observation_space == Box(0, 255, (84, 84, 1), np.uint8) and flatdim(env.observation_space) == 84 * 84
    assert isinstance(env.action_space, MultiDiscrete) and env.fields == tuple(action.space().keys())
    env.action_space.seed(3)
    for _ in range(200):
        sample = env.action_space.sample()
        assert sample in env.action_space
        env.step(sample)
        decoded = action.decode(env.unwrapped.last)
        parse_action(decoded, (1280, 720))
        assert env.unwrapped.last["dx"] >= -10  # the MultiDiscrete keeps Discrete's start
    with pytest.raises(ValueError, match="text"):
        MultiDiscreteActions(_Stub(ActionLayout((1280, 720), kinds=("click", "type")), obs))
    with pytest.raises(ValueError, match="screen"):
        ScreenObservation(_Stub(action, ObservationLayout((1280, 720), keys=("terminal",))))
