"""Weave-Productivity-3: pick photos by their metadata, bulk-rename them in Thunar, publish checksums.

Which photos to upload is in a CSV (a filter for the shell). The renaming is
done in Thunar's "Rename Multiple Files" dialog, which leaves its settings in
~/.config/Thunar/renamerrc when it closes; writing that file from the shell is
flagged. The checksum list over the renamed files is shell work again.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from PIL import Image

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.evaluators import Clause, GuiArtifactViaCli, Probe, Verdict

CAMERA = f"{HOME}/camera"
UPLOAD = f"{HOME}/upload"
SUMS = f"{UPLOAD}/SHA256SUMS"
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
    ctx.run(["install", "-d", "-o", ctx.user, "-g", ctx.user, UPLOAD])
    ctx.run(["rm", "-f", RENAMERRC])  # only the agent's use of the dialog may create it
    ctx.launch_gui(f"cd {HOME} && {{as_user}} thunar {UPLOAD}", name="thunar")
    window = ctx.wait_window(f"^{WINDOW_TITLE}$", timeout=180)
    prefix = f"{place.lower()}-2026-"
    return Prepared(params={"place": place, "min_rating": min_rating, "prefix": prefix},
                    truth={"place": place, "min_rating": min_rating, "prefix": prefix, "chosen": chosen,
                           "hashes": hashes, "window": [window.x, window.y, window.width, window.height]})


def _uploaded(probe: Probe) -> list[str] | None:
    entries = probe.list_dir(UPLOAD)
    return None if entries is None else [e for e in entries if e.lower().endswith(".jpg")]


def check_selection(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = _uploaded(probe)
    if found is None:
        return Verdict.failed(f"{UPLOAD} does not exist")
    expected = sorted(truth["prefix"] + name for name in truth["chosen"])
    missing, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    return Verdict.check(not missing and not extra, f"{len(found)} photo(s) in ~/upload, expected {len(expected)}; "
                         f"missing {missing[:3]}, unexpected {extra[:3]}")


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


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    t = ctx.truth
    yield {"kind": "shell", "command": f"cd ~/camera && awk -F, -v p={t['place']} -v r={t['min_rating']} "
                                       "'NR > 1 && $3 == p && $4 >= r {print $1}' index.csv | "
                                       "xargs -I{} cp -p {} ~/upload/ && ls ~/upload"}
    yield {"kind": "shell", "command": "xdotool search --onlyvisible --name '^upload - Thunar$' | head -n 1 | "
                                       "xargs -r xdotool getwindowgeometry --shell"}
    found = dict(re.findall(r"^(X|Y|WIDTH|HEIGHT)=(-?\d+)$", str((ctx.obs or {}).get("terminal") or ""), re.M))
    x, y, w, h = ([int(found[k]) for k in ("X", "Y", "WIDTH", "HEIGHT")] if len(found) == 4 else t["window"])
    yield {"kind": "click", "x": x + w - 40, "y": y + h - 60}  # empty space in the folder view
    yield {"kind": "key", "keys": "ctrl+a"}
    yield {"kind": "key", "keys": "F2"}  # several files selected: Rename Multiple Files
    yield {"kind": "shell", "command": "timeout 60 sh -c 'until xdotool search --onlyvisible --name "
                                       "\"^Rename Multiple Files$\" >/dev/null; do sleep 0.2; done'", "timeout": 90}
    for _ in range(5):
        yield {"kind": "key", "keys": "Tab"}  # file list -> ... -> the Insert renamer's Text entry
    yield {"kind": "type", "text": t["prefix"]}
    wait_closed = ("timeout 30 sh -c 'while xdotool search --onlyvisible --name \"^Rename Multiple Files$\" "
                   ">/dev/null; do sleep 0.2; done'; echo closed=$?")
    for _ in range(3):  # Done stays insensitive until the dialog has previewed the new names
        yield {"kind": "key", "keys": "alt+d"}  # Done: rename and close
        yield {"kind": "shell", "command": wait_closed, "timeout": 60}
        if "closed=0" in str((ctx.obs or {}).get("terminal") or ""):
            break
    renamed = f"ls ~/upload | grep -c ^{t['prefix']}"
    yield {"kind": "shell", "command": f"timeout 60 sh -c 'until [ $({renamed}) -eq {len(t['chosen'])} ]; do "
                                       "sleep 0.2; done'; ls ~/upload", "timeout": 90}
    yield {"kind": "shell", "command": "cd ~/upload && sha256sum *.jpg | tee SHA256SUMS"}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Productivity-3",
    title="Select, bulk-rename and checksum photos for upload",
    instruction=(
        "~/camera/index.csv describes the photos in ~/camera (file,taken,place,rating). 1) Copy every photo "
        "taken in {place} with a rating of at least {min_rating} into ~/upload (open in Thunar); keep the "
        "originals. 2) In Thunar, select the copied photos and rename them all at once with Rename Multiple "
        "Files (F2), inserting the prefix '{prefix}' in front of each name. 3) Write ~/upload/SHA256SUMS in "
        "`sha256sum` format, listing the renamed photos. Then finish."),
    channels=Channels(
        gui="bulk-rename the copied photos in Thunar's Rename Multiple Files dialog",
        cli="filter the CSV, copy the chosen photos, write SHA256SUMS over the renamed files",
        why_both="the selection and the checksums are shell work over a CSV, while the renaming must be done in "
                 "Thunar's bulk renamer (its settings file is checked and must not be written from the shell)"),
    setup=setup,
    clauses=(
        Clause("selection", "~/upload holds exactly the chosen photos, prefixed", check_selection, weight=2.0,
               critical=True, cap=0.5),
        Clause("contents", "the uploads are identical copies and the originals are kept", check_contents),
        Clause("bulk_renamer", "the renaming was done with Thunar's Insert renamer and the prefix", check_renamer,
               weight=2.0),
        Clause("checksums", "SHA256SUMS lists exactly the renamed photos with their hashes", check_sums),
    ),
    rules=(GuiArtifactViaCli([RENAMERRC], "the bulk rename must be done in Thunar's Rename Multiple Files dialog"),),
    oracle=oracle,
    profile="full",
    apps=("thunar", "awk", "sha256sum"),
    max_steps=40,
    time_budget_s=900.0,
)
