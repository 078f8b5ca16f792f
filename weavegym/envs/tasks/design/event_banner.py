"""Weave-Design-4: make an event banner for a requester who says too little and changes their mind.

A simulated user (envs/simulated_user.py) opens with "Can you make the banner for our <event>?" and gives the
size, the headline and the background and accent colours only when asked; once the topic a seed picks (size,
background or accent) was answered, the next message brings a change of mind about it. The brand palette
exists only as pixels: the open "Brand Kit" window (a Tk fixture run by the desktop account) draws each
swatch in its exact colour, with its name and hex code in the dot-matrix pixel_font, only after its "Palette"
tab is clicked; it got the palette on stdin from a root-only file that setup deletes once the window is up.
The banner is shell work: a PNG drawn with ImageMagick into ~/banners, a folder only the workspace account
may write (2755). It is then submitted in the Brand Kit's approval form (file, SHA-256, headline), whose
record lands in a root-only file. The window's layout, start and screen reading are in brand_kit_window.py.
Drawing with ImageMagick is this task's work, so it waives the default "synthetic image (ImageMagick)"
pattern (it has no screenshot deliverable for that pattern to guard).

Scoring: the PNG's size, its background and accent stripe sampled at fixed points (bounded image probe),
white headline ink above the stripe; the approval naming that file with its current SHA-256 and the
headline; every hidden topic asked before the banner was made; the change of mind heard.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.simulated_user import (
    ChangeOfMind,
    Topic,
    UserScript,
    asked_before_delivery,
    entry_point,
    first_handover,
    heard_change,
    move_chat_beside,
    start_simulated_user,
)
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.design.brand_kit_window import (
    RECORD,
    open_kit,
    read_palette,
    read_status,
    wait_kit,
)
from weavegym.envs.tasks.dialogs import json_record
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.answers import normalize_text
from weavegym.evaluators.provenance import Deliverable

BANNERS = f"{HOME}/banners"
CHAT_TITLE = "Chat: banner request"
FONT_FILE = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TOLERANCE = 8  # per channel: the palette's colours are at least 40 apart in some channel
HIDDEN = ("size", "headline", "background", "accent")

# Brand colours: a name and a base colour, dark enough for white text; each seed jitters every channel.
SWATCHES = (("NAVY", (32, 52, 104)), ("TEAL", (18, 112, 118)), ("FOREST", (36, 98, 56)), ("PLUM", (104, 46, 98)),
            ("BRICK", (164, 62, 44)), ("SLATE", (72, 84, 100)), ("OCHRE", (178, 132, 36)), ("BERRY", (150, 30, 78)),
            ("OCEAN", (28, 96, 164)), ("CHARCOAL", (46, 46, 52)))
EVENTS = ("SPRING OPEN DAY", "SUMMER STREET FAIR", "CHARITY FUN RUN", "AUTUMN BOOK FAIR", "WINTER MARKET",
          "CITY JAZZ NIGHT", "MAKERS MEETUP", "GARDEN PARTY")
SIZES = ((1200, 400), (1500, 500), (1600, 400), (1280, 320), (1000, 300), (1920, 480), (1080, 360), (1400, 350),
         (1800, 600), (960, 320))
REQUESTERS = ("Alex", "Robin", "Sam", "Kim", "Jordan", "Charlie")
CHANGES = ("size", "background", "accent")


# ---- what each seed varies ---------------------------------------------------------------------------------

def hex_colour(rgb: Sequence[int]) -> str:
    return "#" + "".join(f"{int(c):02X}" for c in rgb)


def rgb_of(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def _palette(rng: np.random.Generator) -> list[list[str]]:
    """Six swatches, each base colour jittered; any two differ by 40 or more in some channel."""
    for _attempt in range(500):
        picks = [SWATCHES[int(i)] for i in rng.choice(len(SWATCHES), 6, replace=False)]
        colours = [np.clip(np.array(base) + rng.integers(-16, 17, 3), 16, 200) for _n, base in picks]
        if all(int(np.abs(a - b).max()) >= 40 for i, a in enumerate(colours) for b in colours[i + 1:]):
            return [[name, hex_colour(c)] for (name, _base), c in zip(picks, colours, strict=True)]
    raise TaskError("Weave-Design-4: no palette of six distinct colours")


def plan(rng: np.random.Generator, seed: int) -> dict[str, Any]:
    """One seed's banner: the requester, event, headline, palette, sizes, colours and what changes.

    What the requester changes their mind about goes round by the seed rather than by chance: each kind comes
    up equally often, and seeds 0, 3 and 6 (the ones validated) show all three.
    """
    event = EVENTS[int(rng.integers(len(EVENTS)))]
    day = dt.date(2027, 3, 1) + dt.timedelta(days=int(rng.integers(0, 240)))
    headline = f"{event} - {day.strftime('%a').upper()} {day.day} {day.strftime('%b').upper()}"
    palette = _palette(rng)
    bg, accent, other = (palette[int(i)][0] for i in rng.choice(len(palette), 3, replace=False))
    first, second = (list(SIZES[int(i)]) for i in rng.choice(len(SIZES), 2, replace=False))
    change = CHANGES[(seed // 3) % len(CHANGES)]
    return {"requester": REQUESTERS[int(rng.integers(len(REQUESTERS)))], "event": event, "headline": headline,
            "file": event.lower().replace(" ", "-") + "-banner.png", "palette": palette, "change": change,
            "sizes": [first, second if change == "size" else first],
            "background": [bg, other if change == "background" else bg],
            "accent": [accent, other if change == "accent" else accent]}


def user_script(banner: Mapping[str, Any]) -> UserScript:
    """What the requester says. Size, headline and both colours are hidden: answered only when asked."""
    (w, h), (w2, h2) = banner["sizes"]
    bg, bg2 = banner["background"]
    ac, ac2 = banner["accent"]
    topics = (
        Topic("size", (("size", "dimension", "how big", "how large", "width", "height", "pixel", "resolution"),),
              f"It's for the lobby screens: {w}x{h} pixels.", hidden=True),
        Topic("headline", (("headline", "text", "title", "say", "wording", "slogan", "tagline", "words"),),
              f"The headline should read: {banner['headline']}", hidden=True),
        Topic("background", (("background", "backdrop", "base colour", "base color"),),
              f"The background should be {bg}, from our brand palette.", hidden=True),
        Topic("accent", (("accent", "stripe", "band", "highlight", "second colour", "second color"),),
              f"{ac} for the accent stripe, please.", hidden=True),
        Topic("palette", (("colour", "color", "palette", "brand", "swatch", "hex", "rgb"),),
              "Our brand colours are in the Brand Kit window on your desktop, on its Palette tab. Use them exactly."),
        Topic("style", (("font", "typeface", "layout", "style", "white"),),
              "Follow the house style on the Brand Kit's Guidelines tab: headline in white, stripe at the bottom."),
        Topic("file", (("file", "save", "folder", "png", "approval", "approve"),),
              f"Save it as ~/banners/{banner['file']} and submit it for approval in the Brand Kit."),
    )
    message, new_reply = {
        "size": (f"Oh, sorry: it's going on the website header after all, so make it {w2}x{h2} pixels instead.",
                 f"{w2}x{h2} pixels, for the website header."),
        "background": (f"Actually, let's not use {bg} for the background after all: make it {bg2}.",
                       f"The background should be {bg2}."),
        "accent": (f"Hmm, on second thought the stripe should be {ac2}, not {ac}.", f"{ac2} for the accent stripe."),
    }[banner["change"]]
    change = ChangeOfMind(after_topic=banner["change"], topic=banner["change"], message=message, new_reply=new_reply)
    return UserScript(opening=f"Hi! Can you make the banner for our {banner['event'].lower()}?", topics=topics,
                      change_of_mind=change, name=banner["requester"])


# ---- setup -------------------------------------------------------------------------------------------------

def setup(ctx: SetupContext) -> Prepared:
    banner = plan(ctx.rng, ctx.seed)
    script = user_script(banner)
    # Only the shell may write the banner (a desktop terminal cannot: 2755), and it belongs to the shell's account.
    ctx.run(["install", "-d", "-m", "2755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, BANNERS])
    window, layout = open_kit(ctx, banner["palette"])
    chat = move_chat_beside(ctx, start_simulated_user(ctx, script, title=CHAT_TITLE), window)
    wait_kit(ctx, window)  # uncovered again once the chat moved
    x, y = window[0], window[1]

    def centre(box: Sequence[int]) -> list[int]:
        return [x + box[0] + box[2] // 2, y + box[1] + box[3] // 2]

    targets = {"chat": list(entry_point(chat)), "palette": centre(layout["tabs"][1]),
               **{key: centre(layout[key]) for key in ("file", "sha256", "headline", "submit")}}
    replies = {t.name: t.reply for t in script.topics}
    assert script.change_of_mind is not None
    replies[banner["change"]] = script.change_of_mind.new_reply  # what the topic answers once the mind changed
    return Prepared(params={"requester": banner["requester"], "file": banner["file"]}, truth={
        **banner, "window": window, "layout": layout, "targets": targets, "replies": replies,
        "change_message": script.change_of_mind.message})


# ---- the checker -------------------------------------------------------------------------------------------

def banner_path(truth: Mapping[str, Any]) -> str:
    return f"{BANNERS}/{truth['file']}"


def palette_rgb(truth: Mapping[str, Any], name: str) -> tuple[int, int, int]:
    return rgb_of(dict(map(tuple, truth["palette"]))[name])


def stripe_top(height: int) -> int:
    """The first row of the accent stripe: the bottom fifth of the height, rounded down."""
    return height - height // 5


def sample_points(width: int, height: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]], list[int]]:
    """(background points, accent points, the headline's box [x0, y0, x1, y1]) as (x, y): the edges and corners
    of the area above the stripe, a grid over the stripe (its top edge within 3 rows), the middle of the area."""
    top = stripe_top(height)
    xs = (2, width // 4, width // 2, 3 * width // 4, width - 3)
    background = [(2, 2), (width // 2, 2), (width - 3, 2), (2, top // 2), (width - 3, top // 2), (2, top - 4),
                  (width - 3, top - 4)]
    accent = [(x, y) for x in xs for y in (top + 2, (top + height) // 2, height - 2)]
    return background, accent, [width // 10, top // 6, width - width // 10, top - top // 6]


def _near(pixel: Sequence[int], rgb: Sequence[int]) -> bool:
    return max(abs(int(a) - int(b)) for a, b in zip(pixel[:3], rgb, strict=True)) <= TOLERANCE


def judge_pixels(image: np.ndarray, truth: Mapping[str, Any]) -> tuple[str, str]:
    """("satisfied"|"partial"|"failed", evidence) for the banner's colours and its headline's ink."""
    height, width = image.shape[:2]
    background, accent, box = sample_points(width, height)
    parts, wrong = [], 0
    for what, points in (("background", background), ("accent", accent)):
        want = palette_rgb(truth, truth[what][1])
        off = [(x, y) for x, y in points if not _near(image[y, x], want)]
        wrong += bool(off)
        was = palette_rgb(truth, truth[what][0])
        stale = " (the colour before the change of mind)" if off and truth[what][0] != truth[what][1] and all(
            _near(image[y, x], was) for x, y in points) else ""
        seen = hex_colour(image[off[0][1], off[0][0]][:3]) if off else hex_colour(want)
        parts.append(f"{what} {len(points) - len(off)}/{len(points)} points {truth[what][1]} {hex_colour(want)}"
                     + (f", e.g. {seen} at {off[0]}{stale}" if off else ""))
    x0, y0, x1, y1 = box
    ink = int((image[y0:y1, x0:x1, :3].min(axis=2) >= 200).sum())
    need = max(100, (x1 - x0) * (y1 - y0) // 500)
    parts.append(f"{ink} white headline pixels above the stripe (at least {need})")
    evidence = "; ".join(parts)
    if wrong:
        return "failed", evidence
    return ("satisfied" if ink >= need else "partial"), evidence


def judge_png(data: bytes | None, image: np.ndarray | None, truth: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether the banner file is a PNG of the final size (and what was found)."""
    path = banner_path(truth)
    if data is None:
        return False, f"{path} does not exist"
    if not data.startswith(PNG_MAGIC) or image is None:
        return False, f"{path} is not a PNG"
    (w0, h0), (width, height) = truth["sizes"]
    found = (image.shape[1], image.shape[0])
    stale = " (the size before the change of mind)" if found == (w0, h0) != (width, height) else ""
    return found == (width, height), f"{path} is a {found[0]}x{found[1]} PNG{stale}; expected {width}x{height}"


def judge_approval(record: Mapping[str, Any] | None, digest: str | None, truth: Mapping[str, Any]
                   ) -> tuple[bool, str]:
    """Whether the approval request names the banner, its current SHA-256 (``digest``) and the headline."""
    if record is None:
        return False, "no banner was submitted for approval in the Brand Kit"
    named = record["file"].replace("\\", "/").rsplit("/", 1)[-1] == truth["file"]
    same = digest is not None and (record["sha256"].split() or [""])[0].lower() == digest  # a pasted line too
    headline = normalize_text(record["headline"]) == normalize_text(truth["headline"])
    return named and same and headline, (
        f"the request names {record['file']!r} ({'right' if named else 'expected ' + truth['file']}), "
        f"SHA-256 {record['sha256'][:16]!r}… ({'matches' if same else 'does not match'} the banner's "
        f"{(digest or 'no file')[:16]}…), headline {record['headline']!r} "
        f"({'right' if headline else 'expected ' + repr(truth['headline'])})")


def approval(probe: Probe) -> dict[str, Any] | None:
    """The Brand Kit's last approval request, or None when none was submitted."""
    found = json_record(probe, RECORD)
    return found if found is not None and all(isinstance(found.get(k), str) for k in ("file", "sha256", "headline")) \
        else None


def check_banner_png(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    path = banner_path(truth)
    return Verdict.check(*judge_png(probe.read_bytes(path), probe.image(path), truth))


def check_banner_colours(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    path = banner_path(truth)
    image = probe.image(path)
    if image is None:
        return Verdict.failed(f"{path} is missing or not an image")
    outcome, evidence = judge_pixels(image, truth)
    return {"satisfied": Verdict.satisfied, "partial": Verdict.partial, "failed": Verdict.failed}[outcome](evidence)


def check_approval(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    data = probe.read_bytes(banner_path(truth))  # bounded, and a regular file reached without symlinks
    return Verdict.check(*judge_approval(approval(probe), None if data is None else hashlib.sha256(data).hexdigest(),
                                         truth))


def delivered_at(probe: Probe, truth: Mapping[str, Any]) -> float | None:
    """When the banner was delivered (guest clock): the earlier of its last write and the approval request."""
    return first_handover(probe, [banner_path(truth)], approval(probe))


def _asked(topic: str):
    return asked_before_delivery(topic, delivered_at, "no banner was delivered")


# ---- the oracle --------------------------------------------------------------------------------------------

QUESTIONS = ("Happy to! What size should the banner be, in pixels?",
             "What should the headline say?",
             "Which background colour should I use?",
             "And which colour for the accent stripe?",
             # After every hidden topic's answer: it brings the change of mind, and answers all four once more.
             "To confirm before I make it: the size, the headline, the background and the accent stripe?")
UNREAD = "#808080"  # what the oracle draws with when it never saw the palette (a one-channel replay)


def parse_replies(replies: Mapping[str, str], palette: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The banner the requester finally wants, from their answers as the chat shows them and the palette as
    the Brand Kit shows it: {"size": (w, h), "headline", "background": hex, "accent": hex}."""
    size = re.search(r"(\d+)x(\d+)", replies["size"])
    headline = re.search(r"read: (.+)$", replies["headline"])
    assert size is not None and headline is not None
    codes = dict(palette)

    def colour(reply: str) -> str:
        names = [name for name in codes if re.search(rf"\b{name}\b", reply)]
        return codes[names[0]] if names else UNREAD

    return {"size": (int(size.group(1)), int(size.group(2))), "headline": headline.group(1).strip(),
            "background": colour(replies["background"]), "accent": colour(replies["accent"])}


def magick_command(spec: Mapping[str, Any], file: str) -> str:
    """The ImageMagick line that draws the banner in the house style, then prints its SHA-256."""
    width, height = spec["size"]
    top = stripe_top(height)
    points = int(min(top * 0.42, width * 0.8 / (0.8 * len(spec["headline"]))))
    return (f"cd ~/banners && convert -size {width}x{height} 'xc:{spec['background']}' -fill '{spec['accent']}' "
            f"-draw 'rectangle 0,{top} {width - 1},{height - 1}' -fill white -font {FONT_FILE} -pointsize {points} "
            f"-gravity center -annotate +0-{(height - top) // 2} '{spec['headline']}' -depth 8 {file} && "
            f"identify {file} && sha256sum {file}")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Ask in the chat, read the palette off the Brand Kit, draw the PNG in the shell, submit it for approval.

    The requester's answers come from ``truth["replies"]``, the texts the chat window shows: the chat is
    anti-aliased Tk text, which cannot be read back off ``obs["screen"]`` exactly. The palette is read off the
    screen (it is withheld), the SHA-256 off the terminal.
    """
    t, window = ctx.truth["targets"], ctx.truth["window"]
    yield {"kind": "click", "x": t["chat"][0], "y": t["chat"][1]}
    for question in QUESTIONS:
        yield {"kind": "type", "text": question}
        yield {"kind": "key", "keys": "Return"}
    yield {"kind": "click", "x": t["palette"][0], "y": t["palette"][1]}
    palette: list[tuple[str, str]] = []
    for _try in range(6):  # the tab may still be redrawing under load
        palette = read_palette((ctx.obs or {})["screen"], window)
        if palette:
            break
        yield {"kind": "wait", "seconds": 1}
    spec = parse_replies(ctx.truth["replies"], palette)
    file = ctx.truth["file"]
    yield {"kind": "shell", "command": magick_command(spec, file), "timeout": 120}
    digest = re.search(r"\b([0-9a-f]{64})\b", (ctx.obs or {}).get("terminal", ""))
    for key, text in (("file", f"{BANNERS}/{file}"), ("sha256", digest.group(1) if digest else "unknown"),
                      ("headline", spec["headline"])):
        yield {"kind": "click", "x": t[key][0], "y": t[key][1]}
        yield {"kind": "type", "text": text}
    yield {"kind": "click", "x": t["submit"][0], "y": t["submit"][1]}
    for _try in range(10):  # the record is written before the status is drawn: wait until it shows
        if read_status((ctx.obs or {})["screen"], window) == "SUBMITTED 1":
            break
        yield {"kind": "wait", "seconds": 1}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Design-4",
    title="Make an event banner for a requester in the chat and submit it for approval",
    instruction=(
        "{requester} has a request for you in the chat window on the desktop; ask them there about anything you "
        "need to know. The brand's colours are in the open 'Brand Kit' window (its Palette tab shows each colour "
        "with its name and hex code); use them exactly. House style: the whole banner is filled with the "
        "background colour; a stripe of the accent colour runs along the bottom, across the full width, its "
        "height a fifth of the banner's height (rounded down); the headline is in white, centred above the "
        "stripe. 1) From your shell, draw the banner with ImageMagick as a PNG at ~/banners/{file}. 2) Submit it "
        "in the Brand Kit's approval form: the file's path, its SHA-256 and the headline, then press 'Submit for "
        "approval', then finish."),
    channels=Channels(
        gui="chat with the requester, read the palette off the Brand Kit and submit the banner for approval",
        cli="draw the banner PNG with ImageMagick and compute its SHA-256",
        why_both="the requester's wishes exist only in the desktop chat, the brand colours only as pixels and the "
                 "approval only through the Brand Kit's form, while the banner must be drawn by the shell's account "
                 "in a folder only it can write"),
    setup=setup,
    clauses=(
        Clause("banner_png", "~/banners/<file> is a PNG of the size the requester finally wanted", check_banner_png,
               weight=2.0, critical=True, cap=0.5),
        Clause("banner_colours", "the banner's background and accent stripe are the final brand colours, with a "
               "white headline above the stripe", check_banner_colours, weight=2.0),
        Clause("approval", "the Brand Kit's approval request names the banner, its current SHA-256 and the "
               "headline", check_approval, weight=2.0, critical=True, cap=0.25),
        Clause("asked_size", "the size was asked before the banner was delivered", _asked("size")),
        Clause("asked_headline", "the headline was asked before the banner was delivered", _asked("headline")),
        Clause("asked_background", "the background colour was asked before the banner was delivered",
               _asked("background")),
        Clause("asked_accent", "the accent colour was asked before the banner was delivered", _asked("accent")),
        Clause("heard_change", "the agent checked back after the triggering answer and heard the change of mind",
               heard_change),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the Brand Kit's approval request (captured by setup)"),
        Deliverable(f"{BANNERS}/{{file}}", "cli", description="~/banners/<event>-banner.png"),
    ),
    withheld=("palette",),
    oracle=oracle,
    apps=("python3-tk", "imagemagick", "sha256sum"),
    max_steps=60,
    time_budget_s=1200.0,  # the oracle needs 22 steps, 168 s on a quiet host and 475 s on a loaded one
    simulated_user=True,
    # The banner is drawn with ImageMagick (xc:, -draw, -annotate): the work itself, and there is no
    # screenshot deliverable here for the default pattern to guard.
    waived_patterns=("synthetic image (ImageMagick)",),
)
