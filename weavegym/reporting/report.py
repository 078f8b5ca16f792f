"""A static HTML report of a ``weavegym run`` directory, for reading what agents actually did.

Scores alone hide *how* an episode was won or lost, so the report puts every step's annotated frame next to the
action and the terminal output, and the evaluation (clauses, caps, shortcut flags) next to the timeline. It reads
the run directory as it is on disk: a running or crashed episode (steps.jsonl but no episode.json) is rendered
from whatever is there and marked incomplete, and malformed files become notes in the page instead of exceptions.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from weavegym.core.extras import missing_extra
from weavegym.reporting.overlay import AnnotatedFrame, annotate_steps

try:
    import jinja2
except ModuleNotFoundError as _missing:  # an optional extra (core/extras.py)
    raise missing_extra(_missing) from None

TERMINAL_CHARS = 4000  # per step card; the full text stays in steps.jsonl
TEXT_CHARS = 4000  # evidence, error tracebacks, chat messages
EAGER_IMAGES = 4  # the first frames load eagerly so a screenshot of the page shows them; the rest lazily
EPISODE_FILES = ("episode.json", "evaluation.json", "steps.jsonl", "messages.json", "chat.json",
                 "error.txt")  # linked if present
TEMPLATES = Path(__file__).parent / "templates"

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")
_EPISODE_DIR = re.compile(r"ep(\d+)")


@dataclass(frozen=True)
class StepView:
    index: int
    channel: str
    action_text: str
    action_error: str | None
    reward: object
    exit_code: object
    terminal: str | None  # None when unchanged since the previous step (the env keeps the last output)
    terminal_note: str
    timings: str
    image: str | None  # href of the annotated frame
    image_size: tuple[int, int] | None
    frame_href: str | None  # the full-size raw frame the action acted on


@dataclass(frozen=True)
class EpisodeView:
    task_id: str
    episode: int
    anchor: str
    status: str  # done | error | incomplete
    record: Mapping[str, Any]  # episode.json (or results.json's copy); {} for an incomplete episode
    evaluation: Mapping[str, Any] | None
    error: str | None
    steps: list[StepView]
    messages: list[tuple[str, str]]
    links: list[tuple[str, str]]
    chat: list[tuple[str, str, str]] = field(default_factory=list)  # the simulated user's: (sender, event, text)
    notes: list[str] = field(default_factory=list)

    @property
    def high_flags(self) -> int:
        flags = (self.evaluation or {}).get("flags") or []
        return sum(1 for f in flags if isinstance(f, Mapping) and f.get("confidence") == "high")


def write_report(run_dir: Path, out: Path | None = None, *, max_frame_width: int = 960) -> Path:
    """Render ``run_dir`` into ``out`` (default ``run_dir/report.html``) and return its path.

    Annotated frames are written into each episode's ``annotated/`` folder and referenced relatively, so the run
    directory together with the report can be copied or served as one folder.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir} is not a run directory (written by `weavegym run`)")
    out = Path(out) if out is not None else run_dir / "report.html"
    base = out.parent.resolve()
    run = _read_json(run_dir / "run.json")
    results = _read_json(run_dir / "results.json")
    episodes = [_episode_view(run_dir, task, k, record, base, max_frame_width)
                for task, k, record in _discover(run_dir, run, results)]
    records = [e.record for e in episodes if e.record]
    if isinstance(results, Mapping) and isinstance(results.get("by_domain"), Mapping):
        by_domain, overall, computed = dict(results["by_domain"]), results.get("overall") or {}, False
    else:
        by_domain = {d: summarize([r for r in records if r.get("domain") == d]) for d in _domains(records)}
        overall, computed = summarize(records), True
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(pct=_pct, num=_num, pretty=_pretty, clip=lambda text: clip(str(text), TEXT_CHARS)[0])
    html = env.get_template("report.html.j2").render(
        run=run if isinstance(run, Mapping) else {}, run_dir=str(run_dir), by_domain=by_domain, overall=overall,
        computed=computed, episodes=episodes, eager_images=EAGER_IMAGES,
        incomplete=sum(1 for e in episodes if e.status == "incomplete"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8", errors="replace")
    return out


def read_steps(episode_dir: Path) -> tuple[list[dict[str, Any]], int]:
    """The step records of ``steps.jsonl`` in order, and how many lines could not be parsed.

    A crashed or still-running episode can end in a half-written line; it is skipped and counted, never fatal.
    """
    path = episode_dir / "steps.jsonl"
    if not path.is_file():
        return [], 0
    steps, bad = [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(record, dict):
            steps.append(record)
        else:
            bad += 1
    return steps, bad


def summarize(records: Sequence[Mapping[str, Any]]) -> dict[str, float | int | None]:
    """The results.json summary keys over ``records``, for runs whose results.json is not written yet.

    An episode without a score (an error) counts as 0 and as not passed: an error is a failure of the run.
    """
    n = len(records)

    def mean(values: Iterable[float]) -> float | None:
        items = list(values)
        return sum(items) / len(items) if items else None

    return {
        "episodes": n,
        "pass_rate": mean(1.0 if r.get("passed") else 0.0 for r in records),
        "mean_score": mean(float(r.get("score") or 0.0) for r in records),
        "mean_steps": mean(float(r.get("steps") or 0) for r in records),
        "mean_wall_s": mean(float(r.get("wall_s") or 0.0) for r in records),
    }


def clip(text: str, limit: int = TERMINAL_CHARS) -> tuple[str, str]:
    """``text`` cut to about ``limit`` characters (head and tail kept, errors are usually at the end) and a note."""
    if len(text) <= limit:
        return text, ""
    head, tail = limit // 4, limit - limit // 4
    omitted = len(text) - head - tail
    note = f"truncated: showing the first {head:,} and last {tail:,} of {len(text):,} characters"
    return f"{text[:head]}\n… [{omitted:,} characters omitted] …\n{text[-tail:]}", note


def _discover(run_dir: Path, run: Any, results: Any) -> list[tuple[str, int, Mapping[str, Any] | None]]:
    """(task, episode, results.json record) for every episode on disk or in results.json, in run order."""
    found: dict[tuple[str, int], Mapping[str, Any] | None] = {}
    for task_dir in sorted(p for p in run_dir.iterdir() if p.is_dir()):
        for ep_dir in task_dir.iterdir():
            if ep_dir.is_dir() and (m := _EPISODE_DIR.fullmatch(ep_dir.name)):
                found[(task_dir.name, int(m.group(1)))] = None
    listed = results.get("episodes") if isinstance(results, Mapping) else None
    for record in listed if isinstance(listed, list) else []:
        if isinstance(record, Mapping) and isinstance(record.get("task_id"), str):
            found[(record["task_id"], int(record.get("episode") or 0))] = record
    order = {t: i for i, t in enumerate(run.get("tasks") or [])} if isinstance(run, Mapping) else {}
    keys = sorted(found, key=lambda key: (order.get(key[0], len(order)), key[0], key[1]))
    return [(task, k, found[(task, k)]) for task, k in keys]


def _episode_view(run_dir: Path, task: str, k: int, listed: Mapping[str, Any] | None, base: Path,
                  max_width: int) -> EpisodeView:
    ep_dir = run_dir / task / f"ep{k}"
    notes: list[str] = []
    record = _read_json(ep_dir / "episode.json")
    if not isinstance(record, Mapping):
        if (ep_dir / "episode.json").exists():
            notes.append("episode.json is unreadable")
        record = listed or {}
    status = str(record.get("status") or "incomplete") if record else "incomplete"
    if not ep_dir.is_dir():
        notes.append("the episode directory is missing; only the results.json record is shown")
    elif status == "incomplete":
        notes.append("no episode.json: the episode crashed or is still running; showing the steps recorded so far")
    evaluation = _read_json(ep_dir / "evaluation.json")
    error = _read_text(ep_dir / "error.txt") or record.get("error")
    steps, bad = read_steps(ep_dir)
    if bad:
        notes.append(f"{bad} line(s) of steps.jsonl could not be parsed and are left out")
    frames = annotate_steps(ep_dir, steps, max_width=max_width) if steps else []
    links = [(name, _href(ep_dir / name, base)) for name in EPISODE_FILES if (ep_dir / name).is_file()]
    return EpisodeView(
        task_id=task, episode=k, anchor=_anchor(task, k), status=status, record=record,
        evaluation=evaluation if isinstance(evaluation, Mapping) else None,
        error=None if error is None else _plain(str(error)), steps=_step_views(steps, frames, base),
        messages=_messages(_read_json(ep_dir / "messages.json")), links=links, notes=notes,
        chat=_chat(_read_json(ep_dir / "chat.json")))


def _step_views(steps: Sequence[Mapping[str, Any]], frames: Sequence[AnnotatedFrame], base: Path) -> list[StepView]:
    views, previous, previous_index = [], "", 0
    for step, frame in zip(steps, frames, strict=True):
        terminal = _plain(str(step.get("terminal") or ""))
        shown: str | None
        if terminal and terminal == previous:
            shown, note = None, f"terminal unchanged since step {previous_index}"
        else:
            shown, note = clip(terminal) if terminal else (None, "")
            previous, previous_index = terminal, frame.index
        timings = step.get("timings") if isinstance(step.get("timings"), Mapping) else {}
        views.append(StepView(
            index=frame.index, channel=str(step.get("channel") or "?"),
            action_text=_plain(str(step.get("action_text") or ("reset" if step.get("action") is None else ""))),
            action_error=None if step.get("action_error") is None else _plain(str(step["action_error"])),
            reward=step.get("reward"), exit_code=step.get("exit_code"), terminal=shown, terminal_note=note,
            timings=" · ".join(f"{k} {v:.2f}s" for k, v in timings.items() if isinstance(v, int | float)),
            image=_href(frame.path, base), image_size=frame.size,
            frame_href=None if frame.source is None else _href(frame.source, base)))
    return views


def _messages(raw: Any) -> list[tuple[str, str]]:
    """(role, text) of an LLM transcript; images become a marker so the page stays small."""
    if not isinstance(raw, list):
        return []
    out = []
    for message in raw:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if isinstance(content, list):
            text = "\n".join(_part_text(part) for part in content)
        else:
            text = "" if content is None else str(content)
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, Mapping) else None
            function = function if isinstance(function, Mapping) else {}
            text += f"\n→ {function.get('name', '?')}({function.get('arguments', '')})"
        out.append((str(message.get("role", "?")), clip(_plain(text.strip()), TEXT_CHARS)[0]))
    return out


def _chat(raw: Any) -> list[tuple[str, str, str]]:
    """(sender, event, text) of the simulated user's transcript (chat.json, a list of records)."""
    if not isinstance(raw, list):
        return []
    return [(str(r.get("from", "?")), str(r.get("event", "")), clip(_plain(str(r.get("text", ""))), TEXT_CHARS)[0])
            for r in raw if isinstance(r, Mapping)]


def _part_text(part: Any) -> str:
    kind = str(part.get("type", "")) if isinstance(part, Mapping) else ""
    if kind == "text":
        return str(part.get("text", ""))
    return "[image]" if "image" in kind else _pretty(part)


def _domains(records: Iterable[Mapping[str, Any]]) -> list[str]:
    return sorted({str(r.get("domain")) for r in records if r.get("domain")})


def _read_json(path: Path) -> Any:
    """Parsed JSON, or None when the file is missing or half-written."""
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, json.JSONDecodeError):
        return None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _plain(text: str) -> str:
    """Terminal text without ANSI escapes and NULs, with lone surrogates replaced (the page is UTF-8)."""
    return _ANSI.sub("", text).replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def _href(path: Path, base: Path) -> str:
    return quote(os.path.relpath(Path(path).resolve(), base).replace(os.sep, "/"))


def _anchor(task: str, k: int) -> str:
    return "ep-" + re.sub(r"[^A-Za-z0-9_-]", "_", task) + f"-{k}"


def _pct(value: Any) -> str:
    return f"{float(value) * 100:.1f}%" if isinstance(value, int | float) else "—"


def _num(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—" if value is None else str(value)
    return f"{value:.{digits}f}"


def _pretty(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False, default=str)
