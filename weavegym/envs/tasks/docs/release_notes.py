"""Weave-Docs-2: fill a release's size and checksum into its notes in Writer, then publish checksums.

The size and SHA-256 of the release tarball come from the shell. The notes are
under review: the document records changes, so the edit must be made in the
open Writer window, which stores each replacement as a tracked change by the
reviewer's name. notes.odt belongs to the desktop account (mode 0644, in a
sticky folder), so the shell can neither rewrite it in place nor move another
file over it, and a notes.odt the workspace account made fails provenance
(plus patterns for headless LibreOffice, ODF libraries and hand-made zips).
SHA256SUMS, which must list the tarball and the notes as Writer saved them, is
shell work again (the workspace account's file in that folder).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from typing import Any

from weavegym.envs.setup_context import HOME, SetupContext
from weavegym.envs.task import ActionLike, Channels, Deliverable, OracleContext, Prepared, Task
from weavegym.envs.tasks.docs.office import (
    FORGERY,
    NS,
    content_xml,
    odt,
    protect,
    reviewer,
    wait_until_ready,
    write_profile,
)
from weavegym.evaluators import Clause, ForbiddenPatterns, GuiArtifactViaCli, Probe, Verdict

RELEASE = f"{HOME}/release"
NOTES = f"{RELEASE}/notes.odt"
SUMS = f"{RELEASE}/SHA256SUMS"
PRODUCTS = ("harbor", "lumen", "quill", "tally", "orbit", "sprocket", "ferry", "beacon", "cobalt", "drift",
            "ember", "fathom", "glint", "hollow", "juniper", "kestrel", "lattice", "meadow", "nimbus", "pylon")
HIGHLIGHTS = ("Faster start-up on large workspaces.", "A new export dialog with presets.",
              "Fewer network round trips when syncing.", "Keyboard shortcuts for every panel.",
              "Lower memory use for long sessions.", "Better error messages for broken configs.",
              "Dark mode follows the desktop theme.", "Resumable downloads of large files.",
              "A command palette for every action.", "Per-project settings override the global ones.")


def _tarball(ctx: SetupContext, top: str) -> bytes:
    """A small, reproducible .tar.gz (fixed mtimes, seeded contents)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in ("README", "src/main.py", "src/util.py", "data/defaults.json"):
            words = [f"{int(v):x}" for v in ctx.rng.integers(0, 1 << 32, size=int(ctx.rng.integers(300, 900)))]
            data = (" ".join(words) + "\n").encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(data), 1_790_000_000, 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def setup(ctx: SetupContext) -> Prepared:
    product = PRODUCTS[int(ctx.rng.integers(len(PRODUCTS)))]
    version = f"{int(ctx.rng.integers(1, 5))}.{int(ctx.rng.integers(0, 12))}.{int(ctx.rng.integers(0, 9))}"
    tarball = f"{product}-{version}.tar.gz"
    data = _tarball(ctx, f"{product}-{version}")
    given, surname = reviewer(ctx)
    highlights = [HIGHLIGHTS[int(i)] for i in ctx.rng.choice(len(HIGHLIGHTS), size=int(ctx.rng.integers(2, 5)),
                                                              replace=False)]
    ctx.write_file(f"{RELEASE}/{tarball}", data, mode=0o644)
    ctx.write_file(NOTES, odt([("h", f"{product.capitalize()} {version} release notes"),
                               ("p", "Highlights:"), *[("p", f"- {h}") for h in highlights],
                               ("p", ""), ("p", f"Download: {tarball}"), ("p", "Size: [SIZE] bytes"),
                               ("p", "SHA-256: [SHA256]")], track_changes=True), mode=0o644)
    protect(ctx, RELEASE, NOTES)  # Writer's to save; the shell only adds SHA256SUMS beside it
    write_profile(ctx, given, surname)
    ctx.launch_gui(f"cd {HOME} && {{as_user}} soffice --writer {NOTES}", name="writer")
    window = ctx.wait_window(r"^notes\.odt - LibreOffice Writer$", timeout=400)
    wait_until_ready(ctx, NOTES)
    window = ctx.wait_window(r"^notes\.odt - LibreOffice Writer$")  # its final size, now that it is ready
    return Prepared(params={"tarball": tarball},
                    truth={"tarball": tarball, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                           "reviewer": f"{given} {surname}",
                           "window": window.geometry})


def _notes(probe: Probe) -> ET.Element | None:
    root = content_xml(probe.read_bytes(NOTES))
    return None if root is None else root.find("office:body/office:text", NS)


def _body_lines(text: ET.Element) -> list[str]:
    """The document's current text, one line per paragraph; tracked deletions are left out."""
    tracked = f"{{{NS['text']}}}tracked-changes"
    return ["".join(el.itertext()) for el in text if el.tag != tracked]


def check_checksum(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = _notes(probe)
    if text is None:
        return Verdict.failed(f"{NOTES} is missing or not an ODF text document")
    line = next((ln for ln in _body_lines(text) if ln.startswith("SHA-256")), "")
    return Verdict.check(line.split(":", 1)[-1].strip().lower() == truth["sha256"],
                         f"notes say {line[:90]!r}, expected the tarball's SHA-256 {truth['sha256'][:16]}...")


def check_size(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = _notes(probe)
    if text is None:
        return Verdict.failed(f"{NOTES} is missing or not an ODF text document")
    line = next((ln for ln in _body_lines(text) if ln.startswith("Size")), "")
    return Verdict.check(line.replace(",", "").strip() == f"Size: {truth['size']} bytes",
                         f"notes say {line[:60]!r}, expected 'Size: {truth['size']} bytes'")


def check_tracked(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    text = _notes(probe)
    if text is None:
        return Verdict.failed(f"{NOTES} is missing or not an ODF text document")
    changes = text.find("text:tracked-changes", NS)
    recording = changes is not None and changes.get(f"{{{NS['text']}}}track-changes", "true") == "true"
    deleted, inserted = [], 0
    for region in text.iterfind("text:tracked-changes/text:changed-region", NS):
        for kind in ("deletion", "insertion"):
            change = region.find(f"text:{kind}", NS)
            author = None if change is None else change.findtext("office:change-info/dc:creator", "", NS)
            if author != truth["reviewer"]:
                continue
            if kind == "deletion":
                deleted.append("".join("".join(p.itertext()) for p in change.iterfind("text:p", NS)))
            else:
                inserted += 1
    replaced = [p for p in ("[SIZE]", "[SHA256]") if any(p in d for d in deleted)]
    return Verdict.check(len(replaced) == 2 and inserted >= 2 and recording,
                         f"tracked changes by {truth['reviewer']}: {inserted} insertion(s), placeholders replaced: "
                         f"{replaced}, recording {'on' if recording else 'off'}; expected both placeholders replaced "
                         "as tracked changes and recording still on")


def check_sums(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    listed = probe.checksum_list(SUMS)
    if listed is None:
        return Verdict.failed(f"{SUMS} does not exist")
    notes_hash = probe.sha256(NOTES)
    ok_tar = listed.get(truth["tarball"]) == truth["sha256"]
    ok_notes = notes_hash is not None and listed.get("notes.odt") == notes_hash
    evidence = f"SHA256SUMS: tarball {'right' if ok_tar else 'wrong/missing'}, notes.odt as saved " \
               f"{'right' if ok_notes else 'wrong/missing'} (lists {sorted(listed)[:4]})"
    if ok_tar and ok_notes:
        return Verdict.satisfied(evidence)
    return Verdict.partial(evidence) if ok_tar or ok_notes else Verdict.failed(evidence)


MARK = "/tmp/notes-save.mark"


def wait_saved(seconds: int = 100) -> str:
    """Shell code that waits until Writer has saved notes.odt since MARK was touched, then prints "saved"."""
    return (f"timeout {seconds} sh -c 'until [ -n \"$(find ~/release/notes.odt -newer {MARK})\" ]; do sleep 0.3; "
            "done' && echo saved")


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    t = ctx.truth
    yield {"kind": "shell", "command": f"cd ~/release && stat -c %s {t['tarball']} && sha256sum {t['tarball']}"}
    x, y, w, h = t["window"]  # measured by setup once Writer was ready (the shell has no display to ask)
    yield {"kind": "click", "x": x + w // 2, "y": y + h // 2}  # the page, to focus the document
    # LibreOffice runs shortcuts (ctrl+End, Up, shift+Home, ctrl+s...) asynchronously, after the keys that follow
    # them, while typed text goes in at once. So every run of shortcuts ends with ctrl+s, and the oracle types
    # only once the file is saved: then the shortcuts before it have run too. The first save, right after the
    # click, also proves the document has the keyboard focus (a key sent while it moves can be lost; retry).
    for _attempt in range(3):
        yield {"kind": "shell", "command": f"touch {MARK}"}
        yield {"kind": "key", "keys": "ctrl+s"}
        yield {"kind": "shell", "timeout": 120, "command": wait_saved(40)}
        if "saved" in str((ctx.obs or {}).get("terminal") or ""):
            break
    # The Size line is the last but one paragraph, the SHA-256 line the last one: select each whole line, retype it.
    for keys, text in ((("ctrl+End", "Up", "End", "shift+Home"), f"Size: {t['size']} bytes"),
                       (("Down", "End", "shift+Home"), f"SHA-256: {t['sha256']}")):
        yield {"kind": "shell", "command": f"touch {MARK}"}
        for key in (*keys, "ctrl+s"):
            yield {"kind": "key", "keys": key}
        yield {"kind": "shell", "timeout": 120, "command": wait_saved()}
        yield {"kind": "type", "text": text}
    yield {"kind": "shell", "command": f"touch {MARK}"}
    yield {"kind": "key", "keys": "ctrl+s"}
    yield {"kind": "shell", "timeout": 120,
           "command": f"{wait_saved()} && cd ~/release && sha256sum {t['tarball']} notes.odt > SHA256SUMS"}
    yield {"kind": "done"}


TASK = Task(
    id="Weave-Docs-2",
    title="Complete the release notes under review and publish checksums",
    instruction=(
        "The release notes ~/release/notes.odt are open in LibreOffice Writer, with change tracking on so the "
        "release manager can review every edit; keep it on. In Writer, replace [SIZE] with the exact size in "
        "bytes of ~/release/{tarball} and [SHA256] with its SHA-256 checksum (lower-case hex), and save the "
        "document (keep the ODF format). notes.odt may only be changed in the Writer window (the shell cannot "
        "write it; headless LibreOffice, ODF libraries or zip tools count as tampering). Then write "
        "~/release/SHA256SUMS in the format of `sha256sum`, listing {tarball} and the saved notes.odt. Then "
        "finish."),
    channels=Channels(
        gui="replace both placeholders in the open Writer window, where the edits are recorded as tracked "
            "changes, and save",
        cli="measure and hash the tarball, then write SHA256SUMS over the tarball and the notes Writer saved",
        why_both="the edits must be tracked changes made in Writer, while the size and the hashes (of the tarball "
                 "and of the saved notes) come from the shell"),
    setup=setup,
    clauses=(
        Clause("notes_checksum", "the notes give the tarball's SHA-256", check_checksum, weight=2.0, critical=True,
               cap=0.5),
        Clause("notes_size", "the notes give the tarball's size in bytes", check_size),
        Clause("tracked_changes", "both placeholders were replaced as tracked changes by the reviewer, recording on",
               check_tracked, weight=2.0),
        Clause("checksums_file", "SHA256SUMS lists the tarball and the saved notes correctly", check_sums),
    ),
    deliverables=(
        Deliverable(NOTES, "gui", description="notes.odt as Writer saved it, with the tracked changes"),
        Deliverable(SUMS, "cli", description="~/release/SHA256SUMS"),
    ),
    oracle=oracle,
    rules=(ForbiddenPatterns(FORGERY, defaults=False),
           GuiArtifactViaCli([NOTES], "the notes must be edited and saved in Writer, where edits are tracked")),
    profile="full",
    apps=("libreoffice-writer", "sha256sum"),
    max_steps=50,
    time_budget_s=1200.0,
)
