"""The env's configuration as one dataclass; ``gym.make`` keyword arguments map onto it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SUPPORTED_SCREENS = ((1280, 720), (1920, 1080))


@dataclass(frozen=True)
class EnvConfig:
    backend: str = "libvirt"
    screen_size: tuple[int, int] = (1280, 720)  # (width, height); 1280x720 and 1920x1080 are tested
    profile: str | None = None  # image profile; None: the task's own
    max_steps: int | None = None  # None: the task's
    time_budget_s: float | None = None  # time budget per episode; None: the task's
    # What the budget counts: "env" (the default), the time spent inside reset() and step() (the guest's
    # work, commands and waits included), so a slow policy (an LLM's latency) does not truncate episodes;
    # "wall", all time since reset, the policy's thinking included.
    budget_clock: str = "env"
    # A VM or agent that fails during step() (killed, crashed, unreachable), or a checker that cannot read
    # the VM: "truncate" (the default, for RL loops and vector envs) ends the episode as truncated with
    # reward 0 and info["env_failure"] saying what happened, and the next reset() recovers the VM;
    # "raise" raises the WeaveGymError instead (weavegym run and validate use it, to retry the episode).
    on_env_failure: str = "truncate"
    task_variants: int = 1  # reset() without a seed draws the task seed from range(task_variants)
    # Which of those variants reset() may draw: "all", or a fixed split for held-out evaluation: "test" is
    # every fifth variant (v % 5 == 4), "train" the others.
    variant_split: str = "all"
    # reset(seed=s) seeds the env's generator and draws the variant from that pool too (so a fresh seed per
    # episode costs a snapshot load once each variant is cached), instead of playing variant s.
    seed_draws_variant: bool = False
    terminal_max_chars: int = 16384  # obs["terminal"] keeps the head and tail of longer output
    shell_timeout_s: float = 30.0  # default deadline of one shell/python action
    # shell/python actions in one long-lived guest bash (a pipe write per command; python in a fork of a warm
    # interpreter) instead of a new bash that restores and saves the state per command (False). Same semantics
    # but for `exit` (README, "Shell semantics"); about 18x faster for a shell action under TCG.
    persistent_shell: bool = True
    settle_timeout_s: float = 1.0  # how long an observation waits for the screen to stop changing
    settle_stable_s: float = 0.1  # ... i.e. to stay unchanged this long (0: take the first frame; fastest)
    setup_stable_s: float = 2.0  # how long the screen must stay unchanged before a task snapshot is saved
    max_task_snapshots: int = 4  # task snapshots kept per VM (least recently used are deleted)
    # libvirt: start every VM from the host's prepared states and keep task variants there, for every env on
    # the host (machine/backends/prepared_states.py): a new env's first reset and a reset to any variant that
    # any env (or `weavegym prepare`) set up cost a restore of about a second, not a boot or a setup.
    prepared_states: bool = False
    # The spaces (envs/space_layout.py checks the names). Actions: which kinds exist (None: all; the others
    # are refused in every form), the combos a sampled `key` draws from (None: a built-in list), and
    # coordinates in samples as pixel "discrete" or normalised "box" (0..1). Observations: which keys (None:
    # all four), the screen's (width, height) (None: the VM's) and whether it is grayscale (one channel).
    action_kinds: tuple[str, ...] | None = None
    key_vocabulary: tuple[str, ...] | None = None
    coordinates: str = "discrete"
    observation_keys: tuple[str, ...] | None = None
    observation_size: tuple[int, int] | None = None
    grayscale: bool = False
    backend_options: dict[str, Any] = field(default_factory=dict)  # e.g. {"memory_mib": 3072, "accel": "tcg"}

    def __post_init__(self) -> None:
        width, height = self.screen_size
        if not (640 <= width <= 3840 and 480 <= height <= 2160):
            raise ValueError(f"screen_size {self.screen_size} is outside 640x480..3840x2160")
        if self.task_variants < 1 or self.terminal_max_chars < 256 or self.max_task_snapshots < 1:
            raise ValueError("task_variants and max_task_snapshots must be >= 1, terminal_max_chars >= 256")
        if self.variant_split not in ("all", "train", "test"):
            raise ValueError(f"variant_split must be 'all', 'train' or 'test', not {self.variant_split!r}")
        if not variant_pool(self.task_variants, self.variant_split):
            raise ValueError(f"the {self.variant_split!r} split of {self.task_variants} task variant(s) is empty; "
                             "the test split needs task_variants >= 5")
        if self.on_env_failure not in ("truncate", "raise"):
            raise ValueError(f"on_env_failure must be 'truncate' or 'raise', not {self.on_env_failure!r}")
        if self.budget_clock not in ("env", "wall"):
            raise ValueError(f"budget_clock must be 'env' or 'wall', not {self.budget_clock!r}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError("max_steps must be >= 1")


def variant_pool(task_variants: int, split: str = "all") -> list[int]:
    """The task seeds a reset may draw: ``range(task_variants)``, or its train or test part (every fifth)."""
    everything = range(task_variants)
    if split == "test":
        return [v for v in everything if v % 5 == 4]
    if split == "train":
        return [v for v in everything if v % 5 != 4]
    return list(everything)
