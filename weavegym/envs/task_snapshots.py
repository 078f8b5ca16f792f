"""Per-VM cache of task snapshots: the state right after a task's setup, keyed by task seed.

The first reset of a (task, seed) runs the setup on ``ready`` and saves a
snapshot; later resets load it directly (about a second instead of setup time).
Each snapshot holds a copy of guest RAM in the overlay, so only the most
recently used few are kept and the rest are deleted from the VM.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

from weavegym.envs.task import Prepared


@dataclass(frozen=True)
class TaskSnapshot:
    name: str
    seed: int
    prepared: Prepared  # params and host-side truth, which a snapshot load cannot recompute


def snapshot_name(task_id: str, seed: int, code: str = "") -> str:
    """The snapshot of ``task_id``'s variant ``seed``, as set up by task code with hash ``code``."""
    digest = hashlib.sha256(f"{task_id}:{seed}:{code}".encode()).hexdigest()[:12]
    return f"task-{digest}"


class TaskSnapshotCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[int, TaskSnapshot] = OrderedDict()

    def get(self, seed: int) -> TaskSnapshot | None:
        entry = self._entries.get(seed)
        if entry is not None:
            self._entries.move_to_end(seed)
        return entry

    def add(self, entry: TaskSnapshot) -> list[TaskSnapshot]:
        """Insert ``entry``; return the entries evicted to stay within capacity (the caller deletes them)."""
        self._entries[entry.seed] = entry
        self._entries.move_to_end(entry.seed)
        evicted = []
        while len(self._entries) > self.capacity:
            evicted.append(self._entries.popitem(last=False)[1])
        return evicted

    def clear(self) -> None:
        self._entries.clear()
