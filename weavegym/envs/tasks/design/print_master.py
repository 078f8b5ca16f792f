"""Weave-Design-3: scale a photo to its print order in GIMP, save the master XCF, then hand it to the lab.

Which print the customer paid for, and so the pixel size and resolution, comes
from an order book (CLI: find the paid order, width = cm / 2.54 x dpi). The
studio's GIMP runs under a separate 'designer' account (put on the X access list
by setup) and the master XCF lives in that account's 0755 folder: the shell
(workspace account) and the desktop account can read it but neither can write
there, so a batch GIMP, a hand-made file or any shell trick cannot produce it,
only the GIMP window can (the checker decodes the XCF: owner, canvas,
resolution, pixels). The lab manifest (the master's SHA-256) and the customer's
proof JPEG (ImageMagick) are shell work, in an outbox that belongs to the
workspace account (2755: the desktop account and the designer cannot write it).
The oracle waits for GIMP's dialogs on the screen and for the saved master from
the shell (which sees /srv/studio but not the display).
"""

from __future__ import annotations

import csv
import io
import struct
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from PIL import Image, ImageFilter

from weavegym.envs.setup_context import HOME, LAUNCH_MARKER, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.design.xcf import read_xcf
from weavegym.envs.tasks.games.sgt_common import wait_box
from weavegym.evaluators import Clause, Probe, Verdict

STUDIO, DESIGNER = "/srv/studio", "designer"
ORDERS = f"{HOME}/print/orders.csv"
OUTBOX = f"{HOME}/print/outbox"
GIMPRC = f"/home/{DESIGNER}/.config/GIMP/2.10/gimprc"
SIZE = (900, 600)
PRINTS = ((15, 10), (18, 12), (21, 14), (24, 16), (27, 18), (30, 20))  # cm, 3:2 like the photos
DPIS = (150, 200, 240, 300)
CUSTOMERS = ("Aalto", "Berger", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Horvat", "Ivanova", "Jansen")
THUMB = (90, 60)


def _photo(rng: np.random.Generator) -> Image.Image:
    """A landscape-like picture: sky gradient, wavy hills, soft blobs and sensor noise."""
    width, height = SIZE
    y, x = np.mgrid[0:height, 0:width].astype(float)
    horizon = height * rng.uniform(0.5, 0.7)
    t = np.clip(y / horizon, 0, 1)[..., None]
    img = np.array(rng.uniform([80, 130, 190], [130, 180, 235])) * (1 - t) + np.array([225, 212, 188.0]) * t
    hills = y > horizon + 25 * np.sin(x / rng.uniform(120, 220) + rng.uniform(0, 6))
    green = np.array(rng.uniform([50, 85, 35], [90, 125, 70]))
    img[hills] = (green * (1 + 0.25 * np.sin(x / 50)[..., None] * np.cos(y / 40)[..., None]))[hills]
    for _ in range(int(rng.integers(4, 8))):
        cx, cy, r = rng.uniform(0, width), rng.uniform(height * 0.3, height * 0.85), rng.uniform(30, 110)
        blob = ((x - cx) ** 2 + ((y - cy) * 1.4) ** 2) < r * r
        img[blob] = img[blob] * 0.5 + np.array(rng.uniform(20, 120, 3))
    img += rng.normal(0, 6, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(1.2))


def _thumb(pixels: np.ndarray) -> np.ndarray:
    return np.asarray(Image.fromarray(pixels[..., :3]).resize(THUMB, Image.BOX)).astype(int)


def setup(ctx: SetupContext) -> Prepared:
    photo = f"IMG_{int(ctx.rng.integers(1000, 9999))}"
    combos = [(w, h, d) for w, h in PRINTS for d in DPIS if 1000 <= round(w / 2.54 * d) <= 2200]
    rows = []
    for i in range(int(ctx.rng.integers(24, 36))):
        w, h, dpi = combos[int(ctx.rng.integers(len(combos)))]
        other = f"IMG_{int(ctx.rng.integers(1000, 9999))}"
        rows.append([f"PO-{5101 + i * 7}", CUSTOMERS[i % len(CUSTOMERS)], other if other != photo else "IMG_0001",
                     f"{w}x{h}", str(dpi), "paid" if ctx.rng.random() < 0.8 else "cancelled"])
    # The photo has two orders: the paid one, and a cancelled one with another size (before or after it).
    paid_row, cancelled_row = (int(i) for i in ctx.rng.choice(len(rows), 2, replace=False))
    (w_cm, h_cm, dpi), cancelled = (combos[int(i)] for i in ctx.rng.choice(len(combos), 2, replace=False))
    rows[paid_row][2:] = [photo, f"{w_cm}x{h_cm}", str(dpi), "paid"]
    rows[cancelled_row][2:] = [photo, f"{cancelled[0]}x{cancelled[1]}", str(cancelled[2]), "cancelled"]
    order = rows[paid_row][0]
    width = round(w_cm / 2.54 * dpi)
    image = _photo(ctx.rng)
    png = io.BytesIO()
    image.save(png, format="PNG")
    table = io.StringIO()
    csv.writer(table, lineterminator="\n").writerows([["order_id", "customer", "photo", "print_cm", "dpi", "status"],
                                                      *rows])
    ctx.write_file(ORDERS, table.getvalue())
    ctx.run(f"install -d -m 2755 -o {WORKSPACE_USER} -g {SHARED_GROUP} {OUTBOX}; "
            f"id -u {DESIGNER} >/dev/null 2>&1 || useradd --create-home --shell /bin/bash {DESIGNER}; "
            f"install -d -m 0755 -o {DESIGNER} -g {DESIGNER} {STUDIO}")
    ctx.write_file(f"{STUDIO}/{photo}.png", png.getvalue(), owner=DESIGNER, mode=0o644)
    ctx.write_file(GIMPRC, "(show-tips no)\n", owner=DESIGNER)
    ctx.run(f"chown -R {DESIGNER}:{DESIGNER} /home/{DESIGNER}/.config")
    ctx.grant_desktop_access(DESIGNER)  # the X server admits the desktop account only
    ctx.launch_gui(f"runuser -u {DESIGNER} -- env DISPLAY=:0 HOME=/home/{DESIGNER} {LAUNCH_MARKER} "
                   f"gimp --no-splash {STUDIO}/{photo}.png", name="gimp")
    window = ctx.wait_window(rf"^\[{photo}\] \(imported\).* – GIMP$", timeout=400)
    truth = {"order": order, "dpi": dpi, "width": width, "height": round(width * SIZE[1] / SIZE[0]),
             "thumb": _thumb(np.asarray(image)).tolist(), "window": window.geometry}
    return Prepared(params={"photo": photo}, truth=truth)


def _master(probe: Probe, truth: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    path = f"{STUDIO}/{truth['order']}.xcf"
    stat = probe.stat(path)
    if stat is None or stat.type != "file":
        return None, f"{path} does not exist"
    data = probe.read_bytes(path)
    try:
        xcf = read_xcf(data or b"")
    except (struct.error, ValueError, IndexError, KeyError):
        xcf = None
    if xcf is None:
        return None, f"{path} is not an XCF that GIMP wrote"
    xcf["owner"], xcf["path"] = stat.owner, path
    return xcf, ""


def check_master(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    xcf, why = _master(probe, truth)
    if xcf is None:
        return Verdict.failed(why)
    return Verdict.check(xcf["owner"] == DESIGNER, f"{xcf['path']}: XCF v{xcf['version']} owned by {xcf['owner']} "
                                                   f"(saved by the {DESIGNER}'s GIMP: {xcf['owner'] == DESIGNER})")


def check_size(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    xcf, why = _master(probe, truth)
    if xcf is None:
        return Verdict.failed(why)
    (width, height), layers = xcf["size"], [layer["size"] for layer in xcf["layers"]]
    ok = width == truth["width"] and abs(height - truth["height"]) <= 1 and layers == [(width, height)]
    return Verdict.check(ok, f"canvas {width}x{height}, layers {layers}; expected {truth['width']}x{truth['height']} "
                             "with the one photo layer scaled to it")


def check_resolution(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    xcf, why = _master(probe, truth)
    if xcf is None:
        return Verdict.failed(why)
    res = xcf["resolution"]
    ok = res is not None and all(abs(v - truth["dpi"]) < 0.01 for v in res)
    return Verdict.check(ok, f"resolution {res} ppi, expected {truth['dpi']}")


def check_pixels(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    xcf, why = _master(probe, truth)
    if xcf is None:
        return Verdict.failed(why)
    pixels = xcf["layers"][0]["pixels"] if xcf["layers"] else None
    if pixels is None:
        return Verdict.failed("the master has no 8-bit layer to compare")
    diff = float(np.abs(_thumb(pixels) - np.array(truth["thumb"])).mean())
    return Verdict.check(diff < 6, f"the master's picture differs from the photo by {diff:.1f} levels (max 6)")


def check_manifest(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    path = f"{OUTBOX}/manifest.csv"
    text = probe.read_text(path)
    if text is None:
        return Verdict.failed(f"{path} does not exist")
    rows = list(csv.DictReader(io.StringIO(text.strip())))
    xcf, _why = _master(probe, truth)
    digest = probe.sha256(xcf["path"]) if xcf else None
    row = rows[-1] if rows else {}
    expected = {"order_id": truth["order"], "file": f"{truth['order']}.xcf", "dpi": str(truth["dpi"]),
                "width_px": str(xcf["size"][0]) if xcf else "?", "height_px": str(xcf["size"][1]) if xcf else "?",
                "sha256": digest or "?"}
    found = {key: (row.get(key) or "").strip() for key in expected}
    wrong = [key for key in expected if found[key] != expected[key]]
    return Verdict.check(len(rows) == 1 and xcf is not None and not wrong,
                         f"{len(rows)} row(s); wrong or missing: {wrong or 'none'}")


def check_proof(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    path = f"{OUTBOX}/{truth['order']}_proof.jpg"
    data = probe.read_bytes(path)
    image = probe.image(path)
    if data is None or image is None or not data.startswith(b"\xff\xd8"):
        return Verdict.failed(f"{path} is missing or not a JPEG")
    if image.shape[:2] != (400, 600):
        return Verdict.failed(f"the proof is {image.shape[1]}x{image.shape[0]}, expected 600x400")
    diff = float(np.abs(_thumb(image) - np.array(truth["thumb"])).mean())
    return Verdict.check(diff < 8, f"600x400 JPEG; differs from the photo by {diff:.1f} levels (max 8)")


def _settled(ctx: OracleContext, tries: int = 60) -> Iterator[ActionLike]:
    """Wait steps until two polls in a row show (almost) the same screen: GIMP has finished redrawing."""
    previous, calm = None, 0
    for _try in range(tries):
        assert ctx.obs is not None
        frame = ctx.obs["screen"]
        if previous is not None and frame.shape == previous.shape:
            changed = int((np.abs(frame.astype(np.int16) - previous.astype(np.int16)).max(axis=2) > 24).sum())
            calm = calm + 1 if changed <= 400 else 0
            if calm >= 2:
                return
        previous = frame
        yield {"kind": "wait", "seconds": 1.0}


def _wait_master(path: str, seconds: int) -> dict[str, Any]:
    """A shell step: wait until GIMP's save is on disk and no longer growing (the shell sees the studio)."""
    return {"kind": "shell", "timeout": seconds + 30,
            "command": f"timeout {seconds} sh -c 'until [ -s {path} ] && a=$(stat -c %s {path}) && sleep 1 && "
                       f"[ \"$a\" = \"$(stat -c %s {path})\" ]; do sleep 0.5; done' && echo SAVED"}


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    photo, order, dpi, width = ctx.params["photo"], ctx.truth["order"], ctx.truth["dpi"], ctx.truth["width"]
    master = f"{STUDIO}/{order}.xcf"
    yield {"kind": "shell", "command": f"grep ',{photo},' ~/print/orders.csv; awk -F, '$3 == \"{photo}\" && "
                                       "$6 == \"paid\" { split($4, s, \"x\"); printf \"%s %d px at %d dpi\\n\", $1, "
                                       "s[1] / 2.54 * $5 + 0.5, $5 }' ~/print/orders.csv"}
    x, y, w, _h = ctx.truth["window"]
    yield {"kind": "click", "x": x + w - 40, "y": y + 12}  # the empty end of GIMP's menu bar: focus, no tool use
    assert ctx.obs is not None
    before = ctx.obs["screen"].copy()
    yield {"kind": "key", "keys": "alt+i"}  # Image menu
    yield {"kind": "key", "keys": "s"}  # Scale Image...
    yield from wait_box(ctx, before, tries=60)
    yield {"kind": "type", "text": str(width)}  # Width has the focus; the chain keeps the aspect ratio
    for _ in range(4):  # to X resolution, past the chain, Height and the unit menu
        yield {"kind": "key", "keys": "Tab"}
    yield {"kind": "type", "text": str(dpi)}
    yield {"kind": "key", "keys": "Tab"}  # commits X (the linked Y follows)
    yield {"kind": "key", "keys": "alt+s"}  # Scale
    yield {"kind": "wait", "seconds": 2.0}
    yield from _settled(ctx)
    assert ctx.obs is not None
    before = ctx.obs["screen"].copy()
    yield {"kind": "key", "keys": "ctrl+s"}
    yield from wait_box(ctx, before, tries=60)
    yield {"kind": "type", "text": order}  # replaces the selected base name, keeps .xcf
    for _attempt in range(3):  # the file chooser may swallow a Return to finish its completion
        yield {"kind": "key", "keys": "Return"}
        yield _wait_master(master, 60)
        assert ctx.obs is not None
        if "SAVED" in ctx.obs["terminal"]:
            break
    # `file` is not in the image, and ImageMagick 6 cannot read XCF v011: the canvas size is at bytes 14-21.
    size = ("python3 -c 'import struct, sys; "
            "print(\"%d,%d\" % struct.unpack(\">II\", open(sys.argv[1], \"rb\").read(22)[14:]))'")
    yield {"kind": "shell", "command": f"cd ~/print/outbox && f={master} && size=$({size} $f) && "
                                       f"convert {STUDIO}/{photo}.png -resize 600x {order}_proof.jpg && "
                                       "{ echo order_id,file,width_px,height_px,dpi,sha256; "
                                       f"echo {order},{order}.xcf,$size,{dpi},$(sha256sum < $f | cut -d' ' -f1); }} "
                                       "> manifest.csv && cat manifest.csv"}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Design-3",
    title="Scale a photo to its paid print order in GIMP and hand the master to the lab",
    instruction=(
        f"The photo {STUDIO}/{{photo}}.png is open in GIMP. GIMP runs under the studio's '{DESIGNER}' account, which "
        f"owns {STUDIO}: you can read files there, but only that GIMP window can write them. In ~/print/orders.csv "
        "find the paid order for {photo} (print_cm is width x height in cm). In GIMP, scale the image so its width is "
        "the print width in pixels at the order's dpi (cm / 2.54 x dpi, rounded to the nearest pixel; keep the aspect "
        "ratio) and its resolution is the order's dpi, then save it with Ctrl+S as "
        f"{STUDIO}/<order_id>.xcf. Then, from your shell, in ~/print/outbox/, write manifest.csv with the header "
        "order_id,file,width_px,height_px,dpi,sha256 and one row for the master (file is <order_id>.xcf, sha256 is "
        "the hex SHA-256 of the saved XCF), and make the customer's proof <order_id>_proof.jpg, a 600 px wide JPEG "
        "of the photo. Then finish."),
    channels=Channels(
        gui="scale the image and set its print resolution in the designer's GIMP window, save the master XCF",
        cli="find the paid order and compute the pixel size; write the lab manifest with the master's SHA-256; "
            "make the proof JPEG with ImageMagick",
        why_both="the print size comes from the order book, only the designer's GIMP window can write the master "
                 "XCF (no episode account can write the studio), and the manifest (checksum of that file) and the "
                 "proof are shell work in the shell's own outbox"),
    setup=setup,
    clauses=(
        Clause("master_xcf", "the master XCF was saved by the designer's GIMP", check_master, weight=2.0,
               critical=True, cap=0.3),
        Clause("print_size", "the master is scaled to the paid print's pixel size", check_size, critical=True,
               cap=0.5),
        Clause("resolution", "the master's resolution is the order's dpi", check_resolution),
        Clause("master_pixels", "the master holds the photo (scaled, not replaced)", check_pixels),
        Clause("manifest", "manifest.csv describes the saved master, checksum included", check_manifest),
        Clause("proof", "the proof is a 600 px wide JPEG of the photo", check_proof),
    ),
    deliverables=(
        Deliverable(f"{STUDIO}/{{order}}.xcf", "gui", owner=DESIGNER,
                    description="the master <order_id>.xcf (saved by the designer's GIMP)"),
        Deliverable(f"{OUTBOX}/manifest.csv", "cli", description="the lab manifest outbox/manifest.csv"),
        Deliverable(f"{OUTBOX}/{{order}}_proof.jpg", "cli", description="the proof outbox/<order_id>_proof.jpg"),
    ),
    oracle=oracle,
    profile="full",
    apps=("gimp", "imagemagick", "awk", "sha256sum"),
    max_steps=150,  # the oracle's screen waits are steps too
    time_budget_s=1500.0,
)
