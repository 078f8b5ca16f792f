"""The HTML run report, the action overlay and the GIF/MP4 export, on a synthetic run directory (no VM)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pytest
from PIL import Image, ImageDraw

from weavegym.reporting.export import export_episode
from weavegym.reporting.overlay import COLORS, draw_action
from weavegym.reporting.report import write_report

SCREEN = (639, 401)  # odd on purpose: the MP4 export must pad to even dimensions
TEAL, YELLOW, NAVY = (0, 200, 200), (255, 220, 0), (20, 30, 120)
SCRIPT = "<script>alert(1)</script>"
LONG_OUTPUT = "\n".join(f"line {i}: " + "x" * 60 for i in range(200)) + f"\n{SCRIPT}\nTHE-END"


# --- the synthetic run -------------------------------------------------------------------------------------------


def frame_image(variant: int) -> Image.Image:
    """A desktop-like frame: teal background, a yellow 'window' and a navy shape that moves with ``variant``."""
    image = Image.new("RGB", SCREEN, TEAL)
    draw = ImageDraw.Draw(image)
    draw.rectangle((40, 40, 300, 220), fill=YELLOW)
    draw.ellipse((350 + 30 * variant, 120, 450 + 30 * variant, 220), fill=NAVY)
    return image


def step(ep_dir: Path, index: int, channel: str, action: dict[str, Any] | None, text: str, variant: int,
         terminal: str = "", error: str | None = None) -> dict[str, Any]:
    image = frame_image(variant)
    digest = hashlib.sha256(image.tobytes()).hexdigest()
    frame_file = f"frames/{digest[:16]}.png"
    (ep_dir / "frames").mkdir(parents=True, exist_ok=True)
    if not (ep_dir / frame_file).exists():  # de-duplicated like the runner does
        image.save(ep_dir / frame_file)
    return {"index": index, "channel": channel, "action": action, "action_text": text, "action_error": error,
            "terminal": terminal, "exit_code": 0, "frame": {"digest": digest, "phash": "0" * 64, "height": SCREEN[1],
                                                            "width": SCREEN[0]},
            "frame_file": frame_file, "timings": {"act": 0.1, "capture": 0.02}, "wall_time": 1.7e9 + index,
            "reward": 0.0}


def write_steps(ep_dir: Path, steps: list[dict[str, Any]], tail: str = "") -> None:
    text = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in steps)
    (ep_dir / "steps.jsonl").write_text(text + tail, encoding="utf-8")


def episode_record(task: str, domain: str, k: int, **kw: Any) -> dict[str, Any]:
    record = {"task_id": task, "domain": domain, "episode": k, "seed": 7 + k, "agent": "oracle", "status": "done",
              "score": 0.0, "passed": False, "steps": 0, "wall_s": 0.0, "end_reason": "done", "error": None,
              "instruction": f"Do the {task} thing"}
    record.update(kw)
    return record


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    tasks = ["Weave-DevOps-1", "Weave-Productivity-2"]
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"agent": "oracle", "tasks": tasks, "episodes": 2, "workers": 2,
                                              "started": "2025-01-01T00:00:00", "weavegym_version": "0.1.0"}))
    # DevOps-1 ep0: a finished episode whose score a high-confidence flag zeroed.
    ep0 = run / tasks[0] / "ep0"
    steps = [
        step(ep0, 0, "reset", None, "", 0),
        step(ep0, 1, "gui", {"kind": "click", "x": 200, "y": 150, "button": "left"}, "click(200, 150)", 1),
        step(ep0, 2, "gui", {"kind": "drag", "x": 100, "y": 300, "to_x": 500, "to_y": 100, "button": "left"},
             "drag(100, 300, 500, 100)", 1),
        step(ep0, 3, "gui", {"kind": "type", "text": "你好，世界 hello"}, "type('你好，世界 hello')", 2),
        step(ep0, 4, "cli", {"kind": "shell", "command": "cat big.log\necho done"}, "shell('cat big.log')", 2,
             terminal=LONG_OUTPUT),
        step(ep0, 5, "gui", {"kind": "key", "keys": "ctrl+s"}, "key('ctrl+s')", 2, terminal=LONG_OUTPUT),
        step(ep0, 6, "gui", {"kind": "key", "keys": "ctrl+s"}, "key('ctrl+s')", 2, terminal=LONG_OUTPUT,
             error="InvalidActionError: <b>not bold</b>"),
        step(ep0, 7, "control", {"kind": "done", "answer": "42 <i>units</i>"}, "done('42 units')", 2,
             terminal=LONG_OUTPUT),
    ]
    write_steps(ep0, steps)
    (ep0 / "episode.json").write_text(json.dumps(episode_record(tasks[0], "DevOps", 0, steps=7, wall_s=10.0,
                                                                answer="42 <i>units</i>")))
    (ep0 / "messages.json").write_text(json.dumps([
        {"role": "system", "content": "You operate a desktop."},
        {"role": "user", "content": [{"type": "text", "text": "Task: save it"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function", "function": {
            "name": "shell", "arguments": json.dumps({"command": SCRIPT})}}]},
    ]))
    (ep0 / "chat.json").write_text(json.dumps([
        {"seq": 1, "t": 1.7e9, "from": "user", "text": "Print the poster, please.", "topics": [], "event": "opening"},
        {"seq": 2, "t": 1.7e9, "from": "agent", "text": "How many <b>copies</b>?", "topics": ["copies"],
         "event": "question"}]))
    (ep0 / "evaluation.json").write_text(json.dumps({
        "score": 0.0, "raw_score": 0.9, "passed": False, "pass_threshold": 0.8, "seconds": 0.5,
        "clauses": [{"name": "file_saved", "description": "the file exists", "weight": 1.0, "critical": True,
                     "cap": None, "outcome": "satisfied", "evidence": "found /home/u/out.txt", "credit": 1.0,
                     "seconds": 0.1},
                    {"name": "content_ok", "description": "content matches", "weight": 1.0, "critical": False,
                     "cap": 0.5, "outcome": "partial", "evidence": "3/4 lines match", "credit": 0.5, "seconds": 0.1}],
        "caps_applied": ["content_ok: capped at 0.5"],
        "flags": [{"rule": "gui_artifact_from_shell", "confidence": "high", "message": "wrote the PNG from the shell",
                   "evidence": {"step": 4, "command": "convert x.png"}}],
        "zeroed_by": ["gui_artifact_from_shell"]}))
    # DevOps-1 ep1: the episode errored after one step.
    ep1 = run / tasks[0] / "ep1"
    write_steps(ep1, [step(ep1, 0, "reset", None, "", 0),
                      step(ep1, 1, "gui", {"kind": "right_click", "x": 50, "y": 60}, "right_click(50, 60)", 0)])
    (ep1 / "episode.json").write_text(json.dumps(episode_record(
        tasks[0], "DevOps", 1, status="error", score=None, passed=None, steps=1, wall_s=4.0, end_reason="error",
        error="GuestError: agent vanished")))
    (ep1 / "error.txt").write_text("Traceback (most recent call last):\n  File <stdin>\nGuestError: agent vanished")
    # Productivity-2 ep0: still running (no episode.json), its last line half-written.
    ep2 = run / tasks[1] / "ep0"
    write_steps(ep2, [step(ep2, 0, "reset", None, "", 3),
                      step(ep2, 1, "gui", {"kind": "scroll", "dx": 0, "dy": 3}, "scroll(dy=3)", 3)],
                tail='{"index": 2, "chan')
    records = [json.loads((d / "episode.json").read_text()) for d in (ep0, ep1)]
    summary = {"episodes": 2, "pass_rate": 0.5, "mean_score": 0.4321, "mean_steps": 3.5, "mean_wall_s": 12.25}
    (run / "results.json").write_text(json.dumps({
        "episodes": records, "by_domain": {"DevOps": summary},
        "overall": {**summary, "episodes": 3, "pass_rate": 0.3333, "mean_score": 0.2881}}))
    return run


# --- HTML helpers ------------------------------------------------------------------------------------------------


class _Page(HTMLParser):
    """Collects links, ids and table rows (as cell texts) of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.links += [v for k, v in attrs if k in ("href", "src") and v]
        if values.get("id"):
            self.ids.add(str(values["id"]))
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


def row(page: _Page, first: str) -> list[str]:
    matches = [r for r in page.rows if r and r[0] == first]
    assert matches, f"no table row starts with {first!r}"
    return matches[0]


# --- report ------------------------------------------------------------------------------------------------------


def test_report_summary_escaping_and_episodes(run_dir: Path) -> None:
    out = write_report(run_dir)
    assert out == run_dir / "report.html" and out.is_file()
    html = out.read_text(encoding="utf-8")
    page = parse(html)
    assert row(page, "DevOps") == ["DevOps", "2", "50.0%", "0.432", "3.5", "12.2"]
    assert row(page, "Overall")[:4] == ["Overall", "3", "33.3%", "0.288"]
    assert SCRIPT not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>not bold</b>" not in html and "&lt;b&gt;not bold&lt;/b&gt;" in html
    assert "你好，世界 hello" in html
    # the long terminal output is cut (its tail kept) with a note, and shown once, not on every later step
    assert "THE-END" in html and "line 100:" not in html and "truncated: showing" in html
    assert html.count("THE-END") == 1 and "terminal unchanged since step 4" in html
    assert 'class="flag flag-high"' in html and "gui_artifact_from_shell" in html and "1 high" in html
    assert "capped at 0.5" in html and "3/4 lines match" in html
    assert "GuestError: agent vanished" in html and "Traceback" in html
    assert "agent transcript (3 message(s))" in html and "Task: save it\n[image]" in html and "base64" not in html
    assert "→ shell(" in html
    assert "Chat with the simulated user (2 message(s))" in html and "Print the poster, please." in html
    assert "How many &lt;b&gt;copies&lt;/b&gt;?" in html and "agent · question" in html
    assert "Answer (done)" in html and "42 &lt;i&gt;units&lt;/i&gt;" in html and "Reason (fail)" not in html
    statuses = {r[0] + "/" + r[1]: r[3] for r in page.rows if r and r[0].startswith("Weave-")}
    assert statuses == {"Weave-DevOps-1/0": "done", "Weave-DevOps-1/1": "error", "Weave-Productivity-2/0": "incomplete"}
    assert "no episode.json" in html and "1 line(s) of steps.jsonl could not be parsed" in html
    for ep, count in (("Weave-DevOps-1/ep0", 8), ("Weave-DevOps-1/ep1", 2), ("Weave-Productivity-2/ep0", 2)):
        written = sorted(p.name for p in (run_dir / ep / "annotated").iterdir())
        assert written == sorted(f"{i}.jpg" for i in range(count))


@pytest.mark.parametrize("elsewhere", [False, True])
def test_report_links_resolve(run_dir: Path, tmp_path: Path, elsewhere: bool) -> None:
    out = write_report(run_dir, tmp_path / "other" / "r.html" if elsewhere else None)
    page = parse(out.read_text(encoding="utf-8"))
    images = [link for link in page.links if link.endswith(".jpg")]
    assert len(images) == 8 + 2 + 2
    assert any(link.endswith("error.txt") for link in page.links)
    for link in page.links:
        if link.startswith("#"):
            assert link[1:] in page.ids, link
        else:
            assert not re.match(r"^[a-z]+:", link), f"absolute link {link}"
            assert (out.parent / unquote(link)).is_file(), link


def test_report_without_results_json_computes_summary(run_dir: Path) -> None:
    (run_dir / "results.json").unlink()
    (run_dir / "Weave-Productivity-2" / "ep1").mkdir()  # an episode that has not recorded its reset yet
    html = write_report(run_dir).read_text(encoding="utf-8")
    assert "results.json is missing" in html and "no steps recorded" in html
    assert "2 episode(s) have no episode.json yet" in html
    # ep0 (score 0, 7 steps, 10 s) and the errored ep1 (no score, 1 step, 4 s); the incomplete episode has no record
    assert row(parse(html), "DevOps") == ["DevOps", "2", "0.0%", "0.000", "4.0", "7.0"]


def test_annotated_frame_shows_the_action_on_the_frame_it_acted_on(run_dir: Path) -> None:
    write_report(run_dir)
    ep0 = run_dir / "Weave-DevOps-1" / "ep0"
    click = np.asarray(Image.open(ep0 / "annotated" / "1.jpg").convert("RGB")).astype(int)
    reset = np.asarray(frame_image(0)).astype(int)
    # step 1 clicked on the reset frame (variant 0, navy circle at x 350..450), not on its own result (variant 1)
    assert np.abs(click[170, 360] - NAVY).max() < 40 and np.abs(click[170, 465] - TEAL).max() < 40
    near = np.abs(click[130:170, 180:220] - COLORS["click"]).max(axis=2) < 60  # JPEG shifts colours a little
    assert near.sum() > 20 and np.abs(reset[130:170, 180:220] - COLORS["click"]).max(axis=2).min() > 60


# --- overlay -----------------------------------------------------------------------------------------------------


def colour_count(image: Image.Image, colour: tuple[int, int, int], box: tuple[int, int, int, int] | None = None) -> int:
    pixels = np.asarray(image.convert("RGB").crop(box) if box else image.convert("RGB"))
    return int((pixels == colour).all(axis=2).sum())


def test_overlay_click_ring_at_the_point_and_per_button_colours() -> None:
    grey = Image.new("RGB", (640, 400), (128, 128, 128))
    out = draw_action(grey, {"kind": "click", "x": 300, "y": 200, "button": "left"}, (640, 400))
    assert out is not grey and colour_count(grey, COLORS["click"]) == 0
    assert colour_count(out, COLORS["click"], (270, 170, 330, 230)) > 30
    assert colour_count(out, COLORS["click"]) == colour_count(out, COLORS["click"], (250, 150, 350, 250))
    right = draw_action(grey, {"kind": "right_click", "x": 300, "y": 200}, (640, 400))
    assert colour_count(right, COLORS["right_click"], (270, 170, 330, 230)) > 30
    assert colour_count(right, COLORS["click"]) == 0
    double = draw_action(grey, {"kind": "double_click", "x": 300, "y": 200}, (640, 400))
    assert colour_count(double, COLORS["double_click"]) > colour_count(out, COLORS["click"])
    assert draw_action(grey, None, (640, 400)).tobytes() == grey.tobytes()


def test_overlay_maps_screen_coordinates_onto_a_scaled_frame() -> None:
    small = Image.new("RGB", (320, 200), (128, 128, 128))
    out = draw_action(small, {"kind": "click", "x": 400, "y": 100}, (640, 400))
    assert colour_count(out, COLORS["click"], (185, 35, 215, 65)) > 15
    assert colour_count(out, COLORS["click"]) == colour_count(out, COLORS["click"], (170, 20, 230, 80))


def test_overlay_drag_line_scroll_and_banner() -> None:
    grey = Image.new("RGB", (640, 400), (128, 128, 128))
    out = np.asarray(draw_action(grey, {"kind": "drag", "x": 100, "y": 300, "to_x": 500, "to_y": 100}, (640, 400)))
    for t in np.linspace(0.15, 0.75, 9):
        x, y = round(100 + 400 * t), round(300 - 200 * t)
        patch = out[y - 1: y + 2, x - 1: x + 2]
        assert (patch == COLORS["drag"]).all(axis=2).any(), f"drag line missing at {(x, y)}"
    scrolled = draw_action(grey, {"kind": "scroll", "dx": 0, "dy": -3}, (640, 400))  # no x/y: the screen centre
    assert colour_count(scrolled, COLORS["scroll"], (310, 100, 330, 200)) > 20  # the arrow points up from (320, 200)
    assert colour_count(scrolled, COLORS["scroll"], (310, 210, 330, 300)) == 0
    done = np.asarray(draw_action(grey, {"kind": "done"}, (640, 400)))
    assert (np.abs(done[2, 5].astype(int) - COLORS["done"]) < 30).all()


@pytest.mark.parametrize("action", [
    {"kind": "type", "text": "日本語テキスト\tand\nnewline \ud800 " * 20},
    {"kind": "key", "keys": "ctrl+alt+t"},
    {"kind": "shell", "command": "ls -la\nrm -rf /tmp/x"},
    {"kind": "python", "code": "print('hi')"},
    {"kind": "fail", "reason": "cannot find the menu"},
    {"kind": "teleport", "x": "?"},
])
def test_overlay_captions_are_drawn_and_unicode_safe(action: dict[str, Any]) -> None:
    grey = Image.new("RGB", (640, 400), (128, 128, 128))
    out = np.asarray(draw_action(grey, action, (640, 400))).astype(int)
    changed = np.abs(out - 128).max(axis=2) > 40
    assert changed.sum() > 200
    assert (out > 200).all(axis=2).sum() > 20  # white caption text


# --- export ------------------------------------------------------------------------------------------------------


def test_export_gif_one_frame_per_step(run_dir: Path, tmp_path: Path) -> None:
    import imageio.v3 as iio

    write_report(run_dir)
    gif = export_episode(run_dir / "Weave-DevOps-1" / "ep0", tmp_path / "ep0.gif", fps=4)
    frames = iio.imread(gif, index=None)
    assert frames.shape[0] == 8  # steps 5 and 6 draw the same key press on the same frame: still two frames
    assert frames.shape[1:3] == (SCREEN[1], SCREEN[0])


def test_export_mp4_pads_to_even_and_draws_missing_frames(run_dir: Path, tmp_path: Path) -> None:
    import imageio.v2 as imageio

    ep = run_dir / "Weave-DevOps-1" / "ep0"
    assert not (ep / "annotated").exists()
    mp4 = export_episode(ep, tmp_path / "ep0.mp4")
    assert (ep / "annotated" / "7.jpg").is_file()
    reader = imageio.get_reader(mp4, format="FFMPEG")
    try:
        frames = list(reader.iter_data())
    finally:
        reader.close()
    assert len(frames) == 8
    assert frames[0].shape == (SCREEN[1] + 1, SCREEN[0] + 1, 3)
    with pytest.raises(ValueError, match="cannot infer"):
        export_episode(ep, tmp_path / "ep0.avi")


def test_missing_run_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        write_report(tmp_path / "nope")


# --- the page in a real browser ----------------------------------------------------------------------------------


def test_report_renders_in_headless_chromium(run_dir: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.fail("chromium is missing: install it with `apt-get install chromium` (Debian) to run this test")
    report = write_report(run_dir)
    shot = tmp_path / "shot.png"
    cmd = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1280,2000",
           report.resolve().as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 100  # text, tables, badges and frames, not a blank page
    teal = (np.abs(pixels - TEAL).max(axis=2) < 30)
    assert teal.sum() > 20_000, "no rendered frame image in the first 2000 px of the page"
    ys, xs = np.nonzero(teal)
    region = pixels[ys.min(): ys.max() + 1, xs.min(): xs.max() + 1]
    yellow = (np.abs(region - YELLOW).max(axis=2) < 30).sum()
    assert yellow > 5_000 and region.std() > 20  # the frame shows its content, not a uniform box
