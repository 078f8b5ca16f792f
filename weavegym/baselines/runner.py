"""``weavegym run``: agents over tasks, headless, in parallel worker processes, resumable.

Each worker process owns at most one env (one VM) at a time and reuses it for
consecutive episodes of the same task, so a seed's task snapshot is made once.
Every episode writes its own directory as it goes (``steps.jsonl`` line by
line, de-duplicated PNG frames), and ``episode.json`` only at the end: that
file is the "finished" mark ``--resume`` trusts. A failing episode is retried
once on a fresh env; if it fails again its error is recorded and the run goes
on, so one crash never costs the other episodes.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import gymnasium as gym
from PIL import Image

from weavegym.baselines.factory import make_policy
from weavegym.baselines.policy import EpisodeStart
from weavegym.core.version import __version__
from weavegym.envs.registration import register_draft, register_tasks
from weavegym.envs.task import OracleContext

EPISODE_FILE = "episode.json"
CHAT_FILE = "chat.json"  # the simulated user's transcript, for tasks that have one


@dataclass(frozen=True)
class RunConfig:
    agent: str
    tasks: tuple[str, ...]
    out: Path
    episodes: int = 1
    workers: int = 1
    resume: bool = False
    seed: int = 0  # episode k of every task uses task seed `seed + k`
    agent_options: dict[str, Any] = field(default_factory=dict)
    env_options: dict[str, Any] = field(default_factory=dict)
    attempts: int = 2  # per episode; each retry starts from a fresh env (a new VM)


@dataclass(frozen=True)
class WorkItem:
    task_id: str
    episode: int
    seed: int

    def directory(self, out: Path) -> Path:
        return out / self.task_id / f"ep{self.episode}"


def plan(config: RunConfig) -> tuple[list[WorkItem], list[WorkItem]]:
    """(to run, already finished). Items are grouped by task so workers can reuse their env."""
    todo, done = [], []
    for task_id in config.tasks:
        for k in range(config.episodes):
            item = WorkItem(task_id, k, config.seed + k)
            finished = config.resume and _finished(item.directory(config.out))
            (done if finished else todo).append(item)
    return todo, done


def _finished(directory: Path) -> bool:
    try:
        return json.loads((directory / EPISODE_FILE).read_text()).get("status") == "done"
    except (OSError, ValueError):
        return False


# -- one episode --------------------------------------------------------------------------------
class EpisodeWriter:
    """Writes one episode's directory incrementally, so a crash leaves everything up to the crash."""

    def __init__(self, directory: Path) -> None:
        if directory.exists():
            # An earlier attempt (or an interrupted run) left this folder: keep it beside the new one as
            # epN.attemptK, its error.txt and steps included, so the failure that caused the retry is kept.
            k = 1
            while directory.with_name(f"{directory.name}.attempt{k}").exists():
                k += 1
            directory.rename(directory.with_name(f"{directory.name}.attempt{k}"))
        (directory / "frames").mkdir(parents=True)
        self.directory = directory
        self._steps = (directory / "steps.jsonl").open("w", encoding="utf-8")

    def write_frame(self, frame: Any, digest: str) -> str:
        """Frames are stored once per distinct picture; returns the path steps.jsonl refers to."""
        name = f"frames/{digest[:16]}.png"
        path = self.directory / name
        if not path.exists():
            Image.fromarray(frame).save(path, optimize=False, compress_level=3)
        return name

    def step(self, record: dict[str, Any]) -> None:
        self._steps.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._steps.flush()

    def json(self, name: str, data: Any) -> None:
        tmp = self.directory / (name + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str))
        tmp.replace(self.directory / name)

    def close(self) -> None:
        self._steps.close()


def run_episode(env: Any, agent: Any, item: WorkItem, out: Path, agent_name: str,
                on_reset: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Reset, let the agent act until the episode ends, write everything; returns the episode summary."""
    writer = EpisodeWriter(item.directory(out))
    start = time.monotonic()
    try:
        obs, info = env.reset(seed=item.seed)
        unwrapped = env.unwrapped
        if on_reset is not None:
            on_reset(unwrapped)
        trajectory = unwrapped.trajectory
        screen = tuple(unwrapped.config.screen_size)
        reset_step = trajectory.steps[0]
        frame_file = writer.write_frame(obs["screen"], reset_step.frame.digest)
        writer.step(reset_step.to_dict() | {"frame_file": frame_file, "reward": 0.0})
        oracle_ctx = None
        if getattr(agent, "privileged", False):
            oracle_ctx = OracleContext(unwrapped.prepared.params, unwrapped.task.oracle_truth(unwrapped.prepared.truth),
                                       screen, obs, info)
        agent.start(EpisodeStart(task_id=item.task_id, domain=unwrapped.task.domain, instruction=obs["instruction"],
                                 screen=screen, seed=item.seed, action_space=unwrapped.action_space,
                                 oracle_context=oracle_ctx))
        reward, end_reason = 0.0, ""
        while True:
            action = agent.act(obs, info)
            obs, reward, terminated, truncated, info = env.step(action)
            record = trajectory.steps[-1]
            frame_file = writer.write_frame(obs["screen"], record.frame.digest)
            writer.step(record.to_dict() | {"frame_file": frame_file, "reward": float(reward)})
            if terminated or truncated:
                end_reason = str(info.get("end_reason", ""))
                break
        evaluation = info["evaluation"]
        writer.json("evaluation.json", evaluation)
        if "transcript" in info:  # the simulated user's chat, as the checker read it
            writer.json(CHAT_FILE, info["transcript"])
        transcript = agent.transcript()
        if transcript is not None:
            writer.json("messages.json", transcript)
        summary = _summary(item, unwrapped, agent_name, "done", evaluation["score"], evaluation["passed"],
                           len(trajectory.steps) - 1, time.monotonic() - start, end_reason, None)
        ending = trajectory.end()  # what the agent said as it ended: the answer of done, the reason of fail
        summary |= {"answer": ending.answer, "fail_reason": ending.reason}
        writer.json(EPISODE_FILE, summary)
        return summary
    finally:
        writer.close()


def _summary(item: WorkItem, unwrapped: Any, agent_name: str, status: str, score: float | None,
             passed: bool | None, steps: int, wall_s: float, end_reason: str, error: str | None) -> dict[str, Any]:
    task = unwrapped.task if unwrapped is not None else None
    return {"task_id": item.task_id, "domain": task.domain if task else item.task_id.split("-")[1],
            "episode": item.episode, "seed": item.seed, "agent": agent_name, "status": status, "score": score,
            "passed": passed, "steps": steps, "wall_s": round(wall_s, 2), "end_reason": end_reason,
            "error": error, "instruction": getattr(unwrapped, "instruction", "")}


# -- workers ------------------------------------------------------------------------------------
def _worker(config: RunConfig, items: mp.Queue, results: mp.Queue) -> None:
    register_tasks()

    env, env_task, announced = None, None, False
    agent = make_policy(config.agent, **config.agent_options)
    try:
        while (raw := items.get()) is not None:
            item = WorkItem(**raw)
            summary: dict[str, Any] | None = None
            for attempt in range(1, config.attempts + 1):
                try:
                    if env is None or env_task != item.task_id:
                        if env is not None:
                            env.close()
                        # A VM failure must raise here, not end the episode as an unscored truncation: the
                        # attempt is retried on a fresh VM and its log kept.
                        options = {"on_env_failure": "raise", **config.env_options}
                        register_draft(item.task_id)  # a draft named by its exact id (a no-op for the suite)
                        env, env_task = gym.make(item.task_id, **options), item.task_id
                        announced = False

                    def announce(unwrapped: Any, task_id: str = item.task_id) -> None:
                        nonlocal announced
                        if not announced:  # the VM exists once reset returns: say where to watch it live
                            results.put({"event": "vnc", "task_id": task_id, "vnc": str(unwrapped.backend.vnc)})
                            announced = True

                    summary = run_episode(env, agent, item, config.out, config.agent, on_reset=announce)
                    break
                except Exception as exc:  # one episode's failure must not end the run
                    error = f"attempt {attempt}: {type(exc).__name__}: {exc}"
                    directory = item.directory(config.out)
                    directory.mkdir(parents=True, exist_ok=True)
                    with (directory / "error.txt").open("a") as fh:
                        fh.write(f"{error}\n{traceback.format_exc()}\n")
                    if env is not None:
                        env.close()
                    env = None  # the next attempt (or item) gets a fresh VM
                    summary = _summary(item, None, config.agent, "error", None, None, 0, 0.0, "error", error)
            assert summary is not None
            if summary["status"] == "error":
                (item.directory(config.out) / EPISODE_FILE).write_text(json.dumps(summary, indent=2))
            results.put(summary)
    finally:
        if env is not None:
            env.close()
        agent.close()


def run(config: RunConfig, progress: Callable[[dict[str, Any], int, int], None] | None = None) -> dict[str, Any]:
    """Run every planned episode over ``config.workers`` processes; returns (and writes) results.json.

    ``progress`` receives each finished episode's summary, and also ``{"event": "vnc", ...}`` messages
    when a worker's VM is up (they do not count as finished episodes).
    """
    config.out.mkdir(parents=True, exist_ok=True)
    todo, _finished_before = plan(config)
    (config.out / "run.json").write_text(json.dumps(
        asdict(config) | {"out": str(config.out), "started": datetime.now(UTC).isoformat(),
                          "weavegym_version": _version()}, indent=2, default=str))
    ctx = mp.get_context("spawn")  # a fresh interpreter per worker: no inherited gRPC or libvirt state
    items, results = ctx.Queue(), ctx.Queue()
    workers = max(1, min(config.workers, len(todo)))
    for item in todo:
        items.put(asdict(item))
    for _ in range(workers):
        items.put(None)
    procs = [ctx.Process(target=_worker, args=(config, items, results), daemon=False) for _ in range(workers)]
    for proc in procs:
        proc.start()
    finished = 0
    try:
        while finished < len(todo):
            try:
                summary = results.get(timeout=5)
            except Exception:  # queue.Empty: check that the workers are still alive
                if not any(p.is_alive() for p in procs):
                    break
                continue
            if "event" not in summary:
                finished += 1
            if progress is not None:
                progress(summary, finished, len(todo))
    finally:
        for proc in procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.terminate()
    return write_results(config.out, [*config.tasks], config.episodes)


def write_results(out: Path, tasks: list[str], episodes: int) -> dict[str, Any]:
    """Collect every episode.json under ``out`` (finished now or in an earlier, resumed run)."""
    summaries = []
    for task_id in tasks:
        for k in range(episodes):
            path = out / task_id / f"ep{k}" / EPISODE_FILE
            if path.is_file():
                summaries.append(json.loads(path.read_text()))
            else:
                summaries.append({"task_id": task_id, "domain": task_id.split("-")[1], "episode": k,
                                  "status": "missing", "score": None, "passed": None, "steps": 0, "wall_s": 0.0})
    by_domain: dict[str, list[dict[str, Any]]] = {}
    for s in summaries:
        by_domain.setdefault(s["domain"], []).append(s)
    results = {"episodes": summaries, "by_domain": {d: _aggregate(v) for d, v in by_domain.items()},
               "overall": _aggregate(summaries)}
    (out / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False))
    return results


def _aggregate(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(summaries)
    done = [s for s in summaries if s["status"] == "done"]

    def mean(key: str) -> float:
        return round(sum(float(s[key]) for s in done) / len(done), 3) if done else 0.0

    return {"episodes": n, "finished": len(done), "errors": sum(s["status"] == "error" for s in summaries),
            "pass_rate": round(sum(bool(s["passed"]) for s in done) / n, 3) if n else 0.0,
            "mean_score": round(sum(float(s["score"] or 0) for s in summaries) / n, 3) if n else 0.0,
            "mean_steps": mean("steps"), "mean_wall_s": mean("wall_s")}


def _version() -> str:
    return __version__
