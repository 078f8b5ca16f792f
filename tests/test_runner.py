"""`weavegym run` end to end on real VMs: parallel workers, the files it writes, kill and --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from weavegym.core.deadline import wait_for

pytestmark = [pytest.mark.vm, pytest.mark.timeout(1500)]
CLI = [sys.executable, "-m", "weavegym.cli"]


def _episode_files(ep: Path) -> tuple[list[dict], dict, dict]:
    steps = [json.loads(line) for line in (ep / "steps.jsonl").read_text().splitlines()]
    return steps, json.loads((ep / "evaluation.json").read_text()), json.loads((ep / "episode.json").read_text())


def test_run_oracle_two_workers_writes_every_file(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = subprocess.run([*CLI, "run", "--agent", "oracle", "--tasks", "Weave-Productivity-1,Weave-DevOps-1",
                             "--workers", "2", "--prepared-states",  # restores: the runner is the subject
                             "--out", str(out)], capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pass rate" in result.stdout and "100%" in result.stdout
    results = json.loads((out / "results.json").read_text())
    assert results["overall"]["episodes"] == 2 and results["overall"]["pass_rate"] == 1.0
    assert set(results["by_domain"]) == {"Productivity", "DevOps"}
    assert json.loads((out / "run.json").read_text())["workers"] == 2
    for task_id in ("Weave-Productivity-1", "Weave-DevOps-1"):
        ep = out / task_id / "ep0"
        steps, evaluation, episode = _episode_files(ep)
        assert episode["status"] == "done" and episode["score"] == 1.0 and evaluation["passed"]
        assert steps[0]["channel"] == "reset" and len(steps) == episode["steps"] + 1
        assert steps[-1]["action"]["kind"] == "done" and steps[-1]["reward"] == 1.0
        assert all((ep / s["frame_file"]).is_file() for s in steps)
        frames = list((ep / "frames").glob("*.png"))
        assert 1 <= len(frames) <= len(steps)  # de-duplicated: identical frames share one file
        assert len({s["frame_file"] for s in steps}) == len(frames)
        assert any(s["channel"] == "cli" and s["terminal"] for s in steps)
    report = subprocess.run([*CLI, "report", str(out), "--export", "gif"], capture_output=True, text=True,
                            timeout=300)
    assert report.returncode == 0, report.stdout + report.stderr
    html = (out / "report.html").read_text()
    assert "Weave-DevOps-1" in html and "Weave-Productivity-1" in html and "annotated/" in html
    assert (out / "Weave-DevOps-1" / "ep0" / "episode.gif").stat().st_size > 10_000


@pytest.mark.heavy  # three episodes, a killed CLI, gc and a second VM boot: `make test-heavy`
def test_kill_mid_run_then_resume_finishes_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [*CLI, "run", "--agent", "noop", "--tasks", "Weave-DevOps-1", "--episodes", "3", "--out", str(out)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    first = out / "Weave-DevOps-1" / "ep0" / "episode.json"
    try:
        wait_for(lambda: first.is_file(), 600, what="the first episode to finish")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its worker, mid-run; their VM is orphaned
        proc.wait(timeout=30)
    gc = subprocess.run([*CLI, "gc"], capture_output=True, text=True, timeout=120)  # reclaims the orphan VM
    assert gc.returncode == 0, gc.stdout + gc.stderr
    first_mtime = first.stat().st_mtime_ns
    marker = first.parent / "untouched-by-resume"
    marker.write_text("x")
    result = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr
    assert first.stat().st_mtime_ns == first_mtime and marker.exists()  # episode 0 was not run again
    results = json.loads((out / "results.json").read_text())
    assert [e["status"] for e in results["episodes"]] == ["done", "done", "done"]
    assert [e["score"] for e in results["episodes"]] == [0.0, 0.0, 0.0]
    assert [e["seed"] for e in results["episodes"]] == [0, 1, 2]


def test_debug_prints_vnc_details_a_real_client_can_use(tmp_path: Path) -> None:
    from vncdotool import api as vnc_api

    # On the host's prepared states (`make test-vm` makes them): the VNC details are the subject, not the boot.
    proc = subprocess.Popen([*CLI, "debug", "Weave-DevOps-1", "--agent", "oracle", "--prepared-states"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1)
    try:
        lines: list[str] = []

        def line_with(prefix: str) -> str:
            while True:
                line = proc.stdout.readline()
                assert line, "debug exited early:\n" + "".join(lines)
                lines.append(line)
                if line.startswith(prefix):
                    return line

        vnc_line = line_with("VNC: ")  # "VNC: vnc://127.0.0.1:5910 password: abcd1234"
        address, password = vnc_line.split()[1], vnc_line.split()[3]
        host, port = address.removeprefix("vnc://").rsplit(":", 1)
        client = vnc_api.connect(f"{host}::{port}", password=password, timeout=60)
        try:
            client.captureScreen(str(tmp_path / "vnc.png"))
        finally:
            client.disconnect()
        from PIL import Image

        image = Image.open(tmp_path / "vnc.png")
        assert image.size == (1280, 720) and len(image.getcolors(1 << 20) or []) > 10
        line_with("next action: ")
        proc.stdin.write("\n")  # run the oracle's first action
        line_with("step 1:")
        line_with("next action: ")
        proc.stdin.write("h\n")  # hand over to a human, who does nothing more
        line_with("Your turn over VNC")
        proc.stdin.write("\n")  # score the final state
        score_line = line_with("score: ")
        assert score_line.startswith("score: 0.00")  # the service was never fixed
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
