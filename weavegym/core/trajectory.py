"""The record of one episode: every action, its outcome and a fingerprint of every captured frame.

The env appends to it on each ``reset``/``step``; the evaluators' trajectory
rules read it after the episode (did the image deliverable come from a real
frame? did the agent write a GUI-only artifact from the shell?), and the
runner writes it to ``steps.jsonl``. Frames are kept as fingerprints, not
pixels, so a long episode costs kilobytes; whoever wants the pixels (the
runner) takes them from the observations.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from weavegym.core.image_hash import perceptual_hash, pixel_digest, thumbnail

CHANNELS = ("reset", "gui", "cli", "control", "invalid")


@dataclass(frozen=True)
class FrameRecord:
    """Fingerprint of one frame the env captured (and returned to the agent)."""

    index: int  # step index the frame belongs to (0 = the reset observation)
    digest: str  # core.image_hash.pixel_digest
    phash: int  # core.image_hash.perceptual_hash
    height: int
    width: int
    thumb: np.ndarray = field(repr=False, compare=False)  # image_hash.thumbnail; not serialised

    @classmethod
    def of(cls, index: int, image: np.ndarray) -> FrameRecord:
        return cls(index, pixel_digest(image), perceptual_hash(image), int(image.shape[0]), int(image.shape[1]),
                   thumbnail(image))


@dataclass(kw_only=True)
class StepRecord:
    index: int  # 0 for the reset observation, then 1, 2, …
    channel: str  # one of CHANNELS
    frame: FrameRecord
    action: dict[str, Any] | None = None  # the normalised action (kind + its fields); None for the reset
    action_text: str = ""  # the action in text form, e.g. 'click(100, 200)'; "" for the reset
    action_error: str | None = None
    terminal: str = ""  # what the agent saw in obs["terminal"]
    exit_code: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    wall_time: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["frame"]["phash"] = f"{self.frame.phash:064x}"
        del data["frame"]["thumb"]
        return data


@dataclass(frozen=True)
class EpisodeEnd:
    """How the agent ended the episode: ``done`` with its answer, ``fail`` with its reason, or neither.

    ``kind`` is None when the episode was cut (max_steps, time budget) or is still under way. Checkers read
    it as ``probe.episode``: an answer-returning task scores ``answer``, an infeasible variant ``reason``.
    """

    kind: str | None = None
    answer: str = ""
    reason: str = ""


@dataclass
class Trajectory:
    task_id: str
    task_seed: int
    instruction: str
    steps: list[StepRecord] = field(default_factory=list)
    started_wall: float = 0.0  # host epoch seconds at reset; the guest clock is resynced to it

    def record(self, step: StepRecord) -> None:
        self.steps.append(step)

    @property
    def frames(self) -> list[FrameRecord]:
        return [s.frame for s in self.steps]

    def actions(self, channel: str | None = None) -> Iterator[StepRecord]:
        """Executed actions (the reset and rejected actions excluded), optionally of one channel."""
        for s in self.steps:
            if s.action is not None and s.action_error is None and (channel is None or s.channel == channel):
                yield s

    def code(self) -> list[tuple[int, str]]:
        """(step index, source) of every shell command and python program the agent ran."""
        return [(s.index, str(s.action.get("command") or s.action.get("code") or ""))
                for s in self.actions("cli") if s.action is not None]

    def end(self) -> EpisodeEnd:
        """The agent's own ending, if the last recorded step is an accepted ``done`` or ``fail``."""
        last = self.steps[-1] if self.steps else None
        if last is None or last.action is None or last.action_error is not None:
            return EpisodeEnd()
        kind = last.action.get("kind")
        if kind not in ("done", "fail"):
            return EpisodeEnd()
        return EpisodeEnd(kind, str(last.action.get("answer") or ""), str(last.action.get("reason") or ""))

    def to_jsonl(self) -> str:
        return "".join(json.dumps(s.to_dict(), ensure_ascii=False) + "\n" for s in self.steps)
