"""A user in the loop: a scripted requester the agent chats with on the desktop, and the checker's view of it.

A task that puts one on the desktop gives the agent an underspecified request (the script's opening) and
scores whether the agent asked for what it needed (a ``hidden`` preference is answered only when asked)
and noticed a change of mind. The chat is a Tk window run by ``sim_user_program.py`` (whose docstring has
the engine's rules) under a third account, ``SIM_USER``, so that neither episode account can read the
script, which holds the hidden answers, or write the transcript the checker trusts:

- the program is root's, 0644, in a root folder: anyone may read it, it holds no answers;
- the script (0600) and the transcript (0600, made by the program) live in ``STATE_DIR``, 0700 and the
  sim account's; root (setup, and the checker through the probe) reads them;
- argv and the environment name only paths and the title, since ``ps`` shows them to every account.

The paths sit under ``/opt/weavegym-sim`` and ``/var/lib/weavegym-sim``, which the "weavegym internals"
forbidden pattern already covers: shell code that goes looking there is flagged.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError, WeaveGymError
from weavegym.envs import sim_user_program as program
from weavegym.envs.setup_context import LAUNCH_MARKER, SetupContext
from weavegym.evaluators.probes import Probe
from weavegym.evaluators.scoring import Verdict
from weavegym.machine.guest_client import WindowInfo

SIM_USER = "requester"
SIM_HOME = f"/home/{SIM_USER}"
PROGRAM_DIR = "/opt/weavegym-sim"
PROGRAM = f"{PROGRAM_DIR}/sim_user_program.py"
STATE_DIR = "/var/lib/weavegym-sim"
SCRIPT = f"{STATE_DIR}/script.json"
TRANSCRIPT = f"{STATE_DIR}/transcript.jsonl"
MAX_TRANSCRIPT_BYTES = 8 << 20  # a long episode of 4000-character messages stays far below
_SHOWN = 120  # characters of a message quoted in evidence


class TranscriptError(WeaveGymError, ValueError):
    """The transcript holds a line that is not a record: a clause that reads it fails, with this as evidence."""


def _problems(found: list[str], what: str) -> None:
    if found:
        raise TaskError(f"{what}: " + "; ".join(found))


@dataclass(frozen=True)
class Topic:
    """Something the agent may ask about: a message matches when every keyword group has one of its words."""

    name: str
    keywords: tuple[tuple[str, ...], ...]
    reply: str
    hidden: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "keywords", tuple(tuple(group) for group in self.keywords))
        _problems(program.check_topic(self.to_dict()), f"topic {self.name!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "keywords": [list(g) for g in self.keywords], "reply": self.reply,
                "hidden": self.hidden}


@dataclass(frozen=True)
class ChangeOfMind:
    """Once ``after_topic`` was answered, the agent's next message gets ``message`` first; ``topic`` then
    answers ``new_reply``."""

    after_topic: str
    topic: str
    message: str
    new_reply: str


@dataclass(frozen=True)
class UserScript:
    """What the simulated user knows and says; checked as a whole on construction (TaskError when broken)."""

    opening: str
    topics: tuple[Topic, ...]
    fallback: str = program.FALLBACK
    change_of_mind: ChangeOfMind | None = None
    name: str = program.DEFAULT_NAME  # how the chat labels the user

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(self.topics))
        _problems(program.check_script(self.to_dict()), "simulated user script")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "opening": self.opening, "fallback": self.fallback,
                "topics": [t.to_dict() for t in self.topics],
                "change_of_mind": None if self.change_of_mind is None else asdict(self.change_of_mind)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1)

    def topic(self, name: str) -> Topic:
        found = next((t for t in self.topics if t.name == name), None)
        if found is None:
            raise TaskError(f"simulated user script has no topic {name!r}")
        return found


# ---- setup -------------------------------------------------------------------------------------------------

def entry_point(window: WindowInfo) -> tuple[int, int]:
    """Where to click to put the focus in the chat's message line."""
    return window.x + window.width // 3, window.y + window.height - program.ENTRY_FROM_BOTTOM


def _drawn(ctx: SetupContext, window: WindowInfo) -> bool:
    """The history shows dark text: a window is mapped before it is drawn, and a snapshot must not catch that."""
    region = (window.x, window.y, window.width, max(1, window.height - 60))
    image = ctx.client.screenshot(region=region, hide_cursor=True).image  # the pointer is dark too
    return int((image.max(axis=2) < 90).sum()) > 40


def start_simulated_user(ctx: SetupContext, script: UserScript, *, title: str, timeout: float = 120.0
                         ) -> WindowInfo:
    """Put the chat window on the desktop, run by ``SIM_USER``; returns it once it shows the opening.

    The account is created when missing, so this refuses a machine without weavegym's separate accounts: the
    local backend's "guest" is the host itself, where a task must not add a login.
    """
    if not ctx.separate_accounts:
        raise TaskError(f"{ctx.task_id} setup: a simulated user needs a guest with separate accounts (it adds "
                        f"the {SIM_USER!r} account); this machine runs both channels as one account")
    ctx.run(f"id -u {SIM_USER} >/dev/null 2>&1 || useradd --create-home --shell /usr/sbin/nologin {SIM_USER}")
    ctx.run(["install", "-d", "-m", "0755", "-o", "root", "-g", "root", PROGRAM_DIR])
    ctx.write_file(PROGRAM, ctx.fixture(__package__, "sim_user_program.py"), owner="root")
    ctx.run(["install", "-d", "-m", "0700", "-o", SIM_USER, "-g", SIM_USER, STATE_DIR])
    ctx.run(["rm", "-f", "--", TRANSCRIPT])
    # Not write_file, which would put the file in the shared group: the script is the sim account's alone.
    ctx.client.upload(script.to_json().encode(), SCRIPT, mode=0o600, owner=SIM_USER)
    ctx.grant_desktop_access(SIM_USER)
    argv = shlex.join(["python3", PROGRAM, "--script", SCRIPT, "--transcript", TRANSCRIPT, "--title", title])
    line = f"runuser -u {SIM_USER} -- env DISPLAY=:0 HOME={SIM_HOME} {LAUNCH_MARKER} {argv}"
    ctx.launch_gui(line.replace("{", "{{").replace("}", "}}"), name="simulated-user")  # the title is not a template
    window = ctx.wait_window(f"^{re.escape(title)}$", timeout=timeout)

    def opened() -> bool:
        turns = parse_transcript(ctx.client.download(TRANSCRIPT, max_bytes=MAX_TRANSCRIPT_BYTES))
        return bool(turns) and turns[0].event == "opening" and _drawn(ctx, window)

    try:
        wait_for(opened, timeout, what="the simulated user's opening message", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    return window


def move_chat(ctx: SetupContext, chat: WindowInfo, x: int, y: int, timeout: float = 60.0) -> WindowInfo:
    """Move the chat window to (x, y) and return it once the window manager has put it there.

    The window manager centres a new window, so the chat lands on top of the task's own window, and an
    oracle that clicks the chat would raise it over the pixels it must read: tasks park it beside theirs.
    """
    ctx.run(["env", "DISPLAY=:0", "xdotool", "windowmove", str(chat.id), str(x), str(y)], user=ctx.user)

    def moved() -> WindowInfo | None:  # the frame's decoration may shift the client a few pixels
        found = next((w for w in ctx.client.list_windows(timeout=10)[0] if w.id == chat.id), None)
        return found if found is not None and found.x >= x - 16 else None

    try:
        return wait_for(moved, timeout, what=f"the chat moved to x={x}", max_poll=0.5)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None


def move_chat_beside(ctx: SetupContext, chat: WindowInfo, window: Sequence[int]) -> WindowInfo:
    """Park the chat at the screen's right, clear of ``window`` ([x, y, width, height]), centred vertically."""
    x = max(window[0] + window[2] + 24, ctx.screen[0] - chat.width - 8)
    return move_chat(ctx, chat, x, max(0, (ctx.screen[1] - chat.height) // 2))


# ---- the transcript ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Turn:
    """One transcript record. ``sender`` is the record's "from"; ``chars`` is the full length of a cut text."""

    seq: int
    t: float
    sender: str
    text: str
    topics: tuple[str, ...]
    event: str
    truncated: bool = False
    chars: int = 0

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Turn:
        turn = cls(seq=int(record["seq"]), t=float(record["t"]), sender=str(record["from"]),
                   text=str(record["text"]), topics=tuple(str(n) for n in record["topics"]),
                   event=str(record["event"]), truncated=bool(record.get("truncated", False)),
                   chars=int(record.get("chars", 0)))
        if turn.sender not in ("user", "agent") or turn.event not in program.EVENTS:
            raise ValueError(f"unknown sender {turn.sender!r} or event {turn.event!r}")
        return turn

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"seq": self.seq, "t": self.t, "from": self.sender, "text": self.text,
                                  "topics": list(self.topics), "event": self.event}
        if self.truncated:
            record.update(truncated=True, chars=self.chars)
        return record


def parse_transcript(data: bytes) -> list[Turn]:
    """Every complete line's record. An unterminated last line is a write cut short and is left out."""
    lines = data.split(b"\n")[:-1]
    turns = []
    for number, line in enumerate(lines, 1):
        try:
            turns.append(Turn.from_record(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            raise TranscriptError(f"transcript line {number} is not a record ({exc}): "
                                  f"{line[:80]!r}") from None
    return turns


def read_transcript(probe: Probe, path: str = TRANSCRIPT) -> list[Turn]:
    """The chat so far, read as root through the probe; [] when there is no transcript."""
    data = probe.read_bytes(path, max_bytes=MAX_TRANSCRIPT_BYTES)
    return [] if data is None else parse_transcript(data)


def transcript_for_info(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """The records as the transcript holds them, for ``info["transcript"]`` at the episode's end."""
    return [turn.to_record() for turn in turns]


# ---- checker helpers ---------------------------------------------------------------------------------------

def _quote(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")


def _questions(turns: Sequence[Turn], topic: str) -> list[Turn]:
    return [t for t in turns if t.event == "question" and topic in t.topics]


def _none_asked(turns: Sequence[Turn], topic: str) -> Verdict:
    sent = [t for t in turns if t.event == "question"]
    last = f"; the last was {_quote(sent[-1].text)}" if sent else ""
    return Verdict.failed(f"none of the agent's {len(sent)} message(s) asked about {topic!r}{last}")


def asked(turns: Sequence[Turn], topic: str) -> Verdict:
    """The agent sent a message that matched ``topic`` (and so got its answer).

    Matching is by keywords, so a statement that names the topic ("printing 2 copies now") counts as asking:
    it, too, gets the answer, which is what a task scores.
    """
    hits = _questions(turns, topic)
    if not hits:
        return _none_asked(turns, topic)
    return Verdict.satisfied(f"the agent asked about {topic!r} in message #{hits[0].seq}: {_quote(hits[0].text)}")


def asked_before(turns: Sequence[Turn], topic: str, when_epoch: float) -> Verdict:
    """The agent asked about ``topic`` before ``when_epoch`` (guest clock, e.g. a deliverable's mtime)."""
    hits = _questions(turns, topic)
    if not hits:
        return _none_asked(turns, topic)
    first = hits[0]
    gap = when_epoch - first.t
    when = f"{gap:.1f} s before" if gap > 0 else f"{-gap:.1f} s after"
    return Verdict.check(gap > 0, f"the agent first asked about {topic!r} {when} the time checked, in message "
                                  f"#{first.seq}: {_quote(first.text)}")


def first_handover(probe: Probe, paths: Iterable[str], record: Mapping[str, Any] | None) -> float | None:
    """When the work was first handed over (guest clock): the earliest of the deliverables' last writes and the
    GUI record's ``submitted_at``; None when nothing was handed over. A question counts only before this."""
    times = [stat.mtime for stat in (probe.stat(path, follow_symlinks=False) for path in paths) if stat is not None]
    if record is not None and isinstance(record.get("submitted_at"), (int, float)):
        times.append(float(record["submitted_at"]))
    return min(times) if times else None


def asked_in_time(turns: Sequence[Turn], topic: str, when: float | None, nothing: str) -> Verdict:
    """``topic`` was asked before ``when``; ``nothing`` says what did not happen when nothing was delivered."""
    if when is None:
        return Verdict.failed(f"{nothing}, so {topic!r} was not asked before it")
    return asked_before(turns, topic, when)


def asked_before_delivery(topic: str, delivered_at: Callable[[Probe, Mapping[str, Any]], float | None],
                          nothing: str) -> Callable[[Probe, Mapping[str, Any]], Verdict]:
    """A clause check: the chat asked about ``topic`` before ``delivered_at`` (e.g. via first_handover)."""
    def check(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
        return asked_in_time(read_transcript(probe), topic, delivered_at(probe, truth), nothing)
    return check


def heard_change(probe: Probe, _truth: Mapping[str, Any]) -> Verdict:
    """A clause check: the user's change of mind was sent (see changed_mind)."""
    return changed_mind(read_transcript(probe))


def changed_mind(turns: Sequence[Turn]) -> Verdict:
    """The user's change of mind was sent (the agent checked back after the triggering answer)."""
    change = next((t for t in turns if t.event == "change_of_mind"), None)
    if change is None:
        return Verdict.failed(f"the user never changed their mind ({len(turns)} records; the agent did not "
                              "check back after the triggering answer)")
    trigger = next((t for t in reversed(turns) if t.event == "question" and t.seq < change.seq), None)
    said = _quote(trigger.text) if trigger else "nothing"
    return Verdict.satisfied(f"the user changed their mind in record #{change.seq} ({_quote(change.text)}) after "
                             f"the agent said {said}")
