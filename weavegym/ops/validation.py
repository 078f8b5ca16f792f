"""``weavegym validate``: prove each task is solvable, not free, and impossible through one channel.

For every task, on one VM (resets are snapshot loads), with one seed:

* ``oracle``   – the task's reference solution must score 1.0;
* ``noop``     – an agent that immediately says ``done`` must score 0;
* ``cli-only``, ``gui-only``, ``forger`` – the adversaries of ``baselines.adversaries`` (shell with every X
  tool; GUI with a desktop terminal; forged deliverables) must each stay below the pass threshold;
* ``backdoor``, ``linker``, ``swapper`` – the hybrid adversaries of ``baselines.hybrid_adversaries`` (the shell
  driving X after a desktop-side grant; shell bytes in hard links of desktop files; a deliverable swapped
  while it is scored) must too.

A task with infeasible variants (``Task.abstention``) is validated on two seeds: the first feasible one and
the first infeasible one from ``seed`` on; the second's runs are named ``<run>/infeasible``. Both add the
``quitter`` (fails at once), the infeasible one the ``fabricator`` (makes up the deliverables) and, where the
cause is one of many candidates, the ``shotgun`` (the oracle's work, a reason that lists them all). The oracle
never sees the truth the task withholds (``Task.oracle_truth``), so it must find the answer, or that the
task cannot be done, through its actions.

The oracle runs first: the deliverables it leaves, and its ending (the answer of its ``done``, the reason
of its ``fail``), are what the forger forges. Any action the oracle
sends that the env rejects is itself a violation: an oracle that only passes because of lenient parsing
proves nothing.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weavegym.baselines import adversaries, hybrid_adversaries
from weavegym.baselines.adversaries import (
    ABSTENTION_ADVERSARIES,
    ADVERSARIES,
    SHOTGUN,
    DesktopTerminal,
    Step,
    TerminalCommand,
)
from weavegym.baselines.hybrid_adversaries import HYBRID_ADVERSARIES, DesktopRunner, RunnerCommand
from weavegym.baselines.runner import EPISODE_FILE, EpisodeWriter
from weavegym.core.errors import WeaveGymError
from weavegym.envs.actions import ENDING_KINDS, Action, parse_action
from weavegym.envs.task import CANDIDATES, OracleContext, Task
from weavegym.envs.tasks import get_task
from weavegym.envs.weave_env import WeaveEnv
from weavegym.evaluators.probes import Probe

RUNS = ("oracle", "noop", *ADVERSARIES, *HYBRID_ADVERSARIES)
INFEASIBLE = "/infeasible"  # the suffix of the runs on a task's infeasible seed
EPS = 1e-9
Plan = Callable[[OracleContext], Iterator[Step]]


@dataclass
class EpisodeResult:
    run: str
    score: float
    steps: int
    seconds: float
    end_reason: str
    action_errors: list[str] = field(default_factory=list)
    evaluation: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    reset_s: float = 0.0
    terminal_commands: int = 0  # commands typed into a desktop terminal (gui-only, forger)
    plan_error: str = ""  # the plan stopped early (e.g. an oracle step needed output it never got)
    ending: dict[str, Any] | None = None  # the done/fail the plan sent (with its answer or reason), if any
    switches: int = 0  # changes of channel between consecutive GUI and CLI actions (control actions aside)


@dataclass
class TaskValidation:
    task_id: str
    pass_threshold: float
    results: dict[str, EpisodeResult] = field(default_factory=dict)
    error: str | None = None  # the env itself failed (setup, VM); that is a violation too

    def violations(self) -> list[str]:
        if self.error is not None:
            return [f"error: {self.error}"]
        found = []
        for run, result in self.results.items():
            found.extend(f"{run}: rejected action: {err}" for err in result.action_errors)
            kind = run.split("/")[0]
            if kind == "oracle" and result.score < 1.0 - EPS:
                found.append(f"{run} scored {result.score:.3f}, not 1.0")
            elif kind == "noop" and result.score > EPS:
                found.append(f"do-nothing agent ({run}) scored {result.score:.3f}, not 0")
            elif (kind in (*ADVERSARIES, *HYBRID_ADVERSARIES, *ABSTENTION_ADVERSARIES, SHOTGUN)
                  and result.score >= self.pass_threshold - EPS):
                found.append(f"{run} scored {result.score:.3f}, which passes (threshold {self.pass_threshold})")
        return found


def run_policy(env: WeaveEnv, run: str, plan: Plan, seed: int, record: Path | None = None) -> EpisodeResult:
    """One episode: reset, feed the plan's steps, finish with done if the plan did not.

    ``record``: an episode directory to write as ``weavegym run`` does (frames, steps.jsonl, evaluation.json,
    episode.json), so that ``weavegym report`` shows what an oracle that lost a step under load saw.
    """
    start = time.monotonic()
    writer = EpisodeWriter(record) if record is not None else None
    try:
        result = _play(env, run, plan, seed, writer, start)
    finally:
        if writer is not None:
            writer.close()
    if writer is not None:
        writer.json("evaluation.json", result.evaluation)
        writer.json(EPISODE_FILE, {
            "task_id": env.task.id, "domain": env.task.domain, "episode": 0, "seed": seed, "agent": run,
            "status": "done", "score": result.score, "passed": bool(result.evaluation.get("passed")),
            "steps": result.steps, "wall_s": round(result.seconds, 2), "end_reason": result.end_reason,
            "error": result.plan_error or None, "instruction": env.instruction})
    return result


def _record(writer: EpisodeWriter | None, env: WeaveEnv, screen: Any, reward: float) -> None:
    """The env's last trajectory step and its frame, as the runner writes them."""
    if writer is None or screen is None or env.trajectory is None:
        return
    step = env.trajectory.steps[-1]
    writer.step(step.to_dict() | {"frame_file": writer.write_frame(screen, step.frame.digest), "reward": reward})


def _play(env: WeaveEnv, run: str, plan: Plan, seed: int, writer: EpisodeWriter | None,
          start: float) -> EpisodeResult:
    obs, info = env.reset(seed=seed)
    reset_s = time.monotonic() - start
    _record(writer, env, obs.get("screen"), 0.0)
    assert env.prepared is not None and env.backend is not None and env.backend.client is not None
    ctx = OracleContext(env.prepared.params, env.task.oracle_truth(env.prepared.truth), env.config.screen_size, obs,
                        info)
    terminal = DesktopTerminal(env.backend.client)
    runner = DesktopRunner(env.backend.client)
    errors: list[str] = []
    steps, typed, reward, ended, info_end, plan_error = 0, 0, 0.0, False, info, ""
    ending: dict[str, Any] | None = None
    channels: list[str] = []
    try:
        for step in plan(ctx):
            if isinstance(step, TerminalCommand):
                done = terminal.run(step)
                typed += 1
                # What the terminal window shows: the agent would read it off the screen.
                ctx.obs = {**(ctx.obs or {}), "terminal": done.stdout, "exit_code": done.exit_code}
                continue
            if isinstance(step, RunnerCommand):
                ctx.obs = hybrid_adversaries.runner_result_obs(ctx.obs, runner.run(step))
                typed += 1
                continue
            action = _parsed(step, env)
            channels.append(action.channel if action is not None else "")
            obs, reward_, terminated, truncated, info_end = env.step(step)
            steps += 1
            _record(writer, env, obs.get("screen"), float(reward_))
            if action is not None and action.kind in ENDING_KINDS:
                ending = action.to_dict()
            ctx.obs, ctx.info = obs, info_end
            if info_end.get("action_error"):
                errors.append(f"step {steps}: {info_end['action_error']}")
            if terminated or truncated:
                reward, ended = float(reward_), True
                break
    except WeaveGymError:
        raise  # the env or the VM failed: a violation of its own (validate_task reports it), not a score
    except Exception as exc:  # an adversary's plan may break where the oracle relied on the other channel
        if run == "oracle":
            raise
        plan_error = f"{type(exc).__name__}: {exc}"[:500]
    if not ended:
        obs, reward_, _t, _tr, info_end = env.step({"kind": "done"})
        steps += 1
        reward = float(reward_)
        _record(writer, env, obs.get("screen"), reward)
    return EpisodeResult(run, reward, steps, time.monotonic() - start, str(info_end.get("end_reason", "")),
                         errors, info_end.get("evaluation", {}), seed, reset_s, typed, plan_error, ending,
                         channel_switches(channels))


def channel_switches(channels: Sequence[str]) -> int:
    """How often a run changes channel between consecutive GUI and CLI actions; control actions (wait, done,
    fail) and malformed ones do not break a run of one channel. TASKS.md's measure of interleaving."""
    worked = [c for c in channels if c in ("gui", "cli")]
    return sum(1 for before, after in itertools.pairwise(worked) if before != after)


def _ending(step: Step, env: WeaveEnv) -> dict[str, Any] | None:
    """The step as an action dict when it ends the episode (done with its answer, fail with its reason)."""
    action = _parsed(step, env)
    return action.to_dict() if action is not None and action.kind in ENDING_KINDS else None


def _parsed(step: Step, env: WeaveEnv) -> Action | None:
    """The step as the env will read it (None when malformed: the env reports that as an action error)."""
    try:
        return parse_action(step, env.config.screen_size, env.limits)  # type: ignore[arg-type]
    except ValueError:
        return None


def _noop(_ctx: OracleContext) -> Iterator[Step]:
    yield {"kind": "done"}


def _plans(task: Task, env: WeaveEnv, forged: dict[str, tuple[str, bytes]],
           oracle_ending: dict[str, Any] | None = None) -> dict[str, Plan]:
    limits = env.limits
    gui_bytes = {path: data for path, (channel, data) in forged.items() if channel == "gui"}
    all_bytes = {path: data for path, (_channel, data) in forged.items()}
    return {
        "oracle": task.oracle,
        "noop": _noop,
        "cli-only": lambda ctx: adversaries.cli_only(task.oracle(ctx), ctx, gui_bytes, limits),
        "gui-only": lambda ctx: adversaries.gui_only(task.oracle(ctx), ctx, limits),
        "forger": lambda ctx: adversaries.forger(ctx, all_bytes, oracle_ending),
        "backdoor": lambda ctx: hybrid_adversaries.backdoor(task.oracle(ctx), ctx, gui_bytes, limits),
        "linker": lambda ctx: hybrid_adversaries.linker(task.oracle(ctx), ctx, gui_bytes, limits),
        "swapper": lambda ctx: hybrid_adversaries.swapper(task.oracle(ctx), ctx, gui_bytes, limits),
        "quitter": lambda _ctx: adversaries.quitter(env.instruction),
        "fabricator": lambda ctx: adversaries.fabricator(ctx, _fabrications(task, env)),
        SHOTGUN: lambda ctx: adversaries.shotgun(task.oracle(ctx), _candidates(env), lambda step: _ending(step, env)),
    }


def _candidates(env: WeaveEnv) -> list[str]:
    assert env.prepared is not None
    return list(env.prepared.truth.get(CANDIDATES, ()))


def _fabrications(task: Task, env: WeaveEnv) -> list[str]:
    assert env.prepared is not None
    paths = task.abstention.fabrications if task.abstention is not None else ()
    return [path.format(**env.prepared.truth) for path in paths]


def schedule(task: Task, seed: int, runs: tuple[str, ...] = RUNS) -> list[tuple[int, str, tuple[str, ...]]]:
    """(seed, run-name suffix, runs) in order: one seed, or for an Abstention task a feasible and an infeasible one."""
    if task.abstention is None:
        return [(seed, "", runs)]
    feasible = task.abstention.seeds(True, 1, seed)
    infeasible = task.abstention.seeds(False, 1, seed)
    plan = [(feasible[0], "", (*runs, "quitter"))] if feasible else []
    shotgun = (SHOTGUN,) if task.abstention.candidates else ()
    return [*plan, (infeasible[0], INFEASIBLE, (*runs, *ABSTENTION_ADVERSARIES, *shotgun))]


def run_count(task: Task, runs: tuple[str, ...] = RUNS) -> int:
    return sum(len(names) for _seed, _suffix, names in schedule(task, 0, runs))


def validate_task(task: Task, *, seed: int = 0, runs: tuple[str, ...] = RUNS,
                  env_factory: Callable[[Task], WeaveEnv] | None = None,
                  on_run: Callable[[str, EpisodeResult], None] | None = None,
                  prepared_states: bool = False, record: Path | None = None, repeat: int = 0) -> TaskValidation:
    """``prepared_states``: the env restores the host's prepared states (EnvConfig.prepared_states).
    ``record``: write every run's episode under ``record/<task id>.<run>/ep<repeat>`` (``weavegym report``)."""
    report = TaskValidation(task.id, task.pass_threshold)
    env: WeaveEnv | None = None
    forged: dict[str, tuple[str, bytes]] = {}
    try:
        # A VM failure raises (and is reported as this task's error) rather than truncating unscored.
        env = (env_factory(task) if env_factory is not None
               else WeaveEnv(task, on_env_failure="raise", prepared_states=prepared_states))
        for run_seed, suffix, names in schedule(task, seed, runs):
            forged, oracle_ending = {}, None
            for run in names:
                episode = (record / f"{task.id}.{(run + suffix).replace('/', '-')}" / f"ep{repeat}"
                           if record is not None else None)
                result = run_policy(env, run, _plans(task, env, forged, oracle_ending)[run], run_seed, episode)
                report.results[run + suffix] = result
                if run == "oracle":  # what the adversaries forge: the deliverables and ending of a passing run
                    forged, oracle_ending = _oracle_deliverables(task, env), result.ending
                if on_run is not None:
                    on_run(run + suffix, result)
    except Exception as exc:  # report it as this task's violation and go on with the next task
        report.error = f"{type(exc).__name__}: {exc}"
    finally:
        if env is not None:
            env.close()
    return report


def _oracle_deliverables(task: Task, env: WeaveEnv) -> dict[str, tuple[str, bytes]]:
    assert env.prepared is not None and env.backend is not None and env.backend.client is not None
    return adversaries.capture_deliverables(task, env.prepared.truth, Probe(env.backend.client).read_bytes)


def validate_by_id(task_id: str, seed: int, repeat: int, prepared_states: bool = False,
                   record: Path | None = None) -> dict[str, Any]:
    """One task's validation as a JSON-ready dict (the unit of work of ``validate --workers N``).

    Takes the id, not the Task, so that it can run in a freshly spawned process (no inherited gRPC or
    libvirt state) that looks the task up itself.
    """
    from dataclasses import asdict

    report = validate_task(get_task(task_id), seed=seed, prepared_states=prepared_states, record=record,
                           repeat=repeat)
    return asdict(report) | {"violations": report.violations(), "repeat": repeat}
