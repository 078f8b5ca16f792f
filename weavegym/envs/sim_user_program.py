"""A simulated user in a chat window: deterministic replies from a script, every event in a transcript.

This file runs inside the guest with the system ``python3``, as an account of its own (see
``simulated_user.py``), so it imports the standard library only, and tkinter only in ``main()``: the host
imports it to validate scripts and to test the matcher without a display. Nothing here is random and
nothing calls a model, so one script and one sequence of agent messages always give the same chat.

The engine's rules, which task authors rely on:

- **Matching.** A topic matches a message when every one of its keyword groups has at least one word or
  phrase in the message. Both sides are compared as word tokens: case-folded, accents dropped,
  punctuation treated as a space; a phrase must appear as consecutive whole words, and a word also
  matches its plain English plural (``copy``/``copies``, ``box``/``boxes``, ``size``/``sizes``; words of
  three letters or more).
- **Replies.** The user answers every matched topic, in script order, one message per topic (so each
  transcript record names the one topic it answers). No match gets the ``fallback`` reply. The user never
  volunteers a topic: a ``hidden`` preference (one the opening leaves out on purpose) reaches the agent
  only as the answer to a message that asks about it.
- **Change of mind.** At most once per run: on the first agent message *after* the message that got
  ``after_topic`` answered, the user first sends ``message`` ("Actually, make it 3 copies instead of 2"),
  then answers that agent message; from then on ``topic`` answers with ``new_reply``. An agent that never
  checks back after the answer never sees it, which is the point of the trigger.
- **Transcript.** One JSON line per event, written with one ``write`` and fsync'd before the window shows
  it: ``{"seq", "t", "from": "user"|"agent", "text", "topics", "event"}``, where ``event`` is one of
  ``EVENTS``. Text over ``MAX_LOGGED_CHARS`` is cut there and the record says ``"truncated": true`` with the
  full length in ``"chars"``.

Usage: ``python3 sim_user_program.py --script PATH --transcript PATH --title TITLE``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

FALLBACK = "I'm not sure what you mean - could you ask about something specific?"
DEFAULT_NAME = "Alex"
EVENTS = ("opening", "question", "answer", "fallback", "change_of_mind")
MAX_LOGGED_CHARS = 4000
WINDOW_SIZE = (720, 480)
FONT = ("DejaVu Sans", 13)
BOLD = ("DejaVu Sans", 13, "bold")
# How far above the window's bottom edge the message line's centre is (10 px padding, then half the row of
# entry and button at this font): what an oracle clicks to focus the chat (simulated_user.entry_point).
ENTRY_FROM_BOTTOM = 28

Record = dict[str, Any]


# ---- matching ----------------------------------------------------------------------------------------------

def words(text: str) -> list[str]:
    """The word tokens matching compares: case-folded, accents dropped, anything but letters and digits a gap."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return re.findall(r"[^\W_]+", plain)


def _plurals(word: str) -> tuple[str, ...]:
    if len(word) < 3:  # "i"/"is", "bu"/"bus": short words would match too much
        return ()
    forms = (word + "s", word + "es")
    return (*forms, word[:-1] + "ies") if word.endswith("y") else forms


def _same_word(a: str, b: str) -> bool:
    return a == b or a in _plurals(b) or b in _plurals(a)


def has_phrase(tokens: Sequence[str], phrase: str) -> bool:
    """``phrase`` appears in ``tokens`` as consecutive whole words (each plural-tolerant)."""
    wanted = words(phrase)
    if not wanted:
        return False
    span = len(wanted)
    return any(all(_same_word(tokens[i + j], wanted[j]) for j in range(span)) for i in range(len(tokens) - span + 1))


def matches(topic: Record, text: str) -> bool:
    """Every keyword group of the topic has one of its words or phrases in ``text``."""
    tokens = words(text)
    return all(any(has_phrase(tokens, phrase) for phrase in group) for group in topic["keywords"])


# ---- scripts -----------------------------------------------------------------------------------------------

def _text_problem(value: Any, what: str) -> list[str]:
    return [] if isinstance(value, str) and value.strip() else [f"{what} must be a non-empty string"]


def check_topic(topic: Any) -> list[str]:
    """What is wrong with one topic (empty when nothing is)."""
    if not isinstance(topic, dict):
        return ["a topic must be an object"]
    name = topic.get("name")
    problems = _text_problem(name, "a topic's name") + _text_problem(topic.get("reply"), f"topic {name!r}'s reply")
    groups = topic.get("keywords")
    if not isinstance(groups, list) or not groups:
        return [*problems, f"topic {name!r} needs at least one keyword group"]
    for group in groups:
        if not isinstance(group, list) or not group:
            problems.append(f"topic {name!r} has an empty keyword group")
        elif not all(isinstance(phrase, str) and words(phrase) for phrase in group):
            problems.append(f"topic {name!r} has a keyword without a word in it: {group!r}")
    if not isinstance(topic.get("hidden", False), bool):
        problems.append(f"topic {name!r}: hidden must be true or false")
    return problems


def check_script(script: Any) -> list[str]:
    """What is wrong with a script (empty when nothing is); the host and the program share this one check."""
    if not isinstance(script, dict):
        return ["a script must be a JSON object"]
    problems = _text_problem(script.get("opening"), "opening") + _text_problem(script.get("fallback", FALLBACK),
                                                                              "fallback")
    problems += _text_problem(script.get("name", DEFAULT_NAME), "name")
    topics = script.get("topics")
    if not isinstance(topics, list) or not topics:
        return [*problems, "a script needs at least one topic"]
    for topic in topics:
        problems += check_topic(topic)
    if problems:
        return problems
    by_name = {t["name"]: t for t in topics}
    if len(by_name) != len(topics):
        problems.append("topic names must be unique")
    change = script.get("change_of_mind")
    volunteered = [script["opening"], script.get("fallback", FALLBACK)]
    if change is not None:
        if not isinstance(change, dict):
            return [*problems, "change_of_mind must be an object or null"]
        for key in ("after_topic", "topic", "message", "new_reply"):
            problems += _text_problem(change.get(key), f"change_of_mind.{key}")
        for key in ("after_topic", "topic"):
            if change.get(key) not in by_name:
                problems.append(f"change_of_mind.{key} names no topic: {change.get(key)!r}")
        target = by_name.get(change.get("topic"), {})
        if target.get("hidden") and change.get("after_topic") != target["name"]:
            problems.append("a change of mind about a hidden topic must follow that topic's own answer")
        volunteered.append(str(change.get("message", "")))
    for topic in topics:  # a hidden answer must not leak through what the user says unasked
        if topic.get("hidden"):
            said = [text for text in volunteered if topic["reply"].casefold() in text.casefold()]
            if said:
                problems.append(f"hidden topic {topic['name']!r}'s reply is given away in {said[0][:60]!r}")
    return problems


def load_script(path: str) -> Record:
    with open(path, encoding="utf-8") as handle:
        script = json.load(handle)
    problems = check_script(script)
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return script


# ---- the conversation --------------------------------------------------------------------------------------

def clean(text: str) -> str:
    """Surrogate pairs joined, lone surrogates replaced: Tk can hand either over, and UTF-8 takes neither."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class Conversation:
    """The user's side of the chat. Every record goes to ``sink`` (the transcript) before it is returned."""

    def __init__(self, script: Record, sink: Callable[[Record], None], clock: Callable[[], float] = time.time
                 ) -> None:
        self.script = script
        self.name = script.get("name", DEFAULT_NAME)
        self._sink = sink
        self._clock = clock
        self._seq = 0
        self._answered: set[str] = set()
        self.changed_mind = False

    def _emit(self, sender: str, text: str, event: str, topics: list[str]) -> Record:
        self._seq += 1
        record = {"seq": self._seq, "t": self._clock(), "from": sender, "text": text, "topics": topics,
                  "event": event}
        self._sink(record)
        return record

    def open(self) -> list[Record]:
        return [self._emit("user", self.script["opening"], "opening", [])]

    def _reply(self, topic: Record) -> str:
        change = self.script.get("change_of_mind")
        if self.changed_mind and change and change["topic"] == topic["name"]:
            return change["new_reply"]
        return topic["reply"]

    def send(self, text: str) -> list[Record]:
        """The agent's message and what the user says to it; an empty message is ignored (no records)."""
        text = clean(text).strip()
        if not text:
            return []
        hits = [t for t in self.script["topics"] if matches(t, text)]
        out = [self._emit("agent", text, "question", [t["name"] for t in hits])]
        change = self.script.get("change_of_mind")
        if change and not self.changed_mind and change["after_topic"] in self._answered:
            self.changed_mind = True
            out.append(self._emit("user", change["message"], "change_of_mind", [change["topic"]]))
        for topic in hits:
            out.append(self._emit("user", self._reply(topic), "answer", [topic["name"]]))
        if not hits:
            out.append(self._emit("user", self.script.get("fallback", FALLBACK), "fallback", []))
        self._answered.update(t["name"] for t in hits)
        return out


class Transcript:
    """The append-only JSON-lines file: one ``write`` and one fsync per record, so nothing shown is lost."""

    def __init__(self, path: str) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        self._fd = os.open(path, flags, 0o600)

    def write(self, record: Record) -> None:
        logged = dict(record)
        if len(logged["text"]) > MAX_LOGGED_CHARS:
            logged.update(text=logged["text"][:MAX_LOGGED_CHARS], truncated=True, chars=len(record["text"]))
        data = (json.dumps(logged, ensure_ascii=False) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self._fd, data):]
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


# ---- the window --------------------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--script", required=True)
    parser.add_argument("--transcript", required=True)
    parser.add_argument("--title", required=True)
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except (OSError, ValueError) as exc:
        print(f"sim_user_program: {exc}", file=sys.stderr)
        return 2
    import tkinter as tk

    transcript = Transcript(args.transcript)
    chat = Conversation(script, transcript.write)
    root = tk.Tk()
    # Tk's `send` runs Tcl sent by any client of the display (it deems SI:localuser access lists secure): the
    # desktop account could make this account read the script. Without the command Tk serves no sends.
    root.tk.call("rename", "send", "")
    root.title(args.title)
    root.geometry(f"{WINDOW_SIZE[0]}x{WINDOW_SIZE[1]}")
    root.protocol("WM_DELETE_WINDOW", lambda: None)  # the user stays in the loop: closing the chat does nothing
    bottom = tk.Frame(root, padx=10, pady=10)
    bottom.pack(side="bottom", fill="x")
    entry = tk.Entry(bottom, font=FONT)
    entry.pack(side="left", fill="x", expand=True)
    history = tk.Text(root, font=FONT, wrap="word", padx=10, pady=8, bg="white", fg="#111111", state="disabled",
                      relief="flat")
    bar = tk.Scrollbar(root, command=history.yview)
    history.configure(yscrollcommand=bar.set)
    bar.pack(side="right", fill="y")
    history.pack(side="top", fill="both", expand=True)
    history.tag_configure("user", font=BOLD, foreground="#0b4f8a")
    history.tag_configure("agent", font=BOLD, foreground="#2d6a1f")

    def show(records: list[Record]) -> None:
        history.configure(state="normal")
        for record in records:
            label = f"{chat.name}: " if record["from"] == "user" else "You: "
            history.insert("end", label, record["from"])
            try:
                history.insert("end", record["text"] + "\n\n")
            except tk.TclError:  # a Tk built without characters beyond the BMP
                history.insert("end", re.sub("[\U00010000-\U0010ffff]", "\ufffd", record["text"]) + "\n\n")
        history.configure(state="disabled")
        history.see("end")

    def send(_event: object = None) -> str:
        text = entry.get()
        entry.delete(0, "end")
        show(chat.send(text))
        return "break"

    tk.Button(bottom, text="Send", font=FONT, command=send).pack(side="right", padx=(8, 0))
    entry.bind("<Return>", send)
    entry.bind("<KP_Enter>", send)
    show(chat.open())
    entry.focus_set()
    root.mainloop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
