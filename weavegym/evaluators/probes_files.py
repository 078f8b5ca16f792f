"""File probes: does a path exist, what does it hold, which paths match a glob.

The base of every probe family. All calls run through the guest agent as root
(the agent's own user), each with the probe's deadline. A missing path is an
answer (None / False / absent), not an error: the agent under test may simply
not have produced it. Agent and guest failures (dead agent, timed-out command,
broken guest) are raised, because then the evaluation itself is unreliable.
"""

from __future__ import annotations

from weavegym.core.errors import AgentInternalError, AgentRequestError, AgentTimeoutError, GuestPathNotFoundError
from weavegym.core.trajectory import EpisodeEnd
from weavegym.machine.guest_client import ExecResult, FileStat, GuestClient

DEFAULT_MAX_BYTES = 64 << 20
MAX_LIST_ENTRIES = 100_000
GLOB_OUTPUT_BYTES = 16 << 20

# The pattern arrives in an environment variable and is expanded unquoted with IFS empty: bash then
# applies pathname expansion and nothing else (no word splitting, no command substitution), so any
# pattern text is safe. Literal words survive nullglob, hence the existence test.
_GLOB_SCRIPT = (
    "shopt -s nullglob dotglob globstar; IFS=; "
    'for p in $WEAVEGYM_GLOB; do if [[ -e $p || -L $p ]]; then printf "%s\\0" "$p"; fi; done'
)


class FileProbe:
    """Read-only file probes; the base the other probe families build on."""

    def __init__(self, client: GuestClient, timeout: float = 30.0, episode: EpisodeEnd | None = None) -> None:
        self.client = client
        self.timeout = timeout
        # How the agent ended the episode (its done() answer, its fail() reason): see evaluators/answers.py.
        self.episode = episode or EpisodeEnd()
        # A probe lives for one evaluation of a finished episode, whose state no longer changes, so
        # clauses that parse the same save file or submission share one transfer (see read_bytes).
        self._reads: dict[tuple[str, int], bytes | None] = {}

    # -- helpers shared by every family -------------------------------------------------------------
    def _exec(self, command: str | list[str], *, what: str, env: dict[str, str] | None = None,
              stdin: bytes = b"", timeout: float | None = None, max_output_bytes: int = 0,
              check: bool = False) -> ExecResult:
        """Run a probe command. A timeout, truncated output or (with ``check``) a non-zero exit raises:
        those are environment failures, and an answer built on them would be wrong."""
        limit = timeout if timeout is not None else self.timeout
        result = self.client.exec(command, env=env, stdin=stdin, timeout=limit, max_output_bytes=max_output_bytes)
        if result.timed_out:
            raise AgentTimeoutError(f"probe {what} timed out after {limit:g}s", method="Exec")
        if result.truncated:
            raise AgentInternalError(f"probe {what}: output over {max_output_bytes or 'the default'} bytes",
                                     method="Exec")
        if check and result.exit_code != 0:
            raise AgentInternalError(f"probe {what} exited {result.exit_code}: {result.stderr.strip()[:300]}",
                                     method="Exec")
        return result

    def _absent_as(self, path: str, kind: str) -> bool:
        """After a refused request: True when ``path`` is missing or not of ``kind`` ("file"/"dir"): absent for us."""
        st = self.stat(path)
        return st is None or st.type != kind

    # -- probes ---------------------------------------------------------------------------------------
    def stat(self, path: str, follow_symlinks: bool = True) -> FileStat | None:
        """FileStat of ``path`` or None; symlinks are followed so a dangling link counts as absent."""
        st = self.client.stat(path, follow_symlinks=follow_symlinks, timeout=self.timeout)
        return st if st.exists else None

    def provenance(self, path: str) -> tuple[str, str] | None:
        """(type, owner account) of the path itself, symlinks not followed; None when absent.

        The owner of a deliverable's inode is which channel's account made it (see evaluators.provenance).
        """
        st = self.stat(path, follow_symlinks=False)
        return None if st is None else (st.type, st.owner)

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def read_bytes(self, path: str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes | None:
        """The file's bytes, or None when it is missing or not a regular file.

        A file over ``max_bytes`` raises AgentRequestError: it exists, so "absent" would be a lie.
        Answers are remembered for the probe's lifetime (one evaluation of a finished episode).
        """
        key = (path, max_bytes)
        if key in self._reads:
            return self._reads[key]
        try:
            data: bytes | None = self.client.download(path, max_bytes=max_bytes, timeout=self.timeout)
        except GuestPathNotFoundError:
            data = None
        except AgentRequestError:
            if not self._absent_as(path, "file"):
                raise
            data = None
        self._reads[key] = data
        return data

    def read_text(self, path: str, encoding: str = "utf-8", errors: str = "replace") -> str | None:
        data = self.read_bytes(path)
        return None if data is None else data.decode(encoding, errors=errors)

    def sha256(self, path: str) -> str | None:
        """Hex SHA-256 computed in the guest, so big files are not transferred just to be hashed."""
        result = self._exec(["sha256sum", "--", path], what=f"sha256sum {path}", max_output_bytes=1 << 16)
        if result.exit_code == 0:
            return result.stdout.split(maxsplit=1)[0].lstrip("\\")
        if self._absent_as(path, "file"):
            return None
        raise AgentInternalError(f"sha256sum {path}: {result.stderr.strip()[:300]}", method="Exec")

    def list_dir(self, path: str) -> list[str] | None:
        """Sorted entry names (dotfiles included), or None when ``path`` is not a directory."""
        try:
            entries, truncated = self.client.list_dir(path, max_entries=MAX_LIST_ENTRIES, timeout=self.timeout)
        except GuestPathNotFoundError:
            return None
        except AgentRequestError:
            if self._absent_as(path, "dir"):
                return None
            raise
        if truncated:
            raise AgentInternalError(f"{path} has more than {MAX_LIST_ENTRIES} entries", method="ListDir")
        return sorted(entry.path.rsplit("/", 1)[-1] for entry in entries)

    def glob(self, pattern: str) -> list[str]:
        """Existing paths matching a bash glob (``*``, ``?``, ``[...]``, ``**``; dotfiles match), sorted.

        Patterns must be absolute: the probe runs as root, so ``~`` would mean /root.
        """
        if not pattern.startswith("/"):
            raise AgentRequestError(f"glob pattern must be absolute, got {pattern!r}", method="Exec")
        result = self._exec(["bash", "-c", _GLOB_SCRIPT], what=f"glob {pattern!r}", env={"WEAVEGYM_GLOB": pattern},
                            max_output_bytes=GLOB_OUTPUT_BYTES, check=True)
        names = result.stdout_raw.split(b"\0")
        return sorted({n.decode("utf-8", errors="surrogateescape") for n in names if n})
