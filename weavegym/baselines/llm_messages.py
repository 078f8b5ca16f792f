"""The chat history of an LLM episode: what each turn says, and how the history is fitted into the context.

Screenshots dominate the context, so the history keeps them as :class:`Screenshot` objects inside user turns
and decides only when a request is built which of them go out as images: the newest ``max_images``, fewer if
the character budget demands, the rest as a one-line placeholder. If text alone is still over budget, whole
old turns go (never the system prompt, the first turn, which holds the instruction, or the current one), and
always as whole turns so every assistant tool call keeps its tool result.
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from PIL import Image

Message = dict[str, Any]  # an OpenAI chat message; user content may hold Screenshot objects until rendered
Mode = Literal["request", "measure", "transcript"]

DROPPED = "[screenshot of step {step} dropped]"
CALL_A_TOOL = ("Your previous reply did not call a tool, so nothing was done (the env waited 1 s). "
               "Reply with exactly one tool call.")
_MIME = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}


@dataclass(frozen=True)
class Screenshot:
    """One encoded observation screen; ``step`` counts the actions taken before it (0 is the reset screen)."""

    step: int
    width: int
    height: int
    url: str  # data:<mime>;base64,...

    @property
    def cost_chars(self) -> int:
        """Budget charge: about width*height/750 tokens in common vision models, at ~4 characters a token.

        The base64 length would overstate an image's context cost a hundredfold, so it is not what is counted.
        """
        return 4 * math.ceil(self.width * self.height / 750)


def scaled_size(screen: tuple[int, int], scale: float) -> tuple[int, int]:
    """The (width, height) a screen is shown at after downscaling by ``scale``."""
    width, height = screen
    return max(1, round(width * scale)), max(1, round(height * scale))


def encode_screenshot(pixels: np.ndarray, step: int, size: tuple[int, int], image_format: str) -> Screenshot:
    """Resize an ``uint8[H, W, 3]`` screen to ``size`` (width, height) and wrap it in a data URL."""
    image = Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8)).convert("RGB")
    if image.size != size:
        image = image.resize(size, Image.Resampling.LANCZOS)  # text stays legible better than with bilinear
    buffer = io.BytesIO()
    image.save(buffer, format=image_format.upper())
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return Screenshot(step, size[0], size[1], f"data:{_MIME[image_format]};base64,{data}")


def system_prompt(image_size: tuple[int, int], screen: tuple[int, int], coordinates_scaled: bool) -> str:
    """The setting: one desktop VM, two kinds of tools, one call per turn, and how coordinates relate to images."""
    width, height = image_size if coordinates_scaled else screen
    if coordinates_scaled or image_size == screen:
        where = f"Coordinates are pixels of the screenshots you see ({width}x{height}, origin at the top left)."
    else:
        where = (f"Screenshots are shown downscaled to {image_size[0]}x{image_size[1]}, but coordinates are pixels "
                 f"of the real {width}x{height} screen: scale what you read off a screenshot accordingly.")
    return "\n".join([
        "You operate a Linux desktop running in a virtual machine to complete one task for the user.",
        "You have two kinds of tools, and tasks usually need both:",
        "- GUI tools (move, click, double_click, right_click, drag, scroll, type, key, mouse_down, mouse_up) act "
        f"on the screen with the mouse and keyboard. {where}",
        "- CLI tools (shell, python) run a command or a Python script in the VM and show you its output and exit "
        "code on the next turn. They run as a separate account that shares the home folder with the desktop "
        "but cannot reach the screen, the clipboard or the desktop's programs: work on screen needs the GUI "
        "tools, and files are how the two sides exchange data.",
        "After every action you get a new screenshot, the output of the last command, and any error the "
        "environment reported for your action (an invalid action does nothing).",
        "Call exactly one tool per turn. Look at the result before the next step; do not guess at what you "
        "cannot see. Call `done` when the task is complete (with `answer` set when the task asks a question), "
        "or `fail` with a reason that names the cause if it cannot be done; giving up on a task that can be "
        "done scores nothing, and so does a result made up for one that cannot.",
    ])


def observation_text(step: int, obs: Mapping[str, Any], info: Mapping[str, Any], *, instruction: str | None,
                     show_terminal: bool, max_terminal_chars: int, notes: Iterable[str] = ()) -> str:
    """The text of one user turn: the task (first turn), the last command's result, errors and notes."""
    lines: list[str] = []
    if instruction is not None:
        lines += [f"Task: {instruction}", ""]
    lines.append(f"Step {step}." if step else "The episode has started; this is the initial screen.")
    error = info.get("action_error")
    if error:
        lines.append(f"Your last action was rejected and did nothing: {error}")
    exit_code = int(np.asarray(obs.get("exit_code", -1)))
    terminal = str(obs.get("terminal", ""))
    if show_terminal and (terminal or exit_code != -1):
        lines += [f"Output of the last command (exit code {exit_code}):", "```", _tail(terminal, max_terminal_chars),
                  "```"]
    elif exit_code == -1:
        lines.append("No command has run yet.")
    else:
        lines.append(f"(The terminal output is unchanged since you last saw it; last exit code {exit_code}.)")
    lines += list(notes)
    return "\n".join(lines)


def tool_result(name: str, error: str | None, exit_code: int | None) -> str:
    """What the tool message says about an executed call; the full observation follows in the user turn."""
    if error:
        return f"{name}: rejected, nothing was done: {error}"
    if exit_code is not None:
        return f"{name}: executed (exit code {exit_code}); the output is in the next message"
    return f"{name}: executed; the new screen is in the next message"


def screenshots(messages: Iterable[Message]) -> list[Screenshot]:
    """Every screenshot in the history, oldest first."""
    return [part for m in messages if isinstance(m.get("content"), list) for part in m["content"]
            if isinstance(part, Screenshot)]


def fit(messages: list[Message], max_images: int, budget_chars: int) -> list[Message]:
    """The request's messages: newest images within ``max_images`` and the budget, then old turns dropped."""
    head, turns = _split(messages)
    kept = [shot.step for shot in screenshots(messages)][-max_images:] if max_images > 0 else []
    dropped: list[int] = []

    def size() -> int:
        return measure(_assemble(head, turns, dropped, kept, "measure")) + _image_cost(messages, kept)

    while kept and size() > budget_chars:
        kept.pop(0)
    droppable = list(range(1, len(turns) - 1))
    while droppable and size() > budget_chars:
        dropped.append(droppable.pop(0))
    return _assemble(head, turns, dropped, kept, "request")


def transcript(messages: list[Message]) -> list[Message]:
    """The whole history, JSON-ready, with every image as ``<image: step N, WxH>`` instead of its data."""
    head, turns = _split(messages)
    return _assemble(head, turns, [], [], "transcript")


def measure(messages: list[Message]) -> int:
    """Characters of the messages as JSON (images rendered as empty URLs; charge them separately)."""
    return sum(len(json.dumps(m, ensure_ascii=False)) for m in messages)


def _image_cost(messages: list[Message], kept: list[int]) -> int:
    steps = set(kept)
    return sum(shot.cost_chars for shot in screenshots(messages) if shot.step in steps)


def _split(messages: list[Message]) -> tuple[list[Message], list[list[Message]]]:
    """System messages before the first user turn, then one group per user turn with the replies it got."""
    head: list[Message] = []
    turns: list[list[Message]] = []
    for message in messages:
        if message.get("role") == "user":
            turns.append([message])
        elif turns:
            turns[-1].append(message)
        else:
            head.append(message)
    return head, turns


def _assemble(head: list[Message], turns: list[list[Message]], dropped: list[int], kept: list[int],
              mode: Mode) -> list[Message]:
    out = [_render(m, kept, mode) for m in head]
    gone: list[int] = []
    steps = set(kept)
    for index, turn in enumerate(turns):
        if index in dropped:
            gone.append(turn[0].get("_step", index))
            continue
        rendered = [_render(m, steps, mode) for m in turn]
        if gone:
            note = f"[{len(gone)} earlier turn(s), steps {gone[0]}-{gone[-1]}, omitted to fit the context budget]"
            rendered[0]["content"] = [{"type": "text", "text": note}, *rendered[0]["content"]]
            gone = []
        out.extend(rendered)
    return out


def _render(message: Message, kept: Iterable[int], mode: Mode) -> Message:
    """A copy without private keys, its screenshots turned into image parts or placeholder text."""
    out = {key: value for key, value in message.items() if not key.startswith("_")}
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = [_part(part, kept, mode) if isinstance(part, Screenshot) else part for part in content]
    return out


def _part(shot: Screenshot, kept: Iterable[int], mode: Mode) -> dict[str, Any]:
    if mode == "transcript":
        return {"type": "image_url", "image_url": {"url": f"<image: step {shot.step}, {shot.width}x{shot.height}>"}}
    if shot.step not in kept:
        return {"type": "text", "text": DROPPED.format(step=shot.step)}
    return {"type": "image_url", "image_url": {"url": shot.url if mode == "request" else ""}}


def _tail(text: str, limit: int) -> str:
    """The end of long output, where errors and results usually are."""
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} earlier characters cut ...]\n{text[-limit:]}"
