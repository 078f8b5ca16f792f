"""Helpers shared by the LibreOffice tasks: a quiet user profile, small ODF files, reading what Writer saved,
GUI-only documents (``protect``) and waiting for the screen (``wait_screen``).

Not a task (it defines no ``TASK``). The profile skips LibreOffice's first-run
dialogs (tip of the day, "what's new" bar, donation nags) and sets the user's
name, which Writer records as the author of tracked changes and comments.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator
from xml.sax.saxutils import escape

import numpy as np

from weavegym.envs.setup_context import HOME, SHARED_GROUP, SetupContext
from weavegym.envs.task import ActionLike, OracleContext
from weavegym.evaluators import ForbiddenPattern

PROFILE_XCU = f"{HOME}/.config/libreoffice/4/user/registrymodifications.xcu"
NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
    "of": "urn:oasis:names:tc:opendocument:xmlns:of:1.2",
}
# Ways to produce or rewrite an office document without LibreOffice's GUI.
FORGERY = (
    ForbiddenPattern("LibreOffice without its GUI", r"\b(?:soffice|libreoffice)\b[^\n;|&]*\s--?(?:headless|invisible|"
                     r"convert-to|print-to-file|accept)\b|\bimport\s+uno\b|\bstoreToURL\b|\bunoconv\b|"
                     r"\bmacro:///|vnd\.sun\.star\.script", "high", "edits the document without LibreOffice's GUI"),
    ForbiddenPattern("ODF library", r"\b(?:from|import)\s+(?:odf|ezodf|pyexcel_ods3?|pandas_ods_reader|odfdo)\b|"
                     r"engine\s*=\s*[\"']odf", "high",
                     "writes the document with an ODF library instead of LibreOffice"),
    ForbiddenPattern("hand-made archive", r"\bZipFile\s*\([^)]*[\"'][wax][\"']|(?:^|[;&|(\s])zip\s[^\n;|&]*\.od[ts]\b|"
                     r"META-INF/manifest\.xml", "high", "assembles an OpenDocument zip by hand"),
)
_SETTINGS = (
    ("/org.openoffice.Office.Common/Misc", "FirstRun", "false"),
    ("/org.openoffice.Office.Common/Misc", "ShowTipOfTheDay", "false"),
    ("/org.openoffice.Office.Common/Save/Document", "AutoSave", "false"),
    ("/org.openoffice.Office.Recovery/AutoSave", "Enabled", "false"),
    ("/org.openoffice.Setup/Office", "ooSetupInstCompleted", "true"),
    ("/org.openoffice.Setup/Product", "ooSetupLastVersion", "7.4"),
    ("/org.openoffice.Setup/Product", "LastTimeDonateShown", "4000000000"),
    ("/org.openoffice.Setup/Product", "LastTimeGetInvolvedShown", "4000000000"),
)


GIVEN_NAMES = ("Dana", "Mika", "Ravi", "Lena", "Ines", "Tom", "Aiko", "Omar", "Sofia", "Jonas", "Priya", "Mateo",
               "Hanna", "Kofi", "Yara", "Emil", "Nadia", "Oskar", "Leila", "Tariq")
SURNAMES = ("Okafor", "Lindqvist", "Menon", "Brandt", "Carvalho", "Becker", "Tanaka", "Haddad", "Novak", "Moreau",
            "Rossi", "Kowalski", "Nakamura", "Duarte", "Eriksen", "Varga", "Mensah", "Petrov", "Quinn", "Salonen")


def reviewer(ctx: SetupContext) -> tuple[str, str]:
    """A seeded reviewer's (given name, surname): 400 combinations."""
    return (GIVEN_NAMES[int(ctx.rng.integers(len(GIVEN_NAMES)))], SURNAMES[int(ctx.rng.integers(len(SURNAMES)))])


def write_profile(ctx: SetupContext, given_name: str, surname: str) -> None:
    """A LibreOffice user profile without first-run dialogs, for a user called ``given_name surname``."""
    items = [*_SETTINGS, ("/org.openoffice.UserProfile/Data", "givenname", given_name),
             ("/org.openoffice.UserProfile/Data", "sn", surname)]
    body = "\n".join(f'<item oor:path="{path}"><prop oor:name="{name}" oor:op="fuse"><value>{escape(value)}'
                     "</value></prop></item>" for path, name, value in items)
    ctx.write_file(PROFILE_XCU, '<?xml version="1.0" encoding="UTF-8"?>\n<oor:items '
                   'xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" '
                   f'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n{body}\n</oor:items>\n')
    # write_file gives the user only the innermost directory; LibreOffice must own its whole profile tree.
    ctx.run(["chown", "-R", f"{ctx.user}:{ctx.user}", f"{HOME}/.config/libreoffice"])


def wait_until_ready(ctx: SetupContext, document: str) -> None:
    """Block until the LibreOffice instance showing ``document`` has finished starting.

    Its window is mapped long before it accepts input under emulation. A second ``soffice`` call is handed
    to the running instance, which serves it only once its start-up is over, so a small conversion that
    comes back means the GUI is ready too.
    """
    out = "/tmp/weavegym-office-ready"
    ctx.run(["bash", "-c", f"cd {HOME} && runuser -u {ctx.user} -- env DISPLAY=:0 HOME={HOME} soffice --headless "
             f"--convert-to pdf --outdir {out} {document} >/dev/null 2>&1; "
             f"for i in $(seq 600); do ls {out}/*.pdf >/dev/null 2>&1 && break; sleep 0.5; done; "
             f"ls {out}/*.pdf && rm -rf {out}"], timeout=500)


def _odf_zip(mimetype: str, content: str) -> bytes:
    manifest = ('<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
                'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">'
                f'<manifest:file-entry manifest:full-path="/" manifest:media-type="{mimetype}"/>'
                '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
                "</manifest:manifest>")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype", (2026, 1, 1, 0, 0, 0)), mimetype)
        archive.writestr(zipfile.ZipInfo("META-INF/manifest.xml", (2026, 1, 1, 0, 0, 0)), manifest,
                         zipfile.ZIP_DEFLATED)
        archive.writestr(zipfile.ZipInfo("content.xml", (2026, 1, 1, 0, 0, 0)), content, zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def odt(paragraphs: list[tuple[str, str]], *, track_changes: bool = False) -> bytes:
    """A text document from (kind, text) pairs, kind "h" (heading) or "p" (body paragraph).

    With ``track_changes`` the document opens with change recording on, so every edit made in Writer is
    recorded with its author's name.
    """
    parts = ['<text:tracked-changes text:track-changes="true"/>'] if track_changes else []
    for kind, text in paragraphs:
        if kind == "h":
            parts.append(f'<text:h text:style-name="Heading_20_1" text:outline-level="1">{escape(text)}</text:h>')
        else:
            parts.append(f'<text:p text:style-name="Standard">{escape(text)}</text:p>')
    return _odf_zip("application/vnd.oasis.opendocument.text", _document("text", "".join(parts)))


def ods(rows: list[list[str | float]], *, sheet: str = "Sheet1", track_changes: bool = False) -> bytes:
    """A one-sheet spreadsheet. Cells: numbers, text, or formulas written as ``"=..."`` in OpenFormula syntax
    (e.g. ``"=ROUND([.C2]*(1+[.D2]);2)"``)."""
    xml_rows = []
    for row in rows:
        cells = []
        for value in row:
            if isinstance(value, (int, float)):
                cells.append(f'<table:table-cell office:value-type="float" office:value="{value}"><text:p>{value}'
                             "</text:p></table:table-cell>")
            elif value.startswith("="):
                cells.append(f'<table:table-cell table:formula="of:{escape(value)}" office:value-type="float"/>')
            else:
                cells.append(f'<table:table-cell office:value-type="string"><text:p>{escape(value)}</text:p>'
                             "</table:table-cell>")
        xml_rows.append(f"<table:table-row>{''.join(cells)}</table:table-row>")
    tracking = '<table:tracked-changes table:track-changes="true"/>' if track_changes else ""
    body = f'{tracking}<table:table table:name="{escape(sheet)}">{"".join(xml_rows)}</table:table>'
    return _odf_zip("application/vnd.oasis.opendocument.spreadsheet", _document("spreadsheet", body))


def _document(kind: str, body: str) -> str:
    namespaces = " ".join(f'xmlns:{prefix}="{uri}"' for prefix, uri in NS.items())
    return (f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {namespaces} office:version="1.3">'
            f"<office:body><office:{kind}>{body}</office:{kind}></office:body></office:document-content>")


def content_xml(data: bytes | None) -> ET.Element | None:
    """The parsed content.xml of an ODF file's bytes; None when it is not a readable ODF file."""
    if data is None:
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            if archive.getinfo("content.xml").file_size > 64 << 20:
                return None
            return ET.fromstring(archive.read("content.xml"))
    except (zipfile.BadZipFile, KeyError, ET.ParseError, ValueError, OSError):
        return None


def protect(ctx: SetupContext, folder: str, *files: str) -> None:
    """Make ``files`` (already written) GUI-only: the desktop account's, mode 0644, in a sticky ``folder``.

    The folder stays group-writable, so the shell can add its own files beside them (SHA256SUMS, a CSV), but
    the sticky bit keeps it from renaming, deleting or replacing the desktop account's files there, and 0644
    keeps it from rewriting them in place. LibreOffice, running as the folder's owner, can still save (it
    writes a new file and renames it over the old one) and make its lock file.
    """
    ctx.run(["chown", f"{ctx.user}:{SHARED_GROUP}", folder, *files])
    ctx.run(["chmod", "3775", folder])
    if files:
        ctx.run(["chmod", "0644", *files])


DIFF_LEVEL = 24  # a pixel changed when a channel moved more than this


def _changed(frame: np.ndarray, reference: np.ndarray) -> int:
    if frame.shape != reference.shape:
        return frame.shape[0] * frame.shape[1]
    return int((np.abs(frame.astype(np.int16) - reference.astype(np.int16)).max(axis=2) > DIFF_LEVEL).sum())


def wait_screen(ctx: OracleContext, before: np.ndarray, *, min_changed: int = 5000, settled: int = 400,
                tries: int = 60, seconds: float = 0.5, confirm: float = 0.0) -> Iterator[ActionLike]:
    """Wait steps until the screen differs from ``before`` by ``min_changed`` pixels and has settled.

    Settled: at most ``settled`` pixels differ between two polls (a blinking cursor may). With ``confirm``,
    the state must still hold after that many more seconds (a menu on its way to a dialog can look settled
    for a moment). The shell cannot see the desktop, so an oracle waits for a dialog, a wizard page or a
    closed dialog on its observations, as an agent does. Gives up quietly after ``tries`` polls.
    """
    previous, confirming = None, False
    for _try in range(tries):
        assert ctx.obs is not None
        frame = ctx.obs["screen"]
        if previous is not None and _changed(frame, before) >= min_changed and _changed(frame, previous) <= settled:
            if confirming or confirm <= 0:
                return
            confirming, previous = True, frame
            yield {"kind": "wait", "seconds": confirm}
            continue
        confirming, previous = False, frame
        yield {"kind": "wait", "seconds": seconds}


def screen(ctx: OracleContext) -> np.ndarray:
    """A copy of the latest observed frame (a reference for ``wait_screen``)."""
    assert ctx.obs is not None
    return np.array(ctx.obs["screen"], copy=True)
