"""State probes against the real guest agent running on this host (so guest paths are host paths).

Every fixture file is built here byte by byte or with the real library that
writes that format (sqlite3 in WAL mode, PIL, zipfile); every assertion names
the exact value a probe must return, including None/MISSING for what is absent.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import socket
import sqlite3
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from Xlib import X
from Xlib import display as xdisplay

from weavegym.core.deadline import wait_for
from weavegym.core.errors import AgentInternalError, AgentRequestError, AgentTimeoutError, AgentUnavailableError
from weavegym.evaluators import probes_media, probes_structured
from weavegym.evaluators.probes import MISSING, ROOT_SECTION, Probe
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay


@pytest.fixture()
def probe(client: GuestClient) -> Probe:
    return Probe(client, timeout=20.0)


# -- files ----------------------------------------------------------------------------------------------
def test_checksum_list_keys_by_file_name(probe: Probe, tmp_path: Path) -> None:
    sums = tmp_path / "SHA256SUMS"
    sums.write_text("ABCD  dist/app-1.0.tar.gz\nbeef *notes.odt\n\nnot a line with three parts\n")
    assert probe.checksum_list(str(sums)) == {"app-1.0.tar.gz": "abcd", "notes.odt": "beef"}
    assert probe.checksum_list(str(tmp_path / "nope")) is None


def test_a_probe_reads_each_file_once_per_evaluation(probe: Probe, tmp_path: Path) -> None:
    """Checkers re-read one save file per clause; the episode is over, so one transfer serves them all."""
    path = tmp_path / "save.txt"
    path.write_text("first")
    assert probe.read_text(str(path)) == "first"
    path.write_text("second")
    assert probe.read_text(str(path)) == "first"
    assert probe.read_bytes(str(tmp_path / "later.txt")) is None
    (tmp_path / "later.txt").write_text("x")
    assert probe.read_bytes(str(tmp_path / "later.txt")) is None  # absence is an answer too
    assert Probe(probe.client).read_text(str(path)) == "second"  # the next evaluation reads afresh


def test_file_probes_read_hash_list_and_report_absence(probe: Probe, tmp_path: Path) -> None:
    data = "héllo\nwörld\n".encode()
    (tmp_path / "notes.txt").write_bytes(data)
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").write_text("h")
    (tmp_path / "link").symlink_to(tmp_path / "gone")

    st = probe.stat(str(tmp_path / "notes.txt"))
    assert st is not None and (st.type, st.size) == ("file", len(data))
    assert probe.exists(str(tmp_path / "notes.txt")) and probe.exists(str(tmp_path / "sub"))
    assert not probe.exists(str(tmp_path / "nope")) and not probe.exists(str(tmp_path / "link"))  # dangling
    assert probe.stat(str(tmp_path / "nope")) is None
    assert probe.read_bytes(str(tmp_path / "notes.txt")) == data
    assert probe.read_text(str(tmp_path / "notes.txt")) == "héllo\nwörld\n"
    assert probe.read_bytes(str(tmp_path / "nope")) is None
    assert probe.read_bytes(str(tmp_path / "sub")) is None  # a directory is not a file deliverable
    assert probe.read_text(str(tmp_path / "nope")) is None
    assert probe.sha256(str(tmp_path / "notes.txt")) == hashlib.sha256(data).hexdigest()
    assert probe.sha256(str(tmp_path / "nope")) is None
    assert probe.sha256(str(tmp_path / "sub")) is None
    assert probe.list_dir(str(tmp_path)) == [".hidden", "link", "notes.txt", "sub"]
    assert probe.list_dir(str(tmp_path / "nope")) is None
    assert probe.list_dir(str(tmp_path / "notes.txt")) is None


def test_glob_is_safe_with_hostile_names_and_drops_missing_literals(probe: Probe, tmp_path: Path) -> None:
    names = ["a b.txt", "$(touch PWNED).txt", "x;y.txt", ".dot.txt", "keep.log"]
    for name in names:
        (tmp_path / name).write_text("x")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "z.txt").write_text("z")
    expected = sorted(str(tmp_path / n) for n in names if n.endswith(".txt"))
    assert probe.glob(f"{tmp_path}/*.txt") == expected
    assert probe.glob(f"{tmp_path}/**/z.txt") == [str(tmp_path / "deep" / "er" / "z.txt")]
    assert probe.glob(f"{tmp_path}/$(touch PWNED)*") == [str(tmp_path / "$(touch PWNED).txt")]
    assert probe.glob(f"{tmp_path}/*$(touch {tmp_path}/PWNED2)`touch {tmp_path}/PWNED3`") == []
    assert probe.glob(f"{tmp_path}/*.none") == []
    assert probe.glob(f"{tmp_path}/keep.log") == [str(tmp_path / "keep.log")]
    assert probe.glob(f"{tmp_path}/missing.log") == []  # a literal word survives nullglob; it must not
    with pytest.raises(AgentRequestError):
        probe.glob("~/*.txt")  # the probe runs as root: "~" would silently mean /root
    assert not (tmp_path / "PWNED2").exists() and not (tmp_path / "PWNED3").exists()  # nothing was executed


def test_probe_commands_have_a_deadline(probe: Probe) -> None:
    with pytest.raises(AgentTimeoutError):
        probe._exec("sleep 5", what="sleep", timeout=0.5)


def test_a_dead_agent_raises_instead_of_answering_absent() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    with GuestClient(f"127.0.0.1:{port}", "token") as dead, pytest.raises(AgentUnavailableError):
        Probe(dead, timeout=2.0).exists("/etc/hostname")


# -- structured ----------------------------------------------------------------------------------------
def test_json_and_json_pointer(probe: Probe, tmp_path: Path) -> None:
    doc = {"a": [{"b": 7}, None], "x/y": {"m~n": "tilde"}, "z": None}
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    (tmp_path / "bad.json").write_text("{not json")
    p = str(path)
    assert probe.json(p) == doc
    assert probe.json_query(p, "/a/0/b") == 7
    assert probe.json_query(p, "/x~1y/m~0n") == "tilde"
    assert probe.json_query(p, "/z") is None  # JSON null is a value…
    assert probe.json_query(p, "/nope") is MISSING  # …absence is not
    assert probe.json_query(p, "/a/5") is MISSING
    assert probe.json_query(p, "/a/01") is MISSING
    assert probe.json_query(p, "/a/0/b/c") is MISSING
    assert probe.json_query(p, "") == doc
    assert probe.json(str(tmp_path / "nope.json")) is None
    assert probe.json_query(str(tmp_path / "nope.json"), "/a") is MISSING
    assert probe.json(str(tmp_path / "bad.json")) is None
    assert probe.json_query(str(tmp_path / "bad.json"), "") is MISSING
    with pytest.raises(ValueError):
        probe.json_query(p, "a/0")


def test_ini_with_and_without_a_leading_section(probe: Probe, tmp_path: Path) -> None:
    (tmp_path / "app.ini").write_text("; comment\n[Server]\nPort = 8080\nurl = http://x/%(y)s\n[DEFAULT]\nk=v\n")
    (tmp_path / "loose.conf").write_text("# top\nname=alpha\nflag\n[extra]\ncolour: blue\n")
    app = probe.ini(str(tmp_path / "app.ini"))
    assert app is not None and app.sections() == ["Server", "DEFAULT"]
    assert probe.ini_value(str(tmp_path / "app.ini"), "Server", "Port") == "8080"
    assert probe.ini_value(str(tmp_path / "app.ini"), "Server", "url") == "http://x/%(y)s"  # no interpolation
    assert probe.ini_value(str(tmp_path / "app.ini"), "Server", "port") is None  # keys keep their case
    assert probe.ini_value(str(tmp_path / "app.ini"), "DEFAULT", "k") == "v"
    assert probe.ini_value(str(tmp_path / "app.ini"), "Server", "k") is None  # [DEFAULT] is not inherited
    loose = str(tmp_path / "loose.conf")
    assert probe.ini_value(loose, ROOT_SECTION, "name") == "alpha"
    assert probe.ini_value(loose, ROOT_SECTION, "flag") == ""
    assert probe.ini_value(loose, "extra", "colour") == "blue"
    assert probe.ini_value(loose, "extra", "missing") is None
    assert probe.ini(str(tmp_path / "nope.ini")) is None
    assert probe.ini_value(str(tmp_path / "nope.ini"), "Server", "Port") is None


def test_xml_with_namespaces(probe: Probe, tmp_path: Path) -> None:
    (tmp_path / "feed.xml").write_text(
        '<?xml version="1.0"?>\n<feed xmlns="http://www.w3.org/2005/Atom" xmlns:x="urn:extra">'
        "<entry><title>First <b>bold</b></title><x:score>3</x:score></entry>"
        "<entry><title>Second</title><x:score>5</x:score></entry></feed>")
    (tmp_path / "broken.xml").write_text("<a><b></a>")
    p, ns = str(tmp_path / "feed.xml"), {"a": "http://www.w3.org/2005/Atom", "x": "urn:extra"}
    root = probe.xml(p)
    assert root is not None and root.tag == "{http://www.w3.org/2005/Atom}feed"
    assert probe.xml_find(p, "a:entry/a:title", ns) == ["First bold", "Second"]
    assert probe.xml_find(p, ".//x:score", ns) == ["3", "5"]
    assert probe.xml_find(p, ".//{urn:extra}score") == ["3", "5"]
    assert probe.xml_find(p, ".//a:summary", ns) == []
    assert probe.xml(str(tmp_path / "broken.xml")) is None
    assert probe.xml_find(str(tmp_path / "nope.xml"), ".//a") is None


def test_sqlite_sees_uncheckpointed_wal_rows(probe: Probe, tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    writer = sqlite3.connect(db)
    try:
        assert writer.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("CREATE TABLE todo(id INTEGER PRIMARY KEY, title TEXT, done INTEGER)")
        writer.executemany("INSERT INTO todo(title, done) VALUES (?, ?)", [("buy milk", 1), ("file taxes", 0)])
        writer.commit()
        # The writer is still open, as an app would be: the rows live only in app.db-wal.
        assert (tmp_path / "app.db-wal").stat().st_size > 0
        rows = probe.sqlite(str(db), "SELECT title, done FROM todo WHERE done = ? ORDER BY id", (0,))
        assert rows == [("file taxes", 0)]
        assert probe.sqlite(str(db), "SELECT count(*) FROM todo") == [(2,)]
    finally:
        writer.close()
    (tmp_path / "fake.db").write_text("not a database")
    assert probe.sqlite(str(tmp_path / "nope.db"), "SELECT 1") is None
    assert probe.sqlite(str(tmp_path / "fake.db"), "SELECT 1") is None
    with pytest.raises(sqlite3.OperationalError):
        probe.sqlite(str(db), "SELECT nonsense FROM todo")


def test_sqlite_is_bounded_against_a_hostile_database(probe: Probe, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The episode owns the database: a table swapped for a recursive view, a flood of rows and a slow
    query each fail the check (ValueError) instead of hanging or filling the host's memory."""
    db = tmp_path / "stock.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (n INTEGER)")
        conn.executemany("INSERT INTO items VALUES (?)", [(i,) for i in range(50)])
        conn.execute("CREATE VIEW stock AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                     "SELECT n AS sku, n AS qty FROM r")
    with pytest.raises(ValueError, match="stock is a view"):
        probe.sqlite(str(db), "SELECT sku, qty FROM stock")
    assert probe.sqlite(str(db), "SELECT count(*) FROM items") == [(50,)]
    monkeypatch.setattr(probes_structured, "SQLITE_MAX_ROWS", 10)
    with pytest.raises(ValueError, match="more than 10 rows"):
        probe.sqlite(str(db), "SELECT n FROM items")
    monkeypatch.setattr(probes_structured, "SQLITE_SECONDS", 0.0)
    with pytest.raises(ValueError, match="ran past"):
        probe.sqlite(str(db), "SELECT count(*) FROM items a, items b, items c, items d")


# -- system --------------------------------------------------------------------------------------------
def test_listening_ports_follow_a_real_socket(probe: Probe) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    assert not probe.port_open(port)  # bound but not listening
    server.listen()
    try:
        assert port in probe.listening_ports()
        assert any(s.address == "127.0.0.1" and s.port == port for s in probe.listening_sockets())
    finally:
        server.close()
    assert not probe.port_open(port)


def test_listening_ports_include_ipv6(probe: Probe) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this host")
    with socket.socket(socket.AF_INET6) as server:
        try:
            server.bind(("::1", 0))
        except OSError:
            pytest.skip("no IPv6 loopback on this host")
        server.listen()
        port = server.getsockname()[1]
        assert any(s.address == "::1" and s.port == port for s in probe.listening_sockets())


def test_processes_and_process_running(probe: Probe) -> None:
    proc = subprocess.Popen(["sleep", "1234"])
    try:
        assert probe.process_running(r"^sleep 1234$")
        mine = [p for p in probe.processes() if p.pid == proc.pid]
        assert [(p.user, p.command_line) for p in mine] == [("root", "sleep 1234")]
        assert not any(p.command_line.startswith("ps -ww") for p in probe.processes())  # not the probe itself
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert not probe.process_running(r"^sleep 1234$")


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = "héllo ✓".encode() if self.path == "/" else b"no such page"
        self.send_response(200 if self.path == "/" else 404)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def http_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_http_get(probe: Probe, http_port: int) -> None:
    assert probe.http_get(f"http://127.0.0.1:{http_port}/") == (200, "héllo ✓")
    assert probe.http_get(f"http://127.0.0.1:{http_port}/missing") == (404, "no such page")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    assert probe.http_get(f"http://127.0.0.1:{closed}/", timeout=2) is None


def test_service_active_needs_systemd(probe: Probe) -> None:
    if Path("/run/systemd/system").is_dir():
        assert probe.service_active("weavegym-no-such-unit.service") is False
    else:  # our CI hosts: systemd is absent, which is a broken guest, not an inactive unit
        with pytest.raises(AgentInternalError, match="systemd"):
            probe.service_active("weavegym-no-such-unit.service")


def test_window_titles_and_window(probe: Probe, xvfb: XvfbDisplay) -> None:
    d = xdisplay.Display(xvfb.display)
    try:
        win = d.screen().root.create_window(30, 40, 200, 100, 0, X.CopyFromParent)
        win.change_property(d.intern_atom("_NET_WM_NAME"), d.intern_atom("UTF8_STRING"), 8,
                            "Probe target ✓ — Editor".encode())
        win.map()
        d.flush()
        found = wait_for(lambda: probe.window(r"^Probe target ✓"), 10, what="the test window listed")
        assert (found.id, found.title, found.width, found.height) == (win.id, "Probe target ✓ — Editor", 200, 100)
        assert "Probe target ✓ — Editor" in probe.window_titles()
        assert probe.window(r"^No such window$") is None
        win.destroy()
        d.flush()
        wait_for(lambda: probe.window(r"^Probe target") is None, 10, what="the window gone")
    finally:
        d.close()


# -- media ---------------------------------------------------------------------------------------------
def test_image_and_similarity(probe: Probe, tmp_path: Path) -> None:
    yy, xx = np.mgrid[0:120, 0:160]
    pixels = np.stack([(xx * 255 // 159), (yy * 255 // 119), ((xx + yy) % 64) * 4], axis=-1).astype(np.uint8)
    Image.fromarray(pixels).save(tmp_path / "pic.png")
    Image.fromarray(pixels).save(tmp_path / "pic.jpg", quality=90)
    (tmp_path / "fake.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    got = probe.image(str(tmp_path / "pic.png"))
    assert got is not None and got.dtype == np.uint8 and np.array_equal(got, pixels)
    assert probe.image(str(tmp_path / "fake.png")) is None
    assert probe.image(str(tmp_path / "nope.png")) is None
    assert probe.image_similarity(str(tmp_path / "pic.png"), pixels) == 1.0
    assert probe.image_similarity(str(tmp_path / "pic.jpg"), pixels) >= 0.95
    assert probe.image_similarity(str(tmp_path / "pic.png"), pixels[:, ::-1]) < 0.7  # mirrored
    assert probe.image_similarity(str(tmp_path / "nope.png"), pixels) == 0.0


def _odt(paragraphs_xml: str) -> bytes:
    content = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.3">'
        '<office:automatic-styles/><office:body><office:text>'
        f"{paragraphs_xml}</office:text></office:body></office:document-content>")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.text")  # stored, first
        z.writestr("content.xml", content, compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def test_odf_text(probe: Probe, tmp_path: Path) -> None:
    (tmp_path / "doc.odt").write_bytes(_odt(
        "<text:h>Title</text:h><text:p>Total:<text:s text:c=\"3\"/>42<text:tab/>€</text:p>"
        "<text:p>a <text:span>styled</text:span> word<text:line-break/>next line</text:p><text:p/>"
        "<text:list><text:list-item><text:p>item</text:p></text:list-item></text:list>"))
    (tmp_path / "plain.zip").write_bytes(_zip_without_content())
    assert probe.odf_text(str(tmp_path / "doc.odt")) == "Title\nTotal:   42\t€\na styled word\nnext line\n\nitem"
    assert probe.odf_text(str(tmp_path / "plain.zip")) is None
    (tmp_path / "text.odt").write_text("not a zip")
    assert probe.odf_text(str(tmp_path / "text.odt")) is None
    assert probe.odf_text(str(tmp_path / "nope.odt")) is None


def _zip_without_content() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("readme.txt", "hi")
    return buf.getvalue()


def _minimal_pdf(lines: list[str]) -> bytes:
    """A one-page PDF with a Helvetica text object per line; xref offsets computed, so it is valid."""
    ops = "".join(f"BT /F1 14 Tf 72 {720 - 20 * i} Td ({line}) Tj ET\n" for i, line in enumerate(lines))
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(ops)} >>\nstream\n{ops}endstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def test_pdf_text(probe: Probe, tmp_path: Path) -> None:
    pytest.importorskip("pypdf")
    (tmp_path / "invoice.pdf").write_bytes(_minimal_pdf(["Invoice 2024-117", "Total due: 1280.50 EUR"]))
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf body")
    text = probe.pdf_text(str(tmp_path / "invoice.pdf"))
    assert text is not None and text.splitlines() == ["Invoice 2024-117", "Total due: 1280.50 EUR"]
    assert probe.pdf_text(str(tmp_path / "broken.pdf")) is None
    assert probe.pdf_text(str(tmp_path / "nope.pdf")) is None


def test_image_decoding_refuses_frames_over_the_pixel_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (20, 10), (255, 0, 0)).save(buf, "PNG")
    assert probes_media.decode_image(buf.getvalue()).shape == (10, 20, 3)
    monkeypatch.setattr(probes_media, "MAX_IMAGE_PIXELS", 199)
    assert probes_media.decode_image(buf.getvalue()) is None  # refused before its pixels are decoded
