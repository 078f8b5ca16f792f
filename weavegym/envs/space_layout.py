"""What the Gym spaces hold, as chosen through ``gym.make`` keyword arguments, and how samples come back.

An RL loop samples ``action_space`` and hands the sample to ``step()``, so both ends must agree on every
field: a sampled action must be one the env accepts. :class:`ActionLayout` decides which kinds exist (their
Discrete order is the global ``KINDS`` order with the excluded kinds left out), how coordinates are
encoded (pixel ``Discrete`` or normalised ``Box``), and the key vocabulary a sampled ``key`` draws from;
it builds the space and decodes its samples. :class:`ObservationLayout` does the same for observations:
which keys, and the screen's size and colour.

Only samples (dicts whose ``kind`` is an integer index) are decoded. Hand-written dicts with a kind
name, text calls and tool calls keep pixel coordinates and free key combos, so an LLM agent reads the
same tool schema whatever the RL side chose. The kind subset, though, binds every form: a GUI-only env
refuses ``shell`` however it is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium.spaces import Box, Dict, Discrete, Space
from PIL import Image

from weavegym.core.config import EnvConfig
from weavegym.core.errors import InvalidActionError
from weavegym.envs.actions import BUTTONS, KINDS, ActionLimits
from weavegym.envs.spaces import UnicodeText
from weavegym.envs.vocabulary import ENDING_KINDS, REQUIRED, VOCABULARY

# A sampled `key` action draws from this list unless `key_vocabulary=` replaces it: editing, navigation,
# dialogs and the common shortcuts. Every entry is a combo the guest agent accepts (tests/test_spaces.py).
DEFAULT_KEYS: tuple[str, ...] = (
    "Return", "Escape", "Tab", "shift+Tab", "BackSpace", "Delete", "space",
    "Up", "Down", "Left", "Right", "Home", "End", "Page_Up", "Page_Down",
    "ctrl+a", "ctrl+c", "ctrl+v", "ctrl+x", "ctrl+z", "ctrl+y", "ctrl+s", "ctrl+shift+s", "ctrl+o", "ctrl+n",
    "ctrl+f", "ctrl+h", "ctrl+w", "ctrl+q", "ctrl+Home", "ctrl+End", "alt+Tab", "alt+F4", "F2", "F5", "F10",
)

OBSERVATION_KEYS: tuple[str, ...] = ("screen", "terminal", "exit_code", "instruction")
COORDINATE_MODES: tuple[str, ...] = ("discrete", "box")
_SCROLL_SAMPLE = 10  # sampled scrolls stay small; parse_action accepts up to ActionLimits.max_scroll
_POSITIONS = ("x", "y", "to_x", "to_y")
# The space field that carries each kind field. `timeout` has none: sampled CLI actions use the env's default
# deadline. done's answer and fail's reason are optional text: they come from `text` when the space has it
# (another chosen kind needs text), and are left empty otherwise.
_SPACE_FIELD: dict[str, str] = {**{p: p for p in _POSITIONS}, "button": "button", "dx": "dx", "dy": "dy",
                                "seconds": "seconds", "keys": "key", "text": "text", "command": "text", "code": "text",
                                "answer": "text", "reason": "text"}
_FIELD_ORDER = ("kind", *_POSITIONS, "button", "dx", "dy", "text", "seconds", "key")


@dataclass(frozen=True)
class ActionLayout:
    """The action space of one env: its kinds, coordinate encoding and key vocabulary."""

    screen: tuple[int, int]
    kinds: tuple[str, ...] = KINDS
    keys: tuple[str, ...] = DEFAULT_KEYS
    coordinates: str = "discrete"
    limits: ActionLimits = field(default_factory=ActionLimits)

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in VOCABULARY]
        if unknown or not self.kinds or len(set(self.kinds)) != len(self.kinds):
            raise ValueError(f"action_kinds must be distinct names from {', '.join(KINDS)}; got {list(self.kinds)}")
        # The Discrete index follows the global order, whatever order the caller listed the kinds in.
        object.__setattr__(self, "kinds", tuple(k for k in KINDS if k in self.kinds))
        if self.coordinates not in COORDINATE_MODES:
            raise ValueError(f"coordinates must be one of {COORDINATE_MODES}, not {self.coordinates!r}")
        if not self.keys or len(set(self.keys)) != len(self.keys) or not all(
                isinstance(k, str) and k and not any(c.isspace() for c in k) for k in self.keys):
            raise ValueError("key_vocabulary must be distinct key combos without whitespace, like 'ctrl+s'")

    @classmethod
    def from_config(cls, config: EnvConfig, limits: ActionLimits) -> ActionLayout:
        return cls(config.screen_size, tuple(config.action_kinds or KINDS),
                   tuple(config.key_vocabulary or DEFAULT_KEYS), config.coordinates, limits)

    @property
    def fields(self) -> tuple[str, ...]:
        """The space's keys: ``kind`` and every field a chosen kind needs (required text only: see _SPACE_FIELD)."""
        used = {"kind"}
        for kind in self.kinds:
            for name, default in VOCABULARY[kind].fields:
                if name in _SPACE_FIELD and (default is REQUIRED or _SPACE_FIELD[name] != "text"):
                    used.add(_SPACE_FIELD[name])
        return tuple(f for f in _FIELD_ORDER if f in used)

    def space(self) -> Dict:
        """A flat Dict with a ``kind`` discriminator and the shared fields, so RL libraries can sample every kind."""
        width, height = self.screen
        if self.coordinates == "box":
            position: dict[str, Space[Any]] = {p: Box(0.0, 1.0, shape=(), dtype=np.float32) for p in _POSITIONS}
        else:
            position = {"x": Discrete(width), "y": Discrete(height), "to_x": Discrete(width), "to_y": Discrete(height)}
        every: dict[str, Space[Any]] = {
            "kind": Discrete(len(self.kinds)),
            **position,
            "button": Discrete(len(BUTTONS)),
            "dx": Discrete(2 * _SCROLL_SAMPLE + 1, start=-_SCROLL_SAMPLE),
            "dy": Discrete(2 * _SCROLL_SAMPLE + 1, start=-_SCROLL_SAMPLE),
            "text": UnicodeText(min_length=1, max_length=self.limits.max_code_chars, sample_max_length=24),
            "seconds": Box(0.05, 5.0, shape=(), dtype=np.float32),
            "key": Discrete(len(self.keys)),
        }
        return Dict({name: every[name] for name in self.fields})

    def decode(self, action: object) -> object:
        """A sample of :meth:`space` (``kind`` an integer) as the canonical dict of its kind; anything else as is.

        Fields the kind does not use are dropped, so a sample is never refused for a neighbour's value.
        """
        if not isinstance(action, Mapping) or "kind" not in action:
            return action
        index = _integer(action["kind"])
        if index is None:
            return action
        if not 0 <= index < len(self.kinds):
            raise InvalidActionError(f"kind index {index} is out of range; this env's kinds are "
                                     f"0..{len(self.kinds) - 1} ({', '.join(self.kinds)})")
        kind = self.kinds[index]
        out: dict[str, object] = {"kind": kind}
        for name, _default in VOCABULARY[kind].fields:
            source = _SPACE_FIELD.get(name)
            if name == "keys" and "key" not in action:
                source = "text"  # a hand-built sample that spells the combo out
            if source is None or source not in action:
                continue
            value = action[source]
            if name in _POSITIONS and self.coordinates == "box":
                value = self._pixel(name, value)
            elif source == "key":
                value = self._key(value)
            out[name] = value
        if kind == "scroll" and _integer(out.get("dx", 0)) == 0 and _integer(out.get("dy", 0)) == 0:
            # One pair in 441 is (0, 0), which parse_action refuses (an agent's scroll() without notches is a
            # mistake worth a message). A sample must be accepted: it scrolls one notch down instead.
            out["dy"] = 1
        return out

    def allows(self, kind: str) -> bool:
        return kind in self.kinds

    def refusal(self, kind: str) -> str:
        return (f"{kind} is not one of this env's action kinds ({', '.join(self.kinds)}); "
                "gym.make(..., action_kinds=[...]) chose them")

    @property
    def can_end(self) -> bool:
        """Whether an action can end the episode (else only max_steps or the time budget do)."""
        return any(k in ENDING_KINDS for k in self.kinds)

    def _pixel(self, name: str, value: object) -> int:
        number = _real(value)
        if number is None or not 0.0 <= number <= 1.0:
            raise InvalidActionError(f"{name}={value!r} must be a number from 0 to 1 (coordinates='box' samples are "
                                     "fractions of the screen)")
        size = self.screen[0] if name in ("x", "to_x") else self.screen[1]
        return min(size - 1, int(number * size))

    def _key(self, value: object) -> object:
        index = _integer(value)
        if index is None:
            return value  # a combo spelled out: parse_action checks it
        if not 0 <= index < len(self.keys):
            raise InvalidActionError(f"key index {index} is out of range; the key vocabulary has {len(self.keys)} "
                                     "entries")
        return self.keys[index]


@dataclass(frozen=True)
class ObservationLayout:
    """The observation of one env: which keys, and the screen's size and colour (the VM's screen is unchanged)."""

    screen: tuple[int, int]
    keys: tuple[str, ...] = OBSERVATION_KEYS
    size: tuple[int, int] | None = None  # (width, height) of obs["screen"]; None: the VM's screen
    grayscale: bool = False
    terminal_max_chars: int = 16384
    instruction_max_chars: int = 8192

    def __post_init__(self) -> None:
        if not self.keys or any(k not in OBSERVATION_KEYS for k in self.keys) or len(set(self.keys)) != len(self.keys):
            raise ValueError(f"observation_keys must be distinct names from {', '.join(OBSERVATION_KEYS)}; "
                             f"got {list(self.keys)}")
        object.__setattr__(self, "keys", tuple(k for k in OBSERVATION_KEYS if k in self.keys))
        if self.size is not None:
            width, height = (int(v) for v in self.size)
            if not (8 <= width <= self.screen[0] and 8 <= height <= self.screen[1]):
                raise ValueError(f"observation_size {self.size} must be between 8x8 and the screen, {self.screen}")
            object.__setattr__(self, "size", (width, height))

    @classmethod
    def from_config(cls, config: EnvConfig) -> ObservationLayout:
        return cls(config.screen_size, tuple(config.observation_keys or OBSERVATION_KEYS), config.observation_size,
                   config.grayscale, config.terminal_max_chars)

    @property
    def transforms_screen(self) -> bool:
        return self.size is not None or self.grayscale

    def space(self) -> Dict:
        width, height = self.size or self.screen
        every: dict[str, Space[Any]] = {
            "screen": Box(0, 255, shape=(height, width, 1 if self.grayscale else 3), dtype=np.uint8),
            "terminal": UnicodeText(min_length=0, max_length=self.terminal_max_chars),
            # 0..255 for a finished command, negative for a signal, -1 before the first command
            "exit_code": Box(low=-1024, high=1024, shape=(), dtype=np.int64),
            "instruction": UnicodeText(min_length=0, max_length=self.instruction_max_chars),
        }
        return Dict({name: every[name] for name in self.keys})

    def observe(self, frame: np.ndarray, terminal: str, exit_code: int, instruction: str) -> dict[str, Any]:
        """The observation dict; the full-size frame stays the env's (render(), the trajectory, the report)."""
        out: dict[str, Any] = {}
        if "screen" in self.keys:
            out["screen"] = self.screen_of(frame)
        if "terminal" in self.keys:
            out["terminal"] = terminal
        if "exit_code" in self.keys:
            out["exit_code"] = np.array(exit_code, dtype=np.int64)
        if "instruction" in self.keys:
            out["instruction"] = instruction
        return out

    def screen_of(self, frame: np.ndarray) -> np.ndarray:
        if not self.transforms_screen:
            return frame.copy()
        image = Image.fromarray(frame)
        if self.grayscale:
            image = image.convert("L")
        if self.size is not None:
            image = image.resize(self.size, Image.Resampling.BILINEAR)
        pixels = np.asarray(image, dtype=np.uint8)
        return pixels[..., None] if self.grayscale else pixels


def action_space(screen: tuple[int, int], limits: ActionLimits = ActionLimits()) -> Dict:
    """The default action space: every kind, pixel coordinates, the default key vocabulary."""
    return ActionLayout(tuple(screen), limits=limits).space()  # type: ignore[arg-type]


def observation_space(screen: tuple[int, int], terminal_max_chars: int = 16384,
                      instruction_max_chars: int = 8192) -> Dict:
    """The default observation space: the screenshot, the last CLI output and exit code, the instruction."""
    return ObservationLayout(tuple(screen), terminal_max_chars=terminal_max_chars,  # type: ignore[arg-type]
                             instruction_max_chars=instruction_max_chars).space()


def _integer(value: object) -> int | None:
    if (isinstance(value, np.ndarray) and value.ndim == 0) or isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _real(value: object) -> float | None:
    if (isinstance(value, np.ndarray) and value.ndim == 0) or isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value):
        return float(value)
    return None
