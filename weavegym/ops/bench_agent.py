"""`weavegym bench agent`: round-trip latencies of the guest agent on a private Xvfb display.

It measures what an RL loop pays per step, through the real gRPC path: a raw
screenshot, an input event, `exec true`, and a GUI action followed by a fresh
screenshot. Ratios within one run are meaningful; absolute numbers depend on
how busy the shared machine is, which is why this is a benchmark and never a
timed test.
"""

from __future__ import annotations

import platform
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from weavegym.testing.local_agent import LocalAgent, LocalAgentConfig
from weavegym.testing.xvfb import XvfbConfig, XvfbDisplay


@dataclass(frozen=True)
class AgentBenchConfig:
    iterations: int = 200
    warmup: int = 10
    width: int = 1280
    height: int = 720
    seed: int = 0


def _percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    q = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"p50_ms": round(statistics.median(ordered), 3), "p95_ms": round(q[94], 3),
            "min_ms": round(ordered[0], 3), "n": len(ordered)}


def _time(fn: Callable[[], object], iterations: int, warmup: int,
          progress: Callable[[], None] | None = None) -> list[float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
        if progress:
            progress()
    return samples


def run_agent_bench(config: AgentBenchConfig, progress: Callable[[str, int], Callable[[], None]] | None = None
                    ) -> dict[str, object]:
    """Start Xvfb and an agent, measure, tear both down, and return a JSON-ready dict."""
    rng = random.Random(config.seed)
    w, h = config.width, config.height

    def tick(name: str) -> Callable[[], None] | None:
        return progress(name, config.iterations) if progress else None

    with XvfbDisplay(XvfbConfig(width=w, height=h)) as xvfb, \
            LocalAgent(LocalAgentConfig(display=xvfb.display)) as agent, agent.client() as client:
        client.wait_ready(30)
        info = client.info()

        def gui_then_frame() -> None:
            client.move(rng.randrange(w), rng.randrange(h))
            client.screenshot()

        cases: dict[str, Callable[[], object]] = {
            "screenshot_raw": lambda: client.screenshot(encoding="raw"),
            "screenshot_zlib": lambda: client.screenshot(encoding="zlib"),
            "screenshot_png": lambda: client.screenshot(encoding="png"),
            "input_move": lambda: client.move(rng.randrange(w), rng.randrange(h)),
            "input_click": lambda: client.click(rng.randrange(w), rng.randrange(h)),
            "exec_true_argv": lambda: client.exec(["true"]),
            "exec_true_shell": lambda: client.exec("true"),
            "gui_action_plus_screenshot": gui_then_frame,
        }
        results = {name: _percentiles(_time(fn, config.iterations, config.warmup, tick(name)))
                   for name, fn in cases.items()}
        raw_p50 = results["screenshot_raw"]["p50_ms"]
        return {
            "bench": "agent",
            "transport": "grpc over loopback TCP (host Xvfb, not a VM)",
            "screen": f"{w}x{h}",
            "capture_method": info.capture_method,
            "iterations": config.iterations,
            "raw_frames_per_s_at_p50": round(1000.0 / raw_p50, 1) if raw_p50 else None,
            "results": results,
            "host": {"python": platform.python_version(), "machine": platform.machine(),
                     "cpus": __import__("os").cpu_count()},
        }
