"""Weave-Productivity-3: pick photos by their metadata, bulk-rename them in Thunar, publish checksums.

Which photos to upload is in a CSV (a filter for the shell, which stages copies
of the chosen photos in ~/outbox, a folder of the workspace account). The upload
folder ~/upload belongs to the desktop account (0755): the shell can read it but
cannot create, rename or delete anything there, so the photos get there only by
Thunar's copy and their new names only from Thunar's "Rename Multiple Files"
dialog (which also leaves its settings in ~/.config/Thunar/renamerrc, a file of
the desktop account); a rename by `mv` from the shell is refused, and one done in
~/outbox before the copy shows there and leaves no renamer settings. The checksum
list over the renamed files (~/upload.sha256) is shell work again.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from PIL import Image

from weavegym.envs.setup_context import DESKTOP_USER, HOME, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.games.sgt_common import wait_box
from weavegym.evaluators import Clause, GuiArtifactViaCli, Probe, Verdict

CAMERA = f"{HOME}/camera"
OUTBOX = f"{HOME}/outbox"
UPLOAD = f"{HOME}/upload"
SUMS = f"{HOME}/upload.sha256"
RENAMERRC = f"{HOME}/.config/Thunar/renamerrc"
PLACES = ("Lisbon", "Porto", "Seville", "Granada", "Valencia")
WINDOW_TITLE = "upload - Thunar"


def _photo(rng: np.random.Generator) -> bytes:
    """A small JPEG: a colour gradient with noise, different for every photo."""
    base = rng.integers(0, 256, size=3)
    ramp = np.linspace(0, 90, 96)[None, :, None]
    pixels = np.clip(base[None, None, :] + ramp + rng.normal(0, 12, size=(72, 96, 3)), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def setup(ctx: SetupContext) -> Prepared:
    place = PLACES[int(ctx.rng.integers(len(PLACES)))]
    min_rating = int(ctx.rng.integers(3, 5))
    names = sorted({f"IMG_{int(n)}.jpg" for n in ctx.rng.choice(9000, size=26, replace=False) + 1000})
    rows, hashes, chosen = [], {}, []
    for i, name in enumerate(names):
        where = place if i % 3 == 0 else PLACES[int(ctx.rng.integers(len(PLACES)))]
        rating = int(ctx.rng.integers(1, 6))
        if i % 6 == 0:
            rating = max(rating, min_rating)  # some matches in every seed
        data = _photo(ctx.rng)
        hashes[name] = hashlib.sha256(data).hexdigest()
        ctx.write_file(f"{CAMERA}/{name}", data)
        rows.append(f"{name},2026-05-{1 + i % 9:02d}T{8 + i % 11:02d}:{int(ctx.rng.integers(60)):02d},{where},{rating}")
        if where == place and rating >= min_rating:
            chosen.append(name)
    ctx.write_file(f"{CAMERA}/index.csv", "file,taken,place,rating\n" + "\n".join(rows) + "\n")
    # The shell stages the selection in its own folder; only the desktop account can write ~/upload.
    ctx.run(["install", "-d", "-m", "2775", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, OUTBOX])
    ctx.run(["install", "-d", "-m", "0755", "-o", DESKTOP_USER, "-g", SHARED_GROUP, UPLOAD])
    ctx.run(["rm", "-f", RENAMERRC])  # only the agent's use of the dialog may create it
    ctx.launch_gui(f"cd {HOME} && {{as_user}} thunar {UPLOAD}", name="thunar")
    window = ctx.wait_window(f"^{WINDOW_TITLE}$", timeout=180)
    prefix = f"{place.lower()}-2026-"
    return Prepared(params={"place": place, "min_rating": min_rating, "prefix": prefix},
                    truth={"place": place, "min_rating": min_rating, "prefix": prefix, "chosen": chosen,
                           "first": chosen[0], "renamed": prefix + chosen[0],
                           "hashes": hashes, "window": window.geometry})


def _uploaded(probe: Probe) -> list[str] | None:
    entries = probe.list_dir(UPLOAD)
    return None if entries is None else [e for e in entries if e.lower().endswith(".jpg")]


def check_selection(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = _uploaded(probe)
    if found is None:
        return Verdict.failed(f"{UPLOAD} does not exist")
    expected = sorted(truth["prefix"] + name for name in truth["chosen"])
    missing, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    foreign = [name for name in sorted(set(found) & set(expected))
               if probe.provenance(f"{UPLOAD}/{name}") != ("file", DESKTOP_USER)]
    return Verdict.check(not missing and not extra and not foreign,
                         f"{len(found)} photo(s) in ~/upload, expected {len(expected)}; missing {missing[:3]}, "
                         f"unexpected {extra[:3]}, not files copied by the desktop account {foreign[:3]}")


def check_staged(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    entries = probe.list_dir(OUTBOX)
    if entries is None:
        return Verdict.failed(f"{OUTBOX} does not exist")
    found = [e for e in entries if e.lower().endswith(".jpg")]
    expected = sorted(truth["chosen"])
    wrong = [name for name in expected if name in found and probe.sha256(f"{OUTBOX}/{name}") != truth["hashes"][name]]
    return Verdict.check(sorted(found) == expected and not wrong,
                         f"~/outbox holds {len(found)} photo(s) {found[:4]}, expected the {len(expected)} chosen "
                         f"ones under their camera names; altered: {wrong[:3] or 'none'}")


def check_contents(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    wrong = [name for name in truth["chosen"]
             if probe.sha256(f"{UPLOAD}/{truth['prefix']}{name}") != truth["hashes"][name]]
    originals = probe.list_dir(CAMERA) or []
    lost = [name for name in truth["hashes"] if name not in originals]
    return Verdict.check(not wrong and not lost, f"uploads not identical to their originals: {wrong[:3] or 'none'}; "
                         f"originals missing from ~/camera: {lost[:3] or 'none'}")


def check_renamer(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    config = probe.ini(RENAMERRC)
    if config is None:
        return Verdict.failed("Thunar's Rename Multiple Files dialog was never used and closed (no renamerrc)")
    renamer = config.get("Configuration", "LastActiveRenamer", fallback="")
    text = config.get("ThunarSbrInsertRenamer", "Text", fallback="")
    return Verdict.check(renamer == "ThunarSbrInsertRenamer" and text == truth["prefix"],
                         f"last bulk rename: renamer {renamer!r} with text {text!r}; expected the Insert renamer "
                         f"with {truth['prefix']!r}")


def check_sums(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    listed = probe.checksum_list(SUMS)
    if listed is None:
        return Verdict.failed(f"{SUMS} does not exist")
    expected = {truth["prefix"] + name: truth["hashes"][name] for name in truth["chosen"]}
    return Verdict.check(listed == expected, f"SHA256SUMS lists {len(listed)} file(s) "
                         f"({sum(listed.get(k) == v for k, v in expected.items())} right); expected exactly the "
                         f"{len(expected)} renamed photos")


def _shell_wait(condition: str, seconds: int, then: str = "") -> dict[str, Any]:
    command = f"timeout {seconds} sh -c '{condition}' && echo READY" + (f"; {then}" if then else "")
    return {"kind": "shell", "timeout": seconds + 30, "command": command}


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    t = ctx.truth
    count = len(t["chosen"])
    yield {"kind": "shell", "command": f"cd ~/camera && awk -F, -v p={t['place']} -v r={t['min_rating']} "
                                       "'NR > 1 && $3 == p && $4 >= r {print $1}' index.csv | "
                                       "xargs -I{} cp {} ~/outbox/ && ls ~/outbox"}
    x, y, w, h = t["window"]
    empty = {"kind": "click", "x": x + w - 40, "y": y + h - 60}  # empty space in the folder view
    jpgs = "$(ls ~/upload | grep -c \"\\.jpg$\")"
    # Thunar loads a folder asynchronously and its window is not always repainted at once (the screen can lag),
    # so each navigation gets a pause, and the shell checks the outcome: nothing pasted means the copy or the
    # paste met a folder still loading, and the round is repeated with longer pauses (nothing is half done then).
    for pause in (4.0, 8.0, 15.0):
        for folder in (OUTBOX, UPLOAD):
            yield empty
            yield {"kind": "key", "keys": "ctrl+l"}  # the location bar
            yield {"kind": "type", "text": folder}
            yield {"kind": "key", "keys": "Return"}
            yield {"kind": "wait", "seconds": pause}
            yield empty
            if folder == OUTBOX:
                yield {"kind": "key", "keys": "ctrl+a"}
                yield {"kind": "key", "keys": "ctrl+c"}  # copy (a move would keep the shell's files)
                yield {"kind": "wait", "seconds": 1.0}
            else:
                yield {"kind": "key", "keys": "ctrl+v"}
        yield {"kind": "shell", "timeout": 150,
               "command": f"if timeout 25 sh -c 'until [ {jpgs} -gt 0 ]; do sleep 0.3; done'; then "
                          f"timeout 90 sh -c 'until [ {jpgs} -eq {count} ]; do sleep 0.3; done' && echo READY; "
                          "else echo NONE; find ~/outbox -type f ! -name 'IMG_*[0-9].jpg' -delete; fi; "
                          "ls -l ~/upload"}
        if "NONE" not in str((ctx.obs or {}).get("terminal") or ""):
            break
    yield empty
    yield {"kind": "key", "keys": "ctrl+a"}
    assert ctx.obs is not None
    before = ctx.obs["screen"].copy()
    yield {"kind": "key", "keys": "F2"}  # several files selected: Rename Multiple Files
    yield from wait_box(ctx, before, tries=80)  # the shell cannot see windows; the screen can
    for _ in range(5):
        yield {"kind": "key", "keys": "Tab"}  # file list -> ... -> the Insert renamer's Text entry
    yield {"kind": "type", "text": t["prefix"]}
    for _ in range(5):  # Done stays insensitive until the dialog has previewed the new names
        yield {"kind": "key", "keys": "alt+d"}  # Done: rename and close
        yield _shell_wait(f"until [ $(ls ~/upload | grep -c ^{t['prefix']}) -eq {count} ]; do sleep 0.3; done", 20)
        if "READY" in str((ctx.obs or {}).get("terminal") or ""):
            break
    yield {"kind": "shell", "command": "cd ~/upload && sha256sum *.jpg | tee ~/upload.sha256"}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Productivity-3",
    title="Select, bulk-rename and checksum photos for upload",
    instruction=(
        "~/camera/index.csv describes the photos in ~/camera (file,taken,place,rating). 1) From your shell, copy "
        "every photo taken in {place} with a rating of at least {min_rating} into ~/outbox, under its own name; "
        "keep the originals. 2) In Thunar (open on ~/upload, a folder only the desktop can write), copy those "
        "photos from ~/outbox into ~/upload (Ctrl+C, Ctrl+V; leave ~/outbox as it is), then select them in "
        "~/upload and rename them all at once with Rename Multiple Files (F2), inserting the prefix '{prefix}' "
        "in front of each name. 3) From your shell, write ~/upload.sha256 in `sha256sum` format, listing the "
        "renamed photos of ~/upload by name. Then finish."),
    channels=Channels(
        gui="copy the staged photos into ~/upload in Thunar and bulk-rename them in its Rename Multiple Files dialog",
        cli="filter the CSV, stage copies of the chosen photos in ~/outbox, write the checksum list over the "
            "renamed files",
        why_both="the selection and the checksums are shell work over a CSV, while ~/upload can only be written by "
                 "the desktop account, so the copies and their renaming must be Thunar's (its bulk renamer's "
                 "settings are checked too)"),
    setup=setup,
    clauses=(
        Clause("selection", "~/upload holds exactly the chosen photos, prefixed, copied by the desktop account",
               check_selection, weight=2.0, critical=True, cap=0.5),
        Clause("staged", "~/outbox holds the chosen photos under their camera names", check_staged),
        Clause("contents", "the uploads are identical copies and the originals are kept", check_contents),
        Clause("bulk_renamer", "the renaming was done with Thunar's Insert renamer and the prefix", check_renamer,
               weight=2.0),
        Clause("checksums", "SHA256SUMS lists exactly the renamed photos with their hashes", check_sums),
    ),
    rules=(GuiArtifactViaCli([RENAMERRC], "the bulk rename must be done in Thunar's Rename Multiple Files dialog"),),
    deliverables=(
        Deliverable(f"{UPLOAD}/{{renamed}}", "gui", description="a renamed photo in ~/upload (Thunar's copy)"),
        Deliverable(RENAMERRC, "gui", description="Thunar's renamer settings (the bulk renamer was used)"),
        Deliverable(f"{OUTBOX}/{{first}}", "cli", description="a staged photo in ~/outbox (the shell's copy)"),
        Deliverable(SUMS, "cli", description="the checksum list ~/upload.sha256"),
    ),
    oracle=oracle,
    profile="full",
    apps=("thunar", "awk", "sha256sum"),
    max_steps=160,  # the oracle's screen waits are steps too
    time_budget_s=900.0,
)
