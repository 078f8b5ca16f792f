"""Weave-Design-4 (event banner): seeds, the requester's script, the banner's pixel and approval judges, the
oracle's parsers and screen reading (unit), and the Brand Kit on a real Xvfb, read and submitted through the
real agent (xvfb)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.core.trajectory import FrameRecord, StepRecord, Trajectory
from weavegym.envs import sim_user_program as program
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.design import brand_kit_window as kit_window
from weavegym.envs.tasks.design.brand_kit_window import (
    GUIDELINES,
    MARK,
    ROW_Y,
    find_origin,
    kit_drawn,
    kit_layout,
    read_palette,
    read_status,
)
from weavegym.envs.tasks.design.event_banner import (
    HIDDEN,
    PNG_MAGIC,
    QUESTIONS,
    TASK,
    UNREAD,
    hex_colour,
    judge_approval,
    judge_pixels,
    judge_png,
    magick_command,
    parse_replies,
    plan,
    rgb_of,
    stripe_top,
    user_script,
)
from weavegym.evaluators import ForbiddenPatterns, RuleContext
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay


def _banner(seed: int) -> dict:
    return plan(np.random.default_rng(seed), seed)


def _chat(seed: int, messages: list[str] | tuple[str, ...]) -> list[dict]:
    records: list[dict] = []
    chat = program.Conversation(user_script(_banner(seed)).to_dict(), records.append, clock=lambda: 1000.0)
    chat.open()
    for message in messages:
        chat.send(message)
    return records


def _truth_replies(seed: int) -> dict[str, str]:
    """What setup puts in truth["replies"]: each topic's answer, the changed one as it is after the change."""
    banner, script = _banner(seed), user_script(_banner(seed))
    replies = {t.name: t.reply for t in script.topics}
    assert script.change_of_mind is not None
    replies[banner["change"]] = script.change_of_mind.new_reply
    return replies


# ---- seeds -------------------------------------------------------------------------------------------------

def test_every_seed_varies_palette_headline_sizes_colours_and_the_change() -> None:
    banners = [_banner(seed) for seed in range(12)]
    assert len({json.dumps(b["palette"]) for b in banners}) == 12
    assert len({b["headline"] for b in banners}) == 12
    assert len({tuple(map(tuple, b["sizes"])) for b in banners}) >= 6
    assert [_banner(seed)["change"] for seed in (0, 3, 6)] == ["size", "background", "accent"]
    assert _banner(3) == _banner(3)


@pytest.mark.parametrize("seed", range(40))
def test_each_seed_has_a_drawable_distinct_palette_and_exactly_one_change(seed: int) -> None:
    banner = _banner(seed)
    palette = banner["palette"]
    names = [name for name, _code in palette]
    assert len(palette) == len(ROW_Y) == len(set(names))
    assert all(len(name) <= kit_window.NAME_CHARS and pixel_font.unsupported(name + code) == ""
               for name, code in palette)
    colours = [np.array(rgb_of(code)) for _name, code in palette]
    assert all(int(c.max()) <= 200 for c in colours)  # white text stays readable on every one
    assert all(int(np.abs(a - b).max()) >= 40 for i, a in enumerate(colours) for b in colours[i + 1:])
    changed = [key for key in ("sizes", "background", "accent") if banner[key][0] != banner[key][1]]
    assert changed == [{"size": "sizes"}.get(banner["change"], banner["change"])]
    assert banner["background"][1] != banner["accent"][1] and set(banner["background"] + banner["accent"]) <= set(names)
    assert pixel_font.unsupported(banner["headline"]) == ""


def test_the_guidelines_fit_the_window() -> None:
    layout = kit_layout()
    assert all(len(line) * pixel_font.ADVANCE * layout["scale"] <= layout["width"] - 2 * layout["text_x"]
               for line in GUIDELINES)
    assert layout["first_y"] + len(GUIDELINES) * layout["line_h"] < layout["form_y"]


# ---- the requester's script --------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_the_oracles_questions_get_every_hidden_answer_and_the_change_once(seed: int) -> None:
    banner = _banner(seed)
    records = _chat(seed, QUESTIONS)
    asked = [tuple(r["topics"]) for r in records if r["event"] == "question"]
    assert asked == [("size",), ("headline",), ("background", "palette"), ("accent", "palette"), HIDDEN]
    changes = [r for r in records if r["event"] == "change_of_mind"]
    assert len(changes) == 1 and changes[0]["topics"] == [banner["change"]]
    final = {}
    for record in records:
        if record["event"] == "answer":
            final[record["topics"][0]] = record["text"]  # the last answer per topic is what the chat ends with
    replies = _truth_replies(seed)
    assert final == {topic: replies[topic] for topic in (*HIDDEN, "palette")}
    spec = parse_replies(final, banner["palette"])
    codes = dict(map(tuple, banner["palette"]))
    assert spec == {"size": tuple(banner["sizes"][1]), "headline": banner["headline"],
                    "background": codes[banner["background"][1]], "accent": codes[banner["accent"][1]]}


def test_the_opening_gives_nothing_away_and_a_blind_replay_draws_grey() -> None:
    banner = _banner(1)
    records = _chat(1, ["Sure, on it!"])
    assert records[0]["text"] == f"Hi! Can you make the banner for our {banner['event'].lower()}?"
    assert [(r["event"], r["text"]) for r in records[1:]] == [("question", "Sure, on it!"),
                                                              ("fallback", program.FALLBACK)]
    assert {t.name for t in user_script(banner).topics if t.hidden} == set(HIDDEN)
    spec = parse_replies(_truth_replies(1), [])  # the palette never seen
    assert (spec["background"], spec["accent"]) == (UNREAD, UNREAD)


@pytest.mark.parametrize(("message", "topics"), [
    ("How big should it be?", ("size",)),
    ("What dimensions do you need?", ("size",)),
    ("What text goes on it?", ("headline",)),
    ("What colour should the background be?", ("background", "palette")),
    ("Which colour for the stripe at the bottom?", ("accent", "palette")),
    ("Where do I save the file?", ("file",)),
    ("Any font preference?", ("style",)),
    ("Thanks!", ()),
])
def test_natural_questions_match_the_intended_topic(message: str, topics: tuple[str, ...]) -> None:
    assert tuple(_chat(2, [message])[1]["topics"]) == topics


def test_the_change_needs_a_message_after_its_topic_was_answered() -> None:
    seed = next(s for s in range(20) if _banner(s)["change"] == "background")
    assert "change_of_mind" not in [r["event"] for r in _chat(seed, QUESTIONS[:3])]
    assert [r["event"] for r in _chat(seed, QUESTIONS[:4])].count("change_of_mind") == 1


# ---- judging the banner and the approval ------------------------------------------------------------------

def _draw(banner: dict, *, size: tuple[int, int] | None = None, background: str | None = None,
          accent: str | None = None, text: bool = True, stripe_shift: int = 0) -> np.ndarray:
    """A banner as the house style wants it (the final values unless told otherwise): the reference
    rendering the judges are tested against, with a white block where ImageMagick would put the headline."""
    codes = dict(map(tuple, banner["palette"]))
    width, height = size or tuple(banner["sizes"][1])
    image = np.zeros((height, width, 3), dtype=np.uint8)
    image[:] = rgb_of(codes[background or banner["background"][1]])
    top = stripe_top(height) + stripe_shift
    image[top:] = rgb_of(codes[accent or banner["accent"][1]])
    if text:
        image[top // 3:2 * top // 3, width // 4:3 * width // 4:3] = 255  # glyph-like columns of white
    return image


def test_the_right_banner_passes_and_each_kind_of_mistake_is_named() -> None:
    seed = next(s for s in range(20) if _banner(s)["change"] == "accent")
    banner = _banner(seed)
    outcome, evidence = judge_pixels(_draw(banner), banner)
    assert outcome == "satisfied", evidence
    outcome, evidence = judge_pixels(_draw(banner, accent=banner["accent"][0]), banner)
    assert outcome == "failed" and "accent 0/15 points" in evidence and "before the change of mind" in evidence
    assert judge_pixels(_draw(banner, text=False), banner)[0] == "partial"
    assert judge_pixels(_draw(banner, stripe_shift=6), banner)[0] == "failed"  # a stripe thinner than a fifth
    assert judge_pixels(_draw(banner, stripe_shift=-2), banner)[0] == "satisfied"  # within the 3 rows allowed
    swapped = _draw(banner, background=banner["accent"][1], accent=banner["background"][1])
    assert judge_pixels(swapped, banner)[0] == "failed"


def test_judge_png_wants_a_png_of_the_final_size() -> None:
    seed = next(s for s in range(20) if _banner(s)["change"] == "size")
    banner = {**_banner(seed)}
    (w0, h0), (w1, h1) = banner["sizes"]
    assert judge_png(PNG_MAGIC + b"...", np.zeros((h1, w1, 3), np.uint8), banner)[0]
    ok, why = judge_png(PNG_MAGIC + b"...", np.zeros((h0, w0, 3), np.uint8), banner)
    assert not ok and why.endswith(f"PNG (the size before the change of mind); expected {w1}x{h1}")
    assert judge_png(b"\xff\xd8 a jpeg", np.zeros((h1, w1, 3), np.uint8), banner) == (
        False, f"/home/user/banners/{banner['file']} is not a PNG")
    assert judge_png(None, None, banner) == (False, f"/home/user/banners/{banner['file']} does not exist")


def test_judge_approval_wants_the_file_its_current_digest_and_the_headline() -> None:
    banner = _banner(0)
    digest = hashlib.sha256(b"the banner").hexdigest()
    record = {"file": f"/home/user/banners/{banner['file']}", "sha256": digest.upper(),
              "headline": banner["headline"].lower() + " "}
    assert judge_approval(record, digest, banner)[0]
    assert judge_approval({**record, "file": f"~/banners/{banner['file']}"}, digest, banner)[0]
    assert judge_approval({**record, "sha256": f"{digest}  {banner['file']}"}, digest, banner)[0]  # sha256sum's line
    assert not judge_approval({**record, "file": "~/banners/other.png"}, digest, banner)[0]
    ok, why = judge_approval(record, hashlib.sha256(b"redrawn since").hexdigest(), banner)
    assert not ok and "does not match" in why
    assert not judge_approval(record, None, banner)[0]
    assert not judge_approval({**record, "headline": "SOMETHING ELSE"}, digest, banner)[0]
    assert judge_approval(None, digest, banner) == (False, "no banner was submitted for approval in the Brand Kit")


def test_the_oracles_magick_line_is_waived_for_this_task_only() -> None:
    banner = _banner(5)
    command = magick_command(parse_replies(_truth_replies(5), banner["palette"]), banner["file"])
    codes = dict(map(tuple, banner["palette"]))
    width, height = banner["sizes"][1]
    assert f"-size {width}x{height} 'xc:{codes[banner['background'][1]]}'" in command
    assert f"-draw 'rectangle 0,{stripe_top(height)} {width - 1},{height - 1}'" in command
    assert command.endswith(f"sha256sum {banner['file']}")
    traj = Trajectory(task_id=TASK.id, task_seed=5, instruction="")
    frame = FrameRecord.of(0, np.zeros((8, 8, 3), np.uint8))
    traj.steps += [StepRecord(index=0, channel="reset", frame=frame),
                   StepRecord(index=1, channel="cli", frame=frame, action={"kind": "shell", "command": command},
                              action_text=command)]
    ctx = RuleContext(probe=None, trajectory=traj, truth={})  # type: ignore[arg-type]  # patterns read no probe
    assert [f.evidence["pattern"] for f in ForbiddenPatterns().check(ctx)] == ["synthetic image (ImageMagick)"]
    assert ForbiddenPatterns(waive=TASK.waived_patterns).check(ctx) == []


def test_the_oracle_is_blind_to_the_palette() -> None:
    truth = {**_banner(0), "window": [0, 0, 1, 1]}
    assert "palette" not in TASK.oracle_truth(truth)


# ---- the oracle's eyes -------------------------------------------------------------------------------------

def _screen(banner: dict, window: tuple[int, int], *, palette: bool = True, status: str = "",
            shift: tuple[int, int] = (0, 0)) -> np.ndarray:
    """A 1280x720 screenshot of the Brand Kit's canvas as the fixture draws it."""
    image = np.full((720, 1280, 3), 200, dtype=np.uint8)
    layout = kit_layout()
    x, y = window[0] + shift[0], window[1] + shift[1]
    image[y:y + layout["height"], x:x + layout["width"]] = 255

    def text(line: str, tx: int, ty: int) -> None:
        for x0, y0, x1, y1 in pixel_font.layout_text(line, tx, ty, layout["scale"]):
            image[y + y0:y + y1, x + x0:x + x1] = pixel_font.INK

    image[y + MARK[1]:y + MARK[1] + MARK[2], x + MARK[0]:x + MARK[0] + MARK[2]] = pixel_font.INK
    text(layout["heading"], layout["heading_x"], MARK[1])
    if palette:
        for (name, code), row_y in zip(banner["palette"], layout["row_y"], strict=True):
            top = y + row_y + layout["swatch_dy"]
            image[top:top + layout["swatch_h"], x + 16:x + 80] = rgb_of(code)
            text(name, layout["name_x"], row_y)
            text(code, layout["hex_x"], row_y)
    else:
        for i, line in enumerate(GUIDELINES):
            text(line, layout["text_x"], layout["first_y"] + i * layout["line_h"])
    if status:
        text(status, layout["text_x"], layout["status_y"])
    return image


@pytest.mark.parametrize("shift", [(0, 0), (3, -2), (-7, 11)])
def test_read_palette_and_status_even_when_the_window_sits_a_little_off(shift: tuple[int, int]) -> None:
    banner = _banner(4)
    window = [0, 24, 520, 506]
    image = _screen(banner, (0, 24), status="SUBMITTED 1", shift=shift)
    assert read_palette(image, window) == [tuple(row) for row in banner["palette"]]
    assert read_status(image, window) == "SUBMITTED 1"
    covered = _screen(banner, (0, 24), palette=False, shift=shift)
    assert read_palette(covered, window) == [] and kit_drawn(covered, window)
    assert find_origin(np.full((720, 1280, 3), 255, dtype=np.uint8), window) is None


# ---- the Brand Kit on a real X server, read and submitted through the real agent ----------------------------

def test_the_brand_kit_shows_its_palette_only_after_the_tab_and_records_the_request(
        xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> None:
    banner = _banner(2)
    layout = kit_layout(40, 30)
    folder = Path(kit_window.__file__).parent
    shutil.copy(folder / "fixtures" / "brand_kit.py", tmp_path)
    shutil.copy(Path(pixel_font.__file__), tmp_path)
    record = tmp_path / "record.json"
    with record.open("wb") as out:
        proc = subprocess.Popen([sys.executable, str(tmp_path / "brand_kit.py")], stdin=subprocess.PIPE, stdout=out,
                                env={**os.environ, "DISPLAY": xvfb.display})
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"palette": banner["palette"], "guidelines": list(GUIDELINES),
                                     "layout": layout}).encode())
        proc.stdin.close()
    try:
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == "Brand Kit"), None), 20,
                          what="the Brand Kit mapped")
        geometry = window.geometry
        assert wait_for(lambda: kit_drawn(client.screenshot(hide_cursor=True).image, geometry), 20,
                        what="the Brand Kit drawn")
        assert read_palette(client.screenshot(hide_cursor=True).image, geometry) == []

        def click(box: list[int]) -> None:
            client.click(window.x + box[0] + box[2] // 2, window.y + box[1] + box[3] // 2)

        click(layout["tabs"][1])
        shown = wait_for(lambda: read_palette(client.screenshot(hide_cursor=True).image, geometry) or None, 20,
                         what="the palette read back")
        assert shown == [tuple(row) for row in banner["palette"]]
        image = client.screenshot(hide_cursor=True).image
        origin = find_origin(image, geometry)
        assert origin is not None
        for (_name, code), row_y in zip(banner["palette"], layout["row_y"], strict=True):  # the exact colours
            pixel = image[origin[1] + row_y + 6, origin[0] + layout["swatch_x"] + 30][:3]
            assert hex_colour(pixel) == code
        digest = hashlib.sha256(b"banner").hexdigest()
        click(layout["submit"])  # nothing filled in yet: refused on screen, nothing recorded
        wait_for(lambda: read_status(client.screenshot(hide_cursor=True).image, geometry) == "FILL IN ALL THREE", 20,
                 what="the refusal shown")
        fields = (("file", f"~/banners/{banner['file']}"), ("sha256", digest), ("headline", banner["headline"]))
        for key, text in fields:
            click(layout[key])
            client.type_text(text)
        click(layout["submit"])
        wait_for(lambda: read_status(client.screenshot(hide_cursor=True).image, geometry) == "SUBMITTED 1", 20,
                 what="the submission shown")
        assert proc.poll() is None  # the window stays open for a corrected request
    finally:
        proc.kill()
        proc.wait()
    lines = record.read_text().strip().splitlines()
    assert len(lines) == 1
    found = json.loads(lines[0])
    assert (found["file"], found["sha256"], found["headline"]) == (f"~/banners/{banner['file']}", digest,
                                                                   banner["headline"])
    assert judge_approval(found, digest, banner)[0]
