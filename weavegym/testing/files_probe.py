"""A stand-in for the checker's Probe that reads from a dict of files, for clause tests without a VM.

Clauses read a finished episode through ``Probe.read_bytes``/``read_text`` and look at how it ended
(``probe.episode``); a dict of path -> bytes is all a unit test needs to score what an agent left behind.
"""

from __future__ import annotations

from collections.abc import Mapping

from weavegym.core.trajectory import EpisodeEnd


class FilesProbe:
    """Files by absolute path; a missing path reads as None, as a missing file does on a real probe."""

    def __init__(self, files: Mapping[str, bytes], episode: EpisodeEnd | None = None) -> None:
        self.files = files
        self.episode = episode or EpisodeEnd(kind="done", answer="")

    def read_bytes(self, path: str, max_bytes: int = 0) -> bytes | None:
        return self.files.get(path)

    def read_text(self, path: str, max_bytes: int = 0) -> str | None:
        data = self.files.get(path)
        return None if data is None else data.decode("utf-8", errors="replace")
