"""The simulated user: its matcher and conversation rules (unit), its chat window on a real Xvfb driven by the
real agent's X input (xvfb), and its account separation in a real VM (vm).

The VM test boots the `base` image (`make image`); the others need only Xvfb and the venv's tkinter.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.core.trajectory import Trajectory
from weavegym.envs import sim_user_program as program
from weavegym.envs.setup_context import SetupContext
from weavegym.envs.simulated_user import (
    PROGRAM,
    SCRIPT,
    SIM_USER,
    STATE_DIR,
    TRANSCRIPT,
    ChangeOfMind,
    Topic,
    TranscriptError,
    Turn,
    UserScript,
    asked,
    asked_before,
    changed_mind,
    entry_point,
    parse_transcript,
    read_transcript,
    start_simulated_user,
    transcript_for_info,
)
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.weave_env import WeaveEnv
from weavegym.evaluators import Clause, Verdict
from weavegym.evaluators.channel_rules import DesktopAccessUnchanged
from weavegym.evaluators.probes import Probe
from weavegym.evaluators.scoring import Outcome
from weavegym.evaluators.trajectory_rules import RuleContext
from weavegym.machine.backends.libvirt_vm import LibvirtConfig, LibvirtVM
from weavegym.machine.guest_client import GuestClient, WindowInfo
from weavegym.testing.local_backend import LocalBackend
from weavegym.testing.xvfb import XvfbDisplay

HIDDEN = "Landscape A4, stapled at the top left."
SCRIPT_ = UserScript(
    opening="Hi! Could you print the quarterly report for the board meeting?",
    topics=(
        Topic("copies", (("copies", "how many"),), "Two copies, please."),
        Topic("paper", (("paper", "sheet", "page"), ("size", "format", "orientation")), HIDDEN, hidden=True),
        Topic("deadline", (("when", "deadline", "by what time"),), "By 3 pm today."),
    ),
    change_of_mind=ChangeOfMind(after_topic="copies", topic="copies",
                                message="Actually, make it 3 copies instead of 2.", new_reply="Three copies, please."),
)
TITLE = "Chat with Alex - print request"


class Recorder:
    """A transcript sink for the engine alone, with a clock that ticks one second per record."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.now = 1000.0

    def clock(self) -> float:
        self.now += 1.0
        return self.now

    def chat(self, script: UserScript = SCRIPT_) -> program.Conversation:
        return program.Conversation(script.to_dict(), self.records.append, clock=self.clock)


def said(records: list[dict]) -> list[tuple[str, str, list[str]]]:
    return [(r["event"], r["text"], r["topics"]) for r in records]


# ---- matching ----------------------------------------------------------------------------------------------

def test_words_fold_case_accents_and_punctuation() -> None:
    assert program.words("Ça va? PHOTO-copies, naïve_Straße 42!") == ["ca", "va", "photo", "copies", "naive",
                                                                      "strasse", "42"]


@pytest.mark.parametrize(("text", "expected"), [
    ("How many copies?", True),
    ("HOW MANY do you want", True),
    ("how-many, exactly", True),  # punctuation is a gap
    ("how  many", True),
    ("many how", False),  # a phrase keeps its word order
    ("one copy or two", True),  # singular of the keyword "copies"
    ("cópiès", True),  # accents
    ("photocopiesx needed", False),  # word boundaries
    ("photocopies needed", False),
    ("copiesx", False),
    ("", False),
])
def test_a_keyword_group_matches_whole_words_of_any_case_accent_or_plural(text: str, expected: bool) -> None:
    assert program.matches(SCRIPT_.topic("copies").to_dict(), text) is expected


@pytest.mark.parametrize(("text", "expected"), [
    ("What paper size?", True),
    ("Which PAPER do you want?", False),  # only one of the two groups
    ("sheets, and which format", True),
    ("size of the pages", True),
    ("papersize", False),
    ("portrait or landscape orientation for the sheet?", True),
])
def test_every_keyword_group_must_match(text: str, expected: bool) -> None:
    assert program.matches(SCRIPT_.topic("paper").to_dict(), text) is expected


@pytest.mark.parametrize(("word", "other", "expected"), [
    ("box", "boxes", True), ("size", "sizes", True), ("city", "cities", True), ("copies", "copy", True),
    ("bus", "bu", False), ("is", "i", False), ("new", "news", True), ("cat", "cast", False), ("copy", "copie", False),
])
def test_plural_tolerance_is_plain_english_plurals_only(word: str, other: str, expected: bool) -> None:
    assert program.has_phrase(program.words(other), word) is expected


# ---- the conversation --------------------------------------------------------------------------------------

def test_a_hidden_preference_is_given_only_to_the_question_that_asks_for_it() -> None:
    rec = Recorder()
    chat = rec.chat()
    assert said(chat.open()) == [("opening", SCRIPT_.opening, [])]
    chat.send("Sure, I'll print it.")
    chat.send("How many copies do you need?")
    chat.send("Anything else about the print job I should know?")
    assert not any(HIDDEN in r["text"] for r in rec.records if r["from"] == "user")
    out = chat.send("Which paper size should I use?")
    assert said(out) == [("question", "Which paper size should I use?", ["paper"]), ("answer", HIDDEN, ["paper"])]
    assert [r["text"] for r in rec.records if HIDDEN in r["text"]] == [HIDDEN]


def test_several_topics_in_one_message_are_answered_one_message_each_in_script_order() -> None:
    rec = Recorder()
    chat = rec.chat()
    chat.open()
    out = chat.send("By when do you need it, on what paper format, and how many copies?")
    assert said(out) == [
        ("question", "By when do you need it, on what paper format, and how many copies?",
         ["copies", "paper", "deadline"]),
        ("answer", "Two copies, please.", ["copies"]),
        ("answer", HIDDEN, ["paper"]),
        ("answer", "By 3 pm today.", ["deadline"]),
    ]
    assert [r["from"] for r in out] == ["agent", "user", "user", "user"]


def test_a_message_matching_nothing_gets_the_fallback_and_an_empty_one_nothing() -> None:
    rec = Recorder()
    chat = rec.chat()
    chat.open()
    assert chat.send("   ") == []
    assert said(chat.send("Hello there")) == [("question", "Hello there", []),
                                              ("fallback", program.FALLBACK, [])]
    assert program.FALLBACK == "I'm not sure what you mean - could you ask about something specific?"
    assert [r["seq"] for r in rec.records] == [1, 2, 3]


def test_the_change_of_mind_comes_once_on_the_message_after_the_answer_and_sticks() -> None:
    rec = Recorder()
    chat = rec.chat()
    chat.open()
    assert said(chat.send("How many copies?"))[1:] == [("answer", "Two copies, please.", ["copies"])]
    assert not chat.changed_mind  # the answering message itself does not trigger it
    out = chat.send("Great, anything else?")
    assert said(out) == [("question", "Great, anything else?", []),
                         ("change_of_mind", "Actually, make it 3 copies instead of 2.", ["copies"]),
                         ("fallback", program.FALLBACK, [])]
    assert said(chat.send("So how many copies then?"))[1:] == [("answer", "Three copies, please.", ["copies"])]
    for text in ("How many copies?", "ok", "copies?"):
        chat.send(text)
    assert [r["event"] for r in rec.records].count("change_of_mind") == 1
    assert [r["text"] for r in rec.records if r["event"] == "answer"][-1] == "Three copies, please."


def test_no_change_of_mind_without_the_trigger_topic() -> None:
    rec = Recorder()
    chat = rec.chat()
    chat.open()
    for text in ("When is it due?", "What paper size?", "Thanks", "Bye"):
        chat.send(text)
    assert "change_of_mind" not in [r["event"] for r in rec.records]


def test_the_transcript_file_holds_every_record_in_order(tmp_path: Path) -> None:
    path = tmp_path / "transcript.jsonl"
    transcript = program.Transcript(str(path))
    chat = program.Conversation(SCRIPT_.to_dict(), transcript.write)
    shown = chat.open() + chat.send("How many copies?") + chat.send("thanks") + chat.send("paper size?")
    transcript.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == len(shown) + 1 == 9
    records = [json.loads(line) for line in lines[:-1]]
    assert records == shown
    assert [r["seq"] for r in records] == list(range(1, 9))
    assert all(set(r) == {"seq", "t", "from", "text", "topics", "event"} for r in records)
    assert all(a["t"] <= b["t"] for a, b in itertools.pairwise(records))
    assert [r["event"] for r in records] == ["opening", "question", "answer", "question", "change_of_mind",
                                             "fallback", "question", "answer"]
    assert path.stat().st_mode & 0o777 == 0o600
    turns = parse_transcript(path.read_bytes())
    assert transcript_for_info(turns) == records
    assert turns[2] == Turn(3, records[2]["t"], "user", "Two copies, please.", ("copies",), "answer")


def test_a_10_kb_unicode_message_is_logged_cut_and_marked(tmp_path: Path) -> None:
    path = tmp_path / "transcript.jsonl"
    transcript = program.Transcript(str(path))
    chat = program.Conversation(SCRIPT_.to_dict(), transcript.write)
    chat.open()
    text = ("Wie viele Kopien? 你好 😀 ½ — how many copies " * 300)[:10_240]
    out = chat.send(text + "\ud83d")  # and a lone surrogate, as Tk can hand over
    transcript.close()
    assert out[0]["text"] == text + "\ufffd" and out[0]["topics"] == ["copies"]
    logged = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert logged[1]["text"] == text[:program.MAX_LOGGED_CHARS]
    assert (logged[1]["truncated"], logged[1]["chars"]) == (True, 10_241)
    assert logged[2]["text"] == "Two copies, please." and "truncated" not in logged[2]
    turn = parse_transcript(path.read_bytes())[1]
    assert (turn.truncated, turn.chars, len(turn.text)) == (True, 10_241, program.MAX_LOGGED_CHARS)


# ---- scripts -----------------------------------------------------------------------------------------------

def test_the_script_round_trips_through_json_and_the_programs_loader(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(SCRIPT_.to_json(), encoding="utf-8")
    assert program.load_script(str(path)) == SCRIPT_.to_dict()
    assert SCRIPT_.to_dict()["change_of_mind"] == {"after_topic": "copies", "topic": "copies",
                                                   "message": "Actually, make it 3 copies instead of 2.",
                                                   "new_reply": "Three copies, please."}


@pytest.mark.parametrize(("build", "needle"), [
    (lambda: Topic("x", (), "r"), "at least one keyword group"),
    (lambda: Topic("x", ((),), "r"), "empty keyword group"),
    (lambda: Topic("x", (("?!",),), "r"), "without a word"),
    (lambda: Topic("", (("a",),), "r"), "name must be"),
    (lambda: Topic("x", (("a",),), " "), "reply must be"),
    (lambda: UserScript("hi", ()), "at least one topic"),
    (lambda: UserScript("", (Topic("a", (("a",),), "r"),)), "opening must be"),
    (lambda: UserScript("hi", (Topic("a", (("a",),), "r"), Topic("a", (("b",),), "s"))), "unique"),
    (lambda: UserScript("hi", (Topic("a", (("a",),), "r"),), change_of_mind=ChangeOfMind("b", "a", "m", "n")),
     "after_topic names no topic"),
    (lambda: UserScript("hi", (Topic("a", (("a",),), "r"),), change_of_mind=ChangeOfMind("a", "z", "m", "n")),
     "topic names no topic"),
    (lambda: UserScript("Print it on A4 landscape", (Topic("a", (("a",),), "A4 landscape", hidden=True),)),
     "given away"),
    (lambda: UserScript("hi", (Topic("a", (("a",),), "r"), Topic("h", (("h",),), "s", hidden=True)),
                        change_of_mind=ChangeOfMind("a", "h", "m", "n")), "hidden topic must follow"),
])
def test_a_broken_script_raises_task_error(build, needle: str) -> None:
    with pytest.raises(TaskError, match=needle):
        build()


def test_the_program_refuses_a_broken_script_before_opening_a_window(tmp_path: Path, capsys) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"opening": "hi", "topics": [{"name": "a", "keywords": [], "reply": "r"}]}))
    transcript = tmp_path / "t.jsonl"
    assert program.main(["--script", str(path), "--transcript", str(transcript), "--title", "x"]) == 2
    assert "needs at least one keyword group" in capsys.readouterr().err
    assert not transcript.exists()


# ---- the checker's view ------------------------------------------------------------------------------------

def _turns() -> list[Turn]:
    rec = Recorder()
    chat = rec.chat()
    chat.open()
    chat.send("How many copies do you need for the board meeting tomorrow morning, roughly? " + "x" * 200)
    chat.send("ok")
    return [Turn.from_record(r) for r in rec.records]


def test_parse_transcript_drops_a_cut_last_line_and_names_a_corrupt_one() -> None:
    good = b'{"seq": 1, "t": 5.0, "from": "user", "text": "hi", "topics": [], "event": "opening"}\n'
    assert [t.text for t in parse_transcript(good + b'{"seq": 2, "t"')] == ["hi"]
    assert parse_transcript(b"") == []
    with pytest.raises(TranscriptError, match="line 2 is not a record"):
        parse_transcript(good + b"not json\n")
    with pytest.raises(TranscriptError, match="unknown sender"):
        parse_transcript(good.replace(b'"user"', b'"root"'))


def test_asked_quotes_the_matching_message_or_says_none_did() -> None:
    turns = _turns()
    verdict = asked(turns, "copies")
    assert verdict.outcome == Outcome.SATISFIED
    assert verdict.evidence.startswith("the agent asked about 'copies' in message #2: 'How many copies do you")
    assert verdict.evidence.endswith("…'") and len(verdict.evidence) < 220
    missed = asked(turns, "paper")
    assert missed.outcome == Outcome.FAILED
    assert missed.evidence == "none of the agent's 2 message(s) asked about 'paper'; the last was 'ok'"


def test_asked_before_compares_the_first_question_with_a_time() -> None:
    turns = _turns()  # the question is at t=1002
    assert asked_before(turns, "copies", 1010.0).outcome == Outcome.SATISFIED
    late = asked_before(turns, "copies", 1001.5)
    assert late.outcome == Outcome.FAILED and "0.5 s after" in late.evidence
    assert asked_before(turns, "paper", 1e12).outcome == Outcome.FAILED


def test_changed_mind_names_the_message_that_triggered_it() -> None:
    turns = _turns()
    verdict = changed_mind(turns)
    assert verdict.outcome == Outcome.SATISFIED
    assert verdict.evidence == ("the user changed their mind in record #5 ('Actually, make it 3 copies instead of "
                                "2.') after the agent said 'ok'")
    assert changed_mind(turns[:4]).outcome == Outcome.FAILED


# ---- the window on a real display --------------------------------------------------------------------------

@pytest.fixture
def chat_window(xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> Iterator[tuple[WindowInfo, Path]]:
    script, transcript = tmp_path / "script.json", tmp_path / "transcript.jsonl"
    script.write_text(SCRIPT_.to_json(), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, program.__file__, "--script", str(script), "--transcript",
                             str(transcript), "--title", TITLE], env=dict(os.environ, DISPLAY=xvfb.display),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def found() -> WindowInfo | None:
            assert proc.poll() is None, proc.communicate()[0].decode(errors="replace")[-2000:]
            return next((w for w in client.list_windows()[0] if w.title == TITLE), None)

        yield wait_for(found, 30, what="the chat window"), transcript
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _dark(image: np.ndarray) -> int:
    return int((image.max(axis=2) < 90).sum())


def _shot(client: GuestClient, region: tuple[int, int, int, int] | None = None) -> np.ndarray:
    return client.screenshot(region=region, hide_cursor=True).image  # the pointer would count as text


def test_the_chat_window_answers_a_question_typed_through_x(xvfb: XvfbDisplay, client: GuestClient,
                                                            chat_window: tuple[WindowInfo, Path]) -> None:
    window, path = chat_window
    assert (window.width, window.height) == program.WINDOW_SIZE
    history = (window.x, window.y, window.width, window.height - 60)
    before = wait_for(lambda: _dark(img := _shot(client, history)) > 40 and img, 10, what="the opening drawn")
    x, y = entry_point(window)
    frame = _shot(client)
    assert tuple(frame[y, x]) == (255, 255, 255)  # inside the white message line
    assert tuple(frame[window.y + window.height - 5, x]) == (217, 217, 217)  # the grey frame below it
    client.activate_window(window.id)
    client.click(x, y)
    client.key("Return")  # an empty message: ignored, no record
    client.type_text("Which paper size (A4?), and how many copies? Merci, café ☕")
    client.key("Return")
    turns = wait_for(lambda: len(t := parse_transcript(path.read_bytes())) >= 4 and t, 10, what="the answers")
    assert [(t.seq, t.sender, t.event, t.topics, t.text) for t in turns] == [
        (1, "user", "opening", (), SCRIPT_.opening),
        (2, "agent", "question", ("copies", "paper"), "Which paper size (A4?), and how many copies? Merci, café ☕"),
        (3, "user", "answer", ("copies",), "Two copies, please."),
        (4, "user", "answer", ("paper",), HIDDEN),
    ]
    assert read_transcript(Probe(client), str(path)) == turns  # as the checker reads it, through the agent
    assert read_transcript(Probe(client), str(path.with_name("absent.jsonl"))) == []
    # The window shows it: the history gained text (4 lines of it), and the message line was emptied.
    after = wait_for(lambda: _dark(img := _shot(client, history)) > _dark(before) + 400 and img, 10,
                     what="the answers drawn")
    assert not np.array_equal(before, after)
    line = _shot(client, (window.x + 20, y - 8, window.width // 2, 16))
    assert _dark(line) == 0, "the message line must be empty after sending"


def test_the_chat_is_not_scriptable_through_tk_send(xvfb: XvfbDisplay, chat_window: tuple[WindowInfo, Path]) -> None:
    """Tk's send would run any display client's Tcl as the sim account (which can read the hidden answers)."""
    code = "import tkinter; r = tkinter.Tk(); print(json.dumps([r.tk.call('tk', 'appname'), r.tk.call('winfo', " \
           "'interps')]))"
    out = subprocess.run([sys.executable, "-c", "import json; " + code], env=dict(os.environ, DISPLAY=xvfb.display),
                         capture_output=True, text=True, timeout=30, check=True).stdout
    own, interps = json.loads(out)
    assert interps == [own], f"the chat registered a Tk interpreter: {interps}"


def test_the_local_backend_refuses_a_simulated_user_instead_of_adding_an_account_to_the_host() -> None:
    """The local backend's guest is this host: a chat task must fail its reset, not run useradd here."""
    assert subprocess.run(["id", SIM_USER], capture_output=True).returncode != 0, "precondition: no such account"
    env = WeaveEnv(CHAT_TASK, backend=LocalBackend((640, 480)), screen_size=(640, 480), on_env_failure="raise")
    try:
        with pytest.raises(TaskError, match="separate accounts"):
            env.reset(seed=0)
    finally:
        env.close()
    assert subprocess.run(["id", SIM_USER], capture_output=True).returncode != 0, "the host gained the account"


# ---- in a VM: the third account keeps the script and transcript from both episode accounts -----------------

@pytest.fixture(scope="module")
def vm() -> Iterator[LibvirtVM]:
    # Restores the host's booted desktop (`make test-vm` prepares it): the accounts are the subject, not the boot.
    with LibvirtVM(LibvirtConfig(accel="tcg", prepared_states=True)) as machine:
        yield machine


def _rule_context(vm: LibvirtVM) -> RuleContext:
    assert vm.client is not None
    return RuleContext(probe=Probe(vm.client), trajectory=Trajectory("Weave-Test-1", 0, "", started_wall=time.time()),
                       truth={})


@pytest.mark.vm
@pytest.mark.timeout(900)
def test_in_the_guest_only_the_sim_account_and_root_reach_the_script_and_transcript(vm: LibvirtVM) -> None:
    client = vm.client
    assert client is not None
    ctx = SetupContext(client, "Weave-Test-1", 0, (1280, 800))
    try:
        window = start_simulated_user(ctx, SCRIPT_, title=TITLE)
        probe = Probe(client)
        assert [t.event for t in read_transcript(probe)] == ["opening"]
        modes = {path: probe.stat(path) for path in (PROGRAM, STATE_DIR, SCRIPT, TRANSCRIPT)}
        assert {p: (s.owner, s.mode & 0o7777) for p, s in modes.items() if s is not None} == {
            PROGRAM: ("root", 0o644), STATE_DIR: (SIM_USER, 0o700), SCRIPT: (SIM_USER, 0o600),
            TRANSCRIPT: (SIM_USER, 0o600)}
        before = client.download(TRANSCRIPT)
        pid = client.exec(["pgrep", "-u", SIM_USER, "-f", "sim_user_program"]).stdout.split()
        assert len(pid) == 1, pid
        for account in ("workspace", "user"):
            read = client.exec(["cat", SCRIPT], user=account, merge_stderr=True)
            assert read.exit_code == 1 and "Permission denied" in read.stdout and HIDDEN not in read.stdout
            append = client.exec(f"echo forged >> {TRANSCRIPT}; echo rc=$?", user=account, merge_stderr=True)
            assert "rc=1" in append.stdout, append.stdout
            listing = client.exec(["ls", STATE_DIR], user=account)
            assert listing.exit_code == 2
            kill = client.exec(["kill", "-0", pid[0]], user=account)
            assert kill.exit_code == 1, f"{account} can signal the sim user"
            ps = client.exec(["ps", "-eo", "user:12,args"], user=account).stdout
            assert f"{SIM_USER} python3 {PROGRAM} --script {SCRIPT}" in " ".join(ps.split())
            assert HIDDEN not in ps and "Two copies" not in ps  # no answer in argv
        assert client.download(TRANSCRIPT) == before
        # The access list gains the sim account: allowed only when the rule is told about it.
        assert DesktopAccessUnchanged([SIM_USER]).check(_rule_context(vm)) == []
        flags = DesktopAccessUnchanged().check(_rule_context(vm))
        assert [f.confidence for f in flags] == ["high"] and f"SI:localuser:{SIM_USER}" in flags[0].message
        # One question through the desktop, as an agent's GUI actions would send it.
        client.click(*entry_point(window))
        client.type_text("Which paper size do you want?")
        client.key("Return")
        turns = wait_for(lambda: len(t := read_transcript(Probe(client))) >= 3 and t, 60, what="the answer")
        assert [(t.sender, t.event, t.topics, t.text) for t in turns[1:]] == [
            ("agent", "question", ("paper",), "Which paper size do you want?"),
            ("user", "answer", ("paper",), HIDDEN)]
        assert asked(turns, "paper").outcome == Outcome.SATISFIED
    finally:
        for stale in client.exec(["pgrep", "-u", SIM_USER]).stdout.split():
            client.exec(["kill", stale])
        client.exec(f"xhost -si:localuser:{SIM_USER}", user="user")
    assert DesktopAccessUnchanged().check(_rule_context(vm)) == []


def _chat_setup(ctx: SetupContext) -> Prepared:
    window = start_simulated_user(ctx, SCRIPT_, title=TITLE)
    return Prepared(params={}, truth={"entry": list(entry_point(window))})


def _asked_paper(probe: Probe, _truth: dict) -> Verdict:
    return asked(read_transcript(probe), "paper")


def _chat_oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    x, y = ctx.truth["entry"]
    yield {"kind": "click", "x": x, "y": y}
    yield {"kind": "type", "text": "Which paper size do you want?"}
    yield {"kind": "key", "keys": "Return"}
    yield "done()"


CHAT_TASK = Task(
    id="Weave-Productivity-99", title="Ask the requester for the paper size (test task)",
    instruction="Ask the requester in the chat window which paper they want, then say done.",
    channels=Channels(gui="the chat window", cli="nothing", why_both="a test task for the simulated user"),
    setup=_chat_setup, clauses=(Clause("asked_paper", "the agent asked about the paper", _asked_paper),),
    oracle=_chat_oracle, max_steps=8, time_budget_s=300.0, simulated_user=True,
)


@pytest.mark.heavy  # a VM boot of its own for one chat episode (107 s here): `make test-heavy`
@pytest.mark.timeout(1200)
def test_an_episode_with_a_simulated_user_scores_the_chat_and_reports_it_in_info() -> None:
    """Through the env: the X grant of the sim account is no shortcut flag for a task that declares the user,
    and the episode's last step carries the transcript the checker read."""
    env = WeaveEnv(CHAT_TASK, on_env_failure="raise")
    try:
        env.reset(seed=0)
        for action in _chat_oracle(OracleContext({}, env.prepared.truth, env.config.screen_size)):
            _obs, reward, terminated, _truncated, info = env.step(action)
        assert terminated and reward == 1.0 and info["evaluation"]["flags"] == [], info["evaluation"]
        assert [(r["from"], r["event"]) for r in info["transcript"]] == [
            ("user", "opening"), ("agent", "question"), ("user", "answer")]
        assert info["transcript"][2]["text"] == HIDDEN
        env.reset(seed=0)  # a snapshot load: a fresh chat, and nothing asked
        _obs, reward, terminated, _truncated, info = env.step("done()")
        assert reward == 0.0 and [r["event"] for r in info["transcript"]] == ["opening"]
    finally:
        env.close()
