"""A stand-in for the checker's Probe that reads from a dict of files, for clause tests without a VM.

Clauses read a finished episode through ``Probe.read_bytes``/``read_text`` (and ``stat``/``sha256``) and look
at how it ended (``probe.episode``); a dict of path -> bytes or text is all a unit test needs to score what an
agent left behind.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from weavegym.core.trajectory import EpisodeEnd


class FilesProbe:
    """Files by absolute path (bytes, or text read as UTF-8); a missing path reads as None, as on a real probe."""

    def __init__(self, files: Mapping[str, bytes | str], episode: EpisodeEnd | None = None) -> None:
        self.files = files
        self.episode = episode or EpisodeEnd(kind="done", answer="")

    @classmethod
    def answered(cls, answer: str, files: Mapping[str, bytes | str] | None = None) -> FilesProbe:
        """An episode that ended with ``done(answer=...)``, for tasks whose deliverable is the answer."""
        return cls(files or {}, EpisodeEnd(kind="done", answer=answer, reason=""))

    def read_bytes(self, path: str, max_bytes: int = 0) -> bytes | None:
        value = self.files.get(path)
        return value.encode() if isinstance(value, str) else value

    def read_text(self, path: str, encoding: str = "utf-8", errors: str = "replace") -> str | None:
        """The real probe's signature exactly: a checker that passes it what the real one refuses fails here too."""
        value = self.files.get(path)
        return value.decode(encoding, errors=errors) if isinstance(value, bytes) else value

    def stat(self, path: str, follow_symlinks: bool = True) -> object | None:
        """Only whether the file exists: clauses that ask for more need a real probe."""
        return object() if path in self.files else None

    def sha256(self, path: str) -> str | None:
        data = self.read_bytes(path)
        return None if data is None else hashlib.sha256(data).hexdigest()
