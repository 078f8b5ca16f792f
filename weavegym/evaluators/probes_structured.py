"""Structured-file probes: JSON, INI, XML and SQLite, parsed on the host.

Only bytes cross the agent; every parser runs here, so no checker logic (and no
expected value) ever enters the guest. A file that is missing or does not parse
is "absent" (None / MISSING): a malformed deliverable is the agent's failure,
not the environment's. Errors in the checker's own query (a bad JSON pointer,
bad SQL) are raised, because they are bugs in the task.
"""

from __future__ import annotations

import configparser
import json
import re
import sqlite3
import tempfile
import time
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Final

from weavegym.evaluators.probes_files import FileProbe

ROOT_SECTION = "__root__"  # the section that holds INI keys written before any [section]
_NO_DEFAULT_SECTION = "\x00weavegym-no-default"  # a name no file uses: [DEFAULT] stays an ordinary section
_SECTION_LINE = re.compile(r"\s*\[[^\]]+\]")
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_SECONDS = 5.0  # a checker's query on the episode's database
SQLITE_MAX_ROWS = 100_000


class _Missing:
    """Type of MISSING: what a JSON pointer resolves to when nothing is there (JSON null is None)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()


def resolve_pointer(document: Any, pointer: str) -> Any:
    """RFC 6901: ``""`` is the whole document, ``"/a/0/b"`` walks keys and list indices; MISSING if absent."""
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise ValueError(f"JSON pointer must be empty or start with '/': {pointer!r}")
    node = document
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            if token not in node:
                return MISSING
            node = node[token]
        elif isinstance(node, list):
            if not _ARRAY_INDEX.fullmatch(token) or int(token) >= len(node):
                return MISSING
            node = node[int(token)]
        else:
            return MISSING
    return node


def parse_ini(text: str) -> configparser.ConfigParser | None:
    """Tolerant INI parsing: no interpolation, case-sensitive keys, bare keys, duplicates (last wins).

    Keys before the first section land in ROOT_SECTION, as in .env-like or php.ini-like files.
    """
    parser = configparser.ConfigParser(interpolation=None, strict=False, allow_no_value=True,
                                       default_section=_NO_DEFAULT_SECTION)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    first = next((line for line in text.splitlines() if line.strip() and not line.lstrip().startswith(("#", ";"))),
                 "")
    if first and not _SECTION_LINE.match(first):
        text = f"[{ROOT_SECTION}]\n{text}"
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def element_text(element: ET.Element) -> str:
    """All text inside an element (nested children included), stripped."""
    return "".join(element.itertext()).strip()


class StructuredProbe(FileProbe):
    """JSON, INI, XML and SQLite probes."""

    def _json_document(self, path: str) -> Any:
        data = self.read_bytes(path)
        if data is None:
            return MISSING
        try:
            return json.loads(data.decode("utf-8-sig"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return MISSING

    def json(self, path: str) -> Any | None:
        """The parsed document; None when missing or not JSON (use json_query(path, "") to tell null apart)."""
        document = self._json_document(path)
        return None if document is MISSING else document

    def json_query(self, path: str, pointer: str) -> Any:
        """The value at an RFC 6901 pointer, or MISSING when the file, the document or the value is absent."""
        document = self._json_document(path)
        return MISSING if document is MISSING else resolve_pointer(document, pointer)

    def ini(self, path: str) -> configparser.ConfigParser | None:
        text = self.read_text(path)
        return None if text is None else parse_ini(text)

    def ini_value(self, path: str, section: str, key: str) -> str | None:
        """A value (``""`` for a bare key), None if absent. Keys before any section: ``section=ROOT_SECTION``."""
        parser = self.ini(path)
        if parser is None or not parser.has_option(section, key):
            return None
        value = parser.get(section, key)
        return "" if value is None else value

    def checksum_list(self, path: str) -> dict[str, str] | None:
        """A ``sha256sum``/``md5sum`` listing as {file name (directories dropped): lower-case hex}; None if missing.

        Lines that are not "HASH  NAME" (or binary-mode "HASH *NAME") are skipped, so a checker
        compares the entries it expects and reports what it found.
        """
        text = self.read_text(path)
        if text is None:
            return None
        listed = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2:
                listed[parts[1].lstrip("*").rsplit("/", 1)[-1]] = parts[0].lower()
        return listed

    def xml(self, path: str) -> ET.Element | None:
        """The root element, or None when missing or malformed. Expat (>= 2.4) bounds entity expansion."""
        data = self.read_bytes(path)
        if data is None:
            return None
        try:
            return ET.fromstring(data)
        except ET.ParseError:
            return None

    def xml_find(self, path: str, xpath: str, namespaces: dict[str, str] | None = None) -> list[str] | None:
        """Text of every element matching ElementTree's XPath subset; None when the file is absent."""
        root = self.xml(path)
        if root is None:
            return None
        return [element_text(e) for e in root.iterfind(xpath, namespaces)]

    def sqlite(self, path: str, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()
               ) -> list[tuple[Any, ...]] | None:
        """Rows of ``sql`` run on a host copy of the database, its -wal and -journal included.

        Copying the WAL matters: an app that is still running has committed rows there that are
        not in the main file yet. None when the file is missing or not an SQLite database.
        """
        data = self.read_bytes(path)
        if data is None or (data and not data.startswith(SQLITE_MAGIC)):
            return None
        companions = {suffix: self.read_bytes(path + suffix) for suffix in ("-wal", "-journal")}
        with tempfile.TemporaryDirectory(prefix="weavegym-sqlite-") as tmp:
            local = Path(tmp) / "db.sqlite"
            local.write_bytes(data)
            for suffix, content in companions.items():
                if content is not None:
                    Path(str(local) + suffix).write_bytes(content)
            uri = f"file:{urllib.parse.quote(str(local))}?mode=ro"
            connection = sqlite3.connect(uri, uri=True)
            try:
                return _bounded_query(connection, path, sql, params)
            finally:
                connection.close()


def _bounded_query(connection: sqlite3.Connection, path: str, sql: str,
                   params: tuple[Any, ...] | dict[str, Any]) -> list[tuple[Any, ...]]:
    """Run a checker's query on a database the episode controls, within bounds.

    The agent can replace a table with a view of the same name (a recursive one never ends) or grow a
    table to millions of rows: names the query uses must be tables, the query is interrupted after
    ``SQLITE_SECONDS``, and more than ``SQLITE_MAX_ROWS`` rows is an error. Each raises ValueError, which
    fails the clause: it is the state the episode left.
    """
    views = {name.lower() for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}
    named = views & {word.lower() for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}
    if named:
        raise ValueError(f"{path}: {', '.join(sorted(named))} is a view, not a table; the checker reads tables only")
    deadline = time.monotonic() + SQLITE_SECONDS
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
    try:
        rows = connection.execute(sql, params).fetchmany(SQLITE_MAX_ROWS + 1)
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            raise ValueError(f"{path}: the query ran past {SQLITE_SECONDS:g} s") from None
        raise
    if len(rows) > SQLITE_MAX_ROWS:
        raise ValueError(f"{path}: the query returned more than {SQLITE_MAX_ROWS} rows")
    return [tuple(row) for row in rows]
