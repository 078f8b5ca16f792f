"""Provenance clauses: a deliverable counts only if the channel that had to make it did.

The guest image runs GUI apps as the desktop account and the episode's ``shell``/``python`` as the
workspace account (no X access), in one shared home. So the owner of a file's inode says which side
created it: apps that save by rename make a new inode owned by their account, and a file written in
place keeps its creator as owner, which is why material the other side must not rewrite is created
without group write. A forged GUI deliverable written from the shell is owned by the workspace
account; a CLI deliverable typed into a desktop terminal is owned by the desktop account. Either
caps the episode at 0.

An owner alone can be borrowed: a hard link to a file of the other account that the caller may write
(``fs.protected_hardlinks`` allows that) gives a new name with the old owner. So a deliverable must also
have exactly one link. Its inode's change time says whether anyone wrote it during the episode: one that
setup left and nobody touched is, like an absent one, its content clauses' to score (partial credit stays
possible). The change time cannot tell who borrowed an inode: a link and a rename both set it.

A missing deliverable is left to the task's content clauses (partial credit stays possible); a
symlink or a non-regular file at the path fails, since its content would come from elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from weavegym.core.errors import TaskError
from weavegym.core.guest_layout import DESKTOP_USER, WORKSPACE_USER
from weavegym.evaluators.scoring import Clause, Verdict

if TYPE_CHECKING:
    from weavegym.evaluators.probes import Probe

CHANNEL_NAMES = ("gui", "cli")


@dataclass(frozen=True)
class Deliverable:
    """A file the episode must leave behind, and the channel whose account must have written it.

    The guest runs GUI apps as the desktop account and ``shell``/``python`` as the workspace account,
    so a file's owner says which channel made it (README, "Two accounts, two channels"). Every declared
    deliverable gets a critical provenance clause: when the file exists but belongs to the other side
    (or is a symlink, or not a regular file), the score is 0 however right its content is.
    ``path`` may name truth fields (``"{home}/out/{name}.csv"``); ``owner`` overrides the channel's
    default account (e.g. ``"designer"`` for an app run under its own account, ``"root"`` for a
    dialog's answer captured by setup into the private folder).
    """

    path: str
    channel: str  # "gui" | "cli"
    owner: str = ""
    description: str = ""

    def __post_init__(self) -> None:
        if self.channel not in CHANNEL_NAMES:
            raise TaskError(f"deliverable {self.path!r}: channel must be one of {CHANNEL_NAMES}, not {self.channel!r}")
        if not self.path.startswith(("/", "{")):
            raise TaskError(f"deliverable {self.path!r}: the path must be absolute (the checker runs as root)")

    def resolve(self, truth: Mapping[str, Any]) -> str:
        try:
            return self.path.format(**truth)
        except (KeyError, IndexError, ValueError) as exc:
            raise TaskError(f"deliverable {self.path!r} names a truth field setup did not provide: {exc}") from None



DEFAULT_OWNER = {"gui": DESKTOP_USER, "cli": WORKSPACE_USER}
CHANNEL_WORDS = {"gui": "a GUI app", "cli": "the shell"}


def required_owner(deliverable: Deliverable) -> str:
    return deliverable.owner or DEFAULT_OWNER[deliverable.channel]


def check_provenance(deliverable: Deliverable, since: float | None = None
                     ) -> Callable[[Probe, Mapping[str, Any]], Verdict]:
    """The check for one deliverable; ``since`` is the episode's start on the guest clock (None: not known)."""
    def check(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
        path = deliverable.resolve(truth)
        owner = required_owner(deliverable)
        st = probe.stat(path, follow_symlinks=False)
        if st is None:
            return Verdict.satisfied(f"{path} is absent; its content clauses score that")
        if st.type != "file":
            return Verdict.failed(f"{path} is a {st.type}, not a file written in place by {owner}")
        if st.owner != owner:
            return Verdict.failed(f"{path} is owned by {st.owner!r}; {CHANNEL_WORDS[deliverable.channel]} "
                                  f"({owner!r}) must have written it")
        if st.nlink > 1:
            return Verdict.failed(f"{path} has {st.nlink} hard links: its inode is shared with another name, so its "
                                  f"owner ({st.owner!r}) does not say who wrote it")
        if since is not None and st.ctime and st.ctime < since:
            return Verdict.satisfied(f"{path} is as setup left it ({since - st.ctime:.0f} s before the episode "
                                     "began): nobody wrote it; its content clauses score that")
        return Verdict.satisfied(f"{path} is owned by {owner!r}, has one link and changed during the episode")
    return check


def provenance_clauses(deliverables: Sequence[Deliverable], since: float | None = None) -> tuple[Clause, ...]:
    """One weightless critical clause per deliverable: it cannot add to the score, only cap it to 0. ``since``:
    the episode's start on the guest clock, to tell a deliverable nobody touched in the episode."""
    clauses = []
    for i, deliverable in enumerate(deliverables):
        name = f"provenance_{deliverable.channel}_{i + 1}"
        what = deliverable.description or deliverable.path
        clauses.append(Clause(name, f"{what} was written by {CHANNEL_WORDS[deliverable.channel]} "
                                    f"({required_owner(deliverable)})",
                              check_provenance(deliverable, since), weight=0.0, critical=True, cap=0.0))
    return tuple(clauses)
