"""The Data tasks' host-side SQLite helpers: real database files, private copies."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from weavegym.envs.tasks.data.sqlite_bytes import database_bytes, opened


def test_database_bytes_is_a_file_sqlite_opens_and_opened_copies_are_private(tmp_path: Path) -> None:
    db = database_bytes("CREATE TABLE t (k TEXT PRIMARY KEY, v REAL NOT NULL); CREATE TABLE empty (x INTEGER);",
                        {"t": [("a", 1.25), ("b", 2.5)], "empty": []})
    assert db.startswith(b"SQLite format 3\x00")
    path = tmp_path / "x.db"
    path.write_bytes(db)
    con = sqlite3.connect(path)
    assert con.execute("SELECT k, v FROM t ORDER BY k").fetchall() == [("a", 1.25), ("b", 2.5)]
    assert con.execute("SELECT COUNT(*) FROM empty").fetchone() == (0,)
    con.close()
    with opened(db) as copy:
        copy.execute("DELETE FROM t")
        assert copy.execute("SELECT COUNT(*) FROM t").fetchone() == (0,)
    with opened(db) as again:
        assert again.execute("SELECT COUNT(*) FROM t").fetchone() == (2,), "a copy's change reached the bytes"
