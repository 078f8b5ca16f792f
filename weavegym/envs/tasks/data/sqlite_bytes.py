"""SQLite databases made and read on the host as bytes (no TASK here).

Setup builds a task's database on the host and uploads the file; the truth is
computed by SQLite itself on a private copy, so it rounds exactly as the guest's
sqlite3 does. Both work in memory (``serialize``/``deserialize``): no temp files.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any


def database_bytes(schema: str, rows: Mapping[str, Sequence[Sequence[Any]]]) -> bytes:
    """The file of a new database: ``schema`` (SQL statements) run, then ``rows`` inserted per table."""
    with contextlib.closing(sqlite3.connect(":memory:")) as con:
        con.executescript(schema)
        for table, values in rows.items():
            if values:
                con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(values[0]))})", values)
        con.commit()
        return con.serialize()


@contextlib.contextmanager
def opened(db: bytes) -> Iterator[sqlite3.Connection]:
    """A connection to a private in-memory copy of the database file ``db``; nothing reaches the bytes."""
    with contextlib.closing(sqlite3.connect(":memory:")) as con:
        con.deserialize(db)
        yield con
