"""Trajectory rules: catch episodes that reached the right final state the wrong way.

Clauses look at the final state; these rules look at how it was produced (the
recorded frames and the agent's CLI code) together with that state. A
high-confidence flag zeroes the episode, a medium or low one is recorded for
review. A rule's ``name`` is its class name (what ``Evaluation.zeroed_by`` lists);
the evidence says which path, pattern or metric fired. Rules never abort an evaluation: one that raises becomes a
low-confidence flag describing the error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from weavegym.core.errors import EvaluationError
from weavegym.core.image_hash import hamming, perceptual_hash, pixel_digest, thumb_difference, thumbnail
from weavegym.core.trajectory import Trajectory
from weavegym.evaluators.cli_patterns import (
    DEFAULT_FORBIDDEN,
    Confidence,
    ForbiddenPattern,
    home_relative,
    mentions,
    snippet,
    write_indicators,
)
from weavegym.evaluators.scoring import ENVIRONMENT_FAILURES
from weavegym.evaluators.shell_targets import shell_writes

if TYPE_CHECKING:
    from weavegym.evaluators.probes import Probe

__all__ = [
    "Confidence",
    "ForbiddenPattern",
    "ForbiddenPatterns",
    "GuiArtifactViaCli",
    "ImageFromCapturedFrame",
    "ReportedMetric",
    "Rule",
    "RuleContext",
    "ShortcutFlag",
    "TrajectoryRule",
    "evaluate_rules",
]


@dataclass(frozen=True)
class ShortcutFlag:
    rule: str
    confidence: Confidence
    message: str
    evidence: dict[str, Any]  # JSON-able


@dataclass
class RuleContext:
    probe: Probe
    trajectory: Trajectory
    truth: Mapping[str, Any]


class Rule(Protocol):
    """Anything with a ``name`` and a ``check``; rules are plain classes, no base class needed."""

    name: str

    def check(self, ctx: RuleContext) -> list[ShortcutFlag]: ...


TrajectoryRule = Rule  # the name envs.task uses for a task's extra rules


def cli_sources(trajectory: Trajectory) -> Iterator[tuple[int, str, str]]:
    """(step index, "shell" | "python", source) of every CLI action the agent ran."""
    for step in trajectory.actions("cli"):
        action = step.action or {}
        kind = "python" if action.get("kind") == "python" else "shell"
        yield step.index, kind, str(action.get("command") or action.get("code") or "")


class ImageFromCapturedFrame:
    """An image deliverable (a full-screen capture) must be a frame the env actually captured.

    Exact pixel equality is proof. Otherwise one frame must match on both counts:
    the perceptual hash within ``max_distance`` bits, and at most
    ``max_thumb_difference`` of the thumbnail's pixels visibly different. That
    tolerates PNG/JPEG round trips, a rescale and a moved or missing cursor, but
    not a picture drawn from scratch (the hash alone is weak on a flat desktop).
    Cropped (region) deliverables are not supported.
    """

    def __init__(self, path: str, max_distance: int = 24, max_thumb_difference: float = 0.01) -> None:
        self.path = path
        self.max_distance = max_distance
        self.max_thumb_difference = max_thumb_difference
        self.name = "ImageFromCapturedFrame"

    def check(self, ctx: RuleContext) -> list[ShortcutFlag]:
        image = ctx.probe.image(self.path)
        if image is None:
            return []  # absence is a clause's business
        frames = ctx.trajectory.frames
        digest = pixel_digest(image)
        if any(f.digest == digest for f in frames):
            return []
        phash, thumb = perceptual_hash(image), thumbnail(image)
        scored = [(hamming(phash, f.phash), thumb_difference(thumb, f.thumb), f.index) for f in frames]
        if any(d <= self.max_distance and t <= self.max_thumb_difference for d, t, _i in scored):
            return []
        nearest = min(scored, key=lambda s: (s[1], s[0]), default=None)
        return [ShortcutFlag(self.name, "high", f"{self.path} is not a frame the environment captured",
                             {"path": self.path, "min_distance": min((s[0] for s in scored), default=None),
                              "nearest_step": nearest[2] if nearest else None,
                              "nearest_thumb_difference": round(nearest[1], 4) if nearest else None,
                              "frames_compared": len(frames), "max_distance": self.max_distance,
                              "max_thumb_difference": self.max_thumb_difference})]


class GuiArtifactViaCli:
    """Files the task requires to be produced through the GUI must not be written by shell or python code.

    A CLI action that writes the file is a high flag: in shell, a simple command
    whose target it is (redirection, ``cp``/``convert`` destination, ``tee``,
    ``sed -i``…; see ``shell_targets``); in Python, any write API in an action
    naming it (full path, ``~``/``$HOME`` form or basename). Naming it without
    writing it (``cat``, ``convert it.png out.jpg``) is a low flag, for review only.
    """

    def __init__(self, paths: Sequence[str], reason: str) -> None:
        self.paths = tuple(paths)
        self.reason = reason
        self.name = "GuiArtifactViaCli"

    def check(self, ctx: RuleContext) -> list[ShortcutFlag]:
        flags = []
        for index, kind, source in cli_sources(ctx.trajectory):
            for path in self.paths:
                found = list(mentions(source, path))
                if not found:
                    continue
                mention, write = found[0], None
                if kind == "shell":  # only a command whose target is the file writes it (convert in.png out.jpg reads)
                    for candidate in found:
                        if (write := shell_writes(source, candidate).sign) is not None:
                            mention = candidate
                            break
                else:
                    write = next(write_indicators(source, kind), None)
                evidence: dict[str, Any] = {"path": path, "step": index,
                                            "snippet": snippet(source, mention.start(), mention.end())}
                if write is None:
                    flags.append(ShortcutFlag(self.name, "low", f"CLI code at step {index} names {path}", evidence))
                    continue
                evidence.update(write=write.name, write_snippet=snippet(source, write.start, write.end))
                flags.append(ShortcutFlag(self.name, "high", f"CLI code at step {index} writes {path}, which must "
                                          f"be produced through the GUI ({self.reason})", evidence))
        return flags

    @staticmethod
    def forms(path: str) -> list[str]:
        """The spellings of ``path`` the rule recognises, for reports and task authors."""
        rel = home_relative(path)
        found = [path] + ([f"~/{rel}", f"$HOME/{rel}", f"${{HOME}}/{rel}"] if rel else [])
        return [*found, path.rstrip("/").rsplit("/", 1)[-1]]


class ForbiddenPatterns:
    """Tricks no solution needs (drawing fake screenshots, preloading libraries, reading the harness…).

    ``waive`` names default patterns a task's own work consists of (``Task.waived_patterns``: a banner that
    the shell must render with ImageMagick); an unknown name is a task bug and raises ValueError.
    """

    def __init__(self, extra: Sequence[ForbiddenPattern] = (), *, defaults: bool = True,
                 waive: Sequence[str] = ()) -> None:
        unknown = sorted(set(waive) - {p.name for p in DEFAULT_FORBIDDEN})
        if unknown:
            raise ValueError(f"cannot waive {unknown}: no default forbidden pattern has that name")
        kept = tuple(p for p in DEFAULT_FORBIDDEN if p.name not in waive) if defaults else ()
        self.patterns = kept + tuple(extra)
        self._compiled = [(p, re.compile(p.regex, re.M)) for p in self.patterns]
        self.name = "ForbiddenPatterns"

    def check(self, ctx: RuleContext) -> list[ShortcutFlag]:
        flags = []
        for index, _kind, source in cli_sources(ctx.trajectory):
            for pattern, regex in self._compiled:
                match = regex.search(source)
                if match is None:
                    continue
                flags.append(ShortcutFlag(
                    self.name, pattern.confidence, f"step {index}: {pattern.name} ({pattern.why})",
                    {"pattern": pattern.name, "step": index, "snippet": snippet(source, match.start(), match.end())}))
        return flags


class ReportedMetric:
    """A number the agent reports must equal the one recomputed from the final state (not hard-coded)."""

    def __init__(self, name: str, read_reported: Callable[[Probe, Mapping[str, Any]], float | None],
                 recompute: Callable[[Probe, Mapping[str, Any]], float | None],
                 rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> None:
        self.name = "ReportedMetric"
        self.metric = name
        self.read_reported = read_reported
        self.recompute = recompute
        self.rel_tol = rel_tol
        self.abs_tol = abs_tol

    def check(self, ctx: RuleContext) -> list[ShortcutFlag]:
        reported = self.read_reported(ctx.probe, ctx.truth)
        if reported is None:
            return []
        recomputed = self.recompute(ctx.probe, ctx.truth)
        if recomputed is None:
            return []
        if math.isclose(float(reported), float(recomputed), rel_tol=self.rel_tol, abs_tol=self.abs_tol):
            return []
        return [ShortcutFlag(self.name, "high", f"reported {self.metric} does not match recomputation (hard-coded?)",
                             {"metric": self.metric, "reported": float(reported), "recomputed": float(recomputed),
                              "rel_tol": self.rel_tol, "abs_tol": self.abs_tol})]


def evaluate_rules(rules: Sequence[Rule], ctx: RuleContext) -> list[ShortcutFlag]:
    """Every rule's flags.

    A rule that raises cannot clear the episode, and an agent must not be able to dodge a rule by making it
    crash: that is a high flag (the score is zeroed). A failure of the environment raises EvaluationError.
    """
    flags: list[ShortcutFlag] = []
    for rule in rules:
        name = str(getattr(rule, "name", type(rule).__name__))
        try:
            flags.extend(rule.check(ctx))
        except ENVIRONMENT_FAILURES as exc:
            raise EvaluationError(f"rule {name!r} could not run: {type(exc).__name__}: {exc}") from exc
        except Exception as exc:
            flags.append(ShortcutFlag(name, "high", f"rule raised {type(exc).__name__}: {exc}; a rule that "
                                      "cannot check the episode cannot clear it",
                                      {"error": type(exc).__name__, "detail": str(exc)[:500]}))
    return flags
