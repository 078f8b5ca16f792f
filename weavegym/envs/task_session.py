"""The task side of one env: which variant a reset plays, the task's snapshot per variant (setup runs once,
later resets load it), and scoring the final state.

It gets a started backend from the coordinator for each call and keeps no machine of its own, so the
env's Gym front stays a thin layer: coordinator for the machine, task session for the task.
"""

from __future__ import annotations

import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np

from weavegym.core.config import EnvConfig, variant_pool
from weavegym.core.errors import EpisodeError, TaskError
from weavegym.core.guest_layout import DESKTOP_USER
from weavegym.core.trajectory import Trajectory
from weavegym.envs.episode_clauses import check_abstention_truth, episode_clauses
from weavegym.envs.setup_context import SetupContext
from weavegym.envs.simulated_user import SIM_USER, read_transcript, transcript_for_info
from weavegym.envs.task import Prepared, Task
from weavegym.envs.task_snapshots import TaskSnapshot, TaskSnapshotCache, snapshot_name
from weavegym.evaluators import Evaluation, ForbiddenPatterns, Probe, evaluate
from weavegym.evaluators.channel_rules import (
    DesktopAccessUnchanged,
    DesktopGuarded,
    EpisodeFrozen,
    NoDesktopTerminalWork,
)
from weavegym.evaluators.episode_freeze import EpisodeFreeze
from weavegym.evaluators.provenance import provenance_clauses
from weavegym.machine.backends.base import Backend
from weavegym.machine.backends.prepared_states import code_hash
from weavegym.machine.frames import settle

CLOCK_SLACK_S = 2.0  # the guest clock is resynced to the host's at every reset, to about a second
READY = "ready"  # the backend's snapshot of a booted, idle desktop, which every task's setup starts from
# Part of every task snapshot's name: a state that older task code set up is never reused (snapshots can be
# host-wide and outlive this process).
TASK_CODE_HASH = code_hash(*(Path(__file__).parent / name for name in (
    "tasks", "setup_context.py", "simulated_user.py", "sim_user_program.py")))


class TaskSession:
    def __init__(self, task: Task, config: EnvConfig) -> None:
        self.task = task
        self.config = config
        self.seed: int | None = None  # the variant being played
        self.prepared: Prepared | None = None
        self._snapshots = TaskSnapshotCache(config.max_task_snapshots)

    def pick_seed(self, seed: int | None, options: dict[str, Any], rng: np.random.Generator) -> int:
        """The variant for this reset: ``options["task_seed"]``; else the reset's seed (unless
        ``config.seed_draws_variant``); else one drawn by ``rng`` (which the reset's seed, if any, has just
        seeded) from the pool of ``config.task_variants`` and ``config.variant_split``; else, with a pool of
        one variant and no split, the variant played last."""
        if "task_seed" in options:
            value = options["task_seed"]
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
                raise ValueError(f"options['task_seed'] must be a non-negative int, not {value!r}")
            return int(value)
        if seed is not None and not self.config.seed_draws_variant:
            return int(seed)
        pool = variant_pool(self.config.task_variants, self.config.variant_split)
        if seed is not None or len(pool) > 1 or self.config.variant_split != "all":
            return pool[int(rng.integers(len(pool)))]
        return self.seed if self.seed is not None else 0

    def start(self, backend: Backend, seed: int, *, new_machine: bool) -> tuple[Prepared, bool]:
        """Put the machine in the task's state for ``seed``: a cached snapshot, or setup on ``ready`` (then
        cached). Returns the prepared task and whether it was created now. A new machine has none of the
        old one's snapshots. Backends without snapshots run the setup on every reset."""
        if new_machine:
            self._snapshots.clear()
        snapshot, created = self._load(backend, seed)
        self.seed, self.prepared = seed, snapshot.prepared
        if backend.separate_accounts and backend.client is not None:
            # Watch the X server from the episode's first moment (the snapshot's guard was disarmed).
            backend.client.guard_desktop(arm=sorted(self._display_accounts()))
        return snapshot.prepared, created

    def _display_accounts(self) -> set[str]:
        """The accounts the task lets onto the desktop's X server: the desktop account, and the accounts of
        either kind of variant's deliverables and of the simulated user (both may have been let on)."""
        every = (*self.task.deliverables, *(self.task.abstention.deliverables if self.task.abstention else ()))
        owners = {d.owner for d in every if d.owner} | ({SIM_USER} if self.task.simulated_user else set())
        return {DESKTOP_USER, *(owners - {"root"})}

    def _episode_accounts(self, backend: Backend) -> set[str]:
        """The accounts whose processes are the episode's: frozen while it is scored. Accounts of the task's own
        services (a portal's, an app's own account) keep running: the checker may talk to them."""
        return {DESKTOP_USER, backend.workspace_user, *({SIM_USER} if self.task.simulated_user else set())}

    def evaluate(self, backend: Backend | None, trajectory: Trajectory | None) -> Evaluation:
        """Score the machine's current state against the task (the env calls this when an episode ends)."""
        if trajectory is None or self.prepared is None or backend is None or backend.client is None:
            raise EpisodeError("nothing to evaluate: call reset() first")
        rules: tuple[Any, ...] = (ForbiddenPatterns(waive=self.task.waived_patterns), *self.task.rules)
        clauses, deliverables = episode_clauses(self.task, self.prepared.truth)
        probe = Probe(backend.client, episode=trajectory.end())
        # A machine without a workspace account (ssh backend) runs both channels as one account: no provenance,
        # no guard, nothing to freeze apart.
        if not backend.separate_accounts:
            return evaluate(clauses, rules, probe, trajectory, self.prepared.truth,
                            pass_threshold=self.task.pass_threshold)
        # Where the guest keeps the channels apart (always, on weavegym's image), hold the episode to it: what the
        # guard saw all episode (read before the freeze), the access list as it is now, the kernel's accounting,
        # and who wrote each deliverable, when, under how many names.
        report = backend.client.guard_desktop()
        freezer = EpisodeFreeze(backend.client, self._episode_accounts(backend))
        rules = (DesktopGuarded(report), EpisodeFrozen(freezer), DesktopAccessUnchanged(self._display_accounts()),
                 NoDesktopTerminalWork(), *rules)
        since = trajectory.started_wall - CLOCK_SLACK_S if trajectory.started_wall else None
        clauses = (*clauses, *provenance_clauses(deliverables, since))
        try:
            return evaluate(clauses, rules, probe, trajectory, self.prepared.truth,
                            pass_threshold=self.task.pass_threshold, after_live=freezer.freeze)
        finally:
            freezer.thaw()  # the next reset discards the episode anyway; a live viewer sees the desktop go on

    def transcript(self, backend: Backend | None) -> list[dict[str, Any]] | None:
        """The simulated user's chat as the checker reads it (None: the task has no simulated user)."""
        if not self.task.simulated_user or backend is None or backend.client is None:
            return None
        return transcript_for_info(read_transcript(Probe(backend.client)))

    def _load(self, backend: Backend, seed: int) -> tuple[TaskSnapshot, bool]:
        cached = self._snapshots.get(seed)
        if cached is not None:
            backend.reset(cached.name)
            return cached, False
        name = snapshot_name(self.task.id, seed, TASK_CODE_HASH)
        if not backend.supports_snapshots:
            # e.g. the ssh backend: its reset(READY) stops the last setup's programs; nothing to cache.
            backend.reset(READY)
            return TaskSnapshot(name, seed, self._setup(backend, seed)), True
        payload = backend.find_snapshot(name)  # another env on this host may have set this variant up
        created = payload is None
        made: list[Prepared] = []

        def setup() -> bytes:
            made.append(self._setup(backend, seed))
            # Only a snapshot other envs may load needs the prepared task with it; it stays on the host.
            return pickle.dumps(made[0]) if backend.shares_snapshots else b""

        if payload is None:
            payload = backend.make_snapshot(name, READY, setup)
        # Unpickled only from the host's own state folder (0700, files 0400), which only we write.
        entry = TaskSnapshot(name, seed, made[0] if made else pickle.loads(payload))
        for old in self._snapshots.add(entry):
            backend.delete_snapshot(old.name)
        backend.reset(entry.name)  # every episode starts from a snapshot load, the first one included
        return entry, created

    def _setup(self, backend: Backend, seed: int) -> Prepared:
        assert backend.client is not None
        setup_start = time.monotonic()
        if backend.separate_accounts:  # setup may let an app's account onto X; a machine without snapshots kept
            backend.client.guard_desktop(disarm=True)  # the last episode's guard armed
        feasible = self.task.feasible(seed)
        prepared = self.task.setup(SetupContext(backend.client, self.task.id, seed, self.config.screen_size,
                                                feasible=feasible, separate_accounts=backend.separate_accounts))
        if not isinstance(prepared, Prepared):
            raise TaskError(f"{self.task.id}: setup must return a Prepared, not {type(prepared).__name__}")
        if self.task.abstention is not None:
            check_abstention_truth(self.task, prepared.truth, feasible)
        # Let the setup's windows finish drawing: a snapshot of a half-drawn screen replays the redraw
        # after every reset, so the first observation would differ from the next one.
        settle(backend.grab_frame, 60.0, stable_for=self.config.setup_stable_s)
        backend.timings["last_setup_s"] = time.monotonic() - setup_start
        return prepared
