"""The CLI's contract with scripts: a version, early refusal of bad input, and an exit code that says
whether every episode finished. None of these boot a VM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from weavegym.core.version import __version__

CLI = [sys.executable, "-m", "weavegym.cli"]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_version() -> None:
    result = _cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"weavegym {__version__}"


def test_an_unknown_agent_is_refused_before_anything_starts(tmp_path: Path) -> None:
    result = _cli("run", "--agent", "foo", "--tasks", "Weave-DevOps-1", "--out", str(tmp_path / "run"))
    assert result.returncode == 2 and "unknown agent 'foo'" in result.stderr and "oracle" in result.stderr
    assert not (tmp_path / "run").exists()
    # debug too refuses before it boots anything (a boot would take far longer than this test's budget).
    debug = _cli("debug", "Weave-DevOps-1", "--agent", "foo")
    assert debug.returncode == 2 and "unknown agent 'foo'" in debug.stderr, debug.stderr
    assert "booting" not in debug.stdout
    missing = _cli("debug", "Weave-DevOps-99")
    assert missing.returncode == 1 and "unknown task 'Weave-DevOps-99'" in missing.stderr, missing.stderr


def test_a_run_whose_episodes_errored_exits_non_zero(tmp_path: Path) -> None:
    # No image in this cache folder: every attempt fails at env start, before any VM.
    result = _cli("run", "--agent", "noop", "--tasks", "Weave-DevOps-1", "--out", str(tmp_path / "run"),
                  "--prepared-states", env={"WEAVEGYM_CACHE_DIR": str(tmp_path / "empty-cache")})
    assert result.returncode == 1, result.stderr
    # --prepared-states reaches every worker's env (run.json records the options the envs were made with).
    assert json.loads((tmp_path / "run" / "run.json").read_text())["env_options"] == {"prepared_states": True}
    assert "1 of 1 episode(s) did not finish (1 errored)" in " ".join(result.stderr.split())
    episode = json.loads((tmp_path / "run" / "Weave-DevOps-1" / "ep0" / "episode.json").read_text())
    assert episode["status"] == "error" and "no 'base' image" in episode["error"]
    # The retry keeps the first attempt's folder and its error beside the final one.
    first = (tmp_path / "run" / "Weave-DevOps-1" / "ep0.attempt1" / "error.txt").read_text()
    assert first.startswith("attempt 1: HostSetupError")
    assert (tmp_path / "run" / "Weave-DevOps-1" / "ep0" / "error.txt").read_text().startswith("attempt 2: ")


def test_a_weavegym_error_is_one_line_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    no_image = {"WEAVEGYM_CACHE_DIR": str(tmp_path / "empty-cache")}
    result = _cli("debug", "Weave-DevOps-1", "--agent", "noop", env=no_image)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("weavegym: HostSetupError: no 'base' image") and "weavegym image build" in lines[0]
    assert "--debug" in lines[1] and len(lines) == 2 and "Traceback" not in result.stderr
    verbose = _cli("--debug", "debug", "Weave-DevOps-1", "--agent", "noop", env=no_image)
    assert verbose.returncode == 1 and "HostSetupError" in verbose.stderr and len(verbose.stderr.splitlines()) > 10


def test_validate_estimates_the_time_left_from_the_mean_job() -> None:
    from weavegym.cli import _time_left

    assert _time_left([], 10, 2) == ""  # nothing finished yet: no guess
    assert _time_left([240.0, 180.0, 1200.0], 0, 2) == ""
    # The mean job (6 min: one slow task counts in full), 100 jobs left on 2 workers: 300 min.
    assert _time_left([240.0, 180.0, 1200.0, 180.0, 0.0], 100, 2) == ", about 5 h 00 min left"
    assert _time_left([120.0], 3, 2) == ", about 3 min left"
    assert _time_left([10.0], 1, 2) == ", under a minute left"
